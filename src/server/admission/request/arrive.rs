//! A request's arrival, in the layer's two calls: [`Admission::before`] (the time a
//! queue-start header says was spent before the layer, taken from the budget and the
//! deadline; the route's credit toward the cap earned) and [`Admission::arrive`] (the
//! route's need against the budget, then a permit taken without a lock, or the queue).
//!
//! It decides the refusals that need no queue: a budget already spent, and a need past the
//! budget (within the cap, by [`judge`](super::judge)). It relies on the estimate for the
//! need and the cap's credit, on [`queue`](super::queue) when no permit is free, and writes
//! the request's [`Ticket`] in place. Both calls are inlined into the layer's call; the
//! header's time spent and the queue are out of line.

use std::time::{Duration, Instant, SystemTime};

use http::{HeaderName, Request, StatusCode};

use super::judge::Refusal;
use super::ticket::Ticket;
use crate::deadline::Deadline;
use crate::server::admission::estimate::{self, HALF_WINDOW_SECS, method_route_hash, slot_of};
use crate::server::admission::queue_start;
use crate::server::admission::{Admission, Shared};
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
        // Written first (a refused request's ticket is dropped unused): the deadline is not
        // kept across the estimate's lookup.
        ticket.route = route;
        ticket.deadline = deadline.map(|d| d.instant());
        // In nanoseconds, 0 while cold (a warm need is at least 1 ns).
        let need = estimate::need_nanos(&shared.table, route);
        // Whether it was counted as doomed here (would-shed or probe): counted once. Inline
        // only the common case (warm, no budget or one at least the need); a cold route or
        // a budget below the need out of line.
        let mut counted = false;
        if need == 0 || budget.is_some_and(|remaining| estimate::below(remaining, need)) {
            counted = shared.arrive_unsure(route, budget, need)?;
        }
        // The ticket holds no admission yet (`Ticket::none`): nothing to drop.
        ticket.shared.get_or_insert_with(|| self.shared.clone());
        if let Some(limiter) = &shared.limiter {
            if let Some(before) = limiter.try_acquire_before() {
                // The requests in flight with it.
                ticket.load = before + 1;
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
    /// A request whose route is cold (`need` 0) or needs more than its budget (out of line):
    /// a budget already spent is refused whatever the route's estimate (even cold; a warm
    /// need is at least 1 ns, so a zero budget is below it), one below a warm need within
    /// the cap ([`Shared::reject`]); a cold route's admission is counted. Whether it was
    /// counted as doomed (would-shed or probe).
    #[cold]
    #[inline(never)]
    fn arrive_unsure(
        &self,
        route: u64,
        budget: Option<Duration>,
        need: u64,
    ) -> Result<bool, Refusal> {
        let slot = &self.table[slot_of(route)];
        let mut counted = false;
        if let Some(remaining) = budget {
            let doomed = match need {
                0 => remaining.is_zero(),
                need => estimate::below(remaining, need),
            };
            if doomed {
                if self.reject(slot, remaining, need, false) {
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
            slot.admitted_cold();
        }
        Ok(counted)
    }

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
        // route's need and the wait the queue predicts, when the whole budget was not):
        // believed within the cap, whatever the estimate says, so that a clock behind this
        // one fails at most the cap's share (a budget shortened but not spent would else be
        // refused by the queue's wait, uncapped).
        let doomed_by_header = match estimate::need(&self.table, route) {
            Some(need) => {
                let need = need.saturating_add(self.predicted_wait(need));
                left < need && whole >= need
            }
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

    /// The wait the queue predicts for a request of `need` arriving now: none while a
    /// permit is free, else a need per limit's worth of waiters ahead of it and itself (as
    /// the queue's own bound, [`Shared::queue`]).
    fn predicted_wait(&self, need: Duration) -> Duration {
        let Some(limiter) = &self.limiter else {
            return Duration::ZERO;
        };
        let (free, ahead) = limiter.counts();
        if free > 0 {
            return Duration::ZERO;
        }
        let limit = u32::try_from(limiter.limit().max(1)).unwrap_or(u32::MAX);
        let rounds = u32::try_from(ahead + 1).unwrap_or(u32::MAX);
        need.saturating_mul(rounds) / limit
    }

    /// The cap's half-window now.
    fn epoch(&self) -> u64 {
        Instant::now()
            .saturating_duration_since(self.base)
            .as_secs()
            / HALF_WINDOW_SECS
    }
}
