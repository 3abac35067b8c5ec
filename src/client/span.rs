//! A client span per outgoing call (features `client` and `opentelemetry`): an OpenTelemetry
//! span of kind client, child of the request's hop (the server's span), whose id the call
//! sends in its `traceparent`; and `http.client.request.duration`, recorded once per call,
//! cancelled and cut calls included.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Instant, SystemTime};

use http::{HeaderName, Request, Response, StatusCode};
use opentelemetry::global::{BoxedSpan, BoxedTracer};
use opentelemetry::metrics::{Histogram, Meter};
use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId,
    TraceState, Tracer,
};
use opentelemetry::{Context as OtelContext, KeyValue};
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use crate::context::RequestContext;
use crate::context::trace::{RANDOM, SAMPLED, traceparent};

const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");

/// A [`Layer`] that makes an OpenTelemetry client span for every call, and records
/// `http.client.request.duration` once per call when given a meter.
///
/// * The span is a **child of the request's hop**: the server layer's span when it has a
///   tracer ([`SharedHeadersLayer::otel_tracer`](crate::server::SharedHeadersLayer::otel_tracer)),
///   else the hop of [`Propagation::trace_hop`](crate::context::Propagation::trace_hop):
///   the context in the request's extensions, else the one in scope. Without a hop (trace
///   context forwarded as it came, [`Propagation::w3c`](crate::context::Propagation::w3c)),
///   a child of the caller's span in the valid `traceparent` that came. Outside any request,
///   or with no trace known, a new trace.
/// * The call sends `traceparent` with **the client span's id** as the parent of the next
///   hop, unless the request has a `traceparent` of its own (other than the hop's, which
///   [`PropagateLayer`](crate::client::PropagateLayer) adds): the stacking order of the two
///   layers does not matter.
/// * Kind client, name `{method}`, the HTTP client attributes of the semantic conventions
///   (`http.request.method`, `server.address`, `server.port`, `url.full` without its query
///   and with any userinfo as `REDACTED:REDACTED@`, `http.request.method_original` for a
///   method reported as `_OTHER`, `http.response.status_code`, `error.type`), status `Error`
///   exactly when `error.type` is set: the status as a string for a 4xx or 5xx, the error's
///   type name for an error (`PropagateError` for a call cut at its deadline), `cancelled`
///   for a call dropped before its answer.
/// * **Exactly once** per call: the span ends, and the duration is recorded, when the
///   answer's head came, when the call failed, or when its future was dropped.
///
/// # Examples
///
/// ```
/// use http::{Request, Response};
/// use shared_headers::client::{ClientSpanLayer, PropagateLayer};
/// use shared_headers::deadline::BudgetHeader;
/// use tower::{ServiceBuilder, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let tracer = opentelemetry::global::tracer("my-client"); // the SDK's in a real service
/// let meter = opentelemetry::global::meter("my-client");
/// let client = ServiceBuilder::new()
///     .layer(PropagateLayer::new(BudgetHeader::grpc_timeout()))
///     .layer(ClientSpanLayer::new(tracer).meter(&meter))
///     .service_fn(|_req: Request<()>| async { Ok::<_, std::io::Error>(Response::new(())) });
/// let res = client.oneshot(Request::get("http://backend/").body(())?).await?;
/// assert_eq!(res.status(), 200);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
#[must_use = "a layer does nothing until it wraps a service"]
pub struct ClientSpanLayer {
    tracer: Arc<BoxedTracer>,
    duration: Option<Histogram<f64>>,
}

impl fmt::Debug for ClientSpanLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientSpanLayer")
            .field("duration", &self.duration.is_some())
            .finish_non_exhaustive()
    }
}

impl ClientSpanLayer {
    /// Client spans made with `tracer`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::ClientSpanLayer;
    /// let layer = ClientSpanLayer::new(opentelemetry::global::tracer("my-client"));
    /// # drop(layer);
    /// ```
    pub fn new<T>(tracer: T) -> Self
    where
        T: Tracer + Send + Sync + 'static,
        T::Span: Send + Sync + 'static,
    {
        ClientSpanLayer {
            tracer: Arc::new(BoxedTracer::new(Box::new(tracer))),
            duration: None,
        }
    }

