//! One record of each request, and its views: the access line, the OpenTelemetry server span,
//! the `http.server.request.duration` point, and a fourth view built here from the public API
//! alone (`on_response_end`'s `ResponseEnd`), over real sockets (HTTP/1.1 and HTTP/2 on
//! 127.0.0.1:0).
//!
//! * **The matrix**: every body kind (empty, full, chunked stream, `content-length` stream,
//!   `ServeFile`, a body that panics, a body that errors) answered and as a handler's 500, and
//!   the outcomes without a body of the handler's (timed out, panicked in the handler, client
//!   hang-up, an outer timeout, dropped by an outer service before its first poll), on both
//!   protocols: each signal exists exactly once, and every attribute two of them share has
//!   the same value in all of them.
//! * **The secrets**: one request carrying every form a secret can take (credential-looking
//!   headers under `HeaderSelection::all()`, a path parameter, URL-valued and JSON-valued query
//!   parameters raw and encoded, OAuth/SAML/CAS names, a referer with userinfo, a `location`
//!   answered), sent through the client layer (its span's `url.full`) to the server layer:
//!   no captured event or span field, exported span attribute, metric attribute or `Debug` of
//!   the record holds one.
#![cfg(all(feature = "tracing", feature = "opentelemetry", feature = "client"))]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Request, Response, StatusCode, Version};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client as LegacyClient;
use hyper_util::rt::TokioExecutor;
use opentelemetry::trace::SpanKind;
use shared_headers::client::PropagateLayer;
use shared_headers::context::Propagation;
use shared_headers::deadline::BudgetHeader;
use shared_headers::server::access_log::AccessLog;
use shared_headers::server::{
    Admission, Ending, HeaderSelection, ResponseBody, SharedHeadersLayer,
};
use tower::{Layer, Service, ServiceExt};

#[path = "support/capture.rs"]
mod capture;
use capture::{capture, lock, wait_access_lines};

#[path = "support/sockets.rs"]
mod sockets;
use sockets::{BoxError, fetch, fetch_trailers, hang_up, origin_form, serve};

#[path = "support/otel_spans.rs"]
mod otel_spans;
use otel_spans::{Spans, attr, of_kind};

#[path = "support/otel_memory.rs"]
mod otel_memory;
use otel_memory::Metrics;

#[path = "support/script_body.rs"]
mod script_body;
use script_body::{Script, Step};

mod support;
use support::field;

type Body = UnsyncBoxBody<Bytes, BoxError>;

fn run(test: impl std::future::Future<Output = ()>) {
    let _ = capture();
    support::run_bounded(Duration::from_secs(60), test);
}

// ---- the fourth view ----

/// What the fourth view keeps of a request: built from the public API alone.
#[derive(Debug, Clone, PartialEq)]
struct View {
    method: &'static str,
    scheme: &'static str,
    version: &'static str,
    status: Option<u16>,
    error: Option<&'static str>,
    bytes: u64,
    duration: f64,
    ending: Ending,
    panic: Option<String>,
    path: String,
    request_id: Option<String>,
    /// The printers' facts, from the record's accessors: `server.address`, `server.port`,
    /// `url.path` and `url.query` (redacted), `rpc.grpc.status_code`.
    server_address: Option<String>,
    server_port: Option<u16>,
    url_path: Option<String>,
    url_query: Option<String>,
    grpc_status: Option<u16>,
    trace_id: Option<String>,
    span_id: Option<String>,
}

fn view_of(end: &shared_headers::server::ResponseEnd) -> View {
    let committed = end.committed();
    View {
        method: end.otel_method().unwrap_or("_OTHER"),
        scheme: end.url_scheme(),
        version: match committed.version() {
            Some(Version::HTTP_11) => "1.1",
            Some(Version::HTTP_2) => "2",
            _ => "?",
        },
        status: end.status_sent().map(|s| s.as_u16()),
        error: end.error_type(),
        bytes: end.bytes_sent(),
        duration: end.duration().as_secs_f64(),
        ending: end.ending(),
        panic: end.panic_message().map(str::to_owned),
        path: committed
            .uri()
            .expect("served by the layer")
            .path()
            .to_owned(),
        request_id: end
            .committed()
            .context()
            .and_then(|c| c.request_id())
            .map(str::to_owned),
        server_address: end
            .server_address()
            .map(|(address, _)| address.into_owned()),
        server_port: end.server_address().and_then(|(_, port)| port),
        url_path: end.url_path().map(|path| path.to_string()),
        url_query: end.url_query().map(|query| query.to_string()),
        grpc_status: end.grpc_status(),
        trace_id: committed
            .context()
            .and_then(|c| c.trace_id())
            .map(str::to_owned),
        span_id: committed
            .context()
            .and_then(|c| c.span_id())
            .map(str::to_owned),
    }
}

