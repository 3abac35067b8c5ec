//! Side by side over sockets: the same request mix through three server span stacks, each
//! exporting to its own OpenTelemetry SDK in-memory exporter:
//!
//! * **this crate**: `SharedHeadersLayer::timeout(..).otel_tracer(..)`;
//! * **tower-http + tracing-opentelemetry**: `TraceLayer` (its span made with the caller's
//!   `traceparent` as its parent, through the global propagator and `set_parent`, as a user
//!   does), `TimeoutLayer`, `CatchPanicLayer`, under a `tracing_opentelemetry` layer;
//! * **opentelemetry-instrumentation-tower**: its `HTTPLayer` (the global tracer provider and
//!   propagator: it takes no tracer of its own), `TimeoutLayer`, `CatchPanicLayer`.
//!
//! The mix, every request with a `traceparent` from a caller: answered (a body whose tail
//! comes 150 ms after its head), a handler's 500, a timeout (1 s, the stack's own), a
//! panic, a client that hangs up (after 300 ms), a future dropped before its first poll. For each stack and
//! request, the test records: how many server spans were exported (the right answer is 1), the
//! status, whether the answered span ended when the body ended (it lasts the 150 ms tail), and
//! whether the span is the caller's child (its trace id and parent id). It prints the table
//! that `docs::context` shows (its Spans section), and asserts it, so that the page stays true.
#![cfg(all(feature = "opentelemetry", feature = "tracing"))]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use opentelemetry::propagation::Extractor;
use opentelemetry::trace::Status;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SpanData;
use shared_headers::server::SharedHeadersLayer;
use tower::util::BoxCloneService;
use tower::{Layer, Service, ServiceBuilder, ServiceExt};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;

#[path = "support/otel_spans.rs"]
mod otel_spans;
use otel_spans::{Spans, attr};
#[path = "support/script_body.rs"]
mod script_body;
use script_body::{Script, Step};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Body = UnsyncBoxBody<Bytes, BoxError>;
type Svc = BoxCloneService<Request<Incoming>, Response<Body>, BoxError>;

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER: &str = "00f067aa0ba902b7";
const TAIL: Duration = Duration::from_millis(150);
const TIMEOUT: Duration = Duration::from_secs(1);
/// When the client hangs up: well before the timeout.
const HANG_UP: Duration = Duration::from_millis(300);
const SLOW: Duration = Duration::from_secs(5);

/// The mix: its request paths, in the table's order.
const MIX: [&str; 6] = ["/ok", "/500", "/slow", "/panic", "/hang", "/drop"];

fn full(text: &'static str) -> Body {
    Full::new(Bytes::from(text))
        .map_err(|e| match e {})
        .boxed_unsync()
}

async fn handler(req: Request<Incoming>) -> Result<Response<Body>, BoxError> {
    match req.uri().path() {
        "/500" => {
            let mut res = Response::new(full("down"));
            *res.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            Ok(res)
        }
        "/slow" | "/hang" => {
            tokio::time::sleep(SLOW).await;
            Ok(Response::new(full("late")))
        }
        "/panic" => panic!("boom"),
        _ => {
            let body = Script::new(
                [
                    Step::Data(Bytes::from("head")),
                    Step::Sleep(TAIL),
                    Step::Data(Bytes::from("tail")),
                ],
                false,
                false,
            );
            Ok(Response::new(body.map_err(BoxError::from).boxed_unsync()))
        }
    }
}

/// `service`, its body and error boxed, behind an outer service that drops the future of a
/// `/drop` request before its first poll.
fn boxed<S, B>(service: S) -> Svc
where
    S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let inner = ServiceBuilder::new()
        .map_response(|res: Response<B>| res.map(|b| b.map_err(Into::into).boxed_unsync()))
        .map_err(Into::into)
        .service(service)
        .boxed_clone();
    tower::service_fn(move |req: Request<Incoming>| {
        let mut inner = inner.clone();
        async move {
            if req.uri().path() == "/drop" {
                drop(inner.call(req));
                let mut res = Response::new(full(""));
                *res.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                return Ok(res);
            }
            inner.call(req).await
        }
    })
    .boxed_clone()
}

struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

fn ours(spans: &Spans) -> Svc {
    boxed(
        SharedHeadersLayer::new()
            .timeout(TIMEOUT)
            .otel_tracer(spans.tracer("shared-headers"))
            .layer(tower::service_fn(handler)),
    )
}

fn tower_http_stack() -> Svc {
    let trace =
        tower_http::trace::TraceLayer::new_for_http().make_span_with(|req: &Request<Incoming>| {
            let span = tracing::info_span!(
                "HTTP request",
                otel.kind = "server",
                http.request.method = %req.method(),
                url.path = req.uri().path(),
            );
            let parent = opentelemetry::global::get_text_map_propagator(|propagator| {
                propagator.extract(&Headers(req.headers()))
            });
            let _ = span.set_parent(parent);
            span
        });
    boxed(
        ServiceBuilder::new()
            .layer(trace)
            .layer(tower_http::timeout::TimeoutLayer::with_status_code(
                StatusCode::SERVICE_UNAVAILABLE,
                TIMEOUT,
            ))
            .layer(tower_http::catch_panic::CatchPanicLayer::new())
            .service(tower::service_fn(handler)),
    )
}

