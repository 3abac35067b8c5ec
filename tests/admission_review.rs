//! A hostile review of deadline-aware admission: each test shows a behaviour the contract
//! (or the `Admission` rustdoc) promises and the code does not keep. Each is `#[ignore]`d
//! with its finding until the crate is fixed; run them with `--ignored`.
//!
//! Over sockets (hyper server and client on 127.0.0.1:0) where the finding is about what a
//! caller sees; in process where it is about the counts or the estimate. Margins are 5x or
//! more.
#![cfg(feature = "server")]

#[path = "support/server.rs"]
mod server;

#[path = "support/timekeeping.rs"]
mod timekeeping;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::body::{Bytes, Incoming};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use server::{Body, Svc, run, serve};
use shared_headers::deadline::BudgetHeader;
use shared_headers::server::{Admission, LayerStats, SharedHeadersLayer};
use tower::util::BoxCloneService;
use tower::{Layer, ServiceExt, service_fn};

/// The counters of the layers made with `admission` (a clone of it shares its state).
fn stats(admission: &Admission) -> LayerStats {
    SharedHeadersLayer::new()
        .admission(admission.clone())
        .stats()
}

const BUDGET: &str = "x-envoy-expected-rq-timeout-ms";

/// Handler starts, per path.
#[derive(Default)]
struct Seen {
    started: std::sync::Mutex<Vec<String>>,
}

impl Seen {
    fn started(&self, path: &str) -> usize {
        self.started
            .lock()
            .unwrap()
            .iter()
            .filter(|p| *p == path)
            .count()
    }
}

