//! A client span per outgoing call (features `client` and `opentelemetry`): an OpenTelemetry
//! span of kind client, child of the request's hop (the server's span), whose id the call
//! sends in its `traceparent`; and `http.client.request.duration`, recorded once per call,
//! cancelled and cut calls included.

use std::fmt;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use http::{HeaderName, Request, StatusCode};
use opentelemetry::global::{BoxedSpan, BoxedTracer};
use opentelemetry::metrics::{Histogram, Meter};
use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId,
    TraceState, Tracer,
};
use opentelemetry::{Context as OtelContext, KeyValue};

use crate::context::RequestContext;
use crate::context::trace::{RANDOM, SAMPLED, traceparent};

const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");

/// The OpenTelemetry settings of a propagation client: the tracer of its client spans and the
/// histogram of `http.client.request.duration`, each optional. Off (both `None`): no call
/// makes a span or a point.
#[derive(Clone, Default)]
pub(crate) struct ClientOtel {
    tracer: Option<Arc<BoxedTracer>>,
    duration: Option<Histogram<f64>>,
}

impl fmt::Debug for ClientOtel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientOtel")
            .field("tracer", &self.tracer.is_some())
            .field("duration", &self.duration.is_some())
            .finish()
    }
}

impl ClientOtel {
    /// Whether a call makes a span or a duration point.
    #[inline]
    pub(crate) fn is_on(&self) -> bool {
        self.tracer.is_some() || self.duration.is_some()
    }

    /// Client spans made with `tracer` (replaces a tracer set before).
    pub(crate) fn set_tracer<T>(&mut self, tracer: T)
    where
        T: Tracer + Send + Sync + 'static,
        T::Span: Send + Sync + 'static,
    {
        self.tracer = Some(Arc::new(BoxedTracer::new(Box::new(tracer))));
    }

    /// `http.client.request.duration` recorded through `meter` (replaces a meter set before).
    pub(crate) fn set_meter(&mut self, meter: &Meter) {
        self.duration = Some(
            meter
                .f64_histogram("http.client.request.duration")
                .with_description("Duration of HTTP client requests.")
                .with_unit("s")
                .with_boundaries(crate::semconv::DURATION_BUCKETS.to_vec())
                .build(),
        );
    }

    /// The call of a tower request: its span and point, pending; none when off. Called
    /// before the propagation adds anything, so a `traceparent` the request has is its own.
    #[inline]
    pub(crate) fn begin_http<B>(&self, request: &mut Request<B>) -> Pending {
        if !self.is_on() {
            return Pending::none();
        }
        // `Request` lends one part mutably at a time: the headers are taken out and put back
        // (an empty map allocates nothing).
        let mut headers = std::mem::take(request.headers_mut());
        let call = begin(
            self,
            request.method(),
            Target::of_uri(request.uri()),
            &mut headers,
            request.extensions(),
        );
        *request.headers_mut() = headers;
        Pending::of(call)
    }
}

/// The parent of a call: the request's hop, from its extensions or in scope; without a hop
/// (trace context forwarded as it came), the caller's span of a valid `traceparent`.
struct Parent {
    context: OtelContext,
    /// The parent's trace id and its random flag (W3C level 2), which the call keeps in
    /// that trace whatever flags the tracer's span has.
    random: Option<(TraceId, u8)>,
}

fn parent_of(extensions: &http::Extensions) -> Parent {
    let hop = |context: &RequestContext| {
        // The hop's span (this service's), else the caller's span (remote).
        let (trace_id, span_id, flags, remote) = match context.hop_ids() {
            Some((trace_id, span_id, flags)) => (trace_id, span_id, flags, false),
            None => {
                let incoming = context.incoming_trace()?;
                (incoming.trace_id, incoming.parent_id, incoming.flags, true)
            }
        };
        let trace_id = TraceId::from_bytes(trace_id);
        let flags = flags & (SAMPLED | RANDOM);
        let parent = SpanContext::new(
            trace_id,
            SpanId::from_bytes(span_id),
            TraceFlags::new(flags),
            remote,
            TraceState::NONE,
        );
        Some(Parent {
            context: OtelContext::new().with_remote_span_context(parent),
            random: Some((trace_id, flags & RANDOM)),
        })
    };
    let found = match extensions.get::<RequestContext>() {
        Some(context) => hop(context),
        None => RequestContext::with_current(|context| context.and_then(hop)),
    };
    // Outside any request: the caller's own OpenTelemetry context, if it has one current.
    found.unwrap_or_else(|| Parent {
        context: OtelContext::current(),
        random: None,
    })
}

