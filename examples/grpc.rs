//! gRPC with tonic behind `SharedHeadersLayer`: the caller's deadline (`grpc-timeout`) taken
//! as the request's own when it is earlier than the server's, a timeout answered in gRPC's
//! words (`Code::DeadlineExceeded`, not an HTTP 503 the client cannot read), and one access
//! log line per call, with the budget and who set it.
//!
//! ```text
//! cargo run --features full --example grpc
//! ```
//!
//! It serves a hand-written tonic service (a codec over raw bytes: no protoc, no prost) over
//! HTTP/2 on 127.0.0.1 (a free port), makes three calls to itself with tonic's client, prints
//! the log lines, and exits with status 1 if an outcome is not the expected one.
//!
//! With `tonic-build`, serve the generated `FooServer::new(..)` the same way (it is a
//! `tower::Service<http::Request<B>>`), or put the layer in `Server::builder().layer(..)`.
//! In a real server, use `.tracing_access_log()` and a `tracing` subscriber (for example
//! `tracing_subscriber::fmt::init()`): one structured line per call when its response ends
//! (`rpc.service`, `rpc.method`, `rpc.grpc.status_code` from the trailers or the layer's own
//! answer, `shared_headers.budget_us`, ...). This example prints its lines from an
//! `on_response_end` hook so that it needs no subscriber.
//!
//! Two timers that are not the layer's, and what they do to the line:
//!
//! * **tonic's server** (`tonic::transport::Server`) enforces the caller's `grpc-timeout` itself,
//!   outside the layer, and answers `grpc-status: 1` (CANCELLED) when it fires. Without
//!   `caller_budget`, that timer drops the layer's future: the line says `cancelled`, with no
//!   status (the answer is tonic's). With `caller_budget(BudgetHeader::grpc_timeout())`, both
//!   timers are set for the same instant, and which answers is a race: the layer's
//!   DEADLINE_EXCEEDED (`timed_out`, `grpc-status` 4) or tonic's CANCELLED (`cancelled`). To
//!   make the layer's answer the one sent, serve without tonic's transport timer (as here, with
//!   hyper) or give tonic's `Server::timeout` a longer bound than the caller's budgets.
//! * **tonic's client**: a call whose own `set_timeout` fires first gets `Code::Cancelled`
//!   from tonic's client, not `DeadlineExceeded` (its timer is the client's, not the server's
//!   answer); the server's line says `cancelled` (the client hung up).

use std::convert::Infallible;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes};
use http::uri::PathAndQuery;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use shared_headers::deadline::{BudgetHeader, DeadlineSource};
use shared_headers::server::SharedHeadersLayer;
use shared_headers::server::access_log::AccessLog;
use shared_headers::{Exchange, Outcome};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::{Code, Status};
use tower::Layer;

/// A codec whose messages are their bytes (a generated service uses prost's instead).
#[derive(Clone, Copy, Default)]
struct Raw;

