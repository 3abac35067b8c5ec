//! The per-route estimate of how long a request needs: a fixed table of slots, each holding
//! a running quantile of its route's answered durations (stochastic approximation), its
//! sample count, and its credit of rejections (the cap).
//!
//! No loom model here, and why none is needed: every word of a slot stands alone and orders
//! nothing else (`Relaxed` throughout; no other memory is published through it, no reader
//! infers anything about another word from it):
//!
//! * the cap's credit is spent by one read-modify-write (`fetch_update` with `checked_sub`:
//!   a compare-and-swap loop on one word), so two racing rejections can never both spend the
//!   last unit: the word's modification order serializes them, whatever the ordering. Earning
//!   is a load then a `fetch_add`: racing requests may each see the credit below its maximum
//!   and overshoot it by at most one gain per racing thread, a bound on a burst, not a claim;
//! * the estimate is a load and a store: two answers of one route racing lose one step of the
//!   running quantile (by design; the next answer moves it again), and the sample count may
//!   pass the warm-up threshold by the threads racing at it. Neither is a protocol between
//!   threads: any value either word holds is a valid estimate or count.

use std::time::Duration;

use crate::sync::{AtomicU64, Ordering};

/// The number of slots: routes are hashed into this many (a power of two). Two routes that
/// share a slot share an estimate; 64 slots keep a service's handful of hot routes apart and
/// cost 64 cache lines whatever the traffic.
pub(crate) const SLOTS: usize = 64;

/// One credit unit per request is `ratio * CREDIT_UNIT`; a rejection costs `CREDIT_UNIT`.
pub(crate) const CREDIT_UNIT: u64 = 1_000_000;

/// The steps of the running quantile, in 1/65536 of the estimate: up by `gain * q` when a
/// sample is above it, down by `gain * (1 - q)` when at or below. In equilibrium the share
/// of samples at or below the estimate is `q`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Steps {
    up: u64,
    down: u64,
}

impl Steps {
    /// The steps for quantile `q` (in `(0, 1)`) and gain `gain` (in `(0, 1)`).
    pub(crate) fn new(q: f64, gain: f64) -> Steps {
        let scale = 65536.0;
        Steps {
            up: (gain * q * scale).round().max(1.0) as u64,
            down: (gain * (1.0 - q) * scale).round().max(1.0) as u64,
        }
    }
}

/// One route's slot, alone on its cache line: its estimate is written by the route's answers
/// only, so two routes never bounce one line between cores.
#[repr(align(64))]
#[derive(Debug, Default)]
pub(crate) struct Slot {
    /// The running quantile, in microseconds (0 before the first sample).
    estimate: AtomicU64,
    /// Answered samples seen, counted up to the warm-up threshold only.
    samples: AtomicU64,
    /// The rejection credit (see [`CREDIT_UNIT`]).
    credit: AtomicU64,
}

impl Slot {
    /// The estimate, once `warm` samples were seen (`None` before: a cold route admits
    /// everything).
    #[inline]
    pub(crate) fn estimate(&self, warm: u64) -> Option<Duration> {
        if self.samples.load(Ordering::Relaxed) < warm {
            return None;
        }
        Some(Duration::from_micros(self.estimate.load(Ordering::Relaxed)))
    }

    /// The estimate in microseconds whatever the warm-up (for the handle).
    pub(crate) fn raw(&self) -> (u64, u64) {
        (
            self.estimate.load(Ordering::Relaxed),
            self.samples.load(Ordering::Relaxed),
        )
    }

    /// Learns from one answered duration. A load and a store, no read-modify-write: two
    /// answers of one route racing lose one step, which a running quantile shrugs off.
    #[inline]
    pub(crate) fn learn(&self, took_micros: u64, steps: Steps, warm: u64) {
        let x = took_micros.clamp(1, MAX_MICROS);
        let q = self.estimate.load(Ordering::Relaxed);
        // `q` is at most `MAX_MICROS` (2^47 µs, 4.5 years) and a step below 2^16: the
        // products fit in 64 bits.
        let next = if q == 0 {
            x
        } else if x > q {
            (q + ((q * steps.up) >> 16) + 1).min(x)
        } else {
            (q - ((q * steps.down) >> 16)).max(1)
        };
        self.estimate.store(next, Ordering::Relaxed);
        if self.samples.load(Ordering::Relaxed) < warm {
            self.samples.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Learns from a duration known only as a lower bound (a request cut by its deadline):
    /// it can only raise the estimate, and does when the bound is above it.
    #[inline]
    pub(crate) fn learn_at_least(&self, took_micros: u64, steps: Steps, warm: u64) {
        if took_micros > self.estimate.load(Ordering::Relaxed) {
            self.learn(took_micros, steps, warm);
        }
    }

    /// One request's credit toward rejections: `gain` units, up to `max`. Only a load once
    /// the credit is full (the usual state while nothing is rejected).
    #[inline]
    pub(crate) fn earn(&self, gain: u64, max: u64) {
        if self.credit.load(Ordering::Relaxed) < max {
            self.credit.fetch_add(gain, Ordering::Relaxed);
        }
    }

    /// Spends one rejection's credit; `false` (nothing spent) when the cap is reached.
    pub(crate) fn spend(&self) -> bool {
        self.credit
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                c.checked_sub(CREDIT_UNIT)
            })
            .is_ok()
    }
}

