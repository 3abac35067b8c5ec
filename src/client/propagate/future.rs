//! The response future of [`Propagate`].

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use http::Response;
use pin_project_lite::pin_project;

#[cfg(doc)]
use super::Propagate;
use super::error::PropagateError;
#[cfg(feature = "opentelemetry")]
pub(crate) use crate::client::span::Pending;

/// Without feature `opentelemetry` no call has a span: nothing to end.
#[cfg(not(feature = "opentelemetry"))]
pub(crate) struct Pending;

#[cfg(not(feature = "opentelemetry"))]
impl Pending {
    #[inline]
    pub(crate) fn none() -> Self {
        Pending
    }

    #[inline]
    #[allow(clippy::unused_self)]
    fn is_pending(&self) -> bool {
        false
    }

    #[inline]
    #[allow(clippy::unused_self)]
    fn end(&mut self, _status: Option<http::StatusCode>, _error: Option<&'static str>) {}

    #[inline]
    #[allow(clippy::unused_self)]
    fn end_head(&mut self, _status: http::StatusCode, _headers: &http::HeaderMap) {}
}

pin_project! {
    /// The response future of [`Propagate`].
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct PropagateFuture<F> {
        #[pin]
        state: State<F>,
        // The call's client span and duration point (with a tracer or a meter): ended when
        // the call ends, or `cancelled` when this future is dropped first.
        span: Pending,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        Unbounded { #[pin] future: F },
        Bounded {
            #[pin] future: F,
            #[pin] sleep: tokio::time::Sleep,
            // When the budget the next hop was told runs out.
            spent: Instant,
            deadline: crate::deadline::Deadline,
        },
        Exhausted { deadline: crate::deadline::Deadline },
    }
}

impl<F> fmt::Debug for PropagateFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PropagateFuture").finish_non_exhaustive()
    }
}

impl<F> PropagateFuture<F> {
    /// The inner call, with no timer.
    #[inline]
    pub(super) fn unbounded(future: F, span: Pending) -> Self {
        PropagateFuture {
            state: State::Unbounded { future },
            span,
        }
    }

    /// The inner call, cut when `sleep` ends, with [`PropagateError::Elapsed`]; an error of
    /// the inner call from `spent` on is [`PropagateError::Elapsed`] too.
    #[inline]
    pub(super) fn bounded(
        future: F,
        sleep: tokio::time::Sleep,
        spent: Instant,
        deadline: crate::deadline::Deadline,
        span: Pending,
    ) -> Self {
        PropagateFuture {
            state: State::Bounded {
                future,
                sleep,
                spent,
                deadline,
            },
            span,
        }
    }

    /// Nothing sent: ends at once with [`PropagateError::Exhausted`].
    #[inline]
    pub(super) fn exhausted(deadline: crate::deadline::Deadline, span: Pending) -> Self {
        PropagateFuture {
            state: State::Exhausted { deadline },
            span,
        }
    }
}

impl<F, R, E> Future for PropagateFuture<F>
where
    F: Future<Output = Result<Response<R>, E>>,
{
    type Output = Result<Response<R>, PropagateError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = ready!(poll_state(this.state, cx));
        // The call's span ends with its outcome: the answer's status, the inner error's type,
        // or `PropagateError` for a call not sent or cut at its deadline.
        if this.span.is_pending() {
            match &result {
                Ok(response) => this.span.end_head(response.status(), response.headers()),
                Err(PropagateError::Service(_)) => this.span.end(None, Some(error_type::<E>())),
                Err(_) => this.span.end(None, Some("PropagateError")),
            }
        }
        Poll::Ready(result)
    }
}

/// The type name of the inner service's error, as `error.type`.
#[inline]
fn error_type<E>() -> &'static str {
    #[cfg(feature = "opentelemetry")]
    {
        crate::client::span::type_path::<E>()
    }
    #[cfg(not(feature = "opentelemetry"))]
    {
        ""
    }
}

#[inline]
fn poll_state<F, T, E>(
    state: Pin<&mut State<F>>,
    cx: &mut Context<'_>,
) -> Poll<Result<T, PropagateError<E>>>
where
    F: Future<Output = Result<T, E>>,
{
    match state.project() {
        StateProj::Unbounded { future } => future.poll(cx).map_err(PropagateError::Service),
        StateProj::Bounded {
            future,
            sleep,
            spent,
            deadline,
        } => {
            if let Poll::Ready(result) = future.poll(cx) {
                // An error once the next hop's budget is spent is the deadline's: a timer
                // below that reads the budget header (tonic's `Channel`) or a hop that gave
                // up. An answer is the answer, whenever it comes.
                return Poll::Ready(result.map_err(|e| {
                    if Instant::now() >= *spent {
                        PropagateError::Elapsed(*deadline)
                    } else {
                        PropagateError::Service(e)
                    }
                }));
            }
            ready!(sleep.poll(cx));
            Poll::Ready(Err(PropagateError::Elapsed(*deadline)))
        }
        StateProj::Exhausted { deadline } => Poll::Ready(Err(PropagateError::Exhausted(*deadline))),
    }
}
