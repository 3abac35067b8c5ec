//! One retry, on a fresh connection, of a request whose connection failed under it, when the
//! request may be sent twice.

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Method, Request};
use tower_layer::Layer;
use tower_service::Service;

use super::propagate::{Rebudget, take_rebudget};

// The hand-off of a body that cannot be replayed between the two sends: `pub` only in the loom
// world, for the model in `loom-tests/tests/conn_retry.rs`.
#[cfg(any(feature = "tonic", shared_headers_loom))]
pub mod handoff;
#[cfg(feature = "tonic")]
mod take_back;
#[cfg(feature = "tonic")]
use take_back::Slot;
/// Without tonic, no body is taken back.
#[cfg(not(feature = "tonic"))]
type Slot = ();
mod error;
mod kept;

pub use error::ConnRetryError;
use kept::{Kept, KeptBody};

use super::replay::ReplayBody;
use crate::deadline::Deadline;
use crate::sync::Mutex;

/// A [`Layer`] that sends a request **once more, on a fresh connection**, when the client
/// below failed it and the request may be sent twice: its method is idempotent (`GET`,
/// `HEAD`, `PUT`, `DELETE`, `OPTIONS`, `TRACE`) and its body can be replayed ([`ReplayBody`]).
/// If that retry lands on another pooled connection that died at the same fault, it is sent
/// once again (at most two retries).
///
/// A request **never written**, whatever its method, is sent again up to twice without
/// counting as the retry: its connection could not be opened (hyper-util's connect error,
/// tonic's `ConnectError`), or a closing connection refused it (hyper's "canceled", as a tonic
/// `Channel` reports it before it has reconnected), or the connection's HTTP/2 health verdict
/// failed it before its `HEADERS` were written while every stream written was one its caller
/// cancelled (an error whose message says "none of its open requests was written", from
/// `conn::HealthConnector`); features `hyper-util` and `tonic` for the first two. A tonic
/// message body, which cannot be replayed, is taken back for this when the client dropped it
/// unread. A written request that is not idempotent is not sent again (it may have been
/// processed): its error is [`ConnRetryError::NotIdempotent`], which says so; the other
/// variants say why a request was not sent again.
///
/// Put it **right above the client** (hyper-util's `Client`, a tonic `Channel`), below
/// [`PropagateLayer`](crate::client::PropagateLayer): every error of the service inside is
/// taken as a failed connection (a client's answers, `5xx` included, are responses, not
/// errors), and the retry stays within the deadline, which `PropagateLayer` cuts. A resend
/// under `PropagateLayer` carries the budget left when it is sent (its header rewritten), not
/// the first send's; no resend starts once nothing is left. Without `PropagateLayer` above, the
/// [`Deadline`] is the request's extension, else [`Deadline::current`] when the resend would
/// start, and no resend starts once it has passed. Every error means a protocol mismatch
/// too: an `http://` hyper-util client without `http2_only` against an HTTP/2-only server fails
/// each request ("received unexpected message from connection") and each is sent once more on
/// a new connection, failing the same way; the error's [`source`](std::error::Error::source)
/// chain names the client's own error.
///
/// The connection that failed is not the one the retry gets: a connection whose I/O failed, or
/// that [`HealthConnector`](crate::conn)'s ping found silent, is closed by the client and out of
/// its pool before the error reaches this layer (the fault matrix in
/// [`docs::outgoing`](crate::docs::outgoing) shows it).
///
/// **The resend goes through a clone made when the layer wrapped the client**, not through the
/// handle the request was called on: the layer keeps one spare clone of the client, shared by
/// the layer's own clones, and a resend clones it and polls that ready. hyper-util's `Client`,
/// a tonic `Channel` and reqwest's `Client` lose nothing by it: their clones share all their
/// state (the pool, the connection, the settings), so the resend sees what the caller's handle
/// learned since. A client that keeps state per handle (a value its `poll_ready` or `call`
/// changes in the handle itself) resends with the state it had when it was wrapped: do not wrap
/// such a client, or make its clones share that state. (A clone of the caller's handle per
/// request instead costs about 500 instructions more per request on a healthy connection:
/// [`docs::outgoing`](crate::docs::outgoing).)
///
/// Cost on a healthy request: the request keeps a copy of its head and body for a resend until
/// the answer comes, if its body can be replayed ([`ReplayBody`]; a `Full<Bytes>` body is a
/// reference count); with feature `hyper-util` or `tonic` every such request does (one never
/// written is sent again whatever its method), without them only an idempotent one. Up to two
/// header values are kept without a header map; each header name or value whose bytes were
/// copied in (`HeaderValue::from_str`, a name outside `http`'s standard set built from a
/// string) costs one allocation on its first copy (`Bytes` makes its buffer shared), one made
/// with `from_static` none; three or more copy the map (two allocations more), and
/// non-empty extensions are copied (three allocations for one value: their box, their table,
/// the value's box). A tonic message body is put where it can be taken back: two allocations
/// (its slot and the wrapper the client reads). Per request, exactly (`tests/s6_44_review.rs`):
/// a `GET` without headers, or with two static ones, 0; a `GET` with two headers built from
/// strings, 4; a gRPC call with `content-type` and `te` built from strings, 4; a gRPC call as
/// tonic's generated clients make it (static headers, the `GrpcMethod` extension), 5.
/// The spare costs a reference count per request.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use http::{Method, Request, Response};
/// use shared_headers::client::{ConnRetryError, ConnRetryLayer};
/// use tower::{ServiceBuilder, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// // A client whose first connection dies under the request.
/// let calls = Arc::new(AtomicUsize::new(0));
/// let client = ServiceBuilder::new().layer(ConnRetryLayer::new()).service_fn({
///     let calls = calls.clone();
///     move |_: Request<String>| {
///         let first = calls.fetch_add(1, Ordering::Relaxed) == 0;
///         async move {
///             if first {
///                 Err(std::io::Error::from(std::io::ErrorKind::ConnectionReset))
///             } else {
///                 Ok(Response::new("fresh connection"))
///             }
///         }
///     }
/// });
/// let get = Request::get("http://api/").body(String::new()).unwrap();
/// assert_eq!(*client.clone().oneshot(get).await.unwrap().body(), "fresh connection");
///
/// // A POST is not sent again.
/// calls.store(0, Ordering::Relaxed);
/// let post = Request::post("http://api/").body(String::from("pay")).unwrap();
/// let err = client.oneshot(post).await.unwrap_err();
/// assert!(matches!(err, ConnRetryError::NotIdempotent(_)));
/// # }
/// ```
#[derive(Debug, Clone, Default)]
#[must_use = "a layer does nothing until it wraps a service (`ServiceBuilder::layer`, `Layer::layer`)"]
pub struct ConnRetryLayer {
    _private: (),
}

