//! The request's context travels, over loopback: one client piece (`PropagateLayer` for tower
//! clients, `PropagateMiddleware` for reqwest) sends the request id, the captured headers and
//! what is left of the deadline on every outgoing call made in the request's scope; the
//! default margin lets the edge relay the answer from below; a real tonic `Channel` wrapped in
//! the layer carries `grpc-timeout` and the metadata to a tonic server behind the server layer.
//!
//! The context is made here with `Propagation::capture` and put in scope with
//! `RequestScope::scope` (what the server layer's `propagate` does for each request).
//! Every server binds 127.0.0.1:0; every call is bounded by `LIMIT`.
#![cfg(all(feature = "server", feature = "reqwest"))]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::uri::PathAndQuery;
use http::{HeaderMap, HeaderName, Request, Response, StatusCode};
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use shared_headers::client::reqwest::PropagateMiddleware;
use shared_headers::client::{PropagateError, PropagateLayer};
use shared_headers::context::{self, Propagation, PropagationCounts, RequestContext, RequestScope};
use shared_headers::deadline::{BudgetHeader, Deadline, DeadlineSource};
use shared_headers::server::SharedHeadersLayer;
use shared_headers::{Committed, Outcome};
use tokio::time::timeout;
use tonic::{Code, Status};
use tower::{Layer, ServiceBuilder, ServiceExt};

#[path = "support/raw_codec.rs"]
mod raw_codec;
use raw_codec::Raw;

const LIMIT: Duration = Duration::from_secs(20);
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// The context of an incoming request with id `id`, a W3C `traceparent` and an `x-tenant`.
fn context(id: &str) -> RequestContext {
    let mut incoming = HeaderMap::new();
    incoming.insert("x-request-id", id.parse().unwrap());
    incoming.insert("traceparent", TRACEPARENT.parse().unwrap());
    incoming.insert("x-tenant", "acme".parse().unwrap());
    let propagation = Propagation::new()
        .request_id()
        .w3c()
        .header(HeaderName::from_static("x-tenant"))
        .unwrap();
    let (context, counts) = propagation.capture(&incoming);
    assert_eq!(counts, PropagationCounts::default());
    context.unwrap()
}

// ---- an HTTP/1 server that records what it was sent ----

type Seen = Arc<Mutex<Vec<(String, HeaderMap)>>>;

async fn echo() -> (SocketAddr, Seen) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Seen = Arc::default();
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let log = Arc::clone(&log);
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let entry = (req.uri().path().to_owned(), req.headers().clone());
                log.lock().unwrap().push(entry);
                async { Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new())) }
            });
            let conn = hyper::server::conn::http1::Builder::new();
            tokio::spawn(conn.serve_connection(TokioIo::new(stream), service));
        }
    });
    (addr, seen)
}

/// The headers of the one request to `path`.
fn sent_to(seen: &Seen, path: &str) -> HeaderMap {
    let seen = seen.lock().unwrap();
    let mut found = seen.iter().filter(|(p, _)| p == path);
    let (_, headers) = found
        .next()
        .unwrap_or_else(|| panic!("no request to {path}"));
    assert!(found.next().is_none(), "two requests to {path}");
    headers.clone()
}

/// Asserts that `headers` carry the context of `id` (each name once) and a budget in
/// `(low, high]`.
fn assert_carries(headers: &HeaderMap, id: &str, low: Duration, high: Duration) {
    for (name, value) in [
        ("x-request-id", id),
        ("traceparent", TRACEPARENT),
        ("x-tenant", "acme"),
    ] {
        let values: Vec<_> = headers.get_all(name).iter().collect();
        assert_eq!(values, [value], "{name} in {headers:?}");
    }
    let budget = BudgetHeader::grpc_timeout()
        .parse_from(headers)
        .expect("the budget header arrived")
        .unwrap();
    assert!(budget > low && budget <= high, "{budget:?}");
}

