//! Deadline-aware admission over sockets (hyper server and client on 127.0.0.1:0):
//!
//! * a request with 5 ms left on a route that takes 50 ms is answered at once and never
//!   started (HTTP: 503 with `retry-after: 0`, `Outcome::Shed`, `error.type`
//!   `deadline_unmeetable`; gRPC: HTTP 200 with `grpc-status` 14, UNAVAILABLE); one with
//!   500 ms left is started and answered;
//! * time spent before the layer (an `x-request-start` header) counts as spent, and the
//!   exchange, the record (its budget, the access line's), `Deadline::current` and the
//!   timer tell one deadline;
//! * a waiter for the in-flight limit whose deadline passes is answered at its deadline and
//!   never reaches the handler; one whose budget falls below the estimate while it waits is
//!   never started either; a waiter whose caller hangs up leaves the queue at once;
//! * count-only mode changes nothing but the counts;
//! * the side-by-side overload run (`examples/overload.rs`: tower's `LoadShed` +
//!   `ConcurrencyLimit` beside admission with the right limit, none and one ten times too
//!   high), short, judged against tower's row only while the runtime's timers keep time.
//!
//! The route's estimate is made deterministic by warming it with requests of a known
//! duration (50 ms); the margins are 10x (5 ms against 50 ms, 500 ms against 50 ms).
#![cfg(feature = "server")]

#[path = "support/server.rs"]
mod server;

#[path = "support/timekeeping.rs"]
mod timekeeping;

use std::convert::Infallible;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use server::{Body, Svc, serve};
use shared_headers::Outcome;
use shared_headers::deadline::BudgetHeader;
use shared_headers::server::{Admission, LayerStats, SharedHeadersLayer};
use tower::util::BoxCloneService;
use tower::{Layer, ServiceExt, service_fn};

const BUDGET: &str = "x-envoy-expected-rq-timeout-ms";

