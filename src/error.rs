//! The crate's error type.

use std::fmt;

/// Why a write to a [`SharedHeaders`](crate::SharedHeaders) was refused.
///
/// A refused write publishes nothing: the headers and the version stay exactly as they were.
///
/// # Examples
///
/// ```
/// use http::header::HOST;
/// use shared_headers::{Error, SharedHeaders};
///
/// let headers = SharedHeaders::new();
/// headers.seal()?;
/// let err = headers.insert(HOST, "example.com".parse()?).unwrap_err();
/// assert_eq!(err, Error::Sealed { version: 1 });
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The headers were sealed (committed) at `version`; they never change again.
    ///
    /// This is the answer a task gets when it writes after the response was committed, for
    /// example after a timeout answered for its handler.
    Sealed {
        /// The version of the sealed snapshot.
        version: u64,
    },
    /// The write would grow the map past `HeaderMap`'s capacity limit (32,768 entries).
    MaxSizeReached,
    /// A [`Draft`](crate::Draft) was committed, but the headers changed after it was taken.
    Conflict {
        /// The version the draft was based on.
        expected: u64,
        /// The version that is current now.
        found: u64,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::Sealed { version } => write!(
                f,
                "headers were sealed at version {version} and accept no more writes \
                 (the response was already committed)"
            ),
            Error::MaxSizeReached => f.write_str(
                "header map is full: the write would exceed the maximum of 32,768 entries",
            ),
            Error::Conflict { expected, found } => write!(
                f,
                "draft based on version {expected} conflicts with version {found}: \
                 take a new draft and apply the change again"
            ),
        }
    }
}

impl std::error::Error for Error {}

impl From<http::header::MaxSizeReached> for Error {
    fn from(_: http::header::MaxSizeReached) -> Self {
        Error::MaxSizeReached
    }
}
