//! A hostile review of the layer's own answers to Connect calls, over sockets (hyper server and
//! client on 127.0.0.1:0, HTTP/1.1 and h2c), against the Connect protocol specification
//! (connectrpc.com/docs/protocol) and connect-go's `ErrorWriter` (`error_writer.go`,
//! `protocol_connect.go`).
//!
//! The tests named after a finding (a committed-then-panicked streaming or gRPC call answered
//! 500, `connect-content-encoding` and `digest`/`content-md5` carried onto an answer with its own
//! body, gRPC-Web with the Connect version header taken as Connect) failed before their fixes;
//! the others held from the start.
//!
//! Budgets are 20 ms against handlers that sleep 2 s (100x); no timing is asserted closer.
#![cfg(feature = "server")]

#[cfg(feature = "tracing")]
#[path = "support/capture.rs"]
mod capture;
#[cfg(feature = "opentelemetry")]
#[path = "support/otel_memory.rs"]
mod otel_memory;
#[path = "support/server.rs"]
mod server;
#[path = "support/sockets.rs"]
mod sockets;
mod support;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Frame, Incoming};
use server::run;
use shared_headers::deadline::BudgetHeader;
use shared_headers::server::{ResponseBody, SharedHeadersLayer};
use shared_headers::{Exchange, Outcome};
use sockets::{send, serve};
use tower::util::BoxCloneService;
use tower::{Layer, service_fn};

type Body = BoxBody<Bytes, Infallible>;
type Svc = BoxCloneService<Request<Incoming>, Response<ResponseBody<Body>>, Infallible>;

/// An end report: the outcome, `error.type` and the status sent.
type End = (Outcome, Option<&'static str>, Option<StatusCode>);

#[derive(Default)]
struct Seen {
    ends: Mutex<Vec<End>>,
}

impl Seen {
    /// The `n`th end report (waiting for it, bounded).
    async fn end(&self, n: usize) -> End {
        support::nth_end(&self.ends, n).await
    }
}

fn full(bytes: &'static [u8]) -> Body {
    Full::new(Bytes::from_static(bytes)).boxed()
}

/// The handler, by path:
/// * `/pkg.Svc/CommitThenPanic`: commits the exchange itself (`Exchange::commit`), then panics;
/// * `/pkg.Svc/Stream`: answers at once with a body of two frames, 300 ms apart;
/// * else: writes the response headers named in `x-commit-header` (`name: value`) to the
///   exchange, then sleeps 2 s and answers `done`.
async fn handler(req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let exchange = req.extensions().get::<Exchange>().unwrap().clone();
    match req.uri().path() {
        "/pkg.Svc/CommitThenPanic" => {
            let _ = exchange.commit(Outcome::Answered);
            panic!("handler panicked after its commit");
        }
        "/pkg.Svc/Stream" => {
            let mut res = Response::new(two_frames().boxed());
            res.headers_mut().insert(
                "content-type",
                http::HeaderValue::from_static("application/connect+proto"),
            );
            Ok(res)
        }
        _ => {
            if let Some(line) = req.headers().get("x-commit-header") {
                let line = line.to_str().unwrap();
                let (name, value) = line.split_once(": ").unwrap();
                let _ = exchange.response().insert(
                    http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                    value.parse().unwrap(),
                );
            }
            let ms = req
                .headers()
                .get("x-work-ms")
                .and_then(|v| v.to_str().ok()?.parse().ok())
                .unwrap_or(2000);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(Response::new(full(b"done")))
        }
    }
}

/// Two data frames, the second 300 ms after the first (past a 20 ms budget), from a task
/// through a `tokio` channel.
struct ChannelBody(tokio::sync::mpsc::Receiver<Bytes>);

impl http_body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|data| data.map(|data| Ok(Frame::data(data))))
    }
}

fn two_frames() -> ChannelBody {
    let (tx, rx) = tokio::sync::mpsc::channel(2);
    tokio::spawn(async move {
        let _ = tx.send(Bytes::from_static(b"first")).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let _ = tx.send(Bytes::from_static(b"second")).await;
    });
    ChannelBody(rx)
}

fn layer(seen: &Arc<Seen>) -> SharedHeadersLayer {
    let ends = seen.clone();
    SharedHeadersLayer::new()
        .caller_budget(BudgetHeader::connect_timeout_ms())
        .on_response_end(move |end| {
            ends.ends.lock().unwrap().push((
                end.committed().outcome(),
                end.error_type(),
                end.status_sent(),
            ))
        })
}

