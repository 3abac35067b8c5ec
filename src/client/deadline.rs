//! Outgoing requests inherit what is left of the deadline in scope, as a tower layer.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use http::{HeaderMap, Request};
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use crate::deadline::BudgetHeader;

/// What a request under a deadline is sent with: the budget it may use and the instant to cut
/// it at. `None`: nothing left (with the margin), do not send.
pub(crate) fn budget_for(
    deadline: &crate::deadline::Deadline,
    margin: Duration,
    header: &BudgetHeader,
) -> Option<(Duration, Instant)> {
    let now = Instant::now();
    let budget = deadline.remaining_at(now).saturating_sub(margin);
    // A budget the header would write as zero is nothing: the next hop would refuse it.
    if budget < header.resolution() {
        return None;
    }
    Some((budget, now + budget))
}

/// Sets the budget header to `budget`, unless the request already carries a valid smaller one
/// (the smaller wins: a caller may tighten its own call, never extend the deadline).
pub(crate) fn set_budget(headers: &mut HeaderMap, header: &BudgetHeader, budget: Duration) {
    if let Some(Ok(own)) = header.parse_from(headers) {
        if own <= budget {
            return;
        }
    }
    headers.insert(header.name().clone(), header.encode(budget));
}

/// A [`Layer`] that sends each outgoing request with what is left of its deadline.
///
/// The deadline of a request is its [`Deadline`](crate::deadline::Deadline) extension if it has one, else
/// [`Deadline::current`](crate::deadline::Deadline::current) when the service is called (the server layer sets it around each
/// poll of the handler; see [`deadline`](crate::deadline) for spawned tasks). Then:
///
/// * **no deadline:** the request is sent unchanged, without a timer (one thread-local read
///   and one extension lookup);
/// * **nothing left** after the [`margin`](Self::margin) (less than the header can express:
///   1 ms for the millisecond formats): the request is **not sent**, and the call ends at once
///   with [`DeadlineError::Exhausted`];
/// * **otherwise** the budget header is set to what is left minus the margin (a smaller valid
///   value the request already carries is kept), and the inner call is cut when that budget is
///   spent, with [`DeadlineError::Elapsed`]. The cut bounds the inner future (for hyper's
///   client: until the response head arrives), not the reading of the body.
///
/// The margin defaults to **zero**, as gRPC's own deadline propagation sends the time that is
/// left: what the answer needs to travel back depends on the hop (a microsecond on loopback,
/// tens of milliseconds across regions), so no default fits; set it for yours.
///
/// # Panics
///
/// Like `tokio::time::sleep`, calling the service with a deadline outside a tokio runtime with
/// its time driver enabled panics.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use http::{Request, Response};
/// use shared_headers::client::{DeadlineError, DeadlineLayer};
/// use shared_headers::deadline::{BudgetHeader, Deadline, DeadlineSource};
/// use tower::{ServiceBuilder, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// // Any tower client; this one echoes the budget it was given.
/// let client = ServiceBuilder::new()
///     .layer(DeadlineLayer::new(BudgetHeader::grpc_timeout()))
///     .service_fn(|req: Request<()>| async move {
///         let budget = BudgetHeader::grpc_timeout().parse_from(req.headers());
///         Ok::<_, std::convert::Infallible>(Response::new(budget))
///     });
///
/// // Outside any deadline: sent unchanged.
/// let response = client.clone().oneshot(Request::new(())).await?;
/// assert_eq!(*response.body(), None);
///
/// // Under a deadline: the budget travels on.
/// let deadline = Deadline::after(Duration::from_millis(200), DeadlineSource::Server).unwrap();
/// let response = deadline.scope(client.clone().oneshot(Request::new(()))).await?;
/// let sent = response.into_body().unwrap()?;
/// assert!(sent <= Duration::from_millis(200) && sent > Duration::from_millis(100));
///
/// // Nothing left: not sent.
/// let spent = Deadline::at(std::time::Instant::now(), DeadlineSource::Caller);
/// let result = spent.scope(client.oneshot(Request::new(()))).await;
/// assert!(matches!(result, Err(DeadlineError::Exhausted(d)) if d == spent));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a layer does nothing until it wraps a service (`ServiceBuilder::layer`, `Layer::layer`)"]
pub struct DeadlineLayer {
    header: BudgetHeader,
    margin: Duration,
}

