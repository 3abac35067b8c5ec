//! What the after-idle review tests (`tests/s10_idle_review.rs`, `tests/s12_idle_review.rs`,
//! `tests/s13_start_review.rs`) share: what a caller saw ([`Seen`]), one call ([`call`]),
//! their tally ([`tally`]), the layer ([`layer`]) and its counts ([`counts`]), the handler
//! behind it ([`route_with`], [`mixed_route`] with a `/fast` route) and one closed-loop
//! caller's p99 ([`unloaded`], [`unloaded_path`]).

#![allow(dead_code)]

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use http::{Request, Response, StatusCode};
use shared_headers::deadline::BudgetHeader;
use shared_headers::server::{Admission, LayerStats, ResponseBody, SharedHeadersLayer};
use tokio::sync::Semaphore;
use tower::{Layer, ServiceExt, service_fn};

use super::callers::{Route, p99, request};

/// What a caller saw.
#[derive(Clone, Copy, Debug)]
pub enum Seen {
    /// 200 within the budget, after this long.
    Good(Duration),
    /// Refused (503 with `retry-after`), after this long.
    Refused(Duration),
    /// Anything else: a timeout answer, or an answer past the budget (after this long).
    WaitedOut(#[allow(dead_code)] Duration),
}

/// One call of `path` with `budget_ms` (if any): what its caller saw.
pub async fn call<S: Route<B>, B: Send + 'static>(
    service: S,
    path: &'static str,
    budget_ms: Option<u64>,
) -> Seen {
    let budget = budget_ms.map(|ms| ms.to_string());
    let t0 = Instant::now();
    let res = service
        .oneshot(request(path, budget.as_deref()))
        .await
        .unwrap();
    let took = t0.elapsed();
    let within = budget_ms.is_none_or(|ms| took <= Duration::from_millis(ms));
    match res.status() {
        StatusCode::OK if within => Seen::Good(took),
        StatusCode::SERVICE_UNAVAILABLE if res.headers().contains_key("retry-after") => {
            Seen::Refused(took)
        }
        _ => Seen::WaitedOut(took),
    }
}

/// (good answers, their p99, refused, the refusals' p99, waited out) of `seen`.
pub fn tally(seen: &[Seen]) -> (usize, Duration, usize, Duration, usize) {
    let good: Vec<_> = seen
        .iter()
        .filter_map(|s| match s {
            Seen::Good(t) => Some(*t),
            _ => None,
        })
        .collect();
    let refused: Vec<_> = seen
        .iter()
        .filter_map(|s| match s {
            Seen::Refused(t) => Some(*t),
            _ => None,
        })
        .collect();
    let out = seen
        .iter()
        .filter(|s| matches!(s, Seen::WaitedOut(_)))
        .count();
    (good.len(), p99(good), refused.len(), p99(refused), out)
}

/// The layer behind `admission`, callers' budgets read from Envoy's header.
pub fn layer(admission: Admission) -> SharedHeadersLayer {
    SharedHeadersLayer::new()
        .caller_budget(BudgetHeader::envoy_expected_rq_timeout_ms())
        .admission(admission)
}

/// The layer's admission counts, for the figures.
pub fn counts(stats: &LayerStats) -> String {
    let c = stats.admission_counts();
    format!(
        "overloaded {}, shed {}, shed waiting {}, queued {}, limit {}",
        c.overloaded, c.shed, c.shed_waiting, c.queued, c.limit
    )
}

/// A handler of `workers` at a time (a semaphore inside the handler), each answer of `/r`
/// `ms` long (and of `/fast` 1 ms: [`mixed_route`]), one answer of `/r` in `slow.0` taking
/// `slow.1` ms, behind `admission`.
pub fn route_with(
    admission: Admission,
    workers: usize,
    ms: u64,
    slow: Option<(u64, u64)>,
) -> (impl Route<ResponseBody<String>> + use<>, LayerStats) {
    mixed_route(admission, workers, ms, slow, 1)
}

/// [`route_with`] with each answer of `/fast` `fast_ms` long (on the same workers; the
/// answers of `/fast` are not counted in `slow`'s one in `slow.0`).
pub fn mixed_route(
    admission: Admission,
    workers: usize,
    ms: u64,
    slow: Option<(u64, u64)>,
    fast_ms: u64,
) -> (impl Route<ResponseBody<String>> + use<>, LayerStats) {
    let layer = layer(admission);
    let stats = layer.stats();
    let sem = Arc::new(Semaphore::new(workers));
    let n = Arc::new(AtomicU64::new(0));
    let service = layer.layer(service_fn(move |req: Request<()>| {
        let sem = sem.clone();
        let fast = req.uri().path() == "/fast";
        let ms = if fast {
            fast_ms
        } else {
            let i = n.fetch_add(1, Ordering::Relaxed);
            match slow {
                Some((every, slow)) if i % every == every - 1 => slow,
                _ => ms,
            }
        };
        async move {
            let _worker = sem.acquire().await.unwrap();
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok::<_, Infallible>(Response::new(String::new()))
        }
    }));
    (service, stats)
}

/// One closed-loop caller of `path`, `n` calls one at a time (1 s budgets): the p99 of its
/// answers.
pub async fn unloaded_path<S: Route<B>, B>(service: &S, path: &str, n: usize) -> Duration {
    let mut alone = Vec::new();
    for _ in 0..n {
        let t0 = Instant::now();
        let res = service
            .clone()
            .oneshot(request(path, Some("1000")))
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        alone.push(t0.elapsed());
    }
    p99(alone)
}

/// [`unloaded_path`] of `/r`.
pub async fn unloaded<S: Route<B>, B>(service: &S, n: usize) -> Duration {
    unloaded_path(service, "/r", n).await
}