fn service(layer: SharedHeadersLayer) -> Svc {
    BoxCloneService::new(layer.layer(service_fn(handler)))
}

fn request(
    method: http::Method,
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> Request<Full<Bytes>> {
    let mut req = Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"));
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    req.body(Full::new(Bytes::from_static(b"{}"))).unwrap()
}

fn post(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Request<Full<Bytes>> {
    request(http::Method::POST, addr, path, headers)
}

/// The string value of `"key":"..."` in the layer's JSON (it escapes nothing).
fn field<'a>(json: &'a str, key: &str) -> Option<&'a str> {
    let start = json.find(&format!("\"{key}\":\""))? + key.len() + 4;
    let len = json[start..].find('"')?;
    Some(&json[start..start + len])
}

/// Checks one end-stream envelope (flags `0x02` exactly: end of stream, not compressed) and
/// returns its error code.
fn end_stream_code(body: &Bytes) -> String {
    assert!(body.len() > 5, "{body:?}");
    assert_eq!(body[0], 0x02, "end-stream flag, uncompressed: {body:?}");
    let length = u32::from_be_bytes(body[1..5].try_into().unwrap()) as usize;
    assert_eq!(length, body.len() - 5, "one envelope and nothing after it");
    let json = std::str::from_utf8(&body[5..]).unwrap();
    assert!(json.starts_with("{\"error\":{"), "{json}");
    field(json, "code").expect("a code").to_owned()
}

// ---------------------------------------------------------------------------------------------
// Findings
// ---------------------------------------------------------------------------------------------

/// A streaming Connect call must get HTTP 200 and its error in the end-stream message, whatever
/// the outcome: a streaming client reads no body of a non-200 answer (connect-go maps the HTTP
/// status to a code and stops). A handler that committed itself (`Exchange::commit`) and then
/// panicked gets the winner's answer, whose status is a hard-coded 500.
#[test]
fn a_streaming_call_whose_handler_committed_then_panicked_gets_200_and_an_end_stream() {
    run(async {
        let seen = Arc::new(Seen::default());
        for (i, h2) in [false, true].into_iter().enumerate() {
            let addr = serve(service(layer(&seen)), h2).await;
            let req = post(
                addr,
                "/pkg.Svc/CommitThenPanic",
                &[
                    ("content-type", "application/connect+proto"),
                    ("connect-protocol-version", "1"),
                ],
            );
            let (status, headers, body) = send(addr, h2, req).await;
            println!("h2={h2}: {status} {headers:?} {body:?}");
            assert_eq!(headers["content-type"], "application/connect+proto");
            assert_eq!(end_stream_code(&body), "internal");
            assert_eq!(status, StatusCode::OK, "a streaming answer is 200");
            let _ = seen.end(i).await;
        }
    });
}

/// The same path for a gRPC call (HTTP/2): gRPC's answers are HTTP 200 with `grpc-status`
/// (`own_status`), but the winner's answer to a handler that committed itself is a 500.
#[test]
fn a_grpc_call_whose_handler_committed_then_panicked_gets_200_and_a_grpc_status() {
    run(async {
        let seen = Arc::new(Seen::default());
        let addr = serve(service(layer(&seen)), true).await;
        let req = post(
            addr,
            "/pkg.Svc/CommitThenPanic",
            &[("content-type", "application/grpc"), ("te", "trailers")],
        );
        let (status, headers, body) = send(addr, true, req).await;
        println!("{status} {headers:?} {body:?}");
        assert_eq!(headers["grpc-status"], "13");
        assert_eq!(status, StatusCode::OK, "a gRPC answer is 200");
    });
}

