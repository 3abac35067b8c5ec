//! The layer: configuration shared by every request of a service stack.

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use tower_layer::Layer;

use super::SharedHeadersService;
use crate::builder::Builder;
use crate::policy::Policy;

#[cfg(doc)]
use crate::exchange::{Committed, Outcome};

/// A [`Layer`] that gives every request shared request and response headers and commits them
/// exactly once. See the [module docs](super) for the full semantics.
///
/// # Examples
///
/// ```
/// use std::{convert::Infallible, time::Duration};
/// use http::{Request, Response, StatusCode};
/// use shared_headers::{Committed, Outcome};
/// use shared_headers::server::SharedHeadersLayer;
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Infallible> {
/// let layer = SharedHeadersLayer::new()
///     .timeout(Duration::from_millis(10))
///     .timeout_status(StatusCode::GATEWAY_TIMEOUT);
/// let slow = layer.layer(service_fn(|_req: Request<()>| async {
///     tokio::time::sleep(Duration::from_secs(10)).await;
///     Ok::<_, Infallible>(Response::new(String::from("too late")))
/// }));
/// let res = slow.oneshot(Request::new(())).await?;
/// assert_eq!(res.status(), StatusCode::GATEWAY_TIMEOUT);
/// assert_eq!(res.extensions().get::<Committed>().unwrap().outcome(), Outcome::TimedOut);
/// # Ok(())
/// # }
/// ```
///
/// # Naming
///
/// Settings are builder methods named after the setting (`timeout`, `timeout_status`, ...),
/// as in tower-http and hyper. Like tower-http's layers it has no getters: a layer is
/// configured once and handed to a service stack.
#[derive(Debug, Clone)]
pub struct SharedHeadersLayer {
    pub(super) config: Config,
}

#[derive(Debug, Clone)]
pub(super) struct Config {
    pub(super) timeout: Option<Duration>,
    pub(super) timeout_status: StatusCode,
    /// Built once from the request [`Builder`]; shared by every request's handle.
    pub(super) request_policy: Option<Arc<Policy>>,
    pub(super) response_policy: Option<Arc<Policy>>,
    pub(super) rejection_status: StatusCode,
}

impl SharedHeadersLayer {
    /// A layer without a deadline (answering 503 if one is later set with
    /// [`timeout`](Self::timeout)) and without limits on the headers.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersLayer;
    /// use tower::ServiceBuilder;
    /// let service = ServiceBuilder::new()
    ///     .layer(SharedHeadersLayer::new())
    ///     .service_fn(|_req: http::Request<()>| async {
    ///         Ok::<_, std::convert::Infallible>(http::Response::new(()))
    ///     });
    /// # drop(service);
    /// ```
    pub fn new() -> Self {
        SharedHeadersLayer {
            config: Config {
                timeout: None,
                timeout_status: StatusCode::SERVICE_UNAVAILABLE,
                request_policy: None,
                response_policy: None,
                rejection_status: StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            },
        }
    }

    /// Enforces a deadline of `duration` per request, counted from the call of the service.
    ///
    /// When it fires before the inner service answers, the layer commits with
    /// [`Outcome::TimedOut`] and answers with [`timeout_status`](Self::timeout_status) and an
    /// empty body (`ResBody::default()`); the inner future is dropped with the response future.
    /// If the answer and the deadline are both ready when the future is polled, the answer
    /// wins (as with tower's `Timeout`). Requires a Tokio runtime with the time driver enabled.
    ///
    /// # Panics
    ///
    /// With a deadline set, the service's `call` starts a `tokio::time::Sleep`, which panics if
    /// `call` runs outside a Tokio runtime or in one built without the time driver
    /// (`enable_time`/`enable_all`). Without a deadline the layer needs no runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new().timeout(Duration::from_millis(250));
    /// # drop(layer);
    /// ```
    pub fn timeout(mut self, duration: Duration) -> Self {
        self.config.timeout = Some(duration);
        self
    }

    /// The status of the response sent when the deadline fires. Default: 503 Service
    /// Unavailable, as Go's `http.TimeoutHandler`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use http::StatusCode;
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new().timeout_status(StatusCode::GATEWAY_TIMEOUT);
    /// # drop(layer);
    /// ```
    pub fn timeout_status(mut self, status: StatusCode) -> Self {
        self.config.timeout_status = status;
        self
    }

    /// Builds every request's request handle with `builder`'s limits and secret names.
    ///
    /// The handle starts as a copy of the received headers, checked against the limits: writes
    /// that would take it past them are refused with
    /// [`Error::LimitExceeded`](crate::Error::LimitExceeded). A request whose headers are over
    /// the limits already is rejected: the inner service is not called, the exchange is
    /// committed with [`Outcome::Rejected`] (its request snapshot holds the headers as
    /// received, for the log), and the layer answers with
    /// [`rejection_status`](Self::rejection_status) and an empty body. The policy is built
    /// once, here, and shared by all handles.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use http::{Request, Response, StatusCode};
    /// use shared_headers::{Builder, Committed, Error, Exchange, Outcome};
    /// use shared_headers::server::SharedHeadersLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let layer = SharedHeadersLayer::new()
    ///     .request_headers(Builder::new().max_entries(2).sensitive(["x-api-key"]));
    /// let service = layer.layer(service_fn(|req: Request<()>| async move {
    ///     let exchange = req.extensions().get::<Exchange>().unwrap();
    ///     exchange.request().insert("x-user", "ada".parse().unwrap()).unwrap(); // 2 of 2
    ///     let over = exchange.request().append("x-more", "1".parse().unwrap());
    ///     assert!(matches!(over, Err(Error::LimitExceeded { .. })));
    ///     Ok::<_, Infallible>(Response::new(String::from("hello")))
    /// }));
    ///
    /// let req = Request::builder().header("x-api-key", "s3cr3t").body(())?;
    /// let res = service.clone().oneshot(req).await?;
    /// assert_eq!(res.status(), StatusCode::OK);
    /// let committed = res.extensions().get::<Committed>().unwrap();
    /// assert!(!format!("{committed:?}").contains("s3cr3t")); // a secret name: redacted
    ///
    /// let req = Request::builder()
    ///     .header("x-a", "1").header("x-b", "2").header("x-c", "3")
    ///     .body(())?;
    /// let res = service.oneshot(req).await?;
    /// assert_eq!(res.status(), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    /// let committed = res.extensions().get::<Committed>().unwrap();
    /// assert_eq!(committed.outcome(), Outcome::Rejected);
    /// assert_eq!(committed.request().len(), 3);
    /// # Ok(())
    /// # }
    /// ```
    pub fn request_headers(mut self, builder: Builder) -> Self {
        self.config.request_policy = builder.into_policy();
        self
    }

    /// Builds every request's response handle with `builder`'s limits and secret names.
    ///
    /// Writes that would take the response headers past the limits are refused with
    /// [`Error::LimitExceeded`](crate::Error::LimitExceeded); secret names are redacted when
    /// the handle, its snapshots or the [`Committed`] record are printed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use http::{Request, Response};
    /// use shared_headers::{Builder, Committed, Error, Exchange, Limit};
    /// use shared_headers::server::SharedHeadersLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let layer = SharedHeadersLayer::new()
    ///     .response_headers(Builder::new().max_bytes(64).sensitive(["x-session"]));
    /// let service = layer.layer(service_fn(|req: Request<()>| async move {
    ///     let exchange = req.extensions().get::<Exchange>().unwrap();
    ///     exchange.response().insert("x-session", "s3cr3t".parse().unwrap()).unwrap();
    ///     let huge = "a".repeat(100).parse().unwrap();
    ///     let refused = exchange.response().insert("x-huge", huge);
    ///     assert!(matches!(refused, Err(Error::LimitExceeded { limit: Limit::Bytes, .. })));
    ///     Ok::<_, Infallible>(Response::new(String::new()))
    /// }));
    /// let res = service.oneshot(Request::new(())).await?;
    /// assert_eq!(res.headers()["x-session"], "s3cr3t"); // sent as written
    /// assert!(!res.headers().contains_key("x-huge"));
    /// let committed = res.extensions().get::<Committed>().unwrap();
    /// assert!(!format!("{committed:?}").contains("s3cr3t")); // never logged
    /// # Ok(())
    /// # }
    /// ```
    pub fn response_headers(mut self, builder: Builder) -> Self {
        self.config.response_policy = builder.into_policy();
        self
    }

    /// The status of the response sent when a request is rejected because its headers are
    /// over the [`request_headers`](Self::request_headers) limits. Default: 431 Request Header
    /// Fields Too Large.
    ///
    /// # Examples
    ///
    /// ```
    /// # use http::StatusCode;
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new().rejection_status(StatusCode::BAD_REQUEST);
    /// # drop(layer);
    /// ```
    pub fn rejection_status(mut self, status: StatusCode) -> Self {
        self.config.rejection_status = status;
        self
    }
}

impl Default for SharedHeadersLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl<S> Layer<S> for SharedHeadersLayer {
    type Service = SharedHeadersService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        SharedHeadersService {
            inner,
            config: self.config.clone(),
        }
    }
}
