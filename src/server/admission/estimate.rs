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

use std::time::Duration;

use crate::sync::{AtomicU64, Ordering};

/// The number of slots: routes are hashed into this many (a power of two), 256 lines of
/// 128 bytes whatever the traffic. A slot learns for one route at a time (its full hash is
/// kept): a route whose slot another holds is cold (admitted, and counted) until it takes the
/// slot over, which takes [`warm_up`](super::Admission::warm_up) answers of that route with no
/// answer of the holder between them: a flood of distinct paths, each answered once, never
/// takes a warm route's slot.
pub const SLOTS: usize = 256;

/// One credit unit per request is `ratio * CREDIT_UNIT`; a rejection costs `CREDIT_UNIT`.
pub const CREDIT_UNIT: u64 = 100;

/// The cap's window: two halves of this many seconds (Finagle's `DeadlineFilter`: 10 s).
pub const HALF_WINDOW_SECS: u64 = 5;

/// One doomed request in this many is let run anyway (a probe): what keeps a route's
/// estimate learning when every caller's budget is below it (the route may have got faster).
pub const PROBE_EVERY: u64 = 32;

/// The steps of the running quantile, in 1/65536 of the estimate: up by `gain * q` when a
/// sample is above it, down by `gain * (1 - q)` when at or below. In equilibrium the share
/// of samples at or below the estimate is `q`.
#[derive(Debug, Clone, Copy)]
pub struct Steps {
    up: u64,
    down: u64,
}

impl Steps {
    /// The steps for quantile `q` (in `(0, 1)`) and gain `gain` (in `(0, 1)`).
    pub fn new(q: f64, gain: f64) -> Steps {
        let scale = 65536.0;
        Steps {
            up: (gain * q * scale).round().max(1.0) as u64,
            down: (gain * (1.0 - q) * scale).round().max(1.0) as u64,
        }
    }
}

/// One route's slot, alone on its cache lines: its words are written by the route's answers
/// only (and by the answers of a route taking it over), so two routes never bounce one line
/// between cores.
#[repr(align(128))]
#[derive(Debug, Default)]
pub struct Slot {
    /// The hash of the route whose estimate this is ([`route_hash`], odd) once it is warm;
    /// the hash less its low bit while it warms up; 0: nobody's yet. One load and compare
    /// tell a request whether the estimate is its route's and warm.
    route: AtomicU64,
    /// The running quantile, in nanoseconds (0 before the first sample): fine enough that a
    /// step of a sub-millisecond estimate is not rounded to nothing.
    estimate: AtomicU64,
    /// A fast follower of the recent answers, in nanoseconds: up at once to a longer answer,
    /// half-way down to a shorter one. The need is the smaller of it and the quantile: a
    /// slow start (or a slow phase) is forgotten in a few answers, a lone slow answer does
    /// not raise the need (the quantile moves a step).
    recent: AtomicU64,
    /// The route's pace, in nanoseconds: down at once to a shorter answer, a quarter of the
    /// way up to a longer one (the mirror of `recent`). What paces the queue's delay bound:
    /// a route that sped up drains its queue at its new pace at once, while the need (which
    /// judges budgets) comes down half-way an answer; one slow answer among fast ones
    /// (scheduling noise) does not close the queue, a handler that queues does in a few.
    pace: AtomicU64,
    /// The route's no-load duration, in nanoseconds: the least answer, rising by 1/1024 an
    /// answer while the limit holds nothing back, and set by an answer that ran alone (so a route that truly got slower is
    /// followed). The adaptive limit compares each answer with it.
    floor: AtomicU64,
    /// Answered samples seen, counted up to the warm-up threshold only.
    samples: AtomicU64,
    /// The rejection credit: a sliding window of two halves (see [`Slot::spend`]).
    credit: AtomicU64,
    /// A route answered in a slot another holds: its hash (0: none).
    candidate: AtomicU64,
    /// The candidate's answers in a row (no answer of the holder between them).
    candidate_samples: AtomicU64,
    /// The candidate's running quantile, in nanoseconds.
    candidate_estimate: AtomicU64,
    /// Doomed requests seen (every [`PROBE_EVERY`]th is let run).
    doomed: AtomicU64,
    /// Requests admitted while their route was cold (no estimate of theirs here).
    cold: AtomicU64,
    /// The least answer of the current window of [`LOW_WINDOW`] answers that taught the
    /// limit (0: none yet), and the count of that window's answers.
    low_cur: AtomicU64,
    low_n: AtomicU64,
    /// The least answer of the window before (0: none).
    low_prev: AtomicU64,
}

