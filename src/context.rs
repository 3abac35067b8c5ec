//! The request's context (its id and the headers that travel on to the calls made for it), and
//! the request scope that puts it in scope with the [deadline](crate::deadline).
//!
//! A request carries more than its deadline to the services it calls: its id, and its trace
//! context (W3C `traceparent`, B3, baggage, a tenant header). Istio's documentation asks every
//! application to forward those headers by hand at every call site. Here the server layer
//! captures them once ([`Propagation`], on
//! [`SharedHeadersLayer::propagate`](crate::server::SharedHeadersLayer::propagate)), and the
//! client room's one layer ([`PropagateLayer`](crate::client::PropagateLayer), or its reqwest
//! middleware) sends them on every outgoing call made in the request's scope, with what is
//! left of the deadline. The rooms never see each other: both use this module.
//!
//! # The request scope
//!
//! The deadline and the context are in scope together, as one [`RequestScope`]:
//! [`RequestContext::current`] and [`Deadline::current`](crate::deadline::Deadline::current)
//! read them **on this thread**. The server layer puts its request's scope in place for each
//! call and poll of the inner service; [`RequestScope::scope`] does so for each poll of a
//! future, [`RequestScope::enter`] for a closure. The previous scope is restored afterwards,
//! also on a panic. A spawned task sees neither the context nor the deadline unless it is
//! wrapped with [`carry`], which captures the scope when it is called.
//!
//! With nothing configured to propagate, the layer sets no context, and the client layer sends
//! the deadline alone.
//!
//! ```
//! use http::HeaderMap;
//! use shared_headers::context::{self, Propagation, RequestContext, RequestScope};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let mut incoming = HeaderMap::new();
//! incoming.insert("x-request-id", "req-42".parse().unwrap());
//! let (request, _) = Propagation::new().request_id().capture(&incoming);
//! RequestScope::new()
//!     .context(request.unwrap())
//!     .scope(async {
//!         // Deep inside the handler: no parameter needed.
//!         let id = RequestContext::current().map(|c| c.request_id().unwrap().to_owned());
//!         assert_eq!(id.as_deref(), Some("req-42"));
//!         // A plain spawn loses it; `carry` keeps it (and the deadline).
//!         let lost = tokio::spawn(async { RequestContext::current().is_some() });
//!         let kept = tokio::spawn(context::carry(async { RequestContext::current().is_some() }));
//!         assert!(!lost.await.unwrap());
//!         assert!(kept.await.unwrap());
//!     })
//!     .await;
//! assert!(RequestContext::current().is_none());
//! # }
//! ```

use std::cell::Cell;
use std::fmt;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderMap, HeaderName, HeaderValue};
use pin_project_lite::pin_project;

use crate::deadline::Deadline;

mod propagation;
mod request_id;
pub(crate) mod trace;

pub use propagation::{Propagation, PropagationCounts, PropagationError};

/// A request's id and the header values that travel on with it. Cheap to clone (one reference
/// count); made by [`Propagation::capture`].
///
/// # Examples
///
/// ```
/// use http::HeaderMap;
/// use shared_headers::context::Propagation;
///
/// let mut incoming = HeaderMap::new();
/// incoming.insert("baggage", "tenant=acme".parse()?);
/// let (context, _) = Propagation::new().request_id().w3c().capture(&incoming);
/// let context = context.unwrap();
/// assert_eq!(context.request_id().unwrap().len(), 32); // none came: generated
/// let names: Vec<_> = context.headers().map(|(name, _)| name.as_str()).collect();
/// assert_eq!(names, ["x-request-id", "baggage"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct RequestContext {
    inner: Arc<Inner>,
}

struct Inner {
    request_id: Option<(HeaderName, HeaderValue)>,
    headers: Vec<(HeaderName, HeaderValue)>,
    /// This hop of the trace (`Propagation::trace_hop`): see `trace.rs`.
    hop: Option<trace::Hop>,
}

impl fmt::Debug for RequestContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Every value passed its checks (visible ASCII): printing them cannot forge a line.
        f.debug_struct("RequestContext")
            .field("request_id", &self.request_id())
            .field(
                "headers",
                &self
                    .inner
                    .headers
                    .iter()
                    .map(|(n, _)| n)
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl PartialEq for RequestContext {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
            || (self.inner.request_id == other.inner.request_id
                && self.inner.headers == other.inner.headers)
    }
}

impl Eq for RequestContext {}

