//! A hostile review of the adaptive limit's growth rule, the quarter tolerance and the
//! warm-up queue bound. Each test shows a shape the "must hold" list (or the
//! `Admission` docs) promises and the branch does not keep; each fails as reviewed.
//!
//! In process (the layer over a `service_fn`, driven by `oneshot` on a 2-worker runtime):
//! the findings are about admission's decisions. Margins are 5x or more; every test is
//! bounded by [`timekeeping::LIMIT`] an attempt, runs one at a time in this binary, and is
//! judged only on an attempt during which the runtime's timers kept time
//! ([`timekeeping::judged`]: at most 3 attempts, inconclusive and passed when none did).
#![cfg(feature = "server")]

#[macro_use]
#[path = "support/timekeeping.rs"]
mod timekeeping;

#[path = "support/callers.rs"]
mod callers;

use std::convert::Infallible;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use callers::{HOUR_MS, burst, closed_loop, not_ok, status};
use http::{Request, Response, StatusCode};
use shared_headers::deadline::BudgetHeader;
use shared_headers::server::{Admission, SharedHeadersLayer};
use timekeeping::judged;
use tower::{Layer, service_fn};

/// A cold route (warming: 2 answers of the default 16) whose first answer was slow (200 ms,
/// a cold cache) and whose second was fast (1 ms). Then 8 callers at once, each with a
/// budget of an hour, on a handler that takes 40 ms and any number at a time: 4 take the
/// start's permits and the other 4 find them taken. The warm-up bound predicts their wait
/// from the recent follower (100 ms after one fast answer) over the limit (4): 25 ms, over
/// the route's least answer and 2 ms (3 ms), and refuses them at once. A caller with an hour
/// to spare, on a route nobody has measured as overloaded, waits 40 ms at most; the docs say
/// a cold route admits everything.
#[test]
fn a_cold_route_refuses_callers_with_an_hour_budget_after_one_slow_first_answer() {
    judged(|| async {
        let layer = SharedHeadersLayer::new()
            .caller_budget(BudgetHeader::envoy_expected_rq_timeout_ms())
            .admission(Admission::new());
        let stats = layer.stats();
        let n = Arc::new(AtomicUsize::new(0));
        let service = layer.layer(service_fn(move |_req: Request<()>| {
            let i = n.fetch_add(1, Ordering::SeqCst);
            async move {
                let ms = match i {
                    0 => 200,
                    1 => 1,
                    _ => 40,
                };
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok::<_, Infallible>(Response::new(String::new()))
            }
        }));
        for _ in 0..2 {
            assert_eq!(status(&service, Some(HOUR_MS)).await, StatusCode::OK);
        }
        let refused = not_ok(burst(&service, 8, Some(HOUR_MS))).await;
        let counts = stats.admission_counts();
        verdict!(
            refused == 0,
            "{refused} of 8 callers with an hour's budget refused on a cold route (2 answers \
             in, nothing overloaded; overloaded {}, admitted cold {}, limit {})",
            counts.overloaded,
            counts.admitted_cold,
            counts.limit
        );
        Ok(())
    });
}

/// Must hold 3: "after a start whose first 10 answers are 300x slower than steady state, 0
/// refusals of callers whose budget is at least 10x the steady p99". A route whose first 10
/// answers take 300 ms (in waves of 4, the user's right limit) and then 1 ms; 8 callers in
/// a closed loop with 1 s budgets (the steady p99 is a few ms), 25 requests each. The
/// first fast answer sets the floor to 1 ms while the recent follower is still at 150 ms:
/// the warm-up bound refuses every caller that finds the 4 permits taken until the follower
/// has halved its way down, though each would wait a few ms.
#[test]
fn after_a_slow_start_callers_with_generous_budgets_are_refused() {
    judged(|| async {
        let layer = SharedHeadersLayer::new()
            .caller_budget(BudgetHeader::envoy_expected_rq_timeout_ms())
            .admission(Admission::new().limit(NonZeroUsize::new(4).unwrap()));
        let stats = layer.stats();
        let n = Arc::new(AtomicUsize::new(0));
        let service = layer.layer(service_fn(move |_req: Request<()>| {
            let i = n.fetch_add(1, Ordering::SeqCst);
            async move {
                let ms = if i < 10 { 300 } else { 1 };
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok::<_, Infallible>(Response::new(String::new()))
            }
        }));
        // The slow start: 10 answers, 4 at a time (never more than the limit: none queued).
        for wave in [4, 4, 2] {
            for call in burst(&service, wave, Some("5000")) {
                assert_eq!(call.await.unwrap(), StatusCode::OK);
            }
        }
        let refused = closed_loop(&service, 8, 25, Some("1000"), Duration::from_millis(2)).await;
        let counts = stats.admission_counts();
        verdict!(
            refused == 0,
            "{refused} of 200 callers with a 1 s budget refused after a slow start on a 1 ms \
             route (overloaded {}, shed {}, limit {})",
            counts.overloaded,
            counts.shed,
            counts.limit
        );
        Ok(())
    });
}