// ---- the server ----

const PANIC: &str = "a body's own bug";

/// The value of a credential query parameter of the matrix's requests: no view prints it.
const QUERY_SECRET: &str = "q-s3cr3t-v4lue";

/// The handler of the matrix: `/{cell}/{kind}/{status}`, or `/{cell}/{outcome}`.
async fn handler(req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let path = req.uri().path().to_owned();
    let parts: Vec<&str> = path.split('/').collect();
    let (what, status) = (parts[2], parts.get(3).copied().unwrap_or("200"));
    let status = StatusCode::from_bytes(status.as_bytes()).unwrap();
    let chunks = || {
        vec![
            Step::Data(Bytes::from_static(b"hello ")),
            Step::Sleep(Duration::from_millis(5)),
            Step::Data(Bytes::from_static(b"world")),
        ]
    };
    let script = |steps: Vec<Step>, exact: bool| -> Body {
        Script::new(steps, exact, false)
            .map_err(BoxError::from)
            .boxed_unsync()
    };
    let mut length = None;
    let body: Body = match what {
        "empty" => Empty::new().map_err(BoxError::from).boxed_unsync(),
        "full" => Full::new(Bytes::from_static(b"hello world"))
            .map_err(BoxError::from)
            .boxed_unsync(),
        "chunked" => script(chunks(), false),
        "length" => {
            length = Some(11);
            script(chunks(), true)
        }
        "file" => {
            let file = tower_http::services::ServeFile::new("Cargo.toml");
            let res = file.oneshot(Request::new(())).await.unwrap();
            let (mut head, body) = res.into_parts();
            head.status = status;
            return Ok(Response::from_parts(
                head,
                body.map_err(BoxError::from).boxed_unsync(),
            ));
        }
        "panics" => {
            let mut steps = chunks();
            steps.push(Step::Panic(PANIC));
            script(steps, false)
        }
        "errors" => {
            let mut steps = chunks();
            steps.push(Step::Error);
            script(steps, false)
        }
        // A gRPC answer: one message, then `grpc-status: 13` (INTERNAL) in the trailers.
        "grpc" => {
            let mut trailers = http::HeaderMap::new();
            trailers.insert("grpc-status", HeaderValue::from_static("13"));
            trailers.insert("grpc-message", HeaderValue::from_static("boom"));
            let steps = vec![
                Step::Data(Bytes::from_static(b"\0\0\0\0\0")),
                Step::Trailers(trailers),
            ];
            let mut res = Response::new(script(steps, false));
            res.headers_mut().insert(
                http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/grpc"),
            );
            // Announced, so that hyper's HTTP/1.1 server sends them too (to a request with
            // `te: trailers`; a chunked body).
            res.headers_mut().insert(
                http::header::TRAILER,
                HeaderValue::from_static("grpc-status, grpc-message"),
            );
            return Ok(res);
        }
        // The shed cells' route: answered in 200 ms while it warms up (then refused before the
        // handler).
        "shed" | "shed-queued" => {
            tokio::time::sleep(Duration::from_millis(200)).await;
            Empty::new().map_err(BoxError::from).boxed_unsync()
        }
        "timeout" | "hangup" | "outer" | "unpolled" => {
            tokio::time::sleep(Duration::from_secs(2)).await;
            Empty::new().map_err(BoxError::from).boxed_unsync()
        }
        "panic" => panic!("handler bug"),
        other => panic!("no cell {other}"),
    };
    let mut res = Response::new(body);
    *res.status_mut() = status;
    if let Some(length) = length {
        res.headers_mut()
            .insert(http::header::CONTENT_LENGTH, HeaderValue::from(length));
    }
    Ok(res)
}

/// The views of one cell: the layer with every printer, its span exporter and meter, and the
/// fourth view's records.
struct Views {
    spans: Spans,
    metrics: Metrics,
    fourth: Arc<Mutex<Vec<View>>>,
    debug: Arc<Mutex<Vec<String>>>,
}

impl Views {
    fn new() -> Self {
        Views {
            spans: Spans::new(),
            metrics: Metrics::new(),
            fourth: Arc::default(),
            debug: Arc::default(),
        }
    }

    /// The layer; with `propagate`, a request id and the W3C trace headers (the server span
    /// starts at the call, as the request's hop), else none (the span is made at the end).
    fn layer(&self, propagate: bool) -> SharedHeadersLayer {
        self.layer_with(propagate, SharedHeadersLayer::new())
    }

