//! How a slot learns from its route's answers: the running quantile's steps, the recent
//! follower, the pace and the floor after each answer, a lower bound from a request cut by
//! its deadline, and who holds the slot (seeded when empty, warming up, taken over by a
//! candidate whose answers came with none of the holder's between them).
//!
//! It decides every value a request later reads in the slot ([`slot`](super::slot)): loads
//! and stores, no read-modify-write but the warm-up counts, so two racing answers lose a step
//! by design. It relies on the slot's words only, and publishes a new holder by storing the
//! route word last, `Release`.

use super::slot::{MAX_NANOS, Slot};
use crate::sync::{AtomicU64, Ordering};

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

impl Slot {
    /// Learns from one answered duration of `route`. Loads and stores, no
    /// read-modify-write: two answers of one route racing lose one step, which a running
    /// quantile shrugs off. An answer of another route than the slot's counts toward its
    /// taking the slot over (see [`SLOTS`](super::table::SLOTS)).
    #[cfg(any(test, shared_headers_loom))]
    #[inline]
    pub fn learn(&self, route: u64, took_nanos: u64, steps: Steps, warm: u64) {
        self.learn_as(route, took_nanos, steps, warm, false);
    }

    /// [`Slot::learn`] of an answer, or (`bound`) of a lower bound only (a request cut by its
    /// deadline) while `route` is not warm here.
    #[inline]
    pub fn learn_as(&self, route: u64, took_nanos: u64, steps: Steps, warm: u64, bound: bool) {
        let x = took_nanos.clamp(1, MAX_NANOS);
        let owner = self.route.load(Ordering::Relaxed);
        if owner != route {
            self.learn_cold(owner, route, x, steps, warm, bound);
            return;
        }
        let _ = self.learn_warm(x, steps);
    }

