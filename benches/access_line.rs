//! The access line's cost per request: the crate's server layer with its `tracing` access log
//! against tower-http's stack doing the same job, each with a real
//! `tracing_subscriber::fmt` subscriber formatting every line (to `std::io::sink()`, max level
//! `INFO`), or with no subscriber at all ("configured but nobody listening").
//!
//! ```text
//! cargo bench --features full --bench access_line                      # the table below
//! cargo bench --features full --bench access_line -- --no-subscriber  # the same, nobody listening
//! cargo bench --features full --bench access_line -- --json    # `fmt().json()` instead of `fmt`
//! cargo bench --features full --bench access_line -- --crate   # the crate's `JsonLines` writer
//! cargo bench --features full --bench access_line -- --crate-visitor  # the same, visitor path
//! cargo bench --features full --bench access_line -- --registry  # a `Registry`, no writer
//! cargo bench --features full --bench access_line -- --criterion [--rounds N] [--no-subscriber]
//! scripts/access-line-table    # + instructions under callgrind, both modes, one Markdown table
//! ```
//!
//! Every variant serves the same request (GET `/users/42?page=2&api_key=zzz`, HTTP/1.1, 8
//! headers: `host`, `user-agent`, `accept`, `accept-encoding`, `referer`, `x-request-id`, an
//! `x-api-key` and a `cookie`) with the same handler (a `service_fn` answering 200,
//! `content-type` and a 5-byte `Full<Bytes>` body), on a current-thread runtime, calling
//! `ready().call()` on one service (no clone per request, as `benches/alloc.rs`). Each request
//! is built (a clone of the 8 headers), called, its response body driven to its end frame by
//! frame (the access line may be emitted only then) and everything dropped. The variants
//! (names are stable: scripts pass them):
//!
//! * `th_defaults`: tower-http 0.7's stack for the layer's job, `SetSensitiveRequestHeadersLayer`
//!   (`authorization`, `proxy-authorization`, `cookie`, `x-api-key`), `TraceLayer::new_for_http()`
//!   with `DefaultMakeSpan` and `DefaultOnResponse` at `INFO` (their default is `DEBUG`, which
//!   would emit nothing), `SetSensitiveResponseHeadersLayer` (`set-cookie`), `TimeoutLayer`
//!   (30 s), `CatchPanicLayer`.
//! * `th_same`: the same stack with `TraceLayer` logging the attributes of the [`th`] module's
//!   table: a span per request made by `make_span_with`, one event by `on_response`.
//! * `th_same_eos`: `th_same` doing the crate's job at the crate's moment: the line when the
//!   body ends (`on_eos`), the status, the head's latency and the body's bytes recorded into
//!   the span as they come (`on_response`, `on_body_chunk`), as a `TraceLayer` user logging at
//!   the end of the response writes it (the crate's line has the same two times: to the commit,
//!   where the head leaves, and the total);
//! * `th_headers`: `th_same` plus every request header in the span (`headers = ?req.headers()`,
//!   the sensitive-marked map's `Debug`, as `DefaultMakeSpan::include_headers` prints it).
//! * `layer_log`: `SharedHeadersLayer` (30 s, `x-api-key` secret) with its access log
//!   ([`crate_side`]: the one place to adapt when the crate's access line changes).
//! * `layer_nolog`: the same layer without the log.
//! * `bare`: the handler alone.
//!
//! Modes:
//!
//! * default: a Markdown table of heap allocations per request (a counting global allocator,
//!   [`stats_alloc`], as `benches/alloc.rs`: `alloc` + `realloc` calls, the average over
//!   [`REQUESTS`] requests after [`WARM_UP`] unmeasured ones) and the bytes and lines the
//!   subscriber wrote per request: one request of each variant with the same `fmt` subscriber
//!   writing into a buffer (a `MakeWriter`), set as the thread's default for that request only.
//! * `--run <variant> <count> [--no-subscriber]`: [`WARM_UP`] requests, then `count` requests
//!   of one variant, nothing printed: for instruction counts under callgrind (run two counts
//!   and divide the difference of the totals by the difference of the counts, as
//!   `scripts/access-line-table` does).
//! * `--criterion [--rounds N]`: wall clock per request of every variant (criterion,
//!   `iter_custom` over batches inside one `block_on`), the variants interleaved over `N`
//!   rounds (default 1).
//!
//! The subscriber (one flag, in every mode): `fmt`'s defaults (none); `--json`, `fmt().json()`;
//! `--crate`, the crate's own writer of its line (`JsonLines`, feature `access-json`, its
//! background thread writing to the same `io::sink()`) in a `tracing_subscriber::Registry`: it
//! writes only the crate's line, so a tower-http variant under it makes its spans and events
//! and writes nothing; `--crate-visitor`, the same writer reading the line through the
//! `tracing` visitor (as it reads any other event) rather than the values the access log hands
//! it; `--registry`, the `Registry` alone (the floor under `--crate`: the
//! writer's whole cost per line is `--crate` minus `--registry`). Each at max level `INFO`.
//!
//! `--no-subscriber` leaves the global default unset (it can be set only once a process, hence
//! a flag rather than a second group); without it the `fmt` subscriber is installed as the
//! global default before anything runs. The counting allocator is the global allocator in every
//! mode, so its few instructions per allocation are in every count and time (a bias
//! proportional to the allocations column).
//!
//! Left out: a clone of the service per request (as axum's
//! router does: it would add the same few `Arc` clones to every variant); a streamed body
//! (`th_same` reports `http.response.body.size` from the body's exact size hint in
//! `on_response`: a streamed body would need an `on_body_chunk` count and the event in
//! `on_eos`); a peer address (`client.*` are `Empty` on both sides).