fn contrib_stack() -> Svc {
    let layer = opentelemetry_instrumentation_tower::http::server::LayerBuilder::builder()
        .build()
        .unwrap();
    boxed(
        ServiceBuilder::new()
            .layer(layer)
            .layer(tower_http::timeout::TimeoutLayer::with_status_code(
                StatusCode::SERVICE_UNAVAILABLE,
                TIMEOUT,
            ))
            .layer(tower_http::catch_panic::CatchPanicLayer::new())
            .service(tower::service_fn(handler)),
    )
}

async fn serve(service: Svc) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let service = TowerToHyperService::new(service.clone());
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    addr
}

/// Sends the mix to `addr`, every request from the same caller span.
async fn send_mix(addr: SocketAddr) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    for path in MIX {
        let mut req = Request::get(format!("http://{addr}{path}"))
            .body(Empty::new())
            .unwrap();
        req.headers_mut().insert(
            "traceparent",
            format!("00-{TRACE}-{CALLER}-01").parse().unwrap(),
        );
        let call = client.request(req);
        if path == "/hang" {
            let _ = tokio::time::timeout(HANG_UP, call).await;
            continue;
        }
        if let Ok(res) = call.await {
            let _ = res.into_body().collect().await;
        }
    }
}

/// One cell of the table: what the stack exported for one request.
fn cell(spans: &[SpanData], path: &str) -> String {
    let of: Vec<&SpanData> = spans
        .iter()
        .filter(|s| attr(s, "url.path").as_deref() == Some(path))
        .collect();
    let [span] = of.as_slice() else {
        return format!("{} spans", of.len());
    };
    let status = match span.status {
        Status::Error { .. } => "Error",
        _ => "Unset",
    };
    let parent = span.span_context.trace_id().to_string() == TRACE
        && span.parent_span_id.to_string() == CALLER;
    let mut text = format!(
        "1 span, {status}, {}",
        if parent { "child" } else { "no parent" }
    );
    if path == "/ok" {
        let took = span
            .end_time
            .duration_since(span.start_time)
            .unwrap_or_default();
        text.push_str(if took >= TAIL {
            ", ends at body end"
        } else {
            ", ends at head"
        });
    }
    text
}

#[test]
fn three_span_stacks_on_one_request_mix() {
    let (mine, tower_http, contrib) = (Spans::new(), Spans::new(), Spans::new());
    // The contrib layer takes the global provider and propagator; tower-http's spans go
    // through the `tracing` subscriber of this thread (a current-thread runtime: the servers
    // and the client all run on it).
    opentelemetry::global::set_tracer_provider(contrib.provider.clone());
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(tower_http.tracer("tower-http")));
    let _default = tracing::subscriber::set_default(subscriber);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(60), async {
            for svc in [ours(&mine), tower_http_stack(), contrib_stack()] {
                let addr = serve(svc).await;
                send_mix(addr).await;
            }
            // Every span that ends has ended by now; wait a little more for any late one.
            tokio::time::sleep(Duration::from_millis(300)).await;
        })
        .await
        .expect("bounded");
    });
    let mut table: BTreeMap<&str, [String; 3]> = BTreeMap::new();
    let (a, b, c) = (mine.finished(), tower_http.finished(), contrib.finished());
    println!(
        "| request | shared-headers | TraceLayer + tracing-opentelemetry | opentelemetry-instrumentation-tower |"
    );
    println!("| --- | --- | --- | --- |");
    for path in MIX {
        let row = [cell(&a, path), cell(&b, path), cell(&c, path)];
        println!("| {path} | {} | {} | {} |", row[0], row[1], row[2]);
        table.insert(path, row);
    }
    // This crate: one span per request, each the caller's child, the answer's at body end,
    // Error for every failure (the 500, the timeout, the panic, the hang-up, the drop).
    let want_ours = [
        ("/ok", "1 span, Unset, child, ends at body end"),
        ("/500", "1 span, Error, child"),
        ("/slow", "1 span, Error, child"),
        ("/panic", "1 span, Error, child"),
        ("/hang", "1 span, Error, child"),
        ("/drop", "1 span, Error, child"),
    ];
    // The other two, as measured (the table in the docs): a change in them fails here.
    let want_tower_http = [
        ("/ok", "1 span, Unset, child, ends at body end"),
        ("/500", "1 span, Error, child"),
        ("/slow", "1 span, Error, child"),
        ("/panic", "1 span, Error, child"),
        ("/hang", "1 span, Unset, child"),
        ("/drop", "1 span, Unset, child"),
    ];
    let want_contrib = [
        ("/ok", "1 span, Unset, child, ends at head"),
        ("/500", "1 span, Error, child"),
        ("/slow", "1 span, Error, child"),
        ("/panic", "1 span, Error, child"),
        ("/hang", "1 span, Unset, child"),
        ("/drop", "1 span, Unset, child"),
    ];
    for (column, want) in [want_ours, want_tower_http, want_contrib]
        .iter()
        .enumerate()
    {
        for (path, want) in want {
            assert_eq!(table[path][column], *want, "column {column}, {path}");
        }
    }
}