/// `connect-content-encoding` names the compression of the handler's stream of messages: on
/// the layer's answer (one uncompressed end-stream message) it describes another body, and a
/// client that never offered that encoding fails the call on it ("unknown compression")
/// instead of reading the error. `content-encoding` is dropped; its streaming twin is not.
#[test]
fn a_committed_connect_content_encoding_is_not_on_the_end_stream_answer() {
    run(async {
        let seen = Arc::new(Seen::default());
        let addr = serve(service(layer(&seen)), false).await;
        let req = post(
            addr,
            "/pkg.Svc/Slow",
            &[
                ("content-type", "application/connect+proto"),
                ("connect-protocol-version", "1"),
                ("connect-timeout-ms", "20"),
                ("connect-accept-encoding", "gzip"),
                ("x-commit-header", "connect-content-encoding: br"),
            ],
        );
        let (status, headers, body) = send(addr, false, req).await;
        println!("{status} {headers:?} {body:?}");
        assert_eq!(status, StatusCode::OK);
        assert_eq!(end_stream_code(&body), "deadline_exceeded");
        assert!(
            !headers.contains_key("connect-content-encoding"),
            "describes the handler's stream: {headers:?}"
        );
    });
}

/// RFC 3230's `digest` (obsoleted by RFC 9530's `content-digest` and `repr-digest`, which
/// are dropped) and RFC 1864's `content-md5` are integrity of the handler's body. On an
/// own answer that now has a body of its own (Connect's JSON error), they are false: a client
/// or proxy that checks them fails the error.
#[test]
fn a_committed_digest_is_not_on_a_connect_answer_with_a_body() {
    run(async {
        let seen = Arc::new(Seen::default());
        let addr = serve(service(layer(&seen)), false).await;
        for header in [
            "digest: sha-256=X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=",
            "content-md5: Q2hlY2sgSW50ZWdyaXR5IQ==",
        ] {
            let req = post(
                addr,
                "/pkg.Svc/Slow",
                &[
                    ("content-type", "application/json"),
                    ("connect-protocol-version", "1"),
                    ("connect-timeout-ms", "20"),
                    ("x-commit-header", header),
                ],
            );
            let (status, headers, body) = send(addr, false, req).await;
            println!("{status} {headers:?} {body:?}");
            assert_eq!(status, StatusCode::GATEWAY_TIMEOUT);
            let name = header.split_once(':').unwrap().0;
            assert!(
                !headers.contains_key(name),
                "{name} describes the handler's body: {headers:?}"
            );
        }
    });
}

/// connect-go's `ErrorWriter` classifies a gRPC-Web content type first, whatever other
/// header the request has: a `POST` of `application/grpc-web+proto` is never a Connect unary
/// call. The layer calls any `POST` with `connect-protocol-version: 1` Connect, and answers a
/// gRPC-Web client a 504 JSON body it cannot read (a gRPC-Web client reads `grpc-status`).
#[test]
fn a_grpc_web_call_with_the_connect_version_header_is_not_connect() {
    run(async {
        let seen = Arc::new(Seen::default());
        let addr = serve(service(layer(&seen)), false).await;
        let req = post(
            addr,
            "/pkg.Svc/Slow",
            &[
                ("content-type", "application/grpc-web+proto"),
                ("connect-protocol-version", "1"),
                ("connect-timeout-ms", "20"),
            ],
        );
        let (status, headers, body) = send(addr, false, req).await;
        println!("{status} {headers:?} {body:?}");
        assert_ne!(
            headers.get("content-type").map(|v| v.as_bytes()),
            Some(&b"application/json"[..]),
            "a Connect JSON error to a gRPC-Web client"
        );
    });
}

// ---------------------------------------------------------------------------------------------
// What held
// ---------------------------------------------------------------------------------------------

/// A streaming content type with parameters, in any case, is a Connect streaming call: HTTP
/// 200, the request's content type back, one end-stream envelope, a `content-length` that is
/// the envelope's, over HTTP/1.1 and h2c.
#[test]
fn streaming_content_types_with_parameters_and_case_are_connect() {
    run(async {
        let seen = Arc::new(Seen::default());
        for h2 in [false, true] {
            let addr = serve(service(layer(&seen)), h2).await;
            for content_type in [
                "application/connect+proto; charset=utf-8",
                "Application/Connect+JSON",
            ] {
                let req = post(
                    addr,
                    "/pkg.Svc/Slow",
                    &[("content-type", content_type), ("connect-timeout-ms", "20")],
                );
                let (status, headers, body) = send(addr, h2, req).await;
                assert_eq!(status, StatusCode::OK, "{content_type} h2={h2}");
                assert_eq!(headers["content-type"], content_type);
                assert_eq!(end_stream_code(&body), "deadline_exceeded");
                assert_eq!(headers["content-length"], body.len().to_string());
            }
        }
    });
}

