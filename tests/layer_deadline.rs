//! The layer's deadline against the exchange's lifetime, through the public API only (no
//! sockets: `tower::ServiceExt::oneshot`): the timeout answer is not delayed by a lost wakeup,
//! and the timer thread never revives an exchange whose last `Exchange` was dropped.
//!
//! The time bounds are correctness bounds (a missed wakeup costs the handler's whole second),
//! not speed targets: each is an order of magnitude above what a correct run needs.

#![cfg(feature = "server")]

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use http::{Request, Response, StatusCode};
use shared_headers::server::SharedHeadersLayer;
use shared_headers::{Error, Exchange};
use tower::{Layer, ServiceExt};

fn run<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// The response future registers its waker only once the handler returned `Pending`, then looks
/// at the exchange again: the timer thread may have committed (and found no waker to wake)
/// while the handler's first poll ran. Here that poll blocks for 150 ms, past the 50 ms
/// deadline, then the handler waits a second. The timeout answer must come at the end of that
/// first poll, not when the handler's second ends (without the look after the registration,
/// it came at about 1 s: nothing wakes the task before the handler's own timer).
#[test]
fn a_deadline_passed_during_the_first_poll_is_answered_without_waiting_for_the_handler() {
    run(async {
        let service = SharedHeadersLayer::new()
            .timeout(Duration::from_millis(50))
            .layer(tower::service_fn(|_req: Request<()>| async {
                thread::sleep(Duration::from_millis(150)); // blocks the first poll
                tokio::time::sleep(Duration::from_secs(1)).await;
                Ok::<_, Infallible>(Response::new(String::new()))
            }));
        let start = Instant::now();
        let res = service.oneshot(Request::new(())).await.unwrap();
        let took = start.elapsed();
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            took < Duration::from_millis(600),
            "the timeout answer waited for the handler: {took:?} (a lost wakeup)"
        );
    });
}

/// The late-writes report runs once, when the last `Exchange` is dropped. The layer's timer
/// thread holds a weak reference to every exchange until its deadline; if the exchange's
/// allocation is still alive then (a task kept only a handle), upgrading it must not revive
/// the exchange: the revived `Exchange`'s drop would report the late writes a second time.
#[test]
fn the_timer_never_revives_an_exchange_after_its_last_exchange_was_dropped() {
    let reports = Arc::new(AtomicUsize::new(0));
    let (done_tx, done_rx) = mpsc::channel::<()>();
    run(async {
        let layer = {
            let reports = Arc::clone(&reports);
            SharedHeadersLayer::new()
                .timeout(Duration::from_millis(100))
                .on_late_writes(move |_| {
                    reports.fetch_add(1, Ordering::SeqCst);
                })
        };
        let service = layer.layer(tower::service_fn(move |req: Request<()>| {
            let exchange = req.extensions().get::<Exchange>().unwrap().clone();
            let done = done_tx.clone();
            thread::spawn(move || {
                while !exchange.is_committed() {
                    thread::sleep(Duration::from_millis(1));
                }
                let late = exchange.response().insert("x-late", "1".parse().unwrap());
                assert!(matches!(late, Err(Error::Sealed { .. })));
                // Keep only a handle (and with it the exchange's allocation) past the deadline.
                let handle = exchange.response().clone();
                drop(exchange);
                thread::sleep(Duration::from_millis(400));
                drop(handle);
                let _ = done.send(());
            });
            async { Ok::<_, Infallible>(Response::new(String::new())) }
        }));
        let res = service.oneshot(Request::new(())).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
    });
    done_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    // The deadline (100 ms) passed while only the handle was alive; give the timer a moment.
    thread::sleep(Duration::from_millis(100));
    assert_eq!(
        reports.load(Ordering::SeqCst),
        1,
        "the late writes reported twice"
    );
}
