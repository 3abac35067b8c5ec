//! The order of the layer's setters never matters: for every pair of `SharedHeadersLayer`
//! setters that touch the same data, the layer built with the pair in one order and the layer
//! built with it in the other behave the same on the same requests (an answered one, one timed
//! out by the caller's budget, one over the request limits): the same responses (status,
//! headers, body), the same records (outcome, budget, redacted headers), the same access lines,
//! the same metric points, the same OpenTelemetry spans, the same context in scope, the same
//! hook calls, the same counters read from `stats()`.
//!
//! Two calls of one setter are not a pair here: a setter that **sets** replaces (the last call
//! wins), one that **adds** runs its hooks in the order added; both say so on their first doc
//! line. Hooks are compared as the set of calls each request got.
#![cfg(all(feature = "tracing", feature = "opentelemetry"))]

use std::convert::Infallible;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{HeaderName, HeaderValue, Request, Response};
use http_body_util::BodyExt;
use opentelemetry::KeyValue;
use shared_headers::context::{Propagation, RequestContext};
use shared_headers::deadline::BudgetHeader;
use shared_headers::server::access_log::AccessLog;
use shared_headers::server::{Admission, HeaderSelection, SharedHeadersLayer};
use shared_headers::{Builder, Committed, Exchange};
use tower::{Layer, ServiceExt, service_fn};

#[path = "support/capture.rs"]
mod capture;
use capture::{access_lines_of, capture, lock};

#[path = "support/otel_memory.rs"]
mod otel_memory;
use otel_memory::Metrics;

#[path = "support/otel_spans.rs"]
mod otel_spans;
use otel_spans::Spans;

/// What the hooks saw, one string per call.
type Sink = Arc<Mutex<Vec<String>>>;

/// What one run needs beside the layer: where hooks write, and a meter read from memory.
struct Env {
    sink: Sink,
    late: Sink,
    metrics: Metrics,
    spans: Spans,
}

type Setter = Box<dyn Fn(SharedHeadersLayer) -> SharedHeadersLayer>;

fn name(s: &'static str) -> HeaderName {
    HeaderName::from_static(s)
}

/// Every setter of the pairs below, by name, made for one run.
fn setter(env: &Env, which: &str) -> Setter {
    let sink = env.sink.clone();
    let late = env.late.clone();
    match which {
        "timeout" => Box::new(|l| l.timeout(Duration::from_millis(100))),
        "request_policy" => Box::new(|l| {
            l.request_policy(Builder::new().max_entries(13).sensitive([
                name("x-tenant"),
                name("x-session"),
                http::header::HOST,
            ]))
        }),
        "response_policy" => {
            Box::new(|l| l.response_policy(Builder::new().sensitive([name("x-cache")])))
        }
        "propagate" => Box::new(|l| {
            l.propagate(
                Propagation::new()
                    .request_id()
                    .w3c()
                    .header(name("x-tenant"))
                    .unwrap()
                    .header(name("x-cache"))
                    .unwrap(),
            )
        }),
        "copy_request_headers" => Box::new(|l| {
            l.copy_request_headers(HeaderSelection::only([
                name("x-tenant"),
                name("x-session"),
                name("x-request-id"),
            ]))
        }),
        "own_answer_headers" => Box::new(|l| {
            l.own_answer_headers(HeaderSelection::only([
                name("x-request-id"),
                name("x-cache"),
            ]))
        }),
        "access_log" => Box::new(|l| {
            l.access_log(
                AccessLog::new()
                    .request_headers(HeaderSelection::all())
                    .response_headers(HeaderSelection::all()),
            )
        }),
        "tracing_access_log" => Box::new(|l| l.tracing_access_log()),
        "otel_metric_attribute" => {
            Box::new(|l| l.otel_metric_attribute(|_| Some(KeyValue::new("test.attribute", true))))
        }
        "otel_metrics" => {
            let meter = env.metrics.meter();
            Box::new(move |l| l.otel_metrics(&meter))
        }
        "default_scheme" => Box::new(|l| l.default_scheme(http::uri::Scheme::HTTPS)),
        "otel_tracer" => {
            let tracer = env.spans.tracer("order");
            Box::new(move |l| l.otel_tracer(tracer.clone()))
        }
        "admission" => Box::new(|l| {
            l.admission(
                Admission::new()
                    .warm_up(1)
                    .max_shed(1.0)
                    .limit(NonZeroUsize::new(4).unwrap()),
            )
        }),
        "caller_budget_grpc" => Box::new(|l| l.caller_budget(BudgetHeader::grpc_timeout())),
        "caller_budget_millis" => {
            Box::new(|l| l.caller_budget(BudgetHeader::millis(name("x-budget"))))
        }
        "record_in_response" => Box::new(|l| l.record_in_response(false)),
        "on_commit_a" | "on_commit_b" => {
            let tag = which.to_owned();
            Box::new(move |l| {
                let (sink, tag) = (sink.clone(), tag.clone());
                l.on_commit(move |event| {
                    let c = event.committed();
                    let sent = event.sent().map(|head| head.status.as_u16());
                    lock(&sink).push(format!("{tag} {} {} {sent:?}", path(c), c.outcome()));
                })
            })
        }
        "on_response_end_a" | "on_response_end_b" => {
            let tag = which.to_owned();
            Box::new(move |l| {
                let (sink, tag) = (sink.clone(), tag.clone());
                l.on_response_end(move |end| {
                    // How many access lines this request had when the hook ran.
                    let lines = access_lines_of(&path(end.committed())).len();
                    lock(&sink).push(format!(
                        "{tag} {} {:?} {} lines={lines}",
                        path(end.committed()),
                        end.status_sent(),
                        end.url_scheme(),
                    ));
                })
            })
        }
        "on_late_writes_a" | "on_late_writes_b" => {
            let tag = which.to_owned();
            Box::new(move |l| {
                let (late, tag) = (late.clone(), tag.clone());
                l.on_late_writes(move |w| lock(&late).push(format!("{tag} {}", w.refused_writes())))
            })
        }
        other => panic!("no setter {other}"),
    }
}

