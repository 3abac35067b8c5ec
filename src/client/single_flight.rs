//! The decision core of a version-aware, single-flight refresh.
//!
//! **Not public.** Users get it through [`Refresher`](super::Refresher), which wraps this core
//! for async code on Tokio; no public signature names its types. It is synchronous and needs no
//! runtime; the loom models in `loom-tests/tests/client.rs` check it (built with
//! `--cfg shared_headers_loom`, the only build where this module is `pub`). Its examples are the
//! unit tests in `single_flight/tests.rs` (`example_*`).
//!
//! When a token expires, every in-flight request that used it fails at about the same time. If
//! each of them starts its own refresh, the auth server sees a stampede and the defaults are
//! rewritten once per failed request. The rule this module implements is:
//!
//! * a caller reports the **version** of the defaults its request used (the one that failed);
//! * if that version is **no longer current**, somebody already refreshed: the caller is
//!   [`Role::Stale`] and retries at once with the current defaults;
//! * if it is current and **no refresh is in flight**, the caller becomes the [`Role::Leader`]:
//!   it runs the refresh and publishes the new headers with [`Lead::publish`];
//! * if it is current and a refresh **is in flight**, the caller is a [`Role::Follower`]: it waits
//!   on the attempt's rendezvous value `P` and learns the leader's outcome.
//!
//! Publishing the new headers and ending the attempt happen under one lock, so a caller either
//! sees the attempt in flight or sees the new version, never neither: no caller can start a
//! second refresh for a version that was just refreshed, and no follower can miss the outcome.
//!
//! # Locks
//!
//! The gate has one small mutex, held only inside [`SingleFlight::begin`] and while an attempt
//! ends. [`Lead::publish`] takes it *inside* the headers' write (after the writer lock, for the
//! duration of one merge and store: no retries, no second copy of the map). Nothing takes the
//! two locks in the other order, and [`started`](SingleFlight::started),
//! [`in_flight`](SingleFlight::in_flight) and `Debug` take no lock at all, so any of them (and
//! `begin`) may be called from inside a [`SharedHeaders::update`] closure without deadlocking
//! against a publishing leader.
//!
//! This module is synchronous and runtime-independent: it only decides roles and publishes. How
//! followers *wait* is up to `P`, a value shared by the leader and the followers of one attempt
//! (the `client` feature's [`Refresher`](crate::client::Refresher) uses a `tokio::sync::watch`
//! channel; the loom models use a mutex and a condition variable). That split is what lets loom
//! check the rule exhaustively.

use std::fmt;
use std::sync::Arc;

use http::HeaderMap;

use crate::error::Error;
use crate::merge::merge_replacing;
use crate::shared::SharedHeaders;
use crate::snapshot::Snapshot;
use crate::sync::{AtomicBool, AtomicU64, Mutex, MutexGuard, Ordering};
use crate::writer_lock::WriteOp;

/// The value the leader and the followers of one refresh attempt share.
///
/// A new one is made (with [`Default`]) for every attempt. The leader gets it back from
/// [`Lead::publish`] or [`Lead::fail`] and uses it to tell the followers the outcome; if the
/// leader is dropped before either (its task was cancelled), [`SingleFlight`] ends the attempt
/// and calls [`abandon`](Rendezvous::abandon), so that followers do not wait forever.
pub trait Rendezvous: Default {
    /// The leader of this attempt went away without publishing or failing: wake the followers
    /// (typically so that one of them takes over). Called at most once, without any lock held.
    fn abandon(&self);
}

/// Decides, for each failed version, who refreshes, who waits, and who is already late.
///
/// See the [module documentation](self) for the rule and an example. One `SingleFlight` guards
/// one [`SharedHeaders`]; keep it next to the handle (for example in an `Arc`). Writes to the
/// headers through other paths are allowed: they change the version, which only makes more
/// callers [`Role::Stale`].
pub struct SingleFlight<P> {
    headers: SharedHeaders,
    /// The attempt in flight, if any. Locked only by `begin` and by the end of an attempt; when
    /// the headers' writer lock is held too, it is always taken second (see `Lead::publish`).
    attempt: Mutex<Option<Arc<P>>>,
    /// Mirrors `attempt.is_some()` for lock-free observers; written only under `attempt`.
    busy: AtomicBool,
    /// Attempts started so far (leaders elected); written only under `attempt`.
    started: AtomicU64,
}

