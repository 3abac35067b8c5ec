//! [`ClientSpanMiddleware`]: an OpenTelemetry client span and `http.client.request.duration`
//! per reqwest call (features `reqwest` and `opentelemetry`).

use std::convert::Infallible;

use http::Extensions;
use opentelemetry::metrics::Meter;
use opentelemetry::trace::{Span, Tracer};
use reqwest::{Request, Response};
use reqwest_middleware::{Middleware, Next};

use crate::client::ClientSpanLayer;
use crate::client::propagate::PropagateError;
use crate::client::span::{Call, Target, begin};

/// A [`reqwest_middleware`] middleware that makes an OpenTelemetry client span for every
/// call, and records `http.client.request.duration` once per call when given a meter: the
/// reqwest twin of [`ClientSpanLayer`], which describes the span, its parent and its
/// attributes.
///
/// * The span is a **child of the request's hop**: the context in the middleware
///   [`Extensions`], else the one in scope (as
///   [`PropagateMiddleware`](super::PropagateMiddleware) reads it).
/// * The call sends `traceparent` with **the client span's id** as the parent of the next
///   hop, whichever order the two middlewares were added in (a `traceparent` the request had
///   of its own, other than the hop's, is kept).
/// * **Exactly once** per call: when the answer's head came, when the call failed, or when
///   its future was dropped (`error.type` `cancelled`). `error.type` of a failed call:
///   `PropagateError` for a call [`PropagateMiddleware`](super::PropagateMiddleware) did not
///   send or cut at its deadline, `timeout` for reqwest's own timeout, `connect` for a
///   connection that failed, `reqwest::Error` or `reqwest_middleware::Error` otherwise; the
///   status as a string for a 4xx or 5xx answer.
///
/// Added **after** `PropagateMiddleware`, the span covers one attempt as sent (a call the
/// deadline cuts ends `cancelled`, at the cut); added **before**, it covers the call with
/// its deadline (a cut call ends `PropagateError`).
///
/// # Examples
///
/// ```
/// use shared_headers::client::reqwest::{ClientSpanMiddleware, PropagateMiddleware};
/// use shared_headers::deadline::BudgetHeader;
///
/// let tracer = opentelemetry::global::tracer("my-client"); // the SDK's in a real service
/// let meter = opentelemetry::global::meter("my-client");
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::builder().no_proxy().build().unwrap())
///     .with(PropagateMiddleware::new(BudgetHeader::grpc_timeout()))
///     .with(ClientSpanMiddleware::new(tracer).meter(&meter))
///     .build();
/// # drop(client);
/// ```
#[derive(Clone, Debug)]
#[must_use = "a middleware does nothing until it is added to a client (`ClientBuilder::with`)"]
pub struct ClientSpanMiddleware {
    layer: ClientSpanLayer,
}

impl ClientSpanMiddleware {
    /// Client spans made with `tracer`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::reqwest::ClientSpanMiddleware;
    /// let middleware = ClientSpanMiddleware::new(opentelemetry::global::tracer("my-client"));
    /// # drop(middleware);
    /// ```
    pub fn new<T>(tracer: T) -> Self
    where
        T: Tracer + Send + Sync + 'static,
        T::Span: Span + Send + Sync + 'static,
    {
        ClientSpanMiddleware {
            layer: ClientSpanLayer::new(tracer),
        }
    }

    /// Records `http.client.request.duration` through `meter`, once per call, as
    /// [`ClientSpanLayer::meter`] does. A second call replaces the meter.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::reqwest::ClientSpanMiddleware;
    /// let middleware = ClientSpanMiddleware::new(opentelemetry::global::tracer("my-client"))
    ///     .meter(&opentelemetry::global::meter("my-client"));
    /// # drop(middleware);
    /// ```
    pub fn meter(self, meter: &Meter) -> Self {
        ClientSpanMiddleware {
            layer: self.layer.meter(meter),
        }
    }
}

/// Ends its call `cancelled` if the middleware's future is dropped before the answer.
struct Guard(Option<Call>);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(call) = self.0.take() {
            call.end(None, Some("cancelled"));
        }
    }
}

/// The `error.type` of a failed call.
fn error_type(error: &reqwest_middleware::Error) -> &'static str {
    match error {
        reqwest_middleware::Error::Middleware(error) => {
            if error.is::<PropagateError<Infallible>>() {
                "PropagateError"
            } else {
                "reqwest_middleware::Error"
            }
        }
        reqwest_middleware::Error::Reqwest(error) if error.is_timeout() => "timeout",
        reqwest_middleware::Error::Reqwest(error) if error.is_connect() => "connect",
        reqwest_middleware::Error::Reqwest(_) => "reqwest::Error",
    }
}

#[async_trait::async_trait]
impl Middleware for ClientSpanMiddleware {
    async fn handle(
        &self,
        mut request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let method = request.method().clone();
        // Read from the `Url` itself: `http::Uri` refuses some URLs reqwest sends (over
        // 64 KiB), which would leave the span without its address.
        // The headers are taken out while the URL is borrowed (an empty map allocates nothing).
        let mut headers = std::mem::take(request.headers_mut());
        let url = request.url();
        let target = Target {
            scheme: Some(url.scheme()),
            host: url.host_str(),
            port: url.port(),
            userinfo: !url.username().is_empty() || url.password().is_some(),
            path: url.path(),
        };
        let call = begin(&self.layer, &method, target, &mut headers, extensions);
        *request.headers_mut() = headers;
        let mut guard = Guard(Some(call));
        let result = next.run(request, extensions).await;
        if let Some(call) = guard.0.take() {
            match &result {
                Ok(response) => call.end(Some(response.status()), None),
                Err(error) => call.end(None, Some(error_type(error))),
            }
        }
        result
    }
}