/// A request whose messages are gzip-compressed gets an end-stream message flagged
/// uncompressed (`0x02` exactly) and no `connect-content-encoding` claiming otherwise.
#[test]
fn a_compressed_streaming_call_gets_an_uncompressed_end_stream() {
    run(async {
        let seen = Arc::new(Seen::default());
        let addr = serve(service(layer(&seen)), true).await;
        let req = post(
            addr,
            "/pkg.Svc/Slow",
            &[
                ("content-type", "application/connect+proto"),
                ("connect-protocol-version", "1"),
                ("connect-content-encoding", "gzip"),
                ("connect-accept-encoding", "gzip"),
                ("connect-timeout-ms", "20"),
            ],
        );
        let (status, headers, body) = send(addr, true, req).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(end_stream_code(&body), "deadline_exceeded");
        assert!(!headers.contains_key("connect-content-encoding"));
        assert!(!headers.contains_key("content-encoding"));
    });
}

/// `connect-timeout-ms` of more than 10 digits is invalid (the specification): refused, it sets
/// no deadline (`00000000020`, 11 digits for 20 ms, lets a 100 ms handler answer); 10 digits
/// are a budget (`0000000020` times the call out).
#[test]
fn connect_timeout_ms_of_more_than_ten_digits_is_no_budget() {
    run(async {
        let seen = Arc::new(Seen::default());
        let addr = serve(service(layer(&seen)), false).await;
        let unary = |timeout: &'static str| {
            post(
                addr,
                "/pkg.Svc/Slow",
                &[
                    ("content-type", "application/json"),
                    ("connect-protocol-version", "1"),
                    ("connect-timeout-ms", timeout),
                    ("x-work-ms", "100"),
                ],
            )
        };
        let (status, _, body) = send(addr, false, unary("00000000020")).await;
        assert_eq!((status, &body[..]), (StatusCode::OK, &b"done"[..]));
        let (status, _, _) = send(addr, false, unary("0000000020")).await;
        assert_eq!(status, StatusCode::GATEWAY_TIMEOUT);
        for bad in ["+20", "2e1", "-1", "20.0"] {
            let (status, _, _) = send(addr, false, unary(bad)).await;
            assert_eq!(status, StatusCode::OK, "{bad:?} is no budget");
        }
    });
}

/// Not Connect, answered as HTTP (the layer's 503, empty): a gRPC-Web call, a `HEAD` with
/// `connect=v1`, a `GET` without it, a plain JSON `POST`.
#[test]
fn requests_that_are_not_connect_stay_http() {
    run(async {
        let seen = Arc::new(Seen::default());
        let layer = layer(&seen).timeout(Duration::from_millis(20));
        for h2 in [false, true] {
            let addr = serve(service(layer.clone()), h2).await;
            let cases = [
                post(
                    addr,
                    "/pkg.Svc/Slow",
                    &[("content-type", "application/grpc-web+proto")],
                ),
                post(
                    addr,
                    "/pkg.Svc/Slow",
                    &[("content-type", "application/grpc-web-text")],
                ),
                request(
                    http::Method::HEAD,
                    addr,
                    "/pkg.Svc/Slow?connect=v1&encoding=json&message=%7B%7D",
                    &[],
                ),
                request(
                    http::Method::GET,
                    addr,
                    "/pkg.Svc/Slow?encoding=json&message=%7B%7D",
                    &[],
                ),
                post(
                    addr,
                    "/pkg.Svc/Slow",
                    &[("content-type", "application/json")],
                ),
            ];
            for req in cases {
                let what = format!("{} {} {:?}", req.method(), req.uri(), req.headers());
                let (status, headers, body) = send(addr, h2, req).await;
                assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{what}");
                assert!(body.is_empty(), "{what}: {body:?}");
                assert!(!headers.contains_key("content-type"), "{what}");
            }
        }
    });
}

