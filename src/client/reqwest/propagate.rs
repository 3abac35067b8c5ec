//! [`PropagateMiddleware`]: the request's context and what is left of its deadline on every
//! reqwest call.

use std::convert::Infallible;
use std::time::Duration;

use http::Extensions;
use reqwest::{Request, Response};
use reqwest_middleware::{Middleware, Next};

use crate::client::propagate::{
    PropagateError, apply_context, budget_for, in_scope, margin_for, set_budget,
};
use crate::deadline::BudgetHeader;

/// A [`reqwest_middleware`] middleware that sends each request with the request's context: its
/// id and propagated headers, and what is left of its deadline. The reqwest twin of
/// [`PropagateLayer`](crate::client::PropagateLayer), which explains the margin.
///
/// The context is a [`RequestContext`](crate::context::RequestContext) in the middleware
/// [`Extensions`] if there is one, else
/// [`RequestContext::current`](crate::context::RequestContext::current) when the request is
/// sent (in scope while a server handler runs; in a spawned task through
/// [`context::carry`](crate::context::carry)). Its headers are added with
/// [`RequestContext::apply_to`](crate::context::RequestContext::apply_to): a header the
/// request already has keeps its own value.
///
/// The deadline is a [`Deadline`](crate::deadline::Deadline) in the middleware [`Extensions`] if there is one, else
/// [`Deadline::current`](crate::deadline::Deadline::current). Then:
///
/// * **no deadline:** no budget header and no timeout;
/// * **nothing left** after the margin: the request is **not sent**, and the call fails at once
///   with [`reqwest_middleware::Error::Middleware`] holding a
///   [`PropagateError::Exhausted`];
/// * **otherwise** the budget header is set to what is left minus the margin (a smaller valid
///   value already on the request is kept), and the call is cut when what is left minus half
///   the margin is spent, with a [`PropagateError::Elapsed`].
///
/// The shorter of reqwest's own timeout and the deadline's cut wins; when reqwest's is the
/// shorter it fires with reqwest's own timeout error (`reqwest::Error::is_timeout`) in
/// [`reqwest_middleware::Error::Reqwest`]:
///
/// * a request with its own timeout ([`Request::timeout`]), or any request when the client's
///   timeout was told with [`client_timeout`](Self::client_timeout): the request's timeout
///   becomes the shorter of that and the cut, so the deadline bounds the reading of the body
///   too;
/// * otherwise the client's timeout (`reqwest::ClientBuilder::timeout`, which a middleware
///   cannot read) is left in force, and the cut races the call until the response head
///   arrives (what `send` waits for), not the reading of the body: tell the middleware the
///   client's timeout to bound the body by the deadline.
///
/// The margin is by default a tenth of what is left, at most 100 ms
/// ([`margin`](Self::margin) sets a fixed one). With neither a deadline nor a context (nor a
/// tracer or meter, feature `opentelemetry`), the request is sent unchanged.
///
/// The errors are `PropagateError<Infallible>`: downcast with
/// `error.downcast_ref::<PropagateError<Infallible>>()` after matching `Error::Middleware`.
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use std::time::{Duration, Instant};
/// use shared_headers::client::PropagateError;
/// use shared_headers::client::reqwest::PropagateMiddleware;
/// use shared_headers::context::RequestScope;
/// use shared_headers::deadline::{BudgetHeader, Deadline, DeadlineSource};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::builder().no_proxy().build().unwrap())
///     .with(PropagateMiddleware::new(BudgetHeader::grpc_timeout()))
///     .build();
/// // Nothing left: nothing is sent (the address is never contacted).
/// let spent = Deadline::at(Instant::now(), DeadlineSource::Server);
/// let call = RequestScope::new().deadline(spent).scope(client.get("http://127.0.0.1:9/").send());
/// let err = call.await.unwrap_err();
/// let reqwest_middleware::Error::Middleware(err) = err else { panic!("{err}") };
/// let err = err.downcast_ref::<PropagateError<Infallible>>().unwrap();
/// assert_eq!(err, &PropagateError::Exhausted(spent));
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a middleware does nothing until it is added to a client (`ClientBuilder::with`)"]
pub struct PropagateMiddleware {
    header: BudgetHeader,
    /// `None`: the default rule.
    margin: Option<Duration>,
    /// The client's own timeout, as the user told it (a middleware cannot read it).
    client_timeout: Option<Duration>,
    /// The client spans' tracer and the duration's histogram, if set.
    #[cfg(feature = "opentelemetry")]
    otel: crate::client::span::ClientOtel,
}

