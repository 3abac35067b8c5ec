//! The HTTP server metrics' cost per request and which requests they count: the crate's
//! `SharedHeadersLayer::otel_metrics` (feature `opentelemetry`) against
//! `opentelemetry-instrumentation-tower` 0.19 (the OpenTelemetry contrib crate's tower layer,
//! on the same opentelemetry 0.33), each with a no-op meter (the global default: no provider
//! set) or with the SDK (an `SdkMeterProvider` with a `PeriodicReader` over the in-memory
//! exporter, set as the global provider; both layers take their meter from it).
//!
//! ```text
//! cargo bench --features full --bench metrics                 # allocations per request, no-op meter
//! cargo bench --features full --bench metrics -- --sdk        # the same with the SDK
//! cargo bench --features full --bench metrics -- --mix        # which requests each counts
//! cargo bench --features full --bench metrics -- --run <variant> <count> [--sdk]   # for callgrind
//! scripts/metrics-table       # instructions under callgrind + allocations + the mix, Markdown
//! ```
//!
//! Every variant serves the same request as `benches/access_line.rs` (GET
//! `/users/42?page=2&api_key=zzz`, HTTP/1.1, 8 headers) with the same handler (200, a
//! `content-type`, a 5-byte body), on a current-thread runtime, one service called with
//! `ready().call()`, the body driven to its end. The variants (names are stable: the script
//! passes them):
//!
//! * `bare`: the handler alone;
//! * `layer`: `SharedHeadersLayer` with a 30 s timeout, no metrics (the baseline of the next);
//! * `layer_metrics`: the same with `otel_metrics(&global::meter("bench"))`;
//! * `otel_tower`: the contrib crate's `Layer` (tracing off: `with_tracing(false)`, its
//!   metrics from the global meter provider) over the handler (the baseline is `bare`);
//! * `layer_traced`: `layer` with `otel_tracer(global::tracer("bench"))`: a server span per
//!   request, and the request made a trace hop (its ids);
//! * `layer_hop`: `layer` with `propagate(Propagation::new().trace_hop())`: the request made a
//!   hop of a trace (its ids), no tracer;
//! * `layer_traced_dropped`: `layer` with `otel_tracer` of the SDK's tracer whose sampler drops
//!   every request (`Sampler::AlwaysOff`), in every mode: the tracing part of an unsampled
//!   request is `layer_traced_dropped - layer_hop`;
//! * `sdk_dropped_floor`: the handler, and before it what the OpenTelemetry API makes any
//!   server span pay for a request the SDK's sampler drops (`Sampler::AlwaysOff`): the
//!   sampling attributes built (the path and the host copied, owned) and handed to the
//!   tracer, which decides and frees them. `sdk_dropped_floor - bare` is the floor under
//!   `layer_traced_dropped - layer_hop`;
//! * `otel_tower_traced`: `otel_tower` with its spans on (`with_tracing(true)`, the global
//!   tracer provider's tracer). With `--sdk`, both spans go to the SDK's tracer provider
//!   (the simple processor over the in-memory exporter), set as the global provider;
//! * `otel_tower_stack`: the contrib layer outside tower-http's `TimeoutLayer` (30 s) and
//!   `CatchPanicLayer`: the stack that does the crate layer's job, and the one `--mix` runs.
//!
//! `--mix` (the SDK) sends, through `layer_metrics` (timeout 50 ms) and through
//! `otel_tower_stack` (`TimeoutLayer` 50 ms), four requests: answered; timed out (the handler
//! sleeps 1 s); hung up (the future polled once, then dropped, as hyper does when the client
//! goes away); panicked. After each it reads the exporter: how many durations the request
//! added, and the active-requests counter's sum.
//!
//! The spans' share: `layer_traced - layer` against `otel_tower_traced - otel_tower` (the
//! contrib layer's span name and the propagator's extraction do not depend on its flag: they
//! are in both of its variants).
//!
//! Left out: request and response body-size histograms (the contrib layer records them when
//! sizes are known; the crate does not make them).

