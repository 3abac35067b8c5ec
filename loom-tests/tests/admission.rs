//! loom models of the admission limiter's permit protocol (`server::admission::limiter`).
//!
//! Run with `RUSTFLAGS="--cfg shared_headers_loom" cargo test --release -p
//! shared-headers-loom-tests --test admission`.
//!
//! The protocol: a request takes a permit lock-free only while nobody is queued; a waiter, under
//! the queue's lock, enters the queue, counts itself in `queued`, then dispatches; a release
//! returns its permit (`in_flight` down), then dispatches under the lock if `queued` is not 0. Each
//! side writes its word and then reads the other's (`SeqCst`), so at least one of them sees the
//! other and hands the permit over.
//!
//! Properties proved (every interleaving, preemption bound from `LOOM_MAX_PREEMPTIONS`):
//! 1. no waiter is left waiting while a permit is free, and no permit is lost or made: the
//!    permits held plus the permits free are the limit, whatever the order of a release, a
//!    waiter entering the queue and a newcomer taking a permit lock-free;
//! 2. a waiter is woken (loom fails the model on a lost wake-up: `block_on` never returns), and
//!    a waiter whose caller hangs up leaves the queue, passing on a permit handed to it and
//!    never used.
//!
//! 3. a lowered limit (the adaptive limit after a slow answer) strands no waiter;
//! 4. the estimate's credit word: the cap's last unit is spent once by racing refusals
//!    (negative control: a spend as a load and a store);
//! 5. racing answers of two routes in one slot leave one holder, with a need within the
//!    answers' range;
//! 6. the recent minimum's words (`Slot::low`: the current window's least, its count, the
//!    window before's least): racing answers, one of them rotating the window, each read a
//!    least that some answer gave (never 0, never above their own answer), and so does the
//!    answer after them (negative control: a rotation that clears the window before's word
//!    before it writes it, and a read that trusts it, once past the first window, to be set);
//! 7. the two-slot route lookup (`estimate::{learn, need}`): a route whose first slot a warm
//!    route holds warms in its second while that route answers; a reader racing the
//!    answers reads none or the route's own need, never 0 nor the other's (negative
//!    controls: the route word loaded `Relaxed`, which reads a need of 0; a lookup by the
//!    slot's index alone, without the route's whole hash, the 64-slot unkeyed table's shape).
//! 8. the pace and the floor (`Slot::pace`, `Slot::floor`, loads and stores): racing answers
//!    (a fast one, a slow one and the floor's drift) and a reader: every value read is one a
//!    whole update gives (a slow answer never seen whole, nothing torn or 0); a lost step is
//!    an outcome, counted (negative control: a pace moved in two stores);
//! 9. the counting words (`Slot::probe`'s doomed count, the cold count): of racing doomed
//!    requests exactly one in 32 probes, each counted (negative control: a count as a load
//!    and a store).
//! 10. a response body's slot word (`admission::stall::Stalls`): the body's frames (a claim,
//!     another frame, then its drop) and the deadline thread's looks race: the permit is given
//!     back exactly once, by a look (no frame between two looks) or by the drop (negative
//!     control: the look's release as a load and a store gives it back twice);
//! 11. the slots' arming (`Stalls::watched`: the held slots and whether a look is queued): a
//!     body's claim and the last look's stop race: exactly one look stays queued for the held
//!     slot (negative control: a stop on the look's scan, whatever the count, leaves it
//!     unlooked).
//!
//! Every atomic word of `server::admission` and the model that covers it:
//!
//! | word | kind | model |
//! |---|---|---|
//! | `Limiter::in_flight`, `Limiter::queued` | `SeqCst` RMWs and fences | 1, 2, 3 |
//! | `Limiter::limit` | loads and stores (`adapt`) | 3 |
//! | `Limiter::settled` | a one-way flag | 3 |
//! | `Waiter::state` | `SeqCst` stores and swap | 2 |
//! | `Waiter::counted` | a swap, only by the judge, which runs under the queue's lock | none needed: the lock orders it (1-3 check the lock's protocol) |
//! | `Slot::credit` | CAS loop, `fetch_add` | 4 |
//! | `Slot::route` (`Release`/`Acquire`), `estimate`, `recent`, `samples`, `candidate*` | loads and stores | 5, 7 |
//! | `Slot::low_cur`, `low_n`, `low_prev` | loads and stores | 6 |
//! | `Slot::pace`, `Slot::floor` | loads and stores | 8 |
//! | `Slot::doomed`, `Slot::cold` (and the `Counters`' words, the same `fetch_add` pattern) | `fetch_add` | 9 |
//! | `Stalls::words` (a slot's word: held, frames, generation) | compare-and-swap | 10, 11 |
//! | `Stalls::watched` | compare-and-swap loops, `fetch_sub` | 11 (10 counts it out) |
//! | `Stalls::next` (where a claim starts looking: a hint) | loads and stores | none needed: any value is a valid start |
//! | `Stalls::seen` (the looks' memory) | under its own lock, taken by the looks only (one at a time) | 10 runs it |
//!
//! No other atomic word: the settled limit's probe and slow start's state (the most in flight
//! of an answer on time, the delayed answers, whether a caller was refused at arrival in
//! slow start) live under the probe's own lock, taken with `try_lock` (a step lost to a held
//! lock is a lost step, as the estimate's); the work offered at the queue and the queue's
//! least wait under the queue's lock. Model 3 runs `Limiter::adapt`, which takes the probe's
//! lock, racing a waiter and a release.
//!
//! The negative control of 1-3 is `Limiter::broken`: a release that reads `queued` before it
//! returns its permit. loom finds the interleaving where the release reads 0, the waiter enters and finds
//! no permit, then the permit is returned: the waiter waits forever with the permit free.
#![cfg(shared_headers_loom)]

