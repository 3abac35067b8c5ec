//! The layer's own answers to Connect calls over sockets (hyper server and client on
//! 127.0.0.1:0, HTTP/1.1 and h2c):
//!
//! * a unary call (`connect-protocol-version: 1`) whose `connect-timeout-ms` passes gets the
//!   Connect specification's status for `deadline_exceeded` (504), `content-type:
//!   application/json` and the JSON error `{"code":"deadline_exceeded",...}`;
//! * a streaming call (`content-type: application/connect+proto`) gets HTTP 200, its own
//!   content type and one end-stream message (flags `0x02`, the length, the JSON error);
//! * an admission refusal is answered in the same form (`unavailable`: try elsewhere now);
//! * a caught panic is Connect's `internal` (500);
//! * a plain HTTP request and a gRPC call are answered as before (an empty 503; a trailers-only
//!   `grpc-status: 4`);
//! * the access line's outcome and `error.type` are the ones of the HTTP answer.
//!
//! The handler sleeps 2 s against budgets of 5 ms (400x); no timing is asserted closer.
#![cfg(feature = "server")]

#[cfg(feature = "tracing")]
#[path = "support/capture.rs"]
mod capture;
#[path = "support/server.rs"]
mod server;
#[path = "support/sockets.rs"]
mod sockets;
mod support;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use server::{Body, Svc, run, serve};
use shared_headers::Outcome;
use shared_headers::deadline::BudgetHeader;
use shared_headers::server::{Admission, SharedHeadersLayer};
use sockets::send;
use tower::util::BoxCloneService;
use tower::{Layer, service_fn};

/// An end report: the outcome, `error.type` and the status sent.
type End = (Outcome, Option<&'static str>, Option<StatusCode>);

/// What the handler and the end reports saw.
#[derive(Default)]
struct Seen {
    started: AtomicUsize,
    ends: Mutex<Vec<End>>,
}

impl Seen {
    /// The `n`th end report (waiting for it, bounded).
    async fn end(&self, n: usize) -> End {
        support::nth_end(&self.ends, n).await
    }
}

/// A server whose handler sleeps `x-work-ms` (default 2 s) and panics on `/panic`, under the
/// layer with Connect's and gRPC's budget headers (and `admission`).
fn server(admission: Option<Admission>, seen: Arc<Seen>) -> Svc {
    let mut layer = SharedHeadersLayer::new()
        .caller_budget(BudgetHeader::connect_timeout_ms())
        .caller_budget(BudgetHeader::grpc_timeout());
    if let Some(admission) = admission {
        layer = layer.admission(admission);
    }
    let ends = seen.clone();
    let layer = layer.on_response_end(move |end| {
        ends.ends.lock().unwrap().push((
            end.committed().outcome(),
            end.error_type(),
            end.status_sent(),
        ))
    });
    let handler = service_fn(move |req: Request<Incoming>| {
        let seen = seen.clone();
        async move {
            seen.started.fetch_add(1, Ordering::SeqCst);
            if req.uri().path() == "/panic" {
                panic!("handler panicked");
            }
            let ms = req
                .headers()
                .get("x-work-ms")
                .and_then(|v| v.to_str().ok()?.parse().ok())
                .unwrap_or(2000);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok::<_, Infallible>(Response::new(Body::from("done")))
        }
    });
    BoxCloneService::new(layer.layer(handler))
}

fn post(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Request<Full<Bytes>> {
    let mut req = Request::post(format!("http://{addr}{path}"));
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    req.body(Full::new(Bytes::from_static(b"{}"))).unwrap()
}

/// The string value of `"key":"..."` in a flat or nested JSON object (the layer's answers
/// escape nothing), by hand: the crate has no JSON dependency.
fn field<'a>(json: &'a str, key: &str) -> Option<&'a str> {
    let start = json.find(&format!("\"{key}\":\""))? + key.len() + 4;
    let len = json[start..].find('"')?;
    Some(&json[start..start + len])
}

/// Checks a unary Connect error answer and returns its message.
fn unary_error(
    status: StatusCode,
    headers: &HeaderMap,
    body: &Bytes,
    want: (StatusCode, &str),
) -> String {
    assert_eq!(status, want.0, "body: {body:?}");
    assert_eq!(headers["content-type"], "application/json");
    let json = std::str::from_utf8(body).unwrap();
    assert!(json.starts_with('{') && json.ends_with('}'), "{json}");
    assert_eq!(field(json, "code"), Some(want.1), "{json}");
    field(json, "message").expect("a message").to_owned()
}

const UNARY: &[(&str, &str)] = &[
    ("content-type", "application/json"),
    ("connect-protocol-version", "1"),
    ("connect-timeout-ms", "5"),
];

