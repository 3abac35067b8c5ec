//! Randomized schedules (shuttle's random and PCT schedulers) of an exchange's commit race, at
//! a size loom cannot explore exhaustively: a handler that writes and commits, two tasks it
//! spawned that write, a deadline committer, a logger that reads the exchange, and a late
//! writer.
//!
//! Under `--cfg shared_headers_loom --cfg shared_headers_shuttle`, `src/sync.rs` maps the crate's
//! primitives (writer locks, published cells, atomics, the once-cell) to shuttle's, with the same
//! stand-ins as the loom world, so every lock and atomic of the core is a point where shuttle may
//! switch threads. shuttle's atomics are sequentially consistent: these schedules check the
//! protocol's interleavings; the loom models check its orderings.
//!
//! Run (release; `SHUTTLE_ITERATIONS` schedules per scheduler, 10,000 by default):
//!
//! ```text
//! RUSTFLAGS="--cfg shared_headers_loom --cfg shared_headers_shuttle -C debug-assertions" \
//!     cargo test --release -p shared-headers-shuttle-tests --target-dir target/shuttle
//! ```
//!
//! Properties (the loom models' `exactly_one_commit_and_no_lost_write` and the origin scenario,
//! here at the whole race's size), checked in every schedule:
//! 1. exactly one of the handler's and the deadline's commits wins; the loser names the winner;
//! 2. the record equals what the winner sealed: the handles' snapshots now, what the hook saw,
//!    and what the logger read if it read the exchange committed;
//! 3. every accepted write is in the sealed snapshots, no refused one is;
//! 4. the commit hook ran exactly once;
//! 5. the refused writes are counted (`Exchange::refused_writes`).
//!
//! Each property has a negative control: a deliberately wrong claim about the same race, which
//! holds in some schedules only, so the schedulers must find a schedule that breaks it
//! (`should_panic`). They show that the schedules reach the interleavings each property is about
//! (the deadline winning, a task writing after the seal, the logger reading mid-race).
#![cfg(shared_headers_shuttle)]

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use http::HeaderValue;
use shared_headers::{
    CommitEvent, CommitHooks, Committed, Exchange, Outcome, SharedHeaders, Snapshot,
};
use shuttle::thread;

fn v(s: &'static str) -> HeaderValue {
    HeaderValue::from_static(s)
}

/// What one schedule of the race produced.
struct Race {
    exchange: Exchange,
    winner: Committed,
    handler_won: bool,
    /// (header name, accepted) of every write made by the tasks and the late writer.
    writes: Vec<(&'static str, bool)>,
    hook_runs: usize,
    hook_saw: Option<(Outcome, Snapshot, Snapshot)>,
    /// What the logger read, if it read the exchange committed.
    logged: Option<Committed>,
}

/// One schedule: the handler (the main thread) spawns two tasks and commits `Answered`; the
/// deadline commits `TimedOut`; a logger polls the exchange twice; a late writer writes after
/// the handler's commit returned.
fn race() -> Race {
    let hook_runs = Arc::new(AtomicUsize::new(0));
    let hook_saw = Arc::new(Mutex::new(None));
    let hooks = {
        let runs = Arc::clone(&hook_runs);
        let saw = Arc::clone(&hook_saw);
        CommitHooks::new().on_commit(move |event: &CommitEvent<'_>| {
            let committed = event.committed();
            runs.fetch_add(1, Ordering::Relaxed);
            *saw.lock().unwrap() = Some((
                committed.outcome(),
                committed.request().clone(),
                committed.response().clone(),
            ));
        })
    };
    let exchange = Exchange::with_hooks(SharedHeaders::new(), SharedHeaders::new(), &hooks);
    exchange.request().insert("x-id", v("1")).unwrap();

