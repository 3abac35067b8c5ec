//! One deadline thread for the process (issue 20, item 1): 10,000 layers with 10,000 different
//! timeouts, each with one pending request, add exactly one thread, the shared deadline thread.
//!
//! Its own test binary with a single test, so no other test of the harness starts or ends
//! threads while it counts: the harness's own threads (main, the test's thread) exist before and
//! after and cancel out. The runtime is a current-thread runtime made before the first count
//! (it starts no thread of its own unless asked to block, which this test does not).
#![cfg(feature = "server")]

use std::convert::Infallible;
use std::time::Duration;

use http::{Request, Response};
use shared_headers::server::SharedHeadersLayer;
use tower::{Layer, Service, ServiceExt, service_fn};

const LAYERS: u64 = 10_000;

/// `Threads:` of `/proc/self/status`.
fn threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("Threads:")).unwrap();
    line["Threads:".len()..].trim().parse().unwrap()
}

/// How many of the process's threads the crate's deadline thread names (`comm` holds 15 bytes).
fn deadline_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.starts_with("shared-headers"))
        .count()
}

#[test]
fn ten_thousand_layers_with_different_timeouts_add_one_thread() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let before = threads();
    assert_eq!(
        deadline_threads(),
        0,
        "no deadline armed yet in this process"
    );
    let (during, after) = rt.block_on(async {
        let mut pending = Vec::with_capacity(LAYERS as usize);
        for i in 0..LAYERS {
            let layer = SharedHeadersLayer::new().timeout(Duration::from_millis(1000 + i));
            let mut service = layer.layer(service_fn(|_req: Request<()>| async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok::<_, Infallible>(Response::new(String::new()))
            }));
            // The call arms the deadline; the layer and its service go out of scope here.
            let future = service.ready().await.unwrap().call(Request::new(()));
            pending.push(tokio::spawn(future));
        }
        // Every request polled once (registered with the timer, pending in its handler).
        tokio::time::sleep(Duration::from_millis(50)).await;
        let during = threads();
        let finished = pending.iter().filter(|task| task.is_finished()).count();
        println!("{finished} of {LAYERS} requests timed out before the count");
        for task in pending {
            task.abort();
        }
        tokio::task::yield_now().await;
        (during, threads())
    });
    println!("threads: before {before}, with {LAYERS} pending deadlines {during}, after {after}");
    assert_eq!(deadline_threads(), 1, "exactly one deadline thread");
    assert!(
        during <= before + 1,
        "{LAYERS} layers added {} threads",
        during - before
    );
    assert!(
        after <= before + 1,
        "the count stays bounded after the requests end"
    );
}
