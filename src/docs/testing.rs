//! The testing strategy: what each suite checks, what loom proves and what it does not, the
//! stress suites and the fuzz target.
//!
//! One command runs every check and every test:
//!
//! ```sh
//! ./scripts/test-all
//! ```
//!
//! It runs `cargo fmt --check`, `cargo clippy --all-targets -D warnings` (also on the
//! `rwlock-backend`), the docs with `-D warnings`, every unit, integration and doc test, the core
//! suite again on the `rwlock-backend`, the demos as short smoke runs, the long stress test
//! in release (60 s), a type check of the fuzz target, the loom models, Miri over the real
//! primitives (see [Miri](#miri)), and `cargo bench --no-run`.
//!
//! Each test asserts a property a user relies on; where there is an oracle, it is a plain
//! `http::HeaderMap`.
//!
//! # The demos
//!
//! Each runs a real server (and clients) on loopback and checks what it prints; `test-all` runs
//! each as a short smoke run.
//!
//! ```sh
//! cargo run --release --features full --example server -- --compare  # the main demo: the log against what was sent, beside Arc<Mutex<HeaderMap>>
//! cargo run --features axum,tracing --example axum                    # the layer under axum
//! cargo run --features full --example grpc                            # tonic behind the layer
//! cargo run --features full --example deadlines                       # an edge, a middle and a slow leaf: deadline propagation
//! cargo run --release --features full --example overload              # 1x to 10x load: no shedding, tower's LoadShed + ConcurrencyLimit, Admission
//! cargo run --release --features full --example pool                  # dead pooled connections: hyper-util, tonic, reqwest
//! cargo run --release --features client --example client_tokens       # a single-flight token refresh
//! cargo run --release --example origin                                 # the origin bug in plain threads: the first commit wins, late writes refused
//! ```
//!
//! # The suites
//!
//! | Suite | Command | What it proves |
//! |---|---|---|
//! | API parity | `cargo test --test api` | Every method answers like `HeaderMap` (same values, same order of multi-values, every key form: `HeaderName`, `&HeaderName`, `&str`, `String`); version rules (new = 0, +1 per published change, a refused write or the removal of an absent key publishes nothing); drafts (private until committed, a stale draft gets `Conflict`); seal (one version, every later write refused, closures not run); reads nest, and a read inside `update` sees the previous version without deadlocking; a panicking `update` publishes nothing and leaves the handle usable; the capacity limit is an `Err(MaxSizeReached)`, never a panic; `into_header_map` moves the map out without copying when it holds the last reference; `Send`/`Sync`/`'static`, a future holding a `Snapshot` across `.await` is `Send`, a handle can be stored in `http::Extensions`. |
//! | Model | `tests/support/model.rs` | The one model of the handle: an operation language covering every write and read, and an oracle (a plain `HeaderMap`, a version counter, a sealed flag, the handle's limits and secret names). Played through two clones of one handle, it checks after every step every result and error, the version and sealed flag, the contents in iteration order, every read for every name of its pool, that snapshots kept from earlier steps never change, that secret values are flagged and never printed. Three drivers feed it: |
//! | Differential | `cargo test --test differential` | The model driven by a fixed list of seeds (SplitMix64): 48 runs of 600 operations and 6 of 1,000, under seeded limits and secret lists; values are unique per step so any reordering shows; a failure names its seed. |
//! | Model (proptest) | `cargo test --test proptest_model` | The model driven by proptest with shrinking: up to 200 operations, 64 cases, random limits and secret lists; inputs include empty, 16 KiB, obs-text and flagged values, many duplicates, and a seal at a random step. Targeted tests fill a map to `HeaderMap`'s capacity and push 40,000 values of one name. |
//! | Stress | `cargo test --test stress` | Real threads, tens of thousands of writes: no lost update (counters incremented through `update` by 4 writers), no half-applied snapshot (8 headers set together are always seen equal, through `snapshot` and `read`), versions never decrease and always match the content, drafts retried on `Conflict` lose nothing, one seal wins against racing writers and every accepted write is in the sealed snapshot, and no leak: once every handle, snapshot and draft is dropped, every version is freed (a thread's read cache of a `Locked` handle frees its version when the thread reads another handle or exits; the check waits, at most 10 s, for the scoped threads' caches). |
//! | Long stress | `STRESS_SECS=60 cargo test --release --test stress -- --ignored` | The stress suite's mixed workload in its long configuration: a minute of rounds with a counting allocator; no lost update, no torn snapshot, memory back to its start after every round. |
//! | Allocations | `cargo test --test alloc` | Exact allocation counts of the core (a binary of its own, as the counting allocator counts the whole process): wrapping a map allocates twice, a policy once more, reads and snapshots never. |
//! | Redaction | `cargo test --test redaction` | No printed form (`Debug` of handle, snapshot and draft; `redacted()`) ever shows a secret value, on every write path, in the exact formats; a value cannot forge a log entry. |
//! | Server layer | `cargo test --features server --test layer_http` | Over real sockets: handler wins; deadline wins; the race at the deadline (300 requests: one commit each, the log equals what was sent); late writes refused and counted; an outer timeout that drops the future still seals; response headers written before the commit are sent, after it are not. |
//! | Client layer | `cargo test --features client --test client_defaults --test client_refresh --test client_loopback` | Precedence and merge policy, sensitivity kept, typed overflow error; over loopback, rotation never sends a torn token/companion pair and 32 concurrent `401`s on one version cause exactly one refresh; a failed refresh reaches every waiter and the next attempt works; a cancelled leader strands nobody. |
//! | Connection health | `cargo test --features conn --test conn_health --test conn_sockets` | Real threads and a proptest against a plain model; over loopback, a server that closes, half-closes, resets or closes after reading: the next request goes on a fresh connection and no lease is ever granted on a connection after its death was recorded. |
//! | Views of one record | `cargo test --features full --test record_views` | Over sockets, HTTP/1.1 and HTTP/2: 22 cells (7 body kinds x 200/500; timed out, handler panic, client hang-up, outer timeout, dropped before the first poll, a gRPC answer, shed on the caller's budget and on a queue-start header), 44 requests: each has exactly one access line, one server span and one duration point, every attribute two of them share is equal in all, and a fourth view built from the public record alone (`ResponseEnd`, `Committed`) gives the same values. One request carrying every secret form: no captured field, exported span or metric attribute (server and client), record `Debug`, nor the stdout and stderr of a server run in a child process holds one. |
//! | Demos | `./scripts/test-all` | The three demos run as short smoke runs and exit non-zero if their own checks fail (a log line that disagrees, a torn set, a stampede). |
//! | loom models | see below | The crate's protocols, in every interleaving loom explores. |
//!
//! The core suites also run against the `rwlock-backend` feature
//! (`cargo test --features rwlock-backend --tests`).
//!
//! # Stress
//!
//! One stress suite, `tests/stress.rs`: targeted tests (lost updates, half-applied updates,
//! drafts, seal races, leaks) and one mixed workload in two configurations of the same code.
//! The short one is part of `cargo test`; the long one is `#[ignore]`d and runs alone in release
//! for `STRESS_SECS` seconds (`./scripts/test-all` gives it 60): writers, drafters, readers
//! holding snapshots, racing sealers and drops, round after round. It asserts no lost update, no torn snapshot, monotonic
//! versions, one seal winner, limits held, secrets unprinted, and, with a counting global
//! allocator, that live bytes and allocations return to their starting level after every round.
//!
//! **How the leak test of the short suite counts.** Each header value is a `Bytes` made with
//! `Bytes::from_owner` around an owner whose `Drop` decrements a counter. Map clones share
//! values, so every version keeps its values alive: a version that is never freed keeps the
//! counter above zero. One test also shows that an old version is freed the moment its last
//! snapshot is dropped (no deferred reclamation).
//!
//! # Fuzzing
//!
//! `fuzz/` holds one cargo-fuzz target, `ops` (nightly, not part of the test command;
//! `./scripts/test-all` type-checks it on stable). It decodes the input bytes into a handle
//! configuration (limits, extra secret names) and up to 512 operations covering
//! every write and read, and plays them against the one model (`tests/support/model.rs`), the
//! same as the differential and proptest drivers; any disagreement, leaked secret or panic is a
//! crash.
//!
//! ```sh
//! cargo +nightly fuzz run ops -- -max_total_time=600
//! ```
//!
//! # Miri
//!
//! `./scripts/miri` (a step of `./scripts/test-all`) runs the crate's **real** primitives under
//! [Miri](https://github.com/rust-lang/miri), the interpreter that checks a run against Rust's
//! memory model: arc-swap's `ArcSwap` and its debt lists (the `LockFree` publication, with
//! arc-swap's own `unsafe` code inside), `parking_lot`'s `RwLock<Arc<_>>` (`Locked`, every
//! exchange handle) and mutexes, the writer lock's owner word, the `Cached` reader's sequence
//! count and the exchange's commit. Miri reports undefined behaviour, data races and leaks (its
//! defaults, all on), emulates weak memory (a load may return an older store the model allows),
//! and preempts threads at random; the script runs several seeds of that scheduler. It installs
//! what it needs if missing (the nightly toolchain, the `miri` and `rust-src` components, Miri's
//! sysroot), then runs:
//!
//! | Step | Command | What it runs |
//! |---|---|---|
//! | Seeds | `MIRIFLAGS="-Zmiri-permissive-provenance -Zmiri-many-seeds=0..8" cargo +nightly miri test --test miri` | `tests/miri.rs`, eight schedules: a writer and two readers on each publication (whole versions, never going back, `Reader` and direct reads), a `Reader` never behind a direct read on its thread against two writers (each publication), the arc-swap #210 address-reuse canary (tagged handles created, loaded on another thread and freed on two threads: Miri reuses freed addresses, and a load through a stale debt would be a use-after-free), and racing commits with a writer on the three handles (one winner, no accepted write missing). |
//! | rwlock backend | `cargo +nightly miri test --features rwlock-backend --test miri`, then `--lib sync::` | The same on the `rwlock-backend` feature, and the `sync` unit tests (one seed). |
//! | Library | `cargo +nightly miri test --features conn --lib` | Every unit test of the library with the `conn` room only: the `sync` unit tests (the sequence count, the consistent read, the cached reader, both strategies, the once-cell), the exchange's (racing commits, first annotations racing the commit, reads inside `update` while committing, a hook panicking during an unwind; 4 rounds instead of 200 under Miri), `conn::classify`, `merge` (one seed). |
//! | conn room | `cargo +nightly miri test --features conn --test conn_health` | Concurrent acquirers against `mark_dead`, eviction of busy connections from any thread, states only moving forward (one seed). |
//!
//! `-Zmiri-permissive-provenance`: `parking_lot_core` casts integers to pointers (its word lock's
//! queue), for which Miri warns that it may miss pointer bugs in that code; the flag silences
//! the warning (strict provenance would refuse to run it).
//!
//! **Time** (nightly 2026-05-19, the shared 2-core VM): warm, the eight seeds of `tests/miri.rs`
//! take about 55 s (16 seeds: 108 s), the library's unit tests 12 s, `conn_health` 32 s. Cold
//! (no Miri sysroot, no `target/miri`; the toolchain components already downloaded, which took
//! 3 s for `rust-src`), the whole script (`scripts/miri`) took **11 min 7 s** wall clock (6 min CPU) while a
//! cargo-mutants run shared the two cores: the sysroot 2 min 42 s, the dev-dependencies built
//! for Miri 2 min 5 s, the runs the rest. That keeps a cold CI run (`scripts/test-all`) under its
//! 30-minute budget.
//!
//! What does **not** run under Miri, and why:
//!
//! * sockets (`tests/conn_sockets.rs`, `layer_http.rs`, `layer_hooks.rs`, `layer_axum.rs`,
//!   `client_loopback.rs`): Miri's isolation gives no network;
//! * the server and client rooms (features `server`, `client`): their primitives are the core's,
//!   and their tests wait on wall-clock deadlines and tokio runtimes, slow to interpret; the
//!   remaining integration suites (`api`, `stress`, `handle_churn`, `differential`, `proptest_model`, `alloc`): they
//!   exercise the same primitives as `tests/miri.rs` at sizes (tens of thousands of operations,
//!   wall-clock budgets) that would take hours under Miri; `tests/miri.rs` is their small,
//!   threaded core;
//! * proptest (`conn_health`'s `model::matches_the_oracle`, `#[cfg_attr(miri, ignore)]`): its
//!   failure persistence needs the file system (`getcwd`, refused by isolation), and 256 cases
//!   would take minutes;
//! * the loom models: they use loom's own primitives, not the real ones (Miri adds nothing).
//!
//! # Mutation testing (optional, not in the test command)
//!
//! [cargo-mutants](https://mutants.rs) checks that the tests see a change in the code: it
//! replaces a function body, an operator or a condition, rebuilds, and runs the tests; a mutant
//! the tests still pass is "missed". It is slow (one build and test run per mutant), so it is
//! not part of `./scripts/test-all`:
//!
//! ```sh
//! cargo install cargo-mutants
//! cargo mutants --file src/shared/write.rs --file src/exchange.rs --features full -- \
//!     --lib --test api --test regressions --test reentrancy --test layer_hooks --test differential
//! ```
//!
//! **Last result** (cargo-mutants 27.1.0, over `src/shared/write.rs` and `src/exchange.rs` with
//! the tests above, after the exchange came to hold its handles; 16 minutes on 2 cores): 91
//! mutants, 47 caught, 34 unviable (do not compile), 10 missed. Of the ten:
//!
//! * three were caught by new tests in `tests/regressions.rs`, each checked against its mutant:
//!   the late-writes report's guard (`||` made `&&`: an exchange with a late-writes hook dropped
//!   uncommitted looked for a record), the timer's upgrade counted as an `Exchange` (`+` made
//!   `*` or `-`: a task outliving a timer commit lost its late write), and the outcome the
//!   response future reads (`committed_outcome` made `None`: a handler whose deadline had passed
//!   before its first poll ran);
//! * one is caught by `tests/redaction.rs`, which the command above leaves out (`flagged`'s
//!   `&&` made `||` flags every value);
//! * four change cost, not behaviour: whether the deadline queue drops entries of exchanges that
//!   are gone early (`WeakExchange::is_dead` returning `false`, or its `||` made `&&`, keeps them
//!   until their deadline; `is_dead` has since become a single load again, see
//!   [`internals`](super::internals#the-deadline-thread)), and whether an equal waker is cloned
//!   again (`will_wake` guard);
//! * one is not observable by a test that does not depend on the allocator reusing an address:
//!   `Inner::external` made `None` keeps a draft's origin alive through the exchange's
//!   allocation instead of the external handle's, which matters only if that handle is freed
//!   and its address reused while the draft lives.
//!
//! Earlier survivors (the layer's `poll_ready` made "always ready", the `Exchange` commit lock
//! removed, the sums of refused writes, the timer's wake) are caught by `tests/regressions.rs`
//! too; `PublishError::source` returning `None` by the unit tests of the (private) single-flight
//! gate, `src/client/single_flight/tests.rs`.
//!
//! **The core's synchronization** (cargo-mutants 27.1.0): `src/sync.rs`,
//! `src/shared/reader.rs` and `src/writer_lock.rs`, with
//! `-- --lib --test api --test reentrancy --test regressions --test stress --test handle_churn
//! --test differential --test miri --test writer_lock` (and `--features client --test
//! client_defaults` for the reader's `read_versioned`), one mutant at a time (`--in-place` in a
//! copy of the tree):
//!
//! | File | Before (the suite without the tests written for these mutants) | After |
//! |---|---|---|
//! | `src/sync.rs` | 56 mutants: 7 caught, 28 unviable, 21 missed (11 in loom-only code; 10 in `consistent`, `swap`'s odd phase, the once-cell's `get` and three `Debug`s) | 64 mutants: 17 caught, 36 unviable, 11 missed, all in loom-only code (below) |
//! | `src/shared/reader.rs` | not re-run | 15 mutants: 9 caught, 6 unviable, 0 missed |
//! | `src/writer_lock.rs` | not re-run | 22 mutants: 14 caught, 7 unviable, 1 missed (equivalent) |
//!
//! The mutants of `consistent` (`&&` made `||`, `==` made `!=`, `%` made `/` or `+`) and of
//! `Published::swap`'s count (`stores + 1` made `stores * 1` or `- 1`, `stores + 2` made `* 2`)
//! are caught by the `sync` unit tests (the count after each swap, an odd count refused by hand)
//! and by `tests/miri.rs`'s `Reader`-never-behind-a-direct-read test, which also runs natively.
//! Left:
//!
//! * `sync.rs`, 11 in `#[cfg(shared_headers_loom)]` code, which the normal suite never compiles.
//!   Run by hand against the loom models (the test command's `RUSTFLAGS`, `LOOM_MAX_PREEMPTIONS=2`):
//!   all three behavioural ones are caught: the once-cell stand-in's `!= SET` made `== SET` in
//!   a losing `set` fails `conn.rs` (`cause_is_visible_with_dead`), its `get_ref`'s `== SET`
//!   made `!=` fails five `layer.rs` models, its `get`'s fails five `conn.rs` models; the eight
//!   replacements of the loom `read_lock`/`write_lock` bodies by a made-up guard
//!   (`RwLockReadGuard::new()`, `from(..)`, ...) do not compile under loom either (unviable).
//! * `writer_lock.rs`: `(token << 8) | op` made `^`: the low eight bits of `token << 8` are zero,
//!   so `|` and `^` give the same word (equivalent).
//!
//! **Weak memory** (cargo-mutants 27.1.0), over the functions whose atomic orderings matter most (the seal, the consistent read, connection health). The
//! orderings themselves are not mutated by cargo-mutants (it replaces bodies and operators, not
//! `Ordering` arguments): each was weakened by hand instead (see
//! [the table](#every-ordering-and-the-check-that-fails-without-it)).
//!
//! | Files, functions | Test command | Result |
//! |---|---|---|
//! | `src/shared/writer.rs` `seal_as_is`, `src/snapshot.rs` `State::seal` and `version_sealed`, `src/sync.rs` `consistent`, `src/conn/health.rs` `mark_dead`, `mark_draining`, `recorded_cause` (`--re`) | `-- --features conn --lib --test api --test conn_health` | 36 mutants: 32 caught, 4 unviable, 0 missed (7 min) |
//! | `src/sync/once.rs` (loom-only code inside) | the loom models: `RUSTFLAGS="--cfg shared_headers_loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2 cargo mutants --profile release --file src/sync/once.rs -- -p shared-headers-loom-tests --test shared --test conn --test layer --test client` | 10 mutants: 7 caught, 2 unviable, 1 missed: `Debug for OnceCell` made `Ok(Default::default())`, which no model looks at (12 min) |
//! | `src/sync/once.rs` | `-- --lib` | 10 mutants: 5 caught (the `Debug` one among them: `debug_names_the_type_and_nothing_inside`), 2 unviable, 3 missed: the stand-in's `!= SET` / `== SET` in `set`, `get_ref` and `get`, which are `#[cfg(shared_headers_loom)]` code that the normal build does not compile, and which the loom run above catches |
//!
//! So every viable mutant of those functions is caught by one of the two test commands; none
//! survives both.
//!
//! # What loom proves, and what it does not
//!
//! ```sh
//! RUSTFLAGS="--cfg shared_headers_loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2 \
//!     cargo test --release -p shared-headers-loom-tests --target-dir target/loom
//! ```
//!
//! `-C debug-assertions` keeps the models' and the crate's `debug_assert!`s in the release build
//! (the dead-before-cause check in `conn` is one). Under `--cfg shared_headers_loom`,
//! `src/sync.rs` swaps arc-swap for a loom-visible stand-in: a `loom::sync::RwLock<Arc<State>>`
//! for the published value, a `loom::sync::Mutex` for the writer lock, and a once-cell built from
//! a loom atomic state word with `OnceLock`'s orderings and no more (not a mutex, which would add
//! a happens-before the real `OnceLock` does not give, and so hide a weakened ordering). loom then
//! explores the interleavings of the crate's own protocol. Each model in
//! `loom-tests/tests/` states its property in a comment. The core (`shared.rs`):
//!
//! 1. two, and three, concurrent `update`s incrementing a counter: none is lost, one version each;
//! 2. an `update` setting two headers together is never seen half-applied (through `snapshot` or
//!    `read`);
//! 3. `seal` racing a write: the write is in the sealed snapshot, or it got `Err(Sealed)` with
//!    the sealed version; never accepted and missing; the sealed snapshot never changes
//!    afterwards;
//! 4. three concurrent seals: exactly one `Ok`, the others get the winner's version;
//! 5. the versions a reader sees never decrease and always match the content;
//! 6. two drafts from one base committed concurrently: exactly one succeeds, the other gets
//!    `Conflict { expected: 0, found: 1 }`;
//! 7. the origin scenario: a handler writes then seals, a timeout seals with its own header, a
//!    logger tries to seal then reads: exactly one seal wins and the logger sees exactly its
//!    snapshot;
//! 8. negative controls: the naive design (load, clone, store, with no writer lock) loses an
//!    update, and a sealed flag kept apart from the data loses an accepted write; loom finds both
//!    (`#[should_panic(expected = ...)]` on the exact assertion);
//! 9. model 10: a later seal implies every earlier one: a thread seals two handles in order (an
//!    exchange's commit: the request, then the response); a reader, spawned (the shape in which
//!    loom explores the reader's loads against the seals), that sees the second sealed sees the
//!    first sealed, on `LockFree` handles, through `Reader`s, on `Locked` handles and through an
//!    `Exchange`. Control: two seal flags stored and loaded `Relaxed` (loom finds the reader that sees
//!    the second and not the first);
//! 10. model 11: store buffering across two handles is allowed (each thread writes one handle,
//!     then reads the other; both miss): the model asserts that loom *reaches* that outcome, on
//!     `Locked` read-cache hits and through `Reader`s, which is what `docs::internals` documents.
//!
//! The other protocols, each with a negative control:
//!
//! * `layer.rs`: the commit race between "inner service answered", "deadline fired" and "future
//!   dropped", plus a racing write: exactly one winner that every loser names, and the write is
//!   in the commit if and only if it returned `Ok`. Control: "log, then seal" in two steps loses a
//!   write. The `on_commit` hook runs exactly once, and before any `commit` returns, when
//!   answer, deadline and drop race; whoever sees the exchange committed sees what the hook did
//!   (its log line), so no response leaves before it; the late-writes report runs once, after
//!   every refused write it counts, and counts it (run by the drop that takes the exchange's own
//!   count of clones to zero, a loom atomic: no stand-in for `Arc`'s ordering); lazily created
//!   annotations racing the commit lose no write. Controls: "check committed, then commit" runs
//!   the hook twice, and a report made at the commit instead of at the last drop misses the late
//!   writes; weakening the commit's visibility (`Release`/`Acquire`) or the count of clones
//!   (`AcqRel`) to `Relaxed` makes the hook and late-writes models fail (checked by hand).
//! * `client.rs`: the single-flight refresh: exactly one refresh per failed version, no waiter
//!   misses the new version, a cancelled leader strands nobody, a failure reaches the waiters and
//!   does not poison the next attempt. Control: "check the version, then refresh" refreshes
//!   twice.
//! * `conn.rs`: a `mark_dead` that happens before a checkout is never checked out; leases
//!   admitted concurrently with `mark_dead` never exceed the count it observed; a leased
//!   connection is still evictable once dead; a caller told "0 leases in flight" (by `in_flight`,
//!   `mark_dead` or `mark_draining`) sees the lease holders' work. Control: a separate dead flag
//!   and counter admits a lease after death.
//!
//! **Every model shows what it explored.** A passing model proves its property only over the
//! executions loom explored, and loom may explore fewer than expected (tokio-rs/loom#392: a
//! spawned thread that loads a word and then stores one is explored in one execution only; a
//! seal-only writer racing a main-thread reader never shows the seal). So every model runs
//! through `shared_headers_loom_tests::explore`, which counts the distinct outcomes (what the
//! threads saw: who won, which versions were read) its executions reached, prints them
//! (`-- --nocapture`), and asserts a lower bound: the count it reached under
//! `LOOM_MAX_PREEMPTIONS=2`. A model that stopped exploring fails. The negative controls are
//! `should_panic`: the outcome they reach is the panic. The counts (the loom command
//! above with `-- --nocapture`):
//!
//! | Model | Outcomes reached (asserted at least) |
//! |---|---|
//! | `shared.rs` `two_concurrent_updates_lose_nothing` | 2 (both orders) |
//! | `three_concurrent_updates_lose_nothing` | 6 (every order) |
//! | `update_of_two_headers_is_never_seen_half_applied` | 3 |
//! | `seal_racing_a_write_never_loses_an_accepted_write` | 2 (accepted, refused) |
//! | `exactly_one_of_three_concurrent_seals_wins` | 3 (each wins) |
//! | `reader_versions_are_monotonic_and_match_content` | 7 |
//! | `concurrent_commits_of_drafts_from_one_base_exactly_one_wins` | 2 |
//! | `origin_scenario_logger_sees_exactly_the_winner` | 5 |
//! | `seal_in_place_keeps_every_snapshot_one_consistent_version` | 13 |
//! | `reader_sees_every_completed_write` | 3 |
//! | `locked_reads_from_the_thread_cache_are_current_and_never_another_handles` | 2 (the racing read never sees the write: the writer is spawned, loom#392's shape; the checks after the join cover it) |
//! | `a_second_threads_cache_of_a_locked_handle_follows_the_write` | 5 |
//! | model 10, each of the four | 3: (second, first) sealed = (no, no), (no, yes), (yes, yes); (yes, no) with either seal ordering `Relaxed` |
//! | model 11, each of the two | 4, including (no, no): store buffering |
//! | `layer.rs` `exactly_one_commit_and_no_lost_write` | 6 (each winner, write accepted or refused) |
//! | `commit_hook_runs_exactly_once_when_answer_deadline_and_drop_race` | 3 |
//! | `late_writes_report_runs_once_after_every_refused_write_it_counts` | 2 |
//! | `lazy_annotations_racing_the_commit_never_lose_a_write` | 2 |
//! | `a_commit_is_seen_only_with_what_its_hook_did` | 3 |
//! | `conn.rs` `dead_before_checkout_is_never_checked_out` | 3 |
//! | `leases_are_counted_or_refused` | 3 |
//! | `busy_connection_is_evicted_once_dead` | 2 |
//! | `cause_is_visible_with_dead` | 4 |
//! | `on_close_fires_exactly_once` | 2 (fired draining, fired dead) |
//! | `lease_work_is_visible_once_in_flight_is_zero` | 2 |
//! | `lease_work_is_visible_once_mark_dead_counts_zero`, `..._mark_draining_counts_zero` | 2 each (0 or 1 lease counted) |
//! | `client.rs` `one_refresh_per_failed_version_and_no_waiter_misses_it` | 3 (each caller leads) |
//! | `a_cancelled_leader_does_not_strand_waiters` | 2 |
//! | `a_failure_reaches_waiters_and_does_not_poison` | 3 |
//! | `an_unrelated_writer_is_kept_and_costs_no_retry` | 3 |
//! | `observing_the_gate_inside_a_write_cannot_deadlock` | 3 |
//! | shuttle `commit_race_of_the_whole_exchange` | 24 of 24 possible (asserted at least 20: the schedules are random) |
//!
//! The models are small (2-3 threads, 1-2 operations each) and exhaustive within the bound. With
//! `LOOM_MAX_PREEMPTIONS=3` (release, debug assertions, a 2-core shared x86_64 VM, compilation
//! aside), one run took: `shared.rs` 0.06 s (14 models), `layer.rs` 0.31 s (7), `conn.rs`
//! 0.11 s (7), `client.rs` 0.11 s (6). Without a bound they are much slower (`client.rs` about two minutes, one
//! model over 60 s; `conn.rs` about six seconds), which is why the test command sets one.
//!
//! **Each ordering is needed, or relaxed with a reason.** For every non-`Relaxed` atomic ordering
//! in the crate, weakening it makes a model fail, or it is what the primitive requires, with the
//! reason in a comment at its site; every `Relaxed` has its reason there too. "Every model
//! passes with it weakened" is not a reason on its own: it is evidence only if a model reached
//! the outcome the stronger ordering forbids (the seal was once weakened that way, and was
//! wrong). See [the table](#every-ordering-and-the-check-that-fails-without-it).
//!
//! What loom does **not** prove:
//!
//! * **arc-swap itself.** loom cannot see inside arc-swap (its debt lists use `std` atomics that
//!   loom does not model), so the models run on the stand-in. They prove that the crate's
//!   protocol is correct *given* what arc-swap documents: a `load` returns a value that was
//!   `store`d, whole, and never a freed one. arc-swap is trusted for its own memory reclamation;
//!   its record is in [`security`](super::security#the-dependencys-soundness-record).
//! * **Unbounded scenarios.** loom checks the interleavings of the small models above, not every
//!   program; the stress tests and the differential and model tests cover longer and larger runs,
//!   by sampling, not exhaustively.
//! * **Timing.** loom says nothing about speed or about readers never waiting; that is what the
//!   benchmarks measure ([`performance`](super::performance)).
//!
//! # Every ordering, and the check that fails without it
//!
//! Every atomic ordering in `src/` that is not `Relaxed`, and every one weakened to `Relaxed`
//! with a reason, with the check that fails when it is weakened (one at a time, everything else
//! as shipped; the loom command above, `LOOM_MAX_PREEMPTIONS=2`). Under loom a `LockFree` cell
//! is `ModelSwap` in `src/sync.rs`: one loom word whose `swap` and `load` are `SeqCst` and give
//! no more than arc-swap 1.9.5 documents ("each operation ... contains at least one `SeqCst`
//! atomic read-write operation"), so the sequence count's own orderings decide what a cached
//! reader sees; a `Locked` cell is a loom `RwLock`, which orders its value by itself. `conn`'s
//! table (with the same method) is in the [`conn`](crate::conn) module docs.
//!
//! | Site | Ordering | Fails without it / why it is Relaxed |
//! |---|---|---|
//! | `sync.rs` `Published::swap`: even count | Release | loom `shared.rs`: `reader_sees_every_completed_write` ("stale read after the write returned") and `seal_in_place_keeps_every_snapshot_one_consistent_version` (a reader caches the old value under the new count) |
//! | `sync.rs` `consistent`: first count load | Acquire | the same two models, the same failures |
//! | `sync.rs` `Published::swap`: odd count | Relaxed | carried by the value's own publication (arc-swap's `SeqCst` swap, the lock's release); its presence is checked: `negative_control_cache_count_bumped_apart_from_the_value_goes_stale` |
//! | `sync.rs` `Cached::load`: count load | Relaxed | by argument, not by a model: its result is only compared; an equal count returns the cached value (which needs nothing from the writer), a different one goes to `consistent`, whose own Acquire load orders what follows. No outcome of the program differs between Relaxed and Acquire here, so no model can reach one |
//! | `sync.rs` `consistent`: `Acquire` fence, then the second count load `Relaxed` | fence added (before, the Relaxed load relied on arc-swap 1.9.5's `load` being an acquire read of the pointer, which arc-swap does not document) | no model fails without the fence: the loom stand-in's `load` is itself a `SeqCst` load, and a second load that read too old a count would only cache a newer value under an older count (one extra reload). It is there so that the order follows from what arc-swap documents (a `SeqCst` read-write in each operation, and a safe API: the load reads what the publishing swap wrote), whatever its load paths do (reason at the site). Cost (`scripts/callgrind-per-op get_shared:8 read_shared:8 get_reader:8 get_locked:8 read_locked:8`, x86-64, before/after): 354/354, 297/297, 290/290, 332/332, 268/268 instructions: an `Acquire` fence is no instruction on x86-64 (on ARMv8 a `dmb ishld`, on the miss path only: these variants hit the cache) |
//! | `sync.rs` `peek_locked` / `load_full` (`Locked` read cache): count load | Acquire | kept as `consistent`'s first load (a miss uses it as the count "before"); for a `Locked` cell the read lock orders the value by itself, and all models pass with it Relaxed. The cache's own models, `shared.rs` 9 and 9b, fail with the slot compared by count and not id ("another handle's headers") and with the cached count read after the value ("stale read after the write returned"); `sync`'s unit tests cover the rest (no caching across a swap, clearing on drop, nested and panicking readers, the hand-back) |
//! | `sync.rs` `CacheKey`: the id | Relaxed | an identity, not a publication: a reader that sees 0 misses and takes the lock path |
//! | `sync.rs` once-cell stand-in (loom only): start CAS, its failure, completion store, losing wait, `get_ref`, `get` | Acquire, Acquire, Release, Acquire, Acquire, Acquire: `std::sync::Once`'s (once made Relaxed because every model passed, then restored) | not a choice of the crate: the stand-in gives what the real `OnceLock` gives, no more and no less. Each weakened alone, every model still passes (the value sits in a real `OnceLock` that loom does not see, so loom can only check what the cell orders around it, and no model reaches an outcome that needs it); they are kept because `conn`'s `mark_dead` relies on the losing `set`'s acquire (comment at `OnceCell`) |
//! | `shared/writer.rs` `seal_as_is`: `sealed_as` store | Release (once weakened to Relaxed, restored) | loom `shared.rs` model 10, all four (`a_later_seal_implies_every_earlier_one`, `_through_readers`, `_locked`, `an_exchange_reader_that_sees_the_response_sealed_sees_the_request_sealed`): "a later seal without an earlier one" (the reader, spawned, sees the second handle sealed and the first not) |
//! | `snapshot.rs` `State::seal`: `sealed_as` load | Acquire (once weakened to Relaxed, restored) | the same four models, the same failure |
//! | `exchange.rs` `annotations`: `annotated` store | Relaxed | by argument: the flag only saves taking the annotations lock when there are none; it is stored under that lock with the handle in place, a reader that sees `true` takes the lock (which orders the handle), and the only reader that must not miss `true` (the late-writes report) runs after the clones' `AcqRel` count reaches zero. No model reaches an outcome that Release/Acquire would forbid |
//! | `exchange/inner.rs` `refused_writes`: `annotated` load | Relaxed | the same |
//! | `exchange.rs` `commit_with`: `visible` store | Release | loom `layer.rs`: `a_commit_is_seen_only_with_what_its_hook_did` (re-checked with the once-cell stand-in at `OnceLock`'s orderings: still fails Relaxed) |
//! | `exchange/inner.rs` `is_visible`: `visible` load | Acquire | the same model (re-checked the same way) |
//! | `exchange.rs` `Drop for Exchange`: `exchanges.fetch_sub` | AcqRel | loom `layer.rs`: `late_writes_report_runs_once_after_every_refused_write_it_counts` fails with it Release and with it Acquire |
//! | `conn/health.rs` (six sites) | Acquire / Release / AcqRel | the [`conn`](crate::conn) table; `mark_dead` AcqRel (Release: `lease_work_is_visible_once_mark_dead_counts_zero` fails; Relaxed: six conn models; Acquire: five), `mark_draining` Acquire (Relaxed: `lease_work_is_visible_once_mark_draining_counts_zero` fails) |
//! | `client/single_flight.rs` `busy`, `started` | Relaxed | a hint: every decision is made under the gate's lock (comment at the site; loom `client.rs` passes with them Relaxed) |
//! | `writer_lock.rs` owner word, thread tokens | Relaxed | only the owning thread compares its own token (std atomics, outside the models; the check is compiled out under loom) |
//!
//! # Randomized schedules (shuttle)
//!
//! ```sh
//! RUSTFLAGS="--cfg shared_headers_loom --cfg shared_headers_shuttle -C debug-assertions" \
//!     cargo test --release -p shared-headers-shuttle-tests --target-dir target/shuttle
//! ```
//!
//! `--cfg shared_headers_shuttle` (always with the loom cfg) builds the loom world's stand-ins on
//! shuttle's primitives instead of loom's (`src/sync.rs` is the only file that names shuttle), so
//! every lock and atomic of the core is a point where shuttle may switch threads.
//! `shuttle-tests/tests/exchange.rs` runs the commit race of a whole exchange at a size loom
//! cannot explore exhaustively: a handler that spawns two writing tasks, writes and commits, a
//! deadline committer, a logger polling the exchange, and a late writer;
//! `SHUTTLE_ITERATIONS` (default 10,000) random schedules and as many PCT schedules (depth 3):
//! the 20,000 schedules of the main test take about 2 s (release, the shared 2-core machine;
//! 40,000 took 4.1 s), the whole step 2.7 s, and its cold build about 2 minutes.
//! In every schedule: exactly one commit wins and the loser names it; the record equals the
//! sealed handles, what the hook saw and what the logger read; every accepted write is sealed
//! and no refused one; the hook ran once; the refused writes are counted. shuttle's atomics are
//! sequentially consistent: these schedules check interleavings, the loom models orderings.
//! Negative controls (`should_panic`): claims true in some schedules only (the deadline never
//! wins, no task write is refused, no task write is accepted, the logger never sees the commit,
//! a double-counted hook passes), each broken by the schedulers. Seeded faults, each caught by
//! `commit_race_of_the_whole_exchange`: the commit's already-committed check removed, the
//! response's record taken as a snapshot beside the seal, the hook run twice on a deadline win.