impl ConnRetryLayer {
    /// The layer.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::ConnRetryLayer;
    /// let layer = ConnRetryLayer::new();
    /// # let _ = layer;
    /// ```
    pub fn new() -> Self {
        Self::default()
    }
}

impl<S: Clone> Layer<S> for ConnRetryLayer {
    type Service = ConnRetry<S>;

    fn layer(&self, inner: S) -> ConnRetry<S> {
        ConnRetry::new(inner)
    }
}

/// The service of [`ConnRetryLayer`], which documents what it does.
///
/// # Examples
///
/// ```
/// # use shared_headers::client::ConnRetryLayer;
/// # use tower::Layer;
/// let service = ConnRetryLayer::new().layer(7);
/// assert_eq!(*service.get_ref(), 7);
/// assert_eq!(service.into_inner(), 7);
/// ```
#[derive(Clone)]
pub struct ConnRetry<S> {
    inner: S,
    // A clone of the service as the layer got it, shared by every clone of the layer's
    // service: a resend clones it then (a rare path), so a healthy request pays a reference
    // count, not a clone of the client (hyper-util's `Client` is a dozen fields and counts).
    spare: Arc<Mutex<S>>,
}

impl<S: fmt::Debug> fmt::Debug for ConnRetry<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnRetry")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S: Clone> ConnRetry<S> {
    fn new(inner: S) -> Self {
        let spare = Arc::new(Mutex::new(inner.clone()));
        Self { inner, spare }
    }
}

