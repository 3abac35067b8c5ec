//! The measures by which a queue is told a burst from an overload, under the queue's lock:
//! the work offered at the queue over what the limit serves ([`Limiter::offered`], and slow
//! start's early read over the proven capacity; after a quiet spell, the same over the busy
//! spell since, [`Spell`]), a caller's work taken back
//! ([`Limiter::withdraw`]), whether the queue stands (CoDel's test, [`Limiter::standing`]);
//! and, after slow start's cut in an overload, the queue trimmed ([`Limiter::trim`]).
//!
//! It measures: the refusal at arrival is the request's, which reads the [`Offer`] against
//! [`BURST_LOAD`]. It relies on [`permits`](super::permits) for the limit and the queue, on
//! [`queue`](super::queue) for the windows' state, and on [`waiter`](super::waiter) for the
//! shed state.

use std::time::{Duration, Instant};

use super::permits::Limiter;
use super::queue::Queue;
use super::waiter::SHED;
use crate::sync::Ordering;

/// The least time with no request counted in the offered work (every one found a permit
/// free: the queue empty all along) after which the window restarts at the last one counted
/// (CoDel's interval; or twice the asking request's need when longer: an overload of a slow
/// route finds the permits taken about once a need over the limit).
pub const OFFERED_IDLE: Duration = Duration::from_millis(100);

/// The least time with no request counted after which the next one begins a busy spell
/// that [`Offer::spell`] reads on its own: a quiet spell, not the gaps between the random
/// arrivals of a load under the capacity (at 0.8x, about one a second over 100 ms, none
/// over 500 ms).
pub const QUIET: Duration = Duration::from_millis(500);

/// The offered load (in 1/256 of what the limit serves) under which the queue is read as
/// a burst: 1.25, as the route's need (a high quantile of its answers) overstates the mean
/// work of a request by a quarter or so.
pub const BURST_LOAD: u64 = 320;

/// A budget of this many times the route's need is generous: the delay target does not
/// bound its caller's wait (the budget and the queue's length do), nor does slow start's
/// trim shed it (a remaining budget of this many no-load durations).
pub const GENEROUS: u64 = 10;

/// What [`Limiter::offered`] tells, in 1/256 of what is served.
#[derive(Debug, Clone, Copy)]
pub struct Offer {
    /// The work offered at the queue over what the limit serves (`None`: too young).
    pub load: Option<u64>,
    /// The same over what slow start's proven permits serve (`None`: not asked, or the
    /// window spans less than one service time).
    pub early: Option<u64>,
    /// The same over the busy spell since the last quiet spell alone ([`QUIET`]), not the
    /// idle time the window counts (`None`: no spell began in the last two halves, or the
    /// route's no-load duration is not known).
    pub spell: Option<Spell>,
}

/// The work offered at the queue over a busy spell that began after a quiet spell: each
/// request counted since its first one is its own route's no-load duration (not its need,
/// a quantile of its answers, which counts the waits in a handler's queue and at 0.8x read
/// random arrivals as an overload; not the asking route's, which counted a 0 ms route's
/// requests as a slow one's), over the spell and one no-load duration before it (the
/// requests that found a permit free began within it), in 1/256 of what is served.
#[derive(Debug, Clone, Copy)]
pub struct Spell {
    /// Over what the limit serves; in slow start, at most twice the proven permits (the
    /// most slow start grows to: a limit still at its first guess is no capacity).
    pub load: u64,
    /// Over what slow start's proven permits serve (`None`: not asked).
    pub early: Option<u64>,
    /// Whether the spell is younger than [`YOUNG`] (or four no-load durations when
    /// longer): too young to tell a batch from an overload's start.
    pub young: bool,
}

/// The age under which a busy spell cannot tell a batch (a cron job's requests at once)
/// from an overload's start: both are a few requests queued in an instant.
pub const YOUNG: Duration = Duration::from_millis(50);

/// A half of the offered work's window.
pub const OFFERED_HALF: Duration = Duration::from_millis(1000);