    /// [`layer`](Self::layer) on top of `layer`'s own settings.
    fn layer_with(&self, propagate: bool, layer: SharedHeadersLayer) -> SharedHeadersLayer {
        let (fourth, debug) = (self.fourth.clone(), self.debug.clone());
        let commits = self.debug.clone();
        let layer = if propagate {
            layer.propagate(Propagation::new().request_id().w3c())
        } else {
            layer
        };
        layer
            .timeout(Duration::from_millis(300))
            .access_log(
                AccessLog::new()
                    .request_headers(HeaderSelection::all())
                    .response_headers(HeaderSelection::all()),
            )
            .otel_tracer(self.spans.tracer("server"))
            .otel_metrics(&self.metrics.meter())
            .on_commit(move |event| lock(&commits).push(format!("{:?}", event.committed())))
            .on_response_end(move |end| {
                lock(&fourth).push(view_of(end));
                lock(&debug).push(format!("{end:?}"));
            })
    }
}

// ---- the matrix ----

/// The cells: every body kind answered 200 and 500, and the outcomes without a body.
fn cells() -> Vec<&'static str> {
    let mut cells = Vec::new();
    for kind in [
        "empty", "full", "chunked", "length", "file", "panics", "errors",
    ] {
        for status in ["200", "500"] {
            cells.push(Box::leak(format!("{kind}/{status}").into_boxed_str()) as &str);
        }
    }
    cells.extend([
        "timeout",
        "panic",
        "hangup",
        "outer",
        "unpolled",
        "grpc",
        "shed",
        "shed-queued",
    ]);
    cells
}

/// The admission of the shed cells: a route's estimate after 2 answers, every refusal the
/// header asks for believed; with `x-request-start` for `shed-queued`.
fn admission(cell: &str) -> Admission {
    let admission = Admission::new().warm_up(2).max_shed(1.0);
    match cell {
        "shed-queued" => admission.queue_start(HeaderName::from_static("x-request-start")),
        _ => admission,
    }
}

/// Warms the shed cell's route (its path) with 2 answers of 200 ms through a layer that
/// shares `admission` and prints nothing (no line, span or point of its own).
async fn warm(admission: &Admission, path: &str, h2: bool) {
    let quiet = SharedHeadersLayer::new()
        .timeout(Duration::from_millis(300))
        .admission(admission.clone())
        .layer(tower::service_fn(handler));
    let addr = serve(quiet, h2).await;
    for _ in 0..2 {
        let req = Request::get(format!("http://{addr}{path}"))
            .body(Empty::new())
            .unwrap();
        assert_eq!(fetch(addr, h2, req).await, Some(StatusCode::OK));
    }
}

/// What every printer must say of a cell: its error type (`None`: none).
fn expected_error(cell: &str) -> Option<&'static str> {
    match cell {
        "timeout" => Some("timeout"),
        "panic" => Some("panic"),
        "hangup" | "outer" | "unpolled" => Some("cancelled"),
        "shed" | "shed-queued" => Some("deadline_unmeetable"),
        "grpc" => Some("13"),
        _ if cell.starts_with("panics/") => Some("body_panic"),
        _ if cell.starts_with("errors/") => Some("body_error"),
        _ if cell.ends_with("/500") => Some("500"),
        _ => None,
    }
}