use std::alloc::System;
use std::convert::Infallible;
use std::fmt;
use std::hint::black_box;
use std::io;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use http::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use http::{HeaderMap, Request, Response, Uri};
use http_body::Body;
use http_body_util::{BodyExt, Empty, Full};
use shared_headers::server::access_log::json::{JsonLines, JsonLinesGuard};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use tokio::runtime::Runtime;
use tower::{Service, ServiceExt, service_fn};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const DEADLINE: Duration = Duration::from_secs(30);
const WARM_UP: u64 = 100;
const REQUESTS: u64 = 1_000;

/// The request's target: a path and a query with one credential parameter.
const URI: &str = "/users/42?page=2&api_key=zzz";

/// The request's 8 headers, parsed from strings as a server parses them off the wire.
const REQUEST_HEADERS: [(&str, &str); 8] = [
    ("host", "api.example.com"),
    (
        "user-agent",
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36",
    ),
    ("accept", "application/json"),
    ("accept-encoding", "gzip, deflate, br"),
    ("referer", "https://www.example.com/users?page=1"),
    ("x-request-id", "7f3c2a10-5b6e-4d8f-9a21-0c4e8b7d6f5a"),
    ("x-api-key", "AKIA-SECRET-4f2a9c0e7b1d5a3c"),
    ("cookie", "session=4f2a9c0e7b1d; theme=dark; consent=1"),
];

/// The header name, beyond `authorization`, `proxy-authorization` and `cookie`, whose value
/// neither side may log (the crate's handles redact those three by default).
const API_KEY: HeaderName = HeaderName::from_static("x-api-key");

/// Query parameters whose values both sides log as `[redacted]`.
const QUERY_SECRETS: [&str; 3] = ["api_key", "access_token", "token"];

