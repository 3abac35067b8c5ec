//! [`DefaultHeadersMiddleware`]: live default headers and refresh-and-retry-once for reqwest.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use http::{Extensions, HeaderMap, StatusCode};
use reqwest::{Request, Response};
use reqwest_middleware::{Middleware, Next};

use crate::client::defaults::{DefaultHeadersLayer, DefaultsVersion};
use crate::client::refresher::Refresher;
use crate::client::retry::{Shared, refresh_for};
use crate::deadline::Deadline;

/// A [`reqwest_middleware`] middleware that applies the live defaults of a
/// [`DefaultHeadersLayer`] to each request and, when the credential is refused, refreshes
/// through a [`Refresher`] and sends the request once more.
///
/// For each request it:
///
/// 1. copies the request with [`Request::try_clone`] *before* touching it (a streaming body,
///    `Body::wrap_stream`, cannot be copied: that request is sent once, never retried);
/// 2. applies one consistent read of the defaults with the layer's [`Merge`](crate::client::Merge)
///    policy (sensitive values stay sensitive) and records its [`DefaultsVersion`] in the
///    middleware [`Extensions`] and, once it arrives, in the response's extensions;
/// 3. on a refused response (default: `401`; see [`refused_when`](Self::refused_when)), calls
///    [`Refresher::refresh_if_current`] for that version (concurrent refusals of one version
///    cause one refresh) and sends the copy with the new defaults. A second refusal is returned
///    as the response. Under a [`Deadline`] (in the [`Extensions`], else
///    [`Deadline::current`]), no refresh or retry starts once it has passed: the refused
///    response is returned (as [`RefreshRetryLayer`](crate::client::RefreshRetryLayer) does). A failed
///    refresh is returned as
///    [`reqwest_middleware::Error::Middleware`] holding the
///    [`RefreshError`](crate::client::RefreshError), and nothing more is sent.
///
/// Give the credential headers [`Merge::Override`](crate::client::Merge::Override), or a request that
/// sets its own (`.bearer_auth(..)`) keeps it, and the retry resends it. reqwest's own
/// `ClientBuilder::default_headers` are added after the middlewares, only for names still
/// absent, so they never replace these.
///
/// # Errors
///
/// [`reqwest_middleware::Error::Middleware`] with a [`RefreshError`](crate::client::RefreshError)
/// when the refresh failed, or with an [`Error::MaxSizeReached`](crate::Error::MaxSizeReached)
/// when the merged headers would not fit in a `HeaderMap`; the errors of the rest of the chain
/// as they are.
///
/// # Examples
///
/// See the [module docs](super) for a request over loopback.
///
/// ```
/// use http::HeaderMap;
/// use shared_headers::SharedHeaders;
/// use shared_headers::client::reqwest::DefaultHeadersMiddleware;
/// use shared_headers::client::{DefaultHeadersLayer, Refresher};
///
/// let defaults = SharedHeaders::new();
/// let refresher = Refresher::<std::io::Error>::new(defaults.clone());
/// let middleware = DefaultHeadersMiddleware::new(
///     DefaultHeadersLayer::new(defaults),
///     refresher,
///     || async { Ok(HeaderMap::new()) },
/// );
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
///     .with(middleware)
///     .build();
/// # let _ = client;
/// ```
#[must_use = "a middleware does nothing until it is added to a client (`ClientBuilder::with`)"]
pub struct DefaultHeadersMiddleware<F, R> {
    layer: DefaultHeadersLayer,
    shared: Arc<Shared<F, R>>,
}

impl<F, R> Clone for DefaultHeadersMiddleware<F, R> {
    fn clone(&self) -> Self {
        DefaultHeadersMiddleware {
            layer: self.layer.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<F, R> fmt::Debug for DefaultHeadersMiddleware<F, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DefaultHeadersMiddleware")
            .field("layer", &self.layer)
            .field("refresher", &self.shared.refresher)
            .finish_non_exhaustive()
    }
}

impl<F, Fut, R> DefaultHeadersMiddleware<F, R>
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<HeaderMap, R>> + Send + 'static,
    R: std::error::Error + Send + Sync + 'static,
{
    /// A middleware applying `layer`'s defaults and policy, refreshing with `refresh` through
    /// `refresher` (use the refresher of the same defaults).
    ///
    /// # Examples
    ///
    /// ```
    /// # use http::HeaderMap;
    /// # use shared_headers::SharedHeaders;
    /// # use shared_headers::client::reqwest::DefaultHeadersMiddleware;
    /// # use shared_headers::client::{DefaultHeadersLayer, Refresher};
    /// let defaults = SharedHeaders::new();
    /// let refresher = Refresher::<std::io::Error>::new(defaults.clone());
    /// let middleware = DefaultHeadersMiddleware::new(
    ///     DefaultHeadersLayer::new(defaults),
    ///     refresher,
    ///     || async { Ok(HeaderMap::new()) },
    /// );
    /// assert_eq!(middleware.refresher().performed(), 0);
    /// ```
    pub fn new(layer: DefaultHeadersLayer, refresher: Refresher<R>, refresh: F) -> Self {
        DefaultHeadersMiddleware {
            layer,
            shared: Shared::new(refresher, refresh),
        }
    }
}

impl<F, R> DefaultHeadersMiddleware<F, R> {
    /// Replaces the test for "credential refused" (initially: the status is `401`), as
    /// [`RefreshRetryLayer::refused_when`](crate::client::RefreshRetryLayer::refused_when) does.
    ///
    /// # Examples
    ///
    /// ```
    /// # use http::{HeaderMap, StatusCode};
    /// # use shared_headers::SharedHeaders;
    /// # use shared_headers::client::reqwest::DefaultHeadersMiddleware;
    /// # use shared_headers::client::{DefaultHeadersLayer, Refresher};
    /// # let defaults = SharedHeaders::new();
    /// # let refresher = Refresher::<std::io::Error>::new(defaults.clone());
    /// let middleware = DefaultHeadersMiddleware::new(
    ///     DefaultHeadersLayer::new(defaults),
    ///     refresher,
    ///     || async { Ok(HeaderMap::new()) },
    /// )
    /// .refused_when(|status, _| status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN);
    /// # let _ = middleware;
    /// ```
    pub fn refused_when(
        mut self,
        classify: impl Fn(StatusCode, &HeaderMap) -> bool + Send + Sync + 'static,
    ) -> Self {
        Shared::set_classify(&mut self.shared, Arc::new(classify));
        self
    }

