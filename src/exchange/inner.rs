//! The exchange's one allocation: both handles' shared parts, the commit's state and record,
//! the hooks, the waker, and the count of `Exchange` clones; and the timer's weak reference.

use std::sync::{Arc, Weak};
use std::task::Waker;
use std::time::Instant;

use super::hooks::CommitHooks;
use super::{Committed, LateWrites, Line, Outcome, Record};
use crate::shared::{Host, Shared, SharedHeaders, Side};
use crate::sync::{AtomicBool, AtomicUsize, Mutex, OnceCell, Ordering};
use crate::writer_lock::WriterLock;

pub(crate) struct Inner {
    /// Whether the commit leaves the `on_commit` hook to its driver (the server layer's
    /// response future runs it with the response as it leaves, `Exchange::announce`): then
    /// the commit is visible as soon as its record is set, and no hook runs on the committing
    /// thread (the layer's deadline thread runs no user code).
    pub(super) defer_hook: bool,
    /// The request and response handles' shared parts.
    pub(super) sides: Sides,
    /// How many `Exchange` values (clones, and the timer's upgrades) are alive. Handles keep
    /// `Inner` alive too (their `Shared` may live in it), so the late-writes report runs when
    /// this count, not the allocation's, drops to zero: a task that holds only a handle does
    /// not delay it. Never raised again from zero (see `WeakExchange::upgrade`).
    pub(super) exchanges: AtomicUsize,
    /// Created at the first call of `annotations` (most requests never annotate: no cost).
    pub(super) annotations: Mutex<Annotations>,
    /// Set (under the `annotations` lock, released) once the annotations handle exists, so
    /// that counting refused writes need not take that lock when there is none: a handle that
    /// does not exist yet has refused nothing.
    pub(super) annotated: AtomicBool,
    /// Set (under the `waker` lock) once a waker was registered, so that the last `Exchange`
    /// takes that lock to drop it only if there is one.
    pub(super) waited: AtomicBool,
    /// Serializes commits, and nothing else: held only inside `commit` (which takes each
    /// handle's writer lock while holding it, and runs the commit hook), never by a read. A
    /// read that took it could deadlock against a commit when called inside
    /// [`SharedHeaders::update`], which holds the writer lock the commit waits for. A writer
    /// lock, so that a commit from inside a commit (the `on_commit` hook calling `commit`)
    /// panics instead of deadlocking.
    pub(super) commit_lock: WriterLock<()>,
    /// Empty until the one commit; the winner's record afterwards. Set by `commit` after the
    /// seals and before the hook, under `commit_lock` ([`Committed`] is a view of it).
    pub(super) record: OnceCell<Record>,
    /// Whether the commit is visible: set after the hook, so that nothing that reads the
    /// exchange as committed (`committed`, `is_committed`: the response future, the timer
    /// thread, a handler) can act on it (send the response) before the hook (the log line)
    /// ran. Release/Acquire: whoever sees it also sees what the hook did.
    pub(super) visible: AtomicBool,
    pub(super) hooks: CommitHooks,
    pub(super) started: Instant,
    /// The request line (the server layer's exchanges), fixed at the start: the record's views
    /// read it here, so the commit does not move it.
    pub(super) line: Option<Line>,
    /// The request's id and the headers that travel on (the server layer's exchanges, when
    /// it propagates any). Beside the line, not in it: the line's drop stays as it was.
    pub(super) context: Option<crate::context::RequestContext>,
    /// The task to wake when a commit happens elsewhere (the server layer's timer thread).
    pub(super) waker: Mutex<Option<Waker>>,
}

#[derive(Default)]
pub(super) struct Annotations {
    pub(super) handle: Option<SharedHeaders>,
    /// Set by the commit: a handle created afterwards is created sealed.
    pub(super) closed: bool,
    /// The server layer's secret names, for the handle (no limits): a name secret in the
    /// layer is secret in the annotations too.
    pub(super) secrets: Option<std::sync::Arc<crate::policy::Policy>>,
}

impl Annotations {
    pub(super) fn refused_writes(&self) -> u64 {
        self.handle
            .as_ref()
            .map_or(0, SharedHeaders::refused_writes)
    }
}

/// Where the two handles' shared parts live.
pub(super) enum Sides {
    /// Inside the exchange's allocation (the server layer's exchanges): one allocation for the
    /// exchange and both handles. Indexed by `Side`.
    Embedded([Shared; 2]),
    /// In handles that existed before the exchange ([`Exchange::new`]).
    External([SharedHeaders; 2]),
}

// The exchange installs itself as its handles' host: the handle names nothing of it.
impl Host for Inner {
    #[inline]
    fn side(&self, side: Side) -> &Shared {
        Inner::side(self, side)
    }

    fn external(&self, side: Side) -> Option<&SharedHeaders> {
        match &self.sides {
            Sides::Embedded(_) => None,
            Sides::External(pair) => Some(&pair[side as usize]),
        }
    }
}

