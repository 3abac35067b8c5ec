//! OpenTelemetry spans over loopback, read back through the SDK's in-memory exporter:
//!
//! * a **server span per request**, exactly once for every outcome (answered, timed out,
//!   panicked, failed, a client that hung up, and in process a future dropped before its first
//!   poll), kind server, named `{method}`, with its status code and `error.type`, status
//!   `Error` exactly when `error.type` is set, ending when the response ended (a body that
//!   streams after the commit);
//! * a **client span per call** through `PropagateLayer::otel_tracer`, child of the
//!   server span, and the parent of the next hop's server span: one trace, one tree; a call cut
//!   by its deadline and a cancelled call get theirs too.
#![cfg(all(feature = "opentelemetry", feature = "client"))]

use std::convert::Infallible;
use std::time::Duration;

use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use opentelemetry::trace::SpanKind;
use shared_headers::client::PropagateLayer;
use shared_headers::context::Propagation;
use shared_headers::deadline::BudgetHeader;
use shared_headers::server::SharedHeadersLayer;
use tower::{Layer, Service, ServiceBuilder, ServiceExt};

#[path = "support/server.rs"]
mod server;
use server::{run, serve};
#[path = "support/script_body.rs"]
mod script_body;
use script_body::{Script, Step};
#[path = "support/otel_spans.rs"]
mod otel_spans;
use otel_spans::{Spans, attr, is_error, of_kind};

#[test]
fn one_server_span_per_request_for_every_outcome() {
    let spans = Spans::new();
    let tracer = spans.tracer("server");
    run(async {
        let layer = SharedHeadersLayer::new()
            // Room for the panic's backtrace, printed in a debug build.
            .timeout(Duration::from_secs(3))
            .otel_tracer(tracer);
        // (A failed inner service is tried in process below: over hyper it ends the
        // connection.)
        let ok = layer
            .clone()
            .layer(tower::service_fn(|req: Request<Incoming>| async move {
                match req.uri().path() {
                    "/slow" => tokio::time::sleep(Duration::from_secs(20)).await,
                    "/panic" => panic!("boom"),
                    "/hang" => tokio::time::sleep(Duration::from_secs(20)).await,
                    _ => {}
                }
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from("ok"))))
            }));
        let addr = serve(ok.boxed_clone(), false).await;
        let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
        for path in ["/ok", "/slow", "/panic"] {
            let res = client
                .request(
                    Request::get(format!("http://{addr}{path}"))
                        .body(Empty::new())
                        .unwrap(),
                )
                .await
                .unwrap();
            res.into_body().collect().await.unwrap();
        }
        // A client that hangs up before the answer.
        let hang = client.request(
            Request::get(format!("http://{addr}/hang"))
                .body(Empty::new())
                .unwrap(),
        );
        let _ = tokio::time::timeout(Duration::from_millis(30), hang).await;

        // In process: a failed inner service, and a future dropped before its first poll.
        let mut failing = layer
            .clone()
            .layer(tower::service_fn(|_req: Request<()>| async {
                Err::<Response<Full<Bytes>>, _>(std::io::Error::other("failed"))
            }));
        assert!(
            failing
                .ready()
                .await
                .unwrap()
                .call(Request::new(()))
                .await
                .is_err()
        );
        let dropped = failing.ready().await.unwrap().call(Request::new(()));
        drop(dropped);

        spans.wait_for(6).await;
        // None more comes later (exactly once).
        tokio::time::sleep(Duration::from_millis(100)).await;
        let finished = spans.finished();
        let mut seen: Vec<(String, Option<String>, Option<String>, bool)> = finished
            .iter()
            .map(|s| {
                assert_eq!(s.span_kind, SpanKind::Server);
                assert_eq!(s.name, "GET");
                assert_eq!(attr(s, "error.type").is_some(), is_error(s), "{s:?}");
                (
                    attr(s, "url.path").unwrap_or_default(),
                    attr(s, "http.response.status_code"),
                    attr(s, "error.type"),
                    is_error(s),
                )
            })
            .collect();
        seen.sort();
        let expected = |path: &str, status: Option<&str>, error: Option<&str>| {
            (
                path.to_owned(),
                status.map(str::to_owned),
                error.map(str::to_owned),
                error.is_some(),
            )
        };
        let mut want = vec![
            expected("/", None, Some("failed")),
            expected("/", None, Some("cancelled")),
            expected("/hang", None, Some("cancelled")),
            expected("/ok", Some("200"), None),
            expected("/panic", Some("500"), Some("panic")),
            expected("/slow", Some("503"), Some("timeout")),
        ];
        want.sort();
        assert_eq!(seen, want);
    });
}

