//! The server's OpenTelemetry span (feature `opentelemetry`): started when the layer's service
//! is called, as this hop of the request's trace (its span id is the one the calls made for
//! the request send as their parent), and ended from the end report, at the instant the
//! metric and the access line read, exactly once for every outcome.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use http::Request;
use opentelemetry::global::ObjectSafeSpan;
use opentelemetry::trace::{
    Span, SpanBuilder, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId,
    TraceState, Tracer,
};
use opentelemetry::{Context, KeyValue};

use super::end::{EndConsumer, ResponseEnd};
use super::line::server_address;
use crate::context::trace::{Incoming, RANDOM, SAMPLED, Started, new_span_id, new_trace_id};
use crate::context::{Propagation, PropagationCounts, RequestContext};
use crate::redact::QueryRule;
use crate::redact::url::PathText;
use crate::semconv::{method as otel_method, protocol_version};

/// The tracer the layer makes its server spans with
/// ([`SharedHeadersLayer::otel_tracer`](super::SharedHeadersLayer::otel_tracer)).
pub(crate) struct ServerTracer {
    pub(crate) tracer: Arc<dyn StartSpan>,
    /// The layer's `url.scheme` for a URI without one.
    pub(crate) scheme: &'static str,
    /// The names the layer's access log adds to the credential rule (`url.path`).
    pub(crate) rule: Option<Arc<QueryRule>>,
}

impl fmt::Debug for ServerTracer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerTracer").finish_non_exhaustive()
    }
}

/// A span the tracer records, boxed (any tracer's span type).
type Recording = Box<dyn ObjectSafeSpan + Send + Sync>;

/// The tracer of the server spans, behind one pointer for any tracer type, and without a box
/// per span: a span the tracer does not record is dropped where it was made.
pub(crate) trait StartSpan: Send + Sync {
    /// The span of `builder` under `parent`, boxed when the tracer records it; its context
    /// when it does not (a sampler that dropped it, a no-op tracer).
    fn start(&self, builder: SpanBuilder, parent: &Context) -> Result<Recording, SpanContext>;
}

impl<T> StartSpan for T
where
    T: Tracer + Send + Sync,
    T::Span: Send + Sync + 'static,
{
    fn start(&self, builder: SpanBuilder, parent: &Context) -> Result<Recording, SpanContext> {
        let span = self.build_with_context(builder, parent);
        if Span::is_recording(&span) {
            Ok(Box::new(span))
        } else {
            Err(Span::span_context(&span).clone())
        }
    }
}

/// What a hop keeps when the tracer made no span of its own (a no-op tracer): the end makes
/// none either.
struct Declined;

/// A server span in flight: the span, and the wall-clock instant of the layer's call (its
/// start; its end is this plus the end report's elapsed time, the metric's duration).
struct InFlight {
    span: Recording,
    start: SystemTime,
}

/// The request's context, its hop's span started by the layer's tracer when it has one.
pub(super) fn capture<B>(
    propagation: &Propagation,
    req: &Request<B>,
    host: (Option<&http::HeaderValue>, bool),
    tracer: Option<&ServerTracer>,
    started: Instant,
) -> (Option<RequestContext>, PropagationCounts) {
    let Some(tracer) = tracer else {
        return propagation.capture(req.headers());
    };
    let start = |incoming: Option<&Incoming>| tracer.start(req, host, started, incoming);
    propagation.capture_with(req.headers(), Some(&start))
}

