//! A hostile review of 221cb58 and 3c05d4f (reviewed on 3c05d4f, compared with 617018f):
//! the work offered at the queue read at the limit held before a probe up
//! (`Limiter::serving`); slow start's trim counting a busy spell's work as "work that kept
//! coming" from `late(floor) = max(floor / 4, 2 ms)` after the spell's first queued request
//! (was one whole no-load duration); and a young spell's caller of the work that kept
//! coming, under slow start's guess, refused at arrival when its wait predicted at the
//! proven capacity (`max(proven, limit / 2)`, counting the requests in flight above it)
//! passes four delay targets.
//!
//! The shapes: batches spread over a few to 30 ms after idle (not all at once), random
//! arrivals at 0.5x-0.8x after idle on handlers of 3-16 workers, a handler whose capacity
//! grows mid-overload, a bimodal route, mixed routes.
//!
//! Findings (failing on 3c05d4f, passing on 617018f, the tree before the change; release
//! build, `--test-threads 1`, every failure judged with the timers on time):
//!
//! 1. A batch spread over 10-25 ms after idle, its work within the callers' budgets, is
//!    trimmed after slow start's cut: `late(floor)` (5 ms on a 20 ms route) counts most of
//!    a spread batch as "work that kept coming", so the trim reads it as an overload.
//!    12 callers 2 ms apart, 200 ms budgets, 2-worker × 20 ms route: 5 of 12 refused in
//!    each of 24 layers (no limit, `limit(20)`, `limit(4)`; 4 runs of 2 layers each), 3-4
//!    of them 21-31 ms after arrival (refusals' p99 29-32 ms: must hold 2's 10 ms too); 0 of
//!    12 in 18 of 18 layers on 617018f (3 runs each). 10 callers 3 ms apart, 150 ms
//!    budgets: 3 of 10 refused at 18-25 ms in 7 of 8 layers (4 runs); 0 in 6 of 6 on
//!    617018f (3 runs).
//! 2. The young spell's bound under slow start's guess refuses callers of a batch that
//!    fits at arrival: 12 callers 1 ms apart, 200 ms budgets: 1-2 of 12 refused (at
//!    10.4-12.7 ms into the batch) in 8 of 8 layers (4 runs); 0 in 6 of 6 on 617018f
//!    (3 runs).
//! 3. The same bound refuses good callers of random arrivals under the capacity after
//!    idle (budgets 5x the unloaded p99): 8 workers at 0.8x, seeds 2 and 3: 1 of 640
//!    refused (33.6-33.8 ms in) in 4 of 4 runs each; 0 in 3 of 3 on 617018f. 16 workers at
//!    0.5x, seed 1: 1 of 800 refused (22.4 ms in) in 4 of 4 runs; 0 in 3 of 3 on 617018f.
//!
//! Fixes: finding 1, the trim counting from `late(floor)`, was withdrawn (71cef16, for
//! `tests/s6_45_review.rs`' finding of the same kind); findings 2 and 3, the young spell's
//! bound under slow start's guess, withdrawn after this review. The eight tests pass on the
//! final tree (36 pass, 16 ignored, one release run).
//!
//! The shapes that fail on 617018f too are ignored with the figures of both trees (worse
//! on 3c05d4f where said).
//!
//! In process (the layer over a `service_fn`, driven by `oneshot` on a 2-worker runtime),
//! each scenario judged only on an attempt during which the runtime's timers kept time
//! ([`timekeeping::judged`]). Knob for measuring by hand: `S13_SEED`.
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

use callers::{Route, request};
use http::{Request, Response, StatusCode};
use idle::{Seen, call, counts, layer, mixed_route, route_with, tally, unloaded, unloaded_path};
use shared_headers::server::Admission;
use timekeeping::judged;
use tokio::sync::Semaphore;
use tower::{Layer, ServiceExt, service_fn};

/// `n` callers of `/r`, the k-th started `gap` after the one before, each with `budget_ms`
/// (if any): (its start since the first, what it saw), in order.
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

/// The callers of `seen` that were not good: "at ms: what", for the figures.
fn not_good(seen: &[(Duration, Seen)]) -> Vec<String> {
    seen.iter()
        .filter(|(_, s)| !matches!(s, Seen::Good(_)))
        .map(|(at, s)| format!("{:.1} ms: {s:?}", at.as_secs_f64() * 1e3))
        .collect()
}

// ---------------------------------------------------------------------------------------
// 1. Batches spread over a few ms to 30 ms after idle, their total work within the
//    callers' budgets: served whole (must hold 3), a refusal (if any) within 10 ms (2).
// ---------------------------------------------------------------------------------------

/// Fresh layers a batch scenario runs on, one after the other.
const ROUNDS: usize = 2;

