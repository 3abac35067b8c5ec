//! A hostile review of three changes: client spans as a setting of the propagation client,
//! a request line's `Debug` through its maker's printer, and `HeaderSelection::only` as a set
//! with fresh counters per setter. The tests named after a finding (a gRPC trailers-only error
//! on the client span, the error type of a refused connection, the current OpenTelemetry
//! context outside a request, the address through a tonic `Channel`, a request line's `Debug`
//! and the layer's own log rules) failed before their fixes; the others held. Network tests bind 127.0.0.1:0 and every
//! runtime is bounded.
#![cfg(all(
    feature = "opentelemetry",
    feature = "reqwest",
    feature = "tracing",
    feature = "tonic"
))]

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use opentelemetry::trace::{Span as _, SpanKind, TraceContextExt, Tracer};
use shared_headers::client::PropagateLayer;
use shared_headers::context::{RequestContext, RequestScope};
use shared_headers::deadline::BudgetHeader;
use shared_headers::server::SharedHeadersLayer;
use shared_headers::server::access_log::AccessLog;
use tower::{Layer, ServiceBuilder, ServiceExt};

#[path = "support/otel_spans.rs"]
mod otel_spans;
use otel_spans::{Spans, attr, is_error, of_kind};
#[path = "support/otel_memory.rs"]
mod otel_memory;
#[path = "support/raw_codec.rs"]
mod raw_codec;
use otel_memory::Metrics;

mod support;

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

fn run(test: impl Future<Output = ()>) {
    support::run_bounded(Duration::from_secs(30), test);
}

/// A leaf (HTTP/2 only when `h2`) that answers with the `traceparent` it was sent:
/// `/grpc-unavailable` with 200 and `grpc-status: 14` in its head (a gRPC trailers-only
/// error), every other path 200.
async fn leaf_on(h2: bool) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let svc = hyper::service::service_fn(|req: Request<Incoming>| async move {
                let sent = support::traceparent_of(&req);
                let mut res = Response::new(Full::new(Bytes::from(sent)));
                if req.uri().path() == "/grpc-unavailable" {
                    res.headers_mut()
                        .insert("content-type", "application/grpc".parse().unwrap());
                    res.headers_mut()
                        .insert("grpc-status", "14".parse().unwrap());
                }
                Ok::<_, Infallible>(res)
            });
            let io = TokioIo::new(stream);
            if h2 {
                tokio::spawn(
                    hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(io, svc),
                );
            } else {
                tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(io, svc));
            }
        }
    });
    addr
}

async fn leaf() -> SocketAddr {
    leaf_on(false).await
}

/// The hop of a request this service got: the caller's trace, a new span id.
fn hop() -> RequestContext {
    support::hop(TRACE)
}

fn in_hop<F: Future>(hop: &RequestContext, call: F) -> impl Future<Output = F::Output> {
    RequestScope::new().context(hop.clone()).scope(call)
}

// ---------------------------------------------------------------------------------------------
// 1. Client spans.
// ---------------------------------------------------------------------------------------------

/// A gRPC call that fails with a trailers-only answer (HTTP 200, `grpc-status: 14` in the
/// head) is an error: the server layer's span and metric give it `error.type` `14`, the
/// client span of the same call should not say it went well.
#[test]
fn client_span_grpc_trailers_only_error_is_an_error() {
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
        let req = Request::post(format!("http://{leaf}/grpc-unavailable"))
            .header("content-type", "application/grpc")
            .body(Empty::new())
            .unwrap();
        let res = in_hop(&hop(), client.oneshot(req)).await.unwrap();
        assert_eq!(res.headers()["grpc-status"], "14");
        let finished = spans.wait_for(1).await;
        let clients = of_kind(&finished, SpanKind::Client);
        assert_eq!(clients.len(), 1);
        let span = clients[0];
        let points = metrics.histogram("http.client.request.duration");
        assert_eq!(points.len(), 1, "{points:?}");
        assert!(
            is_error(span) && attr(span, "error.type").is_some(),
            "a gRPC UNAVAILABLE call ends with an Unset span: {span:?}"
        );
        assert!(points[0].0.contains_key("error.type"), "{points:?}");
    });
}