fn request_headers() -> HeaderMap {
    let mut map = HeaderMap::with_capacity(REQUEST_HEADERS.len());
    for (name, value) in REQUEST_HEADERS {
        map.insert(
            HeaderName::from_static(name),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    map
}

/// The request body: empty, a `Body` (tower-http's `Trace` wants one), no allocation.
type ReqBody = Empty<Bytes>;

/// The handler of every variant: 200, a `content-type`, a 5-byte body.
async fn hello(_req: Request<ReqBody>) -> Result<Response<Full<Bytes>>, Infallible> {
    let mut res = Response::new(Full::new(Bytes::from_static(b"hello")));
    res.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    Ok(res)
}

/// Runs `n` requests of one variant; returns the body bytes received.
type Runner = Box<dyn FnMut(&Runtime, &HeaderMap, u64) -> usize>;

fn runner<S, B>(mut service: S) -> Runner
where
    S: Service<Request<ReqBody>, Response = Response<B>> + 'static,
    S::Error: fmt::Debug,
    B: Body,
    B::Error: fmt::Debug,
{
    let uri = Uri::from_static(URI);
    Box::new(move |runtime, headers, n| {
        runtime.block_on(async {
            let mut received = 0;
            for _ in 0..n {
                let mut req = Request::new(ReqBody::new());
                *req.uri_mut() = uri.clone();
                *req.headers_mut() = headers.clone();
                let res = service.ready().await.unwrap().call(req).await.unwrap();
                let (parts, body) = res.into_parts();
                let mut body = pin!(body);
                while let Some(frame) = body.as_mut().frame().await {
                    if let Ok(data) = frame.unwrap().into_data() {
                        received += data.remaining();
                    }
                }
                drop(black_box(parts));
            }
            received
        })
    })
}

/// The crate's side of the comparison: the one place to adapt to the access line's API.
mod crate_side {
    use shared_headers::server::SharedHeadersLayer;
    use tower::{Layer, service_fn};

    use super::{DEADLINE, Runner, hello, runner};

    /// `layer_log`: the layer with its default access line, `tracing_access_log()`: safe by
    /// default (no header value but the user agent, the referer and the host; credential query
    /// parameters such as `api_key` redacted), one line when the body ends.
    pub fn layer_log() -> Runner {
        runner(
            SharedHeadersLayer::new()
                .timeout(DEADLINE)
                .tracing_access_log()
                .layer(service_fn(hello)),
        )
    }

    /// `layer_log_id`: `layer_log` propagating the request's id (`x-request-id`, which the
    /// request carries): the request's span has a field, the line carries it.
    pub fn layer_log_id() -> Runner {
        use shared_headers::context::Propagation;
        runner(
            SharedHeadersLayer::new()
                .timeout(DEADLINE)
                .propagate(Propagation::new().request_id())
                .tracing_access_log()
                .layer(service_fn(hello)),
        )
    }

    /// `layer_nolog`: the same layer, no access log.
    pub fn layer_nolog() -> Runner {
        runner(
            SharedHeadersLayer::new()
                .timeout(DEADLINE)
                .layer(service_fn(hello)),
        )
    }
}

/// tower-http's side: `TraceLayer` logging the same attributes as the crate's access line.
///
/// The attributes, one place for both sides (OpenTelemetry HTTP semantic conventions):
///
/// | attribute | where (`th_same`) | value here |
/// |---|---|---|
/// | `http.request.method` | span | `GET` |
/// | `url.scheme` | span: the URI's, else `http` (as the crate's default `url_scheme`) | `http` |
/// | `url.path` | span | `/users/42` |
/// | `url.query` | span, [`QUERY_SECRETS`] values redacted ([`RedactedQuery`]) | `page=2&api_key=[redacted]` |
/// | `http.route` | span, `Empty` (no router) | |
/// | `server.address`, `server.port` | span, from `host` (port absent here) | `api.example.com` |
/// | `network.protocol.version` | span | `1.1` |
/// | `user_agent.original` | span | `Mozilla/5.0 ...` |
/// | `http.request.header.referer` | span, its query redacted ([`th::RedactedUrl`]) | `https://www.example.com/users?page=1` |
/// | `client.address`, `client.port` | span, `Empty` (no peer in an in-process call) | |
/// | `http.response.status_code` | event (`on_response`) | `200` |
/// | `http.response.body.size` | event, the body's exact size hint | `5` |
/// | `http.server.request.duration` | event, seconds as `f64` | `0.0000123` |
///
/// `th_headers` adds `headers` (the request's `HeaderMap`, `Debug`, sensitive values printed
/// as `Sensitive`) to the span.
mod th {
    use std::fmt;
    use std::time::Duration;

    use bytes::Bytes;
    use http::header::{HOST, REFERER, USER_AGENT};
    use http::{Request, Response};
    use http_body::Body;
    use tracing::Span;
    use tracing::field::Empty;

    use super::QUERY_SECRETS;

    /// The body type `CatchPanicLayer` gives the layers above it.
    pub type StackBody = tower_http::body::UnsyncBoxBody<Bytes, tower_http::BoxError>;

    /// A query with the values of [`QUERY_SECRETS`] replaced, the work of the crate's
    /// `AccessLog::query_for_log`: no allocation, written straight into the line.
    pub struct RedactedQuery<'a>(pub &'a str);

    impl fmt::Display for RedactedQuery<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            let secret = |name: &str| QUERY_SECRETS.contains(&name);
            for (i, pair) in self.0.split('&').enumerate() {
                if i > 0 {
                    f.write_str("&")?;
                }
                match pair.split_once('=') {
                    Some((name, _)) if secret(name) => write!(f, "{name}=[redacted]")?,
                    None if secret(pair) => write!(f, "{pair}=[redacted]")?,
                    _ => f.write_str(pair)?,
                }
            }
            Ok(())
        }
    }

    /// A URL with its query's secrets redacted (the crate's line does the same to the referer).
    pub struct RedactedUrl<'a>(pub &'a str);

    impl fmt::Display for RedactedUrl<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self.0.split_once('?') {
                Some((base, query)) => write!(f, "{base}?{}", RedactedQuery(query)),
                None => f.write_str(self.0),
            }
        }
    }

    fn version_str(version: http::Version) -> &'static str {
        match version {
            http::Version::HTTP_09 => "0.9",
            http::Version::HTTP_10 => "1.0",
            http::Version::HTTP_11 => "1.1",
            http::Version::HTTP_2 => "2",
            http::Version::HTTP_3 => "3",
            _ => "",
        }
    }

    /// The `host` header's address (before any `:port`).
    pub fn server_address<B>(req: &Request<B>) -> Option<&str> {
        let host = req.headers().get(HOST)?.to_str().ok()?;
        Some(host.rsplit_once(':').map_or(host, |(address, _)| address))
    }

    /// The `host` header's port, if it has one.
    pub fn server_port<B>(req: &Request<B>) -> Option<u16> {
        let host = req.headers().get(HOST)?.to_str().ok()?;
        host.rsplit_once(':')?.1.parse().ok()
    }

    /// The request's span with the table's request attributes; `$($extra)*`: more fields. Every
    /// value is computed in the macro's field list, so only when the span is enabled.
    macro_rules! request_span {
        ($req:expr $(, $($extra:tt)+)?) => {{
            let req = $req;
            let uri = req.uri();
            tracing::info_span!(
                "request",
                http.request.method = req.method().as_str(),
                url.scheme = uri.scheme_str().unwrap_or("http"),
                url.path = uri.path(),
                url.query = uri.query().map(|q| tracing::field::display(RedactedQuery(q))),
                http.route = Empty,
                server.address = server_address(req),
                server.port = server_port(req),
                network.protocol.version = version_str(req.version()),
                user_agent.original = req.headers().get(USER_AGENT).and_then(|v| v.to_str().ok()),
                http.request.header.referer = req
                    .headers()
                    .get(REFERER)
                    .and_then(|v| v.to_str().ok())
                    .map(|v| tracing::field::display(RedactedUrl(v))),
                client.address = Empty,
                client.port = Empty,
                $($($extra)+)?
            )
        }};
    }

    /// `th_same`'s `make_span_with`.
    pub fn make_span<B>(req: &Request<B>) -> Span {
        request_span!(req)
    }

    /// `th_headers`' `make_span_with`: [`make_span`]'s fields and every request header.
    pub fn make_span_headers<B>(req: &Request<B>) -> Span {
        request_span!(req, headers = ?req.headers())
    }

    /// `th_same_eos`' `make_span_with`: [`make_span`]'s fields, and the response's status, its
    /// head's latency and its body size, recorded into the span as they become known.
    pub fn make_span_eos<B>(req: &Request<B>) -> Span {
        request_span!(
            req,
            http.response.status_code = Empty,
            time_to_head_us = Empty,
            http.response.body.size = Empty
        )
    }

    /// `th_same_eos`' `on_response`: the status and the head's latency into the span, no event
    /// yet. The latency is the crate's `shared_headers.time_to_commit_us` (the head leaves at
    /// the commit), and with `on_eos`' body time it gives the request's total: `on_eos` gets no
    /// request start, and a span's fields cannot be read back, so both go in the line.
    pub fn on_response_eos(res: &Response<StackBody>, latency: Duration, span: &Span) {
        span.record("http.response.status_code", res.status().as_u16());
        span.record("time_to_head_us", latency.as_micros() as u64);
    }

    /// `th_same_eos`' `on_body_chunk`: the bytes into the span (right for a body of one chunk,
    /// as here: `TraceLayer` gives its callbacks no per-request state to add chunks up in).
    pub fn on_body_chunk_eos(chunk: &Bytes, _latency: Duration, span: &Span) {
        span.record("http.response.body.size", chunk.len() as u64);
    }

    /// `th_same_eos`' `on_eos`: the one event of the request, when the body ended, with the
    /// body's time (the total is it plus `time_to_head_us`).
    pub fn on_eos(_trailers: Option<&http::HeaderMap>, stream_duration: Duration, _span: &Span) {
        tracing::info!(
            http.server.request.duration = stream_duration.as_secs_f64(),
            "request finished"
        );
    }

    /// `th_same`'s and `th_headers`' `on_response`: the one event of the request.
    pub fn on_response(res: &Response<StackBody>, latency: Duration, _span: &Span) {
        tracing::info!(
            http.response.status_code = res.status().as_u16(),
            http.response.body.size = res.body().size_hint().exact(),
            http.server.request.duration = latency.as_secs_f64(),
            "request finished"
        );
    }
}