/// A streaming call whose handler answered before its deadline: the deadline passes while the
/// body streams, and the layer neither cuts it nor appends an end-stream message of its own (a
/// second body); the call is `Answered`. (The layer does not enforce a deadline on a body
/// under way: the handler's framework must end its own stream.)
#[test]
fn a_deadline_that_passes_mid_stream_appends_nothing() {
    run(async {
        let seen = Arc::new(Seen::default());
        for (i, h2) in [false, true].into_iter().enumerate() {
            let addr = serve(service(layer(&seen)), h2).await;
            let req = post(
                addr,
                "/pkg.Svc/Stream",
                &[
                    ("content-type", "application/connect+proto"),
                    ("connect-protocol-version", "1"),
                    ("connect-timeout-ms", "20"),
                ],
            );
            let (status, _, body) = send(addr, h2, req).await;
            assert_eq!(status, StatusCode::OK);
            assert_eq!(&body[..], b"firstsecond", "h2={h2}");
            let (outcome, error, sent) = seen.end(i).await;
            assert_eq!(
                (outcome, error, sent),
                (Outcome::Answered, None, Some(StatusCode::OK))
            );
        }
    });
}

/// A Connect `GET` (`/pkg.Svc/Method?connect=v1&encoding=json&message=...`): the access line's
/// `rpc.system`, `rpc.service` and `rpc.method` are taken from the path, not the query.
#[cfg(feature = "tracing")]
#[test]
fn the_access_line_of_a_connect_get() {
    let capture = capture::capture();
    run(async {
        let layer = SharedHeadersLayer::new()
            .caller_budget(BudgetHeader::connect_timeout_ms())
            .tracing_access_log();
        let addr = serve(service(layer), false).await;
        let req = request(
            http::Method::GET,
            addr,
            "/pkg.Review/Get?connect=v1&encoding=json&message=%7B%7D",
            &[("connect-timeout-ms", "20")],
        );
        let (status, headers, body) = send(addr, false, req).await;
        assert_eq!(status, StatusCode::GATEWAY_TIMEOUT);
        assert_eq!(headers["content-type"], "application/json");
        assert_eq!(headers["content-length"], body.len().to_string());
        let lines = || {
            capture::lock(&capture.events)
                .iter()
                .filter(|e| e.get("url.path").map(String::as_str) == Some("/pkg.Review/Get"))
                .cloned()
                .collect::<Vec<_>>()
        };
        let until = std::time::Instant::now() + Duration::from_secs(5);
        while lines().is_empty() {
            assert!(std::time::Instant::now() < until, "no access line");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let lines = lines();
        assert_eq!(lines.len(), 1);
        let get = |key: &str| lines[0].get(key).map(String::as_str);
        assert_eq!(get("rpc.system"), Some("connect_rpc"));
        assert_eq!(get("rpc.service"), Some("pkg.Review"));
        assert_eq!(get("rpc.method"), Some("Get"));
        assert_eq!(get("error.type"), Some("timeout"));
    });
}

/// The metric point of a Connect answer: the status sent (504 unary, 200 streaming) and
/// `error.type` `timeout`, as the access line says.
#[cfg(feature = "opentelemetry")]
#[test]
fn the_metric_of_connect_answers() {
    let metrics = otel_memory::Metrics::new();
    let meter = metrics.meter();
    run(async {
        let layer = SharedHeadersLayer::new()
            .caller_budget(BudgetHeader::connect_timeout_ms())
            .otel_metrics(&meter);
        let addr = serve(service(layer), false).await;
        let unary = post(
            addr,
            "/pkg.Svc/Slow",
            &[
                ("content-type", "application/json"),
                ("connect-protocol-version", "1"),
                ("connect-timeout-ms", "20"),
            ],
        );
        assert_eq!(
            send(addr, false, unary).await.0,
            StatusCode::GATEWAY_TIMEOUT
        );
        let stream = post(
            addr,
            "/pkg.Svc/Slow",
            &[
                ("content-type", "application/connect+proto"),
                ("connect-timeout-ms", "20"),
            ],
        );
        assert_eq!(send(addr, false, stream).await.0, StatusCode::OK);
        let until = std::time::Instant::now() + Duration::from_secs(5);
        let read = loop {
            let read = metrics.read();
            if read.count() == 2 {
                break read;
            }
            assert!(
                std::time::Instant::now() < until,
                "no metric points: {read:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let mut statuses: Vec<_> = read
            .points
            .iter()
            .map(|(attrs, _, _)| {
                assert_eq!(attrs.get("error.type").map(String::as_str), Some("timeout"));
                attrs["http.response.status_code"].clone()
            })
            .collect();
        statuses.sort();
        assert_eq!(statuses, ["200", "504"]);
    });
}