impl PropagateMiddleware {
    /// A middleware that writes the remaining budget in `header`, with the default margin (a
    /// tenth of what is left, at most 100 ms; see [`PropagateLayer`](crate::client::PropagateLayer)
    /// for why).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::reqwest::PropagateMiddleware;
    /// # use shared_headers::deadline::BudgetHeader;
    /// let middleware = PropagateMiddleware::new(BudgetHeader::connect_timeout_ms());
    /// assert_eq!(middleware.header().name(), "connect-timeout-ms");
    /// ```
    pub fn new(header: BudgetHeader) -> Self {
        PropagateMiddleware {
            header,
            margin: None,
            client_timeout: None,
            #[cfg(feature = "opentelemetry")]
            otel: crate::client::span::ClientOtel::default(),
        }
    }

    /// Tells the middleware the client's own timeout (what `reqwest::ClientBuilder::timeout`
    /// was given), which a middleware cannot read. With it, a request without a timeout of its
    /// own gets the shorter of this and the deadline's cut as its reqwest timeout, which bounds
    /// the reading of the body too; without it, the deadline bounds only the wait for the
    /// response head (the client's timeout still bounds the rest).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use shared_headers::client::reqwest::PropagateMiddleware;
    /// # use shared_headers::deadline::BudgetHeader;
    /// let timeout = Duration::from_secs(30);
    /// let client = reqwest::Client::builder().timeout(timeout).no_proxy().build().unwrap();
    /// let middleware = PropagateMiddleware::new(BudgetHeader::grpc_timeout()).client_timeout(timeout);
    /// # let _ = (client, middleware);
    /// ```
    pub fn client_timeout(mut self, timeout: Duration) -> Self {
        self.client_timeout = Some(timeout);
        self
    }

    /// Keeps a fixed `margin` of the remaining time for the answer to come back, instead of
    /// the default rule.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use shared_headers::client::reqwest::PropagateMiddleware;
    /// # use shared_headers::deadline::BudgetHeader;
    /// let middleware = PropagateMiddleware::new(BudgetHeader::grpc_timeout()).margin(Duration::from_millis(3));
    /// # drop(middleware);
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
    /// # use shared_headers::client::reqwest::PropagateMiddleware;
    /// # use shared_headers::deadline::BudgetHeader;
    /// let middleware = PropagateMiddleware::new(BudgetHeader::grpc_timeout());
    /// assert_eq!(middleware.margin_for(Duration::from_secs(1)), Duration::from_millis(100));
    /// ```
    pub fn margin_for(&self, remaining: Duration) -> Duration {
        margin_for(self.margin, remaining)
    }

    /// The header the budget is written in.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::reqwest::PropagateMiddleware;
    /// # use shared_headers::deadline::BudgetHeader;
    /// let middleware = PropagateMiddleware::new(BudgetHeader::grpc_timeout());
    /// assert_eq!(middleware.header(), &BudgetHeader::grpc_timeout());
    /// ```
    pub fn header(&self) -> &BudgetHeader {
        &self.header
    }

