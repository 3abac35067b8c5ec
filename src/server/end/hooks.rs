//! The consumers of the end of each response ([`EndHooks`]) and what a response's body
//! carries to report its end ([`Tracker`]).

use std::fmt;
use std::sync::Arc;

use http::Method;

use super::{Ending, ResponseEnd};
use crate::exchange::contain;
use crate::sync::{AtomicBool, AtomicU64};

/// A consumer of the end of each response: the access line, the metrics and the user's
/// [`on_response_end`](crate::server::SharedHeadersLayer::on_response_end) hooks implement it and
/// register themselves in the layer's [`EndHooks`]. A panic in any method is the caller's to
/// contain.
pub(in crate::server) trait EndConsumer: Send + Sync + 'static {
    /// Whether it wants this request's end (a tracked request costs a body wrapper and a
    /// report). Called once per request, at the call.
    fn interested(&self) -> bool {
        true
    }

    /// The start of a request it will see the end of (the call of the layer's service).
    /// `default_scheme` is the layer's `url.scheme` for a URI without one.
    fn start(&self, method: &Method, uri: &http::Uri, default_scheme: &'static str) {
        let _ = (method, uri, default_scheme);
    }

    /// Whether it needs the response headers as sent ([`ResponseEnd::sent_headers`]).
    fn wants_sent_headers(&self) -> bool {
        false
    }

    /// Whether it wants its report inside the request's `tracing` span.
    fn wants_span(&self) -> bool {
        false
    }

    /// Whether it reports late writes too (then the request's exchange carries its line).
    fn wants_late_writes(&self) -> bool {
        false
    }

    /// The end of one response.
    fn end(&self, end: &ResponseEnd);
}

/// A user's `on_response_end` hook.
struct UserHook<F>(F);

impl<F: Fn(&ResponseEnd) + Send + Sync + 'static> EndConsumer for UserHook<F> {
    fn end(&self, end: &ResponseEnd) {
        (self.0)(end);
    }
}

/// One registered consumer.
#[derive(Clone)]
struct Entry {
    consumer: Arc<dyn EndConsumer>,
}

/// The consumers of the end of each response, in the order added.
#[derive(Clone)]
pub(in crate::server) struct EndHooks {
    list: Vec<Entry>,
    /// `url.scheme` when the request's URI has none.
    pub(in crate::server) scheme: &'static str,
}

impl Default for EndHooks {
    fn default() -> Self {
        EndHooks {
            list: Vec::new(),
            scheme: "http",
        }
    }
}

impl fmt::Debug for EndHooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EndHooks")
            .field("hooks", &self.list.len())
            .finish()
    }
}

impl EndHooks {
    /// Adds the user's hook `f`, after the others (hooks add up).
    pub(in crate::server) fn add_fn(&mut self, f: impl Fn(&ResponseEnd) + Send + Sync + 'static) {
        self.add(Arc::new(UserHook(f)));
    }

    /// Adds `consumer` after the others.
    pub(in crate::server) fn add<C: EndConsumer>(&mut self, consumer: Arc<C>) {
        self.list.push(Entry { consumer });
    }

    /// Adds `other`'s consumers after these, in their order.
    pub(in crate::server) fn append(&mut self, other: &EndHooks) {
        self.list.extend(other.list.iter().cloned());
    }

    /// Whether any consumer wants this request's end (a user hook always; the access log
    /// when a subscriber takes its least severe level, one atomic load).
    #[inline]
    pub(in crate::server) fn interested(&self) -> bool {
        self.list.iter().any(|entry| entry.consumer.interested())
    }

    /// The start of a tracked request: each consumer's [`EndConsumer::start`] (the metrics'
    /// active-requests counter goes up; it comes down in their end report, made exactly once
    /// for a tracked request).
    #[inline]
    pub(in crate::server) fn start(&self, method: &Method, uri: &http::Uri) {
        for entry in &self.list {
            contain(|| entry.consumer.start(method, uri, self.scheme));
        }
    }

    /// Whether a consumer needs the response headers as sent.
    #[inline]
    pub(in crate::server) fn wants_sent_headers(&self) -> bool {
        self.list
            .iter()
            .any(|entry| entry.consumer.wants_sent_headers())
    }

    /// Whether a consumer reports late writes and may be taken now (then the request's
    /// exchange carries its late-writes line).
    #[inline]
    pub(in crate::server) fn wants_late_writes(&self) -> bool {
        self.list
            .iter()
            .any(|entry| entry.consumer.wants_late_writes() && entry.consumer.interested())
    }

    /// Whether a consumer wants its report in the request's span.
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    #[inline]
    pub(in crate::server) fn wants_span(&self) -> bool {
        self.list.iter().any(|entry| entry.consumer.wants_span())
    }

    fn report(&self, end: &ResponseEnd) {
        for entry in &self.list {
            contain(|| entry.consumer.end(end));
        }
    }
}

/// What the end of a response needs, carried by its body (inline: no allocation).
pub(in crate::server) struct Tracker {
    pub(in crate::server) hooks: Arc<EndHooks>,
    pub(in crate::server) end: ResponseEnd,
    /// The response's `content-length` (digits only), else
    /// [`UNKNOWN_LENGTH`](super::UNKNOWN_LENGTH): a body that reports its end short of it did
    /// not send the response the head declared.
    pub(in crate::server) declared: u64,
    /// The bytes sent at which an HTTP/1.x server stops polling and drops the body, complete
    /// (see `ResponseBody`'s drop): the declared length, else the one an exact size hint the
    /// server asked for gives (hyper writes it as the `content-length`), else
    /// [`UNKNOWN_LENGTH`](super::UNKNOWN_LENGTH). An atomic for `Body::size_hint`, which takes
    /// `&self`; only the body's own thread touches it (relaxed loads and stores: plain moves, no
    /// read-modify-write).
    pub(in crate::server) complete_at: AtomicU64,
    /// Whether the body said it is at its end (`Body::is_end_stream`, which takes `&self`):
    /// a server stops polling then, on any protocol.
    pub(in crate::server) at_end: AtomicBool,
    /// Whether the response is a gRPC one (`content-type: application/grpc…`): only its
    /// trailers' `grpc-status` is recorded.
    pub(in crate::server) grpc_response: bool,
    /// Whether the head's `trailer` header names `grpc-status` (an HTTP/1.x server sends
    /// only the trailer fields announced).
    pub(in crate::server) trailer_announced: bool,
    /// Set when the body panicked outside `poll_frame` (in `is_end_stream` or `size_hint`,
    /// which take `&self`), with the panic's message: its end is reported as panicked.
    pub(in crate::server) panicked: std::sync::OnceLock<Option<Box<str>>>,
    #[cfg(feature = "tracing")]
    pub(in crate::server) span: Option<tracing::Span>,
}

impl Tracker {
    /// Reports the end: `ending`, the duration now.
    pub(in crate::server) fn report(mut self, ending: Ending) {
        self.end.ending = ending;
        self.end.duration = self.end.committed.started().elapsed();
        #[cfg(feature = "tracing")]
        let _entered = self.span.as_ref().map(tracing::Span::enter);
        self.hooks.report(&self.end);
    }
}
