//! A request's deadline as a value, the deadline in scope, and the budget headers that carry
//! what is left of it to the next service.
//!
//! A [`Deadline`] is an instant and where it came from ([`DeadlineSource`]): `Copy`, 16 bytes
//! plus a tag, no allocation. The server room makes one per request (its own timeout, or the
//! caller's budget header if that is earlier); the client room reads it and sends each outgoing
//! call with what is left. The rooms never see each other: both use this module.
//!
//! # The deadline in scope
//!
//! Code several calls away from the handler gets the deadline without threading it through
//! every signature: [`Deadline::current`] is the deadline in scope **on this thread**. A
//! deadline is put in scope together with the request's context, as one
//! [request scope](crate::context::RequestScope): the server layer does so for each call and
//! poll of the inner service; [`RequestScope::scope`](crate::context::RequestScope::scope)
//! wraps a future, [`RequestScope::enter`](crate::context::RequestScope::enter) runs a closure.
//! The previous deadline is restored when the poll or the closure ends, also when it panics.
//! Nested scopes: the inner one wins while it runs, even if it is later than the outer one; to
//! only ever tighten, scope the earlier of the two
//! (`Deadline::current().map_or(deadline, |current| current.min(deadline))`).
//!
//! **Spawned tasks do not inherit it.** A task is polled by the runtime, outside the poll of
//! the future that spawned it, perhaps on another thread: `tokio::spawn(async { .. })` sees no
//! deadline. Wrap the task with [`context::carry`](crate::context::carry), which captures the
//! request scope (the deadline and the context) when it is called and polls the task in it.
//!
//! **When no deadline is set**, [`Deadline::current`] is `None` and the client room sends
//! outgoing calls unchanged: no header, no timeout.
//!
//! ```
//! use std::time::Duration;
//! use shared_headers::context::{self, RequestScope};
//! use shared_headers::deadline::{Deadline, DeadlineSource};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let deadline = Deadline::after(Duration::from_millis(200), DeadlineSource::Server).unwrap();
//! RequestScope::new()
//!     .deadline(deadline)
//!     .scope(async {
//!         // Deep inside the handler: no parameter needed.
//!         assert_eq!(Deadline::current(), Some(deadline));
//!         // A plain spawn loses it; `carry` keeps it.
//!         let lost = tokio::spawn(async { Deadline::current() });
//!         let kept = tokio::spawn(context::carry(async { Deadline::current() }));
//!         assert_eq!(lost.await.unwrap(), None);
//!         assert_eq!(kept.await.unwrap(), Some(deadline));
//!     })
//!     .await;
//! assert_eq!(Deadline::current(), None); // outside the scope
//! # }
//! ```
//!
//! # Budget headers
//!
//! [`BudgetHeader`] parses and encodes the wire formats of a remaining budget: `grpc-timeout`,
//! `connect-timeout-ms`, `x-envoy-expected-rq-timeout-ms`, or a header of decimal
//! milliseconds that you name. Bad input is a typed [`BudgetError`], never a panic.

use std::cell::Cell;
use std::time::{Duration, Instant};

mod budget;

pub use budget::{BudgetError, BudgetHeader};

/// Where a [`Deadline`] came from.
///
/// Three cases are enough for what a deadline is used for: the log line (the edge must tell a
/// `504` it made itself from one that came from below), and the rule that a caller never
/// extends the server's deadline. A deadline carried to a spawned task or an outgoing call
/// keeps its source: it is still the server's or the caller's deadline, so there is no
/// "inherited" case. `#[non_exhaustive]` leaves room for more.
///
/// # Examples
///
/// ```
/// use std::time::Instant;
/// use shared_headers::deadline::{Deadline, DeadlineSource};
///
/// let deadline = Deadline::at(Instant::now(), DeadlineSource::Caller);
/// assert_eq!(deadline.source(), DeadlineSource::Caller);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeadlineSource {
    /// The server's own timeout for the request (the layer's `timeout`).
    Server,
    /// The caller's budget: a [`BudgetHeader`] of the incoming request.
    Caller,
    /// Set by the application itself (a background job, a client outside any server).
    Explicit,
}

