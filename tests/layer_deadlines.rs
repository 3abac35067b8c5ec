//! The process-wide deadline queue and the caller's budget (issue 20, items 1-4), in process
//! (tower `call`/`oneshot`, no sockets):
//!
//! * deadlines of a mix of lengths, on different layers, commit in the order of their instants,
//!   each at its deadline;
//! * no deadline waits for a hook: a slow, a stuck and a panicking `on_commit` (whose payload
//!   panics again when dropped) delay no other request's commit and leave the deadline thread
//!   alive; 1,000 requests expiring at once with a 1 ms hook each commit within a bound of
//!   their deadline (the lateness distribution is printed; `benches/deadlines.rs` prints the
//!   same figure);
//! * the caller's budget headers: each form, the earlier deadline wins, a caller cannot extend
//!   the server's, malformed values fall back and are counted and recorded, the deadline the
//!   handler sees (`Exchange::deadline`, `Deadline::current`).
//!
//! Commit instants are the records' `time_to_commit()` (the seal, made by the deadline thread), so
//! the timing asserts do not depend on when the test's tasks get a worker. The bounds are
//! generous for a loaded 2-core machine; each test prints what it measured.
#![cfg(feature = "server")]

use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use http::{HeaderName, Request, Response, StatusCode};
use shared_headers::deadline::{BudgetError, BudgetHeader, Deadline, DeadlineSource};
use shared_headers::server::SharedHeadersLayer;
use shared_headers::{Committed, Exchange, Outcome};
use tower::{Layer, Service, ServiceExt, service_fn};

/// How late a commit may be after its deadline on a loaded 2-core machine (the deadline
/// thread is a plain std thread, woken by a condvar timeout; the figures seen are printed).
const LATE: Duration = Duration::from_millis(60);
/// Every test ends well within this; a hang fails instead of blocking.
const LIMIT: Duration = Duration::from_secs(30);

/// Runs `test` on a multi-thread runtime of `workers` workers, failing after [`LIMIT`].
fn run(workers: usize, test: impl Future<Output = ()>) {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            tokio::time::timeout(LIMIT, test)
                .await
                .expect("test timed out")
        });
}

/// A handler that answers 200 after `after`.
fn slow(
    after: Duration,
) -> impl Service<
    Request<()>,
    Response = Response<String>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<String>, Infallible>> + Send,
> + Clone
+ Send {
    service_fn(move |_req: Request<()>| async move {
        tokio::time::sleep(after).await;
        Ok::<_, Infallible>(Response::new(String::from("late")))
    })
}

fn record<B>(res: &Response<B>) -> Committed {
    res.extensions().get::<Committed>().unwrap().clone()
}

/// How late the commit was after the request's deadline (`latency - budget`, both measured
/// from the call of the layer's service).
fn lateness(committed: &Committed) -> Duration {
    committed
        .time_to_commit()
        .saturating_sub(committed.budget().expect("a deadline"))
}

fn assert_on_time(committed: &Committed, what: &str) {
    assert_eq!(committed.outcome(), Outcome::TimedOut, "{what}");
    assert!(
        committed.time_to_commit() >= committed.budget().unwrap(),
        "{what}: committed before its deadline: {:?} < {:?}",
        committed.time_to_commit(),
        committed.budget().unwrap()
    );
    assert!(
        lateness(committed) < LATE,
        "{what}: committed {:?} after its deadline",
        lateness(committed)
    );
}

// ---------------------------------------------------------------------------------------------
// 2. Mixed lengths fire in order
// ---------------------------------------------------------------------------------------------

