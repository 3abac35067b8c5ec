//! The callers of the admission review tests (`tests/s6_45_review.rs`, `tests/s7_45_review.rs`,
//! `tests/s8_45_review.rs`), each written once: in process, the layer's service driven by
//! `oneshot` (one call: [`status`]; callers at once: [`burst`], counted by [`not_ok`];
//! closed-loop callers: [`closed_loop`]; evenly spaced arrivals: [`open_loop`], [`fates`]);
//! over HTTP/2, one connection's callers ([`h2`]).

#![allow(dead_code)]

use std::convert::Infallible;
use std::future::Future;
use std::time::{Duration, Instant};

use http::{Request, Response, StatusCode};
use tokio::task::JoinHandle;
use tower::ServiceExt;

/// The caller's budget header (Envoy's, milliseconds).
pub const BUDGET: &str = "x-envoy-expected-rq-timeout-ms";

/// An hour, in the budget header's milliseconds.
pub const HOUR_MS: &str = "3600000";

/// A layer's service as the spawned callers drive it: requests without a body, never an
/// error, cloned into each caller's task.
pub trait Route<B>:
    tower::Service<Request<()>, Response = Response<B>, Error = Infallible, Future: Send>
    + Clone
    + Send
    + 'static
{
}

impl<S, B> Route<B> for S where
    S: tower::Service<Request<()>, Response = Response<B>, Error = Infallible, Future: Send>
        + Clone
        + Send
        + 'static
{
}

/// A GET of `path`, with `budget` (milliseconds) in [`BUDGET`] if any.
pub fn request(path: &str, budget: Option<&str>) -> Request<()> {
    let mut req = Request::get(path);
    if let Some(budget) = budget {
        req = req.header(BUDGET, budget);
    }
    req.body(()).unwrap()
}

/// The status of one call of `/r` through `service` (a clone of it), with `budget` if any.
/// The future holds no borrow of `service`: a task may spawn it.
pub fn status<S, B>(
    service: &S,
    budget: Option<&str>,
) -> impl Future<Output = StatusCode> + use<S, B>
where
    S: tower::Service<Request<()>, Response = Response<B>, Error = Infallible> + Clone,
{
    let call = service.clone().oneshot(request("/r", budget));
    async move { call.await.unwrap().status() }
}

/// `n` calls of `/r` through `service`, all spawned at once, each with `budget` if any.
pub fn burst<S, B>(
    service: &S,
    n: usize,
    budget: Option<&'static str>,
) -> Vec<JoinHandle<StatusCode>>
where
    S: Route<B>,
{
    (0..n)
        .map(|_| {
            let service = service.clone();
            tokio::spawn(async move {
                service
                    .oneshot(request("/r", budget))
                    .await
                    .unwrap()
                    .status()
            })
        })
        .collect()
}

/// How many of `calls` were answered anything but 200.
pub async fn not_ok(calls: Vec<JoinHandle<StatusCode>>) -> usize {
    let mut refused = 0;
    for call in calls {
        if call.await.unwrap() != StatusCode::OK {
            refused += 1;
        }
    }
    refused
}

/// `callers` callers in a closed loop on `/r`, `each` calls each with `budget` if any, a
/// caller pausing for `pause` after a call answered anything but 200: how many were (in all).
pub async fn closed_loop<S, B>(
    service: &S,
    callers: usize,
    each: usize,
    budget: Option<&'static str>,
    pause: Duration,
) -> usize
where
    S: Route<B>,
{
    let callers: Vec<_> = (0..callers)
        .map(|_| {
            let service = service.clone();
            tokio::spawn(async move {
                let mut refused = 0;
                for _ in 0..each {
                    if status(&service, budget).await != StatusCode::OK {
                        refused += 1;
                        tokio::time::sleep(pause).await;
                    }
                }
                refused
            })
        })
        .collect();
    let mut refused = 0;
    for caller in callers {
        refused += caller.await.unwrap();
    }
    refused
}

/// One request's fate: when it was sent (since the run's start), its status, its latency.
#[derive(Clone, Copy, Debug)]
pub struct Fate {
    pub sent: Duration,
    pub status: StatusCode,
    pub took: Duration,
}

/// Sends `rate` requests per second of `path` (evenly spaced, open loop) for `len` from
/// `start + from`, each with `budget` (milliseconds) if any, through `service`: the calls,
/// for [`fates`].
pub async fn open_loop<S, B>(
    service: &S,
    path: &'static str,
    start: Instant,
    from: Duration,
    rate: f64,
    len: Duration,
    budget: Option<&'static str>,
) -> Vec<JoinHandle<Fate>>
where
    S: Route<B>,
{
    let n = (rate * len.as_secs_f64()) as u64;
    let mut calls = Vec::with_capacity(n as usize);
    for i in 0..n {
        let at = start + from + Duration::from_secs_f64(i as f64 / rate);
        tokio::time::sleep_until(at.into()).await;
        let service = service.clone();
        calls.push(tokio::spawn(async move {
            let req = request(path, budget);
            let t0 = Instant::now();
            let status = service.oneshot(req).await.unwrap().status();
            Fate {
                sent: t0 - start,
                status,
                took: t0.elapsed(),
            }
        }));
    }
    calls
}

