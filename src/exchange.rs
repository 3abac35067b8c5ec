//! The commit-once core of a request/response exchange: two handles and one winner.
//!
//! This module needs no runtime and no feature: the [`server`](crate::server) room (feature
//! `server`) drives it from a future, and the loom models drive it from plain threads.

use std::fmt;
use std::sync::Arc;

use crate::shared::SharedHeaders;
use crate::snapshot::Snapshot;
use crate::sync::{OnceCell, WriteOp, WriterLock};

/// The headers of one HTTP exchange: the request's, the response's, and who committed them.
///
/// An `Exchange` is the shared context of one request. The handler and every task it spawns
/// clone it (or one of its two [`SharedHeaders`]) and write to it concurrently. Exactly once,
/// whoever finishes first — the handler answering, a deadline firing, the request future being
/// dropped — calls [`commit`](Self::commit): both handles are sealed in that call, the winner
/// gets the sealed snapshots, every later `commit` learns who won, and every later write gets
/// [`Error::Sealed`](crate::Error::Sealed) and is counted in
/// [`refused_writes`](Self::refused_writes).
///
/// This is the same protocol as Go's `http.TimeoutHandler` (a private header map, a one-time
/// commit under a mutex with a defined winner, an error for writes after the timeout), as a
/// value. [`SharedHeadersLayer`](crate::server::SharedHeadersLayer) creates one per request and
/// puts it in the request's extensions.
///
/// `Exchange` is cheap to clone (one `Arc`); clones share everything.
///
/// # Examples
///
/// ```
/// use shared_headers::{Error, Exchange, Outcome, SharedHeaders};
///
/// let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
/// let task = exchange.clone(); // moved into a spawned task, say
///
/// task.response().insert("x-cache", "miss".parse()?)?;
///
/// // The deadline fires first and commits.
/// let committed = exchange.commit(Outcome::TimedOut)?;
/// assert_eq!(committed.response()["x-cache"], "miss");
///
/// // The handler answers later: it lost, and learns who won.
/// let lost = exchange.commit(Outcome::Answered).unwrap_err();
/// assert_eq!(lost.winner().outcome(), Outcome::TimedOut);
///
/// // The task writes after the commit: refused and counted.
/// let late = task.response().insert("x-late", "1".parse()?);
/// assert!(matches!(late, Err(Error::Sealed { .. })));
/// assert_eq!(exchange.refused_writes(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Exchange {
    inner: Arc<Inner>,
}

struct Inner {
    request: SharedHeaders,
    response: SharedHeaders,
    /// Serializes commits, and nothing else: held only inside `commit` (which takes each
    /// handle's writer lock while holding it), never by a read. A read that took it could
    /// deadlock against a commit when called inside [`SharedHeaders::update`], which holds the
    /// writer lock the commit waits for.
    commit_lock: WriterLock,
    /// Empty until the one commit; the winner's record afterwards. Set by `commit` after both
    /// seals, under `commit_lock`; read without any lock.
    committed: OnceCell<Committed>,
}