impl Limiter {
    /// A request that found every permit taken, its route needing `need` nanoseconds
    /// (`None`: cold), at `now`: counted in the offered work, and the offered load then: the
    /// work offered in the window over what the limit serves in it, in 1/256 (`None` before
    /// a sixteenth of a half: too little to tell). Under the queue's lock.
    ///
    /// Also, when `proven` is not 0 (slow start: the most requests in flight of an answer on
    /// time, [`Limiter::proven`]), the same work over what `proven` permits serve, once the
    /// window spans the request's need (one service time: a fresh server met by an overload
    /// is told from a few random arrivals after its first answers, not a sixteenth of a
    /// second later). And, after a quiet spell, the work of the busy spell since, the
    /// request counted at `floor`, its route's no-load duration (0: cold, counted as the
    /// asking request's when read) ([`Offer::spell`]).
    pub fn offered(&self, need: Option<u64>, floor: u64, now: Instant, proven: usize) -> Offer {
        // What the limit serves: during a probe up, the limit held before it (the probe's
        // extra permit tests the handler; read at it, a handler that takes no more showed
        // an overload as a burst, and the queue the probe let in waited a service time more).
        let limit = self.serving() as u128;
        let mut queue = self.queue.lock();
        let o = &mut queue.offered;
        let idle = OFFERED_IDLE.max(Duration::from_nanos(need.unwrap_or(0).saturating_mul(2)));
        // Quiet since the last request counted, or since the limiter's making (a fresh server
        // met by the load at once is read by the window, which begins with it).
        let quiet = now.saturating_duration_since(o.last.unwrap_or(o.since)) >= QUIET;
        if let Some(last) = o
            .last
            .filter(|&last| now.saturating_duration_since(last) >= idle)
        {
            // No request found every permit taken for that long: whatever was offered
            // before has drained (a flood of refused or reset requests included), and the
            // time since is measured, none of it offered. The window restarts there.
            (o.cur, o.prev, o.cur_cold, o.prev_cold) = (0, 0, 0, 0);
            o.spans = false;
            o.since = last.max(now.checked_sub(OFFERED_HALF).unwrap_or(last));
            // A busy spell under way drained too (a flood refused after a quiet spell
            // offers nothing to the requests after it): its work is forgotten, its time
            // kept (a spell begun again would be young at every such gap in a light load).
            (o.busy_work, o.busy_cold, o.busy_late) = (0, 0, 0);
        }
        if quiet {
            // The first request counted after a quiet spell: a busy spell begins.
            (o.busy, o.busy_work, o.busy_cold, o.busy_late) = (Some(now), 0, 0, 0);
            o.busy_overload = false;
        }
        if o.busy.is_some_and(|busy| now >= busy + 2 * OFFERED_HALF) {
            // The window holds no idle time any more.
            o.busy = None;
        }
        o.last = Some(now);
        if now >= o.since + OFFERED_HALF {
            // One half on: the current half becomes the one before; more: the half before
            // now was idle.
            let one = now < o.since + 2 * OFFERED_HALF;
            (o.prev, o.prev_cold) = if one { (o.cur, o.cur_cold) } else { (0, 0) };
            (o.cur, o.cur_cold) = (0, 0);
            o.spans = true;
            o.since = if one { o.since + OFFERED_HALF } else { now };
        }
        match need {
            Some(need) => o.cur = o.cur.saturating_add(need),
            None => o.cur_cold += 1,
        }
        match floor {
            0 => o.busy_cold += 1,
            floor => {
                o.busy_work = o.busy_work.saturating_add(floor);
                if o.busy
                    .is_some_and(|busy| now >= busy + Duration::from_nanos(floor))
                {
                    o.busy_late = o.busy_late.saturating_add(floor);
                }
            }
        }
        let start = if o.spans {
            o.since.checked_sub(OFFERED_HALF).unwrap_or(o.since)
        } else {
            o.since
        };
        let span = now.saturating_duration_since(start);
        let (prev, prev_cold) = if o.spans {
            (o.prev, o.prev_cold)
        } else {
            (0, 0)
        };
        let work = u128::from(o.cur)
            + u128::from(prev)
            + u128::from(o.cur_cold + prev_cold) * u128::from(need.unwrap_or(0));
        let load_at = |permits: u128| {
            ((work << 8) / (permits * span.as_nanos()).max(1)).min(u128::from(u64::MAX)) as u64
        };
        let spell = o.busy.filter(|_| floor != 0).map(|busy| {
            let age = now.saturating_duration_since(busy);
            let span = age.as_nanos() + u128::from(floor);
            let work = u128::from(o.busy_work) + u128::from(o.busy_cold) * u128::from(floor);
            let at = |permits: u128| {
                ((work << 8) / (permits * span).max(1)).min(u128::from(u64::MAX)) as u64
            };
            let most = match proven as u128 {
                0 => limit,
                proven => limit.min(2 * proven),
            };
            Spell {
                load: at(most),
                early: (proven != 0).then(|| at(proven as u128)),
                young: !o.busy_overload
                    && age < YOUNG.max(Duration::from_nanos(floor.saturating_mul(2))),
            }
        });
        Offer {
            spell,
            load: (span >= OFFERED_HALF / 16).then(|| load_at(limit)),
            early: (proven != 0 && need.is_some_and(|need| span.as_nanos() >= u128::from(need)))
                .then(|| load_at(proven as u128)),
        }
    }

    /// A request counted by [`Limiter::offered`] left the queue unserved (its caller hung
    /// up): its work is taken back (a flood of reset streams offers none), `need` from the
    /// window and `floor` from the busy spell.
    pub fn withdraw(&self, need: Option<u64>, floor: u64) {
        let mut queue = self.queue.lock();
        let o = &mut queue.offered;
        match need {
            Some(need) => o.cur = o.cur.saturating_sub(need),
            None => o.cur_cold = o.cur_cold.saturating_sub(1),
        }
        match floor {
            0 => o.busy_cold = o.busy_cold.saturating_sub(1),
            floor => o.busy_work = o.busy_work.saturating_sub(floor),
        }
    }

