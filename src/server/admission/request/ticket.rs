//! What the response future keeps ([`Ticket`]): the permit it holds or its place in the
//! queue; what it does when polled (waits for its permit, or answers a shed); and what the
//! answer does ([`Ticket::answered`]): the route learns its time to head, the limit follows
//! ([`Limiter::lesson`], [`Limiter::adapt`], the queue trimmed after slow start's cut), and
//! the permit goes back with the body ([`BodyPermit`]). Dropped unanswered: a cut by its
//! deadline teaches the route a lower bound, and a waiter whose caller hung up takes its
//! work back and leaves the queue.
//!
//! It relies on the estimate and the limiter, and on [`judge`](super::judge) for each permit
//! it gives back (the limiter's dispatch judges the waiters).

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::StatusCode;

use crate::server::admission::Shared;
use crate::server::admission::estimate::{self, Slot, home, nanos};
use crate::server::admission::limiter::{
    EXPIRED, GRANTED, Lesson, Limiter, SHED, WAITING, Waiter, tolerated,
};
use crate::sync::Ordering;

/// What admission decided for one request, kept by its response future: the permit it
/// holds (given back when the future is done or dropped) or its place in the queue.
pub(crate) struct Ticket {
    pub(super) shared: Option<Arc<Shared>>,
    /// Its route's hash (its slot: `slot_of`).
    pub(super) route: u64,
    /// Whether its handler was let run (polled).
    running: bool,
    pub(super) waiter: Option<Arc<Waiter>>,
    started: Instant,
    /// Its deadline (a cut at it teaches the route a lower bound; a hang-up teaches nothing).
    pub(super) deadline: Option<Instant>,
    /// Its wait for a permit, in nanoseconds.
    waited: u64,
    /// The requests in flight when it took its permit, itself included (a waiter: every
    /// permit was taken); 0 while it holds none (whether it holds one: one field, one test).
    pub(super) load: usize,
}

/// What the response future does with a request after its ticket is polled.
pub(crate) enum Admit {
    /// Poll the handler.
    Go,
    /// Shed while waiting: answer with this status.
    Shed(StatusCode),
}

impl Ticket {
    /// No admission.
    #[inline]
    pub(crate) fn none(started: Instant) -> Ticket {
        Ticket {
            shared: None,
            route: 0,
            running: false,
            waiter: None,
            started,
            deadline: None,
            waited: 0,
            load: 0,
        }
    }

    /// Ready when the request may be polled (at once without a queue), or when it was shed
    /// waiting.
    #[inline]
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Admit> {
        let Some(waiter) = &self.waiter else {
            self.running = true;
            return Poll::Ready(Admit::Go);
        };
        let state = match waiter.poll(cx) {
            // Its deadline passed in the queue: the deadline's timer answers it.
            Poll::Ready(EXPIRED) | Poll::Pending => return Poll::Pending,
            Poll::Ready(state) => state,
        };
        self.waiter = None;
        match state {
            GRANTED => {
                self.running = true;
                self.waited = nanos(self.started.elapsed());
                self.load = usize::MAX >> 1;
                Poll::Ready(Admit::Go)
            }
            SHED => {
                let status = self
                    .shared
                    .as_ref()
                    .map_or(StatusCode::SERVICE_UNAVAILABLE, |s| s.settings.status);
                Poll::Ready(Admit::Shed(status))
            }
            _ => {
                self.running = true;
                Poll::Ready(Admit::Go)
            }
        }
    }

    /// The handler answered after `latency` from the call: the route learns how long it
    /// took to its head (less its wait for a permit) and the limit follows; the permit, if
    /// it holds one, goes with the response's body ([`BodyPermit`]: back when the body is
    /// dropped).
    #[inline(always)]
    pub(crate) fn answered(&mut self, latency: Duration) -> Option<BodyPermit> {
        let shared = self.shared.take()?;
        // 0: no permit.
        let load = self.load;
        shared.answered(self.route, latency, self.waited, load);
        if load == 0 {
            return None;
        }
        Some(BodyPermit {
            shared,
            route: self.route,
            watch: watch::Watch::Idle,
        })
    }