#[test]
fn a_unary_connect_call_past_its_deadline_gets_deadline_exceeded_as_json() {
    run(async {
        let seen = Arc::new(Seen::default());
        for (i, h2) in [false, true].into_iter().enumerate() {
            let addr = serve(server(None, seen.clone()), h2).await;
            let at = Instant::now();
            let (status, headers, body) =
                send(addr, h2, post(addr, "/pkg.Svc/Method", UNARY)).await;
            let took = at.elapsed();
            println!("h2={h2}: {status} {body:?} in {took:?}");
            assert!(
                took < Duration::from_millis(1500),
                "answered at the deadline: {took:?}"
            );
            let message = unary_error(
                status,
                &headers,
                &body,
                (StatusCode::GATEWAY_TIMEOUT, "deadline_exceeded"),
            );
            assert_eq!(message, "deadline exceeded");
            assert_eq!(headers["content-length"], body.len().to_string());
            // The line: the outcome and `error.type` of the HTTP answer, the status sent.
            assert_eq!(
                seen.end(i).await,
                (
                    Outcome::TimedOut,
                    Some("timeout"),
                    Some(StatusCode::GATEWAY_TIMEOUT)
                )
            );
        }
    });
}

#[test]
fn a_unary_connect_get_past_its_deadline_gets_deadline_exceeded_as_json() {
    run(async {
        let seen = Arc::new(Seen::default());
        let addr = serve(server(None, seen.clone()), false).await;
        let req = Request::get(format!(
            "http://{addr}/pkg.Svc/Method?encoding=json&message=%7B%7D&connect=v1"
        ))
        .header("connect-timeout-ms", "5")
        .body(Full::new(Bytes::new()))
        .unwrap();
        let (status, headers, body) = send(addr, false, req).await;
        unary_error(
            status,
            &headers,
            &body,
            (StatusCode::GATEWAY_TIMEOUT, "deadline_exceeded"),
        );
    });
}

#[test]
fn a_streaming_connect_call_past_its_deadline_gets_an_end_stream_message() {
    run(async {
        let seen = Arc::new(Seen::default());
        for (i, h2) in [false, true].into_iter().enumerate() {
            let addr = serve(server(None, seen.clone()), h2).await;
            let req = post(
                addr,
                "/pkg.Svc/Stream",
                &[
                    ("content-type", "application/connect+proto"),
                    ("connect-protocol-version", "1"),
                    ("connect-timeout-ms", "5"),
                ],
            );
            let (status, headers, body) = send(addr, h2, req).await;
            println!("h2={h2}: {status} {body:?}");
            assert_eq!(status, StatusCode::OK);
            assert_eq!(headers["content-type"], "application/connect+proto");
            // One envelope: flags, 4-byte big-endian length, then exactly that much JSON.
            assert!(body.len() > 5, "{body:?}");
            assert_eq!(body[0], 0x02, "end-stream flag, uncompressed");
            let length = u32::from_be_bytes(body[1..5].try_into().unwrap()) as usize;
            assert_eq!(length, body.len() - 5, "one envelope and nothing after it");
            let json = std::str::from_utf8(&body[5..]).unwrap();
            assert!(json.starts_with("{\"error\":{"), "{json}");
            assert_eq!(field(json, "code"), Some("deadline_exceeded"), "{json}");
            assert_eq!(field(json, "message"), Some("deadline exceeded"), "{json}");
            assert_eq!(
                seen.end(i).await,
                (Outcome::TimedOut, Some("timeout"), Some(StatusCode::OK))
            );
        }
    });
}

