//! The response future of [`RefreshRetry`]: the first send, the refresh, the one retry.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use http::{HeaderMap, Request, Response};
use pin_project_lite::pin_project;
use tower_service::Service;

#[cfg(doc)]
use super::RefreshRetry;
use super::error::RefreshRetryError;
use super::shared::{RefreshFuture, Shared, refresh_for};
use crate::client::defaults::DefaultsVersion;
use crate::deadline::Deadline;

/// What a request needs for its one retry.
pub(super) struct Retry<S, B, F, R> {
    pub(super) inner: S,
    pub(super) again: Request<B>,
    pub(super) shared: Arc<Shared<F, R>>,
    /// The request's deadline: a retry is never started once it has passed.
    pub(super) deadline: Option<Deadline>,
}

pin_project! {
    /// The response future of [`RefreshRetry`].
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct RefreshRetryFuture<S, B, F, R>
    where
        S: Service<Request<B>>,
    {
        #[pin]
        state: State<S::Future, R>,
        retry: Option<Retry<S, B, F, R>>,
        // Under a deadline, the refused response is kept during the refresh: it is the answer
        // if the deadline passes before the retry could start.
        refused: Option<S::Response>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<Fut, R> {
        First { #[pin] future: Fut },
        Refreshing { refresh: RefreshFuture<R> },
        Ready,
        Second { #[pin] future: Fut },
    }
}

impl<S, B, F, R> RefreshRetryFuture<S, B, F, R>
where
    S: Service<Request<B>>,
{
    /// The first send, `future`; with `retry`, what its one retry needs (`None`: no retry).
    #[inline]
    pub(super) fn first(future: S::Future, retry: Option<Retry<S, B, F, R>>) -> Self {
        RefreshRetryFuture {
            state: State::First { future },
            retry,
            refused: None,
        }
    }
}

impl<S, B, F, R> fmt::Debug for RefreshRetryFuture<S, B, F, R>
where
    S: Service<Request<B>>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RefreshRetryFuture").finish_non_exhaustive()
    }
}

impl<S, B, ResB, F, Fut, R> Future for RefreshRetryFuture<S, B, F, R>
where
    S: Service<Request<B>, Response = Response<ResB>>,
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<HeaderMap, R>> + Send + 'static,
    R: Send + Sync + 'static,
{
    type Output = Result<Response<ResB>, RefreshRetryError<S::Error, R>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::First { future } => {
                    let response = ready!(future.poll(cx)).map_err(RefreshRetryError::Service)?;
                    let Some(retry) = this.retry.as_ref() else {
                        return Poll::Ready(Ok(response));
                    };
                    if !(retry.shared.classify)(response.status(), response.headers()) {
                        return Poll::Ready(Ok(response));
                    }
                    let Some(failed) = DefaultsVersion::of(&response) else {
                        return Poll::Ready(Ok(response));
                    };
                    match retry.deadline {
                        // Nothing left: no refresh, no retry; the refused answer is the answer.
                        Some(deadline) if deadline.is_expired() => {
                            return Poll::Ready(Ok(response));
                        }
                        Some(_) => *this.refused = Some(response),
                        None => drop(response),
                    }
                    let refresh = refresh_for(&retry.shared, failed);
                    this.state.set(State::Refreshing { refresh });
                }
                StateProj::Refreshing { refresh } => {
                    ready!(refresh.as_mut().poll(cx)).map_err(RefreshRetryError::Refresh)?;
                    let expired = this
                        .retry
                        .as_ref()
                        .and_then(|r| r.deadline)
                        .is_some_and(|d| d.is_expired());
                    if let Some(refused) = this.refused.take() {
                        if expired {
                            // The refresh is done (the next request uses it); the retry is not.
                            *this.retry = None;
                            return Poll::Ready(Ok(refused));
                        }
                    }
                    this.state.set(State::Ready);
                }
                StateProj::Ready => {
                    let Some(retry) = this.retry.as_mut() else {
                        unreachable!("a retry is prepared before it is started")
                    };
                    ready!(retry.inner.poll_ready(cx)).map_err(RefreshRetryError::Service)?;
                    let Some(Retry {
                        mut inner, again, ..
                    }) = this.retry.take()
                    else {
                        unreachable!("checked above")
                    };
                    let future = inner.call(again);
                    this.state.set(State::Second { future });
                }
                StateProj::Second { future } => {
                    return future.poll(cx).map_err(RefreshRetryError::Service);
                }
            }
        }
    }
}
