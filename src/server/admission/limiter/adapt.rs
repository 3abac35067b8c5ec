//! What an answer tells the limit ([`Lesson`], [`Limiter::lesson`]: a few loads at every
//! answer, inline) and what the limit does with it ([`Limiter::adapt`]: one out-of-line
//! call): the delay rule (a queue in the handler, seen in the route's recent minimum), slow
//! start's growth, and, once settled, the answer counted in the probe's window.
//!
//! It decides every move of the limit but slow start's exit, which it asks of
//! [`slow_start`](super::slow_start). It relies on [`permits`](super::permits) for the
//! limit's words and the requests in flight, and on [`probe`](super::probe) for the tolerance
//! and the windows' judgement.

use super::permits::Limiter;
use super::probe::{tolerated, window_len};
use crate::sync::Ordering;

/// What an answer tells the limit and the route's floor ([`Limiter::lesson`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lesson {
    /// It ran alone: its duration is the route's no-load duration (the floor follows it,
    /// up as well as down: a route that got slower is followed), and the limit may grow
    /// from it when binding ([`Lesson::AloneBinding`]).
    Alone,
    /// It ran alone, and the limit would bind the next request (its load and one more reach
    /// the limit): as [`Lesson::Alone`], then [`Limiter::adapt`].
    AloneBinding,
    /// The limit held nothing back and the answer was not slow: the floor may drift up.
    Calm,
    /// The limit is binding, or the answer was slow: [`Limiter::adapt`].
    Limit,
}

impl Limiter {
    /// What an answer of `took` on a route whose no-load duration is `floor` (not 0) tells,
    /// before its permit goes back: a few loads, the common cases decided inline.
    #[inline]
    pub fn lesson(&self, took: u64, floor: u64, load: usize) -> Lesson {
        let in_flight = self.in_flight.load(Ordering::Relaxed);
        let limit = self.limit();
        // It ran alone: nothing else in flight when it took its permit nor now (a limit of
        // one: nothing else in flight at all), however long it took.
        // Binding when its load and one more reach the limit (a limit of one always is).
        if in_flight == 1 {
            if load == 1 {
                return if limit <= 2 {
                    Lesson::AloneBinding
                } else {
                    Lesson::Alone
                };
            }
            if limit <= 1 {
                return Lesson::AloneBinding;
            }
        }
        let binding = in_flight + 1 >= limit || self.queued.load(Ordering::Relaxed) > 0;
        if binding || took > tolerated(floor) {
            Lesson::Limit
        } else {
            Lesson::Calm
        }
    }

    /// One answer of `took` nanoseconds on a route whose no-load duration is `floor` (0:
    /// unknown), `low` the least of the route's recent answers (this one's window and the
    /// one before, [`Slot::low`](crate::server::admission::estimate::Slot::low)), `load` the
    /// requests in flight when it took its permit, itself included (a waiter: every permit
    /// taken): the limit follows.
    ///
    /// * **A queue in the handler** (past the permits, where admission cannot see) delays
    ///   every answer, so it shows as the recent minimum well above the floor (a delay-based
    ///   limit, as TCP Vegas and Netflix's `concurrency-limits` `VegasLimit`, on the recent
    ///   minimum as Vegas's and BBR's min-RTT); a route whose answers merely vary keeps fast
    ///   answers in every window and is never read as queueing. The limit then moves an
    ///   eighth of the way to what Little's law says keeps the answers within the tolerance
    ///   (in flight × tolerated ÷ low), at most halving.
    /// * **Slow start**: until that first decrease, an answer near the floor of a request
    ///   that took its permit with the limit binding grows it by a permit (TCP's slow start).
    /// * **Settled, the limit probes** ([`Probe`](super::probe::Probe)): a limit one above
    ///   what the handler takes at once delays only some answers (the recent minimum cannot
    ///   see it), so once settled the limit moves only by comparing the throughput of
    ///   windows of binding answers at two neighbouring limits (a gradient, as Gradient2's
    ///   and BBR's probing): down while the lower limit serves as many, up only when the
    ///   higher one serves more.
    ///
    /// Returns whether slow start ended with a cut ([`Limiter::slow_start`]): the caller
    /// then trims the queue ([`Limiter::trim`]).
    #[cold]
    #[inline(never)]
    pub fn adapt(&self, took: u64, floor: u64, low: u64, load: usize) -> bool {
        if floor == 0 {
            return false;
        }
        let tolerated = tolerated(floor);
        let settled = self.settled.load(Ordering::Relaxed);
        let mut most = self.ceiling;
        if !settled {
            match self.slow_start(took, floor, tolerated, load) {
                None => return true,
                Some(cap) => most = cap,
            }
        }
        self.follow(took, floor, low, load, settled, most);
        false
    }

