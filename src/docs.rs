//! Long-form documentation: recipes, performance figures, the testing strategy, security notes
//! and the architecture.
//!
//! This module holds no code. Each submodule is one page, and every code block on them is a
//! doctest that compiles and runs with `cargo test --doc --features full`.
//!
//! * [`patterns`]: recipes for reading and committing once, hyper, axum and tower-http servers,
//!   an access log, limits and metrics.
//! * [`outgoing`]: recipes for the calls a service makes: client default headers with a
//!   single-flight token refresh, a retry on a refused credential, the same for reqwest,
//!   deadline propagation, and a connection pool that never hands out a dead connection.
//! * [`deadlines`]: a request's deadline (the layer's own or the caller's budget), the deadline
//!   in scope for the code a handler runs, outgoing calls that inherit it, and the three-service
//!   demo.
//! * [`context`]: the request id and the trace headers, captured by the server layer, checked
//!   and bounded, and sent on every outgoing call made for the request; the request's spans
//!   (a hop of the trace, its `tracing` span, OpenTelemetry server and client spans), side by
//!   side with tower-http's and the contrib crate's.
//! * [`admission`]: deadline-aware admission measured: the overload run at 1x, 2x and 4x the
//!   leaf's capacity, and the cost of the admitted path.
//! * [`admission_reviews`]: each failure mode the reviews of admission found, before and after,
//!   the rules tried and withdrawn, and the known limits kept as ignored tests.
//! * [`performance`]: the headline figures, the hardware and method, how to reproduce them, and
//!   the handle's, the client's and the demos' figures.
//! * [`server_cost`]: what the server layer costs: its access line and metrics beside
//!   tower-http's and the contrib crate's, its allocations, a lean layer and the floor of a layer
//!   with versioned handles, loopback.
//! * [`testing`]: what each test suite checks, what the loom models prove and what they do not,
//!   the stress suites and the fuzz target.
//! * [`security`]: size limits, redaction of secret values, what a held snapshot costs, and the
//!   soundness record of the `arc-swap` dependency.
//! * [`internals`]: the core and its three rooms, the one published value, and the write path.
//! * [`versions`]: the versions of the crates named in the public API, and the policy for
//!   moving them.

pub mod admission;
pub mod admission_reviews;
pub mod context;
pub mod deadlines;
pub mod internals;
pub mod outgoing;
pub mod patterns;
pub mod performance;
pub mod security;
pub mod server_cost;
pub mod testing;
pub mod versions;
