//! The response future: commits the exchange exactly once, at the answer, the deadline, the
//! rejection, or its drop.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use http::{Response, StatusCode};
use pin_project_lite::pin_project;

use crate::exchange::{AlreadyCommitted, Committed, Exchange, Outcome};
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
        // The wall-clock deadline. The layer's timer thread commits at it; the future checks it
        // too when polled (in case the thread is late or could not start).
        pub(super) deadline: Option<Instant>,
        // The status of a response the layer makes itself: the timeout status, or the
        // rejection status when `inner` is `None`.
        pub(super) own_status: StatusCode,
        // Whether the response carries the `Committed` record in its extensions
        // (`SharedHeadersLayer::record_in_response`).
        pub(super) record: bool,
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("exchange", &self.guard.exchange)
            .field("deadline", &self.deadline)
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
        let Some(exchange) = this.guard.exchange.as_ref() else {
            panic!("shared_headers::server::ResponseFuture polled after completion");
        };
        let Some(inner) = this.inner.as_pin_mut() else {
            let res = own_response(
                this.guard,
                Outcome::Rejected,
                *this.own_status,
                *this.record,
            );
            return Poll::Ready(Ok(res));
        };
        if this.deadline.is_some() && timed_out(exchange) {
            // The timer thread committed: answer the timeout (a handler not polled yet never
            // runs).
            let res = own_response(
                this.guard,
                Outcome::TimedOut,
                *this.own_status,
                *this.record,
            );
            return Poll::Ready(Ok(res));
        }
        // The inner service next: an answer that is ready wins over a deadline that passed
        // without a commit yet.
        if let Poll::Ready(result) = inner.poll(cx) {
            return Poll::Ready(match result {
                Ok(mut res) => {
                    let status = res.status();
                    let committed = this.guard.commit(Outcome::Answered, status);
                    if committed.outcome() == Outcome::TimedOut {
                        // The timer thread committed between the look above and this commit:
                        // the response is the timeout's, as the record says.
                        drop(res);
                        Ok(answer(*this.own_status, committed, *this.record))
                    } else {
                        finish(&mut res, committed, *this.record);
                        Ok(res)
                    }
                }
                Err(err) => match this.guard.commit_failed() {
                    // The timer thread committed while the inner service was failing: the
                    // answer is the timeout's, as the record says (as for an `Ok` above).
                    Some(winner) if winner.outcome() == Outcome::TimedOut => {
                        drop(err);
                        Ok(answer(*this.own_status, winner, *this.record))
                    }
                    _ => Err(err),
                },
            });
        }
        let Some(deadline) = this.deadline else {
            return Poll::Pending;
        };
        // Pending with a deadline: register for the timer thread's wake, then look again, so
        // that a commit by the timer before the registration (which found no waker) is seen
        // here, and one after it wakes this task. A handler that answers at its first poll
        // never registers.
        exchange.register_waker(cx.waker());
        if timed_out(exchange) || Instant::now() >= *deadline {
            let res = own_response(
                this.guard,
                Outcome::TimedOut,
                *this.own_status,
                *this.record,
            );
            return Poll::Ready(Ok(res));
        }
        Poll::Pending
    }
}

/// Whether the exchange was committed as timed out (by the layer's timer thread).
fn timed_out(exchange: &Exchange) -> bool {
    exchange.committed_outcome() == Some(Outcome::TimedOut)
}

/// Commits with `outcome` and makes the layer's own answer (see [`answer`]).
fn own_response<B: Default>(
    guard: &mut CommitGuard,
    outcome: Outcome,
    status: StatusCode,
    record: bool,
) -> Response<B> {
    let committed = guard.commit(outcome, status);
    answer(status, committed, record)
}

/// The layer's own answer for `committed`: `status`, an empty body, and the committed headers
/// (and the record, if `record`).
fn answer<B: Default>(status: StatusCode, committed: Committed, record: bool) -> Response<B> {
    let mut res = Response::new(B::default());
    *res.status_mut() = status;
    finish(&mut res, committed, record);
    res
}

/// Owns the exchange until the commit; commits with [`Outcome::Cancelled`] if dropped first.
/// A separate field (not a `PinnedDrop` on the future) so the drop logic needs no pinning.
pub(super) struct CommitGuard {
    pub(super) exchange: Option<Exchange>,
}

impl CommitGuard {
    /// Commits with `outcome` and `status`, or takes the record of whoever committed first
    /// (the timer thread, or the handler itself calling [`Exchange::commit`]). Returns the
    /// record.
    fn commit(&mut self, outcome: Outcome, status: StatusCode) -> Committed {
        let exchange = self
            .exchange
            .take()
            .expect("ResponseFuture committed twice");
        // The future is done: nothing is left to wake (and its task must not stay alive for
        // as long as a spawned task holds the exchange).
        exchange.drop_waker();
        exchange
            .commit_with(outcome, Some(status))
            .unwrap_or_else(|lost| lost.into_winner())
    }

    /// Commits with [`Outcome::Failed`]: the inner service's error passes through, unless
    /// another commit (the deadline's) came first.
    /// Returns the winner's record if another commit came first.
    fn commit_failed(&mut self) -> Option<Committed> {
        let exchange = self.exchange.take()?;
        exchange.drop_waker();
        exchange
            .commit_with(Outcome::Failed, None)
            .err()
            .map(AlreadyCommitted::into_winner)
    }
}

impl Drop for CommitGuard {
    fn drop(&mut self) {
        if let Some(exchange) = self.exchange.take() {
            exchange.drop_waker();
            // Losing here is fine: someone committed first, and that is all we need.
            let _ = exchange.commit_with(Outcome::Cancelled, None);
        }
    }
}

/// Merges the committed response headers into `res` and, if `record`, attaches the record:
/// the response's one extension.
fn finish<B>(res: &mut Response<B>, committed: Committed, record: bool) {
    merge_lenient(res.headers_mut(), committed.response());
    if record {
        res.extensions_mut().insert(committed);
    }
}
