//! loom models of `shared_headers::conn`: admission, death and eviction of a connection.
//!
//! Run with `RUSTFLAGS="--cfg shared_headers_loom" cargo test --release -p
//! shared-headers-loom-tests --test conn`. Each model states the property it proves; the last
//! one is the negative control (the split design) and is expected to fail.
#![cfg(shared_headers_loom)]

use loom::sync::Arc as LoomArc;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::thread;
use shared_headers::conn::{AcquireError, Cause, ConnHealth, Status};

// A pool on `ConnHealth`, its lock and counter loom's here.
#[path = "../../tests/support/conn_pool.rs"]
mod conn_pool;
use conn_pool::Pool;
use shared_headers_loom_tests::explore;

const KEY: &str = "example.com:443";

// The distinct outcomes each model reaches under `LOOM_MAX_PREEMPTIONS=2` (see `explore`).
const MIN_LEASES: usize = 3;
const MIN_CAUSE: usize = 4;

/// Property 1: if `mark_dead` happens-before a checkout, the checkout never returns that
/// connection. The happens-before edge is a release/acquire flag set after `mark_dead`; a
/// checkout that does not see the flag may or may not get the connection, and the final
/// checkout (after `join`) never does.
#[test]
fn dead_before_checkout_is_never_checked_out() {
    explore("dead_before_checkout_is_never_checked_out", 3, || {
        let pool: Pool<&'static str, u32> = Pool::new();
        let health = ConnHealth::new();
        drop(pool.insert(KEY, 1, health.clone()).unwrap());
        let killed = LoomArc::new(AtomicBool::new(false));

        let killer = {
            let (health, killed) = (health.clone(), killed.clone());
            thread::spawn(move || {
                health.mark_dead(Cause::PeerClosed);
                killed.store(true, Ordering::Release);
            })
        };
        let user = {
            let (pool, killed) = (pool.clone(), killed.clone());
            thread::spawn(move || {
                let after = killed.load(Ordering::Acquire);
                let got = pool.checkout(&KEY);
                if after {
                    assert!(got.is_none(), "checked out a connection known to be dead");
                }
                (after, got.is_some())
            })
        };
        killer.join().unwrap();
        let seen = user.join().unwrap();
        assert!(pool.checkout(&KEY).is_none());
        assert!(pool.is_empty(), "the dead connection was not evicted");
        // Outcome: (the user saw the flag, the user got the connection).
        seen
    });
}

/// Property 2: leases admitted concurrently with `mark_dead` never exceed the in-flight count
/// that `mark_dead` observed, and no lease is granted after it. Two threads try to acquire (and
/// keep their leases); one marks the connection dead and then tries to acquire itself.
#[test]
fn leases_are_counted_or_refused() {
    explore("leases_are_counted_or_refused", MIN_LEASES, || {
        let health = ConnHealth::new();
        let acquirers: Vec<_> = (0..2)
            .map(|_| {
                let health = health.clone();
                thread::spawn(move || health.try_acquire().ok())
            })
            .collect();
        let observed = health
            .mark_dead(Cause::Io(std::io::ErrorKind::ConnectionReset))
            .expect("the only mark_dead wins");
        let after = health.try_acquire();
        assert!(
            matches!(after, Err(AcquireError::Dead(_))),
            "lease granted after mark_dead"
        );

        let leases: Vec<_> = acquirers
            .into_iter()
            .filter_map(|t| t.join().unwrap())
            .collect();
        assert!(
            leases.len() <= observed,
            "{} leases granted, mark_dead saw {observed}",
            leases.len()
        );
        assert_eq!(health.in_flight(), leases.len(), "lost or phantom lease");
        let granted = leases.len();
        drop(leases);
        assert_eq!(health.in_flight(), 0);
        // Outcome: (the count `mark_dead` observed, the leases granted).
        (observed, granted)
    });
}

