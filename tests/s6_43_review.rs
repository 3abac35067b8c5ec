//! Hostile review of the record/views change: cases where the access line, `ResponseEnd`'s
//! accessors and the OpenTelemetry server span disagree, a secret a printer still shows, and a
//! body end reported too early. Each test fails on the branch it reviews.
#![cfg(all(feature = "tracing", feature = "opentelemetry"))]

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use opentelemetry::trace::SpanKind;
use shared_headers::Exchange;
use shared_headers::context::Propagation;
use shared_headers::server::access_log::AccessLog;
use shared_headers::server::{Ending, HeaderSelection, SharedHeadersLayer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::{Layer, ServiceExt};

#[path = "support/capture.rs"]
mod capture;
use capture::{capture, lock, wait_access_lines};

#[path = "support/sockets.rs"]
mod sockets;
use sockets::{BoxError, fetch, serve};

#[path = "support/otel_spans.rs"]
mod otel_spans;
use otel_spans::{Spans, attr, of_kind};

mod support;
use support::field;

const MARK: &str = "R3v13w-s3cr3t";

fn run(test: impl std::future::Future<Output = ()>) {
    let _ = capture();
    support::run_bounded(Duration::from_secs(30), test);
}

/// `server.address` / `server.port` of the line, the server span and the record's accessor.
#[derive(Debug, PartialEq)]
struct Address {
    address: Option<String>,
    port: Option<String>,
}

/// The layer with the access line, the server span (started at the call: `propagate`) and
/// a fourth view reading `ResponseEnd::server_address`.
fn layer(
    spans: &Spans,
    fourth: &Arc<Mutex<Vec<Address>>>,
    base: SharedHeadersLayer,
) -> SharedHeadersLayer {
    let fourth = fourth.clone();
    base.propagate(Propagation::new().request_id().w3c())
        .access_log(AccessLog::new())
        .otel_tracer(spans.tracer("server"))
        .on_response_end(move |end| {
            let address = end.server_address();
            lock(&fourth).push(Address {
                address: address.as_ref().map(|(a, _)| a.to_string()),
                port: address.and_then(|(_, p)| p).map(|p| p.to_string()),
            });
        })
}

async fn ok(_req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(b"ok"))))
}

/// The three views of `server.address` for the one request to `path`.
async fn three_views(
    spans: &Spans,
    fourth: &Arc<Mutex<Vec<Address>>>,
    path: &str,
) -> (Address, Address, Address) {
    let lines = wait_access_lines(|e| field(e, "url.path") == Some(path), 1).await;
    assert_eq!(lines.len(), 1, "one line for {path}");
    let finished = spans.wait_for(1).await;
    let server = of_kind(&finished, SpanKind::Server);
    assert_eq!(server.len(), 1, "one server span");
    let line = Address {
        address: field(&lines[0], "server.address").map(str::to_owned),
        port: field(&lines[0], "server.port").map(str::to_owned),
    };
    let span = Address {
        address: attr(server[0], "server.address"),
        port: attr(server[0], "server.port"),
    };
    let record = lock(fourth).pop().expect("the fourth view");
    (line, span, record)
}

/// `copy_request_headers(HeaderSelection::none())` (documented as a cost saving): the server
/// span reads `host` from the request as received, the line and `ResponseEnd::server_address`
/// from the request handle, which holds no copy. Over HTTP/1.1 (no authority in the URI) the
/// span says `server.address=127.0.0.1`, the line and the record say nothing.
#[test]
fn server_address_agrees_when_request_headers_are_not_copied() {
    run(async {
        let spans = Spans::new();
        let fourth = Arc::default();
        let base = SharedHeadersLayer::new().copy_request_headers(HeaderSelection::none());
        let service = layer(&spans, &fourth, base).layer(tower::service_fn(ok));
        let addr = serve(service, false).await;
        let path = "/review/none-copied";
        // Origin-form, as browsers and most clients send it: the server learns its
        // address from `host` alone.
        let req = Request::get(path)
            .header(http::header::HOST, addr.to_string())
            .body(Empty::new())
            .unwrap();
        assert_eq!(fetch(addr, false, req).await, Some(StatusCode::OK));
        let (line, span, record) = three_views(&spans, &fourth, path).await;
        assert_eq!(
            line, span,
            "line vs server span: server.address/server.port"
        );
        assert_eq!(record, span, "ResponseEnd::server_address vs server span");
    });
}