/// A route whose first answers were fast (20 answers of ~0 ms: a cache, a fast path) and
/// which then takes 20 ms a request, any number at a time (a sleep: nothing queues in the
/// handler). 8 callers without a budget in a closed loop, `Admission::new()` (no limit: the
/// user does not know the capacity). The floor is the least answer (0 ms) and never rises:
/// `Lesson::Alone` and `Calm` (which move it) need an answer within a quarter of it and
/// 2 ms, and every answer now is over that, read as a queue; the limit falls to 1 and stays
/// there (growth needs an answer near the floor too). A handler that would serve 8 at once
/// is served one at a time: 240 requests take 4.8 s instead of 0.6 s.
#[test]
fn a_route_that_got_slower_is_held_to_a_limit_of_one_for_good() {
    judged(|| async {
        let layer = SharedHeadersLayer::new().admission(Admission::new());
        let stats = layer.stats();
        let n = Arc::new(AtomicUsize::new(0));
        let service = layer.layer(service_fn(move |_req: Request<()>| {
            let i = n.fetch_add(1, Ordering::SeqCst);
            async move {
                if i >= 20 {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Ok::<_, Infallible>(Response::new(String::new()))
            }
        }));
        for _ in 0..20 {
            assert_eq!(status(&service, None).await, StatusCode::OK);
        }
        let start = Instant::now();
        let refused = closed_loop(&service, 8, 30, None, Duration::from_millis(5)).await;
        let took = start.elapsed();
        let counts = stats.admission_counts();
        verdict!(
            counts.limit >= 4,
            "the limit ended at {} on a handler that serves any number at once (8 callers, \
             240 requests in {took:?}, ideal 0.6 s; {refused} refused, overloaded {})",
            counts.limit,
            counts.overloaded
        );
        Ok(())
    });
}

/// Must hold 3: "after a route speeds up from 200 ms to 1 ms, at most 1% refused". A route
/// warm at 200 ms (20 answers, 4 at a time: the user's right limit of 4), then 1 ms; 8
/// callers in a closed loop with 1 s budgets, 25 requests each. The queue's delay bound
/// predicts a waiter's wait from the need (the recent follower, halving its way down from
/// 200 ms) against the floor (1 ms from the first fast answer) and 2 ms: every caller that
/// finds the 4 permits taken is refused until the follower is under about 12 ms, though
/// each would wait a few ms of its 1 s.
#[test]
fn after_a_route_speeds_up_from_200_ms_to_1_ms_over_1_percent_are_refused() {
    judged(|| async {
        let layer = SharedHeadersLayer::new()
            .caller_budget(BudgetHeader::envoy_expected_rq_timeout_ms())
            .admission(Admission::new().limit(NonZeroUsize::new(4).unwrap()));
        let stats = layer.stats();
        let n = Arc::new(AtomicUsize::new(0));
        let service = layer.layer(service_fn(move |_req: Request<()>| {
            let i = n.fetch_add(1, Ordering::SeqCst);
            async move {
                let ms = if i < 20 { 200 } else { 1 };
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok::<_, Infallible>(Response::new(String::new()))
            }
        }));
        for wave in [4, 4, 4, 4, 4] {
            for call in burst(&service, wave, Some("5000")) {
                assert_eq!(call.await.unwrap(), StatusCode::OK);
            }
        }
        let warm = stats.admission_counts().admitted_cold;
        let refused = closed_loop(&service, 8, 25, Some("1000"), Duration::from_millis(2)).await;
        let counts = stats.admission_counts();
        verdict!(
            refused <= 2,
            "{refused} of 200 callers with a 1 s budget refused after the route sped up from \
             200 ms to 1 ms (over 1%; overloaded {}, shed {}, admitted cold {} of which {warm} \
             before the speed-up, limit {})",
            counts.overloaded,
            counts.shed,
            counts.admitted_cold,
            counts.limit
        );
        Ok(())
    });
}

/// The queue's own comment: "for a caller without a budget, full only once the limit has
/// seen a queue ... a burst on a fresh server is refused by nobody". With one answer in
/// (100 ms, alone), the warm-up bound predicts a waiter's wait as that answer times the
/// waiters ahead over the limit (4) and refuses every caller past 4 waiters: a burst of 40
/// callers without a budget on a handler that only sleeps (nothing is overloaded, the limit
/// has seen no queue) has 32 refused, where before this change the same burst was refused by
/// nobody.
#[test]
fn a_burst_after_one_answer_refuses_callers_without_a_budget() {
    judged(|| async {
        let layer = SharedHeadersLayer::new().admission(Admission::new());
        let stats = layer.stats();
        let service = layer.layer(service_fn(|_req: Request<()>| async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Ok::<_, Infallible>(Response::new(String::new()))
        }));
        assert_eq!(status(&service, None).await, StatusCode::OK);
        let refused = not_ok(burst(&service, 40, None)).await;
        let counts = stats.admission_counts();
        verdict!(
            refused == 0,
            "{refused} of 40 callers without a budget refused by a burst after one answer on \
             an idle, unbounded handler (overloaded {}, limit {})",
            counts.overloaded,
            counts.limit
        );
        Ok(())
    });
}