use std::future::poll_fn;
use std::sync::Arc;

use loom::future::block_on;
use loom::thread;
use shared_headers::server::admission::limiter::{
    GONE, GRANTED, Limiter, SHED, Verdict, WAITING, Waiter,
};
use shared_headers_loom_tests::explore;

// The distinct outcomes each model reaches under `LOOM_MAX_PREEMPTIONS=2` (see `explore`).
const MIN_HANDOFF: usize = 3;
const MIN_WOKEN: usize = 2;

fn grant(_: &Waiter) -> Verdict {
    Verdict::Grant
}

/// How a request got (or did not get) its permit, for the outcome sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Got {
    /// Lock-free, at arrival.
    Fast,
    /// Queued, then granted (by its own dispatch or by a release).
    Granted,
    /// Queued, still waiting.
    Waiting,
    /// No permit and not queued (a newcomer that only tries).
    None,
}

fn got_of(state: usize) -> Got {
    match state {
        GRANTED => Got::Granted,
        WAITING => Got::Waiting,
        other => panic!("unexpected waiter state {other}"),
    }
}

/// Model 1 on `limiter` (a limit of 1, the permit held by the main thread): one thread arrives
/// (a permit lock-free, else it queues), one releases the held permit, and a newcomer tries for
/// a permit lock-free. Checks the forbidden outcome (a waiter waiting with a permit free) and
/// that permits are conserved. Returns (the arriving request's, the newcomer's) outcome.
fn handoff(limiter: Limiter) -> (Got, Got) {
    let limiter = Arc::new(limiter);
    assert!(limiter.try_acquire());
    let arriving = {
        let limiter = limiter.clone();
        thread::spawn(move || {
            if limiter.try_acquire() {
                (Got::Fast, None)
            } else {
                let waiter = limiter.enqueue(10, None, 0, false, &grant);
                (got_of(waiter.state()), Some(waiter))
            }
        })
    };
    let releasing = {
        let limiter = limiter.clone();
        thread::spawn(move || limiter.release(&grant))
    };
    let newcomer = if limiter.try_acquire() {
        Got::Fast
    } else {
        Got::None
    };
    releasing.join().unwrap();
    let (_, waiter) = arriving.join().unwrap();
    let arrived = match &waiter {
        Some(waiter) => got_of(waiter.state()),
        None => Got::Fast,
    };
    let (free, queued) = limiter.counts();
    assert!(
        !(arrived == Got::Waiting && free > 0),
        "waiter left waiting with a permit free ({free} free, {queued} queued, newcomer {newcomer:?})"
    );
    let held = usize::from(arrived == Got::Fast || arrived == Got::Granted)
        + usize::from(newcomer == Got::Fast);
    assert_eq!(
        held + free,
        1,
        "permit lost or made: {held} held, {free} free"
    );
    assert_eq!(queued, usize::from(arrived == Got::Waiting));
    (arrived, newcomer)
}

/// Property 1: a released permit reaches the waiter (or a newcomer, when nobody was queued yet:
/// then the waiter waits with no permit free, which is allowed), and permits are conserved.
/// Outcomes: the arriving request fast, granted, or waiting behind the newcomer's permit.
#[test]
fn a_released_permit_reaches_the_waiter() {
    let seen = explore("a_released_permit_reaches_the_waiter", MIN_HANDOFF, || {
        handoff(Limiter::new(1))
    });
    assert!(
        seen.contains(&(Got::Granted, Got::None)),
        "the handoff by a release was never reached: {seen:?}"
    );
}