fn assert_carries_nothing(headers: &HeaderMap) {
    for name in ["x-request-id", "traceparent", "x-tenant", "grpc-timeout"] {
        assert!(!headers.contains_key(name), "{name} in {headers:?}");
    }
}

fn get(addr: SocketAddr, path: &str) -> Request<Empty<Bytes>> {
    Request::get(format!("http://{addr}{path}"))
        .body(Empty::new())
        .unwrap()
}

fn hyper_client() -> Client<HttpConnector, Empty<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

/// Sends through the tower path: `PropagateLayer(grpc-timeout)` over hyper-util's client.
async fn tower_send(request: Request<Empty<Bytes>>) -> StatusCode {
    let client = PropagateLayer::new(BudgetHeader::grpc_timeout()).layer(hyper_client());
    let response = timeout(LIMIT, client.oneshot(request)).await.unwrap();
    response.unwrap().status()
}

fn reqwest_client() -> reqwest_middleware::ClientWithMiddleware {
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    reqwest_middleware::ClientBuilder::new(client)
        .with(PropagateMiddleware::new(BudgetHeader::grpc_timeout()))
        .build()
}

/// Sends through the reqwest path.
async fn reqwest_send(request: reqwest_middleware::RequestBuilder) -> StatusCode {
    let response = timeout(LIMIT, request.send()).await.unwrap();
    response.unwrap().status()
}

// Seeded bugs: `Propagate::call` or `PropagateMiddleware::handle` not applying the context
// fails the first loop (no `x-request-id`); applying it with `insert` instead of `apply_to`
// replaces the request's own id (`own-1`, `own-2`); applying it before the budget does not
// matter here (the context has no budget header).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_requests_scope_the_context_and_the_budget_travel_on_both_paths() {
    let (addr, seen) = echo().await;
    let reqwest = reqwest_client();
    let deadline = Deadline::after(Duration::from_secs(5), DeadlineSource::Server).unwrap();
    let url = |path: &str| format!("http://{addr}{path}");
    let calls = async {
        assert_eq!(tower_send(get(addr, "/tower")).await, StatusCode::OK);
        reqwest_send(reqwest.get(url("/reqwest"))).await;
        // A request that sets its own id keeps it; the rest of the context still travels.
        let mut own = get(addr, "/tower-own");
        own.headers_mut()
            .insert("x-request-id", "own-1".parse().unwrap());
        tower_send(own).await;
        reqwest_send(
            reqwest
                .get(url("/reqwest-own"))
                .header("x-request-id", "own-2"),
        )
        .await;
    };
    RequestScope::new()
        .deadline(deadline)
        .context(context("edge-1"))
        .scope(calls)
        .await;

    // What was left (5 s), less the default margin (100 ms), less the time the calls took.
    let (low, high) = (Duration::from_secs(3), Duration::from_millis(4900));
    for path in ["/tower", "/reqwest"] {
        assert_carries(&sent_to(&seen, path), "edge-1", low, high);
    }
    assert_carries(&sent_to(&seen, "/tower-own"), "own-1", low, high);
    assert_carries(&sent_to(&seen, "/reqwest-own"), "own-2", low, high);

    // Outside any request: nothing is added, on both paths.
    tower_send(get(addr, "/tower-none")).await;
    reqwest_send(reqwest.get(url("/reqwest-none"))).await;
    assert_carries_nothing(&sent_to(&seen, "/tower-none"));
    assert_carries_nothing(&sent_to(&seen, "/reqwest-none"));

    // A context alone (no deadline): its headers, no budget header.
    let calls = async {
        tower_send(get(addr, "/tower-no-deadline")).await;
        reqwest_send(reqwest.get(url("/reqwest-no-deadline"))).await;
    };
    RequestScope::new()
        .context(context("no-deadline"))
        .scope(calls)
        .await;
    for path in ["/tower-no-deadline", "/reqwest-no-deadline"] {
        let headers = sent_to(&seen, path);
        assert_eq!(headers["x-request-id"], "no-deadline");
        assert_eq!(headers["traceparent"], TRACEPARENT);
        assert!(!headers.contains_key("grpc-timeout"), "{headers:?}");
    }
}