/// The last segment of a type's name, generics cut: `PropagateError`, `Error`.
pub(crate) fn type_path<E>() -> &'static str {
    // The fully qualified name (OpenTelemetry's `error.type` for an exception or error type),
    // without generic parameters: `hyper_util::client::legacy::Error`, not `Error`.
    let full = std::any::type_name::<E>();
    full.split('<').next().unwrap_or(full)
}

/// Where a call goes, as its span reports it: read from an `http::Uri`, or from a
/// `reqwest::Url` directly (which takes URLs `http::Uri` refuses, such as one over 64 KiB).
pub(crate) struct Target<'a> {
    pub(crate) scheme: Option<&'a str>,
    pub(crate) host: Option<&'a str>,
    /// The port written in the URL (the scheme's default otherwise).
    pub(crate) port: Option<u16>,
    /// Whether the URL has a user name or a password.
    pub(crate) userinfo: bool,
    pub(crate) path: &'a str,
}

impl<'a> Target<'a> {
    fn of_uri(uri: &'a http::Uri) -> Self {
        Target {
            scheme: uri.scheme_str(),
            host: uri.host(),
            port: uri.port_u16(),
            userinfo: uri.authority().is_some_and(|a| a.as_str().contains('@')),
            path: uri.path(),
        }
    }
}

/// Starts the span of one call (with a tracer): its parent (the request's hop), its
/// attributes, and the `traceparent` it sends (the span's id as the parent of the next hop,
/// unless the request has one of its own). Called before the propagation adds the hop's.
pub(crate) fn begin(
    otel: &ClientOtel,
    req_method: &http::Method,
    target: Target<'_>,
    headers: &mut http::HeaderMap,
    extensions: &http::Extensions,
) -> Call {
    let start = SystemTime::now();
    let started = Instant::now();
    let method = crate::semconv::method(req_method);
    // The host as the server's line and span name it: an IPv6 literal without its brackets,
    // an empty one none.
    let host = target
        .host
        .and_then(|host| crate::semconv::split_authority(host).map(|(host, _)| host));
    let mut metric = Vec::with_capacity(5);
    metric.push(KeyValue::new("http.request.method", method));
    if let Some(host) = host {
        metric.push(KeyValue::new("server.address", host.to_owned()));
    }
    let port = target.port.or(match target.scheme {
        Some("https") => Some(443),
        Some("http") => Some(80),
        _ => None,
    });
    if let Some(port) = port {
        metric.push(KeyValue::new("server.port", i64::from(port)));
    }
    let span = otel.tracer.as_ref().map(|tracer| {
        let parent = parent_of(extensions);
        let mut attributes = metric.clone();
        if method == "_OTHER" {
            // Conditionally required when it differs from `http.request.method` (as on the
            // server span; not an attribute of the duration).
            attributes.push(KeyValue::new(
                "http.request.method_original",
                req_method.as_str().to_owned(),
            ));
        }
        if let (Some(scheme), Some(host)) = (target.scheme, target.host) {
            // `target.host` keeps an IPv6 literal's brackets, as a URL writes it.
            // No query: it may hold a secret. No userinfo: the semantic conventions' `url.full`
            // MUST NOT carry credentials, and SHOULD show them as `REDACTED:REDACTED@`. The
            // path through the crate's one secret rule, as the server prints one (a credential
            // path parameter's value, `;jsessionid=`, redacted; request text escaped).
            let userinfo = if target.userinfo {
                "REDACTED:REDACTED@"
            } else {
                ""
            };
            let path = crate::redact::url::PathText {
                rule: &crate::redact::QueryRule::DEFAULT,
                path: target.path,
            };
            let full = match target.port {
                Some(port) => format!("{scheme}://{userinfo}{host}:{port}{path}"),
                None => format!("{scheme}://{userinfo}{host}{path}"),
            };
            attributes.push(KeyValue::new("url.full", full));
        }
        let name = if method == "_OTHER" { "HTTP" } else { method };
        let builder = tracer
            .span_builder(name)
            .with_kind(SpanKind::Client)
            .with_start_time(start)
            .with_attributes(attributes);
        let span = tracer.build_with_context(builder, &parent.context);
        let context = span.span_context();
        if context.is_valid() {
            // A `traceparent` the request has is its own: it wins, as over the hop's.
            if !headers.contains_key(&TRACEPARENT) {
                // The sampled flag is the tracer's decision; the random flag says how the trace
                // id was made: the parent's, when the span is in the parent's trace.
                let random = match parent.random {
                    Some((trace_id, random)) if trace_id == context.trace_id() => random,
                    _ => 0,
                };
                let flags = (context.trace_flags().to_u8() & SAMPLED) | random;
                let value = traceparent(
                    &context.trace_id().to_bytes(),
                    &context.span_id().to_bytes(),
                    flags,
                );
                headers.insert(TRACEPARENT, value);
            }
        }
        span
    });
    Call {
        span,
        start,
        started,
        metric,
        duration: otel.duration.clone(),
    }
}