#[test]
fn the_matrix_every_view_agrees_and_each_signal_exists_once() {
    run(async {
        let mut checked = 0;
        for h2 in [false, true] {
            for (n, cell) in cells().into_iter().enumerate() {
                let views = Views::new();
                let propagate = n % 2 == 0;
                let path = format!("/m{}{n}/{cell}", u8::from(h2));
                let service = if cell.starts_with("shed") {
                    // Refused on the route's estimate (200 ms): 100 ms left by the caller's
                    // budget, or by the time a proxy's queue took of the layer's 300 ms (100
                    // ms of slack before the budget is all spent, a timeout rather than a
                    // refusal).
                    let admission = admission(cell);
                    warm(&admission, &path, h2).await;
                    let layer = SharedHeadersLayer::new()
                        .caller_budget(BudgetHeader::envoy_expected_rq_timeout_ms())
                        .admission(admission);
                    views.layer_with(propagate, layer)
                } else {
                    views.layer(propagate)
                }
                .layer(tower::service_fn(handler));
                let addr = match cell {
                    // An outer timeout drops the layer's future (the client gets an error).
                    "outer" => {
                        let outer = tower::timeout::TimeoutLayer::new(Duration::from_millis(100));
                        serve(outer.layer(service), h2).await
                    }
                    // An outer service drops the layer's future before its first poll, and
                    // answers itself.
                    "unpolled" => {
                        let unpolled = tower::service_fn(move |req| {
                            drop(service.clone().call(req));
                            async {
                                let mut res = Response::new(ResponseBody::new(
                                    Empty::new().map_err(BoxError::from).boxed_unsync(),
                                ));
                                *res.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                                Ok::<_, Infallible>(res)
                            }
                        });
                        serve(unpolled, h2).await
                    }
                    _ => serve(service, h2).await,
                };
                // Over HTTP/1.1 in origin form with `host` (the common case), every fourth
                // cell in absolute form (as a proxy is sent it); HTTP/2 with `:authority`.
                // Two cells in three with a query, a credential in it.
                let target = match n % 3 {
                    0 => path.clone(),
                    _ => format!("{path}?page=2&access_token={QUERY_SECRET}"),
                };
                let mut req = if !h2 && n % 4 == 3 {
                    Request::get(format!("http://{addr}{target}"))
                        .header(http::header::HOST, addr.to_string())
                } else {
                    origin_form(addr, h2, &target)
                }
                .body(Empty::new())
                .unwrap();
                let headers = req.headers_mut();
                match cell {
                    "grpc" => {
                        headers
                            .insert("content-type", HeaderValue::from_static("application/grpc"));
                        headers.insert("te", HeaderValue::from_static("trailers"));
                    }
                    "shed" => {
                        headers.insert(
                            "x-envoy-expected-rq-timeout-ms",
                            HeaderValue::from_static("100"),
                        );
                    }
                    "shed-queued" => {
                        let queued = std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .unwrap()
                            - Duration::from_millis(200);
                        let value = queued.as_millis().to_string();
                        headers.insert("x-request-start", value.parse().unwrap());
                    }
                    _ => {}
                }
                // The `grpc-status` the client got in the trailers, if any.
                let got = if cell == "hangup" {
                    hang_up(addr, h2, req, Duration::from_millis(100)).await;
                    None
                } else {
                    fetch_trailers(addr, h2, req)
                        .await
                        .and_then(|(_, trailers)| trailers)
                        .and_then(|t| t.get("grpc-status")?.to_str().ok()?.parse().ok())
                };
                check_cell(&views, &path, cell, (h2, propagate), (addr, got)).await;
                checked += 1;
            }
        }
        assert_eq!(checked, 2 * (7 * 2 + 8));
    });
}

