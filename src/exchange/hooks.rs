//! Hooks run by an [`Exchange`](super::Exchange) at its commit and at its last drop.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use super::event::CommitEvent;
use super::record::LateWrites;

#[cfg(doc)]
use super::Exchange;

type CommitFn = dyn Fn(&CommitEvent<'_>) + Send + Sync + 'static;
type LateFn = dyn Fn(&LateWrites) + Send + Sync + 'static;

/// Callbacks an [`Exchange`] runs at its commit and when its last clone is dropped: the place
/// for an access log that sees every request, including cancelled and timed-out ones.
///
/// * [`on_commit`](Self::on_commit) runs exactly once per exchange, inside the winning
///   [`Exchange::commit`], whoever calls it (a handler, a deadline timer thread, a `Drop`),
///   after both handles and the annotations are sealed and before `commit` returns.
/// * [`on_late_writes`](Self::on_late_writes) runs at most once, when the last clone of the
///   exchange is dropped, if the exchange was committed and writes were refused after the
///   commit.
///
/// Cloning is one reference-count increment; every exchange built with the hooks shares them.
/// [`SharedHeadersLayer`](crate::server::SharedHeadersLayer) has the same two methods.
///
/// # Panics and deadlocks
///
/// A panicking hook is caught (even one whose panic payload panics again when dropped): the
/// process does not abort, the thread that ran it goes on, the exchange stays committed.
/// On an exchange of [`Exchange::with_hooks`], `on_commit` runs under the exchange's commit
/// lock: it must not commit the same exchange (that panics). The server layer's exchanges run
/// it later, from the response future, outside that lock (see
/// [`SharedHeadersLayer::on_commit`](crate::server::SharedHeadersLayer::on_commit)).
/// Where hooks run and why: [`docs::internals`](crate::docs::internals#hooks).
///
/// # Examples
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use shared_headers::{CommitHooks, Exchange, Outcome, SharedHeaders};
///
/// let log = Arc::new(Mutex::new(Vec::new()));
/// let lines = log.clone();
/// let hooks = CommitHooks::new().on_commit(move |c| lines.lock().unwrap().push(c.committed().outcome()));
///
/// let exchange = Exchange::with_hooks(SharedHeaders::new(), SharedHeaders::new(), &hooks);
/// drop(exchange.clone().commit(Outcome::Cancelled));
/// assert!(exchange.commit(Outcome::Answered).is_err()); // lost: no second call
/// assert_eq!(*log.lock().unwrap(), [Outcome::Cancelled]);
/// ```
#[derive(Clone, Default)]
#[must_use = "hooks do nothing until given to an exchange or a layer"]
pub struct CommitHooks {
    /// `None` without hooks: an exchange then clones nothing.
    list: Option<Arc<HookList>>,
}

/// The hooks, each kind in the order added.
#[derive(Clone, Default)]
struct HookList {
    on_commit: Vec<Arc<CommitFn>>,
    /// Each with its tag: a tagged hook (the server layer's access log) is replaced in place
    /// by the next one of its tag.
    on_late_writes: Vec<(Option<&'static str>, Arc<LateFn>)>,
}

impl CommitHooks {
    /// No hooks.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::CommitHooks;
    /// let hooks = CommitHooks::new().on_commit(|event| println!("{}", event.committed().outcome()));
    /// # drop(hooks);
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `f` with the record of every commit, exactly once per exchange. Hooks add up: every
    /// `on_commit` hook runs, in the order added, and a panic in one (caught) does not stop the
    /// next. See the [type docs](Self) for where they run and what a panic does.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{CommitHooks, Exchange, Outcome, SharedHeaders};
    /// let hooks = CommitHooks::new().on_commit(|event| {
    ///     let c = event.committed();
    ///     println!("{} {:?} in {:?}", c.outcome(), c.committed_status(), c.time_to_commit());
    /// });
    /// let exchange = Exchange::with_hooks(SharedHeaders::new(), SharedHeaders::new(), &hooks);
    /// exchange.commit(Outcome::Answered)?;
    /// # Ok::<(), shared_headers::AlreadyCommitted>(())
    /// ```
    pub fn on_commit(mut self, f: impl Fn(&CommitEvent<'_>) + Send + Sync + 'static) -> Self {
        self.list_mut().on_commit.push(Arc::new(f));
        self
    }

    /// Runs `f` once per committed exchange that had writes refused after its commit, when the
    /// last clone of the [`Exchange`] is dropped (every task that held it has let go). Hooks add
    /// up, as for [`on_commit`](Self::on_commit). Costs nothing per exchange beyond the exchange itself: it
    /// runs from the exchange's own drop, and keeps nothing alive.
    ///
    /// **What is counted**: writes refused with [`Error::Sealed`](crate::Error::Sealed) after
    /// the commit, through any of the exchange's handles (request, response, annotations) and
    /// any of their clones, up to the drop of the last `Exchange` clone. A task that keeps only
    /// a handle (`exchange.response().clone()`) and not the exchange does not delay the report:
    /// its writes after the report are refused but not reported. Give tasks a clone of the
    /// `Exchange` (one reference count) when their late writes should be reported.
    ///
    /// # Examples
    ///
    /// See [`LateWrites`].
    /// ```
    /// # use shared_headers::CommitHooks;
    /// let hooks = CommitHooks::new().on_late_writes(|late| {
    ///     eprintln!("{} writes refused {:?} after the commit", late.refused_writes(), late.since_commit());
    /// });
    /// # drop(hooks);
    /// ```
    pub fn on_late_writes(mut self, f: impl Fn(&LateWrites) + Send + Sync + 'static) -> Self {
        self.list_mut().on_late_writes.push((None, Arc::new(f)));
        self
    }

    /// Adds `f` as the late-writes hook tagged `tag`, or replaces the one of that tag in its
    /// place.
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(crate) fn set_tagged_late_writes(
        mut self,
        tag: &'static str,
        f: impl Fn(&LateWrites) + Send + Sync + 'static,
    ) -> Self {
        let list = &mut self.list_mut().on_late_writes;
        let f: Arc<LateFn> = Arc::new(f);
        match list.iter_mut().find(|(t, _)| *t == Some(tag)) {
            Some(entry) => entry.1 = f,
            None => list.push((Some(tag), f)),
        }
        self
    }

    fn list_mut(&mut self) -> &mut HookList {
        Arc::make_mut(self.list.get_or_insert_with(Default::default))
    }

    /// Whether a commit hook is set.
    pub(crate) fn has_commit_hooks(&self) -> bool {
        self.list
            .as_ref()
            .is_some_and(|list| !list.on_commit.is_empty())
    }

    /// Whether a late-writes hook is set.
    pub(crate) fn has_late_writes(&self) -> bool {
        self.list
            .as_ref()
            .is_some_and(|list| !list.on_late_writes.is_empty())
    }

    /// Runs the commit hooks in order, catching each one's panic.
    pub(super) fn committed(&self, event: &CommitEvent<'_>) {
        if let Some(list) = &self.list {
            for f in &list.on_commit {
                contain(|| f(event));
            }
        }
    }

    /// Runs the late-writes hooks in order, catching each one's panic.
    pub(super) fn late(&self, late: &LateWrites) {
        if let Some(list) = &self.list {
            for (_, f) in &list.on_late_writes {
                contain(|| f(late));
            }
        }
    }
}

/// Runs `f`, catching a panic. The panic's payload is dropped inside a second
/// `catch_unwind`: a payload whose own `Drop` panics (`panic_any(PanicsOnDrop)`) would otherwise
/// unwind out of here and kill the thread that runs the hook; its second payload is leaked
/// (`mem::forget`), as dropping it could panic again.
pub(crate) fn contain(f: impl FnOnce()) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
        drop_payload(payload);
    }
}

/// Drops a caught panic's payload without letting a panic in its `Drop` escape.
pub(crate) fn drop_payload(payload: Box<dyn std::any::Any + Send>) {
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        std::mem::forget(again);
    }
}

impl fmt::Debug for CommitHooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (commit, late) = self.list.as_ref().map_or((0, 0), |list| {
            (list.on_commit.len(), list.on_late_writes.len())
        });
        f.debug_struct("CommitHooks")
            .field("on_commit", &commit)
            .field("on_late_writes", &late)
            .finish()
    }
}