/// tower-http's stack around [`hello`] with `$trace` as its `TraceLayer`.
macro_rules! tower_http_stack {
    ($trace:expr) => {{
        use http::StatusCode;
        use http::header::{AUTHORIZATION, COOKIE, PROXY_AUTHORIZATION, SET_COOKIE};
        use tower_http::catch_panic::CatchPanicLayer;
        use tower_http::sensitive_headers::{
            SetSensitiveRequestHeadersLayer, SetSensitiveResponseHeadersLayer,
        };
        use tower_http::timeout::TimeoutLayer;
        runner(
            tower::ServiceBuilder::new()
                .layer(SetSensitiveRequestHeadersLayer::new([
                    AUTHORIZATION,
                    PROXY_AUTHORIZATION,
                    COOKIE,
                    API_KEY,
                ]))
                .layer($trace)
                .layer(SetSensitiveResponseHeadersLayer::new([SET_COOKIE]))
                .layer(TimeoutLayer::with_status_code(
                    StatusCode::SERVICE_UNAVAILABLE,
                    DEADLINE,
                ))
                .layer(CatchPanicLayer::new())
                .service(service_fn(hello)),
        )
    }};
}

/// Every variant, in the tables' order.
fn variants() -> Vec<(&'static str, Runner)> {
    use tower_http::trace::{DefaultMakeSpan, DefaultOnResponse, TraceLayer};
    use tracing::Level;
    vec![
        (
            "th_defaults",
            tower_http_stack!(
                TraceLayer::new_for_http()
                    .make_span_with(DefaultMakeSpan::new().level(Level::INFO))
                    .on_response(DefaultOnResponse::new().level(Level::INFO))
            ),
        ),
        (
            "th_same",
            tower_http_stack!(
                TraceLayer::new_for_http()
                    .make_span_with(th::make_span::<ReqBody>)
                    .on_response(th::on_response)
            ),
        ),
        (
            "th_same_eos",
            tower_http_stack!(
                TraceLayer::new_for_http()
                    .make_span_with(th::make_span_eos::<ReqBody>)
                    .on_response(th::on_response_eos)
                    .on_body_chunk(th::on_body_chunk_eos)
                    .on_eos(th::on_eos)
            ),
        ),
        (
            "th_headers",
            tower_http_stack!(
                TraceLayer::new_for_http()
                    .make_span_with(th::make_span_headers::<ReqBody>)
                    .on_response(th::on_response)
            ),
        ),
        ("layer_log", crate_side::layer_log()),
        ("layer_log_id", crate_side::layer_log_id()),
        ("layer_nolog", crate_side::layer_nolog()),
        ("bare", runner(service_fn(hello))),
    ]
}

