//! Which request headers travel on to the calls made for a request, and the checks each
//! incoming value must pass first.

use std::fmt;
use std::sync::Arc;

use http::{HeaderMap, HeaderName, HeaderValue};

use super::request_id::{generate, is_valid_request_id};
use super::{Inner, RequestContext};
use crate::policy::{CREDENTIAL_HEADERS, Policy, is_sensitive_name};

/// The default bound on the number of propagated values (the request id not counted).
const DEFAULT_MAX_HEADERS: usize = 16;
/// The default bound on the propagated bytes, names and values (the request id not counted):
/// room for a full W3C `baggage` (8,192 bytes) and the rest of a trace context.
const DEFAULT_MAX_BYTES: usize = 10 * 1024;
/// W3C Baggage: a platform must propagate at most 64 list members and 8,192 bytes.
const BAGGAGE_MAX_MEMBERS: usize = 64;
const BAGGAGE_MAX_BYTES: usize = 8192;
/// W3C Trace Context: at most 32 `tracestate` list members; 512 bytes is what every vendor
/// must pass on.
const TRACESTATE_MAX_MEMBERS: usize = 32;
const TRACESTATE_MAX_BYTES: usize = 512;

/// How the value of a propagated name is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Visible ASCII, space and tab only.
    Any,
    /// W3C `traceparent`.
    TraceParent,
    /// W3C `tracestate`: a list, passed on only with a valid `traceparent`.
    TraceState,
    /// W3C `baggage`: a list.
    Baggage,
    /// B3's single header `b3`.
    B3,
    /// `x-b3-traceid`: 16 or 32 lowercase hex digits.
    B3TraceId,
    /// `x-b3-spanid`, `x-b3-parentspanid`: 16 lowercase hex digits.
    B3SpanId,
    /// `x-b3-sampled`: `0`, `1` (or `true`, `false`).
    B3Sampled,
    /// `x-b3-flags`: `1`.
    B3Flags,
}

impl Kind {
    fn of(name: &HeaderName) -> Kind {
        match name.as_str() {
            "traceparent" => Kind::TraceParent,
            "tracestate" => Kind::TraceState,
            "baggage" => Kind::Baggage,
            "b3" => Kind::B3,
            "x-b3-traceid" => Kind::B3TraceId,
            "x-b3-spanid" | "x-b3-parentspanid" => Kind::B3SpanId,
            "x-b3-sampled" => Kind::B3Sampled,
            "x-b3-flags" => Kind::B3Flags,
            _ => Kind::Any,
        }
    }

    /// List headers: several field lines join into one value (RFC 9110, 5.3).
    fn is_list(self) -> bool {
        matches!(self, Kind::TraceState | Kind::Baggage)
    }
}

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
///   replaced). A generated id is 32 lowercase hex digits: the process's random 64-bit key,
///   then a keyed bijection of a process-wide counter (unique within the process, distinct
///   across processes and restarts with the probability of two 64-bit random keys differing);
///   it costs one atomic add and no lock.
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
/// * **Never a secret**: `authorization`, `proxy-authorization`, `cookie`, `set-cookie` and the
///   credential names of the access log cannot be propagated ([`PropagationError::Secret`]);
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
    specs: Vec<(HeaderName, Kind)>,
    max_headers: Option<usize>,
    max_bytes: Option<usize>,
}

