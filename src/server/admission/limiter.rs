//! The in-flight limit: permits taken without a lock while nobody waits; waiters kept in
//! deadline order (earliest first) and handed each released permit, the doomed among them
//! shed (within the cap) or served after a waiter behind them that can still finish in time.
//! The protocol, and why no permit is lost and no waiter forgotten:
//!
//! * a request takes a permit lock-free (`in_flight` below the limit) only when nobody is queued (`queued`
//!   is 0), so a waiter is never overtaken by a newcomer;
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
//! `--cfg shared_headers_loom`, the only build where this module is `pub`).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use crate::sync::{AtomicBool, AtomicUsize, Mutex, Ordering, fence};

/// Waiting in the queue.
pub const WAITING: usize = 0;
/// A permit was handed to the waiter.
pub const GRANTED: usize = 1;
/// Shed: its deadline cannot be met; answer it now.
pub const SHED: usize = 2;
/// The waiter's future is gone.
pub const GONE: usize = 4;
/// Its deadline passed while it waited: out of the queue, uncounted; the deadline's timer
/// answers it (a timeout, once).
pub const EXPIRED: usize = 8;

/// How many waiters past a spared one dispatch looks at for one that can finish in time.
pub const LOOK_AHEAD: usize = 16;

/// The longest answer taken as free of queueing, in nanoseconds, for a route whose
/// no-load duration is `floor`: a quarter as long again, and 2 ms of scheduling noise (the
/// delay target, as CoDel's). A quarter, not a half: a handler that takes `c` at a time,
/// given `c + 1`, delays the answers by about `1 / c` of the floor on average; a half let a
/// limit of 3 or 4 stand on a handler that takes 2.
pub fn tolerated(floor: u64) -> u64 {
    floor + floor / 4 + 2_000_000
}

/// What an answer tells the limit and the route's floor ([`Limiter::lesson`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lesson {
    /// It ran alone: its duration is the route's no-load duration (the floor follows it,
    /// up as well as down: a route that got slower is followed), and the limit may grow
    /// from it when binding ([`Limiter::adapt`]).
    Alone,
    /// The limit held nothing back and the answer was not slow: the floor may drift up.
    Calm,
    /// The limit is binding, or the answer was slow: [`Limiter::adapt`].
    Limit,
}

/// What dispatch does with the earliest waiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Give it a permit.
    Grant,
    /// Shed it (state [`SHED`]).
    Shed,
    /// Its deadline passed: out of the queue (state [`EXPIRED`]), answered by its timer.
    Expire,
    /// Doomed but spared (the cap, or counted once already): the permit goes to the first
    /// of the next [`LOOK_AHEAD`] waiters that gets [`Grant`](Verdict::Grant), else to the
    /// first spared one. Never left waiting with a permit free.
    Spare,
}

/// One queued request.
#[derive(Debug)]
pub struct Waiter {
    state: AtomicUsize,
    waker: Mutex<Option<Waker>>,
    key: (u64, u64),
    /// When its caller stops waiting (`None`: no deadline, served after every deadline).
    pub deadline: Option<Instant>,
    /// Already counted as doomed (at arrival or by an earlier dispatch): counted once.
    pub counted: AtomicBool,
    /// Its route's hash.
    pub route: u64,
}

impl Waiter {
    /// The waiter's state.
    pub fn state(&self) -> usize {
        self.state.load(Ordering::SeqCst)
    }

