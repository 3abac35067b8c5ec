//! The server's OpenTelemetry span, exactly once for every outcome, over real sockets: each
//! cell is one outcome on one protocol (HTTP/1.1, h2c with prior knowledge), served by its own
//! hyper server on 127.0.0.1:0 behind `SharedHeadersLayer::otel_tracer` with its own tracer
//! provider (the SDK's in-memory exporter), and asserts:
//!
//! * exactly one server span for the cell's request (none more 200 ms later), kind server;
//! * its `error.type` is the outcome's (the access line's and the metric's value), and its
//!   status is `Error` exactly when `error.type` is set;
//! * its `http.response.status_code` is the status the client received when the answer went
//!   through the layer (none when it did not: a hang-up, an outer timeout, a future dropped
//!   before its first poll);
//! * it ends when the answer left: an answered body that streams 150 ms after its head gives
//!   a span at least that long.
//!
//! The outcomes: answered, the layer's timeout, rejected (headers over the limits), shed by
//! admission, a panic in the handler, a failed inner service, a client that hung up, an outer
//! tower-http timeout, a future dropped before its first poll (an outer service that calls the
//! layer's service and drops its future). A table of every cell is printed; the test fails if
//! any cell failed.
#![cfg(feature = "opentelemetry")]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use opentelemetry::trace::SpanKind;
use shared_headers::Builder;
use shared_headers::deadline::BudgetHeader;
use shared_headers::server::{Admission, SharedHeadersLayer};
use tower::util::BoxCloneService;
use tower::{Layer, Service, ServiceBuilder, ServiceExt};

#[path = "support/otel_spans.rs"]
mod otel_spans;
use otel_spans::{Spans, attr, is_error};
#[path = "support/script_body.rs"]
mod script_body;
use script_body::{Script, Step};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Body = UnsyncBoxBody<Bytes, BoxError>;
type Svc = BoxCloneService<Request<Incoming>, Response<Body>, BoxError>;

/// The pause of an answered body after its head: the span must cover it.
const TAIL: Duration = Duration::from_millis(150);
/// A handler that takes long: past every cut of the table.
const SLOW: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq)]
enum Outcome {
    Answered,
    TimedOut,
    Rejected,
    Shed,
    Panicked,
    Failed,
    HangUp,
    OuterTimeout,
    DroppedBeforePoll,
}

impl Outcome {
    const ALL: [Outcome; 9] = [
        Outcome::Answered,
        Outcome::TimedOut,
        Outcome::Rejected,
        Outcome::Shed,
        Outcome::Panicked,
        Outcome::Failed,
        Outcome::HangUp,
        Outcome::OuterTimeout,
        Outcome::DroppedBeforePoll,
    ];

    /// The request's path, the status the span records, its `error.type`.
    fn expect(self) -> (&'static str, Option<&'static str>, Option<&'static str>) {
        match self {
            Outcome::Answered => ("/ok", Some("200"), None),
            Outcome::TimedOut => ("/slow", Some("503"), Some("timeout")),
            // A 4xx is no server error (OpenTelemetry's HTTP conventions).
            Outcome::Rejected => ("/ok", Some("431"), None),
            Outcome::Shed => ("/shed", Some("503"), Some("deadline_unmeetable")),
            Outcome::Panicked => ("/panic", Some("500"), Some("panic")),
            Outcome::Failed => ("/fail", None, Some("failed")),
            Outcome::HangUp => ("/slow", None, Some("cancelled")),
            Outcome::OuterTimeout => ("/slow", None, Some("cancelled")),
            Outcome::DroppedBeforePoll => ("/ok", None, Some("cancelled")),
        }
    }
}

/// The handler: `/slow` takes [`SLOW`], `/panic` panics, `/fail` fails, `/shed` takes 30 ms,
/// `/ok` streams its last bytes [`TAIL`] after its head.
async fn handler(req: Request<Incoming>) -> Result<Response<Body>, BoxError> {
    let full = |text: &'static str| {
        Full::new(Bytes::from(text))
            .map_err(|e| match e {})
            .boxed_unsync()
    };
    match req.uri().path() {
        "/slow" => {
            tokio::time::sleep(SLOW).await;
            Ok(Response::new(full("late")))
        }
        "/panic" => panic!("boom"),
        "/fail" => Err("failed".into()),
        "/shed" => {
            tokio::time::sleep(Duration::from_millis(30)).await;
            Ok(Response::new(full("warm")))
        }
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

/// The layer's service, boxed, its body boxed.
fn boxed<S, B>(service: S) -> Svc
where
    S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    ServiceBuilder::new()
        .map_response(|res: Response<B>| res.map(|b| b.map_err(Into::into).boxed_unsync()))
        .map_err(Into::into)
        .service(service)
        .boxed_clone()
}

