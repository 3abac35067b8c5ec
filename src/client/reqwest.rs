//! Live default headers and refresh-and-retry-once for [`reqwest`], as a
//! [`reqwest_middleware`] middleware (feature `reqwest`).
//!
//! reqwest's own default headers are fixed when the client is built. [`DefaultHeadersMiddleware`]
//! applies the *current* defaults of a [`SharedHeaders`](crate::SharedHeaders) to every request
//! instead, with the same merge policy and sensitivity handling as
//! [`DefaultHeadersLayer`] (it is built from one), records the [`DefaultsVersion`] it applied,
//! and on a refused credential (a `401` unless told otherwise) refreshes through a
//! [`Refresher`] and sends the request once more, like [`RefreshRetryLayer`](super::RefreshRetryLayer).
//!
//! [`PropagateMiddleware`] sends each request made in a request's scope with the request's
//! context (its id and propagated headers, and what is left of its [`Deadline`]), as
//! [`PropagateLayer`](super::PropagateLayer) does for tower clients.
//!
//! reqwest 0.13 keeps a request's extensions private, so the version is recorded in the
//! middleware's [`Extensions`] (for the middlewares after this one) and in the response's
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

use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use http::{Extensions, HeaderMap, StatusCode};
use reqwest::{Request, Response};
use reqwest_middleware::{Middleware, Next};

use super::defaults::{DefaultHeadersLayer, DefaultsVersion};
use super::propagate::{
    PropagateError, apply_context, budget_for, in_scope, margin_for, set_budget,
};
use super::refresher::Refresher;
use super::retry::{Shared, refresh_for};
use crate::deadline::{BudgetHeader, Deadline};

/// The [`DefaultsVersion`] a response was sent with, if it went through a
/// [`DefaultHeadersMiddleware`] (as the `u64` that
/// [`Refresher::refresh_if_current`] takes).
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

/// A [`reqwest_middleware`] middleware that applies the live defaults of a
/// [`DefaultHeadersLayer`] to each request and, when the credential is refused, refreshes
/// through a [`Refresher`] and sends the request once more.
///
/// For each request it:
///
/// 1. copies the request with [`Request::try_clone`] *before* touching it (a streaming body,
///    `Body::wrap_stream`, cannot be copied: that request is sent once, never retried);
/// 2. applies one consistent read of the defaults with the layer's [`Merge`](super::Merge)
///    policy (sensitive values stay sensitive) and records its [`DefaultsVersion`] in the
///    middleware [`Extensions`] and, once it arrives, in the response's extensions;
/// 3. on a refused response (default: `401`; see [`refused_when`](Self::refused_when)), calls
///    [`Refresher::refresh_if_current`] for that version (concurrent refusals of one version
///    cause one refresh) and sends the copy with the new defaults. A second refusal is returned
///    as the response. Under a [`Deadline`] (in the [`Extensions`], else
///    [`Deadline::current`]), no refresh or retry starts once it has passed: the refused
///    response is returned (as [`RefreshRetryLayer`](super::RefreshRetryLayer) does). A failed
///    refresh is returned as
///    [`reqwest_middleware::Error::Middleware`] holding the
///    [`RefreshError`](super::RefreshError), and nothing more is sent.
///
/// Give the credential headers [`Merge::Override`](super::Merge::Override), or a request that
/// sets its own (`.bearer_auth(..)`) keeps it, and the retry resends it. reqwest's own
/// `ClientBuilder::default_headers` are added after the middlewares, only for names still
/// absent, so they never replace these.
///
/// # Errors
///
/// [`reqwest_middleware::Error::Middleware`] with a [`RefreshError`](super::RefreshError)
/// when the refresh failed, or with an [`Error::MaxSizeReached`](crate::Error::MaxSizeReached)
/// when the merged headers would not fit in a `HeaderMap`; the errors of the rest of the chain
/// as they are.
///
/// # Examples
///
/// See the [module docs](self) for a request over loopback.
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
    /// [`RefreshRetryLayer::refused_when`](super::RefreshRetryLayer::refused_when) does.
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