#[test]
fn deadlines_of_mixed_lengths_commit_in_order_each_at_its_deadline() {
    run(2, async {
        let hooked = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        // Armed in this order, on four layers sharing the process's one queue.
        for ms in [300u64, 100, 200, 50] {
            let log = hooked.clone();
            let layer = SharedHeadersLayer::new()
                .timeout(Duration::from_millis(ms))
                .on_commit(move |_| log.lock().unwrap().push(ms));
            let mut service = layer.layer(slow(Duration::from_secs(10)));
            let called = Instant::now();
            let future = service.ready().await.unwrap().call(Request::new(()));
            tasks.push((ms, called, tokio::spawn(future)));
        }
        let mut commits = Vec::new();
        for (ms, called, task) in tasks {
            let res = task.await.unwrap().unwrap();
            assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
            let committed = record(&res);
            assert_eq!(committed.budget(), Some(Duration::from_millis(ms)));
            println!(
                "{ms} ms deadline: committed at {:?}",
                committed.time_to_commit()
            );
            assert_on_time(&committed, &format!("{ms} ms"));
            // `called` is just before the layer's `started`: the order of these instants is
            // the order of the commits (they are 50 ms apart, far beyond that slack).
            commits.push((called + committed.time_to_commit(), ms));
        }
        commits.sort();
        let order: Vec<u64> = commits.iter().map(|&(_, ms)| ms).collect();
        assert_eq!(order, [50, 100, 200, 300], "commit order");
        assert_eq!(
            *hooked.lock().unwrap(),
            [50, 100, 200, 300],
            "on_commit order"
        );
    });
}

// ---------------------------------------------------------------------------------------------
// 3. No deadline waits for a hook, and none is lost
// ---------------------------------------------------------------------------------------------

/// (a) A 500 ms `on_commit` and five requests with a 50 ms deadline. Each commit is at ~50 ms
/// (the seal does not wait for any hook); each answer leaves after its own hook, and with five
/// workers (one per request, so the worker count forces no queueing) the five hooks overlap:
/// every answer is out before 1 s, where one hook after another would put them at 0.55, 1.05,
/// 1.55, 2.05 and 2.55 s.
#[test]
fn a_slow_hook_delays_no_other_commit() {
    run(5, async {
        let layer = SharedHeadersLayer::new()
            .timeout(Duration::from_millis(50))
            .on_commit(|_| std::thread::sleep(Duration::from_millis(500)));
        let service = layer.layer(slow(Duration::from_secs(10)));
        let start = Instant::now();
        let tasks: Vec<_> = (0..5)
            .map(|_| {
                let service = service.clone();
                tokio::spawn(async move {
                    let res = service.oneshot(Request::new(())).await.unwrap();
                    (res, start.elapsed())
                })
            })
            .collect();
        for (i, task) in tasks.into_iter().enumerate() {
            let (res, answered) = task.await.unwrap();
            assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
            let committed = record(&res);
            println!(
                "request {i}: committed at {:?}, answered at {answered:?}",
                committed.time_to_commit()
            );
            assert_on_time(&committed, &format!("request {i}"));
            assert!(
                answered >= Duration::from_millis(500),
                "the answer leaves after its hook"
            );
            assert!(
                answered < Duration::from_millis(1000),
                "request {i} answered at {answered:?}: hooks serialized"
            );
        }
    });
}

/// (b) A hook stuck on a lock for one request (it holds one of the two workers until the test
/// lets it go); a later request with a 50 ms deadline and a 2 s handler still gets its 503 at
/// ~50 ms, not a 200 at 2 s.
#[test]
fn a_stuck_hook_stops_no_deadline() {
    run(2, async {
        let (release, gate) = mpsc::channel::<()>();
        let gate = Arc::new(Mutex::new(gate));
        let (entered_tx, entered) = mpsc::channel::<()>();
        let entered_tx = Mutex::new(entered_tx);
        let layer = SharedHeadersLayer::new()
            .timeout(Duration::from_millis(50))
            .on_commit(move |c| {
                if c.committed().uri().unwrap().path() == "/stuck" {
                    entered_tx.lock().unwrap().send(()).unwrap();
                    // Stuck until the test releases it (bounded, so a failure cannot hang).
                    let _ = gate.lock().unwrap().recv_timeout(Duration::from_secs(10));
                }
            });
        let service = layer.layer(slow(Duration::from_secs(2)));
        let stuck = tokio::spawn(
            service
                .clone()
                .oneshot(Request::get("/stuck").body(()).unwrap()),
        );
        tokio::task::spawn_blocking(move || entered.recv_timeout(Duration::from_secs(5)))
            .await
            .unwrap()
            .expect("the stuck request's hook ran");

        let start = Instant::now();
        let later = tokio::spawn(service.oneshot(Request::get("/later").body(()).unwrap()));
        let res = later.await.unwrap().unwrap();
        let answered = start.elapsed();
        let committed = record(&res);
        println!(
            "later request: {} committed at {:?}, answered at {answered:?}",
            res.status(),
            committed.time_to_commit()
        );
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_on_time(&committed, "later request");
        assert!(answered < Duration::from_millis(1000), "{answered:?}");

        release.send(()).unwrap();
        let res = stuck.await.unwrap().unwrap();
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    });
}

