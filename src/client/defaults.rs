//! The tower layer that applies live default headers to outgoing requests.

use std::sync::Arc;
use std::task::{Context, Poll};

#[cfg(feature = "reqwest")]
use http::HeaderMap;
#[cfg(doc)]
use http::header::HeaderName;
use http::header::{AsHeaderName, IntoHeaderName};
use http::{Request, Response};
use tower_layer::Layer;
use tower_service::Service;

#[cfg(any(doc, feature = "reqwest"))]
use crate::error::Error;
use crate::shared::{Reader, SharedHeaders};

mod error;
mod future;
mod merge;

pub use error::DefaultHeadersError;
use future::DefaultHeadersFuture;
pub use merge::Merge;
#[cfg(feature = "reqwest")]
use merge::apply_current;
use merge::{Policy, apply};

/// The version of the default headers that a request was sent with.
///
/// [`DefaultHeaders`] inserts it into the request's extensions before calling the inner service
/// and into the response's extensions when the response arrives, so that the code that sees a
/// `401` knows which token was refused and can hand that version to
/// [`Refresher::refresh_if_current`](crate::client::Refresher::refresh_if_current).
///
/// The number inside is a [`SharedHeaders::version`]; [`of`](Self::of) returns it as a plain
/// `u64`, which is what `refresh_if_current` takes and what `version()` is compared with.
///
/// # Examples
///
/// ```
/// use http::Response;
/// use shared_headers::client::DefaultsVersion;
///
/// let mut response = Response::new(());
/// response.extensions_mut().insert(DefaultsVersion(3));
/// assert_eq!(DefaultsVersion::of(&response), Some(3));
/// assert_eq!(DefaultsVersion::of(&Response::new(())), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DefaultsVersion(pub u64);

impl DefaultsVersion {
    /// The version recorded in a response's extensions, if the response went through
    /// [`DefaultHeaders`], as the `u64` that [`SharedHeaders::version`] and
    /// [`Refresher::refresh_if_current`](crate::client::Refresher::refresh_if_current) use.
    ///
    /// To read it from a request, use `request.extensions().get::<DefaultsVersion>()`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::DefaultsVersion;
    /// let mut response = http::Response::new(());
    /// response.extensions_mut().insert(DefaultsVersion(7));
    /// assert_eq!(DefaultsVersion::of(&response), Some(7));
    /// ```
    #[inline]
    pub fn of<B>(response: &Response<B>) -> Option<u64> {
        response.extensions().get::<DefaultsVersion>().map(|v| v.0)
    }
}

/// A [`Layer`] that applies the current defaults of a [`SharedHeaders`] to every request.
///
/// See [`DefaultHeaders`] for what the service does, and the [module docs](crate::client) for a
/// complete example with hyper-util's client.
///
/// # Examples
///
/// ```
/// use http::{Request, Response};
/// use shared_headers::SharedHeaders;
/// use shared_headers::client::{DefaultHeadersLayer, DefaultsVersion};
/// use tower::{ServiceBuilder, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let defaults = SharedHeaders::new();
/// defaults.insert("user-agent", "my-sdk/1.0".parse()?)?;
///
/// // Any tower client works; this one echoes the request's user-agent.
/// let client = ServiceBuilder::new()
///     .layer(DefaultHeadersLayer::new(defaults.clone()))
///     .service_fn(|req: Request<()>| async move {
///         Ok::<_, std::convert::Infallible>(Response::new(req.headers()["user-agent"].clone()))
///     });
///
/// let response = client.oneshot(Request::new(())).await?;
/// assert_eq!(response.body(), "my-sdk/1.0");
/// assert_eq!(DefaultsVersion::of(&response), Some(1));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a layer does nothing until it wraps a service (`ServiceBuilder::layer`, `Layer::layer`)"]
pub struct DefaultHeadersLayer {
    defaults: SharedHeaders,
    policy: Arc<Policy>,
}

impl DefaultHeadersLayer {
    /// A layer applying `defaults` with [`Merge::KeepRequest`] for every name.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// # use shared_headers::client::{DefaultHeadersLayer, Merge};
    /// let layer = DefaultHeadersLayer::new(SharedHeaders::new());
    /// assert_eq!(layer.merge_for(&http::header::ACCEPT), Merge::KeepRequest);
    /// ```
    pub fn new(defaults: SharedHeaders) -> Self {
        DefaultHeadersLayer {
            defaults,
            policy: Arc::new(Policy::default()),
        }
    }

