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
use shared_headers::{CommitHooks, Committed, Exchange, Outcome, SharedHeaders};
use shared_headers_loom_tests::explore;

// The distinct outcomes each model reaches under `LOOM_MAX_PREEMPTIONS=2` (see `explore`).
const MIN_ONE_COMMIT: usize = 6;
const MIN_SEEN: usize = 3;

fn v(s: &'static str) -> HeaderValue {
    HeaderValue::from_static(s)
}

#[test]
fn exactly_one_commit_and_no_lost_write() {
    explore(
        "exactly_one_commit_and_no_lost_write",
        MIN_ONE_COMMIT,
        || {
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
            // Outcome: (the winner, whether the task's write was accepted).
            (format!("{:?}", winner.outcome()), wrote)
        },
    );
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

/// A hook log visible to loom: a `loom` mutex, so that loom sees who touches it.
type Calls = std::sync::Arc<loom::sync::Mutex<Vec<shared_headers::Outcome>>>;

fn calls_of(calls: &Calls) -> Vec<Outcome> {
    calls.lock().unwrap().clone()
}

/// Property: when the answer, the deadline and the drop of the future race to commit, the
/// `on_commit` hook runs exactly once, with the winner's record, and it has run by the time
/// any `commit` call returns (winner or loser), so no response can leave before its log line.
#[test]
fn commit_hook_runs_exactly_once_when_answer_deadline_and_drop_race() {
    explore(
        "commit_hook_runs_exactly_once_when_answer_deadline_and_drop_race",
        3,
        || {
            let calls: Calls = Default::default();
            let hooks = {
                let calls = calls.clone();
                CommitHooks::new()
                    .on_commit(move |c| calls.lock().unwrap().push(c.committed().outcome()))
            };
            let exchange = Exchange::with_hooks(SharedHeaders::new(), SharedHeaders::new(), &hooks);
            let spawn_commit = |outcome| {
                let exchange = exchange.clone();
                let calls = calls.clone();
                thread::spawn(move || {
                    let result = exchange.commit(outcome);
                    assert_eq!(
                        calls_of(&calls).len(),
                        1,
                        "commit returned before the hook ran"
                    );
                    result.map(|c| c.outcome()).ok()
                })
            };
            let answered = spawn_commit(Outcome::Answered);
            let deadline = spawn_commit(Outcome::TimedOut);
            // The main thread is the response future's drop.
            let dropped = exchange
                .commit(Outcome::Cancelled)
                .map(|c| c.outcome())
                .ok();
            drop(exchange);
            let winners: Vec<Outcome> =
                [answered.join().unwrap(), deadline.join().unwrap(), dropped]
                    .into_iter()
                    .flatten()
                    .collect();
            assert_eq!(winners.len(), 1);
            assert_eq!(
                calls_of(&calls),
                winners,
                "the hook ran once, with the winner"
            );
            // Outcome: the winner.
            format!("{:?}", winners[0])
        },
    );
}

/// Negative control for the model above: a hook run by "whoever sees the exchange
/// uncommitted" (check, then commit) runs twice in some interleaving.
#[test]
#[should_panic(expected = "hook ran twice")]
fn negative_control_check_then_commit_runs_the_hook_twice() {
    loom::model(|| {
        let calls: Calls = Default::default();
        let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
        let naive = |exchange: &Exchange, calls: &Calls, outcome| {
            if !exchange.is_committed() {
                calls.lock().unwrap().push(outcome);
            }
            let _ = exchange.commit(outcome);
        };
        let other = {
            let (exchange, calls) = (exchange.clone(), calls.clone());
            thread::spawn(move || naive(&exchange, &calls, Outcome::TimedOut))
        };
        naive(&exchange, &calls, Outcome::Answered);
        other.join().unwrap();
        assert_eq!(calls_of(&calls).len(), 1, "hook ran twice");
    });
}

/// Property: the late-writes report runs at most once, at the drop of the last clone of the
/// exchange, after every refused write it counts: a task writes (racing the commit) and then
/// lets go; the committer lets go; the main thread lets go. The report exists iff the task's
/// write was refused, counts exactly that write, and runs after the task finished writing.
///
/// No stand-in: the report is run by the drop that takes the exchange's own count of clones
/// (a loom atomic, `AcqRel` decrements) to zero, so weakening that ordering to `Relaxed` lets
/// the last dropper miss the task's refused write, and this model fails.
#[test]
fn late_writes_report_runs_once_after_every_refused_write_it_counts() {
    explore(
        "late_writes_report_runs_once_after_every_refused_write_it_counts",
        2,
        || {
            let reports = std::sync::Arc::new(loom::sync::Mutex::new(Vec::new()));
            let task_done = std::sync::Arc::new(loom::sync::atomic::AtomicBool::new(false));
            let hooks = {
                let (reports, task_done) = (reports.clone(), task_done.clone());
                CommitHooks::new().on_late_writes(move |late| {
                    let after = task_done.load(loom::sync::atomic::Ordering::Relaxed);
                    reports.lock().unwrap().push((late.refused_writes(), after));
                })
            };
            let exchange = Exchange::with_hooks(SharedHeaders::new(), SharedHeaders::new(), &hooks);
            let task = {
                let (exchange, task_done) = (exchange.clone(), task_done.clone());
                thread::spawn(move || {
                    let refused = exchange.response().insert("x-task", v("1")).is_err();
                    task_done.store(true, loom::sync::atomic::Ordering::Relaxed);
                    drop(exchange);
                    refused
                })
            };
            let committer = {
                let exchange = exchange.clone();
                thread::spawn(move || {
                    drop(exchange.commit(Outcome::TimedOut));
                    drop(exchange);
                })
            };
            drop(exchange);
            let refused = task.join().unwrap();
            committer.join().unwrap();
            let reports = reports.lock().unwrap().clone();
            if refused {
                assert_eq!(
                    reports,
                    [(1, true)],
                    "one report, after the write, counting it"
                );
            } else {
                assert!(reports.is_empty(), "nothing refused, nothing reported");
            }
            // Outcome: whether the task's write was refused (and so reported).
            refused
        },
    );
}

/// Negative control: a report read when the commit returns (not at the last drop) misses a
/// write refused afterwards.
#[test]
#[should_panic(expected = "refused write missing from the report")]
fn negative_control_report_at_the_commit_misses_late_writes() {
    loom::model(|| {
        let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
        let task = {
            let exchange = exchange.clone();
            thread::spawn(move || exchange.response().insert("x-task", v("1")).is_err())
        };
        exchange.commit(Outcome::TimedOut).unwrap();
        let report = exchange.refused_writes(); // the naive report
        let refused = task.join().unwrap();
        assert_eq!(
            report,
            u64::from(refused),
            "refused write missing from the report"
        );
    });
}

/// Property: the annotations handle is created lazily, at the first `annotations()` call; a
/// first call racing the commit never loses a write: the write returned `Ok` iff it is in the
/// committed annotations, and a refused one is counted.
#[test]
fn lazy_annotations_racing_the_commit_never_lose_a_write() {
    explore(
        "lazy_annotations_racing_the_commit_never_lose_a_write",
        2,
        || {
            let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
            let task = {
                let exchange = exchange.clone();
                thread::spawn(move || exchange.annotations().insert("x-a", v("1")).is_ok())
            };
            let committed = exchange.commit(Outcome::TimedOut).unwrap();
            let wrote = task.join().unwrap();
            let logged = committed
                .annotations()
                .is_some_and(|a| a.contains_key("x-a"));
            assert_eq!(wrote, logged, "annotation write lost");
            assert_eq!(exchange.refused_writes(), u64::from(!wrote));
            // Outcome: whether the annotation write was accepted.
            wrote
        },
    );
}

/// Property: whoever sees the exchange committed (`is_committed`, `committed`: the response
/// future about to send the answer, the timer thread) also sees everything the `on_commit`
/// hook did (the log line): the record becomes visible only after the hook, with a release
/// that the readers acquire. The hook here only sets a relaxed loom flag, so nothing but the
/// exchange's own ordering can make it visible; weakening the exchange's `visible` store or
/// load to `Relaxed` makes this model fail ("committed before its log line").
#[test]
fn a_commit_is_seen_only_with_what_its_hook_did() {
    explore(
        "a_commit_is_seen_only_with_what_its_hook_did",
        MIN_SEEN,
        || {
            use loom::sync::atomic::{AtomicBool, Ordering};
            let logged = std::sync::Arc::new(AtomicBool::new(false));
            let hooks = {
                let logged = logged.clone();
                CommitHooks::new().on_commit(move |_| logged.store(true, Ordering::Relaxed))
            };
            let exchange = Exchange::with_hooks(SharedHeaders::new(), SharedHeaders::new(), &hooks);
            let committer = {
                let exchange = exchange.clone();
                thread::spawn(move || drop(exchange.commit(Outcome::TimedOut)))
            };
            let seen = exchange.is_committed();
            if seen {
                assert!(
                    logged.load(Ordering::Relaxed),
                    "committed before its log line"
                );
            }
            let record = exchange.committed();
            if let Some(committed) = &record {
                assert_eq!(committed.outcome(), Outcome::TimedOut);
                assert!(
                    logged.load(Ordering::Relaxed),
                    "committed before its log line"
                );
            }
            committer.join().unwrap();
            // Outcome: (`is_committed`, then `committed` found the record).
            (seen, record.is_some())
        },
    );
}