// Seeded bugs: reading only `RequestContext::current()` sends `in-scope` on both paths; a
// fast path that skips the context when the extensions hold only a deadline sends no id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_context_in_the_extensions_wins_over_the_one_in_scope() {
    let (addr, seen) = echo().await;
    let reqwest = reqwest_client();
    let mut request = get(addr, "/tower");
    request.extensions_mut().insert(context("from-extension"));
    let reqwest_request = reqwest
        .get(format!("http://{addr}/reqwest"))
        .with_extension(context("from-extension"));
    let calls = async {
        tower_send(request).await;
        reqwest_send(reqwest_request).await;
    };
    RequestScope::new()
        .context(context("in-scope"))
        .scope(calls)
        .await;
    for path in ["/tower", "/reqwest"] {
        assert_eq!(sent_to(&seen, path)["x-request-id"], "from-extension");
    }

    // A deadline in the extensions and the context in scope: both travel.
    let deadline = Deadline::after(Duration::from_secs(5), DeadlineSource::Caller).unwrap();
    let mut request = get(addr, "/tower-deadline");
    request.extensions_mut().insert(deadline);
    let reqwest_request = reqwest
        .get(format!("http://{addr}/reqwest-deadline"))
        .with_extension(deadline);
    let calls = async {
        tower_send(request).await;
        reqwest_send(reqwest_request).await;
    };
    RequestScope::new()
        .context(context("in-scope"))
        .scope(calls)
        .await;
    let (low, high) = (Duration::from_secs(3), Duration::from_millis(4900));
    for path in ["/tower-deadline", "/reqwest-deadline"] {
        assert_carries(&sent_to(&seen, path), "in-scope", low, high);
    }
}

// Seeded bug: `context::carry` capturing no context (or the layer reading a global instead of
// the thread's scope) fails the carried (or the plain) assertions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_spawned_with_carry_sends_the_context_and_a_plain_spawn_sends_none() {
    let (addr, seen) = echo().await;
    let reqwest = reqwest_client();
    let url = move |path: &str| format!("http://{addr}{path}");
    let deadline = Deadline::after(Duration::from_secs(5), DeadlineSource::Server).unwrap();
    let calls = async {
        let tasks = [
            tokio::spawn(context::carry(tower_send(get(addr, "/tower-carried")))),
            tokio::spawn(tower_send(get(addr, "/tower-plain"))),
            tokio::spawn(context::carry(reqwest_send(
                reqwest.get(url("/reqwest-carried")),
            ))),
            tokio::spawn(reqwest_send(reqwest.get(url("/reqwest-plain")))),
        ];
        for task in tasks {
            assert_eq!(task.await.unwrap(), StatusCode::OK);
        }
    };
    RequestScope::new()
        .deadline(deadline)
        .context(context("carried-1"))
        .scope(calls)
        .await;
    let (low, high) = (Duration::from_secs(3), Duration::from_millis(4900));
    for path in ["/tower-carried", "/reqwest-carried"] {
        assert_carries(&sent_to(&seen, path), "carried-1", low, high);
    }
    for path in ["/tower-plain", "/reqwest-plain"] {
        assert_carries_nothing(&sent_to(&seen, path));
    }
}

// ---- the margin: the service below times out first, the edge relays its answer ----

type Commits = Arc<Mutex<Vec<(&'static str, Committed)>>>;

/// Serves `service` over HTTP/1 (`http2: false`) or HTTP/2 on 127.0.0.1:0.
async fn serve<S, B>(service: S, http2: bool) -> SocketAddr
where
    S: tower::Service<Request<Incoming>, Response = Response<B>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let service = TowerToHyperService::new(service.clone());
            let io = TokioIo::new(stream);
            if http2 {
                let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
                tokio::spawn(async move { conn.serve_connection(io, service).await });
            } else {
                let conn = hyper::server::conn::http1::Builder::new();
                tokio::spawn(conn.serve_connection(io, service));
            }
        }
    });
    addr
}