/// The fates of an [`open_loop`]'s calls, in order.
pub async fn fates(calls: Vec<JoinHandle<Fate>>) -> Vec<Fate> {
    let mut out = Vec::with_capacity(calls.len());
    for call in calls {
        out.push(call.await.unwrap());
    }
    out
}

/// The p99 of `v` (the last value when there are fewer than 100).
pub fn p99(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get((v.len() * 99 / 100).min(v.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}

/// Callers over one HTTP/2 connection (hyper's client): [`connect`](h2::connect), one call
/// ([`call`](h2::call)), evenly spaced arrivals ([`open_loop`](h2::open_loop),
/// [`open_loop_no_budget`](h2::open_loop_no_budget)).
pub mod h2 {
    use std::net::SocketAddr;
    use std::time::{Duration, Instant};

    use http::{Request, StatusCode};
    use http_body_util::{BodyExt, Full};
    use hyper::body::Bytes;
    use hyper_util::rt::{TokioExecutor, TokioIo};

    use super::BUDGET;

    pub type Sender = hyper::client::conn::http2::SendRequest<Full<Bytes>>;

    /// An HTTP/2 connection to `addr`.
    pub async fn connect(addr: SocketAddr) -> Sender {
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        // As HTTP clients set it (reqwest, tonic, grpc-go): with Nagle's algorithm on, the
        // second request waits for the first one's ACK, which Linux delays up to 40 ms, and
        // an open loop arrives in bunches 40 ms apart.
        stream.set_nodelay(true).unwrap();
        let (sender, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
                .await
                .unwrap();
        tokio::spawn(conn);
        sender
    }

    /// One call of `path` with `headers`: its status and how long it took.
    pub async fn call(
        sender: &Sender,
        addr: SocketAddr,
        path: &str,
        headers: &[(&'static str, String)],
    ) -> (StatusCode, Duration) {
        let mut sender = sender.clone();
        let mut req = Request::get(format!("http://{addr}{path}"));
        for (name, value) in headers {
            req = req.header(*name, value.as_str());
        }
        let req = req.body(Full::<Bytes>::new(Bytes::new())).unwrap();
        let t0 = Instant::now();
        let res = sender.send_request(req).await.unwrap();
        let status = res.status();
        res.into_body().collect().await.unwrap();
        (status, t0.elapsed())
    }

    /// `rate` calls a second (open loop) of `path` for `len`, each with a budget of
    /// `budget_ms`: (sent since `start`, status, took) of each.
    pub async fn open_loop(
        sender: &Sender,
        addr: SocketAddr,
        path: &'static str,
        rate: f64,
        len: Duration,
        budget_ms: u64,
    ) -> Vec<(Duration, StatusCode, Duration)> {
        let n = (rate * len.as_secs_f64()) as u64;
        open_loop_with(sender, addr, path, rate, n, Some(budget_ms)).await
    }

    /// (sent, status, took) of `n` calls of `path` without a budget, `rate` a second.
    pub async fn open_loop_no_budget(
        sender: &Sender,
        addr: SocketAddr,
        path: &'static str,
        rate: f64,
        n: u64,
    ) -> Vec<(Duration, StatusCode, Duration)> {
        open_loop_with(sender, addr, path, rate, n, None).await
    }

    /// `n` calls of `path`, `rate` a second, each with a budget of `budget_ms` if any.
    async fn open_loop_with(
        sender: &Sender,
        addr: SocketAddr,
        path: &'static str,
        rate: f64,
        n: u64,
        budget_ms: Option<u64>,
    ) -> Vec<(Duration, StatusCode, Duration)> {
        let start = Instant::now();
        let mut calls = Vec::with_capacity(n as usize);
        for i in 0..n {
            tokio::time::sleep_until((start + Duration::from_secs_f64(i as f64 / rate)).into())
                .await;
            let sender = sender.clone();
            calls.push(tokio::spawn(async move {
                let sent = start.elapsed();
                let headers: Vec<_> = budget_ms
                    .map(|ms| (BUDGET, ms.to_string()))
                    .into_iter()
                    .collect();
                let (status, took) = call(&sender, addr, path, &headers).await;
                (sent, status, took)
            }));
        }
        let mut out = Vec::with_capacity(calls.len());
        for c in calls {
            out.push(c.await.unwrap());
        }
        out
    }
}
