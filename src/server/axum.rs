//! axum 0.8 integration (feature `axum`): [`Exchange`] and [`RequestHeaders`] as extractors.

use std::convert::Infallible;
use std::fmt;

use axum_core::extract::{FromRequestParts, OptionalFromRequestParts};
use axum_core::response::{IntoResponse, Response};
use http::StatusCode;
use http::request::Parts;

use crate::exchange::Exchange;
use crate::shared::SharedHeaders;

/// With feature `axum`, a handler takes the request's [`Exchange`] as an argument (or
/// `Option<Exchange>`, `None` without the layer). It is the one that
/// [`SharedHeadersLayer`](super::SharedHeadersLayer) put in the request's extensions.
///
/// # Examples
///
/// ```no_run
/// use axum::{Router, routing::get};
/// use shared_headers::Exchange;
/// use shared_headers::server::SharedHeadersLayer;
///
/// async fn handler(exchange: Exchange) -> &'static str {
///     let _ = exchange.annotations().insert("x-route", "/".parse().unwrap()); // Err only if sealed: the answer is decided
///     "hello"
/// }
///
/// # #[tokio::main]
/// # async fn main() -> std::io::Result<()> {
/// let app = Router::new()
///     .route("/", get(handler))
///     .layer(SharedHeadersLayer::new()); // after the routes that use it
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
/// axum::serve(listener, app).await
/// # }
/// ```
impl<S: Send + Sync> FromRequestParts<S> for Exchange {
    type Rejection = MissingLayer;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Exchange>()
            .cloned()
            .ok_or(MissingLayer { _private: () })
    }
}

impl<S: Send + Sync> OptionalFromRequestParts<S> for Exchange {
    type Rejection = Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        _state: &S,
    ) -> Result<Option<Self>, Self::Rejection> {
        Ok(parts.extensions.get::<Exchange>().cloned())
    }
}

/// The request's shared headers, as an axum extractor (feature `axum`): the
/// [`Exchange::request`] handle of the exchange the layer made for this request.
///
/// The layer stores only the [`Exchange`] in the request's extensions (so a `SharedHeaders`
/// another layer stores there can never be mistaken for it); this newtype is how a handler asks
/// for the request handle alone. It dereferences to [`SharedHeaders`]; `.0` moves it out. Without
/// the layer it is rejected with [`MissingLayer`], like `Exchange`.
///
/// # Examples
///
/// ```
/// use axum_core::extract::FromRequestParts;
/// use shared_headers::Exchange;
/// use shared_headers::server::RequestHeaders;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let exchange = Exchange::new(Default::default(), Default::default());
/// exchange.request().insert("x-user", "ada".parse().unwrap()).unwrap();
/// let mut req = http::Request::new(());
/// req.extensions_mut().insert(exchange.clone());
/// let (mut parts, ()) = req.into_parts();
/// let headers = RequestHeaders::from_request_parts(&mut parts, &()).await.unwrap();
/// assert_eq!(headers.get("x-user").unwrap(), "ada");
/// assert!(shared_headers::SharedHeaders::ptr_eq(&headers, exchange.request()));
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct RequestHeaders(pub SharedHeaders);

impl std::ops::Deref for RequestHeaders {
    type Target = SharedHeaders;

    fn deref(&self) -> &SharedHeaders {
        &self.0
    }
}

impl<S: Send + Sync> FromRequestParts<S> for RequestHeaders {
    type Rejection = MissingLayer;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Exchange>()
            .map(|exchange| RequestHeaders(exchange.request().clone()))
            .ok_or(MissingLayer { _private: () })
    }
}

/// The rejection of the [`Exchange`] and [`RequestHeaders`] extractors: the request has no exchange, because
/// [`SharedHeadersLayer`](super::SharedHeadersLayer) is not around the route. Answers a bare
/// 500 (the client learns nothing of the server's internals) and logs an `ERROR` event through
/// `tracing` with the message that says how to add the layer (also its `Display`).
///
/// # Examples
///
/// ```
/// use axum_core::extract::FromRequestParts;
/// use shared_headers::Exchange;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let (mut parts, ()) = http::Request::new(()).into_parts();
/// let missing = <Exchange as FromRequestParts<()>>::from_request_parts(&mut parts, &())
///     .await
///     .unwrap_err();
/// assert!(missing.to_string().contains("SharedHeadersLayer"));
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MissingLayer {
    _private: (),
}

impl fmt::Display for MissingLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "no shared_headers::Exchange in the request extensions: add \
             shared_headers::server::SharedHeadersLayer to the router \
             (`Router::new().route(..).layer(SharedHeadersLayer::new())`), and call `.layer` \
             after the routes that use it",
        )
    }
}

impl std::error::Error for MissingLayer {}

impl IntoResponse for MissingLayer {
    /// A bare 500 for the client (no internals in the body); the operator gets the rest: an
    /// `ERROR` event (target `shared_headers::server`) with the message that says how to add
    /// the layer.
    fn into_response(self) -> Response {
        tracing::error!(target: "shared_headers::server", "{self}");
        StatusCode::INTERNAL_SERVER_ERROR.into_response()
    }
}
