//! loom models of the admission limiter's permit protocol (`server::admission::limiter`).
//!
//! Run with `RUSTFLAGS="--cfg shared_headers_loom" cargo test --release -p
//! shared-headers-loom-tests --test admission`.
//!
//! The protocol: a request takes a permit lock-free only while nobody is queued; a waiter, under
//! the queue's lock, enters the queue, counts itself in `queued`, then dispatches; a release
//! returns its permit to `available`, then dispatches under the lock if `queued` is not 0. Each
//! side writes its word and then reads the other's (`SeqCst`), so at least one of them sees the
//! other and hands the permit over.
//!
//! Properties proved (every interleaving, preemption bound from `LOOM_MAX_PREEMPTIONS`):
//! 1. no waiter is left waiting while a permit is free, and no permit is lost or made: the
//!    permits held plus the permits free are the limit, whatever the order of a release, a
//!    waiter entering the queue and a newcomer taking a permit lock-free;
//! 2. a waiter is woken (loom fails the model on a lost wake-up: `block_on` never returns), and
//!    a waiter whose caller hangs up leaves the queue, passing on a permit handed to it and
//!    never used.
//!
//! The negative control is `Limiter::broken`: a release that reads `queued` before it returns
//! its permit. loom finds the interleaving where the release reads 0, the waiter enters and finds
//! no permit, then the permit is returned: the waiter waits forever with the permit free.
#![cfg(shared_headers_loom)]

use std::future::poll_fn;
use std::sync::Arc;

use loom::future::block_on;
use loom::thread;
use shared_headers::server::admission::limiter::{
    GONE, GRANTED, Limiter, SHED, Verdict, WAITING, Waiter,
};
use shared_headers_loom_tests::explore;

// The distinct outcomes each model reaches under `LOOM_MAX_PREEMPTIONS=2` (see `explore`).
const MIN_HANDOFF: usize = 3;
const MIN_WOKEN: usize = 2;

fn grant(_: &Waiter) -> Verdict {
    Verdict::Grant
}

/// How a request got (or did not get) its permit, for the outcome sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Got {
    /// Lock-free, at arrival.
    Fast,
    /// Queued, then granted (by its own dispatch or by a release).
    Granted,
    /// Queued, still waiting.
    Waiting,
    /// No permit and not queued (a newcomer that only tries).
    None,
}

fn got_of(state: usize) -> Got {
    match state {
        GRANTED => Got::Granted,
        WAITING => Got::Waiting,
        other => panic!("unexpected waiter state {other}"),
    }
}

/// Model 1 on `limiter` (a limit of 1, the permit held by the main thread): one thread arrives
/// (a permit lock-free, else it queues), one releases the held permit, and a newcomer tries for
/// a permit lock-free. Checks the forbidden outcome (a waiter waiting with a permit free) and
/// that permits are conserved. Returns (the arriving request's, the newcomer's) outcome.
fn handoff(limiter: Limiter) -> (Got, Got) {
    let limiter = Arc::new(limiter);
    assert!(limiter.try_acquire());
    let arriving = {
        let limiter = limiter.clone();
        thread::spawn(move || {
            if limiter.try_acquire() {
                (Got::Fast, None)
            } else {
                let waiter = limiter.enqueue(10, None, 0, false, &grant);
                (got_of(waiter.state()), Some(waiter))
            }
        })
    };
    let releasing = {
        let limiter = limiter.clone();
        thread::spawn(move || limiter.release(&grant))
    };
    let newcomer = if limiter.try_acquire() {
        Got::Fast
    } else {
        Got::None
    };
    releasing.join().unwrap();
    let (_, waiter) = arriving.join().unwrap();
    let arrived = match &waiter {
        Some(waiter) => got_of(waiter.state()),
        None => Got::Fast,
    };
    let (free, queued) = limiter.counts();
    assert!(
        !(arrived == Got::Waiting && free > 0),
        "waiter left waiting with a permit free ({free} free, {queued} queued, newcomer {newcomer:?})"
    );
    let held = usize::from(arrived == Got::Fast || arrived == Got::Granted)
        + usize::from(newcomer == Got::Fast);
    assert_eq!(
        held + free,
        1,
        "permit lost or made: {held} held, {free} free"
    );
    assert_eq!(queued, usize::from(arrived == Got::Waiting));
    (arrived, newcomer)
}

/// Property 1: a released permit reaches the waiter (or a newcomer, when nobody was queued yet:
/// then the waiter waits with no permit free, which is allowed), and permits are conserved.
/// Outcomes: the arriving request fast, granted, or waiting behind the newcomer's permit.
#[test]
fn a_released_permit_reaches_the_waiter() {
    let seen = explore("a_released_permit_reaches_the_waiter", MIN_HANDOFF, || {
        handoff(Limiter::new(1))
    });
    assert!(
        seen.contains(&(Got::Granted, Got::None)),
        "the handoff by a release was never reached: {seen:?}"
    );
}

/// Property 1 (negative control): the release that reads `queued` before returning its permit
/// strands the waiter with the permit free. Expected to fail.
#[test]
#[should_panic(expected = "waiter left waiting with a permit free")]
fn negative_control_release_reading_queued_first_strands_the_waiter() {
    loom::model(|| {
        handoff(Limiter::broken(1));
    });
}

/// Property 2: a waiter is woken when it is granted or shed (`block_on` returns: loom fails
/// the model on a lost wake-up), and one whose caller hangs up (`leave`) leaves at once; a
/// permit handed to it and never used goes on to the next waiter or back to the free count.
/// The judge sheds slot 7 (a doomed waiter: it never gets a permit). At the end nothing is
/// queued and the permit is free. Outcome: (the doomed waiter's state when its caller hung up,
/// the woken waiter's state).
#[test]
fn a_waiter_is_woken_or_leaves() {
    explore("a_waiter_is_woken_or_leaves", MIN_WOKEN, || {
        let limiter = Arc::new(Limiter::new(1));
        assert!(limiter.try_acquire());
        let judge = |w: &Waiter| {
            if w.route == 7 {
                Verdict::Shed
            } else {
                Verdict::Grant
            }
        };
        let woken = {
            let limiter = limiter.clone();
            thread::spawn(move || {
                let waiter = limiter.enqueue(20, None, 0, false, &judge);
                let state = block_on(poll_fn(|cx| waiter.poll(cx)));
                assert_eq!(state, GRANTED, "only the doomed waiter is shed");
                limiter.release(&judge);
                state
            })
        };
        let hung_up = {
            let limiter = limiter.clone();
            thread::spawn(move || {
                let waiter = limiter.enqueue(10, None, 7, false, &judge);
                let before = waiter.state();
                limiter.leave(&waiter, &judge);
                assert_eq!(waiter.state(), GONE);
                before
            })
        };
        limiter.release(&judge);
        let state = woken.join().unwrap();
        let before = hung_up.join().unwrap();
        assert!(
            before == WAITING || before == SHED,
            "doomed waiter got {before}"
        );
        assert_eq!(
            limiter.counts(),
            (1, 0),
            "a permit lost or a waiter left queued"
        );
        (before, state)
    });
}
