//! The commit race of the server layer, with the runtime abstracted away.
//!
//! `SharedHeadersLayer`'s response future commits its `Exchange` at the first of three events:
//! the inner service answered, the deadline fired, the future was dropped. In the real layer
//! these happen in one task, one after the other; here each is a thread calling
//! `Exchange::commit` at the same time. This models the commit protocol of `Exchange` (more
//! concurrent committers than the layer ever has), not the response future itself: the order in
//! which the future drops its fields (the commit guard before the handler) is tested in
//! `tests/layer_http.rs`. A spawned task writing a response header, and reading the exchange from
//! inside its `update` closure, races all of them.
//!
//! Property proved (every interleaving, preemption bound from `LOOM_MAX_PREEMPTIONS`):
//! 1. exactly one `commit` returns `Ok`; every loser's `AlreadyCommitted` names that winner;
//! 2. the committed request and response snapshots are sealed, and are what every handle
//!    shows afterwards;
//! 3. the racing write is never lost: it returned `Ok` if and only if it is in the committed
//!    response snapshot (the one merged into the response and logged); if refused, it was
//!    counted in `refused_writes`;
//! 4. reading the exchange (`is_committed`) inside `update`, under the handle's writer lock,
//!    never deadlocks with a commit (loom fails the model on a deadlock), and always sees the
//!    exchange uncommitted: the record is set only after both seals, and a seal waits for the
//!    writer lock.
//!
//! The negative control commits the way a naive layer does: log a snapshot of the headers,
//! then seal them as a second step. loom finds the interleaving where the write lands between
//! the two steps: accepted, yet missing from the log.
#![cfg(shared_headers_loom)]

use http::HeaderValue;
use loom::thread;
use shared_headers::{Committed, Exchange, Outcome, SharedHeaders};

fn v(s: &'static str) -> HeaderValue {
    HeaderValue::from_static(s)
}

#[test]
fn exactly_one_commit_and_no_lost_write() {
    loom::model(|| {
        let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
        exchange.request().insert("x-id", v("1")).unwrap();

        let spawn_commit = |outcome| {
            let exchange = exchange.clone();
            thread::spawn(move || exchange.commit(outcome))
        };
        let answered = spawn_commit(Outcome::Answered);
        let deadline = spawn_commit(Outcome::TimedOut);
        let task = {
            let exchange = exchange.clone();
            thread::spawn(move || {
                let written = exchange.response().update(|m| {
                    m.insert("x-task", v("1"));
                    exchange.is_committed()
                });
                if let Ok(seen_committed) = written {
                    assert!(!seen_committed, "committed while a writer held the lock");
                }
                written.is_ok()
            })
        };
        // The main thread is "the future was dropped".
        let dropped = exchange.commit(Outcome::Cancelled);

        let results = [answered.join().unwrap(), deadline.join().unwrap(), dropped];
        let wrote = task.join().unwrap();

        let winners: Vec<&Committed> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(winners.len(), 1, "exactly one commit wins");
        let winner = winners[0];
        for lost in results.iter().filter_map(|r| r.as_ref().err()) {
            assert_eq!(lost.winner(), winner, "every loser names the winner");
        }

        assert!(winner.request().is_sealed() && winner.response().is_sealed());
        assert_eq!(winner.request()["x-id"], "1");
        assert_eq!(exchange.request().snapshot(), *winner.request());
        assert_eq!(exchange.response().snapshot(), *winner.response());
        assert_eq!(exchange.committed().as_ref(), Some(winner));

        assert_eq!(
            wrote,
            winner.response().contains_key("x-task"),
            "write lost"
        );
        assert_eq!(exchange.refused_writes(), u64::from(!wrote));
    });
}

/// Negative control: "log, then seal" as two steps lets a write in between be accepted and
/// still be missing from the log. loom must find it, or the model above proves nothing.
#[test]
#[should_panic(expected = "accepted write missing from the log")]
fn negative_control_log_then_seal_loses_a_write() {
    loom::model(|| {
        let response = SharedHeaders::new();
        let task = {
            let response = response.clone();
            thread::spawn(move || response.insert("x-task", v("1")).is_ok())
        };
        let logged = response.snapshot(); // the naive layer logs ...
        let _ = response.seal(); // ... and only then stops further writes
        let wrote = task.join().unwrap();
        assert!(
            !wrote || logged.contains_key("x-task"),
            "accepted write missing from the log"
        );
    });
}
