//! The response future of [`Propagate`].

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use pin_project_lite::pin_project;

#[cfg(doc)]
use super::Propagate;
use super::error::PropagateError;

pin_project! {
    /// The response future of [`Propagate`].
    ///
    /// # Examples
    ///
    /// ```
    /// use http::{Request, Response};
    /// use shared_headers::client::{Propagate, PropagateFuture};
    /// use shared_headers::deadline::BudgetHeader;
    /// use tower::{Service, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    /// let ok = tower::service_fn(|_: Request<()>| async { Ok::<_, std::io::Error>(Response::new(())) });
    /// let mut service = Propagate::new(ok, BudgetHeader::grpc_timeout());
    /// // Outside any deadline: the inner call, unchanged.
    /// let future: PropagateFuture<_> = service.ready().await?.call(Request::new(()));
    /// future.await?;
    /// # Ok(())
    /// # }
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct PropagateFuture<F> {
        #[pin]
        state: State<F>,
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
    pub(super) fn unbounded(future: F) -> Self {
        PropagateFuture {
            state: State::Unbounded { future },
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
    ) -> Self {
        PropagateFuture {
            state: State::Bounded {
                future,
                sleep,
                spent,
                deadline,
            },
        }
    }

    /// Nothing sent: ends at once with [`PropagateError::Exhausted`].
    #[inline]
    pub(super) fn exhausted(deadline: crate::deadline::Deadline) -> Self {
        PropagateFuture {
            state: State::Exhausted { deadline },
        }
    }
}

impl<F, T, E> Future for PropagateFuture<F>
where
    F: Future<Output = Result<T, E>>,
{
    type Output = Result<T, PropagateError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
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
            StateProj::Exhausted { deadline } => {
                Poll::Ready(Err(PropagateError::Exhausted(*deadline)))
            }
        }
    }
}