/// What the handler and the end reports saw.
#[derive(Default)]
struct Seen {
    started: AtomicUsize,
    ends: Mutex<Vec<(Outcome, Option<&'static str>)>>,
}

impl Seen {
    fn started(&self) -> usize {
        self.started.load(Ordering::SeqCst)
    }
    fn last_end(&self) -> (Outcome, Option<&'static str>) {
        *self.ends.lock().unwrap().last().unwrap()
    }
}

/// The counters of the layers made with `admission` (a clone of it shares its state).
fn stats(admission: &Admission) -> LayerStats {
    SharedHeadersLayer::new()
        .admission(admission.clone())
        .stats()
}

/// A server whose handler counts its starts and sleeps `x-work-ms` (default 50 ms), under the
/// layer with the caller's budget in `x-envoy-expected-rq-timeout-ms` and `admission`.
fn server(admission: Option<Admission>, seen: Arc<Seen>) -> Svc {
    let mut layer =
        SharedHeadersLayer::new().caller_budget(BudgetHeader::envoy_expected_rq_timeout_ms());
    if let Some(admission) = admission {
        layer = layer.admission(admission);
    }
    let ends = seen.clone();
    let layer = layer.on_response_end(move |end| {
        ends.ends
            .lock()
            .unwrap()
            .push((end.committed().outcome(), end.error_type()))
    });
    let handler = service_fn(move |req: Request<Incoming>| {
        let seen = seen.clone();
        async move {
            seen.started.fetch_add(1, Ordering::SeqCst);
            let ms = req
                .headers()
                .get("x-work-ms")
                .and_then(|v| v.to_str().ok()?.parse().ok())
                .unwrap_or(50);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok::<_, Infallible>(Response::new(Body::from("done")))
        }
    });
    BoxCloneService::new(layer.layer(handler))
}

type HttpClient = Client<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>>;

fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

/// One GET with `budget_ms` left (and `work_ms` of work), its status and how long it took.
async fn get(
    client: &HttpClient,
    addr: std::net::SocketAddr,
    budget_ms: u64,
    work_ms: u64,
) -> (StatusCode, Duration) {
    let req = Request::get(format!("http://{addr}/work"))
        .header(BUDGET, budget_ms.to_string())
        .header("x-work-ms", work_ms.to_string())
        .body(Empty::new())
        .unwrap();
    let at = Instant::now();
    let res = client.request(req).await.unwrap();
    let status = res.status();
    res.into_body().collect().await.unwrap();
    (status, at.elapsed())
}

/// Warms the route with `n` requests of 50 ms (a budget of 10 s), one after another.
async fn warm(client: &HttpClient, addr: std::net::SocketAddr, n: usize) {
    for _ in 0..n {
        assert_eq!(get(client, addr, 10_000, 50).await.0, StatusCode::OK);
    }
}

/// Waits (bounded) until `f` holds.
async fn eventually(what: &str, f: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(5);
    while !f() {
        assert!(Instant::now() < until, "never: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[test]
fn five_ms_left_on_a_50_ms_route_is_shed_unstarted_and_500_ms_left_is_served() {
    timekeeping::retried(|| async {
        let seen = Arc::new(Seen::default());
        let admission = Admission::new().warm_up(10);
        let addr = serve(server(Some(admission.clone()), seen.clone()), false).await;
        let client = client();
        warm(&client, addr, 12).await;
        let estimate = stats(&admission)
            .admission_estimate(&http::Method::GET, "/work")
            .unwrap();
        println!("estimate after 12 answers of 50 ms: {estimate:?}");
        assert!(estimate >= Duration::from_millis(45), "{estimate:?}");

        let before = seen.started();
        let (status, took) = get(&client, addr, 5, 50).await;
        println!("5 ms left: {status} in {took:?}");
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            seen.started(),
            before,
            "a shed request never reaches the handler"
        );
        eventually("the shed request's end", || {
            seen.ends.lock().unwrap().len() == 13
        })
        .await;
        assert_eq!(
            seen.last_end(),
            (Outcome::Shed, Some("deadline_unmeetable"))
        );
        assert_eq!(stats(&admission).admission_counts().shed, 1);

        let (status, took) = get(&client, addr, 500, 50).await;
        println!("500 ms left: {status} in {took:?}");
        assert_eq!(status, StatusCode::OK);
        assert_eq!(seen.started(), before + 1);
        assert_eq!(stats(&admission).admission_counts().shed, 1);
    });
}

#[test]
fn a_grpc_call_is_refused_with_trailers_only_unavailable() {
    timekeeping::retried(|| async {
        let seen = Arc::new(Seen::default());
        let admission = Admission::new().warm_up(10);
        let service = {
            // gRPC's own budget header on top of the Envoy one.
            let seen = seen.clone();
            let layer = SharedHeadersLayer::new()
                .caller_budget(BudgetHeader::grpc_timeout())
                .admission(admission.clone());
            BoxCloneService::new(layer.layer(service_fn(move |_req: Request<Incoming>| {
                let seen = seen.clone();
                async move {
                    seen.started.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Ok::<_, Infallible>(Response::new(Body::from("done")))
                }
            })))
        };
        let addr = serve(service, true).await;
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut sender, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
                .await
                .unwrap();
        tokio::spawn(conn);
        let call = |timeout: &'static str| {
            Request::post(format!("http://{addr}/pkg.Svc/Method"))
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .header("grpc-timeout", timeout)
                .body(Full::<Bytes>::new(Bytes::new()))
                .unwrap()
        };
        for _ in 0..12 {
            let res = sender.send_request(call("10S")).await.unwrap();
            res.into_body().collect().await.unwrap();
        }
        let before = seen.started();
        let res = sender.send_request(call("5m")).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        // UNAVAILABLE: a refusal, "try elsewhere now" (a timeout is 4, DEADLINE_EXCEEDED).
        assert_eq!(res.headers()["grpc-status"], "14");
        assert_eq!(res.headers()["retry-after"], "0");
        assert_eq!(res.headers()["content-type"], "application/grpc");
        assert!(res.headers().contains_key("grpc-message"));
        assert_eq!(seen.started(), before);
        assert_eq!(stats(&admission).admission_counts().shed, 1);
    });
}

#[test]
fn time_spent_before_the_layer_counts_as_spent() {
    timekeeping::retried(|| async {
        let seen = Arc::new(Seen::default());
        let admission = Admission::new()
            .warm_up(10)
            .queue_start(http::HeaderName::from_static("x-request-start"));
        let addr = serve(server(Some(admission.clone()), seen.clone()), false).await;
        let client = client();
        warm(&client, addr, 12).await;
        let before = seen.started();
        // 500 ms of budget, 470 of them spent in a proxy's queue (Heroku's milliseconds).
        let queued_at =
            SystemTime::now().duration_since(UNIX_EPOCH).unwrap() - Duration::from_millis(470);
        let req = Request::get(format!("http://{addr}/work"))
            .header(BUDGET, "500")
            .header("x-request-start", queued_at.as_millis().to_string())
            .body(Empty::new())
            .unwrap();
        let res = client.request(req).await.unwrap();
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(seen.started(), before);
        // The same budget without the header is served.
        assert_eq!(get(&client, addr, 500, 50).await.0, StatusCode::OK);
        assert_eq!(seen.started(), before + 1);
    });
}

#[test]
fn the_exchange_the_record_the_scope_and_the_timer_tell_one_deadline() {
    timekeeping::retried(|| async {
        // The handler reports the exchange's deadline and `Deadline::current`, then waits
        // past both; the end report gives the record's budget.
        let seen: Arc<Mutex<Vec<(Duration, Duration)>>> = Arc::default();
        type Ends = Mutex<Vec<(Outcome, Option<Duration>, Duration)>>;
        let budgets: Arc<Ends> = Arc::default();
        let admission =
            Admission::new().queue_start(http::HeaderName::from_static("x-request-start"));
        let layer = SharedHeadersLayer::new()
            .caller_budget(BudgetHeader::envoy_expected_rq_timeout_ms())
            .admission(admission)
            .on_response_end({
                let budgets = budgets.clone();
                move |end| {
                    let c = end.committed();
                    budgets
                        .lock()
                        .unwrap()
                        .push((c.outcome(), c.budget(), c.time_to_commit()))
                }
            });
        let handler = {
            let seen = seen.clone();
            service_fn(move |req: Request<Incoming>| {
                let seen = seen.clone();
                async move {
                    let exchange = req.extensions().get::<shared_headers::Exchange>().unwrap();
                    let own = exchange.deadline().unwrap().instant();
                    let scoped = shared_headers::deadline::Deadline::current()
                        .unwrap()
                        .instant();
                    let now = Instant::now();
                    seen.lock().unwrap().push((
                        own.saturating_duration_since(now),
                        scoped.saturating_duration_since(now),
                    ));
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    Ok::<_, Infallible>(Response::new(Body::from("late")))
                }
            })
        };
        let addr = serve(BoxCloneService::new(layer.layer(handler)), false).await;
        let client = client();
        // 1,000 ms of budget, 700 of them spent in a proxy's queue.
        let queued_at =
            SystemTime::now().duration_since(UNIX_EPOCH).unwrap() - Duration::from_millis(700);
        let req = Request::get(format!("http://{addr}/work"))
            .header(BUDGET, "1000")
            .header("x-request-start", queued_at.as_millis().to_string())
            .body(Empty::new())
            .unwrap();
        let at = Instant::now();
        let res = client.request(req).await.unwrap();
        let took = at.elapsed();
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE, "timed out");
        assert!(!res.headers().contains_key("retry-after"), "a timeout");
        eventually("the end report", || budgets.lock().unwrap().len() == 1).await;
        let (own, scoped) = seen.lock().unwrap()[0];
        let (outcome, budget, at_commit) = budgets.lock().unwrap()[0];
        println!(
            "exchange {own:?}, scope {scoped:?}, record {budget:?}, timed out at {at_commit:?}, answered in {took:?}"
        );
        assert_eq!(outcome, Outcome::TimedOut);
        let budget = budget.unwrap();
        // About 300 ms everywhere (the header's 700 ms off the caller's 1,000), never 1,000.
        assert!(
            budget >= Duration::from_millis(250) && budget <= Duration::from_millis(300),
            "{budget:?}"
        );
        assert!(own <= budget && scoped <= budget, "{own:?} {scoped:?}");
        assert_eq!(own, scoped);
        assert!(at_commit >= budget && at_commit < Duration::from_millis(900));
    });
}

#[test]
fn a_waiter_past_its_deadline_is_answered_then_and_never_reaches_the_handler() {
    timekeeping::retried(|| async {
        let seen = Arc::new(Seen::default());
        let admission = Admission::new().limit(NonZeroUsize::new(1).unwrap());
        let addr = serve(server(Some(admission.clone()), seen.clone()), false).await;
        let client = client();
        // The one permit, held for 1.5 s.
        let holder = {
            let client = client.clone();
            tokio::spawn(async move { get(&client, addr, 10_000, 1_500).await })
        };
        eventually("the holder started", || seen.started() == 1).await;
        // 100 ms of budget, waiting behind it: answered at its deadline, long before the
        // holder's 1.5 s.
        let (status, took) = get(&client, addr, 100, 10).await;
        println!("the waiter: {status} after {took:?}");
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(took < Duration::from_millis(1_000), "{took:?}");
        assert_eq!(seen.started(), 1, "the waiter never reached the handler");
        assert!(!holder.is_finished());
        eventually("the waiter's end", || !seen.ends.lock().unwrap().is_empty()).await;
        assert_eq!(seen.last_end(), (Outcome::TimedOut, Some("timeout")));
        let counts = stats(&admission).admission_counts();
        assert_eq!(
            (counts.queued, counts.left_queue, counts.waiting),
            (1, 1, 0)
        );
        assert_eq!(holder.await.unwrap().0, StatusCode::OK);
        assert_eq!(stats(&admission).admission_counts().free_permits, 1);
    });
}

#[test]
fn a_waiter_whose_budget_falls_below_the_estimate_gets_no_permit() {
    timekeeping::retried(|| async {
        let seen = Arc::new(Seen::default());
        let admission = Admission::new()
            .warm_up(10)
            .limit(NonZeroUsize::new(1).unwrap());
        let addr = serve(server(Some(admission.clone()), seen.clone()), false).await;
        let client = client();
        warm(&client, addr, 12).await;
        let started = seen.started();
        let holder = {
            let client = client.clone();
            tokio::spawn(async move { get(&client, addr, 10_000, 500).await })
        };
        eventually("the holder started", || seen.started() == started + 1).await;
        // 100 ms after the holder started, 400 ms of budget: admitted at arrival (over the
        // 50 ms estimate), waits until the holder's release at 500 ms, and has about
        // nothing left then: shed at the release (or, if the release comes after its
        // deadline, answered at the deadline). Never started either way.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (status, _) = get(&client, addr, 400, 50).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(holder.await.unwrap().0, StatusCode::OK);
        assert_eq!(
            seen.started(),
            started + 1,
            "the doomed waiter never started"
        );
        eventually("both ends", || seen.ends.lock().unwrap().len() == 14).await;
        let ends = seen.ends.lock().unwrap().clone();
        let unmet = ends
            .iter()
            .filter(|(o, _)| matches!(o, Outcome::Shed | Outcome::TimedOut));
        assert_eq!(unmet.count(), 1, "{ends:?}");
    });
}

#[test]
fn a_caller_that_hangs_up_leaves_the_queue_at_once() {
    timekeeping::retried(|| async {
        let admission = Admission::new().limit(NonZeroUsize::new(1).unwrap());
        let layer = SharedHeadersLayer::new().admission(admission.clone());
        let service = layer.layer(service_fn(|_req: Request<()>| async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            Ok::<_, Infallible>(Response::new(String::new()))
        }));
        let holder = tokio::spawn(service.clone().oneshot(Request::new(())));
        eventually("the holder has the permit", || {
            stats(&admission).admission_counts().free_permits == 0
        })
        .await;
        let waiter = tokio::spawn(service.clone().oneshot(Request::new(())));
        eventually("the waiter queued", || {
            stats(&admission).admission_counts().waiting == 1
        })
        .await;
        waiter.abort();
        eventually("the waiter left", || {
            stats(&admission).admission_counts().waiting == 0
        })
        .await;
        assert!(!holder.is_finished(), "left before the permit came back");
        assert_eq!(stats(&admission).admission_counts().left_queue, 1);
        holder.await.unwrap().unwrap();
        assert_eq!(stats(&admission).admission_counts().free_permits, 1);
    });
}

