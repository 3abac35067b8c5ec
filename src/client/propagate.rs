//! Outgoing requests carry the request's context: what is left of its deadline, its id and the
//! headers that travel with it, as one tower layer.

use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::{Request, Response};
use tower_layer::Layer;
use tower_service::Service;

use crate::context::RequestContext;
use crate::deadline::BudgetHeader;

mod error;
mod future;
mod send;

pub use error::PropagateError;
use future::Pending;
use future::PropagateFuture;
pub(crate) use send::{
    Rebudget, apply_context, budget_for, in_scope, margin_for, set_budget, take_rebudget,
    with_rebudget,
};

/// A [`Layer`] that sends each outgoing request with the request's context: what is left of
/// its deadline, and its id and propagated headers.
///
/// One layer for everything a request passes on to the calls made for it; the same for
/// hyper-util's client, a tonic `Channel` or any tower client (its reqwest twin is
/// `reqwest::PropagateMiddleware`, feature `reqwest`).
///
/// # The context
///
/// The request's [`RequestContext`] is its extension if it has one, else
/// [`RequestContext::current`] when the service is called (the server layer puts it in scope
/// around each poll of the handler; a spawned task keeps it through
/// [`context::carry`](crate::context::carry)). Its headers (the request id, then the captured
/// trace, baggage or tenant headers) are added to the outgoing request with
/// [`RequestContext::apply_to`]: **a header the outgoing request already has keeps its own
/// value**.
///
/// # The deadline
///
/// The request's deadline is its [`Deadline`](crate::deadline::Deadline) extension if it has one, else
/// [`Deadline::current`](crate::deadline::Deadline::current). Then:
///
/// * **no deadline:** no budget header and no timer;
/// * **nothing left** after the [margin](Self::margin) (less than the header can express:
///   1 ms for the millisecond formats): the request is **not sent**, and the call ends at once
///   with [`PropagateError::Exhausted`];
/// * **otherwise** the budget header is set to what is left minus the margin (a smaller valid
///   value the request already carries is kept), and the inner call is cut when what is left
///   minus *half* the margin is spent, with [`PropagateError::Elapsed`]. The cut bounds the
///   inner future (for hyper's client: until the response head arrives), not the reading of
///   the body. An error of the inner call that comes once the budget the layer wrote is
///   spent (counted from the send) is also [`PropagateError::Elapsed`], not
///   [`PropagateError::Service`]: by then the next hop was told to stop, and a timer below
///   that reads the same header (tonic's `Channel`) ends the call with an error of its own.
///   An answer is passed on whenever it comes. (A smaller budget the request carried itself
///   is the caller's: an error before the cut stays [`PropagateError::Service`].)
///
/// With neither a deadline nor a context (nor a tracer or meter), the request is sent
/// unchanged: a look at its extensions and two thread-local reads, no allocation, no timer
/// (202 instructions over the same call with no layer, under callgrind:
/// `scripts/callgrind-per-op client_deadline_none client_bare`).
///
/// # Spans
///
/// With feature `opentelemetry`, [`otel_tracer`](Self::otel_tracer) makes an OpenTelemetry
/// client span for every call, in this layer's own call: the span's id is the parent the
/// call's `traceparent` names, and the span covers the call with its deadline (a call not
/// sent or cut ends `PropagateError`, a dropped one `cancelled`).
/// [`otel_metrics`](Self::otel_metrics) records `http.client.request.duration` once per call.
/// Without either, a call makes no span and pays one check.
///
/// The span's `server.address` and `server.port` come from the request's URI: a tonic client
/// over a `Channel` gets them with `Grpc::with_origin(channel, origin)` (with `Grpc::new` the
/// `Channel` adds the authority below this layer, where the span cannot see it). Outside any
/// request, the span is a child of the OpenTelemetry context current at the call. A gRPC
/// answer whose head carries a `grpc-status` other than 0 (a trailers-only error) ends the
/// span as an error (`error.type` the code's name, `rpc.grpc.status_code`).
///
/// # The margin
///
/// By default the margin is **a tenth of what is left, at most 100 ms** (1 s left: the next
/// hop is told 900 ms; 200 ms left: 180 ms; 10 s left: 9.9 s); [`margin`](Self::margin) sets a
/// fixed one instead. With no margin, the service below and this one time out at the same
/// instant, and this one never relays the answer from below: it times out itself. The margin
/// pays for what happens between the two timers:
///
/// * the answer's trip **one hop back** (microseconds on loopback, milliseconds within a zone,
///   tens of milliseconds across regions);
/// * the service below's **timer granularity**: it reads the budget when the request arrives
///   (later than it was sent), its timers fire on a millisecond wheel, and a millisecond
///   header drops the fraction of a millisecond;
/// * **scheduling** on both sides: a busy runtime polls the answer late.
///
/// A share of what is left keeps short budgets usable (a 20 ms call is told 18 ms, not
/// nothing), and the cap keeps long ones whole (a 10 s call loses 1 %). The call itself is cut
/// halfway through the margin: the first half is for the answer from below to arrive, the
/// second for this service to answer from the cut before its own deadline. A margin of
/// [`Duration::ZERO`] is gRPC's own propagation: the time left, cut at the deadline.
///
/// # tonic
///
/// A tonic `Channel` is a tower service: wrap it in this layer and give the result to a
/// generated client's `new` (or to `tonic::client::Grpc`). Every call made in a request's
/// scope then sends `grpc-timeout` with what is left and the context as metadata; a tonic
/// server behind the server layer's `caller_budget(BudgetHeader::grpc_timeout())` takes that
/// budget as its handler's [`Deadline`](crate::deadline::Deadline).
///
/// ```
/// use shared_headers::client::PropagateLayer;
/// use shared_headers::deadline::BudgetHeader;
/// use tonic::transport::Endpoint;
/// use tower::ServiceBuilder;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let channel = Endpoint::from_static("http://127.0.0.1:50051").connect_lazy();
/// let channel = ServiceBuilder::new()
///     .layer(PropagateLayer::new(BudgetHeader::grpc_timeout()))
///     .service(channel);
/// // `GreeterClient::new(channel)` with generated code; by hand:
/// let client = tonic::client::Grpc::new(channel);
/// # let _ = client;
/// # }
/// ```
///
/// A call the deadline stopped ends with `Code::DeadlineExceeded`, every time, with feature
/// `tonic`: the [`PropagateError`]s of the deadline's own cases carry a
/// `Status::deadline_exceeded` in their `source()` chain, which tonic's client finds. Three
/// timers can end such a call: the service below answering DEADLINE_EXCEEDED at its budget,
/// tonic's `Channel` enforcing the `grpc-timeout` it sends (its timer, counted from the send,
/// fires about then, and tonic alone would report it as `Code::Cancelled`, "Timeout
/// expired"), and this layer's cut. An error after the budget is [`PropagateError::Elapsed`]
/// (see above), so all three give `DeadlineExceeded`. Without feature `tonic`, the layer's
/// errors become `Code::Unknown` (tonic knows no other error type to map).
///
/// # Dead connections
///
/// Under this layer, [`ConnRetryLayer`](crate::client::ConnRetryLayer) sends an idempotent
/// request whose connection died under it once more on a fresh connection, within what this
/// layer leaves of the deadline; with the `conn` room's `HealthConnector` (feature
/// `hyper-util`) a silent HTTP/2 connection is found before the deadline. The stack and the
/// fault matrix: [`docs::outgoing`](crate::docs::outgoing).
///
/// # Panics
///
/// Like `tokio::time::sleep`, calling the service with a deadline outside a tokio runtime with
/// its time driver enabled panics.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use http::{HeaderMap, Request, Response};
/// use shared_headers::client::{PropagateError, PropagateLayer};
/// use shared_headers::context::{Propagation, RequestScope};
/// use shared_headers::deadline::{BudgetHeader, Deadline, DeadlineSource};
/// use tower::{ServiceBuilder, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// // Any tower client; this one echoes the headers it was sent.
/// let client = ServiceBuilder::new()
///     .layer(PropagateLayer::new(BudgetHeader::grpc_timeout()))
///     .service_fn(|req: Request<()>| async move {
///         Ok::<_, std::convert::Infallible>(Response::new(req.headers().clone()))
///     });
///
/// // Outside any request: sent unchanged.
/// let response = client.clone().oneshot(Request::new(())).await?;
/// assert!(response.body().is_empty());
///
/// // In a request's scope: its id and what is left of its deadline travel on.
/// let mut incoming = HeaderMap::new();
/// incoming.insert("x-request-id", "req-7".parse()?);
/// let (context, _) = Propagation::new().request_id().capture(&incoming);
/// let deadline = Deadline::after(Duration::from_millis(200), DeadlineSource::Server).unwrap();
/// let scope = RequestScope::new().deadline(deadline).context(context.unwrap());
/// let sent = scope.scope(client.clone().oneshot(Request::new(()))).await?.into_body();
/// assert_eq!(sent["x-request-id"], "req-7");
/// let budget = BudgetHeader::grpc_timeout().parse_from(&sent).unwrap()?;
/// // The default margin: a tenth of what was left.
/// assert!(budget <= Duration::from_millis(180) && budget > Duration::from_millis(100));
///
/// // Nothing left: not sent.
/// let spent = Deadline::at(std::time::Instant::now(), DeadlineSource::Caller);
/// let result = RequestScope::new().deadline(spent).scope(client.oneshot(Request::new(()))).await;
/// assert!(matches!(result, Err(PropagateError::Exhausted(d)) if d == spent));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a layer does nothing until it wraps a service (`ServiceBuilder::layer`, `Layer::layer`)"]
pub struct PropagateLayer {
    header: BudgetHeader,
    /// `None`: the default rule.
    margin: Option<Duration>,
    /// The client spans' tracer and the duration's histogram, if set.
    #[cfg(feature = "opentelemetry")]
    otel: crate::client::span::ClientOtel,
}