impl Exchange {
    /// Creates an uncommitted exchange over a request handle and a response handle.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Exchange, SharedHeaders};
    /// use http::HeaderMap;
    /// let mut received = HeaderMap::new();
    /// received.insert("x-request-id", "42".parse()?);
    /// let exchange = Exchange::new(SharedHeaders::from(received), SharedHeaders::new());
    /// assert_eq!(exchange.request().get("x-request-id").unwrap(), "42");
    /// assert!(exchange.response().is_empty());
    /// assert!(!exchange.is_committed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(request: SharedHeaders, response: SharedHeaders) -> Self {
        Exchange {
            inner: Arc::new(Inner {
                request,
                response,
                commit_lock: WriterLock::new(),
                committed: OnceCell::new(),
            }),
        }
    }

    /// The request headers: as received, plus whatever the handler and its tasks added.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Exchange, SharedHeaders};
    /// let request = SharedHeaders::new();
    /// let exchange = Exchange::new(request.clone(), SharedHeaders::new());
    /// assert!(SharedHeaders::ptr_eq(exchange.request(), &request));
    /// ```
    #[inline]
    pub fn request(&self) -> &SharedHeaders {
        &self.inner.request
    }

    /// The response headers that the handler and its tasks add to, merged into the response
    /// when it is committed.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Exchange, SharedHeaders};
    /// let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    /// exchange.response().append("server-timing", "db;dur=12".parse()?)?;
    /// assert_eq!(exchange.response().len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn response(&self) -> &SharedHeaders {
        &self.inner.response
    }

    /// Commits the exchange once: seals both handles and records `outcome` as the winner.
    ///
    /// Of any number of concurrent calls, exactly one returns `Ok`, with the sealed request and
    /// response snapshots. Commits are serialized by the exchange's commit lock, and both seals
    /// happen inside the winning call, so a write racing the commit either lands in the
    /// committed snapshot (and returned `Ok`) or is refused with
    /// [`Error::Sealed`](crate::Error::Sealed): it is never accepted and then missing from what
    /// was committed. The record becomes visible to [`committed`](Self::committed) and
    /// [`is_committed`](Self::is_committed) once both handles are sealed.
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
    /// handle's writer lock) on one of this exchange's handles, on the same thread: `commit`
    /// takes that handle's writer lock, so it would deadlock; it panics instead, before taking
    /// anything, and the exchange stays uncommitted and usable. Commit after the closure
    /// returns. Reading the exchange there ([`committed`](Self::committed),
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
        // A commit from inside a write closure on one of the handles would wait for that
        // handle's writer lock forever: panic first, before taking anything.
        self.inner
            .request
            .assert_not_writing(WriteOp::ExchangeCommit);
        self.inner
            .response
            .assert_not_writing(WriteOp::ExchangeCommit);
        let _commit = self.inner.commit_lock.lock(WriteOp::ExchangeCommit);
        if let Some(winner) = self.inner.committed.get() {
            return Err(AlreadyCommitted { winner });
        }
        let committed = Committed {
            outcome,
            request: self.inner.request.seal_or_sealed(),
            response: self.inner.response.seal_or_sealed(),
        };
        // Under `commit_lock` nobody else sets the cell, so this `set` always stores.
        let stored = self.inner.committed.set(committed.clone());
        debug_assert!(stored, "the commit lock serializes commits");
        Ok(committed)
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
        self.inner.committed.get()
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
        self.inner.committed.get().is_some()
    }

    /// Writes refused because a handle was sealed, summed over both handles and all their
    /// clones (see [`SharedHeaders::refused_writes`]).
    ///
    /// After the commit this is the exchange's "post-timeout activity": work that kept writing
    /// after its response was decided. The count keeps growing while such work runs; read it
    /// when you know the work is done, or sample it.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Exchange, Outcome, SharedHeaders};
    /// let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    /// exchange.commit(Outcome::TimedOut)?;
    /// assert!(exchange.request().insert("x-late", "1".parse()?).is_err());
    /// assert!(exchange.response().remove("x-late").is_err());
    /// assert_eq!(exchange.refused_writes(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn refused_writes(&self) -> u64 {
        self.inner.request.refused_writes() + self.inner.response.refused_writes()
    }
}

impl fmt::Debug for Exchange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Exchange")
            .field("request", &self.inner.request)
            .field("response", &self.inner.response)
            .field("committed", &self.committed().map(|c| c.outcome))
            .finish()
    }
}

