//! Server middleware: shared request and response headers with commit-once timeout semantics.
//!
//! [`SharedHeadersLayer`] wraps a [`tower` service](tower_service::Service) that answers
//! `http::Request`s. For every request, its service:
//!
//! 1. creates an [`Exchange`]: a [`SharedHeaders`] for the request headers (a copy of
//!    `req.headers()` as received) and an empty one for response headers, each with the limits
//!    and secret names of the layer's [`Builder`]s, if set
//!    ([`request_headers`](SharedHeadersLayer::request_headers),
//!    [`response_headers`](SharedHeadersLayer::response_headers)), and puts the exchange
//!    **and** the request handle into the request's extensions. The handler and every task it
//!    spawns clone them and read and write concurrently, without locks held across `.await`.
//!    A request whose headers are already over the request limits is not passed on: the layer
//!    commits it as [`Outcome::Rejected`] and answers
//!    [`rejection_status`](SharedHeadersLayer::rejection_status) (431 by default);
//! 2. calls the inner service, optionally under a deadline ([`SharedHeadersLayer::timeout`]);
//! 3. **commits exactly once**, at the first of: the inner service answers
//!    ([`Outcome::Answered`] or [`Outcome::Failed`]), the deadline fires ([`Outcome::TimedOut`],
//!    answered with [`timeout_status`](SharedHeadersLayer::timeout_status), 503 by default, and an
//!    empty body), or the future is dropped by an outer layer or a closed connection
//!    ([`Outcome::Cancelled`]). Both handles are sealed at that moment: a spawned task that
//!    writes afterwards gets [`Error::Sealed`](crate::Error::Sealed), and the write is counted
//!    ([`Exchange::refused_writes`]);
//! 4. merges the committed response headers into the response (each name set through the
//!    handle replaces that name on the response) and puts into the response's extensions the
//!    [`Committed`] record, with the sealed request and response
//!    [`Snapshot`](crate::Snapshot)s, and the [`Exchange`] itself. An outer logging layer
//!    (e.g. tower-http's `TraceLayer::on_response`) that logs the record logs exactly the
//!    shared headers that were committed: the request headers as the handler left them, and the
//!    response headers merged into the response. The inner response's own headers are not in
//!    the record; they are in `res.headers()`, next to the merged ones. The record is final;
//!    the exchange is live: its [`refused_writes`](Exchange::refused_writes) keeps counting
//!    writes that tasks attempt after the commit, so read it when the response is done (for
//!    example in `TraceLayer::on_eos`) to log the post-timeout activity.
//!
//! # What other middleware sees
//!
//! * `req.headers()` is untouched: middleware inside the layer and the handler see the headers
//!   **as received**. Writes through the [`SharedHeaders`] handle do not show there (the handle
//!   starts as a copy); read the handle to see them.
//! * The response's headers are the inner response's, plus the committed response headers.
//!   Headers that describe the body (`content-type`, `content-length`) belong on the response
//!   the handler returns, not in the shared handle: a timeout response has its own, empty body
//!   and still gets the committed headers.
//! * Errors of the inner service pass through unchanged ([`Outcome::Failed`]); the timeout and
//!   the rejection are answers, not errors, so the error type does not change.
//! * A rejected request never reaches the inner service, although its `poll_ready` was called
//!   for it. A service that reserves something in `poll_ready` keeps it until its next call or
//!   until it is dropped (hyper drops the per-connection clone with the connection).
//!
//! # Cost
//!
//! Per request: one copy of the request headers into the handle, a few small allocations (the
//! two handles, the exchange, the extensions maps), and at the commit one small allocation per
//! handle and no copy of either map: a plain seal publishes a new version that shares the map
//! of the version it seals. Merging copies each committed response header into the response
//! (a reference-count increment per value). [`Builder`] limits and secret names cost one shared
//! `Arc` per handle, plus a scan of the values per write when a byte limit or marking is set.
//! Altogether a few microseconds, small next to parsing and writing an HTTP request;
//! `cargo bench --features tower --bench layer` measures it against a bare service and against
//! tower-http's `TimeoutLayer`.
//!
//! # Example: a hyper server
//!
//! A complete HTTP/1.1 server on hyper 1 and hyper-util, and one request to it. The handler
//! spawns a task that adds a response header while the handler works:
//!
//! ```
//! use std::{convert::Infallible, time::Duration};
//!
//! use hyper::body::Bytes;
//! use http::{Request, Response};
//! use http_body_util::{BodyExt, Empty, Full};
//! use hyper::body::Incoming;
//! use hyper_util::rt::TokioIo;
//! use hyper_util::service::TowerToHyperService;
//! use shared_headers::layer::SharedHeadersLayer;
//! use shared_headers::{Committed, Exchange, SharedHeaders};
//! use tower::ServiceBuilder;
//!
//! async fn handler(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
//!     let exchange = req.extensions().get::<Exchange>().unwrap().clone();
//!     let request_headers = req.extensions().get::<SharedHeaders>().unwrap().clone();
//!     let task = tokio::spawn(async move {
//!         // Runs concurrently with the handler; no lock is held across this await.
//!         tokio::time::sleep(Duration::from_millis(1)).await;
//!         exchange.response().insert("x-cache", "miss".parse().unwrap())
//!     });
//!     request_headers.insert("x-user", "ada".parse().unwrap()).unwrap();
//!     task.await.unwrap().unwrap();
//!     Ok(Response::new(Full::from("hello")))
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let service = ServiceBuilder::new()
//!     .map_response(|res: Response<Full<Bytes>>| {
//!         // A logging layer: log exactly what was committed.
//!         let committed = res.extensions().get::<Committed>().unwrap();
//!         assert_eq!(committed.request()["x-user"], "ada");
//!         res
//!     })
//!     .layer(SharedHeadersLayer::new().timeout(Duration::from_secs(5)))
//!     .service_fn(handler);
//!
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let addr = listener.local_addr()?;
//! tokio::spawn(async move {
//!     loop {
//!         let Ok((stream, _)) = listener.accept().await else { return };
//!         let service = TowerToHyperService::new(service.clone());
//!         tokio::spawn(
//!             hyper::server::conn::http1::Builder::new()
//!                 .serve_connection(TokioIo::new(stream), service),
//!         );
//!     }
//! });
//!
//! // A client.
//! let stream = tokio::net::TcpStream::connect(addr).await?;
//! let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
//! tokio::spawn(conn);
//! let req = Request::get("/").header("host", "localhost").body(Empty::<Bytes>::new())?;
//! let res = sender.send_request(req).await?;
//! assert_eq!(res.status(), 200);
//! assert_eq!(res.headers()["x-cache"], "miss");
//! assert_eq!(res.into_body().collect().await?.to_bytes(), "hello");
//! # Ok(())
//! # }
//! ```
//!
//! # Example: axum
//!
//! With axum 0.8, extract the handles with `Extension` and add the layer to the router
//! (not compiled here, to keep the test suite small):
//!
//! ```ignore
//! use axum::{routing::get, Extension, Router};
//! use shared_headers::{layer::SharedHeadersLayer, Exchange, SharedHeaders};
//!
//! async fn handler(
//!     Extension(request): Extension<SharedHeaders>,
//!     Extension(exchange): Extension<Exchange>,
//! ) -> &'static str {
//!     tokio::spawn(async move {
//!         // Ok before the commit; Err(Sealed) (and counted) after it.
//!         let _ = exchange.response().insert("x-audit", "done".parse().unwrap());
//!     });
//!     request.insert("x-user", "ada".parse().unwrap()).ok();
//!     "hello"
//! }
//!
//! let app = Router::new()
//!     .route("/", get(handler))
//!     .layer(SharedHeadersLayer::new().timeout(std::time::Duration::from_secs(2)));
//! ```

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use http::{HeaderMap, Request, Response, StatusCode};
use pin_project_lite::pin_project;
use tokio::time::Sleep;
use tower_layer::Layer;
use tower_service::Service;