impl PropagateLayer {
    /// A layer that writes the remaining budget in `header`, with the default margin (a tenth
    /// of what is left, at most 100 ms).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::PropagateLayer;
    /// # use shared_headers::deadline::BudgetHeader;
    /// let layer = PropagateLayer::new(BudgetHeader::envoy_expected_rq_timeout_ms());
    /// assert_eq!(layer.header().name(), "x-envoy-expected-rq-timeout-ms");
    /// ```
    pub fn new(header: BudgetHeader) -> Self {
        PropagateLayer {
            header,
            margin: None,
            #[cfg(feature = "opentelemetry")]
            otel: crate::client::span::ClientOtel::default(),
        }
    }

    /// Keeps a fixed `margin` of the remaining time for the answer to come back, instead of
    /// the default rule: a request is sent with what is left minus `margin`, cut when what is
    /// left minus half of it is spent, and not sent if the budget is nothing.
    /// [`Duration::ZERO`] sends the time left and waits until the deadline.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use shared_headers::client::PropagateLayer;
    /// # use shared_headers::deadline::BudgetHeader;
    /// let layer = PropagateLayer::new(BudgetHeader::grpc_timeout()).margin(Duration::from_millis(5));
    /// assert_eq!(layer.margin_for(Duration::from_secs(3)), Duration::from_millis(5));
    /// ```
    pub fn margin(mut self, margin: Duration) -> Self {
        self.margin = Some(margin);
        self
    }