    /// Records `http.client.request.duration` (unit `s`, the HTTP buckets of
    /// [`DURATION_BUCKETS`](crate::server::metrics::DURATION_BUCKETS)) through `meter`, once
    /// per call, with the span's end as its instant: `http.request.method`,
    /// `server.address`, `server.port`, `http.response.status_code`, `error.type`. A second
    /// call replaces the meter.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::ClientSpanLayer;
    /// let layer = ClientSpanLayer::new(opentelemetry::global::tracer("my-client"))
    ///     .meter(&opentelemetry::global::meter("my-client"));
    /// # drop(layer);
    /// ```
    pub fn meter(mut self, meter: &Meter) -> Self {
        self.duration = Some(
            meter
                .f64_histogram("http.client.request.duration")
                .with_description("Duration of HTTP client requests.")
                .with_unit("s")
                .with_boundaries(crate::server::metrics::DURATION_BUCKETS.to_vec())
                .build(),
        );
        self
    }
}

impl<S> Layer<S> for ClientSpanLayer {
    type Service = ClientSpan<S>;

    fn layer(&self, inner: S) -> ClientSpan<S> {
        ClientSpan {
            inner,
            layer: self.clone(),
        }
    }
}

/// The [`Service`] made by [`ClientSpanLayer`].
///
/// # Examples
///
/// ```
/// use shared_headers::client::ClientSpanLayer;
/// use tower::Layer;
///
/// let service = ClientSpanLayer::new(opentelemetry::global::tracer("c")).layer(tower::service_fn(
///     |_req: http::Request<()>| async { Ok::<_, std::io::Error>(http::Response::new(())) },
/// ));
/// # drop(service);
/// ```
#[derive(Clone, Debug)]
pub struct ClientSpan<S> {
    inner: S,
    layer: ClientSpanLayer,
}

/// The parent of a call: the request's hop, from its extensions or in scope; without a hop
/// (trace context forwarded as it came), the caller's span of a valid `traceparent`.
struct Parent {
    context: OtelContext,
    /// The `traceparent` the propagation adds to the call (not the request's own).
    sent: Option<http::HeaderValue>,
    /// The parent's trace id and its random flag (W3C level 2), which the call keeps in
    /// that trace whatever flags the tracer's span has.
    random: Option<(TraceId, u8)>,
}

fn parent_of(extensions: &http::Extensions) -> Parent {
    let hop = |context: &RequestContext| {
        // The hop's span (this service's), else the caller's span (remote).
        let (trace_id, span_id, flags, remote, sent) = match context.hop_ids() {
            Some((trace_id, span_id, flags)) => {
                (trace_id, span_id, flags, false, context.traceparent())
            }
            None => {
                let incoming = context.incoming_trace()?;
                (
                    incoming.trace_id,
                    incoming.parent_id,
                    incoming.flags,
                    true,
                    context.incoming_traceparent(),
                )
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
            sent: sent.cloned(),
            random: Some((trace_id, flags & RANDOM)),
        })
    };
    let found = match extensions.get::<RequestContext>() {
        Some(context) => hop(context),
        None => RequestContext::with_current(|context| context.and_then(hop)),
    };
    found.unwrap_or_else(|| Parent {
        context: OtelContext::new(),
        sent: None,
        random: None,
    })
}

/// The last segment of a type's name, generics cut: `PropagateError`, `Error`.
fn short_type_name<E>() -> &'static str {
    let full = std::any::type_name::<E>();
    let base = full.split('<').next().unwrap_or(full);
    base.rsplit("::").next().unwrap_or(base)
}

impl<S, B, R> Service<Request<B>> for ClientSpan<S>
where
    S: Service<Request<B>, Response = Response<R>>,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = ClientSpanFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let (mut parts, body) = req.into_parts();
        let call = begin(
            &self.layer,
            &parts.method,
            Target::of_uri(&parts.uri),
            &mut parts.headers,
            &parts.extensions,
        );
        ClientSpanFuture {
            inner: self.inner.call(Request::from_parts(parts, body)),
            call: Some(call),
        }
    }
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