thread_local! {
    /// The context in scope on this thread. `ManuallyDrop` keeps the slot free of drop glue
    /// (no destructor to register, the cheapest thread-local access): the slot holds a context
    /// only during a scope, whose guard takes it out again.
    static CURRENT: Cell<ManuallyDrop<Option<RequestContext>>> =
        const { Cell::new(ManuallyDrop::new(None)) };
}

fn replace_current(context: Option<RequestContext>) -> Option<RequestContext> {
    match CURRENT.try_with(|c| c.replace(ManuallyDrop::new(context))) {
        Ok(previous) => ManuallyDrop::into_inner(previous),
        // Thread teardown: nothing is in scope any more.
        Err(_) => None,
    }
}

/// Puts a context in scope until dropped, then restores the previous one (also on unwind).
pub(crate) struct Restore(Option<RequestContext>);

impl Drop for Restore {
    #[inline(never)]
    fn drop(&mut self) {
        let _ = replace_current(self.0.take());
    }
}

/// Lends a future's context to the thread while it is polled (no reference count): taken out
/// of the future's slot, put back when the guard drops (also on unwind).
pub(crate) struct Lend<'a> {
    slot: &'a mut Option<RequestContext>,
    previous: Option<RequestContext>,
}

impl<'a> Lend<'a> {
    #[inline]
    pub(crate) fn new(slot: &'a mut Option<RequestContext>) -> Lend<'a> {
        let previous = replace_current(slot.take());
        Lend { slot, previous }
    }
}

impl Drop for Lend<'_> {
    #[inline]
    fn drop(&mut self) {
        *self.slot = replace_current(self.previous.take());
    }
}

impl RequestContext {
    /// The context of the [`RequestScope`] in scope on this thread (one reference count), or
    /// `None` outside any scope. A thread-local read; a spawned task sees one only through
    /// [`carry`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::{Propagation, RequestContext, RequestScope};
    /// assert!(RequestContext::current().is_none());
    /// let (context, _) = Propagation::new().request_id().capture(&http::HeaderMap::new());
    /// let context = context.unwrap();
    /// let scope = RequestScope::new().context(context.clone());
    /// scope.enter(|| assert_eq!(RequestContext::current(), Some(context)));
    /// ```
    #[inline]
    pub fn current() -> Option<RequestContext> {
        CURRENT
            .try_with(|c| {
                let slot = c.take();
                let current = (*slot).clone();
                c.set(slot);
                current
            })
            .unwrap_or(None)
    }

    /// Runs `f` with the context in scope, borrowed: no reference count (the client room
    /// adds it to a request in place). The slot is empty while `f` runs and is put back
    /// afterwards, also if `f` panics.
    #[cfg(any(feature = "client", test))]
    pub(crate) fn with_current<R>(mut f: impl FnMut(Option<&RequestContext>) -> R) -> R {
        struct PutBack<'a> {
            slot: &'a Cell<ManuallyDrop<Option<RequestContext>>>,
            value: ManuallyDrop<Option<RequestContext>>,
        }
        impl Drop for PutBack<'_> {
            fn drop(&mut self) {
                self.slot
                    .set(std::mem::replace(&mut self.value, ManuallyDrop::new(None)));
            }
        }
        CURRENT
            .try_with(|slot| {
                let held = PutBack {
                    value: slot.take(),
                    slot,
                };
                f((*held.value).as_ref())
            })
            // Thread teardown: nothing is in scope any more.
            .unwrap_or_else(|_| f(None))
    }

    /// The request id, if one is configured: the incoming one when it was valid, otherwise a
    /// generated one.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::Propagation;
    /// let mut incoming = http::HeaderMap::new();
    /// incoming.insert("x-request-id", "abc".parse()?);
    /// let (context, _) = Propagation::new().request_id().capture(&incoming);
    /// assert_eq!(context.unwrap().request_id(), Some("abc"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn request_id(&self) -> Option<&str> {
        // Checked (visible ASCII) or generated (hex): always a `str`.
        let (_, value) = self.inner.request_id.as_ref()?;
        value.to_str().ok()
    }

    /// The request id with its header name, as it is sent.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::Propagation;
    /// let (context, _) = Propagation::new().request_id().capture(&http::HeaderMap::new());
    /// let (name, _) = context.unwrap().request_id_header().unwrap().clone();
    /// assert_eq!(name, "x-request-id");
    /// ```
    pub fn request_id_header(&self) -> Option<&(HeaderName, HeaderValue)> {
        self.inner.request_id.as_ref()
    }

    /// Every header an outgoing call gets: the request id first, then the captured values in
    /// the order of the [`Propagation`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::Propagation;
    /// let mut incoming = http::HeaderMap::new();
    /// incoming.insert("x-b3-sampled", "1".parse()?);
    /// let (context, _) = Propagation::new().b3().capture(&incoming);
    /// let sent: Vec<_> = context.unwrap().headers().map(|(n, v)| (n.clone(), v.clone())).collect();
    /// assert_eq!(sent, [("x-b3-sampled".parse()?, "1".parse()?)]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn headers(&self) -> impl Iterator<Item = (&HeaderName, &HeaderValue)> + '_ {
        self.inner
            .request_id
            .iter()
            .chain(self.inner.headers.iter())
            .map(|(name, value)| (name, value))
    }

    /// Adds every header of [`headers`](Self::headers) that `map` does not have yet: a value
    /// the outgoing request already has keeps its own.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::Propagation;
    /// let mut incoming = http::HeaderMap::new();
    /// incoming.insert("x-request-id", "from-edge".parse()?);
    /// let (context, _) = Propagation::new().request_id().capture(&incoming);
    /// let mut outgoing = http::HeaderMap::new();
    /// context.unwrap().apply_to(&mut outgoing);
    /// assert_eq!(outgoing["x-request-id"], "from-edge");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn apply_to(&self, map: &mut HeaderMap) {
        for (name, value) in self.headers() {
            if let http::header::Entry::Vacant(slot) = map.entry(name) {
                slot.insert(value.clone());
            }
        }
    }

    /// A clone of `self` in scope until the guard drops: out of line, so that a caller's
    /// path without a context pays one test (the server layer's call and each poll).
    #[cfg(feature = "server")]
    #[inline(never)]
    pub(crate) fn scoped_clone(&self) -> Restore {
        Restore(replace_current(Some(self.clone())))
    }
}

