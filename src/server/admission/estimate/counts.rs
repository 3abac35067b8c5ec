//! A slot's counters: doomed requests (one in [`PROBE_EVERY`] let run as a probe, what keeps
//! a route learning when every caller's budget is below its estimate) and requests admitted
//! while their route was cold.
//!
//! It decides which doomed request is a probe (one `fetch_add`: two racing doomed requests
//! never both miss it). It relies on the slot's words only.

use super::slot::Slot;
use crate::sync::Ordering;

/// One doomed request in this many is let run anyway (a probe): what keeps a route's
/// estimate learning when every caller's budget is below it (the route may have got faster).
pub const PROBE_EVERY: u64 = 32;

impl Slot {
    /// The negative control of the probe's model (loom only): [`Slot::probe`] as a load and
    /// a store, which two racing doomed requests can both pass with neither a probe.
    #[cfg(shared_headers_loom)]
    pub fn probe_broken(&self) -> bool {
        let n = self.doomed.load(Ordering::Relaxed);
        self.doomed.store(n + 1, Ordering::Relaxed);
        n % PROBE_EVERY == PROBE_EVERY - 1
    }

    /// Counts a request admitted while its route was cold (out of line: cold routes only).
    #[cold]
    #[inline(never)]
    pub fn admitted_cold(&self) {
        self.cold.fetch_add(1, Ordering::Relaxed);
    }

    /// The requests admitted cold so far.
    pub fn cold_count(&self) -> u64 {
        self.cold.load(Ordering::Relaxed)
    }

    /// A doomed request: whether it is a probe (let run: one in [`PROBE_EVERY`]).
    pub fn probe(&self) -> bool {
        self.doomed.fetch_add(1, Ordering::Relaxed) % PROBE_EVERY == PROBE_EVERY - 1
    }
}