    /// The margin a request with `remaining` left is sent with: the fixed one, or a tenth of
    /// `remaining`, at most 100 ms.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use shared_headers::client::PropagateLayer;
    /// # use shared_headers::deadline::BudgetHeader;
    /// let layer = PropagateLayer::new(BudgetHeader::grpc_timeout());
    /// assert_eq!(layer.margin_for(Duration::from_millis(200)), Duration::from_millis(20));
    /// assert_eq!(layer.margin_for(Duration::from_secs(30)), Duration::from_millis(100));
    /// ```
    pub fn margin_for(&self, remaining: Duration) -> Duration {
        margin_for(self.margin, remaining)
    }

    /// The header the budget is written in.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::PropagateLayer;
    /// # use shared_headers::deadline::BudgetHeader;
    /// let layer = PropagateLayer::new(BudgetHeader::connect_timeout_ms());
    /// assert_eq!(layer.header(), &BudgetHeader::connect_timeout_ms());
    /// ```
    pub fn header(&self) -> &BudgetHeader {
        &self.header
    }

    /// Makes an OpenTelemetry client span for every call, with `tracer` (feature
    /// `opentelemetry`; a second call replaces the tracer).
    ///
    /// * The span is a **child of the request's hop**: the server layer's span when it has a
    ///   tracer ([`SharedHeadersLayer::otel_tracer`](crate::server::SharedHeadersLayer::otel_tracer)),
    ///   else the hop of [`Propagation::trace_hop`](crate::context::Propagation::trace_hop);
    ///   without a hop (trace context forwarded as it came,
    ///   [`Propagation::w3c`](crate::context::Propagation::w3c)), a child of the caller's span
    ///   in the valid `traceparent` that came. Outside any request, or with no trace known, a
    ///   new trace.
    /// * The call sends `traceparent` with **the client span's id** as the parent of the next
    ///   hop (the span is made in this layer's own call), unless the request has a
    ///   `traceparent` of its own.
    /// * Kind client, name `{method}`, the HTTP client attributes of the semantic conventions
    ///   (`http.request.method`, `server.address`, `server.port`, `url.full` without its query
    ///   and with any userinfo as `REDACTED:REDACTED@`, `http.request.method_original` for a
    ///   method reported as `_OTHER`, `http.response.status_code`, `error.type`), status
    ///   `Error` exactly when `error.type` is set: the status as a string for a 4xx or 5xx,
    ///   the inner error's type name for an error, `PropagateError` for a call not sent or cut
    ///   at its deadline, `cancelled` for a call dropped before its answer.
    /// * **Exactly once** per call: the span ends when the answer's head came, when the call
    ///   failed, or when its future was dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// use http::{Request, Response};
    /// use shared_headers::client::PropagateLayer;
    /// use shared_headers::deadline::BudgetHeader;
    /// use tower::{ServiceBuilder, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    /// let tracer = opentelemetry::global::tracer("my-client"); // the SDK's in a real service
    /// let meter = opentelemetry::global::meter("my-client");
    /// let client = ServiceBuilder::new()
    ///     .layer(PropagateLayer::new(BudgetHeader::grpc_timeout()).otel_tracer(tracer).otel_metrics(&meter))
    ///     .service_fn(|_req: Request<()>| async { Ok::<_, std::io::Error>(Response::new(())) });
    /// let res = client.oneshot(Request::get("http://backend/").body(())?).await?;
    /// assert_eq!(res.status(), 200);
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "opentelemetry")]
    #[cfg_attr(docsrs, doc(cfg(feature = "opentelemetry")))]
    pub fn otel_tracer<T>(mut self, tracer: T) -> Self
    where
        T: opentelemetry::trace::Tracer + Send + Sync + 'static,
        T::Span: Send + Sync + 'static,
    {
        self.otel.set_tracer(tracer);
        self
    }

    /// Records `http.client.request.duration` (unit `s`, the HTTP buckets of
    /// [`DURATION_BUCKETS`](crate::server::metrics::DURATION_BUCKETS)) through `meter`, once
    /// per call, cancelled and cut calls included, when the call's span ends (feature
    /// `opentelemetry`; with or without [`otel_tracer`](Self::otel_tracer); a second call
    /// replaces the meter): `http.request.method`, `server.address`, `server.port`,
    /// `http.response.status_code`, `error.type` (as on the span).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::PropagateLayer;
    /// # use shared_headers::deadline::BudgetHeader;
    /// let layer = PropagateLayer::new(BudgetHeader::grpc_timeout())
    ///     .otel_metrics(&opentelemetry::global::meter("my-client"));
    /// # drop(layer);
    /// ```
    #[cfg(feature = "opentelemetry")]
    #[cfg_attr(docsrs, doc(cfg(feature = "opentelemetry")))]
    pub fn otel_metrics(mut self, meter: &opentelemetry::metrics::Meter) -> Self {
        self.otel.set_meter(meter);
        self
    }

    /// The call's client span and duration point, pending (none without a tracer or meter).
    #[inline]
    fn begin<B>(&self, request: &mut Request<B>) -> Pending {
        #[cfg(feature = "opentelemetry")]
        {
            self.otel.begin_http(request)
        }
        #[cfg(not(feature = "opentelemetry"))]
        {
            let _ = request;
            Pending::none()
        }
    }

    /// Whether calls make a span or a duration point.
    #[inline]
    fn observed(&self) -> bool {
        #[cfg(feature = "opentelemetry")]
        {
            self.otel.is_on()
        }
        #[cfg(not(feature = "opentelemetry"))]
        {
            false
        }
    }
}