/// Property 1 (negative control): the release that reads `queued` before returning its permit
/// strands the waiter with the permit free. Expected to fail.
#[test]
#[should_panic(expected = "waiter left waiting with a permit free")]
fn negative_control_release_reading_queued_first_strands_the_waiter() {
    loom::model(|| {
        handoff(Limiter::broken(1));
    });
}

/// Property 2: a waiter is woken when it is granted or shed (`block_on` returns: loom fails
/// the model on a lost wake-up), and one whose caller hangs up (`leave`) leaves at once; a
/// permit handed to it and never used goes on to the next waiter or back to the free count.
/// The judge sheds slot 7 (a doomed waiter: it never gets a permit). At the end nothing is
/// queued and the permit is free. Outcome: (the doomed waiter's state when its caller hung up,
/// the woken waiter's state).
#[test]
fn a_waiter_is_woken_or_leaves() {
    explore("a_waiter_is_woken_or_leaves", MIN_WOKEN, || {
        let limiter = Arc::new(Limiter::new(1));
        assert!(limiter.try_acquire());
        let judge = |w: &Waiter| {
            if w.route == 7 {
                Verdict::Shed
            } else {
                Verdict::Grant
            }
        };
        let woken = {
            let limiter = limiter.clone();
            thread::spawn(move || {
                let waiter = limiter.enqueue(20, None, 0, false, &judge);
                let state = block_on(poll_fn(|cx| waiter.poll(cx)));
                assert_eq!(state, GRANTED, "only the doomed waiter is shed");
                limiter.release(&judge);
                state
            })
        };
        let hung_up = {
            let limiter = limiter.clone();
            thread::spawn(move || {
                let waiter = limiter.enqueue(10, None, 7, false, &judge);
                let before = waiter.state();
                limiter.leave(&waiter, &judge);
                assert_eq!(waiter.state(), GONE);
                before
            })
        };
        limiter.release(&judge);
        let state = woken.join().unwrap();
        let before = hung_up.join().unwrap();
        assert!(
            before == WAITING || before == SHED,
            "doomed waiter got {before}"
        );
        assert_eq!(
            limiter.counts(),
            (1, 0),
            "a permit lost or a waiter left queued"
        );
        (before, state)
    });
}

/// Property 3 (the adaptive limit): an answer that lowers the limit (a slow one: the
/// handler queues) races a release and a waiter entering the queue, on a limit of 2 with both
/// permits held (three threads). Whatever the order, the waiter is never left waiting while fewer requests
/// than the limit hold permits, the limit stays between 1 and 2, and once the second permit
/// is released too the waiter holds the only permit taken. Outcome: (the limit at the end,
/// the waiter's state before the last release).
#[test]
fn a_lowered_limit_strands_no_waiter() {
    explore("a_lowered_limit_strands_no_waiter", 2, || {
        let limiter = Arc::new(Limiter::new(2));
        assert!(limiter.try_acquire() && limiter.try_acquire());
        let waiting = {
            let limiter = limiter.clone();
            thread::spawn(move || limiter.enqueue(10, None, 0, false, &grant))
        };
        let slow = {
            let limiter = limiter.clone();
            // An answer far above its route's no-load duration: the limit comes down.
            thread::spawn(move || limiter.adapt(1_000_000_000, 1_000_000, 1_000_000_000, 2))
        };
        limiter.release(&grant);
        slow.join().unwrap();
        // The decrease marks the limit settled (a one-way flag: set once, never cleared).
        assert!(limiter.settled(), "a decrease left the limit unsettled");
        let waiter = waiting.join().unwrap();
        let before = waiter.state();
        let limit = limiter.limit();
        assert!((1..=2).contains(&limit), "limit {limit}");
        let (free, queued) = limiter.counts();
        assert!(
            !(before == WAITING && free > 0),
            "waiter left waiting with a permit free ({free} free, {queued} queued)"
        );
        limiter.release(&grant);
        assert_eq!(waiter.state(), GRANTED, "the waiter never got a permit");
        assert_eq!(limiter.counts().1, 0);
        (limit, before)
    });
}

