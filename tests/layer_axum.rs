//! The axum extractor over a real socket (axum 0.8 on 127.0.0.1:0): with the layer, a handler
//! gets the request's `Exchange` (and `Some` for `Option<Exchange>`) and its request handle
//! (`RequestHeaders`); without it, both are rejected with a bare 500 and an `ERROR` event that
//! says how to add the layer, and `Option<Exchange>` is `None`.
#![cfg(feature = "axum")]

use std::net::SocketAddr;
use std::time::Duration;

use axum::{Router, routing::get};
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use shared_headers::Exchange;
use shared_headers::server::{RequestHeaders, SharedHeadersLayer};

async fn both(exchange: Exchange, maybe: Option<Exchange>) -> String {
    let maybe = maybe.expect("Option<Exchange> with the layer");
    assert!(same(&exchange, &maybe));
    exchange
        .response()
        .insert("x-from", "handler".parse().unwrap())
        .unwrap();
    exchange
        .request()
        .get("x-id")
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned()
}

/// Whether two exchanges are the same (share their handles).
fn same(a: &Exchange, b: &Exchange) -> bool {
    shared_headers::SharedHeaders::ptr_eq(a.response(), b.response())
}

/// The request handle alone: the same headers as the exchange's request handle.
async fn request_only(headers: RequestHeaders, exchange: Exchange) -> String {
    assert!(shared_headers::SharedHeaders::ptr_eq(
        &headers,
        exchange.request()
    ));
    headers.insert("x-user", "ada".parse().unwrap()).unwrap();
    let id = headers.get("x-id").unwrap().to_str().unwrap().to_owned();
    format!(
        "{id} {}",
        exchange.request().get("x-user").unwrap().to_str().unwrap()
    )
}

async fn required_headers(_headers: RequestHeaders) -> &'static str {
    "unreachable without the layer"
}

async fn required(_exchange: Exchange) -> &'static str {
    "unreachable without the layer"
}

async fn optional(maybe: Option<Exchange>) -> &'static str {
    if maybe.is_some() { "some" } else { "none" }
}

async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

async fn fetch(addr: SocketAddr, path: &str) -> (StatusCode, http::HeaderMap, String) {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = Request::get(path)
        .header("host", "localhost")
        .header("x-id", "7")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let res = sender.send_request(req).await.unwrap();
    let (parts, body) = res.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    (
        parts.status,
        parts.headers,
        String::from_utf8(body.to_vec()).unwrap(),
    )
}

/// Captures the messages of `ERROR` events (the missing-layer rejection's log).
#[derive(Clone, Default)]
struct Errors(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl tracing::Subscriber for Errors {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() == tracing::Level::ERROR
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        struct Message(String);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, _: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                self.0 += &format!("{value:?}");
            }
        }
        let mut message = Message(String::new());
        event.record(&mut message);
        self.0.lock().unwrap().push(message.0);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[test]
fn the_exchange_extractor_with_and_without_the_layer() {
    let errors = Errors::default();
    tracing::subscriber::set_global_default(errors.clone()).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(20), async {
            let with = Router::new()
                .route("/", get(both))
                .route("/request", get(request_only))
                .layer(SharedHeadersLayer::new());
            let addr = serve(with).await;
            let (status, headers, body) = fetch(addr, "/").await;
            assert_eq!(status, StatusCode::OK);
            assert_eq!(headers["x-from"], "handler");
            assert_eq!(body, "7");
            let (status, _, body) = fetch(addr, "/request").await;
            assert_eq!((status, body.as_str()), (StatusCode::OK, "7 ada"));

            let without = Router::new()
                .route("/required", get(required))
                .route("/required-headers", get(required_headers))
                .route("/optional", get(optional));
            let addr = serve(without).await;
            // The client learns nothing of the server's internals; the operator gets the
            // explanation as an ERROR event.
            let (status, _, body) = fetch(addr, "/required").await;
            assert_eq!(
                (status, body.as_str()),
                (StatusCode::INTERNAL_SERVER_ERROR, "")
            );
            let (status, _, body) = fetch(addr, "/required-headers").await;
            assert_eq!(
                (status, body.as_str()),
                (StatusCode::INTERNAL_SERVER_ERROR, "")
            );
            let logged = errors.0.lock().unwrap().clone();
            assert_eq!(logged.len(), 2, "{logged:?}");
            for message in &logged {
                assert!(
                    message.contains("add shared_headers::server::SharedHeadersLayer"),
                    "{message}"
                );
            }
            let (status, _, body) = fetch(addr, "/optional").await;
            assert_eq!((status, body.as_str()), (StatusCode::OK, "none"));
        })
        .await
        .expect("test timed out");
    });
}