#[test]
fn count_only_changes_nothing_but_the_counts() {
    timekeeping::retried(|| async {
        let mut results = Vec::new();
        for count_only in [None, Some(Admission::new().warm_up(10).count_only(true))] {
            let seen = Arc::new(Seen::default());
            let addr = serve(server(count_only.clone(), seen.clone()), false).await;
            let client = client();
            warm(&client, addr, 12).await;
            // 40 ms left on the 50 ms route: doomed (admission would shed it), yet long enough
            // for the handler's first poll on a loaded machine (with 5 ms the deadline came
            // first in one of the two runs of a pair now and then, and the handler never ran).
            let (status, _) = get(&client, addr, 40, 50).await;
            eventually("the end", || seen.ends.lock().unwrap().len() == 13).await;
            results.push((status, seen.started(), seen.last_end()));
            if let Some(admission) = count_only {
                let counts = stats(&admission).admission_counts();
                assert_eq!((counts.would_shed, counts.shed), (1, 0));
            }
        }
        println!("{results:?}");
        // Started, timed out by its own 40 ms deadline, with or without count-only admission.
        assert_eq!(results[0], results[1]);
        assert_eq!(results[0].1, 13);
        assert_eq!(results[0].2, (Outcome::TimedOut, Some("timeout")));
    });
}

