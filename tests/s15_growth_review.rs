//! A hostile review of slow start's step to the demand (`bd5db7b`), run on its first form
//! (the limit grown to `max(limit + 1 if binding, min(in_flight + queued, 2 × proven))` at
//! any answer on time) and rerun on the committed one (the step only once the last step is
//! proven whole). Every test is ignored: most shapes fail on the tree before too, and they
//! take minutes; run them with `--ignored`, interleaving two trees.
//!
//! Shapes: random arrivals at 0.5x-0.8x after idle on handlers of 3-12 workers, overload
//! starts (2x, 4x, 10x) on 3-8 workers after idle (must hold 2, and goodput beside tower's
//! `LoadShed` + `ConcurrencyLimit` with the right limit), spread batches on 4-8 workers, a
//! handler of 3 behind `limit(20)`, two routes (1 ms and 20 ms) sharing one limit, callers
//! without a budget, a bimodal route.
//!
//! Findings on the first form (fail on it, pass on `5b75258`; release, `--test-threads 1`,
//! judged runs), and what the committed form does (interleaved with `5b75258`, 3 rounds):
//!
//! 1. `o_4x_3_workers`, `o_4x_3_workers_limit_20`, `o_4x_6_workers`: 4x after idle, the
//!    refusals' p99 over 10 ms. The first form jumped at the first answer on time and let
//!    more in than the handler takes; slow start's cut then trimmed more waiters 10-35 ms
//!    after they queued. 6 workers: 13 -> 20-23 refusals after 10 ms of 1,824; 5/5, 5/5, 6/6
//!    runs failed, 0/5, 0/5, 0/6 before. Committed form: `o_4x_6_workers` 0 of 3 failed (0 of
//!    6 before); the two 3-worker leaves 1 of 3 and 1 of 3 (p99 of good answers 70 ms; 2 of 6
//!    and 0 of 6 before, the no-limit leaf failing the same way), so a weak signal on the
//!    `limit(20)` leaf (with the reviewer's 1 of 2: 2 of 5 against 0 of 11).
//! 2. `r_0_8x_4_workers_seed_3`: 1 of 320 good callers refused at arrival about 356-360 ms
//!    in, 2 of 7 runs on the first form; 0 in 7 before (weak). Committed form: 1 of 3 and 0 of
//!    2 (0 of 6 before).
//!
//! Worse on the first form but failing on both: `batch_18_by_2_ms_then_4x_6_workers` (the
//! batch left an unsettled limit of 15 on 6 workers, 11 before; then 4x: good p99 119-139
//! ms). Committed form: 2 of 3 failed (good p99 61-69 ms, 18-20 refusals after 10 ms),
//! against 6 of 6 before (good p99 84-85 ms, 10-11 refusals after 10 ms).
//!
//! In process (the layer over a `service_fn`, driven by `oneshot` on a 2-worker runtime),
//! each scenario judged only on an attempt during which the runtime's timers kept time
//! ([`timekeeping::judged`]).
#![cfg(feature = "server")]

#[path = "support/callers.rs"]
mod callers;

#[macro_use]
#[path = "support/timekeeping.rs"]
mod timekeeping;

#[path = "support/idle.rs"]
mod idle;

use std::convert::Infallible;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use callers::{Route, p99, request};
use http::{Request, Response, StatusCode};
use idle::{Seen, call, counts, mixed_route, route_with, tally, unloaded, unloaded_path};
use shared_headers::server::Admission;
use timekeeping::judged;
use tokio::sync::Semaphore;
use tower::{ServiceExt, service_fn};

const MS: Duration = Duration::from_millis(1);

fn lim(n: usize) -> Admission {
    Admission::new().limit(NonZeroUsize::new(n).unwrap())
}

// ---------------------------------------------------------------------------------------
// Arrivals.
// ---------------------------------------------------------------------------------------

/// `n` callers of `/r`, the k-th started `gap` after the one before: (start, seen).
async fn spread<S: Route<B>, B: Send + 'static>(
    service: &S,
    n: usize,
    gap: Duration,
    budget_ms: Option<u64>,
) -> Vec<(Duration, Seen)> {
    let start = Instant::now();
    let mut calls = Vec::with_capacity(n);
    for k in 0..n {
        tokio::time::sleep_until((start + gap * k as u32).into()).await;
        let at = start.elapsed();
        calls.push((at, tokio::spawn(call(service.clone(), "/r", budget_ms))));
    }
    let mut seen = Vec::with_capacity(n);
    for (at, c) in calls {
        seen.push((at, c.await.unwrap()));
    }
    seen
}