/// The request scope: a deadline and a request context, put in scope on this thread together.
///
/// While a scope is in place, [`Deadline::current`] and [`RequestContext::current`] read its
/// two parts, and the client room sends both on every outgoing call. The server layer puts its
/// request's scope in place around each call and poll of the inner service; use this type to
/// do the same elsewhere (a client outside any server, a background job, a test), and
/// [`carry`] for a task to spawn.
///
/// A scope replaces the whole scope around it: what it does not hold is not in scope while it
/// runs. To change one part and keep the other, start from [`current`](Self::current).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use shared_headers::context::{Propagation, RequestContext, RequestScope};
/// use shared_headers::deadline::{Deadline, DeadlineSource};
///
/// let (context, _) = Propagation::new().request_id().capture(&http::HeaderMap::new());
/// let deadline = Deadline::after(Duration::from_secs(1), DeadlineSource::Explicit).unwrap();
/// let scope = RequestScope::new().deadline(deadline).context(context.unwrap());
/// scope.enter(|| {
///     assert_eq!(Deadline::current(), Some(deadline));
///     assert!(RequestContext::current().is_some());
///     // Tighten the deadline, keep the context.
///     let sooner = Deadline::after(Duration::from_millis(5), DeadlineSource::Explicit).unwrap();
///     RequestScope::current().deadline(sooner).enter(|| {
///         assert_eq!(Deadline::current(), Some(sooner));
///         assert!(RequestContext::current().is_some());
///     });
/// });
/// assert_eq!(Deadline::current(), None);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestScope {
    deadline: Option<Deadline>,
    context: Option<RequestContext>,
}

impl RequestScope {
    /// A scope with neither a deadline nor a context: entered, it hides the scope around.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::RequestScope;
    /// # use shared_headers::deadline::{Deadline, DeadlineSource};
    /// let deadline = Deadline::after(std::time::Duration::from_secs(1), DeadlineSource::Explicit);
    /// RequestScope::new().deadline(deadline.unwrap()).enter(|| {
    ///     RequestScope::new().enter(|| assert_eq!(Deadline::current(), None));
    /// });
    /// ```
    pub fn new() -> RequestScope {
        RequestScope::default()
    }

    /// The scope in place on this thread now: its deadline, and its context (one reference
    /// count). What [`carry`] captures.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::RequestScope;
    /// assert_eq!(RequestScope::current(), RequestScope::new());
    /// ```
    pub fn current() -> RequestScope {
        RequestScope {
            deadline: Deadline::current(),
            context: RequestContext::current(),
        }
    }

