//! What left the layer is what reached the client: `SharedHeadersLayer` over real sockets
//! (hyper 1 server on 127.0.0.1:0, hyper clients), HTTP/1.1 and HTTP/2, for every way a
//! request ends: answered, timed out, rejected, the handler panicking before or after the
//! deadline, an outer timeout dropping the future, a client disconnecting.
//!
//! For each: no protocol error (the client gets a head and a whole body), exactly one
//! `on_commit` call, and the status and headers the client received equal the head the hook's
//! `CommitEvent::sent()` says left the layer. The comparison ignores exactly what hyper itself
//! writes on the wire after the layer: `date` (hyper's server adds it to every response, HTTP/1
//! and HTTP/2), and `content-length` when the layer's head had none and the value is the length
//! of the body the client received (hyper computes it from the body's exact size; with
//! `Full` bodies it never uses `transfer-encoding`, which is therefore not ignored). A
//! `content-length` written by the handler must never reach the client on the layer's own
//! answer. Cancelled requests (outer timeout, disconnect): `sent()` is `None` and the headers
//! committed but never sent do not reach the client.
#![cfg(feature = "server")]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Empty};
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use shared_headers::server::SharedHeadersLayer;
use shared_headers::{Builder, Committed, Exchange, Outcome};
use tokio::sync::mpsc;
use tower::{Layer, ServiceBuilder};

#[path = "support/server.rs"]
mod server;
use server::{Body, boxed, exchange_of, run, serve};

/// Every single await on the network is bounded by this.
const STEP: Duration = Duration::from_secs(10);

async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(STEP, f)
        .await
        .unwrap_or_else(|_| panic!("{what}: no progress in {STEP:?}"))
}

/// One `on_commit` call: the record, and the head that left the layer.
#[derive(Debug, Clone)]
struct Call {
    committed: Committed,
    sent: Option<(StatusCode, HeaderMap)>,
}

#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<Call>>>);

impl Log {
    fn layer(&self) -> SharedHeadersLayer {
        let log = self.clone();
        SharedHeadersLayer::new().on_commit(move |c| {
            let sent = c.sent().map(|head| (head.status, head.headers.clone()));
            log.0.lock().unwrap().push(Call {
                committed: c.committed().clone(),
                sent,
            });
        })
    }

