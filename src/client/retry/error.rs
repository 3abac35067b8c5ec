//! The error of [`RefreshRetry`].

use std::fmt;

#[cfg(doc)]
use super::RefreshRetry;
use crate::client::refresher::RefreshError;

/// The error of [`RefreshRetry`]: the inner service failed, or the refresh did.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use shared_headers::client::{RefreshError, RefreshRetryError};
///
/// let auth_down = std::io::Error::other("auth down");
/// let err: RefreshRetryError<std::io::Error, _> = RefreshRetryError::Refresh(RefreshError::Refresh(Arc::new(auth_down)));
/// // Each layer says only its own words; the causes are the `source()` chain.
/// assert_eq!(err.to_string(), "the credential was refused and the refresh failed");
/// let refresh = std::error::Error::source(&err).unwrap();
/// assert_eq!(refresh.to_string(), "the refresh function failed");
/// assert_eq!(refresh.source().unwrap().to_string(), "auth down");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum RefreshRetryError<E, R> {
    /// The inner service failed (with a [`DefaultHeaders`](crate::client::DefaultHeaders)
    /// inside, a [`DefaultHeadersError`](crate::client::DefaultHeadersError)).
    Service(E),
    /// The refresh after a refused credential failed; the retry was not sent. Every request
    /// that waited for the same refresh gets a clone of this error.
    Refresh(RefreshError<R>),
}

impl<E, R> RefreshRetryError<E, R> {
    /// The inner service's error (of the first send or of the retry); `None` when the refresh
    /// failed.
    ///
    /// Through a stack of this crate's layers, chain the calls (each layer's error has one),
    /// or find the service's error by its type in the [`source`](std::error::Error::source)
    /// chain (see [Errors](crate::client#errors)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::RefreshRetryError;
    /// let err: RefreshRetryError<_, std::io::Error> = RefreshRetryError::Service(std::io::Error::other("down"));
    /// assert_eq!(err.service_error().unwrap().to_string(), "down");
    /// assert!(err.refresh_error().is_none());
    /// ```
    pub fn service_error(&self) -> Option<&E> {
        match self {
            RefreshRetryError::Service(e) => Some(e),
            _ => None,
        }
    }

    /// The inner service's error, by value; `None` when the refresh failed.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::RefreshRetryError;
    /// let err: RefreshRetryError<_, std::io::Error> = RefreshRetryError::Service(std::io::Error::other("down"));
    /// assert_eq!(err.into_service_error().unwrap().kind(), std::io::ErrorKind::Other);
    /// ```
    pub fn into_service_error(self) -> Option<E> {
        match self {
            RefreshRetryError::Service(e) => Some(e),
            _ => None,
        }
    }

    /// Why the refresh failed; `None` when the inner service failed.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use shared_headers::client::{RefreshError, RefreshRetryError};
    /// let err: RefreshRetryError<std::io::Error, _> =
    ///     RefreshRetryError::Refresh(RefreshError::Refresh(Arc::new(std::io::Error::other("auth down"))));
    /// let refresh = err.refresh_error().unwrap();
    /// assert_eq!(refresh.refresh_error().unwrap().to_string(), "auth down");
    /// ```
    pub fn refresh_error(&self) -> Option<&RefreshError<R>> {
        match self {
            RefreshRetryError::Refresh(e) => Some(e),
            _ => None,
        }
    }
}

/// Only this layer's words: the cause is the [`source`](std::error::Error::source).
impl<E, R> fmt::Display for RefreshRetryError<E, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RefreshRetryError::Service(_) => "the service inside the refresh-retry layer failed",
            RefreshRetryError::Refresh(_) => "the credential was refused and the refresh failed",
        })
    }
}

impl<E, R> std::error::Error for RefreshRetryError<E, R>
where
    E: std::error::Error + 'static,
    R: std::error::Error + 'static,
{
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RefreshRetryError::Service(e) => Some(e),
            RefreshRetryError::Refresh(e) => Some(e),
        }
    }
}