/// The answers of one window of the recent minimum ([`Slot::low`]).
pub const LOW_WINDOW: u64 = 8;

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

    /// An answer of `route` while the limit held nothing back: the floor rises by 1/1024
    /// (never under a sustained overload, where every answer waits behind others).
    /// The caller has read the floor as `route`'s ([`floor`]): a take-over racing it may
    /// leave the step in the new holder's floor (a bounded error, as a lost step).
    pub fn drift(&self, floor: u64) {
        self.floor
            .store(floor + (floor >> 10) + 1, Ordering::Relaxed);
    }

    /// An answer of `route` that ran alone (nothing else in flight): its duration is the
    /// route's no-load duration.
    /// The caller has read the floor as the route's ([`floor`]), as for [`Slot::drift`].
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

    /// The negative control of the pace's model (loom only): an answer of `x` that moves the
    /// pace in two stores, to the answer and then back to a quarter of the way up: a racing
    /// reader sees a slow answer whole, a value no whole update gives (one slow answer would
    /// close the queue).
    #[cfg(shared_headers_loom)]
    pub fn pace_broken(&self, x: u64) {
        let pace = self.pace.load(Ordering::Relaxed);
        self.pace.store(x, Ordering::Relaxed);
        if x > pace && pace != 0 {
            self.pace.store(pace + (x - pace) / 4, Ordering::Relaxed);
        }
    }

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

    /// Learns from one answered duration of `route`. Loads and stores, no
    /// read-modify-write: two answers of one route racing lose one step, which a running
    /// quantile shrugs off. An answer of another route than the slot's counts toward its
    /// taking the slot over (see [`SLOTS`]).
    #[inline]
    pub fn learn(&self, route: u64, took_nanos: u64, steps: Steps, warm: u64) {
        let x = took_nanos.clamp(1, MAX_NANOS);
        let owner = self.route.load(Ordering::Relaxed);
        if owner != route {
            self.learn_cold(owner, route, x, steps, warm);
            return;
        }
        let _ = self.learn_warm(x, steps);
    }

    /// [`Slot::learn`] by the slot's warm holder (checked by the caller), `x` clamped: the
    /// floor after it.
    #[inline]
    fn learn_warm(&self, x: u64, steps: Steps) -> u64 {
        step(&self.estimate, x, steps);
        let floor = self.follow(x);
        if self.candidate_samples.load(Ordering::Relaxed) != 0 {
            self.candidate_samples.store(0, Ordering::Relaxed);
        }
        floor
    }

    /// The recent follower and the floor after an answer of `x`: the floor after it.
    #[inline]
    fn follow(&self, x: u64) -> u64 {
        let recent = self.recent.load(Ordering::Relaxed);
        let next = if x >= recent {
            x
        } else {
            recent - (recent - x) / 2
        };
        self.recent.store(next, Ordering::Relaxed);
        let pace = self.pace.load(Ordering::Relaxed);
        let pace = if x <= pace || pace == 0 {
            x
        } else {
            pace + (x - pace) / 4
        };
        self.pace.store(pace, Ordering::Relaxed);
        let floor = self.floor.load(Ordering::Relaxed);
        if x < floor {
            self.floor.store(x, Ordering::Relaxed);
            x
        } else {
            floor
        }
    }

    /// An answer of a route that is not warm here (out of line: the hot path is the
    /// warm owner's).
    #[cold]
    #[inline(never)]
    fn learn_cold(&self, owner: u64, route: u64, x: u64, steps: Steps, warm: u64) {
        if owner == route & !1 {
            // Warming up here.
            step(&self.estimate, x, steps);
            let _ = self.follow(x);
            if self.samples.fetch_add(1, Ordering::Relaxed) + 1 >= warm {
                self.route.store(route, Ordering::Release);
            }
        } else if owner == 0 {
            self.seed(route, x, warm);
        } else if self.candidate.load(Ordering::Relaxed) == route {
            step(&self.candidate_estimate, x, steps);
            if self.candidate_samples.fetch_add(1, Ordering::Relaxed) + 1 >= warm {
                // The holder was not answered during a whole warm-up: the slot is the
                // candidate's, warm, with what it learned.
                let q = self.candidate_estimate.load(Ordering::Relaxed);
                self.estimate.store(q, Ordering::Relaxed);
                self.recent.store(q, Ordering::Relaxed);
                self.pace.store(x, Ordering::Relaxed);
                self.floor.store(x.min(q), Ordering::Relaxed);
                self.samples.store(warm, Ordering::Relaxed);
                self.candidate.store(0, Ordering::Relaxed);
                self.candidate_samples.store(0, Ordering::Relaxed);
                self.route.store(route, Ordering::Release);
            }
        } else {
            self.candidate_estimate.store(x, Ordering::Relaxed);
            self.candidate_samples.store(1, Ordering::Relaxed);
            self.candidate.store(route, Ordering::Relaxed);
        }
    }

    /// The first answer in an empty slot: its route's now, seeded with its sample.
    fn seed(&self, route: u64, x: u64, warm: u64) {
        self.estimate.store(x, Ordering::Relaxed);
        self.recent.store(x, Ordering::Relaxed);
        self.pace.store(x, Ordering::Relaxed);
        self.floor.store(x, Ordering::Relaxed);
        self.samples.store(1, Ordering::Relaxed);
        let owner = if warm <= 1 { route } else { route & !1 };
        self.route.store(owner, Ordering::Release);
    }

    /// Learns from a duration known only as a lower bound (a request cut by its deadline
    /// while it ran): it can only raise the estimate, by a step, or to the bound when the
    /// answer before was as slow (two cuts in a row);
    /// it counts toward a warm-up (the route is at least that slow), never lowers anything.
    #[inline]
    pub fn learn_at_least(&self, route: u64, took_nanos: u64, steps: Steps, warm: u64) {
        let x = took_nanos.clamp(1, MAX_NANOS);
        if self.route.load(Ordering::Relaxed) != route {
            self.learn(route, x, steps, warm);
            return;
        }
        // The recent follower up to the bound at once; the quantile a step, or up to the
        // bound at once when the answer before was as slow (the follower at least 7/8 of
        // the bound: a second cut in a row). So a route that got slower than its callers'
        // budgets is refused from its second timeout on, not after a hundred steps of the
        // quantile, and a lone slow request among fast ones (a bimodal route) moves it a
        // step only.
        let before = self.recent.load(Ordering::Relaxed);
        if x > before {
            self.recent.store(x, Ordering::Relaxed);
        }
        if x > self.estimate.load(Ordering::Relaxed) {
            if before >= x - x / 8 {
                self.estimate.store(x, Ordering::Relaxed);
            } else {
                step(&self.estimate, x, steps);
            }
        }
    }
}

