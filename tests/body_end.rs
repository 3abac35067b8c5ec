//! How a response ends, over real sockets (hyper on 127.0.0.1:0), where the server, not the
//! body, decides when the body is over:
//!
//! * **a body that declares its length**: over HTTP/1.1 hyper stops polling a body once it has
//!   written the bytes the body declared (its `content-length` header, or an exact size hint)
//!   and drops it, so a body whose end is known only at its next poll (tower-http's
//!   `ServeFile` and `ServeDir` over a real file, a stream or channel body with a
//!   `content-length`, a body with an exact size hint and no `is_end_stream`) was sent in full
//!   when it is dropped: `Completed`, no `error.type`. A body dropped before its declared
//!   length is still `Dropped`;
//! * **a response without a body**: `HEAD`, `204`, `304`, a `2xx` to `CONNECT`, a `101`
//!   upgrade: hyper drops the body unpolled, and that is the complete end, with the status as
//!   sent;
//! * **a panic in the inner service's `call`** (not in its future) is caught like one in the
//!   future: the layer's 500 (gRPC: status 13), `Outcome::Panicked`, its message kept; with
//!   `resume_panics(true)` it goes on to an outer recovery after the line.
//!
//! Each case checks exactly one end report and one access line, the status as sent, the bytes
//! the client received and `error.type` only on a real failure.
#![cfg(all(feature = "server", feature = "tracing"))]

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use shared_headers::Outcome;
use shared_headers::server::{Ending, ResponseEnd, SharedHeadersLayer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::{Layer, Service};

#[path = "support/capture.rs"]
mod capture;
use capture::{Fields, access_lines, access_lines_of, capture, lock};

#[path = "support/sockets.rs"]
mod sockets;
use sockets::serve;

type Ends = Arc<Mutex<Vec<ResponseEnd>>>;

/// Runs `test` on a 2-worker runtime, failing it after 30 s.
fn run(test: impl std::future::Future<Output = ()>) {
    capture();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            tokio::time::timeout(Duration::from_secs(30), test)
                .await
                .expect("test timed out")
        });
}

/// The layer under test: the access line and a hook that keeps every end.
fn layer(ends: &Ends) -> SharedHeadersLayer {
    let ends = Arc::clone(ends);
    SharedHeadersLayer::new()
        .tracing_access_log()
        .on_response_end(move |end| lock(&ends).push(end.clone()))
}