impl DeadlineLayer {
    /// A layer that writes the remaining budget in `header`, with no margin.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use shared_headers::client::DeadlineLayer;
    /// # use shared_headers::deadline::BudgetHeader;
    /// let layer = DeadlineLayer::new(BudgetHeader::envoy_expected_rq_timeout_ms());
    /// assert_eq!(layer.header().name(), "x-envoy-expected-rq-timeout-ms");
    /// assert_eq!(layer.get_margin(), Duration::ZERO);
    /// ```
    pub fn new(header: BudgetHeader) -> Self {
        DeadlineLayer {
            header,
            margin: Duration::ZERO,
        }
    }

    /// Keeps `margin` of the remaining time for the answer to come back: a request is sent
    /// with (and cut at) what is left minus `margin`, and not sent if that is nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use shared_headers::client::DeadlineLayer;
    /// # use shared_headers::deadline::BudgetHeader;
    /// let layer = DeadlineLayer::new(BudgetHeader::grpc_timeout()).margin(Duration::from_millis(5));
    /// assert_eq!(layer.get_margin(), Duration::from_millis(5));
    /// ```
    pub fn margin(mut self, margin: Duration) -> Self {
        self.margin = margin;
        self
    }

    /// The margin (see [`margin`](Self::margin)). Named like `std::process::Command`'s getters:
    /// the plain name is the builder's setter.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::DeadlineLayer;
    /// # use shared_headers::deadline::BudgetHeader;
    /// assert!(DeadlineLayer::new(BudgetHeader::grpc_timeout()).get_margin().is_zero());
    /// ```
    pub fn get_margin(&self) -> Duration {
        self.margin
    }

    /// The header the budget is written in.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::DeadlineLayer;
    /// # use shared_headers::deadline::BudgetHeader;
    /// let layer = DeadlineLayer::new(BudgetHeader::connect_timeout_ms());
    /// assert_eq!(layer.header(), &BudgetHeader::connect_timeout_ms());
    /// ```
    pub fn header(&self) -> &BudgetHeader {
        &self.header
    }
}

impl<S> Layer<S> for DeadlineLayer {
    type Service = Deadline<S>;

    fn layer(&self, inner: S) -> Deadline<S> {
        Deadline {
            inner,
            layer: self.clone(),
        }
    }
}

/// A client [`Service`] that sends each request with what is left of its deadline. Made by
/// [`DeadlineLayer`] (or [`Deadline::new`]), which documents what it does.
///
/// Not to be confused with the deadline itself, [`deadline::Deadline`](crate::deadline::Deadline):
/// this is the service that propagates it (`client::Deadline`, as `tower::timeout::Timeout` is
/// the service that applies a timeout).
///
/// # Errors
///
/// [`DeadlineError::Exhausted`] (not sent), [`DeadlineError::Elapsed`] (cut), or
/// [`DeadlineError::Service`] with the inner service's error.
///
/// # Examples
///
/// ```
/// # use shared_headers::client::DeadlineLayer;
/// # use shared_headers::deadline::BudgetHeader;
/// use tower::Layer;
/// let service = DeadlineLayer::new(BudgetHeader::grpc_timeout()).layer(7);
/// assert_eq!(*service.get_ref(), 7);
/// assert_eq!(service.into_inner(), 7);
/// ```
#[derive(Debug, Clone)]
pub struct Deadline<S> {
    inner: S,
    layer: DeadlineLayer,
}

impl<S> Deadline<S> {
    /// Wraps `inner`, writing the remaining budget in `header`, with no margin: the same as
    /// `DeadlineLayer::new(header).layer(inner)`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::Deadline;
    /// # use shared_headers::deadline::BudgetHeader;
    /// let service = Deadline::new(7, BudgetHeader::grpc_timeout());
    /// assert_eq!(*service.get_ref(), 7);
    /// ```
    pub fn new(inner: S, header: BudgetHeader) -> Self {
        DeadlineLayer::new(header).layer(inner)
    }