/// What [`SingleFlight::decide`] found; the caller wraps a new attempt in a [`Lead`].
enum Decision<P> {
    Stale(u64),
    Follower(Arc<P>),
    Leader(Arc<P>),
}

/// The gate a [`Lead`] ends its attempt on: borrowed ([`SingleFlight::begin`]) or shared
/// ([`SingleFlight::begin_owned`], for a `'static` leader that can move into a spawned task).
enum Gate<'a, P> {
    Borrowed(&'a SingleFlight<P>),
    // Only `begin_owned` makes one (see there).
    #[cfg_attr(not(any(test, shared_headers_loom)), allow(dead_code))]
    Owned(Arc<SingleFlight<P>>),
}

impl<P> Gate<'_, P> {
    #[inline]
    fn get(&self) -> &SingleFlight<P> {
        match self {
            Gate::Borrowed(flight) => flight,
            Gate::Owned(flight) => flight,
        }
    }
}

/// What a caller of [`SingleFlight::begin`] must do.
///
/// The three roles are the whole rule (lead, wait, or retry at once), so the enum is exhaustive
/// on purpose: a caller's `match` must handle each, and a new role would be a new rule.
#[must_use = "a dropped `Role::Leader` abandons the refresh"]
pub enum Role<'a, P: Rendezvous> {
    /// The failed version is no longer current (another refresh, or another write, published
    /// since): retry with the current defaults. Nothing was started.
    Stale {
        /// The version that is current now.
        current: u64,
    },
    /// The caller must run the refresh and then [`publish`](Lead::publish) or
    /// [`fail`](Lead::fail). Dropping the `Lead` abandons the attempt.
    Leader(Lead<'a, P>),
    /// A refresh is in flight: wait on `P` for its outcome.
    Follower(Arc<P>),
}

impl<P: Rendezvous> fmt::Debug for Role<'_, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Role::Stale { current } => f.debug_struct("Stale").field("current", current).finish(),
            Role::Leader(_) => f.write_str("Leader"),
            Role::Follower(_) => f.write_str("Follower"),
        }
    }
}

/// The right, and the duty, to finish one refresh attempt.
///
/// Finish it with [`publish`](Self::publish) or [`fail`](Self::fail). If it is dropped instead,
/// the attempt ends as abandoned: the next caller with a current failed version becomes the
/// leader, and [`Rendezvous::abandon`] wakes the followers.
pub struct Lead<'a, P: Rendezvous> {
    gate: Gate<'a, P>,
    attempt: Option<Arc<P>>,
}

impl<P: Rendezvous> SingleFlight<P> {
    /// Creates the gate for `headers`, with no attempt in flight.
    pub fn new(headers: SharedHeaders) -> Self {
        SingleFlight {
            headers,
            attempt: Mutex::new(None),
            busy: AtomicBool::new(false),
            started: AtomicU64::new(0),
        }
    }

    /// The headers this gate publishes to.
    #[inline]
    pub fn headers(&self) -> &SharedHeaders {
        &self.headers
    }

