//! The commit: [`Exchange::commit`] and its free-function form for the layer's timer, the
//! winner's record through the exchange, and [`AlreadyCommitted`] for the losers.

use std::fmt;
use std::sync::Arc;

use http::StatusCode;

use super::{CommitEvent, Committed, Exchange, Inner, Outcome, Record};
use crate::shared::SharedHeaders;
use crate::sync::Ordering;
use crate::writer_lock::WriteOp;

#[cfg(doc)]
use super::CommitHooks;

impl Exchange {
    /// Commits the exchange once: seals the three handles, runs the
    /// [`on_commit`](CommitHooks::on_commit) hook if any, and records `outcome` as the winner.
    ///
    /// Of any number of concurrent calls, exactly one returns `Ok`, with the sealed request,
    /// response and annotation snapshots. Commits are serialized by the exchange's commit lock,
    /// and the seals happen inside the winning call, so a write racing the commit either lands
    /// in the committed snapshot (and returned `Ok`) or is refused with
    /// [`Error::Sealed`](crate::Error::Sealed): it is never accepted and then missing from what
    /// was committed. The record becomes visible to [`committed`](Self::committed) and
    /// [`is_committed`](Self::is_committed) once the handles are sealed and the hook returned;
    /// a losing `commit` waits for both.
    ///
    /// If a handle was already sealed by other code, its sealed snapshot is used as is.
    ///
    /// # Errors
    ///
    /// [`AlreadyCommitted`], carrying the winner's [`Committed`] record, if the exchange was
    /// committed before.
    ///
    /// # Panics
    ///
    /// If called from inside [`SharedHeaders::update`] (or another closure that runs under a
    /// handle's writer lock) on one of this exchange's handles, on the same thread, or from the
    /// exchange's own `on_commit` hook: `commit` takes the handles' writer locks and the commit
    /// lock, so it would deadlock; it panics instead, before taking anything, and the exchange
    /// stays as it was. Commit after the closure returns. Reading the exchange there
    /// ([`committed`](Self::committed),
    /// [`is_committed`](Self::is_committed), `Debug`) is fine: reads take no lock.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Exchange, Outcome, SharedHeaders};
    /// let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    /// let won = exchange.commit(Outcome::Answered)?;
    /// assert_eq!(won.outcome(), Outcome::Answered);
    /// assert!(won.request().is_sealed() && won.response().is_sealed());
    ///
    /// let lost = exchange.commit(Outcome::Cancelled).unwrap_err();
    /// assert_eq!(*lost.winner(), won);
    /// # Ok::<(), shared_headers::AlreadyCommitted>(())
    /// ```
    pub fn commit(&self, outcome: Outcome) -> Result<Committed, AlreadyCommitted> {
        self.commit_with(outcome, None)
    }

    /// [`commit`](Self::commit) with the status the committer knows, for the record.
    pub(crate) fn commit_with(
        &self,
        outcome: Outcome,
        status: Option<StatusCode>,
    ) -> Result<Committed, AlreadyCommitted> {
        commit_sides(
            self.inner_arc(),
            &self.request,
            &self.response,
            outcome,
            status,
        )
    }

    /// Whether [`announce`](Self::announce) runs anything (a commit hook is set).
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(crate) fn announces(&self) -> bool {
        self.inner().hooks.has_commit_hooks()
    }

    /// Runs the `on_commit` hook of a server-layer exchange (whose commit does not run it)
    /// with the response as it leaves the layer, if one does. Called once per exchange, by
    /// the response future that owns it, after the commit (whoever made it).
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn announce(&self, committed: &Committed, sent: Option<&http::response::Parts>) {
        debug_assert!(
            self.inner().defer_hook,
            "announce is for the layer's exchanges"
        );
        self.inner()
            .hooks
            .committed(&CommitEvent { committed, sent });
    }

    /// The winner's record, or `None` while the exchange is not committed.
    ///
    /// Takes no lock: safe to call from anywhere, including inside
    /// [`SharedHeaders::update`] on one of the exchange's handles while another thread commits.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Exchange, Outcome, SharedHeaders};
    /// let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    /// assert!(exchange.committed().is_none());
    /// exchange.commit(Outcome::TimedOut)?;
    /// assert_eq!(exchange.committed().unwrap().outcome(), Outcome::TimedOut);
    /// # Ok::<(), shared_headers::AlreadyCommitted>(())
    /// ```
    pub fn committed(&self) -> Option<Committed> {
        self.inner().is_visible().then(|| Committed {
            inner: Arc::clone(self.inner_arc()),
        })
    }

    /// The outcome of the commit, if it is visible (no reference count taken).
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    #[inline]
    pub(crate) fn committed_outcome(&self) -> Option<Outcome> {
        let inner = self.inner();
        inner.is_visible().then(|| inner.record().outcome)
    }