/// Property 3: a connection with a lease held is still evictable once dead: `mark_dead` does
/// not wait for the lease (loom would report the deadlock), the pool drops the entry at once,
/// and the lease stays valid and is released afterwards.
#[test]
fn busy_connection_is_evicted_once_dead() {
    explore("busy_connection_is_evicted_once_dead", 2, || {
        let pool: Pool<&'static str, u32> = Pool::new();
        let busy = pool
            .insert(KEY, 1, ConnHealth::with_max_concurrent(2))
            .unwrap();
        let health = busy.health().clone();

        let killer = thread::spawn(move || health.mark_dead(Cause::HealthCheck));
        let other = {
            let pool = pool.clone();
            thread::spawn(move || pool.checkout(&KEY))
        };
        let observed = killer.join().unwrap().expect("the only mark_dead wins");
        let second = other.join().unwrap();
        // A second lease exists only if it was granted before the death, so it was counted.
        let held = 1 + usize::from(second.is_some());
        assert_eq!(observed, held);

        assert!(pool.is_empty(), "dead connection still pooled");
        assert!(pool.checkout(&KEY).is_none());
        assert_eq!(busy.health().in_flight(), held);
        drop(second);
        assert_eq!(busy.health().status(), Status::Dead(Cause::HealthCheck));
        drop(busy);
        // Outcome: the leases `mark_dead` observed (1, or 2 with the other checkout's).
        held
    });
}

/// The first cause is sticky and published with the state: an observer that sees `Dead` sees a
/// cause, and it is the cause everyone sees afterwards.
#[test]
fn cause_is_visible_with_dead() {
    explore("cause_is_visible_with_dead", MIN_CAUSE, || {
        let health = ConnHealth::new();
        let racers: Vec<_> = [Cause::PeerClosed, Cause::Local]
            .into_iter()
            .map(|cause| {
                let health = health.clone();
                thread::spawn(move || health.mark_dead(cause))
            })
            .collect();
        // Reads the cell only after seeing the dead bit (no fallback path).
        let seen = health.try_acquire().err();
        let winners = racers.into_iter().filter_map(|t| t.join().unwrap()).count();
        assert_eq!(winners, 1, "exactly one mark_dead makes the transition");

        let last = health.cause().expect("dead after both joined");
        assert!(last == Cause::PeerClosed || last == Cause::Local);
        if let Some(seen) = &seen {
            assert_eq!(
                *seen,
                AcquireError::Dead(last),
                "cause changed or went missing"
            );
        }
        // Outcome: (what the observer saw, the winning cause).
        (format!("{seen:?}"), format!("{last:?}"))
    });
}

/// The `on_close` callback fires exactly once, on the first transition out of open, however its
/// registration races with `mark_draining` and `mark_dead`.
#[test]
fn on_close_fires_exactly_once() {
    explore("on_close_fires_exactly_once", 2, || {
        let health = ConnHealth::new();
        let fired = LoomArc::new(AtomicUsize::new(0));
        let drainer = {
            let health = health.clone();
            thread::spawn(move || health.mark_draining())
        };
        let killer = {
            let health = health.clone();
            thread::spawn(move || health.mark_dead(Cause::PeerClosed))
        };
        let counter = fired.clone();
        let with = std::sync::Arc::new(std::sync::Mutex::new(None));
        let record = with.clone();
        assert!(
            health
                .on_close(move |status| {
                    assert_ne!(status, Status::Open);
                    counter.fetch_add(1, Ordering::Relaxed);
                    *record.lock().unwrap() = Some(format!("{status:?}"));
                })
                .is_ok()
        );
        drainer.join().unwrap();
        killer.join().unwrap();
        assert_eq!(fired.load(Ordering::Relaxed), 1);
        // Outcome: the status the callback fired with (draining or dead first).
        with.lock().unwrap().take()
    });
}

/// Property 5: a thread that sees `in_flight() == 0` sees everything the holders of the leases
/// it counted did before dropping them (a pool may close the connection once it is drained).
/// The lease holder's write is a relaxed store, so only the lease's release decrement and
/// `in_flight`'s acquire load can order it: weakening either makes loom find a stale read.
#[test]
fn lease_work_is_visible_once_in_flight_is_zero() {
    explore("lease_work_is_visible_once_in_flight_is_zero", 2, || {
        let health = ConnHealth::new();
        let work = LoomArc::new(AtomicUsize::new(0));
        let lease = health.try_acquire().unwrap();
        let holder = {
            let work = work.clone();
            thread::spawn(move || {
                work.store(1, Ordering::Relaxed);
                drop(lease);
            })
        };
        let drained = health.in_flight() == 0;
        if drained {
            assert_eq!(
                work.load(Ordering::Relaxed),
                1,
                "drained, but the lease holder's work is not visible"
            );
        }
        holder.join().unwrap();
        // Outcome: whether the main thread saw the lease released.
        drained
    });
}

