//! What the in-flight limit's lesson reads and writes in a slot: the route's floor (its
//! no-load duration) drifting up while the limit holds nothing back or set by an answer that
//! ran alone, and the least of the recent answers (the delay of a queue in the handler).
//!
//! It decides nothing about admission: the limiter ([`Limiter`](super::super::Limiter))
//! judges with these values. It relies on the slot's words only (loads and stores: racing
//! answers lose one, as a step of the estimate), and on its caller having read the floor as
//! the route's ([`floor`](super::table::floor)).

use super::slot::{MAX_NANOS, Slot};
use crate::sync::Ordering;

/// The answers of one window of the recent minimum ([`Slot::low`]).
pub const LOW_WINDOW: u64 = 8;

impl Slot {
    /// An answer of `route` while the limit held nothing back: the floor rises by 1/1024
    /// (never under a sustained overload, where every answer waits behind others).
    /// The caller has read the floor as `route`'s ([`floor`](super::table::floor)): a
    /// take-over racing it may leave the step in the new holder's floor (a bounded error, as
    /// a lost step).
    pub fn drift(&self, floor: u64) {
        self.floor
            .store(floor + (floor >> 10) + 1, Ordering::Relaxed);
    }

    /// An answer of `route` that ran alone (nothing else in flight): its duration is the
    /// route's no-load duration.
    /// The caller has read the floor as the route's ([`floor`](super::table::floor)), as
    /// for [`Slot::drift`].
    pub fn alone(&self, took: u64) {
        self.floor
            .store(took.clamp(1, MAX_NANOS), Ordering::Relaxed);
    }

    /// The least of the recent answers (the current window of [`LOW_WINDOW`] with `took`,
    /// and the window before): what the adaptive limit reads as the delay of a queue in the
    /// handler (a queue delays every answer; a slow answer among fast ones is no queue).
    /// Loads and stores (racing answers lose one, as a step of the estimate).
    pub fn low(&self, took: u64) -> u64 {
        let took = took.max(1);
        let n = self.low_n.load(Ordering::Relaxed);
        let cur = match self.low_cur.load(Ordering::Relaxed) {
            0 => took,
            cur => cur.min(took),
        };
        let prev = self.low_prev.load(Ordering::Relaxed);
        if n + 1 >= LOW_WINDOW {
            self.low_prev.store(cur, Ordering::Relaxed);
            self.low_cur.store(0, Ordering::Relaxed);
            self.low_n.store(0, Ordering::Relaxed);
        } else {
            self.low_cur.store(cur, Ordering::Relaxed);
            self.low_n.store(n + 1, Ordering::Relaxed);
        }
        if prev == 0 { cur } else { cur.min(prev) }
    }

    /// The negative control of the recent minimum's model (loom only): [`Slot::low`] whose
    /// rotation clears the window before's least and then writes it, and whose read trusts
    /// that word, once past the first window, to be set (no check for 0): a racing answer
    /// reads the clear and reports a least of 0.
    #[cfg(shared_headers_loom)]
    pub fn low_broken(&self, took: u64) -> u64 {
        let took = took.max(1);
        let n = self.low_n.load(Ordering::Relaxed);
        let cur = match self.low_cur.load(Ordering::Relaxed) {
            0 => took,
            cur => cur.min(took),
        };
        let prev = self.low_prev.load(Ordering::Relaxed);
        if n + 1 >= LOW_WINDOW {
            self.low_prev.store(0, Ordering::Relaxed);
            self.low_prev.store(cur, Ordering::Relaxed);
            self.low_cur.store(0, Ordering::Relaxed);
            self.low_n.store(0, Ordering::Relaxed);
        } else {
            self.low_cur.store(cur, Ordering::Relaxed);
            self.low_n.store(n + 1, Ordering::Relaxed);
        }
        cur.min(prev)
    }
}
