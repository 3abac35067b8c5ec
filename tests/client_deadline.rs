//! Outgoing calls inherit the deadline in scope, over loopback, through both client paths
//! (tower over hyper-util's client, and the reqwest middleware).
//!
//! The server records every request it sees and the `grpc-timeout` it carried. `/slow` answers
//! after 2 s, `/401` refuses at once, `/slow401` refuses after 150 ms.
#![cfg(feature = "reqwest")]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::header::AUTHORIZATION;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::Empty;
use hyper::body::{Bytes, Incoming};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use shared_headers::SharedHeaders;
use shared_headers::client::reqwest::PropagateMiddleware;
use shared_headers::client::{
    DefaultHeadersLayer, Merge, PropagateError, PropagateLayer, RefreshRetryLayer, Refresher,
};
use shared_headers::context::{self, RequestScope};
use shared_headers::deadline::{BudgetHeader, Deadline, DeadlineSource};
use tokio::time::timeout;
use tower::{Layer, ServiceBuilder, ServiceExt};

const LIMIT: Duration = Duration::from_secs(20);

/// What the server saw: one entry per request, the `grpc-timeout` it carried, parsed.
type Seen = Arc<Mutex<Vec<(String, Option<Duration>)>>>;

async fn serve() -> (SocketAddr, Seen) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Seen = Arc::default();
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let log = Arc::clone(&log);
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let log = Arc::clone(&log);
                async move {
                    let budget = BudgetHeader::grpc_timeout()
                        .parse_from(req.headers())
                        .map(Result::unwrap);
                    let path = req.uri().path().to_owned();
                    log.lock().unwrap().push((path.clone(), budget));
                    let mut response = Response::new(Empty::<Bytes>::new());
                    match path.as_str() {
                        "/slow" => tokio::time::sleep(Duration::from_secs(2)).await,
                        "/401" => *response.status_mut() = StatusCode::UNAUTHORIZED,
                        "/slow401" => {
                            tokio::time::sleep(Duration::from_millis(150)).await;
                            *response.status_mut() = StatusCode::UNAUTHORIZED;
                        }
                        _ => {}
                    }
                    Ok::<_, Infallible>(response)
                }
            });
            let conn = hyper::server::conn::http1::Builder::new();
            tokio::spawn(conn.serve_connection(TokioIo::new(stream), service));
        }
    });
    (addr, seen)
}

fn hyper_client() -> Client<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

fn get(addr: SocketAddr, path: &str) -> Request<Empty<Bytes>> {
    Request::get(format!("http://{addr}{path}"))
        .body(Empty::new())
        .unwrap()
}

/// Sends through the tower path: `PropagateLayer(grpc-timeout)` over hyper-util's client.
async fn tower_send(
    addr: SocketAddr,
    path: &str,
    margin: Duration,
) -> Result<StatusCode, PropagateError<hyper_util::client::legacy::Error>> {
    let client = PropagateLayer::new(BudgetHeader::grpc_timeout())
        .margin(margin)
        .layer(hyper_client());
    client.oneshot(get(addr, path)).await.map(|r| r.status())
}

/// Sends through the reqwest path; a deadline error comes back as the same `PropagateError`.
async fn reqwest_send(
    addr: SocketAddr,
    path: &str,
    margin: Duration,
) -> Result<StatusCode, PropagateError<String>> {
    let client = reqwest_middleware::ClientBuilder::new(
        reqwest::Client::builder().no_proxy().build().unwrap(),
    )
    .with(PropagateMiddleware::new(BudgetHeader::grpc_timeout()).margin(margin))
    .build();
    match client.get(format!("http://{addr}{path}")).send().await {
        Ok(response) => Ok(response.status()),
        Err(reqwest_middleware::Error::Middleware(e)) => {
            match e.downcast_ref::<PropagateError<Infallible>>() {
                Some(PropagateError::Exhausted(d)) => Err(PropagateError::Exhausted(*d)),
                Some(PropagateError::Elapsed(d)) => Err(PropagateError::Elapsed(*d)),
                _ => Err(PropagateError::Service(e.to_string())),
            }
        }
        Err(e) => Err(PropagateError::Service(e.to_string())),
    }
}