/// Which subscriber formats the lines (one per process: the global default is set once).
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// `fmt`'s defaults (text), max level `INFO` (the default).
    Fmt,
    /// `--json`: `fmt().json()`, max level `INFO`.
    Json,
    /// `--crate`: the crate's own writer (`JsonLines`, its background thread writing to the
    /// same output) in a `Registry`, max level `INFO`: it writes only the crate's line.
    Crate,
    /// `--crate-visitor`: the same writer formatting the line through the `tracing` visitor
    /// (`JsonLines::visitor_only`), as it formats any other event: the path `--crate` takes
    /// when the access log does not hand it the line's values.
    CrateVisitor,
    /// `--registry`: a `Registry` with no layer but the level (`INFO`): the spans and events
    /// made and dispatched, nothing written; the floor under `--crate`.
    Registry,
    /// `--no-subscriber`: none.
    None,
}

impl Mode {
    fn of(args: &[String]) -> Mode {
        let has = |flag: &str| args.iter().any(|arg| arg == flag);
        if has("--no-subscriber") {
            Mode::None
        } else if has("--json") {
            Mode::Json
        } else if has("--crate-visitor") {
            Mode::CrateVisitor
        } else if has("--crate") {
            Mode::Crate
        } else if has("--registry") {
            Mode::Registry
        } else {
            Mode::Fmt
        }
    }