use crate::builder::Builder;
use crate::exchange::{Committed, Exchange, Outcome};
use crate::policy::Policy;
use crate::shared::SharedHeaders;

/// A [`Layer`] that gives every request shared request and response headers and commits them
/// exactly once. See the [module docs](self) for the full semantics.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use http::StatusCode;
/// use shared_headers::layer::SharedHeadersLayer;
///
/// let layer = SharedHeadersLayer::new()
///     .timeout(Duration::from_secs(2))
///     .timeout_status(StatusCode::GATEWAY_TIMEOUT);
/// assert_eq!(layer.get_timeout(), Some(Duration::from_secs(2)));
/// assert_eq!(layer.get_timeout_status(), StatusCode::GATEWAY_TIMEOUT);
/// ```
///
/// # Naming
///
/// Settings are builder methods named after the setting (`timeout`, `timeout_status`, ...),
/// as in tower-http and hyper; the getter of each is the same name with `get_`.
#[derive(Debug, Clone)]
pub struct SharedHeadersLayer {
    config: Config,
}

#[derive(Debug, Clone)]
struct Config {
    timeout: Option<Duration>,
    timeout_status: StatusCode,
    /// Built once from the request [`Builder`]; shared by every request's handle.
    request_policy: Option<Arc<Policy>>,
    response_policy: Option<Arc<Policy>>,
    rejection_status: StatusCode,
}