/// One call in flight: ended exactly once.
pub(crate) struct Call {
    /// `None` without a tracer (a duration point only).
    span: Option<BoxedSpan>,
    start: SystemTime,
    started: Instant,
    metric: Vec<KeyValue>,
    duration: Option<Histogram<f64>>,
}

impl Call {
    /// Ends the span (if any) and records the point (if any), with the answer's status or the
    /// call's error type.
    fn end(mut self, status: Option<StatusCode>, error: Option<&'static str>) {
        use std::borrow::Cow;
        let elapsed = self.started.elapsed();
        if let Some(status) = status {
            let code = KeyValue::new("http.response.status_code", i64::from(status.as_u16()));
            if let Some(span) = &mut self.span {
                span.set_attribute(code.clone());
            }
            self.metric.push(code);
        }
        let error: Option<Cow<'static, str>> = error.map(Cow::Borrowed).or_else(|| {
            status
                .filter(|s| s.is_client_error() || s.is_server_error())
                .map(|s| Cow::Owned(s.as_str().to_owned()))
        });
        if let Some(span) = &mut self.span {
            match &error {
                Some(error) => {
                    span.set_attribute(KeyValue::new("error.type", error.clone()));
                    span.set_status(Status::error(error.clone()));
                }
                None => span.set_status(Status::Unset),
            }
            span.end_with_timestamp(self.start + elapsed);
        }
        if let Some(duration) = &self.duration {
            if let Some(error) = error {
                self.metric.push(KeyValue::new("error.type", error));
            }
            duration.record(elapsed.as_secs_f64(), &self.metric);
        }
    }
}

/// The span and point of one call, pending until the call ends: [`end`](Self::end) ends them
/// with the call's outcome, a drop before that with `error.type` `cancelled`. Empty (a `None`)
/// when the client has neither a tracer nor a meter.
pub(crate) struct Pending(Option<Call>);

impl Pending {
    /// Nothing to end.
    #[inline]
    pub(crate) fn none() -> Self {
        Pending(None)
    }

    /// `call`, to be ended.
    #[inline]
    pub(crate) fn of(call: Call) -> Self {
        Pending(Some(call))
    }

    /// Whether a call is still to be ended.
    #[inline]
    pub(crate) fn is_pending(&self) -> bool {
        self.0.is_some()
    }

    /// Ends the call (once; later calls do nothing) with the answer's `status`, or `error`,
    /// the call's error type.
    #[inline]
    pub(crate) fn end(&mut self, status: Option<StatusCode>, error: Option<&'static str>) {
        if let Some(call) = self.0.take() {
            call.end(status, error);
        }
    }

    /// Ends the call with an answer's head: its status, and for a gRPC answer the
    /// `grpc-status` of its head (a trailers-only answer): any code but 0 is the call's
    /// error, as `error.type` (the code's name) and `rpc.grpc.status_code`. A status sent in
    /// trailers comes after the call's end (the head) and is not seen.
    #[inline]
    pub(crate) fn end_head(&mut self, status: StatusCode, headers: &http::HeaderMap) {
        if let Some(mut call) = self.0.take() {
            let grpc = grpc_status(headers);
            if let Some(code) = grpc {
                let code_attr = KeyValue::new("rpc.grpc.status_code", i64::from(code));
                if let Some(span) = &mut call.span {
                    span.set_attribute(code_attr);
                }
            }
            let error = grpc.filter(|&code| code != 0).map(grpc_code_name);
            call.end(Some(status), error);
        }
    }
}

/// The `grpc-status` in a gRPC answer's head (`content-type: application/grpc...`).
fn grpc_status(headers: &http::HeaderMap) -> Option<u16> {
    let grpc = headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"application/grpc"));
    if !grpc {
        return None;
    }
    std::str::from_utf8(headers.get("grpc-status")?.as_bytes())
        .ok()?
        .parse()
        .ok()
}

/// A gRPC status code's name (`UNAVAILABLE`), `UNKNOWN` for a code outside the 17.
fn grpc_code_name(code: u16) -> &'static str {
    const NAMES: [&str; 17] = [
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    ];
    NAMES.get(usize::from(code)).copied().unwrap_or("UNKNOWN")
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.end(None, Some("cancelled"));
    }
}