/// One request on a new connection, its body read to the end: the status and the body.
async fn fetch(addr: SocketAddr, h2: bool, req: Request<Empty<Bytes>>) -> (StatusCode, Bytes) {
    let io = TokioIo::new(tokio::net::TcpStream::connect(addr).await.unwrap());
    let res = if h2 {
        let (mut sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .unwrap();
        tokio::spawn(conn);
        sender.send_request(req).await.unwrap()
    } else {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
        tokio::spawn(conn);
        sender.send_request(req).await.unwrap()
    };
    let status = res.status();
    let body = res.into_body().collect().await.unwrap().to_bytes();
    (status, body)
}

fn get(path: &str) -> Request<Empty<Bytes>> {
    Request::get(path)
        .header("host", "body-end.example")
        .body(Empty::new())
        .unwrap()
}

/// Sends `raw` on a new connection and gives the response's head (up to its blank line).
async fn raw_head(addr: SocketAddr, raw: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(raw.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "connection closed before the head: {head:?}");
        head.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// Waits (5 s at most) for the first end, then 100 ms more so that a second one would show.
async fn wait_ends(ends: &Ends) -> Vec<ResponseEnd> {
    let start = Instant::now();
    while lock(ends).is_empty() && start.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    lock(ends).clone()
}

/// What one request's end must say.
struct Expect {
    ending: Ending,
    outcome: Outcome,
    status: Option<u16>,
    bytes: u64,
    error: Option<&'static str>,
}

impl Expect {
    /// A complete answer of `status` with `bytes` of body.
    fn completed(status: u16, bytes: u64) -> Self {
        Expect {
            ending: Ending::Completed,
            outcome: Outcome::Answered,
            status: Some(status),
            bytes,
            error: None,
        }
    }
}

/// Checks the one end report and the one access line (picked by `keep`) against `expect`.
async fn check(what: &str, ends: &Ends, keep: impl Fn(&Fields) -> bool, expect: Expect) {
    let ends = wait_ends(ends).await;
    assert_eq!(ends.len(), 1, "{what}: one end per request: {ends:#?}");
    let end = &ends[0];
    assert_eq!(end.ending(), expect.ending, "{what}: {end:#?}");
    assert_eq!(end.committed().outcome(), expect.outcome, "{what}");
    assert_eq!(
        end.status_sent().map(|s| s.as_u16()),
        expect.status,
        "{what}"
    );
    assert_eq!(end.bytes_sent(), expect.bytes, "{what}");
    // The metrics' `error.type` is this one (they read the same `ResponseEnd`).
    assert_eq!(end.error_type(), expect.error, "{what}");
    let found = access_lines(keep);
    assert_eq!(found.len(), 1, "{what}: one line per request: {found:#?}");
    let line = &found[0];
    assert_eq!(
        line.get("error.type").map(String::as_str),
        expect.error,
        "{what}: {line:#?}"
    );
    let level = match expect.error {
        None => "INFO",
        Some("panic") => "ERROR",
        Some(_) => "WARN",
    };
    assert_eq!(line["level"], level, "{what}: {line:#?}");
    assert_eq!(
        line.get("http.response.status_code"),
        expect.status.map(|s| s.to_string()).as_ref(),
        "{what}"
    );
    if expect.status.is_some() {
        assert_eq!(
            line["http.response.body.size"],
            expect.bytes.to_string(),
            "{what}"
        );
    }
}

/// A temporary directory of this process, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "shared-headers-body-end-{}-{name}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// 150,000 bytes: three of `ServeFile`'s 64 KiB reads.
fn file_content() -> Vec<u8> {
    (0..150_000u32).map(|i| (i % 251) as u8).collect()
}

// ---- a body that declares its length ----

#[test]
fn serve_file_and_serve_dir_over_a_real_file_end_completed_on_both_protocols() {
    run(async {
        let dir = TempDir::new("serve");
        let content = file_content();
        std::fs::write(dir.0.join("file.bin"), &content).unwrap();
        for h2 in [false, true] {
            let tag = if h2 { "h2" } else { "h1" };

            let ends = Ends::default();
            let file = tower_http::services::ServeFile::new(dir.0.join("file.bin"));
            let addr = serve(layer(&ends).layer(file), h2).await;
            let path = format!("/serve-file/{tag}");
            let (status, body) = fetch(addr, h2, get(&path)).await;
            assert_eq!(status, StatusCode::OK);
            assert_eq!(body.len(), content.len(), "the client read every byte");
            let keep = |e: &Fields| e.get("url.path") == Some(&path);
            let expect = Expect::completed(200, content.len() as u64);
            check(&format!("ServeFile {tag}"), &ends, keep, expect).await;

            let ends = Ends::default();
            let served = tower_http::services::ServeDir::new(&dir.0);
            let addr = serve(layer(&ends).layer(served), h2).await;
            // Each protocol its own path: a second name for the same file.
            let name = format!("dir-{tag}.bin");
            std::fs::write(dir.0.join(&name), &content).unwrap();
            let path = format!("/{name}");
            let (status, body) = fetch(addr, h2, get(&path)).await;
            assert_eq!(status, StatusCode::OK);
            assert_eq!(body.len(), content.len());
            let keep = |e: &Fields| e.get("url.path") == Some(&path);
            let expect = Expect::completed(200, content.len() as u64);
            check(&format!("ServeDir {tag}"), &ends, keep, expect).await;
        }
    });
}

/// A body of frames given in advance with no `is_end_stream` (like a stream's), and with an
/// exact size hint when `hinted`.
struct Frames {
    frames: VecDeque<Bytes>,
    hinted: bool,
}

impl Frames {
    fn new(chunks: &[&'static str], hinted: bool) -> Self {
        Frames {
            frames: chunks
                .iter()
                .map(|c| Bytes::from_static(c.as_bytes()))
                .collect(),
            hinted,
        }
    }
}

impl Body for Frames {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.frames.pop_front().map(|data| Ok(Frame::data(data))))
    }
    fn size_hint(&self) -> SizeHint {
        if self.hinted {
            SizeHint::with_exact(self.frames.iter().map(|f| f.len() as u64).sum())
        } else {
            SizeHint::default()
        }
    }
}

const CHUNKS: [&str; 3] = ["hello ", "streaming ", "world"];
const CHUNKS_LEN: u64 = 21;

#[test]
fn stream_bodies_with_a_content_length_or_an_exact_hint_end_completed() {
    run(async {
        for h2 in [false, true] {
            let tag = if h2 { "h2" } else { "h1" };
            for kind in ["stream", "from_stream", "hinted"] {
                let ends = Ends::default();
                let service = layer(&ends).layer(tower::service_fn(move |_req| async move {
                    let body = match kind {
                        // http-body-util's `StreamBody` over a stream of frames.
                        "stream" => http_body_util::StreamBody::new(
                            http_body_util::BodyStream::new(Frames::new(&CHUNKS, false)),
                        )
                        .boxed_unsync(),
                        // axum's `Body::from_stream`.
                        "from_stream" => axum::body::Body::from_stream(
                            http_body_util::BodyDataStream::new(Frames::new(&CHUNKS, false)),
                        )
                        .map_err(|_| unreachable!())
                        .boxed_unsync(),
                        // No header: the exact size hint is the length.
                        _ => Frames::new(&CHUNKS, true).boxed_unsync(),
                    };
                    let mut res = Response::new(body);
                    if kind != "hinted" {
                        res.headers_mut()
                            .insert("content-length", CHUNKS_LEN.to_string().parse().unwrap());
                    }
                    Ok::<_, Infallible>(res)
                }));
                let addr = serve(service, h2).await;
                let path = format!("/{kind}/{tag}");
                let (status, body) = fetch(addr, h2, get(&path)).await;
                assert_eq!(status, StatusCode::OK);
                assert_eq!(body, "hello streaming world");
                let keep = |e: &Fields| e.get("url.path") == Some(&path);
                let expect = Expect::completed(200, CHUNKS_LEN);
                check(&format!("{kind} {tag}"), &ends, keep, expect).await;
            }
        }
    });
}

/// A body that gives its one frame, then never ends.
struct Stall(Option<Bytes>);

impl Body for Stall {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.0.take() {
            Some(data) => Poll::Ready(Some(Ok(Frame::data(data)))),
            None => Poll::Pending,
        }
    }
}