    fn name(self) -> &'static str {
        match self {
            Mode::Fmt => "`fmt` subscriber",
            Mode::Json => "`fmt().json()` subscriber",
            Mode::Crate => "the crate's `JsonLines` in a `Registry`",
            Mode::CrateVisitor => "the crate's `JsonLines` through the visitor, in a `Registry`",
            Mode::Registry => "a `Registry` alone",
            Mode::None => "no subscriber",
        }
    }

    /// This mode's subscriber writing to `writer`, and the guard of the crate's writer.
    fn subscriber<W, O>(self, writer: W) -> Option<(tracing::Dispatch, Option<JsonLinesGuard>)>
    where
        W: for<'w> tracing_subscriber::fmt::MakeWriter<'w, Writer = O> + Send + Sync + 'static,
        O: io::Write + Send + 'static,
    {
        use tracing_subscriber::filter::LevelFilter;
        use tracing_subscriber::layer::SubscriberExt;
        Some(match self {
            Mode::Fmt => (tracing::Dispatch::new(subscriber(writer)), None),
            Mode::Json => (
                tracing::Dispatch::new(
                    tracing_subscriber::fmt()
                        .json()
                        .with_writer(writer)
                        .with_max_level(tracing::Level::INFO)
                        .finish(),
                ),
                None,
            ),
            Mode::Crate | Mode::CrateVisitor => {
                let mut lines = JsonLines::new(writer.make_writer());
                if self == Mode::CrateVisitor {
                    lines = lines.visitor_only();
                }
                let guard = lines.guard();
                let subscriber = tracing_subscriber::registry()
                    .with(lines)
                    .with(LevelFilter::INFO);
                (tracing::Dispatch::new(subscriber), Some(guard))
            }
            Mode::Registry => (
                tracing::Dispatch::new(tracing_subscriber::registry().with(LevelFilter::INFO)),
                None,
            ),
            Mode::None => return None,
        })
    }
}

/// The subscriber of every mode but `--no-subscriber`: `fmt`'s defaults, max level `INFO`.
fn subscriber<W>(writer: W) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .with_writer(writer)
        .with_max_level(tracing::Level::INFO)
        .finish()
}

/// A writer appending to a shared buffer: the line-length measurement's `MakeWriter`.
struct Capture(Arc<Mutex<Vec<u8>>>);

impl io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

/// The template's headers, promoted to shared buffers (their first clone allocates).
fn template() -> HeaderMap {
    let headers = request_headers();
    drop(black_box(headers.clone()));
    headers
}

/// Allocations (`alloc` + `realloc`) and bytes allocated per request, over `n` requests.
fn allocations(run: &mut Runner, runtime: &Runtime, headers: &HeaderMap, n: u64) -> (f64, f64) {
    let region = Region::new(GLOBAL);
    black_box(run(runtime, headers, n));
    let change = region.change();
    let per = |x: usize| x as f64 / n as f64;
    (
        per(change.allocations + change.reallocations),
        per(change.bytes_allocated),
    )
}