use std::alloc::System;
use std::convert::Infallible;
use std::fmt;
use std::hint::black_box;
use std::pin::pin;
use std::time::Duration;

use bytes::{Buf, Bytes};
use http::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use http::{HeaderMap, Request, Response, Uri};
use http_body::Body;
use http_body_util::{BodyExt, Empty, Full};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use shared_headers::server::SharedHeadersLayer;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use tokio::runtime::Runtime;
use tower::{Layer, Service, ServiceBuilder, ServiceExt, service_fn};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const DEADLINE: Duration = Duration::from_secs(30);
const WARM_UP: u64 = 100;
const REQUESTS: u64 = 1_000;
const URI: &str = "/users/42?page=2&api_key=zzz";

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

type ReqBody = Empty<Bytes>;

async fn hello(_req: Request<ReqBody>) -> Result<Response<Full<Bytes>>, Infallible> {
    let mut res = Response::new(Full::new(Bytes::from_static(b"hello")));
    res.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    Ok(res)
}

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

fn otel_tower() -> opentelemetry_instrumentation_tower::http::server::Layer {
    opentelemetry_instrumentation_tower::http::server::LayerBuilder::builder()
        .with_tracing(false)
        .build()
        .unwrap()
}

/// The contrib layer with its server spans (the global tracer provider's tracer).
fn otel_tower_traced() -> opentelemetry_instrumentation_tower::http::server::Layer {
    opentelemetry_instrumentation_tower::http::server::LayerBuilder::builder()
        .with_tracing(true)
        .build()
        .unwrap()
}

fn variants() -> Vec<(&'static str, Runner)> {
    let meter = opentelemetry::global::meter("bench");
    vec![
        (
            "layer_traced",
            runner(
                SharedHeadersLayer::new()
                    .timeout(DEADLINE)
                    .otel_tracer(opentelemetry::global::tracer("bench"))
                    .layer(service_fn(hello)),
            ),
        ),
        (
            "otel_tower_traced",
            runner(otel_tower_traced().layer(service_fn(hello))),
        ),
        (
            "layer_hop",
            runner(
                SharedHeadersLayer::new()
                    .timeout(DEADLINE)
                    .propagate(shared_headers::context::Propagation::new().trace_hop())
                    .layer(service_fn(hello)),
            ),
        ),
        (
            "layer_traced_dropped",
            runner(
                SharedHeadersLayer::new()
                    .timeout(DEADLINE)
                    .otel_tracer(dropping_tracer())
                    .layer(service_fn(hello)),
            ),
        ),
        ("bare", runner(service_fn(hello))),
        ("sdk_dropped_floor", {
            let tracer = dropping_tracer();
            runner(service_fn(move |req: Request<ReqBody>| {
                sdk_dropped_floor(&tracer, &req);
                hello(req)
            }))
        }),
        (
            "layer",
            runner(
                SharedHeadersLayer::new()
                    .timeout(DEADLINE)
                    .layer(service_fn(hello)),
            ),
        ),
        (
            "layer_metrics",
            runner(
                SharedHeadersLayer::new()
                    .timeout(DEADLINE)
                    .otel_metrics(&meter)
                    .layer(service_fn(hello)),
            ),
        ),
        ("otel_tower", runner(otel_tower().layer(service_fn(hello)))),
        (
            "otel_tower_stack",
            runner(
                ServiceBuilder::new()
                    .layer(otel_tower())
                    .layer(tower_http::timeout::TimeoutLayer::with_status_code(
                        http::StatusCode::SERVICE_UNAVAILABLE,
                        DEADLINE,
                    ))
                    .layer(tower_http::catch_panic::CatchPanicLayer::new())
                    .service_fn(hello),
            ),
        ),
    ]
}

/// `layer_traced_dropped`'s tracer: the SDK's, whose sampler drops every request
/// (`Sampler::AlwaysOff`: what a 1% ratio does to 99 requests in 100).
fn dropping_tracer() -> opentelemetry_sdk::trace::SdkTracer {
    use opentelemetry::trace::TracerProvider as _;
    SdkTracerProvider::builder()
        .with_sampler(opentelemetry_sdk::trace::Sampler::AlwaysOff)
        .with_simple_exporter(InMemorySpanExporter::default())
        .build()
        .tracer("bench")
}