/// Property 3 (negative control): the release that reads `queued` first strands the waiter
/// under an adaptive limit too. Expected to fail.
#[test]
#[should_panic(expected = "waiter left waiting with a permit free")]
fn negative_control_a_lowered_limit_with_the_broken_release() {
    loom::model(|| {
        let limiter = Arc::new(Limiter::broken(1));
        assert!(limiter.try_acquire());
        let waiting = {
            let limiter = limiter.clone();
            thread::spawn(move || limiter.enqueue(10, None, 0, false, &grant))
        };
        let slow = {
            let limiter = limiter.clone();
            thread::spawn(move || {
                limiter.adapt(1_000_000_000, 1_000_000, 1_000_000_000, 1);
                limiter.release(&grant);
            })
        };
        slow.join().unwrap();
        let waiter = waiting.join().unwrap();
        let (free, queued) = limiter.counts();
        assert!(
            !(waiter.state() == WAITING && free > 0),
            "waiter left waiting with a permit free ({free} free, {queued} queued)"
        );
    });
}

/// Property 4 (the estimate's credit word): with credit for one refusal, two racing refusals
/// spend it once, whatever the order, while a request earns. Outcome: which refusal won.
#[test]
fn the_cap_spends_the_last_unit_once() {
    use shared_headers::server::admission::estimate::{CREDIT_UNIT, Slot};
    explore("the_cap_spends_the_last_unit_once", 2, || {
        let slot = Arc::new(Slot::default());
        slot.earn(CREDIT_UNIT);
        let a = {
            let slot = slot.clone();
            thread::spawn(move || slot.spend(0, 0))
        };
        let b = {
            let slot = slot.clone();
            thread::spawn(move || slot.spend(0, 0))
        };
        let (a, b) = (a.join().unwrap(), b.join().unwrap());
        assert!(!(a && b), "the last unit spent twice");
        assert!(a || b, "the unit never spent");
        (a, b)
    });
}

/// Property 4 (negative control): a spend as a load and a store spends the last unit twice.
/// Expected to fail.
#[test]
#[should_panic(expected = "the last unit spent twice")]
fn negative_control_a_spend_without_compare_and_swap() {
    use shared_headers::server::admission::estimate::{CREDIT_UNIT, Slot};
    loom::model(|| {
        let slot = Arc::new(Slot::default());
        slot.earn(CREDIT_UNIT);
        let a = {
            let slot = slot.clone();
            thread::spawn(move || slot.spend_broken(0))
        };
        let b = slot.spend_broken(0);
        let a = a.join().unwrap();
        assert!(!(a && b), "the last unit spent twice");
    });
}

/// Property 5 (the estimate's words): answers of the warm holder and of another route
/// (twice: a whole warm-up of 2) race; whichever route holds the slot at the end has a need
/// within the answers' range (never 0, never beyond), and the other route reads none.
/// Outcome: (the holder at the end is the first route, its need in ms).
#[test]
fn racing_answers_of_two_routes_leave_one_estimate() {
    use shared_headers::server::admission::estimate::{Slot, Steps, route_hash, slot_of};
    use std::time::Duration;
    explore("racing_answers_of_two_routes_leave_one_estimate", 5, || {
        let steps = Steps::new(0.9, 0.05);
        let a = route_hash(b"GET", b"/a");
        let b = (0..)
            .map(|n| route_hash(b"GET", format!("/b/{n}").as_bytes()))
            .find(|&b| b != a && slot_of(b) == slot_of(a))
            .unwrap();
        let slot = Arc::new(Slot::default());
        slot.learn(a, 10_000_000, steps, 1);
        let other = {
            let slot = slot.clone();
            thread::spawn(move || {
                slot.learn(b, 40_000_000, steps, 2);
                slot.learn(b, 40_000_000, steps, 2);
            })
        };
        slot.learn(a, 10_000_000, steps, 1);
        other.join().unwrap();
        let (need_a, need_b) = (slot.need(a), slot.need(b));
        assert!(need_a.is_none() || need_b.is_none(), "two holders");
        let need = need_a.or(need_b).expect("a warm holder");
        let ms = |n: u64| Duration::from_millis(n);
        // Within the answers' range (a step below 10 ms to 40 ms): never 0, never beyond. (An
        // answer of the old holder racing the take-over may blend into the new holder's
        // words, until its next answers: the documented transient.)
        assert!(
            (ms(9)..=ms(40)).contains(&need),
            "a need no answer gave: {need:?}"
        );
        (need_a.is_some(), need.as_millis())
    });
}