/// A server layer that records each commit under `name`.
fn recorded(name: &'static str, commits: &Commits) -> SharedHeadersLayer {
    let commits = Arc::clone(commits);
    SharedHeadersLayer::new().on_commit(move |c| {
        commits.lock().unwrap().push((name, c.committed().clone()));
    })
}

/// Waits (bounded) for the commits of `names` and returns them in that order.
async fn commits_of(commits: &Commits, names: [&str; 2]) -> [Committed; 2] {
    let started = Instant::now();
    loop {
        {
            let commits = commits.lock().unwrap();
            let find = |name| commits.iter().find(|(n, _)| *n == name).map(|(_, c)| c);
            if let (Some(a), Some(b)) = (find(names[0]), find(names[1])) {
                return [a.clone(), b.clone()];
            }
        }
        assert!(started.elapsed() < LIMIT, "no commits of {names:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

const EDGE_DEADLINE: Duration = Duration::from_secs(1);
/// The edge's answer when its own client cut the call (not the answer from below).
const CUT: &str = "x-cut";

fn envoy() -> BudgetHeader {
    BudgetHeader::envoy_expected_rq_timeout_ms()
}

// With no margin, the service below and the edge would time out at the same instant: the
// edge's line would say `timed out` (its own 503) or its client's cut. Seeded bugs: a default
// margin of zero, or cutting the call at the budget instead of halfway through the margin
// (the cut races the answer from below and wins: `x-cut`), fail the status assertions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_default_margin_the_edge_relays_the_504_from_below() {
    let commits = Commits::default();

    // Below: takes the caller's budget, answers 504 when it is spent, never answers itself.
    let lower = tower::service_fn(|_: Request<Incoming>| async {
        std::future::pending::<()>().await;
        Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
    });
    let lower_layer = recorded("lower", &commits)
        .timeout(Duration::from_secs(10))
        .timeout_status(StatusCode::GATEWAY_TIMEOUT)
        .caller_budget(envoy());
    let lower_addr = serve(lower_layer.layer(lower), false).await;

    // The edge: a 1 s deadline of its own (answered 503 if it fires), calling below through
    // the layer with the default margin, relaying the status it gets.
    let out = PropagateLayer::new(envoy()).layer(hyper_client());
    let edge = tower::service_fn(move |_: Request<Incoming>| {
        let out = out.clone();
        async move {
            let mut response = Response::new(Empty::<Bytes>::new());
            match out.oneshot(get(lower_addr, "/")).await {
                Ok(answer) => *response.status_mut() = answer.status(),
                Err(e) => {
                    *response.status_mut() = StatusCode::BAD_GATEWAY;
                    let cut =
                        matches!(e, PropagateError::Elapsed(_) | PropagateError::Exhausted(_));
                    let value = if cut { "deadline" } else { "service" };
                    response.headers_mut().insert(CUT, value.parse().unwrap());
                }
            }
            Ok::<_, Infallible>(response)
        }
    });
    let edge_layer = recorded("edge", &commits).timeout(EDGE_DEADLINE);
    let edge_addr = serve(edge_layer.layer(edge), false).await;

    let started = Instant::now();
    let answer = timeout(LIMIT, hyper_client().request(get(edge_addr, "/")))
        .await
        .unwrap()
        .unwrap();
    let took = started.elapsed();
    assert_eq!(answer.status(), StatusCode::GATEWAY_TIMEOUT, "{answer:?}");
    assert!(!answer.headers().contains_key(CUT), "{answer:?}");
    // Before its deadline: the edge's commit says `Answered` (its own 503 otherwise). The
    // client's clock also counts the connection and the way back, so it only shows that the
    // answer came (the expected ~0.9 s is too close to the 1 s deadline for a bound).
    assert!(took < 5 * EDGE_DEADLINE, "{took:?}");

    let [lower, edge] = commits_of(&commits, ["lower", "edge"]).await;
    // Below: its deadline was the caller's, what the edge had left less 100 ms.
    assert_eq!(lower.outcome(), Outcome::TimedOut);
    assert_eq!(lower.deadline().unwrap().source(), DeadlineSource::Caller);
    let budget = lower.budget().unwrap();
    assert!(budget <= Duration::from_millis(900), "{budget:?}");
    assert!(budget > Duration::from_millis(600), "{budget:?}");
    // The edge answered with what came from below; its own deadline did not fire.
    assert_eq!(edge.outcome(), Outcome::Answered);
    assert_eq!(edge.committed_status(), Some(StatusCode::GATEWAY_TIMEOUT));
    assert_eq!(edge.deadline().unwrap().source(), DeadlineSource::Server);
}

// ---- gRPC: a raw-bytes codec, tonic's server and a tonic `Channel` ----

/// What the tonic server saw: the request's headers (before tonic), and the deadline its
/// handler read.
#[derive(Default)]
struct GrpcSeen {
    headers: Vec<HeaderMap>,
    deadlines: Vec<Option<(Deadline, Duration)>>,
}

/// A tonic server behind `layer` over HTTP/2: `/test.Echo/Echo` answers its message,
/// `/test.Echo/Hang` never answers.
async fn grpc_server(layer: SharedHeadersLayer, seen: Arc<Mutex<GrpcSeen>>) -> SocketAddr {
    let grpc = tower::service_fn(move |req: Request<Incoming>| {
        let seen = Arc::clone(&seen);
        seen.lock().unwrap().headers.push(req.headers().clone());
        async move {
            let hang = req.uri().path() == "/test.Echo/Hang";
            let method = tower::service_fn(move |req: tonic::Request<Bytes>| {
                let seen = Arc::clone(&seen);
                async move {
                    // The handler reads its deadline: in scope while the layer polls it.
                    let deadline = Deadline::current().map(|d| (d, d.remaining()));
                    seen.lock().unwrap().deadlines.push(deadline);
                    if hang {
                        std::future::pending::<()>().await;
                    }
                    Ok::<_, Status>(tonic::Response::new(req.into_inner()))
                }
            });
            let response = tonic::server::Grpc::new(Raw).unary(method, req).await;
            Ok::<_, Infallible>(response)
        }
    });
    serve(layer.layer(grpc), true).await
}

async fn channel(addr: SocketAddr) -> tonic::transport::Channel {
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{addr}")).unwrap();
    timeout(LIMIT, endpoint.connect()).await.unwrap().unwrap()
}

/// hyper-util's client over HTTP/2: a channel with no timer of its own (tonic's `Channel`
/// enforces the `grpc-timeout` it sends).
fn hyper_channel() -> Client<HttpConnector, tonic::body::Body> {
    Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http()
}

/// One unary call of `method` to `addr` through `PropagateLayer(grpc-timeout)` over
/// `channel` (tonic's `Channel` or hyper-util's client).
async fn grpc_call<C, B>(
    channel: C,
    addr: SocketAddr,
    method: &'static str,
) -> Result<Bytes, Status>
where
    C: tower::Service<Request<tonic::body::Body>, Response = Response<B>> + Send,
    C::Error: std::error::Error + Send + Sync + 'static,
    C::Future: Send,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let client = ServiceBuilder::new()
        .layer(PropagateLayer::new(BudgetHeader::grpc_timeout()))
        .service(channel);
    let origin = format!("http://{addr}").parse().unwrap();
    let mut grpc = tonic::client::Grpc::with_origin(client, origin);
    let call = async {
        grpc.ready()
            .await
            .map_err(|e| Status::unknown(e.to_string()))?;
        let request = tonic::Request::new(Bytes::from_static(b"ping"));
        let path = PathAndQuery::from_static(method);
        grpc.unary(request, path, Raw).await
    };
    let response = timeout(LIMIT, call)
        .await
        .expect("the call ended in time")?;
    Ok(response.into_inner())
}

// Seeded bugs: the layer not reaching the tonic request (a tonic client that bypassed tower
// services) fails the `grpc-timeout` and `x-request-id` assertions; the server layer not
// putting the caller's deadline in scope fails the handler's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tonic_channel_in_the_layer_sends_the_budget_and_the_metadata() {
    let seen = Arc::new(Mutex::new(GrpcSeen::default()));
    let layer = SharedHeadersLayer::new().caller_budget(BudgetHeader::grpc_timeout());
    let addr = grpc_server(layer, Arc::clone(&seen)).await;
    let channel = channel(addr).await;

    let deadline = Deadline::after(Duration::from_secs(2), DeadlineSource::Server).unwrap();
    let call = grpc_call(channel.clone(), addr, "/test.Echo/Echo");
    let answer = RequestScope::new()
        .deadline(deadline)
        .context(context("grpc-1"))
        .scope(call)
        .await
        .unwrap();
    assert_eq!(&answer[..], b"ping");

    {
        let guard = seen.lock().unwrap();
        assert_eq!(guard.headers.len(), 1);
        // 2 s less the default margin (100 ms), less the time to the call.
        assert_carries(
            &guard.headers[0],
            "grpc-1",
            Duration::from_millis(1400),
            Duration::from_millis(1900),
        );
        let sent = BudgetHeader::grpc_timeout()
            .parse_from(&guard.headers[0])
            .unwrap()
            .unwrap();
        // The handler's deadline is the caller's, at most what was sent.
        let (handler_deadline, left) = guard.deadlines[0].expect("the handler has a deadline");
        assert_eq!(handler_deadline.source(), DeadlineSource::Caller);
        assert!(left <= sent, "{left:?} > {sent:?}");
        assert!(left > Duration::from_millis(1000), "{left:?}");
    }

    // Outside any request: the same channel sends neither, and the handler has no deadline.
    grpc_call(channel, addr, "/test.Echo/Echo").await.unwrap();
    let guard = seen.lock().unwrap();
    assert_carries_nothing(&guard.headers[1]);
    assert_eq!(guard.deadlines[1], None);
}