#[test]
fn a_body_dropped_before_its_declared_length_is_dropped() {
    run(async {
        for h2 in [false, true] {
            let tag = if h2 { "h2" } else { "h1" };
            let ends = Ends::default();
            let service = layer(&ends).layer(tower::service_fn(|_req| async {
                // 10 bytes of 1000, and then nothing.
                let mut res = Response::new(Stall(Some(Bytes::from_static(b"0123456789"))));
                res.headers_mut()
                    .insert("content-length", "1000".parse().unwrap());
                Ok::<_, Infallible>(res)
            }));
            let addr = serve(service, h2).await;
            let path = format!("/short/{tag}");
            // The client reads the head and the first 10 bytes, then hangs up.
            let io = TokioIo::new(tokio::net::TcpStream::connect(addr).await.unwrap());
            let res = if h2 {
                let (mut sender, conn) =
                    hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                        .await
                        .unwrap();
                let conn = tokio::spawn(conn);
                let res = sender.send_request(get(&path)).await.unwrap();
                (res, conn)
            } else {
                let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
                let conn = tokio::spawn(conn);
                let res = sender.send_request(get(&path)).await.unwrap();
                (res, conn)
            };
            let (res, conn) = res;
            let mut body = res.into_body();
            let frame = body.frame().await.unwrap().unwrap();
            assert_eq!(frame.into_data().unwrap(), "0123456789");
            drop(body);
            conn.abort();
            let keep = |e: &Fields| e.get("url.path") == Some(&path);
            let expect = Expect {
                ending: Ending::Dropped,
                outcome: Outcome::Answered,
                status: Some(200),
                bytes: 10,
                error: Some("body_dropped"),
            };
            check(&format!("short {tag}"), &ends, keep, expect).await;
        }
    });
}