/// `addr`: the server's (the address every view must print); `got`: the `grpc-status` of the
/// trailers the client received.
async fn check_cell(
    views: &Views,
    path: &str,
    cell: &str,
    (h2, propagate): (bool, bool),
    (addr, got): (std::net::SocketAddr, Option<u16>),
) {
    let lines = wait_access_lines(|e| field(e, "url.path") == Some(path), 1).await;
    let spans = views.spans.wait_for(1).await;
    let read = views.metrics.wait(1, Duration::from_secs(5)).await;
    // Nothing more comes later: exactly once.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let lines_now = capture::access_lines(|e| field(e, "url.path") == Some(path));
    let spans_now = of_kind(&views.spans.finished(), SpanKind::Server)
        .into_iter()
        .cloned()
        .collect::<Vec<_>>();
    let points = views.metrics.read().points;
    let fourth = lock(&views.fourth).clone();
    let at = format!("{cell} over {}", if h2 { "HTTP/2" } else { "HTTP/1.1" });
    assert_eq!(lines_now.len(), 1, "{at}: lines {lines_now:?}");
    assert_eq!(spans_now.len(), 1, "{at}: spans {spans:?}");
    assert_eq!(read.count(), 1, "{at}: points {points:?}");
    assert_eq!(points.len(), 1, "{at}: points {points:?}");
    assert_eq!(fourth.len(), 1, "{at}: views {fourth:?}");
    let (line, span, (point, _, sum), view) = (&lines[0], &spans_now[0], &points[0], &fourth[0]);
    if cell == "panics/200" && h2 {
        // One request's four views side by side (`--nocapture`).
        println!(
            "line:   {line:?}\nspan:   {} {:?}\npoint:  {point:?} sum {sum}\nfourth: {view:?}",
            span.name, span.attributes
        );
    }

    // Each shared attribute: the line's, the span's, the point's and the fourth view's.
    let span_attr = |key: &str| attr(span, key);
    let point_attr = |key: &str| point.get(key).cloned();
    let line_attr = |key: &str| field(line, key).map(str::to_owned);
    for key in [
        "http.request.method",
        "url.scheme",
        "network.protocol.version",
        "http.response.status_code",
        "error.type",
        "http.route",
    ] {
        let (l, s, p) = (line_attr(key), span_attr(key), point_attr(key));
        assert_eq!(l, s, "{at}: {key}: line {l:?}, span {s:?}");
        assert_eq!(l, p, "{at}: {key}: line {l:?}, point {p:?}");
    }
    for key in [
        "url.path",
        "url.query",
        "server.address",
        "server.port",
        "rpc.grpc.status_code",
    ] {
        let (l, s) = (line_attr(key), span_attr(key));
        assert_eq!(l, s, "{at}: {key}: line {l:?}, span {s:?}");
    }
    // The record's printed facts, read through its public accessors.
    let fourth_attr = [
        ("url.path", view.url_path.clone()),
        ("url.query", view.url_query.clone()),
        ("server.address", view.server_address.clone()),
        ("server.port", view.server_port.map(|p| p.to_string())),
        (
            "rpc.grpc.status_code",
            view.grpc_status.map(|g| g.to_string()),
        ),
    ];
    for (key, value) in fourth_attr {
        assert_eq!(value, line_attr(key), "{at}: {key}: the record's");
    }
    // The query as every printer shows it, its credential redacted (and on the span, set at
    // its end).
    if let Some(query) = &view.url_query {
        assert_eq!(query, "page=2&access_token=[redacted]", "{at}");
    }
    assert!(
        !format!("{line:?} {:?}", span.attributes).contains(QUERY_SECRET),
        "{at}"
    );
    // The address the client asked: from `host` (origin form) or the authority.
    assert_eq!(
        (view.server_address.as_deref(), view.server_port),
        (Some("127.0.0.1"), Some(addr.port())),
        "{at}: {view:?}"
    );
    if cell == "grpc" {
        // The record's `grpc-status` is the one the client got (hyper sends the announced
        // trailers over HTTP/1.1 to a request with `te: trailers`, and over HTTP/2).
        assert_eq!(got, Some(13), "{at}: the client's trailers");
        assert_eq!(view.grpc_status, got, "{at}");
    }
    // The fourth view, from the public API alone.
    assert_eq!(
        Some(view.method.to_owned()),
        line_attr("http.request.method"),
        "{at}"
    );
    assert_eq!(
        Some(view.scheme.to_owned()),
        line_attr("url.scheme"),
        "{at}"
    );
    assert_eq!(
        Some(view.version.to_owned()),
        line_attr("network.protocol.version"),
        "{at}"
    );
    assert_eq!(
        view.status.map(|s| s.to_string()),
        line_attr("http.response.status_code"),
        "{at}"
    );
    assert_eq!(
        view.error.map(str::to_owned),
        line_attr("error.type"),
        "{at}"
    );
    if cell == "hangup" {
        // Cancelled when the server saw the hang-up before the layer's timeout; timed out when
        // it did not (the views agree either way).
        assert!(
            matches!(view.error, Some("cancelled" | "timeout")),
            "{at}: {view:?}"
        );
    } else {
        assert_eq!(view.error, expected_error(cell), "{at}: {view:?}");
    }
    assert_eq!(
        view.status.map(|_| view.bytes.to_string()),
        line_attr("http.response.body.size"),
        "{at}"
    );
    assert_eq!(view.path, path, "{at}");
    // One duration: the line's, the point's sum, the span's length, the view's.
    let line_duration: f64 = line_attr("http.server.request.duration")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(line_duration, view.duration, "{at}");
    assert_eq!(*sum, view.duration, "{at}");
    let span_length = span
        .end_time
        .duration_since(span.start_time)
        .unwrap()
        .as_secs_f64();
    assert!(
        (span_length - view.duration).abs() < 1e-6,
        "{at}: span {span_length}, view {}",
        view.duration
    );
    // A body's panic: its own ending, its message on the line and in the view.
    if cell.starts_with("panics/") {
        assert_eq!(view.ending, Ending::Panicked, "{at}");
        assert_eq!(view.panic.as_deref(), Some(PANIC), "{at}");
        assert_eq!(
            line_attr("exception.message").as_deref(),
            Some(PANIC),
            "{at}"
        );
    }
    // With a request id: the line's (through its span), the view's, the response's.
    if propagate {
        let id = line_attr("http.request.id").expect("a request id");
        assert_eq!(Some(id.as_str()), view.request_id.as_deref(), "{at}");
        // The trace's ids: the line's (through its span), the record's, the span's own.
        assert_eq!(line_attr("trace_id"), view.trace_id, "{at}");
        assert_eq!(line_attr("span_id"), view.span_id, "{at}");
        let context = span.span_context.clone();
        assert_eq!(view.trace_id, Some(context.trace_id().to_string()), "{at}");
        assert_eq!(view.span_id, Some(context.span_id().to_string()), "{at}");
    }
    // The request's ids once on a line: its own, or its span's.
    for id in ["http.request.id", "trace_id", "span_id"] {
        assert!(!line.contains_key(&format!("{id}#twice")), "{at}: {line:?}");
    }
}

// ---- the secrets ----

/// What every planted secret starts with.
const MARK: &str = "R3c0rd-s3cr3t";