    /// The inner service, mutably.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::Deadline;
    /// # use shared_headers::deadline::BudgetHeader;
    /// let mut service = Deadline::new(7, BudgetHeader::grpc_timeout());
    /// *service.get_mut() += 1;
    /// assert_eq!(service.into_inner(), 8);
    /// ```
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::DeadlineLayer;
    /// # use shared_headers::deadline::BudgetHeader;
    /// use tower::Layer;
    /// let service = DeadlineLayer::new(BudgetHeader::grpc_timeout()).layer("inner");
    /// assert_eq!(*service.get_ref(), "inner");
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Gives up the layer and returns the inner service.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::DeadlineLayer;
    /// # use shared_headers::deadline::BudgetHeader;
    /// use tower::Layer;
    /// let service = DeadlineLayer::new(BudgetHeader::grpc_timeout()).layer(1);
    /// assert_eq!(service.into_inner(), 1);
    /// ```
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl Deadline<()> {
    /// A [`DeadlineLayer`] writing the remaining budget in `header` (tower-http's
    /// `Service::layer` convention; the same as [`DeadlineLayer::new`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::Deadline;
    /// # use shared_headers::deadline::BudgetHeader;
    /// use tower::ServiceBuilder;
    /// let client = ServiceBuilder::new()
    ///     .layer(Deadline::layer(BudgetHeader::grpc_timeout()))
    ///     .service(tower::service_fn(|()| async { Ok::<_, std::convert::Infallible>(()) }));
    /// # let _ = client;
    /// ```
    pub fn layer(header: BudgetHeader) -> DeadlineLayer {
        DeadlineLayer::new(header)
    }
}

impl<S, B> Service<Request<B>> for Deadline<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = DeadlineError<S::Error>;
    type Future = DeadlineFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(DeadlineError::Service)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        let deadline = match request.extensions().get::<crate::deadline::Deadline>() {
            Some(deadline) => Some(*deadline),
            None => crate::deadline::Deadline::current(),
        };
        let Some(deadline) = deadline else {
            return DeadlineFuture {
                state: State::Unbounded {
                    future: self.inner.call(request),
                },
            };
        };
        let Some((budget, cut)) = budget_for(&deadline, self.layer.margin, &self.layer.header)
        else {
            return DeadlineFuture {
                state: State::Exhausted { deadline },
            };
        };
        set_budget(request.headers_mut(), &self.layer.header, budget);
        DeadlineFuture {
            state: State::Bounded {
                future: self.inner.call(request),
                sleep: tokio::time::sleep_until(cut.into()),
                deadline,
            },
        }
    }
}

pin_project! {
    /// The response future of [`Deadline`].
    ///
    /// # Examples
    ///
    /// ```
    /// use http::{Request, Response};
    /// use shared_headers::client::{Deadline, DeadlineFuture};
    /// use shared_headers::deadline::BudgetHeader;
    /// use tower::{Service, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    /// let ok = tower::service_fn(|_: Request<()>| async { Ok::<_, std::io::Error>(Response::new(())) });
    /// let mut service = Deadline::new(ok, BudgetHeader::grpc_timeout());
    /// // Outside any deadline: the inner call, unchanged.
    /// let future: DeadlineFuture<_> = service.ready().await?.call(Request::new(()));
    /// future.await?;
    /// # Ok(())
    /// # }
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct DeadlineFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        Unbounded { #[pin] future: F },
        Bounded { #[pin] future: F, #[pin] sleep: tokio::time::Sleep, deadline: crate::deadline::Deadline },
        Exhausted { deadline: crate::deadline::Deadline },
    }
}

impl<F> fmt::Debug for DeadlineFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeadlineFuture").finish_non_exhaustive()
    }
}