#[allow(dead_code, unreachable_pub)]
#[path = "../examples/overload.rs"]
mod overload;

/// The side-by-side overload run (`examples/overload.rs`), short: half a second per cell,
/// one round, 1x and 4x. Every leaf answers; the comparison with tower's leaf (same run) is
/// judged only when the runtime's timers kept time, and loosely (a short run is noisy): at
/// 4x, `Admission` with the right limit at least tower's goodput less 0.15 of capacity.
#[test]
fn overload_side_by_side_short() {
    let _heavy = timekeeping::heavy();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let report = runtime.block_on(overload::run(0.5, 1, &[1.0, 4.0]));
    overload::print(&report);
    assert!(report.capacity > 10.0, "capacity {}", report.capacity);
    for ((load, row), lag) in report.rows.iter().zip(&report.lag) {
        for (variant, cell, _) in row {
            assert!(
                cell.goodput > 0.0,
                "{variant:?} at {load}x answered nothing"
            );
        }
        let tower = row[0].1.goodput;
        if *load >= 4.0 && *lag <= overload::LAG_LIMIT {
            // Every admission leaf (the right limit, none, one 10x too high), with 5x the
            // bars' margins (a half-second cell on a shared CI machine): goodput within
            // 0.15 of tower's, at most 10% of callers waiting out their budget.
            for (variant, cell, _) in &row[1..] {
                assert!(
                    cell.goodput + 0.15 >= tower,
                    "at {load}x {variant:?} {:.2} against tower's {tower:.2}",
                    cell.goodput
                );
                assert!(
                    cell.timed_out <= 0.10,
                    "at {load}x {variant:?}: {:.1}% waited out their budget",
                    cell.timed_out * 100.0
                );
            }
        } else if *load >= 4.0 {
            println!("not judged at {load}x: timers {lag:?} late at p99");
        }
    }
}