/// The instant by which a piece of work must be done, and where that limit came from.
///
/// `Copy` and small (an [`Instant`] and a [`DeadlineSource`]). Compare with [`min`](Self::min)
/// (the earlier of two, keeping its source); equality compares both the instant and the source.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use shared_headers::deadline::{Deadline, DeadlineSource};
///
/// let server = Deadline::after(Duration::from_secs(5), DeadlineSource::Server).unwrap();
/// let caller = Deadline::after(Duration::from_millis(300), DeadlineSource::Caller).unwrap();
/// let effective = server.min(caller);
/// assert_eq!(effective.source(), DeadlineSource::Caller);
/// assert!(effective.remaining() <= Duration::from_millis(300));
/// assert!(!effective.is_expired());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Deadline {
    instant: Instant,
    source: DeadlineSource,
}

thread_local! {
    /// The deadline in scope on this thread (see the module docs).
    static CURRENT: Cell<Option<Deadline>> = const { Cell::new(None) };
}

/// Replaces the deadline in scope on this thread; `None` during thread teardown.
fn replace_current(deadline: Option<Deadline>) -> Option<Deadline> {
    CURRENT.try_with(|c| c.replace(deadline)).unwrap_or(None)
}

/// Sets a deadline in scope until dropped, then restores the previous one (also on unwind):
/// the deadline's half of a [request scope](crate::context::RequestScope).
pub(crate) struct Restore(Option<Deadline>);

impl Restore {
    #[inline]
    pub(crate) fn set(deadline: Option<Deadline>) -> Restore {
        Restore(replace_current(deadline))
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        replace_current(self.0);
    }
}

impl Deadline {
    /// A deadline at `instant`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use shared_headers::deadline::{Deadline, DeadlineSource};
    ///
    /// let now = Instant::now();
    /// let deadline = Deadline::at(now + Duration::from_secs(1), DeadlineSource::Explicit);
    /// assert_eq!(deadline.instant(), now + Duration::from_secs(1));
    /// ```
    #[inline]
    pub const fn at(instant: Instant, source: DeadlineSource) -> Deadline {
        Deadline { instant, source }
    }

    /// A deadline `duration` from now; `None` if that instant is not representable (a
    /// `Duration::MAX` budget).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use shared_headers::deadline::{Deadline, DeadlineSource};
    ///
    /// let deadline = Deadline::after(Duration::from_millis(50), DeadlineSource::Server).unwrap();
    /// assert!(deadline.remaining() <= Duration::from_millis(50));
    /// assert_eq!(Deadline::after(Duration::MAX, DeadlineSource::Caller), None);
    /// ```
    #[inline]
    pub fn after(duration: Duration, source: DeadlineSource) -> Option<Deadline> {
        Instant::now()
            .checked_add(duration)
            .map(|instant| Deadline { instant, source })
    }

    /// The instant of the deadline.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Instant;
    /// # use shared_headers::deadline::{Deadline, DeadlineSource};
    /// let now = Instant::now();
    /// assert_eq!(Deadline::at(now, DeadlineSource::Server).instant(), now);
    /// ```
    #[inline]
    pub const fn instant(&self) -> Instant {
        self.instant
    }

    /// Where the deadline came from.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Instant;
    /// # use shared_headers::deadline::{Deadline, DeadlineSource};
    /// let deadline = Deadline::at(Instant::now(), DeadlineSource::Server);
    /// assert_eq!(deadline.source(), DeadlineSource::Server);
    /// ```
    #[inline]
    pub const fn source(&self) -> DeadlineSource {
        self.source
    }

    /// The time left until the deadline, zero once it has passed.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::{Duration, Instant};
    /// # use shared_headers::deadline::{Deadline, DeadlineSource};
    /// let past = Deadline::at(Instant::now(), DeadlineSource::Server);
    /// assert_eq!(past.remaining(), Duration::ZERO);
    /// ```
    #[inline]
    pub fn remaining(&self) -> Duration {
        self.remaining_at(Instant::now())
    }

    /// The time left at `now`, zero if `now` is at or after the deadline.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::{Duration, Instant};
    /// # use shared_headers::deadline::{Deadline, DeadlineSource};
    /// let now = Instant::now();
    /// let deadline = Deadline::at(now + Duration::from_millis(80), DeadlineSource::Caller);
    /// assert_eq!(deadline.remaining_at(now), Duration::from_millis(80));
    /// assert_eq!(deadline.remaining_at(now + Duration::from_secs(1)), Duration::ZERO);
    /// ```
    #[inline]
    pub fn remaining_at(&self, now: Instant) -> Duration {
        self.instant.saturating_duration_since(now)
    }

    /// Whether the deadline has passed (nothing [`remaining`](Self::remaining)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::{Duration, Instant};
    /// # use shared_headers::deadline::{Deadline, DeadlineSource};
    /// assert!(Deadline::at(Instant::now(), DeadlineSource::Server).is_expired());
    /// let later = Deadline::after(Duration::from_secs(60), DeadlineSource::Server).unwrap();
    /// assert!(!later.is_expired());
    /// ```
    #[inline]
    pub fn is_expired(&self) -> bool {
        self.remaining().is_zero()
    }

