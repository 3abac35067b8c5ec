//! How the crate is built: one core, three rooms, one published value, one write path.
//!
//! # One core and three rooms
//!
//! ```text
//!   +---------------------+  +---------------------+  +---------------------+
//!   | server              |  | client              |  | conn                |
//!   | feature `server`    |  | feature `client`    |  | no feature          |
//!   | SharedHeadersLayer, |  | DefaultHeadersLayer,|  | ConnHealth, Lease,  |
//!   | SharedHeadersService|  | Refresher,          |  | Pool, classify      |
//!   | ResponseFuture      |  | single_flight       |  |                     |
//!   +---------------------+  +---------------------+  +---------------------+
//!            |                        |                        |
//!            v                        v                        v
//!   +-----------------------------------------------------------------------+
//!   | core (no feature)                                                     |
//!   | SharedHeaders, Draft, Snapshot, Builder + policy, Redacted,           |
//!   | Error, header merge, Exchange / Committed / Outcome,                  |
//!   | sync.rs: the only file that names arc-swap, parking_lot, loom         |
//!   +-----------------------------------------------------------------------+
//! ```
//!
//! * **The core** needs no feature and no runtime. It is the handle and everything a version is
//!   made of, plus [`Exchange`](crate::Exchange), the commit-once protocol of one
//!   request/response pair, which is plain synchronous code so that loom can check it from
//!   threads. The header merge that both the server (committed response headers into the
//!   response) and the client (defaults into a request, a refresh into the defaults) use lives
//!   here, once.
//! * **The rooms** import the core and never each other: `shared_headers::server` (the tower
//!   layer that drives an `Exchange` from a future), `shared_headers::client` (default headers
//!   for outgoing requests and the single-flight refresh), and
//!   [`shared_headers::conn`](crate::conn) (connection health, std only; it uses only the core's
//!   `sync` primitives).
//! * **`sync.rs`** is the one place that names the real or the model-checked primitives. One
//!   `--cfg shared_headers_loom` switches the whole crate to loom stand-ins that give no more
//!   ordering than the real thing; the `rwlock-backend` feature switches how versions are
//!   published (see [`security`](super::security#the-dependencys-soundness-record)).
//!
//! # The one published value
//!
//! A handle is an `Arc` around a cell that holds one `Arc<State>`, where `State` is
//! `{ map, version, sealed }` (and the handle's policy, one `Arc` shared by all its versions).
//! Everything a reader can learn about a version is in that one value, and a writer replaces it
//! as a whole:
//!
//! * a read ([`get`](crate::SharedHeaders::get), [`read`](crate::SharedHeaders::read)) is one
//!   atomic load of the cell and a lookup; a [`Snapshot`](crate::Snapshot) is the loaded
//!   `Arc<State>` itself, owned, so it can cross an `.await`;
//! * so a reader sees the map, the number and the sealed flag of one version, never a mix;
//! * a sealed version shares the map of the version it seals: a plain seal copies nothing;
//! * an old version is freed when the last snapshot of it is dropped, at that moment.
//!
//! With the default backend the cell is an `arc_swap::ArcSwap<State>`; with `rwlock-backend` it
//! is a `parking_lot::RwLock<Arc<State>>` whose read section is one reference-count increment.
//!
//! # The write path
//!
//! ```text
//!   writer                              the cell                    readers
//!   ------                              --------                    -------
//!   1. lock the writer mutex
//!   2. load the current version  <----  Arc<State v7>  ---------->  load: v7
//!      (sealed? -> Err(Sealed), and the refused write is counted)
//!   3. clone its map
//!   4. apply the change (the closure runs once)
//!   5. admit by policy (limits)
//!      (over? -> Err(LimitExceeded), nothing published)
//!   6. publish Arc<State v8>     ---->  Arc<State v8>  ---------->  load: v8
//!   7. unlock                                                       (v7 lives while held)
//! ```
//!
//! In `src/shared/write.rs` these are named steps: `writer` (steps 1 and 2, the only way to start
//! a write), then `publish` or `publish_sealed` (steps 5 and 6), or, for a plain seal, `seal_as_is`,
//! which skips the copy and the admission: the sealed version shares the admitted map. Writers wait for each other on the mutex; readers never take it, so a reader never waits for
//! a writer. Each write starts from the version the previous one published, so no update is lost
//! and there is no compare-and-swap retry loop. A change that changes nothing (removing an absent
//! name) and a write that is refused or panics publish nothing. A [`Draft`](crate::Draft) is the
//! same path split in two: the copy is taken first, edited without any lock (across `.await`s),
//! and [`commit`](crate::SharedHeaders::commit) publishes it only if the current version is still
//! the draft's base.
//!
//! [`Exchange::commit`](crate::Exchange::commit) takes the exchange's own commit lock, seals the
//! request handle and the response handle, and records the winner; a later commit returns the
//! winner's record. The server layer calls it from exactly one of three places: the inner
//! service answered, the deadline fired, or the future was dropped.
//!
//! ```
//! use shared_headers::{Exchange, Outcome, SharedHeaders};
//!
//! let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
//! exchange.response().insert("x-cache", "miss".parse()?)?; // version 1
//! let committed = exchange.commit(Outcome::Answered)?; // both handles sealed
//! assert_eq!(committed.response().version(), 2); // the seal is one more version
//! assert!(exchange.commit(Outcome::TimedOut).is_err()); // one winner
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Hooks
//!
//! [`CommitHooks`](crate::CommitHooks) (the server layer's `on_commit` and `on_late_writes`)
//! run inside the exchange, so they run wherever the commit or the last drop happens:
//!
//! * **`on_commit`** runs inside the winning `commit`, after the three handles are sealed and
//!   while the commit lock is held, so no other committer and no response gets ahead of the
//!   log line. It may therefore run on the handler's task (answered), on the layer's deadline
//!   thread (timed out) or inside a `Drop` (cancelled). It must not call `commit` on the same
//!   exchange: that would wait for its own lock, so it panics instead (caught, as below).
//!   Writing to the handles is fine (refused: they are sealed). Keep it short: on the deadline
//!   thread a slow hook delays the layer's other deadlines.
//! * **`on_late_writes`** runs in the drop of the last clone of a committed exchange that
//!   refused writes: the count is final, since no clone is left to write. It costs nothing per
//!   request beyond the exchange itself, and keeps nothing alive.
//! * **A panicking hook** is caught (`catch_unwind`) and does not propagate: a hook that panics
//!   inside a `Drop`, during an unwind, or on the deadline thread neither aborts the process nor
//!   kills the thread, and the exchange stays committed. The panic hook still prints the
//!   message. With `panic = "abort"` a panic aborts, as always.
//!
//! # The deadline thread
//!
//! The server layer's `timeout` commits at the wall clock: one std thread per layer (started
//! at the first request with a deadline, shared by the layer's clones and services, ended when
//! they are dropped and no deadline is pending) commits expired exchanges whether or not the
//! task serving the request is polled, then wakes the response future, which answers the
//! timeout. Not a tokio task: a task woken from a tokio worker goes into that worker's LIFO
//! slot, which other workers cannot steal from, so a handler that blocks the worker would block
//! the timer too; the OS schedules a thread. No Tokio time driver is needed.
//!
//! One layer has one duration, so deadlines arrive in order: the queue is a FIFO (push O(1)
//! under an uncontended lock), and the thread is notified only when it waits for nothing (a new
//! deadline is never earlier than the one it waits for). Entries hold a `Weak`: they keep no
//! exchange alive, so the late-writes report runs when the last real clone goes. Dead entries
//! are dropped when they reach the head, and the queue is compacted when it doubles, so it
//! stays within about twice the requests in flight. If the thread cannot be started, the
//! deadline is applied when the future is polled. Its cost per request:
//! [`performance`](super::performance#the-server-layer-allocations-and-the-deadline).