/// The gRPC relay: below, a tonic server that never answers, behind the layer with the
/// caller's `grpc-timeout`; the edge (an HTTP server with a 1 s deadline) calls it through the
/// layer with the default margin, over hyper-util's client (`tonic: false`) or a tonic
/// `Channel`, and answers with the gRPC status it got (`x-grpc-status`). Returns the edge's
/// answer and how long it took, after checking the commits: below timed out with the caller's
/// deadline (about 900 ms) and its handler read it; the edge answered, its own deadline did
/// not fire.
async fn grpc_relay(tonic: bool) -> (Response<Incoming>, Duration) {
    let commits = Commits::default();
    let seen = Arc::new(Mutex::new(GrpcSeen::default()));
    let lower_layer = recorded("lower", &commits).caller_budget(BudgetHeader::grpc_timeout());
    let lower_addr = grpc_server(lower_layer, Arc::clone(&seen)).await;
    let channel = if tonic {
        Some(channel(lower_addr).await)
    } else {
        None
    };

    let edge = tower::service_fn(move |_: Request<Incoming>| {
        let channel = channel.clone();
        async move {
            let mut response = Response::new(Empty::<Bytes>::new());
            let result = match channel {
                Some(channel) => grpc_call(channel, lower_addr, "/test.Echo/Hang").await,
                None => grpc_call(hyper_channel(), lower_addr, "/test.Echo/Hang").await,
            };
            if let Err(status) = result {
                *response.status_mut() = match status.code() {
                    Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
                    _ => StatusCode::BAD_GATEWAY,
                };
                let code = (status.code() as i32).to_string();
                let headers = response.headers_mut();
                headers.insert("x-grpc-status", code.parse().unwrap());
                headers.insert("x-grpc-message", status.message().parse().unwrap());
            }
            Ok::<_, Infallible>(response)
        }
    });
    let edge_layer = recorded("edge", &commits).timeout(EDGE_DEADLINE);
    let edge_addr = serve(edge_layer.layer(edge), false).await;

    let started = Instant::now();
    let answer = timeout(LIMIT, hyper_client().request(get(edge_addr, "/")))
        .await
        .unwrap()
        .unwrap();
    let took = started.elapsed();

    let [lower, edge] = commits_of(&commits, ["lower", "edge"]).await;
    if tonic {
        // Two timers of one budget: the service below's, counted from the request's arrival,
        // and the tonic `Channel`'s, counted from the send (earlier by the way there), whose
        // cancel reaches below about when its own timer fires: whichever came first is the
        // commit below (`Cancelled` in about 1 run in 20 alone on a loaded machine).
        assert!(
            matches!(lower.outcome(), Outcome::TimedOut | Outcome::Cancelled),
            "{:?}",
            lower.outcome()
        );
    } else {
        assert_eq!(lower.outcome(), Outcome::TimedOut);
    }
    assert_eq!(lower.deadline().unwrap().source(), DeadlineSource::Caller);
    let budget = lower.budget().unwrap();
    assert!(budget <= Duration::from_millis(900), "{budget:?}");
    assert!(budget > Duration::from_millis(600), "{budget:?}");
    assert_eq!(edge.outcome(), Outcome::Answered, "{answer:?}");
    assert_eq!(edge.committed_status(), answer.status().into());
    // The handler below read the caller's deadline.
    let (deadline, _) = seen.lock().unwrap().deadlines[0].expect("a deadline below");
    assert_eq!(deadline.source(), DeadlineSource::Caller);
    (answer, took)
}

