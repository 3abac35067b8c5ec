//! The access line over real sockets (HTTP/1.1 and HTTP/2 on 127.0.0.1:0), one test per
//! promise of the line:
//!
//! * **secrets**: a secret in every place (request headers of each kind, the query, the
//!   referer's query, a response `set-cookie`, headers the handler writes through the handle,
//!   a value flagged sensitive) through every outcome (answered, timed out, rejected,
//!   panicked, failed, cancelled by a client hang-up, cancelled by an outer timeout,
//!   post-commit activity), with the default log and with every header printed: no secret in any
//!   event or span field the process emits;
//! * **one line per request, at its end**: exactly one `request completed` line for each of
//!   those outcomes, on both protocols;
//! * **true durations**: a handler that blocks its worker 1 s behind a 200 ms deadline is
//!   logged with a total of at least 1 s and its commit at the deadline;
//! * **the fields**: each OpenTelemetry attribute against what was sent (axum's route, the
//!   host or `:authority`, the peer, the method, the body size);
//! * **panics reach the user's recovery**: with `resume_panics(true)`, an outer
//!   `CatchPanicLayer::custom` gets the handler's own payload, and the line says nothing was
//!   sent.
//!
//! Events are captured by a bare `Subscriber` installed once as the global default; each test
//! tells its requests apart by their paths.
#![cfg(all(feature = "axum", feature = "tracing"))]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use shared_headers::server::SharedHeadersLayer;
use shared_headers::server::access_log::AccessLog;
use shared_headers::{Builder, Exchange};
use tower::{Layer, ServiceBuilder};

#[path = "support/capture.rs"]
mod capture;
use capture::{Fields, access_lines_of, capture, lock, wait_access_lines_of};

#[path = "support/sockets.rs"]
mod sockets;
use sockets::{BoxError, connect, fetch, hang_up};

/// Where the accept loop puts the peer's address, for `peer_address`.
#[derive(Clone, Copy)]
struct Peer(SocketAddr);

/// Serves `service` on 127.0.0.1:0 over HTTP/1.1 or HTTP/2 (prior knowledge), with each
/// request's peer in its extensions.
async fn serve<S, B>(service: S, h2: bool) -> SocketAddr
where
    S: tower::Service<Request<Incoming>, Response = Response<B>> + Clone + Send + Sync + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, peer)) = listener.accept().await else {
                continue;
            };
            let service = ServiceBuilder::new()
                .map_request(move |mut req: Request<Incoming>| {
                    req.extensions_mut().insert(Peer(peer));
                    req
                })
                .service(service.clone());
            let service = TowerToHyperService::new(service);
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

// ---- the secret sweep, one line per outcome ----

const SECRET: &str = "S3CR3T";

/// A request with a secret in every place a request can carry one.
fn secret_request(path: &str, h2: bool) -> Request<Empty<Bytes>> {
    let uri = if h2 {
        format!("http://api.example{path}?page=2&api_key={SECRET}-q1&token={SECRET}-q2")
    } else {
        format!("{path}?page=2&api_key={SECRET}-q1&Access%5FToken={SECRET}-q2")
    };
    let mut builder = Request::get(uri)
        .header("user-agent", "curl/8.5.0")
        .header("x-api-key", format!("AKIA-{SECRET}-apikey"))
        .header("authorization", format!("Bearer {SECRET}-auth"))
        .header("cookie", format!("sid={SECRET}-cookie"))
        .header("x-tenant-secret", format!("{SECRET}-policy"))
        .header("x-auth-token", format!("{SECRET}-token"))
        .header(
            "referer",
            format!("https://app.example/p?access_token={SECRET}-ref&x=1"),
        );
    if !h2 {
        builder = builder.header("host", "api.example");
    }
    builder.body(Empty::new()).unwrap()
}

