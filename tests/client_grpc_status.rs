//! A gRPC call whose deadline runs out through `PropagateLayer` ends with `DEADLINE_EXCEEDED`,
//! every time, whichever timer ends it: the service below answering over its budget, tonic's
//! `Channel` enforcing the `grpc-timeout` the layer wrote, or the layer's own cut.
//!
//! Over HTTP/2 on 127.0.0.1:0, with tonic's `client::Grpc` and a codec of raw bytes; each case
//! makes `CALLS` calls in a row, each bounded by `LIMIT`. The handler sleeps `HANDLER_SLEEPS`,
//! far past the 100 ms deadline.
#![cfg(all(feature = "server", feature = "tonic"))]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::uri::PathAndQuery;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use shared_headers::client::PropagateLayer;
use shared_headers::context::RequestScope;
use shared_headers::deadline::{BudgetHeader, Deadline, DeadlineSource};
use shared_headers::server::SharedHeadersLayer;
use tokio::time::timeout;
use tonic::{Code, Status};
use tower::{Layer, ServiceBuilder};

#[path = "support/raw_codec.rs"]
mod raw_codec;
use raw_codec::Raw;

const LIMIT: Duration = Duration::from_secs(20);
const CALLS: usize = 20;
const DEADLINE: Duration = Duration::from_millis(100);
const HANDLER_SLEEPS: Duration = Duration::from_secs(2);

/// A tonic server over HTTP/2 whose handler sleeps `HANDLER_SLEEPS` before it answers; behind
/// the server layer with the caller's `grpc-timeout` (`layer: true`: it answers
/// DEADLINE_EXCEEDED at the budget) or bare (it never answers in time).
async fn grpc_server(layer: bool) -> SocketAddr {
    let grpc = tower::service_fn(move |req: Request<Incoming>| async move {
        let method = tower::service_fn(|req: tonic::Request<Bytes>| async move {
            tokio::time::sleep(HANDLER_SLEEPS).await;
            Ok::<_, Status>(tonic::Response::new(req.into_inner()))
        });
        let response = tonic::server::Grpc::new(Raw).unary(method, req).await;
        Ok::<_, Infallible>(response)
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let layered = SharedHeadersLayer::new()
        .caller_budget(BudgetHeader::grpc_timeout())
        .layer(grpc);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
            let io = TokioIo::new(stream);
            if layer {
                let service = TowerToHyperService::new(layered.clone());
                tokio::spawn(async move { conn.serve_connection(io, service).await });
            } else {
                let service = TowerToHyperService::new(grpc);
                tokio::spawn(async move { conn.serve_connection(io, service).await });
            }
        }
    });
    addr
}

async fn channel(addr: SocketAddr) -> tonic::transport::Channel {
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{addr}")).unwrap();
    timeout(LIMIT, endpoint.connect()).await.unwrap().unwrap()
}

/// hyper-util's client over HTTP/2: a channel with no timer of its own.
fn hyper_channel() -> Client<HttpConnector, tonic::body::Body> {
    Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http()
}

/// One unary call to `addr` through `layer` over `channel`, under a fresh `DEADLINE`: the
/// status it ended with.
async fn call<C, B>(channel: C, addr: SocketAddr, layer: PropagateLayer) -> Status
where
    C: tower::Service<Request<tonic::body::Body>, Response = Response<B>> + Send,
    C::Error: std::error::Error + Send + Sync + 'static,
    C::Future: Send,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let client = ServiceBuilder::new().layer(layer).service(channel);
    let origin = format!("http://{addr}").parse().unwrap();
    let mut grpc = tonic::client::Grpc::with_origin(client, origin);
    let deadline = Deadline::after(DEADLINE, DeadlineSource::Server).unwrap();
    let call = RequestScope::new().deadline(deadline).scope(async {
        grpc.ready()
            .await
            .map_err(|e| Status::unknown(e.to_string()))?;
        let request = tonic::Request::new(Bytes::from_static(b"ping"));
        let path = PathAndQuery::from_static("/test.Echo/Sleep");
        grpc.unary(request, path, Raw).await
    });
    let result = timeout(LIMIT, call).await.expect("the call ended in time");
    result.expect_err("the handler sleeps past the deadline")
}

/// `CALLS` calls: every one must end with DEADLINE_EXCEEDED.
async fn assert_deadline_exceeded_every_time<C, B>(
    what: &str,
    channel: impl Fn() -> C,
    addr: SocketAddr,
    layer: PropagateLayer,
) where
    C: tower::Service<Request<tonic::body::Body>, Response = Response<B>> + Send,
    C::Error: std::error::Error + Send + Sync + 'static,
    C::Future: Send,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut ended = Vec::new();
    for _ in 0..CALLS {
        let status = call(channel(), addr, layer.clone()).await;
        ended.push((status.code(), status.message().to_owned()));
    }
    let wrong: Vec<_> = ended
        .iter()
        .filter(|(code, _)| *code != Code::DeadlineExceeded)
        .collect();
    assert!(
        wrong.is_empty(),
        "{what}: {} of {CALLS} not DEADLINE_EXCEEDED: {wrong:?}",
        wrong.len()
    );
}

fn propagate() -> PropagateLayer {
    PropagateLayer::new(BudgetHeader::grpc_timeout())
}

// The bug: tonic's `Channel` enforces the `grpc-timeout` the layer writes, with a timer of its
// own that tonic reports as CANCELLED ("Timeout expired"); it raced the answer from below
// (DEADLINE_EXCEEDED), and the status depended on which came first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_a_tonic_channel_the_status_is_deadline_exceeded_every_time() {
    let below = grpc_server(true).await;
    let to_below = channel(below).await;
    assert_deadline_exceeded_every_time("Channel", || to_below.clone(), below, propagate()).await;
    // A service below that never answers in time: tonic's timer, then the layer's cut.
    let bare = grpc_server(false).await;
    let to_bare = channel(bare).await;
    assert_deadline_exceeded_every_time("Channel, bare", || to_bare.clone(), bare, propagate())
        .await;
}

// Over hyper's client (no timer of its own): the answer from below, or the layer's cut, which
// tonic reported as UNKNOWN; with no margin, the two race.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_hyper_the_status_is_deadline_exceeded_every_time() {
    let below = grpc_server(true).await;
    let bare = grpc_server(false).await;
    assert_deadline_exceeded_every_time("hyper", hyper_channel, below, propagate()).await;
    let no_margin = propagate().margin(Duration::ZERO);
    assert_deadline_exceeded_every_time("hyper, no margin", hyper_channel, below, no_margin).await;
    assert_deadline_exceeded_every_time("hyper, bare", hyper_channel, bare, propagate()).await;
}
