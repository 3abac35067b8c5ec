//! OpenTelemetry's HTTP server metrics (feature `opentelemetry`) over real sockets (HTTP/1.1
//! and HTTP/2 on 127.0.0.1:0), read back through the SDK's in-memory exporter:
//!
//! * **every request exactly once**: answered, a body still streaming after the commit, timed
//!   out, rejected, panicked, failed, cancelled by a client hang-up, cancelled by an outer
//!   timeout (tower-http's), and (in process) a future dropped before its first poll: each is
//!   one count of `http.server.request.duration`, with its status and `error.type`, and
//!   `http.server.active_requests` is back to 0 for every attribute set;
//! * **the duration ends when the answer left**: a body that streams for 150 ms after an
//!   immediate commit is recorded with at least 150 ms;
//! * **cardinality**: a route-less request has no `http.route`, an axum route has its template,
//!   and no attribute value holds a path; a bounded attribute of the user's is there.
#![cfg(all(feature = "axum", feature = "opentelemetry"))]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::Empty;
use hyper::body::Incoming;
use opentelemetry::KeyValue;
use opentelemetry::metrics::MeterProvider;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use shared_headers::Builder;
use shared_headers::server::SharedHeadersLayer;
use tower::{Layer, Service, ServiceBuilder, ServiceExt};

#[path = "support/sockets.rs"]
mod sockets;
use sockets::{BoxError, fetch, hang_up, serve};

/// One data point: its attributes (as strings), its count, its sum.
type Point = (BTreeMap<String, String>, u64, f64);
/// The histogram's points and the counter's (attributes, value).
type Read = (Vec<Point>, Vec<(BTreeMap<String, String>, i64)>);

/// A meter provider whose metrics are read back from memory.
struct Metrics {
    provider: SdkMeterProvider,
    exporter: InMemoryMetricExporter,
}

impl Metrics {
    fn new() -> Self {
        let exporter = InMemoryMetricExporter::default();
        let provider = SdkMeterProvider::builder()
            .with_reader(PeriodicReader::builder(exporter.clone()).build())
            .build();
        Metrics { provider, exporter }
    }

    /// `layer` with the metrics, and a bounded attribute of the user's: the kind of request,
    /// mapped from the path to a fixed set.
    fn install(&self, layer: SharedHeadersLayer) -> SharedHeadersLayer {
        layer
            .otel_metrics(&self.provider.meter("test"))
            .otel_metric_attribute(|end| {
                let path = end.committed().uri()?.path();
                let kind = KINDS
                    .iter()
                    .find(|kind| path.starts_with(&format!("/{kind}/")))
                    .copied()
                    .unwrap_or("other");
                Some(KeyValue::new("test.kind", kind))
            })
    }

    /// The latest cumulative data points of the histogram and of the counter.
    fn read(&self) -> Read {
        self.exporter.reset();
        self.provider.force_flush().unwrap();
        let exported: Vec<ResourceMetrics> = self.exporter.get_finished_metrics().unwrap();
        let (mut histogram, mut active) = (Vec::new(), Vec::new());
        let attrs = |it: &mut dyn Iterator<Item = &KeyValue>| {
            it.map(|kv| (kv.key.to_string(), kv.value.to_string()))
                .collect::<BTreeMap<_, _>>()
        };
        let Some(last) = exported.last() else {
            return (histogram, active);
        };
        for scope in last.scope_metrics() {
            for metric in scope.metrics() {
                match (metric.name(), metric.data()) {
                    (
                        "http.server.request.duration",
                        AggregatedMetrics::F64(MetricData::Histogram(h)),
                    ) => {
                        assert_eq!(metric.unit(), "s");
                        for point in h.data_points() {
                            let bounds: Vec<f64> = point.bounds().collect();
                            assert_eq!(bounds, shared_headers::server::metrics::DURATION_BUCKETS);
                            histogram.push((
                                attrs(&mut point.attributes()),
                                point.count(),
                                point.sum(),
                            ));
                        }
                    }
                    ("http.server.active_requests", AggregatedMetrics::I64(MetricData::Sum(s))) => {
                        for point in s.data_points() {
                            active.push((attrs(&mut point.attributes()), point.value()));
                        }
                    }
                    (name, _) => panic!("unexpected metric {name}"),
                }
            }
        }
        (histogram, active)
    }

