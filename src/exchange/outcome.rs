//! Who committed an exchange: [`Outcome`].

use std::fmt;

#[cfg(doc)]
use super::Exchange;

/// Who committed an [`Exchange`].
///
/// # Examples
///
/// ```
/// # use shared_headers::Outcome;
/// assert_eq!(Outcome::TimedOut.to_string(), "timed out");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Outcome {
    /// The inner service returned a response.
    Answered,
    /// The inner service returned an error; there is no response to merge headers into.
    Failed,
    /// The deadline fired before the inner service answered.
    TimedOut,
    /// The request future was dropped before either (an outer timeout, a closed connection).
    Cancelled,
    /// The inner service panicked before anything else committed: the server layer caught the
    /// panic (as tower-http's `CatchPanicLayer` does) and answered 500 Internal Server Error
    /// itself. A panic after another commit (a handler that panics on the `Err(Sealed)` of a
    /// late write) does not change the outcome: the committed answer is sent.
    Panicked,
    /// The request was refused before the inner service was called: its headers were over the
    /// limits of the layer's
    /// [`request_policy`](crate::server::SharedHeadersLayer::request_policy) builder. The
    /// layer answered with its
    /// [`rejection_status`](crate::server::SharedHeadersLayer::rejection_status) (431 by
    /// default).
    Rejected,
    /// The request was answered before the inner service ran: its deadline could not be met
    /// (its remaining budget was below what its route needs, at arrival or while waiting for
    /// a permit), by the server layer's
    /// [`admission`](crate::server::SharedHeadersLayer::admission). Its `error.type` is
    /// `deadline_unmeetable`.
    Shed,
}

impl Outcome {
    /// The outcome as one token (`timed_out`): a log field's value that a text formatter writes
    /// as it is.
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(crate) fn token(self) -> &'static str {
        match self {
            Outcome::Answered => "answered",
            Outcome::Failed => "failed",
            Outcome::TimedOut => "timed_out",
            Outcome::Cancelled => "cancelled",
            Outcome::Rejected => "rejected",
            Outcome::Panicked => "panicked",
            Outcome::Shed => "shed",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Outcome::Answered => "answered",
            Outcome::Failed => "failed",
            Outcome::TimedOut => "timed out",
            Outcome::Cancelled => "cancelled",
            Outcome::Rejected => "rejected",
            Outcome::Panicked => "panicked",
            Outcome::Shed => "shed",
        })
    }
}
