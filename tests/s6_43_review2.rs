//! Second hostile review of the record/views fixes (server address kept at the call, trailers
//! that end nothing, `grpc-status` only when sent, `url.query` on the span, `omit_query`
//! everywhere). Each test fails on the branch it reviews: a `grpc-status` the record keeps
//! that the client never got, or one it drops that the client did get, depending on where
//! it sits; a secret a printer still shows.
#![cfg(all(feature = "tracing", feature = "opentelemetry"))]

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::Empty;
use hyper::body::Incoming;
use opentelemetry::trace::SpanKind;
use shared_headers::server::access_log::AccessLog;
use shared_headers::server::{HeaderSelection, SharedHeadersLayer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::Layer;

#[path = "support/capture.rs"]
mod capture;
use capture::{capture, lock, wait_access_lines};

#[path = "support/sockets.rs"]
mod sockets;
use sockets::{fetch, fetch_trailers, serve};

#[path = "support/otel_spans.rs"]
mod otel_spans;
use otel_spans::{Spans, attr, of_kind};

mod support;
use support::field;

const MARK: &str = "R3v13w2-s3cr3t";

fn run(test: impl std::future::Future<Output = ()>) {
    let _ = capture();
    support::run_bounded(Duration::from_secs(30), test);
}

/// A response body: one data frame when `data`, then a trailers frame with
/// `grpc-status: 13` when `trailers`, then its end (learnt at the next poll, as a stream's:
/// no exact size hint, so hyper's HTTP/1 server chunks it).
struct Scripted {
    data: bool,
    trailers: bool,
    step: u8,
}

impl Body for Scripted {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        loop {
            self.step += 1;
            match self.step {
                1 if self.data => {
                    return Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"hello")))));
                }
                2 if self.trailers => {
                    let mut trailers = HeaderMap::new();
                    trailers.insert("grpc-status", HeaderValue::from_static("13"));
                    return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
                }
                1 | 2 => continue,
                _ => return Poll::Ready(None),
            }
        }
    }
}

/// Where the handler puts `grpc-status: 13`.
#[derive(Clone, Copy, Debug)]
enum Status {
    /// In the head, with an empty body (a trailers-only answer, as tonic sends an error).
    Head,
    /// In the body's trailers frame, announced by `trailer: grpc-status`.
    Trailers,
}