/// The handler of the sweep, by the path's first segment; every answer carries secrets.
async fn sweep_handler(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, BoxError> {
    let exchange = req.extensions().get::<Exchange>().unwrap().clone();
    let _ = exchange
        .response()
        .insert("x-auth-token", format!("{SECRET}-handle").parse().unwrap());
    let mut flagged: http::HeaderValue = format!("{SECRET}-flagged").parse().unwrap();
    flagged.set_sensitive(true);
    let _ = exchange.response().insert("x-custom", flagged);
    let kind = req.uri().path().split('/').nth(1).unwrap_or("").to_owned();
    match kind.as_str() {
        "slow" | "hang" | "hang-outer" => tokio::time::sleep(Duration::from_secs(5)).await,
        "panic" => panic!("handler bug"),
        "fail" => return Err("the service failed".into()),
        "late" => {
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                let _ = exchange
                    .response()
                    .insert("x-late", format!("{SECRET}-late").parse().unwrap());
            });
        }
        _ => {}
    }
    let mut res = Response::new(Full::from("hello"));
    res.headers_mut().insert(
        "set-cookie",
        format!("sid={SECRET}-set-cookie").parse().unwrap(),
    );
    res.headers_mut()
        .insert("content-type", "text/plain".parse().unwrap());
    Ok(res)
}

