//! The response future: commits the exchange exactly once, at the answer, the deadline, the
//! rejection, or its drop.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::{Response, StatusCode};
use pin_project_lite::pin_project;
use tokio::time::Sleep;

use crate::exchange::{Committed, Exchange, Outcome};
use crate::merge::merge_lenient;

#[cfg(doc)]
use super::SharedHeadersService;

pin_project! {
    /// The response future of [`SharedHeadersService`].
    ///
    /// Resolves to the inner service's response (or error), to the timeout response, or to the
    /// rejection response. If it is dropped before that, it commits the exchange with
    /// [`Outcome::Cancelled`].
    ///
    /// # Panics
    ///
    /// Polling it again after it returned `Ready` panics, as most futures do.
    pub struct ResponseFuture<F> {
        // Field order is load-bearing: fields drop in declaration order, and the guard must
        // commit (`Cancelled`) before the inner future is dropped, so that writes made by the
        // handler's drop glue (guards, spawned-task handles, ...) are refused with `Sealed`
        // instead of accepted after the future was cancelled.
        pub(super) guard: CommitGuard,
        // `None` when the request was rejected: the inner service was not called.
        #[pin]
        pub(super) inner: Option<F>,
        #[pin]
        pub(super) sleep: Option<Sleep>,
        // The status of a response the layer makes itself: the timeout status, or the
        // rejection status when `inner` is `None`.
        pub(super) own_status: StatusCode,
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("exchange", &self.guard.exchange)
            .field("has_deadline", &self.sleep.is_some())
            .field("rejected", &self.inner.is_none())
            .finish_non_exhaustive()
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
    B: Default,
{
    type Output = Result<Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        assert!(
            this.guard.exchange.is_some(),
            "shared_headers::server::ResponseFuture polled after completion"
        );
        let Some(inner) = this.inner.as_pin_mut() else {
            let res = own_response(this.guard, Outcome::Rejected, *this.own_status);
            return Poll::Ready(Ok(res));
        };
        // The inner service first: an answer that is ready wins over a deadline that is too.
        if let Poll::Ready(result) = inner.poll(cx) {
            return Poll::Ready(match result {
                Ok(mut res) => {
                    finish(&mut res, this.guard.commit(Outcome::Answered));
                    Ok(res)
                }
                Err(err) => {
                    this.guard.commit(Outcome::Failed);
                    Err(err)
                }
            });
        }
        if let Some(sleep) = this.sleep.as_pin_mut() {
            ready!(sleep.poll(cx));
            let res = own_response(this.guard, Outcome::TimedOut, *this.own_status);
            return Poll::Ready(Ok(res));
        }
        Poll::Pending
    }
}

/// Commits with `outcome` and makes the layer's own answer: `status`, an empty body, and the
/// committed headers.
fn own_response<B: Default>(
    guard: &mut CommitGuard,
    outcome: Outcome,
    status: StatusCode,
) -> Response<B> {
    let mut res = Response::new(B::default());
    *res.status_mut() = status;
    finish(&mut res, guard.commit(outcome));
    res
}

/// Owns the exchange until the commit; commits with [`Outcome::Cancelled`] if dropped first.
/// A separate field (not a `PinnedDrop` on the future) so the drop logic needs no pinning.
pub(super) struct CommitGuard {
    pub(super) exchange: Option<Exchange>,
}

impl CommitGuard {
    /// Commits with `outcome`, or takes the record of whoever committed first (the handler
    /// itself may have called [`Exchange::commit`]). Returns the record and the exchange.
    fn commit(&mut self, outcome: Outcome) -> (Committed, Exchange) {
        let exchange = self
            .exchange
            .take()
            .expect("ResponseFuture committed twice");
        let committed = exchange
            .commit(outcome)
            .unwrap_or_else(|lost| lost.into_winner());
        (committed, exchange)
    }
}

impl Drop for CommitGuard {
    fn drop(&mut self) {
        if let Some(exchange) = self.exchange.take() {
            // Losing here is fine: someone committed first, and that is all we need.
            let _ = exchange.commit(Outcome::Cancelled);
        }
    }
}

/// Merges the committed response headers into `res` and attaches the record and the exchange.
fn finish<B>(res: &mut Response<B>, (committed, exchange): (Committed, Exchange)) {
    merge_lenient(res.headers_mut(), committed.response());
    res.extensions_mut().insert(committed);
    res.extensions_mut().insert(exchange);
}
