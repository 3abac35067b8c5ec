//! A hostile review of two admission changes: a client error (4xx but 408 and 429) taught
//! nothing (Netflix `concurrency-limits`' `onIgnore`; withdrawn after this review: a route
//! whose 4xx are its work, a 401 after a slow auth call or a 404 after a DB miss, never
//! warmed and kept its limit at 4), and slow start's refusal at arrival bounds callers
//! without a budget on a route warming up. Shapes the author's tests do not try: 4xx that are
//! expensive, a route answering only 4xx, gRPC errors (HTTP 200, `grpc-status`), 429 and 408
//! from the handler, callers without a budget at 0.8x on a fresh server. Over HTTP/2 (one
//! connection), a hyper server with the layer on 127.0.0.1:0, bounded by `server::LIMIT`,
//! margins 5x or more. The shapes that fail on this tree (each failed before the two changes
//! too) are ignored with their figures: docs::admission's known limits.
#![cfg(feature = "server")]

#[path = "support/server.rs"]
mod server;

#[path = "support/callers.rs"]
mod callers;

#[path = "support/timekeeping.rs"]
mod timekeeping;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use callers::BUDGET;
use callers::h2::{Sender, call, connect};
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};

use shared_headers::deadline::BudgetHeader;
use shared_headers::server::{Admission, SharedHeadersLayer};
use timekeeping::retried;
use tower::{Layer, service_fn};

fn answer(status: StatusCode) -> Response<Full<Bytes>> {
    let mut res = Response::new(Full::new(Bytes::new()));
    *res.status_mut() = status;
    res
}

/// A gRPC error in trailers-only form: HTTP 200, `grpc-status` in the head.
fn grpc_error(code: u32) -> Response<Full<Bytes>> {
    let mut res = answer(StatusCode::OK);
    let h = res.headers_mut();
    h.insert("content-type", "application/grpc".parse().unwrap());
    h.insert("grpc-status", code.to_string().parse().unwrap());
    res
}

/// One call's fate: (sent since start, status, took).
type Fate = (Duration, StatusCode, Duration);