    /// Replaces the scope's deadline.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Instant;
    /// # use shared_headers::context::RequestScope;
    /// # use shared_headers::deadline::{Deadline, DeadlineSource};
    /// let deadline = Deadline::at(Instant::now(), DeadlineSource::Explicit);
    /// RequestScope::new()
    ///     .deadline(deadline)
    ///     .enter(|| assert_eq!(Deadline::current(), Some(deadline)));
    /// ```
    #[must_use]
    pub fn deadline(mut self, deadline: Deadline) -> RequestScope {
        self.deadline = Some(deadline);
        self
    }

    /// Replaces the scope's context.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::{Propagation, RequestContext, RequestScope};
    /// let (context, _) = Propagation::new().request_id().capture(&http::HeaderMap::new());
    /// let context = context.unwrap();
    /// RequestScope::new()
    ///     .context(context.clone())
    ///     .enter(|| assert_eq!(RequestContext::current(), Some(context)));
    /// ```
    #[must_use]
    pub fn context(mut self, context: RequestContext) -> RequestScope {
        self.context = Some(context);
        self
    }

    /// Runs `f` in this scope, then restores the previous one (also if `f` panics).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use shared_headers::context::RequestScope;
    /// # use shared_headers::deadline::{Deadline, DeadlineSource};
    /// let deadline = Deadline::after(Duration::from_secs(1), DeadlineSource::Explicit).unwrap();
    /// let scope = RequestScope::new().deadline(deadline);
    /// let left = scope.clone().enter(|| Deadline::current().map(|d| d.remaining()));
    /// assert!(left.unwrap() <= Duration::from_secs(1));
    /// let panicked = std::panic::catch_unwind(|| scope.enter(|| panic!("handler bug")));
    /// assert!(panicked.is_err());
    /// assert_eq!(Deadline::current(), None); // restored on unwind
    /// ```
    pub fn enter<R>(self, f: impl FnOnce() -> R) -> R {
        let _deadline = crate::deadline::Restore::set(self.deadline);
        let _context = Restore(replace_current(self.context));
        f()
    }

    /// Wraps `future` so that this scope is in place during each of its polls (only those:
    /// a task it spawns is polled elsewhere and sees none, unless wrapped with [`carry`]).
    /// The deadline is not enforced here: this only says what it is.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use shared_headers::context::RequestScope;
    /// # use shared_headers::deadline::{Deadline, DeadlineSource};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let deadline = Deadline::after(Duration::from_secs(1), DeadlineSource::Server).unwrap();
    /// let seen = RequestScope::new()
    ///     .deadline(deadline)
    ///     .scope(async {
    ///         tokio::task::yield_now().await; // still in scope after a suspension
    ///         Deadline::current()
    ///     })
    ///     .await;
    /// assert_eq!(seen, Some(deadline));
    /// # }
    /// ```
    pub fn scope<F: Future>(self, future: F) -> Scoped<F> {
        Scoped {
            deadline: self.deadline,
            context: self.context,
            future,
        }
    }
}

/// Wraps `future` in the [`RequestScope`] in place now, for a task to spawn: the task sees its
/// deadline and its context, and the client layer sends both on its outgoing calls. A plain
/// `tokio::spawn(fut)` sees neither. Short for `RequestScope::current().scope(future)`.
///
/// What is not in scope now is not in scope in the task either (an outer scope where it is
/// polled is hidden).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use shared_headers::context::{self, Propagation, RequestContext, RequestScope};
/// use shared_headers::deadline::{Deadline, DeadlineSource};
///
/// # #[tokio::main]
/// # async fn main() {
/// let deadline = Deadline::after(Duration::from_secs(1), DeadlineSource::Caller).unwrap();
/// let (request, _) = Propagation::new().request_id().capture(&http::HeaderMap::new());
/// let scope = RequestScope::new().deadline(deadline).context(request.unwrap());
/// let task = scope.enter(|| {
///     tokio::spawn(context::carry(async {
///         (Deadline::current(), RequestContext::current().is_some())
///     }))
/// });
/// assert_eq!(task.await.unwrap(), (Some(deadline), true));
/// # }
/// ```
pub fn carry<F: Future>(future: F) -> Scoped<F> {
    RequestScope::current().scope(future)
}

pin_project! {
    /// A future polled in a [`RequestScope`]: made by [`RequestScope::scope`] and [`carry`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::{self, RequestScope};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let scoped: context::Scoped<_> = RequestScope::new().scope(async { 7 });
    /// assert_eq!(scoped.await, 7);
    /// # }
    /// ```
    #[derive(Debug)]
    #[must_use = "futures do nothing unless polled"]
    pub struct Scoped<F> {
        deadline: Option<Deadline>,
        context: Option<RequestContext>,
        #[pin]
        future: F,
    }
}