    /// Sets how every name without its own policy is merged (initially [`Merge::KeepRequest`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// # use shared_headers::client::{DefaultHeadersLayer, Merge};
    /// let layer = DefaultHeadersLayer::new(SharedHeaders::new()).default_merge(Merge::Append);
    /// assert_eq!(layer.merge_for(&http::header::ACCEPT), Merge::Append);
    /// ```
    pub fn default_merge(mut self, merge: Merge) -> Self {
        Arc::make_mut(&mut self.policy).default = merge;
        self
    }

    /// Sets how the default values of `name` are merged with the request's own. The last call
    /// for a name wins.
    ///
    /// `name` is anything [`HeaderMap::insert`] takes: a [`HeaderName`] (the constants in
    /// [`http::header`]) or a `&'static str`.
    ///
    /// # Panics
    ///
    /// Like `HeaderMap`, if `name` is a `&'static str` that is not a valid header name (`http`
    /// converts it with [`HeaderName::from_static`]). Parse names that come from input into a
    /// [`HeaderName`] first, which reports an invalid name as an error.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// # use shared_headers::client::{DefaultHeadersLayer, Merge};
    /// use http::header::AUTHORIZATION;
    /// let layer = DefaultHeadersLayer::new(SharedHeaders::new())
    ///     .merge(AUTHORIZATION, Merge::Append)
    ///     .merge("authorization", Merge::Override) // the last call wins
    ///     .merge("x-trace", Merge::Append);
    /// assert_eq!(layer.merge_for(AUTHORIZATION), Merge::Override);
    /// assert_eq!(layer.merge_for("x-trace"), Merge::Append);
    /// ```
    pub fn merge<K: IntoHeaderName>(mut self, name: K, merge: Merge) -> Self {
        // `try_insert` replaces the previous policy of the name. It fails only once the map
        // holds `HeaderMap`'s maximum of names, far more than there are header names in use.
        let _ = Arc::make_mut(&mut self.policy)
            .names
            .try_insert(name, merge);
        self
    }

    /// How the default values of `name` are merged with the request's own.
    ///
    /// `name` is anything [`HeaderMap::get`] takes (`&str`, `String`, [`HeaderName`], or a
    /// reference to one); a string that is not a valid header name has the default policy.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// # use shared_headers::client::{DefaultHeadersLayer, Merge};
    /// let trace: http::HeaderName = "x-trace".parse()?;
    /// let layer = DefaultHeadersLayer::new(SharedHeaders::new()).merge(trace.clone(), Merge::Append);
    /// assert_eq!(layer.merge_for(&trace), Merge::Append);
    /// assert_eq!(layer.merge_for("X-Trace"), Merge::Append);
    /// assert_eq!(layer.merge_for("not a name"), Merge::KeepRequest);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn merge_for<K: AsHeaderName>(&self, name: K) -> Merge {
        self.policy.for_name(name)
    }

    /// The defaults this layer applies.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// # use shared_headers::client::DefaultHeadersLayer;
    /// let defaults = SharedHeaders::new();
    /// let layer = DefaultHeadersLayer::new(defaults.clone());
    /// assert!(SharedHeaders::ptr_eq(layer.defaults(), &defaults));
    /// ```
    pub fn defaults(&self) -> &SharedHeaders {
        &self.defaults
    }

    /// Applies the current defaults to `headers` with this layer's policy; the version applied.
    #[cfg(feature = "reqwest")]
    pub(crate) fn apply_to(&self, headers: &mut HeaderMap) -> Result<u64, Error> {
        apply_current(&self.defaults, &self.policy, headers)
    }
}

impl<S> Layer<S> for DefaultHeadersLayer {
    type Service = DefaultHeaders<S>;

    fn layer(&self, inner: S) -> DefaultHeaders<S> {
        DefaultHeaders {
            inner,
            reader: self.defaults.reader(),
            policy: Arc::clone(&self.policy),
        }
    }
}

