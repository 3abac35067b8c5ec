//! HTTP headers that the concurrent parts of a server or client can share: reads that never wait
//! for a writer's work, copy-on-write versions, and a commit-once seal.
//!
//! A request's headers are read and written by more than one party at once: the handler, the tasks
//! it spawned, a timeout that answers on its behalf, and the access logger. A Kubernetes API server
//! crashed with `concurrent map read and map write` because its logger read the headers while a
//! handler, still running after the timeout had answered, wrote them. Go fixed that class of bug by
//! giving the handler a private copy and committing it exactly once, with a defined winner between
//! "handler finished" and "timeout fired". This crate brings that rule to Rust.
//!
//! # Start here
//!
//! * **A server** (axum, hyper, tonic): [`server::SharedHeadersLayer`] (feature `server`), the
//!   tower layer that commits every request once (the handler's answer, the deadline and a
//!   panic race; one wins) and, with `tracing`, writes one access line per request
//!   ([`server::access_log`]); with `opentelemetry`, it records one `http.server.request.duration`
//!   point per request (`server::metrics`). Handlers read and write the headers through the
//!   request's [`Exchange`].
//! * **Deadlines** that come with a request and travel to the calls it makes: [`deadline`].
//! * **The request's context** (its id, W3C/B3 trace headers, a tenant) captured by the layer
//!   and sent on every call made for the request: [`context`], and the client room's
//!   [`client::PropagateLayer`] (a tower client, a tonic `Channel`) or, with `reqwest`,
//!   `client::reqwest::PropagateMiddleware`.
//! * **A client** with live default headers and a single-flight token refresh: [`client`].
//! * **A connection pool** that never hands out a dead connection: [`conn`]; with feature
//!   `hyper-util`, the same for hyper-util's `Client` and tonic's `Channel`
//!   (`conn::HealthConnector`, with `client::ConnRetryLayer`).
//! * **The handle alone**, shared by the parts of a program: [`SharedHeaders`], below.
//! * **Long-form pages**: [`docs`] (recipes, deadlines, the request's context, performance,
//!   testing, security, internals).
//!
//! ```
//! # #[cfg(all(feature = "server", feature = "tracing", feature = "opentelemetry"))]
//! # mod demo {
//! use std::convert::Infallible;
//! use std::time::Duration;
//!
//! use http::{HeaderValue, Request, Response};
//! use shared_headers::context::Propagation;
//! use shared_headers::{Error, Exchange, server::SharedHeadersLayer};
//! use tower::{Layer, ServiceExt, service_fn};
//!
//! async fn handler(req: Request<()>) -> Result<Response<String>, Infallible> {
//!     let exchange = req.extensions().get::<Exchange>().unwrap(); // the layer put it there
//!     let cache = exchange.response().insert("x-cache", HeaderValue::from_static("miss"));
//!     // The one possible error: the request was committed (its deadline fired). Stop then.
//!     if let Err(Error::Sealed { .. }) = cache {
//!         return Ok(Response::new(String::new()));
//!     }
//!     Ok(Response::new("hello".to_owned()))
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! pub async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let meter = opentelemetry::global::meter("my-server");
//!     let layer = SharedHeadersLayer::new()
//!         .timeout(Duration::from_secs(5)) // a deadline: answered 503 at the wall clock
//!         .tracing_access_log() // the line: one per request, when its response ends
//!         .otel_metrics(&meter) // the metric: http.server.request.duration
//!         .propagate(Propagation::new().request_id().w3c()); // the request's context
//!         // .caller_budget(BudgetHeader::grpc_timeout()) // gRPC: the caller's deadline too
//!     let service = layer.layer(service_fn(handler));
//!     let res = service.oneshot(Request::new(())).await?;
//!     assert_eq!(res.headers()["x-cache"], "miss"); // the shared headers, merged once
//!     Ok(())
//! }
//! # }
//! # fn main() {
//! #     #[cfg(all(feature = "server", feature = "tracing", feature = "opentelemetry"))]
//! #     demo::main().unwrap();
//! # }
//! ```
//!
//! # Why not `RwLock<HeaderMap>`?
//!
//! The usual Rust answer compiles, but it does not answer the questions that matter:
//!
//! ```
//! use std::sync::{Arc, RwLock};
//! use http::HeaderMap;
//!
//! let headers = Arc::new(RwLock::new(HeaderMap::new()));
//! // The timeout answers and the logger logs the headers...
//! let logged = headers.read().unwrap().clone();
//! // ...while a task the handler spawned keeps writing: accepted, and never sent or logged.
//! headers.write().unwrap().insert("x-late", "1".parse().unwrap());
//! assert_ne!(logged, *headers.read().unwrap());
//! ```
//!
//! Every log line takes the lock and waits behind a writer that copies or rebuilds the map; a
//! guard held across `.await` blocks every other reader; two headers written in two steps can be
//! logged half-updated; and nothing says who commits the response or what happens to a write that
//! arrives after it was sent.
//!
//! With [`SharedHeaders`], readers of a default handle take no lock and never wait (a
//! request-scoped handle, [`Publication::Locked`], reads from a per-thread cache and takes a read
//! lock, for one reference-count increment, only on a thread's first read of each version), a
//! write publishes a whole new version, and [`seal`](SharedHeaders::seal) commits once, so a late write is refused instead of
//! silently lost:
//!
//! ```
//! use shared_headers::{Error, SharedHeaders};
//!
//! let headers = SharedHeaders::new();
//! let spawned_task = headers.clone();
//! // The timeout answers first and commits; the logger logs exactly what was committed.
//! let logged = headers.seal()?;
//! // The late write is refused, with the version that was committed.
//! let late = spawned_task.insert("x-late", "1".parse()?);
//! assert_eq!(late, Err(Error::Sealed { version: logged.version() }));
//! assert_eq!(logged, headers.snapshot());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! | | `Arc<RwLock<HeaderMap>>` | `SharedHeaders` |
//! |---|---|---|
//! | a read | takes the lock; waits while a writer holds it | never waits for a writer's work (a request-scoped handle locks only for a thread's first read of each version) |
//! | a guard across `.await` | blocks every other reader and writer | impossible: reads hand out owned `Snapshot`s |
//! | what a log line sees | whatever the map holds at that instant | one whole version; the sealed one after the commit |
//! | a write after the response was sent | accepted, never sent, never logged | `Err(Sealed { version })`, counted |
//! | who commits: handler or timeout? | no rule | the first caller wins, exactly once |
//! | a write | in place: cheap | copies the map: cost grows with the header count |
//!
//! # Consistency
//!
//! * **A snapshot is one version.** [`Snapshot`] and [`read`](SharedHeaders::read) see the map,
//!   the version number and the sealed flag of one published version, loaded with one atomic
//!   load: never a mix of two versions, never a half-applied [`update`](SharedHeaders::update).
//!   A snapshot never changes afterwards. Two separate reads can see two versions: read headers
//!   that belong together from one snapshot ([`docs::patterns`]).
//! * **Writes are serialized.** Each write starts from the version the previous write published,
//!   so no update is lost, and an `update` closure runs exactly once (no retry loop). Versions
//!   start at 0 and grow by exactly one per published change (including the seal); a refused or
//!   panicking write publishes nothing.
//! * **Reads of one handle are linearizable.** A read that starts after a write to the same
//!   handle returned sees that write or a later one; a single reader never sees versions go
//!   backwards.
//! * **Across handles, order comes only from happens-before.** A thread that writes one handle
//!   and then reads another is not ordered with a second thread doing the opposite: each can
//!   miss the other's completed write (store buffering, which the C++20/Rust memory model
//!   allows; on a [`Reader`] and on the cached reads of request-scoped handles it happens, and
//!   loom shows it: [`docs::internals`](docs::internals#what-holds-per-handle-and-across-handles)). What orders reads of two handles is a happens-before
//!   edge: a join, a channel, a lock, or a commit observed through the [`Exchange`].
//! * **A later seal implies every earlier one.** A thread that sees a handle sealed sees sealed
//!   every handle that the sealing thread sealed before it: a reader that sees an exchange's
//!   response sealed sees its request sealed.
//! * **Seal is final.** Exactly one of any number of concurrent [`seal`](SharedHeaders::seal)
//!   calls succeeds. Every write either happened before the seal, and is in the sealed snapshot, or
//!   returns [`Error::Sealed`]: never accepted and missing. After the seal every read sees the
//!   sealed snapshot.
//! * **Optimistic drafts.** A [`Draft`] is a private copy, editable across `.await`s, that
//!   [`commit`](SharedHeaders::commit) publishes only if nothing was published since it was taken
//!   ([`Error::Conflict`] otherwise).
//!
//! # Trade-offs
//!
//! * **Every write clones the map.** Copy-on-write costs one `HeaderMap::clone` per write, so
//!   write cost grows with the number of headers: several times an in-place write under a lock.
//!   A plain [`seal`](SharedHeaders::seal) copies nothing. Batch changes with
//!   [`update`](SharedHeaders::update). This crate suits many reads and few writes per request.
//! * **Old versions live while someone reads them.** A held [`Snapshot`] keeps its version's map
//!   alive; it is freed when the last snapshot of it drops ([`docs::security`]).
//! * **Writers wait for each other.** Writes to one map are serialized by a mutex (never held by a
//!   reader). A write to the same headers from inside an `update` closure would deadlock, so it
//!   panics instead, with a message that says so ([`update`](SharedHeaders::update)).
//!
//! # Settings and bad input
//!
//! Every builder of the crate (the handle's [`Builder`], `SharedHeadersLayer`, `AccessLog`,
//! `Propagation`, the client layers) meets bad input the same way:
//!
//! * a setter takes an **already-checked value** (`HeaderName`, `HeaderValue`, `Duration`,
//!   `StatusCode`, a `Builder`) and cannot fail: parse a run-time string yourself
//!   (`str::parse`, whose error is yours), or use `HeaderName::from_static` for a literal;
//! * what can only be checked against other input is checked **once, in one place, with a
//!   typed error**: `Propagation::header` refuses a name that may never travel
//!   (`PropagationError`), `Builder::build_from` a map over the limits (`Error`);
//! * settings that depend on each other are resolved by **one rule, whatever the order of the
//!   calls** (in the server layer: a name secret in either policy is never propagated nor
//!   printed), when the layer is built, never per request;
//! * a setter's first doc line says whether it **sets** (a second call replaces) or **adds**
//!   (hooks, secret names, budget headers add up).
//!
//! # Performance
//!
//! Uncontended, a read costs what an uncontended lock costs, and it stays that fast while a
//! writer works: a reader never queues behind a writer. A write costs a copy of the map.
//! [`docs::performance`] has every figure, each with the `cargo bench` that produces it, the
//! hardware it was measured on, and a ratio to a baseline measured in the same run.
//!
//! # Crate features
//!
//! * `server`: the [`server`] module, tower middleware for servers with commit-once timeout
//!   semantics, the caller's deadline (`grpc-timeout`, `connect-timeout-ms`, Envoy's header),
//!   answers in gRPC's words, and the request's [`context`] captured and put in scope
//!   (`SharedHeadersLayer::propagate`).
//! * `tracing`: a ready access log on `tracing` (`server::access_log`, implies `server`).
//! * `access-json`: the access line's own writer, one JSON object per line off the request's
//!   thread (`server::access_log::json::JsonLines`, a `tracing_subscriber` layer; implies
//!   `tracing`).
//! * `axum`: [`Exchange`] and `server::RequestHeaders` as axum 0.8 extractors (axum-core only;
//!   implies `server`).
//! * `opentelemetry`: OpenTelemetry's HTTP server metrics from a `Meter` you pass
//!   (`server::metrics`, `SharedHeadersLayer::otel_metrics`; the `opentelemetry` API crate
//!   only, no SDK; implies `server`).
//! * `client`: the [`client`] module, live-rotating default headers for outgoing requests and a
//!   single-flight refresh, a layer that refreshes and retries once on a refused credential,
//!   and `PropagateLayer`, which sends the request's context and what is left of its deadline
//!   on every outgoing call made for it.
//! * `reqwest`: `client::reqwest`, the same as `reqwest-middleware` middleware:
//!   `DefaultHeadersMiddleware` (the live defaults and the retry) and `PropagateMiddleware`
//!   (the context and the deadline); reqwest without default features, so no TLS stack is
//!   pulled in.
//! * `tonic`: the client's deadline errors carry tonic 0.14's `Status::deadline_exceeded`, so a
//!   tonic call over `client::PropagateLayer` that the deadline stopped ends with
//!   `Code::DeadlineExceeded` (tonic without default features; implies `client`).
//! * `conn`: the [`conn`] module, connection health for pools (`ConnHealth`,
//!   `classify`); no dependency of its own.
//! * `full`: `server`, `tracing`, `axum`, `opentelemetry`, `client`, `reqwest`, `tonic` and
//!   `conn`.
//! * `rwlock-backend`: publish versions through a `parking_lot::RwLock<Arc<_>>` instead of
//!   `arc_swap::ArcSwap`. Same semantics; every handle then reads as a `Locked` one (a
//!   per-thread cache, and a short read lock on a thread's first read of each version).
//!
//! # Rooms
//!
//! The core needs no feature: the handle, its [`Snapshot`]s and [`Draft`]s, the [`Builder`] for
//! limits and secret names, [`Redacted`], [`Error`], [`Exchange`] (the runtime-free
//! commit-once core of a request/response pair), and [`deadline`] (a request's [`Deadline`](deadline::Deadline),
//! the deadline in scope for the code a handler runs, and the [`BudgetHeader`](deadline::BudgetHeader) wire formats
//! that carry what is left of it to the next service). Around it are three rooms that use only the
//! core, never each other: [`server`] (the tower layer that drives an `Exchange` per request),
//! [`client`] (default headers for outgoing requests, the single-flight refresher) and [`conn`]
//! (connection health for pools; feature `conn`).
//! [`docs::internals`] shows how they fit; [`docs`] holds the long-form documentation.