#[test]
fn the_span_ends_when_the_body_ended() {
    let spans = Spans::new();
    let tracer = spans.tracer("server");
    run(async {
        let svc = SharedHeadersLayer::new()
            .otel_tracer(tracer)
            .layer(tower::service_fn(|_req: Request<Incoming>| async {
                let body = Script::new(
                    [
                        Step::Sleep(Duration::from_millis(150)),
                        Step::Data(Bytes::from("late")),
                    ],
                    false,
                    false,
                );
                Ok::<_, Infallible>(Response::new(body))
            }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let io = hyper_util::rt::TokioIo::new(stream);
            let svc = hyper_util::service::TowerToHyperService::new(svc);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, svc)
                .await;
        });
        let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
        let res = client
            .request(
                Request::get(format!("http://{addr}/"))
                    .body(Empty::new())
                    .unwrap(),
            )
            .await
            .unwrap();
        res.into_body().collect().await.unwrap();
        let finished = spans.wait_for(1).await;
        assert_eq!(finished.len(), 1);
        let span = &finished[0];
        let took = span.end_time.duration_since(span.start_time).unwrap();
        assert!(took >= Duration::from_millis(150), "{took:?}");
    });
}

#[test]
fn client_spans_link_three_services_in_one_tree() {
    let spans = Spans::new();
    run(async {
        let leaf = SharedHeadersLayer::new()
            .otel_tracer(spans.tracer("leaf"))
            .layer(tower::service_fn(|_req: Request<Incoming>| async {
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from("leaf"))))
            }));
        let leaf = serve(leaf.boxed_clone(), false).await;
        let client = ServiceBuilder::new()
            .layer(
                PropagateLayer::new(BudgetHeader::grpc_timeout())
                    .otel_tracer(spans.tracer("middle-client")),
            )
            .service(Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>());
        let middle = SharedHeadersLayer::new()
            .propagate(Propagation::new().request_id())
            .otel_tracer(spans.tracer("middle"))
            .layer(tower::service_fn(move |_req: Request<Incoming>| {
                let client = client.clone();
                async move {
                    let out = Request::get(format!("http://{leaf}/"))
                        .body(Empty::new())
                        .unwrap();
                    let res = client.oneshot(out).await.unwrap();
                    let status = res.status();
                    res.into_body().collect().await.unwrap();
                    let mut answer = Response::new(Full::new(Bytes::from("middle")));
                    *answer.status_mut() = status;
                    Ok::<_, Infallible>(answer)
                }
            }));
        let middle = serve(middle.boxed_clone(), false).await;
        let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
        let mut req = Request::get(format!("http://{middle}/"))
            .body(Empty::new())
            .unwrap();
        req.headers_mut().insert(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
                .parse()
                .unwrap(),
        );
        let res = client.request(req).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        res.into_body().collect().await.unwrap();
        let finished = spans.wait_for(3).await;
        let servers = of_kind(&finished, SpanKind::Server);
        let clients = of_kind(&finished, SpanKind::Client);
        assert_eq!((servers.len(), clients.len()), (2, 1), "{finished:?}");
        let by_scope = |name: &str| {
            *servers
                .iter()
                .find(|s| s.instrumentation_scope.name() == name)
                .unwrap()
        };
        let (middle, leaf, call) = (by_scope("middle"), by_scope("leaf"), clients[0]);
        let trace = middle.span_context.trace_id();
        assert_eq!(trace.to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert!(finished.iter().all(|s| s.span_context.trace_id() == trace));
        assert_eq!(middle.parent_span_id.to_string(), "00f067aa0ba902b7");
        assert_eq!(call.parent_span_id, middle.span_context.span_id());
        assert_eq!(leaf.parent_span_id, call.span_context.span_id());
        assert_eq!(
            attr(call, "http.response.status_code").as_deref(),
            Some("200")
        );
        assert!(call.start_time >= middle.start_time && call.end_time <= middle.end_time);
    });
}

