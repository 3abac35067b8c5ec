//! Reading a request's headers into its context ([`Propagation::capture`]): the request id
//! taken or made, the values that pass their checks and bounds, and what was refused, counted
//! by reason ([`PropagationCounts`]).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use http::{HeaderMap, HeaderName, HeaderValue};

use super::check::{Check, Kind, check};
use super::{Propagation, TRACEPARENT};
use crate::context::request_id::{generate, is_valid_request_id};
use crate::context::{Inner, RequestContext};

/// What [`Propagation::capture`] refused in one request, by reason; the server layer adds
/// them up for [`LayerStats::propagation_counts`](crate::server::LayerStats::propagation_counts).
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
    /// bytes, or not visible ASCII), flagged sensitive (secret), or sent more than once.
    pub replaced_request_ids: u64,
    /// Values not propagated because they failed their format's check.
    pub malformed: u64,
    /// Values not propagated because a name that takes one value came more than once.
    pub duplicated: u64,
    /// Values not propagated because they went over a bound (their own, or the
    /// propagation's count and byte bounds).
    pub over_limit: u64,
    /// Request ids that the generator of [`Propagation::request_id_with`] failed to make: it
    /// returned an invalid id, or panicked. One of ours was used instead.
    pub failed_request_id_generators: u64,
}

impl PropagationCounts {
    /// Whether nothing was refused.
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn is_empty(&self) -> bool {
        *self == PropagationCounts::default()
    }
}

impl Propagation {
    /// A new request id for a request without a valid one: the user's generator's when it
    /// makes a valid one, ours otherwise.
    fn make_request_id(&self, headers: &HeaderMap, counts: &mut PropagationCounts) -> HeaderValue {
        if let Some(make) = &self.make_request_id {
            // A panic is the generator's bug, not the request's: caught, counted, and the
            // request gets one of ours. The generator holds no state of ours to leave broken.
            match catch_unwind(AssertUnwindSafe(|| make(headers))) {
                Ok(Some(id)) if is_valid_request_id(id.as_bytes()) => return id,
                Ok(None) => {}
                Ok(Some(_)) | Err(_) => counts.failed_request_id_generators += 1,
            }
        }
        generate()
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
        self.capture_with(headers, None)
    }

    /// [`capture`](Self::capture), the hop's span made by `start` when given (the server's
    /// OpenTelemetry span: a hop then, whether or not `trace_hop` was asked for).
    pub(crate) fn capture_with(
        &self,
        headers: &HeaderMap,
        start: Option<crate::context::trace::StartSpan>,
    ) -> (Option<RequestContext>, PropagationCounts) {
        let mut counts = PropagationCounts::default();
        let request_id = self.request_id.as_ref().map(|name| {
            let mut values = headers.get_all(name).iter();
            let value = match (values.next(), values.next()) {
                // A value flagged sensitive is secret: never printed as the request's id nor
                // sent on; it is replaced like a malformed one.
                (Some(value), None)
                    if is_valid_request_id(value.as_bytes()) && !value.is_sensitive() =>
                {
                    value.clone()
                }
                (None, _) => self.make_request_id(headers, &mut counts),
                _ => {
                    counts.replaced_request_ids += 1;
                    self.make_request_id(headers, &mut counts)
                }
            };
            (name.clone(), value)
        });
        let mut captured: Vec<(HeaderName, HeaderValue)> = Vec::new();
        let (max_headers, max_bytes) = (self.get_max_headers(), self.get_max_bytes());
        let mut bytes = 0usize;
        let mut traceparent_ok = false;
        for (name, kind) in self.specs() {
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
        let hop = (self.trace_hop || start.is_some())
            .then(|| crate::context::trace::hop(&mut captured, start));
        if request_id.is_none() && captured.is_empty() {
            return (None, counts);
        }
        let context = RequestContext {
            inner: Arc::new(Inner {
                request_id,
                headers: captured,
                hop,
            }),
        };
        (Some(context), counts)
    }
}
