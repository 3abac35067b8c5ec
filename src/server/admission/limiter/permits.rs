//! The [`Limiter`] and its protocol: a permit taken without a lock, a waiter queued, a permit
//! released and handed on by dispatch, a waiter that leaves. It decides who gets a freed
//! permit: the waiters in deadline order, each judged by the caller's judge ([`Verdict`]).
//! It relies on [`queue`](super::queue) (what the queue's lock guards) and
//! [`waiter`](super::waiter) (a waiter's states and wake-up), and holds the probe's state
//! ([`probe`](super::probe)) for the rules that add their methods from above
//! ([`adapt`](super::adapt), [`slow_start`](super::slow_start), [`overload`](super::overload)).
//!
//! The protocol, and why no permit is lost and no waiter forgotten:
//!
//! * a request takes a permit lock-free (`in_flight` below the limit) only when nobody is queued
//!   (`queued` is 0), so a waiter is never overtaken by a newcomer;
//! * a waiter, under the queue's lock, enters the queue, counts itself in `queued`, then
//!   dispatches (takes a permit if one is free);
//! * a release returns its permit (`in_flight` down), then dispatches under the lock if
//!   `queued` is not 0.
//!
//! Both sides write their counter, then read the other's, with a `SeqCst` fence between
//! (the store-buffering pattern): at least one of them sees the other, so a permit released
//! while a waiter enters the queue is dispatched by one of the two. `SeqCst` on the accesses
//! alone would be enough in the C++ memory model, but loom checks the pattern only with the
//! fences (it treats `SeqCst` accesses as `AcqRel`, a documented limit: without the fences its
//! model reports the stranded waiter), and the fence costs one instruction on a release, on
//! the limited path only. The loom world's negative control is `Limiter::broken` (a release that
//! reads `queued` before it returns the permit: the waiter can be left waiting with the permit
//! free); the models that drive both are in `loom-tests/tests/admission.rs` (built with
//! `--cfg shared_headers_loom`, the only build where `limiter` is `pub`).

use std::ops::Bound;
use std::sync::Arc;
use std::time::Instant;

use super::probe::Probe;
use super::queue::Queue;
use super::waiter::{EXPIRED, GONE, GRANTED, LOOK_AHEAD, SHED, Verdict, WAITING, Waiter};
use crate::sync::{AtomicBool, AtomicUsize, Mutex, Ordering, fence};

/// The in-flight limit and its deadline-ordered queue.
#[derive(Debug)]
pub struct Limiter {
    /// Requests holding a permit.
    pub(super) in_flight: AtomicUsize,
    /// The limit now, in 1/256 of a permit (at least one permit, at most `ceiling`): moved
    /// by [`Limiter::adapt`] (loads and stores: a racing update is lost, as a step of the
    /// estimate is; any value is a valid limit).
    pub(super) limit: AtomicUsize,
    /// The most permits: the user's limit.
    pub(super) ceiling: usize,
    /// Whether the limit ever decreased (a queue seen): until then the limit grows by a
    /// permit an answer (TCP's slow start), after it by a permit a limit's worth of answers.
    pub(super) settled: AtomicBool,
    pub(super) queued: AtomicUsize,
    pub(super) queue: Mutex<Queue>,
    /// The probe of the settled limit ([`Probe`]): under its own lock, taken by binding
    /// answers with `try_lock` (an answer that finds it held is not counted, as a lost step
    /// of the estimate): no atomic word of its own.
    pub(super) probe: Mutex<Probe>,
    /// The negative control of the loom model: read `queued` before returning the permit.
    #[cfg(shared_headers_loom)]
    pub(super) broken: bool,
}

impl Limiter {
    /// A limit of `permits` requests in flight (at first; [`Limiter::adapt`] moves it
    /// between 1 and `permits`).
    pub fn new(permits: usize) -> Limiter {
        let permits = permits.clamp(1, usize::MAX >> 9);
        Limiter {
            in_flight: AtomicUsize::new(0),
            limit: AtomicUsize::new(permits << 8),
            ceiling: permits,
            settled: AtomicBool::new(false),
            queued: AtomicUsize::new(0),
            queue: Mutex::new(Queue::default()),
            probe: Mutex::new(Probe {
                round: permits,
                ..Probe::default()
            }),
            #[cfg(shared_headers_loom)]
            broken: false,
        }
    }

    /// A limit that starts at `start` permits and adapts up to `ceiling`.
    pub fn starting_at(ceiling: usize, start: usize) -> Limiter {
        let limiter = Limiter::new(ceiling);
        let start = start.clamp(1, limiter.ceiling);
        limiter.limit.store(start << 8, Ordering::Relaxed);
        limiter.probe.lock().round = start;
        limiter
    }

    /// The negative control (loom only).
    #[cfg(shared_headers_loom)]
    pub fn broken(permits: usize) -> Limiter {
        Limiter {
            broken: true,
            ..Limiter::new(permits)
        }
    }