    /// Waits (5 s at most) until the histogram holds `n` requests, then reads.
    async fn wait(&self, n: u64) -> Read {
        let start = Instant::now();
        loop {
            let read = self.read();
            let total: u64 = read.0.iter().map(|p| p.1).sum();
            if total >= n || start.elapsed() > Duration::from_secs(5) {
                // A little longer: a second count of one request would show now.
                if total >= n {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    return self.read();
                }
                return read;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

const KINDS: [&str; 9] = [
    "ok", "stream", "slow", "panic", "rejected", "fail", "hang", "outer", "users",
];

/// A body that sends one chunk 150 ms after the head.
struct Slow(Option<Pin<Box<tokio::time::Sleep>>>);

impl http_body::Body for Slow {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.0.as_mut() {
            None => Poll::Ready(None),
            Some(sleep) => {
                std::task::ready!(sleep.as_mut().poll(cx));
                self.0 = None;
                Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"late")))))
            }
        }
    }
}

type Body = http_body_util::Either<http_body_util::Full<Bytes>, Slow>;

async fn handler(req: Request<Incoming>) -> Result<Response<Body>, BoxError> {
    let kind = req.uri().path().split('/').nth(1).unwrap_or("").to_owned();
    match kind.as_str() {
        "slow" | "hang" | "outer" => tokio::time::sleep(Duration::from_secs(5)).await,
        "panic" => panic!("handler bug"),
        "fail" => return Err("the service failed".into()),
        "stream" => {
            let sleep = Box::pin(tokio::time::sleep(Duration::from_millis(150)));
            return Ok(Response::new(Body::Right(Slow(Some(sleep)))));
        }
        _ => {}
    }
    Ok(Response::new(Body::Left("hello".into())))
}

fn request(path: &str, h2: bool) -> Request<Empty<Bytes>> {
    let uri = if h2 {
        format!("http://api.example{path}?q=1")
    } else {
        format!("{path}?q=1")
    };
    Request::get(uri)
        .header("host", "api.example")
        .body(Empty::new())
        .unwrap()
}

/// Silences the handler's expected panic (others print as usual): the default hook prints a
/// backtrace when `RUST_BACKTRACE` is set, on the worker thread before the layer catches the
/// panic, which in a debug build can take longer than the 150 ms deadline: the deadline then
/// wins, rightly, over the panic (a 503 where the test expects the panic's 500; 7 runs in 60
/// with `RUST_BACKTRACE=1` on a loaded machine).
fn quiet_handler_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<&str>() != Some(&"handler bug") {
                default(info);
            }
        }));
    });
}

