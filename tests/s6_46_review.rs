//! Review of the access line's per-thread slot (`JsonLines` taking the `request completed`
//! line's values from the access log): lines whose printed fields are not their event's.
//! In process, no sockets, bounded.
#![cfg(all(feature = "access-json", feature = "full"))]

use std::convert::Infallible;
use std::io;
use std::pin::pin;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty, Full};
use serde_json::{Map, Value};
use shared_headers::server::SharedHeadersLayer;
use shared_headers::server::access_log::AccessLog;
use shared_headers::server::access_log::json::JsonLines;
use tower::{Layer, Service, ServiceExt, service_fn};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};

mod support;
use support::Lines as Buffer;

type Body = http_body_util::combinators::UnsyncBoxBody<Bytes, Infallible>;

async fn hello(_req: Request<Empty<Bytes>>) -> Result<Response<Body>, Infallible> {
    Ok(Response::new(
        Full::new(Bytes::from_static(b"hello")).boxed_unsync(),
    ))
}

/// One request through the layer with its access line, its body read to the end.
fn serve_one(path: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut service = SharedHeadersLayer::new()
        .timeout(Duration::from_secs(30))
        .access_log(AccessLog::new())
        .layer(service_fn(hello));
    let req = Request::get(path)
        .header("host", "api.example")
        .header("user-agent", "curl/8.5.0")
        .body(Empty::new())
        .unwrap();
    runtime.block_on(async {
        let res = service.ready().await.unwrap().call(req).await.unwrap();
        let mut body = pin!(res.into_body());
        while let Some(frame) = body.as_mut().frame().await {
            frame.unwrap();
        }
    });
}

fn lines(output: &str) -> Vec<Map<String, Value>> {
    output
        .lines()
        .map(|line| match serde_json::from_str(line) {
            Ok(Value::Object(object)) => object,
            other => panic!("not a JSON object ({other:?}): {line}"),
        })
        .collect()
}

/// A layer that, seeing the access line, emits an event of its own on the same target (an
/// audit trail, a bridge that re-logs): with a global subscriber (no scoped one in the
/// process, the usual server), `tracing` dispatches that nested event to the same subscriber.
struct Audit;

impl<S: Subscriber> tracing_subscriber::Layer<S> for Audit {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        if event.metadata().target() != "shared_headers::access"
            || event.metadata().level() != &tracing::Level::INFO
        {
            return;
        }
        tracing::warn!(
            target: "shared_headers::access",
            audit_kind = "forwarded",
            "audit"
        );
    }
}