    fn shared_release(&mut self, cut_short: bool) {
        let Some(shared) = self.shared.take() else {
            return;
        };
        let mut took = 0;
        // Started, then cut by its deadline: at least this long. (A hang-up, an error or a
        // panic teaches nothing: only answers and deadlines say how long a route takes.)
        let cut = cut_short
            && self.running
            && self
                .deadline
                .is_some_and(|d| Instant::now() + DEADLINE_SLACK >= d);
        if cut {
            let settings = &shared.settings;
            took = nanos(self.started.elapsed()).saturating_sub(self.waited);
            estimate::learn_at_least(
                &shared.table,
                self.route,
                took,
                settings.steps,
                settings.warm,
            );
        }
        if self.load != 0 {
            match cut {
                true => shared.release_permit(self.route, took, self.load),
                false => shared.release(),
            }
        }
    }
}

/// An answered request's permit, held by its response's body (the limit has followed the
/// answer's time to head): given back when the body is dropped, at its end, or once the
/// body has produced no frame for a while (its client stopped reading, or its handler has
/// nothing to send yet: [`watch`]).
pub(crate) struct BodyPermit {
    shared: Arc<Shared>,
    /// Its route's hash (how long the body may wait on its reader follows the route).
    route: u64,
    /// The stall watch, from the body's first frame short of its end.
    watch: watch::Watch,
}

impl Drop for BodyPermit {
    #[inline]
    fn drop(&mut self) {
        self.give_back();
    }
}

mod watch;

/// How near its deadline a request cut short counts as cut by it.
const DEADLINE_SLACK: Duration = Duration::from_millis(1);

impl Shared {
    /// Gives a permit back, the limit following an answer (or a deadline) of `took` on
    /// `route` (out of line: the limiter's path).
    #[inline(never)]
    fn release_permit(&self, route: u64, took: u64, load: usize) {
        self.lesson(route, took, load);
        self.release();
    }

    /// An answer of `route` after `latency` from the call, `waited` of it for a permit: the
    /// route learns, and the limit follows when it holds a permit (`load`: the requests in
    /// flight when it took it; 0: no permit). One call out of line; the route's slot looked
    /// up once when it is warm in its first (the hot path, which calls nothing but the
    /// limit's out-of-line steps, as tail calls); any other route out of line
    /// ([`Shared::answered_elsewhere`]).
    #[inline(never)]
    fn answered(&self, route: u64, latency: Duration, waited: u64, load: usize) {
        let took = nanos(latency).saturating_sub(waited);
        match estimate::learn_home(&self.table, route, took, self.settings.steps) {
            Some((slot, floor)) => {
                if load != 0 {
                    self.lesson_at(slot, floor, took, load);
                }
            }
            None => self.answered_elsewhere(route, took, load),
        }
    }

    /// [`Shared::answered`] of a route that is not warm in its first slot (out of line).
    #[cold]
    #[inline(never)]
    fn answered_elsewhere(&self, route: u64, took: u64, load: usize) {
        let settings = &self.settings;
        estimate::learn_elsewhere(&self.table, route, took, settings.steps, settings.warm);
        if load != 0 {
            self.lesson(route, took, load);
        }
    }

    /// The limit follows an answer (or a deadline) of `took` on `route`, its permit still
    /// held (out of line: the limiter's path).
    #[inline(never)]
    fn lesson(&self, route: u64, took: u64, load: usize) {
        let (slot, floor) = estimate::floor(&self.table, route);
        self.lesson_at(slot, floor, took, load);
    }

