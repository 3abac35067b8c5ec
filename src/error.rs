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
    /// The write would grow the map past `HeaderMap`'s capacity: its index has at most 32,768
    /// slots, filled to three quarters, so at most 24,576 distinct names (values of one name do
    /// not count against it).
    MaxSizeReached,
    /// A [`Draft`](crate::Draft) was committed, but the headers changed after it was taken.
    Conflict {
        /// The version the draft was based on.
        expected: u64,
        /// The version that is current now.
        found: u64,
    },
    /// A [`Draft`](crate::Draft) was committed to a handle other than the one it was taken from
    /// (or a clone of it). Nothing was published: its base version means nothing here.
    ForeignDraft,
    /// The write would take the headers past a limit set with
    /// [`Builder`](crate::Builder); it was refused as a whole.
    ///
    /// # Examples
    ///
    /// ```
    /// use shared_headers::{Error, Limit, SharedHeaders};
    ///
    /// let headers = SharedHeaders::builder().max_entries(1).build();
    /// headers.insert("x-a", "1".parse()?)?;
    /// let err = headers.append("x-a", "2".parse()?).unwrap_err();
    /// assert_eq!(err, Error::LimitExceeded { limit: Limit::Entries, max: 1, attempted: 2 });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    LimitExceeded {
        /// Which limit the write would have exceeded.
        limit: Limit,
        /// The configured maximum.
        max: usize,
        /// The size the headers would have reached, in the limit's unit.
        attempted: usize,
    },
}

/// A limit on the size of the headers, named by [`Error::LimitExceeded`].
///
/// # Examples
///
/// ```
/// use shared_headers::{Error, Limit, SharedHeaders};
///
/// let headers = SharedHeaders::builder().max_bytes(16).build();
/// let err = headers.insert("x-long", "0123456789abcdef".parse()?).unwrap_err();
/// assert!(matches!(err, Error::LimitExceeded { limit: Limit::Bytes, max: 16, attempted: 22 }));
/// assert_eq!(Limit::Bytes.to_string(), "bytes");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Limit {
    /// The number of values ([`HeaderMap::len`](http::HeaderMap::len)): every value of a
    /// repeated name counts.
    Entries,
    /// The total length in bytes of every name and value, counting a name once per value (as
    /// it is sent on the wire in HTTP/1).
    Bytes,
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Limit::Entries => "entries",
            Limit::Bytes => "bytes",
        })
    }
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
                "header map is full: HeaderMap's index cannot grow past 32,768 slots \
                 (24,576 distinct names); remove headers or refuse the input",
            ),
            Error::Conflict { expected, found } => write!(
                f,
                "draft based on version {expected} conflicts with version {found}: \
                 take a new draft and apply the change again"
            ),
            Error::ForeignDraft => f.write_str(
                "draft was taken from another SharedHeaders: commit it to the handle it came \
                 from, or take a draft of this one",
            ),
            Error::LimitExceeded {
                limit,
                max,
                attempted,
            } => write!(
                f,
                "write refused: the headers would reach {attempted} {limit}, \
                 over the limit of {max}"
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

/// Words an I/O error carries when the connection failed before any byte of the requests it
/// fails was written (the `conn` room's verdict on a connection whose only open streams are
/// ones their callers cancelled): the `client` room's `ConnRetryLayer` may send those again.
/// h2 keeps only an I/O error's kind and message for the streams it fails, so the words are
/// what crosses it.
#[cfg(any(feature = "hyper-util", feature = "client"))]
pub(crate) const NOT_WRITTEN: &str = "none of its open requests was written";

/// The source of an I/O error whose requests were never written (see [`NOT_WRITTEN`]).
#[cfg(feature = "hyper-util")]
#[derive(Debug)]
pub(crate) struct NotWritten<T>(pub(crate) T);

#[cfg(feature = "hyper-util")]
impl<T: fmt::Display> fmt::Display for NotWritten<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; {NOT_WRITTEN}", self.0)
    }
}

#[cfg(feature = "hyper-util")]
impl<T: fmt::Debug + fmt::Display> std::error::Error for NotWritten<T> {}

/// Whether `err` says its requests were never written: a `NotWritten` of any kind cannot be
/// downcast generically, so the words decide (they survive h2, which keeps only the message).
#[cfg(feature = "client")]
pub(crate) fn is_not_written(err: &(dyn std::error::Error + 'static)) -> bool {
    err.to_string().contains(NOT_WRITTEN)
}