/// A handler (or an inner layer normalizing `host`) writes the request handle's `host`: the
/// line and `ResponseEnd::server_address` print the written value, the server span the
/// received one: two answers to "which server was asked" for one request.
#[test]
fn server_address_agrees_when_the_handler_rewrites_host() {
    run(async {
        let spans = Spans::new();
        let fourth = Arc::default();
        let rewrite = tower::service_fn(|req: Request<Incoming>| async move {
            let exchange = req.extensions().get::<Exchange>().unwrap();
            let _ = exchange.request().insert(
                http::header::HOST,
                HeaderValue::from_static("rewritten.example:9"),
            );
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
        });
        let service = layer(&spans, &fourth, SharedHeadersLayer::new()).layer(rewrite);
        let addr = serve(service, false).await;
        let path = "/review/rewritten-host";
        // Origin-form, as browsers and most clients send it: the server learns its
        // address from `host` alone.
        let req = Request::get(path)
            .header(http::header::HOST, addr.to_string())
            .body(Empty::new())
            .unwrap();
        assert_eq!(fetch(addr, false, req).await, Some(StatusCode::OK));
        let (line, span, record) = three_views(&spans, &fourth, path).await;
        assert_eq!(
            line, span,
            "line vs server span: server.address/server.port"
        );
        assert_eq!(record, span, "ResponseEnd::server_address vs server span");
    });
}

/// A Connect GET (`?connect=v1`, HTTP/1.1) whose path carries a credential path parameter:
/// `url.path` redacts it, but the line's `rpc.method` (and a gRPC call's, the same code)
/// prints the method segment raw, `;jsessionid=` value and all.
#[test]
fn rpc_method_hides_a_credential_path_parameter() {
    run(async {
        let spans = Spans::new();
        let fourth = Arc::default();
        let service =
            layer(&spans, &fourth, SharedHeadersLayer::new()).layer(tower::service_fn(ok));
        let addr = serve(service, false).await;
        let path = format!("/pkg.Svc/Get;jsessionid={MARK}");
        let req = Request::get(format!(
            "http://{addr}{path}?connect=v1&encoding=json&message=%7B%7D"
        ))
        .body(Empty::new())
        .unwrap();
        assert_eq!(fetch(addr, false, req).await, Some(StatusCode::OK));
        let lines = wait_access_lines(
            |e| field(e, "url.path").is_some_and(|p| p.starts_with("/pkg.Svc/Get;")),
            1,
        )
        .await;
        assert_eq!(lines.len(), 1);
        let line = &lines[0];
        assert_eq!(
            field(line, "url.path"),
            Some("/pkg.Svc/Get;jsessionid=[redacted]"),
            "url.path is redacted"
        );
        assert_eq!(field(line, "rpc.system"), Some("connect_rpc"), "{line:?}");
        for (name, value) in line {
            assert!(
                !value.contains(MARK),
                "a secret printed in the access line's {name}: {value}"
            );
        }
    });
}

/// A body that yields a data frame, a trailers frame, then an error.
struct TrailersThenError {
    step: u8,
}

impl Body for TrailersThenError {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.step += 1;
        Poll::Ready(match self.step {
            1 => Some(Ok(Frame::data(Bytes::from_static(b"hello")))),
            2 => {
                let mut trailers = HeaderMap::new();
                trailers.insert("x-checksum", HeaderValue::from_static("1"));
                Some(Ok(Frame::trailers(trailers)))
            }
            3 => Some(Err("failed after its trailers".into())),
            _ => None,
        })
    }
}

/// In process (`oneshot` + `collect`, as the crate's own docs call the service), a consumer
/// that polls a body past its trailers frame (http-body-util's `Collect` does) gets the
/// body's error; the record says the body completed, because a trailers frame now ends the
/// tracked body before the consumer is done with it. Before the change the error was seen
/// (`Ending::Aborted`).
#[test]
fn a_body_that_fails_after_its_trailers_is_not_completed() {
    run(async {
        let endings = Arc::new(Mutex::new(Vec::new()));
        let seen = endings.clone();
        let service = SharedHeadersLayer::new()
            .on_response_end(move |end| lock(&seen).push((end.ending(), end.error_type())))
            .layer(tower::service_fn(|_req: Request<()>| async {
                Ok::<_, Infallible>(Response::new(TrailersThenError { step: 0 }))
            }));
        let res = service.oneshot(Request::new(())).await.unwrap();
        let collected = res.into_body().collect().await;
        assert!(collected.is_err(), "the consumer got the body's error");
        let endings = lock(&endings).clone();
        assert_eq!(endings.len(), 1, "{endings:?}");
        assert_ne!(
            endings[0].0,
            Ending::Completed,
            "the record says completed, the consumer got an error: {endings:?}"
        );
    });
}

