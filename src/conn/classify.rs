//! Sorting I/O errors into what they mean for the connection that produced them.

use std::io::{self, ErrorKind};

/// What an I/O error means for the connection it happened on; see [`classify`].
///
/// # Examples
///
/// ```
/// use std::io::{Error, ErrorKind};
/// use shared_headers::conn::{Health, classify};
///
/// assert_eq!(classify(&Error::from(ErrorKind::ConnectionReset)), Health::Dead);
/// assert_eq!(classify(&Error::from(ErrorKind::TimedOut)), Health::Draining);
/// assert_eq!(classify(&Error::from(ErrorKind::Interrupted)), Health::Transient);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Health {
    /// The connection cannot carry another byte reliably: mark it dead, never reuse it.
    Dead,
    /// The connection may finish what is in flight but must take no new work.
    Draining,
    /// Nothing happened to the connection: retry the same operation on it.
    Transient,
}

/// Sorts an I/O error seen on a connection into [`Health::Dead`], [`Health::Draining`] or
/// [`Health::Transient`].
///
/// | `io::ErrorKind` | Health | Why |
/// |---|---|---|
/// | `BrokenPipe` | Dead | `EPIPE`: writing after the stream was shut down or reset |
/// | `ConnectionReset` | Dead | `ECONNRESET`: the peer sent RST; the kernel reports it only once |
/// | `ConnectionAborted` | Dead | `ECONNABORTED`: the local stack gave up on the connection |
/// | `NotConnected` | Dead | `ENOTCONN`: the socket has no peer any more |
/// | `UnexpectedEof` | Dead | the stream ended inside a message |
/// | `WriteZero` | Dead | a write accepted 0 bytes: the stream takes no more |
/// | `InvalidData` | Dead | unparsable bytes: the framing is lost for good |
/// | `ConnectionRefused`, `HostUnreachable`, `NetworkUnreachable`, `NetworkDown` | Dead | the path to the peer is gone |
/// | `TimedOut` from the OS (`ETIMEDOUT`, a raw OS error) | Dead | TCP gave up: retransmissions or keepalive probes went unanswered |
/// | `TimedOut` from user code (no OS error: a deadline of yours) | Draining | stalled, not known broken: no new work; let a health check decide |
/// | `WouldBlock` | Transient | nothing was done; wait for readiness and retry |
/// | `Interrupted` | Transient | `EINTR`: nothing was done; retry |
/// | `OutOfMemory` | Transient | local memory pressure; nothing was sent |
/// | anything else | Dead | unknown: nobody knows how many bytes the peer got |
///
/// The last row is deliberate: after an unexplained failure the byte stream may be out of sync,
/// so the safe answer is a fresh connection. This is what Go's HTTP/2 transport does since
/// its fix for [golang/go#39750](https://github.com/golang/go/issues/39750): close the
/// connection on the first write error. An `ErrorKind::Other` error that wraps an `io::Error` (as async runtimes and
/// TLS layers do) is classified by the wrapped error.
///
/// # Examples
///
/// ```
/// use std::io::{Error, ErrorKind};
/// use shared_headers::conn::{Health, classify};
///
/// let wrapped = Error::other(Error::from(ErrorKind::BrokenPipe));
/// assert_eq!(classify(&wrapped), Health::Dead);
/// assert_eq!(classify(&Error::from(ErrorKind::WouldBlock)), Health::Transient);
/// assert_eq!(classify(&Error::other("something odd")), Health::Dead);
/// ```
pub fn classify(err: &io::Error) -> Health {
    match innermost(err).kind() {
        ErrorKind::WouldBlock | ErrorKind::Interrupted | ErrorKind::OutOfMemory => {
            Health::Transient
        }
        // The kernel's ETIMEDOUT means TCP itself gave up on the peer; a timeout made by user
        // code (an `io::Error` built from the kind, no OS error) only says "slow".
        ErrorKind::TimedOut if innermost(err).raw_os_error().is_some() => Health::Dead,
        ErrorKind::TimedOut => Health::Draining,
        // BrokenPipe, ConnectionReset, ConnectionAborted, NotConnected, UnexpectedEof, WriteZero,
        // InvalidData, ConnectionRefused, HostUnreachable, NetworkUnreachable, NetworkDown, and
        // everything unknown.
        _ => Health::Dead,
    }
}

/// Follows `ErrorKind::Other` errors that wrap another `io::Error` down to the innermost one.
pub(super) fn innermost(mut err: &io::Error) -> &io::Error {
    // Bounded: each step goes one wrapper deeper into a finite chain.
    while err.kind() == ErrorKind::Other {
        match err.get_ref().and_then(|e| e.downcast_ref::<io::Error>()) {
            Some(inner) => err = inner,
            None => break,
        }
    }
    err
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_timeouts_are_dead_user_timeouts_draining() {
        // ETIMEDOUT is 110 on Linux; any raw OS error with the TimedOut kind is the kernel's.
        let kernel = io::Error::from_raw_os_error(110);
        if kernel.kind() == ErrorKind::TimedOut {
            assert_eq!(classify(&kernel), Health::Dead);
            assert_eq!(classify(&io::Error::other(kernel)), Health::Dead);
        }
        assert_eq!(
            classify(&io::Error::from(ErrorKind::TimedOut)),
            Health::Draining
        );
    }

    #[test]
    fn table() {
        let dead = [
            ErrorKind::BrokenPipe,
            ErrorKind::ConnectionReset,
            ErrorKind::ConnectionAborted,
            ErrorKind::NotConnected,
            ErrorKind::UnexpectedEof,
            ErrorKind::WriteZero,
            ErrorKind::InvalidData,
            ErrorKind::ConnectionRefused,
            ErrorKind::HostUnreachable,
            ErrorKind::NetworkUnreachable,
            ErrorKind::NetworkDown,
            ErrorKind::Other,
            ErrorKind::PermissionDenied,
        ];
        for kind in dead {
            assert_eq!(classify(&io::Error::from(kind)), Health::Dead, "{kind:?}");
        }
        assert_eq!(
            classify(&io::Error::from(ErrorKind::TimedOut)),
            Health::Draining
        );
        for kind in [
            ErrorKind::WouldBlock,
            ErrorKind::Interrupted,
            ErrorKind::OutOfMemory,
        ] {
            assert_eq!(
                classify(&io::Error::from(kind)),
                Health::Transient,
                "{kind:?}"
            );
        }
    }

    #[test]
    fn wrapped_errors_are_classified_by_the_innermost() {
        let twice = io::Error::other(io::Error::other(io::Error::from(ErrorKind::Interrupted)));
        assert_eq!(classify(&twice), Health::Transient);
        assert_eq!(innermost(&twice).kind(), ErrorKind::Interrupted);
    }

    #[test]
    fn os_errors_map_through_their_kind() {
        // EPIPE and ECONNRESET as the kernel reports them.
        #[cfg(target_os = "linux")]
        {
            assert_eq!(classify(&io::Error::from_raw_os_error(32)), Health::Dead);
            assert_eq!(classify(&io::Error::from_raw_os_error(104)), Health::Dead);
            assert_eq!(
                classify(&io::Error::from_raw_os_error(4)),
                Health::Transient
            );
        }
    }
}