/// Who committed an [`Exchange`].
///
/// # Examples
///
/// ```
/// # use shared_headers::Outcome;
/// assert_eq!(Outcome::TimedOut.to_string(), "timed out");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Outcome {
    /// The inner service returned a response.
    Answered,
    /// The inner service returned an error; there is no response to merge headers into.
    Failed,
    /// The deadline fired before the inner service answered.
    TimedOut,
    /// The request future was dropped before either (an outer timeout, a closed connection).
    Cancelled,
    /// The request was refused before the inner service was called: its headers were over the
    /// limits of the layer's
    /// [`request_headers`](crate::server::SharedHeadersLayer::request_headers) builder. The
    /// layer answered with its
    /// [`rejection_status`](crate::server::SharedHeadersLayer::rejection_status) (431 by
    /// default).
    Rejected,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Outcome::Answered => "answered",
            Outcome::Failed => "failed",
            Outcome::TimedOut => "timed out",
            Outcome::Cancelled => "cancelled",
            Outcome::Rejected => "rejected",
        })
    }
}

/// The record of a commit: who won, and the sealed request and response headers.
///
/// [`SharedHeadersLayer`](crate::server::SharedHeadersLayer) puts it in the response's
/// extensions, so an outer logging layer logs exactly the shared headers that were committed:
/// the request handle's and the response handle's sealed snapshots. It does not hold the
/// headers the inner service set on its own response; those are in the response's headers.
///
/// # Examples
///
/// ```
/// # use shared_headers::{Exchange, Outcome, SharedHeaders};
/// let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
/// exchange.request().insert("x-user", "ada".parse()?)?;
/// let committed = exchange.commit(Outcome::Answered)?;
/// assert_eq!(committed.outcome(), Outcome::Answered);
/// assert_eq!(committed.request()["x-user"], "ada");
/// assert!(committed.response().is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    outcome: Outcome,
    request: Snapshot,
    response: Snapshot,
}

impl Committed {
    /// Who committed.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Exchange, Outcome, SharedHeaders};
    /// let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    /// assert_eq!(exchange.commit(Outcome::Cancelled)?.outcome(), Outcome::Cancelled);
    /// # Ok::<(), shared_headers::AlreadyCommitted>(())
    /// ```
    #[inline]
    pub fn outcome(&self) -> Outcome {
        self.outcome
    }

    /// The sealed request headers.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Exchange, Outcome, SharedHeaders};
    /// let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    /// let committed = exchange.commit(Outcome::Answered)?;
    /// assert_eq!(*committed.request(), exchange.request().snapshot());
    /// # Ok::<(), shared_headers::AlreadyCommitted>(())
    /// ```
    #[inline]
    pub fn request(&self) -> &Snapshot {
        &self.request
    }

    /// The sealed response headers.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Exchange, Outcome, SharedHeaders};
    /// let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    /// exchange.response().insert("x-cache", "hit".parse()?)?;
    /// let committed = exchange.commit(Outcome::Answered)?;
    /// assert_eq!(committed.response()["x-cache"], "hit");
    /// assert!(committed.response().is_sealed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn response(&self) -> &Snapshot {
        &self.response
    }
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
    winner: Committed,
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
        write!(f, "exchange already committed ({})", self.winner.outcome)
    }
}

impl std::error::Error for AlreadyCommitted {}