/// A `workers` × `ms` route behind `admission()`, warmed by `lone` lone calls, idle 1 s,
/// then `n` callers `gap` apart with `budget_ms` budgets; `ROUNDS` fresh layers. The
/// batch's total work (`n` / `workers` service times, at the unloaded p99) must fit the
/// budget (checked first): then none may be refused nor wait out its budget.
async fn spread_batch_after_idle(
    admission: fn() -> Admission,
    workers: usize,
    ms: u64,
    lone: usize,
    n: usize,
    gap: Duration,
    budget_ms: u64,
) -> Result<(), String> {
    let mut rounds = Vec::new();
    let mut bad = 0;
    let mut slow_refusal = Duration::ZERO;
    for _ in 0..ROUNDS {
        let (service, stats) = route_with(admission(), workers, ms, None);
        let alone = unloaded(&service, lone).await;
        let whole = alone * n.div_ceil(workers) as u32;
        verdict!(
            whole <= Duration::from_millis(budget_ms),
            "the batch's work ({whole:?}: {n} callers, {workers} workers, unloaded p99 \
             {alone:?}) does not fit {budget_ms} ms: not a test of must hold 3"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        let seen = spread(&service, n, gap, Some(budget_ms)).await;
        let all: Vec<Seen> = seen.iter().map(|(_, s)| *s).collect();
        let (good, pg, refused, pr, out) = tally(&all);
        bad += refused + out;
        slow_refusal = slow_refusal.max(pr);
        rounds.push(format!(
            "[unloaded p99 {alone:?}, whole batch {whole:?}: {good} good (p99 {pg:?}), {refused} \
             refused (p99 {pr:?}), {out} waited out; not good by start {:?}; {}]",
            not_good(&seen),
            counts(&stats)
        ));
    }
    let figures = format!(
        "{workers} workers x {ms} ms, {n} callers {gap:?} apart after 1 s idle, {budget_ms} ms \
         budgets, {ROUNDS} fresh layers: {}",
        rounds.join(" ")
    );
    eprintln!("{figures}");
    verdict!(
        bad == 0,
        "callers of a batch that fits their budgets refused: {figures}"
    );
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
    Admission::new().limit(NonZeroUsize::new(20).unwrap())
}

fn limit_4() -> Admission {
    Admission::new().limit(NonZeroUsize::new(4).unwrap())
}

fn limit_2() -> Admission {
    Admission::new().limit(NonZeroUsize::new(2).unwrap())
}

const MS: Duration = Duration::from_millis(1);

// 20 ms route, 2 workers (late(floor) = 5 ms).

/// Finding 1: 5 of 12 refused (3-4 at 21-32 ms) in 8 of 8 layers over 4 runs; 0 in 6 of 6 on 617018f.
#[test]
fn spread_12_by_2_ms_200_ms_budgets_20_ms_route_no_limit() {
    judged(|| spread_batch_after_idle(no_limit, 2, 20, 30, 12, 2 * MS, 200));
}

/// Finding 1: 5 of 12 refused (3-4 at 21-32 ms) in 8 of 8 layers over 4 runs; 0 in 6 of 6 on 617018f.
#[test]
fn spread_12_by_2_ms_200_ms_budgets_20_ms_route_limit_20() {
    judged(|| spread_batch_after_idle(limit_20, 2, 20, 30, 12, 2 * MS, 200));
}

/// Finding 1: 5 of 12 refused (3-4 at 21-32 ms) in 8 of 8 layers over 4 runs; 0 in 6 of 6 on 617018f.
#[test]
fn spread_12_by_2_ms_200_ms_budgets_20_ms_route_limit_4() {
    judged(|| spread_batch_after_idle(limit_4, 2, 20, 30, 12, 2 * MS, 200));
}

/// Finding 1: 3 of 10 refused at 18-25 ms in 7 of 8 layers over 4 runs; 0 in 6 of 6 on 617018f.
#[test]
fn spread_10_by_3_ms_150_ms_budgets_20_ms_route_no_limit() {
    judged(|| spread_batch_after_idle(no_limit, 2, 20, 30, 10, 3 * MS, 150));
}

#[test]
fn spread_8_by_3_ms_150_ms_budgets_20_ms_route_no_limit() {
    judged(|| spread_batch_after_idle(no_limit, 2, 20, 30, 8, 3 * MS, 150));
}

#[test]
fn spread_8_by_3_ms_150_ms_budgets_20_ms_route_limit_4() {
    judged(|| spread_batch_after_idle(limit_4, 2, 20, 30, 8, 3 * MS, 150));
}

#[ignore = "fails on 617018f too (3-4 of 16 refused at arrival, p99 <0.1 ms; 2 runs); worse on 3c05d4f: 9 of 16 refused, refusals' p99 36-37 ms (2 runs, 4 layers)"]
#[test]
fn spread_16_by_1_ms_200_ms_budgets_20_ms_route_no_limit() {
    judged(|| spread_batch_after_idle(no_limit, 2, 20, 30, 16, MS, 200));
}

#[ignore = "fails on 617018f too (2 of 16 refused at arrival, p99 <0.02 ms; 2 runs); worse on 3c05d4f: 9 of 16 refused, refusals' p99 29.6-31.5 ms (2 runs, 4 layers)"]
#[test]
fn spread_16_by_2_ms_200_ms_budgets_20_ms_route_no_limit() {
    judged(|| spread_batch_after_idle(no_limit, 2, 20, 30, 16, 2 * MS, 200));
}

/// Finding 2: 1-2 of 12 refused at arrival in 8 of 8 layers over 4 runs; 0 in 6 of 6 on 617018f.
#[test]
fn spread_12_by_1_ms_200_ms_budgets_20_ms_route_no_limit() {
    judged(|| spread_batch_after_idle(no_limit, 2, 20, 30, 12, MS, 200));
}

#[ignore = "fails on 617018f too: 5-6 of 12 refused at arrival (2 runs); 6 of 12 on 3c05d4f (2 runs)"]
#[test]
fn spread_12_by_2_ms_200_ms_budgets_20_ms_route_limit_2() {
    judged(|| spread_batch_after_idle(limit_2, 2, 20, 30, 12, 2 * MS, 200));
}

#[ignore = "fails on 617018f too: 1-2 of 8 refused at arrival (2 runs); 2-3 of 8 on 3c05d4f (2 runs)"]
#[test]
fn spread_8_by_3_ms_150_ms_budgets_20_ms_route_limit_2() {
    judged(|| spread_batch_after_idle(limit_2, 2, 20, 30, 8, 3 * MS, 150));
}

// 20 ms route, 4 workers: the guess of 4 is the capacity.

#[ignore = "fails on 617018f too: 9-10 of 24 refused at arrival (2 runs); 11-12 on 3c05d4f (2 runs)"]
#[test]
fn spread_24_by_1_ms_200_ms_budgets_20_ms_route_4_workers_no_limit() {
    judged(|| spread_batch_after_idle(no_limit, 4, 20, 30, 24, MS, 200));
}

// 100 ms route, 2 workers (late(floor) = 25 ms).

#[test]
fn spread_6_by_6_ms_400_ms_budgets_100_ms_route_no_limit() {
    judged(|| spread_batch_after_idle(no_limit, 2, 100, 8, 6, 6 * MS, 400));
}

#[test]
fn spread_6_by_6_ms_400_ms_budgets_100_ms_route_limit_2() {
    judged(|| spread_batch_after_idle(limit_2, 2, 100, 8, 6, 6 * MS, 400));
}

// 100 ms route, 8 workers: slow start's guess of 4 under the capacity.

#[test]
fn spread_16_by_2_ms_300_ms_budgets_100_ms_route_8_workers_no_limit() {
    judged(|| spread_batch_after_idle(no_limit, 8, 100, 8, 16, 2 * MS, 300));
}

#[test]
fn spread_24_by_1_ms_400_ms_budgets_100_ms_route_8_workers_no_limit() {
    judged(|| spread_batch_after_idle(no_limit, 8, 100, 8, 24, MS, 400));
}

// 20 ms route, 8 workers: slow start's guess of 4 under the capacity.

#[ignore = "fails on 617018f too: 10 of 24 refused at arrival (2 runs); 11-12 on 3c05d4f (2 runs)"]
#[test]
fn spread_24_by_1_ms_150_ms_budgets_20_ms_route_8_workers_no_limit() {
    judged(|| spread_batch_after_idle(no_limit, 8, 20, 30, 24, MS, 150));
}

#[ignore = "fails on 617018f too: 9-13 of 32 refused at arrival (2 runs); 11-13 on 3c05d4f (2 runs)"]
#[test]
fn spread_32_by_1_ms_150_ms_budgets_20_ms_route_8_workers_no_limit() {
    judged(|| spread_batch_after_idle(no_limit, 8, 20, 30, 32, MS, 150));
}

// 1 ms route, 2 workers (late(floor) = 2 ms): a budget of 20x the unloaded p99 (a 1 ms
// sleep answers in 2-4 ms in a release build, up to 5 ms in a debug one), generous there
// (exempt from both rules): a control. (At 40 ms, a debug build's batch of 16 at a p99 of
// 5 ms each on 2 workers did not fit its budgets: not a test of must hold 3.)

#[test]
fn spread_16_by_1_ms_80_ms_budgets_1_ms_route_no_limit() {
    judged(|| spread_batch_after_idle(no_limit, 2, 1, 100, 16, MS, 80));
}

// ---------------------------------------------------------------------------------------
// 2. Random arrivals at 0.5x-0.8x after idle, budgets of 5x the unloaded p99: none
//    refused (must hold 3).
// ---------------------------------------------------------------------------------------

/// How the route was used before the 1 s idle.
#[derive(Clone, Copy, Debug)]
enum Warm {
    /// 30 lone calls (slow start proves at most 1).
    Lone,
    /// 30 lone calls, then 0.5 s of random arrivals at 0.5x (200 ms budgets).
    Light,
}

/// Uniform draws in (0, 1) from a fixed `seed` (xorshift64*), as [`random`] draws them.
fn uniform(seed: u64) -> impl FnMut() -> f64 {
    let mut x = seed | 1;
    move || {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        ((x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
}

/// `n` calls, random (Poisson) arrivals at `rate` a second from a fixed `seed`, of `/r`
/// (or `/fast` with probability `fast.0`, with `fast.1` ms budgets).
async fn random<S: Route<B>, B: Send + 'static>(
    service: &S,
    rate: f64,
    n: usize,
    seed: u64,
    budget_ms: Option<u64>,
    fast: Option<(f64, u64)>,
) -> Vec<(Duration, &'static str, Seen)> {
    let mut next = uniform(seed);
    let start = Instant::now();
    let mut at = 0.0f64;
    let mut calls = Vec::with_capacity(n);
    for _ in 0..n {
        at += -next().ln() / rate;
        let (path, budget) = match fast {
            Some((p, ms)) if next() < p => ("/fast", Some(ms)),
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

/// A `workers` × `ms` route behind `admission` (`slow`: one answer in `slow.0` takes `slow.1`
/// ms), warmed as `warm`, idle 1 s; then random arrivals (seed `seed`) at `x` of the
/// capacity for 2 s, budgets of 5x the unloaded p99: none refused nor waited out.
async fn random_after_idle(
    admission: Admission,
    workers: usize,
    ms: u64,
    slow: Option<(u64, u64)>,
    x: f64,
    seed: u64,
    warm: Warm,
) -> Result<(), String> {
    let seed = std::env::var("S13_SEED").map_or(seed, |v| v.parse().unwrap());
    let (service, stats) = route_with(admission, workers, ms, slow);
    let alone = unloaded(&service, 30).await;
    let mean = match slow {
        Some((every, slow)) => ((every - 1) * ms + slow) as f64 / every as f64,
        None => ms as f64,
    };
    let capacity = workers as f64 * 1000.0 / mean;
    if let Warm::Light = warm {
        let light = random(
            &service,
            0.5 * capacity,
            (0.25 * capacity) as usize,
            seed ^ 0x5555,
            Some(200),
            None,
        )
        .await;
        let bad = light
            .iter()
            .filter(|(_, _, s)| !matches!(s, Seen::Good(_)))
            .count();
        verdict!(bad == 0, "the light warm-up at 0.5x: {bad} not good");
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rate = x * capacity;
    let n = (rate * 2.0) as usize;
    let budget_ms = (alone * 5).as_millis() as u64;
    let seen = random(&service, rate, n, seed, Some(budget_ms), None).await;
    let all: Vec<Seen> = seen.iter().map(|(_, _, s)| *s).collect();
    let (good, pg, refused, pr, out) = tally(&all);
    let late: Vec<String> = seen
        .iter()
        .filter(|(_, _, s)| !matches!(s, Seen::Good(_)))
        .map(|(at, _, s)| format!("{:.1} ms: {s:?}", at.as_secs_f64() * 1e3))
        .collect();
    let figures = format!(
        "{workers} workers x {ms} ms (slow {slow:?}), warmed {warm:?}, random arrivals at {x}x \
         ({rate:.0}/s, seed {seed}) after 1 s idle, {budget_ms} ms budgets (5x the unloaded p99 \
         {alone:?}): {good} good (p99 {pg:?}), {refused} refused (p99 {pr:?}), {out} waited out \
         of {}; not good by arrival {late:?}; {}",
        seen.len(),
        counts(&stats)
    );
    eprintln!("{figures}");
    verdict!(
        refused + out == 0,
        "good callers refused at {x}x: {figures}"
    );
    Ok(())
}

macro_rules! random_tests {
    ($($(#[$m:meta])* $name:ident: $admission:expr, $workers:expr, $ms:expr, $slow:expr, $x:expr, $seed:expr, $warm:expr;)*) => {
        $(
            $(#[$m])*
            #[test]
            fn $name() {
                judged(|| random_after_idle($admission, $workers, $ms, $slow, $x, $seed, $warm));
            }
        )*
    };
}

random_tests! {
    #[ignore = "not reliable on either tree, mid-load: 0 then 6 of 240 refused (1.58-1.62 s in) on 3c05d4f (2 runs); 0 then 1 (1.54 s in) on 617018f (2 judged runs)"]
    random_0_8x_3_workers_seed_1_lone: Admission::new(), 3, 20, None, 0.8, 1, Warm::Lone;
    #[ignore = "not reliable on either tree: 2, 1, 0, 1 of 240 refused (344-394 ms in) on 3c05d4f (4 runs); 0, 0, 0, 3, 3 on 617018f (309-332 ms in; 5 runs)"]
    random_0_8x_3_workers_seed_2_lone: Admission::new(), 3, 20, None, 0.8, 2, Warm::Lone;
    random_0_8x_4_workers_seed_1_lone: Admission::new(), 4, 20, None, 0.8, 1, Warm::Lone;
    random_0_8x_4_workers_seed_2_lone: Admission::new(), 4, 20, None, 0.8, 2, Warm::Lone;
    random_0_8x_6_workers_seed_1_lone: Admission::new(), 6, 20, None, 0.8, 1, Warm::Lone;
    random_0_8x_6_workers_seed_2_lone: Admission::new(), 6, 20, None, 0.8, 2, Warm::Lone;
    random_0_8x_6_workers_seed_3_lone: Admission::new(), 6, 20, None, 0.8, 3, Warm::Lone;
    random_0_8x_8_workers_seed_1_lone: Admission::new(), 8, 20, None, 0.8, 1, Warm::Lone;
    /// Finding 3: 1 of 640 refused 33.8 ms in, 4 of 4 runs; 0 in 3 of 3 on 617018f.
    random_0_8x_8_workers_seed_2_lone: Admission::new(), 8, 20, None, 0.8, 2, Warm::Lone;
    /// Finding 3: 1 of 640 refused 33.6-33.8 ms in, 4 of 4 runs; 0 in 3 of 3 on 617018f.
    random_0_8x_8_workers_seed_3_lone: Admission::new(), 8, 20, None, 0.8, 3, Warm::Lone;
    random_0_8x_8_workers_seed_4_lone: Admission::new(), 8, 20, None, 0.8, 4, Warm::Lone;
    #[ignore = "known limit, the first two service times: 4 of 1280 refused since slow start's step to the demand (3 runs; 7 on the tree before); 6-8 on 617018f (19-45 ms in, 2 runs); 7 on 3c05d4f (2 runs)"]
    random_0_8x_16_workers_seed_1_lone: Admission::new(), 16, 20, None, 0.8, 1, Warm::Lone;
    #[ignore = "known limit, the first two service times: 5 of 1280 refused since slow start's step to the demand (3 runs; 5-6 on the tree before); 5 on 617018f (19-27 ms in, 2 runs); 7 on 3c05d4f (2 runs)"]
    random_0_8x_16_workers_seed_2_lone: Admission::new(), 16, 20, None, 0.8, 2, Warm::Lone;
    /// Finding 3: 1 of 800 refused 22.4 ms in, 4 of 4 runs; 0 in 3 of 3 on 617018f.
    random_0_5x_16_workers_seed_1_lone: Admission::new(), 16, 20, None, 0.5, 1, Warm::Lone;
    #[ignore = "not yet reliable: 0 of 800 refused in 2 runs since slow start's step to the demand (1 and 0 on the tree before); fails on 617018f in 2 of 3 runs (0, 2, 1 of 800 refused 31-43 ms in); 3, 2, 3 on 3c05d4f (27-32 ms in, 3 runs)"]
    random_0_5x_16_workers_seed_2_lone: Admission::new(), 16, 20, None, 0.5, 2, Warm::Lone;
    random_0_5x_8_workers_seed_1_lone: Admission::new(), 8, 20, None, 0.5, 1, Warm::Lone;
    random_0_8x_8_workers_seed_1_light: Admission::new(), 8, 20, None, 0.8, 1, Warm::Light;
    random_0_8x_8_workers_seed_2_light: Admission::new(), 8, 20, None, 0.8, 2, Warm::Light;
    random_0_8x_16_workers_seed_1_light: Admission::new(), 16, 20, None, 0.8, 1, Warm::Light;
    random_0_8x_6_workers_seed_1_light: Admission::new(), 6, 20, None, 0.8, 1, Warm::Light;
    #[ignore = "not reliable on either tree: 0, 2, 0 of 240 refused on 617018f (3 runs); 3 (shed after 6.5-9 ms of wait), 0, 1 on 3c05d4f (3 runs)"]
    random_0_8x_3_workers_seed_1_light: Admission::new(), 3, 20, None, 0.8, 1, Warm::Light;
    random_0_8x_8_workers_seed_1_limit_20: Admission::new().limit(NonZeroUsize::new(20).unwrap()), 8, 20, None, 0.8, 1, Warm::Lone;
    #[ignore = "known limit, the first two service times: 4 of 1280 refused since slow start's step to the demand (2 runs; 7 on the tree before); 7-8 on 617018f (2 runs); 7-8 on 3c05d4f (2 runs)"]
    random_0_8x_16_workers_seed_1_limit_20: Admission::new().limit(NonZeroUsize::new(20).unwrap()), 16, 20, None, 0.8, 1, Warm::Lone;
    random_0_8x_2_workers_seed_1_limit_2: Admission::new().limit(NonZeroUsize::new(2).unwrap()), 2, 20, None, 0.8, 1, Warm::Lone;
    random_0_8x_4_workers_seed_1_limit_4: Admission::new().limit(NonZeroUsize::new(4).unwrap()), 4, 20, None, 0.8, 1, Warm::Lone;
    random_0_8x_8_workers_100_ms_seed_1_lone: Admission::new(), 8, 100, None, 0.8, 1, Warm::Lone;
    #[ignore = "fails on 617018f too: 8 and 37 of 341 refused (2 runs); 5 and 34 on 3c05d4f (2 runs)"]
    bimodal_0_8x_4_workers_5_60_seed_1_lone: Admission::new(), 4, 5, Some((4, 60)), 0.8, 1, Warm::Lone;
    bimodal_0_8x_8_workers_20_60_seed_1_lone: Admission::new(), 8, 20, Some((4, 60)), 0.8, 1, Warm::Lone;
    // The retrim's review (a later change, withdrawn; docs::admission): shapes that fail on
    // 5e44b78, the tree it was compared with (the same admission code as now), one release
    // run each unless said.
    #[ignore = "not reliable: 4 of 160 refused on 5e44b78 (the retrim's review, 1 run); 0 in one run on 4e76c67, the same admission code"]
    random_0_8x_2_workers_seed_1_lone: Admission::new(), 2, 20, None, 0.8, 1, Warm::Lone;
    #[ignore = "fails on 5e44b78: 6 of 160 refused (the retrim's review, 1 run); 4-5 in 3 attempts of one run on 4e76c67, the same admission code"]
    random_0_8x_2_workers_seed_2_lone: Admission::new(), 2, 20, None, 0.8, 2, Warm::Lone;
    #[ignore = "not reliable on 5e44b78: 1 of 100 refused at arrival about 770 ms in, in 2 of 5 runs (the retrim's review)"]
    random_0_5x_2_workers_seed_2_lone: Admission::new(), 2, 20, None, 0.5, 2, Warm::Lone;
    #[ignore = "fails on 5e44b78: 2 of 100 refused at arrival (the retrim's review, 2 runs)"]
    random_0_5x_2_workers_seed_3_lone: Admission::new(), 2, 20, None, 0.5, 3, Warm::Lone;
    #[ignore = "fails on 5e44b78: 6 and 1 of 130 refused (the retrim's review, 2 runs)"]
    random_0_65x_2_workers_seed_3_lone: Admission::new(), 2, 20, None, 0.65, 3, Warm::Lone;
    #[ignore = "known limit, the first two service times: 6-8 of 1600 refused since slow start's step to the demand (3 runs; 12-19 on the tree before); 13 on 5e44b78 (15-41 ms in, the retrim's review, 1 run)"]
    random_0_5x_32_workers_seed_1_lone: Admission::new(), 32, 20, None, 0.5, 1, Warm::Lone;
    #[ignore = "known limit, the first two service times: 7 of 1600 refused since slow start's step to the demand (2 runs; 18-24 on the tree before); 18 on 5e44b78 (the retrim's review, 1 run)"]
    random_0_5x_32_workers_seed_2_lone: Admission::new(), 32, 20, None, 0.5, 2, Warm::Lone;
    #[ignore = "known limit, the first two service times: 26-27 of 2560 refused since slow start's step to the demand (3 runs; 47-49 on the tree before); 48 on 5e44b78 (the retrim's review, 1 run)"]
    random_0_8x_32_workers_seed_1_lone: Admission::new(), 32, 20, None, 0.8, 1, Warm::Lone;
    #[ignore = "known limit, the first two service times: 29 of 2560 refused since slow start's step to the demand (3 runs; 48-49 on the tree before); 47 on 5e44b78 (the retrim's review, 1 run)"]
    random_0_8x_32_workers_seed_2_lone: Admission::new(), 32, 20, None, 0.8, 2, Warm::Lone;
    #[ignore = "not reliable: 2-7 of 213 refused at arrival about 1.8 s in on 5e44b78 (the retrim's review, 3 runs); 0 in one run on 4e76c67, the same admission code"]
    bimodal_0_8x_4_workers_20_60_seed_1_lone: Admission::new(), 4, 20, Some((4, 60)), 0.8, 1, Warm::Lone;
}

/// A handler of `workers` that serves in arrival order, each request `service_ms`, met by
/// [`random`]'s arrivals (seed `seed`, `rate` a second, `n` calls, no `/fast` route) with
/// budgets of `budget_ms`: how many callers finish past their budget when every one is
/// served (the handler's own queue, no admission), and how many a clairvoyant admission
/// refuses (it lets in each caller that finishes in time behind those let in before it,
/// and refuses the rest at arrival).
fn in_order(
    seed: u64,
    rate: f64,
    n: usize,
    workers: usize,
    service_ms: f64,
    budget_ms: f64,
) -> (usize, usize) {
    let mut next = uniform(seed);
    let mut at = 0.0f64;
    let (mut all, mut let_in) = (vec![0.0f64; workers], vec![0.0f64; workers]);
    let (mut late, mut refused) = (0, 0);
    for _ in 0..n {
        at += -next().ln() / rate * 1e3;
        let first_free = |free: &mut Vec<f64>| {
            let k = (0..free.len())
                .min_by(|&a, &b| free[a].total_cmp(&free[b]))
                .unwrap();
            (k, free[k].max(at) + service_ms)
        };
        let (k, done) = first_free(&mut all);
        all[k] = done;
        late += usize::from(done - at > budget_ms);
        let (k, done) = first_free(&mut let_in);
        if done - at > budget_ms {
            refused += 1;
        } else {
            let_in[k] = done;
        }
    }
    (late, refused)
}

/// What the arrivals of `random_0_8x_2_workers_seed_2_lone` (2 workers at 0.8x, seed 2,
/// 110 ms budgets: 5x the unloaded p99, 21.7-22.1 ms in the runs, of a `sleep(20 ms)`)
/// cost any admission: a clairvoyant one refuses 1-3 of the 160 callers at 20.3-21.5 ms a
/// request, and serving every caller in order lets 1-11 finish past their budget. (The
/// crate refused 4-6 in its runs: a known limit, docs::admission_reviews.) The other
/// 2-worker shapes lose nobody in order at 21 ms a request: their refusals are the crate's
/// own. Arithmetic only, no clock.
#[test]
fn random_arrivals_on_2_workers_cost_an_admission_that_knew_every_finish() {
    let seed_2 = |service| in_order(2, 80.0, 160, 2, service, 110.0);
    assert_eq!(seed_2(20.3), (1, 1));
    assert_eq!(seed_2(21.0), (6, 2));
    assert_eq!(seed_2(21.5), (11, 3));
    // random_0_8x_2_workers_seed_1_lone, random_0_65x_2_workers_seed_3_lone,
    // random_0_5x_2_workers_seed_3_lone and _seed_2_lone.
    for (seed, rate, n) in [
        (1, 80.0, 160),
        (3, 65.0, 130),
        (3, 50.0, 100),
        (2, 50.0, 100),
    ] {
        assert_eq!(
            in_order(seed, rate, n, 2, 21.0, 110.0),
            (0, 0),
            "seed {seed} at {rate}/s"
        );
    }
}

// ---------------------------------------------------------------------------------------
// 3. Mixed routes at 0.7x after idle: a 1 ms route beside a 20 ms one, one limit.
// ---------------------------------------------------------------------------------------

/// A 4-worker handler: `/r` 20 ms (5x the unloaded p99 budgets), `/fast` 1 ms (budgets of
/// 5x its unloaded p99), both warmed by 30 lone calls, idle 1 s; then random arrivals,
/// `share` of them `/fast`, at 0.7x of the capacity: none refused.
async fn mixed_after_idle(seed: u64, share: f64) -> Result<(), String> {
    let seed = std::env::var("S13_SEED").map_or(seed, |v| v.parse().unwrap());
    let (service, stats) = mixed_route(Admission::new(), 4, 20, None, 1);
    let alone = unloaded(&service, 30).await;
    let alone_fast = unloaded_path(&service, "/fast", 30).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    // The mean work of a request, in ms: the 1 ms sleep takes about its unloaded p99.
    let fast_ms = alone_fast.as_secs_f64() * 1e3;
    let mean = share * fast_ms + (1.0 - share) * 20.0;
    let rate = 0.7 * 4.0 * 1000.0 / mean;
    let n = (rate * 2.0) as usize;
    let budget_ms = (alone * 5).as_millis() as u64;
    let fast_budget = (alone_fast * 5).as_millis().max(1) as u64;
    let seen = random(
        &service,
        rate,
        n,
        seed,
        Some(budget_ms),
        Some((share, fast_budget)),
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
    let bad: Vec<String> = seen
        .iter()
        .filter(|(_, _, s)| !matches!(s, Seen::Good(_)))
        .map(|(at, p, s)| format!("{:.1} ms {p}: {s:?}", at.as_secs_f64() * 1e3))
        .collect();
    let figures = format!(
        "4 workers, /r 20 ms ({budget_ms} ms budgets, unloaded p99 {alone:?}) and /fast 1 ms \
         ({fast_budget} ms budgets, unloaded p99 {alone_fast:?}), {share} of them fast, random \
         arrivals at 0.7x ({rate:.0}/s, seed {seed}) after 1 s idle: /r {g1} good (p99 {pg1:?}) \
         {r1} refused (p99 {pr1:?}) {o1} waited out; /fast {g2} good (p99 {pg2:?}) {r2} refused \
         (p99 {pr2:?}) {o2} waited out; not good by arrival {bad:?}; {}",
        counts(&stats)
    );
    eprintln!("{figures}");
    verdict!(r1 + o1 == 0, "/r callers refused at 0.7x: {figures}");
    Ok(())
}

#[test]
fn mixed_routes_at_0_7x_after_idle_seed_1() {
    judged(|| mixed_after_idle(1, 0.5));
}

#[test]
fn mixed_routes_at_0_7x_after_idle_seed_2() {
    judged(|| mixed_after_idle(2, 0.5));
}

// ---------------------------------------------------------------------------------------
// 4. A handler whose capacity grows mid-overload: the probe up must still find it.
// ---------------------------------------------------------------------------------------

/// Good answers (200 within the budget) of `rate` evenly spaced calls a second for `len`
/// with `budget_ms` budgets, counting only those sent `from` or later: (good, counted).
async fn good_of<S: Route<B>, B: Send + 'static>(
    service: &S,
    rate: f64,
    len: Duration,
    from: Duration,
    budget_ms: u64,
) -> (usize, usize, Vec<Seen>) {
    let start = Instant::now();
    let n = (rate * len.as_secs_f64()) as usize;
    let mut calls = Vec::with_capacity(n);
    for i in 0..n {
        let at = Duration::from_secs_f64(i as f64 / rate);
        tokio::time::sleep_until((start + at).into()).await;
        calls.push((
            at,
            tokio::spawn(call(service.clone(), "/r", Some(budget_ms))),
        ));
    }
    let (mut good, mut counted, mut seen) = (0, 0, Vec::new());
    for (at, c) in calls {
        let s = c.await.unwrap();
        if at >= from {
            counted += 1;
            good += usize::from(matches!(s, Seen::Good(_)));
            seen.push(s);
        }
    }
    (good, counted, seen)
}

/// A 2-worker × 20 ms handler, no limit, 300/s with 200 ms budgets (3x) for 2 s: the limit
/// settles at 2. Then the handler gets `after` workers and the same 300/s goes on 3 s; the
/// good answers of its last 2 s against tower's `LoadShed` over `ConcurrencyLimit(after)` on
/// an `after`-worker handler at 300/s for 2 s (the right limit, given): at least as many
/// (must hold 4: goodput at least tower's with the right limit).
async fn growth(after: usize) -> Result<(), String> {
    let rate = 300.0;
    let budget_ms = 200;
    // Tower's, with the right limit.
    let sem = Arc::new(Semaphore::new(after));
    let tower_service = tower::ServiceBuilder::new()
        .load_shed()
        .concurrency_limit(after)
        .service(service_fn(move |_req: Request<()>| {
            let sem = sem.clone();
            async move {
                let _worker = sem.acquire().await.unwrap();
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok::<_, Infallible>(Response::new(String::new()))
            }
        }));
    let start = Instant::now();
    let n = (rate * 2.0) as usize;
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
    let mut tower_good = 0;
    for c in calls {
        tower_good += usize::from(c.await.unwrap());
    }
    // The layer's, no limit.
    let layer = layer(Admission::new());
    let stats = layer.stats();
    let workers = Arc::new(Semaphore::new(2));
    let w = workers.clone();
    let service = layer.layer(service_fn(move |_req: Request<()>| {
        let w = w.clone();
        async move {
            let _worker = w.acquire().await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok::<_, Infallible>(Response::new(String::new()))
        }
    }));
    let (good_before, counted_before, _) = good_of(
        &service,
        rate,
        Duration::from_secs(2),
        Duration::ZERO,
        budget_ms,
    )
    .await;
    let limit_before = stats.admission_counts().limit;
    workers.add_permits(after - 2);
    let (good, counted, seen) = good_of(
        &service,
        rate,
        Duration::from_secs(3),
        Duration::from_secs(1),
        budget_ms,
    )
    .await;
    let (_, pg, refused, pr, out) = tally(&seen);
    let figures = format!(
        "2 -> {after} workers x 20 ms at 300/s, 200 ms budgets, no limit: before the change \
         {good_before} good of {counted_before} (limit {limit_before}); 1-3 s after it {good} good \
         of {counted} (p99 {pg:?}), {refused} refused (p99 {pr:?}), {out} waited out; tower's \
         LoadShed + ConcurrencyLimit({after}) on {after} workers: {tower_good} good of {n}; {}",
        counts(&stats)
    );
    eprintln!("{figures}");
    verdict!(good >= tower_good, "goodput under tower's: {figures}");
    Ok(())
}

/// 2 -> 4 workers: 300/s is still 1.5x.
#[ignore = "fails on 617018f too: 306-308 good of 600 against tower's 346 (2 runs); 306-308 on 3c05d4f (2 runs); the limit 3 at the end"]
#[test]
fn capacity_grows_from_2_to_4_workers_mid_overload_goodput_beside_tower() {
    judged(|| growth(4));
}

/// 2 -> 3 workers: 300/s is 2x.
#[test]
fn capacity_grows_from_2_to_3_workers_mid_overload_goodput_beside_tower() {
    judged(|| growth(3));
}

/// 2 -> 8 workers: 300/s is 0.75x (tower's serves all).
#[test]
fn capacity_grows_from_2_to_8_workers_mid_overload_goodput_beside_tower() {
    judged(|| growth(8));
}
