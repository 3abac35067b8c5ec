//! gRPC through the layer, with tonic's own server (`tonic::server::Grpc`) and client
//! (`tonic::client::Grpc`) over HTTP/2 on 127.0.0.1: a call over the caller's `grpc-timeout`
//! ends in `Code::DeadlineExceeded` (the layer's answer: tonic's client here enforces no
//! timeout, and the server has no tonic timeout), a request over the header limits in
//! `Code::ResourceExhausted`, a panic in `Code::Internal`, an answer in `Code::Ok`; each with
//! exactly one access log line (the `tracing` access log, captured by a bare `Subscriber`
//! installed as the global default; each test reads only the lines of its own method).
//!
//! The service is hand-written over a codec of raw bytes: no protoc, no `tonic-build`, no prost.
#![cfg(all(feature = "server", feature = "tracing"))]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::uri::PathAndQuery;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use shared_headers::Builder;
use shared_headers::deadline::BudgetHeader;
use shared_headers::server::SharedHeadersLayer;
use tonic::{Code, Status};
use tower::Layer;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

#[path = "support/raw_codec.rs"]
mod raw_codec;
use raw_codec::Raw;

// ---- the codec: a message is its bytes ----

// ---- the access log's lines ----

type Fields = BTreeMap<String, String>;

struct Visitor<'a>(&'a mut Fields);

impl Visit for Visitor<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

/// Keeps the fields of every `shared_headers::access` event.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Fields>>>);

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        if event.metadata().target() != "shared_headers::access" {
            return;
        }
        let mut fields = Fields::new();
        fields.insert("level".into(), event.metadata().level().to_string());
        event.record(&mut Visitor(&mut fields));
        self.0.lock().unwrap().push(fields);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// The global capture (installed once per binary) and a silent panic hook for the handler's
/// expected panic.
fn capture() -> &'static Capture {
    static CAPTURE: OnceLock<Capture> = OnceLock::new();
    CAPTURE.get_or_init(|| {
        let default_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.to_string().contains("handler bug") {
                default_hook(info);
            }
        }));
        let capture = Capture::default();
        tracing::subscriber::set_global_default(capture.clone()).unwrap();
        capture
    })
}

/// The access log lines of the calls to `path`.
fn lines_of(path: &str) -> Vec<Fields> {
    let events = capture().0.lock().unwrap();
    events
        .iter()
        .filter(|line| line.get("url.path").map(String::as_str) == Some(path))
        .cloned()
        .collect()
}

// ---- the server and the client ----

/// The handlers, by method: `Echo` answers its message, `Slow` sleeps 600 ms first, `Panic`
/// panics.
async fn handle(
    req: tonic::Request<Bytes>,
    path: String,
) -> Result<tonic::Response<Bytes>, Status> {
    match path.as_str() {
        "/test.Echo/Slow" => tokio::time::sleep(Duration::from_millis(600)).await,
        "/test.Echo/Panic" => panic!("handler bug"),
        _ => {}
    }
    Ok(tonic::Response::new(req.into_inner()))
}