/// The span's name: `{method} {route}`, `{method}` without a route, `HTTP` for a method
/// outside the standard set.
fn span_name(method: &'static str, route: Option<&str>) -> Cow<'static, str> {
    let method = if method == "_OTHER" { "HTTP" } else { method };
    match route {
        Some(route) => Cow::Owned(format!("{method} {route}")),
        None => Cow::Borrowed(method),
    }
}

/// The most attributes a server span gets: the five a sampler is given, the protocol's two,
/// an unknown method's text, and at the end the status, the route, the query, the gRPC status
/// and the error. The sampler's `Vec` has this room: the SDK keeps it as the span's (a span
/// that records grows it no more).
const SPAN_ATTRIBUTES: usize = 13;

/// The attributes a sampler is given, those the HTTP semantic conventions want at the span's
/// creation: method, path, scheme, server address and port, each as every printer shows it:
/// the path through the crate's one secret rule (a credential path parameter's value
/// redacted, request text escaped, as the access line's `url.path`), the address by
/// [`server_address`] from what the record keeps (`host`: the received value when the URI has
/// no authority, and whether it is secret for the layer). One `Vec`, with the room of the
/// span's every attribute.
fn sampling_attributes(
    method: &'static str,
    uri: &http::Uri,
    (host, host_secret): (Option<&http::HeaderValue>, bool),
    tracer: &ServerTracer,
) -> Vec<KeyValue> {
    let mut attributes = Vec::with_capacity(SPAN_ATTRIBUTES);
    attributes.push(KeyValue::new("http.request.method", method));
    let path = PathText {
        rule: QueryRule::or_default(tracer.rule.as_deref()),
        path: uri.path(),
    };
    let path = match path.as_plain() {
        Some(plain) => plain.to_owned(),
        None => path.to_string(),
    };
    attributes.push(KeyValue::new("url.path", path));
    let scheme = crate::semconv::scheme(uri.scheme_str(), tracer.scheme);
    attributes.push(KeyValue::new("url.scheme", scheme));
    if let Some((address, port)) = server_address(uri, host, host_secret, scheme) {
        attributes.push(KeyValue::new("server.address", address.into_owned()));
        if let Some(port) = port {
            attributes.push(KeyValue::new("server.port", i64::from(port)));
        }
    }
    attributes
}

/// `value` printed into a string of its exact length: formatted in this thread's reused
/// buffer, then copied once (no growth of a new string on the way, and no shrink when the
/// attribute boxes it).
fn exact_string(value: &dyn fmt::Display) -> String {
    thread_local! {
        static BUFFER: RefCell<String> = const { RefCell::new(String::new()) };
    }
    BUFFER
        .try_with(|buffer| {
            // Taken while in use (a printer that printed a span's attribute): a string of
            // its own.
            let mut buffer = buffer.try_borrow_mut().ok()?;
            buffer.clear();
            fmt::write(&mut *buffer, format_args!("{value}")).ok()?;
            let exact = String::from(buffer.as_str());
            if buffer.capacity() > KEPT_BUFFER {
                *buffer = String::new();
            }
            Some(exact)
        })
        .ok()
        .flatten()
        .unwrap_or_else(|| value.to_string())
}

/// The most [`exact_string`]'s buffer keeps between requests (a longer query's is freed).
const KEPT_BUFFER: usize = 4096;

/// The attributes of the request a recording span gets after its start (no sampler needs
/// them): the protocol, and the method's own text when it is outside the standard set.
fn other_attributes(span: &mut Recording, method: &http::Method, version: http::Version) {
    if otel_method(method) == "_OTHER" {
        span.set_attribute(KeyValue::new(
            "http.request.method_original",
            method.as_str().to_owned(),
        ));
    }
    span.set_attribute(KeyValue::new("network.protocol.name", "http"));
    span.set_attribute(KeyValue::new(
        "network.protocol.version",
        protocol_version(version),
    ));
}

impl EndConsumer for ServerTracer {
    // Its span started at the call: it must end at the end, whatever a subscriber wants.
    fn end(&self, end: &ResponseEnd) {
        ServerTracer::end(self, end);
    }
}

impl ServerTracer {
    /// Starts the server span of a request, child of the caller's span when a valid
    /// `traceparent` came. When the tracer made no span of its own (a no-op tracer), the hop
    /// gets new ids of its own and a [`Declined`] mark: its end makes no span either. A span
    /// the tracer does not record (its sampler dropped the request) keeps its ids and is
    /// [`Declined`] too. The sampler sees the request's sampling attributes (method, path,
    /// scheme, server address and port); the others are set only on a span that records.
    fn start<B>(
        &self,
        req: &Request<B>,
        host: (Option<&http::HeaderValue>, bool),
        started: Instant,
        incoming: Option<&Incoming>,
    ) -> Option<Started> {
        let start = SystemTime::now()
            .checked_sub(started.elapsed())
            .unwrap_or_else(SystemTime::now);
        let parent = match incoming {
            Some(incoming) => Context::new().with_remote_span_context(SpanContext::new(
                TraceId::from_bytes(incoming.trace_id),
                SpanId::from_bytes(incoming.parent_id),
                TraceFlags::new(incoming.flags & SAMPLED),
                true,
                TraceState::NONE,
            )),
            None => Context::new(),
        };
        let method = otel_method(req.method());
        // The tracer decides on a builder with the sampling attributes alone: a request its
        // sampler drops (or a no-op tracer) costs those, no other attribute and no box.
        let builder = SpanBuilder::from_name(span_name(method, None))
            .with_kind(SpanKind::Server)
            .with_start_time(start)
            .with_attributes(sampling_attributes(method, req.uri(), host, self));
        let (mut span, context) = match self.tracer.start(builder, &parent) {
            Ok(span) => {
                let context = span.span_context().clone();
                (Some(span), context)
            }
            Err(context) => (None, context),
        };
        // A no-op tracer's span is invalid, or carries its parent's ids: not a span of ours.
        if !context.is_valid()
            || incoming.is_some_and(|i| i.parent_id == context.span_id().to_bytes())
        {
            let (trace_id, flags) = match incoming {
                Some(incoming) => (incoming.trace_id, incoming.flags & (SAMPLED | RANDOM)),
                None => (new_trace_id(), SAMPLED | RANDOM),
            };
            return Some(Started {
                trace_id,
                span_id: new_span_id(),
                flags,
                span: Box::new(Declined),
            });
        }
        let Some(mut span) = span.take() else {
            // Not sampled: the hop keeps the tracer's ids (its children are not sampled
            // either), and its end makes no span.
            return Some(Started {
                trace_id: context.trace_id().to_bytes(),
                span_id: context.span_id().to_bytes(),
                flags: incoming.map_or(0, |incoming| incoming.flags & RANDOM),
                span: Box::new(Declined),
            });
        };
        other_attributes(&mut span, req.method(), req.version());
        let random = incoming.map_or(0, |incoming| incoming.flags & RANDOM);
        let sampled = if context.is_sampled() { SAMPLED } else { 0 };
        Some(Started {
            trace_id: context.trace_id().to_bytes(),
            span_id: context.span_id().to_bytes(),
            flags: sampled | random,
            span: Box::new(InFlight { span, start }),
        })
    }

    /// Ends the request's span at the end of its response (the instant the metric and the
    /// access line read): its status, route and error, status `Error` exactly when
    /// `error.type` is set. A request whose span was not started at the call (no context)
    /// gets one now, with the same start and end.
    pub(super) fn end(&self, end: &ResponseEnd) {
        let committed = end.committed();
        let kept = committed.context().and_then(RequestContext::take_span);
        if kept.as_ref().is_some_and(|span| span.is::<Declined>()) {
            return;
        }
        let in_flight = kept.and_then(|span| span.downcast::<InFlight>().ok());
        let InFlight { mut span, start } = match in_flight {
            Some(in_flight) => *in_flight,
            None => {
                // No hop was made for this request (the layer propagates nothing): a span
                // of its own, with the call's instant as its start.
                let start = SystemTime::now()
                    .checked_sub(end.duration())
                    .unwrap_or_else(SystemTime::now);
                let method = end.otel_method().unwrap_or("_OTHER");
                // As at the call: the sampler sees the sampling attributes, a recording
                // span gets the others.
                let mut builder = SpanBuilder::from_name(span_name(method, None))
                    .with_kind(SpanKind::Server)
                    .with_start_time(start);
                let line = committed.line();
                if let Some(line) = line {
                    builder = builder.with_attributes(sampling_attributes(
                        method,
                        &line.uri,
                        (line.host.as_ref(), line.host_secret),
                        self,
                    ));
                }
                match self.tracer.start(builder, &Context::new()) {
                    Ok(mut span) => {
                        if let Some(line) = line {
                            other_attributes(&mut span, &line.method, line.version);
                        }
                        InFlight { span, start }
                    }
                    // Not recorded: nothing to end.
                    Err(_) => return,
                }
            }
        };
        if let Some(status) = end.status_sent() {
            span.set_attribute(KeyValue::new(
                "http.response.status_code",
                i64::from(status.as_u16()),
            ));
        }
        if let Some(route) = end.route() {
            span.set_attribute(KeyValue::new("http.route", route.to_owned()));
            span.update_name(span_name(
                end.otel_method().unwrap_or("_OTHER"),
                Some(route),
            ));
        }
        // `url.query` when the request had one, as every printer shows it (a span the
        // sampler dropped never gets here: no cost for it).
        if let Some(query) = end.url_query() {
            span.set_attribute(KeyValue::new("url.query", exact_string(&query)));
        }
        if let Some(grpc) = end.grpc_status() {
            span.set_attribute(KeyValue::new("rpc.grpc.status_code", i64::from(grpc)));
        }
        match end.error_type() {
            Some(error) => {
                span.set_attribute(KeyValue::new("error.type", error));
                span.set_status(Status::error(error));
            }
            None => span.set_status(Status::Unset),
        }
        span.end_with_timestamp(start + end.duration());
    }
}