    /// [`Limiter::adapt`] past slow start's exit; slow start's growth stops at `most`
    /// permits.
    fn follow(&self, took: u64, floor: u64, low: u64, load: usize, settled: bool, most: usize) {
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
            if let Some(mut probe) = self.probe.try_lock() {
                if probe.cut_from == 0 {
                    probe.cut_from = limit >> 8;
                }
            }
            limit - (limit - target) / 8 - 1
        } else if load + 1 < limit >> 8 {
            // Not binding when it took its permit: it says nothing of the limit.
            return;
        } else if settled {
            self.window(took, tolerated, floor);
            return;
        } else if took <= floor + floor / 4 + 1_000_000 && limit < most << 8 {
            limit + 256
        } else {
            return;
        };
        let next = next.clamp(256, self.ceiling << 8);
        if next != limit {
            self.limit.store(next, Ordering::Relaxed);
        }
    }

    /// An answer that ran alone took longer than its route's tolerance: the route got
    /// slower, and the delay rule's cuts since the last full window read its new duration
    /// against the old floor as a queue in the handler (an answer that ran alone waited
    /// behind nothing of admission's). The limit goes back to what it was before them (as
    /// BBR, having re-learned a path's min-RTT with a few in flight, goes back to its
    /// rate); the delay rule, now against the new floor, cuts it again if the handler
    /// queues. The work offered at the queue, counted at the old duration, is forgotten: the
    /// queue reads an overload at the new one from the next requests.
    #[cold]
    #[inline(never)]
    pub fn relearned(&self) {
        let Some(mut probe) = self.probe.try_lock() else {
            return;
        };
        let from = std::mem::take(&mut probe.cut_from).min(self.ceiling);
        if from == 0 {
            return;
        }
        if from > self.limit() {
            probe.restart(from);
            self.limit.store(from << 8, Ordering::Relaxed);
        }
        drop(probe);
        let mut queue = self.queue.lock();
        let o = &mut queue.offered;
        (o.cur, o.prev, o.cur_cold, o.prev_cold) = (0, 0, 0, 0);
        o.spans = false;
        o.since = std::time::Instant::now();
    }

    /// A binding answer of `took` (its route's tolerance `tolerated`, its no-load duration
    /// `floor`) once the limit is settled: counted in the probe's window; a full window
    /// decides ([`Probe::closed`](super::probe::Probe::closed)).
    ///
    /// An answer is counted at most a service time past its tolerance: a step of the limit
    /// over what the handler takes at once delays an answer by at most about a service
    /// time, so a longer answer is the route varying (one answer in seven at 60 times the
    /// others), not the step queueing; counted whole, such answers made windows of a few
    /// answers swing by 16 times and the probe read noise. Nor does one end a probe up.
    fn window(&self, took: u64, tolerated: u64, floor: u64) {
        let most = tolerated.saturating_add(floor);
        let Some(mut probe) = self.probe.try_lock() else {
            return;
        };
        let limit = self.limit();
        if probe.at != limit {
            // Moved by another rule (a queue seen) or a lost race: a new window here; a probe
            // under way ends as failed.
            probe.restart(limit);
        }
        if let Some((held, _, probed, true)) = probe.from {
            if probed > held && took > tolerated && took <= most {
                // A probe up from answers on time, and this one delayed: the higher limit
                // queues (no need to wait for the window's mean).
                probe.from = None;
                probe.failed(true);
                probe.restart(held);
                self.limit.store(held << 8, Ordering::Relaxed);
                return;
            }
        }
        probe.n += 1;
        probe.took = probe.took.saturating_add(took.min(most));
        probe.tolerated = probe.tolerated.saturating_add(tolerated);
        if probe.n < window_len(limit) {
            return;
        }
        // A full window: the cuts before it stand.
        probe.cut_from = 0;
        let next = probe.closed(limit, self.ceiling);
        probe.restart(next);
        if next != limit {
            self.limit.store(next << 8, Ordering::Relaxed);
        }
    }
}
