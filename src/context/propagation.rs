//! Which request headers travel on to the calls made for a request, and the checks each
//! incoming value must pass first.

use std::fmt;
use std::sync::Arc;

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::policy::{Policy, is_secret_name};

mod capture;
mod check;
#[cfg(test)]
mod tests;

pub use capture::PropagationCounts;

use check::{Kind, refuse};

/// The default bound on the number of propagated values (the request id not counted).
const DEFAULT_MAX_HEADERS: usize = 16;
/// The default bound on the propagated bytes, names and values (the request id not counted):
/// room for a full W3C `baggage` (8,192 bytes) and the rest of a trace context.
const DEFAULT_MAX_BYTES: usize = 10 * 1024;

/// Which headers of an incoming request travel on to the outgoing calls made for it, and the
/// request id: what the server layer captures
/// ([`SharedHeadersLayer::propagate`](crate::server::SharedHeadersLayer::propagate)) and the
/// client room sends ([`PropagateLayer`](crate::client::PropagateLayer)).
///
/// Istio's documentation asks every application to "collect headers from each incoming request
/// and forward the headers to all outgoing requests triggered by that incoming request": this
/// is the list of those headers, with presets for the common sets.
///
/// * **The request id** ([`request_id`](Self::request_id)): taken from its header when it is 1
///   to 128 bytes of visible ASCII, otherwise generated (and an invalid one counted as
///   replaced). A generated id is 32 lowercase hex digits, a keyed hash (SipHash-1-3, its
///   key from the OS once per process) of a process-wide counter: no prefix shared between
///   ids, none that can be told from others; one atomic add, no lock, no system call.
///   [`request_id_with`](Self::request_id_with) makes them your way.
/// * **Presets**: [`w3c`](Self::w3c) (`traceparent`, `tracestate`, `baggage`),
///   [`b3`](Self::b3) (`b3` and the `x-b3-*` set), [`envoy`](Self::envoy) (the set Istio
///   lists, with `x-request-id` as the request id); [`header`](Self::header) adds any name.
/// * **Checked values**: visible ASCII, space and tab only; `traceparent`, `b3` and `x-b3-*`
///   in their formats; `tracestate` (at most 32 members, 512 bytes, and only with a valid
///   `traceparent`) and `baggage` (at most 64 members, 8,192 bytes), whose repeated lines join
///   into one list. Any other name sent twice is a duplicate. A value that fails is not
///   propagated and is counted ([`PropagationCounts`]); the request is served all the same.
/// * **Bounds**: at most [`max_headers`](Self::max_headers) values (default 16) and
///   [`max_bytes`](Self::max_bytes) bytes (default 10 KiB); what does not fit is not
///   propagated, and counted.
/// * **Never a secret**: the [`Builder::ALWAYS_SECRET`](crate::Builder::ALWAYS_SECRET) names,
///   and every name the same credential rule marks (`x-vault-token`, `x-session-id`),
///   cannot be propagated ([`PropagationError::Secret`]), and the server layer leaves out the
///   names its policies make secret;
///   neither can hop-by-hop and framing headers or the budget headers, whose deadline travels
///   by its own rule ([`PropagationError::NotEndToEnd`]).
///
/// # Examples
///
/// ```
/// use http::{HeaderMap, HeaderName};
/// use shared_headers::context::{Propagation, PropagationError};
///
/// let propagation = Propagation::new()
///     .request_id()
///     .w3c()
///     .header(HeaderName::from_static("x-tenant"))?;
///
/// let mut incoming = HeaderMap::new();
/// incoming.insert("x-request-id", "req-7".parse()?);
/// incoming.insert("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".parse()?);
/// incoming.insert("x-tenant", "acme".parse()?);
/// incoming.insert("x-unrelated", "stays here".parse()?);
/// let (context, counts) = propagation.capture(&incoming);
/// let context = context.unwrap();
/// assert_eq!(context.request_id(), Some("req-7"));
/// assert_eq!(context.headers().count(), 3); // the id, traceparent, x-tenant
/// assert_eq!(counts, Default::default());
///
/// // A secret name is refused when the propagation is made.
/// let refused = Propagation::new().header(http::header::AUTHORIZATION);
/// assert!(matches!(refused, Err(PropagationError::Secret { .. })));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Default)]
#[must_use]
pub struct Propagation {
    request_id: Option<HeaderName>,
    make_request_id: Option<MakeRequestId>,
    specs: Vec<(HeaderName, Kind)>,
    max_headers: Option<usize>,
    max_bytes: Option<usize>,
    /// Whether the request is a hop of its trace (`trace_hop`).
    trace_hop: bool,
}

