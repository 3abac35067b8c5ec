//! Every measured figure: what it is, which bench or demo produces it, and on what hardware;
//! the server layer's detailed tables are in [`server_cost`](super::server_cost).
//!
//! # Headline figures
//!
//! The figures the README used to carry, each with its bench (the access line beside
//! tower-http's `TraceLayer`: [`server_cost`](super::server_cost#the-access-line-beside-tower-https-tracelayer)).
//!
//! Measured on a 2-core shared x86_64 VM; callgrind instruction counts (exact) or criterion medians
//! of interleaved rounds, each ratio against a baseline from the same run. All tables, and how
//! to reproduce them: below.
//!
//! | what | figure | bench |
//! |---|---|---|
//! | the server layer with its default access line and request span, 8-header request | through the crate's own writer (`JsonLines`, feature `access-json`): **20,933 instructions, 0.11x tower-http's stack doing the same job with `fmt().json()`** (195,668), 0.71x the same stack with stock `fmt` (29,494), no allocation for the line, with the request's id or without; the line's formatting 6,208 instructions (7,856 through the `tracing` visitor), 2,689 of it the writer's own; with stock `fmt` on both sides 32,606 = **1.11x**; with `fmt().json()` on both 0.29x; with no subscriber, 21 instructions over the layer without the log | `scripts/access-line-table` ([`server_cost`](super::server_cost#the-access-line-beside-tower-https-tracelayer)) |
//! | a request the OpenTelemetry sampler drops (`otel_tracer`) | 3,068 instructions and 3 allocations for the tracing part (its floor, what the OpenTelemetry API and SDK make any server span pay there, 1,637 and 3: `sdk_dropped_floor - bare`), the sampler given the request's sampling attributes (method, path, scheme, server address and port, as the HTTP semantic conventions require); the other attributes only on a span that records | `benches/metrics.rs`: `layer_traced_dropped - layer_hop` ([`server_cost`](super::server_cost#the-server-span-sampled-and-dropped-by-the-sampler)) |
//! | read p99 while a writer rewrites a 48-header map | `SharedHeaders::read`: `LockFree` handle 656 ns, `Locked` handle 728 ns; `std::sync::RwLock` 131 µs (200x and 180x worse; medians of 8 runs) | `cargo bench --bench read_latency` |
//! | 2 threads reading one request-scoped (`Locked`) handle, reads ÷ 1 thread's | `read`: 1.33x and 2.02x (0.31x and 0.22x before its per-thread cache, alternating runs); `get`: 0.61x and 0.59x, bounded by the value's own `Bytes` reference count as for a plain `&HeaderMap` (0.69x, 0.57x) and a `LockFree` handle (0.72x, 0.66x); with `'static` values 2.13x and 2.03x | `cargo bench --bench read_scaling` |
//! | server layer per request, 1 vs 256 threads in the process | 8,428 vs 8,421 instructions (1.00x; tower-http `TimeoutLayer` 2,529 vs 2,527); a handler that annotates 10,708 vs 10,710, one that writes a response header 10,982 vs 10,988 | [the run](#the-run) of `scripts/callgrind-per-op` |
//! | server layer per request, in process (with `ResponseBody`, the end of every response tracked) | **8,428 instructions**: 3.33x tower-http `TimeoutLayer` (2,529), **1.42x the floor of a layer with versioned handles** (`benches/floor/versioned.rs`: a lean layer plus request and response as versioned copy-on-write cells sealed into the record, no hooks, limits or annotations; 5,955), 1.50x a lean layer without versioned handles (`benches/floor/lean.rs`: the floor plus the timer thread, deadline scope, panic catch, commit word; 5,620), 1.80x the floor of any layer that copies the request headers and puts one value in each message's extensions (`benches/floor`; 4,675); 10 own allocations (versioned floor 10, lean and floor 9), 7 with `record_in_response(false)`; one response write 17 | [the run](#the-run) of `scripts/callgrind-per-op`; `cargo bench --features full --bench alloc` |
//! | server layer over loopback, hello world | 0.83x (1 connection) and 1.00x (16) of bare requests/s (tower-http 0.96x, 1.06x; an earlier run: 0.90x and 0.88x), per-round spread ±10-30% | `scripts/loopback-rounds` (`examples/loopback.rs` + `wrk`) |
//! | one `insert`, 4 / 12 / 48 headers | `LockFree` handle 1.29x / 1.16x / 1.01x `HeaderMap::clone` + `insert`, `Locked` 1.17x / 1.09x / 0.98x, by instructions (a bare copy-on-write insert published by arc-swap's `swap`: 1.27x at 4) | `scripts/callgrind-per-op insert_shared:4 insert_locked:4 insert_clone:4 insert_floor:4` (and `:12`, `:48`) |
//! | owned `get` through a `Reader`, 12 headers | 283 instructions, 1.04x `&HeaderMap::get` + `clone` (`SharedHeaders::get` 1.29x) | `scripts/callgrind-per-op get_reader:12 get_shared:12 get_plain_clone:12` |
//! | wrapping a request's map | `SharedHeaders::from(map)`: no copy, 2 allocations | `cargo bench --features full --bench alloc` |
//! | server demo, 20,000 requests (beside 8 busy loops) | access-log lines that disagree with what was sent: 0; with `Arc<Mutex<HeaderMap>>`: 16,758; requests that reached the server with no log line: 0 and 396 (10 runs of 10 passed) | `cargo run --release --features full --example server -- --compare` |
//!
//! Over a real socket, this 2-core machine's spread between rounds (±10-30%) is as large as the
//! layer's cost: see [the loopback table](super::server_cost#the-server-layer-over-loopback).
//!
//! # The run
//!
//! Every instruction count of `benches/alloc.rs` that these pages quote for the current build
//! ([`server_cost`](super::server_cost), [`context`](super::context),
//! [`admission`](super::admission#the-cost-of-the-admitted-path)'s cost table and this one)
//! comes from one run of the command below:
//!
//! ```text
//! scripts/callgrind-per-op tower_http tower_http@256 bare floor floor_request_only \
//!     floor_copy_none lean lean_versioned lean_versioned_no_record lean_versioned_write layer \
//!     layer_timeout layer_timeout@8 layer_timeout@256 layer_timeout_hook \
//!     layer_timeout_hook_no_record layer_timeout_copy_none layer_timeout_write \
//!     layer_timeout_write@256 layer_timeout_annotate layer_timeout_annotate@256 \
//!     layer_timeout_admission layer_timeout_admission@8 layer_timeout_admission@256 \
//!     layer_timeout_admission_limit layer_timeout_admission_limit@256 layer_timeout_id \
//!     layer_timeout_traced layer_timeout_context client_bare client_deadline_none client_context
//! ```
//!
//! One figure per variant: the same source builds to counts that differ by a few dozen
//! instructions from one bench binary to the next (inlining and layout), so a figure is only
//! compared with figures of its own run.
//!
//! # Hardware and method
//!
//! All figures were measured on a **2-core shared x86_64 VM** (AMD EPYC, Linux, rustc 1.95),
//! with other processes compiling at the same time (load average 2-5). Two kinds of figure:
//!
//! * **Instruction counts** (callgrind, `scripts/callgrind-per-op VARIANT[@THREADS]`, which runs
//!   `benches/alloc.rs` in its `--run` mode with 1,000 and 6,000 iterations and divides the
//!   difference): exact and all but identical from run to run (on this loaded machine a figure
//!   moved by up to about 10 between runs of one build), so they are the primary figures. They count
//!   instructions, not cycles: an atomic operation or a cache miss counts as one, so they
//!   understate what is dominated by atomics (arc-swap's `load`, the debt-list walk).
//! * **Wall clock** (criterion): 3 interleaved rounds (each bench binary once per round, in its
//!   own process); a figure is the median over rounds of the round's criterion median, a ratio
//!   the median over rounds of the per-round ratio, both terms from the same round. Per-round
//!   ratios are listed where they matter: their spread (often ±15%, up to ±30% for the
//!   nanosecond-scale reads) is the error bar.
//!
//! "Previous" columns are the same benches on the previous design of the crate (every handle
//! published through arc-swap, a seal publishing a new version, two extensions and two handle
//! allocations per message in the server layer), measured on the same VM the same way.
//!
//! # Reproduce
//!
//! ```sh
//! cargo bench --features full --bench threads  # the thread sweep: ~45 s
//! cargo bench --features full --bench alloc    # allocations per request and per operation: < 1 s
//! cargo bench --features full --bench layer -- --warm-up-time 0.5 --measurement-time 2
//! cargo bench --bench shared -- --warm-up-time 0.3 --measurement-time 1 '^(write/insert|read/get|read/reader)/'
//! cargo bench --bench read_latency             # read latency under a writer: ~10 s
//! scripts/callgrind-per-op bare tower_http layer_timeout layer_timeout@256 raw_locked@256
//! scripts/callgrind-per-op insert_shared:4 insert_locked:4 insert_clone:4 get_reader:12 get_plain_clone:12
//! scripts/perf-table ratio 'write/insert/{n}/shared' 'write/insert/{n}/clone_insert' RUN.json...
//! scripts/callgrind-per-op floor floor_copy_none layer_timeout layer_timeout_copy_none
//! ROUNDS=5 SECS=5 scripts/loopback-rounds     # examples/loopback.rs under wrk, interleaved
//! cargo bench --features client --bench client
//! cargo bench --features conn --bench conn
//! scripts/bench-table                          # the shared/read_latency tables from target/criterion
//! ```
//!
//! Bench ids are `<group>/<size>/<variant>`; the tables below name them.
//!
//! # Which handle publishes how, and why
//!
//! arc-swap's `store`, and the drop of an `ArcSwap`, walk one debt node per thread that has ever
//! read *any* `ArcSwap` in the process (nodes are never freed: a thread that exits leaves its
//! node for the next one). Measured on the pattern "new handle, one load, two stores, drop" with N
//! threads that loaded once and stay parked, as a server's worker and blocking-pool threads do,
//! `threads/arc_swap/N` (`cargo bench --features full --bench threads`, below):
//!
//! | live threads that have loaded | 1 | 8 | 64 | 256 |
//! |---|---:|---:|---:|---:|
//! | new + load + 2 stores + drop of one `ArcSwap` | 759 ns | 1.31 µs | 6.50 µs | 22.77 µs |
//!
//! So each handle chooses its [`Publication`](crate::Publication):
//!
//! | publication | reads | a write and the drop | used by |
//! |---|---|---|---|
//! | `LockFree` (default) | lock-free (arc-swap `load`), never wait | O(threads that ever loaded) | long-lived handles read by many threads and rarely written: client defaults ([`SharedHeaders::new`](crate::SharedHeaders::new), `From<HeaderMap>`, the builder's default) |
//! | `Locked` | from the reading thread's cache while it is current (one atomic load, no lock, no shared write); else a read lock held for one reference-count increment | O(1) | request-scoped handles, made, written a few times, sealed and dropped per request: the server layer's request and response handles |
//!
//! Both have the same semantics, tests and loom models; `rwlock-backend` makes every handle
//! `Locked`. A long-lived handle read in a loop should be read through a
//! [`Reader`](crate::Reader) (below).
//!
//! # Thread sweep: a request's cost against the threads in the process
//!
//! `cargo bench --features full --bench threads`, ids `threads/<variant>/<N>`: N = the bench
//! thread plus N - 1 parked threads that each read a handle once. `layer`: one request through
//! `SharedHeadersLayer` with a 30 s deadline, 8 request headers; `tower_http`: the same through
//! tower-http's `TimeoutLayer`; `bare`: no layer; `insert`: one `insert` on a long-lived default
//! (`LockFree`) handle of 8 headers; `raw` / `raw_locked`: new handle, `get`, 2 `insert`s, drop,
//! `LockFree` / `Locked`; `arc_swap`: the same pattern on a raw `ArcSwap<HeaderMap>`.
//!
//! Instructions per iteration (callgrind, `scripts/callgrind-per-op VARIANT@N`):
//!
//! | variant | N=1 | 8 | 64 | 256 | 256 / 1 |
//! |---|---:|---:|---:|---:|---:|
//! | `layer_timeout` | 8,428 | 8,440 | | 8,421 | **1.00x** |
//! | `layer_timeout_annotate` (the handler writes one annotation) | 10,708 | | | 10,710 | **1.00x** |
//! | `layer_timeout_write` (the handler writes one response header) | 10,982 | | | 10,988 | **1.00x** |
//! | `tower_http` | 2,529 | | | 2,527 | 1.00x |
//! | `raw_locked` (`Locked`, before the per-thread read cache) | 3,692 | | | 3,700 | **1.00x** |
//! | `raw_locked` (`Locked`, with the per-thread read cache) | 3,851 | | | 3,859 | **1.00x** |
//!
//! (`raw_locked` at N=1 varies between 3,655 and 3,703 with unrelated changes elsewhere in the
//! binary: code layout.)
//!
//! | `raw` (`LockFree`), first measured / now | 4,220 / 4,302 | | | 125,190 / 120,076 | 29.7x / 27.9x |
//! | `insert` (`LockFree`, long-lived), first measured / now | 2,243 / 2,119 | | | 42,522 / 42,407 | 19.0x / 20.0x |
//!
//! Wall clock, ratio to N=1 of the same variant (`cargo bench --features full --bench threads`,
//! median of 3 rounds, per-round at N=256; a single round is within its own noise, as a
//! 64-thread figure below the 1-thread one shows):
//!
//! | variant | N=8 | N=64 | N=256 | per round, N=256 | after the 255 helpers exited |
//! |---|---:|---:|---:|---|---:|
//! | `threads/layer/N`, previous | 1.50x | 4.16x | 14.53x | 17.83, 14.53, 10.09 | 14.31x |
//! | `threads/layer/N` | 0.99x | 1.00x | **0.99x** | 1.01, 0.90, 0.99 | 1.16x |
//! | `threads/tower_http/N` (noise floor) | 0.99x | 0.99x | 1.11x | 1.11, 0.82, 1.20 | 1.21x |
//! | `threads/raw_locked/N` | 1.00x | 1.10x | 1.01x | 0.95, 1.32, 1.01 | |
//! | `threads/raw/N` (`LockFree`) | 1.78x | 8.31x | 27.95x | 22.58, 27.95, 31.60 | 27.03x |
//! | `threads/insert/N` (`LockFree`) | 1.27x | 4.15x | 12.89x | 11.38, 16.13, 12.89 | |
//!
//! The variant `threads/layer/N` is now `threads/layer_timeout/N`, beside
//! `threads/layer_timeout_annotate/N` and `threads/layer_timeout_write/N` (two rounds
//! at N = 1 and 256, `cargo bench --features full --bench threads -- 'threads/(layer_timeout|tower_http)'`):
//! 256 / 1 was 0.89x and 0.95x for `layer_timeout`, 0.91x and 0.91x annotating, 1.03x and
//! 0.92x writing, tower-http 0.94x and 0.96x; medians at N = 1: 2.29, 3.08 and 2.87 µs,
//! tower-http 806 ns. The annotate variant guards the annotations handle's publication: a
//! one-off build with the annotations handle made `LockFree` (no committed variant reproduces
//! it) cost 8.8x more at 256 threads than at 1.
//!
//! `threads/layer/N` / `threads/tower_http/N`: 3.00x, 2.77x, 2.73x, 2.72x at N = 1, 8, 64, 256
//! (previous: 2.74x, 4.15x, 12.34x, 41.10x). Medians at N=1: layer 1.94 µs, tower-http 649 ns,
//! bare 371 ns, `raw_locked` 767 ns, `raw` 849 ns. The server layer is flat in threads; a
//! `LockFree` handle's writes still pay per thread, which is why request-scoped handles are
//! `Locked`. A long-lived `LockFree` handle is written rarely, so its write cost is paid rarely.
//!
//! # Writes: `insert` against clone + insert
//!
//! `cargo bench --bench shared`, group `write/insert/{4,12,48}/<variant>`: set one header on a map
//! of that many request headers plus the written ones (so it replaces a value), against the
//! copy-on-write floor `clone_insert` (`HeaderMap::clone` + `insert`). Instructions
//! (`scripts/callgrind-per-op insert_shared:n insert_locked:n insert_clone:n`):
//!
//! | headers | floor `insert_clone` | first measured `insert` | previous `LockFree` / `Locked` | `insert_shared` (`LockFree`) | `insert_locked` (`Locked`) |
//! |---:|---:|---:|---:|---:|---:|
//! | 4 | 1,753 | 2,411 (1.38x) | 1.34x / 1.23x | 2,254 (**1.29x**) | 2,034 (**1.16x**) |
//! | 12 | 2,715 | 3,318 (1.23x) | 1.26x / 1.18x | 3,154 (**1.16x**) | 2,934 (**1.08x**) |
//! | 48 | 7,582 | 7,792 (1.03x) | 1.12x / 1.09x | 7,635 (**1.01x**) | 7,415 (**0.98x**) |
//!
//! The lean floor of a published copy-on-write insert (`insert_floor:n`, `insert_floor_locked:n`
//! in the alloc bench: a mutex, the copy, the insert, one new `Arc` and the swap, no seal,
//! limits, flags or re-entrancy check) is, at 4 headers, 2,227 instructions with arc-swap's
//! `swap` (**1.27x** `insert_clone`) and 1,949 with a lock's pointer swap (1.11x); `insert_shared`
//! 2,255 and `insert_locked` 2,047 in the same run. A `LockFree` insert at 4 headers cannot be
//! within 1.2x while it publishes through arc-swap: its `swap` alone (`Debt::pay_all`, about
//! 220 instructions at one thread) puts the bare write at 1.27x. The other checks
//! (seal, the added value's flag, limits, re-entrancy) are a few dozen instructions, and
//! reusing the replaced version's allocation saves over a hundred: estimates from one-off
//! builds with each piece removed, which no committed variant reproduces.
//!
//! `insert` and `append` flag the one value they add (`HeaderMap::entry` gives them its name)
//! instead of rescanning the whole map for secrets, as a closure's write (`update`) must, on
//! maps of 4 to 1,023 values (below 4 a rescan is cheaper than `entry` for a new name: 146
//! instructions less on `raw_locked`'s two inserts into a new handle, now 3,655): that removed 187, 343 and
//! 951 instructions at 4, 12 and 48 headers. At 48 headers `Locked` is below the floor.
//!
//! Wall clock (`cargo bench --bench shared`, 3 rounds, `--warm-up-time 1 --measurement-time 3`,
//! median of per-round ratios to `clone_insert`):
//! `write/insert/n/shared` 1.46x (1.73, 1.11, 1.46) at 4, 1.15x (1.15, 0.98, 1.31) at 12,
//! 1.05x (1.05, 1.12, 0.83) at 48; `shared_locked` 1.22x (1.22, 0.98, 1.47), 1.18x (1.07,
//! 1.27, 1.18), 1.03x (1.05, 0.98, 1.03); `clone_insert` 336 ns, 587 ns, 2.17 µs. A first
//! run at `--measurement-time 1.5` the same hour gave `shared` 1.90x at 4 headers (1.90, 2.02,
//! 1.32): at 300 ns per write the rounds spread by ±30%, and the instructions above decide.
//! In place under `std::sync::RwLock` (`std_rwlock`):
//! 76-79 ns against 311 ns, 688 ns and 2.35 µs for the floor.
//!
//! Where the fixed part goes, by instructions: the writer lock with its re-entrancy check (28
//! instructions: a thread-local read, one relaxed atomic load and two relaxed stores, see
//! [`internals`](super::internals#the-write-path)); the limits check (none without a policy);
//! for `LockFree`, arc-swap's `store` (about 215 instructions at one thread, `arc_swap::debt`
//! in callgrind's profile, plus about 140 per thread that ever loaded): 0.12x of the floor at 4
//! headers, which is what keeps a `LockFree` `insert` on 4 headers above 1.2x (1.29x), while a
//! `Locked` one is below it (1.16x). A write never
//! loads the cell and reuses the replaced version's allocation when no snapshot holds it.
//! Against an in-place write under a lock, copy-on-write is 5x to 30x slower: choose this crate
//! where headers are read far more often than written, or where readers must not wait.
//!
//! # Owned reads: `get`, plain and through a `Reader`
//!
//! `get` returns an owned `HeaderValue`; the floor is `plain_clone` (`&HeaderMap::get` +
//! `clone`). Instructions (`scripts/callgrind-per-op get_shared:n get_reader:n
//! get_plain_clone:n`; the same at 4, 12 and 48 headers):
//!
//! | | `get_plain_clone` | `SharedHeaders::get` (`get_shared`) | `Reader::get` (`get_reader`) |
//! |---|---:|---:|---:|
//! | first measured | 269 | 340 (1.26x) | |
//! | with arc-swap's `Cache` (an earlier design of `Reader`) | 273 | 350 (1.28x) | 292 (1.07x) |
//! | now | 271 | 349 (1.29x) | 283 (**1.04x**) |
//!
//! The `Reader`'s fast path is about 11 instructions over `plain_clone`: which allocation the
//! handle lives in, and one load and compare of the cell's sequence count (see
//! [`internals`](super::internals#the-one-published-value)). Through arc-swap's `Cache` it was
//! about 20: one more dispatch on the publication, and the `Cache` reaching the `ArcSwap` inside
//! the handle through it. The same code has measured 283 to 289 from one build to the next
//! (code layout).
//!
//! Wall clock, `cargo bench --bench shared`, group `read/reader/{4,12,48}/<variant>` (3 rounds,
//! `--measurement-time 3`, median of per-round ratios to `plain_clone` of the same round):
//! `reader_get` **1.05x** (1.05, 1.28, 0.78), **1.02x** (0.84, 1.10,
//! 1.02), **1.05x** (0.95, 1.05, 1.11) at 4, 12, 48 headers; `shared_get` 1.24x, 1.26x, 1.10x;
//! `locked_reader_get` 1.03x, 1.10x, 0.80x; `locked_get` 1.20x, 1.29x, 1.27x (`plain_clone`
//! 48, 39, 50 ns). Two earlier runs of the same group, on earlier builds (the first line of
//! `reader_get` is the later run):
//!
//! | variant | 4 headers | 12 headers | 48 headers |
//! |---|---:|---:|---:|
//! | `reader_get` (`Reader::get`, `LockFree`) | **1.13x** (1.13, 0.97, 1.33) | **0.97x** (1.22, 0.88, 0.97) | **1.00x** (1.10, 0.89, 1.00) |
//! | | 1.03x | 1.06x | 1.08x |
//! | `shared_get` (`SharedHeaders::get`, `LockFree`) | 1.31x (1.32, 1.31, 1.31) | 1.17x (1.17, 1.29, 1.05) | 1.21x (1.30, 1.01, 1.21) |
//! | `locked_reader_get` (`Reader::get`, `Locked`) | 1.06x (0.86, 1.15, 1.06) | 0.94x (0.93, 0.94, 1.12) | 0.93x (1.03, 0.86, 0.93) |
//! | `locked_get` (`SharedHeaders::get`, `Locked`) | 1.23x (1.14, 1.23, 1.49) | 1.26x (1.30, 1.06, 1.26) | 1.16x (1.47, 1.06, 1.16) |
//!
//! At 40-50 ns a read is within the VM's noise (±15-30% per round): the instruction counts
//! decide. (First measured `shared_get` / `plain_clone`, group `read/get`: 1.41x, 1.48x, 1.37x.) A `Reader`
//! checks with one atomic load whether a newer version was published and otherwise reads its
//! cached map. It keeps that version and the handle's shared part alive until a read finds a
//! newer one or it is dropped (see [`Reader`](crate::Reader)).
//!
//! # Reads
//!
//! `cargo bench --bench shared`, group `read/get/{4,12,48}/<variant>`: look up `x-request-id`
//! (a `HeaderName` constant) in a map of 4, 12 or 48 request headers; medians of 3 rounds.
//!
//! | variant | bench id | 4 headers | 12 headers | 48 headers |
//! |---|---|---:|---:|---:|
//! | `&HeaderMap::get` (baseline) | `plain` | 27 ns | 25 ns | 23 ns |
//! | `&HeaderMap::get` + `clone` | `plain_clone` | 52 ns | 42 ns | 45 ns |
//! | `SharedHeaders::read(\|m\| m.get(..))` | `shared_read` | 39 ns | 30 ns | 46 ns |
//! | `SharedHeaders::get` (owned value) | `shared_get` | 75 ns | 53 ns | 58 ns |
//! | `SharedHeaders::snapshot()` + `get` | `shared_snapshot` | 55 ns | 48 ns | 59 ns |
//! | raw `ArcSwap<HeaderMap>` | `arc_swap` | 42 ns | 45 ns | 42 ns |
//! | `parking_lot::RwLock<HeaderMap>` | `parking_lot_rwlock` | 40 ns | 34 ns | 40 ns |
//! | `std::sync::RwLock<HeaderMap>` | `std_rwlock` | 41 ns | 37 ns | 38 ns |
//! | `std::sync::Mutex<HeaderMap>` | `std_mutex` | 40 ns | 40 ns | 41 ns |
//!
//! Uncontended, a shared read costs what an uncontended lock costs: the lookup plus a few
//! nanoseconds (differences under ~10 ns between rows are noise here). Use `read` to look at a
//! value without cloning it, and a `Reader` for owned values in a loop.
//!
//! # Reads while another thread writes
//!
//! `cargo bench --bench shared`, group `read_contended/get/{4,12,48}/<variant>`: the same reads
//! while a background thread writes one header of the same map in a loop (copy-on-write for
//! `SharedHeaders` and `ArcSwap`, in place under the lock for the locks). One run, medians:
//!
//! | variant | bench id | 4 headers | 12 headers | 48 headers |
//! |---|---|---:|---:|---:|
//! | `SharedHeaders::read` | `shared_read` | 72 ns | 94 ns | 88 ns |
//! | `SharedHeaders::get` | `shared_get` | 148 ns | 128 ns | 114 ns |
//! | `SharedHeaders::snapshot` | `shared_snapshot` | 123 ns | 109 ns | 116 ns |
//! | raw `ArcSwap<HeaderMap>` | `arc_swap` | 57 ns | 82 ns | 89 ns |
//! | `parking_lot::RwLock<HeaderMap>` | `parking_lot_rwlock` | 133 ns | 147 ns | 151 ns |
//! | `std::sync::RwLock<HeaderMap>` | `std_rwlock` | 82 ns | 91 ns | 68 ns |
//! | `std::sync::Mutex<HeaderMap>` | `std_mutex` | 75 ns | 77 ns | 71 ns |
//!
//! On two cores the writer and the reader share cache lines whatever the design, and the medians
//! of locks under a writer move a lot from run to run (another run of `parking_lot_rwlock` gave
//! several microseconds): what matters is the tail, below.
//!
//! # Read latency under a slow writer
//!
//! `cargo bench --bench read_latency` (a plain bench binary, not criterion; `scripts/bench-table`
//! reads its `target/criterion/read_latency.json`): one `get` on 48 headers, timed one by one
//! (one read every 500 ns for 1 s), alone and while another thread rewrites all 48 headers in a
//! loop (through `update` for `SharedHeaders`, in place under the write lock for `RwLock`).
//!
//! Both publications. Medians over 8 runs of the
//! bench binary, alternating with the binary built from the code before the `Locked` read cache
//! (3 runs, then 5, at load 1.0-2.8; in one of the 8 the reader and the writer did not overlap and
//! every row read about 120 ns):
//!
//! | reader | alone p99 | under writer p99, before the cache | under writer p99, with it |
//! |---|---:|---:|---:|
//! | `SharedHeaders::read(\|m\| m.get(..))`, `LockFree` | 134-139 ns | 673 ns | 656 ns |
//! | `SharedHeaders::get`, `LockFree` | 140-154 ns | 696 ns | 657 ns |
//! | `SharedHeaders::read(\|m\| m.get(..))`, `Locked` | 116-136 ns | 751 ns | 728 ns |
//! | `SharedHeaders::get`, `Locked` | 141-144 ns | 667 ns | 708 ns |
//! | `std::sync::RwLock<HeaderMap>` (writer in place) | 127-137 ns | 103 µs | 131 µs |
//!
//! Under the writer, the p99 of `SharedHeaders::read` is **200x lower** (`LockFree`) and **180x
//! lower** (`Locked`) than the `RwLock` reader's p99, in the same runs: the lock's readers queue
//! behind the writer, the shared readers never wait for its work. Per-run spread of the
//! `SharedHeaders` rows is about ±15% (e.g. `Locked` `get` with the cache: 678-814 ns), so the
//! before/after differences are within it. (A first version of the cache freed a replaced
//! version in the reader, the next read after the writer replaced it: a 48-header map whose
//! values' reference counts the writer was cloning, and the `Locked` p99 under the writer went
//! to 3.9-4.7 µs; a reader holding a replaced version's last reference now hands it back to the
//! cell, and the writer frees or reuses it.) An earlier run, on the code before the cache, had `read` at 743 ns
//! and `RwLock` at 66.1 µs (89x). The figures include the timer's own cost (about 50 ns p99); the
//! maxima include the scheduler. The same bench counts allocations: `SharedHeaders::from` 2,
//! `get` / `read` / `snapshot` 0, `insert` and `update` 2.
//!
//! # Two readers of one request-scoped handle
//!
//! `cargo bench --bench read_scaling` (a plain bench binary): one handle of 12 headers per
//! publication; 1 thread, then 2 threads, calling one read on it in a loop for 100 ms, reads
//! counted; 7 rounds (A: 1 thread, B: 2 threads, A, B, ...); the figure is the median of the
//! per-round ratios reads(2) / reads(1). On this 2-core machine 2.0x is perfect, and a ratio is
//! only meaningful when no other process holds a core: with one core busy, two threads share
//! one and every row reads about 1.07x (runs at load 2 showed exactly that, before and after).
//! Four runs with a core free (load 0.9-1.1), alternating the binary built before the cache
//! and the one with it (before, with, before, with):
//!
//! | handle | read | before the cache | with it |
//! |---|---|---:|---:|
//! | `Locked` | `read(\|m\| m.get(..))` | 0.31x, 0.22x | **1.33x, 2.02x** |
//! | `Locked` | `get` | 0.55x, 0.33x | 0.61x, 0.59x |
//! | `Locked` | `get`, `'static` values | 0.61x, 0.45x | **2.13x, 2.03x** |
//! | `LockFree` | `read(\|m\| m.get(..))` | 1.97x, 1.97x | 2.04x, 2.04x |
//! | `LockFree` | `get` | 0.65x, 0.62x | 0.72x, 0.66x |
//! | plain `&HeaderMap::get` + `clone` (the ceiling for `get`) | `get` | 0.63x, 0.57x | 0.69x, 0.57x |
//!
//! (Two earlier runs of each, not alternated, load 1.2-1.8: `Locked` `read` 0.25x and 0.22x
//! before, 1.84x and 2.01x with the cache.)
//!
//! Before the cache, two readers of a `Locked` handle did a quarter of one reader's reads: every
//! read wrote the read lock's word, one cache line bouncing between the cores. With it a read
//! writes nothing shared while the thread's cached version is current. `get` returns an owned
//! value: its clone increments the value's `Bytes` reference count, shared by every reader of
//! that header whatever holds the map (values parsed off the wire, as here and as hyper's are),
//! so `get` by two threads is bounded by that count for every design, a plain `&HeaderMap`
//! included (its row). With `'static` values (a clone touches nothing) the handle's own scaling
//! shows. To read without touching a value's count, use `read(|m| ...)`. One thread alone also
//! reads faster with the cache: `Locked` `read` 27.3-38.4 M reads/s against 15.4-16.8 M before,
//! in the runs above.
//!
//! The cost of one uncontended read, and of the server layer that reads its handles, by
//! `scripts/callgrind-per-op` (instructions per iteration; before: the code before the cache):
//!
//! | variant | before | with the cache |
//! |---|---:|---:|
//! | `get_locked:12` (`get` on a `Locked` handle) | 313 | 334 |
//! | `read_locked:12` (`read(\|m\| m.get(..))`, `Locked`) | 276 | 271 |
//! | `get_shared:12` / `read_shared:12` (`LockFree`, unchanged code) | 350 / 301 | 356 / 299 |
//! | `raw_locked` at 1, 2, 16, 256 threads | 3,686, 3,632, 3,705, 3,695 | 3,745, 3,777, 3,779, 3,838 |
//!
//! A hit is one atomic load of the count, a thread-local lookup and a `RefCell` borrow instead
//! of a read lock's two atomic read-modify-writes: a few more instructions for `get` (whose
//! result goes through the closure), fewer for `read` (which also saves the `Arc` increment and
//! decrement it made under the lock). `raw_locked` (new handle, `get`, 2 `insert`s, drop) is 1.03x at 256 threads against
//! 1 (before: 1.00x); the cache touches only the cell and the thread's own storage (the shared id
//! counter once per 1,024 ids), so nothing in it grows with threads: 16 to 256 threads is
//! 1.02x. The difference between 1 and 2+ threads is in glibc's `malloc`/`free`, which behave
//! differently once the process has more than one thread (not investigated further).
//!
//! # The client layer, connection health
//!
//! In process, no sockets; one run, ratios against the row marked 1.00x from the same run.
//!
//! | bench id | command | median | ratio |
//! |---|---|---:|---:|
//! | `client/one thread/bare service` | `cargo bench --features client --bench client` | 206 ns | |
//! | `client/one thread/RwLock<HeaderMap> defaults` | same | 753 ns | 1.00x |
//! | `client/one thread/DefaultHeaders layer` | same | 1.00 µs | 1.33x |
//! | `client/one thread/RefreshRetry over DefaultHeaders` | same | 1.45 µs | 1.93x |
//! | `client/two request threads, rotating writer/RwLock<HeaderMap> defaults` | same | 1.49 µs | 1.00x |
//! | `client/two request threads, rotating writer/DefaultHeaders layer` | same | 1.62 µs | 1.09x |
//! | `acquire+release/uncontended/Mutex<state>` | `cargo bench --features conn --bench conn` | 49.3 ns | 1.00x |
//! | `acquire+release/uncontended/ConnHealth` | same | 41.1 ns | 0.83x |
//! | `acquire+release/2 background threads/Mutex<state>` | same | 48.0 ns | 1.00x |
//! | `acquire+release/2 background threads/ConnHealth` | same | 38.1 ns | 0.79x |
//!
//! (`--warm-up-time 0.3 --measurement-time 1`.) The client layer costs about 0.25 µs more than
//! cloning the defaults out of a `RwLock` on one thread, and about the same once a writer rotates
//! the token; its defaults are a long-lived `LockFree` handle, read without waiting for the
//! writer. Each `DefaultHeaders` service reads its defaults through a
//! [`Reader`](crate::Reader) of its own, the one place where the crate itself reads a
//! long-lived handle in a loop (a clone of the service starts from the same cached version, so
//! a stack that clones it per request, as `RefreshRetry` does, pays no load either; the
//! reqwest middleware, called through `&self` by every request at once, keeps the handle's
//! plain consistent read, since a `Reader` needs `&mut`). By
//! instructions (`scripts/callgrind-per-op client_bare client_defaults client_defaults_clone`:
//! one request with 1 header of its own, 4 defaults, one of them overriding; before = the
//! previous code with the same harness): a request through one service 5,567 -> 5,484, through
//! a clone per request 5,608 -> 5,533 (bare 1,341: the layer's own 4,226 -> 4,143, 0.98x).
//! `ConnHealth` admission costs what a mutex costs. With two background threads the
//! medians hide a bimodal distribution (criterion's means: 189 ns for `ConnHealth`, 145 ns for
//! the mutex, with wide intervals): on two cores, which of them wins depends on scheduling. The
//! point of `ConnHealth` is that admission cannot race with `mark_dead`, which a `Mutex` gives
//! too only if every check and every use happens under it.
//!
//! # Demo: a real server under load
//!
//! ```sh
//! cargo run --release --features full --example server -- --compare
//! ```
//!
//! A real HTTP/1.1 server (hyper 1 + hyper-util) on `127.0.0.1:0`, with `SharedHeadersLayer`
//! (deadline 20 ms) whose `on_commit` hook is the access log. Each handler works for 0.2 to 1.4 deadlines, so
//! about a third of the requests time out, and spawns two background tasks that write a request
//! annotation and a response header after 0 to 2 deadlines, so many write after the response
//! was committed. A built-in client sends 20,000 requests over 64 keep-alive connections; it
//! abandons every 50th (gives up after a quarter of the deadline and closes the connection,
//! nginx's 499) while its handler works for almost the whole deadline.
//! Afterwards every access-log line is checked against the truth: the headers the client
//! received, and the request context as it ended up once every background task finished.
//! `--compare` runs the same load with the usual `Arc<tokio::sync::Mutex<HeaderMap>>` context and
//! `tokio::time::timeout`. The verdict counts only requests that reached the server (a request
//! the client gave up on before hyper read it has nothing to log), and exits non-zero if any
//! of them has no line, two lines, or a line that disagrees with what the client received
//! (`CommitEvent::sent`). One run of the demo (`--compare`), beside 8 busy loops on this 2-core machine (it passed 10 runs of 10 that way):
//!
//! ```text
//! 20,000 requests over 64 connections, deadline 20 ms; handlers take 0.2-1.4 deadlines, each spawns 2 tasks writing after 0-2 deadlines
//!
//!                                                   shared-headers   Arc<Mutex<HeaderMap>>
//! requests                                                  20,000                  20,000
//!   answered by handler (200)                                8,677                  17,399
//!   answered by timeout (503)                               10,947                   2,203
//!   abandoned by the client                                    376                     398
//!     of which before reaching the server                        1                       0
//! requests that reached the server                          19,999                  20,000
//!   failed                                                       0                       0
//! late writes refused (Err(Sealed))                         59,055                       0
//! late writes accepted, never seen                               0                  50,570
//! log lines != committed headers                                 0                  16,758
//! reached the server, no log line                                0                     396
//! throughput (req/s)                                         2,630                   2,503
//! latency p50 (ms)                                            22.9                    24.0
//! latency p99 (ms)                                            56.5                    51.8
//!
//! an access-log line (shared-headers' on_commit hook, at the commit):
//!   GET /work status=503 outcome="timed out" latency_ms=23.9 request: x-id=6 x-task-1=6 | response: x-task-1=6
//! a request its client abandoned (on_commit, when hyper dropped the layer's future; 333 of 375 abandoned requests that reached the server):
//!   GET /work status=- outcome="cancelled" latency_ms=0.3 request: x-id=49 | response: -
//!   (1 abandoned requests never reached the server: the client gave up before hyper read them, so there is nothing to log)
//!   (42 more the server had committed before it noticed the closed connection: logged with that outcome)
//! a post-commit activity line (on_late_writes, after the last task; 18,131 such requests):
//!   GET /work outcome="answered" refused_writes=2 since_commit_ms=0.0
//! ```
//!
//! With the mutex, 86% of the log lines written disagree with what really happened: a task wrote after
//! the log line was taken (the log misses a header the context ends up with) or between the merge
//! and the log (the log shows a header the client never got), and every late write "succeeds"
//! into a map nobody reads again. With `SharedHeadersLayer` the log is taken from the sealed
//! snapshots: 0 mismatches by construction, and each late write gets `Err(Sealed)` and is
//! counted. The 400 abandoned requests: the naive stack logs when the response comes out of its
//! stack, so hyper's drop of the future leaves no line; the hook logs each at the drop's commit
//! (`cancelled`, or what the server had committed if it answered before it noticed the closed
//! connection, 1 here). Throughput and latency are the same within noise: both are dominated by the handlers'
//! sleeps. Flags: `--requests N`, `--concurrency N`, `--deadline-ms N`, `--compare`, `--quick`
//! (1,000 requests, 16 connections). The process exits non-zero if shared-headers' log ever
//! disagrees or misses a request, a request fails, or the counts do not add up.
//!
//! # Demo: rotating client tokens
//!
//! ```sh
//! cargo run --release --features client --example client_tokens            # 3 s per approach
//! cargo run --release --features client --example client_tokens -- --seconds 10 --loops 64
//! ```
//!
//! A local API on `127.0.0.1:0` rotates the token it accepts every 300 ms and answers `401` to
//! stale tokens (and `400` to a torn set: token and `x-token-gen` companion from different
//! generations). An in-process auth server issues tokens after 20 ms, 4 at a time. 64 request
//! loops go through hyper-util's client, with `RefreshRetryLayer` outside `DefaultHeadersLayer`
//! (one single-flight refresh per refused token, one retry per request), then with
//! `Arc<RwLock<HeaderMap>>` + a refresh on every `401` (token and companion written in two
//! steps, as such code usually is). Each approach first runs unmeasured for a moment, so that run
//! order does not decide the comparison. Two runs of the first command, same hardware:
//!
//! | approach | requests ok | req/s | 401s | refreshes | rotations | refreshes/rotation | torn sets | failed | p50 | p99 |
//! |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
//! | shared-headers `RefreshRetryLayer`, run 1 | 115331 | 38082 | 590 | 10 | 11 | 0.9 | 0 | 0 | 1.15 ms | 12.74 ms |
//! | `Arc<RwLock<HeaderMap>>` + refresh on 401, run 1 | 149581 | 48645 | 520 | 520 | 10 | 52.0 | 0 | 0 | 0.45 ms | 5.37 ms |
//! | shared-headers `RefreshRetryLayer`, run 2 | 139371 | 46417 | 576 | 9 | 11 | 0.8 | 0 | 0 | 1.13 ms | 6.31 ms |
//! | `Arc<RwLock<HeaderMap>>` + refresh on 401, run 2 | 117501 | 36714 | 527 | 527 | 10 | 52.7 | 0 | 0 | 0.58 ms | 6.46 ms |
//!
//! The layer makes at most one auth call per rotation (0.8-0.9 here: a rotation that happens while
//! nobody is sending needs none); the naive client makes one per `401`, up to one per loop: a
//! stampede of about 50 auth calls per rotation. Neither sent a torn set in this run (the naive
//! client's two-step write can produce one when a request is built between the two writes; the
//! server counts them). Latency is per HTTP request and does not include the time a loop spends
//! waiting for a refresh. Throughput is limited by the two cores, which the client, the API and
//! other processes share: between the two runs it moved by 20-25% in opposite directions for the
//! two approaches, so the runs show no throughput difference either way. The naive
//! client's lower p50 comes from its loops sitting out the stampede, which leaves fewer requests
//! in flight at once.
//!
//! # Demo: dead connections in hyper-util's and tonic's clients
//!
//! ```sh
//! cargo run --release --features full --example pool
//! ```
//!
//! hyper-util's legacy `Client` (HTTP/1.1 and h2c) and tonic's `Channel` through an in-process
//! fault proxy (black hole, write stall, RST and FIN idle or as a request arrives, GOAWAY, and a
//! server slower than the deadline): the defaults, a keep-alive ping, and the crate's
//! `HealthConnector` + `ConnRetryLayer`, 100 requests a row, all rows in one run. The table and
//! what it shows: [`docs::outgoing`](super::outgoing#dead-connections-in-hyper-utils-client-and-tonics-channel).