impl Inner {
    /// The shared part of the handle of `side`.
    #[inline]
    pub(crate) fn side(&self, side: Side) -> &Shared {
        match &self.sides {
            Sides::Embedded(pair) => &pair[side as usize],
            Sides::External(pair) => pair[side as usize].shared(),
        }
    }

    /// The handle of `side` of this exchange, a handle of the allocation (it counts as no
    /// `Exchange`).
    #[inline]
    pub(crate) fn handle(this: &Arc<Inner>, side: Side) -> SharedHeaders {
        SharedHeaders::hosted(Arc::clone(this) as Arc<dyn Host>, side)
    }

    /// Writes refused by the request and response handles and the annotations.
    pub(super) fn refused_writes(&self) -> u64 {
        // Relaxed: the flag only saves the lock when no annotations exist. It is stored while
        // `annotations` is locked with the handle in place, and a `true` leads to taking that
        // lock, which orders the handle; a `false` is a count that raced their creation. The
        // one count that must not miss them, the late-writes report's, runs after the clones'
        // `AcqRel` count reached zero, which orders the store before it.
        let annotations = if self.annotated.load(Ordering::Relaxed) {
            self.annotations.lock().refused_writes()
        } else {
            0
        };
        self.side(Side::Request).refused_writes()
            + self.side(Side::Response).refused_writes()
            + annotations
    }

    /// The record of the commit. Only called through a [`Committed`], which exists only once
    /// the record is set.
    #[inline]
    pub(crate) fn record(&self) -> &Record {
        match self.record.get_ref() {
            Some(record) => record,
            None => unreachable!("a Committed is made only after its record is set"),
        }
    }

    /// Whether the commit is visible (the hook ran).
    #[inline]
    pub(super) fn is_visible(&self) -> bool {
        self.visible.load(Ordering::Acquire)
    }

    /// The late-writes report, run once, by the drop of the last `Exchange`.
    pub(super) fn report_late_writes(this: &Arc<Inner>) {
        if !this.hooks.has_late_writes() || !this.is_visible() {
            return;
        }
        let record = this.record();
        let refused_writes = this
            .refused_writes()
            .saturating_sub(record.refused_at_commit);
        if refused_writes == 0 {
            return;
        }
        let since_commit = this.started.elapsed().saturating_sub(record.time_to_commit);
        this.hooks.late(&LateWrites {
            committed: Committed {
                inner: Arc::clone(this),
            },
            refused_writes,
            since_commit,
        });
    }
}

/// A reference to an exchange that does not keep it alive (the server layer's timer queue).
#[cfg_attr(not(feature = "server"), allow(dead_code))]
pub(crate) struct WeakExchange(pub(super) Weak<Inner>);

#[cfg_attr(not(feature = "server"), allow(dead_code))]
impl WeakExchange {
    /// Commits the exchange with [`Outcome::TimedOut`] and `status` (the deadline fired),
    /// unless it is committed already or no `Exchange` of it is left (its response future is
    /// gone, and committed when it went), then wakes the task registered to answer it.
    ///
    /// Runs no user code: the exchange's hook is its response future's to run (the layer's
    /// exchanges defer it), and no `Exchange` is made here, so no late-writes report can run
    /// on the caller's thread (the layer's deadline thread). Commits through two temporary
    /// handles of the allocation, which count as no `Exchange`.
    ///
    /// If the reference it took turns out to be the last one (the future answered and let go
    /// in the meantime), the exchange is pushed onto `last` instead of dropped here: its drop
    /// frees the hooks, whose captured state's `Drop` is user code, for someone else to run.
    pub(crate) fn expire(&self, status: http::StatusCode, last: &mut Vec<Inner>) -> bool {
        let Some(inner) = self.0.upgrade() else {
            return false;
        };
        let won = Self::expire_upgraded(&inner, status);
        if let Some(inner) = Arc::into_inner(inner) {
            last.push(inner);
        }
        won
    }

    fn expire_upgraded(inner: &Arc<Inner>, status: http::StatusCode) -> bool {
        if inner.exchanges.load(Ordering::Relaxed) == 0 || inner.record.get_ref().is_some() {
            return false;
        }
        debug_assert!(
            inner.defer_hook,
            "the timer commits only the layer's exchanges"
        );
        let request = Inner::handle(inner, Side::Request);
        let response = Inner::handle(inner, Side::Response);
        let won = super::commit_sides(inner, &request, &response, Outcome::TimedOut, Some(status))
            .is_ok();
        if won {
            let waker = inner.waker.lock().take();
            if let Some(waker) = waker {
                waker.wake();
            }
        }
        won
    }

    /// A reference to no exchange (tests of the timer's queue).
    #[cfg(all(test, feature = "server"))]
    pub(crate) fn dangling() -> Self {
        WeakExchange(Weak::new())
    }

    pub(crate) fn is_dead(&self) -> bool {
        // A plain load: the timer calls this under its queue lock, where upgrading (to see the
        // count of `Exchange` clones) could make it drop the last reference, and with it user
        // code (the hooks), under that lock. An exchange alive only through its handles or
        // records stays queued until its deadline, where `upgrade` refuses it.
        self.0.strong_count() == 0
    }
}