// ---- responses without a body ----

#[test]
fn head_204_and_304_end_completed_with_their_status() {
    run(async {
        let dir = TempDir::new("head");
        std::fs::write(dir.0.join("file.bin"), file_content()).unwrap();
        for h2 in [false, true] {
            let tag = if h2 { "h2" } else { "h1" };
            // HEAD on a real file: a content-length, a body hyper never polls.
            let ends = Ends::default();
            let file = tower_http::services::ServeFile::new(dir.0.join("file.bin"));
            let addr = serve(layer(&ends).layer(file), h2).await;
            let path = format!("/head/{tag}");
            let mut req = get(&path);
            *req.method_mut() = Method::HEAD;
            let (status, body) = fetch(addr, h2, req).await;
            assert_eq!(status, StatusCode::OK);
            assert!(body.is_empty());
            let keep = |e: &Fields| e.get("url.path") == Some(&path);
            check(
                &format!("HEAD {tag}"),
                &ends,
                keep,
                Expect::completed(200, 0),
            )
            .await;

            // 204 and 304 with a body the handler gave anyway: hyper drops it unpolled over
            // HTTP/1.1, and sends it over HTTP/2 (the bytes the client received, either way).
            for status in [204u16, 304] {
                let ends = Ends::default();
                let service = layer(&ends).layer(tower::service_fn(move |_req| async move {
                    let mut res = Response::new(Full::new(Bytes::from_static(b"not sent")));
                    *res.status_mut() = StatusCode::from_u16(status).unwrap();
                    Ok::<_, Infallible>(res)
                }));
                let addr = serve(service, h2).await;
                let path = format!("/status-{status}/{tag}");
                let (sent, body) = fetch(addr, h2, get(&path)).await;
                assert_eq!(sent.as_u16(), status);
                let expected: &[u8] = if h2 { b"not sent" } else { b"" };
                assert_eq!(body, expected, "{status} {tag}");
                let keep = |e: &Fields| e.get("url.path") == Some(&path);
                let expect = Expect::completed(status, expected.len() as u64);
                check(&format!("{status} {tag}"), &ends, keep, expect).await;
            }
        }
    });
}

