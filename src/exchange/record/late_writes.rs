//! [`LateWrites`], the report of writes refused after the commit.

use std::time::Duration;

use super::Committed;

#[cfg(doc)]
use crate::exchange::{CommitHooks, Exchange};

/// Writes refused after the commit of an exchange (Kubernetes' "post-timeout activity"),
/// reported once, when the last clone of the [`Exchange`] is dropped, by
/// [`CommitHooks::on_late_writes`] (and
/// [`SharedHeadersLayer::on_late_writes`](crate::server::SharedHeadersLayer::on_late_writes)).
///
/// # Examples
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use shared_headers::{CommitHooks, Exchange, Outcome, SharedHeaders};
///
/// let reports = Arc::new(Mutex::new(Vec::new()));
/// let log = reports.clone();
/// let hooks = CommitHooks::new().on_late_writes(move |late| {
///     log.lock().unwrap().push((late.committed().outcome(), late.refused_writes()));
/// });
/// let exchange = Exchange::with_hooks(SharedHeaders::new(), SharedHeaders::new(), &hooks);
/// let task = exchange.clone();
/// exchange.commit(Outcome::TimedOut)?;
/// drop(exchange);
/// assert!(task.response().insert("x-late", "1".parse()?).is_err());
/// assert!(reports.lock().unwrap().is_empty()); // the task still holds the exchange
/// drop(task);
/// assert_eq!(*reports.lock().unwrap(), [(Outcome::TimedOut, 1)]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct LateWrites {
    pub(in crate::exchange) committed: Committed,
    pub(in crate::exchange) refused_writes: u64,
    pub(in crate::exchange) since_commit: Duration,
}

impl LateWrites {
    /// The record of the commit (the same one the `on_commit` hook saw).
    ///
    /// # Examples
    ///
    /// See [`LateWrites`].
    /// ```
    /// # use shared_headers::{CommitHooks};
    /// let hooks = CommitHooks::new().on_late_writes(|late| println!("{}", late.committed().outcome()));
    /// # drop(hooks);
    /// ```
    #[inline]
    pub fn committed(&self) -> &Committed {
        &self.committed
    }

    /// How many writes, through any handle of the exchange and any of their clones, were
    /// refused with [`Error::Sealed`](crate::Error::Sealed) after the commit. Never 0 in a
    /// report.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{CommitHooks};
    /// let hooks = CommitHooks::new().on_late_writes(|late| assert!(late.refused_writes() > 0));
    /// # drop(hooks);
    /// ```
    #[inline]
    pub fn refused_writes(&self) -> u64 {
        self.refused_writes
    }

    /// The time from the commit to the drop of the last clone of the exchange: how long work
    /// went on after its response was decided.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{CommitHooks};
    /// let hooks = CommitHooks::new().on_late_writes(|late| {
    ///     println!("late work for {:?}", late.since_commit());
    /// });
    /// # drop(hooks);
    /// ```
    #[inline]
    pub fn since_commit(&self) -> Duration {
        self.since_commit
    }
}
