//! A request that finds every permit taken ([`Shared::queue`]): a place in the queue, or a
//! refusal at once. In an overload (the work offered at the queue over what the limit
//! serves, or a queue that stands), by the queue's length (a limit's worth), by the delay it
//! predicts (the route's no-load duration and 2 ms, as PIE), or by the wait and the need
//! past the budget; in a burst, by the budget alone; in slow start met by an overload, by
//! the wait predicted at the capacity the answers have proven.
//!
//! It decides whether the request waits. It relies on the limiter's measures (the offered
//! work, the standing queue, the proven capacity), on the estimate (need, floor, pace), on
//! [`judge`](super::judge) for the judge the limiter's dispatch asks of each waiter, and on
//! [`ticket`](super::ticket) for where the waiter is kept.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::judge::Refusal;
use super::ticket::Ticket;
use crate::server::admission::Shared;
use crate::server::admission::estimate::{home, nanos};
use crate::server::admission::limiter::{BURST_LOAD, GENEROUS, Limiter, Waiter};
use crate::sync::Ordering;

impl Shared {
    /// No permit free: a place in the queue, or a refusal at once when the queue is full
    /// (a limit's worth of waiters once the limit has seen a queue, or a predicted wait past
    /// the delay target: the route's no-load duration and 2 ms, as PIE drops at enqueue
    /// from the predicted delay) or the predicted wait and the route's need pass the budget
    /// (out of line: the path with a free permit stays short).
    #[inline(never)]
    pub(super) fn queue(
        &self,
        limiter: &Limiter,
        ticket: &mut Ticket,
        budget: Option<Duration>,
        need: Option<Duration>,
        counted: bool,
    ) -> Result<(), Refusal> {
        let limit = limiter.serving().max(1) as u64;
        let ahead = limiter.counts().1 as u64;
        // A burst (the work offered at the queue in the last second or two under what the
        // limit serves: the queue drains by itself, as CoDel tells a good queue from a
        // standing one) holds a caller to its budget and to `BURST_ROUNDS` limits' worth of
        // waiters; an overload (the offered work over it, or too young to tell) to the
        // bounds below (a limit's worth, the delay target).
        // A cold route's request counts as its no-load duration when that is known (its
        // need is not yet).
        let slot = home(&self.table, ticket.route);
        let floor = slot.floor(ticket.route);
        // A request offers at least the route's no-load duration (an answer that ran alone
        // set it) and its pace (a quarter of the way up an answer) of work: after a route
        // got slower, the offered work reads the overload in a few answers, while the
        // need's quantile climbs to the new duration a step an answer.
        let least = floor.max(slot.pace(ticket.route));
        let work = need
            .map(|need| nanos(need).max(least))
            .or((floor != 0).then_some(floor));
        let settled = limiter.settled();
        // (Asked of a caller with a budget, or of one without on a route still warming up:
        // the only bound such a caller meets there.)
        let proven = if settled || floor == 0 || (budget.is_none() && need.is_some()) {
            0
        } else {
            limiter.proven()
        };
        let offer = limiter.offered(work, floor, Instant::now(), proven);
        // After a quiet spell the window counts the idle time, none of it offered: a burst
        // of work after it reads as what it is, but so does an overload, for as long as a
        // second, while its queue grows to the callers' budgets. A caller the delay target
        // bounds (without a budget, or one under `GENEROUS` needs) is judged by the busy
        // spell too (once the window can tell: a fresh server's first sixteenth of a
        // second is an overload).
        let generous = budget
            .zip(need)
            .is_some_and(|(budget, need)| nanos(budget) >= nanos(need).saturating_mul(GENEROUS));
        // The spell only adds to what the window reads (the window's overload stands).
        // While it is young (the limiter's `YOUNG`: a batch and an overload's start look
        // alike) and reads an overload, the wait is bounded by twice the delay target alone
        // (not the queue's length nor slow start's refusal): a batch of three service
        // times' worth is served whole, an overload's first callers answer within three.
        let (load, early, young) = match offer.spell {
            Some(spell) if !generous && offer.load.is_some() => (
                offer.load.map(|load| load.max(spell.load)),
                match (offer.early, spell.early) {
                    (Some(window), Some(spell)) => Some(window.max(spell)),
                    (window, spell) => window.or(spell),
                },
                spell.young,
            ),
            _ => (offer.load, offer.early, false),
        };
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
        // (A caller without a budget is told by the window, not the busy spell: on a fresh
        // server the spell counts each request at the cold start's floor, and a route whose
        // first answers were slow reads its bursts as an overload.)
        let (early, window) = match budget {
            Some(_) => (early, load),
            None => (offer.early, offer.load),
        };
        let rush = !settled
            && !young
            && if floor == 0 {
                budget.is_some() && ahead >= (limit / 2).max(1)
            } else {
                early.is_some_and(|early| {
                    let proven = proven.max(1) as u64;
                    let ahead_of_it =
                        (limiter.in_flight() as u64 + ahead + 1).saturating_sub(proven);
                    // (A caller without a budget, only once the window tells the load
                    // over the limit too: its first answers are a cold route's floor, and a
                    // closed loop of callers at a fresh server's start reads as a rate.)
                    early >= BURST_LOAD
                        && match window {
                            Some(load) => load >= BURST_LOAD,
                            None => budget.is_some(),
                        }
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
        let (late, long, young_long) = match need {
            Some(need) => {
                let need = nanos(need);
                // Ahead of it too: the requests in flight over the limit (let in before a
                // cut of slow start), each a permit the waiters wait for.
                let behind = ahead + (limiter.in_flight() as u64).saturating_sub(limit);
                let wait = need.saturating_mul(behind + 1) / limit;
                // The delay bound's pace: the need, or the route's pace when faster (a
                // route that sped up drains its queue at its new pace while the need, which
                // judges budgets, comes down half-way an answer).
                let pace = match slot.pace(ticket.route) {
                    0 => need,
                    pace => need.min(pace),
                };
                let delay = pace.saturating_mul(behind + 1) / limit;
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
                    floor != 0 && delay > 2 * (least + QUEUE_SLACK),
                )
            }
            // Warming up: not judged yet (a cold route admits what the queue's length allows).
            None => (false, false, false),
        };
        let full = if young && load.is_some_and(|load| load >= BURST_LOAD) {
            young_long
        } else if burst {
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

/// The queue's delay target: a predicted wait of the route's no-load duration and this
/// much scheduling noise, in nanoseconds.
const QUEUE_SLACK: u64 = 2_000_000;
