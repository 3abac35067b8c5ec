//! One trace across the three services: each server layer makes its OpenTelemetry span
//! (`otel_tracer`) as a hop of the trace (`Propagation::trace_hop`), each client makes a
//! client span per call (`PropagateLayer::otel_tracer`), and the spans are read
//! back from the SDK's in-memory exporter: three server spans and two client spans in one
//! trace, edge -> client -> middle -> client -> leaf, and the three access lines (an
//! `on_commit` hook) carry that trace id.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response};
use http_body_util::{BodyExt, Empty};
use hyper::body::{Bytes, Incoming};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use opentelemetry::trace::{SpanKind, TracerProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use shared_headers::client::PropagateLayer;
use shared_headers::context::Propagation;
use shared_headers::server::SharedHeadersLayer;
use tower::{Layer, ServiceExt, service_fn};

type Lines = Arc<Mutex<Vec<(&'static str, String)>>>;

fn layer(name: &'static str, provider: &SdkTracerProvider, lines: &Lines) -> SharedHeadersLayer {
    let lines = Arc::clone(lines);
    SharedHeadersLayer::new()
        .propagate(Propagation::new().request_id().trace_hop())
        .caller_budget(super::budget_header())
        .otel_tracer(provider.tracer(name))
        .on_commit(move |c| {
            let trace = c.committed().context().and_then(|c| c.trace_id());
            lines
                .lock()
                .unwrap()
                .push((name, trace.unwrap_or("-").to_owned()));
        })
}

/// A client under the deadline in scope, with a client span per call.
fn client(provider: &SdkTracerProvider, name: &'static str) -> super::Out {
    let plain = Client::builder(TokioExecutor::new()).build_http();
    super::Out::Propagate(
        PropagateLayer::new(super::budget_header())
            .margin(super::MARGIN)
            .otel_tracer(provider.tracer(name))
            .layer(plain),
    )
}

/// Runs one request through edge -> middle -> leaf and checks the tree; the failures.
pub async fn run() -> Vec<String> {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let lines: Lines = Arc::default();

    let leaf = service_fn(|_req: Request<Incoming>| async {
        Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
    });
    let (leaf_addr, leaf_task) =
        super::serve(layer("leaf", &provider, &lines).layer(leaf).boxed_clone()).await;
    let out = client(&provider, "middle-client");
    let middle = service_fn(move |_req: Request<Incoming>| {
        let out = out.clone();
        async move { Ok::<_, Infallible>(super::answer(out.call(leaf_addr, 0).await)) }
    });
    let (middle_addr, middle_task) = super::serve(
        layer("middle", &provider, &lines)
            .layer(middle)
            .boxed_clone(),
    )
    .await;
    let out = client(&provider, "edge-client");
    let edge = service_fn(move |_req: Request<Incoming>| {
        let out = out.clone();
        async move { Ok::<_, Infallible>(super::answer(out.call(middle_addr, 0).await)) }
    });
    let (edge_addr, edge_task) =
        super::serve(layer("edge", &provider, &lines).layer(edge).boxed_clone()).await;

    // A caller without a trace: the edge starts one.
    let load = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let res = load
        .request(
            Request::get(format!("http://{edge_addr}/"))
                .body(Empty::new())
                .unwrap(),
        )
        .await;
    if let Ok(res) = res {
        let _ = res.into_body().collect().await;
    }
    // The edge's span ends when its body ended: wait (bounded) for the five spans.
    let mut spans: Vec<SpanData> = Vec::new();
    for _ in 0..300 {
        spans = exporter.get_finished_spans().unwrap_or_default();
        if spans.len() >= 5 && lines.lock().unwrap().len() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for task in [leaf_task, middle_task, edge_task] {
        task.abort();
    }
    check(&spans, &lines.lock().unwrap())
}

fn check(spans: &[SpanData], lines: &[(&'static str, String)]) -> Vec<String> {
    let mut failures = Vec::new();
    let find = |scope: &str| {
        spans
            .iter()
            .find(|s| s.instrumentation_scope.name() == scope)
    };
    println!("\none trace across the three services, read back from the exporter:");
    let names = ["edge", "edge-client", "middle", "middle-client", "leaf"];
    let tree: Vec<_> = names.iter().map(|n| find(n)).collect();
    for (depth, (name, span)) in names.iter().zip(&tree).enumerate() {
        match span {
            Some(s) => println!(
                "  {:indent$}{name:<13} {:?} {} span {} parent {}",
                "",
                s.span_kind,
                s.span_context.trace_id(),
                s.span_context.span_id(),
                s.parent_span_id,
                indent = depth * 2
            ),
            None => failures.push(format!("no {name} span was exported")),
        }
    }
    if spans.len() != 5 {
        failures.push(format!("{} spans exported, 5 expected", spans.len()));
    }
    if let [Some(edge), Some(ec), Some(middle), Some(mc), Some(leaf)] = tree[..] {
        let kinds = [edge, ec, middle, mc, leaf].map(|s| s.span_kind.clone());
        let want = [
            SpanKind::Server,
            SpanKind::Client,
            SpanKind::Server,
            SpanKind::Client,
            SpanKind::Server,
        ];
        if kinds != want {
            failures.push(format!("span kinds {kinds:?}"));
        }
        let trace = edge.span_context.trace_id();
        if [ec, middle, mc, leaf]
            .iter()
            .any(|s| s.span_context.trace_id() != trace)
        {
            failures.push("the spans are not in one trace".to_owned());
        }
        let links = [(ec, edge), (middle, ec), (mc, middle), (leaf, mc)];
        for (child, parent) in links {
            if child.parent_span_id != parent.span_context.span_id() {
                failures.push(format!(
                    "{} is not a child of {}",
                    child.instrumentation_scope.name(),
                    parent.instrumentation_scope.name()
                ));
            }
        }
        let trace = trace.to_string();
        println!("  access lines:");
        for (name, line_trace) in lines {
            println!("    {name:<6} trace_id={line_trace}");
        }
        if lines.len() != 3 || lines.iter().any(|(_, t)| *t != trace) {
            failures.push(format!("the access lines do not all carry trace {trace}"));
        }
    }
    failures
}