fn budgets(seen: &Seen) -> Vec<Option<Duration>> {
    seen.lock().unwrap().iter().map(|(_, b)| *b).collect()
}

// Seeded bug: `set_budget` returning before it inserts (no header) fails the `Some` bound;
// `budget_for` ignoring the margin fails the upper bound of the margin case.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_budget_arrives_with_the_remaining_time_on_both_paths() {
    let (addr, seen) = serve().await;
    let deadline = Deadline::after(Duration::from_millis(800), DeadlineSource::Server).unwrap();
    let margin = Duration::from_millis(100);
    let sent = Instant::now();
    let tower = timeout(
        LIMIT,
        RequestScope::new()
            .deadline(deadline)
            .scope(tower_send(addr, "/", margin)),
    )
    .await;
    let reqwest = timeout(
        LIMIT,
        RequestScope::new()
            .deadline(deadline)
            .scope(reqwest_send(addr, "/", margin)),
    )
    .await;
    let elapsed = sent.elapsed();
    assert_eq!(tower.unwrap().unwrap(), StatusCode::OK);
    assert_eq!(reqwest.unwrap().unwrap(), StatusCode::OK);
    let budgets = budgets(&seen);
    assert_eq!(budgets.len(), 2);
    for budget in budgets {
        let budget = budget.expect("the budget header arrived");
        // At most what was left minus the margin; at least that minus the time both took.
        assert!(budget <= Duration::from_millis(700), "{budget:?}");
        assert!(
            budget + elapsed >= Duration::from_millis(700),
            "{budget:?} after {elapsed:?}"
        );
    }
    // Outside any deadline: no header, on both paths.
    tower_send(addr, "/", Duration::ZERO).await.unwrap();
    reqwest_send(addr, "/", Duration::ZERO).await.unwrap();
    assert_eq!(&budgets_tail(&seen, 2), &[None, None]);
}

fn budgets_tail(seen: &Seen, n: usize) -> Vec<Option<Duration>> {
    let all = budgets(seen);
    all[all.len() - n..].to_vec()
}

// Seeded bug: `budget_for` returning `Some` for a zero budget sends the request (the server
// sees it) and the call does not fail with `Exhausted`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exhausted_budget_sends_nothing_on_both_paths() {
    let (addr, seen) = serve().await;
    let spent = Deadline::at(Instant::now(), DeadlineSource::Caller);
    let tower = RequestScope::new()
        .deadline(spent)
        .scope(tower_send(addr, "/", Duration::ZERO))
        .await;
    let reqwest = RequestScope::new()
        .deadline(spent)
        .scope(reqwest_send(addr, "/", Duration::ZERO))
        .await;
    assert!(matches!(tower, Err(PropagateError::Exhausted(d)) if d == spent));
    assert_eq!(reqwest.unwrap_err(), PropagateError::Exhausted(spent));
    // Time left, but less than the margin: nothing either.
    let short = Deadline::after(Duration::from_millis(20), DeadlineSource::Server).unwrap();
    let margin = Duration::from_millis(500);
    let tower = RequestScope::new()
        .deadline(short)
        .scope(tower_send(addr, "/", margin))
        .await;
    let reqwest = RequestScope::new()
        .deadline(short)
        .scope(reqwest_send(addr, "/", margin))
        .await;
    assert!(matches!(tower, Err(PropagateError::Exhausted(d)) if d == short));
    assert_eq!(reqwest.unwrap_err(), PropagateError::Exhausted(short));
    assert!(budgets(&seen).is_empty(), "the server saw no request");
}

