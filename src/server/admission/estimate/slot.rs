//! One route's slot: its words, what each means, and what a request reads of them (the
//! route's need, floor and pace), in nanoseconds up to [`MAX_NANOS`].
//!
//! It decides whether the estimate a slot holds is a given route's and warm (one load of the
//! route word, `Acquire`, and a compare), and converts a budget to the slot's unit. It relies
//! on the writers ([`learn`](mod@super::learn)) storing the route word `Release` whenever it names
//! a new holder, after the words it publishes.

use std::time::Duration;

use crate::sync::{AtomicU64, Ordering};

/// One route's slot, alone on its cache lines: its words are written by the route's answers
/// only (and by the answers of a route taking it over), so two routes never bounce one line
/// between cores.
#[repr(align(128))]
#[derive(Debug, Default)]
pub struct Slot {
    /// The hash of the route whose estimate this is
    /// ([`route_hash`](super::route::route_hash), odd) once it is warm; the hash less its
    /// low bit while it warms up; 0: nobody's yet. One load and compare
    /// tell a request whether the estimate is its route's and warm.
    pub(super) route: AtomicU64,
    /// The running quantile, in nanoseconds (0 before the first sample): fine enough that a
    /// step of a sub-millisecond estimate is not rounded to nothing.
    pub(super) estimate: AtomicU64,
    /// A fast follower of the recent answers, in nanoseconds: up at once to a longer answer,
    /// half-way down to a shorter one. The need is the smaller of it and the quantile: a
    /// slow start (or a slow phase) is forgotten in a few answers, a lone slow answer does
    /// not raise the need (the quantile moves a step).
    pub(super) recent: AtomicU64,
    /// The route's pace, in nanoseconds: down at once to a shorter answer, a quarter of the
    /// way up to a longer one (the mirror of `recent`). What paces the queue's delay bound:
    /// a route that sped up drains its queue at its new pace at once, while the need (which
    /// judges budgets) comes down half-way an answer; one slow answer among fast ones
    /// (scheduling noise) does not close the queue, a handler that queues does in a few.
    pub(super) pace: AtomicU64,
    /// The route's no-load duration, in nanoseconds: the least answer, rising by 1/1024 an
    /// answer while the limit holds nothing back, and set by an answer that ran alone (so a
    /// route that truly got slower is followed). The adaptive limit compares each answer with it.
    pub(super) floor: AtomicU64,
    /// Answered samples seen, counted up to the warm-up threshold only.
    pub(super) samples: AtomicU64,
    /// The rejection credit: a sliding window of two halves (see [`Slot::spend`]).
    pub(super) credit: AtomicU64,
    /// A route answered in a slot another holds: its hash (0: none).
    pub(super) candidate: AtomicU64,
    /// The candidate's answers in a row (no answer of the holder between them).
    pub(super) candidate_samples: AtomicU64,
    /// The candidate's running quantile, in nanoseconds.
    pub(super) candidate_estimate: AtomicU64,
    /// Doomed requests seen (every [`PROBE_EVERY`](super::counts::PROBE_EVERY)th is let
    /// run).
    pub(super) doomed: AtomicU64,
    /// Requests admitted while their route was cold (no estimate of theirs here).
    pub(super) cold: AtomicU64,
    /// The least answer of the current window of [`LOW_WINDOW`](super::lesson::LOW_WINDOW)
    /// answers that taught the limit (0: none yet), and the count of that window's answers.
    pub(super) low_cur: AtomicU64,
    pub(super) low_n: AtomicU64,
    /// The least answer of the window before (0: none).
    pub(super) low_prev: AtomicU64,
}

impl Slot {
    /// What `route` needs once it is warm: the smaller of its running quantile and its
    /// recent answers (`None` before, or while the slot learns for another route: a cold
    /// route admits everything, counted).
    #[cfg(any(test, shared_headers_loom))]
    pub fn need(&self, route: u64) -> Option<Duration> {
        match self.need_nanos(route) {
            0 => None,
            need => Some(Duration::from_nanos(need)),
        }
    }