impl<S> ConnRetry<S> {
    /// The inner service.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::ConnRetryLayer;
    /// # use tower::Layer;
    /// assert_eq!(*ConnRetryLayer::new().layer(1).get_ref(), 1);
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Gives up the layer and returns the inner service.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::ConnRetryLayer;
    /// # use tower::Layer;
    /// assert_eq!(ConnRetryLayer::new().layer(1).into_inner(), 1);
    /// ```
    pub fn into_inner(self) -> S {
        self.inner
    }
}

/// Whether `method` may be sent twice (RFC 9110, 9.2.2; `POST`, `PATCH` and `CONNECT` may not).
#[inline]
fn idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::PUT | Method::DELETE | Method::OPTIONS | Method::TRACE
    )
}

impl<S, B> Service<Request<B>> for ConnRetry<S>
where
    S: Service<Request<B>> + Clone,
    S::Error: StdError + 'static,
    B: ReplayBody + 'static,
{
    type Response = S::Response;
    type Error = ConnRetryError<S::Error>;
    type Future = ConnRetryFuture<S, B>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(ConnRetryError::Service)
    }

    #[cfg_attr(not(feature = "tonic"), allow(unused_mut))]
    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        let idempotent = idempotent(request.method());
        // A request never written (its connection could not be opened, or refused it) is sent
        // again whatever its method, so every request keeps a copy when the client can say so
        // (features `hyper-util`, `tonic`); without them a request that is not idempotent is
        // never sent again and keeps none. The resend goes through a clone of the spare, polled
        // ready when it is needed, with the budget left then.
        let mut copy = if idempotent || cfg!(any(feature = "hyper-util", feature = "tonic")) {
            Kept::of(&request)
        } else {
            None
        };
        let mut slot: Option<Slot> = None;
        // A tonic message stream: taken back if the client drops it unread.
        #[cfg(feature = "tonic")]
        if copy.is_none() {
            if let Some(taken) = take_back::arm(&mut request) {
                copy = Some(Kept::head(&request, None));
                slot = Some(taken);
            }
        }
        let (spare, rebudget) = match copy {
            Some(_) => (Some(Arc::clone(&self.spare)), take_rebudget()),
            None => (None, None),
        };
        ConnRetryFuture {
            attempt: Some(self.inner.call(request)),
            spare,
            service: None,
            copy,
            slot,
            rebudget,
            idempotent,
            retried: 0,
            resent: 0,
        }
    }
}

/// How many times a written idempotent request is sent again: once, and once more if the retry
/// landed on another pooled connection that failed at the same fault (a pool of connections
/// closed together, each failing the first request it carries).
const RETRIES: u8 = 2;

/// How many times a request never written (its connection could not be opened, or a closing
/// connection refused it) is sent again, besides the one retry: a closing connection can refuse
/// the resend too, before the client has replaced it.
const RESENDS: u8 = 2;

pin_project_lite::pin_project! {
    /// The future of [`ConnRetry`]: the first attempt, then, on an error, the resend.
    #[must_use = "futures do nothing unless polled"]
    pub struct ConnRetryFuture<S, B>
    where
        S: Service<Request<B>>,
    {
        #[pin]
        attempt: Option<S::Future>,
        // The spare the resend's service is cloned from, the resend's service once it is
        // needed (boxed: a rare path, and the future stays small), and the copy it sends
        // (replayable bodies).
        spare: Option<Arc<Mutex<S>>>,
        service: Option<Box<S>>,
        copy: Option<Kept<B>>,
        // A tonic body the copy reads only if the first send never read it.
        slot: Option<Slot>,
        // How `PropagateLayer` above wrote the budget: the resend carries what is left then.
        rebudget: Option<Rebudget>,
        idempotent: bool,
        retried: u8,
        resent: u8,
    }
}

impl<S, B> fmt::Debug for ConnRetryFuture<S, B>
where
    S: Service<Request<B>>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnRetryFuture")
            .field("retried", &self.retried)
            .field("resent", &self.resent)
            .finish_non_exhaustive()
    }
}