    /// [`Shared::lesson`] on `slot`, the route's, whose no-load duration is `floor`.
    #[inline(always)]
    fn lesson_at(&self, slot: &Slot, floor: u64, took: u64, load: usize) {
        if let Some(limiter) = &self.limiter {
            if floor != 0 {
                match limiter.lesson(took, floor, load) {
                    Lesson::Alone => slot.alone(took),
                    Lesson::AloneBinding => self.adapt_alone(limiter, slot, took, floor, load),
                    Lesson::Calm => slot.drift(floor),
                    Lesson::Limit => self.adapt(limiter, slot, took, floor, load),
                }
            }
        }
    }

    /// The limit follows a binding answer of `took` on `slot`'s route, whose no-load
    /// duration is `floor` ([`Limiter::adapt`]), and the queue is trimmed when slow start
    /// ended with a cut (out of line: the admitted path only calls it).
    #[cold]
    #[inline(never)]
    fn adapt(&self, limiter: &Limiter, slot: &Slot, took: u64, floor: u64, load: usize) {
        if limiter.adapt(took, floor, slot.low(took), load) {
            self.trim(limiter, floor);
        }
    }

    /// A binding answer of `took` that ran alone on `slot`'s route, whose no-load duration
    /// was `floor`: the new no-load duration ([`Slot::alone`]); past the old one's tolerance, the route got
    /// slower and the cuts made against the old one are undone ([`Limiter::relearned`]).
    #[cold]
    #[inline(never)]
    fn adapt_alone(&self, limiter: &Limiter, slot: &Slot, took: u64, floor: u64, load: usize) {
        slot.alone(took);
        if took > tolerated(floor) {
            limiter.relearned();
        }
        self.adapt(limiter, slot, took, took.max(1), load);
    }

    /// Slow start ended with a cut: in an overload, the waiters the requests let in above
    /// the new limit would delay past a service time are refused ([`Limiter::trim`]).
    #[cold]
    fn trim(&self, limiter: &Limiter, floor: u64) {
        let shed = limiter.trim(floor);
        if shed > 0 {
            self.counters
                .overloaded
                .fetch_add(shed as u64, Ordering::Relaxed);
        }
    }

    /// A waiter of `route` hung up: its work leaves the offered work (out of line).
    #[cold]
    fn withdraw(&self, limiter: &Limiter, route: u64) {
        let slot = home(&self.table, route);
        let floor = slot.floor(route);
        let need = estimate::need(&self.table, route).map(nanos);
        let least = floor.max(slot.pace(route));
        limiter.withdraw(
            need.map(|need| need.max(least))
                .or((floor != 0).then_some(floor)),
            floor,
        );
    }

    /// Gives a permit back, no lesson (a hang-up, an error): inline, the lock and the judge
    /// only when someone is queued ([`Limiter::hand_on`], out of line).
    #[inline]
    fn release(&self) {
        if let Some(limiter) = &self.limiter {
            if limiter.give_back() {
                self.hand_on(limiter);
            }
        }
    }

    /// A permit given back with someone queued: handed on under the queue's lock.
    #[cold]
    #[inline(never)]
    fn hand_on(&self, limiter: &Limiter) {
        limiter.hand_on(&|w| self.judge(w));
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let Some(shared) = &self.shared else { return };
        if let Some(waiter) = self.waiter.take() {
            if let Some(limiter) = &shared.limiter {
                // Left without an answer of admission's: its deadline passed (answered by
                // the timer) or its caller hung up. (A shed one is counted as shed.)
                let state = waiter.state();
                if matches!(state, WAITING | EXPIRED) {
                    shared.counters.left_queue.fetch_add(1, Ordering::Relaxed);
                }
                if state == WAITING {
                    // Hung up before it was served: its work was never done (a flood of
                    // reset streams offers none).
                    shared.withdraw(limiter, self.route);
                }
                limiter.leave(&waiter, &|w| shared.judge(w));
            }
            return;
        }
        self.shared_release(true);
    }
}
