//! A hostile review of the cold rule (commit `5b08e6d`, `Shared::queue` in
//! src/server/admission/request/queue.rs): a caller without a budget, on a route with no
//! no-load duration yet (`floor` 0), that finds every permit taken, is refused at arrival
//! when a limit's worth of requests already wait and requests of routes with no answer have
//! been counted in the offered work for `COLD_GRACE` (20 ms; `Offer::cold`, from
//! `Limiter::offered`: a clock per layer, started by the first such request since the
//! window's last restart, reset only when 100 ms pass with no request finding every permit
//! taken).
//!
//! The intent: a flood on a fresh server whose first answer is slow is bounded; a burst that
//! arrives within 20 ms is let in whole. The shapes here: the clock is the layer's, not the
//! burst's or the route's (a second wave, a caller that hung up, a busy warm server where a
//! route appears), `floor` 0 is not "no answer yet" (a route whose two slots other routes
//! hold answers and stays at 0), a burst spread over more than 20 ms, and a slow flood
//! whose arrivals are more than 100 ms apart (the clock restarts at each one).
//!
//! Each finding was a test that failed on `5b08e6d` and passed on the tree before it (the
//! flood 200 ms apart fails on both: the rule does not reach it). Five findings in nine
//! tests, against two floods it bounded: the rule was withdrawn. The findings' tests pass
//! again and stay, so that no later bound before a route's first answer brings them back;
//! the floods it bounded (and the one it did not reach) are ignored, known limits with
//! their figures; a burst of callers with an hour's budget, refused before the rule and
//! after it by slow start's refusal at arrival, is ignored with its figures too
//! (docs::admission).
//!
//! In process (the layer over a `service_fn`, driven by `oneshot` on a 2-worker runtime)
//! unless said, one over HTTP/2 on loopback; each timing-dependent scenario judged only on
//! an attempt during which the runtime's timers kept time ([`timekeeping::judged`]).
#![cfg(feature = "server")]

#[path = "support/server.rs"]
mod server;

#[path = "support/callers.rs"]
mod callers;

#[macro_use]
#[path = "support/timekeeping.rs"]
mod timekeeping;

use std::convert::Infallible;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use callers::h2::{connect, open_loop_no_budget};
use callers::{Route, request};
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use shared_headers::deadline::BudgetHeader;
use shared_headers::server::{Admission, SharedHeadersLayer};
use timekeeping::judged;
use tokio::sync::Semaphore;
use tower::{Layer, ServiceExt, service_fn};

fn layer(admission: Admission) -> SharedHeadersLayer {
    SharedHeadersLayer::new()
        .caller_budget(BudgetHeader::envoy_expected_rq_timeout_ms())
        .admission(admission)
}

/// One call of `path` without a budget: its status.
async fn status<S: Route<B>, B: Send + 'static>(service: S, path: &'static str) -> StatusCode {
    service.oneshot(request(path, None)).await.unwrap().status()
}

/// `n` calls of `path` without a budget, spawned at once.
fn wave<S: Route<B>, B: Send + 'static>(
    service: &S,
    path: &'static str,
    n: usize,
) -> Vec<tokio::task::JoinHandle<StatusCode>> {
    (0..n)
        .map(|_| tokio::spawn(status(service.clone(), path)))
        .collect()
}

/// How many of `calls` were answered anything but 200, and how many were.
async fn refused(calls: Vec<tokio::task::JoinHandle<StatusCode>>) -> (usize, usize) {
    let n = calls.len();
    let mut bad = 0;
    for c in calls {
        if c.await.unwrap() != StatusCode::OK {
            bad += 1;
        }
    }
    (bad, n)
}

// ---------------------------------------------------------------------------------------
// The crate's route hash (src/server/admission/estimate/route.rs, table.rs), copied: to
// pick paths whose slots collide.
// ---------------------------------------------------------------------------------------

const K: u64 = 0x517c_c1b7_2722_0a95;

fn route_hash(method: &[u8], route: &[u8]) -> u64 {
    let n = method.len();
    let code = n as u64
        | (method[0] as u64) << 8
        | (method[1] as u64) << 16
        | (method[n - 1] as u64) << 24;
    let mut h = (0xcbf2_9ce4_8422_2325 ^ code).wrapping_mul(K);
    let word8 = |b: &[u8]| u64::from_le_bytes(b[..8].try_into().unwrap());
    let word4 = |b: &[u8]| u64::from(u32::from_le_bytes(b[..4].try_into().unwrap()));
    let n = route.len();
    let tail = if n < 4 {
        if n == 0 {
            0
        } else {
            u64::from(route[0]) | u64::from(route[n / 2]) << 8 | u64::from(route[n - 1]) << 16
        }
    } else if n < 8 {
        word4(&route[..4]) | word4(&route[n - 4..]) << 32
    } else {
        let mut chunks = route.chunks_exact(8);
        for chunk in &mut chunks {
            h = (h.rotate_left(5) ^ word8(chunk)).wrapping_mul(K);
        }
        if chunks.remainder().is_empty() {
            0
        } else {
            word8(&route[n - 8..])
        }
    };
    h = ((h ^ n as u64).rotate_left(5) ^ tail).wrapping_mul(K);
    h | 0b11
}