impl SharedHeadersLayer {
    /// A layer without a deadline (answering 503 if one is later set with
    /// [`timeout`](Self::timeout)) and without limits on the headers.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::layer::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new();
    /// assert_eq!(layer.get_timeout(), None);
    /// assert_eq!(layer.get_timeout_status(), 503);
    /// assert_eq!(layer.get_rejection_status(), 431);
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
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use shared_headers::layer::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new().timeout(Duration::from_millis(250));
    /// assert_eq!(layer.get_timeout(), Some(Duration::from_millis(250)));
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
    /// # use shared_headers::layer::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new().timeout_status(StatusCode::GATEWAY_TIMEOUT);
    /// assert_eq!(layer.get_timeout_status(), StatusCode::GATEWAY_TIMEOUT);
    /// assert_eq!(SharedHeadersLayer::new().get_timeout_status(), 503);
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
    /// use shared_headers::layer::SharedHeadersLayer;
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
    /// use shared_headers::layer::SharedHeadersLayer;
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
    /// # use shared_headers::layer::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new().rejection_status(StatusCode::BAD_REQUEST);
    /// assert_eq!(layer.get_rejection_status(), StatusCode::BAD_REQUEST);
    /// ```
    pub fn rejection_status(mut self, status: StatusCode) -> Self {
        self.config.rejection_status = status;
        self
    }

    /// The deadline set with [`timeout`](Self::timeout), if any.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::layer::SharedHeadersLayer;
    /// assert!(SharedHeadersLayer::default().get_timeout().is_none());
    /// ```
    pub fn get_timeout(&self) -> Option<Duration> {
        self.config.timeout
    }

    /// The status set with [`timeout_status`](Self::timeout_status): answered when the
    /// deadline fires.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::layer::SharedHeadersLayer;
    /// assert_eq!(SharedHeadersLayer::new().get_timeout_status().as_u16(), 503);
    /// ```
    pub fn get_timeout_status(&self) -> StatusCode {
        self.config.timeout_status
    }

