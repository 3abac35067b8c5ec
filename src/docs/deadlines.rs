//! Deadline propagation: a request's deadline (the server layer's own, or the caller's budget),
//! the deadline in scope for the code a handler runs, and outgoing calls that inherit what is
//! left of it; the three-service demo and its table.
//!
//! Once the edge has answered `504`, work below it is wasted: the middle service still waits on
//! a slow leaf, which still works, for an answer nobody will read. Each outgoing call should
//! carry what is left of the request's deadline, as gRPC's deadline propagation and Envoy's
//! `x-envoy-expected-rq-timeout-ms` do.
//!
//! The pieces: a [`Deadline`](crate::deadline::Deadline) per request (the server's own timeout or the
//! caller's [`BudgetHeader`](crate::deadline::BudgetHeader), the earlier of the two), in scope while the
//! handler is polled ([`Deadline::current`](crate::deadline::Deadline::current)); and on the way out
//! [`client::PropagateLayer`](crate::client::PropagateLayer) (or the reqwest
//! `PropagateMiddleware`), which sends each call with what is left minus a margin, in the header
//! the next hop reads, cut when it is spent, and not at all when nothing is left; the same
//! layer sends the request's [context](crate::context) (its id, trace and tenant headers). A
//! task the handler spawns keeps the deadline and the context only through
//! [`context::carry`](crate::context::carry). Outside any deadline nothing changes.
//!
//! ## The margin: why the service below must time out first
//!
//! The margin is what the caller keeps of its time for the answer to come back. With none,
//! the service below and the caller time out at the same instant, and the caller never relays
//! the answer from below: it times out itself (both access lines say `timed out`). The
//! default is **a tenth of what is left, at most 100 ms**: the service below gets 900 ms of a
//! second, 180 ms of 200 ms, 9.9 s of 10 s. It pays for
//!
//! * the answer's trip **one hop back** (microseconds on loopback, milliseconds within a zone,
//!   tens of milliseconds across regions);
//! * the service below's **timer granularity**: it starts its clock when the request arrives,
//!   after it was sent; its timers fire on a millisecond wheel; a millisecond header drops the
//!   fraction of a millisecond;
//! * **scheduling** on both sides, which a busy runtime delays.
//!
//! A share keeps short budgets usable; the cap keeps long ones whole. The caller cuts its own
//! wait halfway through the margin: the first half is for the answer from below, the second
//! for the caller to answer from the cut before its own deadline.
//! [`PropagateLayer::margin`](crate::client::PropagateLayer::margin) sets a fixed margin
//! instead (`Duration::ZERO` is gRPC's own propagation: the time left, and a wait until the
//! deadline).
//!
//! ```
//! # #[cfg(feature = "client")]
//! # mod recipe {
//! use std::time::Duration;
//! use http::{Request, Response};
//! use shared_headers::client::PropagateLayer;
//! use shared_headers::context::{self, RequestScope};
//! use shared_headers::deadline::{BudgetHeader, Deadline, DeadlineSource};
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # pub async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! // The next hop (any tower client): here it answers with the `grpc-timeout` it was given.
//! let leaf = ServiceBuilder::new()
//!     .layer(PropagateLayer::new(BudgetHeader::grpc_timeout()).margin(Duration::from_millis(5)))
//!     .service_fn(|req: Request<()>| async move {
//!         let budget = BudgetHeader::grpc_timeout().parse_from(req.headers());
//!         Ok::<_, std::convert::Infallible>(Response::new(budget.and_then(Result::ok)))
//!     });
//!
//! // What the server layer does around the handler: the request's deadline is in scope.
//! let deadline = Deadline::after(Duration::from_millis(200), DeadlineSource::Server).unwrap();
//! let sent = RequestScope::new()
//!     .deadline(deadline)
//!     .scope(async move {
//!         // In a spawned task: `carry` keeps the deadline, a plain spawn would not.
//!         let call = leaf.oneshot(Request::new(()));
//!         tokio::spawn(context::carry(call)).await.unwrap()
//!     })
//!     .await?;
//! let budget = sent.into_body().expect("the leaf got a budget");
//! assert!(budget <= Duration::from_millis(195));
//! # Ok(())
//! # }
//! # }
//! # fn main() {
//! #     #[cfg(feature = "client")]
//! #     recipe::main().unwrap();
//! # }
//! ```
//!
//! ## The work it saves: three services over loopback
//!
//! `examples/deadlines.rs` runs an edge with a 200 ms deadline (`timeout_status(504)`), a
//! middle service and a slow leaf (every 3rd request takes 1 s, in 10 ms steps, in a task that a
//! dropped connection does not cancel), each a hyper server behind `SharedHeadersLayer` on
//! 127.0.0.1. The same load (30 requests, one every 20 ms) runs twice: with plain hyper clients,
//! and with the edge's and the middle's clients wrapped in
//! `PropagateLayer::new(BudgetHeader::millis(HeaderName::from_static("x-budget-ms")))`
//! `.margin(10 ms)` and the middle's and
//! the leaf's layers taking `caller_budget` of that header (the leaf's task, spawned with
//! [`context::carry`](crate::context::carry), stops once the budget is spent). The columns
//! sum, over the requests, the time from the edge's answer to the end of the middle's handler
//! and of the leaf's work (timestamps the services record in the process); "own/cut/below"
//! splits the edge's 504s into its own deadline (`timed out`), its client's `PropagateError`,
//! and a 504 that came from below (`answered`).
//!
//! `cargo run --quiet --features full --example deadlines` (debug build, shared 2-core machine,
//! load average about 8):
//!
//! ```text
//! |                         | requests |     edge 504s (own/cut/below) |   middle work after edge (ms) |   leaf work after edge (ms) |
//! |-------------------------|----------|-------------------------------|-------------------------------|-----------------------------|
//! | without propagation     |       30 |                   10 (10/0/0) |                             3 |                        8051 |
//! | with propagation        |       30 |                   10 (0/0/10) |                             0 |                           2 |
//! ```
//!
//! (Five earlier runs gave 8047 to 8076 ms without and 0 to 1 ms with.) The middle's
//! column is small both ways: hyper's HTTP/1 server drops a handler whose client has closed the
//! connection, so once the edge had answered (dropping its call) the middle's wait ended too;
//! what went on was the leaf's work, which no dropped connection reaches. The demo exits
//! non-zero unless the leaf's work after the edge's answer with propagation is at most a fifth of
//! the work without and at most 25 ms per slow request, and unless, with propagation, every
//! request's lines share one request id (at least half of them in all three services).
//!
//! With propagation each layer also has `propagate(Propagation::new().request_id().header(x-demo-n))`:
//! the edge generates the request id (the load sends none), and `PropagateLayer` sends it
//! and the demo's request number to the middle and the leaf, which no handler copies by hand.
//! Each service's access line (an `on_commit` hook: [`Committed::budget`](crate::Committed::budget),
//! [`time_to_commit`](crate::Committed::time_to_commit), [`deadline`](crate::Committed::deadline)`.source()`)
//! shows the chain; request #2 (slow), in commit order:
//!
//! ```text
//! without propagation
//!   edge   #2   id=-                                timed out 504 budget 200 ms (Server)   used  200 ms (made here: own deadline)
//!   middle #2   id=-                                cancelled -   budget   none            used  200 ms
//!   leaf   #2   id=-                                cancelled -   budget   none            used  200 ms
//! with propagation
//!   leaf   #2   id=3ac5020cd3ed0bafeb62d4d949d5bdf2 timed out 504 budget 178 ms (Caller)   used  178 ms (made here: own deadline)
//!   middle #2   id=3ac5020cd3ed0bafeb62d4d949d5bdf2 answered  504 budget 189 ms (Caller)   used  178 ms (from below)
//!   edge   #2   id=3ac5020cd3ed0bafeb62d4d949d5bdf2 answered  504 budget 200 ms (Server)   used  179 ms (from below)
//! ```
//!
//!
//! ## gRPC: tonic's own timers
//!
//! A gRPC call's budget is its `grpc-timeout` header: give it to the layer with
//! `caller_budget(BudgetHeader::grpc_timeout())`, and the layer answers a call over its budget
//! with `grpc-status: 4` (DEADLINE_EXCEEDED), its access line saying `timed_out`
//! (`examples/grpc.rs`, `tests/grpc.rs`). Two timers that are not the layer's decide some calls:
//!
//! * **tonic's server** (`tonic::transport::Server`) enforces `grpc-timeout` itself, outside
//!   the layer, and answers `grpc-status: 1` (CANCELLED) when its timer fires. Without
//!   `caller_budget`, that timer drops the layer's future: the line says `cancelled` with no
//!   status, because the answer was tonic's. With `caller_budget`, both timers are set for the
//!   same instant and which answers is a race. The layer does not win it by construction: to
//!   have its DEADLINE_EXCEEDED sent, serve the layer without tonic's transport timer (hyper
//!   directly, as the example does), or bound tonic's `Server::timeout` above the budgets your
//!   callers send.
//! * **tonic's client**: a call whose own `set_timeout` fires first ends with `Code::Cancelled`
//!   in the client (its own timer, not the server's answer), and the server's line says
//!   `cancelled` (the client reset the stream). Through
//!   [`PropagateLayer`](crate::client::PropagateLayer) under a deadline, with feature `tonic`,
//!   it ends with `Code::DeadlineExceeded` (next point).
//! * **tonic's `Channel`** enforces the `grpc-timeout` a request carries, also the one
//!   [`PropagateLayer`](crate::client::PropagateLayer) writes: its timer, counted from the
//!   send, fires about when the service below (whose budget counts from the arrival) answers
//!   DEADLINE_EXCEEDED; tonic alone reports its timer as `Code::Cancelled` ("Timeout
//!   expired"). The layer reports an error that comes once the budget it sent is spent as its
//!   own `PropagateError::Elapsed`, and with feature `tonic` its deadline errors carry
//!   `Status::deadline_exceeded`: the call ends with `Code::DeadlineExceeded` every time,
//!   whichever timer won, and the default margin lets the caller answer before its own
//!   deadline (`tests/client_grpc_status.rs`, `tests/client_propagate.rs`).
