//! loom model of the connection retry's body hand-off (`ConnRetry`'s tonic message body,
//! `shared_headers::client::handoff`): the first send's client may read the body while the
//! retry, its request failed unwritten, asks for it back.
//!
//! Run with `RUSTFLAGS="--cfg shared_headers_loom" cargo test --release -p
//! shared-headers-loom-tests --test conn_retry`.
#![cfg(shared_headers_loom)]

use loom::sync::Arc;
use loom::thread;
use shared_headers::client::handoff::Handoff;
use shared_headers_loom_tests::explore;

/// One race: the first send's client reads the body (a thread of its own: hyper's connection
/// task) while the retry reserves it and, if promised it, the resend reads it. Returns (the
/// first send read it, the retry was promised it, the resend read it).
fn race(two_steps: bool) -> (bool, bool, bool) {
    let slot = Arc::new(Handoff::new(7u32));
    let first = {
        let slot = slot.clone();
        thread::spawn(move || slot.take(false))
    };
    let promised = if two_steps {
        slot.reserve_in_two_steps()
    } else {
        slot.reserve()
    };
    let resent = if promised { slot.take(true) } else { None };
    let read = first.join().unwrap();
    assert!(
        read.is_none() || read == Some(7) && resent.is_none(),
        "read by both sends"
    );
    assert_eq!(
        promised,
        resent == Some(7),
        "body lost: the resend was promised the body and found nothing"
    );
    assert!(read.is_some() || resent.is_some(), "nobody read the body");
    (read.is_some(), promised, resent.is_some())
}

/// Property 1 (the connection retry's hand-off): exactly one send reads the body, and a resend
/// promised it gets it. Outcomes: (first read, not promised, no resend) and (first refused,
/// promised, resend read).
#[test]
fn the_body_is_read_by_exactly_one_send() {
    let seen = explore("the_body_is_read_by_exactly_one_send", 2, || race(false));
    assert!(seen.contains(&(true, false, false)) && seen.contains(&(false, true, true)));
}

/// Negative control of property 1: the reservation checked and made under two locks lets the
/// first send take the body in between; the resend, promised it, finds nothing (a message sent
/// again without its body). loom finds it, so this test is expected to panic.
#[test]
#[should_panic(expected = "body lost")]
fn a_reservation_in_two_steps_loses_the_body() {
    loom::model(|| {
        race(true);
    });
}