    /// Permits free now, and requests queued now (for the handle).
    pub fn counts(&self) -> (usize, usize) {
        (
            self.limit()
                .saturating_sub(self.in_flight.load(Ordering::Relaxed)),
            self.queued.load(Ordering::Relaxed),
        )
    }

    /// The limit now, in permits (at least 1).
    #[inline]
    pub fn limit(&self) -> usize {
        self.limit.load(Ordering::Relaxed) >> 8
    }

    fn take(&self) -> bool {
        self.take_before().is_some()
    }

    /// A permit if one is free: the requests in flight before it (`None`: none taken).
    #[inline]
    fn take_before(&self) -> Option<usize> {
        let limit = self.limit();
        self.in_flight
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()
    }

    /// Whether the limit has seen a queue (a decrease): until then it is a guess (slow
    /// start), and a full queue refuses nobody.
    #[inline]
    pub fn settled(&self) -> bool {
        self.settled.load(Ordering::Relaxed)
    }

    /// A permit now, without a lock, if one is free and nobody waits.
    #[cfg(any(test, shared_headers_loom))]
    pub fn try_acquire(&self) -> bool {
        self.try_acquire_before().is_some()
    }

    /// `Limiter::try_acquire`: the requests in flight before the permit taken (`None`: none
    /// taken).
    #[inline]
    pub fn try_acquire_before(&self) -> Option<usize> {
        if self.queued.load(Ordering::SeqCst) == 0 {
            self.take_before()
        } else {
            None
        }
    }

    /// Requests holding a permit now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Queues a request with `key` (its deadline's order: smaller first) and dispatches;
    /// `counted`: already counted as doomed at arrival.
    pub fn enqueue(
        &self,
        key: u64,
        deadline: Option<Instant>,
        route: u64,
        counted: bool,
        judge: &dyn Fn(&Waiter) -> Verdict,
    ) -> Arc<Waiter> {
        let mut queue = self.queue.lock();
        let seq = queue.seq;
        queue.seq = seq.wrapping_add(1);
        let waiter = Arc::new(Waiter {
            state: AtomicUsize::new(WAITING),
            waker: Mutex::new(None),
            key: (key, seq),
            deadline,
            counted: AtomicBool::new(counted),
            route,
            since: Instant::now(),
        });
        queue.waiters.insert(waiter.key, waiter.clone());
        self.queued.fetch_add(1, Ordering::SeqCst);
        // The write of `queued` before the read of `in_flight` (in `dispatch`): see the module
        // docs.
        fence(Ordering::SeqCst);
        self.dispatch(&mut queue, judge);
        waiter
    }

    /// Returns a permit; hands it to the earliest waiter that can still make its deadline.
    /// (The models' and tests' entry: admission calls its two halves.)
    #[cfg(any(test, shared_headers_loom))]
    pub fn release(&self, judge: &dyn Fn(&Waiter) -> Verdict) {
        if self.give_back() {
            self.hand_on(judge);
        }
    }

    /// [`Limiter::release`]'s first half, inline (no lock, no judge): the permit returned;
    /// whether anyone is queued, when the caller must [`hand_on`](Limiter::hand_on).
    #[inline]
    pub fn give_back(&self) -> bool {
        #[cfg(shared_headers_loom)]
        if self.broken {
            let queued = self.queued.load(Ordering::SeqCst);
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            return queued > 0;
        }
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        // The write of `in_flight` before the read of `queued`: see the module docs.
        fence(Ordering::SeqCst);
        self.queued.load(Ordering::SeqCst) > 0
    }

    /// [`Limiter::release`]'s second half, when someone is queued: dispatch under the lock
    /// (out of line: the path with a queue only).
    #[cold]
    #[inline(never)]
    pub fn hand_on(&self, judge: &dyn Fn(&Waiter) -> Verdict) {
        self.dispatch(&mut self.queue.lock(), judge);
    }

    /// A waiter's future is gone: it leaves the queue now; a permit handed to it and never
    /// used goes on to the next waiter.
    pub fn leave(&self, waiter: &Waiter, judge: &dyn Fn(&Waiter) -> Verdict) {
        let mut queue = self.queue.lock();
        match waiter.state.swap(GONE, Ordering::SeqCst) {
            WAITING => {
                queue.waiters.remove(&waiter.key);
                self.queued.fetch_sub(1, Ordering::SeqCst);
            }
            GRANTED => {
                self.in_flight.fetch_sub(1, Ordering::SeqCst);
                self.dispatch(&mut queue, judge);
            }
            _ => {}
        }
    }

