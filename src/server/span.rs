//! The request's `tracing` span (feature `tracing`): the handler's polls, the response body's
//! and the access line run in it, so every event written while the request runs carries its
//! ids.

use tracing::Span;

use crate::context::RequestContext;

/// The target of the request's span.
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) const TARGET: &str = "shared_headers::request";

/// The span of one request: `request`, at `INFO` (the access line's level), with
/// `http.request.id` and, when the request is a hop of a trace, `trace_id` and `span_id`
/// (OpenTelemetry's log data model names), a child of the span current when the layer's
/// service is called. With no subscriber interested in it, the span current at the call
/// (nothing new: one callsite test).
#[inline]
pub(super) fn request_span(context: Option<&RequestContext>) -> Span {
    let span = tracing::info_span!(
        target: "shared_headers::request",
        "request",
        http.request.id = context.and_then(RequestContext::request_id),
        trace_id = context.and_then(RequestContext::known_trace_id),
        span_id = context.and_then(RequestContext::span_id),
    );
    if span.is_disabled() {
        // The access line still goes to the caller's span, whichever thread writes it.
        Span::current()
    } else {
        span
    }
}