    /// Makes an OpenTelemetry client span for every call, with `tracer` (feature
    /// `opentelemetry`; a second call replaces the tracer), as
    /// [`PropagateLayer::otel_tracer`](crate::client::PropagateLayer::otel_tracer) does: a
    /// child of the request's hop (the context in the middleware [`Extensions`], else the one
    /// in scope), whose id the call sends as the next hop's parent. The span covers the call
    /// with its deadline, ending exactly once: when the answer's head came, when the call
    /// failed, or when its future was dropped (`error.type` `cancelled`). `error.type` of a
    /// failed call: `PropagateError` for a call not sent or cut at its deadline, `timeout` for
    /// reqwest's own timeout, `connect` for a connection that failed, `reqwest::Error` or
    /// `reqwest_middleware::Error` otherwise; the status as a string for a 4xx or 5xx answer.
    ///
    /// # Examples
    ///
    /// ```
    /// use shared_headers::client::reqwest::PropagateMiddleware;
    /// use shared_headers::deadline::BudgetHeader;
    ///
    /// let tracer = opentelemetry::global::tracer("my-client"); // the SDK's in a real service
    /// let meter = opentelemetry::global::meter("my-client");
    /// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::builder().no_proxy().build().unwrap())
    ///     .with(PropagateMiddleware::new(BudgetHeader::grpc_timeout()).otel_tracer(tracer).otel_metrics(&meter))
    ///     .build();
    /// # drop(client);
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

    /// Records `http.client.request.duration` through `meter`, once per call, as
    /// [`PropagateLayer::otel_metrics`](crate::client::PropagateLayer::otel_metrics) does
    /// (feature `opentelemetry`; a second call replaces the meter).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::reqwest::PropagateMiddleware;
    /// # use shared_headers::deadline::BudgetHeader;
    /// let middleware = PropagateMiddleware::new(BudgetHeader::grpc_timeout())
    ///     .otel_metrics(&opentelemetry::global::meter("my-client"));
    /// # drop(middleware);
    /// ```
    #[cfg(feature = "opentelemetry")]
    #[cfg_attr(docsrs, doc(cfg(feature = "opentelemetry")))]
    pub fn otel_metrics(mut self, meter: &opentelemetry::metrics::Meter) -> Self {
        self.otel.set_meter(meter);
        self
    }
}

#[async_trait::async_trait]
impl Middleware for PropagateMiddleware {
    async fn handle(
        &self,
        request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        // The span first: its `traceparent` (the span's id as the next hop's parent) goes
        // before the context's, which adds only the names the request lacks.
        #[cfg(feature = "opentelemetry")]
        {
            let mut request = request;
            let mut span = super::span::begin_reqwest(&self.otel, &mut request, extensions);
            let result = self.send(request, extensions, next).await;
            super::span::end_reqwest(&mut span, &result);
            result
        }
        #[cfg(not(feature = "opentelemetry"))]
        {
            self.send(request, extensions, next).await
        }
    }
}

impl PropagateMiddleware {
    /// The call, with its deadline and context.
    async fn send(
        &self,
        mut request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let (deadline, context) = in_scope(extensions);
        let Some(deadline) = deadline else {
            apply_context(context, request.headers_mut());
            return next.run(request, extensions).await;
        };
        let Some(budget) = budget_for(&deadline, self.margin, &self.header) else {
            return Err(reqwest_middleware::Error::middleware(PropagateError::<
                Infallible,
            >::Exhausted(
                deadline
            )));
        };
        // The budget first: a context that captured the budget header's name cannot replace it.
        set_budget(request.headers_mut(), &self.header, budget.budget);
        apply_context(context, request.headers_mut());
        // A timeout the request has, or the client's as the user told it, is known: the
        // request's timeout becomes the shorter of it and the cut, which bounds the body too
        // (reqwest's timeout error, ours when the cut was the shorter). Without either, the
        // cut only races the call (to the head): setting the request's timeout would replace
        // the client's, which a middleware cannot read.
        let to_cut = budget
            .cut
            .saturating_duration_since(std::time::Instant::now());
        if let Some(known) = request.timeout().copied().or(self.client_timeout) {
            let ours = to_cut < known;
            *request.timeout_mut() = Some(known.min(to_cut));
            return match next.run(request, extensions).await {
                Err(reqwest_middleware::Error::Reqwest(e)) if ours && e.is_timeout() => {
                    Err(reqwest_middleware::Error::middleware(PropagateError::<
                        Infallible,
                    >::Elapsed(
                        deadline
                    )))
                }
                other => other,
            };
        }
        match tokio::time::timeout_at(budget.cut.into(), next.run(request, extensions)).await {
            Ok(result) => result,
            Err(_) => Err(reqwest_middleware::Error::middleware(PropagateError::<
                Infallible,
            >::Elapsed(
                deadline
            ))),
        }
    }
}