/// The bytes and lines the subscriber writes for one request of `run`, and the request's body
/// bytes.
fn one_line(
    mode: Mode,
    run: &mut Runner,
    runtime: &Runtime,
    headers: &HeaderMap,
) -> (String, usize) {
    let buffer = Arc::new(Mutex::new(Vec::new()));
    let writer = Arc::clone(&buffer);
    let Some((dispatch, guard)) = mode.subscriber(move || Capture(Arc::clone(&writer))) else {
        return (String::new(), run(runtime, headers, 1));
    };
    let body = tracing::dispatcher::with_default(&dispatch, || run(runtime, headers, 1));
    if let Some(guard) = guard {
        assert!(guard.flush(Duration::from_secs(10)));
    }
    let bytes = std::mem::take(&mut *buffer.lock().unwrap());
    (String::from_utf8(bytes).unwrap(), body)
}

fn fmt_count(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.3}")
    }
}

fn table(mode: Mode) {
    let runtime = runtime();
    let headers = template();
    let mut rows = Vec::new();
    for (name, mut run) in variants() {
        run(&runtime, &headers, WARM_UP);
        let (allocs, bytes) = allocations(&mut run, &runtime, &headers, REQUESTS);
        rows.push((name, run, allocs, bytes));
    }
    let name = mode.name();
    println!("\nPer request ({name}; alloc + realloc, mean of {REQUESTS} after {WARM_UP}):\n");
    println!("| variant | allocations | bytes allocated | line bytes | lines |");
    println!("|---|---:|---:|---:|---:|");
    let mut lines = Vec::new();
    for (name, run, allocs, bytes) in &mut rows {
        // Measured after every count: the capturing dispatcher would change the fast path.
        let (written, body) = one_line(mode, run, &runtime, &headers);
        assert_eq!(body, 5, "{name}: the body was not driven to its end");
        println!(
            "| {name} | {} | {} | {} | {} |",
            fmt_count(*allocs),
            fmt_count(*bytes),
            written.len(),
            written.lines().count(),
        );
        lines.push((*name, written));
    }
    if mode != Mode::None {
        println!("\nThe lines (one request each):\n");
        for (name, written) in lines {
            println!("{name}:\n```text\n{}```", written);
        }
    }
}

fn criterion(mode: Mode, rounds: usize) {
    let runtime = runtime();
    let headers = template();
    let mut variants = variants();
    let mut c = criterion::Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .without_plots();
    let group = match mode {
        Mode::Fmt => "access_line/subscriber",
        Mode::Json => "access_line/json",
        Mode::Crate => "access_line/crate_writer",
        Mode::CrateVisitor => "access_line/crate_writer_visitor",
        Mode::Registry => "access_line/registry",
        Mode::None => "access_line/no_subscriber",
    };
    for _ in 0..rounds {
        let mut group = c.benchmark_group(group);
        for (name, run) in &mut variants {
            group.bench_function(*name, |b| {
                b.iter_custom(|iters| {
                    let start = Instant::now();
                    black_box(run(&runtime, &headers, iters));
                    start.elapsed()
                })
            });
        }
        group.finish();
    }
    c.final_summary();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = Mode::of(&args);
    // Kept to the end: dropping it would flush (the process exits first).
    let _guard = match mode.subscriber(io::sink) {
        Some((dispatch, guard)) => {
            tracing::dispatcher::set_global_default(dispatch).unwrap();
            guard
        }
        None => None,
    };
    if let Some(at) = args.iter().position(|arg| arg == "--run") {
        let usage = "--run <variant> <count> [--no-subscriber]";
        let name = args.get(at + 1).expect(usage);
        let n: u64 = args.get(at + 2).and_then(|n| n.parse().ok()).expect(usage);
        let (_, mut run) = variants()
            .into_iter()
            .find(|(id, _)| id == name)
            .unwrap_or_else(|| panic!("unknown variant {name:?}"));
        let runtime = runtime();
        let headers = template();
        run(&runtime, &headers, WARM_UP);
        black_box(run(&runtime, &headers, n));
        return;
    }
    if args.iter().any(|arg| arg == "--criterion") {
        let rounds = match args.iter().position(|arg| arg == "--rounds") {
            Some(at) => args
                .get(at + 1)
                .and_then(|n| n.parse().ok())
                .expect("--rounds N"),
            None => 1,
        };
        criterion(mode, rounds);
        return;
    }
    table(mode);
}
