//! loom models of shared-headers live in `tests/`; run them with `RUSTFLAGS="--cfg shared_headers_loom"`.
//!
//! This library holds what every model shares: [`explore`], which runs a model under
//! `loom::model` and counts the distinct outcomes its executions reached.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::sync::{Arc, Mutex, PoisonError};

/// Runs `model` under `loom::model` (every execution loom explores within
/// `LOOM_MAX_PREEMPTIONS`), collects the distinct outcomes its executions return, prints them
/// (`cargo test -- --nocapture` shows them), and asserts that at least `min` were reached.
///
/// Why: a model that passes proves its property only over the executions loom explored, and
/// loom may explore fewer than one expects (tokio-rs/loom#392: a spawned thread that loads a
/// word and then stores one is explored in one execution only). The lower bound is the count
/// the model reached under the test command's bound (`LOOM_MAX_PREEMPTIONS=2`), so a model that
/// stops exploring fails instead of passing vacuously. Returns the outcomes, for a model to
/// assert that a particular one was reached.
///
/// The set lives in a `std` mutex outside loom's view: it records, it orders nothing loom sees.
pub fn explore<T>(
    name: &str,
    min: usize,
    model: impl Fn() -> T + Send + Sync + 'static,
) -> BTreeSet<T>
where
    T: Ord + Debug + Send + 'static,
{
    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    let record = Arc::clone(&seen);
    loom::model(move || {
        let outcome = model();
        record
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(outcome);
    });
    let seen = std::mem::take(&mut *seen.lock().unwrap_or_else(PoisonError::into_inner));
    eprintln!("loom outcomes: {name}: {} {seen:?}", seen.len());
    assert!(
        seen.len() >= min,
        "{name}: {} distinct outcomes reached, expected at least {min} (did loom stop \
         exploring?): {seen:?}",
        seen.len()
    );
    seen
}