/// A `host` header carrying userinfo (`u:PASS@host`, as a client that copies a URL's
/// authority into `host` sends it; with an absolute-form target carrying the same): the
/// access line's header list redacts the userinfo, the URI's `Debug` redacts it, but the
/// record's `Debug` (`ResponseEnd`, `Committed`: the request snapshot) prints the password.
/// One secret, printers that disagree on it.
#[test]
fn host_userinfo_reaches_no_printer() {
    run(async {
        let spans = Spans::new();
        let fourth = Arc::default();
        let debug = Arc::new(Mutex::new(Vec::new()));
        let dbg = debug.clone();
        let base = SharedHeadersLayer::new().on_response_end(move |end| {
            lock(&dbg).push(format!("{end:?}"));
        });
        let service = layer(&spans, &fourth, base)
            .access_log(
                AccessLog::new()
                    .request_headers(HeaderSelection::all())
                    .response_headers(HeaderSelection::all()),
            )
            .layer(tower::service_fn(ok));
        let addr = serve(service, false).await;
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let head = format!(
            "GET http://u:{MARK}-ui@{addr}/review/userinfo HTTP/1.1\r\nhost: u:{MARK}-host@{addr}\r\nconnection: close\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        let lines =
            wait_access_lines(|e| field(e, "url.path") == Some("/review/userinfo"), 1).await;
        assert_eq!(lines.len(), 1);
        let finished = spans.wait_for(1).await;
        let mut outputs: Vec<String> = lines.iter().map(|l| format!("line: {l:?}")).collect();
        for span in &finished {
            outputs.push(format!("span: {} {:?}", span.name, span.attributes));
        }
        outputs.extend(
            lock(&debug)
                .iter()
                .map(|d| format!("ResponseEnd Debug: {d}")),
        );
        assert!(outputs.iter().any(|o| o.starts_with("ResponseEnd")));
        for output in outputs {
            assert!(!output.contains(MARK), "a secret printed: {output}");
        }
    });
}

/// A body of one data frame and a trailers frame carrying `grpc-status: 13` (its end known
/// at its next poll, as a stream's).
struct DataThenGrpcTrailers {
    step: u8,
}

impl Body for DataThenGrpcTrailers {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.step += 1;
        Poll::Ready(match self.step {
            1 => Some(Ok(Frame::data(Bytes::from_static(b"hello")))),
            2 => {
                let mut trailers = HeaderMap::new();
                trailers.insert("grpc-status", HeaderValue::from_static("13"));
                Some(Ok(Frame::trailers(trailers)))
            }
            _ => None,
        })
    }
}

/// HTTP/1.1, a plain `GET` (not gRPC: no gRPC content-type, no `te: trailers`), answered with a
/// chunked body that ends in trailers holding `grpc-status: 13`. hyper's HTTP/1 server sends
/// no trailers here (the client sent no `TE: trailers`, the head declares no `Trailer`): the
/// client gets a plain 200 and `hello`. The record now ends the body at the trailers frame and
/// reports `grpc_status() == Some(13)` and `error.type = "13"` on the line, the span and the
/// metric: a failure nobody was told of, on a response `grpc_status`'s docs say has none.
#[test]
fn trailers_hyper_never_sent_over_http1_are_no_grpc_status() {
    run(async {
        let spans = Spans::new();
        let ends = Arc::new(Mutex::new(Vec::new()));
        let seen = ends.clone();
        let service = SharedHeadersLayer::new()
            .access_log(AccessLog::new())
            .otel_tracer(spans.tracer("server"))
            .on_response_end(move |end| {
                lock(&seen).push((end.grpc_status(), end.error_type(), end.ending()))
            })
            .layer(tower::service_fn(|_req: Request<Incoming>| async {
                Ok::<_, Infallible>(Response::new(DataThenGrpcTrailers { step: 0 }))
            }));
        let addr = serve(service, false).await;
        let path = "/review/h1-trailers";
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .unwrap();
        let conn = tokio::spawn(conn);
        let req = Request::get(path)
            .header(http::header::HOST, addr.to_string())
            .body(Empty::<Bytes>::new())
            .unwrap();
        let res = sender.send_request(req).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let collected = res.into_body().collect().await.unwrap();
        let client_trailers = collected.trailers().cloned();
        assert_eq!(collected.to_bytes(), "hello");
        conn.abort();
        assert!(client_trailers.is_none(), "hyper sent no trailers");
        let lines = wait_access_lines(|e| field(e, "url.path") == Some(path), 1).await;
        assert_eq!(lines.len(), 1);
        let ends = lock(&ends).clone();
        assert_eq!(ends.len(), 1);
        assert_eq!(
            (ends[0].0, ends[0].1),
            (None, None),
            "the record's grpc_status/error_type for trailers the client never got ({:?}); line: {:?}",
            ends[0],
            lines[0]
        );
    });
}