#[test]
fn a_2xx_to_connect_and_a_101_upgrade_end_completed_over_http1() {
    run(async {
        let handler = |req: Request<Incoming>| async move {
            let status = if req.method() == Method::CONNECT {
                match req.uri().host() {
                    Some("tunnel-ok.example") => StatusCode::OK,
                    _ => StatusCode::FORBIDDEN,
                }
            } else {
                StatusCode::SWITCHING_PROTOCOLS
            };
            // A body that is not at its end: hyper never polls it for these answers.
            let mut res = Response::new(Full::new(Bytes::from_static(b"no body here")));
            *res.status_mut() = status;
            if status == StatusCode::SWITCHING_PROTOCOLS {
                res.headers_mut()
                    .insert("connection", "upgrade".parse().unwrap());
                res.headers_mut()
                    .insert("upgrade", "body-end-test".parse().unwrap());
            }
            Ok::<_, Infallible>(res)
        };

        let ends = Ends::default();
        let addr = serve(layer(&ends).layer(tower::service_fn(handler)), false).await;
        let head = raw_head(
            addr,
            "CONNECT tunnel-ok.example:443 HTTP/1.1\r\nhost: tunnel-ok.example:443\r\n\r\n",
        )
        .await;
        assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
        let keep = |e: &Fields| {
            e.get("server.address")
                .is_some_and(|a| a == "tunnel-ok.example")
        };
        check("CONNECT 200", &ends, keep, Expect::completed(200, 0)).await;

        // A refused CONNECT has its body, sent to its end.
        let ends = Ends::default();
        let addr = serve(layer(&ends).layer(tower::service_fn(handler)), false).await;
        let head = raw_head(
            addr,
            "CONNECT tunnel-no.example:443 HTTP/1.1\r\nhost: tunnel-no.example:443\r\n\r\n",
        )
        .await;
        assert!(head.starts_with("HTTP/1.1 403 "), "{head}");
        let keep = |e: &Fields| {
            e.get("server.address")
                .is_some_and(|a| a == "tunnel-no.example")
        };
        check("CONNECT 403", &ends, keep, Expect::completed(403, 12)).await;

        let ends = Ends::default();
        let addr = serve(layer(&ends).layer(tower::service_fn(handler)), false).await;
        let head = raw_head(
            addr,
            "GET /upgrade HTTP/1.1\r\nhost: body-end.example\r\nconnection: upgrade\r\n\
             upgrade: body-end-test\r\n\r\n",
        )
        .await;
        assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
        let keep = |e: &Fields| e.get("url.path").is_some_and(|p| p == "/upgrade");
        check("101", &ends, keep, Expect::completed(101, 0)).await;
    });
}

// ---- a panic in the inner service's `call` ----

/// A service whose `call` panics (for a path under `/call-panic/`) before it makes a future.
#[derive(Clone)]
struct PanicInCall;

impl Service<Request<Incoming>> for PanicInCall {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<Full<Bytes>>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Incoming>) -> Self::Future {
        if req.uri().path().starts_with("/call-panic/") {
            panic!("handler bug");
        }
        std::future::ready(Ok(Response::new(Full::from("fine"))))
    }
}

/// The layer's own answer to a caught panic.
fn panicked() -> Expect {
    Expect {
        ending: Ending::Completed,
        outcome: Outcome::Panicked,
        status: Some(500),
        bytes: 0,
        error: Some("panic"),
    }
}

#[test]
fn a_panic_in_call_is_answered_500_and_logged_like_one_in_the_future() {
    run(async {
        for h2 in [false, true] {
            let tag = if h2 { "h2" } else { "h1" };
            // A hand-written service, and a `service_fn` whose closure panics before its
            // `async` block.
            for kind in ["service", "closure"] {
                let ends = Ends::default();
                let path = format!("/call-panic/{kind}-{tag}");
                let addr = if kind == "service" {
                    serve(layer(&ends).layer(PanicInCall), h2).await
                } else {
                    let handler = tower::service_fn(|_req: Request<Incoming>| {
                        let nothing: Option<u8> = std::hint::black_box(None);
                        let _ = nothing.expect("handler bug");
                        async { Ok::<_, Infallible>(Response::new(Full::from("never"))) }
                    });
                    serve(layer(&ends).layer(handler), h2).await
                };
                let (status, body) = fetch(addr, h2, get(&path)).await;
                assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{kind} {tag}");
                assert!(body.is_empty());
                let keep = |e: &Fields| e.get("url.path") == Some(&path);
                check(&format!("{kind} {tag}"), &ends, keep, panicked()).await;
                let end = &lock(&ends)[0];
                assert_eq!(end.panic_message(), Some("handler bug"), "{kind} {tag}");
                let line = &access_lines_of(&path)[0];
                assert_eq!(line["exception.message"], "handler bug");
                assert_eq!(line["shared_headers.outcome"], "panicked");
            }
        }
    });
}