// Seeded bug: `PropagateFuture` not polling its sleep (or the middleware not racing the call
// against its cut) waits the 2 s of `/slow` and fails the bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_next_hop_is_cut_at_the_deadline_on_both_paths() {
    let (addr, _) = serve().await;
    for path in ["tower", "reqwest"] {
        let deadline = Deadline::after(Duration::from_millis(150), DeadlineSource::Server).unwrap();
        let started = Instant::now();
        let error = if path == "tower" {
            let r = timeout(
                LIMIT,
                RequestScope::new().deadline(deadline).scope(tower_send(
                    addr,
                    "/slow",
                    Duration::ZERO,
                )),
            );
            r.await.unwrap().map_err(|e| e.deadline()).unwrap_err()
        } else {
            let r = timeout(
                LIMIT,
                RequestScope::new().deadline(deadline).scope(reqwest_send(
                    addr,
                    "/slow",
                    Duration::ZERO,
                )),
            );
            r.await.unwrap().map_err(|e| e.deadline()).unwrap_err()
        };
        let took = started.elapsed();
        assert_eq!(error, Some(deadline), "{path}");
        assert!(took >= Duration::from_millis(140), "{path}: {took:?}");
        assert!(took < Duration::from_secs(1), "{path}: cut late, {took:?}");
    }
}

// Seeded bug: `carry` capturing `None` instead of `Deadline::current()` fails the first
// assertion; a scope that leaked into other tasks (a global instead of a thread-local restored
// after each poll) fails the second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_spawned_with_carry_keeps_the_deadline_and_a_plain_one_does_not() {
    let (addr, seen) = serve().await;
    let deadline = Deadline::after(Duration::from_secs(5), DeadlineSource::Server).unwrap();
    let (carried, plain) = RequestScope::new()
        .deadline(deadline)
        .scope(async move {
            let carried =
                tokio::spawn(context::carry(tower_send(addr, "/carried", Duration::ZERO)));
            let plain = tokio::spawn(tower_send(addr, "/plain", Duration::ZERO));
            (carried.await.unwrap(), plain.await.unwrap())
        })
        .await;
    carried.unwrap();
    plain.unwrap();
    let seen = seen.lock().unwrap().clone();
    let budget = |path: &str| seen.iter().find(|(p, _)| p == path).unwrap().1;
    let carried = budget("/carried").expect("the carried task sent the budget");
    assert!(carried <= Duration::from_secs(5) && carried > Duration::from_secs(3));
    assert_eq!(budget("/plain"), None, "a plain spawn has no deadline");
}

/// The retry stack: `RefreshRetry` over `DefaultHeaders` over `PropagateLayer` over hyper.
/// Returns the status and how many refreshes ran.
async fn retry_send(addr: SocketAddr, path: &str, refresh_takes: Duration) -> (StatusCode, u64) {
    let defaults = SharedHeaders::new();
    defaults
        .insert(AUTHORIZATION, "Bearer old".parse().unwrap())
        .unwrap();
    let refresher = Refresher::<Infallible>::new(defaults.clone());
    let refresh = move || async move {
        tokio::time::sleep(refresh_takes).await;
        let mut new = HeaderMap::new();
        new.insert(AUTHORIZATION, "Bearer new".parse().unwrap());
        Ok(new)
    };
    let client = ServiceBuilder::new()
        .layer(RefreshRetryLayer::new(refresher.clone(), refresh))
        .layer(DefaultHeadersLayer::new(defaults).merge(AUTHORIZATION, Merge::Override))
        .layer(PropagateLayer::new(BudgetHeader::grpc_timeout()))
        .service(hyper_client());
    let response = timeout(LIMIT, client.oneshot(get(addr, path)))
        .await
        .unwrap()
        .unwrap();
    (response.status(), refresher.performed())
}

