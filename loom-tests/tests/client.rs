//! loom models of the single-flight refresh rule (`shared_headers::client::single_flight`), the decision
//! core under `client::Refresher`.
//!
//! Run with `RUSTFLAGS="--cfg shared_headers_loom" cargo test --release -p
//! shared-headers-loom-tests --test client`.
//!
//! The rendezvous here is a loom mutex and condition variable, standing in for the
//! `tokio::sync::watch` channel the async `Refresher` uses: what is checked is the rule (who
//! leads, who waits, who is stale, and that publishing and ending an attempt are one step), which
//! is the same code in both.
#![cfg(shared_headers_loom)]

use std::sync::Arc;

use http::{HeaderMap, HeaderValue};
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::{Condvar, Mutex};
use loom::thread;
use shared_headers::SharedHeaders;
use shared_headers::client::single_flight::{Rendezvous, Role, SingleFlight};
use shared_headers_loom_tests::explore;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Published(u64),
    Failed,
    Abandoned,
}

// The distinct outcomes each model reaches under `LOOM_MAX_PREEMPTIONS=2` (see `explore`).
const MIN_ONE_REFRESH: usize = 3;
const MIN_FAILURE: usize = 3;
const MIN_UNRELATED: usize = 3;
const MIN_OBSERVING: usize = 3;

/// One attempt's rendezvous: the outcome, and a condition variable to wait for it.
struct Slot {
    outcome: Mutex<Option<Outcome>>,
    changed: Condvar,
}

impl Default for Slot {
    fn default() -> Self {
        Slot {
            outcome: Mutex::new(None),
            changed: Condvar::new(),
        }
    }
}

impl Slot {
    fn settle(&self, outcome: Outcome) {
        *self.outcome.lock().unwrap() = Some(outcome);
        self.changed.notify_all();
    }

    fn wait(&self) -> Outcome {
        let mut outcome = self.outcome.lock().unwrap();
        loop {
            if let Some(seen) = *outcome {
                return seen;
            }
            outcome = self.changed.wait(outcome).unwrap();
        }
    }
}

impl Rendezvous for Slot {
    fn abandon(&self) {
        self.settle(Outcome::Abandoned);
    }
}

/// A token and its companion header; a consistent set has equal generations.
fn credentials(generation: u64) -> HeaderMap {
    let mut map = HeaderMap::new();
    map.insert("authorization", generation.into());
    map.insert("x-token-gen", generation.into());
    map
}

fn assert_consistent(headers: &SharedHeaders) {
    let snapshot = headers.snapshot();
    assert_eq!(
        snapshot.get("authorization"),
        snapshot.get("x-token-gen"),
        "token and companion come from one version"
    );
}

/// What a caller does after a 401 on `failed`: follow the rule; as leader, "refresh" (count it)
/// and publish, or fail, or give up (cancelled) as `lead` says. Returns the outcome it ended with.
fn caller(
    flight: &SingleFlight<Slot>,
    refreshes: &AtomicUsize,
    failed: u64,
    lead: impl Fn() -> Option<bool>,
) -> Outcome {
    loop {
        match flight.begin(failed) {
            Role::Stale { current } => return Outcome::Published(current),
            Role::Follower(slot) => match slot.wait() {
                Outcome::Abandoned => continue,
                seen => return seen,
            },
            Role::Leader(leader) => match lead() {
                // Cancelled mid-way: the `Lead` is dropped.
                None => {
                    drop(leader);
                    return Outcome::Abandoned;
                }
                Some(true) => {
                    let generation = refreshes.fetch_add(1, Ordering::SeqCst) as u64 + 1;
                    let (snapshot, slot) = leader.publish(&credentials(generation)).unwrap();
                    let outcome = Outcome::Published(snapshot.version());
                    slot.settle(outcome);
                    return outcome;
                }
                Some(false) => {
                    leader.fail().settle(Outcome::Failed);
                    return Outcome::Failed;
                }
            },
        }
    }
}