    /// The one call of the test's one request: waits (bounded) for it, then a little longer
    /// to catch a second one.
    async fn one(&self) -> Call {
        let start = Instant::now();
        while self.0.lock().unwrap().is_empty() && start.elapsed() < STEP {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
        let calls = self.0.lock().unwrap().clone();
        assert_eq!(calls.len(), 1, "one on_commit call per request: {calls:?}");
        calls.into_iter().next().unwrap()
    }
}

/// A client connection over HTTP/1.1 or HTTP/2, and the task driving it.
enum Client {
    H1(hyper::client::conn::http1::SendRequest<Empty<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Empty<Bytes>>),
}

async fn connect(addr: SocketAddr, h2: bool) -> (Client, tokio::task::JoinHandle<()>) {
    let stream = within("connect", tokio::net::TcpStream::connect(addr))
        .await
        .unwrap();
    let io = TokioIo::new(stream);
    if h2 {
        let (sender, conn) = within(
            "h2 handshake",
            hyper::client::conn::http2::handshake(TokioExecutor::new(), io),
        )
        .await
        .unwrap();
        let conn = tokio::spawn(async move { conn.await.expect("h2 connection error") });
        (Client::H2(sender), conn)
    } else {
        let (sender, conn) = within("h1 handshake", hyper::client::conn::http1::handshake(io))
            .await
            .unwrap();
        let conn = tokio::spawn(async move { conn.await.expect("h1 connection error") });
        (Client::H1(sender), conn)
    }
}

fn request(h2: bool, extra: &[(&'static str, &'static str)]) -> Request<Empty<Bytes>> {
    // HTTP/2 takes the authority from the URI, HTTP/1.1 from `host`.
    let mut req = if h2 {
        Request::get("http://localhost/wire")
    } else {
        Request::get("/wire").header("host", "localhost")
    };
    for (name, value) in extra {
        req = req.header(*name, *value);
    }
    req.body(Empty::new()).unwrap()
}

/// What the client got: status, headers, body. Any hyper error (an empty reply, a stream
/// reset, a protocol error) is `Err`.
type Got = Result<(StatusCode, HeaderMap, Bytes), hyper::Error>;

async fn send(client: &mut Client, req: Request<Empty<Bytes>>) -> Got {
    let res = match client {
        Client::H1(sender) => {
            within("ready", sender.ready()).await?;
            within("response head", sender.send_request(req)).await?
        }
        Client::H2(sender) => {
            within("ready", sender.ready()).await?;
            within("response head", sender.send_request(req)).await?
        }
    };
    let (parts, body) = res.into_parts();
    let body = within("response body", body.collect()).await?.to_bytes();
    Ok((parts.status, parts.headers, body))
}

/// One request on a new connection.
async fn get(addr: SocketAddr, h2: bool, extra: &[(&'static str, &'static str)]) -> Got {
    let (mut client, _conn) = connect(addr, h2).await;
    send(&mut client, request(h2, extra)).await
}

/// The client received exactly the head that the hook says left the layer, but for what hyper
/// writes on the wire (see the module docs).
fn assert_received_is_sent(call: &Call, got: &Got) {
    let (status, received, body) = got.as_ref().expect("protocol error or no answer");
    let (sent_status, sent) = call.sent.as_ref().expect("the hook says nothing was sent");
    assert_eq!(status, sent_status, "status");
    let mut received = received.clone();
    received.remove(header::DATE);
    if !sent.contains_key(header::CONTENT_LENGTH) {
        if let Some(length) = received.remove(header::CONTENT_LENGTH) {
            assert_eq!(length, body.len().to_string(), "hyper's content-length");
        }
    }
    assert_eq!(&received, sent, "headers received != headers sent");
}

/// On the layer's own answer: the body is empty and no handler-written framing or caching
/// header arrived.
fn assert_own_answer(got: &Got) {
    let (_, received, body) = got.as_ref().unwrap();
    assert!(body.is_empty());
    for name in [
        header::CONTENT_TYPE,
        header::CACHE_CONTROL,
        header::CONTENT_ENCODING,
    ] {
        assert!(!received.contains_key(&name), "{name} on an own answer");
    }
    if let Some(length) = received.get(header::CONTENT_LENGTH) {
        assert_eq!(
            length, "0",
            "the handler's content-length reached the client"
        );
    }
}

/// Writes what a handler would before its body: framing, representation, caching, and a
/// request id that must survive.
fn write_body_headers(exchange: &Exchange) {
    let response = exchange.response();
    for (name, value) in [
        (header::CONTENT_LENGTH, "100"),
        (header::CONTENT_TYPE, "application/json"),
        (header::CACHE_CONTROL, "public, max-age=3600"),
        (http::HeaderName::from_static("x-request-id"), "req-1"),
    ] {
        response
            .insert(name, HeaderValue::from_static(value))
            .expect("before the commit");
    }
}

/// Both protocols for each scenario, as separate tests.
macro_rules! both {
    ($($scenario:ident),* $(,)?) => {
        mod h1 { $( #[test] fn $scenario() { super::run(super::$scenario(false)); } )* }
        mod h2 { $( #[test] fn $scenario() { super::run(super::$scenario(true)); } )* }
    };
}

both!(
    answered,
    timed_out_after_body_headers,
    rejected,
    panic_before_the_deadline,
    panic_after_the_deadline,
    outer_timeout,
    client_disconnects,
);

async fn answered(h2: bool) {
    let log = Log::default();
    let service = log
        .layer()
        .timeout(Duration::from_secs(10))
        .layer(tower::service_fn(|req: Request<Incoming>| async move {
            let exchange = exchange_of(&req);
            let _ = exchange
                .response()
                .insert("x-request-id", HeaderValue::from_static("req-1"));
            let mut res = Response::new(Body::from("{\"ok\":true}"));
            // The handler's own header, not written through the handle: sent and shown.
            res.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            Ok::<_, Infallible>(res)
        }));
    let addr = serve(boxed(service), h2).await;
    let got = get(addr, h2, &[]).await;
    let call = log.one().await;
    assert_eq!(call.committed.outcome(), Outcome::Answered);
    assert_received_is_sent(&call, &got);
    let (status, headers, body) = got.unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["x-request-id"], "req-1");
    assert_eq!(headers[header::CONTENT_TYPE], "application/json");
    assert_eq!(body, "{\"ok\":true}");
}

async fn timed_out_after_body_headers(h2: bool) {
    let log = Log::default();
    let service = log
        .layer()
        .timeout(Duration::from_millis(50))
        .layer(tower::service_fn(|req: Request<Incoming>| async move {
            write_body_headers(&exchange_of(&req));
            std::future::pending::<()>().await;
            Ok::<_, Infallible>(Response::new(Body::from("never")))
        }));
    let addr = serve(boxed(service), h2).await;
    let got = get(addr, h2, &[]).await;
    let call = log.one().await;
    assert_eq!(call.committed.outcome(), Outcome::TimedOut);
    assert_received_is_sent(&call, &got);
    assert_own_answer(&got);
    let (status, headers, _) = got.unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(headers["x-request-id"], "req-1");
    // The record keeps every committed header; only the wire drops them.
    assert_eq!(call.committed.response()[header::CONTENT_LENGTH], "100");
}

async fn rejected(h2: bool) {
    let log = Log::default();
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let service = log
        .layer()
        .request_policy(Builder::new().max_entries(2))
        .layer(tower::service_fn(move |_: Request<Incoming>| {
            counted.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, Infallible>(Response::new(Body::from("handled"))) }
        }));
    let addr = serve(boxed(service), h2).await;
    let got = get(addr, h2, &[("x-a", "1"), ("x-b", "2"), ("x-c", "3")]).await;
    let call = log.one().await;
    assert_eq!(call.committed.outcome(), Outcome::Rejected);
    assert_received_is_sent(&call, &got);
    assert_own_answer(&got);
    assert_eq!(got.unwrap().0, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    assert_eq!(calls.load(Ordering::SeqCst), 0, "the handler ran");
}

async fn panic_before_the_deadline(h2: bool) {
    let log = Log::default();
    let service = log
        .layer()
        .timeout(Duration::from_secs(10))
        .layer(tower::service_fn(|req: Request<Incoming>| async move {
            write_body_headers(&exchange_of(&req));
            if req.uri().path() == "/wire" {
                panic!("handler bug (expected by the test)");
            }
            Ok::<_, Infallible>(Response::new(Body::from("never")))
        }));
    let addr = serve(boxed(service), h2).await;
    let got = get(addr, h2, &[]).await;
    let call = log.one().await;
    assert_eq!(call.committed.outcome(), Outcome::Panicked);
    assert_received_is_sent(&call, &got);
    assert_own_answer(&got);
    let (status, headers, _) = got.unwrap();
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(headers["x-request-id"], "req-1");
}

async fn panic_after_the_deadline(h2: bool) {
    let log = Log::default();
    let service = log
        .layer()
        .timeout(Duration::from_millis(50))
        .layer(tower::service_fn(|req: Request<Incoming>| async move {
            let exchange = exchange_of(&req);
            write_body_headers(&exchange);
            // Busy in its poll past the deadline (the deadline thread commits meanwhile),
            // bounded: then the write the README used to `unwrap`.
            let start = Instant::now();
            while exchange.committed().is_none() && start.elapsed() < STEP {
                std::thread::sleep(Duration::from_millis(2));
            }
            exchange
                .response()
                .insert("x-late", HeaderValue::from_static("1"))
                .unwrap(); // Err(Sealed): the handler panics (expected by the test)
            Ok::<_, Infallible>(Response::new(Body::from("never")))
        }));
    let addr = serve(boxed(service), h2).await;
    let got = get(addr, h2, &[]).await;
    let call = log.one().await;
    assert_eq!(call.committed.outcome(), Outcome::TimedOut);
    assert_received_is_sent(&call, &got);
    assert_own_answer(&got);
    let (status, headers, _) = got.unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "the record's 503");
    assert_eq!(headers["x-request-id"], "req-1");
    assert!(!headers.contains_key("x-late"));
}

async fn outer_timeout(h2: bool) {
    let log = Log::default();
    let inner = log
        .layer()
        .layer(tower::service_fn(|req: Request<Incoming>| async move {
            let _ = exchange_of(&req)
                .response()
                .insert("x-early", HeaderValue::from_static("1"));
            std::future::pending::<()>().await;
            Ok::<_, Infallible>(Response::new(Body::from("never")))
        }));
    let service = ServiceBuilder::new()
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            Duration::from_millis(50),
        ))
        .service(inner);
    let addr = serve(boxed(service), h2).await;
    let got = get(addr, h2, &[]).await;
    let call = log.one().await;
    assert_eq!(call.committed.outcome(), Outcome::Cancelled);
    assert!(call.sent.is_none(), "a cancelled request sent nothing");
    // Committed, never sent: in the record, not on the wire.
    assert_eq!(call.committed.response()["x-early"], "1");
    let (status, headers, _) = got.expect("the outer layer's answer");
    assert_eq!(status, StatusCode::REQUEST_TIMEOUT);
    assert!(!headers.contains_key("x-early"));
}

async fn client_disconnects(h2: bool) {
    let log = Log::default();
    let (tx, mut started) = mpsc::unbounded_channel();
    let service = log
        .layer()
        .timeout(Duration::from_secs(10))
        .layer(tower::service_fn(move |req: Request<Incoming>| {
            let tx = tx.clone();
            async move {
                let _ = exchange_of(&req)
                    .response()
                    .insert("x-early", HeaderValue::from_static("1"));
                tx.send(()).unwrap();
                std::future::pending::<()>().await;
                Ok::<_, Infallible>(Response::new(Body::from("never")))
            }
        }));
    let addr = serve(boxed(service), h2).await;
    let (mut client, conn) = connect(addr, h2).await;
    let pending = tokio::spawn(async move { send(&mut client, request(h2, &[])).await });
    within("handler start", started.recv()).await.unwrap();
    // The client goes away mid-request: the socket closes.
    pending.abort();
    conn.abort();
    let call = log.one().await;
    assert_eq!(call.committed.outcome(), Outcome::Cancelled);
    assert!(call.sent.is_none(), "a disconnected request sent nothing");
    assert_eq!(call.committed.response()["x-early"], "1");
}