// Seeded bug: dropping the two deadline checks in `RefreshRetryFuture::poll` sends a second request
// in both cases (the server sees 2 instead of 1) and, in the second, runs a refresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_retry_layer_stops_at_the_deadline() {
    let (addr, seen) = serve().await;
    // Without a deadline: refused, refreshed, retried (the control).
    let (status, refreshed) = retry_send(addr, "/401", Duration::from_millis(10)).await;
    assert_eq!((status, refreshed), (StatusCode::UNAUTHORIZED, 1));
    assert_eq!(
        budgets(&seen).len(),
        2,
        "without a deadline the retry is sent"
    );

    // The deadline passes during the refresh: the refresh finishes, the retry is not sent,
    // and the refused answer is returned.
    seen.lock().unwrap().clear();
    let deadline = Deadline::after(Duration::from_millis(100), DeadlineSource::Server).unwrap();
    let (status, refreshed) = RequestScope::new()
        .deadline(deadline)
        .scope(retry_send(addr, "/401", Duration::from_millis(200)))
        .await;
    assert_eq!((status, refreshed), (StatusCode::UNAUTHORIZED, 1));
    assert_eq!(budgets(&seen).len(), 1, "no retry past the deadline");

    // The refusal comes after the deadline: no refresh, no retry. (The deadline is the
    // request's extension here, and the inner `PropagateLayer` would cut the call: the stack
    // is the retry layer over the bare client.)
    seen.lock().unwrap().clear();
    let defaults = SharedHeaders::new();
    let refresher = Refresher::<Infallible>::new(defaults.clone());
    let client = ServiceBuilder::new()
        .layer(RefreshRetryLayer::new(refresher.clone(), || async {
            Ok(HeaderMap::new())
        }))
        .layer(DefaultHeadersLayer::new(defaults))
        .service(hyper_client());
    let mut request = get(addr, "/slow401");
    let deadline = Deadline::after(Duration::from_millis(50), DeadlineSource::Caller).unwrap();
    request.extensions_mut().insert(deadline);
    let response = timeout(LIMIT, client.oneshot(request))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        refresher.performed(),
        0,
        "no refresh once the deadline passed"
    );
    assert_eq!(budgets(&seen).len(), 1);
}

/// The reqwest path of the retry: `DefaultHeadersMiddleware` then `PropagateMiddleware`.
/// Returns the status and how many refreshes ran.
async fn reqwest_retry_send(
    addr: SocketAddr,
    path: &str,
    refresh_takes: Duration,
) -> (StatusCode, u64) {
    use shared_headers::client::reqwest::DefaultHeadersMiddleware;
    let defaults = SharedHeaders::new();
    defaults
        .insert(AUTHORIZATION, "Bearer old".parse().unwrap())
        .unwrap();
    let refresher = Refresher::<std::io::Error>::new(defaults.clone());
    let refresh = move || async move {
        tokio::time::sleep(refresh_takes).await;
        let mut new = HeaderMap::new();
        new.insert(AUTHORIZATION, "Bearer new".parse().unwrap());
        Ok(new)
    };
    let layer = DefaultHeadersLayer::new(defaults).merge(AUTHORIZATION, Merge::Override);
    let client = reqwest_middleware::ClientBuilder::new(
        reqwest::Client::builder().no_proxy().build().unwrap(),
    )
    .with(DefaultHeadersMiddleware::new(
        layer,
        refresher.clone(),
        refresh,
    ))
    .with(PropagateMiddleware::new(BudgetHeader::grpc_timeout()))
    .build();
    let send = client.get(format!("http://{addr}{path}")).send();
    let response = timeout(LIMIT, send).await.unwrap().unwrap();
    (response.status(), refresher.performed())
}

// Seeded bug: dropping the deadline check after the refresh in
// `DefaultHeadersMiddleware::handle` sends the retry (the server sees 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reqwest_retry_stops_at_the_deadline_too() {
    let (addr, seen) = serve().await;
    let (status, refreshed) = reqwest_retry_send(addr, "/401", Duration::from_millis(10)).await;
    assert_eq!((status, refreshed), (StatusCode::UNAUTHORIZED, 1));
    assert_eq!(
        budgets(&seen).len(),
        2,
        "without a deadline the retry is sent"
    );

    seen.lock().unwrap().clear();
    let deadline = Deadline::after(Duration::from_millis(100), DeadlineSource::Server).unwrap();
    let (status, refreshed) = RequestScope::new()
        .deadline(deadline)
        .scope(reqwest_retry_send(addr, "/401", Duration::from_millis(200)))
        .await;
    assert_eq!((status, refreshed), (StatusCode::UNAUTHORIZED, 1));
    assert_eq!(budgets(&seen).len(), 1, "no retry past the deadline");
}