/// Starts the span of one call: its parent (the request's hop), its attributes, and the
/// `traceparent` it sends (the span's id as the parent of the next hop, unless the request
/// has one of its own other than the hop's).
pub(crate) fn begin(
    layer: &ClientSpanLayer,
    req_method: &http::Method,
    target: Target<'_>,
    headers: &mut http::HeaderMap,
    extensions: &http::Extensions,
) -> Call {
    let start = SystemTime::now();
    let started = Instant::now();
    let parent = parent_of(extensions);
    let method = match *req_method {
        http::Method::GET => "GET",
        http::Method::HEAD => "HEAD",
        http::Method::POST => "POST",
        http::Method::PUT => "PUT",
        http::Method::DELETE => "DELETE",
        http::Method::CONNECT => "CONNECT",
        http::Method::OPTIONS => "OPTIONS",
        http::Method::TRACE => "TRACE",
        http::Method::PATCH => "PATCH",
        _ => "_OTHER",
    };
    let mut metric = Vec::with_capacity(5);
    metric.push(KeyValue::new("http.request.method", method));
    if let Some(host) = target.host {
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
        // No query: it may hold a secret. No userinfo: the semantic conventions' `url.full`
        // MUST NOT carry credentials, and SHOULD show them as `REDACTED:REDACTED@`.
        let userinfo = if target.userinfo {
            "REDACTED:REDACTED@"
        } else {
            ""
        };
        let path = target.path;
        let full = match target.port {
            Some(port) => format!("{scheme}://{userinfo}{host}:{port}{path}"),
            None => format!("{scheme}://{userinfo}{host}{path}"),
        };
        attributes.push(KeyValue::new("url.full", full));
    }
    let name = if method == "_OTHER" { "HTTP" } else { method };
    let builder = layer
        .tracer
        .span_builder(name)
        .with_kind(SpanKind::Client)
        .with_start_time(start)
        .with_attributes(attributes);
    let span = layer.tracer.build_with_context(builder, &parent.context);
    let context = span.span_context();
    if context.is_valid() {
        let own = match headers.get(&TRACEPARENT) {
            None => false,
            Some(sent) => parent.sent.as_ref() != Some(sent),
        };
        if !own {
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
    Call {
        span,
        start,
        started,
        metric,
        duration: layer.duration.clone(),
    }
}

/// One call in flight: ended exactly once.
pub(crate) struct Call {
    span: BoxedSpan,
    start: SystemTime,
    started: Instant,
    metric: Vec<KeyValue>,
    duration: Option<Histogram<f64>>,
}

impl Call {
    pub(crate) fn end(mut self, status: Option<StatusCode>, error: Option<&'static str>) {
        use std::borrow::Cow;
        let elapsed = self.started.elapsed();
        if let Some(status) = status {
            let code = KeyValue::new("http.response.status_code", i64::from(status.as_u16()));
            self.span.set_attribute(code.clone());
            self.metric.push(code);
        }
        let error: Option<Cow<'static, str>> = error.map(Cow::Borrowed).or_else(|| {
            status
                .filter(|s| s.is_client_error() || s.is_server_error())
                .map(|s| Cow::Owned(s.as_str().to_owned()))
        });
        match error {
            Some(error) => {
                self.span
                    .set_attribute(KeyValue::new("error.type", error.clone()));
                self.span.set_status(Status::error(error.clone()));
                self.metric.push(KeyValue::new("error.type", error));
            }
            None => self.span.set_status(Status::Unset),
        }
        self.span.end_with_timestamp(self.start + elapsed);
        if let Some(duration) = &self.duration {
            duration.record(elapsed.as_secs_f64(), &self.metric);
        }
    }
}

pin_project! {
    /// The response future of [`ClientSpan`]: the inner call's, ending the call's span (and
    /// recording its duration) when it resolves or is dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// use shared_headers::client::{ClientSpanFuture, ClientSpanLayer};
    /// use tower::{Layer, Service};
    ///
    /// let mut service = ClientSpanLayer::new(opentelemetry::global::tracer("c")).layer(
    ///     tower::service_fn(|_req: http::Request<()>| async { Ok::<_, std::io::Error>(http::Response::new(())) }),
    /// );
    /// let future: ClientSpanFuture<_> = service.call(http::Request::new(()));
    /// drop(future); // a cancelled call: its span ends now, `error.type` `cancelled`
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct ClientSpanFuture<F> {
        #[pin]
        inner: F,
        call: Option<Call>,
    }

    impl<F> PinnedDrop for ClientSpanFuture<F> {
        fn drop(this: Pin<&mut Self>) {
            if let Some(call) = this.project().call.take() {
                call.end(None, Some("cancelled"));
            }
        }
    }
}

impl<F> fmt::Debug for ClientSpanFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientSpanFuture").finish_non_exhaustive()
    }
}

impl<F, R, E> Future for ClientSpanFuture<F>
where
    F: Future<Output = Result<Response<R>, E>>,
{
    type Output = Result<Response<R>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = std::task::ready!(this.inner.poll(cx));
        if let Some(call) = this.call.take() {
            match &result {
                Ok(res) => call.end(Some(res.status()), None),
                Err(_) => call.end(None, Some(short_type_name::<E>())),
            }
        }
        Poll::Ready(result)
    }
}
