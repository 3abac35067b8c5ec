//! The error of [`Propagate`] and of the reqwest `PropagateMiddleware`.

use std::fmt;

#[cfg(doc)]
use super::Propagate;

/// The error of [`Propagate`] and of the reqwest `PropagateMiddleware`: the deadline left
/// nothing, it cut the call, or the inner service failed. (The context itself cannot fail: its
/// headers were checked when they were captured.)
///
/// An enum over the inner error rather than a boxed error (as `tower::timeout` returns): the
/// inner service's error keeps its type, and the deadline cases carry the [`Deadline`](crate::deadline::Deadline), so a
/// handler can tell its own deadline ([`DeadlineSource::Server`](crate::deadline::DeadlineSource))
/// from the caller's. The reqwest middleware returns `PropagateError<Infallible>` inside
/// `reqwest_middleware::Error::Middleware` (its inner errors stay reqwest's).
///
/// # Examples
///
/// ```
/// use std::time::Instant;
/// use shared_headers::client::PropagateError;
/// use shared_headers::deadline::{Deadline, DeadlineSource};
///
/// let deadline = Deadline::at(Instant::now(), DeadlineSource::Server);
/// let err: PropagateError<std::io::Error> = PropagateError::Exhausted(deadline);
/// assert_eq!(err.deadline(), Some(deadline));
/// assert_eq!(err.to_string(), "deadline exhausted: the request was not sent");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PropagateError<E> {
    /// Nothing was left of the deadline (after the margin): the request was not sent.
    Exhausted(crate::deadline::Deadline),
    /// The request was sent, and no answer came before the cut (what was left of the deadline
    /// minus half the margin), or the inner call failed once the budget the request carried
    /// was spent ([`Propagate`] only).
    Elapsed(crate::deadline::Deadline),
    /// The inner service failed.
    Service(E),
}

impl<E> PropagateError<E> {
    /// The deadline that stopped the request; `None` for [`Service`](Self::Service).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::PropagateError;
    /// let err = PropagateError::Service("refused");
    /// assert_eq!(err.deadline(), None);
    /// ```
    pub fn deadline(&self) -> Option<crate::deadline::Deadline> {
        match self {
            PropagateError::Exhausted(d) | PropagateError::Elapsed(d) => Some(*d),
            PropagateError::Service(_) => None,
        }
    }

    /// The inner service's error; `None` when the deadline stopped the request.
    ///
    /// Through a stack of this crate's layers, chain the calls (each layer's error has one),
    /// or find the service's error by its type in the [`source`](std::error::Error::source)
    /// chain (see [Errors](crate::client#errors)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::PropagateError;
    /// let err = PropagateError::Service(std::io::Error::other("upstream down"));
    /// assert_eq!(err.service_error().unwrap().to_string(), "upstream down");
    /// ```
    pub fn service_error(&self) -> Option<&E> {
        match self {
            PropagateError::Service(e) => Some(e),
            _ => None,
        }
    }

    /// The inner service's error, by value; `None` when the deadline stopped the request.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::PropagateError;
    /// let err = PropagateError::Service(std::io::Error::other("upstream down"));
    /// assert_eq!(err.into_service_error().unwrap().kind(), std::io::ErrorKind::Other);
    /// ```
    pub fn into_service_error(self) -> Option<E> {
        match self {
            PropagateError::Service(e) => Some(e),
            _ => None,
        }
    }
}

/// Only this layer's words: the inner service's error is the [`source`](std::error::Error::source).
impl<E> fmt::Display for PropagateError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PropagateError::Exhausted(_) => "deadline exhausted: the request was not sent",
            PropagateError::Elapsed(_) => "deadline elapsed before the answer came",
            PropagateError::Service(_) => "the service inside the propagate layer failed",
        })
    }
}

/// The source is the inner service's error for [`Service`](PropagateError::Service). For the
/// deadline's own cases it is `None`, or with feature `tonic` a
/// `tonic::Status::deadline_exceeded("deadline exceeded")`: tonic's client looks for a `Status`
/// in the chain of a service's error (`Status::from_error`), so a call over
/// [`PropagateLayer`](super::PropagateLayer) that the deadline stopped ends with
/// `Code::DeadlineExceeded` (without it: `Code::Unknown`).
///
/// # Examples
///
/// ```
/// use std::error::Error as _;
/// use std::time::Instant;
/// use shared_headers::client::PropagateError;
/// use shared_headers::deadline::{Deadline, DeadlineSource};
///
/// let deadline = Deadline::at(Instant::now(), DeadlineSource::Server);
/// let err: PropagateError<std::io::Error> = PropagateError::Elapsed(deadline);
/// # #[cfg(feature = "tonic")]
/// # {
/// let status = err.source().unwrap().downcast_ref::<tonic::Status>().unwrap();
/// assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
/// let status = tonic::Status::from_error(Box::new(err));
/// assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
/// # }
/// ```
impl<E: std::error::Error + 'static> std::error::Error for PropagateError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PropagateError::Service(e) => Some(e),
            #[cfg(feature = "tonic")]
            PropagateError::Exhausted(_) | PropagateError::Elapsed(_) => Some(deadline_exceeded()),
            #[cfg(not(feature = "tonic"))]
            PropagateError::Exhausted(_) | PropagateError::Elapsed(_) => None,
        }
    }
}

/// The one `DEADLINE_EXCEEDED` status the deadline's cases point to (feature `tonic`), in the
/// server layer's words.
#[cfg(feature = "tonic")]
fn deadline_exceeded() -> &'static tonic::Status {
    static STATUS: std::sync::LazyLock<tonic::Status> =
        std::sync::LazyLock::new(|| tonic::Status::deadline_exceeded("deadline exceeded"));
    &STATUS
}