#[test]
fn a_noop_tracer_leaves_the_hop_ids_of_its_own() {
    // No provider set: the global tracer is a no-op one, which makes no span.
    run(async {
        let svc = SharedHeadersLayer::new()
            .otel_tracer(opentelemetry::global::tracer("noop"))
            .layer(tower::service_fn(|_req: Request<()>| async {
                let context = shared_headers::context::RequestContext::current().unwrap();
                let ids = format!(
                    "{} {} {}",
                    context.trace_id().unwrap(),
                    context.span_id().unwrap(),
                    context.parent_span_id().unwrap_or("-")
                );
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(ids))))
            }));
        for caller in [true, false] {
            let mut req = Request::new(());
            if caller {
                req.headers_mut().insert(
                    "traceparent",
                    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
                        .parse()
                        .unwrap(),
                );
            }
            let res = svc.clone().oneshot(req).await.unwrap();
            let body = res.into_body().collect().await.unwrap().to_bytes();
            let text = String::from_utf8(body.to_vec()).unwrap();
            let ids: Vec<&str> = text.split(' ').collect();
            assert_eq!((ids[0].len(), ids[1].len()), (32, 16), "{text}");
            assert_ne!(ids[1], "00f067aa0ba902b7", "a new span id: {text}");
            if caller {
                assert_eq!(ids[0], "4bf92f3577b34da6a3ce929d0e0e4736");
                assert_eq!(ids[2], "00f067aa0ba902b7");
            } else {
                assert_eq!(ids[2], "-");
            }
        }
    });
}

#[test]
fn a_request_the_sampler_drops_makes_no_span_and_keeps_the_tracers_ids() {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::trace::{InMemorySpanExporter, Sampler, SdkTracerProvider};
    // Sampled when the caller's flag says so (a parent-based sampler over "never"): one
    // request dropped, one recorded, through the same layer.
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::AlwaysOff)))
        .with_simple_exporter(exporter.clone())
        .build();
    run(async {
        let svc = SharedHeadersLayer::new()
            .otel_tracer(provider.tracer("server"))
            .layer(tower::service_fn(|_req: Request<()>| async {
                let context = shared_headers::context::RequestContext::current().unwrap();
                let ids = format!(
                    "{} {}",
                    context.trace_id().unwrap(),
                    context.span_id().unwrap(),
                );
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(ids))))
            }));
        for flags in ["00", "01"] {
            let mut req = Request::new(());
            *req.uri_mut() = "/users/42".parse().unwrap();
            req.headers_mut().insert(
                "traceparent",
                format!("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-{flags}")
                    .parse()
                    .unwrap(),
            );
            req.headers_mut()
                .insert("host", "api.example".parse().unwrap());
            let res = svc.clone().oneshot(req).await.unwrap();
            let body = res.into_body().collect().await.unwrap().to_bytes();
            let text = String::from_utf8(body.to_vec()).unwrap();
            let ids: Vec<&str> = text.split(' ').collect();
            assert_eq!(ids[0], "4bf92f3577b34da6a3ce929d0e0e4736", "{text}");
            assert_eq!(ids[1].len(), 16, "{text}");
            assert_ne!(ids[1], "00f067aa0ba902b7", "a span id of its own: {text}");
            let finished = exporter.get_finished_spans().unwrap();
            if flags == "00" {
                assert!(
                    finished.is_empty(),
                    "a dropped request made a span: {finished:?}"
                );
            } else {
                // The recorded one has the request's attributes, set after the decision.
                assert_eq!(finished.len(), 1);
                let span = &finished[0];
                assert_eq!(span.span_context.span_id().to_string(), ids[1]);
                assert_eq!(attr(span, "url.path").as_deref(), Some("/users/42"));
                assert_eq!(attr(span, "http.request.method").as_deref(), Some("GET"));
                assert_eq!(attr(span, "server.address").as_deref(), Some("api.example"));
            }
        }
    });
}