/// Property 6 (the recent minimum's words): a slot whose first window of answers (30 ms) is
/// full, and whose second is one answer short of full: two answers race (10 ms and 40 ms),
/// one of them rotating the window, then a third (50 ms) comes after both. Each reads a least
/// that some answer gave (10, 30 or 40 ms: never 0, never above its own answer). Racing
/// answers may lose one's minimum (loads and stores, by design: a lost step), which the
/// outcomes count. Outcome: (the 10 ms answer's least, the 40 ms answer's, the one after's),
/// in ms.
#[test]
fn the_recent_minimum_reads_only_answers() {
    use shared_headers::server::admission::estimate::{LOW_WINDOW, Slot};
    const MS: u64 = 1_000_000;
    explore("the_recent_minimum_reads_only_answers", 2, || {
        let slot = Arc::new(Slot::default());
        for _ in 0..2 * LOW_WINDOW - 1 {
            slot.low(30 * MS);
        }
        let fast = {
            let slot = slot.clone();
            thread::spawn(move || slot.low(10 * MS))
        };
        let slow = slot.low(40 * MS);
        let fast = fast.join().unwrap();
        let after = slot.low(50 * MS);
        for (low, own) in [(fast, 10 * MS), (slow, 40 * MS), (after, 50 * MS)] {
            assert!(
                [10 * MS, 30 * MS, 40 * MS, 50 * MS].contains(&low) && low <= own,
                "a least no answer gave: {low} (own {own})"
            );
        }
        (fast / MS, slow / MS, after / MS)
    });
}

/// Property 6 (negative control): the rotation that clears the window before's least and
/// then writes it, read by an answer that trusts that word once past the first window: a
/// racing answer reads the clear and reports 0 (no queue, whatever the handler does).
/// Expected to fail.
#[test]
#[should_panic(expected = "a least no answer gave")]
fn negative_control_a_rotation_that_clears_first() {
    use shared_headers::server::admission::estimate::{LOW_WINDOW, Slot};
    const MS: u64 = 1_000_000;
    loom::model(|| {
        let slot = Arc::new(Slot::default());
        for _ in 0..2 * LOW_WINDOW - 1 {
            slot.low(30 * MS);
        }
        let other = {
            let slot = slot.clone();
            thread::spawn(move || slot.low_broken(10 * MS))
        };
        let low = slot.low_broken(40 * MS);
        let other = other.join().unwrap();
        for low in [low, other] {
            assert!(low != 0, "a least no answer gave: {low}");
        }
    });
}

/// Two routes for the two-slot models: `busy` and `other` share their first slot (slot 0),
/// `other`'s second is slot 1..4 (a table of 4 slots holds both: loom models every word).
fn two_routes() -> (u64, u64) {
    use shared_headers::server::admission::estimate::{alt_of, route_hash, slot_of};
    let mut routes = (0u64..)
        .map(|n| route_hash(b"GET", format!("/r/{n}").as_bytes()))
        .filter(|&r| slot_of(r) == 0 && alt_of(r) < 4);
    let busy = routes.next().unwrap();
    let other = routes.find(|&r| r != busy).unwrap();
    (busy, other)
}

/// Property 7 (the two-slot route lookup): `busy` holds its first slot, warm at 10 ms;
/// `other`, whose first slot that is, answers twice (40 ms, a warm-up of 2) and `busy`
/// once more between, while another thread reads both routes' needs. While it warms, `other` reads none; then
/// its second slot's 40 ms (a step below after its second answer); `busy` stays warm at
/// its own; neither ever reads a need the
/// other's answers gave. Outcome: (busy's need, other's need) in ms, read during the race.
#[test]
fn a_contested_route_warms_in_its_second_slot() {
    use shared_headers::server::admission::estimate::{Slot, Steps, learn, need};
    const MS: u64 = 1_000_000;
    let (busy, other) = two_routes();
    explore("a_contested_route_warms_in_its_second_slot", 4, move || {
        let steps = Steps::new(0.9, 0.05);
        let table: Arc<Vec<Slot>> = Arc::new((0..4).map(|_| Slot::default()).collect());
        learn(&table, busy, 10 * MS, steps, 1);
        let ms = |d: std::time::Duration| d.as_millis() as u64;
        // The reader: both routes' needs, read while the answers land.
        let reader = {
            let table = table.clone();
            thread::spawn(move || (need(&table, busy).map(ms), need(&table, other).map(ms)))
        };
        learn(&table, other, 40 * MS, steps, 2);
        learn(&table, busy, 10 * MS, steps, 1);
        learn(&table, other, 40 * MS, steps, 2);
        let (b, o) = reader.join().unwrap();
        assert!(matches!(b, Some(9..=10)), "busy read {b:?}");
        assert!(matches!(o, None | Some(39..=40)), "other read {o:?}");
        let after = need(&table, other).map(ms);
        assert!(
            matches!(after, Some(39..=40)),
            "other not warm in its second slot: {after:?}"
        );
        assert!(matches!(need(&table, busy).map(ms), Some(9..=10)));
        (b, o)
    });
}