/// A server whose handler records its starts and sleeps `x-work-ms` (default 50 ms), under
/// the layer with the caller's budget in Envoy's and Connect's headers, and `admission`.
fn server(admission: Admission, seen: Arc<Seen>) -> Svc {
    let layer = SharedHeadersLayer::new()
        .caller_budget(BudgetHeader::envoy_expected_rq_timeout_ms())
        .caller_budget(BudgetHeader::connect_timeout_ms())
        .admission(admission);
    let handler = service_fn(move |req: Request<Incoming>| {
        let seen = seen.clone();
        async move {
            seen.started
                .lock()
                .unwrap()
                .push(req.uri().path().to_owned());
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

/// One GET of `path` with `budget_ms` left (none: no budget header) and `work_ms` of work,
/// plus extra headers; its status, body and how long it took.
async fn get(
    client: &HttpClient,
    addr: SocketAddr,
    path: &str,
    budget_ms: Option<u64>,
    work_ms: u64,
    extra: &[(&str, String)],
) -> (StatusCode, http::HeaderMap, Bytes, Duration) {
    let mut req = Request::get(format!("http://{addr}{path}")).header("x-work-ms", work_ms);
    if let Some(budget) = budget_ms {
        req = req.header(BUDGET, budget);
    }
    for (name, value) in extra {
        req = req.header(*name, value);
    }
    let at = Instant::now();
    let res = client
        .request(req.body(Empty::new()).unwrap())
        .await
        .unwrap();
    let (head, body) = res.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    (head.status, head.headers, body, at.elapsed())
}

/// Waits (bounded) until `f` holds.
async fn eventually(what: &str, f: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(5);
    while !f() {
        assert!(Instant::now() < until, "never: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The Unix time `ago` before now, in milliseconds (Heroku's `x-request-start`).
fn ms_ago(ago: Duration) -> String {
    (SystemTime::now().duration_since(UNIX_EPOCH).unwrap() - ago)
        .as_millis()
        .to_string()
}

/// Finding 1: two routes that hash to one of the 64 slots share an estimate and a warm-up
/// count, so a route never seen before (cold: "admits everything until it has warm_up
/// answers") is shed because another, slow route shares its slot. Without axum's
/// `MatchedPath` every distinct path (`/users/1`, `/users/2`, ...) is a route, so a service
/// with path parameters fills every slot.
#[test]
fn a_cold_route_is_never_shed_by_another_routes_estimate() {
    timekeeping::retried(|| async {
        let seen = Arc::new(Seen::default());
        let admission = Admission::new().warm_up(2).max_shed(1.0);
        let addr = serve(server(admission.clone(), seen.clone()), false).await;
        let client = client();
        // A slow route: 500 ms.
        for _ in 0..3 {
            let (status, ..) = get(&client, addr, "/slow", Some(10_000), 500, &[]).await;
            assert_eq!(status, StatusCode::OK);
        }
        assert!(
            stats(&admission)
                .admission_estimate(&Method::GET, "/slow")
                .unwrap()
                >= Duration::from_millis(450)
        );
        // A path never requested that shares its slot (the crate's unit test
        // `a_route_sharing_a_slot_is_cold_then_takes_it_over` checks the pair; before the
        // fix the public reading found it: its estimate was `/slow`'s).
        let fast = "/fast/88".to_owned();
        assert_eq!(
            stats(&admission).admission_estimate(&Method::GET, &fast),
            None,
            "cold"
        );
        // It takes 1 ms; its caller has 100 ms, 100x what it needs. It was never seen: cold.
        let (status, ..) = get(&client, addr, &fast, Some(100), 1, &[]).await;
        assert_eq!(
            (
                status,
                seen.started(&fast),
                stats(&admission).admission_counts().shed
            ),
            (StatusCode::OK, 1, 0),
            "{fast}: a route never seen is cold and admits everything"
        );
    });
}

/// Finding 2: a request whose whole budget was spent before the layer saw it (the
/// queue-start header says it waited 300 ms of its 100 ms) is started when its route is cold
/// (or has no estimate yet): the handler runs for a caller that has given up, and the layer
/// even arms a fresh 100 ms deadline. Finagle's `DeadlineFilter` rejects a deadline that has
/// passed whatever it knows of the route.
#[test]
fn a_budget_spent_before_arrival_is_never_started() {
    timekeeping::retried(|| async {
        let seen = Arc::new(Seen::default());
        let admission = Admission::new()
            .max_shed(1.0)
            .queue_start(http::HeaderName::from_static("x-request-start"));
        let addr = serve(server(admission.clone(), seen.clone()), false).await;
        let client = client();
        let start = ms_ago(Duration::from_millis(300));
        let (status, _, _, took) = get(
            &client,
            addr,
            "/work",
            Some(100),
            20,
            &[("x-request-start", start)],
        )
        .await;
        println!("a request 200 ms past its deadline: {status} after {took:?}");
        assert_eq!(
            seen.started("/work"),
            0,
            "its caller's deadline passed 200 ms before it arrived, yet the handler ran"
        );
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    });
}

/// Finding 3: with a queue-start header, the time spent before the layer shortens only the
/// budget compared with the estimate; the deadline the layer arms (and answers a waiter at)
/// is the unshortened one. A waiter with 1000 ms of budget, 900 of them spent in a proxy's
/// queue, is answered a full second later, 900 ms after its caller gave up.
#[test]
fn a_waiter_is_answered_at_its_deadline_less_the_time_spent_before() {
    timekeeping::retried(|| async {
        let seen = Arc::new(Seen::default());
        let admission = Admission::new()
            .limit(NonZeroUsize::new(1).unwrap())
            .queue_start(http::HeaderName::from_static("x-request-start"));
        let addr = serve(server(admission.clone(), seen.clone()), false).await;
        let client = client();
        let holder = {
            let client = client.clone();
            tokio::spawn(async move { get(&client, addr, "/hold", None, 3_000, &[]).await })
        };
        eventually("the holder started", || seen.started("/hold") == 1).await;
        let start = ms_ago(Duration::from_millis(900));
        let (status, _, _, took) = get(
            &client,
            addr,
            "/work",
            Some(1_000),
            10,
            &[("x-request-start", start)],
        )
        .await;
        println!("waiter with 100 ms really left: {status} after {took:?}");
        assert_eq!(seen.started("/work"), 0);
        assert!(
            took < Duration::from_millis(500),
            "answered after {took:?}: its caller's deadline was 100 ms away"
        );
        holder.abort();
    });
}

/// Finding 4: with a limit, a waiter the cap spares is passed over ("no permit; its deadline
/// answers it") even when the permit it would take is free: the route's requests are 100%
/// refused (a few shed, the rest timed out unstarted) while the cap promises at most a fifth,
/// and the route never gets a sample, so the rustdoc's "Requests the cap admits keep it
/// learning even when every caller's budget is below it" does not hold: a route that was slow
/// and got fast again stays refused as long as a queue forms.
#[test]
fn a_route_that_got_faster_is_relearned_from_probes() {
    timekeeping::retried(|| async {
        let seen = Arc::new(Seen::default());
        let admission = Admission::new().warm_up(2);
        let addr = serve(server(admission.clone(), seen.clone()), false).await;
        let client = client();
        // The route was slow: 600 ms.
        for _ in 0..2 {
            let (status, ..) = get(&client, addr, "/work", Some(10_000), 600, &[]).await;
            assert_eq!(status, StatusCode::OK);
        }
        let before = stats(&admission)
            .admission_estimate(&Method::GET, "/work")
            .unwrap();
        assert!(before >= Duration::from_millis(550), "{before:?}");
        // Now it takes 1 ms; callers have 400 ms (below the stale estimate). One doomed
        // request in 32 runs anyway (a probe); each answer halves the recent follower.
        let mut refused = 0;
        let mut ok = 0;
        for _ in 0..64 {
            match get(&client, addr, "/work", Some(400), 1, &[]).await.0 {
                StatusCode::OK => ok += 1,
                _ => refused += 1,
            }
        }
        let counts = stats(&admission).admission_counts();
        println!(
            "ok {ok}/64, refused {refused}, {counts:?}, estimate {:?}",
            stats(&admission).admission_estimate(&Method::GET, "/work")
        );
        assert!(
            refused <= 31,
            "{refused} refused before the first probe taught it"
        );
        assert_eq!(counts.probes, 1);
        assert!(ok >= 33);
    });
}

/// Finding 5: in count-only mode a request judged at arrival and again when a permit frees
/// up is counted twice in `would_shed`: the count is not "requests that would have been
/// shed" (the real mode would have shed this one once, at arrival).
#[test]
fn count_only_counts_each_request_once() {
    timekeeping::retried(|| async {
        let admission = Admission::new()
            .warm_up(2)
            .count_only(true)
            .limit(NonZeroUsize::new(1).unwrap());
        let layer = SharedHeadersLayer::new()
            .caller_budget(BudgetHeader::envoy_expected_rq_timeout_ms())
            .admission(admission.clone());
        let service = layer.layer(service_fn(|req: Request<()>| async move {
            let ms = req
                .headers()
                .get("x-work-ms")
                .and_then(|v| v.to_str().ok()?.parse().ok())
                .unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok::<_, Infallible>(Response::new(String::new()))
        }));
        let req = |path: &str, budget: u64, work: u64| {
            Request::get(path)
                .header(BUDGET, budget)
                .header("x-work-ms", work)
                .body(())
                .unwrap()
        };
        // The route takes 1 s.
        for _ in 0..2 {
            service
                .clone()
                .oneshot(req("/work", 10_000, 1_000))
                .await
                .unwrap();
        }
        // A holder for 60 ms; then one request with 600 ms (below the 1 s estimate).
        let holder = tokio::spawn(service.clone().oneshot(req("/hold", 10_000, 60)));
        eventually("the holder has the permit", || {
            stats(&admission).admission_counts().free_permits == 0
        })
        .await;
        let res = service.clone().oneshot(req("/work", 600, 1)).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "count-only rejects nothing");
        holder.await.unwrap().unwrap();
        let counts = stats(&admission).admission_counts();
        // Count-only has no limit and no queue (it changes nothing a caller sees): the
        // request ran beside the holder, unqueued, counted once.
        assert_eq!(counts.queued, 0);
        assert_eq!(
            counts.would_shed, 1,
            "one request would have been shed: {counts:?}"
        );
    });
}

/// Finding 6: a Connect call (`connect-protocol-version: 1`, its budget in
/// `connect-timeout-ms`) that is refused gets a Connect error (HTTP 503, JSON body with
/// `"code":"unavailable"`, `application/json`): "try elsewhere now", told apart from a
/// timeout's `deadline_exceeded`. A unary GET is Connect's by its `connect=v1` query
/// parameter (the route is the path: the query changes no slot).
#[test]
fn a_connect_call_is_shed_with_a_connect_error() {
    timekeeping::retried(|| async {
        let seen = Arc::new(Seen::default());
        let admission = Admission::new().warm_up(2).max_shed(1.0);
        let addr = serve(server(admission.clone(), seen.clone()), false).await;
        let client = client();
        for _ in 0..3 {
            let (status, ..) = get(&client, addr, "/pkg.Svc/Method", Some(10_000), 50, &[]).await;
            assert_eq!(status, StatusCode::OK);
        }
        let connect = [
            ("content-type", "application/json".to_owned()),
            ("connect-protocol-version", "1".to_owned()),
            ("connect-timeout-ms", "5".to_owned()),
        ];
        let path = "/pkg.Svc/Method?connect=v1&encoding=json&message=%7B%7D";
        let (status, headers, body, _) = get(&client, addr, path, None, 50, &connect).await;
        println!("{status} {headers:?} {body:?}");
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(seen.started("/pkg.Svc/Method"), 3, "shed, never started");
        assert_eq!(stats(&admission).admission_counts().shed, 1);
        assert_eq!(
            headers.get("content-type").map(|v| v.as_bytes()),
            Some(&b"application/json"[..]),
            "{status}: a Connect error is JSON"
        );
        let body = String::from_utf8_lossy(&body).replace(' ', "");
        assert!(body.contains("\"code\":\"unavailable\""), "{body}");
    });
}

/// Finding 7: at quantile 0.99 the estimate's step down is `q * 33 >> 16`, zero for an
/// estimate below about 2 ms, so an estimate under 2 ms never comes down again: one slow
/// answer of a fast route pins it. The rustdoc: "it comes down by ... an answer".
#[test]
fn a_small_estimate_comes_down_at_quantile_099() {
    timekeeping::retried(|| async {
        let admission = Admission::new().quantile(0.99).warm_up(1);
        let layer = SharedHeadersLayer::new().admission(admission.clone());
        let calls = Arc::new(AtomicUsize::new(0));
        let service = {
            let calls = calls.clone();
            layer.layer(service_fn(move |_req: Request<()>| {
                let first = calls.fetch_add(1, Ordering::SeqCst) == 0;
                async move {
                    if first {
                        // One answer of about 1.5 ms (a sleep is at least that long).
                        std::thread::sleep(Duration::from_micros(1_500));
                    }
                    Ok::<_, Infallible>(Response::new(String::new()))
                }
            }))
        };
        service.clone().oneshot(Request::new(())).await.unwrap();
        let first = stats(&admission)
            .admission_estimate(&Method::GET, "/")
            .unwrap();
        if first >= Duration::from_micros(1_900) {
            // A loaded machine slept far longer: the case is not the one under test.
            println!("first answer took {first:?}: skipped");
            return;
        }
        // 3000 answers of a few microseconds: 0.05% down each, about a factor of 4.
        for _ in 0..3_000 {
            service.clone().oneshot(Request::new(())).await.unwrap();
        }
        let after = stats(&admission)
            .admission_estimate(&Method::GET, "/")
            .unwrap();
        println!("{first:?} -> {after:?}");
        assert!(
            after < first * 2 / 3,
            "3000 faster answers left the estimate at {after:?} (from {first:?})"
        );
    });
}

/// Held: a caller that closes its HTTP/1.1 connection while queued leaves the queue long
/// before the permit comes back (hyper drops the response future; the ticket leaves).
#[test]
fn an_http1_caller_that_hangs_up_while_queued_leaves_the_queue() {
    let _heavy = timekeeping::heavy();
    use tokio::io::AsyncWriteExt;
    run(async {
        let seen = Arc::new(Seen::default());
        let admission = Admission::new().limit(NonZeroUsize::new(1).unwrap());
        let addr = serve(server(admission.clone(), seen.clone()), false).await;
        let client = client();
        let holder = {
            let client = client.clone();
            tokio::spawn(async move { get(&client, addr, "/hold", None, 3_000, &[]).await })
        };
        eventually("the holder started", || seen.started("/hold") == 1).await;
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /work HTTP/1.1\r\nhost: x\r\nx-work-ms: 1\r\n\r\n")
            .await
            .unwrap();
        eventually("the waiter queued", || {
            stats(&admission).admission_counts().waiting == 1
        })
        .await;
        drop(stream);
        let at = Instant::now();
        eventually("the waiter left", || {
            stats(&admission).admission_counts().waiting == 0
        })
        .await;
        assert!(
            at.elapsed() < Duration::from_millis(1_500),
            "{:?}",
            at.elapsed()
        );
        assert_eq!(stats(&admission).admission_counts().left_queue, 1);
        assert_eq!(seen.started("/work"), 0);
        holder.abort();
    });
}

/// Held: a handler that panics while holding the one permit gives it back (the next
/// request runs), and the panic counts as "at least that long" for its route.
#[test]
fn a_handler_panic_gives_its_permit_back() {
    timekeeping::retried(|| async {
        let admission = Admission::new().limit(NonZeroUsize::new(1).unwrap());
        let layer = SharedHeadersLayer::new().admission(admission.clone());
        let service = layer.layer(service_fn(|req: Request<()>| async move {
            if req.uri().path() == "/panic" {
                tokio::time::sleep(Duration::from_millis(5)).await;
                panic!("handler panicked");
            }
            Ok::<_, Infallible>(Response::new(String::new()))
        }));
        let res = service
            .clone()
            .oneshot(Request::get("/panic").body(()).unwrap())
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(stats(&admission).admission_counts().free_permits, 1);
        let res = service.clone().oneshot(Request::new(())).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        // The permit is held by the response's body until it ends (is dropped).
        assert_eq!(stats(&admission).admission_counts().free_permits, 0);
        drop(res);
        assert_eq!(stats(&admission).admission_counts().free_permits, 1);
        // A future made and dropped before its first poll gives its permit back too.
        let mut svc = service.clone();
        let future = tower::Service::call(&mut svc, Request::new(()));
        assert_eq!(stats(&admission).admission_counts().free_permits, 0);
        drop(future);
        assert_eq!(stats(&admission).admission_counts().free_permits, 1);
    });
}

/// A caller that hangs up teaches nothing: 16 callers that give up after 3 ms on a 60 ms
/// route leave it cold (no estimate of 3 ms that would admit 15 ms callers as if it were
/// warm and fast).
#[test]
fn hang_ups_teach_nothing() {
    timekeeping::retried(|| async {
        let seen = Arc::new(Seen::default());
        let admission = Admission::new();
        let addr = serve(server(admission.clone(), seen.clone()), false).await;
        let client = client();
        for _ in 0..16 {
            let call = get(&client, addr, "/work", Some(10_000), 60, &[]);
            let _ = tokio::time::timeout(Duration::from_millis(3), call).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let estimate = stats(&admission).admission_estimate(&Method::GET, "/work");
        assert_eq!(estimate, None, "hang-ups taught {estimate:?}");
        let counts = stats(&admission).admission_counts();
        // (Those that reached the layer before their caller gave up.)
        assert!((1..=16).contains(&counts.admitted_cold), "{counts:?}");
    });
}

/// A route that needs 300 ms under callers with 100 ms: no caller ever gets an answer, so
/// its timeouts teach it (a lower bound each); once warm, the doomed are refused at once but
/// for a probe in 32. Of 80 callers, at most the warm-up's 16 and the probes run (the
/// handler's starts), the rest are refused unstarted.
#[test]
fn a_route_no_caller_can_wait_for_is_learned_from_its_timeouts() {
    timekeeping::retried(|| async {
        let seen = Arc::new(Seen::default());
        let admission = Admission::new();
        let addr = serve(server(admission.clone(), seen.clone()), false).await;
        let client = client();
        let mut refused = 0;
        for _ in 0..80 {
            let (status, headers, ..) = get(&client, addr, "/slow", Some(100), 300, &[]).await;
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
            if headers.contains_key("retry-after") {
                refused += 1;
            }
        }
        let started = seen.started("/slow");
        let counts = stats(&admission).admission_counts();
        println!("started {started} of 80, refused {refused}, {counts:?}");
        assert!(started <= 16 + 3, "{started} of 80 started: doomed work");
        assert_eq!(refused + started, 80);
    });
}

/// A proxy clock 1.5 s behind this one and callers with 1 s: by the header every budget is
/// spent before arrival. The header is believed within the cap (a fifth of the route's
/// requests): at most about that share fails, the rest are served.
#[test]
fn a_proxy_clock_behind_fails_at_most_the_caps_share() {
    timekeeping::retried(|| async {
        let seen = Arc::new(Seen::default());
        let admission =
            Admission::new().queue_start(http::HeaderName::from_static("x-request-start"));
        let addr = serve(server(admission.clone(), seen.clone()), false).await;
        let client = client();
        let mut failed = 0;
        for _ in 0..50 {
            let start = ms_ago(Duration::from_millis(1_500));
            let (status, ..) = get(
                &client,
                addr,
                "/work",
                Some(1_000),
                1,
                &[("x-request-start", start)],
            )
            .await;
            if status != StatusCode::OK {
                failed += 1;
            }
        }
        let counts = stats(&admission).admission_counts();
        println!("{failed} of 50 failed, {counts:?}");
        assert!(failed <= 12, "{failed} of 50 failed");
        assert!(counts.capped >= 38, "{counts:?}");
    });
}

/// Count-only mode changes nothing a caller sees: a queue-start header shortens no deadline
/// (the handler's exchange keeps the caller's whole budget).
#[test]
fn count_only_shortens_no_deadline() {
    timekeeping::retried(|| async {
        let deadline = Arc::new(std::sync::Mutex::new(None));
        let admission = Admission::new()
            .count_only(true)
            .queue_start(http::HeaderName::from_static("x-request-start"));
        let layer = SharedHeadersLayer::new()
            .caller_budget(BudgetHeader::envoy_expected_rq_timeout_ms())
            .admission(admission);
        let handler = {
            let deadline = deadline.clone();
            service_fn(move |req: Request<Incoming>| {
                let deadline = deadline.clone();
                async move {
                    let exchange = req.extensions().get::<shared_headers::Exchange>().unwrap();
                    *deadline.lock().unwrap() = exchange
                        .deadline()
                        .map(|d| d.instant().saturating_duration_since(Instant::now()));
                    Ok::<_, Infallible>(Response::new(Body::from("done")))
                }
            })
        };
        let addr = serve(BoxCloneService::new(layer.layer(handler)), false).await;
        let client = client();
        let start = ms_ago(Duration::from_millis(700));
        let (status, ..) = get(
            &client,
            addr,
            "/work",
            Some(1_000),
            1,
            &[("x-request-start", start)],
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        let left = deadline.lock().unwrap().unwrap();
        assert!(
            left > Duration::from_millis(800),
            "{left:?} left: shortened"
        );
    });
}

/// A waiter whose deadline passes in the queue is answered by its timer and counted once:
/// as having left the queue, never also as refused.
#[test]
fn a_waiter_that_times_out_is_counted_once() {
    timekeeping::retried(|| async {
        let seen = Arc::new(Seen::default());
        let admission = Admission::new().limit(NonZeroUsize::new(1).unwrap());
        let addr = serve(server(admission.clone(), seen.clone()), false).await;
        let client = client();
        // The holder: the one permit for 300 ms (no deadline). The waiter: 100 ms, a cold
        // route (no estimate: admitted, queued).
        let holder = {
            let client = client.clone();
            tokio::spawn(async move { get(&client, addr, "/hold", None, 300, &[]).await })
        };
        eventually("the holder started", || seen.started("/hold") == 1).await;
        let (status, headers, ..) = get(&client, addr, "/work", Some(100), 1, &[]).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            !headers.contains_key("retry-after"),
            "a timeout, not a refusal"
        );
        holder.await.unwrap();
        let counts = stats(&admission).admission_counts();
        println!("{counts:?}");
        assert_eq!((counts.queued, counts.left_queue), (1, 1), "{counts:?}");
        assert_eq!(
            counts.shed + counts.shed_waiting + counts.overloaded,
            0,
            "{counts:?}"
        );
        assert_eq!(seen.started("/work"), 0);
    });
}

/// A bimodal route (one answer in 7 takes 300 ms, the rest 5 ms) under callers with 100 ms:
/// what admission does and refuses there, reported. It cannot tell in advance which request
/// will be slow: the quantile climbs slowly (the slow ones are only lower bounds, cut at
/// 100 ms) and the need is the smaller of it and the recent answers, so the fast six in
/// seven are admitted and answered; the slow seventh is admitted too, and times out
/// (measured: 120 answered in time, 0 refused, 20 timed out of 140).
#[test]
fn a_bimodal_route_is_reported() {
    timekeeping::retried(|| async {
        let seen = Arc::new(Seen::default());
        let admission = Admission::new();
        let addr = serve(server(admission.clone(), seen.clone()), false).await;
        let client = client();
        let (mut ok, mut refused, mut missed) = (0, 0, 0);
        for i in 0..140 {
            let work = if i % 7 == 3 { 300 } else { 5 };
            let (status, headers, ..) = get(&client, addr, "/bimodal", Some(100), work, &[]).await;
            match status {
                StatusCode::OK => ok += 1,
                _ if headers.contains_key("retry-after") => refused += 1,
                _ => missed += 1,
            }
        }
        let counts = stats(&admission).admission_counts();
        println!(
            "bimodal: {ok} answered in time, {refused} refused, {missed} timed out of 140; {counts:?}"
        );
        assert_eq!(ok + refused + missed, 140);
        assert!(ok >= 70, "{ok} of 140 answered in time");
    });
}