impl<S, B> Future for ConnRetryFuture<S, B>
where
    S: Service<Request<B>> + Clone,
    S::Error: StdError + 'static,
    B: ReplayBody + 'static,
{
    type Output = Result<S::Response, ConnRetryError<S::Error>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            if let Some(attempt) = this.attempt.as_mut().as_pin_mut() {
                let err = match attempt.poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Ok(response)) => return Poll::Ready(Ok(response)),
                    Poll::Ready(Err(err)) => err,
                };
                this.attempt.set(None);
                let unwritten = never_written(&err);
                let sent_again = *this.retried > 0 || *this.resent > 0;
                // The error when the request is not sent again now.
                let fail = |err| {
                    Poll::Ready(Err(if sent_again {
                        ConnRetryError::Retried(err)
                    } else if !unwritten && !*this.idempotent {
                        ConnRetryError::NotIdempotent(err)
                    } else {
                        ConnRetryError::NotReplayable(err)
                    }))
                };
                let Some(copy) = this.copy.as_mut() else {
                    return fail(err);
                };
                let resend = unwritten && *this.resent < RESENDS;
                let retry = !unwritten && *this.idempotent && *this.retried < RETRIES;
                if !resend && !retry {
                    return fail(err);
                }
                #[cfg(feature = "tonic")]
                if this
                    .slot
                    .as_ref()
                    .is_some_and(|slot| !take_back::reserve(slot))
                {
                    // The first send's client read the body: it cannot be sent again.
                    return fail(err);
                }
                let written = match this.rebudget.as_ref() {
                    Some(rebudget) => rebudget.apply(copy.headers_mut()).is_some(),
                    None => !copy
                        .extensions
                        .get::<Deadline>()
                        .copied()
                        .or_else(Deadline::current)
                        .is_some_and(|deadline| deadline.is_expired()),
                };
                if !written {
                    return Poll::Ready(Err(ConnRetryError::Expired(err)));
                }
                // The error is dropped: the next attempt's outcome is the answer.
                if resend {
                    *this.resent += 1;
                } else {
                    *this.retried += 1;
                }
                if this.service.is_none() {
                    if let Some(spare) = this.spare.as_ref() {
                        *this.service = Some(Box::new(spare.lock().clone()));
                    }
                }
            }
            let Some(service) = this.service.as_mut() else {
                // Polled after completion.
                return Poll::Pending;
            };
            match service.poll_ready(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(err)) => {
                    *this.service = None;
                    return Poll::Ready(Err(ConnRetryError::NotReady(err)));
                }
                Poll::Ready(Ok(())) => {
                    let request = match this.copy.as_ref().and_then(Kept::request) {
                        Some(request) => request,
                        // Not replayable twice: this is the last send.
                        None => match this.copy.take().and_then(|mut copy| {
                            let body = std::mem::replace(&mut copy.body, KeptBody(None))
                                .take_or(this.slot.as_ref())?;
                            Some(copy.into_request(body))
                        }) {
                            Some(request) => request,
                            None => return Poll::Pending,
                        },
                    };
                    this.attempt.set(Some(service.call(request)));
                }
            }
        }
    }
}

/// Whether `err` says the request was never written: its connection could not be opened
/// (hyper-util's connect error, tonic's `ConnectError`), or a closing connection refused it
/// (hyper's "canceled"), or a connection found dead failed it before any of its requests still
/// wanted was written (the words of `crate::error::NOT_WRITTEN` in an error of the chain: h2
/// keeps only an I/O error's message). The first two need features `hyper-util` and `tonic`.
fn never_written(err: &(dyn StdError + 'static)) -> bool {
    let mut next = Some(err);
    while let Some(e) = next {
        #[cfg(feature = "hyper-util")]
        if e.downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_canceled)
            || e.downcast_ref::<hyper_util::client::legacy::Error>()
                .is_some_and(hyper_util::client::legacy::Error::is_connect)
        {
            return true;
        }
        #[cfg(feature = "tonic")]
        if e.is::<tonic::ConnectError>() {
            return true;
        }
        // The connection failed before any of its live requests was written (the `conn`
        // room's verdict on a connection whose open streams were all cancelled).
        if crate::error::is_not_written(e) {
            return true;
        }
        next = e.source();
    }
    false
}