/// Property 7 (negative control): a lookup by the slot's index alone (whoever is warm in
/// the route's first slot answers for it): `other` reads `busy`'s 10 ms. Expected to fail.
#[test]
#[should_panic(expected = "other read")]
fn negative_control_a_lookup_without_the_whole_hash() {
    use shared_headers::server::admission::estimate::{Slot, Steps, learn, need_by_index};
    const MS: u64 = 1_000_000;
    let (busy, other) = two_routes();
    loom::model(move || {
        let steps = Steps::new(0.9, 0.05);
        let table: Arc<Vec<Slot>> = Arc::new((0..4).map(|_| Slot::default()).collect());
        learn(&table, busy, 10 * MS, steps, 1);
        let t = {
            let table = table.clone();
            thread::spawn(move || {
                learn(&table, other, 40 * MS, steps, 2);
            })
        };
        learn(&table, busy, 10 * MS, steps, 1);
        t.join().unwrap();
        let o = need_by_index(&table, other).map(|d| d.as_millis() as u64);
        assert!(matches!(o, None | Some(39..=40)), "other read {o:?}");
    });
}

/// Property 7 (negative control): the route word loaded `Relaxed` (`Slot::need_relaxed`): a
/// reader sees `other` warm in its second slot before the estimate its answers wrote, and
/// reads a need of 0. Expected to fail.
#[test]
#[should_panic(expected = "other read")]
fn negative_control_the_route_word_loaded_relaxed() {
    use shared_headers::server::admission::estimate::{Slot, Steps, alt_of, learn};
    const MS: u64 = 1_000_000;
    let (busy, other) = two_routes();
    loom::model(move || {
        let steps = Steps::new(0.9, 0.05);
        let table: Arc<Vec<Slot>> = Arc::new((0..4).map(|_| Slot::default()).collect());
        learn(&table, busy, 10 * MS, steps, 1);
        let reader = {
            let table = table.clone();
            thread::spawn(move || table[alt_of(other)].need_relaxed(other))
        };
        learn(&table, other, 40 * MS, steps, 1);
        let o = reader.join().unwrap().map(|d| d.as_millis() as u64);
        assert!(matches!(o, None | Some(39..=40)), "other read {o:?}");
    });
}

/// Property 8 (the pace and the floor, `Slot::pace` and `Slot::floor`: loads and stores): a
/// warm route (one answer of 20 ms) gets a fast answer (10 ms) and a slow one (40 ms, then
/// the floor's drift, as an answer the limit held nothing back for) on two threads, while a
/// third reads its pace and floor. Every pace read is one a whole update gives, in some
/// order of the answers: 20, 10, 25 (a quarter of the way up to 40) or 17.5 ms (10, then
/// 40): a slow answer is never seen whole, nothing is torn or 0, so one slow answer among
/// fast ones never closes the queue, and the pace (taken as the need when faster) never
/// bounds the queue's delay by a value no answer made. Every floor read is an answer's (20
/// or 10 ms) or a drift of one (never 0: the queue's bound and the limit's lessons read 0 as
/// "no floor"). After both answers the pace is 10 or 17.5 ms, or 25 ms when the slow
/// answer's store lands after the fast one's (a lost step, by design, counted in the
/// outcomes); the floor is 10 ms, its drift, or the drift of 20 ms (the same lost step).
/// Outcome: (the pace read, the floor read, the pace after, the floor after), in µs.
#[test]
fn the_pace_and_the_floor_read_only_whole_updates() {
    use shared_headers::server::admission::estimate::{Slot, Steps, route_hash};
    const MS: u64 = 1_000_000;
    let drift = |f: u64| f + (f >> 10) + 1;
    explore(
        "the_pace_and_the_floor_read_only_whole_updates",
        81,
        move || {
            let steps = Steps::new(0.9, 0.05);
            let route = route_hash(b"GET", b"/p");
            let slot = Arc::new(Slot::default());
            slot.learn(route, 20 * MS, steps, 1);
            // The reader first (spawned: loom interleaves a spawned reader with the writers).
            let reader = {
                let slot = slot.clone();
                thread::spawn(move || (slot.pace(route), slot.floor(route)))
            };
            let slow = {
                let slot = slot.clone();
                thread::spawn(move || {
                    slot.learn(route, 40 * MS, steps, 1);
                    let floor = slot.floor(route);
                    slot.drift(floor);
                })
            };
            slot.learn(route, 10 * MS, steps, 1);
            let (pace, floor) = reader.join().unwrap();
            slow.join().unwrap();
            let paces = [20 * MS, 10 * MS, 25 * MS, 17_500_000];
            let floors = [20 * MS, 10 * MS, drift(20 * MS), drift(10 * MS)];
            assert!(paces.contains(&pace), "a pace no whole update gave: {pace}");
            assert!(floors.contains(&floor), "a floor no update gave: {floor}");
            let (pace_after, floor_after) = (slot.pace(route), slot.floor(route));
            assert!(
                [10 * MS, 17_500_000, 25 * MS].contains(&pace_after),
                "a pace no whole update gave: {pace_after} after both answers"
            );
            assert!(
                [10 * MS, drift(10 * MS), drift(20 * MS)].contains(&floor_after),
                "a floor no update gave: {floor_after} after both answers"
            );
            let us = |n: u64| n / 1_000;
            (us(pace), us(floor), us(pace_after), us(floor_after))
        },
    );
}