/// A call the connector could not make (connection refused): the tower client's
/// `error.type` is the bare last segment of the error's type, `Error` (hyper-util's
/// `client::legacy::Error`), where the semantic conventions ask for the exception's
/// fully-qualified type, and the reqwest middleware for the same failure says `connect`.
#[test]
fn client_span_error_type_of_a_refused_connection() {
    let (spans, metrics) = (Spans::new(), Metrics::new());
    run(async {
        // A port nobody listens on: bound, then closed.
        let closed = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap()
        };
        let client = ServiceBuilder::new()
            .layer(
                PropagateLayer::new(BudgetHeader::grpc_timeout())
                    .otel_tracer(spans.tracer("client"))
                    .otel_metrics(&metrics.meter()),
            )
            .service(Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>());
        let req = Request::get(format!("http://{closed}/"))
            .body(Empty::new())
            .unwrap();
        assert!(in_hop(&hop(), client.oneshot(req)).await.is_err());
        let finished = spans.wait_for(1).await;
        let span = of_kind(&finished, SpanKind::Client)[0];
        let error = attr(span, "error.type").unwrap();
        assert_ne!(error, "Error", "an error.type that names nothing: {span:?}");
    });
}

/// Outside a request, a client span in an OpenTelemetry context the caller made current
/// (its own span, as a batch job has): the client span is a new root, not the child of the
/// span in scope.
#[test]
fn client_span_outside_a_request_ignores_the_current_otel_context() {
    let spans = Spans::new();
    run(async {
        let leaf = leaf().await;
        let client = ServiceBuilder::new()
            .layer(
                PropagateLayer::new(BudgetHeader::grpc_timeout())
                    .otel_tracer(spans.tracer("client")),
            )
            .service(Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>());
        let tracer = spans.tracer("job");
        let job = tracer.start("job");
        let job_context = job.span_context().clone();
        let cx = opentelemetry::Context::current_with_span(job);
        let req = Request::get(format!("http://{leaf}/"))
            .body(Empty::new())
            .unwrap();
        {
            use opentelemetry::context::FutureExt as _;
            client.oneshot(req).with_context(cx.clone()).await.unwrap();
        }
        drop(cx);
        let finished = spans.wait_for(1).await;
        let clients = of_kind(&finished, SpanKind::Client);
        assert_eq!(clients.len(), 1);
        assert_eq!(
            clients[0].span_context.trace_id(),
            job_context.trace_id(),
            "the client span left the caller's trace: {:?}",
            clients[0]
        );
        assert_eq!(clients[0].parent_span_id, job_context.span_id());
    });
}

// ---------------------------------------------------------------------------------------------
// 2. A request line's Debug.
// ---------------------------------------------------------------------------------------------

/// The `Debug` of the committed record and of its request line, for `uri` through a layer
/// with `log`.
async fn debug_of(layer: SharedHeadersLayer, uri: &str) -> (String, String, String) {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let (commit, end) = (Arc::clone(&seen), Arc::clone(&seen));
    let layer = layer
        .on_commit(move |event| {
            let mut seen = commit.lock().unwrap();
            seen.push(format!("{:?}", event.committed()));
            seen.push(format!("{event:?}"));
        })
        .on_response_end(move |e| end.lock().unwrap().push(format!("{e:?}")));
    let service = layer.layer(tower::service_fn(|_: Request<()>| async {
        Ok::<_, Infallible>(Response::new(String::new()))
    }));
    let res = service
        .oneshot(Request::get(uri).body(()).unwrap())
        .await
        .unwrap();
    res.into_body().collect().await.unwrap();
    let seen = seen.lock().unwrap().clone();
    (seen[0].clone(), seen[1].clone(), seen.join("\n"))
}

/// Holds: under the default rule, the record's, the line's, the commit event's and the end
/// report's `Debug` hide credential parameters (percent-encoded names too), path parameters,
/// and userinfo; a fragment never reaches the URI.
#[test]
fn request_line_debug_default_rule_holds() {
    run(async {
        let mut leaks = Vec::new();
        for uri in [
            "/a?api_key=R2-secret-1&x=1",
            "/a?API%5FKEY=R2-secret-2",
            "/a;jsessionid=R2-secret-3?x=1",
            "http://user:R2-secret-4@host/a?x=1",
            "/a?token=R2-secret-5%26x",
            "/caf%C3%A9?sig=R2-secret-6",
            "/a?x=1&access_token=R2-secret-7#frag",
        ] {
            for layer in [
                SharedHeadersLayer::new(),
                SharedHeadersLayer::new().access_log(AccessLog::new()),
            ] {
                let (_, _, all) = debug_of(layer, uri).await;
                if all.contains("R2-secret-") || all.contains("frag") {
                    leaks.push(format!("{uri}: {all}"));
                }
            }
        }
        assert!(leaks.is_empty(), "{leaks:#?}");
    });
}