/// The largest estimate, in nanoseconds (2^47: 39 hours; a budget longer is always enough).
const MAX_NANOS: u64 = 1 << 47;

/// One step of a running quantile held in `word` toward `x`.
#[inline]
fn step(word: &AtomicU64, x: u64, steps: Steps) {
    // Never 0 once the slot has an owner (seeded with a sample of at least 1).
    let q = word.load(Ordering::Relaxed);
    // `q` is at most `MAX_NANOS` (2^47 ns, 39 hours) and a step below 2^16: the products
    // fit in 64 bits.
    let next = if x > q {
        (q + ((q * steps.up) >> 16) + 1).min(x)
    } else {
        // At least one unit down: a step that rounds to nothing would pin the estimate.
        (q - ((q * steps.down) >> 16) - 1).max(1)
    };
    word.store(next, Ordering::Relaxed);
}

/// `d` in nanoseconds, at most [`MAX_NANOS`] (no 128-bit arithmetic, no saturating steps:
/// whole seconds past `MAX_NANOS` are `MAX_NANOS`).
#[inline]
pub fn nanos(d: Duration) -> u64 {
    const MAX_SECS: u64 = MAX_NANOS / 1_000_000_000;
    if d.as_secs() > MAX_SECS {
        return MAX_NANOS;
    }
    (d.as_secs() * 1_000_000_000 + u64::from(d.subsec_nanos())).min(MAX_NANOS)
}

