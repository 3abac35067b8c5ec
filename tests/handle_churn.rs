//! Handle churn: many short-lived handles created and freed on several threads at a high rate,
//! each tagged with its own identity, and no load ever returns another handle's state.
//!
//! This is the pattern of arc-swap issue #210 (fixed in 1.9.5): a `load` could return a value
//! stored into a *different* `ArcSwap` after the address of a freed one was reused by a new one.
//! The server layer creates and frees two handles per request, which is exactly that pattern.
//! The test is bounded in time (it stops after a fixed wall-clock budget, about one second per
//! run), not a speed target: it passes or fails on what the loads return. It guards the pattern;
//! it is not a reproducer of #210 (run against arc-swap 1.9.4, which has the bug, it passed: the
//! bug needs a rare interleaving). The `arc-swap = "1.9.5"` floor in `Cargo.toml` is what
//! excludes the bug.
//!
//! Each thread also passes some of its handles to the next thread through a channel, so that a
//! handle is loaded and dropped on a thread other than the one that created it, while the owner
//! keeps writing to it (loads race stores on the same instance, and frees race allocations at the
//! same address on other threads).

use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use http::HeaderValue;
use shared_headers::SharedHeaders;

const THREADS: usize = 4;
const BUDGET: Duration = Duration::from_millis(1_000);

/// The identity of a handle, as `thread.serial`.
fn tag(thread: usize, serial: u64) -> HeaderValue {
    HeaderValue::from_str(&format!("{thread}.{serial}")).unwrap()
}

/// Checks that every read of `headers` returns its own tag (and nothing else).
fn check_own(headers: &SharedHeaders, expected: &HeaderValue) {
    assert_eq!(
        headers.get("x-id").as_ref(),
        Some(expected),
        "get saw another handle's state"
    );
    let snap = headers.snapshot();
    assert_eq!(
        snap.get("x-id"),
        Some(expected),
        "snapshot saw another handle's state"
    );
    assert_eq!(snap.len(), 2, "snapshot has foreign headers: {snap:?}");
    headers.read(|m| {
        assert_eq!(
            m.get("x-id"),
            Some(expected),
            "read saw another handle's state"
        );
    });
}

#[test]
fn churned_handles_never_load_another_handles_state() {
    let start = Arc::new(Barrier::new(THREADS));
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..THREADS)
        .map(|_| mpsc::sync_channel::<(SharedHeaders, HeaderValue)>(64))
        .unzip();
    let mut receivers: Vec<_> = receivers.into_iter().map(Some).collect();
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let start = Arc::clone(&start);
            // Thread t sends to thread t+1 and receives from thread t-1.
            let to_next = senders[(t + 1) % THREADS].clone();
            let from_prev = receivers[t].take().unwrap();
            thread::spawn(move || {
                start.wait();
                let deadline = Instant::now() + BUDGET;
                let mut serial = 0u64;
                let mut checked = 0u64;
                while Instant::now() < deadline {
                    for _ in 0..64 {
                        serial += 1;
                        let id = tag(t, serial);
                        let headers = SharedHeaders::new();
                        headers.insert("x-id", id.clone()).unwrap();
                        headers
                            .insert("x-step", HeaderValue::from_static("0"))
                            .unwrap();
                        check_own(&headers, &id);
                        // A second store on the same instance, then loads again.
                        headers
                            .insert("x-step", HeaderValue::from_static("1"))
                            .unwrap();
                        check_own(&headers, &id);
                        if serial % 4 == 0 {
                            // Hand a clone to the next thread, keep writing to it here.
                            let _ = to_next.try_send((headers.clone(), id.clone()));
                            headers
                                .insert("x-step", HeaderValue::from_static("2"))
                                .unwrap();
                            check_own(&headers, &id);
                        }
                        checked += 1;
                        // `headers` is freed here (unless the next thread holds a clone).
                    }
                    while let Ok((foreign, id)) = from_prev.try_recv() {
                        check_own(&foreign, &id);
                        checked += 1;
                    }
                }
                drop(to_next);
                while let Ok((foreign, id)) = from_prev.try_recv() {
                    check_own(&foreign, &id);
                }
                checked
            })
        })
        .collect();
    drop(senders);
    let checked: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    // The test saw real churn (thousands of handles), not a handful.
    assert!(checked > 1_000, "only {checked} handles were checked");
}