/// The credential-looking headers, sent with `HeaderSelection::all()`.
const HEADERS: [&str; 20] = [
    "x-vault-token",
    "private-token",
    "x-goog-api-key",
    "x-client-secret",
    "x-authorization",
    "x-gitlab-token",
    "x-session-id",
    "x-refresh-token",
    "x-id-token",
    "x-secret-key",
    "x-access-key",
    "x-api-token",
    "x-auth-key",
    "x-hub-signature",
    "x-webhook-secret",
    "x-password",
    "x-jwt",
    "ocp-apim-subscription-key",
    "x-functions-key",
    "x-shopify-access-token",
];

/// The answer of the secret test: a `location` with userinfo and a credential query, and a
/// credential-looking response header.
async fn secret_response(_req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let mut res = Response::new(Full::new(Bytes::from_static(b"ok")));
    res.headers_mut().insert(
        http::header::LOCATION,
        format!("https://u:{MARK}-loc@x.example/?token={MARK}-locq")
            .parse()
            .unwrap(),
    );
    res.headers_mut()
        .insert("x-vault-token", format!("{MARK}-resp").parse().unwrap());
    Ok(res)
}

/// The request of the secret test: every form a secret can take, each value starting with
/// [`MARK`].
fn secret_request(addr: SocketAddr, h2: bool) -> Request<Empty<Bytes>> {
    let query = [
        format!("redirect=https://u:{MARK}-ui@evil.example/?token={MARK}-nested"),
        format!("next=https%3A%2F%2Fu%3A{MARK}-uienc%40evil.example%2F%3Ftoken%3D{MARK}-nestenc"),
        format!("filter=%7B%22password%22%3A%22{MARK}-json%22%7D"),
        format!("f2={{%22api_key%22:%22{MARK}-json2%22}}"),
        format!("client_assertion={MARK}-ca"),
        format!("assertion={MARK}-as"),
        format!("SAMLResponse={MARK}-saml"),
        format!("ticket={MARK}-ticket"),
        format!("hmac={MARK}-hmac"),
        "page=2".to_owned(),
    ]
    .join("&");
    let path = format!("/s{}/a;jsessionid={MARK}-path/b", u8::from(h2));
    let mut req = Request::get(format!("http://{addr}{path}?{query}"))
        .body(Empty::new())
        .unwrap();
    for name in HEADERS {
        req.headers_mut().insert(
            HeaderName::from_static(name),
            format!("{MARK}-{name}").parse().unwrap(),
        );
    }
    req.headers_mut().insert(
        http::header::REFERER,
        format!("https://u:{MARK}-ref@r.example/?access_token={MARK}-refq")
            .parse()
            .unwrap(),
    );
    req
}