/// Whether `d` is shorter than `nanos` (at most [`MAX_NANOS`]): [`nanos`] without its
/// saturation (a `d` of more than `MAX_NANOS` in whole seconds is not).
#[inline]
pub fn below(d: Duration, nanos: u64) -> bool {
    const MAX_SECS: u64 = MAX_NANOS / 1_000_000_000;
    d.as_secs() <= MAX_SECS && d.as_secs() * 1_000_000_000 + u64::from(d.subsec_nanos()) < nanos
}

/// The slot of a route's hash ([`route_hash`]): its top 8 bits (256 slots).
#[inline]
pub fn slot_of(route: u64) -> usize {
    (route >> 56) as usize & (SLOTS - 1)
}

/// The second slot a route may learn in (two choices, as cuckoo hashing's): the next 8 bits
/// of its hash, another slot than [`slot_of`]'s.
#[inline]
pub fn alt_of(route: u64) -> usize {
    let a = slot_of(route);
    let b = (route >> 48) as usize & (SLOTS - 1);
    if b == a { b ^ 1 } else { b }
}

/// What `route` needs once warm, in its first slot or its second (`None` while cold).
#[inline]
pub fn need(table: &[Slot], route: u64) -> Option<Duration> {
    match need_nanos(table, route) {
        0 => None,
        need => Some(Duration::from_nanos(need)),
    }
}

/// [`need`] in nanoseconds (0 while cold).
#[inline]
pub fn need_nanos(table: &[Slot], route: u64) -> u64 {
    match table[slot_of(route)].need_nanos(route) {
        0 => need_alt(table, route),
        need => need,
    }
}

/// The negative control of the two-slot lookup's model (loom only): [`need`] by the slot's
/// index alone, whoever is warm there.
#[cfg(shared_headers_loom)]
pub fn need_by_index(table: &[Slot], route: u64) -> Option<Duration> {
    let slot = &table[slot_of(route)];
    let owner = slot.route.load(Ordering::Relaxed);
    if owner & 1 == 1 {
        slot.need(owner)
    } else {
        need(table, route)
    }
}

/// [`need`] in the route's second slot (out of line: most routes hold their first).
#[cold]
#[inline(never)]
fn need_alt(table: &[Slot], route: u64) -> u64 {
    table[alt_of(route)].need_nanos(route)
}

/// The slot `route` learns in (warm or warming) and its no-load duration there (0: none,
/// the route holds neither slot), in nanoseconds.
#[inline]
pub fn floor(table: &[Slot], route: u64) -> (&Slot, u64) {
    let a = &table[slot_of(route)];
    if a.route.load(Ordering::Relaxed) | 1 == route {
        return (a, a.floor.load(Ordering::Relaxed));
    }
    let b = &table[alt_of(route)];
    (b, b.floor(route))
}

/// The slot `route` learns in (warm or warming): its first unless its second is its.
#[inline]
pub fn home(table: &[Slot], route: u64) -> &Slot {
    let a = &table[slot_of(route)];
    if a.route.load(Ordering::Relaxed) | 1 == route {
        a
    } else {
        &table[alt_of(route)]
    }
}

/// Learns from one answered duration of `route` in its slot ([`Slot::learn`]): its first
/// slot when it holds it (the hot path: that slot and its floor after the answer, what the
/// limit's lesson reads, returned so that it is not looked up again), else
/// [`learn_elsewhere`] (`None`).
#[inline]
pub fn learn(
    table: &[Slot],
    route: u64,
    took_nanos: u64,
    steps: Steps,
    warm: u64,
) -> Option<(&Slot, u64)> {
    let a = &table[slot_of(route)];
    if a.route.load(Ordering::Relaxed) == route {
        Some((a, a.learn_warm(took_nanos.clamp(1, MAX_NANOS), steps)))
    } else {
        learn_elsewhere(table, route, took_nanos, steps, warm);
        None
    }
}

