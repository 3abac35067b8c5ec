//! The vocabulary of a connection's life: its [`Status`], why it died ([`Cause`]), and why a
//! lease was refused ([`AcquireError`]).

use std::fmt;
use std::io;

use super::classify::innermost;

#[cfg(doc)]
use super::ConnHealth;

/// Why a connection died. The first cause given to [`ConnHealth::mark_dead`] is kept for good.
///
/// # Examples
///
/// ```
/// use std::io;
/// use shared_headers::conn::Cause;
///
/// let err = io::Error::from(io::ErrorKind::ConnectionReset);
/// assert_eq!(Cause::from(&err), Cause::Io(io::ErrorKind::ConnectionReset));
/// assert_eq!(Cause::PeerClosed.to_string(), "the peer closed the connection");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Cause {
    /// A read or write on the connection failed with this kind of error.
    Io(io::ErrorKind),
    /// A read returned 0 bytes: the peer sent FIN (closed, or half-closed, its side).
    PeerClosed,
    /// A health check (a ping, a probe of an idle socket) failed or timed out.
    HealthCheck,
    /// The peer broke the protocol (unsolicited or unparsable bytes): the stream is out of sync.
    Protocol(&'static str),
    /// This side closed the connection on purpose (shutdown, idle timeout, eviction).
    Local,
}

impl From<&io::Error> for Cause {
    /// The kind of `err`, looking through `io::Error`s wrapped inside `ErrorKind::Other`.
    fn from(err: &io::Error) -> Self {
        Cause::Io(innermost(err).kind())
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::Io(kind) => write!(f, "I/O error: {kind}"),
            Cause::PeerClosed => f.write_str("the peer closed the connection"),
            Cause::HealthCheck => f.write_str("the health check failed"),
            Cause::Protocol(what) => write!(f, "protocol error: {what}"),
            Cause::Local => f.write_str("closed by this side"),
        }
    }
}

/// Where a connection is in its one-way life: [`Open`](Status::Open), then
/// [`Draining`](Status::Draining), then [`Dead`](Status::Dead).
///
/// A status is an observation for logs, metrics and eviction. It is never a permission: by the
/// time you look at it the connection may have moved on. The only way to use a connection is
/// [`ConnHealth::try_acquire`].
///
/// `#[non_exhaustive]`: a state may be added (a graceful `Closed` after draining, say) without
/// a breaking release, so a `match` on it needs a wildcard arm. The order stays one-way.
///
/// # Examples
///
/// ```
/// use shared_headers::conn::{Cause, ConnHealth, Status};
///
/// let health = ConnHealth::new();
/// assert_eq!(health.status(), Status::Open);
/// health.mark_draining();
/// assert_eq!(health.status(), Status::Draining);
/// health.mark_dead(Cause::PeerClosed);
/// assert_eq!(health.status(), Status::Dead(Cause::PeerClosed));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    /// New leases are granted (up to the concurrency limit).
    Open,
    /// No new leases; leases in flight finish (after GOAWAY, `Connection: close`, a timeout).
    Draining,
    /// No new leases; leases in flight fail or are abandoned. Holds the first recorded cause.
    Dead(Cause),
}

/// Why [`ConnHealth::try_acquire`] refused a lease.
///
/// # Examples
///
/// ```
/// use shared_headers::conn::{AcquireError, Cause, ConnHealth};
///
/// let health = ConnHealth::with_max_concurrent(1);
/// let lease = health.try_acquire()?;
/// assert_eq!(health.try_acquire().unwrap_err(), AcquireError::AtLimit { limit: 1 });
///
/// health.mark_dead(Cause::PeerClosed);
/// let err = health.try_acquire().unwrap_err();
/// assert_eq!(err, AcquireError::Dead(Cause::PeerClosed));
/// assert!(!err.may_retry_here());
/// drop(lease);
/// # Ok::<(), AcquireError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AcquireError {
    /// The connection is draining: use another one.
    Draining,
    /// The connection is dead for this (first recorded) cause: use another one.
    Dead(Cause),
    /// The connection is open but already carries `limit` leases: wait for one, or use another.
    AtLimit {
        /// The maximum number of concurrent leases on this connection.
        limit: usize,
    },
}

impl AcquireError {
    /// Whether a later `try_acquire` on the same connection may succeed (only at the limit).
    ///
    /// # Examples
    ///
    /// ```
    /// use shared_headers::conn::AcquireError;
    ///
    /// assert!(AcquireError::AtLimit { limit: 100 }.may_retry_here());
    /// assert!(!AcquireError::Draining.may_retry_here());
    /// ```
    pub fn may_retry_here(&self) -> bool {
        matches!(self, AcquireError::AtLimit { .. })
    }
}

impl fmt::Display for AcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AcquireError::Draining => f.write_str("connection is draining and takes no new work"),
            AcquireError::Dead(cause) => write!(f, "connection is dead ({cause})"),
            AcquireError::AtLimit { limit } => {
                write!(f, "connection is at its limit of {limit} concurrent leases")
            }
        }
    }
}

impl std::error::Error for AcquireError {}