/// `n` calls of `path`, `rate` a second (evenly spaced, or exponential gaps from a fixed
/// seed when `random`), each with `headers`.
async fn arrivals(
    sender: &Sender,
    addr: SocketAddr,
    path: &'static str,
    rate: f64,
    n: usize,
    random: bool,
    headers: Vec<(&'static str, String)>,
) -> Vec<Fate> {
    let start = Instant::now();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut at = Duration::ZERO;
    let mut calls = Vec::with_capacity(n);
    for i in 0..n {
        if random {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let u = ((seed >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
            at += Duration::from_secs_f64(-u.ln() / rate);
        } else {
            at = Duration::from_secs_f64(i as f64 / rate);
        }
        tokio::time::sleep_until((start + at).into()).await;
        let sender = sender.clone();
        let headers = headers.clone();
        calls.push(tokio::spawn(async move {
            let sent = start.elapsed();
            let (status, took) = call(&sender, addr, path, &headers).await;
            (sent, status, took)
        }));
    }
    let mut out = Vec::with_capacity(n);
    for c in calls {
        out.push(c.await.unwrap());
    }
    out
}

fn budget(ms: u64) -> Vec<(&'static str, String)> {
    vec![(BUDGET, ms.to_string())]
}

fn p99(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get((v.len() * 99 / 100).min(v.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}

/// (status, took ms) of the first 10 fates not answered `expected`.
fn others(fates: &[Fate], expected: StatusCode) -> (usize, Vec<(u16, u128)>) {
    let bad: Vec<_> = fates
        .iter()
        .filter(|f| f.1 != expected)
        .map(|f| (f.1.as_u16(), f.2.as_millis()))
        .collect();
    (bad.len(), bad.into_iter().take(10).collect())
}

/// Must hold 3 (0 refusals at 0.8x of callers whose budget is at least 5x the unloaded
/// p99) on a route whose every answer is a 401 after a 40 ms auth call (an identity
/// provider that takes 16 at a time: capacity 400/s). `Admission::new()` (no limit),
/// callers at 200/s (0.5x) with 400 ms budgets (10x), 2 s. The 401s teach nothing, so the
/// limit never leaves its start (4 permits: 100/s) and the route never warms: the queue's
/// rule for a cold route in slow start (half a limit's worth of callers with a budget)
/// refuses callers the handler had room for. As reviewed: 208-210 of 400 refused; with 4xx
/// teaching again, 0-11 (2 before the rule): slow start's fresh-server refusal at arrival,
/// as for random arrivals at 0.8x.
#[test]
#[ignore = "known limit: 0-11 of 400 refused (208-210 while 4xx taught nothing): slow start's refusal on a fresh server"]
fn expensive_401s_at_half_load_are_held_to_the_starting_limit_and_refused() {
    retried(|| async {
        let layer = SharedHeadersLayer::new()
            .caller_budget(BudgetHeader::envoy_expected_rq_timeout_ms())
            .timeout_status(StatusCode::GATEWAY_TIMEOUT)
            .admission(Admission::new());
        let stats = layer.stats();
        let idp = Arc::new(tokio::sync::Semaphore::new(16));
        let service = layer.layer(service_fn(move |_req: Request<Incoming>| {
            let idp = idp.clone();
            async move {
                let _w = idp.acquire().await.unwrap();
                tokio::time::sleep(Duration::from_millis(40)).await;
                Ok::<_, Infallible>(answer(StatusCode::UNAUTHORIZED))
            }
        }));
        let addr = server::serve(server::boxed(service), true).await;
        let sender = connect(addr).await;
        let fates = arrivals(&sender, addr, "/login", 200.0, 400, false, budget(400)).await;
        let (n, first) = others(&fates, StatusCode::UNAUTHORIZED);
        let c = stats.admission_counts();
        assert_eq!(
            n, 0,
            "{n} of 400 callers of a 40 ms 401 route (capacity 400/s) at 200/s with 400 ms \
             budgets not answered 401 ((status, ms): {first:?}); limit {}, overloaded {}, \
             shed {}, queued {}, admitted_cold {}",
            c.limit, c.overloaded, c.shed, c.queued, c.admitted_cold
        );
    });
}

/// Must hold 2 (no standing queue: p99 of good answers at most 3x the unloaded p99) and the
/// brief's question "does the queue still bound?" on a route answering only 4xx under
/// overload: a 404 after a 40 ms DB miss, a DB that takes 2 at a time (capacity 50/s),
/// callers without a budget at 100/s (2x) for 3 s. Every answer is ignored: the route stays
/// cold for ever (`admitted_cold` counts each), the limiter never settles, and a caller
/// without a budget on a cold route meets no bound (the queue's length binds only callers
/// with a budget or a settled limiter; slow start's refusal needs a floor): the queue grows
/// by 50 a second. Checked against 750 ms (the bar of the author's own flood test), far
/// over 3x the unloaded 40 ms.
#[test]
fn a_route_answering_only_expensive_404s_queues_callers_without_a_budget_without_bound() {
    retried(|| async {
        let layer = SharedHeadersLayer::new().admission(Admission::new());
        let stats = layer.stats();
        let db = Arc::new(tokio::sync::Semaphore::new(2));
        let service = layer.layer(service_fn(move |_req: Request<Incoming>| {
            let db = db.clone();
            async move {
                let _w = db.acquire().await.unwrap();
                tokio::time::sleep(Duration::from_millis(40)).await;
                Ok::<_, Infallible>(answer(StatusCode::NOT_FOUND))
            }
        }));
        let addr = server::serve(server::boxed(service), true).await;
        let sender = connect(addr).await;
        let fates = arrivals(&sender, addr, "/items/1", 100.0, 300, false, vec![]).await;
        let answered: Vec<_> = fates
            .iter()
            .filter(|f| f.1 == StatusCode::NOT_FOUND)
            .map(|f| f.2)
            .collect();
        let n = answered.len();
        let p = p99(answered);
        let c = stats.admission_counts();
        eprintln!(
            "p99 {} ms of {n} 404s; admitted_cold {}, queued {}, overloaded {}, limit {}",
            p.as_millis(),
            c.admitted_cold,
            c.queued,
            c.overloaded,
            c.limit
        );
        assert!(
            p <= Duration::from_millis(750),
            "p99 of {n} answers {} ms for callers without a budget of a route answering only \
             40 ms 404s (capacity 50/s) at 2x: no bound; admitted_cold {}, queued {}, \
             overloaded {}, limit {}",
            p.as_millis(),
            c.admitted_cold,
            c.queued,
            c.overloaded,
            c.limit
        );
    });
}

/// The 4xx rule's own reason ("a fast 400 ... would show a handler that takes many at once
/// and no queue in it"), applied to gRPC, whose errors are HTTP 200 with `grpc-status`: the
/// author's `fast_400s_on_a_route_hide_the_queue_in_its_handler` with the bad inputs
/// answered as gRPC does (200, `grpc-status: 3`, INVALID_ARGUMENT, at once). 2 workers x
/// 40 ms (50/s), good calls at 100/s (2x) and bad ones at 100/s, 400 ms budgets, 4 s; over
/// the last 2 s goodput at least 0.5, at most 10% timed out, limit at most 4 (as that
/// test). Admission reads only the HTTP status: the INVALID_ARGUMENTs teach as fast answers.
#[test]
#[ignore = "known limit: goodput 0.68-0.84, p99 400-440 ms: fast gRPC errors read as capacity, as fast 400s"]
fn grpc_invalid_argument_answers_hide_the_queue_as_fast_400s_did() {
    fast_errors_beside_a_2x_route(|| grpc_error(3), "grpc-status 3");
}

/// The same with the handler's own rate limiter answering 429 at once (tower_governor,
/// a per-key quota): 429 is kept as a lesson, so each fast 429 is an answer on time that
/// proves in slow start that the handler takes many at once, and shows no queue.
#[test]
#[ignore = "known limit: goodput 0.75-1.02, p99 394-430 ms: fast 429s read as capacity"]
fn fast_429s_from_an_inner_rate_limiter_hide_the_queue_in_the_handler() {
    fast_errors_beside_a_2x_route(|| answer(StatusCode::TOO_MANY_REQUESTS), "429");
}

fn fast_errors_beside_a_2x_route(bad: fn() -> Response<Full<Bytes>>, what: &str) {
    retried(|| async {
        let layer = SharedHeadersLayer::new()
            .caller_budget(BudgetHeader::envoy_expected_rq_timeout_ms())
            .timeout_status(StatusCode::GATEWAY_TIMEOUT)
            .admission(Admission::new());
        let stats = layer.stats();
        let workers = Arc::new(tokio::sync::Semaphore::new(2));
        let service = layer.layer(service_fn(move |req: Request<Incoming>| {
            let workers = workers.clone();
            let is_bad = req.uri().query() == Some("bad");
            async move {
                if is_bad {
                    return Ok::<_, Infallible>(bad());
                }
                let _w = workers.acquire().await.unwrap();
                tokio::time::sleep(Duration::from_millis(40)).await;
                Ok(answer(StatusCode::OK))
            }
        }));
        let addr = server::serve(server::boxed(service), true).await;
        let sender = connect(addr).await;
        let (s1, s2) = (sender.clone(), sender.clone());
        let good = tokio::spawn(async move {
            arrivals(&s1, addr, "/items", 100.0, 400, false, budget(400)).await
        });
        let badc = tokio::spawn(async move {
            arrivals(&s2, addr, "/items?bad", 100.0, 400, false, budget(400)).await
        });
        let good = good.await.unwrap();
        drop(badc.await.unwrap());
        let last: Vec<_> = good
            .iter()
            .filter(|f| f.0 >= Duration::from_secs(2))
            .collect();
        let in_time = last
            .iter()
            .filter(|f| f.1 == StatusCode::OK && f.2 <= Duration::from_millis(400))
            .count();
        let timed_out = last
            .iter()
            .filter(|f| f.1 == StatusCode::GATEWAY_TIMEOUT)
            .count();
        let goodput = in_time as f64 / 100.0;
        let p = p99(last
            .iter()
            .filter(|f| f.1 == StatusCode::OK)
            .map(|f| f.2)
            .collect());
        let c = stats.admission_counts();
        eprintln!(
            "{what}: goodput {goodput:.2}, p99 {} ms, {timed_out} of {} timed out, limit {}",
            p.as_millis(),
            last.len(),
            c.limit
        );
        assert!(
            goodput >= 0.5
                && timed_out * 10 <= last.len()
                && c.limit <= 4
                && p <= Duration::from_millis(200),
            "fast {what} answers beside a 2 workers x 40 ms route at 2x: goodput {goodput:.2} \
             ({in_time} in time in 2 s), p99 of good answers {} ms (bar 200: 5x the unloaded \
             40 ms), {timed_out} of {} good callers timed out; limit {} at the end, \
             overloaded {}, queued {}",
            p.as_millis(),
            last.len(),
            c.limit,
            c.overloaded,
            c.queued,
        );
    });
}

/// Must hold 5 ("only answered requests teach the estimate") and 3: a 408 is the server
/// giving up on a client that did not send its body in time (the handler waited 300 ms for
/// an upload that never came), as much a request cut short as a hang-up, and says nothing
/// of the route's work, yet it is kept as a lesson. A 5 ms route, 40 good calls a second
/// with 100 ms budgets (20x) and 10 slow uploads a second answered 408 after 300 ms (no
/// budget), 3 s, capacity unbounded: the 408s are a fifth of the answers and still taught.
/// (Held in review: no good caller refused.)
#[test]
fn slow_uploads_answered_408_beside_a_fast_route_refuse_no_good_caller() {
    retried(|| async {
        let layer = SharedHeadersLayer::new()
            .caller_budget(BudgetHeader::envoy_expected_rq_timeout_ms())
            .timeout_status(StatusCode::GATEWAY_TIMEOUT)
            .admission(Admission::new());
        let stats = layer.stats();
        let service = layer.layer(service_fn(move |req: Request<Incoming>| {
            let slow = req.uri().query() == Some("slow");
            async move {
                if slow {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    return Ok::<_, Infallible>(answer(StatusCode::REQUEST_TIMEOUT));
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
                Ok(answer(StatusCode::OK))
            }
        }));
        let addr = server::serve(server::boxed(service), true).await;
        let sender = connect(addr).await;
        let (s1, s2) = (sender.clone(), sender.clone());
        let good = tokio::spawn(async move {
            arrivals(&s1, addr, "/upload", 40.0, 120, false, budget(100)).await
        });
        let slow = tokio::spawn(async move {
            arrivals(&s2, addr, "/upload?slow", 10.0, 30, false, vec![]).await
        });
        let good = good.await.unwrap();
        drop(slow.await.unwrap());
        let (n, first) = others(&good, StatusCode::OK);
        let c = stats.admission_counts();
        assert_eq!(
            n, 0,
            "{n} of 120 callers of a 5 ms route with 100 ms budgets not answered OK beside \
             slow uploads answered 408 after 300 ms ((status, ms): {first:?}); shed {}, \
             overloaded {}, limit {}",
            c.shed, c.overloaded, c.limit
        );
    });
}

/// Must hold 3 (no good caller refused at 0.8x or below), callers without a budget (no
/// budget is more than any 5x): a fresh server, a handler with room for all (100 ms, no
/// limit of its own), two calls one after the other (the route's floor known, 100 ms; not
/// warm), then 40 callers at once. Nothing overloads anything: all 40 run at once in 100 ms.
/// (Held in review: slow start's refusal at arrival, now asked of callers without a budget,
/// did not refuse this burst.)
#[test]
fn a_burst_of_40_callers_without_a_budget_on_a_fresh_server_is_served() {
    retried(|| async {
        let layer = SharedHeadersLayer::new().admission(Admission::new());
        let stats = layer.stats();
        let service = layer.layer(service_fn(move |_req: Request<Incoming>| async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Ok::<_, Infallible>(answer(StatusCode::OK))
        }));
        let addr = server::serve(server::boxed(service), true).await;
        let sender = connect(addr).await;
        for _ in 0..2 {
            assert_eq!(call(&sender, addr, "/s", &[]).await.0, StatusCode::OK);
        }
        let burst: Vec<_> = (0..40)
            .map(|_| {
                let sender = sender.clone();
                tokio::spawn(async move { call(&sender, addr, "/s", &[]).await })
            })
            .collect();
        let mut refused = Vec::new();
        for b in burst {
            let (status, took) = b.await.unwrap();
            if status != StatusCode::OK {
                refused.push((status.as_u16(), took.as_millis()));
            }
        }
        let c = stats.admission_counts();
        assert!(
            refused.is_empty(),
            "{} of 40 callers without a budget refused in a burst on a fresh server whose \
             handler takes all at once ((status, ms): {:?}); overloaded {}, queued {}, limit {}",
            refused.len(),
            &refused[..refused.len().min(10)],
            c.overloaded,
            c.queued,
            c.limit
        );
    });
}

/// Must hold 3 with random arrivals (exponential gaps, fixed seed) of callers without a
/// budget at 0.8x on a fresh server: a handler that takes 2 at a time.
fn random_arrivals_without_a_budget(service_ms: u64, rate: f64, n: usize) {
    retried(|| async {
        let layer = SharedHeadersLayer::new().admission(Admission::new());
        let stats = layer.stats();
        let workers = Arc::new(tokio::sync::Semaphore::new(2));
        let service = layer.layer(service_fn(move |_req: Request<Incoming>| {
            let workers = workers.clone();
            async move {
                let _w = workers.acquire().await.unwrap();
                tokio::time::sleep(Duration::from_millis(service_ms)).await;
                Ok::<_, Infallible>(answer(StatusCode::OK))
            }
        }));
        let addr = server::serve(server::boxed(service), true).await;
        let sender = connect(addr).await;
        let fates = arrivals(&sender, addr, "/r", rate, n, true, vec![]).await;
        let (bad, first) = others(&fates, StatusCode::OK);
        let c = stats.admission_counts();
        assert_eq!(
            bad, 0,
            "{bad} of {n} random arrivals without a budget at 0.8x of a 2 x {service_ms} ms \
             handler on a fresh server not answered OK ((status, ms): {first:?}); overloaded \
             {}, shed {}, queued {}, limit {}",
            c.overloaded, c.shed, c.queued, c.limit
        );
    });
}

/// 2 x 20 ms (100/s), 80/s, 3 s.
#[test]
#[ignore = "known limit: 4-15 of 240 refused: the delay bound for callers without a budget meets random arrivals"]
fn random_arrivals_without_a_budget_at_0_8x_on_a_fresh_server_are_refused() {
    random_arrivals_without_a_budget(20, 80.0, 240);
}

/// A slow handler: 2 x 100 ms (20/s), 16/s, 4 s.
#[test]
#[ignore = "known limit: 4 of 64 refused: the delay bound for callers without a budget meets random arrivals"]
fn random_arrivals_without_a_budget_at_0_8x_of_a_slow_handler_are_refused() {
    random_arrivals_without_a_budget(100, 16.0, 64);
}

/// Must hold 3 ("after a start whose first 10 answers are 300x slower than steady state,
/// 0 refusals of callers whose budget is at least 10x the steady p99"), callers without a
/// budget: a fresh server whose first 10 answers take 300 ms (all 10 at once, a cold
/// cache), then 1 ms, a handler with room for all. Then bursts of 20 at once every 100 ms
/// (200/s, a fraction of the capacity) for 2 s. The route's floor is the least answer so
/// far, 300 ms at first: slow start's refusal counts each caller without a budget at that
/// floor. (Held in review: none refused.)
#[test]
fn a_fresh_server_whose_first_answers_are_300x_slower_serves_callers_without_a_budget() {
    retried(|| async {
        let layer = SharedHeadersLayer::new().admission(Admission::new());
        let stats = layer.stats();
        let seen = Arc::new(AtomicUsize::new(0));
        let service = layer.layer(service_fn(move |_req: Request<Incoming>| {
            let first = seen.fetch_add(1, Ordering::Relaxed) < 10;
            async move {
                let ms = if first { 300 } else { 1 };
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok::<_, Infallible>(answer(StatusCode::OK))
            }
        }));
        let addr = server::serve(server::boxed(service), true).await;
        let sender = connect(addr).await;
        let cold: Vec<_> = (0..10)
            .map(|_| {
                let sender = sender.clone();
                tokio::spawn(async move { call(&sender, addr, "/c", &[]).await.0 })
            })
            .collect();
        for c in cold {
            assert_eq!(c.await.unwrap(), StatusCode::OK);
        }
        let start = Instant::now();
        let mut calls = Vec::new();
        for round in 0..20u32 {
            tokio::time::sleep_until((start + Duration::from_millis(100) * round).into()).await;
            for _ in 0..20 {
                let sender = sender.clone();
                calls.push(tokio::spawn(
                    async move { call(&sender, addr, "/c", &[]).await },
                ));
            }
        }
        let mut refused = Vec::new();
        for c in calls {
            let (status, took) = c.await.unwrap();
            if status != StatusCode::OK {
                refused.push((status.as_u16(), took.as_millis()));
            }
        }
        let c = stats.admission_counts();
        assert!(
            refused.is_empty(),
            "{} of 400 callers without a budget refused after a start whose first 10 answers \
             took 300 ms (then 1 ms) ((status, ms): {:?}); overloaded {}, queued {}, limit {}",
            refused.len(),
            &refused[..refused.len().min(10)],
            c.overloaded,
            c.queued,
            c.limit
        );
    });
}

/// `count_only(true)` ("rejects nothing"): a flood of callers without a budget at a fresh
/// server (the shape slow start's refusal now bounds) is answered, every one.
#[test]
fn count_only_refuses_no_caller_without_a_budget_in_a_flood() {
    retried(|| async {
        let layer = SharedHeadersLayer::new().admission(Admission::new().count_only(true));
        let workers = Arc::new(tokio::sync::Semaphore::new(2));
        let service = layer.layer(service_fn(move |_req: Request<Incoming>| {
            let workers = workers.clone();
            async move {
                let _w = workers.acquire().await.unwrap();
                tokio::time::sleep(Duration::from_millis(10)).await;
                Ok::<_, Infallible>(answer(StatusCode::OK))
            }
        }));
        let addr = server::serve(server::boxed(service), true).await;
        let sender = connect(addr).await;
        let fates = arrivals(&sender, addr, "/n", 400.0, 200, false, vec![]).await;
        let (bad, first) = others(&fates, StatusCode::OK);
        assert_eq!(bad, 0, "count_only refused {bad} of 200: {first:?}");
    });
}

/// Must hold 2 (no standing queue; at most 2% of callers wait out their budget) on a route
/// answering mostly 4xx under overload: `/items/{id}` where 9 lookups in 10 miss (a 404
/// after a 40 ms DB query) and 1 in 10 finds the item (200 after the same 40 ms), a DB that
/// takes 2 at a time (50/s), callers at 100/s (2x) with 400 ms budgets (10x), 4 s. A 404
/// is an answer the caller wanted, in time or not; over the last 2 s at least half the
/// capacity answered in time (404 or 200) and at most 10% timed out. Nine answers in ten
/// teach nothing: the route warms ten times slower and the limit learns from a tenth of
/// the work that fills the handler.
#[test]
#[ignore = "known limit: p99 130-201 ms against 200 (goodput 0.94-0.99), over it now and then"]
fn a_route_answering_mostly_expensive_404s_at_2x_times_its_callers_out() {
    retried(|| async {
        let layer = SharedHeadersLayer::new()
            .caller_budget(BudgetHeader::envoy_expected_rq_timeout_ms())
            .timeout_status(StatusCode::GATEWAY_TIMEOUT)
            .admission(Admission::new());
        let stats = layer.stats();
        let db = Arc::new(tokio::sync::Semaphore::new(2));
        let seen = Arc::new(AtomicUsize::new(0));
        let service = layer.layer(service_fn(move |_req: Request<Incoming>| {
            let db = db.clone();
            let found = seen.fetch_add(1, Ordering::Relaxed) % 10 == 0;
            async move {
                let _w = db.acquire().await.unwrap();
                tokio::time::sleep(Duration::from_millis(40)).await;
                Ok::<_, Infallible>(answer(if found {
                    StatusCode::OK
                } else {
                    StatusCode::NOT_FOUND
                }))
            }
        }));
        let addr = server::serve(server::boxed(service), true).await;
        let sender = connect(addr).await;
        let fates = arrivals(&sender, addr, "/items/7", 100.0, 400, false, budget(400)).await;
        let last: Vec<_> = fates
            .iter()
            .filter(|f| f.0 >= Duration::from_secs(2))
            .collect();
        let in_time = last
            .iter()
            .filter(|f| {
                (f.1 == StatusCode::OK || f.1 == StatusCode::NOT_FOUND)
                    && f.2 <= Duration::from_millis(400)
            })
            .count();
        let timed_out = last
            .iter()
            .filter(|f| f.1 == StatusCode::GATEWAY_TIMEOUT)
            .count();
        let goodput = in_time as f64 / 100.0;
        let p = p99(last
            .iter()
            .filter(|f| {
                f.1 != StatusCode::GATEWAY_TIMEOUT && f.1 != StatusCode::SERVICE_UNAVAILABLE
            })
            .map(|f| f.2)
            .collect());
        let c = stats.admission_counts();
        eprintln!(
            "mostly 404: goodput {goodput:.2}, p99 {} ms, {timed_out} of {} timed out, limit {}, admitted_cold {}",
            p.as_millis(),
            last.len(),
            c.limit,
            c.admitted_cold
        );
        assert!(
            goodput >= 0.5 && timed_out * 10 <= last.len() && p <= Duration::from_millis(200),
            "a route answering 9 in 10 with a 404 after 40 ms (2 at a time) at 2x, 400 ms \
             callers: goodput {goodput:.2} ({in_time} in time in 2 s), p99 of answers {} ms \
             (bar 200), {timed_out} of {} timed out; limit {}, overloaded {}, queued {}, \
             admitted_cold {}",
            p.as_millis(),
            last.len(),
            c.limit,
            c.overloaded,
            c.queued,
            c.admitted_cold
        );
    });
}

/// Must hold 5 ("scanners and 1,000 distinct raw paths cannot make a warm route cold or
/// disable admission unseen") and 2: a scanner probing 1,000 distinct paths, each a 404
/// after a 40 ms DB miss on the same DB (2 at a time) as a real route `/api/items` (a
/// 40 ms query). The real route warmed first (40 calls); then real callers at 50/s (1x)
/// with 400 ms budgets and the scanner at 100/s (no budget, 400 distinct paths), 4 s: 3x on
/// the DB. Over the last 2 s, real callers: at least a third answered in time (their share
/// of the DB in a plain FIFO), at most 10% timed out. The scanner's 404s teach nothing and
/// its paths are cold: a caller without a budget on a cold route meets no bound, the
/// scanner's queue grows, and the real callers' predicted wait behind it refuses them.
#[test]
#[ignore = "known limit: 5-46 of 100 real callers in time (bar 34): a cold route's callers without a budget meet no bound, one limit per layer"]
fn a_scanner_of_expensive_404s_beside_a_real_route_gets_the_db_and_the_real_callers_are_refused() {
    retried(|| async {
        let layer = SharedHeadersLayer::new()
            .caller_budget(BudgetHeader::envoy_expected_rq_timeout_ms())
            .timeout_status(StatusCode::GATEWAY_TIMEOUT)
            .admission(Admission::new());
        let stats = layer.stats();
        let db = Arc::new(tokio::sync::Semaphore::new(2));
        let service = layer.layer(service_fn(move |req: Request<Incoming>| {
            let db = db.clone();
            let real = req.uri().path() == "/api/items";
            async move {
                let _w = db.acquire().await.unwrap();
                tokio::time::sleep(Duration::from_millis(40)).await;
                Ok::<_, Infallible>(answer(if real {
                    StatusCode::OK
                } else {
                    StatusCode::NOT_FOUND
                }))
            }
        }));
        let addr = server::serve(server::boxed(service), true).await;
        let sender = connect(addr).await;
        for _ in 0..40 {
            assert_eq!(
                call(&sender, addr, "/api/items", &budget(1000)).await.0,
                StatusCode::OK
            );
        }
        let s2 = sender.clone();
        let scanner = tokio::spawn(async move {
            let start = Instant::now();
            let mut calls = Vec::new();
            for i in 0..400u32 {
                tokio::time::sleep_until((start + Duration::from_millis(10) * i).into()).await;
                let s2 = s2.clone();
                calls.push(tokio::spawn(async move {
                    let path = format!("/wp-admin-{}.php", i * 5 % 1000 + i / 200);
                    call(&s2, addr, &path, &[]).await
                }));
            }
            let mut took = Vec::new();
            for c in calls {
                took.push(c.await.unwrap().1);
            }
            p99(took)
        });
        let good = arrivals(&sender, addr, "/api/items", 50.0, 200, false, budget(400)).await;
        let scanner_p99 = scanner.await.unwrap();
        let last: Vec<_> = good
            .iter()
            .filter(|f| f.0 >= Duration::from_secs(2))
            .collect();
        let in_time = last
            .iter()
            .filter(|f| f.1 == StatusCode::OK && f.2 <= Duration::from_millis(400))
            .count();
        let timed_out = last
            .iter()
            .filter(|f| f.1 == StatusCode::GATEWAY_TIMEOUT)
            .count();
        let c = stats.admission_counts();
        eprintln!(
            "scanner: {in_time} of {} in time, {timed_out} timed out, scanner p99 {} ms, limit {}, admitted_cold {}",
            last.len(),
            scanner_p99.as_millis(),
            c.limit,
            c.admitted_cold
        );
        assert!(
            in_time * 3 >= last.len() && timed_out * 10 <= last.len(),
            "real route beside a scanner of expensive 404s (2x on a 2-worker DB): {in_time} \
             of {} real callers answered in time over the last 2 s, {timed_out} timed out; \
             limit {}, overloaded {}, queued {}, admitted_cold {}",
            last.len(),
            c.limit,
            c.overloaded,
            c.queued,
            c.admitted_cold
        );
    });
}