/// Runs `name` alone in a child process of this test binary with `S6_46_CHILD` set (a global
/// subscriber can be set once a process, and only with no scoped one in the process are
/// nested events dispatched), and fails with the child's output if it failed.
fn in_child(name: &str) -> bool {
    if std::env::var("S6_46_CHILD").as_deref() == Ok(name) {
        return true;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("S6_46_CHILD", name)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "child {name} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    false
}

/// An event of the access target emitted while the access line is being dispatched (from
/// another layer of the same global subscriber) is written by `JsonLines` with the access
/// line's fields from the armed slot, in place of its own: its message and fields are the
/// access line's, and the line carries a `url.path` its event never had.
#[test]
fn an_access_target_event_emitted_inside_the_lines_dispatch_prints_its_own_fields() {
    if !in_child("an_access_target_event_emitted_inside_the_lines_dispatch_prints_its_own_fields") {
        return;
    }
    let output = Buffer::default();
    let writer = JsonLines::new(output.clone());
    let guard = writer.guard();
    let subscriber = tracing_subscriber::registry().with(Audit).with(writer);
    tracing::subscriber::set_global_default(subscriber).unwrap();
    serve_one("/orders/42");
    assert!(guard.flush(Duration::from_secs(10)));
    let output = output.take();
    let lines = lines(&output);
    assert_eq!(lines.len(), 2, "{output}");
    let messages: Vec<_> = lines
        .iter()
        .map(|l| {
            l.get("message")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    assert_eq!(
        messages,
        ["audit", "request completed"],
        "the audit event's line has the access line's message: {output}"
    );
    let audit = &lines[0];
    assert_eq!(
        audit.get("audit_kind").and_then(Value::as_str),
        Some("forwarded"),
        "the audit event's own field is missing: {output}"
    );
    assert!(
        audit.get("url.path").is_none(),
        "the audit event's line carries the access line's fields: {output}"
    );
}

/// The handed values against the visitor's bytes for requests the branch's matrix lacks: an
/// unknown method, absolute-form and authority-form targets, a port that is not the scheme's,
/// `OPTIONS *`, a Connect call, a caller's budget (taken and refused), an HTTP/2 request, an
/// IPv4-mapped IPv6 peer, an empty and a very long path.
#[test]
fn the_handed_values_print_the_visitors_bytes_for_more_request_shapes() {
    use shared_headers::deadline::BudgetHeader;
    let handed = Buffer::default();
    let visited = Buffer::default();
    let fast = JsonLines::new(handed.clone());
    let slow = JsonLines::new(visited.clone()).visitor_only();
    let (fast_guard, slow_guard) = (fast.guard(), slow.guard());
    let subscriber = tracing_subscriber::registry().with(fast).with(slow);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let peer = |ext: &http::Extensions| ext.get::<std::net::SocketAddr>().copied();
    let mut service = SharedHeadersLayer::new()
        .timeout(Duration::from_secs(30))
        .caller_budget(BudgetHeader::envoy_expected_rq_timeout_ms())
        .peer_address(peer)
        .access_log(AccessLog::new())
        .layer(service_fn(hello));
    let long = format!("/{}", "a%22\\b".repeat(3000));
    let cases: Vec<(&str, Request<Empty<Bytes>>)> = vec![
        (
            "unknown method",
            Request::builder()
                .method("FOO")
                .uri("/x")
                .body(Empty::new())
                .unwrap(),
        ),
        (
            "absolute-form, odd port",
            Request::get("https://api.example:9443/a/b?c=d")
                .body(Empty::new())
                .unwrap(),
        ),
        (
            "authority-form",
            Request::connect("api.example:443")
                .body(Empty::new())
                .unwrap(),
        ),
        (
            "options *",
            Request::options("*")
                .header("host", "h")
                .body(Empty::new())
                .unwrap(),
        ),
        (
            "connect rpc",
            Request::post("/pkg.Svc/Do")
                .header("content-type", "application/proto")
                .header("connect-protocol-version", "1")
                .body(Empty::new())
                .unwrap(),
        ),
        (
            "budget",
            Request::get("/b")
                .header("x-envoy-expected-rq-timeout-ms", "5000")
                .body(Empty::new())
                .unwrap(),
        ),
        (
            "refused budget",
            Request::get("/b")
                .header("x-envoy-expected-rq-timeout-ms", "-1\"\\")
                .body(Empty::new())
                .unwrap(),
        ),
        (
            "http/2",
            Request::get("https://api.example/h2")
                .version(http::Version::HTTP_2)
                .body(Empty::new())
                .unwrap(),
        ),
        (
            "empty path",
            Request::get("http://h").body(Empty::new()).unwrap(),
        ),
        (
            "long path",
            Request::get(long.as_str()).body(Empty::new()).unwrap(),
        ),
    ];
    let peers: [std::net::SocketAddr; 3] = [
        "[::ffff:192.0.2.9]:1".parse().unwrap(),
        "[fe80::1%7]:65535".parse().unwrap(),
        "0.0.0.0:0".parse().unwrap(),
    ];
    tracing::subscriber::with_default(subscriber, || {
        for (i, (cell, mut req)) in cases.into_iter().enumerate() {
            req.extensions_mut().insert(peers[i % 3]);
            runtime.block_on(async {
                let res = service.ready().await.unwrap().call(req).await.unwrap();
                let mut body = pin!(res.into_body());
                while let Some(frame) = body.as_mut().frame().await {
                    frame.unwrap();
                }
            });
            assert!(fast_guard.flush(Duration::from_secs(10)), "{cell}");
            assert!(slow_guard.flush(Duration::from_secs(10)), "{cell}");
            let (a, b) = (handed.take(), visited.take());
            assert_eq!(lines(&a).len(), 1, "{cell}: {a}");
            assert_eq!(lines(&b).len(), 1, "{cell}: {b}");
            let after = |line: &str| line[line.find(",\"level\"").unwrap()..].to_owned();
            assert_eq!(after(&a), after(&b), "{cell}");
        }
    });
}

/// Every byte below 0x80 (the control characters, DEL, `"`, `\`) at every offset of texts of
/// 1 to 24 bytes (whole words, tails, the buffer's ends): each value reads back as it was.
#[test]
fn every_ascii_byte_at_every_offset_reads_back() {
    let output = Buffer::default();
    // Room for every line: none dropped however slow the writing thread.
    let writer = JsonLines::with_capacity(output.clone(), 64 << 20);
    let guard = writer.guard();
    let subscriber = tracing_subscriber::registry().with(writer);
    let mut sent = Vec::new();
    tracing::subscriber::with_default(subscriber, || {
        for len in 1..=24usize {
            for at in 0..len {
                for b in 0u8..0x80 {
                    let mut text = vec![b'x'; len];
                    text[at] = b;
                    let text = String::from_utf8(text).unwrap();
                    tracing::info!(target: "shared_headers::access", v = text.as_str(), d = ?text);
                    sent.push(text);
                }
            }
        }
    });
    assert!(guard.flush(Duration::from_secs(30)));
    assert_eq!(guard.dropped_lines(), 0);
    let output = output.take();
    let lines = lines(&output);
    assert_eq!(lines.len(), sent.len());
    for (line, text) in lines.iter().zip(&sent) {
        assert_eq!(
            line.get("v").and_then(Value::as_str),
            Some(text.as_str()),
            "{line:?}"
        );
        assert_eq!(
            line.get("d").and_then(Value::as_str),
            Some(format!("{text:?}").as_str()),
            "{line:?}"
        );
    }
}

/// Four threads of requests through one subscriber with two writers, one taking the handed
/// values and one visiting: every line whole, each request's line once in each, and the two
/// outputs the same lines (after the timestamp).
#[test]
fn two_writers_under_four_threads_write_the_same_whole_lines() {
    let handed = Buffer::default();
    let visited = Buffer::default();
    let fast = JsonLines::with_capacity(handed.clone(), 16 << 20);
    let slow = JsonLines::with_capacity(visited.clone(), 16 << 20).visitor_only();
    let (fast_guard, slow_guard) = (fast.guard(), slow.guard());
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(fast).with(slow));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let dispatch = dispatch.clone();
            std::thread::spawn(move || {
                tracing::dispatcher::with_default(&dispatch, || {
                    for i in 0..50 {
                        serve_one(&format!("/t{t}/r{i}/{}", "q%22".repeat(i * 7)));
                    }
                })
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert!(fast_guard.flush(Duration::from_secs(20)));
    assert!(slow_guard.flush(Duration::from_secs(20)));
    assert_eq!(fast_guard.dropped_lines() + slow_guard.dropped_lines(), 0);
    let sorted = |output: String| {
        let mut all: Vec<String> = output
            .lines()
            .map(|line| line[line.find(",\"level\"").unwrap()..].to_owned())
            .collect();
        let parsed = lines(&output);
        assert_eq!(parsed.len(), 200, "{output}");
        all.sort();
        all
    };
    let (a, b) = (sorted(handed.take()), sorted(visited.take()));
    assert_eq!(a, b);
    let mut paths: Vec<_> = a
        .iter()
        .map(|l| {
            let v: Map<String, Value> = serde_json::from_str(&format!("{{\"x\":0{l}")).unwrap();
            v["url.path"].as_str().unwrap().to_owned()
        })
        .collect();
    paths.sort();
    paths.dedup();
    assert_eq!(paths.len(), 200);
}

/// A counting global allocator (`stats_alloc`, as `tests/alloc.rs`): process-wide, so the test
/// that reads it runs alone in a child process.
#[global_allocator]
static GLOBAL: &stats_alloc::StatsAlloc<std::alloc::System> = &stats_alloc::INSTRUMENTED_SYSTEM;

mod counting {
    pub fn count() -> u64 {
        super::GLOBAL.stats().allocations as u64
    }
}

/// Allocations per request on the request's thread, `subscriber` the default, the layer
/// propagating the request's id and the request carrying one (`x-request-id`).
fn allocations_per_request(dispatch: &tracing::Dispatch) -> f64 {
    use shared_headers::context::Propagation;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut service = SharedHeadersLayer::new()
        .timeout(Duration::from_secs(30))
        .propagate(Propagation::new().request_id())
        .access_log(AccessLog::new())
        .layer(service_fn(hello));
    let mut run = |n: u64| {
        for i in 0..n {
            let req = Request::get("/orders/42")
                .header("host", "api.example")
                .header("x-request-id", format!("req-{}", 100_000 + i))
                .body(Empty::new())
                .unwrap();
            runtime.block_on(async {
                let res = service.ready().await.unwrap().call(req).await.unwrap();
                let mut body = pin!(res.into_body());
                while let Some(frame) = body.as_mut().frame().await {
                    frame.unwrap();
                }
            });
        }
    };
    tracing::dispatcher::with_default(dispatch, || {
        run(200);
        let before = counting::count();
        run(500);
        (counting::count() - before) as f64 / 500.0
    })
}

/// The docs say the line through the writer allocates nothing ("14 allocations per request
/// with the line or without it, as under the `Registry` alone"). A request with an id (the
/// layer propagating `x-request-id`, the writer given the request's span as the docs' filter
/// does): the writer keeps the span's fields in a `Vec` boxed in the span's extensions, per
/// request.
#[test]
fn the_writer_allocates_nothing_per_request_with_a_request_id() {
    if !in_child("the_writer_allocates_nothing_per_request_with_a_request_id") {
        return;
    }
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::filter::filter_fn;
    let line_and_span = |meta: &tracing::Metadata<'_>| {
        matches!(
            meta.target(),
            "shared_headers::access" | "shared_headers::request"
        )
    };
    let registry = tracing::Dispatch::new(tracing_subscriber::registry());
    let writer = JsonLines::new(io::sink());
    let guard = writer.guard();
    let with_writer = tracing::Dispatch::new(
        tracing_subscriber::registry().with(writer.with_filter(filter_fn(line_and_span))),
    );
    let base = allocations_per_request(&registry);
    let ours = allocations_per_request(&with_writer);
    assert!(guard.flush(Duration::from_secs(10)));
    assert!(
        ours <= base,
        "the writer allocates per request with a request id: {ours} against {base} under the Registry alone"
    );
}
