//! The deadline thread runs no user code, not even a `Drop` (issue 20, item 2), shown to fail
//! at 289ed64: `WeakExchange::expire` upgrades the exchange, commits, wakes the response
//! future, then drops its `Arc<Inner>`. If the future answered and dropped the exchange in
//! between, the deadline thread drops the last reference, and with it the layer's hooks when
//! the layer is gone (a router rebuilt at a config reload, a per-request layer): the `Drop` of
//! whatever `on_commit` captured (a log sink flushing on drop, a guard that panics) runs on the
//! deadline thread, where a panic kills it for the whole process. The race is narrow: about 2
//! of 10,000 requests here on a loaded 2-core machine, so one run may miss it.
//!
//! Fixed: the thread parks a last reference it holds, and the next `arm` (a request's thread)
//! drops it (`src/server/timer.rs`).
#![cfg(feature = "server")]

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http::{Request, Response};
use shared_headers::server::SharedHeadersLayer;
use tower::{Layer, Service, ServiceExt, service_fn};

/// Counts its drops, and those on the deadline thread.
struct Probe {
    on_deadline_thread: Arc<AtomicUsize>,
    dropped: Arc<AtomicUsize>,
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, Ordering::SeqCst);
        if std::thread::current().name() == Some("shared-headers-deadline") {
            self.on_deadline_thread.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[test]
fn no_hook_state_is_dropped_on_the_deadline_thread() {
    const ROUNDS: usize = 20;
    const PER_ROUND: usize = 500;
    let on_deadline_thread = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        for _ in 0..ROUNDS {
            let mut tasks = Vec::with_capacity(PER_ROUND);
            for _ in 0..PER_ROUND {
                let probe = Probe {
                    on_deadline_thread: on_deadline_thread.clone(),
                    dropped: dropped.clone(),
                };
                // A layer per request: its hooks live as long as the request's exchange.
                let mut service = SharedHeadersLayer::new()
                    .timeout(Duration::from_millis(20))
                    .on_commit(move |_| {
                        let _ = &probe;
                    })
                    .record_in_response(false)
                    .layer(service_fn(|_req: Request<()>| async {
                        tokio::time::sleep(Duration::from_secs(10)).await;
                        Ok::<_, Infallible>(Response::new(String::new()))
                    }));
                let future = service.ready().await.unwrap().call(Request::new(()));
                drop(service);
                // The task drops the response (and the exchange) as soon as it answers.
                tasks.push(tokio::spawn(async move {
                    let _ = future.await;
                }));
            }
            for task in tasks {
                task.await.unwrap();
            }
        }
        // One more deadline, after the last commits: a fix may hand the deadline thread's
        // last references to the next request that arms one (the proposed patch does).
        tokio::time::sleep(Duration::from_millis(50)).await;
        let service = SharedHeadersLayer::new()
            .timeout(Duration::from_secs(1))
            .layer(service_fn(|_req: Request<()>| async {
                Ok::<_, Infallible>(Response::new(String::new()))
            }));
        service.oneshot(Request::new(())).await.unwrap();
    });
    let on_thread = on_deadline_thread.load(Ordering::SeqCst);
    println!(
        "hook states dropped on the deadline thread: {on_thread} of {}",
        dropped.load(Ordering::SeqCst)
    );
    assert_eq!(dropped.load(Ordering::SeqCst), ROUNDS * PER_ROUND);
    assert_eq!(
        on_thread, 0,
        "user code (a Drop) ran on the deadline thread"
    );
}
