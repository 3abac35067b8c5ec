//! The estimate's unit tests.

use super::credit::{CUR_SHIFT, EPOCH_SHIFT, FIELD};
use super::*;

const R: u64 = 3;

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
fn cold_until_warm_and_capped_credit() {
    let slot = Slot::default();
    let steps = Steps::new(0.5, 0.05);
    slot.learn(R, 5_000_000, steps, 2);
    assert_eq!(slot.estimate(R), None);
    slot.learn(R, 5_000_000, steps, 2);
    assert!(slot.estimate(R).is_some());
    assert!(!slot.spend(0, 0));
    for _ in 0..5 {
        slot.earn(CREDIT_UNIT / 5);
    }
    assert!(slot.spend(0, 0));
    assert!(!slot.spend(0, 0));
}

#[test]
fn the_cap_is_a_fifth_of_the_requests_of_a_ten_second_window() {
    let slot = Slot::default();
    let fifth = CREDIT_UNIT / 5;
    let earn = |n: usize| (0..n).for_each(|_| slot.earn(fifth));
    // Half-window 0: ten requests, two rejections.
    earn(10);
    assert_eq!(
        (slot.spend(0, 0), slot.spend(0, 0), slot.spend(0, 0)),
        (true, true, false)
    );
    // Half-window 1: five more requests (counted toward the half rotated from), one more.
    earn(5);
    assert_eq!((slot.spend(1, 0), slot.spend(1, 0)), (true, false));
    // A clock reading behind the window's (a racing rejection): as now, no rotation.
    earn(5);
    assert_eq!((slot.spend(0, 0), slot.spend(1, 0)), (true, false));
    // Credit of a window 10 s and more ago has expired: ten requests, then a gap.
    earn(10);
    assert!(!slot.spend(3, 0), "credit from two halves ago expired");
    earn(5);
    assert_eq!((slot.spend(3, 0), slot.spend(3, 0)), (true, false));
    // One half on, the current half's credit is the previous one's, still usable.
    earn(10);
    assert_eq!(
        (slot.spend(4, 0), slot.spend(4, 0), slot.spend(4, 0)),
        (true, true, false)
    );
    // The half-window number wraps (16 bits): still one half on.
    let slot = Slot::default();
    assert!(!slot.spend(0xfffe, 0));
    let earn = |n: usize| (0..n).for_each(|_| slot.earn(fifth));
    earn(5);
    assert!(slot.spend(0xffff, 0));
    earn(5);
    assert!(slot.spend(0x1_0000, 0), "0xffff -> 0x10000 is one half on");
    earn(5);
    assert!(!slot.spend(0x1_0002, 0), "two halves on: expired");
}

#[test]
fn a_half_that_overflows_never_carries_into_the_epoch() {
    let slot = Slot::default();
    assert!(!slot.spend(7, 0));
    for _ in 0..=(FIELD / CREDIT_UNIT) {
        slot.earn(CREDIT_UNIT);
    }
    let word = slot.credit.load(Ordering::Relaxed);
    assert_eq!(((word >> EPOCH_SHIFT) & 0xffff, word & FIELD), (7, 0));
    assert!((word >> CUR_SHIFT) < CREDIT_UNIT, "wrapped to less");
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
fn routes_spread_over_slots() {
    let a = slot_of(route_hash(b"GET", b"/users/{id}"));
    let b = slot_of(route_hash(b"GET", b"/orders/{id}"));
    let c = slot_of(route_hash(b"POST", b"/users/{id}"));
    assert!(a < SLOTS && b < SLOTS && c < SLOTS);
    assert!(a != b || b != c);
}

/// A route of `route`'s slot other than it: `/other/{n}` for the first such `n`.
fn neighbour(route: u64) -> u64 {
    (0..)
        .map(|n| route_hash(b"GET", format!("/other/{n}").as_bytes()))
        .find(|&other| other != route && slot_of(other) == slot_of(route))
        .unwrap()
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
fn a_route_sharing_a_busy_routes_slot_warms_in_its_other_one() {
    let table: Vec<Slot> = (0..SLOTS).map(|_| Slot::default()).collect();
    let busy = route_hash(b"GET", b"/busy");
    let other = neighbour(busy);
    let steps = Steps::new(0.9, 0.05);
    for _ in 0..2 {
        learn(&table, busy, 1_000_000, steps, 2);
    }
    // Every slot but the two routes' first one held by a stale route.
    for (i, slot) in table.iter().enumerate() {
        if i != slot_of(busy) {
            slot.learn(((i as u64) << 56) | 0b111, 5_000_000, steps, 1);
        }
    }
    // The busy route answered between each of the other's answers.
    for _ in 0..2 {
        learn(&table, other, 100_000_000, steps, 2);
        learn(&table, busy, 1_000_000, steps, 2);
    }
    assert!(need(&table, busy).is_some());
    let got = need(&table, other).expect("warm in its second slot");
    assert!(got >= Duration::from_millis(90), "{got:?}");
    assert!(
        home(&table, other).floor(other) >= 90_000_000,
        "its own floor"
    );
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

#[test]
fn a_method_hashes_alike_by_its_fast_path_and_its_bytes() {
    use super::method_route_hash;
    let methods = [
        "GET", "POST", "PUT", "HEAD", "PATCH", "TRACE", "DELETE", "OPTIONS", "CONNECT", "PURGE",
        "X",
    ];
    for method in methods {
        let parsed = http::Method::from_bytes(method.as_bytes()).unwrap();
        for path in [
            &b"/"[..],
            b"",
            b"/users/{id}",
            b"/a/very/long/route/with/segments",
        ] {
            assert_eq!(
                method_route_hash(&parsed, path),
                route_hash(method.as_bytes(), path),
                "{method} {path:?}"
            );
        }
    }
}