#[test]
fn a_panic_in_call_of_a_grpc_request_is_grpc_status_13() {
    run(async {
        let ends = Ends::default();
        let addr = serve(layer(&ends).layer(PanicInCall), true).await;
        let path = "/call-panic/pkg.Greeter/SayHello";
        let req = Request::post(format!("http://grpc.example{path}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let io = TokioIo::new(tokio::net::TcpStream::connect(addr).await.unwrap());
        let (mut sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .unwrap();
        tokio::spawn(conn);
        let res = sender.send_request(req).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(res.headers()["grpc-status"], "13");
        let ends = wait_ends(&ends).await;
        assert_eq!(ends.len(), 1, "{ends:#?}");
        assert_eq!(ends[0].committed().outcome(), Outcome::Panicked);
        assert_eq!(ends[0].grpc_status(), Some(13));
        assert_eq!(ends[0].error_type(), Some("panic"));
        assert_eq!(ends[0].panic_message(), Some("handler bug"));
        let found = access_lines_of(path);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!(found[0]["rpc.grpc.status_code"], "13");
    });
}

#[test]
fn a_panic_in_call_is_resumed_to_an_outer_recovery_with_resume_panics() {
    run(async {
        let ends = Ends::default();
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let recorded = Arc::clone(&seen);
        let recovery = tower_http::catch_panic::CatchPanicLayer::custom(
            move |payload: Box<dyn std::any::Any + Send>| {
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .unwrap_or_default();
                lock(&recorded).push(message);
                let mut res = Response::new(Full::from("recovered"));
                *res.status_mut() = StatusCode::BAD_GATEWAY;
                res
            },
        );
        let service = tower::ServiceBuilder::new()
            .layer(recovery)
            .layer(layer(&ends).resume_panics(true))
            .service(PanicInCall);
        let addr = serve(service, false).await;
        let path = "/call-panic/resumed";
        let (status, body) = fetch(addr, false, get(path)).await;
        assert_eq!(status, StatusCode::BAD_GATEWAY);
        assert_eq!(body, "recovered");
        assert_eq!(*lock(&seen), ["handler bug"], "the handler's own payload");
        let keep = |e: &Fields| e.get("url.path").is_some_and(|p| p == path);
        let expect = Expect {
            ending: Ending::Unsent,
            outcome: Outcome::Panicked,
            status: None,
            bytes: 0,
            error: Some("panic"),
        };
        check("resumed", &ends, keep, expect).await;
        assert_eq!(lock(&ends)[0].panic_message(), Some("handler bug"));

        // The same service answers the next request: the layer holds nothing of the panic.
        let ends_ok = Ends::default();
        let service = layer(&ends_ok).resume_panics(true).layer(PanicInCall);
        let addr = serve(service, false).await;
        let (status, body) = fetch(addr, false, get("/fine/after-resume")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, "fine");
    });
}

/// A service whose `poll_ready` panics.
#[derive(Clone)]
struct PanicInPollReady;

impl Service<Request<()>> for PanicInPollReady {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<Full<Bytes>>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        panic!("handler bug");
    }

    fn call(&mut self, _: Request<()>) -> Self::Future {
        std::future::ready(Ok(Response::new(Full::from("never"))))
    }
}

#[test]
fn a_panic_in_poll_ready_goes_on_to_the_caller_with_no_end_reported() {
    capture();
    let ends = Ends::default();
    let mut service = layer(&ends).layer(PanicInPollReady);
    let waker = std::task::Waker::noop();
    let mut cx = Context::from_waker(waker);
    // No request is in flight: nothing to commit, log or answer.
    let polled =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| service.poll_ready(&mut cx)));
    let payload = polled.expect_err("the panic is not caught");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"handler bug"));
    assert!(lock(&ends).is_empty());
}
