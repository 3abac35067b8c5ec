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
use std::mem::ManuallyDrop;
use std::sync::Arc;

use http::{HeaderMap, HeaderName, HeaderValue};

#[cfg(doc)]
use crate::deadline::Deadline;

mod propagation;
mod request_id;
mod scope;
pub(crate) mod trace;

pub use propagation::{Propagation, PropagationCounts, PropagationError};
pub use scope::{RequestScope, Scoped, carry};

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
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn request_id_header(&self) -> Option<&(HeaderName, HeaderValue)> {
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

#[cfg(test)]
mod tests;