/// Must hold 3: "0 refusals at 0.8x load or below of callers whose budget is at least 5x
/// the route's unloaded p99". A handler that takes 2 requests at a time, 20 ms each
/// (capacity 100/s), `Admission::new()` (no limit: the user does not know the capacity),
/// warmed by 20 answers one at a time; then 320 callers at 80/s (0.8x) with exponential
/// gaps (a fixed pseudo-random sequence), each with a 200 ms budget (10x the unloaded
/// p99). Random arrivals at 0.8x queue up to 10-16 requests now and then (an M/D/2 queue at
/// 0.8 does); a queue bounded at a limit's worth refused 3-7 of them. The offered work at
/// the queue (under what the limit serves) reads them as a burst: none refused, and at most
/// 2% (the must-hold list's bar on callers who wait out their budget) time out (a timeout is
/// 504 here, a refusal 503).
#[test]
fn callers_with_a_generous_budget_are_refused_at_0_8x_load() {
    const CALLS: usize = 320;
    judged(|| async {
        let layer = SharedHeadersLayer::new()
            .caller_budget(BudgetHeader::envoy_expected_rq_timeout_ms())
            .timeout_status(StatusCode::GATEWAY_TIMEOUT)
            .admission(Admission::new());
        let stats = layer.stats();
        let workers = Arc::new(tokio::sync::Semaphore::new(2));
        let service = layer.layer(service_fn(move |_req: Request<()>| {
            let workers = workers.clone();
            async move {
                let _worker = workers.acquire().await.unwrap();
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok::<_, Infallible>(Response::new(String::new()))
            }
        }));
        for _ in 0..20 {
            assert_eq!(status(&service, Some("200")).await, StatusCode::OK);
        }
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut calls = Vec::new();
        for _ in 0..CALLS {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let u = ((seed >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
            let gap = -u.ln() * 12.5; // ms: 80 requests/s
            tokio::time::sleep(Duration::from_micros((gap * 1000.0) as u64)).await;
            let service = service.clone();
            calls.push(tokio::spawn(
                async move { status(&service, Some("200")).await },
            ));
        }
        let mut refused = 0;
        let mut timed_out = 0;
        let mut failed = 0;
        for call in calls {
            match call.await.unwrap() {
                StatusCode::OK => {}
                StatusCode::SERVICE_UNAVAILABLE => refused += 1,
                StatusCode::GATEWAY_TIMEOUT => timed_out += 1,
                _ => failed += 1,
            }
        }
        verdict!(
            timed_out <= CALLS / 50,
            "{timed_out} of {CALLS} callers with a 200 ms budget timed out at 0.8x load (over 2%)"
        );
        let counts = stats.admission_counts();
        verdict!(
            refused == 0,
            "{refused} of {CALLS} callers with a 200 ms budget refused at 0.8x load \
             ({timed_out} timed out, {failed} other failures; overloaded {}, shed {}, shed \
             waiting {}, limit {})",
            counts.overloaded,
            counts.shed,
            counts.shed_waiting,
            counts.limit
        );
        Ok(())
    });
}

/// The harness's own control: a scenario that fails while both of the runtime's workers
/// are blocked (25 ms at a time, so the timers are about that late: 5x the 5 ms allowed) is
/// run 3 times and found inconclusive, never failed; one that passes is held at once. (The
/// other side, a failed attempt on time failing the test, is `judged`'s panic: a scenario
/// that fails after a 50 ms sleep panics at its first attempt, checked by hand.)
#[test]
fn a_failure_while_the_timers_are_late_is_inconclusive() {
    let attempts = std::sync::atomic::AtomicUsize::new(0);
    let got = judged(|| {
        attempts.fetch_add(1, Ordering::Relaxed);
        async {
            block_both_workers().await;
            Err("failed while the timers were late".to_owned())
        }
    });
    assert!(
        matches!(&got, timekeeping::Judged::Inconclusive(late) if late.len() == 3 && late.iter().all(|&ms| ms > 5)),
        "{got:?}"
    );
    assert_eq!(attempts.load(Ordering::Relaxed), 3);
    assert_eq!(judged(|| async { Ok(()) }), timekeeping::Judged::Held);
}

/// Blocks both of the runtime's workers for 100 ms, 25 ms at a time: the timers run late.
async fn block_both_workers() {
    let blockers: Vec<_> = (0..2)
        .map(|_| {
            tokio::spawn(async {
                for _ in 0..4 {
                    std::thread::sleep(Duration::from_millis(25));
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    for b in blockers {
        b.await.unwrap();
    }
}

/// The same for [`timekeeping::retried`] (a scenario that asserts): a panic while the
/// timers are late (both workers blocked 100 ms) is run again, 3 attempts in all, then
/// inconclusive; a panic while they keep time (after a 50 ms sleep) fails the test at its
/// first attempt, with the scenario's own message; a scenario that returns passes.
#[test]
fn a_panic_while_the_timers_are_late_is_inconclusive_and_one_on_time_fails() {
    let attempts = std::sync::atomic::AtomicUsize::new(0);
    let got = timekeeping::retried(|| {
        attempts.fetch_add(1, Ordering::Relaxed);
        async {
            block_both_workers().await;
            panic!("failed while the timers were late");
        }
    });
    assert!(
        matches!(&got, timekeeping::Judged::Inconclusive(late) if late.len() == 3 && late.iter().all(|&ms| ms > 5)),
        "{got:?}"
    );
    assert_eq!(attempts.load(Ordering::Relaxed), 3);
    let on_time = std::sync::atomic::AtomicUsize::new(0);
    let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        timekeeping::retried(|| {
            on_time.fetch_add(1, Ordering::Relaxed);
            async {
                tokio::time::sleep(Duration::from_millis(50)).await;
                panic!("failed on time");
            }
        })
    }))
    .expect_err("a failure on time fails the test");
    assert_eq!(failed.downcast_ref::<&str>(), Some(&"failed on time"));
    assert_eq!(on_time.load(Ordering::Relaxed), 1);
    assert_eq!(timekeeping::retried(|| async {}), timekeeping::Judged::Held);
}
