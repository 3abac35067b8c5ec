//! Client default headers that rotate live, and a refresh that runs once per failed version.
//!
//! An API client keeps default headers (an auth token, its expiry, a user agent) that every
//! request carries, and replaces the token while requests are in flight. With
//! `Arc<RwLock<HeaderMap>>`, every request takes the read lock, a refresh stalls them all, token
//! and expiry are often updated in two steps (a request can carry one without the other), and
//! when the token expires every in-flight request sees a `401` and starts its own refresh: a
//! stampede against the auth server.
//!
//! This module replaces that with pieces built on [`SharedHeaders`](crate::SharedHeaders):
//!
//! * [`DefaultHeadersLayer`] / [`DefaultHeaders`]: a tower layer that applies one lock-free,
//!   consistent read of the defaults (one version) to each request (the request's own headers
//!   win unless a [`Merge`] policy says otherwise; sensitive values stay sensitive) and records
//!   the [`DefaultsVersion`] it used in the request's and the response's extensions;
//! * [`Refresher`]: given the version that got the `401`, runs the user's async refresh only if
//!   that version is still current; concurrent callers with the same version wait for that one
//!   refresh; late callers return at once; the new token and its companions are published as
//!   one atomic write. Its decision rule (a private, runtime-free gate, `single_flight.rs`) is
//!   model-checked with loom;
//! * [`RefreshRetryLayer`] / [`RefreshRetry`]: the easy path. Outside `DefaultHeadersLayer`, it
//!   turns a refused credential (a `401`, or what [`RefreshRetryLayer::refused_when`] says)
//!   into one refresh through the `Refresher` and one retry with the new defaults; a failed
//!   refresh is returned as [`RefreshRetryError::Refresh`]. Bodies are replayed through
//!   [`ReplayBody`];
//! * `reqwest::DefaultHeadersMiddleware` (module `reqwest`, feature `reqwest`): the same for
//!   reqwest, as a `reqwest-middleware` middleware (reqwest's own default headers are fixed
//!   when its client is built); its module docs have the recipe.
//! * [`PropagateLayer`] / [`Propagate`] (and `reqwest::PropagateMiddleware`): the request's
//!   context travels. Each outgoing request made in a request's scope (the server layer puts
//!   it in scope while the handler runs; a spawned task keeps it through
//!   [`context::carry`](crate::context::carry)) is sent with the request's id and propagated
//!   headers ([`RequestContext`](crate::context::RequestContext); a header the outgoing request
//!   already has keeps its value) and with what is left of its [`Deadline`](crate::deadline::Deadline),
//!   less a margin, in a [`BudgetHeader`](crate::deadline::BudgetHeader); it is cut when that is spent,
//!   and not sent when nothing is left. A request made outside any request is unchanged. One
//!   layer for hyper-util's client, a tonic `Channel` or any tower client. With feature
//!   `opentelemetry`, [`PropagateLayer::otel_tracer`] makes a client span per call (the span
//!   whose id the call's `traceparent` names as the next hop's parent) and
//!   [`PropagateLayer::otel_metrics`] records `http.client.request.duration` once per call.
//!
//! Every middleware has the same shape, tower-http's: `XxxLayer` (a builder, `XxxLayer::new`
//! then its setters), the `Xxx` service (`Xxx::new(inner, ..)`, `Xxx::layer(..)`, `get_ref`,
//! `get_mut`, `into_inner`), its `XxxFuture`, and its error, an enum over the inner service's
//! error (see [Errors](#errors)).
//!
//! Works with any tower client: hyper-util's legacy client (below), a `tower::service_fn`, or a
//! stack with timeouts. Without the retry layer, do it by hand: on a `401`, pass
//! [`DefaultsVersion::of`] the response to [`Refresher::refresh_if_current`], then send again
//! (the example of [`Refresher`] shows the calls).
//!
//! # Example: hyper-util's client
//!
//! ```
//! use std::convert::Infallible;
//! use http::header::AUTHORIZATION;
//! use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
//! use http_body_util::Empty;
//! use hyper::body::{Bytes, Incoming};
//! use hyper_util::client::legacy::Client;
//! use hyper_util::rt::{TokioExecutor, TokioIo};
//! use shared_headers::SharedHeaders;
//! use shared_headers::client::{DefaultHeadersLayer, DefaultsVersion, Merge, RefreshRetryLayer, Refresher};
//! use tower::{ServiceBuilder, ServiceExt};
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
//!             let status = if fresh { StatusCode::OK } else { StatusCode::UNAUTHORIZED };
//!             let mut response = Response::new(Empty::<Bytes>::new());
//!             *response.status_mut() = status;
//!             Ok::<_, Infallible>(response)
//!         });
//!         let conn = hyper::server::conn::http1::Builder::new();
//!         tokio::spawn(conn.serve_connection(TokioIo::new(stream), api));
//!     }
//! });
//!
//! // The defaults every request carries, and the refresher that rotates them.
//! let defaults = SharedHeaders::new();
//! let mut expired = HeaderValue::from_static("Bearer expired");
//! expired.set_sensitive(true);
//! defaults.insert(AUTHORIZATION, expired)?;
//! let refresher = Refresher::<Infallible>::new(defaults.clone());
//! let refresh = || async {
//!     // Ask the auth server here; the token and its companions are published at once.
//!     let mut token = HeaderValue::from_static("Bearer fresh");
//!     token.set_sensitive(true);
//!     let mut new = HeaderMap::new();
//!     new.insert(AUTHORIZATION, token);
//!     Ok(new)
//! };
//!
//! let client = ServiceBuilder::new()
//!     // Outside the defaults: its retry goes through them again and gets the new token.
//!     .layer(RefreshRetryLayer::new(refresher.clone(), refresh))
//!     .layer(DefaultHeadersLayer::new(defaults.clone()).merge(AUTHORIZATION, Merge::Override))
//!     .service(Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>());
//!
//! // Refused with version 1 (`Bearer expired`), refreshed once, sent again with version 2.
//! let request = Request::get(format!("http://{addr}/")).body(Empty::new())?;
//! let response = client.oneshot(request).await?;
//! assert_eq!(response.status(), StatusCode::OK);
//! assert_eq!(DefaultsVersion::of(&response), Some(2));
//! assert_eq!(refresher.performed(), 1);
//! assert!(defaults.get(AUTHORIZATION).unwrap().is_sensitive());
//! # Ok(())
//! # }
//! ```
//!
//! # Errors
//!
//! Each layer's error is an enum over the error of the service inside it, so a full stack's
//! error is `RefreshRetryError<PropagateError<DefaultHeadersError<E>>, R>` (`E` the client's, `R` the
//! refresh function's). Every one says only its own words in `Display` and returns the error
//! inside from [`source`](std::error::Error::source) (the Rust API guidelines' "Display or
//! source, never both"), so a report that walks the chain (anyhow's `{:#}`, `eyre`, a logger's
//! error field) prints each message once. Two ways reach the client's own error:
//!
//! * **by layer**, without a `match`: each error has `service_error()` (and
//!   `into_service_error()`), `None` when that layer itself failed; chain them with
//!   `and_then`;
//! * **by type**, through any depth: the client's error is itself in the `source()` chain (not
//!   only its message), so `downcast_ref::<E>()` on each link finds it (anyhow:
//!   `error.chain().find_map(|e| e.downcast_ref::<E>())`).
//!
//! ```
//! use std::error::Error as _;
//! use std::io;
//! use http::{HeaderMap, Request, Response};
//! use shared_headers::SharedHeaders;
//! use shared_headers::deadline::BudgetHeader;
//! use shared_headers::client::{DefaultHeadersLayer, PropagateLayer, RefreshRetryLayer, Refresher};
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let defaults = SharedHeaders::new();
//! let refresher = Refresher::<io::Error>::new(defaults.clone());
//! let client = ServiceBuilder::new()
//!     .layer(RefreshRetryLayer::new(refresher, || async { Ok(HeaderMap::new()) }))
//!     .layer(PropagateLayer::new(BudgetHeader::grpc_timeout()))
//!     .layer(DefaultHeadersLayer::new(defaults))
//!     .service_fn(|_: Request<()>| async { Err::<Response<()>, _>(io::Error::other("upstream down")) });
//! let err = client.oneshot(Request::new(())).await.unwrap_err();
//!
//! // By layer: three calls, no match.
//! let service = err
//!     .service_error()
//!     .and_then(|e| e.service_error())
//!     .and_then(|e| e.service_error());
//! assert_eq!(service.map(io::Error::kind), Some(io::ErrorKind::Other));
//!
//! // By type: walk the `source()` chain; each message appears once.
//! let mut chain = vec![err.to_string()];
//! let mut next = err.source();
//! let mut found = None;
//! while let Some(e) = next {
//!     chain.push(e.to_string());
//!     found = found.or(e.downcast_ref::<io::Error>());
//!     next = e.source();
//! }
//! assert_eq!(found.map(ToString::to_string).as_deref(), Some("upstream down"));
//! assert_eq!(
//!     chain.join(": "),
//!     "the service inside the refresh-retry layer failed: \
//!      the service inside the propagate layer failed: \
//!      the service inside the default-headers layer failed: upstream down"
//! );
//! # }
//! ```

