//! What the queue's lock guards ([`Queue`]): the waiters in deadline order, and the two
//! windows the overload rule reads: the work offered at the queue ([`Offered`]) and the
//! least wait of the waiters granted a permit ([`Sojourn`], CoDel's).
//!
//! It holds state and decides nothing: a grant's wait is recorded by dispatch
//! ([`permits`](super::permits)), the work offered is counted and read by
//! [`overload`](super::overload). It relies on [`waiter`](super::waiter) for the waiters it
//! holds.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::waiter::Waiter;

/// What the queue's lock guards.
#[derive(Debug, Default)]
pub(super) struct Queue {
    pub(super) waiters: BTreeMap<(u64, u64), Arc<Waiter>>,
    pub(super) seq: u64,
    pub(super) offered: Offered,
    pub(super) sojourn: Sojourn,
}

/// The least wait of the waiters granted a permit, over two halves of [`SOJOURN_HALF`]:
/// a queue whose least wait stays above a target for the whole window stands (CoDel's
/// test: a good queue drains within an interval), whatever the work offered says.
#[derive(Debug)]
pub(super) struct Sojourn {
    /// When the current half started.
    pub(super) since: Instant,
    /// The least wait of the current half and of the half before (ns; `u64::MAX`: no
    /// grant in it).
    pub(super) cur: u64,
    pub(super) prev: u64,
}

impl Default for Sojourn {
    fn default() -> Sojourn {
        Sojourn {
            since: Instant::now(),
            cur: u64::MAX,
            prev: u64::MAX,
        }
    }
}

impl Sojourn {
    /// Moves the halves on to `now`.
    pub(super) fn roll(&mut self, now: Instant) {
        if now >= self.since + SOJOURN_HALF {
            let one = now < self.since + 2 * SOJOURN_HALF;
            self.prev = if one { self.cur } else { u64::MAX };
            self.cur = u64::MAX;
            self.since = if one { self.since + SOJOURN_HALF } else { now };
        }
    }
}

/// A half of the sojourn's window (CoDel's interval, 100 ms, in two halves).
pub const SOJOURN_HALF: Duration = Duration::from_millis(50);

/// The work offered at the queue (requests that found every permit taken, each its route's need;
/// one of a cold route counts as the need of the request asking) in a sliding window of two halves
/// of [`OFFERED_HALF`](super::overload::OFFERED_HALF): what tells a burst (the work offered below
/// what the limit serves: the queue drains) from an overload (above it: the queue stands).
#[derive(Debug)]
pub(super) struct Offered {
    /// When the current half started (the first at the limiter's making).
    pub(super) since: Instant,
    /// The work of the current half and of the half before, in nanoseconds.
    pub(super) cur: u64,
    pub(super) prev: u64,
    /// The requests of cold routes in the current half and in the half before.
    pub(super) cur_cold: u64,
    pub(super) prev_cold: u64,
    /// Whether the half before was measured (the window spans it).
    pub(super) spans: bool,
    /// When a request was last counted (`None`: never).
    pub(super) last: Option<Instant>,
    /// When the busy spell after the last quiet spell began (its first request counted,
    /// or the window's restart since), the work counted since (each request its route's,
    /// nanoseconds) and the requests of cold routes among them (`None`: none began in the
    /// last two halves).
    pub(super) busy: Option<Instant>,
    pub(super) busy_work: u64,
    pub(super) busy_cold: u64,
    /// Whether slow start's cut in the busy spell found an overload ([`Limiter::trim`]):
    /// the spell is no batch, young or not.
    pub(super) busy_overload: bool,
    /// The spell's work counted a no-load duration or more after it began (nanoseconds):
    /// what kept coming after its first instant (a batch's requests all come in it).
    pub(super) busy_late: u64,
}

impl Default for Offered {
    fn default() -> Offered {
        Offered {
            since: Instant::now(),
            cur: 0,
            prev: 0,
            cur_cold: 0,
            prev_cold: 0,
            spans: false,
            last: None,
            busy: None,
            busy_work: 0,
            busy_cold: 0,
            busy_overload: false,
            busy_late: 0,
        }
    }
}