/// A panic payload whose own `Drop` panics.
struct PanicsOnDrop;

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("the panic payload panics when dropped");
    }
}

/// (c) A hook that panics with a payload whose `Drop` panics: the request is still answered
/// (its task does not die), and later requests still time out at their deadline (the deadline
/// thread is alive).
#[test]
fn a_hook_panicking_twice_kills_nothing() {
    run(2, async {
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let layer = SharedHeadersLayer::new()
            .timeout(Duration::from_millis(50))
            .on_commit(move |c| {
                counted.fetch_add(1, Ordering::SeqCst);
                if c.committed().uri().unwrap().path() == "/panic" {
                    std::panic::panic_any(PanicsOnDrop);
                }
            });
        let service = layer.layer(slow(Duration::from_secs(2)));
        let res = tokio::spawn(
            service
                .clone()
                .oneshot(Request::get("/panic").body(()).unwrap()),
        )
        .await
        .expect("the request's task survives its hook's panic")
        .unwrap();
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_on_time(&record(&res), "the panicking request");

        for i in 0..3 {
            let start = Instant::now();
            let res = tokio::spawn(
                service
                    .clone()
                    .oneshot(Request::get("/after").body(()).unwrap()),
            )
            .await
            .unwrap()
            .unwrap();
            let answered = start.elapsed();
            let committed = record(&res);
            println!(
                "request {i} after the panic: {} committed at {:?}, answered at {answered:?}",
                res.status(),
                committed.time_to_commit()
            );
            assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert_on_time(&committed, &format!("request {i} after the panic"));
            assert!(answered < Duration::from_millis(1000), "{answered:?}");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 4, "one hook call per request");
    });
}

/// (d) 1,000 requests whose deadlines are the same instant (each on its own layer, its timeout
/// computed to end at that instant), with a 1 ms `on_commit` each: every commit is within
/// [`STORM_LATE`] of its deadline. One hook after another would make the last 1 s late.
#[test]
fn a_timeout_storm_with_a_slow_hook_commits_every_request_on_time() {
    const REQUESTS: usize = 1_000;
    const STORM_LATE: Duration = Duration::from_millis(100);
    run(2, async {
        let hook = Arc::new(|_: &shared_headers::CommitEvent<'_>| {
            std::thread::sleep(Duration::from_millis(1))
        });
        let at = Instant::now() + Duration::from_millis(500);
        let mut tasks = Vec::with_capacity(REQUESTS);
        for _ in 0..REQUESTS {
            let hook = hook.clone();
            let timeout = at.saturating_duration_since(Instant::now());
            let mut service = SharedHeadersLayer::new()
                .timeout(timeout)
                .on_commit(move |c| hook(c))
                .layer(slow(Duration::from_secs(10)));
            let future = service.ready().await.unwrap().call(Request::new(()));
            tasks.push(tokio::spawn(future));
        }
        assert!(Instant::now() < at, "all armed before the instant");
        let mut late = Vec::with_capacity(REQUESTS);
        for task in tasks {
            let res = task.await.unwrap().unwrap();
            let committed = record(&res);
            assert_eq!(committed.outcome(), Outcome::TimedOut);
            assert!(committed.time_to_commit() >= committed.budget().unwrap());
            late.push(lateness(&committed));
        }
        late.sort();
        let pick = |q: usize| late[(late.len() * q / 100).min(late.len() - 1)];
        println!(
            "lateness of {REQUESTS} commits at one instant (1 ms hook each): p50 {:?}, p99 {:?}, max {:?}",
            pick(50),
            pick(99),
            late[late.len() - 1]
        );
        assert!(
            late[late.len() - 1] < STORM_LATE,
            "max lateness {:?}",
            late[late.len() - 1]
        );
    });
}

// ---------------------------------------------------------------------------------------------
// 4. Caller budgets
// ---------------------------------------------------------------------------------------------