async fn every_request_once(h2: bool) {
    quiet_handler_panics();
    let tag = if h2 { "h2" } else { "h1" };
    let metrics = Metrics::new();
    let layer = || {
        metrics.install(
            SharedHeadersLayer::new()
                .timeout(Duration::from_millis(150))
                .request_policy(Builder::new().max_entries(8)),
        )
    };
    let addr = serve(layer().layer(tower::service_fn(handler)), h2).await;
    let outer = ServiceBuilder::new()
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::GATEWAY_TIMEOUT,
            Duration::from_millis(100),
        ))
        .layer(layer().timeout(Duration::from_secs(5)))
        .service_fn(handler);
    let outer_addr = serve(outer, h2).await;
    let app = axum::Router::new()
        .route("/users/{id}", axum::routing::get(|| async { "user" }))
        .layer(layer());
    let app_addr = serve(app, h2).await;

    let path = |kind: &str| format!("/{kind}/{tag}");
    let fetch_kind = |kind: &'static str| fetch(addr, h2, request(&path(kind), h2));
    assert_eq!(fetch_kind("ok").await, Some(StatusCode::OK));
    assert_eq!(fetch_kind("stream").await, Some(StatusCode::OK));
    assert_eq!(
        fetch_kind("slow").await,
        Some(StatusCode::SERVICE_UNAVAILABLE)
    );
    assert_eq!(
        fetch_kind("panic").await,
        Some(StatusCode::INTERNAL_SERVER_ERROR)
    );
    let mut over = request(&path("rejected"), h2);
    for i in 0..10 {
        over.headers_mut().insert(
            http::HeaderName::try_from(format!("x-extra-{i}")).unwrap(),
            http::HeaderValue::from_static("filler"),
        );
    }
    assert_eq!(
        fetch(addr, h2, over).await,
        Some(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
    );
    assert_ne!(fetch_kind("fail").await, Some(StatusCode::OK));
    hang_up(
        addr,
        h2,
        request(&path("hang"), h2),
        Duration::from_millis(50),
    )
    .await;
    assert_eq!(
        fetch(outer_addr, h2, request(&path("outer"), h2)).await,
        Some(StatusCode::GATEWAY_TIMEOUT)
    );
    assert_eq!(
        fetch(app_addr, h2, request(&path("users"), h2)).await,
        Some(StatusCode::OK)
    );

    let (histogram, active) = metrics.wait(9).await;
    let version = if h2 { "2" } else { "1.1" };
    // kind, status, error.type
    let expect = [
        ("ok", Some("200"), None),
        ("stream", Some("200"), None),
        ("slow", Some("503"), Some("timeout")),
        ("panic", Some("500"), Some("panic")),
        ("rejected", Some("431"), None),
        ("fail", None, Some("failed")),
        ("hang", None, Some("cancelled")),
        ("outer", None, Some("cancelled")),
        ("users", Some("200"), None),
    ];
    assert_eq!(histogram.len(), expect.len(), "{tag}: {histogram:#?}");
    for (kind, status, error) in expect {
        let found: Vec<&Point> = histogram
            .iter()
            .filter(|p| p.0.get("test.kind").map(String::as_str) == Some(kind))
            .collect();
        assert_eq!(found.len(), 1, "{tag} {kind}: {histogram:#?}");
        let (attrs, count, sum) = found[0];
        assert_eq!(*count, 1, "{tag} {kind}: counted once");
        let get = |key: &str| attrs.get(key).map(String::as_str);
        assert_eq!(get("http.response.status_code"), status, "{tag} {kind}");
        assert_eq!(get("error.type"), error, "{tag} {kind}");
        assert_eq!(get("http.request.method"), Some("GET"));
        assert_eq!(get("url.scheme"), Some("http"));
        assert_eq!(get("network.protocol.name"), Some("http"));
        assert_eq!(get("network.protocol.version"), Some(version));
        let route = if kind == "users" {
            Some("/users/{id}")
        } else {
            None
        };
        assert_eq!(get("http.route"), route, "{tag} {kind}: never the raw path");
        for value in attrs.values() {
            assert!(!value.contains(tag), "a raw path in {attrs:?}");
            assert!(!value.contains("q=1"), "a query in {attrs:?}");
        }
        match kind {
            // The end, not the commit: the body streamed 150 ms after the head.
            "stream" => assert!(*sum >= 0.15, "{tag} stream: {sum}"),
            "slow" => assert!(*sum >= 0.15, "{tag} slow: {sum}"),
            "ok" => assert!(*sum < 0.15, "{tag} ok: {sum}"),
            _ => {}
        }
    }
    assert!(!active.is_empty());
    for (attrs, value) in &active {
        assert_eq!(*value, 0, "{tag}: active requests {attrs:?}");
        assert_eq!(attrs.len(), 2, "method and scheme only: {attrs:?}");
    }
    metrics.provider.shutdown().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_counted_once_and_active_back_to_zero_http1() {
    tokio::time::timeout(Duration::from_secs(30), every_request_once(false))
        .await
        .expect("bounded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_counted_once_and_active_back_to_zero_http2() {
    tokio::time::timeout(Duration::from_secs(30), every_request_once(true))
        .await
        .expect("bounded");
}

#[tokio::test(flavor = "current_thread")]
async fn a_future_dropped_before_its_first_poll_is_counted_cancelled() {
    let metrics = Metrics::new();
    let mut service = metrics
        .install(SharedHeadersLayer::new())
        .layer(tower::service_fn(|_req: Request<()>| async {
            Ok::<_, Infallible>(Response::new(String::new()))
        }));
    let future = service
        .ready()
        .await
        .unwrap()
        .call(Request::get("/ok/x").body(()).unwrap());
    let (_, active) = metrics.read();
    assert_eq!(active.len(), 1);
    assert_eq!(active[0].1, 1, "active while the future lives");
    drop(future);
    let (histogram, active) = metrics.read();
    assert_eq!(histogram.len(), 1, "{histogram:#?}");
    assert_eq!(histogram[0].1, 1);
    assert_eq!(histogram[0].0["error.type"], "cancelled");
    assert!(!histogram[0].0.contains_key("http.response.status_code"));
    assert_eq!(active[0].1, 0);
}

#[tokio::test(flavor = "current_thread")]
async fn a_panicking_user_attribute_still_brings_the_counter_down() {
    let metrics = Metrics::new();
    let meter = metrics.provider.meter("test");
    let service = SharedHeadersLayer::new()
        .otel_metrics(&meter)
        .otel_metric_attribute(|_| panic!("attribute bug"))
        .layer(tower::service_fn(|_req: Request<()>| async {
            Ok::<_, Infallible>(Response::new(String::new()))
        }));
    let res = service.oneshot(Request::new(())).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    drop(res);
    let (histogram, active) = metrics.read();
    assert!(histogram.is_empty(), "{histogram:#?}");
    assert_eq!(active[0].1, 0);
}