/// The cell's server: its layer (and what is around it) for `outcome`.
fn service(outcome: Outcome, spans: &Spans) -> Svc {
    let layer = SharedHeadersLayer::new().timeout(if outcome == Outcome::TimedOut {
        Duration::from_millis(200)
    } else {
        Duration::from_secs(10)
    });
    let layer = match outcome {
        Outcome::Rejected => layer.request_policy(Builder::new().max_entries(2)),
        Outcome::Shed => layer
            .caller_budget(BudgetHeader::envoy_expected_rq_timeout_ms())
            .admission(Admission::new().warm_up(2).max_shed(1.0)),
        _ => layer,
    }
    .otel_tracer(spans.tracer("server"));
    let app = tower::service_fn(handler);
    match outcome {
        Outcome::OuterTimeout => boxed(
            ServiceBuilder::new()
                .layer(tower_http::timeout::TimeoutLayer::with_status_code(
                    StatusCode::GATEWAY_TIMEOUT,
                    Duration::from_millis(100),
                ))
                .layer(layer)
                .service(app),
        ),
        Outcome::DroppedBeforePoll => {
            let inner = layer.layer(app);
            boxed(tower::service_fn(move |req: Request<Incoming>| {
                let mut inner = inner.clone();
                async move {
                    // Called, never polled, dropped.
                    drop(inner.call(req));
                    let mut res = Response::new(Empty::<Bytes>::new());
                    *res.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                    Ok::<_, Infallible>(res)
                }
            }))
        }
        _ => boxed(layer.layer(app)),
    }
}

async fn serve(service: Svc, h2: bool) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let service = TowerToHyperService::new(service.clone());
            let io = TokioIo::new(stream);
            if h2 {
                tokio::spawn(
                    hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(io, service),
                );
            } else {
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new().serve_connection(io, service),
                );
            }
        }
    });
    addr
}

/// Runs one cell; `Err` says what was wrong.
async fn cell(outcome: Outcome, h2: bool) -> Result<String, String> {
    let spans = Spans::new();
    let addr = serve(service(outcome, &spans), h2).await;
    let client = Client::builder(TokioExecutor::new())
        .http2_only(h2)
        .build_http::<Empty<Bytes>>();
    let (path, status, error) = outcome.expect();
    let request = |path: &str, budget: bool| {
        let mut req = Request::get(format!("http://{addr}{path}"))
            .body(Empty::new())
            .unwrap();
        if outcome == Outcome::Rejected {
            for name in ["x-a", "x-b", "x-c"] {
                req.headers_mut().insert(name, "1".parse().unwrap());
            }
        }
        if budget {
            req.headers_mut()
                .insert("x-envoy-expected-rq-timeout-ms", "5".parse().unwrap());
        }
        req
    };
    let mut expected_spans = 1;
    if outcome == Outcome::Shed {
        // The route's estimate first: two answers of 30 ms.
        for _ in 0..2 {
            let res = client
                .request(request(path, false))
                .await
                .map_err(|e| e.to_string())?;
            res.into_body().collect().await.map_err(|e| e.to_string())?;
        }
        expected_spans = 3;
    }
    let call = client.request(request(path, outcome == Outcome::Shed));
    let client_saw = if outcome == Outcome::HangUp {
        let _ = tokio::time::timeout(Duration::from_millis(500), call).await;
        "hung up".to_owned()
    } else {
        match call.await {
            Ok(res) => {
                let status = res.status();
                let _ = res.into_body().collect().await;
                status.as_str().to_owned()
            }
            Err(_) => "error".to_owned(),
        }
    };
    let finished = spans.wait_for(expected_spans).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let later = spans.finished();
    if later.len() != expected_spans || finished.len() != expected_spans {
        return Err(format!(
            "{} spans, want {expected_spans}: {later:?}",
            later.len()
        ));
    }
    // The cell's request ended last (the warm-up requests of a shed cell before it).
    let span = later.last().unwrap();
    if attr(span, "url.path").as_deref() != Some(path) {
        return Err(format!("no span for {path}: {later:?}"));
    }
    let seen = (
        span.span_kind.clone(),
        attr(span, "http.response.status_code"),
        attr(span, "error.type"),
        is_error(span),
    );
    let want = (
        SpanKind::Server,
        status.map(str::to_owned),
        error.map(str::to_owned),
        error.is_some(),
    );
    if seen != want {
        return Err(format!("saw {seen:?}, want {want:?}"));
    }
    let took = span
        .end_time
        .duration_since(span.start_time)
        .unwrap_or_default();
    if outcome == Outcome::Answered && took < TAIL {
        return Err(format!("ended after {took:?}, before the body's tail"));
    }
    Ok(format!(
        "client {client_saw}, span status {}, error.type {}, {took:.0?}",
        status.unwrap_or("-"),
        error.unwrap_or("-")
    ))
}

#[test]
fn one_server_span_per_outcome_over_http1_and_h2c() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let results = runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(60), async {
            let mut cells = Vec::new();
            for h2 in [false, true] {
                for outcome in Outcome::ALL {
                    cells.push(tokio::spawn(async move {
                        (outcome, h2, cell(outcome, h2).await)
                    }));
                }
            }
            let mut results = Vec::new();
            for cell in cells {
                results.push(cell.await.unwrap());
            }
            results
        })
        .await
        .expect("bounded")
    });
    let mut failed = 0;
    for (outcome, h2, result) in &results {
        let proto = if *h2 { "h2c" } else { "http/1.1" };
        match result {
            Ok(text) => println!("| {outcome:?} | {proto} | ok: {text} |"),
            Err(text) => {
                failed += 1;
                println!("| {outcome:?} | {proto} | FAILED: {text} |");
            }
        }
    }
    assert_eq!(failed, 0, "{failed} cells failed");
}