/// The layer under test, with the default log or with every header logged.
fn sweep_layer(all_headers: bool, timeout: Duration) -> SharedHeadersLayer {
    let log = if all_headers {
        AccessLog::new()
            .request_headers(shared_headers::server::HeaderSelection::all())
            .response_headers(shared_headers::server::HeaderSelection::all())
    } else {
        AccessLog::new()
    };
    SharedHeadersLayer::new()
        .timeout(timeout)
        .request_policy(
            Builder::new()
                .max_entries(24)
                .sensitive([http::HeaderName::from_static("x-tenant-secret")]),
        )
        .peer_address(|ext| ext.get::<Peer>().map(|peer| peer.0))
        .access_log(log)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_in_any_line_and_one_line_per_request_for_every_outcome() {
    capture();
    for all_headers in [false, true] {
        for h2 in [false, true] {
            let tag = format!(
                "{}{}",
                if h2 { "h2" } else { "h1" },
                if all_headers { "-all" } else { "" }
            );
            let service = sweep_layer(all_headers, Duration::from_millis(400))
                .layer(tower::service_fn(sweep_handler));
            let addr = serve(service, h2).await;
            // An outer timeout (tower-http's) that drops the layer's future first.
            let outer = ServiceBuilder::new()
                .layer(tower_http::timeout::TimeoutLayer::with_status_code(
                    StatusCode::GATEWAY_TIMEOUT,
                    Duration::from_millis(100),
                ))
                .layer(sweep_layer(all_headers, Duration::from_secs(5)))
                .service_fn(sweep_handler);
            let outer_addr = serve(outer, h2).await;

            let path = |kind: &str| format!("/{kind}/{tag}");
            let ok = fetch(addr, h2, secret_request(&path("ok"), h2)).await;
            assert_eq!(ok, Some(StatusCode::OK));
            let slow = fetch(addr, h2, secret_request(&path("slow"), h2)).await;
            assert_eq!(slow, Some(StatusCode::SERVICE_UNAVAILABLE));
            let panicked = fetch(addr, h2, secret_request(&path("panic"), h2)).await;
            assert_eq!(panicked, Some(StatusCode::INTERNAL_SERVER_ERROR));
            let mut over = secret_request(&path("rejected"), h2);
            for i in 0..30 {
                over.headers_mut().insert(
                    http::HeaderName::try_from(format!("x-extra-{i}")).unwrap(),
                    http::HeaderValue::from_static("filler"),
                );
            }
            let rejected = fetch(addr, h2, over).await;
            assert_eq!(rejected, Some(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE));
            // The inner service's error: hyper closes the stream; no answer from the layer.
            let failed = fetch(addr, h2, secret_request(&path("fail"), h2)).await;
            assert_ne!(failed, Some(StatusCode::OK));
            let late = fetch(addr, h2, secret_request(&path("late"), h2)).await;
            assert_eq!(late, Some(StatusCode::OK));
            hang_up(
                addr,
                h2,
                secret_request(&path("hang"), h2),
                Duration::from_millis(50),
            )
            .await;
            let outer = fetch(outer_addr, h2, secret_request(&path("hang-outer"), h2)).await;
            assert_eq!(outer, Some(StatusCode::GATEWAY_TIMEOUT));

            let expect = [
                ("ok", "answered", Some("200")),
                ("slow", "timed_out", Some("503")),
                ("panic", "panicked", Some("500")),
                ("fail", "failed", None),
                ("late", "answered", Some("200")),
                ("hang", "cancelled", None),
                ("hang-outer", "cancelled", None),
            ];
            for (kind, outcome, status) in expect {
                let found = wait_access_lines_of(&path(kind), 1).await;
                assert_eq!(found.len(), 1, "{tag} {kind}: {found:#?}");
                let line = &found[0];
                assert_eq!(
                    line["shared_headers.outcome"], outcome,
                    "{tag} {kind}: {line:#?}"
                );
                assert_eq!(
                    line.get("http.response.status_code").map(String::as_str),
                    status,
                    "{tag} {kind}"
                );
                // What the defaults do print, and the redaction that shows where secrets were.
                assert_eq!(line["user_agent.original"], "curl/8.5.0");
                assert!(
                    line["url.query"].starts_with("page=2&api_key=[redacted]&"),
                    "{line:?}"
                );
                assert_eq!(
                    line["http.request.header.referer"],
                    "https://app.example/p?access_token=[redacted]&x=1"
                );
                assert_eq!(line["server.address"], "api.example");
                if all_headers {
                    let request = &line["shared_headers.request_headers"];
                    for name in [
                        "x-api-key",
                        "authorization",
                        "cookie",
                        "x-tenant-secret",
                        "x-auth-token",
                    ] {
                        assert!(
                            request.contains(&format!("{name}: [redacted]")),
                            "{name} in {request}"
                        );
                    }
                } else {
                    assert!(!line.contains_key("shared_headers.request_headers"));
                    assert!(!line.contains_key("shared_headers.response_headers"));
                }
            }
            if all_headers {
                let ok = &access_lines_of(&path("ok"))[0];
                let sent = &ok["shared_headers.response_headers"];
                for name in ["set-cookie", "x-auth-token", "x-custom"] {
                    assert!(
                        sent.contains(&format!("{name}: [redacted]")),
                        "{name} in {sent}"
                    );
                }
                assert!(sent.contains("content-type: text/plain"), "{sent}");
            }
            // The rejected request: its path is in no other line.
            let rejected = wait_access_lines_of(&path("rejected"), 1).await;
            assert_eq!(rejected.len(), 1, "{rejected:#?}");
            assert_eq!(rejected[0]["shared_headers.outcome"], "rejected");
        }
    }
    // The post-commit activity lines (one per `/late` request), after their tasks wrote.
    let start = Instant::now();
    let late_lines = loop {
        let late: Vec<Fields> = capture()
            .events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| {
                e.get("message")
                    .is_some_and(|m| m == "writes refused after the commit")
                    // This test's own requests (another test of this binary has late writes).
                    && e.get("url.path").is_some_and(|p| {
                        ["/late/h1", "/late/h1-all", "/late/h2", "/late/h2-all"].contains(&p.as_str())
                    })
            })
            .cloned()
            .collect();
        if late.len() >= 4 || start.elapsed() > Duration::from_secs(5) {
            break late;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(late_lines.len(), 4, "{late_lines:#?}");

    // The sweep: no event and no span field anywhere holds a secret.
    let events = lock(&capture().events).clone();
    let spans = lock(&capture().spans).clone();
    assert!(events.len() >= 4 * 8, "{}", events.len());
    for fields in events.iter().chain(spans.iter()) {
        for (name, value) in fields {
            assert!(!value.contains(SECRET), "a secret in {name}: {fields:#?}");
        }
    }
}

// ---- true durations ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_worker_is_logged_with_its_true_duration() {
    capture();
    let layer = SharedHeadersLayer::new()
        .timeout(Duration::from_millis(150))
        .tracing_access_log();
    let service = layer.layer(tower::service_fn(|_req: Request<Incoming>| async {
        // Blocks its worker thread: the deadline commits at 150 ms, the answer leaves when the
        // thread comes back (the commit's bound below, 0.9 s, is 6 times the deadline).
        std::thread::sleep(Duration::from_secs(1));
        Ok::<_, Infallible>(Response::new(Full::<Bytes>::from("late")))
    }));
    let addr = serve(service, false).await;
    let started = Instant::now();
    let req = Request::get("/blocked")
        .header("host", "a")
        .body(Empty::new())
        .unwrap();
    let status = fetch(addr, false, req).await;
    let client_saw = started.elapsed();
    assert_eq!(status, Some(StatusCode::SERVICE_UNAVAILABLE));
    assert!(client_saw >= Duration::from_secs(1), "{client_saw:?}");

    let found = wait_access_lines_of("/blocked", 1).await;
    assert_eq!(found.len(), 1, "{found:#?}");
    let line = &found[0];
    let total: f64 = line["http.server.request.duration"].parse().unwrap();
    let micros = |name: &str| line[name].parse::<u64>().unwrap() as f64 / 1e6;
    let commit = micros("shared_headers.time_to_commit_us");
    let head = micros("shared_headers.time_to_head_us");
    assert!(total >= 1.0, "total {total}");
    assert!(head >= 1.0 && head <= total, "head {head}");
    assert!((0.15..0.9).contains(&commit), "commit {commit}");
    assert_eq!(line["shared_headers.outcome"], "timed_out");
    assert_eq!(line["error.type"], "timeout");
}

// ---- the fields against what was sent ----

async fn user(exchange: Exchange) -> &'static str {
    let _ = exchange
        .annotations()
        .insert("x-user", "ada".parse().unwrap());
    "hello"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_field_matches_what_was_sent() {
    capture();
    for h2 in [false, true] {
        let app = axum::Router::new()
            .route("/users/{id}", axum::routing::any(user))
            .layer(
                SharedHeadersLayer::new()
                    .timeout(Duration::from_secs(5))
                    .peer_address(|ext| ext.get::<Peer>().map(|peer| peer.0))
                    .tracing_access_log(),
            );
        let addr = serve(app, h2).await;
        let (mut client, conn) = connect(addr, h2).await;
        let uri = if h2 {
            "http://api.example:8443/users/42?page=2&sig=abc".to_owned()
        } else {
            "/users/42?page=2&sig=abc".to_owned()
        };
        let mut req = Request::builder()
            .method(http::Method::from_bytes(b"PURGE").unwrap())
            .uri(uri)
            .header("user-agent", "fields-test/1.0");
        if !h2 {
            req = req.header("host", "api.example:8443");
        }
        let res = client.send(req.body(Empty::new()).unwrap()).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let body = res.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, "hello");
        drop(client);
        conn.abort();

        let found = wait_access_lines_of("/users/42", if h2 { 2 } else { 1 }).await;
        let line = found.last().unwrap();
        let expect: &[(&str, &str)] = &[
            ("http.request.method", "_OTHER"),
            ("http.request.method_original", "PURGE"),
            ("url.scheme", "http"),
            ("url.path", "/users/42"),
            ("url.query", "page=2&sig=[redacted]"),
            ("http.route", "/users/{id}"),
            ("server.address", "api.example"),
            ("server.port", "8443"),
            ("client.address", "127.0.0.1"),
            ("network.protocol.version", if h2 { "2" } else { "1.1" }),
            ("user_agent.original", "fields-test/1.0"),
            ("http.response.status_code", "200"),
            ("http.response.body.size", "5"),
            ("shared_headers.outcome", "answered"),
            ("shared_headers.annotations", "x-user: ada"),
            ("level", "INFO"),
            ("target", "shared_headers::access"),
        ];
        for (name, value) in expect {
            assert_eq!(
                line.get(*name).map(String::as_str),
                Some(*value),
                "{name} in {line:#?}"
            );
        }
        assert!(line["client.port"].parse::<u16>().unwrap() > 0);
        let total: f64 = line["http.server.request.duration"].parse().unwrap();
        assert!(total > 0.0 && total < 5.0, "{total}");
        assert!(!line.contains_key("error.type"), "{line:#?}");
        assert!(!line.contains_key("rpc.system"));
    }
}

