//! A hostile review of the after-idle change (c95c177, 2386892; reviewed on 2b0e4f8, which
//! adds 12a7977's exemption of generous waiters from the trim): slow start's trim reads the
//! busy spell since a quiet spell (`Limiter::overloaded`), an overload found there ends the
//! young bound, a waiter's predicted wait counts the requests in flight over the limit, and
//! a young spell under slow start's guess reads and predicts at the proven capacity.
//!
//! Findings (failing on 2b0e4f8, passing on 0a647d9, the tree before the change; both fixed
//! since, and kept here as tests that pass: slow start's trim reads only the work of the
//! busy spell that kept coming after its first no-load duration, which a batch's requests,
//! all in its first instant, never are; the young bound at the proven capacity was
//! withdrawn):
//!
//! 1. A batch after idle, callers with budgets of 9-10x the unloaded p99 (200 ms on the
//!    2-worker × 20 ms route), is now shed by slow start's trim ~42 ms after arrival: 12 at
//!    once lose 5-6 (0 before), with no limit and with the user's `limit(4)` alike; 16 at
//!    once lose 9 at 42 ms p99 (4 before, refused at arrival in 10 µs). The trim reads the
//!    batch's own spell (its fixed work over 40 ms) as an overload at the limit it has just
//!    cut to. (On 2386892 itself, before 12a7977, budgets of 10 s or an hour were shed the
//!    same way: 9 of 16; 12a7977 exempts waiters with ten no-load durations left.)
//! 2. Random arrivals at 0.8x after idle on a handler of 8 workers (warmed by lone calls:
//!    slow start has proven fewer than the handler takes) refuse 2-4 callers with budgets of
//!    5x the unloaded p99 in the load's first 21-35 ms (0 before): the young spell's bound
//!    at the proven capacity counts the requests in flight over the proof as queued.
//!
//! The shapes that fail on 0a647d9 too are ignored with their figures (known limits).
//!
//! In process (the layer over a `service_fn`, driven by `oneshot` on a 2-worker runtime),
//! each scenario judged only on an attempt during which the runtime's timers kept time
//! ([`timekeeping::judged`]). Knobs for measuring by hand: `S12_N` (the batch's size),
//! `S12_SEED`.
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
use http::{Request, Response};
use idle::{Seen, call, counts, route_with, tally, unloaded};
use shared_headers::server::{Admission, LayerStats, ResponseBody};
use timekeeping::judged;
use tokio::sync::Semaphore;
use tower::{ServiceExt, service_fn};

/// A handler of `workers` at a time, each answer `ms` long (a semaphore inside the handler),
/// behind `admission`; `bimodal`: one answer in 4 takes 3x as long.
fn route(
    admission: Admission,
    workers: usize,
    ms: u64,
    bimodal: bool,
) -> (impl Route<ResponseBody<String>> + use<>, LayerStats) {
    route_with(admission, workers, ms, bimodal.then_some((4, 3 * ms)))
}

/// `n` callers at once with `budget_ms` (if any): what each saw.
async fn batch<S: Route<B>, B: Send + 'static>(
    service: &S,
    n: usize,
    budget_ms: Option<u64>,
) -> Vec<Seen> {
    let calls: Vec<_> = (0..n)
        .map(|_| tokio::spawn(call(service.clone(), "/r", budget_ms)))
        .collect();
    let mut seen = Vec::new();
    for c in calls {
        seen.push(c.await.unwrap());
    }
    seen
}