/// The largest estimate, in microseconds (2^47: 4.5 years).
const MAX_MICROS: u64 = 1 << 47;

/// `d` in microseconds, at most [`MAX_MICROS`] (no 128-bit arithmetic).
#[inline]
pub(crate) fn micros(d: Duration) -> u64 {
    d.as_secs()
        .saturating_mul(1_000_000)
        .saturating_add(u64::from(d.subsec_micros()))
        .min(MAX_MICROS)
}

/// The slot of a route: a hash of the method and the route (axum's `MatchedPath`, else the
/// path). FNV-style over 8-byte words: a few instructions per 8 bytes, no allocation.
#[inline]
pub(crate) fn slot_of(method: &[u8], route: &[u8]) -> usize {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    // The method by its length, first, second and last bytes: no loop, and every standard
    // method apart (GET, PUT, POST, HEAD, PATCH, TRACE, DELETE, OPTIONS, CONNECT).
    let byte = |i: usize| u64::from(method.get(i).copied().unwrap_or(0));
    let code = method.len() as u64
        | byte(0) << 8
        | byte(1) << 16
        | byte(method.len().wrapping_sub(1)) << 24;
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
    (h >> 58) as usize & (SLOTS - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_constant_duration_is_learned_within_a_step() {
        let slot = Slot::default();
        let steps = Steps::new(0.9, 0.05);
        for _ in 0..200 {
            slot.learn(50_000, steps, 16);
        }
        let estimate = slot.estimate(16).unwrap();
        assert!(estimate >= Duration::from_millis(47), "{estimate:?}");
        assert!(estimate <= Duration::from_millis(53), "{estimate:?}");
    }

    #[test]
    fn the_running_quantile_settles_near_the_quantile() {
        // Durations 1..=100 ms in a fixed shuffled order: the 0.9-quantile is 90 ms.
        let slot = Slot::default();
        let steps = Steps::new(0.9, 0.02);
        let mut x: u64 = 7;
        let mut sum = 0.0;
        for i in 0..20_000 {
            x = (x * 37 + 11) % 100;
            slot.learn((x + 1) * 1000, steps, 1);
            if i >= 10_000 {
                sum += slot.estimate(1).unwrap().as_secs_f64();
            }
        }
        let mean = sum / 10_000.0;
        assert!((0.080..0.100).contains(&mean), "{mean}");
    }

    #[test]
    fn a_slower_route_is_followed_within_tens_of_samples() {
        let slot = Slot::default();
        let steps = Steps::new(0.9, 0.05);
        for _ in 0..100 {
            slot.learn(10_000, steps, 1);
        }
        let mut n = 0;
        while slot.estimate(1).unwrap() < Duration::from_millis(39) {
            slot.learn(40_000, steps, 1);
            n += 1;
        }
        assert!(n <= 40, "{n} samples to follow a route 4x slower");
    }

    #[test]
    fn cold_until_warm_and_capped_credit() {
        let slot = Slot::default();
        let steps = Steps::new(0.5, 0.05);
        slot.learn(5_000, steps, 2);
        assert_eq!(slot.estimate(2), None);
        slot.learn(5_000, steps, 2);
        assert!(slot.estimate(2).is_some());
        assert!(!slot.spend());
        for _ in 0..5 {
            slot.earn(CREDIT_UNIT / 5, 2 * CREDIT_UNIT);
        }
        assert!(slot.spend());
        assert!(!slot.spend());
    }

    #[test]
    fn routes_spread_over_slots() {
        let a = slot_of(b"GET", b"/users/{id}");
        let b = slot_of(b"GET", b"/orders/{id}");
        let c = slot_of(b"POST", b"/users/{id}");
        assert!(a < SLOTS && b < SLOTS && c < SLOTS);
        assert!(a != b || b != c);
    }
}