/// What the OpenTelemetry API makes any server span pay for a request its sampler drops,
/// done by hand over the handler (`sdk_dropped_floor - bare`): a `SpanBuilder` with the
/// attributes the HTTP semantic conventions want a sampler to see (the method and scheme as
/// static text; the path and the host copied, owned, as `KeyValue` requires; a `Vec` of
/// them), no start time (the SDK reads the clock itself for a span it records), handed to
/// the SDK's tracer, which decides, makes the ids and a non-recording span, and frees the
/// attributes.
fn sdk_dropped_floor(tracer: &opentelemetry_sdk::trace::SdkTracer, req: &Request<ReqBody>) {
    use opentelemetry::KeyValue;
    use opentelemetry::trace::{Span as _, SpanBuilder, SpanKind, Tracer as _};
    let mut attributes = Vec::with_capacity(4);
    attributes.push(KeyValue::new("http.request.method", "GET"));
    attributes.push(KeyValue::new("url.path", req.uri().path().to_owned()));
    attributes.push(KeyValue::new("url.scheme", "http"));
    if let Some(host) = req.headers().get(http::header::HOST)
        && let Ok(host) = host.to_str()
    {
        attributes.push(KeyValue::new("server.address", host.to_owned()));
    }
    let builder = SpanBuilder::from_name("GET")
        .with_kind(SpanKind::Server)
        .with_attributes(attributes);
    let span = tracer.build_with_context(builder, &opentelemetry::Context::new());
    black_box(span.is_recording());
}

/// The SDK with the in-memory exporter, as the global meter provider.
fn install_sdk() -> (SdkMeterProvider, InMemoryMetricExporter) {
    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter.clone()).build())
        .build();
    opentelemetry::global::set_meter_provider(provider.clone());
    (provider, exporter)
}