    /// [`Slot::need`] in nanoseconds, 0 while cold (a warm need is at least 1 ns: every
    /// sample is, and a step never goes below 1): what the admitted path compares, with no
    /// `Duration` made.
    #[inline]
    pub fn need_nanos(&self, route: u64) -> u64 {
        if self.route.load(Ordering::Acquire) != route {
            return 0;
        }
        let q = self.estimate.load(Ordering::Relaxed);
        let recent = self.recent.load(Ordering::Relaxed);
        q.min(recent)
    }

    /// The negative control of the two-slot model (loom only): [`Slot::need`] with the
    /// route word loaded `Relaxed`, which can read the route warm and its estimate not yet.
    #[cfg(shared_headers_loom)]
    pub fn need_relaxed(&self, route: u64) -> Option<Duration> {
        if self.route.load(Ordering::Relaxed) != route {
            return None;
        }
        let q = self.estimate.load(Ordering::Relaxed);
        let recent = self.recent.load(Ordering::Relaxed);
        Some(Duration::from_nanos(q.min(recent)))
    }

    /// The running quantile of `route` (`None` unless the route is warm here).
    #[cfg(test)]
    pub fn estimate(&self, route: u64) -> Option<Duration> {
        if self.route.load(Ordering::Relaxed) != route {
            return None;
        }
        Some(Duration::from_nanos(self.estimate.load(Ordering::Relaxed)))
    }

    /// The no-load duration of `route` in nanoseconds (0 unless the route holds the slot).
    #[inline]
    pub fn floor(&self, route: u64) -> u64 {
        if self.route.load(Ordering::Relaxed) | 1 != route {
            return 0;
        }
        self.floor.load(Ordering::Relaxed)
    }

    /// The pace of `route` in nanoseconds (0 unless the route holds the slot).
    #[inline]
    pub fn pace(&self, route: u64) -> u64 {
        if self.route.load(Ordering::Relaxed) | 1 != route {
            return 0;
        }
        self.pace.load(Ordering::Relaxed)
    }
}

/// The largest estimate, in nanoseconds (2^47: 39 hours; a budget longer is always enough).
pub(super) const MAX_NANOS: u64 = 1 << 47;

/// `d` in nanoseconds, at most [`MAX_NANOS`] (no 128-bit arithmetic, no saturating steps:
/// whole seconds past `MAX_NANOS` are `MAX_NANOS`).
#[inline]
pub fn nanos(d: Duration) -> u64 {
    const MAX_SECS: u64 = MAX_NANOS / 1_000_000_000;
    // Below `MAX_SECS` whole seconds the sum is below `MAX_NANOS`: no `min` on the common
    // path.
    if d.as_secs() >= MAX_SECS {
        return nanos_long(d);
    }
    d.as_secs() * 1_000_000_000 + u64::from(d.subsec_nanos())
}

/// [`nanos`] of `MAX_NANOS`'s whole seconds or more (inline, laid out off the common path).
#[cold]
#[inline(always)]
fn nanos_long(d: Duration) -> u64 {
    const MAX_SECS: u64 = MAX_NANOS / 1_000_000_000;
    if d.as_secs() > MAX_SECS {
        return MAX_NANOS;
    }
    (MAX_SECS * 1_000_000_000 + u64::from(d.subsec_nanos())).min(MAX_NANOS)
}

/// Whether `d` is shorter than `nanos` (at most [`MAX_NANOS`]): [`nanos`] without its
/// saturation. Whole seconds past `nanos / 2^29` (more than `nanos / 10^9`) are not: the
/// common case (a budget of seconds, a need of milliseconds) with no multiplication.
#[inline]
pub fn below(d: Duration, nanos: u64) -> bool {
    debug_assert!(nanos <= MAX_NANOS);
    // At most 2^18 whole seconds past here (`nanos` is at most 2^47): no overflow.
    d.as_secs() <= nanos >> 29 && d.as_secs() * 1_000_000_000 + u64::from(d.subsec_nanos()) < nanos
}