/// A [`reqwest_middleware`] middleware that sends each request with the request's context: its
/// id and propagated headers, and what is left of its deadline. The reqwest twin of
/// [`PropagateLayer`](super::PropagateLayer), which explains the margin.
///
/// The context is a [`RequestContext`](crate::context::RequestContext) in the middleware
/// [`Extensions`] if there is one, else
/// [`RequestContext::current`](crate::context::RequestContext::current) when the request is
/// sent (in scope while a server handler runs; in a spawned task through
/// [`context::carry`](crate::context::carry)). Its headers are added with
/// [`RequestContext::apply_to`](crate::context::RequestContext::apply_to): a header the
/// request already has keeps its own value.
///
/// The deadline is a [`Deadline`] in the middleware [`Extensions`] if there is one, else
/// [`Deadline::current`]. Then:
///
/// * **no deadline:** no budget header and no timeout;
/// * **nothing left** after the margin: the request is **not sent**, and the call fails at once
///   with [`reqwest_middleware::Error::Middleware`] holding a
///   [`PropagateError::Exhausted`];
/// * **otherwise** the budget header is set to what is left minus the margin (a smaller valid
///   value already on the request is kept), and the call is cut when what is left minus half
///   the margin is spent, with a [`PropagateError::Elapsed`].
///
/// The shorter of reqwest's own timeout and the deadline's cut wins; when reqwest's is the
/// shorter it fires with reqwest's own timeout error (`reqwest::Error::is_timeout`) in
/// [`reqwest_middleware::Error::Reqwest`]:
///
/// * a request with its own timeout ([`Request::timeout`]), or any request when the client's
///   timeout was told with [`client_timeout`](Self::client_timeout): the request's timeout
///   becomes the shorter of that and the cut, so the deadline bounds the reading of the body
///   too;
/// * otherwise the client's timeout (`reqwest::ClientBuilder::timeout`, which a middleware
///   cannot read) is left in force, and the cut races the call until the response head
///   arrives (what `send` waits for), not the reading of the body: tell the middleware the
///   client's timeout to bound the body by the deadline.
///
/// The margin is by default a tenth of what is left, at most 100 ms
/// ([`margin`](Self::margin) sets a fixed one). With neither a deadline nor a context, the
/// request is sent unchanged.
///
/// The errors are `PropagateError<Infallible>`: downcast with
/// `error.downcast_ref::<PropagateError<Infallible>>()` after matching `Error::Middleware`.
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use std::time::{Duration, Instant};
/// use shared_headers::client::PropagateError;
/// use shared_headers::client::reqwest::PropagateMiddleware;
/// use shared_headers::context::RequestScope;
/// use shared_headers::deadline::{BudgetHeader, Deadline, DeadlineSource};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::builder().no_proxy().build().unwrap())
///     .with(PropagateMiddleware::new(BudgetHeader::grpc_timeout()))
///     .build();
/// // Nothing left: nothing is sent (the address is never contacted).
/// let spent = Deadline::at(Instant::now(), DeadlineSource::Server);
/// let call = RequestScope::new().deadline(spent).scope(client.get("http://127.0.0.1:9/").send());
/// let err = call.await.unwrap_err();
/// let reqwest_middleware::Error::Middleware(err) = err else { panic!("{err}") };
/// let err = err.downcast_ref::<PropagateError<Infallible>>().unwrap();
/// assert_eq!(err, &PropagateError::Exhausted(spent));
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a middleware does nothing until it is added to a client (`ClientBuilder::with`)"]
pub struct PropagateMiddleware {
    header: BudgetHeader,
    /// `None`: the default rule.
    margin: Option<Duration>,
    /// The client's own timeout, as the user told it (a middleware cannot read it).
    client_timeout: Option<Duration>,
}

impl PropagateMiddleware {
    /// A middleware that writes the remaining budget in `header`, with the default margin (a
    /// tenth of what is left, at most 100 ms; see [`PropagateLayer`](super::PropagateLayer)
    /// for why).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::reqwest::PropagateMiddleware;
    /// # use shared_headers::deadline::BudgetHeader;
    /// let middleware = PropagateMiddleware::new(BudgetHeader::connect_timeout_ms());
    /// assert_eq!(middleware.header().name(), "connect-timeout-ms");
    /// ```
    pub fn new(header: BudgetHeader) -> Self {
        PropagateMiddleware {
            header,
            margin: None,
            client_timeout: None,
        }
    }