/// Random (Poisson, `poisson`) or evenly spaced arrivals at `rate` a second, `n` calls, of
/// `/r` (or `/fast` with probability `fast.0`, with `fast.1` ms budgets).
#[allow(clippy::too_many_arguments)]
async fn arrivals<S: Route<B>, B: Send + 'static>(
    service: &S,
    rate: f64,
    n: usize,
    seed: u64,
    poisson: bool,
    budget_ms: Option<u64>,
    fast: Option<(f64, Option<u64>)>,
) -> Vec<(Duration, &'static str, Seen)> {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        ((x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    let start = Instant::now();
    let mut at = 0.0f64;
    let mut calls = Vec::with_capacity(n);
    for i in 0..n {
        if poisson {
            at += -next().ln() / rate;
        } else {
            at = i as f64 / rate;
        }
        let (path, budget) = match fast {
            Some((p, ms)) if next() < p => ("/fast", ms),
            _ => ("/r", budget_ms),
        };
        tokio::time::sleep_until((start + Duration::from_secs_f64(at)).into()).await;
        calls.push((
            Duration::from_secs_f64(at),
            path,
            tokio::spawn(call(service.clone(), path, budget)),
        ));
    }
    let mut seen = Vec::with_capacity(calls.len());
    for (at, path, c) in calls {
        seen.push((at, path, c.await.unwrap()));
    }
    seen
}