    /// The status set with [`rejection_status`](Self::rejection_status): answered when the
    /// request headers are over the request limits.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::layer::SharedHeadersLayer;
    /// assert_eq!(SharedHeadersLayer::new().get_rejection_status().as_u16(), 431);
    /// ```
    pub fn get_rejection_status(&self) -> StatusCode {
        self.config.rejection_status
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

/// The [`Service`] made by [`SharedHeadersLayer`]. See the [module docs](self).
///
/// # Examples
///
/// Calling it in process, without a server:
///
/// ```
/// use std::convert::Infallible;
/// use http::{Request, Response};
/// use shared_headers::{Committed, Exchange, Outcome};
/// use shared_headers::layer::SharedHeadersLayer;
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Infallible> {
/// let service = SharedHeadersLayer::new().layer(service_fn(|req: Request<()>| async move {
///     let exchange = req.extensions().get::<Exchange>().unwrap();
///     exchange.response().insert("x-cache", "hit".parse().unwrap()).unwrap();
///     Ok::<_, Infallible>(Response::new(String::from("hello")))
/// }));
/// let res = service.oneshot(Request::new(())).await?;
/// assert_eq!(res.headers()["x-cache"], "hit");
/// let committed = res.extensions().get::<Committed>().unwrap();
/// assert_eq!(committed.outcome(), Outcome::Answered);
/// assert_eq!(committed.response()["x-cache"], "hit");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct SharedHeadersService<S> {
    inner: S,
    config: Config,
}

impl<S> SharedHeadersService<S> {
    /// Wraps `inner` with the defaults of [`SharedHeadersLayer::new`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::layer::SharedHeadersService;
    /// let service = SharedHeadersService::new(());
    /// assert_eq!(service.get_ref(), &());
    /// ```
    pub fn new(inner: S) -> Self {
        SharedHeadersLayer::new().layer(inner)
    }

    /// The wrapped service.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::layer::SharedHeadersService;
    /// assert_eq!(*SharedHeadersService::new(7).get_ref(), 7);
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::layer::SharedHeadersService;
    /// let mut service = SharedHeadersService::new(7);
    /// *service.get_mut() += 1;
    /// assert_eq!(service.into_inner(), 8);
    /// ```
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwraps the inner service.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::layer::SharedHeadersService;
    /// assert_eq!(SharedHeadersService::new("inner").into_inner(), "inner");
    /// ```
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for SharedHeadersService<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    ResBody: Default,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<ReqBody>) -> Self::Future {
        let config = &self.config;
        let mut received = req.headers().clone();
        let admitted = match &config.request_policy {
            Some(policy) => policy.admit(&mut received),
            None => Ok(()),
        };
        // Over the limits or not, the handle holds the headers as received (with the policy's
        // secret names): a rejected request is committed at once, and its log shows them.
        let request = SharedHeaders::with_policy(received, config.request_policy.clone());
        let response = SharedHeaders::with_policy(HeaderMap::new(), config.response_policy.clone());
        let exchange = Exchange::new(request.clone(), response);
        let guard = CommitGuard {
            exchange: Some(exchange.clone()),
        };
        if admitted.is_err() {
            return ResponseFuture {
                guard,
                inner: None,
                sleep: None,
                own_status: config.rejection_status,
            };
        }
        req.extensions_mut().insert(request);
        req.extensions_mut().insert(exchange);
        ResponseFuture {
            guard,
            inner: Some(self.inner.call(req)),
            sleep: config.timeout.map(tokio::time::sleep),
            own_status: config.timeout_status,
        }
    }
}

pin_project! {
    /// The response future of [`SharedHeadersService`].
    ///
    /// Resolves to the inner service's response (or error), to the timeout response, or to the
    /// rejection response. If it is dropped before that, it commits the exchange with
    /// [`Outcome::Cancelled`].
    ///
    /// # Panics
    ///
    /// Polling it again after it returned `Ready` panics, as most futures do.
    pub struct ResponseFuture<F> {
        // Field order is load-bearing: fields drop in declaration order, and the guard must
        // commit (`Cancelled`) before the inner future is dropped, so that writes made by the
        // handler's drop glue (guards, spawned-task handles, ...) are refused with `Sealed`
        // instead of accepted after the future was cancelled.
        guard: CommitGuard,
        // `None` when the request was rejected: the inner service was not called.
        #[pin]
        inner: Option<F>,
        #[pin]
        sleep: Option<Sleep>,
        // The status of a response the layer makes itself: the timeout status, or the
        // rejection status when `inner` is `None`.
        own_status: StatusCode,
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("exchange", &self.guard.exchange)
            .field("has_deadline", &self.sleep.is_some())
            .field("rejected", &self.inner.is_none())
            .finish_non_exhaustive()
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
    B: Default,
{
    type Output = Result<Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        assert!(
            this.guard.exchange.is_some(),
            "shared_headers::layer::ResponseFuture polled after completion"
        );
        let Some(inner) = this.inner.as_pin_mut() else {
            let res = own_response(this.guard, Outcome::Rejected, *this.own_status);
            return Poll::Ready(Ok(res));
        };
        // The inner service first: an answer that is ready wins over a deadline that is too.
        if let Poll::Ready(result) = inner.poll(cx) {
            return Poll::Ready(match result {
                Ok(mut res) => {
                    finish(&mut res, this.guard.commit(Outcome::Answered));
                    Ok(res)
                }
                Err(err) => {
                    this.guard.commit(Outcome::Failed);
                    Err(err)
                }
            });
        }
        if let Some(sleep) = this.sleep.as_pin_mut() {
            ready!(sleep.poll(cx));
            let res = own_response(this.guard, Outcome::TimedOut, *this.own_status);
            return Poll::Ready(Ok(res));
        }
        Poll::Pending
    }
}

/// Commits with `outcome` and makes the layer's own answer: `status`, an empty body, and the
/// committed headers.
fn own_response<B: Default>(
    guard: &mut CommitGuard,
    outcome: Outcome,
    status: StatusCode,
) -> Response<B> {
    let mut res = Response::new(B::default());
    *res.status_mut() = status;
    finish(&mut res, guard.commit(outcome));
    res
}

/// Owns the exchange until the commit; commits with [`Outcome::Cancelled`] if dropped first.
/// A separate field (not a `PinnedDrop` on the future) so the drop logic needs no pinning.
struct CommitGuard {
    exchange: Option<Exchange>,
}

impl CommitGuard {
    /// Commits with `outcome`, or takes the record of whoever committed first (the handler
    /// itself may have called [`Exchange::commit`]). Returns the record and the exchange.
    fn commit(&mut self, outcome: Outcome) -> (Committed, Exchange) {
        let exchange = self
            .exchange
            .take()
            .expect("ResponseFuture committed twice");
        let committed = exchange
            .commit(outcome)
            .unwrap_or_else(|lost| lost.into_winner());
        (committed, exchange)
    }
}

impl Drop for CommitGuard {
    fn drop(&mut self) {
        if let Some(exchange) = self.exchange.take() {
            // Losing here is fine: someone committed first, and that is all we need.
            let _ = exchange.commit(Outcome::Cancelled);
        }
    }
}

/// Merges the committed response headers into `res` and attaches the record and the exchange.
fn finish<B>(res: &mut Response<B>, (committed, exchange): (Committed, Exchange)) {
    merge(res.headers_mut(), committed.response());
    res.extensions_mut().insert(committed);
    res.extensions_mut().insert(exchange);
}

/// Each name present in `from` replaces that name in `into` (Go's `timeoutWriter` semantics).
/// Stops quietly if `into` is full rather than panicking: the response is already committed, and
/// the sealed record still holds every committed header.
fn merge(into: &mut HeaderMap, from: &HeaderMap) {
    if !from.is_empty() {
        let _full = crate::single_flight::merge_replacing(into, from);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_replaces_names_and_keeps_multiple_values() {
        let mut into = HeaderMap::new();
        into.insert("x-a", "inner".parse().unwrap());
        into.insert("x-keep", "inner".parse().unwrap());
        let mut from = HeaderMap::new();
        from.append("x-a", "1".parse().unwrap());
        from.append("x-a", "2".parse().unwrap());
        from.insert("x-b", "3".parse().unwrap());
        merge(&mut into, &from);
        assert_eq!(into.get_all("x-a").iter().collect::<Vec<_>>(), ["1", "2"]);
        assert_eq!(into["x-b"], "3");
        assert_eq!(into["x-keep"], "inner");
        assert_eq!(into.len(), 4);
    }
}
