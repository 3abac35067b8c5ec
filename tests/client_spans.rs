//! Client spans over loopback, through the tower `PropagateLayer` and the reqwest
//! `PropagateMiddleware`, each with `otel_tracer` and `otel_metrics`, read back through
//! the SDK's in-memory span and metric exporters: for the same mix of calls (answered, a 500,
//! cut at the deadline, cancelled by the caller dropping the call), exactly one client span and
//! exactly one `http.client.request.duration` point per call, the span a child of the request's
//! hop, the call's `traceparent` naming the client span as the parent of the next hop, and
//! status `Error` exactly when `error.type` is set. The leaf is a plain hyper server on
//! 127.0.0.1:0; the runtime bounds every test.
#![cfg(all(feature = "opentelemetry", feature = "reqwest"))]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use opentelemetry::trace::SpanKind;
use shared_headers::client::PropagateLayer;
use shared_headers::client::reqwest::PropagateMiddleware;
use shared_headers::context::{RequestContext, RequestScope};
use shared_headers::deadline::{BudgetHeader, Deadline, DeadlineSource};
use tower::{Layer, ServiceBuilder, ServiceExt};

#[path = "support/otel_spans.rs"]
mod otel_spans;
use otel_spans::{Spans, attr, is_error, of_kind};
#[path = "support/otel_memory.rs"]
mod otel_memory;
use otel_memory::Metrics;

mod support;

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
/// The leaf's pause on `/slow`: far past every cut and cancel of the mix.
const SLOW: Duration = Duration::from_secs(3);
/// The deadline of the cut call.
const CUT: Duration = Duration::from_millis(150);
/// When the caller drops the cancelled call.
const CANCEL: Duration = Duration::from_millis(150);

/// A leaf that answers with the `traceparent` it was sent: `/500` with a 500, `/slow` late.
async fn leaf() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let svc = hyper::service::service_fn(|req: Request<Incoming>| async move {
                if req.uri().path() == "/slow" {
                    tokio::time::sleep(SLOW).await;
                }
                let sent = support::traceparent_of(&req);
                let mut res = Response::new(Full::new(Bytes::from(sent)));
                if req.uri().path() == "/500" {
                    *res.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
                }
                Ok::<_, Infallible>(res)
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc),
            );
        }
    });
    addr
}

/// The hop of a request this service got: the caller's trace, a new span id.
fn hop() -> RequestContext {
    support::hop(TRACE)
}

/// Runs `call` in the hop's scope with `deadline` from now.
fn in_scope<F: Future>(
    hop: &RequestContext,
    deadline: Duration,
    call: F,
) -> impl Future<Output = F::Output> {
    RequestScope::new()
        .context(hop.clone())
        .deadline(Deadline::at(
            Instant::now() + deadline,
            DeadlineSource::Server,
        ))
        .scope(call)
}

fn run(test: impl Future<Output = ()>) {
    support::run_bounded(Duration::from_secs(30), test);
}

/// The calls of the mix: path, the deadline, whether the caller drops it at [`CANCEL`].
const MIX: [(&str, Duration, bool); 4] = [
    ("/ok", Duration::from_secs(5), false),
    ("/500", Duration::from_secs(5), false),
    ("/slow", CUT, false),
    ("/slow", Duration::from_secs(5), true),
];

/// Checks the spans and points of one run of [`MIX`]: one of each per call, in the hop's
/// trace, with `error.type` as `want` (by path and cancel), and returns the table printed.
async fn check(
    spans: &Spans,
    metrics: &Metrics,
    hop: &RequestContext,
    bodies: &[String],
    want: &[Option<&str>; 4],
) {
    let finished = spans.wait_for(MIX.len()).await;
    // None more comes later (exactly once).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let finished_now = spans.finished();
    assert_eq!(finished_now.len(), finished.len());
    let clients = of_kind(&finished_now, SpanKind::Client);
    assert_eq!(clients.len(), MIX.len(), "{finished_now:?}");
    let mut seen: Vec<(String, Option<String>)> = Vec::new();
    for span in &clients {
        assert_eq!(span.span_context.trace_id().to_string(), TRACE);
        assert_eq!(span.parent_span_id.to_string(), hop.span_id().unwrap());
        assert_eq!(
            attr(span, "error.type").is_some(),
            is_error(span),
            "{span:?}"
        );
        assert_eq!(span.name, "GET");
        seen.push((
            attr(span, "url.full").unwrap_or_default(),
            attr(span, "error.type"),
        ));
    }
    // The answered calls sent the client span's id as the parent of the next hop.
    for body in bodies {
        let parent = &body[36..52];
        assert!(
            clients
                .iter()
                .any(|s| s.span_context.span_id().to_string() == parent),
            "{body} names no client span"
        );
        assert!(body.contains(TRACE), "{body}");
    }
    let mut errors: Vec<Option<String>> = seen.iter().map(|(_, e)| e.clone()).collect();
    errors.sort();
    let mut wanted: Vec<Option<String>> = want.iter().map(|e| e.map(str::to_owned)).collect();
    wanted.sort();
    assert_eq!(errors, wanted, "{seen:?}");
    // One duration point per call, with the span's error type.
    let points = metrics.histogram("http.client.request.duration");
    let count: u64 = points.iter().map(|p| p.1).sum();
    assert_eq!(count, MIX.len() as u64, "{points:?}");
    let mut by_error: BTreeMap<Option<String>, u64> = BTreeMap::new();
    for (attrs, n, _) in &points {
        *by_error
            .entry(attrs.get("error.type").cloned())
            .or_default() += n;
    }
    let mut from_spans: BTreeMap<Option<String>, u64> = BTreeMap::new();
    for error in errors {
        *from_spans.entry(error).or_default() += 1;
    }
    assert_eq!(by_error, from_spans);
}