impl Codec for Raw {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = Raw;
    type Decoder = Raw;
    fn encoder(&mut self) -> Raw {
        Raw
    }
    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl Encoder for Raw {
    type Item = Bytes;
    type Error = Status;
    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Bytes;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

/// `/demo.Echo/Echo` answers its message; `/demo.Echo/Slow` works 300 ms first. Both can read
/// their deadline from the `Exchange` (and an outgoing call can inherit it:
/// `Deadline::current`).
async fn handle(
    req: tonic::Request<Bytes>,
    path: String,
) -> Result<tonic::Response<Bytes>, Status> {
    if let Some(deadline) = req
        .extensions()
        .get::<Exchange>()
        .and_then(Exchange::deadline)
    {
        let from = match deadline.source() {
            DeadlineSource::Caller => "the caller",
            _ => "the server",
        };
        println!(
            "  handler {path}: {:?} left, set by {from}",
            deadline.remaining()
        );
    }
    if path == "/demo.Echo/Slow" {
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    Ok(tonic::Response::new(req.into_inner()))
}

#[tokio::main]
async fn main() -> ExitCode {
    // What the log saw, per call: (path, outcome).
    let seen: Arc<Mutex<Vec<(String, Outcome)>>> = Arc::default();
    let record = seen.clone();
    let log = AccessLog::new();
    let layer = SharedHeadersLayer::new()
        // The server's own deadline...
        .timeout(Duration::from_secs(2))
        // ... shortened by the caller's `grpc-timeout`, never extended by it.
        .caller_budget(BudgetHeader::grpc_timeout())
        // The `tracing` access line (printed by a subscriber, if any), and our own print.
        .access_log(log)
        .on_response_end(move |end| {
            let committed = end.committed();
            let path = committed.uri().map(|u| u.path().to_owned()).unwrap_or_default();
            let source = match committed.deadline().map(|d| d.source()) {
                Some(DeadlineSource::Caller) => "caller",
                Some(_) => "server",
                None => "none",
            };
            println!(
                "log: {path} outcome={} http={:?} grpc-status={:?} budget={:?} ({source}) used={:?} total={:?}",
                committed.outcome(),
                end.status_sent().map(|status| status.as_u16()),
                end.grpc_status(),
                committed.budget(),
                committed.time_to_commit(),
                end.duration(),
            );
            record.lock().unwrap().push((path, committed.outcome()));
        });

    // The tonic service (one unary method per path), behind the layer.
    let grpc = tower::service_fn(|req: http::Request<hyper::body::Incoming>| async move {
        let path = req.uri().path().to_owned();
        let method = tower::service_fn(move |req| handle(req, path.clone()));
        Ok::<_, Infallible>(tonic::server::Grpc::new(Raw).unary(method, req).await)
    });
    let service = layer.layer(grpc);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let service = TowerToHyperService::new(service.clone());
            tokio::spawn(
                hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    println!("serving gRPC on {addr}");

    // tonic's client over hyper's HTTP/2 client.
    let channel = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http::<tonic::body::Body>();
    let mut client =
        tonic::client::Grpc::with_origin(channel, format!("http://{addr}").parse().unwrap());

    // (method, the caller's deadline, the expected code)
    let calls = [
        ("/demo.Echo/Echo", Some(Duration::from_secs(1)), Code::Ok),
        (
            "/demo.Echo/Slow",
            Some(Duration::from_millis(100)),
            Code::DeadlineExceeded,
        ),
        ("/demo.Echo/Slow", None, Code::Ok), // the server's 2 s apply
    ];
    let mut ok = true;
    for (method, budget, expected) in calls {
        let mut request = tonic::Request::new(Bytes::from_static(b"ping"));
        if let Some(budget) = budget {
            request.set_timeout(budget); // sent as `grpc-timeout`
        }
        println!("call {method} with deadline {budget:?}");
        if let Err(e) = client.ready().await {
            eprintln!("connection failed: {e}");
            return ExitCode::FAILURE;
        }
        let path = PathAndQuery::from_static(method);
        let call = client.unary::<Bytes, Bytes, Raw>(request, path, Raw);
        let code = match tokio::time::timeout(Duration::from_secs(5), call).await {
            Ok(Ok(_)) => Code::Ok,
            Ok(Err(status)) => {
                println!("  client: {:?}: {}", status.code(), status.message());
                status.code()
            }
            Err(_) => {
                eprintln!("  no answer within 5 s");
                return ExitCode::FAILURE;
            }
        };
        if code != expected {
            eprintln!("  unexpected: {code:?}, expected {expected:?}");
            ok = false;
        }
    }

    let seen = seen.lock().unwrap().clone();
    let outcomes: Vec<Outcome> = seen.iter().map(|(_, outcome)| *outcome).collect();
    let expected = [Outcome::Answered, Outcome::TimedOut, Outcome::Answered];
    if outcomes != expected {
        eprintln!("log outcomes {outcomes:?}, expected {expected:?}");
        ok = false;
    }
    if ok {
        println!("all outcomes as expected");
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