#[cfg(all(test, not(shared_headers_loom)))]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn exchange_is_send_sync_static() {
        fn assert<T: Send + Sync + 'static>() {}
        assert::<Exchange>();
        assert::<Committed>();
        assert::<AlreadyCommitted>();
    }

    #[test]
    fn every_refused_write_path_is_counted_and_nothing_else() {
        let headers = SharedHeaders::new();
        let draft = headers.draft();
        let stale = headers.draft();
        headers.insert("x-a", "1".parse().unwrap()).unwrap();
        assert!(matches!(headers.commit(stale), Err(Error::Conflict { .. })));
        headers.seal().unwrap();
        assert!(headers.seal().is_err());
        assert_eq!(
            headers.refused_writes(),
            0,
            "conflicts and seals are not counted"
        );
        let v = || "2".parse().unwrap();
        assert!(headers.insert("x-a", v()).is_err());
        assert!(headers.append("x-a", v()).is_err());
        assert!(headers.remove("x-b").is_err());
        assert!(headers.update(|_| ()).is_err());
        assert!(headers.replace(http::HeaderMap::new()).is_err());
        assert!(headers.commit(draft).is_err());
        assert_eq!(headers.refused_writes(), 6);
        assert_eq!(headers.clone().refused_writes(), 6, "shared by clones");
    }

    #[test]
    fn a_handle_sealed_by_other_code_keeps_its_seal() {
        let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
        exchange
            .request()
            .insert("x-a", "1".parse().unwrap())
            .unwrap();
        let early = exchange.request().seal().unwrap();
        let committed = exchange.commit(Outcome::Answered).unwrap();
        assert_eq!(*committed.request(), early);
        assert_eq!(committed.response().version(), 1);
    }

    /// Regression: reads of the exchange took the lock `commit` holds while it waits for a
    /// handle's writer lock. A task reading the exchange inside `update` (holding that writer
    /// lock) while another thread committed deadlocked both. Reads are lock-free now; a
    /// deadlock fails this test through the timeout instead of hanging it.
    #[test]
    fn reading_the_exchange_inside_update_while_committing_does_not_deadlock() {
        use std::sync::mpsc;
        use std::time::Duration;

        let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
        let (inside_tx, inside_rx) = mpsc::channel();
        let (done_tx, done_rx) = mpsc::channel();
        let task = exchange.clone();
        // Plain threads, not scoped ones: a deadlocked thread must not block the test's end.
        std::thread::spawn(move || {
            let read = task.request().update(|_| {
                inside_tx.send(()).unwrap();
                // Give the committer time to take the commit lock and block on this handle's
                // writer lock, which this closure holds.
                std::thread::sleep(Duration::from_millis(100));
                (task.is_committed(), task.committed(), format!("{task:?}"))
            });
            done_tx.send(read).unwrap();
        });
        inside_rx.recv().unwrap();
        let committer = exchange.clone();
        let (commit_tx, commit_rx) = mpsc::channel();
        std::thread::spawn(move || {
            commit_tx.send(committer.commit(Outcome::TimedOut)).unwrap();
        });

        let limit = Duration::from_secs(10);
        let (is_committed, committed, debug) = done_rx
            .recv_timeout(limit)
            .expect("deadlock: a read inside update waited for the committer")
            .expect("the update started before the commit");
        // The commit had not sealed the handle yet: the update's read saw it uncommitted.
        assert!(!is_committed && committed.is_none());
        assert!(debug.contains("committed: None"), "{debug}");
        let won = commit_rx
            .recv_timeout(limit)
            .expect("deadlock: the committer never finished")
            .unwrap();
        // The update published before the seal, so it is in the committed version.
        assert_eq!(won.request().version(), 2);
        assert_eq!(exchange.committed(), Some(won));
    }

    #[test]
    fn concurrent_commits_have_one_winner_and_agree() {
        for _ in 0..200 {
            let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
            let outcomes = [Outcome::Answered, Outcome::TimedOut, Outcome::Cancelled];
            let results: Vec<_> = std::thread::scope(|s| {
                let handles: Vec<_> = outcomes
                    .iter()
                    .map(|&o| {
                        let exchange = exchange.clone();
                        s.spawn(move || {
                            let _ = exchange.response().insert("x-try", "1".parse().unwrap());
                            exchange.commit(o)
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
            assert_eq!(winners.len(), 1);
            for lost in results.iter().filter_map(|r| r.as_ref().err()) {
                assert_eq!(lost.winner(), winners[0]);
            }
            assert_eq!(exchange.committed().as_ref(), Some(winners[0]));
            assert_eq!(
                exchange.response().insert("x-late", "1".parse().unwrap()),
                Err(Error::Sealed {
                    version: winners[0].response().version()
                })
            );
        }
    }
}