/// Serves the tonic service behind `layer` over HTTP/2 on 127.0.0.1:0; the connections are
/// served until the runtime ends.
async fn serve(layer: SharedHeadersLayer) -> SocketAddr {
    let grpc = tower::service_fn(|req: http::Request<hyper::body::Incoming>| async move {
        let path = req.uri().path().to_owned();
        let method = tower::service_fn(move |req| handle(req, path.clone()));
        let response = tonic::server::Grpc::new(Raw).unary(method, req).await;
        Ok::<_, Infallible>(response)
    });
    let service = layer.layer(grpc);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let service = TowerToHyperService::new(service.clone());
            tokio::spawn(async move {
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

type Channel = Client<HttpConnector, tonic::body::Body>;

/// One unary call of `method` with `request`; bounded at 5 s (tonic's client here enforces no
/// deadline of its own).
async fn call(
    addr: SocketAddr,
    method: &str,
    request: tonic::Request<Bytes>,
) -> Result<Bytes, Status> {
    let channel: Channel = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http();
    let origin = format!("http://{addr}").parse().unwrap();
    let mut client = tonic::client::Grpc::with_origin(channel, origin);
    let path = PathAndQuery::try_from(method).unwrap();
    let call = async {
        client
            .ready()
            .await
            .map_err(|e| Status::unknown(e.to_string()))?;
        client.unary(request, path, Raw).await
    };
    let response = tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .expect("the call ended within 5 s")?;
    Ok(response.into_inner())
}

fn field<'a>(line: &'a Fields, name: &str) -> Option<&'a str> {
    line.get(name).map(String::as_str)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_over_the_callers_deadline_is_deadline_exceeded_and_logged_once() {
    capture();
    let layer = SharedHeadersLayer::new()
        .timeout(Duration::from_secs(10))
        .caller_budget(BudgetHeader::grpc_timeout())
        .tracing_access_log();
    let addr = serve(layer).await;

    let started = Instant::now();
    let mut request = tonic::Request::new(Bytes::from_static(b"ping"));
    request.set_timeout(Duration::from_millis(100)); // `grpc-timeout: 100000u`
    let status = call(addr, "/test.Echo/Slow", request).await.unwrap_err();
    let elapsed = started.elapsed();

    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    // The layer's answer (its `grpc-message`), at the caller's deadline, not the handler's end
    // nor the server's 10 s.
    assert_eq!(status.message(), "deadline exceeded");
    assert!(elapsed >= Duration::from_millis(100), "{elapsed:?}");
    assert!(elapsed < Duration::from_millis(550), "{elapsed:?}");

    // Past the handler's 600 ms: still one line.
    tokio::time::sleep(Duration::from_millis(800).saturating_sub(started.elapsed())).await;
    let lines = lines_of("/test.Echo/Slow");
    assert_eq!(lines.len(), 1, "{lines:#?}");
    let line = &lines[0];
    assert_eq!(field(line, "shared_headers.outcome"), Some("timed_out"));
    assert_eq!(field(line, "rpc.grpc.status_code"), Some("4"));
    assert_eq!(field(line, "http.response.status_code"), Some("200"));
    assert_eq!(field(line, "shared_headers.budget_source"), Some("caller"));
    assert_eq!(field(line, "shared_headers.budget_us"), Some("100000"));
    assert_eq!(field(line, "network.protocol.version"), Some("2"));
    assert_eq!(field(line, "error.type"), Some("timeout"));
    assert_eq!(field(line, "rpc.system"), Some("grpc"));
    assert_eq!(field(line, "rpc.service"), Some("test.Echo"));
    assert_eq!(field(line, "rpc.method"), Some("Slow"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_over_the_header_limits_is_resource_exhausted() {
    capture();
    let layer = SharedHeadersLayer::new()
        .request_policy(Builder::new().max_entries(8))
        .tracing_access_log();
    let addr = serve(layer).await;

    // Under the limit: answered (tonic's own headers are `te`, `content-type`, `user-agent`).
    let request = tonic::Request::new(Bytes::from_static(b"small"));
    assert_eq!(
        &call(addr, "/test.Echo/Small", request).await.unwrap()[..],
        b"small"
    );

    let mut request = tonic::Request::new(Bytes::from_static(b"big"));
    for i in 0..16 {
        let name = format!("x-extra-{i}");
        let name = tonic::metadata::MetadataKey::from_bytes(name.as_bytes()).unwrap();
        request.metadata_mut().insert(name, "1".parse().unwrap());
    }
    let status = call(addr, "/test.Echo/Big", request).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(status.message(), "request headers over the server's limits");

    let lines = lines_of("/test.Echo/Big");
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert_eq!(field(&lines[0], "shared_headers.outcome"), Some("rejected"));
    assert_eq!(field(&lines[0], "rpc.grpc.status_code"), Some("8"));
    assert_eq!(field(&lines[0], "http.response.status_code"), Some("200"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answered_call_is_ok_and_logged_once() {
    capture();
    let layer = SharedHeadersLayer::new()
        .timeout(Duration::from_secs(10))
        .caller_budget(BudgetHeader::grpc_timeout())
        .tracing_access_log();
    let addr = serve(layer).await;

    let mut request = tonic::Request::new(Bytes::from_static(b"hello"));
    request.set_timeout(Duration::from_secs(5));
    let answer = call(addr, "/test.Echo/Echo", request).await.unwrap();
    assert_eq!(&answer[..], b"hello");

    let lines = lines_of("/test.Echo/Echo");
    assert_eq!(lines.len(), 1, "{lines:#?}");
    let line = &lines[0];
    assert_eq!(field(line, "shared_headers.outcome"), Some("answered"));
    assert_eq!(field(line, "http.response.status_code"), Some("200"));
    // The handler's status, from the trailers its body ended with.
    assert_eq!(field(line, "rpc.grpc.status_code"), Some("0"));
    assert_eq!(field(line, "error.type"), None);
    assert_eq!(field(line, "url.scheme"), Some("http"));
    assert_eq!(field(line, "shared_headers.budget_source"), Some("caller"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_panics_is_internal() {
    capture();
    let layer = SharedHeadersLayer::new()
        .timeout(Duration::from_secs(10))
        .tracing_access_log();
    let addr = serve(layer).await;

    let request = tonic::Request::new(Bytes::from_static(b"boom"));
    let status = call(addr, "/test.Echo/Panic", request).await.unwrap_err();
    assert_eq!(status.code(), Code::Internal, "{status:?}");
    assert_eq!(status.message(), "internal error");

    let lines = lines_of("/test.Echo/Panic");
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert_eq!(field(&lines[0], "shared_headers.outcome"), Some("panicked"));
    assert_eq!(field(&lines[0], "rpc.grpc.status_code"), Some("13"));
    assert_eq!(field(&lines[0], "level"), Some("ERROR"));

    // The server still serves.
    let request = tonic::Request::new(Bytes::from_static(b"after"));
    assert_eq!(
        &call(addr, "/test.Echo/After", request).await.unwrap()[..],
        b"after"
    );
}
