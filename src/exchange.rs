//! The commit-once core of a request/response exchange: three handles and one winner.
//!
//! This module needs no runtime and no feature: the [`server`](crate::server) room (feature
//! `server`) drives it from a future and a timer thread, and the loom models drive it from plain
//! threads.

mod commit;
mod event;
mod hooks;
mod inner;
mod outcome;
mod record;

use std::fmt;
use std::sync::Arc;
use std::task::Waker;
use std::time::Instant;

pub use commit::AlreadyCommitted;
pub(crate) use commit::commit_sides;
pub use event::CommitEvent;
pub use hooks::CommitHooks;
#[cfg_attr(not(feature = "server"), allow(unused_imports))]
pub(crate) use hooks::{contain, drop_payload};
use inner::{Annotations, Sides};
pub(crate) use inner::{Inner, WeakExchange};
pub use outcome::Outcome;
#[cfg(feature = "server")]
pub(crate) use record::ConnectCall;
pub use record::{Committed, LateWrites};
pub(crate) use record::{Line, Record};

use crate::policy::Policy;
use crate::shared::{Shared, SharedHeaders, Side};
use crate::sync::{AtomicBool, AtomicUsize, Mutex, OnceCell, Ordering, Strategy};
use crate::writer_lock::WriterLock;

/// The headers of one HTTP exchange: the request's, the response's, log annotations, and who
/// committed them.
///
/// An `Exchange` is the shared context of one request. The handler and every task it spawns
/// clone it (or one of its [`SharedHeaders`]) and write to it concurrently. Exactly once,
/// whoever finishes first — the handler answering, a deadline firing, the request future being
/// dropped — calls [`commit`](Self::commit): all its handles are sealed in that call, the
/// winner gets the sealed snapshots, every later `commit` learns who won, and every later write
/// gets [`Error::Sealed`](crate::Error::Sealed) and is counted in
/// [`refused_writes`](Self::refused_writes).
///
/// This is the same protocol as Go's `http.TimeoutHandler` (a private header map, a one-time
/// commit under a mutex with a defined winner, an error for writes after the timeout), as a
/// value. [`SharedHeadersLayer`](crate::server::SharedHeadersLayer) creates one per request and
/// puts it in the request's extensions. [`CommitHooks`] run at the commit and at the last drop.
///
/// `Exchange` is cheap to clone (two reference counts of one allocation and a count of
/// clones); clones share everything.
///
/// # What a reader of two handles of one commit may see
///
/// The commit seals the request, then the response (then the annotations), under the
/// exchange's commit lock, and then makes its record visible. A thread that reads the handles
/// while another commits sees:
///
/// * **through the exchange** ([`is_committed`](Self::is_committed),
///   [`committed`](Self::committed), a losing `commit`'s [`AlreadyCommitted`]): once it sees the
///   exchange committed, every handle is sealed, and each read of a handle returns its sealed
///   snapshot;
/// * **through the handles' seals**: a later seal implies every earlier one, so a reader that
///   sees the response sealed ([`SharedHeaders::is_sealed`], a snapshot's
///   [`is_sealed`](crate::Snapshot::is_sealed)) sees the request sealed too, on any publication.
///   It may see the request sealed and the response not yet (the commit is between the two
///   seals), and a snapshot it took *before* it saw a seal stays what it was;
/// * **through the headers alone**: reads of two handles are ordered only by happens-before
///   (see [`docs::internals`](crate::docs::internals#what-holds-per-handle-and-across-handles)).
///   Two tasks that each write one handle and then read the other can both miss the other's
///   completed write (store buffering); what orders them is a happens-before edge (a join, a
///   channel, the commit above).
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
pub struct Exchange {
    // Both handles point into the exchange's one allocation, `Inner`, the handles' host
    // (`Owner::Hosted`); `inner` is the exchange's own, typed reference to it.
    inner: Arc<Inner>,
    request: SharedHeaders,
    response: SharedHeaders,
}