fn slot_of(route: u64) -> usize {
    (route >> 56) as usize & 255
}

fn alt_of(route: u64) -> usize {
    let a = slot_of(route);
    let b = (route >> 48) as usize & 255;
    if b == a { b ^ 1 } else { b }
}

/// Two paths `/h/{n}` holding `path`'s first slot and its second (each in its own first
/// slot, neither in the other's), for GET.
fn holders_of(path: &str) -> (String, String) {
    let p = route_hash(b"GET", path.as_bytes());
    let find = |slot: usize, not: usize| {
        (0..)
            .map(|n| format!("/h/{n}"))
            .find(|h| {
                let x = route_hash(b"GET", h.as_bytes());
                slot_of(x) == slot && alt_of(x) != not
            })
            .unwrap()
    };
    let x = find(slot_of(p), alt_of(p));
    let y = find(alt_of(p), slot_of(p));
    (x, y)
}

#[test]
fn the_copied_hash_is_the_crates() {
    // The crate's own route word (its stats' estimate) for a path picked by the copy: a
    // route that holds its first slot warm after 16 answers is found there.
    server::run(async {
        let layer = layer(Admission::new());
        let stats = layer.stats();
        let service = layer.layer(service_fn(|_req: Request<()>| async {
            Ok::<_, Infallible>(Response::new(String::new()))
        }));
        let (x, y) = holders_of("/p");
        let x: &'static str = Box::leak(x.into_boxed_str());
        let y: &'static str = Box::leak(y.into_boxed_str());
        for _ in 0..20 {
            assert_eq!(status(service.clone(), x).await, StatusCode::OK);
            assert_eq!(status(service.clone(), y).await, StatusCode::OK);
        }
        for _ in 0..20 {
            assert_eq!(status(service.clone(), "/p").await, StatusCode::OK);
            assert_eq!(status(service.clone(), x).await, StatusCode::OK);
            assert_eq!(status(service.clone(), y).await, StatusCode::OK);
        }
        assert!(stats.admission_estimate(&http::Method::GET, x).is_some());
        assert!(stats.admission_estimate(&http::Method::GET, y).is_some());
        assert_eq!(
            stats.admission_estimate(&http::Method::GET, "/p"),
            None,
            "/p answered 20 times between its holders' answers: cold (both its slots held)"
        );
    });
}

// ---------------------------------------------------------------------------------------
// 1. The clock is the layer's, not the burst's.
// ---------------------------------------------------------------------------------------

/// The handler behind every scenario of a fresh server: `ms` per request, any number at
/// once (nothing overloads it: its capacity is unbounded).
fn unbounded(
    admission: Admission,
    ms: u64,
) -> (
    shared_headers::server::LayerStats,
    impl Route<shared_headers::server::ResponseBody<String>>,
) {
    let layer = layer(admission);
    let stats = layer.stats();
    let service = layer.layer(service_fn(move |_req: Request<()>| async move {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok::<_, Infallible>(Response::new(String::new()))
    }));
    (stats, service)
}

/// The author's own promise ("40 callers at once on a handler nothing overloads are all
/// let in"), in two waves: a fresh server, `Admission::new()` (a limit of 4 at first), a
/// handler of 60 ms that takes any number at once; 8 callers without a budget at once, then
/// 16 more at once 30 ms later (before the first answer). 24 callers, each wave within a
/// millisecond, fewer than the 40 the author lets in: all should be let in and answered
/// within a few service times (slow start doubles the limit each 60 ms). tower's
/// `ConcurrencyLimit` at the layer's ceiling (1,024) with `LoadShed` refuses none of them.
/// The cold rule's clock started with the first wave's first waiter: the second wave finds
/// it 30 ms old and a limit's worth waiting, and every caller of it is refused.
///
/// Measured: the second wave refused 16 of 16 in every run (debug 5 runs, release 3); before
/// `5b08e6d`, 0 of 24 refused (all answered within 245 ms).
#[test]
fn a_second_wave_30_ms_after_the_first_on_a_fresh_server_is_let_in_whole() {
    judged(|| async {
        let (stats, service) = unbounded(Admission::new(), 60);
        let start = Instant::now();
        let first = wave(&service, "/w", 8);
        tokio::time::sleep_until((start + Duration::from_millis(30)).into()).await;
        let second = wave(&service, "/w", 16);
        let (a, n_a) = refused(first).await;
        let (b, n_b) = refused(second).await;
        let took = start.elapsed();
        let counts = stats.admission_counts();
        eprintln!(
            "two waves: refused {a} of {n_a} then {b} of {n_b} in {} ms; overloaded {}, limit {}",
            took.as_millis(),
            counts.overloaded,
            counts.limit
        );
        verdict!(
            a + b == 0,
            "{a} of the first wave of {n_a} and {b} of the second of {n_b} (30 ms later) refused \
             on a fresh 60 ms handler that takes any number at once; overloaded {}, limit {}",
            counts.overloaded,
            counts.limit
        );
        Ok(())
    });
}

