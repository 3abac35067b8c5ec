//! The harness shared by the server room's socket tests (`tests/layer_http.rs`, `tests/layer_wire.rs`,
//! `tests/layer_hooks.rs`): a bounded multi-thread runtime and a hyper server on 127.0.0.1:0.

#![allow(dead_code)]

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use http::{Request, Response};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use tower::util::BoxCloneService;

pub type Body = Full<Bytes>;
/// The body the layer's responses have.
pub type Sent = shared_headers::server::ResponseBody<Body>;
pub type Svc = BoxCloneService<Request<Incoming>, Response<Sent>, Infallible>;

/// Every test finishes well within this; a hang fails instead of blocking CI.
pub const LIMIT: Duration = Duration::from_secs(30);

/// Runs `test` on a 2-worker runtime, failing it if it takes longer than [`LIMIT`].
pub fn run(test: impl Future<Output = ()>) {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            tokio::time::timeout(LIMIT, test)
                .await
                .expect("test timed out")
        });
}

/// Serves `service` over HTTP/1.1 (`h2 == false`) or HTTP/2 on 127.0.0.1:0 until the runtime
/// shuts down.
pub async fn serve(service: Svc, h2: bool) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            // A failed accept (a connection reset before it was accepted) must not end the loop:
            // the clients still to come would hang.
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            // As servers set it (axum::serve, tonic): answers are not held for an ACK.
            let _ = stream.set_nodelay(true);
            let service = TowerToHyperService::new(service.clone());
            let io = TokioIo::new(stream);
            if h2 {
                tokio::spawn(
                    hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .max_concurrent_streams(2000)
                        .serve_connection(io, service),
                );
            } else {
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new().serve_connection(io, service),
                );
            }
        }
    });
    addr
}

/// `service` as the harness's boxed service type.
pub fn boxed<S>(service: S) -> Svc
where
    S: tower::Service<Request<Incoming>, Response = Response<Sent>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    tower::ServiceExt::boxed_clone(service)
}

/// The request's exchange (the layer put it there).
pub fn exchange_of<B>(req: &Request<B>) -> shared_headers::Exchange {
    req.extensions()
        .get::<shared_headers::Exchange>()
        .unwrap()
        .clone()
}