/// The SDK's tracer provider exporting every span as it ends (the simple processor) to the
/// in-memory exporter, as the global tracer provider (`layer_traced`, `otel_tower_traced`).
fn install_tracer() -> SdkTracerProvider {
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(InMemorySpanExporter::default())
        .build();
    opentelemetry::global::set_tracer_provider(provider.clone());
    provider
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

fn template() -> HeaderMap {
    let mut map = HeaderMap::with_capacity(REQUEST_HEADERS.len());
    for (name, value) in REQUEST_HEADERS {
        map.insert(
            HeaderName::from_static(name),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    drop(black_box(map.clone()));
    map
}

fn table(sdk: bool) {
    let runtime = runtime();
    let headers = template();
    println!(
        "meter: {}",
        if sdk {
            "SDK, in-memory exporter"
        } else {
            "no-op"
        }
    );
    println!("| variant | allocations | bytes allocated |");
    println!("|---|---:|---:|");
    for (name, mut run) in variants() {
        run(&runtime, &headers, WARM_UP);
        let region = Region::new(GLOBAL);
        black_box(run(&runtime, &headers, REQUESTS));
        let change = region.change();
        let per = |x: usize| x as f64 / REQUESTS as f64;
        println!(
            "| {name} | {} | {} |",
            per(change.allocations + change.reallocations),
            per(change.bytes_allocated)
        );
    }
}

// ---- the request mix ----

/// The durations recorded and the active-requests sum, per instrumentation scope.
fn read(provider: &SdkMeterProvider, exporter: &InMemoryMetricExporter, scope: &str) -> (u64, i64) {
    exporter.reset();
    provider.force_flush().unwrap();
    let (mut count, mut active) = (0, 0);
    for resource in exporter.get_finished_metrics().unwrap() {
        for scoped in resource.scope_metrics() {
            if scoped.scope().name() != scope {
                continue;
            }
            for metric in scoped.metrics() {
                match metric.data() {
                    AggregatedMetrics::F64(MetricData::Histogram(h)) => {
                        count += h.data_points().map(|p| p.count()).sum::<u64>();
                    }
                    AggregatedMetrics::I64(MetricData::Sum(s))
                        if metric.name() == "http.server.active_requests" =>
                    {
                        active += s.data_points().map(|p| p.value()).sum::<i64>();
                    }
                    _ => {}
                }
            }
        }
    }
    (count, active)
}

async fn mix_handler(req: Request<ReqBody>) -> Result<Response<Full<Bytes>>, Infallible> {
    match req.uri().path() {
        "/slow" | "/hang" => tokio::time::sleep(Duration::from_secs(1)).await,
        "/panic" => panic!("handler bug"),
        _ => {}
    }
    Ok(Response::new(Full::new(Bytes::from_static(b"hello"))))
}

/// Sends the mix through `service`; for each request, the durations it added and the
/// active-requests sum after it.
async fn send_mix<S, B>(
    mut service: S,
    provider: &SdkMeterProvider,
    exporter: &InMemoryMetricExporter,
    scope: &str,
) -> Vec<(u64, i64)>
where
    S: Service<Request<ReqBody>, Response = Response<B>>,
    S::Error: fmt::Debug,
    B: Body,
    B::Error: fmt::Debug,
{
    let mut rows = Vec::new();
    for path in ["/ok", "/slow", "/hang", "/panic"] {
        let (before, _) = read(provider, exporter, scope);
        let req = Request::get(path).body(ReqBody::new()).unwrap();
        let future = service.ready().await.unwrap().call(req);
        if path == "/hang" {
            // The client hangs up: the server drops the future after its first poll.
            let mut future = Box::pin(future);
            let _ = futures_poll_once(future.as_mut()).await;
            drop(future);
        } else if let Ok(res) = future.await {
            let _ = res.into_body().collect().await;
        }
        let (after, active) = read(provider, exporter, scope);
        rows.push((after - before, active));
    }
    rows
}

async fn futures_poll_once<F: std::future::Future + Unpin>(mut future: F) {
    std::future::poll_fn(|cx| {
        let _ = std::pin::Pin::new(&mut future).poll(cx);
        std::task::Poll::Ready(())
    })
    .await;
}

fn mix() {
    let (provider, exporter) = install_sdk();
    std::panic::set_hook(Box::new(|_| ()));
    let runtime = runtime();
    let timeout = Duration::from_millis(50);
    let ours = runtime.block_on(send_mix(
        SharedHeadersLayer::new()
            .timeout(timeout)
            .otel_metrics(&opentelemetry::global::meter("bench"))
            .layer(service_fn(mix_handler)),
        &provider,
        &exporter,
        "bench",
    ));
    let theirs = runtime.block_on(send_mix(
        ServiceBuilder::new()
            .layer(otel_tower())
            .layer(tower_http::timeout::TimeoutLayer::with_status_code(
                http::StatusCode::SERVICE_UNAVAILABLE,
                timeout,
            ))
            .layer(tower_http::catch_panic::CatchPanicLayer::new())
            .service_fn(mix_handler),
        &provider,
        &exporter,
        "opentelemetry-instrumentation-tower",
    ));
    println!(
        "| request | SharedHeadersLayer: durations recorded | active after | otel_tower_stack: durations recorded | active after |"
    );
    println!("|---|---:|---:|---:|---:|");
    for (i, name) in ["answered", "timed out", "hung up", "panicked"]
        .iter()
        .enumerate()
    {
        println!(
            "| {name} | {} | {} | {} | {} |",
            ours[i].0, ours[i].1, theirs[i].0, theirs[i].1
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let sdk = args.iter().any(|arg| arg == "--sdk");
    if args.iter().any(|arg| arg == "--mix") {
        mix();
        return;
    }
    let _sdk = sdk.then(install_sdk);
    let _tracer = sdk.then(install_tracer);
    if let Some(at) = args.iter().position(|arg| arg == "--run") {
        let usage = "--run <variant> <count> [--sdk]";
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
    if args.iter().any(|arg| arg == "--bench") || args.len() <= 1 || sdk {
        table(sdk);
    }
}