impl fmt::Debug for Propagation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Propagation")
            .field("request_id", &self.request_id)
            .field(
                "headers",
                &self.specs.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .field("max_headers", &self.get_max_headers())
            .field("max_bytes", &self.get_max_bytes())
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

/// What [`Propagation::capture`] refused in one request, by reason; the server layer adds
/// them up for [`SharedHeadersLayer::propagation_counts`](crate::server::SharedHeadersLayer::propagation_counts).
///
/// # Examples
///
/// ```
/// use http::HeaderMap;
/// use shared_headers::context::Propagation;
///
/// let mut incoming = HeaderMap::new();
/// incoming.insert("x-request-id", "has\tcontrol".parse()?);
/// incoming.append("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".parse()?);
/// incoming.append("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".parse()?);
/// incoming.insert("baggage", "k=v,".repeat(3000).parse()?);
/// let (context, counts) = Propagation::new().request_id().w3c().capture(&incoming);
/// assert_eq!(counts.replaced_request_ids, 1);
/// assert_eq!(counts.duplicated, 1);
/// assert_eq!(counts.over_limit, 1);
/// let context = context.unwrap();
/// assert_ne!(context.request_id(), Some("has\tcontrol")); // a new one
/// assert_eq!(context.headers().count(), 1); // the id alone
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PropagationCounts {
    /// Incoming request ids replaced by a generated one: invalid (empty, longer than 128
    /// bytes, or not visible ASCII) or sent more than once.
    pub replaced_request_ids: u64,
    /// Values not propagated because they failed their format's check.
    pub malformed: u64,
    /// Values not propagated because a name that takes one value came more than once.
    pub duplicated: u64,
    /// Values not propagated because they went over a bound (their own, or the
    /// propagation's count and byte bounds).
    pub over_limit: u64,
}

impl PropagationCounts {
    /// Whether nothing was refused.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::PropagationCounts;
    /// assert!(PropagationCounts::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        *self == PropagationCounts::default()
    }
}

const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");

impl Propagation {
    /// Nothing to propagate: add a request id, presets or names.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::Propagation;
    /// assert!(Propagation::new().is_empty());
    /// assert!(!Propagation::new().w3c().is_empty());
    /// ```
    pub fn new() -> Self {
        Propagation::default()
    }

