//! The tower layer that applies live default headers to outgoing requests.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

#[cfg(doc)]
use http::header::HeaderName;
use http::header::{AsHeaderName, IntoHeaderName};
use http::{HeaderMap, Request, Response};
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use crate::error::Error;
use crate::shared::{Reader, SharedHeaders};

/// How a default header is combined with the request's own values of the same name.
///
/// # Examples
///
/// ```
/// use http::header::{ACCEPT, AUTHORIZATION};
/// use shared_headers::SharedHeaders;
/// use shared_headers::client::{DefaultHeadersLayer, Merge};
///
/// let layer = DefaultHeadersLayer::new(SharedHeaders::new())
///     .merge(AUTHORIZATION, Merge::Override) // the live token always wins
///     .merge(ACCEPT, Merge::Append);
/// assert_eq!(layer.merge_for(AUTHORIZATION), Merge::Override);
/// assert_eq!(layer.merge_for(&ACCEPT), Merge::Append);
/// assert_eq!(layer.merge_for("x-other"), Merge::KeepRequest);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Merge {
    /// If the request has the header, keep the request's values and add nothing (the default,
    /// like a browser's or reqwest's default headers).
    #[default]
    KeepRequest,
    /// Replace the request's values with the defaults' values.
    Override,
    /// Add the defaults' values after the request's values.
    Append,
}

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

#[derive(Debug, Clone, Default)]
pub(crate) struct Policy {
    default: Merge,
    /// Per-name exceptions, keyed like the headers themselves.
    names: HeaderMap<Merge>,
}

impl Policy {
    #[inline]
    fn for_name<K: AsHeaderName>(&self, name: K) -> Merge {
        if self.names.is_empty() {
            return self.default;
        }
        self.names.get(name).copied().unwrap_or(self.default)
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

    /// The inner service, mutably.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// # use shared_headers::client::DefaultHeadersLayer;
    /// use tower_layer::Layer;
    /// let mut service = DefaultHeadersLayer::new(SharedHeaders::new()).layer(42);
    /// *service.get_mut() += 1;
    /// assert_eq!(service.into_inner(), 43);
    /// ```
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
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

impl DefaultHeaders<()> {
    /// A [`DefaultHeadersLayer`] applying `defaults` (tower-http's `Service::layer`
    /// convention; the same as [`DefaultHeadersLayer::new`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// # use shared_headers::client::{DefaultHeaders, Merge};
    /// let layer = DefaultHeaders::layer(SharedHeaders::new()).merge("authorization", Merge::Override);
    /// assert_eq!(layer.merge_for("authorization"), Merge::Override);
    /// ```
    pub fn layer(defaults: SharedHeaders) -> DefaultHeadersLayer {
        DefaultHeadersLayer::new(defaults)
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
                return DefaultHeadersFuture {
                    state: State::Refused { error: Some(error) },
                };
            }
        };
        request.extensions_mut().insert(DefaultsVersion(version));
        DefaultHeadersFuture {
            state: State::Called {
                future: self.inner.call(request),
                version,
            },
        }
    }
}

/// Merges one consistent read of the current `defaults` (map and version together, no lock, no
/// clone of the map) into a request's `headers`; returns the version applied. For the reqwest
/// middleware (through `&self`); [`DefaultHeaders`] reads through its [`Reader`] and merges with
/// the same [`apply`], so both follow the same policy.
#[cfg(feature = "reqwest")]
pub(crate) fn apply_current(
    defaults: &SharedHeaders,
    policy: &Policy,
    headers: &mut HeaderMap,
) -> Result<u64, Error> {
    defaults.read_versioned(|current, version| apply(current, headers, policy).map(|()| version))
}

/// Merges `defaults` into a request's `headers`.
fn apply(defaults: &HeaderMap, headers: &mut HeaderMap, policy: &Policy) -> Result<(), Error> {
    if headers.is_empty() {
        // Every policy gives the defaults themselves; one map clone beats per-entry inserts.
        headers.clone_from(defaults);
        return Ok(());
    }
    // Decide once per name (`keys` yields each name once), then append all its values.
    for name in defaults.keys() {
        let take = match policy.for_name(name) {
            Merge::KeepRequest => !headers.contains_key(name),
            Merge::Append => true,
            Merge::Override => {
                headers.remove(name);
                true
            }
        };
        if take {
            for value in defaults.get_all(name) {
                headers.try_append(name.clone(), value.clone())?;
            }
        }
    }
    Ok(())
}