/// Property 8 (negative control): a pace moved in two stores (to the answer, then back to a
/// quarter of the way up): a racing reader sees the slow answer whole. Expected to fail.
#[test]
#[should_panic(expected = "a pace no whole update gave")]
fn negative_control_a_pace_written_in_two_stores() {
    use shared_headers::server::admission::estimate::{Slot, Steps, route_hash};
    const MS: u64 = 1_000_000;
    loom::model(|| {
        let route = route_hash(b"GET", b"/p");
        let slot = Arc::new(Slot::default());
        slot.learn(route, 20 * MS, Steps::new(0.9, 0.05), 1);
        let reader = {
            let slot = slot.clone();
            thread::spawn(move || slot.pace(route))
        };
        slot.pace_broken(40 * MS);
        let pace = reader.join().unwrap();
        assert!(
            [20 * MS, 25 * MS].contains(&pace),
            "a pace no whole update gave: {pace}"
        );
    });
}

/// Property 9 (the counting words: `Slot::probe`'s doomed count, and the cold count, the
/// pattern of every counter admission reports): 30 doomed requests counted, then two racing
/// doomed requests, each also admitted cold: exactly one of them is the probe (one in
/// `PROBE_EVERY`, 32: the 32nd), and both are counted cold. Outcome: which one probed.
#[test]
fn one_doomed_request_in_32_probes() {
    use shared_headers::server::admission::estimate::{PROBE_EVERY, Slot};
    explore("one_doomed_request_in_32_probes", 2, || {
        let slot = Arc::new(Slot::default());
        for _ in 0..PROBE_EVERY - 2 {
            assert!(!slot.probe());
        }
        let other = {
            let slot = slot.clone();
            thread::spawn(move || {
                slot.admitted_cold();
                slot.probe()
            })
        };
        slot.admitted_cold();
        let mine = slot.probe();
        let other = other.join().unwrap();
        assert!(
            mine != other,
            "probes among the two: {}",
            u8::from(mine) + u8::from(other)
        );
        assert_eq!(slot.cold_count(), 2, "a cold admission not counted");
        (mine, other)
    });
}

/// Property 9 (negative control): a doomed count as a load and a store: both racing requests
/// read 30, neither probes (a probe lost). Expected to fail.
#[test]
#[should_panic(expected = "probes among the two")]
fn negative_control_a_doomed_count_without_fetch_add() {
    use shared_headers::server::admission::estimate::{PROBE_EVERY, Slot};
    loom::model(|| {
        let slot = Arc::new(Slot::default());
        for _ in 0..PROBE_EVERY - 2 {
            assert!(!slot.probe());
        }
        let other = {
            let slot = slot.clone();
            thread::spawn(move || slot.probe_broken())
        };
        let mine = slot.probe_broken();
        let other = other.join().unwrap();
        assert!(
            mine != other,
            "probes among the two: {}",
            u8::from(mine) + u8::from(other)
        );
    });
}

/// The deadline thread's looks at the slots in model 10: `n` of them; how many permits they
/// gave back (`broken`: the negative control's release, a load and a store).
fn looks(stalls: &shared_headers::server::admission::stall::Stalls, n: usize, broken: bool) -> u8 {
    let mut released = 0;
    for _ in 0..n {
        let mut release = || released += 1;
        if broken {
            stalls.look_broken(&mut release);
        } else {
            stalls.look(&mut release);
        }
    }
    released
}

