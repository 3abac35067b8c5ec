//! A request that cannot finish in time (its budget below its route's need): refused, counted as
//! shed, or let run as a probe, one in
//! [`PROBE_EVERY`](crate::server::admission::estimate::PROBE_EVERY), so that the estimate keeps
//! learning; at arrival ([`Shared::reject`]) and at each freed permit for a waiter
//! ([`Shared::judge`]: expired, shed, spared or granted); and why a request was refused
//! ([`Refusal`]).
//!
//! It relies on the estimate (the need, the slot's probe count) and on the limiter's
//! [`Verdict`], and on nothing else of the request.

use std::time::{Duration, Instant};

use crate::server::admission::Shared;
use crate::server::admission::estimate::{self, Slot, nanos, slot_of};
use crate::server::admission::limiter::{Verdict, Waiter};
use crate::sync::Ordering;

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

impl Shared {
    /// A request whose `remaining` budget is below its route's `need`: whether to refuse
    /// it (counted either way). A budget spent is refused; one below the estimate too, but for one
    /// in [`PROBE_EVERY`](crate::server::admission::estimate::PROBE_EVERY), let run so that the
    /// estimate keeps learning (a route that got faster is seen).
    #[cold]
    pub(super) fn reject(
        &self,
        slot: &Slot,
        remaining: Duration,
        need: u64,
        waiting: bool,
    ) -> bool {
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
    pub(super) fn judge(&self, waiter: &Waiter) -> Verdict {
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
}