impl<S> Layer<S> for PropagateLayer {
    type Service = Propagate<S>;

    fn layer(&self, inner: S) -> Propagate<S> {
        Propagate {
            inner,
            layer: self.clone(),
        }
    }
}

/// A client [`Service`] that sends each request with the request's context: what is left of
/// its deadline, its id and its propagated headers. Made by [`PropagateLayer`] (or
/// [`Propagate::new`]), which documents what it does.
///
/// # Errors
///
/// [`PropagateError::Exhausted`] (not sent), [`PropagateError::Elapsed`] (cut), or
/// [`PropagateError::Service`] with the inner service's error.
///
/// # Examples
///
/// ```
/// # use shared_headers::client::PropagateLayer;
/// # use shared_headers::deadline::BudgetHeader;
/// use tower::Layer;
/// let service = PropagateLayer::new(BudgetHeader::grpc_timeout()).layer(7);
/// assert_eq!(*service.get_ref(), 7);
/// assert_eq!(service.into_inner(), 7);
/// ```
#[derive(Debug, Clone)]
pub struct Propagate<S> {
    inner: S,
    layer: PropagateLayer,
}

impl<S> Propagate<S> {
    /// Wraps `inner`, writing the remaining budget in `header`, with the default margin: the
    /// same as `PropagateLayer::new(header).layer(inner)`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::Propagate;
    /// # use shared_headers::deadline::BudgetHeader;
    /// let service = Propagate::new(7, BudgetHeader::grpc_timeout());
    /// assert_eq!(*service.get_ref(), 7);
    /// ```
    pub fn new(inner: S, header: BudgetHeader) -> Self {
        PropagateLayer::new(header).layer(inner)
    }