// ---- panics reach the user's recovery ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_panic_reaches_the_outer_recovery_with_its_own_payload() {
    capture();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let recorder = Arc::clone(&seen);
    let service = ServiceBuilder::new()
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            move |payload: Box<dyn std::any::Any + Send>| {
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .unwrap_or_default();
                recorder.lock().unwrap().push(message);
                let mut res = Response::new(Full::<Bytes>::from("recovered"));
                *res.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
                res
            },
        ))
        .layer(
            SharedHeadersLayer::new()
                .timeout(Duration::from_secs(5))
                .resume_panics(true)
                .tracing_access_log(),
        )
        .service_fn(|_req: Request<Incoming>| async {
            if true {
                panic!("handler bug");
            }
            Ok::<_, Infallible>(Response::new(Full::<Bytes>::from("never")))
        });
    let addr = serve(service, false).await;
    let req = Request::get("/resumed")
        .header("host", "a")
        .body(Empty::new())
        .unwrap();
    let (mut client, conn) = connect(addr, false).await;
    let res = client.send(req).await.unwrap();
    assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        res.into_body().collect().await.unwrap().to_bytes(),
        "recovered"
    );
    drop(client);
    conn.abort();
    // The Kubernetes timeout filter's test: "expected to see a handler panic".
    assert_eq!(*seen.lock().unwrap(), ["handler bug"]);

    let found = wait_access_lines_of("/resumed", 1).await;
    assert_eq!(found.len(), 1, "{found:#?}");
    let line = &found[0];
    assert_eq!(line["shared_headers.outcome"], "panicked");
    assert_eq!(line["exception.message"], "handler bug");
    assert_eq!(line["error.type"], "panic");
    assert_eq!(line["level"], "ERROR");
    // This layer sent nothing: the recovery's 500 is the outer layer's.
    assert!(!line.contains_key("http.response.status_code"), "{line:#?}");
}