impl fmt::Debug for Propagation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Propagation")
            .field("request_id", &self.request_id)
            .field("request_id_with", &self.make_request_id.is_some())
            .field("headers", &self.names().collect::<Vec<_>>())
            .field("max_headers", &self.get_max_headers())
            .field("max_bytes", &self.get_max_bytes())
            .field("trace_hop", &self.trace_hop)
            .finish()
    }
}

/// Why a name cannot be propagated ([`Propagation::header`], and the server layer's
/// `propagate` for its policy's secret names).
///
/// # Examples
///
/// ```
/// use http::header::{COOKIE, HOST};
/// use shared_headers::context::{Propagation, PropagationError};
///
/// let secret = Propagation::new().header(COOKIE).unwrap_err();
/// assert_eq!(secret, PropagationError::Secret { name: COOKIE });
/// assert!(secret.to_string().contains("cookie"));
/// let framing = Propagation::new().header(HOST).unwrap_err();
/// assert_eq!(framing, PropagationError::NotEndToEnd { name: HOST });
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PropagationError {
    /// A credential or a name the policy keeps secret: it must not reach another service.
    Secret {
        /// The refused name.
        name: HeaderName,
    },
    /// A hop-by-hop or framing header (`host`, `connection`, `content-length`, `te`, ...), or a
    /// budget header (`grpc-timeout`, ...): it describes this hop, not the request, and the
    /// deadline travels by its own rule (what is left of it, on each call).
    NotEndToEnd {
        /// The refused name.
        name: HeaderName,
    },
}

impl fmt::Display for PropagationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PropagationError::Secret { name } => write!(
                f,
                "`{name}` is a secret header: it cannot be propagated to other services"
            ),
            PropagationError::NotEndToEnd { name } => write!(
                f,
                "`{name}` describes one hop (framing, connection or budget): it cannot be \
                 propagated; the deadline travels on its own"
            ),
        }
    }
}

impl std::error::Error for PropagationError {}

const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");

/// A user's request id generator ([`Propagation::request_id_with`]).
type MakeRequestId = Arc<dyn Fn(&HeaderMap) -> Option<HeaderValue> + Send + Sync>;

/// Where a name goes in the list: the trace context's names first, in a fixed order
/// (`traceparent` before `tracestate`, which needs it valid), then the others by name.
fn order(name: &HeaderName) -> (usize, &str) {
    const FIRST: &[&str] = &[
        "traceparent",
        "tracestate",
        "baggage",
        "b3",
        "x-b3-traceid",
        "x-b3-spanid",
        "x-b3-parentspanid",
        "x-b3-sampled",
        "x-b3-flags",
    ];
    let name = name.as_str();
    let rank = FIRST
        .iter()
        .position(|first| *first == name)
        .unwrap_or(FIRST.len());
    (rank, name)
}

impl Propagation {
    /// Nothing to propagate: add a request id, presets or names.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::Propagation;
    /// let (context, _) = Propagation::new().capture(&http::HeaderMap::new());
    /// assert!(context.is_none()); // nothing to capture
    /// ```
    pub fn new() -> Self {
        Propagation::default()
    }

    /// Whether there is nothing to capture (no request id, no header).
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn is_empty(&self) -> bool {
        self.request_id.is_none() && self.specs.is_empty()
    }