    fn set(&self, state: usize) {
        self.state.store(state, Ordering::SeqCst);
        let waker = self.waker.lock().take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// The state once it is decided (not [`WAITING`]); else registers `cx`'s waker and looks
    /// again.
    pub fn poll(&self, cx: &mut Context<'_>) -> Poll<usize> {
        let decided = |s: usize| s != WAITING;
        let state = self.state();
        if decided(state) {
            return Poll::Ready(state);
        }
        {
            let mut slot = self.waker.lock();
            match &*slot {
                Some(current) if current.will_wake(cx.waker()) => {}
                _ => *slot = Some(cx.waker().clone()),
            }
        }
        let state = self.state();
        if decided(state) {
            Poll::Ready(state)
        } else {
            Poll::Pending
        }
    }
}

#[derive(Debug, Default)]
struct Queue {
    waiters: BTreeMap<(u64, u64), Arc<Waiter>>,
    seq: u64,
}

/// The in-flight limit and its deadline-ordered queue.
#[derive(Debug)]
pub struct Limiter {
    /// Requests holding a permit.
    in_flight: AtomicUsize,
    /// The limit now, in 1/256 of a permit (at least one permit, at most `ceiling`): moved
    /// by [`Limiter::adapt`] (loads and stores: a racing update is lost, as a step of the
    /// estimate is; any value is a valid limit).
    limit: AtomicUsize,
    /// The most permits: the user's limit.
    ceiling: usize,
    /// Whether the limit ever decreased (a queue seen): until then the limit grows by a
    /// permit an answer (TCP's slow start), after it by a permit a limit's worth of answers.
    settled: AtomicBool,
    queued: AtomicUsize,
    queue: Mutex<Queue>,
    /// The negative control of the loom model: read `queued` before returning the permit.
    #[cfg(shared_headers_loom)]
    broken: bool,
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
            #[cfg(shared_headers_loom)]
            broken: false,
        }
    }

    /// A limit that starts at `start` permits and adapts up to `ceiling`.
    pub fn starting_at(ceiling: usize, start: usize) -> Limiter {
        let limiter = Limiter::new(ceiling);
        limiter
            .limit
            .store(start.clamp(1, limiter.ceiling) << 8, Ordering::Relaxed);
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
        self.take_load() != 0
    }

    /// A permit if one is free: the requests in flight with it (0: none taken).
    #[inline]
    fn take_load(&self) -> usize {
        let limit = self.limit();
        match self
            .in_flight
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < limit).then_some(n + 1)
            }) {
            Ok(n) => n + 1,
            Err(_) => 0,
        }
    }

    /// One answer of `took` nanoseconds on a route whose no-load duration is `floor` (0:
    /// unknown), `low` the least of the route's recent answers (this one's window and the
    /// one before, [`Slot::low`](super::estimate::Slot::low)): the limit follows (a
    /// delay-based limit, as TCP Vegas and Netflix's `concurrency-limits` `VegasLimit`, on
    /// the recent minimum as Vegas's and BBR's min-RTT). A queue in the handler (past the
    /// permits, where admission cannot see) delays every answer, so it shows as the recent
    /// minimum well above the floor; a route whose answers merely vary (some slow, some
    /// fast, none queued) keeps fast answers in every window and is never read as queueing.
    /// Then the limit moves an eighth of the way to what Little's law says keeps the
    /// answers within the tolerance (in flight × tolerated ÷ low), at most halving; an
    /// answer near the floor (a quarter above it, and 1 ms) of a request that took its permit
    /// with the limit binding (`load`: the requests in flight then, itself included, within
    /// one of the limit; a waiter: every permit taken) grows it by one permit per limit's
    /// worth of answers (additive increase; one per answer until the first decrease, as
    /// TCP's slow start). Only such an answer shows that the handler serves a limit's worth
    /// at once without a queue: a fast answer of a request that started with fewer in
    /// flight (the first answers on a fresh server, before the others queued in the
    /// handler) says nothing of the limit, and grew it past the handler's capacity.
    /// Between the two, nothing moves.
    #[cold]
    #[inline(never)]
    pub fn adapt(&self, took: u64, floor: u64, low: u64, load: usize) {
        if floor == 0 {
            return;
        }
        let tolerated = tolerated(floor);
        let limit = self.limit.load(Ordering::Relaxed);
        let next = if low > tolerated {
            let in_flight = self.in_flight.load(Ordering::Relaxed).max(1) as u64;
            let target = ((in_flight * tolerated) << 8) / low.max(1);
            let target = (target as usize).max(limit / 2);
            if !self.settled.load(Ordering::Relaxed) {
                self.settled.store(true, Ordering::Relaxed);
            }
            if target >= limit {
                return;
            }
            limit - (limit - target) / 8 - 1
        } else if took <= floor + floor / 4 + 1_000_000 && load + 1 >= limit >> 8 {
            if self.settled.load(Ordering::Relaxed) {
                limit + (65536 / limit.max(1)).max(1)
            } else {
                limit + 256
            }
        } else {
            return;
        };
        let next = next.clamp(256, self.ceiling << 8);
        if next != limit {
            self.limit.store(next, Ordering::Relaxed);
        }
    }

    /// Whether the limit has seen a queue (a decrease): until then it is a guess (slow
    /// start), and a full queue refuses nobody.
    #[inline]
    pub fn settled(&self) -> bool {
        self.settled.load(Ordering::Relaxed)
    }

    /// What an answer of `took` on a route whose no-load duration is `floor` (not 0) tells,
    /// before its permit goes back: a few loads, the common cases decided inline.
    #[inline]
    pub fn lesson(&self, took: u64, floor: u64, load: usize) -> Lesson {
        let in_flight = self.in_flight.load(Ordering::Relaxed);
        let limit = self.limit();
        // It ran alone: nothing else in flight when it took its permit nor now (a limit of
        // one: nothing else in flight at all), however long it took.
        if in_flight == 1 && (load == 1 || limit <= 1) {
            return Lesson::Alone;
        }
        let binding = in_flight + 1 >= limit || self.queued.load(Ordering::Relaxed) > 0;
        if binding || took > tolerated(floor) {
            Lesson::Limit
        } else {
            Lesson::Calm
        }
    }

    /// A permit now, without a lock, if one is free and nobody waits.
    #[cfg(any(test, shared_headers_loom))]
    pub fn try_acquire(&self) -> bool {
        self.try_acquire_load() != 0
    }

    /// [`Limiter::try_acquire`]: the requests in flight with the permit taken (0: none).
    #[inline]
    pub fn try_acquire_load(&self) -> usize {
        if self.queued.load(Ordering::SeqCst) == 0 {
            self.take_load()
        } else {
            0
        }
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
    pub fn release(&self, judge: &dyn Fn(&Waiter) -> Verdict) {
        #[cfg(shared_headers_loom)]
        if self.broken {
            let queued = self.queued.load(Ordering::SeqCst);
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            if queued > 0 {
                self.dispatch(&mut self.queue.lock(), judge);
            }
            return;
        }
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        // The write of `in_flight` before the read of `queued`: see the module docs.
        fence(Ordering::SeqCst);
        if self.queued.load(Ordering::SeqCst) > 0 {
            self.dispatch(&mut self.queue.lock(), judge);
        }
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