/// A client [`Service`] that adds the current default headers to each request.
///
/// For every request it reads the current version of the defaults once (no lock: a rotation in
/// progress never stalls it, and all default headers come from that one version), merges them
/// into the request's headers according to the [`Merge`] policy, records
/// [`DefaultsVersion`] in the request's extensions, calls the inner service, and records the same
/// [`DefaultsVersion`] in the response's extensions.
///
/// Values are cloned as they are, so a default marked
/// [sensitive](http::HeaderValue::set_sensitive) stays sensitive on the request.
///
/// Each service reads the defaults through a [`Reader`] of its own (a clone starts from the
/// same cached version): one atomic load per request while the defaults do not change. It keeps
/// the version it last read alive until its next request (a rotated-out token stays in memory
/// in an idle service until it sends again or is dropped), as a held
/// [`Snapshot`](crate::Snapshot) would.
///
/// Made by [`DefaultHeadersLayer`] (or [`DefaultHeaders::new`]).
///
/// # Errors
///
/// [`DefaultHeadersError::Defaults`] with [`Error::MaxSizeReached`] if the merged headers would
/// not fit in a `HeaderMap` (the inner service is not called then);
/// [`DefaultHeadersError::Service`] for the inner service's errors.
///
/// # Examples
///
/// ```
/// use http::{Request, Response};
/// use shared_headers::SharedHeaders;
/// use shared_headers::client::{DefaultHeaders, DefaultsVersion};
/// use tower::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let defaults = SharedHeaders::new();
/// defaults.insert("x-api-version", "2".parse()?)?;
/// let echo = tower::service_fn(|req: Request<()>| async move {
///     Ok::<_, std::convert::Infallible>(Response::new(req.headers()["x-api-version"].clone()))
/// });
/// let response = DefaultHeaders::new(echo, defaults).oneshot(Request::new(())).await?;
/// assert_eq!(response.body(), "2");
/// assert_eq!(DefaultsVersion::of(&response), Some(1));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct DefaultHeaders<S> {
    inner: S,
    /// This service's cached view of the layer's defaults (it keeps the handle alive): one
    /// atomic load per request while they do not change. A clone starts from the same cached
    /// version (two reference counts, no load), so a stack that clones the service per request
    /// (`RefreshRetry`, `oneshot` on a clone) pays no load either. It keeps the version this
    /// service last applied until its next request.
    reader: Reader,
    policy: Arc<Policy>,
}

impl<S> DefaultHeaders<S> {
    /// Wraps `inner`, applying `defaults` with [`Merge::KeepRequest`] for every name: the same
    /// as `DefaultHeadersLayer::new(defaults).layer(inner)` (use the layer to set a policy).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// # use shared_headers::client::DefaultHeaders;
    /// let service = DefaultHeaders::new(42, SharedHeaders::new());
    /// assert_eq!(*service.get_ref(), 42);
    /// ```
    pub fn new(inner: S, defaults: SharedHeaders) -> Self {
        DefaultHeadersLayer::new(defaults).layer(inner)
    }

    /// The inner service.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// # use shared_headers::client::DefaultHeadersLayer;
    /// use tower_layer::Layer;
    /// let service = DefaultHeadersLayer::new(SharedHeaders::new()).layer(42);
    /// assert_eq!(*service.get_ref(), 42);
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Gives up the layer and returns the inner service.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// # use shared_headers::client::DefaultHeadersLayer;
    /// use tower_layer::Layer;
    /// let service = DefaultHeadersLayer::new(SharedHeaders::new()).layer("inner");
    /// assert_eq!(service.into_inner(), "inner");
    /// ```
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B, ResB> Service<Request<B>> for DefaultHeaders<S>
where
    S: Service<Request<B>, Response = Response<ResB>>,
{
    type Response = Response<ResB>;
    type Error = DefaultHeadersError<S::Error>;
    type Future = DefaultHeadersFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner
            .poll_ready(cx)
            .map_err(DefaultHeadersError::Service)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        // One consistent read of the defaults (map and version together), no lock, no clone:
        // through this service's reader, one atomic load while the defaults did not change.
        let headers = request.headers_mut();
        let policy = &self.policy;
        let read = self
            .reader
            .read_versioned(|current, version| apply(current, headers, policy).map(|()| version));
        let version = match read {
            Ok(version) => version,
            Err(error) => {
                return DefaultHeadersFuture::refused(error);
            }
        };
        request.extensions_mut().insert(DefaultsVersion(version));
        DefaultHeadersFuture::called(self.inner.call(request), version)
    }
}
