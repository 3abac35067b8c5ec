//! A hostile review of the sixth review's fix (merge `3cbe62b`): a caller the delay target
//! bounds (no budget, or one under ten times the route's need) is judged, after a quiet
//! spell of 0.5 s, by the busy spell (`Offer::spell`): the requests counted since, each one
//! at the *asking route's* floor (the least answer so far), over the spell's time.
//!
//! Fixed since (docs::admission, the seventh review): each request counted at its own
//! route's floor, the spell's work forgotten when the window restarts, the spell only
//! adding to the window's read, and a young spell (under 100 ms) bounded by twice the
//! delay target alone. The shapes that were over their bars before the sixth review's fix
//! too are ignored with their figures.
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
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use callers::{Route, p99, request};
use http::{Request, Response};
use idle::{Seen, call, layer, tally, unloaded, unloaded_path};
use shared_headers::server::Admission;
use timekeeping::judged;
use tokio::sync::Semaphore;
use tower::{Layer, ServiceExt, service_fn};

/// `rate` calls a second of `path`, evenly spaced (open loop), for `len`.
async fn load<S: Route<B>, B: Send + 'static>(
    service: &S,
    path: &'static str,
    rate: f64,
    len: Duration,
    budget_ms: Option<u64>,
) -> Vec<Seen> {
    let start = Instant::now();
    let n = (rate * len.as_secs_f64()) as u64;
    let mut calls = Vec::with_capacity(n as usize);
    for i in 0..n {
        tokio::time::sleep_until((start + Duration::from_secs_f64(i as f64 / rate)).into()).await;
        calls.push(tokio::spawn(call(service.clone(), path, budget_ms)));
    }
    let mut seen = Vec::with_capacity(calls.len());
    for c in calls {
        seen.push(c.await.unwrap());
    }
    seen
}

/// `n` calls of `path`, random (Poisson) arrivals at `rate` a second from a fixed `seed`.
async fn random<S: Route<B>, B: Send + 'static>(
    service: &S,
    path: &'static str,
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
        // xorshift64*
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let u = ((x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        at += -u.ln() / rate;
        tokio::time::sleep_until((start + Duration::from_secs_f64(at)).into()).await;
        calls.push(tokio::spawn(call(service.clone(), path, budget_ms)));
    }
    let mut seen = Vec::with_capacity(calls.len());
    for c in calls {
        seen.push(c.await.unwrap());
    }
    seen
}

// ---------------------------------------------------------------------------------------
// 1. Cron-like batches just over the quiet spell apart.
// ---------------------------------------------------------------------------------------

