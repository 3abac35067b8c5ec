//! The layer's limits: the request and response policies, the rejection, and which received
//! headers the request handle holds.

use http::StatusCode;

use super::SharedHeadersLayer;
use crate::builder::Builder;
use crate::server::HeaderSelection;

#[cfg(doc)]
use crate::exchange::{Committed, Outcome};

/// # Limits
impl SharedHeadersLayer {
    /// Sets the limits and secret names of every request's request handle (replaces the
    /// previous request policy).
    ///
    /// The handle starts as a copy of the received headers, checked against the limits: writes
    /// that would take it past them are refused with
    /// [`Error::LimitExceeded`](crate::Error::LimitExceeded). A request whose headers are over
    /// the limits already is rejected: the inner service is not called, the exchange is
    /// committed with [`Outcome::Rejected`] (its request snapshot holds the headers as
    /// received, for the log), and the layer answers with
    /// [`rejection_status`](Self::rejection_status) and an empty body. The policy is built
    /// once, when the layer is built, and shared by all handles.
    ///
    /// **A secret name is secret for the whole layer**: the names given to
    /// [`Builder::sensitive`] here or in [`response_policy`](Self::response_policy) are
    /// secret in both handles, in every field of the access line, and never propagated
    /// ([`propagate`](Self::propagate)), whatever the order of the calls.
    ///
    /// The layer takes the builder's limits and secret names only: it picks the handles'
    /// publication itself ([`Publication::Locked`](crate::Publication::Locked), the one for
    /// request-scoped handles), so a [`Builder::publication`] given here is not used.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use http::{HeaderName, Request, Response, StatusCode};
    /// use shared_headers::{Builder, Committed, Error, Exchange, Outcome};
    /// use shared_headers::server::SharedHeadersLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let layer = SharedHeadersLayer::new()
    ///     .request_policy(Builder::new().max_entries(2).sensitive([HeaderName::from_static("x-session")]));
    /// let service = layer.layer(service_fn(|req: Request<()>| async move {
    ///     let exchange = req.extensions().get::<Exchange>().unwrap();
    ///     let _ = exchange.request().insert("x-user", "ada".parse().unwrap()); // 2 of 2 (Err only if sealed)
    ///     let over = exchange.request().append("x-more", "1".parse().unwrap());
    ///     assert!(matches!(over, Err(Error::LimitExceeded { .. })));
    ///     Ok::<_, Infallible>(Response::new(String::from("hello")))
    /// }));
    ///
    /// let req = Request::builder().header("x-session", "s3cr3t").body(())?;
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
    pub fn request_policy(mut self, builder: Builder) -> Self {
        self.settings.request = builder.into_policy();
        self.resolve()
    }

    /// Sets the limits and secret names of every request's response handle (replaces the
    /// previous response policy).
    ///
    /// Writes that would take the response headers past the limits are refused with
    /// [`Error::LimitExceeded`](crate::Error::LimitExceeded); secret names are redacted when
    /// the handle, its snapshots or the [`Committed`] record are printed, and are secret for
    /// the whole layer, as with [`request_policy`](Self::request_policy). As there, the layer
    /// picks the handle's publication ([`Publication::Locked`](crate::Publication::Locked)):
    /// a [`Builder::publication`] given here is not used.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use http::{HeaderName, Request, Response};
    /// use shared_headers::{Builder, Committed, Error, Exchange, Limit};
    /// use shared_headers::server::SharedHeadersLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let layer = SharedHeadersLayer::new()
    ///     .response_policy(Builder::new().max_bytes(64).sensitive([HeaderName::from_static("x-session")]));
    /// let service = layer.layer(service_fn(|req: Request<()>| async move {
    ///     let exchange = req.extensions().get::<Exchange>().unwrap();
    ///     let _ = exchange.response().insert("x-session", "s3cr3t".parse().unwrap()); // Err only if sealed: the answer is decided
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
    pub fn response_policy(mut self, builder: Builder) -> Self {
        self.settings.response = builder.into_policy();
        self.resolve()
    }

    /// Sets the status of the response sent when a request is rejected because its headers
    /// are over the [`request_policy`](Self::request_policy) limits (a second call replaces
    /// it). Default: 431 Request Header Fields Too Large.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use http::{Request, Response, StatusCode};
    /// use shared_headers::Builder;
    /// use shared_headers::server::SharedHeadersLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let layer = SharedHeadersLayer::new()
    ///     .request_policy(Builder::new().max_entries(1))
    ///     .rejection_status(StatusCode::BAD_REQUEST);
    /// let service = layer.layer(service_fn(|_req: Request<()>| async {
    ///     Ok::<_, Infallible>(Response::new(String::new()))
    /// }));
    /// let req = Request::builder().header("x-a", "1").header("x-b", "2").body(())?;
    /// assert_eq!(service.oneshot(req).await?.status(), StatusCode::BAD_REQUEST);
    /// # Ok(())
    /// # }
    /// ```
    pub fn rejection_status(mut self, status: StatusCode) -> Self {
        self.config.answers.rejection_status = status;
        self.resolve()
    }

    /// Sets which received request headers are copied into each request handle (replaces the
    /// previous selection): [`HeaderSelection::all`] (the default), [`HeaderSelection::only`]
    /// an allowlist, or [`HeaderSelection::none`], which saves the copy's two allocations and
    /// its time per request (for a handler that reads `req.headers()` and uses the handle only
    /// for headers it adds).
    ///
    /// What is not copied is neither in the handle nor in the [`Committed`] record (the log),
    /// and is not checked against the [`request_policy`](Self::request_policy) limits: a
    /// request is rejected only if the copied headers are over them. `req.headers()` is
    /// untouched in every case.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use http::{Request, Response};
    /// use shared_headers::Exchange;
    /// use shared_headers::server::{HeaderSelection, SharedHeadersLayer};
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let layer = SharedHeadersLayer::new().copy_request_headers(HeaderSelection::none());
    /// let service = layer.layer(service_fn(|req: Request<()>| async move {
    ///     let exchange = req.extensions().get::<Exchange>().unwrap();
    ///     assert!(exchange.request().is_empty()); // nothing copied
    ///     assert_eq!(req.headers()["x-tenant"], "acme"); // the request as received
    ///     Ok::<_, Infallible>(Response::new(String::new()))
    /// }));
    /// service.oneshot(Request::builder().header("x-tenant", "acme").body(())?).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn copy_request_headers(mut self, copy: HeaderSelection) -> Self {
        self.config.copy = copy;
        self.resolve()
    }
}