#[test]
fn an_admission_refusal_of_a_connect_call_is_unavailable_as_json() {
    run(async {
        let seen = Arc::new(Seen::default());
        let admission = Admission::new().warm_up(10);
        let addr = serve(server(Some(admission.clone()), seen.clone()), false).await;
        // The route's estimate: 12 answers of 50 ms (a budget of 10 s).
        for _ in 0..12 {
            let req = post(
                addr,
                "/pkg.Svc/Method",
                &[
                    ("content-type", "application/json"),
                    ("connect-protocol-version", "1"),
                    ("connect-timeout-ms", "10000"),
                    ("x-work-ms", "50"),
                ],
            );
            assert_eq!(send(addr, false, req).await.0, StatusCode::OK);
        }
        let before = seen.started.load(Ordering::SeqCst);
        let (status, headers, body) = send(addr, false, post(addr, "/pkg.Svc/Method", UNARY)).await;
        println!("shed: {status} {body:?}");
        let message = unary_error(
            status,
            &headers,
            &body,
            (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
        );
        assert_eq!(message, "refused: overloaded or the deadline cannot be met");
        assert_eq!(seen.started.load(Ordering::SeqCst), before, "never started");
        assert_eq!(
            SharedHeadersLayer::new()
                .admission(admission.clone())
                .stats()
                .admission_counts()
                .shed,
            1
        );
        assert_eq!(
            seen.end(12).await,
            (
                Outcome::Shed,
                Some("deadline_unmeetable"),
                Some(StatusCode::SERVICE_UNAVAILABLE)
            )
        );
    });
}

#[test]
fn a_caught_panic_of_a_connect_call_is_internal() {
    run(async {
        let seen = Arc::new(Seen::default());
        for h2 in [false, true] {
            let addr = serve(server(None, seen.clone()), h2).await;
            // No budget: a panic hook that captures a backtrace takes longer than 5 ms.
            let req = post(
                addr,
                "/panic",
                &[
                    ("content-type", "application/json"),
                    ("connect-protocol-version", "1"),
                ],
            );
            let (status, headers, body) = send(addr, h2, req).await;
            unary_error(
                status,
                &headers,
                &body,
                (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
            );
        }
    });
}

#[test]
fn a_plain_http_request_is_answered_as_before() {
    run(async {
        let seen = Arc::new(Seen::default());
        for (i, h2) in [false, true].into_iter().enumerate() {
            let addr = serve(server(None, seen.clone()), h2).await;
            // JSON, but no `connect-protocol-version`: an ordinary HTTP request.
            let req = post(
                addr,
                "/api/thing",
                &[
                    ("content-type", "application/json"),
                    ("connect-timeout-ms", "5"),
                ],
            );
            let (status, headers, body) = send(addr, h2, req).await;
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
            assert!(body.is_empty(), "{body:?}");
            assert!(!headers.contains_key("content-type"));
            assert_eq!(
                seen.end(i).await,
                (
                    Outcome::TimedOut,
                    Some("timeout"),
                    Some(StatusCode::SERVICE_UNAVAILABLE)
                )
            );
        }
    });
}

#[test]
fn a_grpc_call_is_answered_as_before() {
    run(async {
        let seen = Arc::new(Seen::default());
        let addr = serve(server(None, seen.clone()), true).await;
        let req = post(
            addr,
            "/pkg.Svc/Method",
            &[
                ("content-type", "application/grpc"),
                ("te", "trailers"),
                ("grpc-timeout", "5m"),
            ],
        );
        let (status, headers, body) = send(addr, true, req).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers["grpc-status"], "4");
        assert_eq!(headers["content-type"], "application/grpc");
        assert!(body.is_empty(), "{body:?}");
        assert_eq!(
            seen.end(0).await,
            (Outcome::TimedOut, Some("timeout"), Some(StatusCode::OK))
        );
    });
}

/// The access line of a Connect answer: one line, the outcome and `error.type` of the HTTP
/// answer, `rpc.system` `connect_rpc` (as `grpc` for a gRPC call).
#[cfg(feature = "tracing")]
#[test]
fn the_access_line_of_a_connect_answer() {
    let capture = capture::capture();
    run(async {
        let layer = SharedHeadersLayer::new()
            .caller_budget(BudgetHeader::connect_timeout_ms())
            .tracing_access_log();
        let service =
            BoxCloneService::new(layer.layer(service_fn(|_req: Request<Incoming>| async {
                tokio::time::sleep(Duration::from_secs(2)).await;
                Ok::<_, Infallible>(Response::new(Body::from("done")))
            })));
        let addr = serve(service, false).await;
        let (status, _, _) = send(addr, false, post(addr, "/pkg.Line/Method", UNARY)).await;
        assert_eq!(status, StatusCode::GATEWAY_TIMEOUT);
        let lines = || {
            capture::lock(&capture.events)
                .iter()
                .filter(|e| e.get("url.path").map(String::as_str) == Some("/pkg.Line/Method"))
                .cloned()
                .collect::<Vec<_>>()
        };
        let until = Instant::now() + Duration::from_secs(5);
        while lines().is_empty() {
            assert!(Instant::now() < until, "no access line");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // No second line comes later.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let lines = lines();
        assert_eq!(lines.len(), 1, "one line per request");
        let line = &lines[0];
        println!("{line:?}");
        let get = |key: &str| line.get(key).map(String::as_str);
        assert_eq!(get("rpc.system"), Some("connect_rpc"));
        assert_eq!(get("rpc.service"), Some("pkg.Line"));
        assert_eq!(get("rpc.method"), Some("Method"));
        assert_eq!(get("error.type"), Some("timeout"));
        assert_eq!(get("http.response.status_code"), Some("504"));
    });
}