/// Property: three callers whose requests failed with the same version cause exactly one
/// refresh, and every caller ends having seen the new version (none waits forever: loom reports
/// a deadlock if a follower is never woken; none returns before the new version is visible).
#[test]
fn one_refresh_per_failed_version_and_no_waiter_misses_it() {
    explore(
        "one_refresh_per_failed_version_and_no_waiter_misses_it",
        MIN_ONE_REFRESH,
        || {
            let flight = Arc::new(SingleFlight::<Slot>::new(SharedHeaders::from(credentials(
                0,
            ))));
            let refreshes = Arc::new(AtomicUsize::new(0));
            let threads: Vec<_> = (0..2)
                .map(|_| {
                    let (flight, refreshes) = (flight.clone(), refreshes.clone());
                    thread::spawn(move || {
                        let led = std::cell::Cell::new(false);
                        let outcome = caller(&flight, &refreshes, 0, || {
                            led.set(true);
                            Some(true)
                        });
                        // Whatever role it had, the caller now sees the refreshed, consistent set.
                        assert!(flight.headers().version() >= 1);
                        assert_consistent(flight.headers());
                        (outcome, led.get())
                    })
                })
                .collect();
            let led = std::cell::Cell::new(false);
            let mine = caller(&flight, &refreshes, 0, || {
                led.set(true);
                Some(true)
            });
            assert_eq!(mine, Outcome::Published(1));
            let mut leaders = vec![led.get()];
            for t in threads {
                let (outcome, led) = t.join().unwrap();
                assert_eq!(outcome, Outcome::Published(1));
                leaders.push(led);
            }
            assert_eq!(refreshes.load(Ordering::SeqCst), 1, "exactly one refresh");
            assert_eq!(flight.headers().version(), 1);
            // Outcome: which caller led (main thread first).
            leaders
        },
    );
}

/// Property: a leader that is cancelled (drops its `Lead`) does not strand the other caller: it
/// takes over (or had led already), and exactly one refresh is published.
#[test]
fn a_cancelled_leader_does_not_strand_waiters() {
    explore("a_cancelled_leader_does_not_strand_waiters", 2, || {
        let flight = Arc::new(SingleFlight::<Slot>::new(SharedHeaders::new()));
        let refreshes = Arc::new(AtomicUsize::new(0));
        let cancelled = {
            let (flight, refreshes) = (flight.clone(), refreshes.clone());
            thread::spawn(move || caller(&flight, &refreshes, 0, || None))
        };
        let survivor = caller(&flight, &refreshes, 0, || Some(true));
        let cancelled = cancelled.join().unwrap();
        assert_eq!(survivor, Outcome::Published(1));
        assert!(matches!(
            cancelled,
            Outcome::Abandoned | Outcome::Published(1)
        ));
        assert_eq!(refreshes.load(Ordering::SeqCst), 1);
        assert!(!flight.in_flight());
        // Outcome: how the cancelled caller ended (it led and gave up, or followed).
        cancelled
    });
}

/// Property: a failed refresh reaches its waiter as a failure (nobody hangs, nothing is
/// published), and it does not poison the gate: the next caller leads a new attempt.
#[test]
fn a_failure_reaches_waiters_and_does_not_poison() {
    explore(
        "a_failure_reaches_waiters_and_does_not_poison",
        MIN_FAILURE,
        || {
            let flight = Arc::new(SingleFlight::<Slot>::new(SharedHeaders::new()));
            let refreshes = Arc::new(AtomicUsize::new(0));
            let other = {
                let (flight, refreshes) = (flight.clone(), refreshes.clone());
                thread::spawn(move || {
                    let led = std::cell::Cell::new(false);
                    let outcome = caller(&flight, &refreshes, 0, || {
                        led.set(true);
                        Some(false)
                    });
                    (outcome, led.get())
                })
            };
            let led = std::cell::Cell::new(false);
            let mine = caller(&flight, &refreshes, 0, || {
                led.set(true);
                Some(false)
            });
            assert_eq!(mine, Outcome::Failed);
            let (theirs, they_led) = other.join().unwrap();
            assert_eq!(theirs, Outcome::Failed);
            assert_eq!(flight.headers().version(), 0);
            assert!(matches!(flight.begin(0), Role::Leader(_)));
            // Outcome: (the main thread led, the other led): one attempt, or two in turn.
            (led.get(), they_led)
        },
    );
}