/// What the handler saw: `Exchange::deadline`, `Deadline::current` in its poll, and
/// `Deadline::current` in a task it spawned.
#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    exchange: Option<Deadline>,
    in_poll: Option<Deadline>,
    in_spawn: Option<Deadline>,
}

/// Sends `headers` through `layer` around a handler that answers at once with what it saw.
/// Budgets of a few milliseconds are deadlines a loaded machine can reach before that answer
/// (the layer's own answer came, 1 run in 25 of a loop under load): what is checked here is
/// the deadline the layer set, not who wins, so such a call is made again (at most 50 times).
async fn budget_call(layer: &SharedHeadersLayer, headers: &[(&str, &str)]) -> (Committed, Seen) {
    for _ in 0..50 {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let out = seen.clone();
        let service = layer.clone().layer(service_fn(move |req: Request<()>| {
            let out = out.clone();
            async move {
                let exchange = req.extensions().get::<Exchange>().unwrap().deadline();
                let in_poll = Deadline::current();
                let in_spawn = tokio::spawn(async { Deadline::current() }).await.unwrap();
                *out.lock().unwrap() = Seen {
                    exchange,
                    in_poll,
                    in_spawn,
                };
                Ok::<_, Infallible>(Response::new(String::new()))
            }
        }));
        let mut req = Request::get("/budget");
        for &(name, value) in headers {
            req = req.header(name, value);
        }
        let res = service.oneshot(req.body(()).unwrap()).await.unwrap();
        assert_eq!(Deadline::current(), None, "no deadline outside the layer");
        if record(&res).outcome() == Outcome::TimedOut {
            continue;
        }
        assert_eq!(res.status(), StatusCode::OK);
        let seen = *seen.lock().unwrap();
        return (record(&res), seen);
    }
    panic!("50 calls answered by the layer's deadline, none by the handler: {headers:?}");
}

/// The record's deadline is the handler's (`Exchange::deadline` and `Deadline::current` in its
/// poll), and none reaches a plain `tokio::spawn`.
fn assert_seen(committed: &Committed, seen: Seen) {
    assert_eq!(seen.exchange, committed.deadline(), "Exchange::deadline");
    assert_eq!(seen.in_poll, committed.deadline(), "Deadline::current");
    assert_eq!(seen.in_spawn, None, "a plain spawn carries no deadline");
}

const SERVER: Duration = Duration::from_secs(5);

#[tokio::test]
async fn each_budget_header_form_sets_the_deadline() {
    let forms = [
        (BudgetHeader::grpc_timeout(), "grpc-timeout", "100m"),
        (
            BudgetHeader::connect_timeout_ms(),
            "connect-timeout-ms",
            "100",
        ),
        (
            BudgetHeader::envoy_expected_rq_timeout_ms(),
            "x-envoy-expected-rq-timeout-ms",
            "100",
        ),
        (
            BudgetHeader::millis(HeaderName::from_static("x-budget-ms")),
            "x-budget-ms",
            "100",
        ),
    ];
    for (header, name, value) in forms {
        let layer = SharedHeadersLayer::new()
            .timeout(SERVER)
            .caller_budget(header);
        let (committed, seen) = budget_call(&layer, &[(name, value)]).await;
        assert_eq!(
            committed.budget(),
            Some(Duration::from_millis(100)),
            "{name}"
        );
        assert_eq!(
            committed.deadline().unwrap().source(),
            DeadlineSource::Caller,
            "{name}"
        );
        assert_eq!(committed.budget_error(), None, "{name}");
        assert_eq!(layer.stats().refused_budgets(), 0, "{name}");
        assert_seen(&committed, seen);
    }
    // The other units of grpc-timeout.
    let layer = SharedHeadersLayer::new()
        .timeout(Duration::from_secs(7200))
        .caller_budget(BudgetHeader::grpc_timeout());
    for (value, budget) in [
        ("1H", Duration::from_secs(3600)),
        ("2M", Duration::from_secs(120)),
        ("3S", Duration::from_secs(3)),
        ("4m", Duration::from_millis(4)),
        ("5000u", Duration::from_millis(5)),
        ("6000000n", Duration::from_millis(6)),
        ("99999999n", Duration::from_nanos(99_999_999)),
    ] {
        let (committed, seen) = budget_call(&layer, &[("grpc-timeout", value)]).await;
        assert_eq!(committed.budget(), Some(budget), "{value}");
        assert_seen(&committed, seen);
    }
}

