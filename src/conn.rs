//! Connection health: a sticky, first-wins "dead" state that a pool checks atomically, so a
//! connection whose write failed is never handed out again.
//!
//! Go's HTTP/2 client pool kept handing out a connection for good after its writes had started
//! failing (golang/go#39750): the writer saw the error, but nothing recorded it where the pool
//! looked; the reader was blocked on an idle socket, and new streams kept the connection "busy",
//! so idle cleanup never ran. This module gives every connection one [`ConnHealth`], shared by
//! its reader, its writers, a health checker and the pool that holds it:
//!
//! * whoever sees the failure records it ([`ConnHealth::mark_dead`], or
//!   [`ConnHealth::observe`] with the `io::Error` and the [`classify`] table);
//! * the pool learns of it at once ([`ConnHealth::on_close`]) and drops the connection, busy or
//!   not;
//! * and the only way to use a connection, [`ConnHealth::try_acquire`], refuses it from then on.
//!
//! **hyper-util's `Client` and tonic's `Channel`** (feature `hyper-util`; the retry layer is
//! the `client` feature's, and replays a tonic body with feature `tonic`): `HealthConnector`
//! wraps their connector so that each connection carries a `ConnHealth`, and the client
//! closes a connection the moment it is dead; with `client::ConnRetryLayer` an idempotent
//! request whose connection died under it, and any request never written, is sent again on a
//! fresh one. The fault matrix and
//! the cost: [`docs::outgoing`](crate::docs::outgoing).
//!
//! # States
//!
//! ```text
//!                mark_draining()              mark_dead(cause)
//!  new --> +------+ ------------> +----------+ ----------------> +-------------+
//!          | Open |               | Draining |                   | Dead(cause) |
//!          +------+ -------------------------------------------> +-------------+
//!                              mark_dead(cause)
//!
//!  try_acquire():
//!    Ok(Lease), or               Err(Draining)                  Err(Dead(cause))
//!    Err(AtLimit) when full
//! ```
//!
//! States only move forward, and every arrow is taken at most once: the first
//! [`mark_draining`](ConnHealth::mark_draining) or [`mark_dead`](ConnHealth::mark_dead) wins,
//! later calls return `None`. The first transition out of open fires the `on_close` callback,
//! exactly once. Leases in flight are never waited for: a dead connection with busy streams is
//! evicted immediately; its streams fail on their own and release their leases when dropped.
//!
//! # How does it work?
//!
//! The state and the number of leases in flight live in one `AtomicU64`:
//!
//! ```text
//!    63     62     61 ............................................. 0
//! +------+-------+--------------------------------------------------+
//! | dead | drain |            leases in flight (62 bits)            |
//! +------+-------+--------------------------------------------------+
//! ```
//!
//! * `try_acquire` is one compare-and-swap: "if no state bit is set and the count is below the
//!   limit, add 1". `Lease::drop` is one `fetch_sub(1)`.
//! * `mark_draining` and `mark_dead` are one `fetch_or` each on the word; the count they return
//!   is the number of leases the connection carried at the instant of the transition. They are
//!   **not** wait-free as a whole: `mark_dead` first sets the cause's `OnceLock` (which waits if
//!   another `mark_dead` is setting it at that moment), and the first transition out of open
//!   fires the `on_close` callback under a `parking_lot` mutex.
//!
//! Because all of these are read-modify-writes of the same word, they are totally ordered: a
//! lease is either counted by `mark_dead` or refused, never granted behind its back. A design
//! with a separate `dead` flag and counter ("check the flag, then increment") lets a lease slip
//! in after `mark_dead` read the counter; the loom model `split_design_admits_after_death` in
//! `loom-tests/tests/conn.rs` finds that interleaving.
//!
//! **Where the cause lives.** The cause does not fit in the word, so it sits in a once-set cell
//! (`OnceLock`). `mark_dead` writes the cell *before* it sets the `dead` bit: the first writer
//! of the cell wins, a losing writer has observed the winner's value, and both then set the bit
//! with a release read-modify-write (a losing writer's `set` acquired the winner's completion:
//! `OnceLock`'s own ordering, which the chain needs). Any thread that sees the `dead` bit with an acquire load
//! therefore also sees the cell written, so a refusal always carries the cause
//! ([`AcquireError::Dead`]) and every observer sees the same one. A `Mutex<Option<_>>` written
//! *after* the transition would instead let a reader see "dead" with no cause.
//!
//! **Orderings, each checked by weakening it.** Every non-`Relaxed` ordering on the word is
//! there because a loom model in `loom-tests/tests/conn.rs` fails without it (runs with
//! `-C debug-assertions`, `LOOM_MAX_PREEMPTIONS=2`, the once-cell stand-in built from a loom
//! atomic with `OnceLock`'s orderings and no more, no mutex); the others are `Relaxed`, with
//! the reason next to them:
//!
//! | site | ordering | weakened to `Relaxed`, fails |
//! |---|---|---|
//! | `try_acquire`: first load | Acquire | 4 of 5 protocol models ("DEAD published before its cause") |
//! | `try_acquire`: CAS failure | Acquire | 4 of 5 protocol models (same) |
//! | `try_acquire`: CAS success | Relaxed | nothing is read on success (no state bit set) |
//! | `mark_draining`: `fetch_or` | Acquire (was Relaxed) | `lease_work_is_visible_once_mark_draining_counts_zero` (it returns the leases in flight: a caller told 0 must see the holders' work); no Release half: it publishes nothing, and still continues `mark_dead`'s release sequence |
//! | `mark_dead`: `fetch_or` | AcqRel (was Release) | Relaxed or Acquire: the protocol models ("DEAD published before its cause"); Release: `lease_work_is_visible_once_mark_dead_counts_zero` (the count it returns, as `mark_draining`'s) |
//! | `status`: load | Acquire | `on_close_fires_exactly_once` |
//! | `in_flight`: load | Acquire | `lease_work_is_visible_once_in_flight_is_zero` |
//! | `Lease::drop`: `fetch_sub` | Release | `lease_work_is_visible_once_in_flight_is_zero` |
//!
//! All of them `Relaxed` at once (an experiment that once passed every model):
//! five of the six models fail; only the split-design control, which does not use the word,
//! is unaffected.
//!
//! **Dependencies.** The module is behind the `conn` feature (in `full`), which pulls in no
//! crate of its own, but it is not "std only": the `on_close` slot is a `parking_lot` mutex
//! (through the crate's `sync` module).
//!
//! # Errors and what they mean
//!
//! [`classify`] sorts an `io::Error` into [`Health::Dead`], [`Health::Draining`] or
//! [`Health::Transient`]; [`ConnHealth::observe`] applies it. The table is in [`classify`]'s
//! docs. In short: resets, broken pipes, aborts, EOF inside a message, and any unknown error are
//! dead; a timeout is draining; would-block and interrupted are transient.
//!
//! **Measured on Linux loopback** (`tests/conn_sockets.rs`, run with `--nocapture`): after the
//! peer's FIN has arrived, the next write still *succeeds* (the kernel accepts the bytes); the
//! peer answers them with RST, and only the write after that fails (`EPIPE`, `BrokenPipe`).
//! After an RST, the first write fails with `ECONNRESET`. A server that closes right after
//! reading the next request shows up only on the read side (`read` returns 0) although the
//! request was written fine. So learning of death from writes alone is too late: the reader (or
//! a peek) of an idle connection must mark it dead too, as the tests' connections do, and then
//! the pool drops it before anyone checks it out.
//!
//! # Examples
//!
//! A connection's writer fails; its health refuses every lease from then on, and the pool
//! that holds it hears of it at once (`on_close`), so it drops the connection before anyone
//! checks it out again (hyper-util's `Client` does the same with a [`HealthConnector`],
//! feature `hyper-util`):
//!
//! ```
//! use std::io;
//! use std::sync::{Arc, Mutex};
//! use shared_headers::conn::{AcquireError, Cause, ConnHealth, Health};
//!
//! // A pool of one connection: evicted by its `on_close` callback.
//! let health = ConnHealth::with_max_concurrent(100);
//! let pooled = Arc::new(Mutex::new(Some(("conn #1", health.clone()))));
//! let pool = Arc::clone(&pooled);
//! health.on_close(move |_status| *pool.lock().unwrap() = None).ok();
//!
//! // Two tasks share the connection.
//! let first = health.try_acquire()?;
//! let other = health.try_acquire()?;
//! assert_eq!(health.in_flight(), 2);
//!
//! // The writer's next write fails with EPIPE: record it.
//! let err = io::Error::from(io::ErrorKind::BrokenPipe);
//! assert_eq!(first.health().observe(&err), Health::Dead);
//!
//! // Evicted although two streams are in flight; never leased again.
//! assert!(pooled.lock().unwrap().is_none());
//! let dead = Cause::Io(io::ErrorKind::BrokenPipe);
//! assert_eq!(health.try_acquire().unwrap_err(), AcquireError::Dead(dead));
//! assert_eq!(other.health().cause(), Some(dead));
//! # Ok::<(), AcquireError>(())
//! ```

mod classify;
#[cfg(feature = "hyper-util")]
mod connector;
#[cfg(feature = "hyper-util")]
mod h2watch;
mod health;
#[cfg(feature = "hyper-util")]
mod health_io;
// The connection task's waker slot: private, `pub` only in the loom world for its models.
#[cfg(all(feature = "hyper-util", not(shared_headers_loom)))]
mod park;
#[cfg(shared_headers_loom)]
#[doc(hidden)]
pub mod park;
mod status;

pub use classify::{Health, classify};
#[cfg(feature = "hyper-util")]
#[cfg_attr(docsrs, doc(cfg(feature = "hyper-util")))]
pub use connector::HealthConnector;
pub use health::{ConnHealth, Lease};
#[cfg(feature = "hyper-util")]
#[cfg_attr(docsrs, doc(cfg(feature = "hyper-util")))]
pub use health_io::HealthIo;
pub use status::{AcquireError, Cause, Status};