/// Model 5b on `mark_dead` or `mark_draining` (by `close`): a caller whose transition counted 0
/// leases in flight sees what the holder did before releasing its lease. Returns the count.
fn lease_work_is_visible_once_counted_zero(close: fn(&ConnHealth) -> Option<usize>) -> usize {
    let health = ConnHealth::new();
    let work = LoomArc::new(AtomicUsize::new(0));
    let lease = health.try_acquire().unwrap();
    let holder = {
        let work = work.clone();
        thread::spawn(move || {
            work.store(1, Ordering::Relaxed);
            drop(lease);
        })
    };
    let counted = close(&health).expect("the only transition");
    if counted == 0 {
        assert_eq!(
            work.load(Ordering::Relaxed),
            1,
            "counted no lease in flight, but the lease holder's work is not visible"
        );
    }
    holder.join().unwrap();
    counted
}

/// Property 5b: `mark_dead` returns the leases in flight; a caller that is told 0 (and closes
/// the connection) sees the work of every lease holder, as with `in_flight() == 0`. Fails
/// with `mark_dead`'s `fetch_or` Release (no Acquire half). Outcomes: 0 and 1 counted.
#[test]
fn lease_work_is_visible_once_mark_dead_counts_zero() {
    explore(
        "lease_work_is_visible_once_mark_dead_counts_zero",
        2,
        || lease_work_is_visible_once_counted_zero(|h| h.mark_dead(Cause::Local)),
    );
}

/// Property 5c: the same for `mark_draining` (fails with its `fetch_or` Relaxed).
#[test]
fn lease_work_is_visible_once_mark_draining_counts_zero() {
    explore(
        "lease_work_is_visible_once_mark_draining_counts_zero",
        2,
        || lease_work_is_visible_once_counted_zero(ConnHealth::mark_draining),
    );
}

/// The split design: a separate `dead` flag and a lease counter; acquire checks the flag, then
/// increments. Even with `SeqCst` everywhere, a lease can be granted after `mark_dead` read the
/// counter.
struct Split {
    dead: AtomicBool,
    count: AtomicUsize,
}

impl Split {
    fn try_acquire(&self) -> bool {
        if self.dead.load(Ordering::SeqCst) {
            return false;
        }
        self.count.fetch_add(1, Ordering::SeqCst);
        true
    }

    fn mark_dead(&self) -> usize {
        self.dead.store(true, Ordering::SeqCst);
        self.count.load(Ordering::SeqCst)
    }
}

/// Property 4 (negative control): the same check as `leases_are_counted_or_refused`, on the
/// split design. loom finds the interleaving (acquirer reads `dead == false`; `mark_dead` sets
/// it and reads count 0; acquirer increments), so this test is expected to panic.
#[test]
#[should_panic(expected = "split design: lease admitted behind mark_dead")]
fn split_design_admits_after_death() {
    loom::model(|| {
        let split = LoomArc::new(Split {
            dead: AtomicBool::new(false),
            count: AtomicUsize::new(0),
        });
        let acquirer = {
            let split = split.clone();
            thread::spawn(move || split.try_acquire())
        };
        let observed = split.mark_dead();
        let granted = usize::from(acquirer.join().unwrap());
        assert!(
            granted <= observed,
            "split design: lease admitted behind mark_dead ({granted} granted, {observed} seen)"
        );
    });
}

/// A waker that counts its wakes in a loom atomic (the `Waker` is `std`'s, built from it).
struct CountingWaker(AtomicUsize);