impl<F, T, E> Future for DeadlineFuture<F>
where
    F: Future<Output = Result<T, E>>,
{
    type Output = Result<T, DeadlineError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Unbounded { future } => future.poll(cx).map_err(DeadlineError::Service),
            StateProj::Bounded {
                future,
                sleep,
                deadline,
            } => {
                if let Poll::Ready(result) = future.poll(cx) {
                    return Poll::Ready(result.map_err(DeadlineError::Service));
                }
                ready!(sleep.poll(cx));
                Poll::Ready(Err(DeadlineError::Elapsed(*deadline)))
            }
            StateProj::Exhausted { deadline } => {
                Poll::Ready(Err(DeadlineError::Exhausted(*deadline)))
            }
        }
    }
}

/// The error of [`Deadline`] and of the reqwest
/// `DeadlineMiddleware`: the deadline left nothing, it cut the call, or the inner service
/// failed.
///
/// An enum over the inner error rather than a boxed error (as `tower::timeout` returns): the
/// inner service's error keeps its type, and the deadline cases carry the [`Deadline`](crate::deadline::Deadline), so a
/// handler can tell its own deadline ([`DeadlineSource::Server`](crate::deadline::DeadlineSource))
/// from the caller's. The reqwest middleware returns `DeadlineError<Infallible>` inside
/// `reqwest_middleware::Error::Middleware` (its inner errors stay reqwest's).
///
/// # Examples
///
/// ```
/// use std::time::Instant;
/// use shared_headers::client::DeadlineError;
/// use shared_headers::deadline::{Deadline, DeadlineSource};
///
/// let deadline = Deadline::at(Instant::now(), DeadlineSource::Server);
/// let err: DeadlineError<std::io::Error> = DeadlineError::Exhausted(deadline);
/// assert_eq!(err.deadline(), Some(deadline));
/// assert_eq!(err.to_string(), "deadline exhausted: the request was not sent");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeadlineError<E> {
    /// Nothing was left of the deadline (after the margin): the request was not sent.
    Exhausted(crate::deadline::Deadline),
    /// The request was sent, and its budget ran out before the answer came.
    Elapsed(crate::deadline::Deadline),
    /// The inner service failed.
    Service(E),
}

impl<E> DeadlineError<E> {
    /// The deadline that stopped the request; `None` for [`Service`](Self::Service).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::DeadlineError;
    /// let err = DeadlineError::Service("refused");
    /// assert_eq!(err.deadline(), None);
    /// ```
    pub fn deadline(&self) -> Option<crate::deadline::Deadline> {
        match self {
            DeadlineError::Exhausted(d) | DeadlineError::Elapsed(d) => Some(*d),
            DeadlineError::Service(_) => None,
        }
    }

    /// The inner service's error; `None` when the deadline stopped the request.
    ///
    /// Through a stack of this crate's layers, chain the calls (each layer's error has one),
    /// or find the service's error by its type in the [`source`](std::error::Error::source)
    /// chain (see [Errors](crate::client#errors)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::DeadlineError;
    /// let err = DeadlineError::Service(std::io::Error::other("upstream down"));
    /// assert_eq!(err.service_error().unwrap().to_string(), "upstream down");
    /// ```
    pub fn service_error(&self) -> Option<&E> {
        match self {
            DeadlineError::Service(e) => Some(e),
            _ => None,
        }
    }

    /// The inner service's error, by value; `None` when the deadline stopped the request.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::DeadlineError;
    /// let err = DeadlineError::Service(std::io::Error::other("upstream down"));
    /// assert_eq!(err.into_service_error().unwrap().kind(), std::io::ErrorKind::Other);
    /// ```
    pub fn into_service_error(self) -> Option<E> {
        match self {
            DeadlineError::Service(e) => Some(e),
            _ => None,
        }
    }
}

/// Only this layer's words: the inner service's error is the [`source`](std::error::Error::source).
impl<E> fmt::Display for DeadlineError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeadlineError::Exhausted(_) => "deadline exhausted: the request was not sent",
            DeadlineError::Elapsed(_) => "deadline elapsed before the answer came",
            DeadlineError::Service(_) => "the service inside the deadline layer failed",
        })
    }
}

impl<E: std::error::Error + 'static> std::error::Error for DeadlineError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DeadlineError::Service(e) => Some(e),
            _ => None,
        }
    }
}