    /// The inner service.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::PropagateLayer;
    /// # use shared_headers::deadline::BudgetHeader;
    /// use tower::Layer;
    /// let service = PropagateLayer::new(BudgetHeader::grpc_timeout()).layer("inner");
    /// assert_eq!(*service.get_ref(), "inner");
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Gives up the layer and returns the inner service.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::PropagateLayer;
    /// # use shared_headers::deadline::BudgetHeader;
    /// use tower::Layer;
    /// let service = PropagateLayer::new(BudgetHeader::grpc_timeout()).layer(1);
    /// assert_eq!(service.into_inner(), 1);
    /// ```
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B, R> Service<Request<B>> for Propagate<S>
where
    S: Service<Request<B>, Response = Response<R>>,
{
    type Response = S::Response;
    type Error = PropagateError<S::Error>;
    type Future = PropagateFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(PropagateError::Service)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        if request.extensions().is_empty()
            && !self.layer.observed()
            && crate::deadline::Deadline::current().is_none()
            && RequestContext::with_current(|context| context.is_none())
        {
            // Outside any request: unchanged, no timer, no span. Only the four tests, nothing
            // copied (measured: `benches/alloc.rs`, `client_deadline_none`).
            return PropagateFuture::unbounded(self.inner.call(request), Pending::none());
        }
        let (deadline, context) = in_scope(request.extensions());
        self.call_in_scope(request, deadline, context)
    }
}

impl<S> Propagate<S> {
    /// [`call`](Service::call) with a deadline or a context: kept out of the path without
    /// either.
    #[inline(never)]
    fn call_in_scope<B>(
        &mut self,
        mut request: Request<B>,
        deadline: Option<crate::deadline::Deadline>,
        context: Option<RequestContext>,
    ) -> PropagateFuture<S::Future>
    where
        S: Service<Request<B>>,
    {
        // The span first: its `traceparent` (the span's id as the next hop's parent) goes
        // before the context's, which adds only the names the request lacks.
        let span = self.layer.begin(&mut request);
        let Some(deadline) = deadline else {
            apply_context(context, request.headers_mut());
            return PropagateFuture::unbounded(self.inner.call(request), span);
        };
        let Some(budget) = budget_for(&deadline, self.layer.margin, &self.layer.header) else {
            return PropagateFuture::exhausted(deadline, span);
        };
        // The budget first: a context that captured the budget header's name cannot replace it.
        let told = set_budget(request.headers_mut(), &self.layer.header, budget.budget);
        apply_context(context, request.headers_mut());
        // From this instant on, the budget the deadline gave the next hop is spent: an error is
        // the deadline's. A smaller budget the request carried itself is the caller's: an
        // error before the cut stays the service's.
        let spent = match told {
            Some(told) => Instant::now() + told,
            None => budget.cut,
        };
        // A layer below that sends the request again (`ConnRetry`) rewrites the budget then.
        let rebudget = Rebudget {
            header: self.layer.header.clone(),
            margin: self.layer.margin,
            deadline,
        };
        let inner = &mut self.inner;
        let call = with_rebudget(rebudget, move || inner.call(request));
        PropagateFuture::bounded(
            call,
            tokio::time::sleep_until(budget.cut.into()),
            spent,
            deadline,
            span,
        )
    }
}