    let deadline = {
        let exchange = exchange.clone();
        thread::spawn(move || exchange.commit(Outcome::TimedOut))
    };
    let logger = {
        let exchange = exchange.clone();
        thread::spawn(move || {
            let first = exchange.committed();
            thread::yield_now();
            first.or_else(|| exchange.committed())
        })
    };
    let spawn_task = |name: &'static str| {
        let exchange = exchange.clone();
        thread::spawn(move || {
            let accepted = exchange.response().insert(name, v("1")).is_ok();
            (name, accepted)
        })
    };
    // The handler: spawns its tasks, writes, commits.
    let task_a = spawn_task("x-task-a");
    let task_b = spawn_task("x-task-b");
    let handler_wrote = exchange.response().insert("x-handler", v("1")).is_ok();
    let answered = exchange.commit(Outcome::Answered);
    let late = spawn_task("x-late");

    let timed_out = deadline.join().unwrap();
    let mut writes = vec![("x-handler", handler_wrote)];
    for task in [task_a, task_b, late] {
        writes.push(task.join().unwrap());
    }
    let logged = logger.join().unwrap();

    let results = [&answered, &timed_out];
    let winners: Vec<&Committed> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(winners.len(), 1, "exactly one commit wins");
    let winner = winners[0].clone();
    for lost in results.iter().filter_map(|r| r.as_ref().err()) {
        assert_eq!(lost.winner(), &winner, "the loser names the winner");
    }
    let hook_saw = hook_saw.lock().unwrap().take();
    Race {
        handler_won: answered.is_ok(),
        exchange,
        winner,
        writes,
        hook_runs: hook_runs.load(Ordering::Relaxed),
        hook_saw,
        logged,
    }
}

/// The properties of one schedule (see the module docs).
fn check(race: &Race) {
    let winner = &race.winner;
    // 2. The record equals what was sealed, what the hook saw and what the logger read.
    assert!(winner.request().is_sealed() && winner.response().is_sealed());
    assert_eq!(winner.request()["x-id"], "1");
    assert_eq!(race.exchange.request().snapshot(), *winner.request());
    assert_eq!(race.exchange.response().snapshot(), *winner.response());
    assert_eq!(race.exchange.committed().as_ref(), Some(winner));
    let (outcome, request, response) = race.hook_saw.clone().expect("the hook ran");
    assert_eq!(outcome, winner.outcome(), "the hook saw the winner");
    assert_eq!(
        &request,
        winner.request(),
        "the hook saw the sealed request"
    );
    assert_eq!(
        &response,
        winner.response(),
        "the hook saw the sealed response"
    );
    if let Some(logged) = &race.logged {
        assert_eq!(logged, winner, "the logger read the winner's record");
    }
    // 3. Every accepted write is in the sealed response, no refused one is.
    for &(name, accepted) in &race.writes {
        assert_eq!(
            winner.response().contains_key(name),
            accepted,
            "{name}: accepted {accepted}, but sealed {:?}",
            winner.response()
        );
    }
    // 4. The hook ran exactly once.
    assert_eq!(race.hook_runs, 1, "the hook runs exactly once");
    // 5. The refused writes are counted.
    let refused = race.writes.iter().filter(|(_, accepted)| !accepted).count() as u64;
    assert_eq!(
        race.exchange.refused_writes(),
        refused,
        "refused writes counted"
    );
}