/// A tonic client over a `Channel`: with `Grpc::new` (no origin) the `Channel` adds scheme and
/// authority below the layer, so the layer cannot see the address (the finding: the point and
/// the span lacked `server.address` and `server.port`). The documented way, `Grpc::with_origin`
/// (as `PropagateLayer`'s docs say), gives the layer the URI, and both attributes are there.
#[test]
fn client_span_through_tonic_channel_has_server_address() {
    use shared_headers::deadline::{Deadline, DeadlineSource};
    let (spans, metrics) = (Spans::new(), Metrics::new());
    run(async {
        let grpc = tower::service_fn(|req: Request<Incoming>| async move {
            let method = tower::service_fn(|req: tonic::Request<Bytes>| async move {
                Ok::<_, tonic::Status>(tonic::Response::new(req.into_inner()))
            });
            let response = tonic::server::Grpc::new(raw_codec::Raw)
                .unary(method, req)
                .await;
            Ok::<_, Infallible>(response)
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
                let service = hyper_util::service::TowerToHyperService::new(grpc);
                tokio::spawn(
                    async move { conn.serve_connection(TokioIo::new(stream), service).await },
                );
            }
        });
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let client = ServiceBuilder::new()
            .layer(
                PropagateLayer::new(BudgetHeader::grpc_timeout())
                    .otel_tracer(spans.tracer("client"))
                    .otel_metrics(&metrics.meter()),
            )
            .service(channel);
        let origin: http::Uri = format!("http://{addr}").parse().unwrap();
        let mut grpc = tonic::client::Grpc::with_origin(client, origin);
        let deadline = Deadline::after(Duration::from_secs(5), DeadlineSource::Server).unwrap();
        RequestScope::new()
            .deadline(deadline)
            .scope(async {
                grpc.ready().await.unwrap();
                grpc.unary(
                    tonic::Request::new(Bytes::from_static(b"ping")),
                    http::uri::PathAndQuery::from_static("/test.Echo/Echo"),
                    raw_codec::Raw,
                )
                .await
                .unwrap();
            })
            .await;
        let finished = spans.wait_for(1).await;
        let span = of_kind(&finished, SpanKind::Client)[0];
        let points = metrics.histogram("http.client.request.duration");
        assert_eq!(points.len(), 1);
        assert!(
            points[0].0.contains_key("server.address") && points[0].0.contains_key("server.port"),
            "a required attribute missing: {points:?}"
        );
        assert!(attr(span, "server.address").is_some(), "{span:?}");
    });
}

/// Holds: a call dropped before its first poll, a call whose deadline is spent (nothing
/// sent), a request with its own `traceparent`, and 16 concurrent calls over one HTTP/2
/// connection: one span and one point each, the sent `traceparent` as promised.
#[test]
fn client_spans_hold_dropped_unpolled_exhausted_own_traceparent_h2() {
    use shared_headers::deadline::{Deadline, DeadlineSource};
    let (spans, metrics) = (Spans::new(), Metrics::new());
    run(async {
        let leaf = leaf_on(true).await;
        let client = ServiceBuilder::new()
            .layer(
                PropagateLayer::new(BudgetHeader::grpc_timeout())
                    .otel_tracer(spans.tracer("client"))
                    .otel_metrics(&metrics.meter()),
            )
            .service(
                Client::builder(TokioExecutor::new())
                    .http2_only(true)
                    .build_http::<Empty<Bytes>>(),
            );
        let hop = hop();
        let get = move || {
            Request::get(format!("http://{leaf}/"))
                .body(Empty::new())
                .unwrap()
        };
        // Dropped before its first poll.
        let mut ready = client.clone();
        let future = tower::Service::call(ready.ready().await.unwrap(), get());
        drop(future);
        // The deadline spent: not sent.
        let spent = Deadline::at(std::time::Instant::now(), DeadlineSource::Server);
        let result = RequestScope::new()
            .context(hop.clone())
            .deadline(spent)
            .scope(client.clone().oneshot(get()))
            .await;
        assert!(result.is_err());
        // Its own traceparent wins.
        let own = format!("00-{TRACE}-1111111111111111-01");
        let mut req = get();
        req.headers_mut()
            .insert("traceparent", own.parse().unwrap());
        let res = in_hop(&hop, client.clone().oneshot(req)).await.unwrap();
        let body = res.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, own.as_bytes());
        // 16 at once over HTTP/2.
        let calls = (0..16).map(|_| {
            let client = client.clone();
            let hop = hop.clone();
            tokio::spawn(async move {
                let res = in_hop(&hop, client.oneshot(get())).await.unwrap();
                let body = res.into_body().collect().await.unwrap().to_bytes();
                String::from_utf8(body.to_vec()).unwrap()
            })
        });
        let mut sent = Vec::new();
        for call in calls.collect::<Vec<_>>() {
            sent.push(call.await.unwrap());
        }
        let finished = spans.wait_for(19).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let finished_now = spans.finished();
        assert_eq!(finished_now.len(), finished.len());
        let clients = of_kind(&finished_now, SpanKind::Client);
        assert_eq!(clients.len(), 19);
        let errors: Vec<_> = clients
            .iter()
            .filter_map(|s| attr(s, "error.type"))
            .collect();
        let mut errors = errors;
        errors.sort();
        assert_eq!(errors, ["PropagateError", "cancelled"]);
        let mut parents: Vec<&str> = sent.iter().map(|b| &b[36..52]).collect();
        parents.sort_unstable();
        parents.dedup();
        assert_eq!(parents.len(), 16);
        for parent in parents {
            assert!(
                clients
                    .iter()
                    .any(|s| s.span_context.span_id().to_string() == parent)
            );
        }
        let count: u64 = metrics
            .histogram("http.client.request.duration")
            .iter()
            .map(|p| p.1)
            .sum();
        assert_eq!(count, 19);
    });
}