pin_project! {
    /// The response future of [`DefaultHeaders`]: records [`DefaultsVersion`] in the response.
    ///
    /// # Examples
    ///
    /// ```
    /// use http::{Request, Response};
    /// use shared_headers::SharedHeaders;
    /// use shared_headers::client::{DefaultHeaders, DefaultHeadersFuture, DefaultsVersion};
    /// use tower::{Service, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    /// let ok = tower::service_fn(|_: Request<()>| async { Ok::<_, std::io::Error>(Response::new(())) });
    /// let mut service = DefaultHeaders::new(ok, SharedHeaders::new());
    /// let future: DefaultHeadersFuture<_> = service.ready().await?.call(Request::new(()));
    /// assert_eq!(DefaultsVersion::of(&future.await?), Some(0));
    /// # Ok(())
    /// # }
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct DefaultHeadersFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        Called { #[pin] future: F, version: u64 },
        Refused { error: Option<Error> },
    }
}

impl<F> fmt::Debug for DefaultHeadersFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DefaultHeadersFuture")
            .finish_non_exhaustive()
    }
}

impl<F, ResB, E> Future for DefaultHeadersFuture<F>
where
    F: Future<Output = Result<Response<ResB>, E>>,
{
    type Output = Result<Response<ResB>, DefaultHeadersError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Called { future, version } => {
                let mut response =
                    std::task::ready!(future.poll(cx)).map_err(DefaultHeadersError::Service)?;
                response.extensions_mut().insert(DefaultsVersion(*version));
                Poll::Ready(Ok(response))
            }
            StateProj::Refused { error } => Poll::Ready(Err(DefaultHeadersError::Defaults(
                // Polling again after completion is a contract violation; answer it, still typed.
                error.take().unwrap_or(Error::MaxSizeReached),
            ))),
        }
    }
}

/// The error of [`DefaultHeaders`]: the defaults could not be applied, or the inner service
/// failed.
///
/// # Examples
///
/// ```
/// use shared_headers::Error;
/// use shared_headers::client::DefaultHeadersError;
///
/// let err: DefaultHeadersError<std::io::Error> = DefaultHeadersError::Defaults(Error::MaxSizeReached);
/// assert_eq!(err.to_string(), "default headers not applied");
/// // The cause is the source, not repeated in the message.
/// let source = std::error::Error::source(&err).unwrap();
/// assert_eq!(source.downcast_ref::<Error>(), Some(&Error::MaxSizeReached));
/// assert!(matches!(err, DefaultHeadersError::Defaults(Error::MaxSizeReached)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DefaultHeadersError<E> {
    /// The merged headers would not fit in a `HeaderMap`; the request was not sent.
    Defaults(Error),
    /// The inner service failed.
    Service(E),
}

impl<E> DefaultHeadersError<E> {
    /// The inner service's error; `None` when the defaults were not applied.
    ///
    /// Through a stack of this crate's layers, chain the calls (each layer's error has one),
    /// or find the service's error by its type in the [`source`](std::error::Error::source)
    /// chain (see [Errors](crate::client#errors)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::DefaultHeadersError;
    /// let err = DefaultHeadersError::Service(std::io::Error::other("upstream down"));
    /// assert_eq!(err.service_error().unwrap().to_string(), "upstream down");
    /// ```
    pub fn service_error(&self) -> Option<&E> {
        match self {
            DefaultHeadersError::Service(e) => Some(e),
            _ => None,
        }
    }

    /// The inner service's error, by value; `None` when the defaults were not applied.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::DefaultHeadersError;
    /// let err = DefaultHeadersError::Service(std::io::Error::other("upstream down"));
    /// assert_eq!(err.into_service_error().unwrap().kind(), std::io::ErrorKind::Other);
    /// ```
    pub fn into_service_error(self) -> Option<E> {
        match self {
            DefaultHeadersError::Service(e) => Some(e),
            _ => None,
        }
    }
}

/// Only this layer's words: the cause is the [`source`](std::error::Error::source).
impl<E> fmt::Display for DefaultHeadersError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DefaultHeadersError::Defaults(_) => "default headers not applied",
            DefaultHeadersError::Service(_) => {
                "the service inside the default-headers layer failed"
            }
        })
    }
}

impl<E: std::error::Error + 'static> std::error::Error for DefaultHeadersError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DefaultHeadersError::Defaults(e) => Some(e),
            DefaultHeadersError::Service(e) => Some(e),
        }
    }
}
