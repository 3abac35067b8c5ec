//! The error of [`DefaultHeaders`].

use std::fmt;

#[cfg(doc)]
use super::DefaultHeaders;
use crate::error::Error;

/// The error of [`DefaultHeaders`]: the defaults could not be applied, or the inner service
/// failed.
///
/// # Examples
///
/// ```
/// use shared_headers::Error;
/// use shared_headers::client::DefaultHeadersError;
///
/// let err: DefaultHeadersError<std::io::Error> = DefaultHeadersError::Defaults(Error::MaxSizeReached);
/// assert_eq!(err.to_string(), "default headers not applied");
/// // The cause is the source, not repeated in the message.
/// let source = std::error::Error::source(&err).unwrap();
/// assert_eq!(source.downcast_ref::<Error>(), Some(&Error::MaxSizeReached));
/// assert!(matches!(err, DefaultHeadersError::Defaults(Error::MaxSizeReached)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DefaultHeadersError<E> {
    /// The merged headers would not fit in a `HeaderMap`; the request was not sent.
    Defaults(Error),
    /// The inner service failed.
    Service(E),
}

impl<E> DefaultHeadersError<E> {
    /// The inner service's error; `None` when the defaults were not applied.
    ///
    /// Through a stack of this crate's layers, chain the calls (each layer's error has one),
    /// or find the service's error by its type in the [`source`](std::error::Error::source)
    /// chain (see [Errors](crate::client#errors)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::DefaultHeadersError;
    /// let err = DefaultHeadersError::Service(std::io::Error::other("upstream down"));
    /// assert_eq!(err.service_error().unwrap().to_string(), "upstream down");
    /// ```
    pub fn service_error(&self) -> Option<&E> {
        match self {
            DefaultHeadersError::Service(e) => Some(e),
            _ => None,
        }
    }

    /// The inner service's error, by value; `None` when the defaults were not applied.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::DefaultHeadersError;
    /// let err = DefaultHeadersError::Service(std::io::Error::other("upstream down"));
    /// assert_eq!(err.into_service_error().unwrap().kind(), std::io::ErrorKind::Other);
    /// ```
    pub fn into_service_error(self) -> Option<E> {
        match self {
            DefaultHeadersError::Service(e) => Some(e),
            _ => None,
        }
    }
}

/// Only this layer's words: the cause is the [`source`](std::error::Error::source).
impl<E> fmt::Display for DefaultHeadersError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DefaultHeadersError::Defaults(_) => "default headers not applied",
            DefaultHeadersError::Service(_) => {
                "the service inside the default-headers layer failed"
            }
        })
    }
}

impl<E: std::error::Error + 'static> std::error::Error for DefaultHeadersError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DefaultHeadersError::Defaults(e) => Some(e),
            DefaultHeadersError::Service(e) => Some(e),
        }
    }
}
