//! Refresh-and-retry-once on a refused credential, as a tower layer.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderMap, Request, Response, StatusCode};
use tower_layer::Layer;
use tower_service::Service;

use super::defaults::DefaultsVersion;
use super::refresher::Refresher;
use super::replay::{ReplayBody, replay};
use crate::deadline::Deadline;

mod error;
mod future;
mod shared;

pub use error::RefreshRetryError;
use future::RefreshRetryFuture;
use future::Retry;
pub(crate) use shared::Shared;
#[cfg(feature = "reqwest")]
pub(crate) use shared::refresh_for;

/// A [`Layer`] that refreshes the default headers and retries a request **once** when its
/// response says the credential was refused (by default a `401`).
///
/// Put it **outside** [`DefaultHeadersLayer`](crate::client::DefaultHeadersLayer) (above it in
/// a `ServiceBuilder`). For each request it keeps a copy taken *before* the defaults are
/// applied; on a refused response it reads the [`DefaultsVersion`] the response was sent with,
/// calls [`Refresher::refresh_if_current`] for that version with your refresh function, and
/// sends the copy through `DefaultHeaders` again, which applies the new defaults. So:
///
/// * 64 requests refused with one token cause **one** refresh; the others wait for it (or find
///   it already done) and retry with the new token;
/// * a refresh that fails is returned to every request that waited for it, as
///   [`RefreshRetryError::Refresh`], and the retry is not sent; the next refused request tries again
///   (nothing is poisoned);
/// * a request is retried at most once: a second refusal is returned as the response;
/// * **never past the deadline**: under a [`Deadline`] (the request's extension, else
///   [`Deadline::current`] when the layer is called), a retry that would start after it has
///   passed is not sent, and the refused response is returned as the answer (the caller sees
///   what the server said, not a timeout it did not get). A deadline that passes during the
///   refresh lets the refresh finish (the next request uses it) and returns the refused
///   response; one that passes during the retry is the inner layers' to enforce
///   ([`PropagateLayer`](crate::client::PropagateLayer) inside this one cuts it).
///
/// A request is sent once, with no retry, when its body cannot be replayed (see
/// [`ReplayBody`]), when it already carries a [`DefaultsVersion`] (the defaults were applied
/// *outside* this layer, so a retry would resend the refused token), or when the response has
/// no [`DefaultsVersion`] (no `DefaultHeaders` inside this layer).
///
/// The inner service must be `Clone` (hyper-util's client and `DefaultHeaders` over it are):
/// the retry is sent through the clone that was called first, polled ready again.
///
/// Give the credential headers [`Merge::Override`](crate::client::Merge::Override): with the
/// default [`Merge::KeepRequest`](crate::client::Merge::KeepRequest), a request that sets its
/// own `Authorization` keeps it, and the retry would send it again.
///
/// The refused response is dropped unread (under a deadline, when the retry starts). hyper's client reuses the connection only if a
/// response body was read to its end, so an API that answers `401` with a body costs one new
/// connection per refused request.
///
/// # Why not a `tower::retry::Policy`
///
/// A `Policy` can classify the response and run the refresh in its `retry` future, but that
/// future's output is `()`: when the refresh **fails**, `tower::retry::Retry` still sends the
/// retry with the refused token and returns its second `401`, and the refresh error is lost.
/// This layer returns the refresh error and sends nothing more. It also needs only
/// `tower-layer` and `tower-service`, not the `tower` crate.
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use http::header::AUTHORIZATION;
/// use http::{HeaderMap, Request, Response, StatusCode};
/// use shared_headers::SharedHeaders;
/// use shared_headers::client::{DefaultHeadersLayer, DefaultsVersion, Merge, RefreshRetryLayer, Refresher};
/// use tower::{ServiceBuilder, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let defaults = SharedHeaders::new();
/// defaults.insert(AUTHORIZATION, "Bearer expired".parse()?)?;
/// let refresher = Refresher::<Infallible>::new(defaults.clone());
///
/// // Ask the auth server here; publish the token and its companions in one map.
/// let refresh = || async {
///     let mut new = HeaderMap::new();
///     new.insert(AUTHORIZATION, "Bearer fresh".parse().unwrap());
///     Ok(new)
/// };
///
/// let client = ServiceBuilder::new()
///     .layer(RefreshRetryLayer::new(refresher.clone(), refresh))
///     .layer(DefaultHeadersLayer::new(defaults.clone()).merge(AUTHORIZATION, Merge::Override))
///     // Any tower client; this one accepts only `Bearer fresh`.
///     .service_fn(|req: Request<String>| async move {
///         let ok = req.headers()[AUTHORIZATION] == "Bearer fresh";
///         let mut response = Response::new(req.into_body());
///         if !ok {
///             *response.status_mut() = StatusCode::UNAUTHORIZED;
///         }
///         Ok::<_, Infallible>(response)
///     });
///
/// let response = client.oneshot(Request::new(String::from("hello"))).await?;
/// assert_eq!(response.status(), StatusCode::OK);
/// assert_eq!(response.body(), "hello"); // the body was sent again
/// assert_eq!(DefaultsVersion::of(&response), Some(2));
/// assert_eq!(refresher.performed(), 1);
/// # Ok(())
/// # }
/// ```
#[must_use = "a layer does nothing until it wraps a service (`ServiceBuilder::layer`, `Layer::layer`)"]
pub struct RefreshRetryLayer<F, R> {
    shared: Arc<Shared<F, R>>,
}