    /// Whether the queue stands: every waiter granted a permit over the last two halves of
    /// [`SOJOURN_HALF`](super::queue::SOJOURN_HALF) (at least one in each) waited over `target`
    /// nanoseconds. Under the queue's lock.
    pub fn standing(&self, target: u64) -> bool {
        let mut queue = self.queue.lock();
        let sojourn = &mut queue.sojourn;
        sojourn.roll(Instant::now());
        sojourn.prev != u64::MAX
            && sojourn.prev > target
            && (sojourn.cur == u64::MAX || sojourn.cur > target)
    }

    /// Whether the work offered at the queue since its window began (a request of a cold
    /// route counted as `floor`) is at least [`BURST_LOAD`] times what the limit serves in
    /// that time: an overload. Under the queue's lock.
    fn overloaded(&self, queue: &Queue, floor: u64) -> bool {
        let o = &queue.offered;
        let span = o.since.elapsed()
            + if o.spans {
                OFFERED_HALF
            } else {
                Duration::ZERO
            };
        let (prev, prev_cold) = if o.spans {
            (o.prev, o.prev_cold)
        } else {
            (0, 0)
        };
        let cold = u128::from(o.cur_cold + prev_cold) * u128::from(floor);
        let work = u128::from(o.cur) + u128::from(prev) + cold;
        let limit = self.limit() as u128;
        let served = limit * span.as_nanos();
        // Or the busy spell since a quiet spell (the window counts the idle time before it:
        // an overload after idle reads as a burst there): the work that kept coming after
        // its first no-load duration, over the time since, at the limit slow start has just
        // cut to. A batch's requests all come in its first instant (its waiters are served,
        // held to their budgets); an overload's keep coming.
        let spell = o.busy.is_some_and(|busy| {
            let span = busy.elapsed().as_nanos().saturating_sub(u128::from(floor));
            (u128::from(o.busy_late) << 8) >= u128::from(BURST_LOAD) * (limit * span).max(1)
        });
        spell || (work << 8) >= u128::from(BURST_LOAD) * served.max(1)
    }

    /// After slow start's cut, in an overload ([`Limiter::overloaded`]): the waiters with a
    /// deadline sooner than [`GENEROUS`] no-load durations (`floor`) from now, past the first
    /// `keep` (in deadline order; `keep` is the limit less the requests let in above it), leave
    /// the queue shed (state [`SHED`]): the requests let in above the limit
    /// delay them past a service time, and newer ones replace them at the limit's pace (as CoDel
    /// drops from a queue that stood too long). Waiters without a deadline stay. Returns how
    /// many were shed.
    pub fn trim(&self, floor: u64) -> usize {
        let limit = self.limit();
        let mut queue = self.queue.lock();
        if !self.overloaded(&queue, floor) {
            return 0;
        }
        // An overload, not a batch: the spell's young bound is over.
        queue.offered.busy_overload = true;
        let excess = self.in_flight.load(Ordering::SeqCst).saturating_sub(limit);
        let keep = limit.saturating_sub(excess);
        // A waiter with a generous budget left stays: its budget, not the delay target,
        // bounds its wait (a batch of such callers drains by itself long before).
        let generous = Instant::now() + Duration::from_nanos(floor.saturating_mul(GENEROUS));
        let shed: Vec<_> = queue
            .waiters
            .iter()
            .filter(|(_, w)| w.deadline.is_some_and(|at| at < generous))
            .skip(keep)
            .map(|(&key, _)| key)
            .collect();
        for key in &shed {
            if let Some(waiter) = queue.waiters.remove(key) {
                self.queued.fetch_sub(1, Ordering::SeqCst);
                waiter.set(SHED);
            }
        }
        shed.len()
    }
}

#[cfg(all(test, not(shared_headers_loom)))]
mod tests {
    use super::*;

    /// The work offered during a probe up is read at the limit held before it: at 2x what a
    /// limit of 2 serves, a probe to 3 reads 2x (not 1.33x, within the burst's margin, where
    /// the queue the probe let in was bounded by the budget alone). Its control: the same
    /// work at a limit of 3 held (no probe) reads 1.33x.
    #[test]
    fn a_probe_ups_extra_permit_is_no_capacity_for_the_offered_load() {
        const MS: u64 = 1_000_000;
        let offered = |probing: bool| {
            let limiter = Limiter::new(64);
            limiter.limit.store(3 << 8, Ordering::Relaxed);
            if probing {
                limiter.probe.lock().from = Some((2, 20 * MS, 3, true));
            }
            // 80 requests of 20 ms each over 400 ms: 4 permits' worth, twice a limit of 2.
            let start = Instant::now();
            let mut load = None;
            for k in 0..80u64 {
                let at = start + Duration::from_millis(5 * k);
                load = limiter.offered(Some(20 * MS), 20 * MS, at, 0).load;
            }
            load.expect("the window spans 400 ms")
        };
        let (probing, held) = (offered(true), offered(false));
        // In 1/256: 2x is 512, 1.33x is 341 (each within a request's rounding).
        assert!(
            (490..=530).contains(&probing),
            "during a probe up: {probing}"
        );
        assert!((325..=360).contains(&held), "a limit of 3 held: {held}");
    }
}