fn not_good(seen: &[(Duration, &'static str, Seen)]) -> Vec<String> {
    seen.iter()
        .filter(|(_, _, s)| !matches!(s, Seen::Good(_)))
        .take(12)
        .map(|(at, p, s)| format!("{:.1} ms {p}: {s:?}", at.as_secs_f64() * 1e3))
        .collect()
}

// ---------------------------------------------------------------------------------------
// 1. Random arrivals at 0.5x-0.8x after idle (30 lone calls, 1 s idle), budgets of 5x the
//    unloaded p99 (or none): none refused nor waited out (must hold 3).
// ---------------------------------------------------------------------------------------

async fn random_after_idle(
    admission: Admission,
    workers: usize,
    ms: u64,
    slow: Option<(u64, u64)>,
    x: f64,
    seed: u64,
    budget: bool,
) -> Result<(), String> {
    let seed = std::env::var("S15_SEED").map_or(seed, |v| v.parse().unwrap());
    let (service, stats) = route_with(admission, workers, ms, slow);
    let alone = unloaded(&service, 30).await;
    let mean = match slow {
        Some((every, slow)) => ((every - 1) * ms + slow) as f64 / every as f64,
        None => ms as f64,
    };
    let capacity = workers as f64 * 1000.0 / mean;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rate = x * capacity;
    let n = (rate * 2.0) as usize;
    let budget_ms = budget.then(|| (alone * 5).as_millis() as u64);
    let seen = arrivals(&service, rate, n, seed, true, budget_ms, None).await;
    let all: Vec<Seen> = seen.iter().map(|(_, _, s)| *s).collect();
    let (good, pg, refused, pr, out) = tally(&all);
    let figures = format!(
        "{workers} workers x {ms} ms (slow {slow:?}), random arrivals at {x}x ({rate:.0}/s, seed \
         {seed}) after 1 s idle, budgets {budget_ms:?} (unloaded p99 {alone:?}): {good} good (p99 \
         {pg:?}), {refused} refused (p99 {pr:?}), {out} waited out of {}; not good by arrival \
         {:?}; {}",
        seen.len(),
        not_good(&seen),
        counts(&stats)
    );
    eprintln!("FIG {figures}");
    verdict!(
        refused + out == 0,
        "good callers refused at {x}x: {figures}"
    );
    Ok(())
}

macro_rules! random_tests {
    ($($(#[$m:meta])* $name:ident: $admission:expr, $workers:expr, $ms:expr, $slow:expr, $x:expr, $seed:expr, $budget:expr;)*) => {
        $(
            $(#[$m])*
            #[test]
            #[ignore = "a review's shape, many failing on both trees (the header): run with --ignored"]
            fn $name() {
                judged(|| random_after_idle($admission, $workers, $ms, $slow, $x, $seed, $budget));
            }
        )*
    };
}

random_tests! {
    r_0_8x_5_workers_seed_1: Admission::new(), 5, 20, None, 0.8, 1, true;
    r_0_8x_5_workers_seed_2: Admission::new(), 5, 20, None, 0.8, 2, true;
    r_0_5x_5_workers_seed_1: Admission::new(), 5, 20, None, 0.5, 1, true;
    r_0_8x_6_workers_seed_4: Admission::new(), 6, 20, None, 0.8, 4, true;
    r_0_65x_6_workers_seed_1: Admission::new(), 6, 20, None, 0.65, 1, true;
    r_0_5x_6_workers_seed_2: Admission::new(), 6, 20, None, 0.5, 2, true;
    r_0_65x_8_workers_seed_1: Admission::new(), 8, 20, None, 0.65, 1, true;
    r_0_8x_8_workers_seed_5: Admission::new(), 8, 20, None, 0.8, 5, true;
    r_0_8x_12_workers_seed_1: Admission::new(), 12, 20, None, 0.8, 1, true;
    r_0_8x_12_workers_seed_2: Admission::new(), 12, 20, None, 0.8, 2, true;
    r_0_5x_12_workers_seed_1: Admission::new(), 12, 20, None, 0.5, 1, true;
    r_0_65x_4_workers_seed_3: Admission::new(), 4, 20, None, 0.65, 3, true;
    r_0_8x_4_workers_seed_3: Admission::new(), 4, 20, None, 0.8, 3, true;
    r_0_5x_3_workers_seed_1: Admission::new(), 3, 20, None, 0.5, 1, true;
    r_0_65x_3_workers_seed_1: Admission::new(), 3, 20, None, 0.65, 1, true;
    r_0_65x_3_workers_seed_1_limit_20: lim(20), 3, 20, None, 0.65, 1, true;
    r_0_8x_3_workers_seed_3_limit_20: lim(20), 3, 20, None, 0.8, 3, true;
    r_0_8x_6_workers_seed_1_limit_20: lim(20), 6, 20, None, 0.8, 1, true;
    r_0_8x_5_workers_100_ms_seed_1: Admission::new(), 5, 100, None, 0.8, 1, true;
    r_0_8x_6_workers_5_ms_seed_1: Admission::new(), 6, 5, None, 0.8, 1, true;
    r_0_8x_8_workers_2_ms_seed_1: Admission::new(), 8, 2, None, 0.8, 1, true;
    bimodal_0_8x_6_workers_20_60_seed_1: Admission::new(), 6, 20, Some((4, 60)), 0.8, 1, true;
    bimodal_0_8x_12_workers_20_60_seed_1: Admission::new(), 12, 20, Some((4, 60)), 0.8, 1, true;
    no_budget_0_8x_4_workers_seed_1: Admission::new(), 4, 20, None, 0.8, 1, false;
    no_budget_0_8x_6_workers_seed_1: Admission::new(), 6, 20, None, 0.8, 1, false;
    no_budget_0_8x_8_workers_seed_2: Admission::new(), 8, 20, None, 0.8, 2, false;
    no_budget_0_8x_12_workers_seed_1: Admission::new(), 12, 20, None, 0.8, 1, false;
}

// ---------------------------------------------------------------------------------------
// 2. Overload starts after idle (30 lone calls, 0.5 s at 0.5x, 1 s idle), then evenly
//    spaced calls at x of the capacity for 2 s, 200 ms budgets (or none): must hold 2 (p99
//    of good answers within 3x the unloaded p99, refusals' p99 within 10 ms, at most 2%
//    waited out), and goodput at least tower's `LoadShed` + `ConcurrencyLimit(workers)` on
//    the same handler and load.
// ---------------------------------------------------------------------------------------

/// Tower's goodput (200 within `budget_ms`) with the right limit, same load.
async fn tower_good(workers: usize, ms: u64, rate: f64, n: usize, budget_ms: u64) -> usize {
    let sem = Arc::new(Semaphore::new(workers));
    let tower_service = tower::ServiceBuilder::new()
        .load_shed()
        .concurrency_limit(workers)
        .service(service_fn(move |_req: Request<()>| {
            let sem = sem.clone();
            async move {
                let _worker = sem.acquire().await.unwrap();
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok::<_, Infallible>(Response::new(String::new()))
            }
        }));
    let start = Instant::now();
    let mut calls = Vec::with_capacity(n);
    for i in 0..n {
        tokio::time::sleep_until((start + Duration::from_secs_f64(i as f64 / rate)).into()).await;
        let call = tower_service.clone().oneshot(request("/r", None));
        calls.push(tokio::spawn(async move {
            let t0 = Instant::now();
            let ok = matches!(call.await, Ok(res) if res.status() == StatusCode::OK);
            ok && t0.elapsed() <= Duration::from_millis(budget_ms)
        }));
    }
    let mut good = 0;
    for c in calls {
        good += usize::from(c.await.unwrap());
    }
    good
}

async fn overload_after_idle(
    admission: Admission,
    workers: usize,
    ms: u64,
    x: f64,
    budget: bool,
    goodput: bool,
) -> Result<(), String> {
    let (service, stats) = route_with(admission, workers, ms, None);
    let alone = unloaded(&service, 30).await;
    let capacity = workers as f64 * 1000.0 / ms as f64;
    let warm = arrivals(
        &service,
        0.5 * capacity,
        (0.25 * capacity) as usize,
        7,
        true,
        Some(200),
        None,
    )
    .await;
    let bad = warm
        .iter()
        .filter(|(_, _, s)| !matches!(s, Seen::Good(_)))
        .count();
    verdict!(bad == 0, "the warm-up at 0.5x: {bad} not good");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rate = x * capacity;
    let n = (rate * 2.0) as usize;
    let budget_ms = budget.then_some(200);
    let seen = arrivals(&service, rate, n, 1, false, budget_ms, None).await;
    let all: Vec<Seen> = seen.iter().map(|(_, _, s)| *s).collect();
    let (good, pg, refused, pr, out) = tally(&all);
    // The first 200 ms of the load: where slow start's growth acts.
    let first: Vec<Seen> = seen
        .iter()
        .filter(|(at, _, _)| *at < Duration::from_millis(200))
        .map(|(_, _, s)| *s)
        .collect();
    let (g1, pg1, r1, pr1, o1) = tally(&first);
    let slow_refused = all
        .iter()
        .filter(|s| matches!(s, Seen::Refused(t) if *t > Duration::from_millis(10)))
        .count();
    let good_over = all
        .iter()
        .filter(|s| matches!(s, Seen::Good(t) if *t > alone * 3))
        .count();
    let tower = if goodput {
        Some(tower_good(workers, ms, rate, n, 200).await)
    } else {
        None
    };
    let figures = format!(
        "{workers} workers x {ms} ms, {x}x ({rate:.0}/s even) after 1 s idle, budgets \
         {budget_ms:?}, unloaded p99 {alone:?}: {good} good (p99 {pg:?}, bar {:?}), {refused} \
         refused (p99 {pr:?}), {out} waited out of {n}; first 200 ms: {g1} good (p99 {pg1:?}) \
         {r1} refused (p99 {pr1:?}) {o1} out; refused after 10 ms: {slow_refused}; good over 3x: \
         {good_over}; tower's: {tower:?} good; {}",
        alone * 3,
        counts(&stats)
    );
    eprintln!("FIG {figures}");
    verdict!(pg <= alone * 3, "p99 of good answers over 3x: {figures}");
    verdict!(
        pr <= Duration::from_millis(10),
        "refusals too slow: {figures}"
    );
    verdict!(out * 50 <= n, "over 2% waited out: {figures}");
    if let Some(tower) = tower {
        verdict!(good >= tower, "goodput under tower's: {figures}");
    }
    Ok(())
}

macro_rules! overload_tests {
    ($($(#[$m:meta])* $name:ident: $admission:expr, $workers:expr, $ms:expr, $x:expr, $budget:expr, $goodput:expr;)*) => {
        $(
            $(#[$m])*
            #[test]
            #[ignore = "a review's shape, many failing on both trees (the header): run with --ignored"]
            fn $name() {
                judged(|| overload_after_idle($admission, $workers, $ms, $x, $budget, $goodput));
            }
        )*
    };
}

overload_tests! {
    o_2x_3_workers: Admission::new(), 3, 20, 2.0, true, true;
    o_4x_3_workers: Admission::new(), 3, 20, 4.0, true, true;
    o_10x_3_workers: Admission::new(), 3, 20, 10.0, true, true;
    o_2x_4_workers: Admission::new(), 4, 20, 2.0, true, true;
    o_4x_4_workers: Admission::new(), 4, 20, 4.0, true, true;
    o_10x_4_workers: Admission::new(), 4, 20, 10.0, true, true;
    o_2x_6_workers: Admission::new(), 6, 20, 2.0, true, true;
    o_4x_6_workers: Admission::new(), 6, 20, 4.0, true, true;
    o_2x_8_workers: Admission::new(), 8, 20, 2.0, true, true;
    o_4x_8_workers: Admission::new(), 8, 20, 4.0, true, true;
    o_10x_8_workers: Admission::new(), 8, 20, 10.0, true, true;
    o_2x_3_workers_limit_20: lim(20), 3, 20, 2.0, true, true;
    o_4x_3_workers_limit_20: lim(20), 3, 20, 4.0, true, true;
    o_4x_5_workers_no_budget: Admission::new(), 5, 20, 4.0, false, false;
    o_2x_8_workers_no_budget: Admission::new(), 8, 20, 2.0, false, false;
}

// ---------------------------------------------------------------------------------------
// 3. Batches spread 1-3 ms apart after idle on 4-8 workers, their work within the budgets:
//    served whole, a refusal (if any) within 10 ms.
// ---------------------------------------------------------------------------------------

async fn spread_batch_after_idle(
    admission: fn() -> Admission,
    workers: usize,
    ms: u64,
    n: usize,
    gap: Duration,
    budget_ms: u64,
) -> Result<(), String> {
    let mut rounds = Vec::new();
    let mut bad = 0;
    let mut slow_refusal = Duration::ZERO;
    for _ in 0..2 {
        let (service, stats) = route_with(admission(), workers, ms, None);
        let alone = unloaded(&service, 30).await;
        let whole = alone * n.div_ceil(workers) as u32;
        verdict!(
            whole <= Duration::from_millis(budget_ms),
            "the batch's work ({whole:?}) does not fit {budget_ms} ms"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        let seen = spread(&service, n, gap, Some(budget_ms)).await;
        let all: Vec<Seen> = seen.iter().map(|(_, s)| *s).collect();
        let (good, pg, refused, pr, out) = tally(&all);
        bad += refused + out;
        slow_refusal = slow_refusal.max(pr);
        let ng: Vec<String> = seen
            .iter()
            .filter(|(_, s)| !matches!(s, Seen::Good(_)))
            .map(|(at, s)| format!("{:.1} ms: {s:?}", at.as_secs_f64() * 1e3))
            .collect();
        rounds.push(format!(
            "[unloaded p99 {alone:?}, whole {whole:?}: {good} good (p99 {pg:?}), {refused} refused \
             (p99 {pr:?}), {out} waited out; not good {ng:?}; {}]",
            counts(&stats)
        ));
    }
    let figures = format!(
        "{workers} workers x {ms} ms, {n} callers {gap:?} apart after 1 s idle, {budget_ms} ms \
         budgets, 2 fresh layers: {}",
        rounds.join(" ")
    );
    eprintln!("FIG {figures}");
    verdict!(bad == 0, "callers of a batch that fits refused: {figures}");
    verdict!(
        slow_refusal <= Duration::from_millis(10),
        "refusals too slow: {figures}"
    );
    Ok(())
}

fn no_limit() -> Admission {
    Admission::new()
}

fn limit_20() -> Admission {
    lim(20)
}

#[test]
#[ignore = "a review's shape, many failing on both trees (the header): run with --ignored"]
fn spread_16_by_2_ms_200_ms_budgets_4_workers() {
    judged(|| spread_batch_after_idle(no_limit, 4, 20, 16, 2 * MS, 200));
}

#[test]
#[ignore = "a review's shape, many failing on both trees (the header): run with --ignored"]
fn spread_16_by_3_ms_200_ms_budgets_4_workers() {
    judged(|| spread_batch_after_idle(no_limit, 4, 20, 16, 3 * MS, 200));
}

#[test]
#[ignore = "a review's shape, many failing on both trees (the header): run with --ignored"]
fn spread_15_by_2_ms_200_ms_budgets_5_workers() {
    judged(|| spread_batch_after_idle(no_limit, 5, 20, 15, 2 * MS, 200));
}

#[test]
#[ignore = "a review's shape, many failing on both trees (the header): run with --ignored"]
fn spread_18_by_2_ms_200_ms_budgets_6_workers() {
    judged(|| spread_batch_after_idle(no_limit, 6, 20, 18, 2 * MS, 200));
}

#[test]
#[ignore = "a review's shape, many failing on both trees (the header): run with --ignored"]
fn spread_24_by_2_ms_200_ms_budgets_8_workers() {
    judged(|| spread_batch_after_idle(no_limit, 8, 20, 24, 2 * MS, 200));
}

#[test]
#[ignore = "a review's shape, many failing on both trees (the header): run with --ignored"]
fn spread_24_by_3_ms_200_ms_budgets_8_workers_limit_20() {
    judged(|| spread_batch_after_idle(limit_20, 8, 20, 24, 3 * MS, 200));
}

#[test]
#[ignore = "a review's shape, many failing on both trees (the header): run with --ignored"]
fn spread_9_by_2_ms_150_ms_budgets_3_workers_limit_20() {
    judged(|| spread_batch_after_idle(limit_20, 3, 20, 9, 2 * MS, 150));
}

// ---------------------------------------------------------------------------------------
// 4. Two routes sharing one limit: /r 20 ms and /fast 1 ms on `workers`, random arrivals
//    at `x` after idle; none of either refused (budgets 5x each's unloaded p99).
// ---------------------------------------------------------------------------------------

async fn mixed_after_idle(workers: usize, x: f64, seed: u64, share: f64) -> Result<(), String> {
    let (service, stats) = mixed_route(Admission::new(), workers, 20, None, 1);
    let alone = unloaded(&service, 30).await;
    let alone_fast = unloaded_path(&service, "/fast", 30).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let fast_ms = alone_fast.as_secs_f64() * 1e3;
    let mean = share * fast_ms + (1.0 - share) * 20.0;
    let rate = x * workers as f64 * 1000.0 / mean;
    let n = (rate * 2.0) as usize;
    let budget_ms = (alone * 5).as_millis() as u64;
    let fast_budget = (alone_fast * 5).as_millis().max(1) as u64;
    let seen = arrivals(
        &service,
        rate,
        n,
        seed,
        true,
        Some(budget_ms),
        Some((share, Some(fast_budget))),
    )
    .await;
    let of = |p: &str| -> Vec<Seen> {
        seen.iter()
            .filter(|(_, path, _)| *path == p)
            .map(|(_, _, s)| *s)
            .collect()
    };
    let (g1, pg1, r1, pr1, o1) = tally(&of("/r"));
    let (g2, pg2, r2, pr2, o2) = tally(&of("/fast"));
    let figures = format!(
        "{workers} workers, /r 20 ms ({budget_ms} ms budgets, unloaded p99 {alone:?}) and /fast \
         1 ms ({fast_budget} ms budgets, unloaded p99 {alone_fast:?}), {share} fast, random at \
         {x}x ({rate:.0}/s, seed {seed}) after 1 s idle: /r {g1} good (p99 {pg1:?}) {r1} refused \
         (p99 {pr1:?}) {o1} out; /fast {g2} good (p99 {pg2:?}) {r2} refused (p99 {pr2:?}) {o2} \
         out; not good {:?}; {}",
        not_good(&seen),
        counts(&stats)
    );
    eprintln!("FIG {figures}");
    verdict!(r1 + o1 == 0, "/r callers refused: {figures}");
    verdict!(r2 + o2 == 0, "/fast callers refused: {figures}");
    Ok(())
}

#[test]
#[ignore = "a review's shape, many failing on both trees (the header): run with --ignored"]
fn mixed_8_workers_0_7x_half_fast_seed_1() {
    judged(|| mixed_after_idle(8, 0.7, 1, 0.5));
}

#[test]
#[ignore = "a review's shape, many failing on both trees (the header): run with --ignored"]
fn mixed_8_workers_0_7x_mostly_fast_seed_1() {
    judged(|| mixed_after_idle(8, 0.7, 1, 0.9));
}

#[test]
#[ignore = "a review's shape, many failing on both trees (the header): run with --ignored"]
fn mixed_4_workers_0_7x_mostly_fast_seed_2() {
    judged(|| mixed_after_idle(4, 0.7, 2, 0.9));
}

#[test]
#[ignore = "a review's shape, many failing on both trees (the header): run with --ignored"]
fn mixed_6_workers_0_5x_half_fast_seed_1() {
    judged(|| mixed_after_idle(6, 0.5, 1, 0.5));
}

// ---------------------------------------------------------------------------------------
// 5. A closed loop of callers without a budget: `callers` loops on a `workers` handler,
//    after idle; p99 of answers within 3x the unloaded p99 and no refusals while callers
//    <= workers.
// ---------------------------------------------------------------------------------------

async fn closed_loop(workers: usize, callers: usize) -> Result<(), String> {
    let (service, stats) = route_with(Admission::new(), workers, 20, None);
    let alone = unloaded(&service, 30).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let end = Instant::now() + Duration::from_secs(2);
    let mut tasks = Vec::new();
    for _ in 0..callers {
        let s = service.clone();
        tasks.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            while Instant::now() < end {
                seen.push(call(s.clone(), "/r", None).await);
            }
            seen
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let (good, pg, refused, pr, out) = tally(&all);
    let figures = format!(
        "{callers} closed-loop callers without budgets on {workers} workers x 20 ms after 1 s \
         idle (unloaded p99 {alone:?}): {good} good (p99 {pg:?}), {refused} refused (p99 \
         {pr:?}), {out} out; {}",
        counts(&stats)
    );
    eprintln!("FIG {figures}");
    verdict!(refused + out == 0, "refused: {figures}");
    verdict!(pg <= alone * 3, "p99 over 3x: {figures}");
    let _ = p99(Vec::new());
    Ok(())
}

#[test]
#[ignore = "a review's shape, many failing on both trees (the header): run with --ignored"]
fn closed_loop_6_callers_6_workers() {
    judged(|| closed_loop(6, 6));
}

#[test]
#[ignore = "a review's shape, many failing on both trees (the header): run with --ignored"]
fn closed_loop_8_callers_8_workers() {
    judged(|| closed_loop(8, 8));
}

// ---------------------------------------------------------------------------------------
// 6. Handlers under slow start's guess (2-3 workers; the guess of 4 is above them) and
//    just-over-capacity overloads.
// ---------------------------------------------------------------------------------------

random_tests! {
    r3_0_5x_seed_2: Admission::new(), 3, 20, None, 0.5, 2, true;
    r3_0_5x_seed_3: Admission::new(), 3, 20, None, 0.5, 3, true;
    r3_0_65x_seed_2: Admission::new(), 3, 20, None, 0.65, 2, true;
    r3_0_65x_seed_3: Admission::new(), 3, 20, None, 0.65, 3, true;
    r3_0_8x_seed_4: Admission::new(), 3, 20, None, 0.8, 4, true;
    r3_0_5x_seed_1_limit_20: lim(20), 3, 20, None, 0.5, 1, true;
    r3_0_65x_seed_2_limit_20: lim(20), 3, 20, None, 0.65, 2, true;
    r3_0_65x_seed_3_limit_20: lim(20), 3, 20, None, 0.65, 3, true;
    r3_0_65x_100_ms_seed_1: Admission::new(), 3, 100, None, 0.65, 1, true;
    r3_0_65x_no_budget_seed_1: Admission::new(), 3, 20, None, 0.65, 1, false;
    r2_0_5x_seed_1: Admission::new(), 2, 20, None, 0.5, 1, true;
    r2_0_65x_seed_1: Admission::new(), 2, 20, None, 0.65, 1, true;
    r5_0_65x_seed_3: Admission::new(), 5, 20, None, 0.65, 3, true;
    r5_0_65x_seed_4: Admission::new(), 5, 20, None, 0.65, 4, true;
}

overload_tests! {
    o_1_2x_3_workers: Admission::new(), 3, 20, 1.2, true, true;
    o_1_2x_4_workers: Admission::new(), 4, 20, 1.2, true, true;
    o_1_2x_6_workers: Admission::new(), 6, 20, 1.2, true, true;
    o_3x_3_workers: Admission::new(), 3, 20, 3.0, true, true;
    o_2x_5_workers: Admission::new(), 5, 20, 2.0, true, true;
    o_2x_3_workers_no_budget: Admission::new(), 3, 20, 2.0, false, false;
}

#[test]
#[ignore = "a review's shape, many failing on both trees (the header): run with --ignored"]
fn spread_12_by_2_ms_200_ms_budgets_3_workers() {
    judged(|| spread_batch_after_idle(no_limit, 3, 20, 12, 2 * MS, 200));
}

#[test]
#[ignore = "a review's shape, many failing on both trees (the header): run with --ignored"]
fn spread_12_by_1_ms_200_ms_budgets_3_workers() {
    judged(|| spread_batch_after_idle(no_limit, 3, 20, 12, MS, 200));
}

#[test]
#[ignore = "a review's shape, many failing on both trees (the header): run with --ignored"]
fn spread_10_by_3_ms_200_ms_budgets_3_workers_limit_20() {
    judged(|| spread_batch_after_idle(limit_20, 3, 20, 10, 3 * MS, 200));
}

// ---------------------------------------------------------------------------------------
// 7. A batch after idle grows the limit in slow start (no queue seen: unsettled); after
//    1 s idle, an overload at `x` meets that limit: must hold 2.
// ---------------------------------------------------------------------------------------

async fn overload_after_batch(
    workers: usize,
    n: usize,
    gap: Duration,
    x: f64,
) -> Result<(), String> {
    let (service, stats) = route_with(Admission::new(), workers, 20, None);
    let alone = unloaded(&service, 30).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let batch = spread(&service, n, gap, Some(200)).await;
    let batch_bad = batch
        .iter()
        .filter(|(_, s)| !matches!(s, Seen::Good(_)))
        .count();
    let after_batch = counts(&stats);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let capacity = workers as f64 * 1000.0 / 20.0;
    let rate = x * capacity;
    let total = (rate * 2.0) as usize;
    let seen = arrivals(&service, rate, total, 1, false, Some(200), None).await;
    let all: Vec<Seen> = seen.iter().map(|(_, _, s)| *s).collect();
    let (good, pg, refused, pr, out) = tally(&all);
    let slow_refused = all
        .iter()
        .filter(|s| matches!(s, Seen::Refused(t) if *t > Duration::from_millis(10)))
        .count();
    let figures = format!(
        "{workers} workers x 20 ms: batch of {n} {gap:?} apart after idle ({batch_bad} not good; \
         {after_batch}), 1 s idle, then {x}x ({rate:.0}/s even), 200 ms budgets, unloaded p99 \
         {alone:?}: {good} good (p99 {pg:?}, bar {:?}), {refused} refused (p99 {pr:?}, {slow_refused} \
         after 10 ms), {out} waited out of {total}; {}",
        alone * 3,
        counts(&stats)
    );
    eprintln!("FIG {figures}");
    verdict!(pg <= alone * 3, "p99 of good answers over 3x: {figures}");
    verdict!(
        pr <= Duration::from_millis(10),
        "refusals too slow: {figures}"
    );
    verdict!(out * 50 <= total, "over 2% waited out: {figures}");
    Ok(())
}

#[test]
#[ignore = "a review's shape, many failing on both trees (the header): run with --ignored"]
fn batch_18_by_2_ms_then_2x_6_workers() {
    judged(|| overload_after_batch(6, 18, 2 * MS, 2.0));
}

#[test]
#[ignore = "a review's shape, many failing on both trees (the header): run with --ignored"]
fn batch_18_by_2_ms_then_4x_6_workers() {
    judged(|| overload_after_batch(6, 18, 2 * MS, 4.0));
}

#[test]
#[ignore = "a review's shape, many failing on both trees (the header): run with --ignored"]
fn batch_12_by_2_ms_then_2x_4_workers() {
    judged(|| overload_after_batch(4, 12, 2 * MS, 2.0));
}

#[test]
#[ignore = "a review's shape, many failing on both trees (the header): run with --ignored"]
fn batch_24_by_2_ms_then_2x_8_workers() {
    judged(|| overload_after_batch(8, 24, 2 * MS, 2.0));
}