impl Exchange {
    /// Creates an uncommitted exchange over a request handle and a response handle, with empty
    /// annotations and no hooks.
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
        Self::build(
            Sides::External([request, response]),
            CommitHooks::new(),
            None,
            None,
            Instant::now(),
            false,
            None,
        )
    }

    /// Like [`new`](Self::new), with hooks run at the commit and at the last drop (see
    /// [`CommitHooks`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// # use shared_headers::{CommitHooks, Exchange, Outcome, SharedHeaders};
    /// let commits = Arc::new(AtomicUsize::new(0));
    /// let counter = commits.clone();
    /// let hooks = CommitHooks::new().on_commit(move |_| { counter.fetch_add(1, Ordering::Relaxed); });
    /// let exchange = Exchange::with_hooks(SharedHeaders::new(), SharedHeaders::new(), &hooks);
    /// drop(exchange); // dropped uncommitted: no commit, no call
    /// assert_eq!(commits.load(Ordering::Relaxed), 0);
    /// ```
    pub fn with_hooks(
        request: SharedHeaders,
        response: SharedHeaders,
        hooks: &CommitHooks,
    ) -> Self {
        Self::build(
            Sides::External([request, response]),
            hooks.clone(),
            None,
            None,
            Instant::now(),
            false,
            None,
        )
    }

    /// The server layer's constructor: both handles live in the exchange's one allocation
    /// (request-scoped: [`Strategy::Locked`]), the request starting from `received` (empty if
    /// `None`) and the response empty; the request line stays in the exchange for the record's
    /// views, `started` is the call of the service.
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    #[inline(always)]
    pub(crate) fn for_request(
        received: Option<http::HeaderMap>,
        policies: [Option<Arc<Policy>>; 2],
        hooks: &CommitHooks,
        line: Line,
        context: Option<crate::context::RequestContext>,
        started: Instant,
    ) -> Self {
        let [request_policy, response_policy] = policies;
        // The annotations know the layer's secret names (none without any).
        let secrets = request_policy
            .as_ref()
            .and_then(|policy| policy.annotations.clone());
        let sides = Sides::Embedded([
            match received {
                Some(received) => Shared::new(received, request_policy, Strategy::Locked),
                None => Shared::empty(request_policy, Strategy::Locked),
            },
            Shared::empty(response_policy, Strategy::Locked),
        ]);
        // The layer runs the hook itself, with the response as it leaves (`announce`).
        Self::build(
            sides,
            hooks.clone(),
            Some(line),
            context,
            started,
            true,
            secrets,
        )
    }

    #[inline(always)]
    fn build(
        sides: Sides,
        hooks: CommitHooks,
        line: Option<Line>,
        context: Option<crate::context::RequestContext>,
        started: Instant,
        defer_hook: bool,
        secrets: Option<Arc<Policy>>,
    ) -> Self {
        Exchange::from_counted(Arc::new(Inner {
            defer_hook,
            sides,
            exchanges: AtomicUsize::new(1),
            annotations: Mutex::new(Annotations {
                secrets,
                ..Annotations::default()
            }),
            annotated: AtomicBool::new(false),
            waited: AtomicBool::new(false),
            commit_lock: WriterLock::new(()),
            record: OnceCell::new(),
            visible: AtomicBool::new(false),
            hooks,
            started,
            line,
            context,
            waker: Mutex::new(None),
        }))
    }

    /// An `Exchange` of `inner`, whose count of exchanges already includes it.
    #[inline]
    fn from_counted(inner: Arc<Inner>) -> Self {
        Exchange {
            request: Inner::handle(&inner, Side::Request),
            response: Inner::handle(&inner, Side::Response),
            inner,
        }
    }

    /// The exchange's allocation.
    #[inline]
    fn inner_arc(&self) -> &Arc<Inner> {
        &self.inner
    }

    #[inline]
    fn inner(&self) -> &Inner {
        &self.inner
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
        &self.request
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
        &self.response
    }

    /// Log metadata of the exchange, headers-shaped and **never sent**: the user id, the cache
    /// status, the route, written by the handler and its tasks concurrently like the other two
    /// handles. Sealed in the same commit; the sealed snapshot is
    /// [`Committed::annotations`], and later writes are refused and counted like the others.
    ///
    /// The handle is created at the first call (an exchange that is never annotated pays
    /// nothing for it); every call returns a clone of the same handle (one reference count).
    /// Called for the first time after the commit, it returns a sealed, empty handle. Starts
    /// empty, without limits or secret names, with the `Locked` publication (request-scoped,
    /// like the layer's request and response handles: see
    /// [`Publication`](crate::Publication)); its values are printed by `Debug` like any other
    /// header: do not annotate secrets.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Exchange, Outcome, SharedHeaders};
    /// let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    /// let task = exchange.clone();
    /// task.annotations().insert("x-user-id", "42".parse()?)?;
    /// let committed = exchange.commit(Outcome::Answered)?;
    /// assert_eq!(committed.annotations().unwrap()["x-user-id"], "42");
    /// assert!(committed.response().is_empty()); // not a response header
    /// assert!(task.annotations().insert("x-late", "1".parse()?).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn annotations(&self) -> SharedHeaders {
        let mut annotations = self.inner().annotations.lock();
        if let Some(handle) = &annotations.handle {
            return handle.clone();
        }
        // Request-scoped like the layer's handles: the `Locked` publication, whose store and
        // drop are O(1) in the threads of the process (the default's are O(threads): a server
        // with many threads would pay for it on every annotated request).
        let handle = SharedHeaders::with_policy(
            http::HeaderMap::new(),
            annotations.secrets.clone(),
            Strategy::Locked,
        );
        if annotations.closed {
            let _sealed = handle.seal();
        }
        annotations.handle = Some(handle.clone());
        // Relaxed: stored with the handle in place, under the annotations lock (see
        // `Inner::refused_writes`, its only reader).
        self.inner().annotated.store(true, Ordering::Relaxed);
        handle
    }

    /// The request's deadline (set by the server layer: its own timeout, or the caller's
    /// budget if earlier); `None` without one. A handler reads what is left with
    /// [`Deadline::remaining`](crate::deadline::Deadline::remaining); code deeper down gets the same
    /// value from [`Deadline::current`](crate::deadline::Deadline::current), which the layer sets while
    /// it polls the inner service (and [`context::carry`](crate::context::carry) carries
    /// into spawned tasks).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Exchange, SharedHeaders};
    /// let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    /// assert!(exchange.deadline().is_none()); // set by the server layer
    /// ```
    #[inline]
    pub fn deadline(&self) -> Option<crate::deadline::Deadline> {
        self.inner().line.as_ref().and_then(|line| line.deadline)
    }

    /// The request's context: its id and the headers that travel on to the calls made for it,
    /// when the server layer propagates any
    /// ([`SharedHeadersLayer::propagate`](crate::server::SharedHeadersLayer::propagate)). The
    /// layer also puts it in scope while it polls the handler
    /// ([`RequestContext::current`](crate::context::RequestContext::current)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Exchange, SharedHeaders};
    /// let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    /// assert!(exchange.context().is_none()); // set by the server layer
    /// ```
    #[inline]
    pub fn context(&self) -> Option<&crate::context::RequestContext> {
        self.inner().context.as_ref()
    }

    /// What the layer that made the exchange recorded of its request (see [`Line`]).
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    #[inline]
    pub(crate) fn line(&self) -> Option<&Line> {
        self.inner().line.as_ref()
    }

    /// Writes refused because a handle was sealed, summed over the three handles and all their
    /// clones (see [`SharedHeaders::refused_writes`]).
    ///
    /// After the commit this is the exchange's "post-timeout activity": work that kept writing
    /// after its response was decided. The count keeps growing while such work runs; to log it
    /// once that work is done, use [`CommitHooks::on_late_writes`] (on the server layer:
    /// [`on_late_writes`](crate::server::SharedHeadersLayer::on_late_writes)).
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
        self.inner().refused_writes()
    }

    /// A reference that does not keep the exchange alive.
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn downgrade(&self) -> WeakExchange {
        WeakExchange(Arc::downgrade(self.inner_arc()))
    }

    /// Makes `waker` the one [`wake`](Self::wake) wakes (the response future, when its handler
    /// is pending).
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn register_waker(&self, waker: &Waker) {
        let mut slot = self.inner().waker.lock();
        match &*slot {
            Some(current) if current.will_wake(waker) => {}
            _ => *slot = Some(waker.clone()),
        }
        self.inner().waited.store(true, Ordering::Relaxed);
    }

    /// Drops the registered waker, if any: its future will not be polled for this exchange
    /// again. Takes the waker lock only if a waker was ever registered.
    #[inline]
    pub(crate) fn drop_waker(&self) {
        if self.inner().waited.load(Ordering::Relaxed) {
            drop(self.inner().waker.lock().take());
        }
    }
}