    /// A request id in `x-request-id` (unless [`request_id_header`](Self::request_id_header)
    /// names another, before or after): taken from the request when valid, generated
    /// otherwise. See the [type docs](Self) for what is valid and how ids are made.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::Propagation;
    /// let (context, _) = Propagation::new().request_id().capture(&http::HeaderMap::new());
    /// assert_eq!(context.unwrap().request_id().unwrap().len(), 32); // generated
    /// ```
    pub fn request_id(mut self) -> Self {
        if self.request_id.is_none() {
            self.request_id = Some(HeaderName::from_static("x-request-id"));
        }
        self
    }

    /// A request id in the header `name` instead of `x-request-id` (`x-correlation-id`, ...),
    /// whether [`request_id`](Self::request_id) or [`envoy`](Self::envoy) come before or
    /// after; of two calls, the last names the header. A name also given to
    /// [`header`](Self::header) travels as the request id only.
    ///
    /// # Errors
    ///
    /// As [`header`](Self::header): a secret, hop-by-hop or budget name is refused.
    ///
    /// # Examples
    ///
    /// ```
    /// use http::HeaderName;
    /// # use shared_headers::context::Propagation;
    /// let propagation = Propagation::new()
    ///     .request_id_header(HeaderName::from_static("x-correlation-id"))?;
    /// let mut incoming = http::HeaderMap::new();
    /// incoming.insert("x-correlation-id", "c-1".parse().unwrap());
    /// let (context, _) = propagation.capture(&incoming);
    /// assert_eq!(context.unwrap().request_id(), Some("c-1"));
    /// # Ok::<(), shared_headers::context::PropagationError>(())
    /// ```
    pub fn request_id_header(mut self, name: HeaderName) -> Result<Self, PropagationError> {
        refuse(&name)?;
        self.request_id = Some(name);
        Ok(self)
    }

    /// A request id (as [`request_id`](Self::request_id): in `x-request-id` unless
    /// [`request_id_header`](Self::request_id_header) names another), made by `make` when the
    /// request has no valid one, instead of the built-in generator: a UUID, a snowflake, the
    /// trace id of the request's `traceparent`. `make` gets the request's headers and is
    /// called only when an id must be made; a later call replaces it.
    ///
    /// `make` returning `None` leaves the id to the built-in generator. An invalid id (not 1
    /// to 128 bytes of visible ASCII) or a panic in `make` does too, and is counted
    /// ([`PropagationCounts::failed_request_id_generators`]): the request is served all the
    /// same, with a valid id.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use http::{HeaderMap, HeaderValue};
    /// use shared_headers::context::Propagation;
    ///
    /// let next = AtomicU64::new(1);
    /// let propagation = Propagation::new().request_id_with(move |_headers: &HeaderMap| {
    ///     let n = next.fetch_add(1, Ordering::Relaxed);
    ///     HeaderValue::try_from(format!("web-{n}")).ok()
    /// });
    ///
    /// let (context, _) = propagation.capture(&HeaderMap::new());
    /// assert_eq!(context.unwrap().request_id(), Some("web-1"));
    /// // A valid incoming id is taken as it is: the generator is not called.
    /// let mut incoming = HeaderMap::new();
    /// incoming.insert("x-request-id", "req-7".parse()?);
    /// let (context, _) = propagation.capture(&incoming);
    /// assert_eq!(context.unwrap().request_id(), Some("req-7"));
    ///
    /// // An invalid generated id is replaced by a built-in one, and counted.
    /// let bad = Propagation::new().request_id_with(|_: &HeaderMap| Some(HeaderValue::from_static("has space")));
    /// let (context, counts) = bad.capture(&HeaderMap::new());
    /// assert_eq!(context.unwrap().request_id().unwrap().len(), 32);
    /// assert_eq!(counts.failed_request_id_generators, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn request_id_with<F>(self, make: F) -> Self
    where
        F: Fn(&HeaderMap) -> Option<HeaderValue> + Send + Sync + 'static,
    {
        let mut this = self.request_id();
        this.make_request_id = Some(Arc::new(make));
        this
    }