/// The 2-worker × 20 ms route behind `admission`, warmed by 30 lone calls; then `batches`
/// batches of `size` callers at once (a periodic job fanning out), `gap` apart, each caller
/// with a budget of `budget_ms`. Average load: `size` × 20 ms over 2 workers every `gap`.
async fn batches(
    admission: Admission,
    size: usize,
    gap: Duration,
    batches: usize,
    budget_ms: u64,
    judge_from: usize,
) -> Result<(), String> {
    let size = std::env::var("S10_BATCH").map_or(size, |v| v.parse().unwrap());
    let workers = Arc::new(Semaphore::new(2));
    let service = layer(admission).layer(service_fn(move |_req: Request<()>| {
        let workers = workers.clone();
        async move {
            let _worker = workers.acquire().await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok::<_, Infallible>(Response::new(String::new()))
        }
    }));
    let alone = unloaded(&service, 30).await;
    let start = Instant::now();
    let mut calls = Vec::new();
    for b in 0..batches {
        tokio::time::sleep_until((start + gap * b as u32).into()).await;
        for _ in 0..size {
            calls.push(tokio::spawn(call(service.clone(), "/r", Some(budget_ms))));
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
    eprintln!("not good, each batch: {each:?}");
    let seen = seen.split_off(size * judge_from);
    let (good, pg, refused, _, out) = tally(&seen);
    let load = size as f64 * 0.020 / 2.0 / gap.as_secs_f64();
    let figures = format!(
        "{batches} batches of {size} (judged from batch {judge_from}) at once every {gap:?} (load {load:.2}x), budget {budget_ms} ms \
         ({:.1}x the unloaded p99 {alone:?}): {good} good (p99 {pg:?}), {refused} refused, \
         {out} waited out of {}",
        budget_ms as f64 / alone.as_secs_f64() / 1e3,
        seen.len()
    );
    eprintln!("{figures}");
    verdict!(
        alone * 5 <= Duration::from_millis(budget_ms),
        "budget under 5x the unloaded p99, not must hold 3's caller: {figures}"
    );
    verdict!(
        refused == 0 && out == 0,
        "good callers refused at {load:.2}x: {figures}"
    );
    // A batch of 6 on a handler that takes 2 is answered in 3 service times at best, 3x the
    // unloaded p99 itself (60-65 ms measured against a bar of 63-66): judged at 5x, the
    // review tests' margin, which a queue held to the callers' budgets (9x) still fails.
    verdict!(
        pg <= alone * 5,
        "p99 of good answers over 5x the unloaded p99 (must hold 2, the review tests' margin): {figures}"
    );
    Ok(())
}

/// Must hold 3: 0 refusals at 0.8x load or below of callers whose budget is >= 5x the
/// route's unloaded p99. Batches of 6 at once every 0.6 s are 0.1x; each caller would wait
/// at most two rounds of 20 ms (60 ms of a 200 ms budget). Each batch begins a new busy
/// spell (over 0.5 s since the last request that found the permits taken), and the spell
/// reads its own batch, counted in no time, as 1.5-2x the limit: the 5th and 6th callers of
/// every batch are refused. Figures: 19-20 of 60 refused in 4 runs (on `5ef0607`, before
/// the spell: 0 of 60, p99 of good answers 64 ms, within 3x the unloaded p99 too).
#[test]
fn cron_batches_just_over_the_quiet_spell_apart_refuse_no_good_caller_with_the_right_limit() {
    judged(|| {
        batches(
            Admission::new().limit(NonZeroUsize::new(2).unwrap()),
            6,
            Duration::from_millis(600),
            10,
            200,
            0,
        )
    });
}

/// The same with no limit (the limit adapts). Held: 0 of 60 in 4 runs (batches of 10: 55
/// of 100 refused, 0 on `5ef0607`, but there the p99 of good answers is 107 ms, over must
/// hold 2's 3x).
#[test]
fn cron_batches_just_over_the_quiet_spell_apart_refuse_no_good_caller_with_no_limit() {
    judged(|| batches(Admission::new(), 6, Duration::from_millis(600), 10, 200, 0));
}

/// Control: the same batches 0.4 s apart (no quiet spell between them) refuse nobody after
/// the first batch (the first, after the warm-up's quiet, is read as the 0.6 s ones are).
#[test]
fn cron_batches_under_the_quiet_spell_apart_refuse_no_good_caller_with_the_right_limit() {
    judged(|| {
        batches(
            Admission::new().limit(NonZeroUsize::new(2).unwrap()),
            6,
            Duration::from_millis(400),
            10,
            200,
            1,
        )
    });
}

// ---------------------------------------------------------------------------------------
// 2. A route with a fast answer now and then (a cache hit): its floor is that answer.
// ---------------------------------------------------------------------------------------

/// Must hold 2's three bars over one load's callers: `Err` with the figures when one fails.
fn bars(what: &str, seen: &[Seen], unloaded: Duration, times: u32) -> Result<(), String> {
    let (n, pg, r, pr, out) = tally(seen);
    let figures = format!(
        "{what}: {n} good (p99 {pg:?}, bar {times}x the unloaded p99 {unloaded:?}), {r} refused \
         (p99 {pr:?}, bar 10 ms), {out} waited out of {}",
        seen.len()
    );
    eprintln!("{figures}");
    verdict!(
        pg <= unloaded * times,
        "p99 of good answers over the bar: {figures}"
    );
    verdict!(
        pr <= Duration::from_millis(10),
        "refusals too slow: {figures}"
    );
    verdict!(out * 50 <= seen.len(), "over 2% waited out: {figures}");
    Ok(())
}

/// The overload example's route (2 workers × 20 ms) where one request in `hit_every` is a
/// cache hit answered at once (no worker), behind `admission`: 30 lone calls (the unloaded
/// p99, the capacity: 2 over the mean answer), 0.5 s at 0.5x, idle 1 s, then 2x for 2 s
/// of callers with 200 ms budgets (under ten times the route's need: judged by the spell).
async fn cache_hits_after_idle(
    admission: Admission,
    hit_every: u64,
    times: u32,
) -> Result<(), String> {
    let workers = Arc::new(Semaphore::new(2));
    let n = Arc::new(AtomicU64::new(0));
    let service = layer(admission).layer(service_fn(move |_req: Request<()>| {
        let workers = workers.clone();
        let hit = n.fetch_add(1, Ordering::Relaxed) % hit_every == hit_every - 1;
        async move {
            if !hit {
                let _worker = workers.acquire().await.unwrap();
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Ok::<_, Infallible>(Response::new(String::new()))
        }
    }));
    let mut alone = Vec::new();
    for _ in 0..30 {
        let t0 = Instant::now();
        let seen = call(service.clone(), "/r", Some(1000)).await;
        verdict!(matches!(seen, Seen::Good(_)), "unloaded: {seen:?}");
        alone.push(t0.elapsed());
    }
    let capacity = 2.0 * alone.len() as f64 / alone.iter().sum::<Duration>().as_secs_f64();
    let unloaded = p99(alone);
    let warm = load(
        &service,
        "/r",
        0.5 * capacity,
        Duration::from_millis(500),
        Some(200),
    )
    .await;
    verdict!(
        warm.iter().all(|s| matches!(s, Seen::Good(_))),
        "at 0.5x: {warm:?}"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let two = load(
        &service,
        "/r",
        2.0 * capacity,
        Duration::from_secs(2),
        Some(200),
    )
    .await;
    let (first, second) = two.split_at(two.len() / 2);
    let (a, b) = (tally(first), tally(second));
    eprintln!(
        "first second: {} good (p99 {:?}), {} refused, {} out; second second: {} good (p99 \
         {:?}), {} refused, {} out",
        a.0, a.1, a.2, a.4, b.0, b.1, b.2, b.4
    );
    bars(
        &format!("2x after 1 s idle, 1 in {hit_every} a cache hit (capacity {capacity:.0}/s)"),
        &two,
        unloaded,
        times,
    )
}

/// Must hold 2 on s9_45_review's scenario, the route answering 1 request in 5 from a cache
/// at once: the floor (least answer so far) is the cache hit's microseconds, the spell
/// counts each request at it, and the 2x overload after idle reads as a burst for the
/// spell's whole two seconds (the window, which counts each request at the route's need,
/// is not read meanwhile): the queue stands at the callers' budget, as before the fix.
/// Figures (4 runs): p99 of good answers 162-166 ms in the first second and 159-164 ms in
/// the second (bar 3x 21-23 ms); on `5ef0607` 163-164 ms in the first second but 39-42 ms
/// in the second (the window reads the overload after about a second; the spell, which
/// replaces it for two, never does).
#[test]
#[ignore = "known limit: p99 of good answers 163-164 ms in the first second, 38-43 ms in the second (3 runs; 163 / 39-42 before the sixth review's fix): the spell counts a request at its route's no-load duration, near 0 here; the window reads the overload after about a second"]
fn an_overload_after_idle_of_a_route_with_cache_hits_queues_no_caller_to_its_deadline() {
    judged(|| cache_hits_after_idle(Admission::new().limit(NonZeroUsize::new(2).unwrap()), 5, 3));
}

/// The same with no limit (judged at 5x, as s9_45_review's no-limit leaf). Not the sixth
/// review's doing: the tree before it (`5ef0607`) failed it alike (p99 196-199 ms in both
/// seconds, 34-43 waited out of 470-475); ignored, its figures kept.
#[test]
#[ignore = "not the spell's: p99 of good answers 195-198 ms at 2x after idle before and after 3cbe62b"]
fn an_overload_after_idle_of_a_route_with_cache_hits_queues_no_caller_to_its_deadline_with_no_limit()
 {
    judged(|| cache_hits_after_idle(Admission::new(), 5, 5));
}

// ---------------------------------------------------------------------------------------
// 3. Two routes, one limiter: a fast route's requests counted at the slow route's floor.
// ---------------------------------------------------------------------------------------

/// `/db` (2 workers × 20 ms) at `db_load` of its capacity and `/ping` (answered at once) at
/// `ping_rate` a second, both with 200 ms budgets, behind `admission`, after each route
/// warmed by lone calls and 1 s idle, for 2 s: no `/db` caller refused (must hold 3).
async fn two_routes(
    admission: Admission,
    db_load: f64,
    ping_rate: f64,
    seed: u64,
) -> Result<(), String> {
    let ping_rate = std::env::var("S10_PING").map_or(ping_rate, |v| v.parse().unwrap());
    let db_load = std::env::var("S10_DB").map_or(db_load, |v| v.parse().unwrap());
    let seed = std::env::var("S10_SEED").map_or(seed, |v| v.parse().unwrap());
    let workers = Arc::new(Semaphore::new(2));
    let service = layer(admission).layer(service_fn(move |req: Request<()>| {
        let workers = workers.clone();
        let db = req.uri().path() == "/db";
        async move {
            if db {
                let _worker = workers.acquire().await.unwrap();
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Ok::<_, Infallible>(Response::new(String::new()))
        }
    }));
    let alone = unloaded_path(&service, "/db", 30).await;
    let _ = unloaded_path(&service, "/ping", 30).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let len = Duration::from_secs(2);
    let n = (db_load * 100.0 * len.as_secs_f64()) as usize;
    let (db, ping) = tokio::join!(
        random(&service, "/db", db_load * 100.0, n, seed, Some(200)),
        async {
            if ping_rate > 0.0 {
                load(&service, "/ping", ping_rate, len, Some(200)).await
            } else {
                Vec::new()
            }
        },
    );
    let (good, pg, refused, _, out) = tally(&db);
    let (pgood, ppg, prefused, _, pout) = tally(&ping);
    let figures = format!(
        "/db at {db_load}x, random arrivals (seed {seed}) (unloaded p99 {alone:?}, budget 200 ms): {good} good (p99 {pg:?}), \
         {refused} refused, {out} waited out of {}; /ping at {ping_rate}/s: {pgood} good (p99 \
         {ppg:?}), {prefused} refused, {pout} waited out of {}",
        db.len(),
        ping.len()
    );
    eprintln!("{figures}");
    verdict!(
        alone * 5 <= Duration::from_millis(200),
        "budget under 5x: {figures}"
    );
    verdict!(
        refused + out == 0,
        "/db callers refused at {db_load}x: {figures}"
    );
    Ok(())
}

/// Must hold 3 with the right limit for the database (2): `/db` at 0.5x (random arrivals,
/// a fixed seed) beside 1000 pings a second, after idle. Each ping that finds both permits
/// taken is counted in the spell, and a `/db` caller reads the spell at `/db`'s floor
/// (20 ms) as if every ping were a database call: 19-21 of 100 `/db` callers refused in
/// 4 runs (seeds 8, 9: 13). On `5ef0607`: 4-6 (the window's own first 62 ms, already
/// over must hold 3); without the pings, 0.
#[test]
#[ignore = "known limit: 4-8 of 100 refused (4-6 before the sixth review's fix): one limit and one queue per layer, the pings fill it"]
fn a_fast_route_beside_a_light_load_after_idle_refuses_no_good_caller_with_the_right_limit() {
    judged(|| {
        two_routes(
            Admission::new().limit(NonZeroUsize::new(2).unwrap()),
            0.5,
            1000.0,
            7,
        )
    });
}

/// The same with no limit: 0-1 of 100 refused, alike on `5ef0607` (not the spell's).
#[test]
#[ignore = "not reliable, and alike before 3cbe62b: 0-1 of 100 /db callers refused"]
fn a_fast_route_beside_a_light_load_after_idle_refuses_no_good_caller_with_no_limit() {
    judged(|| two_routes(Admission::new(), 0.5, 1000.0, 7));
}

// ---------------------------------------------------------------------------------------
// 4. A flood of refused requests, then a light load less than a quiet spell later.
// ---------------------------------------------------------------------------------------

/// The 2-worker × 20 ms route behind `admission`, warmed by 30 lone calls, idle 1 s; then
/// (when `spike`) 60 callers at once with 30 ms budgets (all but the first two refused at
/// arrival: their wait and need pass their budget); `gap` later, random arrivals at
/// `rate_x` of the capacity (100/s) for 1.5 s, callers with 200 ms budgets: none refused.
async fn after_a_refused_spike(
    admission: Admission,
    spike: bool,
    gap: Duration,
    rate_x: f64,
    seed: u64,
) -> Result<(), String> {
    let seed = std::env::var("S10_SEED").map_or(seed, |v| v.parse().unwrap());
    let workers = Arc::new(Semaphore::new(2));
    let service = layer(admission).layer(service_fn(move |_req: Request<()>| {
        let workers = workers.clone();
        async move {
            let _worker = workers.acquire().await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok::<_, Infallible>(Response::new(String::new()))
        }
    }));
    let alone = unloaded(&service, 30).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let flood_n = std::env::var("S10_FLOOD").map_or(300, |v| v.parse().unwrap());
    let mut flood = (0, 0);
    if spike {
        let calls: Vec<_> = (0..flood_n)
            .map(|_| tokio::spawn(call(service.clone(), "/r", Some(30))))
            .collect();
        for c in calls {
            match c.await.unwrap() {
                Seen::Refused(_) => flood.1 += 1,
                _ => flood.0 += 1,
            }
        }
    }
    tokio::time::sleep(gap).await;
    let n = (rate_x * 100.0 * 1.5) as usize;
    let seen = random(&service, "/r", rate_x * 100.0, n, seed, Some(200)).await;
    let (good, pg, refused, _, out) = tally(&seen);
    let figures = format!(
        "spike {spike} ({} served, {} refused), then {gap:?} later random arrivals at {rate_x}x \
         (seed {seed}), 200 ms budgets ({:.1}x the unloaded p99 {alone:?}): {good} good (p99 \
         {pg:?}), {refused} refused, {out} waited out of {}",
        flood.0,
        flood.1,
        200.0 / alone.as_secs_f64() / 1e3,
        seen.len()
    );
    eprintln!("{figures}");
    verdict!(
        refused + out == 0,
        "good callers refused at {rate_x}x: {figures}"
    );
    Ok(())
}

/// Must hold 3 and 5: a flood of refused requests (58 of 60 refused at once) cannot make a
/// light load after it (0.7x, 250 ms later) refuse good callers. The window restarts after
/// 100 ms with no request counted (the flood has drained); the busy spell does not (only
/// after 0.5 s quiet): it counts the flood's 58 refused requests, each at the floor, for
/// up to 2 s. Figures: 7-8 of 105 refused in 4 runs (seeds 8, 9: 4; with a flood of 60:
/// 0-2); on `5ef0607` 0 (3 seeds); without the flood 0.
#[test]
fn a_flood_of_refused_requests_makes_a_light_load_after_it_refuse_no_good_caller() {
    judged(|| {
        after_a_refused_spike(
            Admission::new().limit(NonZeroUsize::new(2).unwrap()),
            true,
            Duration::from_millis(250),
            0.7,
            7,
        )
    });
}

/// Control: the same light load without the flood.
#[test]
fn without_the_flood_the_light_load_refuses_no_good_caller() {
    judged(|| {
        after_a_refused_spike(
            Admission::new().limit(NonZeroUsize::new(2).unwrap()),
            false,
            Duration::from_millis(250),
            0.7,
            7,
        )
    });
}

// ---------------------------------------------------------------------------------------
// 5. A slow start (the first 10 answers 300x slower), callers with budgets.
// ---------------------------------------------------------------------------------------

/// A fresh server behind `admission` whose first 10 answers take 300 ms (all 10 at once, a
/// cold cache, callers without a budget), then 1 ms (room for all: a sleep). Then bursts
/// of `size` callers at once every 100 ms for 2 s, each with a budget of 1 s (hundreds of
/// times the steady p99): none refused (must hold 3).
async fn slow_start_then_bursts(admission: Admission, size: usize) -> Result<(), String> {
    let n = Arc::new(AtomicU64::new(0));
    let service = layer(admission).layer(service_fn(move |_req: Request<()>| {
        let first = n.fetch_add(1, Ordering::Relaxed) < 10;
        async move {
            let ms = if first { 300 } else { 1 };
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok::<_, Infallible>(Response::new(String::new()))
        }
    }));
    let cold: Vec<_> = (0..10)
        .map(|_| tokio::spawn(call(service.clone(), "/c", None)))
        .collect();
    for c in cold {
        let seen = c.await.unwrap();
        verdict!(matches!(seen, Seen::Good(_)), "cold: {seen:?}");
    }
    let start = Instant::now();
    let mut calls = Vec::new();
    for round in 0..20u32 {
        tokio::time::sleep_until((start + Duration::from_millis(100) * round).into()).await;
        for _ in 0..size {
            calls.push(tokio::spawn(call(service.clone(), "/c", Some(1000))));
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
    let (good, pg, refused, _, out) = tally(&seen);
    let figures = format!(
        "after 10 answers of 300 ms, bursts of {size} every 100 ms, 1 s budgets: {good} good \
         (p99 {pg:?}), {refused} refused, {out} waited out of {}; not good each burst {each:?}",
        seen.len()
    );
    eprintln!("{figures}");
    verdict!(
        refused + out == 0,
        "good callers refused after a slow start: {figures}"
    );
    Ok(())
}

/// Must hold 3 ("after a start whose first 10 answers are 300x slower than steady, 0
/// refusals of callers with budget >= 10x steady p99"): s9_shapes_review's shape, callers
/// with 1 s budgets (the merge left the spell to callers without a budget only in the
/// cold-route rule). The floor is 300 ms until the first fast answer; a caller with a
/// budget under ten needs (the need is still ~300 ms) reads the spell, which counts each
/// request of the first burst at 300 ms: 5 of 400 refused in 4 runs, all in the first
/// burst (0 on `5ef0607`).
#[test]
fn after_a_slow_start_bursts_of_callers_with_budgets_are_served_with_no_limit() {
    judged(|| slow_start_then_bursts(Admission::new(), 20));
}

/// The same with `limit(4)`: 11 of 400 refused in 4 runs (1 on `5ef0607`: already over).
#[test]
fn after_a_slow_start_bursts_of_callers_with_budgets_are_served_with_limit_4() {
    judged(|| slow_start_then_bursts(Admission::new().limit(NonZeroUsize::new(4).unwrap()), 20));
}

// ---------------------------------------------------------------------------------------
// 6. Hang-ups that start a busy spell and take their work back.
// ---------------------------------------------------------------------------------------

/// s9_45_review's route and first overload (2 workers × 20 ms behind `limit(2)`, 0.5 s at
/// 0.5x, idle 1 s, then 2x for 2 s, 200 ms budgets), with (when `flood`) 100 callers at
/// once `gap` before the overload that hang up after 5 ms (a client's cancelled fan-out,
/// or reset streams; `S10_HANG` of them, 4 unless told, hanging up after `S10_HANG_MS`):
/// must hold 2's bars over the overload.
async fn hang_ups_before_an_overload(flood: bool, gap: Duration) -> Result<(), String> {
    let workers = Arc::new(Semaphore::new(2));
    let service = layer(Admission::new().limit(NonZeroUsize::new(2).unwrap())).layer(service_fn(
        move |_req: Request<()>| {
            let workers = workers.clone();
            async move {
                let _worker = workers.acquire().await.unwrap();
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok::<_, Infallible>(Response::new(String::new()))
            }
        },
    ));
    let mut alone = Vec::new();
    for _ in 0..30 {
        let t0 = Instant::now();
        let seen = call(service.clone(), "/r", Some(200)).await;
        verdict!(matches!(seen, Seen::Good(_)), "unloaded: {seen:?}");
        alone.push(t0.elapsed());
    }
    let capacity = 2.0 * alone.len() as f64 / alone.iter().sum::<Duration>().as_secs_f64();
    let unloaded = p99(alone);
    let warm = load(
        &service,
        "/r",
        0.5 * capacity,
        Duration::from_millis(500),
        Some(200),
    )
    .await;
    verdict!(
        warm.iter().all(|s| matches!(s, Seen::Good(_))),
        "at 0.5x: {warm:?}"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    if flood {
        let n = std::env::var("S10_HANG").map_or(4, |v| v.parse().unwrap());
        let hang_ms = std::env::var("S10_HANG_MS").map_or(5, |v| v.parse().unwrap());
        let calls: Vec<_> = (0..n)
            .map(|_| {
                let call = service.clone().oneshot(request("/r", Some("200")));
                tokio::spawn(tokio::time::timeout(Duration::from_millis(hang_ms), call))
            })
            .collect();
        for c in calls {
            let _ = c.await.unwrap();
        }
        tokio::time::sleep(gap.saturating_sub(Duration::from_millis(5))).await;
    }
    let two = load(
        &service,
        "/r",
        2.0 * capacity,
        Duration::from_secs(2),
        Some(200),
    )
    .await;
    let (first, second) = two.split_at(two.len() / 2);
    let (a, b) = (tally(first), tally(second));
    eprintln!(
        "first second: {} good (p99 {:?}), {} refused, {} out; second second: {} good (p99 \
         {:?}), {} refused, {} out",
        a.0, a.1, a.2, a.4, b.0, b.1, b.2, b.4
    );
    bars(
        &format!("2x after 1 s idle, hang-ups {flood} {gap:?} before (capacity {capacity:.0}/s)"),
        &two,
        unloaded,
        3,
    )
}

/// Must hold 2 and 5: 100 callers that hang up at once 0.4 s before the overload begin the
/// busy spell there and take their work back; the overload is then read over 0.4 s more
/// of spell than it offered work in, as an overload after a quiet spell under 0.5 s.
/// Four such requests are enough (2 in flight, 2 queued and withdrawn: no work offered):
/// p99 of good answers 194-199 ms in the first second (3 runs), 43 ms in the second;
/// without them 43-53 ms. The same 4 requests served (not hung up) do the same (197 ms),
/// and so does `5ef0607` (197 ms with or without them): the known limit "an overload after
/// a quiet spell of 0.1-0.5 s", reached by 4 requests of no work after a second's idle.
#[test]
#[ignore = "known limit: p99 of good answers 196-199 ms in the first second, 42 ms in the second (3 runs; alike before the sixth review's fix): an overload 0.1-0.5 s after a few requests is judged by the window (docs::admission)"]
fn hang_ups_before_an_overload_after_idle_queue_no_caller_to_its_deadline() {
    judged(|| hang_ups_before_an_overload(true, Duration::from_millis(400)));
}

/// Control: the same without the hang-ups (s9_45_review's first overload).
#[test]
fn without_hang_ups_an_overload_after_idle_queues_no_caller_to_its_deadline() {
    judged(|| hang_ups_before_an_overload(false, Duration::from_millis(400)));
}

/// Must hold 3 after a quiet spell, with no limit given: a batch of 40 callers at once with
/// 10 s budgets (400 ms of work on a handler that takes 2 at a time, 20 ms each: 4% of
/// each budget; one batch every 2 s, 0.1x), after a warm-up that proved the handler's
/// capacity. Nobody should be refused: the queue drains by itself long before any
/// deadline. Slow start's cut comes within the batch (answers delayed past 2 in flight, a
/// queue waiting), and its trim sheds waiters when the busy spell reads an overload, as
/// this batch does for its first service times: the trim leaves a waiter whose budget is
/// generous (ten times the route's no-load duration or more) in the queue.
#[test]
fn a_batch_of_callers_with_10_s_budgets_after_idle_is_served_whole_with_no_limit() {
    judged(|| async {
        let workers = Arc::new(Semaphore::new(2));
        let service = layer(Admission::new()).layer(service_fn(move |_req: Request<()>| {
            let workers = workers.clone();
            async move {
                let _worker = workers.acquire().await.unwrap();
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok::<_, Infallible>(Response::new(String::new()))
            }
        }));
        let alone = unloaded(&service, 30).await;
        let mut each = Vec::new();
        for _ in 0..3 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let calls: Vec<_> = (0..40)
                .map(|_| tokio::spawn(call(service.clone(), "/r", Some(10_000))))
                .collect();
            let mut seen = Vec::new();
            for c in calls {
                seen.push(c.await.unwrap());
            }
            let (good, pg, refused, _, out) = tally(&seen);
            each.push(format!(
                "{good} good (p99 {pg:?}), {refused} refused, {out} out"
            ));
            verdict!(
                refused == 0 && out == 0,
                "a batch of 40 callers with 10 s budgets after 1 s idle, no limit (unloaded p99 \
                 {alone:?}): batches so far: {each:?}"
            );
        }
        eprintln!("batches of 40 with 10 s budgets: {each:?}");
        Ok(())
    });
}