/// Property 10 (a response body's slot word): a body takes a slot at its first frame (freed
/// after one look without a change), returns another frame, then is dropped, while the
/// deadline thread looks three times. The permit goes back exactly once: by a look that saw
/// the word unchanged twice (no frame in between), or by the drop, whichever frees the slot
/// (a compare-and-swap from the word its writer last saw). Outcome: (given back by the looks,
/// by the drop).
#[test]
fn a_stalled_bodys_permit_goes_back_once() {
    use shared_headers::server::admission::stall::Stalls;
    let seen = explore("a_stalled_bodys_permit_goes_back_once", 2, || {
        let stalls = Arc::new(Stalls::new(1));
        let mut claim = stalls.claim(1).expect("a free slot");
        stalls.arm();
        let timer = {
            let stalls = stalls.clone();
            thread::spawn(move || looks(&stalls, 3, false))
        };
        stalls.framed(&mut claim);
        let dropped = u8::from(stalls.give_back(claim));
        let looked = timer.join().unwrap();
        assert_eq!(
            looked + dropped,
            1,
            "the permit given back {} times",
            looked + dropped
        );
        (looked, dropped)
    });
    assert!(seen.contains(&(1, 0)) && seen.contains(&(0, 1)), "{seen:?}");
}

/// Property 10 (negative control): the look's release as a load and a store: a look and the
/// drop both give the permit back. Expected to fail.
#[test]
#[should_panic(expected = "the permit given back 2 times")]
fn negative_control_a_claim_without_swap() {
    use shared_headers::server::admission::stall::Stalls;
    loom::model(|| {
        let stalls = Arc::new(Stalls::new(1));
        let claim = stalls.claim(1).expect("a free slot");
        stalls.arm();
        let timer = {
            let stalls = stalls.clone();
            thread::spawn(move || looks(&stalls, 2, true))
        };
        let dropped = u8::from(stalls.give_back(claim));
        let looked = timer.join().unwrap();
        assert_eq!(
            looked + dropped,
            1,
            "the permit given back {} times",
            looked + dropped
        );
    });
}

/// Property 11 (the slots' arming): the last look (no slot held when it began) stops while a
/// body takes a slot and arms. Exactly one look stays in the thread's queue: the stopping
/// look keeps going (the claim was counted first) or the body arms a new one, never both,
/// never neither (a held slot nobody looks at). Outcome: (the look kept going, the body
/// armed).
#[test]
fn a_claim_racing_the_last_look_is_looked_at_once() {
    use shared_headers::server::admission::stall::Stalls;
    let seen = explore("a_claim_racing_the_last_look_is_looked_at_once", 2, || {
        let stalls = Arc::new(Stalls::new(1));
        stalls.armed_already();
        let timer = {
            let stalls = stalls.clone();
            thread::spawn(move || {
                stalls.look(&mut || {});
                stalls.keep_looking()
            })
        };
        let claim = stalls.claim(1).expect("a free slot");
        let armed = stalls.arm();
        let kept = timer.join().unwrap();
        assert_eq!(
            u8::from(kept) + u8::from(armed),
            1,
            "looks in the queue for a held slot: {}",
            u8::from(kept) + u8::from(armed)
        );
        drop(claim);
        (kept, armed)
    });
    assert!(
        seen.contains(&(true, false)) && seen.contains(&(false, true)),
        "{seen:?}"
    );
}

/// Property 11 (negative control): the look stops on what its scan saw, the flag cleared
/// whatever the count: a claim that found the flag set is never looked at. Expected to
/// fail.
#[test]
#[should_panic(expected = "looks in the queue for a held slot: 0")]
fn negative_control_a_stop_without_a_second_look() {
    use shared_headers::server::admission::stall::Stalls;
    loom::model(|| {
        let stalls = Arc::new(Stalls::new(1));
        stalls.armed_already();
        let timer = {
            let stalls = stalls.clone();
            thread::spawn(move || {
                let held = stalls.look(&mut || {});
                stalls.keep_looking_broken(held)
            })
        };
        let _claim = stalls.claim(1).expect("a free slot");
        let armed = stalls.arm();
        let kept = timer.join().unwrap();
        assert_eq!(
            u8::from(kept) + u8::from(armed),
            1,
            "looks in the queue for a held slot: {}",
            u8::from(kept) + u8::from(armed)
        );
    });
}
