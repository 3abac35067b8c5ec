//! The layer's admission setting ([`SharedHeadersLayer::admission`]).

use super::SharedHeadersLayer;
use crate::server::Admission;

impl SharedHeadersLayer {
    /// Deadline-aware admission: a request whose remaining budget is below what its route
    /// needs is answered at once ([`Outcome::Shed`](crate::Outcome::Shed)), never started;
    /// with [`Admission::limit`], an in-flight limit served earliest deadline first. Keep a
    /// clone of `admission` to read its estimates and counts. See [`Admission`]. Default: off.
    ///
    /// Admission needs a deadline to judge by: the layer's [`timeout`](Self::timeout) or a
    /// [`caller_budget`](Self::caller_budget). A request without one is never shed (it still
    /// counts against the limit, after every request with a deadline).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// use shared_headers::deadline::BudgetHeader;
    /// use shared_headers::server::{Admission, SharedHeadersLayer};
    ///
    /// let admission = Admission::new().limit(NonZeroUsize::new(32).unwrap());
    /// let layer = SharedHeadersLayer::new()
    ///     .caller_budget(BudgetHeader::grpc_timeout())
    ///     .admission(admission.clone());
    /// assert_eq!(admission.counts().free_permits, 32);
    /// # drop(layer);
    /// ```
    pub fn admission(mut self, admission: Admission) -> Self {
        self.config.admission = Some(admission);
        self
    }
}
