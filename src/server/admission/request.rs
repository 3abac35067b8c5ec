//! What admission does with one request: at arrival (the estimate against the budget, the
//! cap, a permit or a place in the queue), in the queue (the judge of each freed permit), and
//! at its answer (the route learns, the permit goes back): the [`Ticket`] its future keeps.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use http::{HeaderName, Request, StatusCode};

use super::estimate::{self, HALF_WINDOW_SECS, Slot, home, method_route_hash, nanos, slot_of};
use super::limiter::{
    BURST_LOAD, EXPIRED, GRANTED, Lesson, Limiter, SHED, Verdict, WAITING, Waiter,
};
use super::queue_start;
use super::{Admission, Shared};
use crate::deadline::Deadline;
use crate::sync::Ordering;

impl Admission {
    /// Before the layer makes the request's line: the time spent before the layer saw the
    /// request (a [`queue_start`](Admission::queue_start) header), taken from `budget` and
    /// `deadline` (the same deadline as a budget from `started`), so that the record, the
    /// line, the timer and `Deadline::current` tell one deadline. Nothing in count-only
    /// mode. Returns the request's route (its hash, for [`Admission::arrive`]). Without a
    /// queue-start header, the route's hash only: the cap's credit (what a queue-start
    /// refusal spends) is earned only where it can be spent.
    #[inline(always)]
    pub(in crate::server) fn before<B>(
        &self,
        req: &Request<B>,
        deadline: &mut Option<Deadline>,
        budget: &mut Option<Duration>,
        started: Instant,
    ) -> u64 {
        let shared = &*self.shared;
        let settings = &shared.settings;
        let route = method_route_hash(req.method(), route(req));
        if let Some(header) = &settings.queue_start {
            if !settings.count_only {
                shared.spent_before(req, route, header, deadline, budget, started);
            }
        }
        route
    }

    /// A request of `route` (from [`Admission::before`]) arrives (the layer's `call`) with its
    /// `deadline` and the same as a `budget` from its start (no clock arithmetic here):
    /// `ticket` (made by [`Ticket::none`] where the response future keeps it) becomes
    /// its ticket, or `Err` when it is refused.
    /// Inlined into the layer's one call, the ticket written in place (no call frame, no
    /// ticket moved out of a `Result`).
    #[inline(always)]
    pub(in crate::server) fn arrive(
        &self,
        ticket: &mut Ticket,
        route: u64,
        deadline: Option<Deadline>,
        budget: Option<Duration>,
    ) -> Result<(), Refusal> {
        let shared = &*self.shared;
        // In nanoseconds, 0 while cold (a warm need is at least 1 ns).
        let need = estimate::need_nanos(&shared.table, route);
        // Whether it was counted as doomed here (would-shed or probe): counted once.
        let mut counted = false;
        if let Some(remaining) = budget {
            // A budget already spent is refused whatever the route's estimate (even cold).
            // (A warm need is at least 1 ns: a zero budget is below it.)
            let doomed = match need {
                0 => remaining.is_zero(),
                need => estimate::below(remaining, need),
            };
            if doomed {
                let slot = &shared.table[slot_of(route)];
                if shared.reject(slot, remaining, need, false) {
                    return Err(if remaining.is_zero() {
                        Refusal::Spent
                    } else {
                        Refusal::Load
                    });
                }
                counted = true;
            }
        }
        if need == 0 {
            shared.table[slot_of(route)].admitted_cold();
        }
        ticket.shared = Some(self.shared.clone());
        ticket.route = route;
        ticket.deadline = deadline.map(|d| d.instant());
        if let Some(limiter) = &shared.limiter {
            let load = limiter.try_acquire_load();
            if load != 0 {
                ticket.permit = true;
                ticket.load = load;
            } else {
                let need = (need != 0).then(|| Duration::from_nanos(need));
                shared.queue(limiter, ticket, budget, need, counted)?;
            }
        }
        Ok(())
    }

    /// The status of a shed answer (before gRPC's rewrite to 200).
    pub(in crate::server) fn shed_status(&self) -> StatusCode {
        self.shared.settings.status
    }
}

/// Why a request was refused at arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Its budget was spent before it arrived: answered as a timeout (gRPC's
    /// DEADLINE_EXCEEDED, no `retry-after`), never started.
    Spent,
    /// Its route's need, or the queue's predicted wait, is past its budget (or the queue
    /// is full): a refusal for load ([`Outcome::Shed`](crate::Outcome::Shed), `retry-after`).
    Load,
}