    /// [`Slot::learn`] by the slot's warm holder (checked by the caller), `x` clamped: the
    /// floor after it.
    #[inline]
    pub(super) fn learn_warm(&self, x: u64, steps: Steps) -> u64 {
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
        // Both at most `MAX_NANOS` (2^47): the sums below cannot overflow.
        let recent = self.recent.load(Ordering::Relaxed);
        // Up at once to a longer answer; half-way down to a shorter one (rounded up:
        // `recent - (recent - x) / 2`), with no branch.
        let next = x.max((recent + x + 1) >> 1);
        self.recent.store(next, Ordering::Relaxed);
        let pace = self.pace.load(Ordering::Relaxed);
        // Down at once to a shorter answer; a quarter of the way up to a longer one
        // (`pace + (x - pace) / 4`), with no branch (an empty pace is the answer's).
        let pace = if pace == 0 { x } else { pace };
        let pace = x.min((3 * pace + x) >> 2);
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
    fn learn_cold(&self, owner: u64, route: u64, x: u64, steps: Steps, warm: u64, bound: bool) {
        if owner == route & !1 {
            // Warming up here.
            if bound {
                // At least `x`: it raises what it can, a step, and counts toward the warm-up
                // (a route whose every request is cut gets a need), never lowers anything.
                self.raise(x, steps);
            } else if self.pace.load(Ordering::Relaxed) == 0 {
                // The first answer after lower bounds alone (the slot seeded by a cut): it
                // sets the need at least to itself, and the no-load duration and the pace
                // (a bound seeded them as if it were an answer, and the need then climbed a
                // quantile step an answer: 5 ms cuts on a 20 ms route held it near 11 ms
                // through a warm-up of 16 answers).
                let q = self.estimate.load(Ordering::Relaxed);
                self.estimate.store(q.max(x), Ordering::Relaxed);
                let recent = self.recent.load(Ordering::Relaxed);
                self.recent.store(recent.max(x), Ordering::Relaxed);
                self.pace.store(x, Ordering::Relaxed);
                self.floor.store(x, Ordering::Relaxed);
            } else {
                step(&self.estimate, x, steps);
                let _ = self.follow(x);
            }
            if self.samples.fetch_add(1, Ordering::Relaxed) + 1 >= warm {
                self.route.store(route, Ordering::Release);
            }
        } else if owner == 0 {
            self.seed(route, x, warm);
            if bound {
                // No answer yet: an empty pace marks it (the first answer sets the need).
                self.pace.store(0, Ordering::Relaxed);
            }
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
            self.learn_as(route, x, steps, warm, true);
            return;
        }
        self.raise(x, steps);
    }

    /// A lower bound of `x` on the estimate (clamped): [`Slot::learn_at_least`]'s rule.
    fn raise(&self, x: u64, steps: Steps) {
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
}

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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::server::admission::estimate::route::route_hash;
    use crate::server::admission::estimate::table::{neighbour, slot_of};

    const R: u64 = 3;

    #[test]
    fn an_answer_after_lower_bounds_alone_sets_the_need() {
        let steps = Steps::new(0.9, 0.05);
        let slot = Slot::default();
        // Two cuts at 5 ms seed the slot and warm it up part of the way; the first answer
        // (20 ms) sets the need, the floor and the pace to itself.
        slot.learn_at_least(R, 5_000_000, steps, 4);
        slot.learn_at_least(R, 5_000_000, steps, 4);
        slot.learn(R, 20_000_000, steps, 4);
        slot.learn(R, 20_000_000, steps, 4);
        // (The second answer, at the need, steps it down by one quantile step.)
        let need = slot.need(R).unwrap();
        assert!(need >= Duration::from_millis(19), "{need:?}");
        assert_eq!(slot.floor(R), 20_000_000);
        // A bound above the answers raises the need: a route whose every request is cut
        // still warms, with a need at its bound (its callers' budgets).
        let cut = Slot::default();
        for _ in 0..4 {
            cut.learn_at_least(R, 100_000_000, steps, 4);
        }
        assert_eq!(cut.need(R), Some(Duration::from_millis(100)));
        // The control: an answer-seeded slot steps as before (a lower second answer moves
        // the need a step down, not to it).
        let answered = Slot::default();
        answered.learn(R, 30_000_000, steps, 2);
        answered.learn(R, 20_000_000, steps, 2);
        assert!(answered.need(R).unwrap() > Duration::from_millis(20));
    }

    #[test]
    fn a_constant_duration_is_learned_within_a_step() {
        let slot = Slot::default();
        let steps = Steps::new(0.9, 0.05);
        for _ in 0..200 {
            slot.learn(R, 50_000_000, steps, 16);
        }
        let estimate = slot.estimate(R).unwrap();
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
            slot.learn(R, (x + 1) * 1_000_000, steps, 1);
            if i >= 10_000 {
                sum += slot.estimate(R).unwrap().as_secs_f64();
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
            slot.learn(R, 10_000_000, steps, 1);
        }
        let mut n = 0;
        while slot.estimate(R).unwrap() < Duration::from_millis(39) {
            slot.learn(R, 40_000_000, steps, 1);
            n += 1;
        }
        assert!(n <= 40, "{n} samples to follow a route 4x slower");
    }

    #[test]
    fn cold_until_warm() {
        let slot = Slot::default();
        let steps = Steps::new(0.5, 0.05);
        slot.learn(R, 5_000_000, steps, 2);
        assert_eq!(slot.estimate(R), None);
        slot.learn(R, 5_000_000, steps, 2);
        assert!(slot.estimate(R).is_some());
    }

    #[test]
    fn a_small_estimate_comes_down_at_quantile_099() {
        let steps = Steps::new(0.99, 0.05);
        for start in [1_500_000, 2_000, 1] {
            let slot = Slot::default();
            slot.learn(R, start, steps, 1);
            for _ in 0..3_000 {
                slot.learn(R, 1, steps, 1);
            }
            let after = slot.estimate(R).unwrap();
            assert!(
                after < Duration::from_nanos(start) * 2 / 3 || after.as_nanos() == 1,
                "{start} ns -> {after:?}"
            );
        }
    }

    #[test]
    fn a_route_sharing_a_slot_is_cold_then_takes_it_over_after_a_whole_warm_up() {
        let slow = route_hash(b"GET", b"/slow");
        let fast = neighbour(slow);
        let slot = Slot::default();
        let steps = Steps::new(0.9, 0.05);
        for _ in 0..3 {
            slot.learn(slow, 500_000_000, steps, 2);
        }
        assert!(slot.need(slow).is_some());
        assert_eq!(slot.need(fast), None, "another route's estimate");
        // One answer of the holder between the other's resets its count.
        slot.learn(fast, 1_000_000, steps, 2);
        slot.learn(slow, 500_000_000, steps, 2);
        slot.learn(fast, 1_000_000, steps, 2);
        assert!(slot.need(slow).is_some());
        assert_eq!(slot.need(fast), None);
        slot.learn(fast, 1_000_000, steps, 2);
        let need = slot.need(fast).unwrap();
        assert!(need <= Duration::from_millis(1), "{need:?}");
        assert_eq!(slot.need(slow), None);
    }

    #[test]
    fn a_thousand_distinct_paths_never_make_a_warm_route_cold() {
        let route = route_hash(b"GET", b"/api/items/{id}");
        let slot = Slot::default();
        let steps = Steps::new(0.9, 0.05);
        for _ in 0..16 {
            slot.learn(route, 20_000_000, steps, 16);
        }
        assert!(slot.need(route).is_some());
        // Every path that lands in this slot, answered once each (a scanner's 404s), with
        // the route answered now and then or not at all.
        let mut n = 0;
        for i in 0..200_000 {
            let path = route_hash(b"GET", format!("/wp-login-{i}.php").as_bytes());
            if slot_of(path) == slot_of(route) {
                slot.learn(path, 1_000, steps, 16);
                n += 1;
            }
        }
        assert!(n >= 500, "{n} paths in the slot");
        let need = slot.need(route).unwrap();
        assert!(need >= Duration::from_millis(19), "{need:?}");
    }

    #[test]
    fn a_slow_start_is_forgotten_in_a_few_answers() {
        let slot = Slot::default();
        let steps = Steps::new(0.9, 0.05);
        for _ in 0..10 {
            slot.learn(R, 300_000_000, steps, 16);
        }
        let mut answers = 0;
        while slot
            .need(R)
            .is_none_or(|need| need > Duration::from_millis(10))
        {
            slot.learn(R, 1_000_000, steps, 16);
            answers += 1;
        }
        assert!(answers <= 8, "{answers} answers to forget a 300 ms start");
    }

    #[test]
    fn the_followers_step_as_their_written_rules() {
        // `recent - (recent - x) / 2` down, `pace + (x - pace) / 4` up, as the branch-free
        // steps compute them, near 0, near `MAX_NANOS` and between.
        let values: Vec<u64> = (0..40)
            .chain((0..40).map(|i| MAX_NANOS - i))
            .chain((1..64).map(|i| (i * 0x9e37_79b9_7f4a) % MAX_NANOS))
            .collect();
        for &x in values.iter().filter(|&&x| x > 0) {
            for &before in &values {
                let slot = Slot::default();
                slot.recent.store(before, Ordering::Relaxed);
                slot.pace.store(before, Ordering::Relaxed);
                slot.floor.store(MAX_NANOS, Ordering::Relaxed);
                let _ = slot.follow(x);
                let recent = if x >= before {
                    x
                } else {
                    before - (before - x) / 2
                };
                let pace = if x <= before || before == 0 {
                    x
                } else {
                    before + (x - before) / 4
                };
                assert_eq!(slot.recent.load(Ordering::Relaxed), recent, "{x} {before}");
                assert_eq!(slot.pace.load(Ordering::Relaxed), pace, "{x} {before}");
            }
        }
    }

    #[test]
    fn a_budget_is_below_a_need_as_in_nanoseconds() {
        use crate::server::admission::estimate::slot::below;
        let needs = [
            1,
            999,
            1_000_000_000,
            1_000_000_001,
            536_870_911,
            536_870_912,
            3 << 29,
        ]
        .into_iter()
        .chain([MAX_NANOS - 1, MAX_NANOS]);
        for need in needs {
            for secs in [0, 1, 2, 3, 140_737, 140_738, 1 << 20, u64::MAX] {
                for sub in [0, 1, 488_355_327, 488_355_328, 999_999_999] {
                    let d = Duration::new(secs, sub);
                    assert_eq!(
                        below(d, need),
                        d.as_nanos() < u128::from(need),
                        "{d:?} {need}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_lower_bound_only_raises() {
        let slot = Slot::default();
        let steps = Steps::new(0.9, 0.05);
        for _ in 0..4 {
            slot.learn(R, 50_000_000, steps, 2);
        }
        slot.learn_at_least(R, 3_000_000, steps, 2);
        assert!(slot.need(R).unwrap() >= Duration::from_millis(47));
        slot.learn_at_least(R, 100_000_000, steps, 2);
        assert!(slot.need(R).unwrap() > Duration::from_millis(50));
    }
}
