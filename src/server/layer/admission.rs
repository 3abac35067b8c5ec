//! The layer's admission setting ([`SharedHeadersLayer::admission`]): part of the deadline
//! task.

use super::SharedHeadersLayer;
use crate::server::Admission;

/// # Deadline: admission
impl SharedHeadersLayer {
    /// Sets deadline-aware admission (a second call replaces it): a request whose remaining
    /// budget is below what its route needs is answered at once
    /// ([`Outcome::Shed`](crate::Outcome::Shed)), never started; an in-flight limit that
    /// adapts (at most [`Admission::limit`]) and a queue bounded by its predicted delay. See
    /// [`Admission`]. Its counts and estimates are read from [`stats`](Self::stats). Default:
    /// off.
    ///
    /// Admission needs a deadline to judge a budget by: the layer's
    /// [`timeout`](Self::timeout) or a [`caller_budget`](Self::caller_budget), set before or
    /// after. A request without one is never refused on its budget; it still counts against
    /// the limit (served after every request with a deadline), and is refused when the
    /// queue is full.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// use shared_headers::deadline::BudgetHeader;
    /// use shared_headers::server::{Admission, SharedHeadersLayer};
    ///
    /// let layer = SharedHeadersLayer::new()
    ///     .admission(Admission::new().limit(NonZeroUsize::new(32).unwrap()))
    ///     .caller_budget(BudgetHeader::grpc_timeout());
    /// let counts = layer.stats().admission_counts();
    /// assert_eq!((counts.limit, counts.free_permits), (4, 4)); // starts at 4, adapts up to 32
    /// ```
    pub fn admission(mut self, admission: Admission) -> Self {
        self.config.admission = Some(admission);
        self.resolve()
    }
}