#[test]
fn no_secret_reaches_any_printer() {
    run(async {
        for h2 in [false, true] {
            let views = Views::new();
            let service = views.layer(true).layer(tower::service_fn(secret_response));
            let addr: SocketAddr = serve(service, h2).await;
            let client_spans = Spans::new();
            let client_metrics = Metrics::new();
            let client = PropagateLayer::new(BudgetHeader::grpc_timeout())
                .otel_tracer(client_spans.tracer("client"))
                .otel_metrics(&client_metrics.meter())
                .layer(
                    LegacyClient::builder(TokioExecutor::new())
                        .http2_only(h2)
                        .build_http::<Empty<Bytes>>(),
                );
            let req = secret_request(addr, h2);
            let res = client.oneshot(req).await.unwrap();
            assert_eq!(res.status(), StatusCode::OK);
            res.into_body().collect().await.unwrap();

            let lines = wait_access_lines(
                |e| {
                    field(e, "url.path")
                        .is_some_and(|p| p.starts_with(&format!("/s{}/", u8::from(h2))))
                },
                1,
            )
            .await;
            let server_spans = views.spans.wait_for(1).await;
            let clients = client_spans.wait_for(1).await;
            let server_points = views.metrics.wait(1, Duration::from_secs(5)).await;
            let client_points = client_metrics.histogram("http.client.request.duration");
            assert_eq!(lines.len(), 1);
            assert_eq!(of_kind(&server_spans, SpanKind::Server).len(), 1);
            assert_eq!(of_kind(&clients, SpanKind::Client).len(), 1);
            assert_eq!(server_points.count(), 1);
            assert_eq!(client_points.len(), 1);

            // Where each secret ended up: redacted in place.
            let line = &lines[0];
            assert_eq!(
                field(line, "url.path"),
                Some(format!("/s{}/a;jsessionid=[redacted]/b", u8::from(h2)).as_str())
            );
            let shown_query = field(line, "url.query").unwrap();
            for shown in [
                "redirect=https://[redacted]@evil.example/?token=[redacted]",
                "next=https%3A%2F%2F[redacted]%40evil.example%2F%3Ftoken%3D[redacted]",
                "client_assertion=[redacted]",
                "assertion=[redacted]",
                "SAMLResponse=[redacted]",
                "ticket=[redacted]",
                "hmac=[redacted]",
                "page=2",
            ] {
                assert!(shown_query.contains(shown), "{shown} in {shown_query}");
            }
            // The record's redacted path and query, through its public accessors: the line's.
            let view = lock(&views.fourth)[0].clone();
            assert_eq!(view.url_path.as_deref(), field(line, "url.path"));
            assert_eq!(view.url_query.as_deref(), Some(shown_query));
            let headers = field(line, "shared_headers.request_headers").unwrap();
            for name in HEADERS {
                assert!(
                    headers.contains(&format!("{name}: [redacted]")),
                    "{name} in {headers}"
                );
            }
            let server_span = of_kind(&server_spans, SpanKind::Server)[0];
            assert_eq!(
                attr(server_span, "url.path").as_deref(),
                field(line, "url.path")
            );
            let client_span = of_kind(&clients, SpanKind::Client)[0];
            let full = attr(client_span, "url.full").unwrap();
            assert!(full.ends_with(";jsessionid=[redacted]/b"), "{full}");

            // No printer holds any: every captured field, every exported attribute, every
            // metric attribute, every `Debug`.
            let mut outputs: Vec<String> = Vec::new();
            outputs.extend(
                lock(&capture().events)
                    .iter()
                    .chain(lock(&capture().spans).iter())
                    .map(|fields| format!("{fields:?}")),
            );
            for span in server_spans.iter().chain(clients.iter()) {
                outputs.push(format!(
                    "{} {:?} {:?}",
                    span.name, span.attributes, span.status
                ));
            }
            let attrs = |points: &[(BTreeMap<String, String>, u64, f64)]| {
                points
                    .iter()
                    .map(|p| format!("{:?}", p.0))
                    .collect::<Vec<_>>()
            };
            outputs.extend(attrs(&server_points.points));
            outputs.extend(attrs(&client_points));
            outputs.extend(lock(&views.debug).iter().cloned());
            assert!(lock(&views.debug).len() >= 2, "the record's Debug, twice");
            for output in &outputs {
                assert!(!output.contains(MARK), "a secret printed: {output}");
            }
        }
    });
}

// ---- the secrets in a process's own output ----

/// Set in the child process that runs the server half of
/// `no_secret_reaches_stdout_or_stderr`: `1` for HTTP/1.1, `2` for HTTP/2.
const CHILD: &str = "RECORD_VIEWS_SECRET_SERVER";

/// The server half of `no_secret_reaches_stdout_or_stderr`, in a child process (this test
/// binary run again with [`CHILD`] set; without it, this test does nothing). Everything a
/// server prints goes to the process's stdout and stderr: the `tracing` text formatter (every
/// `shared_headers` event and span field) on stdout, the JSON lines writer on stderr, the
/// record's and the commit's `Debug` on both, the exported spans' and the metric points'
/// attributes on stdout. It serves one request, then exits.
#[test]
fn secret_server_child() {
    use tracing_subscriber::{Layer as _, filter::filter_fn, layer::SubscriberExt};
    let Some(protocol) = std::env::var_os(CHILD) else {
        return;
    };
    let h2 = protocol == "2";
    let ours = |meta: &tracing::Metadata<'_>| meta.target().starts_with("shared_headers");
    let json = shared_headers::server::access_log::json::JsonLines::new(std::io::stderr());
    let guard = json.guard();
    let subscriber = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stdout)
                .with_ansi(false)
                .with_filter(filter_fn(ours)),
        )
        .with(json.with_filter(filter_fn(ours)));
    tracing::subscriber::set_global_default(subscriber).unwrap();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let views = Views::new();
            let layer = views
                .layer(true)
                .on_commit(|event| println!("on_commit: {event:?}"))
                .on_response_end(|end| {
                    println!("on_response_end: {end:?}");
                    eprintln!("record: {:?}", end.committed());
                });
            let addr = serve(layer.layer(tower::service_fn(secret_response)), h2).await;
            println!("addr={addr}");
            let served = async {
                while lock(&views.fourth).is_empty() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            };
            tokio::time::timeout(Duration::from_secs(20), served)
                .await
                .expect("the parent's request within 20 s");
            for span in views.spans.wait_for(1).await {
                println!(
                    "span: {} {:?} {:?}",
                    span.name, span.attributes, span.status
                );
            }
            let points = views.metrics.wait(1, Duration::from_secs(5)).await.points;
            println!("points: {points:?}");
            // The record ends when the body's last frame leaves the layer, which can be before
            // hyper wrote the answer to the socket: the runtime (and the connection) lives until
            // the parent read the whole answer and said so (or hung up: end of input).
            let said = tokio::task::spawn_blocking(|| {
                let mut line = String::new();
                std::io::stdin().read_line(&mut line).map(|_| line)
            });
            let said = tokio::time::timeout(Duration::from_secs(60), said)
                .await
                .expect("the parent's word within 60 s");
            println!("parent: {:?}", said.unwrap().unwrap().trim());
        });
    drop(guard); // flushes the JSON lines
}