#![cfg_attr(docsrs, feature(doc_cfg))]
// The core's docs link to the rooms (`server`, `client`, `conn`), which exist only with their features:
// docs.rs builds with all of them (`[package.metadata.docs.rs]`), where every link resolves and
// `--features full` checks them; a build with fewer features shows those links as plain text.
#![cfg_attr(
    not(all(feature = "server", feature = "client", feature = "conn")),
    allow(rustdoc::broken_intra_doc_links)
)]

mod builder;
pub mod context;
pub mod deadline;
mod draft;
mod error;
mod exchange;
#[cfg(any(feature = "server", feature = "client"))]
mod merge;
mod policy;
mod redact;
#[cfg(any(feature = "server", feature = "client"))]
mod semconv;
mod shared;
mod snapshot;
mod sync;
mod writer_lock;

pub mod docs;

#[cfg(feature = "conn")]
#[cfg_attr(docsrs, doc(cfg(feature = "conn")))]
pub mod conn;

#[cfg(feature = "server")]
#[cfg_attr(docsrs, doc(cfg(feature = "server")))]
pub mod server;

#[cfg(feature = "client")]
#[cfg_attr(docsrs, doc(cfg(feature = "client")))]
pub mod client;

// The README's Rust examples are compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub use builder::{Builder, Publication};
pub use draft::Draft;
pub use error::{Error, Limit};
pub use exchange::{
    AlreadyCommitted, CommitEvent, CommitHooks, Committed, Exchange, LateWrites, Outcome,
};
pub use redact::Redacted;
pub use shared::{Reader, SharedHeaders};
pub use snapshot::Snapshot;