/// The same clock, started by a caller that hung up: a fresh server, a 60 ms handler that
/// takes any number at once; 5 callers at once (4 take the permits, the 5th waits and hangs
/// up after 5 ms: a client's connect-phase timeout, an HTTP/2 reset), then a burst of 20
/// callers at once 30 ms later. The waiter that started the clock is gone, the queue is
/// empty when the burst arrives, and the burst arrives within a millisecond: it should be
/// let in whole, as a burst of 20 on the fresh server is. The clock kept running: past the
/// first 4 waiters, the burst is refused.
///
/// Measured: 16 of 20 refused, none waiting when the burst came (debug 5 runs, release 3);
/// before `5b08e6d`, 0.
#[test]
fn a_burst_after_a_waiter_that_hung_up_is_let_in_whole() {
    judged(|| async {
        let (stats, service) = unbounded(Admission::new(), 60);
        let start = Instant::now();
        let first = wave(&service, "/h", 4);
        tokio::time::sleep(Duration::from_millis(2)).await;
        let gone = tokio::spawn(status(service.clone(), "/h"));
        tokio::time::sleep(Duration::from_millis(5)).await;
        gone.abort();
        tokio::time::sleep_until((start + Duration::from_millis(30)).into()).await;
        let waiting_after = stats.admission_counts().waiting;
        let burst = wave(&service, "/h", 20);
        let (a, _) = refused(first).await;
        let (b, n) = refused(burst).await;
        let counts = stats.admission_counts();
        eprintln!(
            "after a hang-up (waiting then {waiting_after}): first {a} refused, burst {b} of {n} \
             refused; overloaded {}, left queue {}, limit {}",
            counts.overloaded, counts.left_queue, counts.limit
        );
        verdict!(
            a + b == 0,
            "{b} of a burst of {n} at once refused 30 ms after a lone waiter hung up (waiting \
             then: {waiting_after}) on a fresh 60 ms handler that takes any number at once; \
             overloaded {}, left queue {}, limit {}",
            counts.overloaded,
            counts.left_queue,
            counts.limit
        );
        Ok(())
    });
}