/// Serves one response with `content-type: response_type` and `grpc-status: 13` where
/// `status` says, to a `POST` with `content-type: request_type` and `te: trailers`;
/// returns the record's `grpc_status()` and the trailers the client got.
async fn grpc_status_of(
    h2: bool,
    request_type: &'static str,
    response_type: &'static str,
    status: Status,
) -> (Option<u16>, Option<HeaderMap>) {
    let ends = Arc::new(Mutex::new(Vec::new()));
    let seen = ends.clone();
    let service = SharedHeadersLayer::new()
        .on_response_end(move |end| lock(&seen).push(end.grpc_status()))
        .layer(tower::service_fn(
            move |_req: Request<Incoming>| async move {
                let mut res = Response::builder().header(http::header::CONTENT_TYPE, response_type);
                let body = match status {
                    Status::Head => {
                        res = res.header("grpc-status", "13");
                        Scripted {
                            data: false,
                            trailers: false,
                            step: 0,
                        }
                    }
                    Status::Trailers => {
                        res = res.header(http::header::TRAILER, "grpc-status");
                        Scripted {
                            data: true,
                            trailers: true,
                            step: 0,
                        }
                    }
                };
                Ok::<_, Infallible>(res.body(body).unwrap())
            },
        ));
    let addr = serve(service, h2).await;
    let req = if h2 {
        Request::post(format!("http://{addr}/pkg.Svc/Call"))
    } else {
        Request::post("/pkg.Svc/Call").header(http::header::HOST, addr.to_string())
    }
    .header(http::header::CONTENT_TYPE, request_type)
    .header(http::header::TE, "trailers")
    .body(Empty::new())
    .unwrap();
    let (got, trailers) = fetch_trailers(addr, h2, req).await.expect("an answer");
    assert_eq!(got, StatusCode::OK);
    for _ in 0..500 {
        if !lock(&ends).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let ends = lock(&ends).clone();
    assert_eq!(ends.len(), 1, "one end");
    (ends[0], trailers)
}

/// gRPC over HTTP/1.1 (`te: trailers`, chunked, `trailer: grpc-status`: hyper sends the
/// trailers, the client gets `grpc-status: 13` either way). The record keeps the status when
/// it sits in the trailers, and drops it for a trailers-only answer (the head's status is
/// read only for a request the layer calls gRPC, which needs HTTP/2): the same failure,
/// `error.type=13` or nothing, depending on where the handler put it.
#[test]
fn http11_grpc_status_in_head_and_in_trailers_agree() {
    run(async {
        let ct = "application/grpc";
        let (head, _) = grpc_status_of(false, ct, ct, Status::Head).await;
        let (trailers, client) = grpc_status_of(false, ct, ct, Status::Trailers).await;
        assert_eq!(
            client
                .as_ref()
                .and_then(|t| t.get("grpc-status"))
                .map(|v| v.as_bytes().to_vec()),
            Some(b"13".to_vec()),
            "hyper sent the trailers: the client got grpc-status 13"
        );
        assert_eq!(
            head, trailers,
            "grpc_status(): trailers-only head vs trailers, over HTTP/1.1"
        );
    });
}

/// gRPC-Web over HTTP/2 (`application/grpc-web+proto` both ways: not gRPC for the
/// request rule, gRPC for the response rule, which takes any `application/grpc…` prefix):
/// a trailers-only answer's `grpc-status` (where gRPC-Web puts a call's status) is dropped,
/// a trailers frame's is kept.
#[test]
fn grpc_web_status_in_head_and_in_trailers_agree() {
    run(async {
        let ct = "application/grpc-web+proto";
        let (head, _) = grpc_status_of(true, ct, ct, Status::Head).await;
        let (trailers, _) = grpc_status_of(true, ct, ct, Status::Trailers).await;
        assert_eq!(
            head, trailers,
            "grpc_status(): trailers-only head vs trailers, gRPC-Web over HTTP/2"
        );
    });
}

/// A gRPC call over HTTP/2 answered with a response that is not gRPC (`content-type:
/// text/plain`, as a proxy's or a fallback handler's error page) carrying `grpc-status` in
/// its head. `grpc_status`'s docs: `None` for a response that is not `application/grpc…`
/// (and a gRPC client reports the content-type, not 13). The head's status is kept: the
/// response-type rule applies to trailers only.
#[test]
fn a_non_grpc_response_has_no_grpc_status() {
    run(async {
        let (head, _) = grpc_status_of(true, "application/grpc", "text/plain", Status::Head).await;
        let (trailers, _) =
            grpc_status_of(true, "application/grpc", "text/plain", Status::Trailers).await;
        assert_eq!(trailers, None, "trailers of a text/plain response");
        assert_eq!(head, None, "head grpc-status of a text/plain response");
    });
}

/// HTTP/1.0 with `te: trailers`: hyper's HTTP/1 server never chunks for HTTP/1.0 (the body is
/// close-delimited) and so sends no trailers, whatever `te` says. The record checks
/// `te: trailers` for every version up to HTTP/1.1 and keeps `grpc-status: 13`
/// (`error.type=13`) from trailers the client never got.
#[test]
fn http10_trailers_are_never_sent_so_no_grpc_status() {
    run(async {
        let ends = Arc::new(Mutex::new(Vec::new()));
        let seen = ends.clone();
        let service = SharedHeadersLayer::new()
            .on_response_end(move |end| lock(&seen).push((end.grpc_status(), end.error_type())))
            .layer(tower::service_fn(|_req: Request<Incoming>| async {
                let res = Response::builder()
                    .header(http::header::CONTENT_TYPE, "application/grpc")
                    .header(http::header::TRAILER, "grpc-status")
                    .body(Scripted {
                        data: true,
                        trailers: true,
                        step: 0,
                    })
                    .unwrap();
                Ok::<_, Infallible>(res)
            }));
        let addr = serve(service, false).await;
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let head = format!(
            "POST /pkg.Svc/Call HTTP/1.0\r\nhost: {addr}\r\ncontent-type: application/grpc\r\nte: trailers\r\ncontent-length: 0\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let _ =
            tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
        let answer = String::from_utf8_lossy(&answer).to_ascii_lowercase();
        assert!(answer.contains(" 200 "), "{answer}");
        assert!(
            !answer.contains("grpc-status"),
            "hyper sent no grpc-status: {answer}"
        );
        for _ in 0..500 {
            if !lock(&ends).is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let ends = lock(&ends).clone();
        assert_eq!(ends.len(), 1, "one end");
        assert_eq!(
            ends[0],
            (None, None),
            "grpc_status/error_type from trailers an HTTP/1.0 client never got"
        );
    });
}

/// `redact_query_params(["mytok"])` makes `mytok` a credential for every printer, path
/// parameters included (`/a;mytok=…`). Adding `omit_query` (to print less) replaces the rule
/// with one that has no extra names: `url.path` on the line and the server span, and the
/// record's `Debug`, now print the path parameter's value in clear.
#[test]
fn omit_query_keeps_the_logs_credential_names_for_path_parameters() {
    run(async {
        let spans = Spans::new();
        let debug = Arc::new(Mutex::new(Vec::new()));
        let dbg = debug.clone();
        let service = SharedHeadersLayer::new()
            .propagate(shared_headers::context::Propagation::new().w3c())
            .otel_tracer(spans.tracer("server"))
            .access_log(AccessLog::new().redact_query_params(["mytok"]).omit_query())
            .on_response_end(move |end| lock(&dbg).push(format!("{end:?}")))
            .layer(tower::service_fn(|_req: Request<Incoming>| async {
                Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
            }));
        let addr = serve(service, false).await;
        let path = format!("/review2/omit;mytok={MARK}");
        let req = Request::get(format!("{path}?page=2"))
            .header(http::header::HOST, addr.to_string())
            .body(Empty::new())
            .unwrap();
        assert_eq!(fetch(addr, false, req).await, Some(StatusCode::OK));
        let lines = wait_access_lines(
            |e| field(e, "url.path").is_some_and(|p| p.starts_with("/review2/omit")),
            1,
        )
        .await;
        assert_eq!(lines.len(), 1);
        let finished = spans.wait_for(1).await;
        let server = of_kind(&finished, SpanKind::Server);
        assert_eq!(server.len(), 1);
        let mut outputs = vec![
            format!("line url.path: {:?}", field(&lines[0], "url.path")),
            format!("span url.path: {:?}", attr(server[0], "url.path")),
        ];
        outputs.extend(
            lock(&debug)
                .iter()
                .map(|d| format!("ResponseEnd Debug: {d}")),
        );
        for output in outputs {
            assert!(!output.contains(MARK), "a secret printed: {output}");
        }
    });
}

/// The access log's own credential names (`redact_query_params`) redact a `referer`'s query
/// on the line (`http.request.header.referer`, and the header list); the record's `Debug`
/// (the request snapshot it holds) prints the same referer by the default rule alone: the
/// value the line hides is in clear there.
#[test]
fn the_records_debug_redacts_a_referer_by_the_logs_names() {
    run(async {
        let debug = Arc::new(Mutex::new(Vec::new()));
        let dbg = debug.clone();
        let service = SharedHeadersLayer::new()
            .access_log(
                AccessLog::new()
                    .redact_query_params(["mytok"])
                    .request_headers(HeaderSelection::all()),
            )
            .on_response_end(move |end| lock(&dbg).push(format!("{end:?}")))
            .layer(tower::service_fn(|_req: Request<Incoming>| async {
                Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
            }));
        let addr = serve(service, false).await;
        let path = "/review2/referer";
        let req = Request::get(path)
            .header(http::header::HOST, addr.to_string())
            .header(
                http::header::REFERER,
                format!("https://app.example/page?mytok={MARK}"),
            )
            .body(Empty::new())
            .unwrap();
        assert_eq!(fetch(addr, false, req).await, Some(StatusCode::OK));
        let lines = wait_access_lines(|e| field(e, "url.path") == Some(path), 1).await;
        assert_eq!(lines.len(), 1);
        assert!(
            !format!("{:?}", lines[0]).contains(MARK),
            "the line redacts it: {:?}",
            lines[0]
        );
        let debug = lock(&debug).clone();
        assert_eq!(debug.len(), 1);
        assert!(
            !debug[0].contains(MARK),
            "the record's Debug prints what the line hides: {}",
            debug[0]
        );
    });
}

/// An empty `host` (HTTP/1.1 allows it for a target without authority): there is no
/// server address; the views print `server.address=""`.
#[test]
fn an_empty_host_is_no_server_address() {
    run(async {
        let spans = Spans::new();
        let fourth = Arc::new(Mutex::new(Vec::new()));
        let seen = fourth.clone();
        let service = SharedHeadersLayer::new()
            .propagate(shared_headers::context::Propagation::new().w3c())
            .otel_tracer(spans.tracer("server"))
            .access_log(AccessLog::new())
            .on_response_end(move |end| {
                lock(&seen).push(end.server_address().map(|(a, p)| (a.into_owned(), p)))
            })
            .layer(tower::service_fn(|_req: Request<Incoming>| async {
                Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
            }));
        let addr = serve(service, false).await;
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /review2/empty-host HTTP/1.1\r\nhost:\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        let _ =
            tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
        assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"));
        let lines =
            wait_access_lines(|e| field(e, "url.path") == Some("/review2/empty-host"), 1).await;
        let finished = spans.wait_for(1).await;
        let server = of_kind(&finished, SpanKind::Server);
        let views = (
            lock(&fourth).clone(),
            field(&lines[0], "server.address").map(str::to_owned),
            attr(server[0], "server.address"),
        );
        assert_eq!(
            views,
            (vec![None], None, None),
            "server.address of an empty host: (ResponseEnd::server_address, line, span)"
        );
    });
}