/// The bytes of a request's route: axum's `MatchedPath`, else its path.
#[inline]
fn route<B>(req: &Request<B>) -> &[u8] {
    #[cfg(feature = "axum")]
    if let Some(matched) = req.extensions().get::<axum::extract::MatchedPath>() {
        return matched.as_str().as_bytes();
    }
    req.uri().path().as_bytes()
}

impl Shared {
    /// The queue-start header's time spent, taken from the budget and the deadline (out of
    /// line: only with a queue-start header). A header that says the whole budget was spent
    /// before is believed within the cap ([`max_shed`](Admission::max_shed)): a proxy clock
    /// behind this one (or a client that writes the header) would otherwise fail every
    /// request; past the cap the header is ignored for that request (counted as capped).
    /// Also: the request's route earns its credit toward the cap here, before it may
    /// spend it (every request, with or without a budget).
    #[inline(never)]
    fn spent_before<B>(
        &self,
        req: &Request<B>,
        route: u64,
        header: &HeaderName,
        deadline: &mut Option<Deadline>,
        budget: &mut Option<Duration>,
        started: Instant,
    ) {
        let slot = &self.table[slot_of(route)];
        slot.earn(self.settings.credit_gain);
        let Some(whole) = *budget else {
            return;
        };
        let spent = req
            .headers()
            .get(header)
            .and_then(|value| queue_start::spent(value.as_bytes(), SystemTime::now()));
        let Some(spent) = spent.filter(|spent| !spent.is_zero()) else {
            return;
        };
        let left = whole.saturating_sub(spent);
        // The header dooms the request (its whole budget spent, or what is left below its
        // route's need, when the whole budget was not): believed within the cap, whatever
        // the estimate says, so that a clock behind this one fails at most the cap's share.
        let doomed_by_header = match estimate::need(&self.table, route) {
            Some(need) => left < need && whole >= need,
            None => left.is_zero(),
        };
        if doomed_by_header && !slot.spend(self.epoch(), 0) {
            self.counters.capped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        *budget = Some(left);
        if let Some(d) = deadline {
            let at = started.checked_add(left).unwrap_or(started);
            *d = Deadline::at(at.min(d.instant()), d.source());
        }
    }

    /// The cap's half-window now.
    fn epoch(&self) -> u64 {
        Instant::now()
            .saturating_duration_since(self.base)
            .as_secs()
            / HALF_WINDOW_SECS
    }

    /// A request whose `remaining` budget is below its route's `need`: whether to refuse
    /// it (counted either way). A budget spent is refused; one below the estimate too,
    /// but for one in [`PROBE_EVERY`](super::estimate::PROBE_EVERY), let run so that the
    /// estimate keeps learning (a route that got faster is seen).
    #[cold]
    fn reject(&self, slot: &Slot, remaining: Duration, need: u64, waiting: bool) -> bool {
        let counters = &self.counters;
        if self.settings.count_only {
            counters.would_shed.fetch_add(1, Ordering::Relaxed);
            #[cfg(feature = "tracing")]
            tracing::info!(
                target: "shared_headers::admission",
                remaining_ms = remaining.as_secs_f64() * 1e3,
                estimate_ms = need as f64 / 1e6,
                waiting,
                "would shed: the deadline cannot be met"
            );
            #[cfg(not(feature = "tracing"))]
            let _ = need;
            return false;
        }
        if !remaining.is_zero() && slot.probe() {
            counters.probes.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        let counter = if waiting {
            &counters.shed_waiting
        } else {
            &counters.shed
        };
        counter.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// What to do with a waiter when a permit is free: one whose deadline passed leaves
    /// the queue uncounted (its timer answers it); a doomed one is counted once (at arrival
    /// or at its first judgement), then shed, or spared (a probe, or count-only): it gets
    /// a permit unless a waiter behind it can still finish in time.
    fn judge(&self, waiter: &Waiter) -> Verdict {
        let Some(deadline) = waiter.deadline else {
            return Verdict::Grant;
        };
        let now = Instant::now();
        if deadline <= now {
            return Verdict::Expire;
        }
        let slot = &self.table[slot_of(waiter.route)];
        let Some(need) = estimate::need(&self.table, waiter.route) else {
            return Verdict::Grant;
        };
        let remaining = deadline - now;
        if remaining >= need {
            return Verdict::Grant;
        }
        if !waiter.counted.swap(true, Ordering::Relaxed)
            && self.reject(slot, remaining, nanos(need), true)
        {
            Verdict::Shed
        } else if self.settings.count_only {
            Verdict::Grant
        } else {
            Verdict::Spare
        }
    }

    /// No permit free: a place in the queue, or a refusal at once when the queue is full
    /// (a limit's worth of waiters once the limit has seen a queue, or a predicted wait past
    /// the delay target: the route's no-load duration and 2 ms, as PIE drops at enqueue
    /// from the predicted delay) or the predicted wait and the route's need pass the budget
    /// (out of line: the path with a free permit stays short).
    #[inline(never)]
    fn queue(
        &self,
        limiter: &Limiter,
        ticket: &mut Ticket,
        budget: Option<Duration>,
        need: Option<Duration>,
        counted: bool,
    ) -> Result<(), Refusal> {
        let limit = limiter.limit().max(1) as u64;
        let ahead = limiter.counts().1 as u64;
        // A burst (the work offered at the queue in the last second or two under what the
        // limit serves: the queue drains by itself, as CoDel tells a good queue from a
        // standing one) holds a caller to its budget and to `BURST_ROUNDS` limits' worth of
        // waiters; an overload (the offered work over it, or too young to tell) to the
        // bounds below (a limit's worth, the delay target).
        // A cold route's request counts as its no-load duration when that is known (its
        // need is not yet).
        let floor = home(&self.table, ticket.route).floor(ticket.route);
        let work = need.map(nanos).or((floor != 0).then_some(floor));
        let settled = limiter.settled();
        let proven = if settled || floor == 0 || budget.is_none() {
            0
        } else {
            limiter.proven()
        };
        let offer = limiter.offered(work, Instant::now(), proven);
        let load = offer.load;
        // Slow start met by an overload (a fresh server, the load at once): the limit is a
        // guess above what the handler has been seen to take, and a waiter let in now waits
        // for requests queued inside the handler, unseen, then is refused when the delayed
        // answers cut the limit ([`Limiter::trim`]), or answers late. A caller with a budget
        // is refused at arrival instead when the wait predicted at the proven capacity (the
        // most in flight of an answer on time, each request its no-load duration: PIE's
        // predicted delay) passes the delay target and the work offered at the queue is an
        // overload for that capacity (and for the limit, once the window can tell: a warm
        // route whose limit never had to move is judged by the burst rule); before any
        // answer, the queue holds half a limit's
        // worth of such callers. (A few random arrivals offer far less: at 0.8x load none is
        // refused.)
        let rush = budget.is_some()
            && !settled
            && if floor == 0 {
                ahead >= (limit / 2).max(1)
            } else {
                offer.early.is_some_and(|early| {
                    let proven = proven.max(1) as u64;
                    let ahead_of_it =
                        (limiter.in_flight() as u64 + ahead + 1).saturating_sub(proven);
                    early >= BURST_LOAD
                        && load.is_none_or(|load| load >= BURST_LOAD)
                        && floor.saturating_mul(ahead_of_it) / proven > floor + QUEUE_SLACK
                })
            };
        // Between what the limit serves and the burst's margin, the queue's own delay tells:
        // one whose least wait stayed over the route's no-load duration and 2 ms for CoDel's
        // interval stands (an overload just above what the limit serves offers work within
        // the margin, and its queue grows for ever; under it, random arrivals queue now and
        // then and drain by themselves).
        let burst = work.is_some()
            && load.is_some_and(|load| {
                load < STANDING_LOAD
                    || (load < BURST_LOAD && !limiter.standing(floor.saturating_add(QUEUE_SLACK)))
            });
        let full = ahead >= limit * QUEUE_ROUNDS && (budget.is_some() || settled);
        let (late, long) = match need {
            Some(need) => {
                let need = nanos(need);
                let wait = need.saturating_mul(ahead + 1) / limit;
                let slot = home(&self.table, ticket.route);
                // The delay bound's pace: the need, or the route's pace when faster (a
                // route that sped up drains its queue at its new pace while the need, which
                // judges budgets, comes down half-way an answer).
                let pace = match slot.pace(ticket.route) {
                    0 => need,
                    pace => need.min(pace),
                };
                let delay = pace.saturating_mul(ahead + 1) / limit;
                // The delay target bounds a caller without a budget always, and one with a
                // budget once the limit has seen a queue and only if its budget is under
                // `GENEROUS` needs: else the budget (the wait and the need must fit it) and
                // the queue's length bound its wait, and a route's noise (a slow first
                // answer, a late timer on a 1 ms route) refuses nobody with time to spare.
                let long = budget.is_none_or(|budget| {
                    limiter.settled() && nanos(budget) < need.saturating_mul(GENEROUS)
                }) && floor != 0
                    && delay > floor + QUEUE_SLACK;
                (
                    budget.is_some_and(|budget| wait + need > nanos(budget)),
                    long,
                )
            }
            // Warming up: not judged yet (a cold route admits what the queue's length allows).
            None => (false, false),
        };
        let full = if burst {
            // A caller with a budget on a warm route is held to it (the wait and the need
            // must fit it); one without, or on a cold route, to `BURST_ROUNDS` limits' worth.
            (budget.is_none() || need.is_none()) && ahead >= limit * BURST_ROUNDS
        } else {
            full || long
        };
        if full || late || rush {
            if self.settings.count_only {
                if !counted {
                    self.counters.would_shed.fetch_add(1, Ordering::Relaxed);
                }
            } else {
                if rush {
                    limiter.rushed();
                }
                self.counters.overloaded.fetch_add(1, Ordering::Relaxed);
                return Err(Refusal::Load);
            }
        }
        ticket.waiter = Some(self.enqueue(limiter, ticket.deadline, ticket.route, counted));
        Ok(())
    }

    #[cold]
    fn enqueue(
        &self,
        limiter: &Limiter,
        deadline: Option<Instant>,
        route: u64,
        counted: bool,
    ) -> Arc<Waiter> {
        self.counters.queued.fetch_add(1, Ordering::Relaxed);
        let key = deadline.map_or(u64::MAX, |at| {
            u64::try_from(at.saturating_duration_since(self.base).as_micros())
                .unwrap_or(u64::MAX - 1)
                .min(u64::MAX - 1)
        });
        limiter.enqueue(key, deadline, route, counted, &|w| self.judge(w))
    }
}

/// The offered load (in 1/256 of what the limit serves) from which a queue that stands
/// ([`Limiter::standing`]) is read as an overload: what the limit serves.
const STANDING_LOAD: u64 = 256;

/// The queue's bound, in limits' worth of waiters: one (about one service time of wait).
const QUEUE_ROUNDS: u64 = 1;

/// The queue's bound in a burst (the offered work under what the limit serves), in
/// limits' worth of waiters: the budget bounds the wait then.
const BURST_ROUNDS: u64 = 16;

/// A budget of this many times the route's need is generous: the delay target does not
/// bound its caller's wait (the budget and the queue's length do).
const GENEROUS: u64 = 10;

/// The queue's delay target: a predicted wait of the route's no-load duration and this
/// much scheduling noise, in nanoseconds.
const QUEUE_SLACK: u64 = 2_000_000;

/// What admission decided for one request, kept by its response future: the permit it
/// holds (given back when the future is done or dropped) or its place in the queue.
pub(crate) struct Ticket {
    shared: Option<Arc<Shared>>,
    /// Its route's hash (its slot: `slot_of`).
    route: u64,
    permit: bool,
    /// Whether its handler was let run (polled).
    running: bool,
    waiter: Option<Arc<Waiter>>,
    started: Instant,
    /// Its deadline (a cut at it teaches the route a lower bound; a hang-up teaches nothing).
    deadline: Option<Instant>,
    /// Its wait for a permit, in nanoseconds.
    waited: u64,
    /// The requests in flight when it took its permit, itself included (a waiter: every
    /// permit was taken).
    load: usize,
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
            permit: false,
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
                self.permit = true;
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
        let load = self.permit.then_some(self.load);
        shared.answered(self.route, latency, self.waited, load);
        load.map(|_| BodyPermit { shared })
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
        if self.permit {
            match cut {
                true => shared.release_permit(self.route, took, self.load),
                false => shared.release(),
            }
        }
    }
}

/// An answered request's permit, held by its response's body (the limit has followed the
/// answer's time to head): given back when the body is dropped, at its end.
pub(crate) struct BodyPermit {
    shared: Arc<Shared>,
}

impl Drop for BodyPermit {
    fn drop(&mut self) {
        self.shared.release();
    }
}

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
    /// flight when it took it). One call out of line; the route's slot looked up once when
    /// it is warm in its first (the hot path).
    #[inline(never)]
    fn answered(&self, route: u64, latency: Duration, waited: u64, load: Option<usize>) {
        let settings = &self.settings;
        let took = nanos(latency).saturating_sub(waited);
        let learned = estimate::learn(&self.table, route, took, settings.steps, settings.warm);
        if let Some(load) = load {
            match learned {
                Some((slot, floor)) => self.lesson_at(slot, floor, took, load),
                None => self.lesson(route, took, load),
            }
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
                    Lesson::Alone => {
                        slot.alone(took);
                        if load + 1 >= limiter.limit() {
                            self.adapt(limiter, slot, took, took.max(1), load);
                        }
                    }
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
        let floor = home(&self.table, route).floor(route);
        let need = estimate::need(&self.table, route).map(nanos);
        limiter.withdraw(need.or((floor != 0).then_some(floor)));
    }

    /// Gives a permit back, no lesson (a hang-up, an error).
    #[inline(never)]
    fn release(&self) {
        if let Some(limiter) = &self.limiter {
            limiter.release(&|w| self.judge(w));
        }
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