// ---- hooks add up ----

/// The log, a metric (`on_commit`), an error reporter (`on_response_end`) and a late-writes
/// hook, in two orders of the builder calls, with a panicking hook among them: every hook runs
/// once per request, in the order added, and the access line is always there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_a_metric_and_a_reporter_all_run_once_in_the_order_added() {
    capture();
    for order in ["log-first", "log-last"] {
        let calls: Arc<Mutex<Vec<&'static str>>> = Arc::default();
        let [metric, reporter, late, panicking] = [0; 4].map(|_| Arc::clone(&calls));
        let metric =
            move |_: &shared_headers::CommitEvent<'_>| metric.lock().unwrap().push("metric");
        let reporter = move |_: &shared_headers::server::ResponseEnd| {
            reporter.lock().unwrap().push("reporter")
        };
        let panicking = move |_: &shared_headers::server::ResponseEnd| {
            panicking.lock().unwrap().push("panicking");
            panic!("handler bug"); // a hook's bug: caught, the next hooks still run
        };
        let late = move |_: &shared_headers::LateWrites| late.lock().unwrap().push("late");
        let layer = SharedHeadersLayer::new().timeout(Duration::from_secs(5));
        let layer = if order == "log-first" {
            layer
                .tracing_access_log()
                .on_commit(metric)
                .on_response_end(panicking)
                .on_response_end(reporter)
                .on_late_writes(late)
        } else {
            layer
                .on_late_writes(late)
                .on_response_end(panicking)
                .on_commit(metric)
                .on_response_end(reporter)
                .tracing_access_log()
        };
        let service = layer.layer(tower::service_fn(sweep_handler));
        let addr = serve(service, false).await;
        let path = format!("/late/hooks-{order}");
        let req = Request::get(&path)
            .header("host", "a")
            .body(Empty::new())
            .unwrap();
        assert_eq!(fetch(addr, false, req).await, Some(StatusCode::OK));
        // The late task writes 20 ms after the answer; its report follows its drop.
        let start = Instant::now();
        while calls.lock().unwrap().len() < 4 && start.elapsed() < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(
            *calls.lock().unwrap(),
            ["metric", "panicking", "reporter", "late"],
            "{order}"
        );
        assert_eq!(
            wait_access_lines_of(&path, 1).await.len(),
            1,
            "{order}: the access line"
        );
    }
}