    /// Whether [`commit`](Self::commit) succeeded once. Once `true`, always `true`.
    ///
    /// Takes no lock, like [`committed`](Self::committed).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Exchange, Outcome, SharedHeaders};
    /// let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    /// exchange.commit(Outcome::Answered)?;
    /// assert!(exchange.is_committed());
    /// # Ok::<(), shared_headers::AlreadyCommitted>(())
    /// ```
    pub fn is_committed(&self) -> bool {
        self.inner().is_visible()
    }
}

/// The commit of the exchange in `inner`, through its two handles: see [`Exchange::commit`].
/// A free function so that the layer's timer can commit through a weak reference, without
/// holding (and, as the last one, dropping) an `Exchange`.
pub(crate) fn commit_sides(
    inner_arc: &Arc<Inner>,
    request: &SharedHeaders,
    response: &SharedHeaders,
    outcome: Outcome,
    status: Option<StatusCode>,
) -> Result<Committed, AlreadyCommitted> {
    let inner: &Inner = inner_arc;
    // A commit from inside a write closure on one of the handles would wait for that
    // handle's writer lock forever: panic first, before taking anything.
    request.assert_not_writing(WriteOp::ExchangeCommit);
    response.assert_not_writing(WriteOp::ExchangeCommit);
    // The annotations too, if they exist: a commit inside their `update` would otherwise
    // seal the two handles above and then panic at the annotations' seal (a half-commit).
    // `Relaxed` suffices: only a write on this thread matters, and this thread made or
    // fetched the handle (under the `annotations` lock, after the flag was set) before it
    // could write to it, so it sees the flag.
    if inner.annotated.load(Ordering::Relaxed) {
        let annotations = inner.annotations.lock().handle.clone();
        if let Some(handle) = annotations {
            handle.assert_not_writing(WriteOp::ExchangeCommit);
        }
    }
    let _commit = inner.commit_lock.lock(WriteOp::ExchangeCommit);
    if inner.record.get_ref().is_some() {
        return Err(AlreadyCommitted {
            winner: Committed {
                inner: Arc::clone(inner_arc),
            },
        });
    }
    let record = Record {
        // Counted before the seals: a write refused from the first seal on is a late one
        // (one refused between a seal and a count taken after it would be missed). Only the
        // late-writes report reads it, so an exchange without one skips the count.
        refused_at_commit: if inner.hooks.has_late_writes() {
            inner.refused_writes()
        } else {
            0
        },
        outcome,
        status,
        time_to_commit: inner.started.elapsed(),
        request: request.seal_or_sealed(),
        response: response.seal_or_sealed(),
        annotations: {
            // After the two seals, and only briefly: `annotations` takes this lock, and may
            // be called inside an `update` whose writer lock a seal above waits for.
            let mut annotations = inner.annotations.lock();
            annotations.closed = true;
            annotations.handle.clone()
        }
        .as_ref()
        .map(SharedHeaders::seal_or_sealed),
    };
    // Under `commit_lock` nobody else sets the cell, so this `set` always stores.
    let stored = inner.record.set(record);
    debug_assert!(stored, "the commit lock serializes commits");
    let committed = Committed {
        inner: Arc::clone(inner_arc),
    };
    if !inner.defer_hook {
        inner.hooks.committed(&CommitEvent {
            committed: &committed,
            sent: None,
        });
    }
    inner.visible.store(true, Ordering::Release);
    Ok(committed)
}

/// [`Exchange::commit`] was called after the exchange was committed.
///
/// # Examples
///
/// ```
/// # use shared_headers::{Exchange, Outcome, SharedHeaders};
/// let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
/// exchange.commit(Outcome::Answered)?;
/// let err = exchange.commit(Outcome::TimedOut).unwrap_err();
/// assert_eq!(err.winner().outcome(), Outcome::Answered);
/// assert_eq!(err.to_string(), "exchange already committed (answered)");
/// # Ok::<(), shared_headers::AlreadyCommitted>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlreadyCommitted {
    pub(super) winner: Committed,
}

impl AlreadyCommitted {
    /// The record of the commit that won.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Exchange, Outcome, SharedHeaders};
    /// let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    /// let won = exchange.commit(Outcome::TimedOut)?;
    /// assert_eq!(exchange.commit(Outcome::Answered).unwrap_err().winner(), &won);
    /// # Ok::<(), shared_headers::AlreadyCommitted>(())
    /// ```
    #[inline]
    pub fn winner(&self) -> &Committed {
        &self.winner
    }

    /// Takes the winner's record.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Exchange, Outcome, SharedHeaders};
    /// let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    /// exchange.commit(Outcome::TimedOut)?;
    /// let winner = exchange.commit(Outcome::Answered).unwrap_err().into_winner();
    /// assert_eq!(winner.outcome(), Outcome::TimedOut);
    /// # Ok::<(), shared_headers::AlreadyCommitted>(())
    /// ```
    #[inline]
    pub fn into_winner(self) -> Committed {
        self.winner
    }
}

impl fmt::Display for AlreadyCommitted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "exchange already committed ({})", self.winner.outcome())
    }
}

impl std::error::Error for AlreadyCommitted {}