#[tokio::test]
async fn the_earlier_deadline_wins_and_a_caller_cannot_extend_the_server() {
    let layer = SharedHeadersLayer::new()
        .timeout(Duration::from_millis(200))
        .caller_budget(BudgetHeader::connect_timeout_ms());
    // Caller shorter: the caller's.
    let (committed, seen) = budget_call(&layer, &[("connect-timeout-ms", "50")]).await;
    assert_eq!(committed.budget(), Some(Duration::from_millis(50)));
    assert_eq!(
        committed.deadline().unwrap().source(),
        DeadlineSource::Caller
    );
    assert_seen(&committed, seen);
    // Caller longer: the server's, unchanged.
    let (committed, seen) = budget_call(&layer, &[("connect-timeout-ms", "60000")]).await;
    assert_eq!(committed.budget(), Some(Duration::from_millis(200)));
    assert_eq!(
        committed.deadline().unwrap().source(),
        DeadlineSource::Server
    );
    assert_seen(&committed, seen);
    // No header: the server's.
    let (committed, _) = budget_call(&layer, &[]).await;
    assert_eq!(committed.budget(), Some(Duration::from_millis(200)));
    assert_eq!(
        committed.deadline().unwrap().source(),
        DeadlineSource::Server
    );
    assert_eq!(layer.stats().refused_budgets(), 0);

    // Two budget headers: the earliest of all three.
    let layer = SharedHeadersLayer::new()
        .timeout(Duration::from_millis(200))
        .caller_budget(BudgetHeader::grpc_timeout())
        .caller_budget(BudgetHeader::envoy_expected_rq_timeout_ms());
    let (committed, _) = budget_call(
        &layer,
        &[
            ("grpc-timeout", "80m"),
            ("x-envoy-expected-rq-timeout-ms", "30"),
        ],
    )
    .await;
    assert_eq!(committed.budget(), Some(Duration::from_millis(30)));
    let (committed, _) = budget_call(
        &layer,
        &[
            ("grpc-timeout", "80m"),
            ("x-envoy-expected-rq-timeout-ms", "300"),
        ],
    )
    .await;
    assert_eq!(committed.budget(), Some(Duration::from_millis(80)));

    // Without a server timeout, the caller's budget is the deadline.
    let layer = SharedHeadersLayer::new().caller_budget(BudgetHeader::grpc_timeout());
    let (committed, seen) = budget_call(&layer, &[("grpc-timeout", "250m")]).await;
    assert_eq!(committed.budget(), Some(Duration::from_millis(250)));
    assert_eq!(
        committed.deadline().unwrap().source(),
        DeadlineSource::Caller
    );
    assert_seen(&committed, seen);
    let (committed, seen) = budget_call(&layer, &[]).await;
    assert_eq!(committed.deadline(), None);
    assert_seen(&committed, seen);
}

#[tokio::test]
async fn a_caller_budget_is_enforced_like_the_servers() {
    let layer = SharedHeadersLayer::new()
        .timeout(Duration::from_secs(5))
        .caller_budget(BudgetHeader::grpc_timeout());
    let service = layer.layer(slow(Duration::from_secs(5)));
    let req = Request::get("/")
        .header("grpc-timeout", "50m")
        .body(())
        .unwrap();
    let res = service.oneshot(req).await.unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    let committed = record(&res);
    assert_eq!(committed.budget(), Some(Duration::from_millis(50)));
    assert_on_time(&committed, "a caller's 50 ms");
}

