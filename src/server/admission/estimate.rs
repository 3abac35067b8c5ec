//! The per-route estimate of how long a request needs: a fixed table of slots, each holding
//! the 64-bit hash of the route it learns for, a running quantile of that route's answered
//! durations (stochastic approximation), its sample count, and its credit of rejections (the
//! cap).
//!
//! The route word publishes the slot's other words: it is stored `Release` when it names a
//! new holder (seeded, warm, taken over) and loaded `Acquire` by [`Slot::need`], so a request
//! that reads its route warm reads the estimate its answers wrote, never the empty slot's 0
//! (with `Relaxed` there, the two-slot loom model reads a need of 0: a route just warm
//! admitting every caller; on x86 both orderings are plain moves). Every other word
//! stands alone and orders nothing else (`Relaxed`): the cap's credit is one word, spent by one
//! compare-and-swap loop (two racing refusals never both spend the last unit), earned by one
//! `fetch_add` into its top half (an overflow wraps that half to less, never into the other
//! fields); the estimate, the recent follower, the pace and the floor are loads and stores (two
//! racing answers lose a step, by design); the route word says whose estimate the slot
//! holds, and a take-over racing an answer of the old route may leave one of that
//! answer's values in the new route's estimate (a bounded, transient error of the kind a
//! lost step is). The models in `loom-tests/tests/admission.rs` check the claims that
//! matter, each with a negative control: the credit's cap holds under racing refusals and
//! earns (control: a spend as a load and a store, which spends the last unit twice); racing
//! answers of two routes leave one warm holder, its need within the answers' range (never
//! 0); the recent minimum reads only answers (control: a rotation that clears a word before
//! it writes it); a route contested for its first slot warms in its second, and a reader
//! racing its answers reads none or its own need, never 0 nor the other route's (controls:
//! the route word loaded `Relaxed`, and a lookup by the slot's index alone).
//!
//! The parts, each importing only those after it: [`table`] (a route's two slots, the lookup
//! of its need, which slot an answer teaches) → [`learn`](mod@learn) (what an answer does in
//! a slot: the running quantile, the followers, the floor, the holder) → [`slot`] (the words
//! and what a request reads of them, in nanoseconds); beside `learn`, each on [`slot`]
//! alone: [`lesson`] (the adaptive limit's floor and recent minimum), [`counts`] (probes,
//! cold admissions), [`credit`] (the cap); and [`route`] (the route's hash), which imports
//! none. This module holds no code: its `pub use` lines are the paths the rest of admission
//! (and the loom models) name.

mod counts;
mod credit;
mod learn;
mod lesson;
mod route;
mod slot;
mod table;

pub use self::credit::{CREDIT_UNIT, HALF_WINDOW_SECS};
pub use self::learn::Steps;
pub use self::route::{method_route_hash, route_hash};
pub use self::slot::{Slot, below, nanos};
pub use self::table::{
    SLOTS, floor, home, learn_at_least, learn_elsewhere, learn_home, need, need_nanos, slot_of,
};

// Named by the loom models (and, `PROBE_EVERY`, by admission's docs) only.
#[cfg(any(doc, shared_headers_loom))]
pub use self::counts::PROBE_EVERY;
#[cfg(shared_headers_loom)]
pub use self::lesson::LOW_WINDOW;
#[cfg(shared_headers_loom)]
pub use self::table::{alt_of, learn, need_by_index};
