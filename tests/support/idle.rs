//! What the after-idle review tests (`tests/s12_idle_review.rs`, `tests/s13_start_review.rs`)
//! share: what a caller saw ([`Seen`]), one call ([`call`]), their tally ([`tally`]), the
//! layer ([`layer`]) and its counts ([`counts`]).

#![allow(dead_code)]

use std::time::{Duration, Instant};

use http::StatusCode;
use shared_headers::deadline::BudgetHeader;
use shared_headers::server::{Admission, LayerStats, SharedHeadersLayer};
use tower::ServiceExt;

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

pub fn layer(admission: Admission) -> SharedHeadersLayer {
    SharedHeadersLayer::new()
        .caller_budget(BudgetHeader::envoy_expected_rq_timeout_ms())
        .admission(admission)
}

pub fn counts(stats: &LayerStats) -> String {
    let c = stats.admission_counts();
    format!(
        "overloaded {}, shed {}, shed waiting {}, queued {}, limit {}",
        c.overloaded, c.shed, c.shed_waiting, c.queued, c.limit
    )
}
