//! [`ConnRetryError`], the error of [`ConnRetry`]: the inner service's, and
//! why the request was or was not sent again.

use std::error::Error as StdError;
use std::fmt;

#[cfg(doc)]
use super::ConnRetry;
#[cfg(doc)]
use crate::client::replay::ReplayBody;

/// The error of [`ConnRetry`]: the inner service's, and why the request was or was not sent
/// again. Every variant but [`Service`](Self::Service) says the request's connection failed
/// under it (it died, or could not be opened).
///
/// # Examples
///
/// ```
/// # use shared_headers::client::ConnRetryError;
/// let err = ConnRetryError::NotIdempotent(std::io::Error::other("connection reset"));
/// assert_eq!(err.service_error().map(ToString::to_string).as_deref(), Some("connection reset"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum ConnRetryError<E> {
    /// The client inside was not ready (its `poll_ready` failed): nothing was sent.
    Service(E),
    /// The connection died with a request that is not idempotent written to it: it was not
    /// sent again, since it may have been processed.
    NotIdempotent(E),
    /// The connection failed under the request and its body cannot be replayed
    /// ([`ReplayBody`]): it was not sent again.
    NotReplayable(E),
    /// The connection failed under the request and its deadline had passed (or left nothing
    /// to send with) before it could be sent again.
    Expired(E),
    /// The connection failed under the request and the client inside was not ready to send it
    /// again (its `poll_ready` failed; its error): nothing was sent again.
    NotReady(E),
    /// The request was sent again, on a fresh connection, and that failed too (its error).
    Retried(E),
}

impl<E> ConnRetryError<E> {
    /// The inner service's error (every variant carries one).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::ConnRetryError;
    /// assert_eq!(ConnRetryError::Service(7).service_error(), Some(&7));
    /// ```
    pub fn service_error(&self) -> Option<&E> {
        match self {
            ConnRetryError::Service(e)
            | ConnRetryError::NotIdempotent(e)
            | ConnRetryError::NotReplayable(e)
            | ConnRetryError::Expired(e)
            | ConnRetryError::NotReady(e)
            | ConnRetryError::Retried(e) => Some(e),
        }
    }

    /// The inner service's error, by value.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::ConnRetryError;
    /// assert_eq!(ConnRetryError::Retried(7).into_service_error(), Some(7));
    /// ```
    pub fn into_service_error(self) -> Option<E> {
        match self {
            ConnRetryError::Service(e)
            | ConnRetryError::NotIdempotent(e)
            | ConnRetryError::NotReplayable(e)
            | ConnRetryError::Expired(e)
            | ConnRetryError::NotReady(e)
            | ConnRetryError::Retried(e) => Some(e),
        }
    }
}

impl<E> fmt::Display for ConnRetryError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConnRetryError::Service(_) => {
                "the client inside the connection-retry layer was not ready; nothing was sent"
            }
            ConnRetryError::NotIdempotent(_) => {
                "the connection died with the request in flight; it is not idempotent and was \
                 not sent again (it may have been processed)"
            }
            ConnRetryError::NotReplayable(_) => {
                "the connection died (or could not be opened) under the request; its body cannot \
                 be replayed, so it was not sent again"
            }
            ConnRetryError::Expired(_) => {
                "the connection died (or could not be opened) under the request; its deadline \
                 left no time to send it again"
            }
            ConnRetryError::NotReady(_) => {
                "the connection died (or could not be opened) under the request; the client was \
                 not ready to send it again, and nothing was sent again"
            }
            ConnRetryError::Retried(_) => {
                "the connection died (or could not be opened) under the request; it was sent \
                 again on a fresh connection and that failed too"
            }
        })
    }
}

impl<E: StdError + 'static> StdError for ConnRetryError<E> {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.service_error().map(|e| e as &(dyn StdError + 'static))
    }
}