    /// Under the queue's lock: while a permit is free, judges the waiters in deadline order,
    /// sheds those the judge sheds, and grants the first it grants; past a spared one it looks
    /// at most [`LOOK_AHEAD`] further, and grants the first spared one if none of those can
    /// finish in time. A permit is never left free while anyone waits.
    fn dispatch(&self, queue: &mut Queue, judge: &dyn Fn(&Waiter) -> Verdict) {
        while self.in_flight.load(Ordering::SeqCst) < self.limit() {
            let mut after = None;
            let mut spared = None;
            let mut looked = 0;
            let chosen = loop {
                let next = match after {
                    None => queue.waiters.first_key_value(),
                    Some(key) => queue
                        .waiters
                        .range((Bound::Excluded(key), Bound::Unbounded))
                        .next(),
                };
                let Some((&key, waiter)) = next else {
                    break spared;
                };
                let verdict = judge(waiter);
                match verdict {
                    Verdict::Grant => break Some(key),
                    Verdict::Shed | Verdict::Expire => {
                        if let Some(waiter) = queue.waiters.remove(&key) {
                            self.queued.fetch_sub(1, Ordering::SeqCst);
                            let state = if verdict == Verdict::Shed {
                                SHED
                            } else {
                                EXPIRED
                            };
                            waiter.set(state);
                        }
                    }
                    Verdict::Spare => {
                        spared = spared.or(Some(key));
                        after = Some(key);
                        looked += 1;
                        if looked > LOOK_AHEAD {
                            break spared;
                        }
                    }
                }
            };
            let Some(key) = chosen else { return };
            if !self.take() {
                return;
            }
            if let Some(waiter) = queue.waiters.remove(&key) {
                self.queued.fetch_sub(1, Ordering::SeqCst);
                let now = Instant::now();
                let sojourn = &mut queue.sojourn;
                sojourn.roll(now);
                let waited = now.saturating_duration_since(waiter.since).as_nanos();
                sojourn.cur = sojourn.cur.min(waited.min(u128::from(u64::MAX - 1)) as u64);
                waiter.set(GRANTED);
            }
        }
    }
}

#[cfg(all(test, not(shared_headers_loom)))]
mod tests {
    use super::*;

    fn grant(_: &Waiter) -> Verdict {
        Verdict::Grant
    }

    #[test]
    fn waiters_are_served_earliest_deadline_first() {
        let limiter = Limiter::new(1);
        assert!(limiter.try_acquire());
        let late = limiter.enqueue(30, None, 0, false, &grant);
        let early = limiter.enqueue(10, None, 0, false, &grant);
        let middle = limiter.enqueue(20, None, 0, false, &grant);
        assert!(
            !limiter.try_acquire(),
            "a newcomer never overtakes a waiter"
        );
        limiter.release(&grant);
        assert_eq!(early.state(), GRANTED);
        assert_eq!((middle.state(), late.state()), (WAITING, WAITING));
        limiter.leave(&middle, &grant); // hung up: gone at once
        assert_eq!(limiter.counts(), (0, 1));
        limiter.release(&grant);
        assert_eq!(late.state(), GRANTED);
    }

    #[test]
    fn the_doomed_get_no_permit_and_an_unused_grant_goes_on() {
        let limiter = Limiter::new(1);
        assert!(limiter.try_acquire());
        let doomed = limiter.enqueue(1, None, 7, false, &grant);
        let next = limiter.enqueue(2, None, 0, false, &grant);
        let judge = |w: &Waiter| {
            if w.route == 7 {
                Verdict::Shed
            } else {
                Verdict::Grant
            }
        };
        limiter.release(&judge);
        assert_eq!((doomed.state(), next.state()), (SHED, GRANTED));
        let after = limiter.enqueue(3, None, 0, false, &grant);
        limiter.leave(&next, &grant); // granted, dropped before it used the permit
        assert_eq!(after.state(), GRANTED);
        assert_eq!(limiter.counts(), (0, 0));
    }

    #[test]
    fn a_spared_waiter_runs_unless_one_behind_can_finish_in_time() {
        let limiter = Limiter::new(1);
        assert!(limiter.try_acquire());
        // Route 7 is doomed and spared by the cap.
        let judge = |w: &Waiter| {
            if w.route == 7 {
                Verdict::Spare
            } else {
                Verdict::Grant
            }
        };
        let spared = limiter.enqueue(1, None, 7, false, &judge);
        let spared_too = limiter.enqueue(2, None, 7, false, &judge);
        let feasible = limiter.enqueue(3, None, 0, false, &judge);
        limiter.release(&judge);
        assert_eq!(
            feasible.state(),
            GRANTED,
            "the permit to the one that can finish"
        );
        assert_eq!((spared.state(), spared_too.state()), (WAITING, WAITING));
        // Nobody behind can finish in time: the earliest spared one runs (never a permit
        // left free while anyone waits).
        limiter.release(&judge);
        assert_eq!((spared.state(), spared_too.state()), (GRANTED, WAITING));
        limiter.release(&judge);
        assert_eq!(spared_too.state(), GRANTED);
        assert_eq!(limiter.counts(), (0, 0));
    }
}