impl std::task::Wake for CountingWaker {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// One connection task parks while another thread marks the connection dead; `park` is the
/// real one, or the negative control that checks the death outside the lock.
fn park_against_death(check_outside: bool) -> (bool, usize) {
    use shared_headers::conn::park::Parked;
    let health = ConnHealth::new();
    let parked = LoomArc::new(Parked::new());
    {
        let parked = parked.clone();
        shared_headers::conn::park::on_close_wake(&health, move || parked.wake());
    }
    // The connection's wake-up has its own slot: the user's stays free.
    assert!(health.on_close(|_| {}).is_ok());
    let count = std::sync::Arc::new(CountingWaker(AtomicUsize::new(0)));
    let waker = std::task::Waker::from(count.clone());
    let killer = {
        let health = health.clone();
        thread::spawn(move || {
            health.mark_dead(Cause::HealthCheck);
        })
    };
    let is_parked = if check_outside {
        parked.park_checking_outside_the_lock(&health, &waker)
    } else {
        parked.park(&health, &waker)
    };
    killer.join().unwrap();
    (is_parked, count.0.load(Ordering::SeqCst))
}

/// Property 7 (the connector's I/O, `conn::HealthIo`): a connection task that parks its waker
/// while another thread marks the connection dead either sees the death (nothing parked) or
/// is woken exactly once: no lost wakeup, so a task waiting on a silent socket fails its I/O
/// at once. Outcomes: (saw dead, 0 wakes) and (parked, 1 wake).
#[test]
fn a_parked_reader_is_woken_by_death() {
    let seen = explore("a_parked_reader_is_woken_by_death", 2, || {
        let (is_parked, wakes) = park_against_death(false);
        assert!(
            (is_parked && wakes == 1) || (!is_parked && wakes == 0),
            "lost or double wakeup: parked {is_parked}, {wakes} wakes"
        );
        (is_parked, wakes)
    });
    assert!(seen.contains(&(true, 1)) && seen.contains(&(false, 0)));
}

/// Negative control of property 7: checking the death before taking the slot's lock lets the
/// death's wake find the slot empty and the waker be parked after it (parked, 0 wakes): a task
/// asleep on a dead connection. loom finds it, so this test is expected to panic.
#[test]
#[should_panic(expected = "lost wakeup")]
fn park_check_outside_the_lock_loses_the_wakeup() {
    loom::model(|| {
        let (is_parked, wakes) = park_against_death(true);
        assert!(
            !is_parked || wakes == 1,
            "lost wakeup: parked, {wakes} wakes"
        );
    });
}

/// The connection task parks (`Parked::park_cached`), finds its connection alive at its next
/// poll and parks again: the second time its own copy of the waker wakes the same task, so
/// nothing is locked. Another thread marks the connection dead meanwhile. The outcome: 0 the
/// first park saw the death, 1 the next poll saw it, 2 parked twice; and the wakes counted.
/// `bogus_copy`, the negative control: the task's copy is of a waker the slot never took.
fn cached_park_against_death(bogus_copy: bool) -> (u8, usize) {
    use shared_headers::conn::park::Parked;
    let health = ConnHealth::new();
    let parked = LoomArc::new(Parked::new());
    {
        let parked = parked.clone();
        shared_headers::conn::park::on_close_wake(&health, move || parked.wake());
    }
    let count = std::sync::Arc::new(CountingWaker(AtomicUsize::new(0)));
    let waker = std::task::Waker::from(count.clone());
    let killer = {
        let health = health.clone();
        thread::spawn(move || {
            health.mark_dead(Cause::HealthCheck);
        })
    };
    let mut last = bogus_copy.then(|| waker.clone());
    let outcome = if !parked.park_cached(&health, &waker, &mut last) {
        0
    } else if health.cause().is_some() {
        1
    } else {
        assert!(parked.park_cached(&health, &waker, &mut last));
        2
    };
    killer.join().unwrap();
    (outcome, count.0.load(Ordering::SeqCst))
}

/// Property 8 (the connector's I/O parking again with the same waker, no lock taken): a task
/// that parked is woken exactly once by the death, whether it saw the death at its next poll
/// or parked again on its own copy of the waker; a task whose first park saw the death is not
/// woken. Outcomes: (0, 0), (1, 1), (2, 1).
#[test]
fn a_cached_park_is_woken_by_death() {
    let seen = explore("a_cached_park_is_woken_by_death", 3, || {
        let (outcome, wakes) = cached_park_against_death(false);
        assert!(
            (outcome == 0 && wakes == 0) || (outcome > 0 && wakes == 1),
            "lost or double wakeup: outcome {outcome}, {wakes} wakes"
        );
        (outcome, wakes)
    });
    assert!(seen.contains(&(0, 0)) && seen.contains(&(1, 1)) && seen.contains(&(2, 1)));
}

/// Negative control of property 8: a copy of a waker the slot never took makes the task skip
/// the park, and the death's wake finds the slot empty (parked, 0 wakes). loom finds it, so
/// this test is expected to panic.
#[test]
#[should_panic(expected = "lost wakeup")]
fn a_cache_of_an_unparked_waker_loses_the_wakeup() {
    loom::model(|| {
        let (outcome, wakes) = cached_park_against_death(true);
        assert!(outcome == 0 || wakes == 1, "lost wakeup: {wakes} wakes");
    });
}
