//! A ready access log on `tracing` (feature `tracing`): one structured event per request at the
//! commit, and one per request whose tasks wrote after the commit.
//!
//! Install both with [`SharedHeadersLayer::tracing_access_log`], or pass the functions to
//! [`on_commit`](SharedHeadersLayer::on_commit) and
//! [`on_late_writes`](SharedHeadersLayer::on_late_writes) yourself (for example inside a hook
//! that also counts metrics).
//!
//! Events have the target `shared_headers::access`:
//!
//! | event | level | fields |
//! |---|---|---|
//! | `request committed` ([`commit`]) | `INFO` | `method`, `path`, `status` (absent for failed and cancelled requests), `outcome`, `latency_ms`, `request_headers`, `response_headers`, `annotations` |
//! | `writes refused after the commit` ([`late_writes`]) | `WARN` | `method`, `path`, `outcome`, `refused_writes`, `since_commit_ms` |
//!
//! The header fields are printed with each handle's secret names redacted
//! ([`Snapshot::redacted`](crate::Snapshot::redacted)): a secret header's value is never in the
//! event. Annotations have no secret names; do not annotate secrets.

use std::fmt;

use crate::exchange::{Committed, LateWrites};
use crate::snapshot::Snapshot;

#[cfg(doc)]
use super::SharedHeadersLayer;

/// Emits the `request committed` event for `committed` (see the [module docs](self)).
///
/// # Examples
///
/// ```
/// # use shared_headers::server::{SharedHeadersLayer, access_log};
/// let layer = SharedHeadersLayer::new().on_commit(|c| {
///     access_log::commit(c);
///     // ... and a metric, say
/// });
/// # drop(layer);
/// ```
pub fn commit(committed: &Committed) {
    let method = committed.method().map(|m| m.as_str()).unwrap_or("");
    let path = committed.uri().map(|u| u.path()).unwrap_or("");
    tracing::info!(
        target: "shared_headers::access",
        method,
        path,
        status = committed.status().map(|s| s.as_u16()),
        outcome = %committed.outcome(),
        latency_ms = committed.latency().as_secs_f64() * 1e3,
        request_headers = %committed.request().redacted(),
        response_headers = %committed.response().redacted(),
        annotations = %Annotations(committed.annotations()),
        "request committed"
    );
}

/// Emits the `writes refused after the commit` event for `late` (see the
/// [module docs](self)).
///
/// # Examples
///
/// ```
/// # use shared_headers::server::{SharedHeadersLayer, access_log};
/// let layer = SharedHeadersLayer::new().on_late_writes(access_log::late_writes);
/// # drop(layer);
/// ```
pub fn late_writes(late: &LateWrites) {
    let committed = late.committed();
    tracing::warn!(
        target: "shared_headers::access",
        method = committed.method().map(|m| m.as_str()).unwrap_or(""),
        path = committed.uri().map(|u| u.path()).unwrap_or(""),
        outcome = %committed.outcome(),
        refused_writes = late.refused_writes(),
        since_commit_ms = late.since_commit().as_secs_f64() * 1e3,
        "writes refused after the commit"
    );
}

/// The annotations as the header fields print them; nothing if the request had none.
struct Annotations<'a>(Option<&'a Snapshot>);

impl fmt::Display for Annotations<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(snapshot) => fmt::Display::fmt(&snapshot.redacted(), f),
            None => Ok(()),
        }
    }
}