/// `n` calls, random (Poisson) arrivals at `rate` a second from a fixed `seed`.
async fn random<S: Route<B>, B: Send + 'static>(
    service: &S,
    rate: f64,
    n: usize,
    seed: u64,
    budget_ms: Option<u64>,
) -> Vec<Seen> {
    let mut x = seed | 1;
    let start = Instant::now();
    let mut at = 0.0f64;
    let mut calls = Vec::with_capacity(n);
    for _ in 0..n {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let u = ((x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        at += -u.ln() / rate;
        tokio::time::sleep_until((start + Duration::from_secs_f64(at)).into()).await;
        calls.push((at, tokio::spawn(call(service.clone(), "/r", budget_ms))));
    }
    let mut seen = Vec::with_capacity(calls.len());
    let mut not_good = Vec::new();
    for (at, c) in calls {
        let s = c.await.unwrap();
        if !matches!(s, Seen::Good(_)) {
            not_good.push(format!("{:.0} ms: {s:?}", at * 1e3));
        }
        seen.push(s);
    }
    if !not_good.is_empty() {
        eprintln!("not good, by arrival since the load's start: {not_good:?}");
    }
    seen
}

// ---------------------------------------------------------------------------------------
// 1. One batch of callers with generous budgets after idle: slow start's cut trims it.
// ---------------------------------------------------------------------------------------

/// The 2-worker × 20 ms route behind `admission`, warmed by 30 lone calls, idle 1 s; then
/// `n` callers at once, each with a budget of `budget_ms` (10 s, an hour: hundreds of times
/// the whole batch's 20 ms × n / 2). None may be refused: must hold 3 (a batch at 0.8x or
/// below of callers with budgets over 5x the unloaded p99), and a refusal of a caller whose
/// wait fits its budget a thousand times over is a good caller lost.
async fn generous_batch_after_idle(
    admission: fn() -> Admission,
    n: usize,
    budget_ms: u64,
) -> Result<(), String> {
    let n = std::env::var("S12_N").map_or(n, |v| v.parse().unwrap());
    // Three fresh layers, one after the other (whether slow start cuts at the batch's
    // second delayed answer depends on which requests the handler's semaphore serves first).
    let mut rounds = Vec::new();
    let mut refused_all = 0;
    for _ in 0..ROUNDS {
        let (service, stats) = route(admission(), 2, 20, false);
        let alone = unloaded(&service, 30).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let seen = batch(&service, n, Some(budget_ms)).await;
        let (good, pg, refused, pr, out) = tally(&seen);
        refused_all += refused + out;
        rounds.push(format!(
            "[unloaded p99 {alone:?}: {good} good (p99 {pg:?}), {refused} refused (p99 {pr:?}), \
             {out} waited out; {}]",
            counts(&stats)
        ));
    }
    let figures = format!(
        "a batch of {n} after 1 s idle, {budget_ms} ms budgets, {ROUNDS} fresh layers: {}",
        rounds.join(" ")
    );
    eprintln!("{figures}");
    verdict!(
        refused_all == 0,
        "callers with {budget_ms} ms budgets refused in a batch after idle: {figures}"
    );
    Ok(())
}

/// Fresh layers a batch scenario runs on, one after the other.
const ROUNDS: usize = 3;

/// No limit given: 16 callers with 10 s budgets at once after idle. Held on 2b0e4f8 (0 of
/// 16, 3 layers, 3 runs: 12a7977's exemption); on 2386892, 9 of 16 refused at 42 ms p99 in
/// 4 of 4 runs (one layer each); 0 on 0a647d9.
#[test]
fn a_batch_of_16_with_10_s_budgets_after_idle_is_served_whole_with_no_limit() {
    judged(|| generous_batch_after_idle(Admission::new, 16, 10_000));
}

/// The same with an hour's budget.
#[test]
fn a_batch_of_16_with_an_hours_budget_after_idle_is_served_whole_with_no_limit() {
    judged(|| generous_batch_after_idle(Admission::new, 16, 3_600_000));
}

/// `limit(20)` (a ceiling over the capacity: slow start's guess under it).
#[test]
fn a_batch_of_16_with_10_s_budgets_after_idle_is_served_whole_with_limit_20() {
    judged(|| {
        generous_batch_after_idle(
            || Admission::new().limit(NonZeroUsize::new(20).unwrap()),
            16,
            10_000,
        )
    });
}

/// `limit(4)`, a limit the user gave (twice the handler's 2: slow start at its ceiling).
#[test]
fn a_batch_of_16_with_10_s_budgets_after_idle_is_served_whole_with_limit_4() {
    judged(|| {
        generous_batch_after_idle(
            || Admission::new().limit(NonZeroUsize::new(4).unwrap()),
            16,
            10_000,
        )
    });
}

/// 12 callers with 200 ms budgets (9x the unloaded p99, under the trim's ten no-load
/// durations once a cut comes 40 ms in): the whole batch takes 6 service times (120 ms).
/// Finding 1. Figures: 5-6 of 12 refused, refusals' p99 41.5-43.1 ms, in 8 of 9 fresh
/// layers over 3 runs on 2b0e4f8 (the other: 12 good); 0 of 12 in 3 of 3 on 0a647d9 (good
/// p99 127 ms, within the 200 ms budget).
#[test]
fn a_batch_of_12_with_200_ms_budgets_after_idle_is_served_whole_with_no_limit() {
    judged(|| generous_batch_after_idle(Admission::new, 12, 200));
}

/// The same with `limit(4)`, a limit the user gave (at its ceiling: no young bound at the
/// proven capacity, but slow start still cuts it to the handler's 2, and the trim reads the
/// busy spell).
/// Finding 1 with a limit the user gave: 5 of 12 refused at 42-43 ms p99 in 6 of 6 layers
/// over 2 runs on 2b0e4f8 (and on 2386892); 0 in 6 of 6 on 0a647d9.
#[test]
fn a_batch_of_12_with_200_ms_budgets_after_idle_is_served_whole_with_limit_4() {
    judged(|| {
        generous_batch_after_idle(
            || Admission::new().limit(NonZeroUsize::new(4).unwrap()),
            12,
            200,
        )
    });
}

/// Control: `limit(2)`, the handler's capacity (slow start never cuts it: no trim).
#[test]
#[ignore = "known limit, before this change too: 6 of 12 refused at arrival in each of 3 layers on 0a647d9 and on 2b0e4f8 alike (the young bound, twice the delay target, at the right limit)"]
fn a_batch_of_12_with_200_ms_budgets_after_idle_is_served_whole_with_limit_2() {
    judged(|| {
        generous_batch_after_idle(
            || Admission::new().limit(NonZeroUsize::new(2).unwrap()),
            12,
            200,
        )
    });
}

/// 10 callers with 150 ms budgets (7x the unloaded p99): the batch takes 100 ms.
#[test]
fn a_batch_of_10_with_150_ms_budgets_after_idle_is_served_whole_with_no_limit() {
    judged(|| generous_batch_after_idle(Admission::new, 10, 150));
}

/// Control: 8 at once (the spell's work under the burst margin at the cut).
#[test]
fn a_batch_of_8_with_10_s_budgets_after_idle_is_served_whole_with_no_limit() {
    judged(|| generous_batch_after_idle(Admission::new, 8, 10_000));
}

// ---------------------------------------------------------------------------------------
// 2. Cron batches of 200 ms budgets (10x the unloaded p99), 0.6 s apart (a quiet spell).
// ---------------------------------------------------------------------------------------

/// The 2-worker × 20 ms route behind `admission`, 30 lone calls, then 10 batches of `size`
/// callers at once 0.6 s apart (each one after a quiet spell), 200 ms budgets: none refused
/// (must hold 3: `size` × 20 ms / 2 every 0.6 s is 0.13x-0.27x) and the p99 of good answers
/// within what a batch takes at best and a margin (size / 2 service times, 2x).
async fn cron(admission: Admission, size: usize) -> Result<(), String> {
    let size = std::env::var("S12_N").map_or(size, |v| v.parse().unwrap());
    let (service, stats) = route(admission, 2, 20, false);
    let alone = unloaded(&service, 30).await;
    let start = Instant::now();
    let mut calls = Vec::new();
    for b in 0..10u32 {
        tokio::time::sleep_until((start + Duration::from_millis(600) * b).into()).await;
        for _ in 0..size {
            calls.push(tokio::spawn(call(service.clone(), "/r", Some(200))));
        }
    }
    let mut seen = Vec::new();
    for c in calls {
        seen.push(c.await.unwrap());
    }
    let each: Vec<usize> = seen
        .chunks(size)
        .map(|b| b.iter().filter(|s| !matches!(s, Seen::Good(_))).count())
        .collect();
    let (good, pg, refused, pr, out) = tally(&seen);
    let figures = format!(
        "10 batches of {size}, 0.6 s apart, 200 ms budgets (unloaded p99 {alone:?}): {good} good \
         (p99 {pg:?}), {refused} refused (p99 {pr:?}), {out} waited out; not good each batch \
         {each:?}; {}",
        counts(&stats)
    );
    eprintln!("{figures}");
    verdict!(
        alone * 5 <= Duration::from_millis(200),
        "budget under 5x: {figures}"
    );
    verdict!(refused + out == 0, "good callers refused: {figures}");
    Ok(())
}

#[test]
#[ignore = "known limit, before this change too: 14 of 80 refused at arrival on 0a647d9 (2 runs); 3-17 on 2b0e4f8 (4 runs)"]
fn cron_batches_of_8_after_quiet_spells_refuse_no_good_caller_with_no_limit() {
    judged(|| cron(Admission::new(), 8));
}

#[test]
#[ignore = "known limit, before this change too: 32-33 of 100 refused at arrival on 0a647d9 (2 runs); 7-35 on 2b0e4f8 (4 runs)"]
fn cron_batches_of_10_after_quiet_spells_refuse_no_good_caller_with_no_limit() {
    judged(|| cron(Admission::new(), 10));
}

#[test]
#[ignore = "known limit, before this change too: 89-93 of 160 refused on 0a647d9 (at arrival, p99 0.2 ms; 2 runs); 91-95 on 2b0e4f8, the refusals' p99 42 ms (the late refusals are a_batch_of_16_after_idle_is_refused_at_once's finding)"]
fn cron_batches_of_16_after_quiet_spells_refuse_no_good_caller_with_no_limit() {
    judged(|| cron(Admission::new(), 16));
}

#[test]
#[ignore = "known limit, before this change too: 14 of 80 refused on 0a647d9 (2 runs); 5-17 on 2b0e4f8 (4 runs)"]
fn cron_batches_of_8_after_quiet_spells_refuse_no_good_caller_with_limit_20() {
    judged(|| cron(Admission::new().limit(NonZeroUsize::new(20).unwrap()), 8));
}

#[test]
#[ignore = "known limit, before this change too: 33 of 100 refused on 0a647d9 (2 runs); 7-33 on 2b0e4f8"]
fn cron_batches_of_10_after_quiet_spells_refuse_no_good_caller_with_limit_20() {
    judged(|| cron(Admission::new().limit(NonZeroUsize::new(20).unwrap()), 10));
}

#[test]
#[ignore = "known limit, before this change too: 0-14 of 80 refused on 0a647d9 (2 runs); 0-14 on 2b0e4f8 (4 runs)"]
fn cron_batches_of_8_after_quiet_spells_refuse_no_good_caller_with_limit_4() {
    judged(|| cron(Admission::new().limit(NonZeroUsize::new(4).unwrap()), 8));
}

// ---------------------------------------------------------------------------------------
// 3. Random arrivals at 0.8x after a quiet spell, after a warm-up of lone calls.
// ---------------------------------------------------------------------------------------

/// A `workers` × `ms` route behind `admission` (`slow`: one answer in `slow.0` takes
/// `slow.1` ms), warmed by 30 lone calls (slow start proves at most 1 in flight), idle 1 s;
/// then random arrivals (seed `seed`) at `x` of the capacity for 2 s, budgets of `budget`
/// times the unloaded p99: none refused nor waited out (must hold 3).
async fn random_after_idle_with(
    admission: Admission,
    workers: usize,
    ms: u64,
    slow: Option<(u64, u64)>,
    x: f64,
    seed: u64,
    budget: u32,
) -> Result<(), String> {
    let seed = std::env::var("S12_SEED").map_or(seed, |v| v.parse().unwrap());
    let (service, stats) = route_with(admission, workers, ms, slow);
    let alone = unloaded(&service, 30).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mean = match slow {
        Some((every, slow)) => ((every - 1) * ms + slow) as f64 / every as f64,
        None => ms as f64,
    };
    let capacity = workers as f64 * 1000.0 / mean;
    let rate = x * capacity;
    let n = (rate * 2.0) as usize;
    let budget_ms = (alone * budget).as_millis() as u64;
    let seen = random(&service, rate, n, seed, Some(budget_ms)).await;
    let (good, pg, refused, pr, out) = tally(&seen);
    let figures = format!(
        "{workers} workers x {ms} ms (slow {slow:?}), random arrivals at {x}x ({rate:.0}/s, seed \
         {seed}) after 1 s idle, {budget_ms} ms budgets ({budget}x the unloaded p99 {alone:?}): \
         {good} good (p99 {pg:?}), {refused} refused (p99 {pr:?}), {out} waited out of {}; {}",
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

/// [`random_after_idle_with`], `bimodal`: one answer in 4 three times as long.
async fn random_after_idle(
    admission: Admission,
    workers: usize,
    ms: u64,
    bimodal: bool,
    x: f64,
    seed: u64,
    budget: u32,
) -> Result<(), String> {
    let slow = bimodal.then_some((4, 3 * ms));
    random_after_idle_with(admission, workers, ms, slow, x, seed, budget).await
}

#[test]
fn random_arrivals_at_0_8x_after_idle_refuse_no_good_caller_with_no_limit() {
    judged(|| random_after_idle(Admission::new(), 2, 20, false, 0.8, 7, 5));
}

/// Finding 2: 2 of 640 refused (arrived 21-35 ms into the load) in 4 of 4 runs on the
/// change (2386892 and 2b0e4f8); 0 in 2 runs on 0a647d9.
#[test]
fn random_arrivals_at_0_8x_after_idle_on_8_workers_refuse_no_good_caller_with_no_limit() {
    judged(|| random_after_idle(Admission::new(), 8, 20, false, 0.8, 7, 5));
}

#[test]
fn bimodal_random_arrivals_at_0_8x_after_idle_refuse_no_good_caller_with_no_limit() {
    judged(|| random_after_idle(Admission::new(), 2, 20, true, 0.8, 7, 5));
}

// ---------------------------------------------------------------------------------------
// 4. A burst under the capacity on a handler bigger than slow start proved.
// ---------------------------------------------------------------------------------------

/// An 8-worker × 20 ms handler (capacity 400/s) warmed by 30 lone calls, idle 1 s; then
/// `n` callers at once with budgets of 5x the unloaded p99 (the burst is `n` / 8 service
/// times of work: 0.9x of a second's capacity over `n` / 360 s): none refused.
async fn big_handler_burst(admission: Admission, n: usize) -> Result<(), String> {
    let n = std::env::var("S12_N").map_or(n, |v| v.parse().unwrap());
    let (service, stats) = route(admission, 8, 20, false);
    let alone = unloaded(&service, 30).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let budget_ms = (alone * 5).as_millis() as u64;
    let seen = batch(&service, n, Some(budget_ms)).await;
    let (good, pg, refused, pr, out) = tally(&seen);
    let figures = format!(
        "8 workers, a batch of {n} after 1 s idle, {budget_ms} ms budgets (5x the unloaded p99 \
         {alone:?}; the batch takes {} service times at the handler's capacity): {good} good \
         (p99 {pg:?}), {refused} refused (p99 {pr:?}), {out} waited out; {}",
        n.div_ceil(8),
        counts(&stats)
    );
    eprintln!("{figures}");
    verdict!(refused + out == 0, "good callers refused: {figures}");
    Ok(())
}

#[test]
#[ignore = "known limit, before this change too: 12 of 24 refused at arrival on 0a647d9 and on 2b0e4f8 alike (3 runs each)"]
fn a_burst_of_24_on_8_workers_after_idle_refuses_no_good_caller_with_no_limit() {
    judged(|| big_handler_burst(Admission::new(), 24));
}

// ---------------------------------------------------------------------------------------
// 5. Where a batch after idle is refused, the refusal comes at once (must hold 2).
// ---------------------------------------------------------------------------------------

/// The 2-worker × 20 ms route behind `admission`, 30 lone calls, idle 1 s, then `n` callers
/// at once with 200 ms budgets (10x the unloaded p99, under 10 needs: the delay target
/// bounds them): whoever is refused is refused within 10 ms of arrival (p99, must hold 2),
/// none waits out its budget. (How many are refused is not judged here: a batch of 16 on a
/// limit of 2 is 8 service times, and its refusals are the known limit of cron batches.)
async fn batch_refused_at_once(admission: fn() -> Admission, n: usize) -> Result<(), String> {
    let n = std::env::var("S12_N").map_or(n, |v| v.parse().unwrap());
    let mut rounds = Vec::new();
    let (mut slow, mut out_all) = (Duration::ZERO, 0);
    for _ in 0..ROUNDS {
        let (service, stats) = route(admission(), 2, 20, false);
        let alone = unloaded(&service, 30).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let seen = batch(&service, n, Some(200)).await;
        let (good, pg, refused, pr, out) = tally(&seen);
        slow = slow.max(pr);
        out_all += out;
        rounds.push(format!(
            "[unloaded p99 {alone:?}: {good} good (p99 {pg:?}), {refused} refused (p99 {pr:?}), \
             {out} waited out; {}]",
            counts(&stats)
        ));
    }
    let figures = format!(
        "a batch of {n} after 1 s idle, 200 ms budgets, {ROUNDS} fresh layers (refusals' bar \
         10 ms): {}",
        rounds.join(" ")
    );
    eprintln!("{figures}");
    verdict!(
        slow <= Duration::from_millis(10),
        "refusals too slow: {figures}"
    );
    verdict!(out_all == 0, "callers waited out: {figures}");
    Ok(())
}

/// Finding 1 (must hold 2: a refused caller is answered within 10 ms p99 of arrival):
/// on 2b0e4f8, 9 of 16 refused at 41.5-42.9 ms p99 in 8 of 9 layers over 3 runs (the
/// other: 4 refused in 8 µs); on 0a647d9, 3-4 refused in 8-14 µs, 3 of 3 layers.
#[test]
fn a_batch_of_16_after_idle_is_refused_at_once_with_no_limit() {
    judged(|| batch_refused_at_once(Admission::new, 16));
}

/// The same with `limit(20)`: 9 of 16 refused at 41-43 ms p99 in 8 of 9 layers on
/// 2b0e4f8; 4 refused in 10-28 µs, 3 of 3 layers, on 0a647d9.
#[test]
fn a_batch_of_16_after_idle_is_refused_at_once_with_limit_20() {
    judged(|| {
        batch_refused_at_once(
            || Admission::new().limit(NonZeroUsize::new(20).unwrap()),
            16,
        )
    });
}

/// Control: the user's right limit (2) is never cut by slow start (no answer is delayed
/// over the proven 2): no trim.
#[test]
fn a_batch_of_16_with_10_s_budgets_after_idle_is_served_whole_with_limit_2() {
    judged(|| {
        generous_batch_after_idle(
            || Admission::new().limit(NonZeroUsize::new(2).unwrap()),
            16,
            10_000,
        )
    });
}

#[test]
fn a_batch_of_12_with_10_s_budgets_after_idle_is_served_whole_with_no_limit() {
    judged(|| generous_batch_after_idle(Admission::new, 12, 10_000));
}

/// Finding 2, another seed: 3-4 of 640 refused (23-33 ms in), 3 runs; 0 on 0a647d9.
#[test]
fn random_arrivals_at_0_8x_after_idle_on_8_workers_refuse_no_good_caller_with_no_limit_seed_8() {
    judged(|| random_after_idle(Admission::new(), 8, 20, false, 0.8, 8, 5));
}

/// Finding 2, another seed: 3 of 640 refused (23-31 ms in), 3 runs; 0 on 0a647d9.
#[test]
fn random_arrivals_at_0_8x_after_idle_on_8_workers_refuse_no_good_caller_with_no_limit_seed_9() {
    judged(|| random_after_idle(Admission::new(), 8, 20, false, 0.8, 9, 5));
}

#[test]
fn random_arrivals_at_0_8x_after_idle_on_4_workers_refuse_no_good_caller_with_no_limit() {
    judged(|| random_after_idle(Admission::new(), 4, 20, false, 0.8, 7, 5));
}

#[test]
fn random_arrivals_at_0_5x_after_idle_on_8_workers_refuse_no_good_caller_with_no_limit() {
    judged(|| random_after_idle(Admission::new(), 8, 20, false, 0.5, 7, 5));
}

/// Finding 2 with `limit(20)`: 2 of 640 refused (21-35 ms in), 3 runs; 0 on 0a647d9.
#[test]
fn random_arrivals_at_0_8x_after_idle_on_8_workers_refuse_no_good_caller_with_limit_20() {
    judged(|| {
        random_after_idle(
            Admission::new().limit(NonZeroUsize::new(20).unwrap()),
            8,
            20,
            false,
            0.8,
            7,
            5,
        )
    });
}

// ---------------------------------------------------------------------------------------
// 6. A route whose answers vary (5 ms, one in 4 at 60 ms) on 4 workers, after idle.
// ---------------------------------------------------------------------------------------

#[test]
#[ignore = "known limit, before this change too (not reliable): 0-8 of 341 refused on 0a647d9 (2 runs), 0-1 on 2b0e4f8 (3 runs), mid-load (1.5-1.9 s in)"]
fn bimodal_5_60_random_arrivals_at_0_8x_after_idle_refuse_no_good_caller_with_no_limit() {
    judged(|| random_after_idle_with(Admission::new(), 4, 5, Some((4, 60)), 0.8, 7, 5));
}

/// A batch of `n` callers with 10 s budgets after idle on the 4-worker 5 / 60 ms route.
async fn bimodal_generous_batch(admission: Admission, n: usize) -> Result<(), String> {
    let n = std::env::var("S12_N").map_or(n, |v| v.parse().unwrap());
    let (service, stats) = route_with(admission, 4, 5, Some((4, 60)));
    let alone = unloaded(&service, 30).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let seen = batch(&service, n, Some(10_000)).await;
    let (good, pg, refused, pr, out) = tally(&seen);
    let figures = format!(
        "4 workers x 5 ms (1 in 4 at 60 ms), a batch of {n} after 1 s idle, 10 s budgets \
         (unloaded p99 {alone:?}): {good} good (p99 {pg:?}), {refused} refused (p99 {pr:?}), \
         {out} waited out; {}",
        counts(&stats)
    );
    eprintln!("{figures}");
    verdict!(
        refused + out == 0,
        "callers with 10 s budgets refused: {figures}"
    );
    Ok(())
}

#[test]
fn a_bimodal_route_serves_a_batch_of_32_with_10_s_budgets_after_idle_with_no_limit() {
    judged(|| bimodal_generous_batch(Admission::new(), 32));
}

// ---------------------------------------------------------------------------------------
// 7. The generous batch after a light load that proved 2 in flight.
// ---------------------------------------------------------------------------------------

/// The 2-worker × 20 ms route, no limit, 30 lone calls then 0.5 s at 0.5x (evenly spaced,
/// 200 ms budgets: slow start proves 2), idle 1 s, then 16 callers at once with 10 s
/// budgets: none refused.
#[test]
fn a_batch_of_16_with_10_s_budgets_after_a_light_load_and_idle_is_served_whole() {
    judged(|| async {
        let (service, stats) = route(Admission::new(), 2, 20, false);
        let alone = unloaded(&service, 30).await;
        let start = Instant::now();
        let mut warm = Vec::new();
        for i in 0..25u32 {
            tokio::time::sleep_until((start + Duration::from_millis(20) * i).into()).await;
            warm.push(tokio::spawn(call(service.clone(), "/r", Some(200))));
        }
        for w in warm {
            let s = w.await.unwrap();
            verdict!(matches!(s, Seen::Good(_)), "at 0.5x: {s:?}");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let seen = batch(&service, 16, Some(10_000)).await;
        let (good, pg, refused, pr, out) = tally(&seen);
        let figures = format!(
            "after 0.5 s at 0.5x and 1 s idle, a batch of 16 with 10 s budgets (unloaded p99 \
             {alone:?}): {good} good (p99 {pg:?}), {refused} refused (p99 {pr:?}), {out} \
             waited out; {}",
            counts(&stats)
        );
        eprintln!("{figures}");
        verdict!(
            refused + out == 0,
            "callers with 10 s budgets refused: {figures}"
        );
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------
// 8. A mixed batch: callers without a budget beside callers with an hour's.
// ---------------------------------------------------------------------------------------

/// The 2-worker × 20 ms route, no limit, 30 lone calls, idle 1 s, then 8 callers without a
/// budget and 8 with an hour's, at once (interleaved): no caller with a budget refused
/// (must hold 3), and whoever is refused is refused within 10 ms (must hold 2).
#[test]
fn a_mixed_batch_after_idle_refuses_no_caller_with_an_hours_budget() {
    judged(|| async {
        let mut rounds = Vec::new();
        let (mut refused_with, mut slow) = (0, Duration::ZERO);
        for _ in 0..ROUNDS {
            let (service, stats) = route(Admission::new(), 2, 20, false);
            let alone = unloaded(&service, 30).await;
            tokio::time::sleep(Duration::from_secs(1)).await;
            let calls: Vec<_> = (0..16)
                .map(|i| {
                    let budget = (i % 2 == 1).then_some(3_600_000);
                    (budget, tokio::spawn(call(service.clone(), "/r", budget)))
                })
                .collect();
            let (mut with, mut without) = (Vec::new(), Vec::new());
            for (budget, c) in calls {
                let s = c.await.unwrap();
                match budget {
                    Some(_) => with.push(s),
                    None => without.push(s),
                }
            }
            let (g1, pg1, r1, pr1, o1) = tally(&with);
            let (g0, pg0, r0, pr0, o0) = tally(&without);
            refused_with += r1 + o1;
            slow = slow.max(pr0).max(pr1);
            rounds.push(format!(
                "[unloaded p99 {alone:?}: with an hour's budget {g1} good (p99 {pg1:?}), {r1} \
                 refused (p99 {pr1:?}), {o1} waited out; without a budget {g0} good (p99 \
                 {pg0:?}), {r0} refused (p99 {pr0:?}), {o0} waited out; {}]",
                counts(&stats)
            ));
        }
        let figures = format!(
            "a batch of 16 after 1 s idle, 8 with an hour's budget and 8 without, {ROUNDS} fresh \
             layers: {}",
            rounds.join(" ")
        );
        eprintln!("{figures}");
        verdict!(
            refused_with == 0,
            "callers with an hour's budget refused: {figures}"
        );
        verdict!(
            slow <= Duration::from_millis(10),
            "refusals too slow: {figures}"
        );
        Ok(())
    });
}

/// Control: a batch of 16 callers without a budget after idle (the delay target bounds
/// them: refusals allowed, at once).
#[test]
fn a_batch_of_16_without_a_budget_after_idle_is_refused_at_once() {
    judged(|| async {
        let (service, stats) = route(Admission::new(), 2, 20, false);
        let alone = unloaded(&service, 30).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let seen = batch(&service, 16, None).await;
        let (good, pg, refused, pr, out) = tally(&seen);
        let figures = format!(
            "a batch of 16 without a budget after 1 s idle (unloaded p99 {alone:?}): {good} good \
             (p99 {pg:?}), {refused} refused (p99 {pr:?}), {out} other; {}",
            counts(&stats)
        );
        eprintln!("{figures}");
        verdict!(
            pr <= Duration::from_millis(10),
            "refusals too slow: {figures}"
        );
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------
// 9. Goodput beside tower's ConcurrencyLimit + LoadShed (finding 2's shape).
// ---------------------------------------------------------------------------------------

/// Finding 2's shape (8 workers × 20 ms, random arrivals at 0.8x after 1 s idle, seed 7,
/// budgets of 5x the unloaded p99) through tower's `LoadShed` over `ConcurrencyLimit(8)`
/// (the handler's capacity: the right limit, given): good answers within the budget. The
/// layer with no limit must serve at least as many (its refusals cost no goodput here).
#[test]
fn random_arrivals_at_0_8x_after_idle_on_8_workers_lose_no_goodput_beside_tower() {
    judged(|| async {
        let seed = 7;
        let rate = 0.8 * 400.0;
        let n = (rate * 2.0) as usize;
        // Tower's.
        let sem = Arc::new(Semaphore::new(8));
        let tower_service = tower::ServiceBuilder::new()
            .load_shed()
            .concurrency_limit(8)
            .service(service_fn(move |_req: Request<()>| {
                let sem = sem.clone();
                async move {
                    let _worker = sem.acquire().await.unwrap();
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    Ok::<_, Infallible>(Response::new(String::new()))
                }
            }));
        let mut alone = Vec::new();
        for _ in 0..30 {
            let t0 = Instant::now();
            tower_service
                .clone()
                .oneshot(request("/r", None))
                .await
                .unwrap();
            alone.push(t0.elapsed());
        }
        let budget = p99(alone) * 5;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let mut x = seed | 1u64;
        let start = Instant::now();
        let mut at = 0.0f64;
        let mut calls = Vec::with_capacity(n);
        for _ in 0..n {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let u =
                ((x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
            at += -u.ln() / rate;
            tokio::time::sleep_until((start + Duration::from_secs_f64(at)).into()).await;
            let call = tower_service.clone().oneshot(request("/r", None));
            calls.push(tokio::spawn(async move {
                let t0 = Instant::now();
                let ok = call.await.is_ok();
                ok && t0.elapsed() <= budget
            }));
        }
        let mut tower_good = 0;
        for c in calls {
            tower_good += usize::from(c.await.unwrap());
        }
        // The layer's, no limit.
        let (service, stats) = route(Admission::new(), 8, 20, false);
        let alone = unloaded(&service, 30).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let budget_ms = (alone * 5).as_millis() as u64;
        let seen = random(&service, rate, n, seed, Some(budget_ms)).await;
        let (good, pg, refused, pr, out) = tally(&seen);
        let figures = format!(
            "8 workers, random arrivals at 0.8x after 1 s idle (seed {seed}): tower's \
             LoadShed + ConcurrencyLimit(8) {tower_good} good of {n} (budget {budget:?}); the \
             layer, no limit, {good} good (p99 {pg:?}), {refused} refused (p99 {pr:?}), {out} \
             waited out ({budget_ms} ms budgets); {}",
            counts(&stats)
        );
        eprintln!("{figures}");
        verdict!(good >= tower_good, "goodput under tower's: {figures}");
        Ok(())
    });
}