fn iterations() -> usize {
    std::env::var("SHUTTLE_ITERATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000)
}

/// Runs `f` under both schedulers: `iterations()` random schedules, then as many PCT schedules
/// (depth 3: up to two priority changes, enough for "the deadline commits between the handler's
/// write and its commit"). Collects the distinct outcomes `f` returns, prints them (`--nocapture`)
/// and asserts that at least `min` were reached, so that schedulers that stopped exploring
/// fail the test instead of passing it vacuously (the set is kept in a `std` mutex, which
/// shuttle does not schedule: it records, it orders nothing).
fn schedules<T>(name: &str, min: usize, f: impl Fn() -> T + Send + Sync + 'static) -> BTreeSet<T>
where
    T: Ord + std::fmt::Debug + Send + 'static,
{
    let f = Arc::new(f);
    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    let (g, record) = (Arc::clone(&f), Arc::clone(&seen));
    shuttle::check_random(
        move || {
            let outcome = g();
            record.lock().unwrap().insert(outcome);
        },
        iterations(),
    );
    let random = seen.lock().unwrap().len();
    let record = Arc::clone(&seen);
    shuttle::check_pct(
        move || {
            let outcome = f();
            record.lock().unwrap().insert(outcome);
        },
        iterations(),
        3,
    );
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    eprintln!(
        "shuttle outcomes: {name}: {} ({random} from the random schedules) {seen:?}",
        seen.len()
    );
    assert!(
        seen.len() >= min,
        "{name}: {} distinct outcomes reached, expected at least {min}: {seen:?}",
        seen.len()
    );
    seen
}

/// A lower bound on the distinct outcomes `commit_race_of_the_whole_exchange` reaches with
/// `SHUTTLE_ITERATIONS` = 10,000 (the test command's). There are 24 possible (the late write is
/// always refused; a deadline win may refuse the handler's write; each task's write either
/// way; the logger sees the commit or not); runs reach all 24 (about 10 from the random
/// schedules, the rest from PCT), and the schedules are random, so the bound leaves a margin.
const MIN_RACE: usize = 20;

/// Properties 1-5 in every schedule. Outcome: (the handler won, which writes were accepted in
/// the order handler, task a, task b, late, the logger read the exchange committed).
#[test]
fn commit_race_of_the_whole_exchange() {
    schedules("commit_race_of_the_whole_exchange", MIN_RACE, || {
        let race = race();
        check(&race);
        let accepted: Vec<bool> = race.writes.iter().map(|(_, accepted)| *accepted).collect();
        (race.handler_won, accepted, race.logged.is_some())
    });
}

// ---------------------------------------------------------------------------------------------
// Negative controls: each claim holds in some schedules only; the schedulers must break it.
// ---------------------------------------------------------------------------------------------

/// Control for 1: the schedules reach a race the deadline wins.
#[test]
#[should_panic(expected = "the handler always wins")]
fn control_the_deadline_sometimes_wins() {
    schedules("control", 0, || {
        assert!(race().handler_won, "the handler always wins")
    });
}

/// Control for 3 and 5: the schedules reach a task's write refused by the seal (so property 3's
/// "no refused write is sealed" and 5's count are exercised with refusals).
#[test]
#[should_panic(expected = "every task write is accepted")]
fn control_a_task_write_is_sometimes_refused() {
    schedules("control", 0, || {
        let race = race();
        let tasks = race.writes.iter().filter(|(n, _)| n.starts_with("x-task"));
        assert!(
            tasks.clone().all(|(_, accepted)| *accepted),
            "every task write is accepted"
        );
    });
}

/// Control for 3: the schedules reach a task's write accepted before the seal (so "accepted is
/// sealed" is exercised with accepted writes).
#[test]
#[should_panic(expected = "no task write is accepted")]
fn control_a_task_write_is_sometimes_accepted() {
    schedules("control", 0, || {
        let race = race();
        let mut tasks = race.writes.iter().filter(|(n, _)| n.starts_with("x-task"));
        assert!(
            !tasks.any(|(_, accepted)| *accepted),
            "no task write is accepted"
        );
    });
}

/// Control for 2: the schedules reach a logger that reads the exchange committed mid-race (so
/// "the logger read the winner's record" is exercised).
#[test]
#[should_panic(expected = "the logger never sees the commit")]
fn control_the_logger_sometimes_sees_the_commit() {
    schedules("control", 0, || {
        assert!(race().logged.is_none(), "the logger never sees the commit")
    });
}

/// Control for 4 and the checker itself: a hook that counts twice when it runs in a thread
/// other than the handler's makes property 4 fail (the check is not vacuous).
#[test]
#[should_panic(expected = "the hook runs exactly once")]
fn control_a_double_counted_hook_fails_property_4() {
    schedules("control", 0, || {
        let mut race = race();
        if !race.handler_won {
            race.hook_runs += 1;
        }
        check(&race);
    });
}
