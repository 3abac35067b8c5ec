//! Review of the access line's JSON writer (`JsonLines`) and of the server span started only
//! when the tracer records (`otel_tracer`): failing tests, one per finding. In process, no
//! sockets, each test bounded.
#![cfg(all(feature = "access-json", feature = "opentelemetry", feature = "full"))]

use std::convert::Infallible;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use opentelemetry::trace::{Link, SpanKind, TraceContextExt, TraceId, TracerProvider};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{
    InMemorySpanExporter, SamplingDecision, SamplingResult, SdkTracerProvider, ShouldSample,
};
use shared_headers::server::SharedHeadersLayer;
use shared_headers::server::access_log::json::JsonLines;
use tower::{Layer, ServiceExt};
use tracing_subscriber::layer::SubscriberExt;

/// A writer into a shared buffer; each write takes `delay` first.
#[derive(Clone, Default)]
struct Slow {
    bytes: Arc<Mutex<Vec<u8>>>,
    delay: Duration,
    /// Writes fail with this kind (none: they succeed).
    fail: Option<io::ErrorKind>,
}

impl Slow {
    fn text(&self) -> String {
        String::from_utf8(self.bytes.lock().unwrap().clone()).unwrap()
    }
}

impl io::Write for Slow {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        std::thread::sleep(self.delay);
        if let Some(kind) = self.fail {
            return Err(kind.into());
        }
        self.bytes.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Every test here that registers a subscriber or runs the layer holds this lock. `tracing-core`
/// upgrades each live subscriber for a moment whenever a thread registers a callsite or a
/// dispatcher (another test of this binary, running the layer or installing its own): when
/// that moment is the one a scoped `with_default` returns in, the last reference, and with it
/// the layer's drop, is on that other thread, and the test reads the output before its lines
/// are written (seen: 3 runs in 150 with the tests in parallel, none alone). One at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Three access-target events, as the access log emits them (its target, its field shapes).
fn three_lines() {
    for i in 0..3u64 {
        tracing::event!(
            target: "shared_headers::access",
            tracing::Level::INFO,
            url.path = "/x",
            shared_headers.time_to_commit_us = i,
            "request completed"
        );
    }
}

/// The module docs: "dropping the guard does it (for at most one second), and so does dropping
/// the layer". A program that drops its subscriber (a scoped `with_default` in `main`) and
/// returns has lost every line the thread had not written yet: dropping the layer only asks
/// the thread to finish, it does not wait for it.
#[test]
fn dropping_the_layer_writes_the_last_lines_before_it_returns() {
    let _serial = serial();
    let output = Slow {
        delay: Duration::from_millis(300),
        ..Slow::default()
    };
    let lines = JsonLines::new(output.clone());
    tracing::subscriber::with_default(tracing_subscriber::registry().with(lines), three_lines);
    // The subscriber and the layer are dropped: as at the end of `main`, nothing runs after.
    let written = output.text();
    assert_eq!(
        written.lines().count(),
        3,
        "dropping the layer returned before its lines were written: {written:?}"
    );
}

/// `JsonLinesGuard::flush`: "`true` if they were [written and flushed]". Lines whose write
/// failed (counted dropped) make it return `true` all the same.
#[test]
fn flush_says_false_when_the_lines_could_not_be_written() {
    let _serial = serial();
    let output = Slow {
        fail: Some(io::ErrorKind::BrokenPipe),
        ..Slow::default()
    };
    let lines = JsonLines::new(output.clone());
    let guard = lines.guard();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(lines));
    tracing::dispatcher::with_default(&dispatch, three_lines);
    let flushed = guard.flush(Duration::from_secs(10));
    assert_eq!(guard.dropped_lines(), 3, "the lines failed");
    assert!(
        !flushed,
        "flush returned true, yet none of the 3 lines was written (all dropped)"
    );
}

/// A float the line carries is written as a JSON number with its value: `fmt().json()` writes
/// `1e-12` for `1e-12` and `1.7976931348623157e308` for `f64::MAX`; the writer rounds every
/// float in 0..9e6 to nanoseconds, as if it were a duration (`1e-12` becomes `0`,
/// `0.1 + 0.2` becomes `0.3`), and prints the others through `Display`, without an exponent:
/// `f64::MAX` as 309 digits, which serde_json refuses ("number out of range").
#[test]
fn a_float_field_keeps_its_value() {
    let _serial = serial();
    let output = Slow::default();
    let lines = JsonLines::new(output.clone());
    let guard = lines.guard();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(lines));
    tracing::dispatcher::with_default(&dispatch, || {
        tracing::event!(
            target: "shared_headers::access",
            tracing::Level::INFO,
            ratio = 1e-12_f64,
            sum = 0.1_f64 + 0.2_f64,
            "request completed"
        );
        tracing::event!(
            target: "shared_headers::access",
            tracing::Level::INFO,
            huge = f64::MAX,
            "request completed"
        );
    });
    assert!(guard.flush(Duration::from_secs(10)));
    let text = output.text();
    let parse = |line: &str| -> serde_json::Value {
        match serde_json::from_str(line) {
            Ok(value) => value,
            Err(error) => panic!("not a line serde_json reads ({error}): {line}"),
        }
    };
    let parsed: Vec<&str> = text.lines().collect();
    let first = parse(parsed[0]);
    assert_eq!(first["ratio"].as_f64(), Some(1e-12), "ratio lost: {text}");
    assert_eq!(
        first["sum"].as_f64(),
        Some(0.1_f64 + 0.2_f64),
        "sum lost: {text}"
    );
    assert_eq!(parse(parsed[1])["huge"].as_f64(), Some(f64::MAX), "{text}");
}