/// The server runs in a child process whose stdout and stderr are captured here: after one
/// request carrying every secret form ([`secret_request`]) no byte of either holds one, and
/// both hold the request's line (so the grep is not vacuous).
#[test]
fn no_secret_reaches_stdout_or_stderr() {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::process::{Command, Stdio};
    for h2 in [false, true] {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["secret_server_child", "--exact", "--nocapture"])
            .env(CHILD, if h2 { "2" } else { "1" })
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (stdout, mut stderr) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
        let (tx, addr) = std::sync::mpsc::channel();
        let out = std::thread::spawn(move || {
            let mut all = String::new();
            for line in BufReader::new(stdout).lines() {
                let line = line.unwrap();
                if let Some(addr) = line.strip_prefix("addr=") {
                    let _ = tx.send(addr.parse::<SocketAddr>().unwrap());
                }
                all.push_str(&line);
                all.push('\n');
            }
            all
        });
        let err = std::thread::spawn(move || {
            let mut all = String::new();
            stderr.read_to_string(&mut all).unwrap();
            all
        });
        let addr = addr
            .recv_timeout(Duration::from_secs(30))
            .expect("the child's address");
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let status = fetch(addr, h2, secret_request(addr, h2)).await;
                assert_eq!(status, Some(StatusCode::OK));
            });
        // The answer is read whole: the child may end (its stdin closes with this handle).
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"read\n").unwrap();
        drop(stdin);
        // Bounded: the child exits by itself once it served the request.
        let until = std::time::Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if std::time::Instant::now() > until {
                child.kill().unwrap();
                panic!("the child did not exit within 60 s");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let (out, err) = (out.join().unwrap(), err.join().unwrap());
        assert!(status.success(), "child: {status}\n{out}\n{err}");
        let at = if h2 { "HTTP/2" } else { "HTTP/1.1" };
        // Not vacuous: each stream holds the line, the record and what was redacted.
        assert!(out.contains("request completed"), "{at}: stdout {out}");
        assert!(
            out.contains("on_response_end: ResponseEnd"),
            "{at}: stdout {out}"
        );
        assert!(out.contains("span: "), "{at}: stdout {out}");
        assert!(
            err.contains("\"message\":\"request completed\""),
            "{at}: stderr {err}"
        );
        assert!(err.contains("record: Committed"), "{at}: stderr {err}");
        for output in [&out, &err] {
            assert!(output.contains("[redacted]"), "{at}: {output}");
            for (n, line) in output.lines().enumerate() {
                assert!(
                    !line.contains(MARK),
                    "{at}: a secret printed, line {n}: {line}"
                );
            }
        }
    }
}

/// Under `AccessLog::omit_query` no printer shows the query: the line, the server span (its
/// `url.query` is set from the record), `ResponseEnd::url_query` and the record's `Debug`.
#[test]
fn an_omitted_query_reaches_no_printer() {
    run(async {
        let spans = Spans::new();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let got = seen.clone();
        let layer = SharedHeadersLayer::new()
            .access_log(AccessLog::new().omit_query())
            .otel_tracer(spans.tracer("server"))
            .on_response_end(move |end| {
                let query = end.url_query().map(|q| q.to_string());
                lock(&got).push((query, format!("{end:?}")));
            });
        let addr = serve(layer.layer(tower::service_fn(handler)), false).await;
        let path = "/omitted/full/200";
        let req = origin_form(addr, false, &format!("{path}?page=2&q={QUERY_SECRET}"))
            .body(Empty::new())
            .unwrap();
        assert_eq!(fetch(addr, false, req).await, Some(StatusCode::OK));
        let lines = wait_access_lines(|e| field(e, "url.path") == Some(path), 1).await;
        let finished = spans.wait_for(1).await;
        let server = of_kind(&finished, SpanKind::Server);
        assert_eq!((lines.len(), server.len()), (1, 1));
        assert_eq!(field(&lines[0], "url.query"), None, "{:?}", lines[0]);
        assert_eq!(attr(server[0], "url.query"), None);
        let seen = lock(&seen).clone();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].0, None, "ResponseEnd::url_query");
        assert!(
            seen[0].1.contains("/omitted/full/200?[redacted]"),
            "{}",
            seen[0].1
        );
        assert!(!seen[0].1.contains("page=2"), "{}", seen[0].1);
    });
}