/// A burst spread over more than the grace: a fresh server (`Admission::new()`), a 60 ms
/// handler that takes any number at once, 48 callers without a budget over HTTP/2 at
/// 1,000/s (48 ms: one a millisecond, as a fleet of clients started together, or a page's
/// fan-out through a proxy, arrives). The handler serves them all at once in 60 ms; slow
/// start serves them within a few hundred ms. A demanding user wants them all served (the
/// load is a fraction of what the handler takes; tower's `ConcurrencyLimit` at the ceiling
/// with `LoadShed` refuses none). The rule refuses every caller from 20 ms after the first
/// waiter to the first answer (at 60 ms) past a limit's worth waiting: about half of them.
///
/// Measured: 23-25 of 48 refused, every one sent at 25-48 ms (debug 5 runs, release 3); before
/// `5b08e6d`, 0.
#[test]
fn a_burst_spread_over_48_ms_on_a_fresh_handler_nothing_overloads_is_let_in_whole() {
    judged(|| async {
        let layer = layer(Admission::new());
        let stats = layer.stats();
        let service = layer.layer(service_fn(move |_req: Request<Incoming>| async move {
            tokio::time::sleep(Duration::from_millis(60)).await;
            Ok::<_, Infallible>(Response::new(http_body_util::Full::new(
                hyper::body::Bytes::new(),
            )))
        }));
        let addr = server::serve(server::boxed(service), true).await;
        let sender = connect(addr).await;
        let fates = open_loop_no_budget(&sender, addr, "/spread", 1000.0, 48).await;
        let bad: Vec<_> = fates
            .iter()
            .filter(|f| f.1 != StatusCode::OK)
            .map(|f| f.0.as_millis())
            .collect();
        let counts = stats.admission_counts();
        eprintln!(
            "spread burst: {} of 48 refused (sent at ms {:?}); overloaded {}, limit {}",
            bad.len(),
            bad,
            counts.overloaded,
            counts.limit
        );
        verdict!(
            bad.is_empty(),
            "{} of 48 callers arriving over 48 ms refused (sent at ms {:?}) on a fresh 60 ms \
             handler that takes any number at once; overloaded {}, limit {}",
            bad.len(),
            bad,
            counts.overloaded,
            counts.limit
        );
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------
// 2. A busy server: the clock is old, a route appears.
// ---------------------------------------------------------------------------------------

/// A warm server kept busy in bursts (a route of 5 ms, `limit(2)`; every 60 ms a batch of
/// 8 callers without a budget: 0.33x of what the limit serves, each batch a queue of 6 that
/// drains in 20 ms, let in whole by the burst rule). Its first batch, on the fresh server,
/// started the cold clock, and the queue never rests 100 ms. Then a new route appears (a
/// deploy's new endpoint, a rare report): 4 of its callers without a budget at once, just
/// after a batch. They should be let in as the warm route's callers are (the queue drains
/// within 20 ms; a burst within a millisecond is let in whole); its very first callers are
/// refused at once, on a clock a second old that another route started.
///
/// Measured: the new route's callers refused 4 of 4 (debug 5 runs, release 2; 2 of 4 in a
/// release run before the batch was awaited in line), the warm route's 160 none; before
/// `5b08e6d`, 0 of 4 (6 runs).
#[test]
fn a_new_route_on_a_busy_warm_server_is_let_in_as_its_neighbours_are() {
    judged(|| async {
        let layer = layer(Admission::new().limit(NonZeroUsize::new(2).unwrap()));
        let stats = layer.stats();
        let service = layer.layer(service_fn(move |req: Request<()>| async move {
            let ms = if req.uri().path() == "/new" { 10 } else { 5 };
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok::<_, Infallible>(Response::new(String::new()))
        }));
        let start = Instant::now();
        let mut warm = Vec::new();
        let mut new = Vec::new();
        for cycle in 0..20u32 {
            tokio::time::sleep_until((start + Duration::from_millis(60) * cycle).into()).await;
            warm.extend(wave(&service, "/warm", 8));
            if cycle == 16 {
                // The batch in line (6 waiting for 20 ms).
                tokio::time::sleep(Duration::from_millis(1)).await;
                new.extend(wave(&service, "/new", 4));
            }
        }
        let (w, n_w) = refused(warm).await;
        let (r, n_r) = refused(new).await;
        let counts = stats.admission_counts();
        eprintln!(
            "busy server: warm refused {w} of {n_w}, new route refused {r} of {n_r}; \
             overloaded {}, limit {}",
            counts.overloaded, counts.limit
        );
        verdict!(
            w == 0,
            "the warm route's batches (0.33x) refused {w} of {n_w}: the scenario is not the one \
             meant; limit {}",
            counts.limit
        );
        verdict!(
            r == 0,
            "{r} of a new route's first {n_r} callers (at once, without a budget) refused on a \
             warm server whose batches of 8 (0.33x) are let in whole; overloaded {}, limit {}",
            counts.overloaded,
            counts.limit
        );
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------
// 3. `floor` 0 is not "no answer yet".
// ---------------------------------------------------------------------------------------

/// A route that has answered hundreds of times but holds no slot (both of its slots held
/// by routes that answer between its answers: the docs' "a route whose slot another holds
/// is cold (admitted, and counted)") has a floor of 0, and the cold rule takes it for a
/// route with no answer. `limit(2)`, a route `/p` of 5 ms; its holders `/h/..` (1 ms),
/// warm. Every 60 ms: one call of each holder, then 8 callers of `/p` at once without a
/// budget (0.33x; a queue of 6 that drains in 20 ms). `/p` answered 8 times a batch, in
/// 5 ms, and its batches are as the warm route's of the test above (let in whole): none of
/// its callers should be refused (the docs say such a route is admitted). The rule fires for
/// it: from its second batch on, past a limit's worth waiting.
///
/// Measured: 92-96 of 200 refused (debug 5 runs, release 3), `/p` answered 104-108 times;
/// before `5b08e6d`, 0 of 200.
#[test]
fn a_route_that_has_answered_but_holds_no_slot_is_not_refused_as_one_with_no_answer() {
    let (x, y) = holders_of("/p");
    let x: &'static str = Box::leak(x.into_boxed_str());
    let y: &'static str = Box::leak(y.into_boxed_str());
    judged(|| async {
        let layer = layer(Admission::new().limit(NonZeroUsize::new(2).unwrap()));
        let stats = layer.stats();
        let service = layer.layer(service_fn(move |req: Request<()>| async move {
            let ms = if req.uri().path() == "/p" { 5 } else { 1 };
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok::<_, Infallible>(Response::new(String::new()))
        }));
        for _ in 0..20 {
            verdict!(
                status(service.clone(), x).await == StatusCode::OK,
                "holder refused"
            );
            verdict!(
                status(service.clone(), y).await == StatusCode::OK,
                "holder refused"
            );
        }
        // Quiet: the warm-up's window forgotten.
        tokio::time::sleep(Duration::from_millis(600)).await;
        let start = Instant::now();
        let mut calls = Vec::new();
        for cycle in 0..25u32 {
            tokio::time::sleep_until((start + Duration::from_millis(60) * cycle).into()).await;
            let hx = tokio::spawn(status(service.clone(), x));
            let hy = tokio::spawn(status(service.clone(), y));
            verdict!(hx.await.unwrap() == StatusCode::OK, "holder refused");
            verdict!(hy.await.unwrap() == StatusCode::OK, "holder refused");
            calls.extend(wave(&service, "/p", 8));
        }
        let (bad, n) = refused(calls).await;
        let counts = stats.admission_counts();
        let cold = stats.admission_estimate(&http::Method::GET, "/p").is_none();
        eprintln!(
            "slotless route: refused {bad} of {n}; still cold {cold}, admitted cold {}, \
             overloaded {}, limit {}",
            counts.admitted_cold, counts.overloaded, counts.limit
        );
        verdict!(cold, "/p took a slot: the scenario is not the one meant");
        verdict!(
            bad == 0,
            "{bad} of {n} callers of a route that answered {} times in 5 ms (no slot of its \
             own: floor 0) refused in batches of 8 at 0.33x; overloaded {}, limit {}",
            n - bad,
            counts.overloaded,
            counts.limit
        );
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------
// 4. What it should bound.
// ---------------------------------------------------------------------------------------

/// The handler of the flood scenarios: 2 workers; the first two requests take
/// `first_ms` (a cold cache, a pool filled by the first requests), the rest 500 ms
/// (capacity 4/s).
fn slow_first(
    admission: Admission,
    first_ms: u64,
) -> (
    shared_headers::server::LayerStats,
    impl Route<shared_headers::server::ResponseBody<String>>,
) {
    let layer = layer(admission);
    let stats = layer.stats();
    let workers = Arc::new(Semaphore::new(2));
    let started = Arc::new(AtomicUsize::new(0));
    let service = layer.layer(service_fn(move |_req: Request<()>| {
        let workers = workers.clone();
        let started = started.clone();
        async move {
            let _w = workers.acquire().await.unwrap();
            let first = started.fetch_add(1, Ordering::SeqCst) < 2;
            let ms = if first { first_ms } else { 500 };
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok::<_, Infallible>(Response::new(String::new()))
        }
    }));
    (stats, service)
}

/// Callers without a budget, one every `gap`, for `len`, on `service`: the most waiting
/// seen just before each arrival.
async fn trickle<S: Route<B>, B: Send + 'static>(
    service: &S,
    stats: &shared_headers::server::LayerStats,
    gap: Duration,
    len: Duration,
) -> (u64, u64) {
    let start = Instant::now();
    let mut most = 0;
    let mut i = 0u32;
    let mut calls = Vec::new();
    while gap * i < len {
        tokio::time::sleep_until((start + gap * i).into()).await;
        most = most.max(stats.admission_counts().waiting);
        calls.push(tokio::spawn(status(service.clone(), "/f")));
        i += 1;
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
    most = most.max(stats.admission_counts().waiting);
    // Dropped with the runtime: what they would wait is not judged here.
    drop(calls);
    (most, u64::from(i))
}

/// The flood the rule is for ("a flood on a fresh server whose first answer is slow is
/// bounded"), with its arrivals 200 ms apart: a fresh server (`Admission::new()`: 4
/// permits), 2 workers whose first two answers take 3 s (then 500 ms: capacity 4/s, 1.33/s
/// before the first answer), callers without a budget at 5/s (3.75x before the first answer,
/// 1.25x after) for 2.8 s. The queue should be bounded as the author's flood at 200/s is:
/// a limit's worth waiting (4), at most 6. Each arrival finds the window idle for more than
/// `OFFERED_IDLE` (100 ms), which restarts it and the cold clock with it: each caller reads
/// a clock of 0 ms, and every one waits (11 by the first answer, each for seconds). The
/// same flood every 60 ms is bounded (the test after this one).
///
/// Measured: 10 waiting of 14 callers, none refused, in every run, before and after
/// `5b08e6d` (the rule never fires: each arrival restarts the window).
#[test]
#[ignore = "known limit: 10 of 14 callers without a budget waiting before a fresh route's first answer (nothing bounds them before it; the cold rule reviewed here was withdrawn)"]
fn a_fresh_server_flooded_200_ms_apart_before_a_3_s_first_answer_bounds_its_queue() {
    judged(|| async {
        let (stats, service) = slow_first(Admission::new(), 3000);
        let (most, n) = trickle(
            &service,
            &stats,
            Duration::from_millis(200),
            Duration::from_millis(2800),
        )
        .await;
        let counts = stats.admission_counts();
        eprintln!(
            "flood 200 ms apart: most waiting {most} of {n} callers; overloaded {}, limit {}",
            counts.overloaded, counts.limit
        );
        verdict!(
            most <= 6,
            "{most} callers without a budget waiting before a fresh route's first answer (of {n} \
             at 5/s, 200 ms apart, 4 permits, first answers at 3 s); overloaded {}, limit {}",
            counts.overloaded,
            counts.limit
        );
        Ok(())
    });
}

/// Held: the same flood 60 ms apart (16/s): the cold clock runs, and the queue holds a
/// limit's worth.
///
/// Measured: 4 waiting, 39 of 47 refused; before `5b08e6d`, 43 waiting (the control of the
/// test above: the rule bounds this flood, not that one).
#[test]
#[ignore = "known limit: 43 callers without a budget waiting before a fresh route's first answer (4 under the withdrawn cold rule)"]
fn a_fresh_server_flooded_60_ms_apart_before_a_3_s_first_answer_bounds_its_queue() {
    judged(|| async {
        let (stats, service) = slow_first(Admission::new(), 3000);
        let (most, n) = trickle(
            &service,
            &stats,
            Duration::from_millis(60),
            Duration::from_millis(2800),
        )
        .await;
        let counts = stats.admission_counts();
        eprintln!(
            "flood 60 ms apart: most waiting {most} of {n} callers; overloaded {}, limit {}",
            counts.overloaded, counts.limit
        );
        verdict!(
            most <= 6,
            "{most} callers without a budget waiting before a fresh route's first answer (of {n} \
             at 16/s); overloaded {}, limit {}",
            counts.overloaded,
            counts.limit
        );
        Ok(())
    });
}

/// Held: a scanner's flood of distinct paths (each one cold) at 400/s for 0.5 s on a fresh
/// server whose answers take 300 ms: one clock for every cold path, the queue a limit's
/// worth (the limit grows by slow start from the first answers on: the waiters past the
/// limit of the moment are judged, at most 10: the 8 that arrive in the 20 ms grace, and
/// 2 of slack). Measured: 4-5 past the limit (184 of 200 refused); before `5b08e6d`, 183
/// (none refused, the limit at 97).
#[test]
#[ignore = "known limit: 183 of a scanner's 200 cold paths waiting past the limit, none refused (4-5 under the withdrawn cold rule)"]
fn a_flood_of_distinct_cold_paths_is_bounded_by_one_queue() {
    judged(|| async {
        let (stats, service) = unbounded(Admission::new(), 300);
        let start = Instant::now();
        let mut most = 0;
        let mut calls = Vec::new();
        for i in 0..200u32 {
            tokio::time::sleep_until((start + Duration::from_micros(2500) * i).into()).await;
            let c = stats.admission_counts();
            most = most.max(c.waiting.saturating_sub(c.limit));
            let path: &'static str = Box::leak(format!("/scan/{i}.php").into_boxed_str());
            calls.push(tokio::spawn(status(service.clone(), path)));
        }
        let (bad, n) = refused(calls).await;
        let counts = stats.admission_counts();
        eprintln!(
            "scanner: most waiting past the limit {most}, refused {bad} of {n}; overloaded {}, \
             limit {}",
            counts.overloaded, counts.limit
        );
        verdict!(
            most <= 10,
            "{most} of a scanner's distinct cold paths waiting past a limit's worth; overloaded {}",
            counts.overloaded
        );
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------
// 5. Modes the rule must leave alone.
// ---------------------------------------------------------------------------------------

/// Held: `count_only(true)` refuses nothing, the cold rule included: the flood of the
/// 60 ms test, every caller answered (the would-be refusals counted).
///
/// Measured: 0 of 60 refused, before and after `5b08e6d` (`count_only` has no limiter: the
/// queue's rules never run, `would_shed` 0).
#[test]
fn count_only_refuses_no_cold_caller() {
    judged(|| async {
        let (stats, service) = unbounded(Admission::new().count_only(true), 100);
        let start = Instant::now();
        let mut calls = Vec::new();
        for i in 0..60u32 {
            tokio::time::sleep_until((start + Duration::from_millis(2) * i).into()).await;
            calls.push(tokio::spawn(status(service.clone(), "/c")));
        }
        let (bad, n) = refused(calls).await;
        let counts = stats.admission_counts();
        eprintln!(
            "count only: refused {bad} of {n}, would shed {}, overloaded {}",
            counts.would_shed, counts.overloaded
        );
        verdict!(
            bad == 0 && counts.overloaded == 0,
            "count_only refused {bad} of {n} (overloaded {})",
            counts.overloaded
        );
        Ok(())
    });
}

/// Held: a route that has answered (its floor set) is never met by the rule: on a fresh
/// server a route of 10 ms answered once alone, then 60 callers without a budget over
/// 60 ms on a handler that takes any number at once (a burst the limit's slow start
/// serves): none refused.
///
/// Measured: 0 of 60 refused, before and after `5b08e6d`.
#[test]
fn a_route_with_an_answer_is_not_met_by_the_cold_rule() {
    judged(|| async {
        let (stats, service) = unbounded(Admission::new(), 10);
        verdict!(
            status(service.clone(), "/a").await == StatusCode::OK,
            "first call"
        );
        let start = Instant::now();
        let mut calls = Vec::new();
        for i in 0..60u32 {
            tokio::time::sleep_until((start + Duration::from_millis(1) * i).into()).await;
            calls.push(tokio::spawn(status(service.clone(), "/a")));
        }
        let (bad, n) = refused(calls).await;
        let counts = stats.admission_counts();
        eprintln!(
            "answered route: refused {bad} of {n}; overloaded {}, limit {}",
            counts.overloaded, counts.limit
        );
        verdict!(
            bad == 0,
            "{bad} of {n} refused on a route with an answer; overloaded {}, limit {}",
            counts.overloaded,
            counts.limit
        );
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------
// 6. The same shapes over sockets: HTTP/1.1 (a connection a caller) and HTTP/2 (a reset).
// ---------------------------------------------------------------------------------------

/// The socket harness's handler: `ms` per request, any number at once.
fn socket_unbounded(
    admission: Admission,
    ms: u64,
) -> (shared_headers::server::LayerStats, server::Svc) {
    let layer = layer(admission);
    let stats = layer.stats();
    let service = layer.layer(service_fn(move |_req: Request<Incoming>| async move {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok::<_, Infallible>(Response::new(http_body_util::Full::new(
            hyper::body::Bytes::new(),
        )))
    }));
    (stats, server::boxed(service))
}

/// One HTTP/1.1 call of `path` on a connection of its own (as a pooled client opens one
/// per concurrent request): its status.
async fn h1_call(addr: std::net::SocketAddr, path: &'static str) -> StatusCode {
    use http_body_util::BodyExt;
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let req = Request::get(path)
        .header(http::header::HOST, addr.to_string())
        .body(http_body_util::Full::new(hyper::body::Bytes::new()))
        .unwrap();
    let res = sender.send_request(req).await.unwrap();
    let status = res.status();
    res.into_body().collect().await.unwrap();
    status
}

/// The two waves over HTTP/1.1: 8 callers at once, 16 more at once 30 ms later, each on
/// its own connection, on a fresh server's 60 ms handler that takes any number at once.
/// All should be let in (as the in-process test above says why).
///
/// Measured: the second wave refused 16 of 16 (debug 5 runs, release 3); before `5b08e6d`, 0.
#[test]
fn over_http1_a_second_wave_30_ms_after_the_first_is_let_in_whole() {
    judged(|| async {
        let (stats, service) = socket_unbounded(Admission::new(), 60);
        let addr = server::serve(service, false).await;
        let start = Instant::now();
        let first: Vec<_> = (0..8).map(|_| tokio::spawn(h1_call(addr, "/w1"))).collect();
        tokio::time::sleep_until((start + Duration::from_millis(30)).into()).await;
        let second: Vec<_> = (0..16)
            .map(|_| tokio::spawn(h1_call(addr, "/w1")))
            .collect();
        let (a, n_a) = refused(first).await;
        let (b, n_b) = refused(second).await;
        let counts = stats.admission_counts();
        eprintln!(
            "http/1.1 two waves: refused {a} of {n_a} then {b} of {n_b}; overloaded {}, limit {}",
            counts.overloaded, counts.limit
        );
        verdict!(
            a + b == 0,
            "over HTTP/1.1, {a} of the first wave of {n_a} and {b} of the second of {n_b} (30 ms \
             later) refused on a fresh 60 ms handler that takes any number at once; overloaded \
             {}, limit {}",
            counts.overloaded,
            counts.limit
        );
        Ok(())
    });
}

/// The hang-up over HTTP/2: 4 callers take the permits, a 5th waits and resets its stream
/// after 5 ms (its response future dropped: RST_STREAM), then 20 callers at once 30 ms
/// later on the same connection. The queue is empty when they arrive, and they arrive at
/// once: all should be let in.
///
/// Measured: 16 of 20 refused, none waiting before the burst (debug 5 runs, release 3); before
/// `5b08e6d`, 0.
#[test]
fn over_http2_a_burst_after_a_stream_reset_while_waiting_is_let_in_whole() {
    judged(|| async {
        let (stats, service) = socket_unbounded(Admission::new(), 60);
        let addr = server::serve(service, true).await;
        let sender = connect(addr).await;
        let start = Instant::now();
        let call = |sender: &callers::h2::Sender| {
            let sender = sender.clone();
            tokio::spawn(async move { callers::h2::call(&sender, addr, "/r2", &[]).await.0 })
        };
        let first: Vec<_> = (0..4).map(|_| call(&sender)).collect();
        tokio::time::sleep(Duration::from_millis(3)).await;
        let gone = call(&sender);
        tokio::time::sleep(Duration::from_millis(5)).await;
        gone.abort();
        tokio::time::sleep_until((start + Duration::from_millis(30)).into()).await;
        let waiting = stats.admission_counts().waiting;
        let burst: Vec<_> = (0..20).map(|_| call(&sender)).collect();
        let (a, _) = refused(first).await;
        let (b, n) = refused(burst).await;
        let counts = stats.admission_counts();
        eprintln!(
            "http/2 reset: waiting {waiting} before the burst, first {a} refused, burst {b} of {n} \
             refused; overloaded {}, left queue {}, limit {}",
            counts.overloaded, counts.left_queue, counts.limit
        );
        verdict!(
            a + b == 0,
            "over HTTP/2, {b} of a burst of {n} at once refused 30 ms after a lone waiter reset \
             its stream (waiting before the burst: {waiting}) on a fresh 60 ms handler that takes \
             any number at once; overloaded {}, left queue {}, limit {}",
            counts.overloaded,
            counts.left_queue,
            counts.limit
        );
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------
// 7. Budgets.
// ---------------------------------------------------------------------------------------

/// The two waves, each caller with a budget of an hour (in process): the cold rule leaves
/// them to the rule before it (slow start's `rush`: half a limit's worth before any answer),
/// measured here to compare; and mixed, the second wave's callers half with an hour, half
/// without.
async fn two_waves_with(budget: [Option<&'static str>; 2]) -> (usize, usize, usize, usize) {
    let (_stats, service) = unbounded(Admission::new(), 60);
    let start = Instant::now();
    let first: Vec<_> = (0..8)
        .map(|_| {
            let s = service.clone();
            tokio::spawn(async move { s.oneshot(request("/b", budget[0])).await.unwrap().status() })
        })
        .collect();
    tokio::time::sleep_until((start + Duration::from_millis(30)).into()).await;
    let mut with = Vec::new();
    let mut without = Vec::new();
    for i in 0..16 {
        let s = service.clone();
        let b = budget[i % 2];
        let h = tokio::spawn(async move { s.oneshot(request("/b", b)).await.unwrap().status() });
        if b.is_some() {
            with.push(h)
        } else {
            without.push(h)
        }
    }
    let (a, _) = refused(first).await;
    let (w, _) = refused(with).await;
    let (wo, n_wo) = refused(without).await;
    (a, w, wo, n_wo)
}

/// Must hold 3 on a fresh server: callers with an hour's budget in a second burst 30 ms
/// after the first (8, then 16, on a 60 ms handler that takes any number at once) are let
/// in. Before any answer the queue holds half a limit's worth of callers with a budget
/// (slow start's `rush`), so the second burst is refused whole, with or without the cold
/// rule (it leaves callers with a budget alone): 16 of 16 in every run, and 2 of the first
/// 8 (4 take the permits, 2 wait). Mixed (half of the
/// second burst without a budget): the callers without one were refused 8 of 8 under the
/// cold rule, 0 without it.
#[test]
#[ignore = "known limit: 2 of 8 callers with an hour's budget refused in a burst on a fresh server, 16 of 16 in a second burst 30 ms later (slow start's refusal at arrival: before any answer half a limit's worth waits)"]
fn callers_with_an_hours_budget_in_a_second_burst_on_a_fresh_server_are_let_in() {
    judged(|| async {
        let (first, with, _, _) =
            two_waves_with([Some(callers::HOUR_MS), Some(callers::HOUR_MS)]).await;
        eprintln!("hour budgets: first burst refused {first} of 8, second {with} of 16");
        verdict!(
            first + with == 0,
            "callers with an hour's budget refused on a fresh server: {first} of the first \
             burst of 8, {with} of the second of 16 (30 ms later)"
        );
        let (first, with, without, n) = two_waves_with([None, Some(callers::HOUR_MS)]).await;
        verdict!(
            first + with + without == 0,
            "mixed second burst: {first} of 8 refused in the first (no budget), {with} of 8 with \
             an hour's budget and {without} of {n} without in the second"
        );
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------
// 8. A user who gave the handler's concurrency (`limit(64)`).
// ---------------------------------------------------------------------------------------

/// The spread burst in process, with `Admission::new().limit(64)`: the user said the
/// handler takes 64 at once (it takes any number: 60 ms each). 48 callers without a
/// budget, one a millisecond. tower's `ConcurrencyLimit::new(64)` with `LoadShed` refuses
/// none of them (never more than 48 in flight); the handler answers each in 60 ms. Slow
/// start begins at 4 permits whatever the user said, and from 20 ms after the first waiter
/// to the first answer the cold rule refuses every caller past 4 waiting.
///
/// Measured: 23-24 of 48 refused (debug 3 runs, release 2); before `5b08e6d`, 0 (3 runs).
#[test]
fn with_limit_64_a_burst_of_48_over_48_ms_is_let_in_whole() {
    judged(|| async {
        let (stats, service) =
            unbounded(Admission::new().limit(NonZeroUsize::new(64).unwrap()), 60);
        let start = Instant::now();
        let mut calls = Vec::new();
        for i in 0..48u32 {
            tokio::time::sleep_until((start + Duration::from_millis(1) * i).into()).await;
            calls.push(tokio::spawn(status(service.clone(), "/l64")));
        }
        let (bad, n) = refused(calls).await;
        let counts = stats.admission_counts();
        eprintln!(
            "limit(64) spread: refused {bad} of {n}; overloaded {}, limit {}",
            counts.overloaded, counts.limit
        );
        verdict!(
            bad == 0,
            "{bad} of {n} callers (one a millisecond) refused under limit(64) on a 60 ms handler \
             that takes any number at once (tower's ConcurrencyLimit(64) + LoadShed: none); \
             overloaded {}, limit {}",
            counts.overloaded,
            counts.limit
        );
        Ok(())
    });
}