    /// Decides the role of a caller whose request failed with the defaults at `failed_version`.
    ///
    /// In order, under one lock: if `failed_version` is not the current version, the caller is
    /// [`Role::Stale`]; else if an attempt is in flight, a [`Role::Follower`] of it; else the
    /// [`Role::Leader`] of a new attempt. Never blocks on the refresh itself.
    pub fn begin(&self, failed_version: u64) -> Role<'_, P> {
        self.decide(failed_version).into_role(Gate::Borrowed(self))
    }

    /// [`begin`](Self::begin) for a gate kept in an [`Arc`]: a [`Role::Leader`] then holds a
    /// clone of the `Arc` instead of a borrow, so the `Lead` is `'static` and can be moved into a
    /// spawned task or thread that outlives the caller (a refresh that survives the caller's
    /// cancellation). The rule is the same as `begin`'s.
    ///
    /// An associated function (`SingleFlight::begin_owned(&flight, v)`), like [`Arc::clone`].
    ///
    /// Unused by [`Refresher`](crate::client::Refresher) (whose callers spawn the
    /// `refresh_if_current` future instead); kept, with its test, for the day the gate is public
    /// again (it was, before 0.1).
    #[cfg_attr(not(any(test, shared_headers_loom)), allow(dead_code))]
    pub fn begin_owned(this: &Arc<Self>, failed_version: u64) -> Role<'static, P> {
        this.decide(failed_version)
            .into_role(Gate::Owned(Arc::clone(this)))
    }

    /// The rule of [`begin`](Self::begin), under the gate's lock.
    fn decide(&self, failed_version: u64) -> Decision<P> {
        let mut attempt = self.attempt.lock();
        // Versions change either under this lock (a leader publishing: it holds the lock from
        // before its store until its attempt has ended) or through writes outside this gate;
        // both are fine: a version that is not current has been replaced by something newer.
        let current = self.headers.version();
        if failed_version != current {
            return Decision::Stale(current);
        }
        if let Some(running) = &*attempt {
            return Decision::Follower(Arc::clone(running));
        }
        let new = Arc::new(P::default());
        *attempt = Some(Arc::clone(&new));
        // `busy` is a hint (`in_flight`, `Debug`): every decision is made under the gate's lock,
        // and nothing is read on the strength of its value, so all its accesses are Relaxed
        // (loom: all client models pass with them Relaxed, and passed with them Release/Acquire).
        self.busy.store(true, Ordering::Relaxed);
        self.started.fetch_add(1, Ordering::Relaxed);
        Decision::Leader(new)
    }

    /// How many attempts were started (leaders elected), including failed and abandoned ones.
    pub fn started(&self) -> u64 {
        self.started.load(Ordering::Relaxed)
    }

    /// Whether an attempt is in flight now.
    ///
    /// Lock-free, and only a hint under concurrency: the answer may be outdated as soon as it is
    /// returned. Use [`begin`](Self::begin) to act on it.
    pub fn in_flight(&self) -> bool {
        self.busy.load(Ordering::Relaxed)
    }

    /// Ends the attempt in flight, with the gate's lock already held; returns it.
    fn end_locked(&self, attempt: &mut MutexGuard<'_, Option<Arc<P>>>) -> Option<Arc<P>> {
        self.busy.store(false, Ordering::Relaxed);
        attempt.take()
    }

    /// Ends the attempt in flight without publishing; returns it.
    fn end(&self) -> Option<Arc<P>> {
        self.end_locked(&mut self.attempt.lock())
    }
}

impl<P: Rendezvous> Decision<P> {
    fn into_role(self, gate: Gate<'_, P>) -> Role<'_, P> {
        match self {
            Decision::Stale(current) => Role::Stale { current },
            Decision::Follower(attempt) => Role::Follower(attempt),
            Decision::Leader(attempt) => Role::Leader(Lead {
                gate,
                attempt: Some(attempt),
            }),
        }
    }
}

impl<P: Rendezvous> fmt::Debug for SingleFlight<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Lock-free: `Debug` may run anywhere, including inside a write to the headers.
        f.debug_struct("SingleFlight")
            .field("version", &self.headers.version())
            .field("in_flight", &self.in_flight())
            .field("started", &self.started())
            .finish()
    }
}