/// The pairs of setters that touch the same data.
const PAIRS: &[(&str, &str)] = &[
    // secret names and the propagation
    ("request_policy", "propagate"),
    ("response_policy", "propagate"),
    ("request_policy", "response_policy"),
    // the access line: which log, its secrets, its place among the end hooks, its scheme
    ("access_log", "tracing_access_log"),
    ("access_log", "request_policy"),
    ("access_log", "response_policy"),
    ("access_log", "on_response_end_a"),
    ("tracing_access_log", "on_response_end_a"),
    ("access_log", "default_scheme"),
    // the metrics: which ones, their scheme, their place among the end hooks
    ("otel_metric_attribute", "otel_metrics"),
    ("otel_metrics", "default_scheme"),
    ("otel_metrics", "on_response_end_a"),
    ("otel_metrics", "access_log"),
    // the OpenTelemetry span: the hop it makes, its secrets, its scheme, its place among
    // the end consumers
    ("otel_tracer", "propagate"),
    ("otel_tracer", "request_policy"),
    ("otel_tracer", "default_scheme"),
    ("otel_tracer", "otel_metrics"),
    ("otel_tracer", "access_log"),
    ("otel_tracer", "timeout"),
    // the deadline, and admission that judges by it
    ("caller_budget_grpc", "caller_budget_millis"),
    ("timeout", "caller_budget_millis"),
    ("admission", "timeout"),
    ("admission", "caller_budget_grpc"),
    ("admission", "caller_budget_millis"),
    ("admission", "access_log"),
    // the request handle and the rejection
    ("copy_request_headers", "request_policy"),
    // own answers and the request id on them
    ("own_answer_headers", "propagate"),
    ("own_answer_headers", "response_policy"),
    // hooks
    ("on_commit_a", "on_commit_b"),
    ("on_response_end_a", "on_response_end_b"),
    ("on_late_writes_a", "on_late_writes_b"),
    ("on_commit_a", "record_in_response"),
    ("on_commit_a", "access_log"),
];

fn path(committed: &Committed) -> String {
    committed
        .uri()
        .map(|uri| uri.path().to_owned())
        .unwrap_or_default()
}