    /// Whether there is nothing to capture (no request id, no header).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::Propagation;
    /// assert!(Propagation::new().is_empty());
    /// assert!(!Propagation::new().request_id().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.request_id.is_none() && self.specs.is_empty()
    }

    /// A request id in `x-request-id`: taken from the request when valid, generated otherwise.
    /// See the [type docs](Self) for what is valid and how ids are made.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::Propagation;
    /// let (context, _) = Propagation::new().request_id().capture(&http::HeaderMap::new());
    /// assert_eq!(context.unwrap().request_id().unwrap().len(), 32); // generated
    /// ```
    pub fn request_id(self) -> Self {
        self.request_id_header(HeaderName::from_static("x-request-id"))
            .expect("x-request-id is end to end and not secret")
    }

    /// A request id in the header `name` instead of `x-request-id` (`x-correlation-id`, ...).
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
    /// assert_eq!(propagation.get_request_id().unwrap(), "x-correlation-id");
    /// # Ok::<(), shared_headers::context::PropagationError>(())
    /// ```
    pub fn request_id_header(mut self, name: HeaderName) -> Result<Self, PropagationError> {
        refuse(&name)?;
        self.specs.retain(|(n, _)| *n != name);
        self.request_id = Some(name);
        Ok(self)
    }

    /// The request id's header, if a request id is configured.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::Propagation;
    /// assert_eq!(Propagation::new().request_id().get_request_id().unwrap(), "x-request-id");
    /// assert!(Propagation::new().get_request_id().is_none());
    /// ```
    pub fn get_request_id(&self) -> Option<&HeaderName> {
        self.request_id.as_ref()
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
    /// assert_eq!(envoy.get_request_id().unwrap(), "x-request-id");
    /// assert_eq!(envoy.names().count(), 12);
    /// ```
    pub fn envoy(self) -> Self {
        let this = if self.request_id.is_some() {
            self
        } else {
            self.request_id()
        };
        this.b3().known(&[
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

    fn push(&mut self, name: HeaderName) {
        if self.request_id.as_ref() == Some(&name) || self.specs.iter().any(|(n, _)| *n == name) {
            return;
        }
        let kind = Kind::of(&name);
        self.specs.push((name, kind));
    }

    /// Propagates the header `name` too (a tenant, a feature flag, a locale). A name already
    /// in the list, or the request id's, is not added twice.
    ///
    /// # Errors
    ///
    /// [`PropagationError::Secret`] for `authorization`, `proxy-authorization`, `cookie`,
    /// `set-cookie` and the access log's credential names (`x-api-key`, ...);
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

    /// The propagated names (the request id's not included), in the order added.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::Propagation;
    /// assert_eq!(Propagation::new().w3c().names().next().unwrap(), "traceparent");
    /// ```
    pub fn names(&self) -> impl Iterator<Item = &HeaderName> + '_ {
        self.specs.iter().map(|(name, _)| name)
    }

    /// At most `max` propagated values per request (default 16; the request id not counted).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::Propagation;
    /// assert_eq!(Propagation::new().max_headers(4).get_max_headers(), 4);
    /// ```
    pub fn max_headers(mut self, max: usize) -> Self {
        self.max_headers = Some(max);
        self
    }

    /// The bound on propagated values per request.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::Propagation;
    /// assert_eq!(Propagation::new().get_max_headers(), 16);
    /// ```
    pub fn get_max_headers(&self) -> usize {
        self.max_headers.unwrap_or(DEFAULT_MAX_HEADERS)
    }

    /// At most `max` propagated bytes per request, names and values (default 10 KiB: a full
    /// W3C `baggage` and a trace context; the request id not counted).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::Propagation;
    /// assert_eq!(Propagation::new().max_bytes(1024).get_max_bytes(), 1024);
    /// ```
    pub fn max_bytes(mut self, max: usize) -> Self {
        self.max_bytes = Some(max);
        self
    }

    /// The bound on propagated bytes per request.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::Propagation;
    /// assert_eq!(Propagation::new().get_max_bytes(), 10 * 1024);
    /// ```
    pub fn get_max_bytes(&self) -> usize {
        self.max_bytes.unwrap_or(DEFAULT_MAX_BYTES)
    }

    /// Refuses a name that `policy` keeps secret (the server layer, which knows its policy).
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn check_policy(&self, policy: Option<&Policy>) -> Result<(), PropagationError> {
        let names = self.request_id.iter().chain(self.names());
        for name in names {
            if is_sensitive_name(name, policy) {
                return Err(PropagationError::Secret { name: name.clone() });
            }
        }
        Ok(())
    }

    /// This propagation without the names `policy` keeps secret.
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn without_secrets(&self, policy: Option<&Policy>) -> Propagation {
        let mut kept = self.clone();
        kept.specs
            .retain(|(name, _)| !is_sensitive_name(name, policy));
        if kept
            .request_id
            .as_ref()
            .is_some_and(|name| is_sensitive_name(name, policy))
        {
            kept.request_id = None;
        }
        kept
    }

    /// The request's context from its headers: the request id (taken or generated) and the
    /// values that pass their checks and fit the bounds; `None` when there is neither an id
    /// nor a value. The counts say what was refused. Never fails: a refused value is only not
    /// propagated.
    ///
    /// The server layer calls it for every request; call it yourself to propagate from a
    /// server that is not a tower service.
    ///
    /// # Examples
    ///
    /// ```
    /// use http::HeaderMap;
    /// use shared_headers::context::Propagation;
    ///
    /// let mut incoming = HeaderMap::new();
    /// incoming.insert("traceparent", "not a traceparent".parse()?);
    /// let (context, counts) = Propagation::new().w3c().capture(&incoming);
    /// assert!(context.is_none());
    /// assert_eq!(counts.malformed, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn capture(&self, headers: &HeaderMap) -> (Option<RequestContext>, PropagationCounts) {
        let mut counts = PropagationCounts::default();
        let request_id = self.request_id.as_ref().map(|name| {
            let mut values = headers.get_all(name).iter();
            let value = match (values.next(), values.next()) {
                (Some(value), None) if is_valid_request_id(value.as_bytes()) => value.clone(),
                (None, _) => generate(),
                _ => {
                    counts.replaced_request_ids += 1;
                    generate()
                }
            };
            (name.clone(), value)
        });
        let mut captured: Vec<(HeaderName, HeaderValue)> = Vec::new();
        let (max_headers, max_bytes) = (self.get_max_headers(), self.get_max_bytes());
        let mut bytes = 0usize;
        let mut traceparent_ok = false;
        for (name, kind) in &self.specs {
            let mut values = headers.get_all(name).iter();
            let Some(first) = values.next() else {
                continue;
            };
            let value = match values.next() {
                None => first.clone(),
                Some(second) if kind.is_list() => {
                    let mut joined = Vec::with_capacity(first.len() + second.len() + 1);
                    joined.extend_from_slice(first.as_bytes());
                    for more in std::iter::once(second).chain(values) {
                        joined.push(b',');
                        joined.extend_from_slice(more.as_bytes());
                        if joined.len() > max_bytes {
                            break;
                        }
                    }
                    match HeaderValue::from_bytes(&joined) {
                        Ok(value) => value,
                        Err(_) => {
                            counts.malformed += 1;
                            continue;
                        }
                    }
                }
                Some(_) => {
                    counts.duplicated += 1;
                    continue;
                }
            };
            if value.is_sensitive() {
                // Flagged by whoever built the map: never sent to another service.
                continue;
            }
            if *kind == Kind::TraceState && !traceparent_ok {
                // W3C: without a valid `traceparent`, `tracestate` means nothing.
                continue;
            }
            match check(*kind, value.as_bytes()) {
                Check::Ok => {}
                Check::Malformed => {
                    counts.malformed += 1;
                    continue;
                }
                Check::OverLimit => {
                    counts.over_limit += 1;
                    continue;
                }
            }
            let size = name.as_str().len() + value.len();
            if captured.len() >= max_headers || bytes + size > max_bytes {
                counts.over_limit += 1;
                continue;
            }
            if *name == TRACEPARENT {
                traceparent_ok = true;
            }
            bytes += size;
            captured.push((name.clone(), value));
        }
        if request_id.is_none() && captured.is_empty() {
            return (None, counts);
        }
        let context = RequestContext {
            inner: Arc::new(Inner {
                request_id,
                headers: captured,
            }),
        };
        (Some(context), counts)
    }
}

/// Names that never travel: credentials (also under a policy of none), hop-by-hop and framing
/// headers, and budget headers.
fn refuse(name: &HeaderName) -> Result<(), PropagationError> {
    if is_sensitive_name(name, None) || CREDENTIAL_HEADERS.contains(&name.as_str()) {
        return Err(PropagationError::Secret { name: name.clone() });
    }
    const HOP: &[&str] = &[
        "host",
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "content-length",
        "content-type",
        "content-encoding",
        "expect",
        "grpc-timeout",
        "connect-timeout-ms",
        "x-envoy-expected-rq-timeout-ms",
    ];
    if HOP.contains(&name.as_str()) {
        return Err(PropagationError::NotEndToEnd { name: name.clone() });
    }
    Ok(())
}

enum Check {
    Ok,
    Malformed,
    OverLimit,
}

fn check(kind: Kind, value: &[u8]) -> Check {
    // Every propagated value: visible ASCII, space and tab (no control character, no
    // obs-text that another stack would reject or mangle).
    // A fold, not `all`: no early exit, so the loop vectorizes (the values are short and
    // nearly always valid).
    let visible = value.iter().fold(true, |ok, &b| {
        ok & ((b == b'\t') | (b.wrapping_sub(b' ') <= b'~' - b' '))
    });
    if !visible {
        return Check::Malformed;
    }
    let ok = match kind {
        Kind::Any => true,
        Kind::TraceParent => is_traceparent(value),
        Kind::TraceState => {
            if value.len() > TRACESTATE_MAX_BYTES || too_many(value, TRACESTATE_MAX_MEMBERS) {
                return Check::OverLimit;
            }
            true
        }
        Kind::Baggage => {
            if value.len() > BAGGAGE_MAX_BYTES || too_many(value, BAGGAGE_MAX_MEMBERS) {
                return Check::OverLimit;
            }
            true
        }
        Kind::B3 => is_b3_single(value),
        Kind::B3TraceId => is_hex(value, 16) || is_hex(value, 32),
        Kind::B3SpanId => is_hex(value, 16),
        Kind::B3Sampled => matches!(value, b"0" | b"1" | b"true" | b"false"),
        Kind::B3Flags => value == b"1",
    };
    if ok { Check::Ok } else { Check::Malformed }
}

/// Whether a comma-separated list has more than `max` members. A member takes at least one
/// byte and a comma, so a list shorter than `2 * max + 1` bytes cannot: it is not counted.
fn too_many(value: &[u8], max: usize) -> bool {
    value.len() > 2 * max && members(value) > max
}

/// The members of a comma-separated list, empty ones not counted.
fn members(value: &[u8]) -> usize {
    value
        .split(|&b| b == b',')
        .filter(|m| m.iter().any(|&b| b != b' ' && b != b'\t'))
        .count()
}

/// `len` lowercase hex digits.
fn is_hex(value: &[u8], len: usize) -> bool {
    value.len() == len
        && value.iter().fold(true, |ok, &b| {
            ok & ((b.wrapping_sub(b'0') <= 9) | (b.wrapping_sub(b'a') <= 5))
        })
}

fn all_zero(value: &[u8]) -> bool {
    value.iter().fold(true, |zero, &b| zero & (b == b'0'))
}

/// W3C `traceparent`: `version-traceid-parentid-flags`, lowercase hex, version not `ff`, ids
/// not all zero; version `00` is exactly 55 bytes, a later version may add `-...` after them.
fn is_traceparent(v: &[u8]) -> bool {
    if v.len() < 55 || v[2] != b'-' || v[35] != b'-' || v[52] != b'-' {
        return false;
    }
    let (version, trace, parent, flags) = (&v[..2], &v[3..35], &v[36..52], &v[53..55]);
    if !is_hex(version, 2) || version == b"ff" {
        return false;
    }
    if !is_hex(trace, 32) || all_zero(trace) || !is_hex(parent, 16) || all_zero(parent) {
        return false;
    }
    if !is_hex(flags, 2) {
        return false;
    }
    match version {
        b"00" => v.len() == 55,
        _ => v.len() == 55 || v[55] == b'-',
    }
}

/// B3 single header: `0`, `1`, `d`, or `traceid-spanid[-sampling[-parentspanid]]`.
fn is_b3_single(v: &[u8]) -> bool {
    if matches!(v, b"0" | b"1" | b"d") {
        return true;
    }
    let mut parts = v.split(|&b| b == b'-');
    let (Some(trace), Some(span)) = (parts.next(), parts.next()) else {
        return false;
    };
    if !(is_hex(trace, 16) || is_hex(trace, 32)) || !is_hex(span, 16) {
        return false;
    }
    match (parts.next(), parts.next(), parts.next()) {
        (None, _, _) => true,
        (Some(sampling), None, _) => matches!(sampling, b"0" | b"1" | b"d"),
        (Some(sampling), Some(parent), None) => {
            matches!(sampling, b"0" | b"1" | b"d") && is_hex(parent, 16)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn map(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    #[test]
    fn traceparent_formats() {
        assert!(is_traceparent(TP.as_bytes()));
        assert!(!is_traceparent(TP.to_uppercase().as_bytes()));
        assert!(!is_traceparent(format!("{TP}-x").as_bytes())); // version 00: exact
        assert!(is_traceparent(format!("01{}-x", &TP[2..]).as_bytes()));
        assert!(!is_traceparent(format!("ff{}", &TP[2..]).as_bytes()));
        assert!(!is_traceparent(
            b"00-00000000000000000000000000000000-00f067aa0ba902b7-01"
        ));
        assert!(!is_traceparent(
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"
        ));
        assert!(!is_traceparent(b"00-4bf92f35"));
    }

    #[test]
    fn b3_formats() {
        for ok in [
            "0",
            "d",
            "80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1",
            "80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1",
            "80f198ee56343ba8-e457b5a2e4d86bd1-d-05e3ac9a4f6e3b90",
        ] {
            assert!(is_b3_single(ok.as_bytes()), "{ok}");
        }
        for bad in [
            "",
            "2",
            "xyz-abc",
            "80f198ee56343ba8-e457b5a2e4d86bd1-1-05e3-9",
            "a-b",
        ] {
            assert!(!is_b3_single(bad.as_bytes()), "{bad}");
        }
    }

    #[test]
    fn lists_join_singletons_refuse_duplicates() {
        let incoming = map(&[
            ("traceparent", TP),
            ("tracestate", "a=1"),
            ("tracestate", "b=2"),
            ("b3", "1"),
            ("b3", "0"),
        ]);
        let p = Propagation::new().w3c().b3();
        let (context, counts) = p.capture(&incoming);
        let context = context.unwrap();
        let got: Vec<_> = context
            .headers()
            .map(|(n, v)| (n.as_str(), v.to_str().unwrap()))
            .collect();
        assert_eq!(got, [("traceparent", TP), ("tracestate", "a=1,b=2")]);
        assert_eq!(counts.duplicated, 1);
    }

    #[test]
    fn tracestate_needs_a_valid_traceparent() {
        let p = Propagation::new().w3c();
        let (context, counts) = p.capture(&map(&[("tracestate", "a=1")]));
        assert!(context.is_none());
        assert!(counts.is_empty());
        let (context, counts) =
            p.capture(&map(&[("traceparent", "00-bad"), ("tracestate", "a=1")]));
        assert!(context.is_none());
        assert_eq!(counts.malformed, 1);
    }

    #[test]
    fn bounds_count_and_bytes() {
        let p = Propagation::new()
            .header(HeaderName::from_static("x-a"))
            .unwrap()
            .header(HeaderName::from_static("x-b"))
            .unwrap()
            .max_headers(1);
        let (context, counts) = p.capture(&map(&[("x-a", "1"), ("x-b", "2")]));
        assert_eq!(context.unwrap().headers().count(), 1);
        assert_eq!(counts.over_limit, 1);
        let p = p.max_headers(8).max_bytes(10);
        let (context, counts) = p.capture(&map(&[("x-a", "1234567"), ("x-b", "12345678")]));
        assert_eq!(context.unwrap().headers().count(), 1);
        assert_eq!(counts.over_limit, 1);
        // Baggage: its own bound, repeated lines joined first.
        let line = "k=v,".repeat(20);
        let pairs: Vec<(&str, &str)> = (0..4).map(|_| ("baggage", line.as_str())).collect();
        let (context, counts) = Propagation::new().w3c().capture(&map(&pairs));
        assert!(context.is_none());
        assert_eq!(counts.over_limit, 1);
    }

    #[test]
    fn request_ids_taken_replaced_generated() {
        let p = Propagation::new().request_id();
        let id = |m: &HeaderMap| p.capture(m).0.unwrap().request_id().unwrap().to_owned();
        assert_eq!(id(&map(&[("x-request-id", "abc")])), "abc");
        let (_, counts) = p.capture(&map(&[("x-request-id", "a b")]));
        assert_eq!(counts.replaced_request_ids, 1);
        let (_, counts) = p.capture(&map(&[("x-request-id", "a"), ("x-request-id", "b")]));
        assert_eq!(counts.replaced_request_ids, 1);
        let long = "a".repeat(10 * 1024);
        let (context, counts) = p.capture(&map(&[("x-request-id", &long)]));
        assert_eq!(counts.replaced_request_ids, 1);
        assert_eq!(context.unwrap().request_id().unwrap().len(), 32);
        let (_, counts) = p.capture(&HeaderMap::new());
        assert!(counts.is_empty());
    }

    #[test]
    fn refused_names() {
        for name in [
            "authorization",
            "cookie",
            "set-cookie",
            "x-api-key",
            "proxy-authorization",
        ] {
            let name = HeaderName::from_static(name);
            assert_eq!(
                Propagation::new().header(name.clone()).unwrap_err(),
                PropagationError::Secret { name }
            );
        }
        for name in ["host", "grpc-timeout", "content-length", "connection"] {
            let name = HeaderName::from_static(name);
            assert_eq!(
                Propagation::new()
                    .request_id_header(name.clone())
                    .unwrap_err(),
                PropagationError::NotEndToEnd { name }
            );
        }
    }

    #[test]
    fn presets_do_not_repeat_names() {
        let p = Propagation::new().w3c().w3c().envoy();
        let names: Vec<_> = p.names().map(|n| n.as_str()).collect();
        let set: std::collections::HashSet<_> = names.iter().collect();
        assert_eq!(names.len(), set.len());
        assert!(!names.contains(&"x-request-id"));
    }
}
