//! The versions of the crates this crate integrates with, and when they move.
//!
//! The public API names types of these crates (a trait this crate implements, or a type in a
//! signature); a user's version must match the one listed:
//!
//! | crate | version | where | feature |
//! |---|---|---|---|
//! | `http` | 1 | everywhere (`HeaderMap`, `Request`, `Response`, ...) | none |
//! | `http-body` | 1 | `server::ResponseBody` implements its `Body`; the services' body bounds | `server` |
//! | `tower-layer`, `tower-service` | 0.3 | every `Layer` and `Service` | `server`, `client` |
//! | `http-body-util` | 0.1 | `client::ReplayBody` for its `Full`, `Empty`, `Either` | `client` |
//! | `tracing` | 0.1 | `server::access_log::AccessLog::level` takes its `Level` | `tracing` |
//! | `opentelemetry` | 0.33 | `SharedHeadersLayer::otel_metrics` takes its `Meter`, `SharedHeadersLayer::otel_metric_attribute` returns its `KeyValue` | `opentelemetry` |
//! | `axum-core` | 0.5 | the `Exchange` and `RequestHeaders` extractors (`FromRequestParts`) | `axum` |
//! | `axum` | 0.8 | no type in a signature, but `http.route` is read from its `MatchedPath`: another axum version's route is not seen | `axum` |
//! | `reqwest`, `reqwest-middleware` | 0.13, 0.5 | `client::reqwest`'s `DefaultHeadersMiddleware` and `PropagateMiddleware` implement its `Middleware` | `reqwest` |
//! | `tonic` | 0.14 | no type in a signature, but the client's deadline errors carry its `Status` in their `source()` chain (what tonic's client maps to `DEADLINE_EXCEEDED`): another tonic version does not find it | `tonic` |
//!
//! `tokio` 1 is in no signature, but the client room uses it at run time: `Propagate` times a
//! deadline with `tokio::time` (a Tokio runtime with its time driver), `Refresher` waits through
//! `tokio::sync`. The policy:
//!
//! * An unversioned feature (`axum`, `reqwest`, `opentelemetry`, `tonic`) means the version listed here.
//!   Moving it to a new breaking version of that crate (for `opentelemetry`, every 0.x minor) is a
//!   breaking release of this one (0.x: the minor number), in the changelog.
//! * A new breaking version gets a versioned feature first (`axum-09`, `reqwest-014`,
//!   `opentelemetry-034`, as `tokio-postgres`'s `with-uuid-1` and `serde_with`'s `time_0_3`), in a
//!   minor release beside the old one; the unversioned name follows at the next breaking release.
//! * A bump of a dependency that stays compatible is not a breaking change.