async fn handler(req: Request<()>) -> Result<Response<String>, Infallible> {
    let exchange = req.extensions().get::<Exchange>().unwrap().clone();
    let _ = exchange
        .response()
        .insert("x-cache", HeaderValue::from_static("miss"));
    let _ = exchange
        .response()
        .insert("etag", HeaderValue::from_static("\"v1\""));
    let _ = exchange
        .annotations()
        .insert("x-session", HeaderValue::from_static("s3cr3t-annotation"));
    let late = exchange.clone();
    if req.uri().path().ends_with("/slow") {
        // Before the slow request's 40 ms deadline: in what its timeout answer carries. (It
        // was written 30 ms in, racing that deadline: a loaded machine put it after the
        // commit in one order of a pair and before it in the other.)
        let _ = late
            .response()
            .insert("x-late", HeaderValue::from_static("1"));
    } else {
        // A write after the commit (the answer's, at once), for the late-writes hooks: 30 ms
        // after it is seen (30 ms after the spawn alone came before a commit a loaded machine
        // delayed, and the write was in the answer in one order of a pair).
        tokio::spawn(async move {
            for _ in 0..1_000 {
                if late.is_committed() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            tokio::time::sleep(Duration::from_millis(30)).await;
            let _ = late
                .response()
                .insert("x-late", HeaderValue::from_static("1"));
        });
    }
    let context = RequestContext::current()
        .map(|c| {
            c.headers()
                .map(|(n, v)| format!("{n}={v:?}"))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    if req.uri().path().ends_with("/slow") {
        tokio::time::sleep(Duration::from_secs(10)).await;
    }
    Ok(Response::new(context))
}

/// The requests: answered (both budget headers malformed), timed out (the caller's budget),
/// over the request limits (14 headers).
fn requests(tag: &str) -> Vec<Request<()>> {
    let common = |path: &str, id: &str| {
        Request::get(format!("/{tag}/{path}"))
            .header("x-request-id", id)
            .header("x-tenant", "acme")
            .header("x-session", "s3cr3t-session")
            .header("x-cache", "from-the-client")
            .header("user-agent", "order/1.0")
            .header("host", "api.example:8443")
            .header(
                "traceparent",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            )
    };
    let mut big = common("big", "req-big");
    for i in 0..8 {
        big = big.header(format!("x-extra-{i}"), "1");
    }
    vec![
        common("ok", "req-ok")
            .header("grpc-timeout", "-1S")
            .header("x-budget", "soon")
            .body(())
            .unwrap(),
        common("slow", "req-slow")
            .header("grpc-timeout", "80m")
            .header("x-budget", "40")
            .body(())
            .unwrap(),
        big.body(()).unwrap(),
    ]
}

/// Everything observable of one layer on the requests, as lines (`tag` replaced by `T`).
async fn behaviour(order: &[&str], tag: &str) -> Vec<String> {
    let env = Env {
        sink: Sink::default(),
        late: Sink::default(),
        metrics: Metrics::new(),
        spans: Spans::new(),
    };
    // A deadline on every layer, so that the slow request ends without a budget too.
    let mut layer = SharedHeadersLayer::new().timeout(Duration::from_millis(200));
    for which in order {
        layer = setter(&env, which)(layer);
    }
    let stats = layer.stats();
    let service = layer.layer(service_fn(handler));
    let mut seen = Vec::new();
    for req in requests(tag) {
        let path = req.uri().path().to_owned();
        let res = service.clone().oneshot(req).await.unwrap();
        seen.push(format!("== {path} {}", res.status()));
        let mut headers: Vec<String> = res
            .headers()
            .iter()
            .map(|(n, v)| format!("{n}: {v:?}"))
            .collect();
        headers.sort();
        seen.extend(headers);
        if let Some(c) = res.extensions().get::<Committed>() {
            seen.push(format!(
                "record {} budget={:?} error={:?} deadline={:?}",
                c.outcome(),
                c.budget(),
                c.budget_error().map(|e| e.to_string()),
                c.deadline().map(|d| d.source()),
            ));
            seen.push(format!("request {:?}", c.request()));
            seen.push(format!("response {:?}", c.response()));
        }
        let (parts, body) = res.into_parts();
        drop(parts);
        let body = body.collect().await.unwrap().to_bytes();
        seen.push(format!("body {}", String::from_utf8_lossy(&body)));
        for mut line in access_lines_of(&path) {
            line.retain(|key, _| {
                !(key.contains("duration") || key.ends_with("_us") || key.starts_with("client."))
            });
            seen.push(format!("line {line:?}"));
        }
    }
    let mut hooks = lock(&env.sink).clone();
    hooks.sort();
    seen.extend(hooks.into_iter().map(|h| format!("hook {h}")));
    // The late writes: one request writes after its commit (`/ok`; the slow one writes
    // before its deadline), each hook runs once for it.
    let hooks = order
        .iter()
        .filter(|w| w.starts_with("on_late_writes"))
        .count();
    let start = Instant::now();
    while lock(&env.late).len() < hooks && start.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut late = lock(&env.late).clone();
    late.sort();
    seen.extend(late.into_iter().map(|l| format!("late {l}")));
    let read = env.metrics.read();
    let mut points: Vec<String> = read
        .points
        .iter()
        .map(|(attributes, count, _)| format!("metric b {attributes:?} x{count}"))
        .collect();
    points.sort();
    seen.extend(points);
    env.metrics.shutdown();
    // The spans: one per request when the layer has a tracer.
    let expected = if order.contains(&"otel_tracer") { 3 } else { 0 };
    let mut spans: Vec<String> = env
        .spans
        .wait_for(expected)
        .await
        .iter()
        .map(|span| {
            let mut attributes: Vec<String> = span
                .attributes
                .iter()
                .map(|kv| format!("{}={}", kv.key, kv.value))
                .collect();
            attributes.sort();
            format!(
                "span {} {:?} trace={} parent={} {:?} {attributes:?}",
                span.name,
                span.span_kind,
                span.span_context.trace_id(),
                span.parent_span_id,
                span.status,
            )
        })
        .collect();
    spans.sort();
    seen.extend(spans);
    // The counters, from the layer's stats (not from a clone of its settings). Admission's
    // permits in use and waiters are left out: a permit comes back when the timed-out
    // handler's future is dropped, which may be just after its answer.
    let counts = stats.admission_counts();
    seen.push(format!(
        "stats refused_budgets={} propagation={:?} admission shed={} shed_waiting={} \
         would_shed={} capped={} queued={} left_queue={}",
        stats.refused_budgets(),
        stats.propagation_counts(),
        counts.shed,
        counts.shed_waiting,
        counts.would_shed,
        counts.capped,
        counts.queued,
        counts.left_queue,
    ));
    seen.into_iter()
        .map(|line| without_random_ids(&line.replace(tag, "T")))
        .collect()
}

/// `line` with every span id but the caller's (16 hex digits, made at random by the tracer or
/// the trace hop) as `<id>`.
fn without_random_ids(line: &str) -> String {
    const CALLERS: &str = "00f067aa0ba902b7";
    let bytes = line.as_bytes();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while i < bytes.len() {
        let run = bytes[i..]
            .iter()
            .take_while(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
            .count();
        if run == 0 {
            let c = line[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
            continue;
        }
        let word = &line[i..i + run];
        let alone = i == 0 || !bytes[i - 1].is_ascii_alphanumeric();
        if run == 16 && alone && word != CALLERS {
            out.push_str("<id>");
        } else {
            out.push_str(word);
        }
        i += run;
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_pair_of_setters_on_the_same_data_gives_the_same_layer_in_both_orders() {
    capture();
    for (i, (a, b)) in PAIRS.iter().enumerate() {
        let forward = behaviour(&[a, b], &format!("p{i}f")).await;
        let backward = behaviour(&[b, a], &format!("p{i}b")).await;
        assert_eq!(
            forward, backward,
            "`{a}` then `{b}` differs from `{b}` then `{a}`"
        );
    }
}

/// The harness sees what it compares: a setter that changes behaviour changes the lines (a
/// negative control: two different layers must not compare equal).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_comparison_tells_different_layers_apart() {
    capture();
    let cases: &[(&[&str], &[&str])] = &[
        (&["propagate"], &["propagate", "request_policy"]),
        (&["tracing_access_log"], &["access_log"]),
        (
            &["otel_metrics"],
            &["otel_metrics", "otel_metric_attribute"],
        ),
        (&["caller_budget_grpc"], &["caller_budget_millis"]),
        (&["on_commit_a"], &["on_commit_a", "on_commit_b"]),
        (&["on_late_writes_a"], &["on_late_writes_b"]),
        (&["own_answer_headers"], &[]),
        (&["otel_tracer"], &[]),
        (&["otel_tracer"], &["otel_tracer", "default_scheme"]),
    ];
    for (i, (one, other)) in cases.iter().enumerate() {
        let one_seen = behaviour(one, &format!("n{i}x")).await;
        let other_seen = behaviour(other, &format!("n{i}y")).await;
        assert_ne!(one_seen, other_seen, "{one:?} and {other:?} look the same");
    }
}

/// The rules that make the orders agree, seen directly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rules_behind_the_order_independence() {
    capture();
    // Secret wins: a name either policy makes secret is never propagated.
    let seen = behaviour(&["request_policy", "propagate"], "rule-secret").await;
    let body = seen.iter().find(|l| l.starts_with("body ")).unwrap();
    assert!(!body.contains("x-tenant"), "{body}");
    assert!(body.contains("traceparent"), "{body}");
    // An explicit access log wins over the defaults: it prints the header lists.
    let seen = behaviour(&["access_log", "tracing_access_log"], "rule-log").await;
    assert!(
        seen.iter()
            .any(|l| l.starts_with("line ") && l.contains("shared_headers.request_headers")),
        "{seen:#?}"
    );
    // The line is made before the `on_response_end` hooks.
    let seen = behaviour(&["on_response_end_a", "tracing_access_log"], "rule-end").await;
    let ends: Vec<&String> = seen
        .iter()
        .filter(|l| l.starts_with("hook on_response_end_a"))
        .collect();
    assert_eq!(ends.len(), 3);
    assert!(ends.iter().all(|l| l.ends_with("lines=1")), "{ends:?}");
    // An attribute reaches the metric whether it comes before or after `otel_metrics`.
    let seen = behaviour(&["otel_metric_attribute", "otel_metrics"], "rule-metrics").await;
    let points: Vec<&String> = seen.iter().filter(|l| l.starts_with("metric b")).collect();
    assert!(!points.is_empty(), "{seen:#?}");
    assert!(
        points.iter().all(|l| l.contains("test.attribute")),
        "{points:?}"
    );
    // A tracer makes every request a hop of the caller's trace, with or without a
    // propagation set after it; its span's `url.scheme` is the layer's default scheme, and a
    // secret `host` is no attribute.
    for order in [
        &["otel_tracer", "default_scheme", "request_policy"][..],
        &["request_policy", "default_scheme", "otel_tracer"],
    ] {
        let seen = behaviour(order, "rule-span").await;
        let spans: Vec<&String> = seen.iter().filter(|l| l.starts_with("span ")).collect();
        assert_eq!(spans.len(), 3, "{seen:#?}");
        for span in &spans {
            assert!(span.contains("parent=00f067aa0ba902b7"), "{span}");
            assert!(span.contains("url.scheme=https"), "{span}");
            assert!(!span.contains("server.address"), "{span}");
        }
    }
    let seen = behaviour(&["otel_tracer"], "rule-span-host").await;
    assert!(
        seen.iter()
            .any(|l| l.starts_with("span ") && l.contains("server.address=api.example")),
        "{seen:#?}"
    );
}

/// Admission judges by the caller's budget whether `caller_budget` comes before or after it:
/// a warmed route sheds a request whose budget is below its estimate, counted in `stats()`.
#[tokio::test]
async fn admission_sheds_by_the_callers_budget_in_either_order() {
    let admission = || Admission::new().warm_up(1).max_shed(1.0);
    let layers = [
        SharedHeadersLayer::new()
            .admission(admission())
            .caller_budget(BudgetHeader::grpc_timeout()),
        SharedHeadersLayer::new()
            .caller_budget(BudgetHeader::grpc_timeout())
            .admission(admission()),
    ];
    for layer in layers {
        let stats = layer.stats();
        let service = layer.layer(service_fn(|_req: Request<()>| async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok::<_, Infallible>(Response::new(String::new()))
        }));
        let warm = Request::get("/a").body(()).unwrap();
        let res = service.clone().oneshot(warm).await.unwrap();
        assert_eq!(res.status(), http::StatusCode::OK);
        let hurried = Request::get("/a")
            .header("grpc-timeout", "1m")
            .body(())
            .unwrap();
        let res = service.oneshot(hurried).await.unwrap();
        let committed = res.extensions().get::<Committed>().unwrap();
        assert_eq!(committed.outcome(), shared_headers::Outcome::Shed);
        assert_eq!(stats.admission_counts().shed, 1);
        assert!(
            stats.admission_estimate(&http::Method::GET, "/a").unwrap()
                >= Duration::from_millis(20)
        );
    }
}
