//! A hostile review of the after-idle change (c95c177, 2386892): slow start's trim reads the
//! busy spell since a quiet spell (`Limiter::overloaded`), an overload found there ends the
//! young bound, a waiter's predicted wait counts the requests in flight over the limit, and
//! a young spell under slow start's guess reads and predicts at the proven capacity.
//!
//! In process (the layer over a `service_fn`, driven by `oneshot` on a 2-worker runtime),
//! each scenario judged only on an attempt during which the runtime's timers kept time
//! ([`timekeeping::judged`]). Knobs for measuring by hand: `S12_N` (the batch's size).
#![cfg(feature = "server")]

#[path = "support/callers.rs"]
mod callers;

#[macro_use]
#[path = "support/timekeeping.rs"]
mod timekeeping;

use std::convert::Infallible;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use callers::{Route, p99, request};
use http::{Request, Response, StatusCode};
use shared_headers::deadline::BudgetHeader;
use shared_headers::server::{Admission, LayerStats, ResponseBody, SharedHeadersLayer};
use timekeeping::judged;
use tokio::sync::Semaphore;
use tower::{Layer, ServiceExt, service_fn};

/// What a caller saw.
#[derive(Clone, Copy, Debug)]
enum Seen {
    /// 200 within the budget, after this long.
    Good(Duration),
    /// Refused (503 with `retry-after`), after this long.
    Refused(Duration),
    /// Anything else: a timeout answer, or an answer past the budget (after this long).
    WaitedOut(#[allow(dead_code)] Duration),
}

/// One call of `path` with `budget_ms` (if any): what its caller saw.
async fn call<S: Route<B>, B: Send + 'static>(
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
fn tally(seen: &[Seen]) -> (usize, Duration, usize, Duration, usize) {
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

fn layer(admission: Admission) -> SharedHeadersLayer {
    SharedHeadersLayer::new()
        .caller_budget(BudgetHeader::envoy_expected_rq_timeout_ms())
        .admission(admission)
}

fn counts(stats: &LayerStats) -> String {
    let c = stats.admission_counts();
    format!(
        "overloaded {}, shed {}, shed waiting {}, queued {}, limit {}",
        c.overloaded, c.shed, c.shed_waiting, c.queued, c.limit
    )
}

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

/// [`route`] with one answer in `slow.0` taking `slow.1` ms.
fn route_with(
    admission: Admission,
    workers: usize,
    ms: u64,
    slow: Option<(u64, u64)>,
) -> (impl Route<ResponseBody<String>> + use<>, LayerStats) {
    let layer = layer(admission);
    let stats = layer.stats();
    let sem = Arc::new(Semaphore::new(workers));
    let n = Arc::new(AtomicU64::new(0));
    let service = layer.layer(service_fn(move |_req: Request<()>| {
        let sem = sem.clone();
        let i = n.fetch_add(1, Ordering::Relaxed);
        let ms = match slow {
            Some((every, slow)) if i % every == every - 1 => slow,
            _ => ms,
        };
        async move {
            let _worker = sem.acquire().await.unwrap();
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok::<_, Infallible>(Response::new(String::new()))
        }
    }));
    (service, stats)
}

/// One closed-loop caller, `n` calls one at a time (1 s budgets): the p99 of its answers.
async fn unloaded<S: Route<B>, B>(service: &S, n: usize) -> Duration {
    let mut alone = Vec::new();
    for _ in 0..n {
        let t0 = Instant::now();
        let res = service
            .clone()
            .oneshot(request("/r", Some("1000")))
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        alone.push(t0.elapsed());
    }
    p99(alone)
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
    admission: Admission,
    n: usize,
    budget_ms: u64,
) -> Result<(), String> {
    let n = std::env::var("S12_N").map_or(n, |v| v.parse().unwrap());
    // Three fresh layers, one after the other (whether slow start cuts at the batch's
    // second delayed answer depends on which requests the handler's semaphore serves first).
    let mut rounds = Vec::new();
    let mut refused_all = 0;
    for _ in 0..ROUNDS {
        let (service, stats) = route(admission.clone(), 2, 20, false);
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

/// No limit given: 16 callers with 10 s budgets at once after idle.
#[test]
fn a_batch_of_16_with_10_s_budgets_after_idle_is_served_whole_with_no_limit() {
    judged(|| generous_batch_after_idle(Admission::new(), 16, 10_000));
}

/// The same with an hour's budget.
#[test]
fn a_batch_of_16_with_an_hours_budget_after_idle_is_served_whole_with_no_limit() {
    judged(|| generous_batch_after_idle(Admission::new(), 16, 3_600_000));
}

/// `limit(20)` (a ceiling over the capacity: slow start's guess under it).
#[test]
fn a_batch_of_16_with_10_s_budgets_after_idle_is_served_whole_with_limit_20() {
    judged(|| {
        generous_batch_after_idle(
            Admission::new().limit(NonZeroUsize::new(20).unwrap()),
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
            Admission::new().limit(NonZeroUsize::new(4).unwrap()),
            16,
            10_000,
        )
    });
}

/// Control: 8 at once (the spell's work under the burst margin at the cut).
#[test]
fn a_batch_of_8_with_10_s_budgets_after_idle_is_served_whole_with_no_limit() {
    judged(|| generous_batch_after_idle(Admission::new(), 8, 10_000));
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
fn cron_batches_of_8_after_quiet_spells_refuse_no_good_caller_with_no_limit() {
    judged(|| cron(Admission::new(), 8));
}

#[test]
fn cron_batches_of_10_after_quiet_spells_refuse_no_good_caller_with_no_limit() {
    judged(|| cron(Admission::new(), 10));
}

#[test]
fn cron_batches_of_16_after_quiet_spells_refuse_no_good_caller_with_no_limit() {
    judged(|| cron(Admission::new(), 16));
}

#[test]
fn cron_batches_of_8_after_quiet_spells_refuse_no_good_caller_with_limit_20() {
    judged(|| cron(Admission::new().limit(NonZeroUsize::new(20).unwrap()), 8));
}

#[test]
fn cron_batches_of_10_after_quiet_spells_refuse_no_good_caller_with_limit_20() {
    judged(|| cron(Admission::new().limit(NonZeroUsize::new(20).unwrap()), 10));
}

#[test]
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
async fn batch_refused_at_once(admission: Admission, n: usize) -> Result<(), String> {
    let n = std::env::var("S12_N").map_or(n, |v| v.parse().unwrap());
    let mut rounds = Vec::new();
    let (mut slow, mut out_all) = (Duration::ZERO, 0);
    for _ in 0..ROUNDS {
        let (service, stats) = route(admission.clone(), 2, 20, false);
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
    verdict!(slow <= Duration::from_millis(10), "refusals too slow: {figures}");
    verdict!(out_all == 0, "callers waited out: {figures}");
    Ok(())
}

#[test]
fn a_batch_of_16_after_idle_is_refused_at_once_with_no_limit() {
    judged(|| batch_refused_at_once(Admission::new(), 16));
}

#[test]
fn a_batch_of_16_after_idle_is_refused_at_once_with_limit_20() {
    judged(|| batch_refused_at_once(Admission::new().limit(NonZeroUsize::new(20).unwrap()), 16));
}

/// Control: the user's right limit (2) is never cut by slow start (no answer is delayed
/// over the proven 2): no trim.
#[test]
fn a_batch_of_16_with_10_s_budgets_after_idle_is_served_whole_with_limit_2() {
    judged(|| {
        generous_batch_after_idle(
            Admission::new().limit(NonZeroUsize::new(2).unwrap()),
            16,
            10_000,
        )
    });
}

#[test]
fn a_batch_of_12_with_10_s_budgets_after_idle_is_served_whole_with_no_limit() {
    judged(|| generous_batch_after_idle(Admission::new(), 12, 10_000));
}

#[test]
fn random_arrivals_at_0_8x_after_idle_on_8_workers_refuse_no_good_caller_with_no_limit_seed_8() {
    judged(|| random_after_idle(Admission::new(), 8, 20, false, 0.8, 8, 5));
}

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
        let figures = format!(
            "a batch of 16 after 1 s idle (unloaded p99 {alone:?}): with an hour's budget {g1} \
             good (p99 {pg1:?}), {r1} refused (p99 {pr1:?}), {o1} waited out; without a budget \
             {g0} good (p99 {pg0:?}), {r0} refused (p99 {pr0:?}), {o0} waited out; {}",
            counts(&stats)
        );
        eprintln!("{figures}");
        verdict!(
            r1 + o1 == 0,
            "callers with an hour's budget refused: {figures}"
        );
        verdict!(
            pr0.max(pr1) <= Duration::from_millis(10),
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