impl<F, R> Clone for RefreshRetryLayer<F, R> {
    fn clone(&self) -> Self {
        RefreshRetryLayer {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<F, R> fmt::Debug for RefreshRetryLayer<F, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RefreshRetryLayer")
            .field("refresher", &self.shared.refresher)
            .finish_non_exhaustive()
    }
}

impl<F, Fut, R> RefreshRetryLayer<F, R>
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<HeaderMap, R>> + Send + 'static,
    R: Send + Sync + 'static,
{
    /// A layer that, on a `401`, runs `refresh` through `refresher` (once per refused version)
    /// and retries once. `refresh` returns the new headers (a token and its companions); they
    /// are published as one write (see [`Refresher::refresh_if_current`]).
    ///
    /// Use the `Refresher` of the [`SharedHeaders`](crate::SharedHeaders) that the
    /// `DefaultHeadersLayer` inside applies, and share it with anything else that refreshes
    /// those defaults, so that they all count as one flight.
    ///
    /// # Examples
    ///
    /// ```
    /// # use http::HeaderMap;
    /// # use shared_headers::SharedHeaders;
    /// # use shared_headers::client::{RefreshRetryLayer, Refresher};
    /// let refresher = Refresher::<std::io::Error>::new(SharedHeaders::new());
    /// let layer = RefreshRetryLayer::new(refresher, || async { Ok(HeaderMap::new()) });
    /// assert_eq!(layer.refresher().performed(), 0);
    /// ```
    pub fn new(refresher: Refresher<R>, refresh: F) -> Self {
        RefreshRetryLayer {
            shared: Shared::new(refresher, refresh),
        }
    }
}

impl<F, R> RefreshRetryLayer<F, R> {
    /// Replaces the test for "credential refused" (initially: the status is `401`). It sees the
    /// refused response's status and headers, for an API that says `403`, or a `401` that is
    /// about something else (`WWW-Authenticate` says which).
    ///
    /// # Examples
    ///
    /// ```
    /// # use http::{HeaderMap, StatusCode};
    /// # use shared_headers::SharedHeaders;
    /// # use shared_headers::client::{RefreshRetryLayer, Refresher};
    /// let refresher = Refresher::<std::io::Error>::new(SharedHeaders::new());
    /// let layer = RefreshRetryLayer::new(refresher, || async { Ok(HeaderMap::new()) })
    ///     .refused_when(|status, headers| {
    ///         status == StatusCode::UNAUTHORIZED
    ///             && headers
    ///                 .get("www-authenticate")
    ///                 .is_some_and(|v| v.as_bytes().windows(13).any(|w| w == b"invalid_token"))
    ///     });
    /// # let _ = layer;
    /// ```
    pub fn refused_when(
        mut self,
        classify: impl Fn(StatusCode, &HeaderMap) -> bool + Send + Sync + 'static,
    ) -> Self {
        // If the layer was cloned, its clones keep their test; this one gets its own.
        Shared::set_classify(&mut self.shared, Arc::new(classify));
        self
    }

    /// The refresher this layer refreshes through (for its counters).
    ///
    /// # Examples
    ///
    /// ```
    /// # use http::HeaderMap;
    /// # use shared_headers::SharedHeaders;
    /// # use shared_headers::client::{RefreshRetryLayer, Refresher};
    /// let refresher = Refresher::<std::io::Error>::new(SharedHeaders::new());
    /// let layer = RefreshRetryLayer::new(refresher, || async { Ok(HeaderMap::new()) });
    /// assert_eq!(layer.refresher().failed(), 0);
    /// ```
    pub fn refresher(&self) -> &Refresher<R> {
        &self.shared.refresher
    }
}

impl<S, F, R> Layer<S> for RefreshRetryLayer<F, R> {
    type Service = RefreshRetry<S, F, R>;