/// Property: a leader publishing while an unrelated writer writes the same headers loses
/// neither write and refreshes at most once: the end state has the unrelated header, a
/// consistent token set, and one version per write that happened. (Publishing is one write
/// under the writer lock, so there is nothing to retry: loom explores every order of the two.)
#[test]
fn an_unrelated_writer_is_kept_and_costs_no_retry() {
    explore(
        "an_unrelated_writer_is_kept_and_costs_no_retry",
        MIN_UNRELATED,
        || {
            let flight = Arc::new(SingleFlight::<Slot>::new(SharedHeaders::from(credentials(
                0,
            ))));
            let refreshes = Arc::new(AtomicUsize::new(0));
            let writer = {
                let headers = flight.headers().clone();
                thread::spawn(move || {
                    headers
                        .insert("x-other", HeaderValue::from_static("1"))
                        .unwrap();
                })
            };
            let mine = caller(&flight, &refreshes, 0, || Some(true));
            writer.join().unwrap();

            let refreshed = refreshes.load(Ordering::SeqCst) as u64;
            let snapshot = flight.headers().snapshot();
            assert!(refreshed <= 1);
            assert_eq!(snapshot["x-other"], "1", "the unrelated write is kept");
            assert_eq!(snapshot.version(), 1 + refreshed, "one version per write");
            assert_eq!(snapshot["authorization"], refreshed.to_string().as_str());
            assert_consistent(flight.headers());
            // Led (published 1 or 2) or was stale (the writer published 1 first).
            assert!(matches!(mine, Outcome::Published(1 | 2)));
            assert!(!flight.in_flight());
            // Outcome: (what the caller ended with, how many refreshes).
            (mine, refreshed)
        },
    );
}

/// Property: the gate can be observed (`Debug`, `started`, `in_flight`) and even entered
/// (`begin`) from inside a write to its headers while a leader publishes: the gate's lock is
/// only ever taken after the writer lock, so there is no lock-order cycle (loom reports a
/// deadlock if there is one). Whatever the order, the caller ends with a consistent version.
#[test]
fn observing_the_gate_inside_a_write_cannot_deadlock() {
    explore(
        "observing_the_gate_inside_a_write_cannot_deadlock",
        MIN_OBSERVING,
        || {
            let flight = Arc::new(SingleFlight::<Slot>::new(SharedHeaders::from(credentials(
                0,
            ))));
            let refreshes = Arc::new(AtomicUsize::new(0));
            let observer = {
                let flight = flight.clone();
                thread::spawn(move || {
                    flight
                        .headers()
                        .update(|_| {
                            let shown = format!("{flight:?}");
                            assert!(shown.contains("started"));
                            assert!(flight.started() <= 2);
                            let _ = flight.in_flight();
                            // Dropped at once: a leader elected here abandons its attempt.
                            drop(flight.begin(0));
                        })
                        .unwrap();
                })
            };
            let mine = caller(&flight, &refreshes, 0, || Some(true));
            observer.join().unwrap();
            assert!(matches!(mine, Outcome::Published(_)));
            let refreshed = refreshes.load(Ordering::SeqCst);
            assert!(refreshed <= 1);
            assert_consistent(flight.headers());
            assert!(!flight.in_flight());
            // Outcome: (what the caller ended with, how many refreshes).
            (mine, refreshed)
        },
    );
}

/// Negative control: the naive "check the version, then refresh" without the single-flight
/// gate. loom finds the interleaving in which both callers see the old version and both refresh.
#[test]
#[should_panic(expected = "refreshed twice")]
fn naive_check_then_refresh_stampedes() {
    loom::model(|| {
        let headers = SharedHeaders::from(credentials(0));
        let refreshes = Arc::new(AtomicUsize::new(0));
        let naive = |headers: SharedHeaders, refreshes: Arc<AtomicUsize>| {
            if headers.version() == 0 {
                let generation = refreshes.fetch_add(1, Ordering::SeqCst) as u64 + 1;
                headers
                    .update(|m| m.extend(credentials(generation)))
                    .unwrap();
            }
        };
        let other = {
            let (headers, refreshes) = (headers.clone(), refreshes.clone());
            thread::spawn(move || naive(headers, refreshes))
        };
        naive(headers.clone(), refreshes.clone());
        other.join().unwrap();
        assert_eq!(refreshes.load(Ordering::SeqCst), 1, "refreshed twice");
    });
}
