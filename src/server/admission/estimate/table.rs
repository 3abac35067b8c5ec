//! The table of slots and where a route learns in it: two choices of slot per route (its
//! first, from the top bits of its hash, and a second), the lookup of a route's need, floor
//! and home slot, and which slot an answer teaches.
//!
//! It decides which slot is a route's: the one whose route word names it, its first unless
//! its second does, and for a route that holds neither, which slot its answers go to (an
//! empty one, else a candidate in both). It relies on [`learn`](mod@super::learn) for what an
//! answer does in a slot and on the slot's route word ([`slot`](super::slot)).

use std::time::Duration;

use super::learn::Steps;
use super::slot::{MAX_NANOS, Slot};
use crate::sync::Ordering;

/// The number of slots: routes are hashed into this many (a power of two), 256 lines of
/// 128 bytes whatever the traffic. A slot learns for one route at a time (its full hash is
/// kept): a route whose slot another holds is cold (admitted, and counted) until it takes the
/// slot over, which takes [`warm_up`](crate::server::Admission::warm_up) answers of that
/// route with no answer of the holder between them: a flood of distinct paths, each answered
/// once, never takes a warm route's slot.
pub const SLOTS: usize = 256;

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
/// [`learn_elsewhere`] (`None`). (The models' and tests' entry: the answer's path calls
/// [`learn_home`], then [`learn_elsewhere`] out of line.)
#[cfg(any(test, shared_headers_loom))]
#[inline]
pub fn learn(
    table: &[Slot],
    route: u64,
    took_nanos: u64,
    steps: Steps,
    warm: u64,
) -> Option<(&Slot, u64)> {
    let learned = learn_home(table, route, took_nanos, steps);
    if learned.is_none() {
        learn_elsewhere(table, route, took_nanos, steps, warm);
    }
    learned
}

/// [`learn`]'s hot path alone: when `route` is warm in its first slot, learns there and
/// returns that slot and its floor after the answer; else does nothing (`None`: the caller
/// calls [`learn_elsewhere`], out of line, so that the hot path calls nothing).
#[inline]
pub fn learn_home(
    table: &[Slot],
    route: u64,
    took_nanos: u64,
    steps: Steps,
) -> Option<(&Slot, u64)> {
    let a = &table[slot_of(route)];
    if a.route.load(Ordering::Relaxed) == route {
        Some((a, a.learn_warm(took_nanos.clamp(1, MAX_NANOS), steps)))
    } else {
        None
    }
}

/// An answer of a route that is not warm in its first slot: warm in its second, warming in
/// either, seeding an empty one (its first first), else a candidate in both (the one whose
/// holder is not answered between its answers is taken over: a route sharing a busy
/// route's slot warms in its other one). A route stays cold only while routes answered
/// between each of its answers hold both its slots (counted in
/// [`admitted_cold`](crate::server::AdmissionCounts::admitted_cold)).
#[cold]
#[inline(never)]
pub fn learn_elsewhere(table: &[Slot], route: u64, took_nanos: u64, steps: Steps, warm: u64) {
    learn_elsewhere_as(table, route, took_nanos, steps, warm, false);
}

/// [`learn_elsewhere`] of an answer, or (`bound`) of a lower bound only.
#[cold]
#[inline(never)]
fn learn_elsewhere_as(
    table: &[Slot],
    route: u64,
    took_nanos: u64,
    steps: Steps,
    warm: u64,
    bound: bool,
) {
    let (a, b) = (&table[slot_of(route)], &table[alt_of(route)]);
    let (owner_a, owner_b) = (
        a.route.load(Ordering::Relaxed),
        b.route.load(Ordering::Relaxed),
    );
    if owner_b | 1 == route {
        b.learn_as(route, took_nanos, steps, warm, bound);
    } else if owner_a | 1 == route || owner_a == 0 {
        a.learn_as(route, took_nanos, steps, warm, bound);
    } else if owner_b == 0 {
        b.learn_as(route, took_nanos, steps, warm, bound);
    } else {
        a.learn_as(route, took_nanos, steps, warm, bound);
        if a.route.load(Ordering::Relaxed) != route {
            b.learn_as(route, took_nanos, steps, warm, bound);
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
        learn_elsewhere_as(
            table,
            route,
            took_nanos.clamp(1, MAX_NANOS),
            steps,
            warm,
            true,
        );
    }
}

/// A route of `route`'s first slot other than it: `/other/{n}` for the first such `n`.
#[cfg(test)]
pub(super) fn neighbour(route: u64) -> u64 {
    use super::route::route_hash;
    (0..)
        .map(|n| route_hash(b"GET", format!("/other/{n}").as_bytes()))
        .find(|&other| other != route && slot_of(other) == slot_of(route))
        .unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::admission::estimate::route::route_hash;

    #[test]
    fn routes_spread_over_slots() {
        let a = slot_of(route_hash(b"GET", b"/users/{id}"));
        let b = slot_of(route_hash(b"GET", b"/orders/{id}"));
        let c = slot_of(route_hash(b"POST", b"/users/{id}"));
        assert!(a < SLOTS && b < SLOTS && c < SLOTS);
        assert!(a != b || b != c);
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
}