// As unwind safe as its handles, whose host its allocation is: a commit that panics (in a hook)
// has sealed what it sealed and set its record once or not at all, and the exchange's locks
// do not poison. Its own typed reference to the allocation reaches nothing more.
impl std::panic::UnwindSafe for Exchange {}
impl std::panic::RefUnwindSafe for Exchange {}

impl Clone for Exchange {
    fn clone(&self) -> Self {
        // Like `Arc`'s count: a new clone comes from a live one, so nothing to synchronize.
        self.inner().exchanges.fetch_add(1, Ordering::Relaxed);
        Exchange {
            inner: Arc::clone(&self.inner),
            request: self.request.clone(),
            response: self.response.clone(),
        }
    }
}

impl Drop for Exchange {
    /// The last `Exchange` is gone: report the writes refused after the commit. AcqRel, as
    /// `Arc`'s drop: every clone's drop releases what its owner did (its writes and their
    /// refusals), and the last one acquires them all before it counts.
    fn drop(&mut self) {
        if self.inner().exchanges.fetch_sub(1, Ordering::AcqRel) == 1 {
            // The response future drops its waker when it commits; this is for a waker left by
            // another driver of the exchange: let its task go now, not with the last handle or
            // record of the exchange.
            self.drop_waker();
            Inner::report_late_writes(self.inner_arc());
        }
    }
}

impl fmt::Debug for Exchange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Exchange")
            .field("request", &self.request)
            .field("response", &self.response)
            .field("annotations", &self.inner().annotations.lock().handle)
            .field("committed", &self.committed().map(|c| c.outcome()))
            .finish()
    }
}

#[cfg(all(test, not(shared_headers_loom)))]
mod tests;