    fn layer(&self, inner: S) -> RefreshRetry<S, F, R> {
        RefreshRetry {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}

/// A client [`Service`] that refreshes the default headers and retries a request once when its
/// credential is refused. Made by [`RefreshRetryLayer`] (or [`RefreshRetry::new`]), which
/// documents what it does.
///
/// # Errors
///
/// [`RefreshRetryError::Service`] with the inner service's error (of the first send or of the retry);
/// [`RefreshRetryError::Refresh`] if the refresh failed (the retry is not sent then).
///
/// # Examples
///
/// ```
/// # use std::convert::Infallible;
/// # use http::{HeaderMap, Request, Response, StatusCode};
/// # use shared_headers::SharedHeaders;
/// # use shared_headers::client::{DefaultHeadersLayer, RefreshRetryLayer, Refresher, RefreshRetryError};
/// use tower::{Layer, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let defaults = SharedHeaders::new();
/// let refresher = Refresher::new(defaults.clone());
/// let auth_down = || async { Err::<HeaderMap, _>("auth server down") };
/// let api = tower::service_fn(|_: Request<()>| async {
///     let mut refused = Response::new(());
///     *refused.status_mut() = StatusCode::UNAUTHORIZED;
///     Ok::<_, Infallible>(refused)
/// });
/// let client = RefreshRetryLayer::new(refresher, auth_down)
///     .layer(DefaultHeadersLayer::new(defaults).layer(api));
///
/// // The refresh failed: its error is returned, and no retry was sent.
/// let result = client.oneshot(Request::new(())).await;
/// let err = result.unwrap_err();
/// let cause = err.refresh_error().and_then(|e| e.refresh_error());
/// assert_eq!(cause, Some(&"auth server down"));
/// # }
/// ```
pub struct RefreshRetry<S, F, R> {
    inner: S,
    shared: Arc<Shared<F, R>>,
}

impl<S: Clone, F, R> Clone for RefreshRetry<S, F, R> {
    fn clone(&self) -> Self {
        RefreshRetry {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S: fmt::Debug, F, R> fmt::Debug for RefreshRetry<S, F, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RefreshRetry")
            .field("inner", &self.inner)
            .field("refresher", &self.shared.refresher)
            .finish_non_exhaustive()
    }
}

impl<S, F, Fut, R> RefreshRetry<S, F, R>
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<HeaderMap, R>> + Send + 'static,
    R: Send + Sync + 'static,
{
    /// Wraps `inner`, refreshing with `refresh` through `refresher` on a `401`: the same as
    /// `RefreshRetryLayer::new(refresher, refresh).layer(inner)` (use the layer for
    /// [`refused_when`](RefreshRetryLayer::refused_when)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use http::HeaderMap;
    /// # use shared_headers::SharedHeaders;
    /// # use shared_headers::client::{RefreshRetry, Refresher};
    /// let refresher = Refresher::<std::io::Error>::new(SharedHeaders::new());
    /// let service = RefreshRetry::new(7, refresher, || async { Ok(HeaderMap::new()) });
    /// assert_eq!(*service.get_ref(), 7);
    /// ```
    pub fn new(inner: S, refresher: Refresher<R>, refresh: F) -> Self {
        RefreshRetryLayer::new(refresher, refresh).layer(inner)
    }
}

impl<S, F, R> RefreshRetry<S, F, R> {
    /// The inner service.
    ///
    /// # Examples
    ///
    /// ```
    /// # use http::HeaderMap;
    /// # use shared_headers::SharedHeaders;
    /// # use shared_headers::client::{RefreshRetryLayer, Refresher};
    /// use tower::Layer;
    /// let refresher = Refresher::<std::io::Error>::new(SharedHeaders::new());
    /// let service = RefreshRetryLayer::new(refresher, || async { Ok(HeaderMap::new()) }).layer(7);
    /// assert_eq!(*service.get_ref(), 7);
    /// assert_eq!(service.into_inner(), 7);
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Gives up the layer and returns the inner service (see [`get_ref`](Self::get_ref)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use http::HeaderMap;
    /// # use shared_headers::SharedHeaders;
    /// # use shared_headers::client::{RefreshRetryLayer, Refresher};
    /// use tower::Layer;
    /// let refresher = Refresher::<std::io::Error>::new(SharedHeaders::new());
    /// let service = RefreshRetryLayer::new(refresher, || async { Ok(HeaderMap::new()) }).layer("inner");
    /// assert_eq!(service.into_inner(), "inner");
    /// ```
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B, ResB, F, Fut, R> Service<Request<B>> for RefreshRetry<S, F, R>
where
    S: Service<Request<B>, Response = Response<ResB>> + Clone,
    B: ReplayBody,
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<HeaderMap, R>> + Send + 'static,
    R: Send + Sync + 'static,
{
    type Response = Response<ResB>;
    type Error = RefreshRetryError<S::Error, R>;
    type Future = RefreshRetryFuture<S, B, F, R>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner
            .poll_ready(cx)
            .map_err(RefreshRetryError::Service)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        // A request that already carries a version went through `DefaultHeaders` *outside*
        // this layer: a copy of it would resend the refused token. Do not retry it.
        let again = if request.extensions().get::<DefaultsVersion>().is_some() {
            None
        } else {
            // Taken before `DefaultHeaders` (inside) touches it: the retry gets the new defaults.
            replay(&request)
        };
        let Some(again) = again else {
            return RefreshRetryFuture::first(self.inner.call(request), None);
        };
        // The tower idiom: call the service that was polled ready and keep it for the retry
        // (which polls it ready again); `self` keeps a clone.
        let deadline = match request.extensions().get::<Deadline>() {
            Some(deadline) => Some(*deadline),
            None => Deadline::current(),
        };
        let clone = self.inner.clone();
        let mut ready = std::mem::replace(&mut self.inner, clone);
        let future = ready.call(request);
        RefreshRetryFuture::first(
            future,
            Some(Retry {
                inner: ready,
                again,
                shared: Arc::clone(&self.shared),
                deadline,
            }),
        )
    }
}