impl<'a, P: Rendezvous> Lead<'a, P> {
    /// Publishes `new` into the headers as one atomic write and ends the attempt.
    ///
    /// Every name in `new` replaces all values of that name in the headers (with all of `new`'s
    /// values for it, sensitive flags included); other names are kept. The merge runs once, on
    /// the version current at the write, under the headers' writer lock: a concurrent write
    /// through another path is never lost and never causes a retry. The gate's lock is taken
    /// inside that write and held until the new version is stored and the attempt has ended, so
    /// a caller that arrives afterwards sees the new version (and is [`Role::Stale`]) rather
    /// than starting another refresh.
    ///
    /// Returns the published snapshot and the attempt's rendezvous, on which the leader tells
    /// the followers the outcome.
    ///
    /// # Errors
    ///
    /// [`Error::Sealed`] if the headers are sealed, [`Error::MaxSizeReached`] if the result
    /// would not fit in a `HeaderMap`, [`Error::LimitExceeded`] if it would be over a limit set
    /// with [`SharedHeaders::builder`]. Nothing is published then, the attempt still ends, and
    /// the rendezvous is handed back in the error so the leader can report the failure.
    ///
    /// # Complexity
    ///
    /// One copy of the map and one merge of `new`: O(headers + `new`), whatever other writers do.
    pub fn publish(mut self, new: &HeaderMap) -> Result<(Snapshot, Arc<P>), PublishError<P>> {
        let (result, ended) = {
            let flight = self.gate.get();
            // Lock order: the headers' writer lock (taken by the write), then the gate's lock
            // (taken inside it). Nothing takes them the other way round.
            let written = flight.headers.apply(WriteOp::RefreshPublish, |map| {
                let attempt = flight.attempt.lock();
                merge_replacing(map, new)?;
                // Returned, so that it stays held until the new version has been stored.
                Ok::<_, Error>(attempt)
            });
            match written {
                Ok((mut attempt, snapshot)) => (Ok(snapshot), flight.end_locked(&mut attempt)),
                // Nothing was published: ending the attempt separately is fine.
                Err(error) => (Err(error), flight.end()),
            }
        };
        let attempt = self.take(ended);
        match result {
            Ok(snapshot) => Ok((snapshot, attempt)),
            Err(error) => Err(PublishError { error, attempt }),
        }
    }

    /// Ends the attempt without publishing (the refresh failed) and returns its rendezvous, on
    /// which the leader reports the failure to the followers.
    ///
    /// The gate is not poisoned: the next caller whose failed version is still current becomes
    /// the leader of a new attempt.
    pub fn fail(mut self) -> Arc<P> {
        let ended = self.gate.get().end();
        self.take(ended)
    }

    /// The rendezvous of this attempt (the one the followers wait on).
    #[cfg_attr(not(any(test, shared_headers_loom)), allow(dead_code))]
    pub fn attempt(&self) -> &Arc<P> {
        self.attempt
            .as_ref()
            .expect("a Lead holds its attempt until it is consumed")
    }

    fn take(&mut self, ended: Option<Arc<P>>) -> Arc<P> {
        debug_assert!(
            ended
                .as_ref()
                .zip(self.attempt.as_ref())
                .is_some_and(|(a, b)| Arc::ptr_eq(a, b)),
            "only the leader ends its attempt"
        );
        drop(ended);
        self.attempt
            .take()
            .expect("a Lead holds its attempt until it is consumed")
    }
}

impl<P: Rendezvous> Drop for Lead<'_, P> {
    fn drop(&mut self) {
        if let Some(attempt) = self.attempt.take() {
            drop(self.gate.get().end());
            attempt.abandon();
        }
    }
}

impl<P: Rendezvous> fmt::Debug for Lead<'_, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lead").finish_non_exhaustive()
    }
}

/// [`Lead::publish`] could not publish; the attempt has ended.
#[non_exhaustive]
pub struct PublishError<P> {
    /// Why nothing was published.
    pub error: Error,
    /// The attempt's rendezvous, to report the failure to the followers.
    pub attempt: Arc<P>,
}

impl<P> fmt::Debug for PublishError<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PublishError")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl<P> fmt::Display for PublishError<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Only its own words: `error` is the source.
        f.write_str("refreshed headers were not published")
    }
}

impl<P> std::error::Error for PublishError<P> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

#[cfg(test)]
mod tests;
