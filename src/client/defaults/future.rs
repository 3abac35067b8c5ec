//! The response future of [`DefaultHeaders`].

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Response;
use pin_project_lite::pin_project;

#[cfg(doc)]
use super::DefaultHeaders;
use super::DefaultsVersion;
use super::error::DefaultHeadersError;
use crate::error::Error;

pin_project! {
    /// The response future of [`DefaultHeaders`]: records [`DefaultsVersion`] in the response.
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

impl<F> DefaultHeadersFuture<F> {
    /// The inner call, sent with the defaults of `version`.
    #[inline]
    pub(super) fn called(future: F, version: u64) -> Self {
        DefaultHeadersFuture {
            state: State::Called { future, version },
        }
    }

    /// Not sent: the defaults could not be applied; ends at once with `error`.
    #[inline]
    pub(super) fn refused(error: Error) -> Self {
        DefaultHeadersFuture {
            state: State::Refused { error: Some(error) },
        }
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