/// An answer of a route that is not warm in its first slot: warm in its second, warming in
/// either, seeding an empty one (its first first), else a candidate in both (the one whose
/// holder is not answered between its answers is taken over: a route sharing a busy
/// route's slot warms in its other one). A route stays cold only while routes answered
/// between each of its answers hold both its slots (counted in
/// [`admitted_cold`](super::AdmissionCounts::admitted_cold)).
#[cold]
#[inline(never)]
pub fn learn_elsewhere(table: &[Slot], route: u64, took_nanos: u64, steps: Steps, warm: u64) {
    let (a, b) = (&table[slot_of(route)], &table[alt_of(route)]);
    let (owner_a, owner_b) = (
        a.route.load(Ordering::Relaxed),
        b.route.load(Ordering::Relaxed),
    );
    if owner_b | 1 == route {
        b.learn(route, took_nanos, steps, warm);
    } else if owner_a | 1 == route || owner_a == 0 {
        a.learn(route, took_nanos, steps, warm);
    } else if owner_b == 0 {
        b.learn(route, took_nanos, steps, warm);
    } else {
        a.learn(route, took_nanos, steps, warm);
        if a.route.load(Ordering::Relaxed) != route {
            b.learn(route, took_nanos, steps, warm);
        }
    }
}

/// [`Slot::learn_at_least`] in `route`'s slot (a candidate in both while it has none).
pub fn learn_at_least(table: &[Slot], route: u64, took_nanos: u64, steps: Steps, warm: u64) {
    let (a, b) = (&table[slot_of(route)], &table[alt_of(route)]);
    if a.route.load(Ordering::Relaxed) == route {
        a.learn_at_least(route, took_nanos, steps, warm);
    } else if b.route.load(Ordering::Relaxed) == route {
        b.learn_at_least(route, took_nanos, steps, warm);
    } else {
        learn_elsewhere(table, route, took_nanos.clamp(1, MAX_NANOS), steps, warm);
    }
}

/// The hash of a route: the method and the route (axum's `MatchedPath`, else the path).
/// FNV-style over 8-byte words: a few instructions per 8 bytes, no allocation. Low bits 0b11: see
/// [`Slot`]'s route word.
#[inline]
pub fn route_hash(method: &[u8], route: &[u8]) -> u64 {
    route_hash_coded(method_code(method), route)
}

/// [`route_hash`] of a request's method: GET's and POST's codes without `Method::as_str`'s
/// jump table (the admitted path's most common methods), the same hash.
#[inline]
pub fn method_route_hash(method: &http::Method, route: &[u8]) -> u64 {
    let code = if *method == http::Method::GET {
        const { method_code(b"GET") }
    } else if *method == http::Method::POST {
        const { method_code(b"POST") }
    } else {
        method_code(method.as_str().as_bytes())
    };
    route_hash_coded(code, route)
}

/// The method by its length, first, second and last bytes: no loop, and every standard
/// method apart (GET, PUT, POST, HEAD, PATCH, TRACE, DELETE, OPTIONS, CONNECT).
#[inline]
const fn method_code(method: &[u8]) -> u64 {
    let n = method.len();
    let first = if n > 0 { method[0] as u64 } else { 0 };
    let second = if n > 1 { method[1] as u64 } else { 0 };
    let last = if n > 0 { method[n - 1] as u64 } else { 0 };
    n as u64 | first << 8 | second << 16 | last << 24
}

/// [`route_hash`] from the method's code ([`method_code`]).
#[inline]
fn route_hash_coded(code: u64, route: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h: u64 = (0xcbf2_9ce4_8422_2325 ^ code).wrapping_mul(K);
    let mut chunks = route.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
    }
    // The tail byte by byte (at most 7): a copy of a variable length would be a call.
    let rest = chunks.remainder();
    let word = rest
        .iter()
        .fold(rest.len() as u64, |w, &b| (w << 8) | u64::from(b));
    h = (h.rotate_left(5) ^ word).wrapping_mul(K);
    // Odd (its warming mark, less the low bit, differs), and never 0 even less its low bit
    // (the empty slot's mark).
    h | 0b11
}

mod credit;
#[cfg(test)]
mod tests;