// ---------------------------------------------------------------------------------------------
// 2. A request line's Debug (continued).
// ---------------------------------------------------------------------------------------------

/// The access log told to leave the query out (`omit_query`) or to redact more names
/// (`redact_query_params`): the line hides them, the request line's `Debug` (of the record,
/// the commit event, the end report) prints them, under the default rule only.
#[test]
fn request_line_debug_follows_the_layers_access_log() {
    run(async {
        let mut leaks = Vec::new();
        for (log, uri) in [
            (AccessLog::new().omit_query(), "/a?email=R2-secret-omitted"),
            (
                AccessLog::new().redact_query_params(["email"]),
                "/a?email=R2-secret-extra",
            ),
        ] {
            let (_, _, all) = debug_of(SharedHeadersLayer::new().access_log(log), uri).await;
            if all.contains("R2-secret-") {
                leaks.push(format!("{uri}: {all}"));
            }
        }
        assert!(leaks.is_empty(), "{leaks:#?}");
    });
}

// ---------------------------------------------------------------------------------------------
// 3. Counters and HeaderSelection.
// ---------------------------------------------------------------------------------------------

/// Holds: stats taken after the last setter, then the layer cloned into two services: both
/// count in the stats.
#[test]
fn stats_taken_then_cloned_and_served_count() {
    run(async {
        let layer = SharedHeadersLayer::new()
            .timeout(Duration::from_secs(5))
            .caller_budget(BudgetHeader::envoy_expected_rq_timeout_ms());
        let stats = layer.stats();
        let ok = tower::service_fn(|_: Request<()>| async {
            Ok::<_, Infallible>(Response::new(String::new()))
        });
        let a = layer.clone().layer(ok);
        let b = ServiceBuilder::new().layer(layer.clone()).service(ok);
        for service in [a.clone(), b.clone(), a, b] {
            let req = Request::get("/")
                .header("x-envoy-expected-rq-timeout-ms", "-1")
                .body(())
                .unwrap();
            let res = service.oneshot(req).await.unwrap();
            res.into_body().collect().await.unwrap();
        }
        assert_eq!(stats.refused_budgets(), 4);
    });
}

/// Holds: `only` with many names, given twice and out of order, equals the set; empty is none.
#[test]
fn only_is_a_set() {
    use shared_headers::server::HeaderSelection;
    let names: Vec<http::HeaderName> = (0..500)
        .map(|i| format!("x-h{i}").parse().unwrap())
        .collect();
    let forward = HeaderSelection::only(names.iter().cloned());
    let twice_reversed =
        HeaderSelection::only(names.iter().rev().cloned().chain(names.iter().cloned()));
    assert_eq!(forward, twice_reversed);
    assert_eq!(HeaderSelection::only([]), HeaderSelection::none());
}