    /// The earlier of two deadlines, with its source; `self` if they are at the same instant.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::{Duration, Instant};
    /// # use shared_headers::deadline::{Deadline, DeadlineSource};
    /// let now = Instant::now();
    /// let server = Deadline::at(now + Duration::from_secs(1), DeadlineSource::Server);
    /// let caller = Deadline::at(now + Duration::from_secs(9), DeadlineSource::Caller);
    /// assert_eq!(server.min(caller), server); // a caller cannot extend the server's deadline
    /// assert_eq!(caller.min(server), server);
    /// ```
    #[inline]
    #[must_use]
    pub fn min(self, other: Deadline) -> Deadline {
        if other.instant < self.instant {
            other
        } else {
            self
        }
    }

    /// The deadline in scope on this thread: the one of the
    /// [request scope](crate::context::RequestScope) around (the server layer's, or one entered
    /// by the application); `None` outside any (then the client room sends outgoing calls
    /// unchanged).
    ///
    /// A thread-local read: no lock, no allocation. A task spawned from inside a scope does not
    /// see it unless it was wrapped with [`context::carry`](crate::context::carry).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use shared_headers::context::RequestScope;
    /// # use shared_headers::deadline::{Deadline, DeadlineSource};
    /// assert_eq!(Deadline::current(), None);
    /// let deadline = Deadline::after(Duration::from_secs(1), DeadlineSource::Server).unwrap();
    /// let scope = RequestScope::new().deadline(deadline);
    /// scope.enter(|| assert_eq!(Deadline::current(), Some(deadline)));
    /// assert_eq!(Deadline::current(), None);
    /// ```
    #[inline]
    pub fn current() -> Option<Deadline> {
        CURRENT.try_with(Cell::get).unwrap_or(None)
    }

    /// `self` as the deadline in scope until the guard is dropped (on unwind too), the context
    /// left as it is: for the server layer, whose call would otherwise move the request into a
    /// closure (one copy of a `Request` fewer per request) and whose poll has no context to
    /// lend.
    #[cfg(any(feature = "server", test))]
    #[inline]
    pub(crate) fn guard(self) -> Restore {
        Restore::set(Some(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_ms(ms: u64, source: DeadlineSource) -> Deadline {
        Deadline::after(Duration::from_millis(ms), source).unwrap()
    }

    #[test]
    fn min_keeps_the_earlier_and_its_source() {
        let now = Instant::now();
        let a = Deadline::at(now, DeadlineSource::Server);
        let b = Deadline::at(now + Duration::from_millis(1), DeadlineSource::Caller);
        assert_eq!(a.min(b), a);
        assert_eq!(b.min(a), a);
        let tie = Deadline::at(now, DeadlineSource::Caller);
        assert_eq!(a.min(tie).source(), DeadlineSource::Server);
        assert_eq!(tie.min(a).source(), DeadlineSource::Caller);
    }

    #[test]
    fn remaining_saturates() {
        let now = Instant::now();
        let d = Deadline::at(now, DeadlineSource::Server);
        assert_eq!(d.remaining_at(now + Duration::from_secs(5)), Duration::ZERO);
        assert!(d.is_expired());
        assert_eq!(Deadline::after(Duration::MAX, DeadlineSource::Server), None);
    }

    #[test]
    fn guard_sets_until_dropped_nests_and_restores_on_unwind() {
        let outer = in_ms(1000, DeadlineSource::Server);
        let inner = in_ms(5000, DeadlineSource::Caller);
        let guard = outer.guard();
        assert_eq!(Deadline::current(), Some(outer));
        let nested = inner.guard();
        assert_eq!(Deadline::current(), Some(inner));
        drop(nested);
        assert_eq!(Deadline::current(), Some(outer));
        let r = std::panic::catch_unwind(|| {
            let _guard = inner.guard();
            panic!("boom")
        });
        assert!(r.is_err());
        assert_eq!(Deadline::current(), Some(outer));
        drop(guard);
        assert_eq!(Deadline::current(), None);
    }

    #[test]
    fn a_deadline_is_small() {
        assert!(std::mem::size_of::<Deadline>() <= 24);
        assert_eq!(
            std::mem::size_of::<Option<Deadline>>(),
            std::mem::size_of::<Deadline>()
        );
    }
}