/// The fifth point: one figure per variant across the docs, from one run. The pages
/// it named still disagree about `layer_timeout` (`scripts/callgrind-per-op layer_timeout`
/// prints 8,107 on this build; `docs::performance` says 8,108). The figure is today's run of
/// that script, the one every page now quotes: the thread sweep's `layer_timeout` row of
/// `docs::performance`, its headline and the rows of `docs::context` and `docs::admission`.
#[test]
fn the_docs_give_one_figure_for_layer_timeout() {
    let performance = include_str!("../src/docs/performance.rs");
    let context = include_str!("../src/docs/context.rs");
    let admission = include_str!("../src/docs/admission.rs");
    let figure = |page: &str, row: &str| -> String {
        let line = page
            .lines()
            .find(|line| line.contains(row))
            .unwrap_or_else(|| panic!("no row {row}"));
        line.split('|')
            .nth(if row.starts_with("| server") { 3 } else { 2 })
            .unwrap()
            .trim()
            .to_owned()
    };
    let run = figure(performance, "//! | `layer_timeout` |");
    assert!(
        performance.contains(&format!("**{run} instructions**")),
        "docs::performance's headline is not its table's {run}"
    );
    let context_figure = figure(context, "| server | `layer_timeout` (nothing propagated)");
    let admission_figure = figure(admission, "| `layer_timeout` (no admission)");
    assert_eq!(
        (context_figure.as_str(), admission_figure.as_str()),
        (run.as_str(), run.as_str()),
        "docs::context and docs::admission give other figures for layer_timeout than docs::performance"
    );
}

/// A sampler that keeps what it was shown, and drops health checks by their path.
#[derive(Clone, Debug, Default)]
struct PathSampler {
    seen: Arc<Mutex<Vec<Vec<String>>>>,
}

impl ShouldSample for PathSampler {
    fn should_sample(
        &self,
        parent_context: Option<&Context>,
        _trace_id: TraceId,
        _name: &str,
        _span_kind: &SpanKind,
        attributes: &[KeyValue],
        _links: &[Link],
    ) -> SamplingResult {
        self.seen.lock().unwrap().push(
            attributes
                .iter()
                .map(|kv| format!("{}={}", kv.key, kv.value))
                .collect(),
        );
        let health = attributes
            .iter()
            .any(|kv| kv.key.as_str() == "url.path" && kv.value.as_str() == "/health");
        SamplingResult {
            decision: if health {
                SamplingDecision::Drop
            } else {
                SamplingDecision::RecordAndSample
            },
            attributes: Vec::new(),
            trace_state: parent_context
                .map(|c| c.span().span_context().trace_state().clone())
                .unwrap_or_default(),
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// OpenTelemetry's HTTP semantic conventions: `http.request.method`, `url.path`, `url.scheme`,
/// `server.address`, `server.port` "MUST be provided at span creation time (when provided at
/// all), so they can be considered for sampling decisions". The branch starts the span on a
/// builder without attributes ("a sampler sees no attribute"): a sampler that drops health
/// checks by `url.path` (as it did on main) now keeps every one of them.
#[test]
fn otel_the_sampler_sees_the_request_attributes() {
    let _serial = serial();
    let sampler = PathSampler::default();
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_sampler(sampler.clone())
        .with_simple_exporter(exporter.clone())
        .build();
    let svc = SharedHeadersLayer::new()
        .otel_tracer(provider.tracer("server"))
        .layer(tower::service_fn(|_req: Request<()>| async {
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
        }));
    runtime().block_on(async {
        for path in ["/health", "/users/42"] {
            let mut req = Request::new(());
            *req.uri_mut() = path.parse().unwrap();
            req.headers_mut()
                .insert("host", "api.example".parse().unwrap());
            req.headers_mut().insert(
                "traceparent",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
                    .parse()
                    .unwrap(),
            );
            let res = svc.clone().oneshot(req).await.unwrap();
            res.into_body().collect().await.unwrap();
        }
    });
    let seen = sampler.seen.lock().unwrap().clone();
    assert!(
        seen.iter()
            .all(|attributes| attributes.iter().any(|a| a.starts_with("url.path="))),
        "the sampler was asked without the request's attributes: {seen:?}"
    );
    let finished = exporter.get_finished_spans().unwrap();
    let paths: Vec<_> = finished
        .iter()
        .flat_map(|span| span.attributes.iter())
        .filter(|kv| kv.key.as_str() == "url.path")
        .map(|kv| kv.value.to_string())
        .collect();
    assert_eq!(
        paths,
        ["/users/42"],
        "a sampler dropping /health by its path kept it"
    );
}