#[test]
fn tower_client_spans_once_per_call_cut_and_cancelled_included() {
    let (spans, metrics) = (Spans::new(), Metrics::new());
    run(async {
        let leaf = leaf().await;
        let client = ServiceBuilder::new()
            .layer(
                PropagateLayer::new(BudgetHeader::grpc_timeout())
                    .otel_tracer(spans.tracer("client"))
                    .otel_metrics(&metrics.meter()),
            )
            .service(Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>());
        let hop = hop();
        let mut bodies = Vec::new();
        for (path, deadline, cancel) in MIX {
            let req = Request::get(format!("http://{leaf}{path}"))
                .body(Empty::new())
                .unwrap();
            let call = in_scope(&hop, deadline, client.clone().oneshot(req));
            if cancel {
                assert!(tokio::time::timeout(CANCEL, call).await.is_err());
                continue;
            }
            if let Ok(res) = call.await {
                let body = res.into_body().collect().await.unwrap().to_bytes();
                bodies.push(String::from_utf8(body.to_vec()).unwrap());
            }
        }
        assert_eq!(bodies.len(), 2);
        // The cut call: the span covers the call with its deadline.
        check(
            &spans,
            &metrics,
            &hop,
            &bodies,
            &[None, Some("500"), Some("PropagateError"), Some("cancelled")],
        )
        .await;
    });
}

#[test]
fn reqwest_client_spans_once_per_call_cut_and_cancelled_included() {
    let (spans, metrics) = (Spans::new(), Metrics::new());
    run(async {
        let leaf = leaf().await;
        let propagate = PropagateMiddleware::new(BudgetHeader::grpc_timeout())
            .otel_tracer(spans.tracer("client"))
            .otel_metrics(&metrics.meter());
        let client = reqwest_middleware::ClientBuilder::new(
            reqwest::Client::builder().no_proxy().build().unwrap(),
        )
        .with(propagate)
        .build();
        let hop = hop();
        let mut bodies = Vec::new();
        for (path, deadline, cancel) in MIX {
            let call = in_scope(
                &hop,
                deadline,
                client.get(format!("http://{leaf}{path}")).send(),
            );
            if cancel {
                assert!(tokio::time::timeout(CANCEL, call).await.is_err());
                continue;
            }
            if let Ok(res) = call.await {
                bodies.push(res.text().await.unwrap());
            }
        }
        assert_eq!(bodies.len(), 2);
        // The cut call: the span covers the call with its deadline.
        check(
            &spans,
            &metrics,
            &hop,
            &bodies,
            &[None, Some("500"), Some("PropagateError"), Some("cancelled")],
        )
        .await;
    });
}

/// `otel_metrics` without `otel_tracer`: one duration point per call, cut and cancelled calls
/// included, no span, and the call sends the hop's own `traceparent` (no client span to name).
#[test]
fn tower_client_metrics_without_a_tracer() {
    let (spans, metrics) = (Spans::new(), Metrics::new());
    run(async {
        let leaf = leaf().await;
        let client = PropagateLayer::new(BudgetHeader::grpc_timeout())
            .otel_metrics(&metrics.meter())
            .layer(Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>());
        let hop = hop();
        let mut sent = HeaderMap::new();
        hop.apply_to(&mut sent);
        for (path, deadline, cancel) in MIX {
            let req = Request::get(format!("http://{leaf}{path}"))
                .body(Empty::new())
                .unwrap();
            let call = in_scope(&hop, deadline, client.clone().oneshot(req));
            if cancel {
                assert!(tokio::time::timeout(CANCEL, call).await.is_err());
                continue;
            }
            if let Ok(res) = call.await {
                let body = res.into_body().collect().await.unwrap().to_bytes();
                assert_eq!(body, sent["traceparent"].as_bytes());
            }
        }
        let points = metrics.histogram("http.client.request.duration");
        let mut by_error: BTreeMap<Option<String>, u64> = BTreeMap::new();
        for (attrs, n, _) in &points {
            *by_error
                .entry(attrs.get("error.type").cloned())
                .or_default() += n;
        }
        let want: BTreeMap<Option<String>, u64> = [
            (None, 1),
            (Some("500".to_owned()), 1),
            (Some("PropagateError".to_owned()), 1),
            (Some("cancelled".to_owned()), 1),
        ]
        .into_iter()
        .collect();
        assert_eq!(by_error, want, "{points:?}");
        assert!(spans.finished().is_empty());
    });
}