#[tokio::test]
async fn malformed_budgets_fall_back_to_the_server_and_are_counted_and_recorded() {
    let grpc = [
        ("-1S", BudgetError::Signed),
        ("+1S", BudgetError::Signed),
        ("123456789m", BudgetError::TooManyDigits { max: 8 }),
        ("10x", BudgetError::UnknownUnit),
        ("10", BudgetError::MissingUnit),
        ("abc", BudgetError::UnknownUnit),
        ("1.5S", BudgetError::NotDigits),
        ("m", BudgetError::Empty),
        ("", BudgetError::Empty),
    ];
    let millis = [
        ("-1", BudgetError::Signed),
        ("10x", BudgetError::NotDigits),
        ("abc", BudgetError::NotDigits),
        ("", BudgetError::Empty),
        ("12345678901", BudgetError::TooManyDigits { max: 10 }),
    ];
    let cases = [
        (BudgetHeader::grpc_timeout(), "grpc-timeout", &grpc[..]),
        (
            BudgetHeader::connect_timeout_ms(),
            "connect-timeout-ms",
            &millis[..],
        ),
    ];
    for (header, name, values) in cases {
        let layer = SharedHeadersLayer::new()
            .timeout(SERVER)
            .caller_budget(header);
        for (n, &(value, error)) in values.iter().enumerate() {
            let (committed, seen) = budget_call(&layer, &[(name, value)]).await;
            assert_eq!(committed.budget(), Some(SERVER), "{name}: {value:?}");
            assert_eq!(
                committed.deadline().unwrap().source(),
                DeadlineSource::Server,
                "{name}: {value:?}"
            );
            assert_eq!(committed.budget_error(), Some(error), "{name}: {value:?}");
            assert_eq!(
                layer.stats().refused_budgets(),
                n as u64 + 1,
                "{name}: {value:?}"
            );
            assert_seen(&committed, seen);
        }
        // A good value after the bad ones: taken, not counted, no error recorded.
        let good = if name == "grpc-timeout" { "10m" } else { "10" };
        let before = layer.stats().refused_budgets();
        let (committed, _) = budget_call(&layer, &[(name, good)]).await;
        assert_eq!(committed.budget(), Some(Duration::from_millis(10)));
        assert_eq!(committed.budget_error(), None);
        assert_eq!(layer.stats().refused_budgets(), before);
    }
}

/// Every value a header can hold, as short garbage: never a panic, and either a budget no
/// longer than the server's or a counted refusal.
#[tokio::test]
async fn no_budget_value_panics() {
    let layer = SharedHeadersLayer::new()
        .timeout(SERVER)
        .caller_budget(BudgetHeader::grpc_timeout());
    let mut refused = 0;
    let bytes: Vec<u8> = (0x20..=0x7e).chain([b'\t', 0x80, 0xff]).collect();
    for &a in &bytes {
        for tail in [&b""[..], b"S", b"m", b"9", b"n"] {
            let mut value = vec![a];
            value.extend_from_slice(tail);
            let value = http::HeaderValue::from_bytes(&value).unwrap();
            let service = layer.clone().layer(service_fn(|_req: Request<()>| async {
                Ok::<_, Infallible>(Response::new(String::new()))
            }));
            let mut req = Request::new(());
            req.headers_mut().insert("grpc-timeout", value);
            let res = service.oneshot(req).await.unwrap();
            let committed = record(&res);
            assert!(committed.budget().unwrap() <= SERVER);
            if committed.budget_error().is_some() {
                refused += 1;
                assert_eq!(committed.budget(), Some(SERVER));
            }
        }
    }
    assert!(refused > 0);
    assert_eq!(layer.stats().refused_budgets(), refused);
}

#[tokio::test]
async fn without_a_budget_configured_the_header_is_ignored() {
    let layer = SharedHeadersLayer::new().timeout(Duration::from_millis(200));
    let headers = [
        ("grpc-timeout", "1m"),
        ("connect-timeout-ms", "1"),
        ("x-envoy-expected-rq-timeout-ms", "abc"),
    ];
    let (committed, seen) = budget_call(&layer, &headers).await;
    assert_eq!(committed.budget(), Some(Duration::from_millis(200)));
    assert_eq!(
        committed.deadline().unwrap().source(),
        DeadlineSource::Server
    );
    assert_eq!(committed.budget_error(), None);
    assert_eq!(layer.stats().refused_budgets(), 0);
    assert_seen(&committed, seen);
    // No timeout and no budget: no deadline at all.
    let (committed, seen) = budget_call(&SharedHeadersLayer::new(), &headers).await;
    assert_eq!(committed.deadline(), None);
    assert_eq!(committed.budget(), None);
    assert_seen(&committed, seen);
}