    /// W3C Trace Context and Baggage: `traceparent`, `tracestate`, `baggage`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::Propagation;
    /// let w3c = Propagation::new().w3c();
    /// let names: Vec<_> = w3c.names().map(|n| n.as_str()).collect();
    /// assert_eq!(names, ["traceparent", "tracestate", "baggage"]);
    /// ```
    pub fn w3c(self) -> Self {
        self.known(&["traceparent", "tracestate", "baggage"])
    }

    /// Makes each request a hop of its W3C trace ([`w3c`](Self::w3c) included): a valid
    /// incoming `traceparent` gives the trace id, the caller's span id and the flags; the
    /// hop gets a new random span id, and the calls made in the request's scope send
    /// `traceparent` with the same trace id, this hop's span id as their parent and the
    /// flags (sampled, random), with `tracestate` and `baggage` as they came. Without a
    /// valid `traceparent`, the hop starts a trace: a new random 128-bit trace id, flags
    /// `03` (sampled, random). The ids are keyed hashes of a counter (SipHash-1-3, its key
    /// from the OS once per process): nobody can predict them; no lock, no system call.
    ///
    /// Without it, `traceparent` travels as it came: every service's spans are siblings
    /// under the caller's unless something else (a mesh sidecar) makes a span per hop.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::Propagation;
    /// let mut incoming = http::HeaderMap::new();
    /// incoming.insert("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".parse()?);
    /// let (context, _) = Propagation::new().trace_hop().capture(&incoming);
    /// let context = context.unwrap();
    /// let mut outgoing = http::HeaderMap::new();
    /// context.apply_to(&mut outgoing);
    /// let sent = outgoing["traceparent"].to_str()?;
    /// assert_eq!(&sent[..36], "00-4bf92f3577b34da6a3ce929d0e0e4736-"); // the same trace
    /// assert_eq!(&sent[36..52], context.span_id().unwrap()); // this hop as the parent
    /// assert_eq!(&sent[52..], "-01");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn trace_hop(mut self) -> Self {
        self.trace_hop = true;
        self.w3c()
    }

    /// B3, single and multi header: `b3`, `x-b3-traceid`, `x-b3-spanid`, `x-b3-parentspanid`,
    /// `x-b3-sampled`, `x-b3-flags`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::Propagation;
    /// assert_eq!(Propagation::new().b3().names().count(), 6);
    /// ```
    pub fn b3(self) -> Self {
        self.known(&[
            "b3",
            "x-b3-traceid",
            "x-b3-spanid",
            "x-b3-parentspanid",
            "x-b3-sampled",
            "x-b3-flags",
        ])
    }

    /// What Istio asks applications to forward: `x-request-id` as the request id (unless one
    /// is set already), the [`b3`](Self::b3) set, `traceparent`, `tracestate`,
    /// `x-ot-span-context`, `x-cloud-trace-context`, `grpc-trace-bin` and `sw8`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::Propagation;
    /// let envoy = Propagation::new().envoy();
    /// assert_eq!(envoy.names().count(), 12);
    /// ```
    pub fn envoy(self) -> Self {
        self.request_id().b3().known(&[
            "traceparent",
            "tracestate",
            "x-ot-span-context",
            "x-cloud-trace-context",
            "grpc-trace-bin",
            "sw8",
        ])
    }

    fn known(mut self, names: &[&'static str]) -> Self {
        for name in names {
            let name = HeaderName::from_static(name);
            self.push(name);
        }
        self
    }

    /// Adds `name` in its place in the fixed order ([`order`]), once: the list is the same
    /// whatever the order of the calls that made it.
    fn push(&mut self, name: HeaderName) {
        if let Err(at) = self
            .specs
            .binary_search_by(|(n, _)| order(n).cmp(&order(&name)))
        {
            let kind = Kind::of(&name);
            self.specs.insert(at, (name, kind));
        }
    }

    /// Propagates the header `name` too (a tenant, a feature flag, a locale). A name already
    /// in the list is not added twice; the request id's travels as the request id only.
    ///
    /// # Errors
    ///
    /// [`PropagationError::Secret`] for `authorization`, `proxy-authorization`, `cookie`,
    /// `set-cookie` and every name the crate's credential rule marks (`x-api-key`,
    /// `x-vault-token`, `x-session`, ...: [`Builder::ALWAYS_SECRET`](crate::Builder::ALWAYS_SECRET));
    /// [`PropagationError::NotEndToEnd`] for hop-by-hop and framing headers and for budget
    /// headers.
    ///
    /// # Examples
    ///
    /// ```
    /// use http::HeaderName;
    /// use shared_headers::context::{Propagation, PropagationError};
    ///
    /// let p = Propagation::new().header(HeaderName::from_static("x-tenant"))?;
    /// assert_eq!(p.names().count(), 1);
    /// let refused = p.header(HeaderName::from_static("x-api-key")).unwrap_err();
    /// assert!(matches!(refused, PropagationError::Secret { .. }));
    /// # Ok::<(), PropagationError>(())
    /// ```
    pub fn header(mut self, name: HeaderName) -> Result<Self, PropagationError> {
        refuse(&name)?;
        self.push(name);
        Ok(self)
    }

    /// The propagated names (the request id's not included), in a fixed order whatever the
    /// order of the calls: the W3C trace context (`traceparent`, `tracestate`, `baggage`),
    /// then B3's (`b3`, `x-b3-traceid`, `x-b3-spanid`, `x-b3-parentspanid`, `x-b3-sampled`,
    /// `x-b3-flags`), then the others by name. Values are captured in this order, so it is
    /// also which of them the bounds keep first.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::Propagation;
    /// let b3_first = Propagation::new().b3().w3c();
    /// assert_eq!(b3_first.names().next().unwrap(), "traceparent");
    /// ```
    pub fn names(&self) -> impl Iterator<Item = &HeaderName> + '_ {
        self.specs().map(|(name, _)| name)
    }

    /// The propagated names and their kinds, the request id's left out.
    fn specs(&self) -> impl Iterator<Item = &(HeaderName, Kind)> + '_ {
        let id = self.request_id.as_ref();
        self.specs.iter().filter(move |(name, _)| Some(name) != id)
    }

    /// At most `max` propagated values per request (default 16; the request id not counted).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::Propagation;
    /// let propagation = Propagation::new().w3c().max_headers(2);
    /// # drop(propagation);
    /// ```
    pub fn max_headers(mut self, max: usize) -> Self {
        self.max_headers = Some(max);
        self
    }

    /// The bound on propagated values per request.
    pub(crate) fn get_max_headers(&self) -> usize {
        self.max_headers.unwrap_or(DEFAULT_MAX_HEADERS)
    }

    /// At most `max` propagated bytes per request, names and values (default 10 KiB: a full
    /// W3C `baggage` and a trace context; the request id not counted).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::Propagation;
    /// let propagation = Propagation::new().w3c().max_bytes(1024);
    /// # drop(propagation);
    /// ```
    pub fn max_bytes(mut self, max: usize) -> Self {
        self.max_bytes = Some(max);
        self
    }

    /// The bound on propagated bytes per request.
    pub(crate) fn get_max_bytes(&self) -> usize {
        self.max_bytes.unwrap_or(DEFAULT_MAX_BYTES)
    }

    /// This propagation without the names secret under `policy` (the server layer's one
    /// secret set: secret wins over propagated).
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn without_secrets(&self, policy: Option<&Policy>) -> Propagation {
        let mut kept = self.clone();
        kept.specs.retain(|(name, _)| !is_secret_name(name, policy));
        if kept
            .request_id
            .as_ref()
            .is_some_and(|name| is_secret_name(name, policy))
        {
            kept.request_id = None;
        }
        kept
    }
}
