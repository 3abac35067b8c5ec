//! How the crate is built: one core, three rooms, one published value, one write path.
//!
//! # One core and three rooms
//!
//! ```text
//!   +---------------------+  +---------------------+  +---------------------+
//!   | server              |  | client              |  | conn                |
//!   | feature `server`    |  | feature `client`    |  | feature `conn`      |
//!   | SharedHeadersLayer, |  | DefaultHeadersLayer,|  | ConnHealth, Lease,  |
//!   | SharedHeadersService|  | Refresher,          |  | HealthConnector,    |
//!   | ResponseBody        |  | single_flight       |  | classify            |
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
//!   [`shared_headers::conn`](crate::conn) (connection health; feature `conn`, and no dependency of
//!   its own: it uses the core's `sync` primitives, which are parking_lot's).
//! * **`sync.rs`** is the one place that names the real or the model-checked primitives. One
//!   `--cfg shared_headers_loom` switches the whole crate to loom stand-ins that give no more
//!   ordering than the real thing; the `rwlock-backend` feature switches how versions are
//!   published (see [`security`](super::security#the-dependencys-soundness-record)).
//!
//! # The one published value
//!
//! A handle points to its shared part, a cell that holds one `Arc<State>`, where `State` is
//! `{ map, version, sealed_as }` (and the handle's policy, one `Arc` shared by all its
//! versions). The map and the version never change once published; `sealed_as` is 0 while the
//! version is unsealed and is set once, under the writer lock, when it is sealed. A writer
//! replaces the value as a whole, except for a seal, which marks the current version in place:
//!
//! * a read ([`get`](crate::SharedHeaders::get), [`read`](crate::SharedHeaders::read)) is one
//!   load of the cell and a lookup;
//! * a [`Snapshot`](crate::Snapshot) is the loaded `Arc<State>` **plus the seal read when it was
//!   taken** (0 or the sealed version). It never re-reads the seal, so it never changes, and it
//!   is owned, so it can cross an `.await`;
//! * so a reader sees the map, the number and the sealed flag of one version, never a mix: if it
//!   read "unsealed", the version was current and unsealed at that moment (a seal is never
//!   undone); if it read "sealed at v", the version is the last one forever (no write follows a
//!   seal), so the headers were exactly this map at version v;
//! * a seal copies, allocates and stores nothing: the sealed version is the admitted map of the
//!   current one, numbered `version + 1`;
//! * an old version is freed when the last snapshot of it is dropped, at that moment.
//!
//! Where the shared part lives: in an `Arc` of its own, or, for the server layer's request
//! and response handles, inside the exchange's one allocation (both handles and the exchange:
//! one allocation per request). A handle whose map starts empty and has no policy starts from
//! a version shared by every such handle of the thread (`State::empty`), so it allocates no
//! version until its first write; that shared version is never sealed in place (it would seal
//! every handle sharing it): a seal publishes its sealed twin, the same empty map already
//! sealed as version 1, which no write ever replaces.
//!
//! The cell's type depends on the handle's [`Publication`](crate::Publication):
//!
//! | publication | cell | read | write (store) and drop | used by |
//! |---|---|---|---|---|
//! | `LockFree` (the default) | `arc_swap::ArcSwap<State>` | lock-free, never waits | walk arc-swap's debt list: O(threads that ever read any `ArcSwap`) | [`SharedHeaders::new`](crate::SharedHeaders::new), `From<HeaderMap>`, the builder's default: long-lived handles such as client defaults |
//! | `Locked` | `parking_lot::RwLock<Arc<State>>`, a store count and an id | from the thread's read cache while it holds this handle at the current count (one atomic load, no lock, no shared write); else a read lock held for one reference-count increment | O(1): a write lock held for one pointer swap; the drop clears the dropping thread's cache if it holds the handle | the server layer's request and response handles (request-scoped) |
//!
//! With the `rwlock-backend` feature (and under loom) every cell is `Locked`. A
//! [`Reader`](crate::Reader) caches the `Arc<State>` it last loaded and checks, with one atomic
//! load, whether a newer version was published: every cell, whatever its publication, keeps a
//! sequence count, odd while a swap is in progress and even again once the new value is in
//! (the writer changes it, under the handle's writer lock). A reader whose cached count is the
//! current one reads its copy; otherwise it loads the value between two reads of the count and
//! caches the count only if both reads are the same even number. Whoever loads a new value
//! directly also sees the odd count, so a reader is never behind a direct read on its thread
//! (loom's reader models fail without the odd phase). It keeps the cached version and the
//! handle's shared part alive.
//!
//! **The read cache of `Locked` cells** (`src/sync/read_cache.rs`, `ReadCache`). A `Locked` cell's reads
//! (`get`, `read`, `len`, `version`, `snapshot`, ...) use the same count without a `Reader`: each
//! thread keeps one slot per cached type, `(id, count, Arc<State>)`. A read loads the cell's count
//! (Acquire) and, if the slot holds this cell's id at that count, runs on the cached version:
//! no lock word and no reference count is written, so two threads reading one request's handle
//! do not bounce a cache line between them (before the cache, the read lock's word made two
//! readers slower together than one alone: `benches/read_scaling.rs`). Otherwise it takes the
//! read lock for one `Arc` clone, releases it, runs the read, and caches the version if the count
//! was the same even number before and after. The id is given on the cell's first cached read,
//! from a per-thread block of a global counter, and is never reused, unlike a cell's address (a
//! slot keyed by address would serve a freed cell's version to a new cell at the same address
//! and count: arc-swap #210's failure, a read returning another request's headers). The slot is a
//! `RefCell` used only through `try_borrow`/`try_borrow_mut`: a read nested in a `read(f)`
//! closure hits under a second shared borrow or misses without caching, a panic releases the
//! borrow, and a replaced version is dropped after the borrow ends. The cell's drop clears the
//! dropping thread's slot if it holds the cell; other threads keep at most that one version until
//! their next `Locked` read. Under loom the slot is loom's `thread_local!` and the id a loom
//! atomic (Relaxed): `shared.rs` models 9 and 9b (compared by count only, or with the count read
//! after the value, they fail).
//!
//! # What holds per handle, and across handles
//!
//! **Per handle: linearizable.** Every write to one handle is serialized by its writer lock and
//! published by one store of its cell (or, for a seal in place, one store of the version's seal
//! word); a read that starts after a write to that handle returned sees it or a later one, and
//! one thread's reads of one handle never go backwards, whichever path serves them (arc-swap's
//! load, the read lock, a `Reader`'s or the thread's read cache: the sequence count's Release
//! and Acquire, loom models 5, 7b, 7c, 9, 9b).
//!
//! **Across handles: only what happens-before gives.** Two handles are two cells; nothing
//! orders a write to one with a read of the other unless a happens-before edge does. The
//! classic store-buffering shape shows it:
//!
//! ```text
//!   thread 1                              thread 2
//!   a.insert("x-a", v)?;                  b.insert("x-b", v)?;
//!   let saw_b = b.contains_key("x-b");    let saw_a = a.contains_key("x-a");
//!
//!   saw_a == false && saw_b == false is allowed: both writes completed, both reads missed.
//! ```
//!
//! The C++20/Rust memory model allows it whenever the reads are served by a load that the
//! write's release does not reach in time: a [`Reader`](crate::Reader) whose count load still
//! sees its cached count, or a `Locked` handle's read-cache hit (an Acquire count load against
//! a Release count store: no single total order). loom reaches it:
//! `loom-tests/tests/shared.rs`, model 11 (`store_buffering_across_two_handles_is_allowed`,
//! which asserts that the outcome "both missed" is reached on `Locked` read-cache hits and on
//! `Reader`s). A plain read of a `LockFree` handle goes through arc-swap, whose operations are
//! documented to contain a `SeqCst` read-modify-write each, but the crate does not promise more
//! than the per-handle order, on any publication.
//!
//! What does order reads of two handles:
//!
//! * **a commit observed through the exchange**: [`Exchange::commit`](crate::Exchange::commit)
//!   seals the request, then the response, under its commit lock, and publishes its record with
//!   a Release (`visible`); whoever sees the exchange committed
//!   ([`is_committed`](crate::Exchange::is_committed), [`committed`](crate::Exchange::committed),
//!   the commit's `Err(AlreadyCommitted)`) sees both handles sealed, with their final versions;
//! * **a later seal**: a thread that sees a handle sealed sees sealed every handle the sealing
//!   thread sealed before it (the seal word's Release store and Acquire load; loom model 10
//!   fails with either `Relaxed`). So a reader that polls an exchange's response with
//!   `is_sealed()` and sees it sealed sees the request sealed too; it may still read the
//!   handles' versions from before the commit if it read them *before* it saw the seal;
//! * **any happens-before edge of the program**: a thread join, a channel, a lock, an
//!   `Acquire` load of a `Release` store.
//!
//! # The write path
//!
//! ```text
//!   writer                                   the cell                    readers
//!   ------                                   --------                    -------
//!   1. `writer`: lock the writer lock,
//!      whose value is the current version   Arc<State v7>  ---------->  load: v7
//!      (sealed? -> Err(Sealed), counted)
//!   2. clone its map, apply the change
//!      (the closure runs once)
//!   3. `publish` / `store`: admit by policy
//!      (over? -> Err(LimitExceeded), nothing published)
//!      then store Arc<State v8>    ---->   Arc<State v8>  ---------->  load: v8
//!      and make v8 the lock's value
//!   4. unlock                                                            (v7 lives while held)
//!
//!   a plain seal: 1, then `seal_as_is`: mark v8 sealed as v9 in place (no copy, no store)
//! ```
//!
//! In `src/shared/write.rs` these are named steps: `writer` (step 1, the only way to start a
//! write), then `publish` (returns the new version's snapshot) or `store` (returns nothing, for
//! `insert`, `append`, `update`), or, for a plain seal, `seal_as_is`, which skips the copy, the
//! admission and the store. Because the writer lock holds the current version, a write never
//! loads the cell, and the replaced `State` is reused for the next one when no snapshot holds it.
//! Writers wait for each other on the lock; a `LockFree` reader never takes any lock, and a
//! `Locked` reader waits at most for a pointer swap, never for a writer's closure. Each write
//! starts from the version the previous one published, so no update is lost and there is no
//! compare-and-swap retry loop. A change that changes nothing (removing an absent name) and a
//! write that is refused or panics publish nothing. A [`Draft`](crate::Draft) is the same path
//! split in two: the copy is taken first, edited without any lock (across `.await`s), and
//! [`commit`](crate::SharedHeaders::commit) publishes it only if the current version is still the
//! draft's base.
//!
//! **Re-entrancy** (`src/writer_lock.rs`). Next to the writer lock sits an owner word: the holding thread's token (a
//! per-thread number, never 0) and the write it runs. `writer` compares it with the calling
//! thread's token before it locks; a write called from inside another write's closure on the same
//! handle (which would deadlock) panics with both operations named instead. A thread sets the
//! word to its own token only while it holds the lock, so relaxed loads suffice; the check costs
//! a thread-local read, one atomic load and two atomic stores per write.
//!
//! [`Exchange::commit`](crate::Exchange::commit) takes the exchange's own commit lock, seals the
//! request handle and the response handle, and records the winner; a later commit returns the
//! winner's record. The exchange counts its own clones (besides the allocation's reference
//! count, which its handles share): the drop that takes that count to zero runs the
//! late-writes report, with `AcqRel` so that it sees every refused write of every clone's owner
//! (loom's late-writes model fails with `Relaxed`); the timer's `Weak` becomes an `Exchange`
//! again only while that count is not zero. The server layer calls it from exactly one of three places: the inner
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
//! run where the exchange's driver runs them:
//!
//! * **`on_commit` of an [`Exchange::with_hooks`](crate::Exchange::with_hooks)** runs inside
//!   the winning `commit`, after the three handles are sealed and while the commit lock is
//!   held, so no other committer gets ahead of the log line; it must not call `commit` on the
//!   same exchange (that panics, caught).
//! * **`on_commit` of the server layer's exchanges** is deferred: the commit (whoever makes it:
//!   the response future, the deadline thread, the handler's own `Exchange::commit`) seals and
//!   records, and the response future runs the hook once, after it built the answer the record
//!   describes and before the response leaves the layer, with that response's head
//!   ([`CommitEvent::sent`](crate::CommitEvent::sent)); for a cancelled request, in the
//!   future's drop, with nothing sent. So the hook runs in the request's own task (inside its
//!   `tracing` span when the access log keeps it), never on the deadline thread: a slow, stuck
//!   or panicking hook delays that request's own answer and nothing else. A blocking hook
//!   blocks the runtime worker that runs it, like any blocking code in async.
//! * **`on_late_writes`** runs in the drop of the last clone of a committed exchange that
//!   refused writes: the count is final, since no clone is left to write. It costs nothing per
//!   request beyond the exchange itself, and keeps nothing alive.
//! * **A panicking hook** is caught (`catch_unwind`) and does not propagate, even when the
//!   panic's payload panics again when dropped (that second payload is leaked, not dropped): a
//!   hook that panics inside a `Drop` or during an unwind neither aborts the process nor kills
//!   the thread, and the exchange stays committed. The panic hook still prints the message.
//!   With `panic = "abort"` a panic aborts, as always.
//!
//! # The deadline thread
//!
//! The server layer's deadline commits at the wall clock: **one std thread for the process**
//! (started at the first deadline, then parked while none is pending; shared by every layer,
//! clone and duration) commits expired exchanges whether or not the task serving the request
//! is polled, then wakes the response future, which answers the timeout. It runs no user code:
//! the commit seals and records (the hook is the future's), and it commits through a weak
//! reference and two temporary handles, never an `Exchange`, so no late-writes report can run
//! there either. So no hook can delay another request's deadline or stop the thread.
//! The response future registers its waker only when the handler is pending (then looks again,
//! so a commit on either side of the registration is seen): a handler that answers at its
//! first poll costs the deadline nothing but its queue entry. The future drops the waker when
//! it commits, so a task that outlives the response does not keep the future's task. Not a
//! tokio task: a task woken from a tokio worker goes into that worker's LIFO slot, which other
//! workers cannot steal from, so a handler that blocks the worker would block the timer too;
//! the OS schedules a thread. No Tokio time driver is needed.
//!
//! One thread for every duration means deadlines do not arrive in order (per-route layers, the
//! caller's budgets): the queue is a binary heap ordered by deadline, then by arrival (push
//! O(log n) under one short lock), and the thread is notified only when it waits for nothing
//! or for a later deadline than the new one. One thread, not one per core: a commit at the
//! deadline is a few microseconds of sealing, so one thread keeps up with thousands of
//! simultaneous deadlines (`tests/layer_deadlines.rs`), and more threads would contend on the
//! same heap. Entries hold a `Weak`: they keep no exchange alive. Dead entries are dropped when
//! they reach the head, and the heap is compacted when it doubles, so it stays within about
//! twice the requests in flight. If the thread cannot be started, the deadline is applied when
//! the future is polled. Its cost per request:
//! [`server_cost`](super::server_cost#the-server-layer-allocations-per-request).
