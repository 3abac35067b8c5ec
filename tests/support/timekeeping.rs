//! Scenarios whose verdict needs the machine to keep time (admission's delay-based limit
//! reads a runtime that is short of CPU as queueing): the heavy scenarios of one test binary
//! run one at a time ([`heavy`]), and [`judged`] runs a scenario on a fresh 2-worker runtime
//! with a [`LagProbe`] beside it, again (at most [`ATTEMPTS`] in all, a fresh layer each
//! time) when the runtime's timers were more than [`LATE`] late at p99 during a failed
//! attempt. A failed attempt on time fails the test; when no attempt kept time the test
//! prints "inconclusive: timers N ms late" and passes. No bar is loosened: a verdict is
//! judged or not, never judged more leniently. [`retried`] does the same for a scenario
//! that asserts (panics) instead of returning its verdict.

#![allow(dead_code)]

use std::future::Future;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// Timer lateness (p99 over time of a task sleeping 1 ms at a time: [`LagProbe::stop`])
/// over which an attempt's verdict does not count: the machine, not the crate, set the
/// times it measured.
pub const LATE: Duration = Duration::from_millis(5);

/// Attempts of a scenario whose failures came while the timers were late.
pub const ATTEMPTS: usize = 3;

/// Each attempt finishes well within this; a hang fails instead of blocking CI.
pub const LIMIT: Duration = Duration::from_secs(30);

// The probe, shared with the overload example: `support/lag_probe.rs`.
#[path = "lag_probe.rs"]
mod lag_probe;

pub use lag_probe::LagProbe;

static HEAVY: Mutex<()> = Mutex::new(());

/// The binary's heavy scenarios run one at a time (each measures times on a 2-worker
/// runtime; side by side on 2 cores they would measure each other).
pub fn heavy() -> MutexGuard<'static, ()> {
    HEAVY.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Fails the scenario's attempt (returns `Err` with the message) unless `cond` holds.
#[allow(unused_macros)]
macro_rules! verdict {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

/// What [`judged`] concluded, when it did not fail the test.
#[derive(Debug, PartialEq, Eq)]
pub enum Judged {
    /// An attempt passed.
    Held,
    /// Every attempt failed while the timers were late (their p99 lateness, in ms).
    Inconclusive(Vec<u64>),
}

/// Runs `scenario` (which builds its own layer: a fresh one each attempt) under the
/// binary's [`heavy`] lock, each attempt on a fresh 2-worker runtime with a [`LagProbe`]:
/// passes at the first attempt that passes; panics with the verdict of the first attempt
/// that failed while the timers kept time (at most [`LATE`] late at p99); runs it again
/// after a failure with late timers, at most [`ATTEMPTS`] in all; when every attempt failed
/// with late timers, prints "inconclusive: timers N ms late" and passes. (An `Err` is
/// [`retried`]'s panic, with the verdict as its message.)
pub fn judged<F, Fut>(scenario: F) -> Judged
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    retried(|| {
        let attempt = scenario();
        async move {
            if let Err(why) = attempt.await {
                panic!("{why}");
            }
        }
    })
}

/// [`judged`] for a scenario written with assertions (it panics when it fails, as most of
/// the older tests do): each attempt runs on a fresh 2-worker runtime with a [`LagProbe`],
/// under the binary's [`heavy`] lock (a scenario run by it must not take that lock
/// itself); a panic while the timers kept time fails the test with the scenario's own
/// message; a panic while they ran late runs it again, at most [`ATTEMPTS`] in all; when
/// every attempt failed with late timers, prints "inconclusive: timers N ms late" and
/// passes.
pub fn retried<F, Fut>(scenario: F) -> Judged
where
    F: Fn() -> Fut,
    Fut: Future<Output = ()>,
{
    let _heavy = heavy();
    let mut late = Vec::new();
    for attempt in 1..=ATTEMPTS {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let probe = runtime.block_on(async { LagProbe::start() });
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            runtime.block_on(async {
                tokio::time::timeout(LIMIT, scenario())
                    .await
                    .expect("test timed out")
            })
        }));
        let lag = runtime.block_on(probe.stop());
        let ms = lag.as_secs_f64() * 1e3;
        match outcome {
            Ok(()) => return Judged::Held,
            Err(panic) if lag <= LATE => {
                say(format_args!(
                    "attempt {attempt} failed: timers {ms:.1} ms late at p99, on time"
                ));
                std::panic::resume_unwind(panic)
            }
            Err(_) => {
                say(format_args!(
                    "attempt {attempt} not judged: timers {ms:.1} ms late at p99 (over {} ms): \
                     its panic above",
                    LATE.as_millis()
                ));
                late.push(lag.as_millis() as u64);
            }
        }
    }
    let each: Vec<String> = late.iter().map(u64::to_string).collect();
    say(format_args!(
        "inconclusive: timers {} ms late",
        each.join(", ")
    ));
    Judged::Inconclusive(late)
}

/// Writes a line to the process's stderr itself, past the test harness's capture: a retry
/// or an inconclusive verdict shows in the log of a run that passed.
fn say(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}