    /// Tells the middleware the client's own timeout (what `reqwest::ClientBuilder::timeout`
    /// was given), which a middleware cannot read. With it, a request without a timeout of its
    /// own gets the shorter of this and the deadline's cut as its reqwest timeout, which bounds
    /// the reading of the body too; without it, the deadline bounds only the wait for the
    /// response head (the client's timeout still bounds the rest).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use shared_headers::client::reqwest::PropagateMiddleware;
    /// # use shared_headers::deadline::BudgetHeader;
    /// let timeout = Duration::from_secs(30);
    /// let client = reqwest::Client::builder().timeout(timeout).no_proxy().build().unwrap();
    /// let middleware = PropagateMiddleware::new(BudgetHeader::grpc_timeout()).client_timeout(timeout);
    /// # let _ = (client, middleware);
    /// ```
    pub fn client_timeout(mut self, timeout: Duration) -> Self {
        self.client_timeout = Some(timeout);
        self
    }

    /// Keeps a fixed `margin` of the remaining time for the answer to come back, instead of
    /// the default rule.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use shared_headers::client::reqwest::PropagateMiddleware;
    /// # use shared_headers::deadline::BudgetHeader;
    /// let middleware = PropagateMiddleware::new(BudgetHeader::grpc_timeout()).margin(Duration::from_millis(3));
    /// # drop(middleware);
    /// ```
    pub fn margin(mut self, margin: Duration) -> Self {
        self.margin = Some(margin);
        self
    }

    /// The margin a request with `remaining` left is sent with: the fixed one, or a tenth of
    /// `remaining`, at most 100 ms.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use shared_headers::client::reqwest::PropagateMiddleware;
    /// # use shared_headers::deadline::BudgetHeader;
    /// let middleware = PropagateMiddleware::new(BudgetHeader::grpc_timeout());
    /// assert_eq!(middleware.margin_for(Duration::from_secs(1)), Duration::from_millis(100));
    /// ```
    pub fn margin_for(&self, remaining: Duration) -> Duration {
        margin_for(self.margin, remaining)
    }

    /// The header the budget is written in.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::reqwest::PropagateMiddleware;
    /// # use shared_headers::deadline::BudgetHeader;
    /// let middleware = PropagateMiddleware::new(BudgetHeader::grpc_timeout());
    /// assert_eq!(middleware.header(), &BudgetHeader::grpc_timeout());
    /// ```
    pub fn header(&self) -> &BudgetHeader {
        &self.header
    }
}

#[async_trait::async_trait]
impl Middleware for PropagateMiddleware {
    async fn handle(
        &self,
        mut request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let (deadline, context) = in_scope(extensions);
        let Some(deadline) = deadline else {
            apply_context(context, request.headers_mut());
            return next.run(request, extensions).await;
        };
        let Some(budget) = budget_for(&deadline, self.margin, &self.header) else {
            return Err(reqwest_middleware::Error::middleware(PropagateError::<
                Infallible,
            >::Exhausted(
                deadline
            )));
        };
        // The budget first: a context that captured the budget header's name cannot replace it.
        set_budget(request.headers_mut(), &self.header, budget.budget);
        apply_context(context, request.headers_mut());
        // A timeout the request has, or the client's as the user told it, is known: the
        // request's timeout becomes the shorter of it and the cut, which bounds the body too
        // (reqwest's timeout error, ours when the cut was the shorter). Without either, the
        // cut only races the call (to the head): setting the request's timeout would replace
        // the client's, which a middleware cannot read.
        let to_cut = budget
            .cut
            .saturating_duration_since(std::time::Instant::now());
        if let Some(known) = request.timeout().copied().or(self.client_timeout) {
            let ours = to_cut < known;
            *request.timeout_mut() = Some(known.min(to_cut));
            return match next.run(request, extensions).await {
                Err(reqwest_middleware::Error::Reqwest(e)) if ours && e.is_timeout() => {
                    Err(reqwest_middleware::Error::middleware(PropagateError::<
                        Infallible,
                    >::Elapsed(
                        deadline
                    )))
                }
                other => other,
            };
        }
        match tokio::time::timeout_at(budget.cut.into(), next.run(request, extensions)).await {
            Ok(result) => result,
            Err(_) => Err(reqwest_middleware::Error::middleware(PropagateError::<
                Infallible,
            >::Elapsed(
                deadline
            ))),
        }
    }
}