    /// The refresher this middleware refreshes through (for its counters).
    ///
    /// # Examples
    ///
    /// ```
    /// # use http::HeaderMap;
    /// # use shared_headers::SharedHeaders;
    /// # use shared_headers::client::reqwest::DefaultHeadersMiddleware;
    /// # use shared_headers::client::{DefaultHeadersLayer, Refresher};
    /// # let defaults = SharedHeaders::new();
    /// let refresher = Refresher::<std::io::Error>::new(defaults.clone());
    /// let middleware = DefaultHeadersMiddleware::new(
    ///     DefaultHeadersLayer::new(defaults),
    ///     refresher,
    ///     || async { Ok(HeaderMap::new()) },
    /// );
    /// assert_eq!(middleware.refresher().failed(), 0);
    /// ```
    pub fn refresher(&self) -> &Refresher<R> {
        &self.shared.refresher
    }

    /// The layer whose defaults and policy this middleware applies.
    ///
    /// # Examples
    ///
    /// ```
    /// # use http::HeaderMap;
    /// # use shared_headers::SharedHeaders;
    /// # use shared_headers::client::reqwest::DefaultHeadersMiddleware;
    /// # use shared_headers::client::{DefaultHeadersLayer, Merge, Refresher};
    /// # let defaults = SharedHeaders::new();
    /// let layer = DefaultHeadersLayer::new(defaults.clone()).merge("authorization", Merge::Override);
    /// let middleware = DefaultHeadersMiddleware::new(
    ///     layer,
    ///     Refresher::<std::io::Error>::new(defaults),
    ///     || async { Ok(HeaderMap::new()) },
    /// );
    /// assert_eq!(middleware.layer().merge_for("authorization"), Merge::Override);
    /// ```
    pub fn layer(&self) -> &DefaultHeadersLayer {
        &self.layer
    }

    /// Applies the current defaults, sends, and records the version used.
    async fn send(
        &self,
        mut request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<(Response, u64)> {
        let version = self
            .layer
            .apply_to(request.headers_mut())
            .map_err(reqwest_middleware::Error::middleware)?;
        extensions.insert(DefaultsVersion(version));
        let mut response = next.run(request, extensions).await?;
        response.extensions_mut().insert(DefaultsVersion(version));
        Ok((response, version))
    }
}

#[async_trait::async_trait]
impl<F, Fut, R> Middleware for DefaultHeadersMiddleware<F, R>
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<HeaderMap, R>> + Send + 'static,
    R: std::error::Error + Send + Sync + 'static,
{
    async fn handle(
        &self,
        request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        // Before the defaults are applied: the retry gets the new version's headers.
        let again = request.try_clone();
        let (response, failed) = self.send(request, extensions, next.clone()).await?;
        let Some(again) = again else {
            return Ok(response);
        };
        if !(self.shared.classify)(response.status(), response.headers()) {
            return Ok(response);
        }
        // Never retry past the deadline (as `RefreshRetry`): the refused answer is the answer.
        let deadline = match extensions.get::<Deadline>() {
            Some(deadline) => Some(*deadline),
            None => Deadline::current(),
        };
        if deadline.is_some_and(|d| d.is_expired()) {
            return Ok(response);
        }
        let refused = match deadline {
            Some(_) => Some(response),
            None => {
                drop(response);
                None
            }
        };
        refresh_for(&self.shared, failed)
            .await
            .map_err(reqwest_middleware::Error::middleware)?;
        if let Some(refused) = refused {
            if deadline.is_some_and(|d| d.is_expired()) {
                return Ok(refused);
            }
        }
        Ok(self.send(again, extensions, next).await?.0)
    }
}