mod conn_retry;
mod defaults;
mod propagate;
mod refresher;
mod replay;
#[cfg(feature = "reqwest")]
#[cfg_attr(docsrs, doc(cfg(feature = "reqwest")))]
pub mod reqwest;
mod retry;
// The propagation clients' spans and their duration metric (`span.rs`, crate-private).
#[cfg(feature = "opentelemetry")]
mod span;
// The refresher's decision core: private (no public signature names its types). `pub` only in
// the loom world, for the models in `loom-tests/tests/client.rs`.
#[cfg(not(shared_headers_loom))]
mod single_flight;
#[cfg(shared_headers_loom)]
#[doc(hidden)]
pub mod single_flight;

pub use conn_retry::{ConnRetry, ConnRetryError, ConnRetryLayer};
// The connection retry's body hand-off: reachable only in the loom world, for the model in
// `loom-tests/tests/conn_retry.rs`.
#[cfg(shared_headers_loom)]
#[doc(hidden)]
pub use conn_retry::handoff;
pub use defaults::{
    DefaultHeaders, DefaultHeadersError, DefaultHeadersLayer, DefaultsVersion, Merge,
};
pub use propagate::{Propagate, PropagateError, PropagateLayer};
pub use refresher::{RefreshError, Refreshed, Refresher};
pub use replay::ReplayBody;
pub use retry::{RefreshRetry, RefreshRetryError, RefreshRetryLayer};
