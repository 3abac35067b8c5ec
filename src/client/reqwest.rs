//! Live default headers and refresh-and-retry-once for [`reqwest`], as a
//! [`reqwest_middleware`] middleware (feature `reqwest`).
//!
//! reqwest's own default headers are fixed when the client is built. [`DefaultHeadersMiddleware`]
//! applies the *current* defaults of a [`SharedHeaders`](crate::SharedHeaders) to every request
//! instead, with the same merge policy and sensitivity handling as
//! [`DefaultHeadersLayer`](super::DefaultHeadersLayer) (it is built from one), records the [`DefaultsVersion`] it applied,
//! and on a refused credential (a `401` unless told otherwise) refreshes through a
//! [`Refresher`](super::Refresher) and sends the request once more, like [`RefreshRetryLayer`](super::RefreshRetryLayer).
//!
//! [`PropagateMiddleware`] sends each request made in a request's scope with the request's
//! context (its id and propagated headers, and what is left of its [`Deadline`](crate::deadline::Deadline)), as
//! [`PropagateLayer`](super::PropagateLayer) does for tower clients, and with feature
//! `opentelemetry` a client span and an `http.client.request.duration` point per call
//! ([`PropagateMiddleware::otel_tracer`], [`PropagateMiddleware::otel_metrics`]).
//!
//! reqwest 0.13 keeps a request's extensions private, so the version is recorded in the
//! middleware's [`Extensions`](http::Extensions) (for the middlewares after this one) and in the response's
//! extensions: read it with [`version_of`].
//!
//! The feature uses reqwest without default features: plain HTTP, no TLS stack. For HTTPS,
//! depend on reqwest yourself with the TLS feature you want; cargo unifies the features.
//!
//! # Recipe
//!
//! ```
//! use std::convert::Infallible;
//! use http::header::AUTHORIZATION;
//! use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
//! use http_body_util::Empty;
//! use hyper::body::{Bytes, Incoming};
//! use hyper_util::rt::TokioIo;
//! use shared_headers::SharedHeaders;
//! use shared_headers::client::reqwest::{DefaultHeadersMiddleware, version_of};
//! use shared_headers::client::{DefaultHeadersLayer, Merge, Refresher};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! // A local API that accepts only `Bearer fresh`.
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let addr = listener.local_addr()?;
//! tokio::spawn(async move {
//!     while let Ok((stream, _)) = listener.accept().await {
//!         let api = hyper::service::service_fn(|req: Request<Incoming>| async move {
//!             let fresh = req.headers().get(AUTHORIZATION).is_some_and(|v| v == "Bearer fresh");
//!             let mut response = Response::new(Empty::<Bytes>::new());
//!             if !fresh {
//!                 *response.status_mut() = StatusCode::UNAUTHORIZED;
//!             }
//!             Ok::<_, Infallible>(response)
//!         });
//!         let conn = hyper::server::conn::http1::Builder::new();
//!         tokio::spawn(conn.serve_connection(TokioIo::new(stream), api));
//!     }
//! });
//!
//! // The live defaults, the refresher, and how to get a new token.
//! let defaults = SharedHeaders::new();
//! defaults.insert(AUTHORIZATION, HeaderValue::from_static("Bearer expired"))?;
//! let refresher = Refresher::<std::io::Error>::new(defaults.clone());
//! let refresh = || async {
//!     // Ask the auth server here; the map is published as one write.
//!     let mut token = HeaderValue::from_static("Bearer fresh");
//!     token.set_sensitive(true);
//!     let mut new = HeaderMap::new();
//!     new.insert(AUTHORIZATION, token);
//!     Ok(new)
//! };
//!
//! let layer = DefaultHeadersLayer::new(defaults.clone()).merge(AUTHORIZATION, Merge::Override);
//! let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::builder().no_proxy().build()?)
//!     .with(DefaultHeadersMiddleware::new(layer, refresher.clone(), refresh))
//!     .build();
//!
//! // Refused with `Bearer expired` (version 1), refreshed once, sent again with version 2.
//! let response = client.get(format!("http://{addr}/")).send().await?;
//! assert_eq!(response.status(), StatusCode::OK);
//! assert_eq!(version_of(&response), Some(2));
//! assert_eq!(refresher.performed(), 1);
//! # Ok(())
//! # }
//! ```

use reqwest::Response;

use super::defaults::DefaultsVersion;

// The default headers' middleware (`defaults.rs`), the propagation's (`propagate.rs`), and the
// propagation's client spans (`span.rs`, crate-private).
mod defaults;
mod propagate;
#[cfg(feature = "opentelemetry")]
mod span;

pub use defaults::DefaultHeadersMiddleware;
pub use propagate::PropagateMiddleware;

/// The [`DefaultsVersion`] a response was sent with, if it went through a
/// [`DefaultHeadersMiddleware`] (as the `u64` that
/// [`Refresher::refresh_if_current`](super::Refresher::refresh_if_current) takes).
///
/// # Examples
///
/// ```
/// use shared_headers::client::DefaultsVersion;
/// use shared_headers::client::reqwest::version_of;
///
/// let mut response = reqwest::Response::from(http::Response::new(""));
/// assert_eq!(version_of(&response), None);
/// response.extensions_mut().insert(DefaultsVersion(4));
/// assert_eq!(version_of(&response), Some(4));
/// ```
pub fn version_of(response: &Response) -> Option<u64> {
    response.extensions().get::<DefaultsVersion>().map(|v| v.0)
}