impl<F: Future> Future for Scoped<F> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _deadline = crate::deadline::Restore::set(*this.deadline);
        // The context is lent to the thread, not cloned: no reference count per poll.
        let _context = Lend::new(this.context);
        this.future.poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> RequestContext {
        Propagation::new()
            .request_id()
            .capture(&HeaderMap::new())
            .0
            .unwrap()
    }

    fn in_ms(ms: u64) -> Deadline {
        Deadline::after(
            std::time::Duration::from_millis(ms),
            crate::deadline::DeadlineSource::Explicit,
        )
        .unwrap()
    }

    fn both(deadline: Deadline, context: &RequestContext) -> RequestScope {
        RequestScope::new()
            .deadline(deadline)
            .context(context.clone())
    }

    fn in_scope() -> RequestScope {
        RequestScope::current()
    }

    #[test]
    fn enter_nests_replaces_both_and_restores_on_panic() {
        let (outer, inner) = (ctx(), ctx());
        let (early, late) = (in_ms(1000), in_ms(5000));
        both(early, &outer).enter(|| {
            assert_eq!(in_scope(), both(early, &outer));
            both(late, &inner).enter(|| assert_eq!(in_scope(), both(late, &inner)));
            // What a scope does not hold is not in scope.
            RequestScope::new()
                .deadline(late)
                .enter(|| assert_eq!(in_scope(), RequestScope::new().deadline(late)));
            RequestScope::current()
                .deadline(late)
                .enter(|| assert_eq!(in_scope(), both(late, &outer)));
            assert_eq!(in_scope(), both(early, &outer));
            let r = std::panic::catch_unwind(|| both(late, &inner).enter(|| panic!("boom")));
            assert!(r.is_err());
            assert_eq!(in_scope(), both(early, &outer));
        });
        assert_eq!(in_scope(), RequestScope::new());
    }

    #[test]
    fn with_current_borrows_the_one_in_scope_and_puts_it_back_on_panic() {
        let c = ctx();
        assert!(RequestContext::with_current(|seen| seen.is_none()));
        RequestScope::new().context(c.clone()).enter(|| {
            let counts = Arc::strong_count(&c.inner);
            RequestContext::with_current(|seen| {
                assert_eq!(seen, Some(&c));
                // Borrowed: no reference count taken.
                assert_eq!(Arc::strong_count(&c.inner), counts);
            });
            let r = std::panic::catch_unwind(|| {
                RequestContext::with_current(|_| panic!("boom"));
            });
            assert!(r.is_err());
            assert_eq!(RequestContext::current().as_ref(), Some(&c));
        });
        assert!(RequestContext::current().is_none());
    }

    #[test]
    fn scope_sets_only_during_polls_and_carry_hides_an_outer_scope() {
        let c = ctx();
        let d = in_ms(1000);
        let mut seen = Vec::new();
        let mut fut = std::pin::pin!(both(d, &c).scope(std::future::poll_fn(|_| {
            seen.push(in_scope());
            if seen.len() < 2 {
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        })));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        assert_eq!(in_scope(), RequestScope::new(), "restored between polls");
        assert!(fut.as_mut().poll(&mut cx).is_ready());
        assert_eq!(seen, vec![both(d, &c), both(d, &c)]);

        let none = std::pin::pin!(carry(async { in_scope() }));
        let mut none = none;
        let seen = both(d, &c).enter(|| none.as_mut().poll(&mut cx));
        assert_eq!(seen, Poll::Ready(RequestScope::new()));

        let kept = both(d, &c).enter(|| carry(async { in_scope() }));
        let mut kept = std::pin::pin!(kept);
        assert_eq!(kept.as_mut().poll(&mut cx), Poll::Ready(both(d, &c)));
    }

    #[test]
    fn apply_keeps_the_outgoing_value() {
        let mut incoming = HeaderMap::new();
        incoming.insert("x-request-id", "edge".parse().unwrap());
        incoming.insert(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
                .parse()
                .unwrap(),
        );
        let c = Propagation::new()
            .request_id()
            .w3c()
            .capture(&incoming)
            .0
            .unwrap();
        let mut out = HeaderMap::new();
        out.insert("x-request-id", "own".parse().unwrap());
        c.apply_to(&mut out);
        assert_eq!(out["x-request-id"], "own");
        assert_eq!(out["traceparent"], incoming["traceparent"]);
        assert_eq!(out.len(), 2);
    }
}