// Seeded bugs: as for the HTTP relay (a zero default margin, or a cut at the budget: the
// cut races the answer from below, and the edge answers `Unknown` or its own 503).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_default_margin_the_edge_relays_deadline_exceeded_from_a_tonic_service() {
    let (answer, took) = grpc_relay(false).await;
    assert_eq!(answer.status(), StatusCode::GATEWAY_TIMEOUT, "{answer:?}");
    // From below: the server layer's DEADLINE_EXCEEDED, in its words.
    assert_eq!(answer.headers()["x-grpc-status"], "4", "{answer:?}");
    assert_eq!(answer.headers()["x-grpc-message"], "deadline exceeded");
    // Before its deadline: the edge's commit says `Answered` (its own 503 otherwise). The
    // client's clock also counts the connection and the way back, so it only shows that the
    // answer came (the expected ~0.9 s is too close to the 1 s deadline for a bound).
    assert!(took < 5 * EDGE_DEADLINE, "{took:?}");
}

// tonic's `Channel` enforces the `grpc-timeout` it sends: its own timer fires at the budget,
// counted from the send, about when the answer from below (counted from its arrival) comes
// back, and tonic would report it as `Cancelled` ("Timeout expired"). The layer reports an error
// that comes once the budget it sent is spent as its own `Elapsed`, which tonic reads as
// DEADLINE_EXCEEDED (feature `tonic`): the edge relays DEADLINE_EXCEEDED whichever timer won,
// before its own deadline. Seeded bug: `PropagateFuture` passing every inner error on as
// `Service` fails the status assertion in most runs (tonic's `Cancelled`).
#[cfg(feature = "tonic")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_a_tonic_channel_the_edge_relays_deadline_exceeded_before_its_deadline() {
    let (answer, took) = grpc_relay(true).await;
    assert_eq!(answer.status(), StatusCode::GATEWAY_TIMEOUT, "{answer:?}");
    assert_eq!(answer.headers()["x-grpc-status"], "4", "{answer:?}");
    assert_eq!(answer.headers()["x-grpc-message"], "deadline exceeded");
    // Before its deadline: the edge relayed the answer (its own deadline's answer is a 503).
    // The client's clock also counts the connection and the way back, so it only shows that
    // the answer came (the expected ~0.9 s is too close to the 1 s deadline for a bound).
    assert!(took < 5 * EDGE_DEADLINE, "{took:?}");
}
