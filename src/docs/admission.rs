//! Deadline-aware admission measured: the overload run (goodput, wasted work, p99, share
//! rejected at 1x, 2x and 4x the leaf's capacity) and the cost of the admitted path.
//!
//! What admission does, and how its per-route estimate works (what it is, why the 0.9
//! quantile by default, what it does at a cold start and on a route that just got slower):
//! [`Admission`](crate::server::Admission#the-estimate).
//!
//! # The overload run
//!
//! ```text
//! cargo run --release --features full --example overload
//! ```
//!
//! The three-service chain (edge → middle → leaf over loopback), every caller with a 200 ms
//! budget; the leaf has 2 workers × 20 ms of work (capacity 100 requests/s); 3 s per cell.
//! Leaves: **none** (no shedding: every request started when a worker frees up), **tower**
//! (`LoadShed` over `ConcurrencyLimit(2)`), **admission** (`Admission` with `limit(2)`).
//! Three runs on the shared 2-core machine; each cell is the min–max over the three (one
//! figure where they agree). Goodput: answers 200 within the caller's budget ÷ capacity.
//! Wasted: leaf work that ended after its caller's deadline, as a share of the leaf's work
//! (in units of 20 ms). p99: of the requests answered 200. Rejected: answered 503 at once.
//!
//! | load | leaf | goodput | wasted leaf work | p99 answered | rejected (503) | answered at the deadline (504 or none) |
//! |---|---|---|---|---|---|---|
//! | 1x | none | 0.91–0.94 | 0.0–3.0% (0–9) | 190–193 ms | 0% | 0–3% |
//! | 1x | tower | 0.68–0.69 | 0% | 22 ms | 31–32% | 0% |
//! | 1x | admission | 0.94 | 0.0–0.3% (0–1) | 190–193 ms | 0–1% | 0% |
//! | 2x | none | 0.10 | 89.4–89.7% (270–271) | 190–192 ms | 0% | 95% |
//! | 2x | tower | 0.82 | 0% | 22 ms | 58–59% | 0% |
//! | 2x | admission | 0.92–0.93 | 1.3–3.0% (4–9) | 194–195 ms | 20% | 30–31% |
//! | 4x | none | 0.07 | 92.7–92.8% (280–282) | 183–184 ms | 0% | 98% |
//! | 4x | tower | 0.90 | 0% | 23 ms | 77% | 0% |
//! | 4x | admission | 0.91–0.92 | 2.6–4.3% (8–13) | 194 ms | 20% | 56% |
//!
//! At 4x, admission's wasted leaf work is 8–13 units against 280–282 without shedding
//! (2.8–4.6% of it). Its admitted requests wait in deadline order, so their p99 is near the budget;
//! tower's are never queued (22 ms) but it refuses 77% of the load to get there, and at 1x
//! it refuses a third of requests that would have been served in time. The rest of
//! admission's requests at 2x and 4x are answered at their deadline without reaching the
//! handler (the last column: 30–31% and 56%): the rejection cap (a fifth) spares
//! them at arrival, and the queue passes them over. The example exits non-zero when the
//! admission leaf's goodput falls below a baseline's by more than 0.05 of capacity; all three
//! runs exited 0.
//!
//! # The cost of the admitted path
//!
//! ```text
//! scripts/callgrind-per-op layer_timeout layer_timeout@8 layer_timeout@256 \
//!     layer_timeout_admission layer_timeout_admission@8 layer_timeout_admission@256 \
//!     layer_timeout_admission_limit layer_timeout_admission_limit@256
//! ```
//!
//! (these variants among others, in the one run that gives every page its figures: see
//! [`performance`](super::performance#the-run))
//!
//! Instructions per request under callgrind (exact; `benches/alloc.rs`'s run mode, 8 request
//! headers, a trivial handler, a 30 s deadline), one run. `@N`: N − 1 parked threads that
//! have read a handle first (as `benches/threads.rs`). The route is warm and every request
//! admitted: the path a healthy service pays.
//!
//! | variant | 1 thread | 8 | 256 | added (1 / 8 / 256) |
//! |---|---:|---:|---:|---:|
//! | `layer_timeout` (no admission) | 8,143 | 8,142 | 8,144 | |
//! | `layer_timeout_admission` (`Admission::new()`) | 8,339 | 8,338 | 8,345 | +196 / +196 / +201 |
//! | `layer_timeout_admission_limit` (`limit(64)`, nobody waits) | 8,384 | | 8,388 | +241 / / +244 |
//!
//! Runs of the same binary differ by up to about 10 instructions (the clock's readings enter
//! the counts), so the admitted path sits just under the 200-instruction mark, with no margin
//! to speak of; the limited path is over it by about 40 (the permit's compare-and-swap and the fences of the limiter's handoff).
//!
//! The added instructions: the route's slot (the method in O(1), the path hashed in 8-byte
//! words), one load of its credit, two of its estimate, one comparison with the budget (a
//! `Duration` the layer already has: no clock read), the estimate's update at the answer (a
//! load and a store on the route's own cache line), and one reference count. With a limit, a
//! permit taken and given back: one compare-and-swap and one add on the limiter's words, a
//! load of the queue length each way, a fence on the release (the limiter's one shared
//! line). No lock is taken while nobody waits, and the count is flat from 1 to 256 threads.
//!
//! Heap allocations per request (`alloc`'s run mode, 6000 − 1000 requests): 12 for each of
//! the three variants (3,000 bytes): admission adds none.
