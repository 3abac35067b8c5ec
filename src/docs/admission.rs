//! Deadline-aware admission measured: the overload run beside tower's `LoadShed` +
//! `ConcurrencyLimit` (goodput, p99, refusals, timeouts, wasted work at 1x to 10x the
//! capacity), the failure modes before and after, and the cost of the admitted path.
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
//! One route over loopback whose handler takes 2 requests at a time (2 workers × 20 ms: a
//! semaphore inside the handler), callers with a 200 ms budget (`x-budget-ms`), offered 0.8x, 1x,
//! 2x, 4x and 10x the capacity measured first in the same run (2 closed-loop callers on the route
//! without admission: 94.2 requests/s, unloaded p99 22.0 ms in the run below). Every leaf runs
//! inside the same `SharedHeadersLayer` (`caller_budget` on `x-budget-ms`,
//! `timeout_status(504)` so that a caller who waited out its budget is told from a refusal,
//! `record_in_response(false)`); the admission leaves add only `.admission(...)`. Leaves:
//! **tower** (`LoadShed` over `ConcurrencyLimit(2)`, the right limit, around the handler,
//! tower's `Overloaded` error answered as a 503 with `retry-after: 0` as admission's: in axum
//! that is a `HandleErrorLayer` more), **admission
//! limit(2)**, **admission, no limit** (`Admission::new()`) and **admission limit(20)** (ten
//! times too high): with the last two the queue forms inside the handler, where admission
//! cannot see it. At 0.8x the arrivals are random (Poisson, a fixed seed: evenly spaced ones
//! never queue below the capacity) and a fifth leaf runs beside them, **the handler alone**
//! (no admission, nobody refused): its p99 of good answers is the floor that queueing alone
//! sets there. 3 rounds of 2 s per cell, the leaves interleaved (their order rotates each
//! round); each figure is the median over the rounds, "÷ tower" the median of the per-round
//! ratios. Each cell of an overload (1x and over) starts as a real server's does: its leaf
//! is served at 0.5x (evenly spaced) for 0.5 s, then left idle for 1 s (the leaves of a
//! load together; the later ones in the round idle longer), then met by the load; only the
//! load is measured. A cell at 0.8x starts a fresh server met by the load at once (after a
//! quiet spell, random arrivals bunched at the load's start are refused now and then: a
//! known limit: [`admission_reviews`](super::admission_reviews)).
//! Goodput: answers 200 within the budget per second ÷ the measured capacity (above 1
//! when the open-loop arrivals keep both workers busier than the closed-loop measure does).
//! "p99 good after 500 ms": the same, of the requests sent after each load's first 500 ms.
//! Refused: answered 503 with `retry-after: 0`. Waited out: answered 504 at the deadline, or
//! not in time. Wasted: work that ended after its caller's deadline ÷ work done. Limit: the
//! adaptive limit at the end of the cell.
//!
//! | load | leaf | goodput | ÷ tower | p99 good | p99 good after 500 ms | refused | p99 to refusal | waited out budget | wasted work | limit at the end |
//! |---|---|---|---|---|---|---|---|---|---|---|
//! | 0.8x | tower | 0.56 | 1.00 | 22 ms | 22 ms | 27% | 0.3 ms | 0.0% | 0.0% |  |
//! | 0.8x | admission limit(2) | 0.77 | 1.37 | 79 ms | 79 ms | 0% | 0.0 ms | 0.0% | 0.0% | 2 |
//! | 0.8x | admission, no limit | 0.77 | 1.37 | 79 ms | 79 ms | 0% | 0.0 ms | 0.0% | 0.0% | 2 |
//! | 0.8x | admission limit(20) | 0.77 | 1.37 | 79 ms | 79 ms | 0% | 0.0 ms | 0.0% | 0.0% | 2 |
//! | 0.8x | the handler alone | 0.77 | 1.37 | 78 ms | 78 ms | 0% | 0.0 ms | 0.0% | 0.0% |  |
//! | 1x | tower | 0.80 | 1.00 | 22 ms | 22 ms | 20% | 0.3 ms | 0.0% | 0.0% |  |
//! | 1x | admission limit(2) | 0.99 | 1.24 | 23 ms | 23 ms | 0% | 0.0 ms | 0.0% | 0.0% | 2 |
//! | 1x | admission, no limit | 0.99 | 1.24 | 24 ms | 24 ms | 0% | 0.0 ms | 0.0% | 0.0% | 5 |
//! | 1x | admission limit(20) | 0.99 | 1.25 | 24 ms | 24 ms | 0% | 0.0 ms | 0.0% | 0.0% | 5 |
//! | 2x | tower | 0.91 | 1.00 | 22 ms | 22 ms | 54% | 0.2 ms | 0.0% | 0.0% |  |
//! | 2x | admission limit(2) | 1.00 | 1.10 | 63 ms | 43 ms | 49% | 0.2 ms | 0.0% | 0.0% | 2 |
//! | 2x | admission, no limit | 1.00 | 1.10 | 53 ms | 50 ms | 49% | 5.1 ms | 0.0% | 0.0% | 2 |
//! | 2x | admission limit(20) | 1.00 | 1.10 | 73 ms | 44 ms | 49% | 0.2 ms | 0.0% | 0.0% | 2 |
//! | 4x | tower | 0.96 | 1.00 | 22 ms | 22 ms | 76% | 0.2 ms | 0.0% | 0.0% |  |
//! | 4x | admission limit(2) | 1.00 | 1.04 | 63 ms | 43 ms | 75% | 0.2 ms | 0.0% | 0.0% | 2 |
//! | 4x | admission, no limit | 1.00 | 1.04 | 59 ms | 44 ms | 75% | 14.3 ms | 0.0% | 0.0% | 2 |
//! | 4x | admission limit(20) | 1.00 | 1.04 | 59 ms | 45 ms | 75% | 12.7 ms | 0.0% | 0.0% | 2 |
//! | 10x | tower | 0.99 | 1.00 | 22 ms | 22 ms | 90% | 0.2 ms | 0.0% | 0.0% |  |
//! | 10x | admission limit(2) | 1.00 | 1.01 | 63 ms | 44 ms | 90% | 0.2 ms | 0.0% | 0.0% | 2 |
//! | 10x | admission, no limit | 1.00 | 1.01 | 62 ms | 47 ms | 90% | 0.2 ms | 0.0% | 0.0% | 3 |
//! | 10x | admission limit(20) | 1.00 | 1.01 | 60 ms | 44 ms | 90% | 0.2 ms | 0.0% | 0.0% | 2 |
//!
//! (`cargo run --release --features full --example overload`, one run on commit `57eb464`,
//! the overloads after a quiet spell, 0.8x on a fresh server: capacity 94.2 requests/s,
//! unloaded p99 22.0 ms, so 3x is 66 ms; every load judged, the timers on time; **exit 1**:
//! the two known limits below, at an overload's start without the right limit: `limit(20)`
//! at 2x, 73 ms against 66 (44 ms after the first 500 ms), and the refusals' p99 at 4x,
//! 12.7-14.3 ms against 10.) Every admission leaf holds every other bar at every load:
//! goodput 1.01-1.37 of tower's, p99 of good answers 53-63 ms at 2x-10x but that one (43-50 ms after
//! each load's first 500 ms), none refused at 0.8x (p99 79 ms there: the handler alone,
//! which refuses nobody, 78 ms, the floor), nobody waited out a budget, no wasted work.
//! `limit(2)` holds every bar at every load. A run on `71cef16` (with the young spell's
//! bound withdrawn below) measured the 4x refusals' p99 at 1.3-2.6 ms and no limit at 2x
//! at 74 ms.
//!
//! **The same run with 10 s cells**, the length the bars were first measured at (`--seconds
//! 10`, 3 rounds, two runs on `874dadf`, whose admission code is `57eb464`'s: 0.8x and 1x,
//! then 2x, 4x and 10x; capacity 94.3 and 94.0 requests/s, unloaded p99 21.7 and 22.0 ms). Each
//! cell still starts after a quiet spell, as above. **Every bar holds at every load, for
//! every admission leaf.** The start's few callers are now a fifth as large a share of a
//! cell.
//!
//! | load | leaf | goodput | ÷ tower | p99 good | p99 good after 500 ms | refused | p99 to refusal | waited out budget | wasted work |
//! |---|---|---|---|---|---|---|---|---|---|
//! | 0.8x | tower | 0.53 | 1.00 | 22 ms | 22 ms | 32% | 0.4 ms | 0.0% | 0.0% |
//! | 0.8x | admission (all three) | 0.78 | 1.46-1.47 | 98 ms | 98 ms | 0% | | 0.0% | 0.0% |
//! | 0.8x | the handler alone | 0.78 | 1.47 | 98 ms | 98 ms | 0% | | 0.0% | 0.0% |
//! | 1x | tower | 0.81 | 1.00 | 22 ms | 22 ms | 19% | 0.2 ms | 0.0% | 0.0% |
//! | 1x | admission (all three) | 1.00 | 1.23 | 24 ms | 24 ms | 0% | | 0.0% | 0.0% |
//! | 2x | tower | 0.92 | 1.00 | 22 ms | 22 ms | 54% | 0.2 ms | 0.0% | 0.0% |
//! | 2x | admission limit(2) | 1.01 | 1.10 | 44 ms | 43 ms | 50% | 0.2 ms | 0.0% | 0.0% |
//! | 2x | admission, no limit | 1.01 | 1.10 | 51 ms | 44 ms | 50% | 0.3 ms | 0.0% | 0.0% |
//! | 2x | admission limit(20) | 1.01 | 1.10 | 52 ms | 49 ms | 50% | 0.2 ms | 0.0% | 0.0% |
//! | 4x | tower | 0.97 | 1.00 | 22 ms | 22 ms | 76% | 0.2 ms | 0.0% | 0.0% |
//! | 4x | admission limit(2) | 1.01 | 1.04 | 44 ms | 44 ms | 75% | 0.2 ms | 0.0% | 0.0% |
//! | 4x | admission, no limit | 1.00 | 1.04 | 52 ms | 51 ms | 75% | 0.2 ms | 0.0% | 0.0% |
//! | 4x | admission limit(20) | 1.00 | 1.04 | 48 ms | 48 ms | 75% | 0.2 ms | 0.0% | 0.0% |
//! | 10x | tower | 1.00 | 1.00 | 22 ms | 22 ms | 90% | 0.2 ms | 0.0% | 0.0% |
//! | 10x | admission limit(2) | 1.00 | 1.01 | 44 ms | 44 ms | 90% | 0.2 ms | 0.0% | 0.0% |
//! | 10x | admission, no limit | 1.01 | 1.01 | 46 ms | 44 ms | 90% | 0.2 ms | 0.0% | 0.0% |
//! | 10x | admission limit(20) | 1.01 | 1.01 | 47 ms | 45 ms | 90% | 0.2 ms | 0.0% | 0.0% |
//!
//! (0.8x: the handler alone's 98 ms is the floor there, as above, and every admission leaf
//! is within it and a tenth; at 1x the three leaves gave the same figures.) So the misses
//! of the 2 s run are the load's start, not a queue that stands. They are judged there all
//! the same: a 2 s cell is what a short spike is.
//!
//! **What changed since the run before** (on `88c8a8d`, which missed two bars without the
//! right limit: 71-72 ms at 2x, and refusals' p99 12.8-12.9 ms at 4x):
//!
//! - **The probe up no longer lets a queue in.** At 2x, once settled at 2, the limit probes
//!   3 every 300 ms or so. The work offered at the queue was read at the probed limit: 2x at
//!   2 reads 1.33x at 3, within the burst's margin, so while the probe lasted every caller
//!   was let wait, bounded by its budget alone (4 waiting, 58-69 ms each, after the limit
//!   went back to 2). It is read now at the limit held before the probe
//!   (`Limiter::serving`, as a waiter's predicted wait already was). p99 of good answers
//!   after each 2x cell's first 500 ms: 69-71 ms before, 43-49 ms now
//!   (`tests/s9_45_review.rs`'s steady 2x test: 72 ms on the tree before, 43-56 ms now).
//! - **Tried and withdrawn: a young spell's bound under slow start's guess.** At a 4x
//!   start after idle, the spell reads its first 40 ms as a burst (its span counts one
//!   no-load duration before its first request), so callers wait by their budget alone:
//!   8-9 queue under a guess of 4 on a handler that takes 2, all shed at slow start's cut
//!   10-28 ms after they came. A caller arriving a quarter of a no-load duration or more
//!   into a young spell, while the limit was the guess, was refused at once when the wait
//!   predicted at the capacity proven so far (at least half the guess) passed four delay
//!   targets: p99 to refusal at 4x 12.8-14.3 ms before, 1.3-2.6 ms with it. A hostile
//!   review (`tests/s13_start_review.rs`) found it refused good callers the tree before it
//!   served, at arrival, before any answer could tell them from an overload's start: 1-2
//!   of a batch of 12 spread 1-2 ms apart with 200 ms budgets (the batch takes 132 ms), 1
//!   of 640 random arrivals at 0.8x on 8 workers (seeds 2 and 3, 4 of 4 runs each) and 1
//!   of 800 at 0.5x on 16 workers. Must hold 3 (no good caller refused at 0.8x) wins: the
//!   4x refusals' p99 is a known limit again.
//! - **Tried and withdrawn:** slow start's trim counting the work that kept coming from a
//!   quarter of a no-load duration (not a whole one). At a 2x start the cut often comes
//!   within the spell's first no-load duration, when the trim reads no overload and keeps
//!   the waiters let in under the guess; they then wait 41-57 ms behind the requests let in
//!   above the new limit (p99 of good answers 72-74 ms in such a run). Counted from the
//!   quarter, the 2x start measured 44-55 ms in 14 runs in process, but the trim read
//!   random arrivals at 0.8x bunched at a fresh server's start as an overload and shed 2-3
//!   of 320 callers with 200 ms budgets (`tests/s6_45_review.rs`). This is the 2x miss
//!   above: the no-limit and `limit(20)` leaves measured 53-74 ms at 2x over five runs of
//!   2x on this tree (54 / 63, 74 / 63 ms, and the table's), against 65-67.
//!
//! Known limits, then, both at an overload's start after a quiet spell without the right
//! limit, both from the same ambiguity (for the first service time or two, an overload's
//! start, a spread batch and random arrivals below the capacity bunched together look
//! alike; only answers tell them apart, and refusing the first two refuses the last):
//!
//! - **at about 2x, the p99 of good answers of the load's first 500 ms reaches up to 3.4x
//!   the unloaded p99** (73-74 ms; 53-74 ms over six runs of no limit and `limit(20)`), when slow start's cut comes
//!   within a service time of the first queued request; 500 ms into the load it holds
//!   (43-49 ms), and with the right limit throughout;
//! - **at 4x, the refusals' p99 is 12.7-14.3 ms** (bar 10): the waiters let in under slow
//!   start's guess are shed at its cut; at 10x, where refusals are many more, 0.2 ms.
//!
//! Good callers are still refused in some other shapes, all after a quiet spell: random
//! arrivals at 0.65x-0.8x on this same handler when budgets are exactly five times the
//! unloaded p99 (up to 6 of 160; the run's 200 ms budgets lose none), at 0.5x-0.8x on 16
//! and 32 workers, on 3 workers, on bimodal routes, and spread batches (with `limit(20)` and
//! `limit(2)` too). They are listed with their figures in
//! [`admission_reviews`](super::admission_reviews#shapes-that-still-refuse-good-callers).
//!
//! **Both starts, traced.** A local build of the run printed slow start's every step, and
//! each cell's answers over 45 ms and refusals over 5 ms with each caller's arrival time
//! (2x and 4x, on `056a5a8`). Terms used below:
//!
//! - **The busy spell** begins at the first caller that finds every permit taken after a
//!   quiet spell.
//! - **The trim** is the refusal of waiters at slow start's cut. It reads an overload only
//!   from work that came more than a no-load duration after the busy spell began.
//! - **The young bound**: while the spell is under 50 ms old and reads an overload, a caller
//!   may wait at most two delay targets (the route's no-load duration and 2 ms, each).
//! - **The burst mark** is 1.25 times what the limit serves: under it, a caller waits with
//!   only its budget bounding the wait.
//!
//! What the trace showed:
//!
//! - **At 2x**, slow start cuts at its second delayed answer, 45-50 ms into the load, with 2
//!   callers waiting. In some cells the trim then refuses them: the callers that came 37 ms
//!   and 42-43 ms in, the first after 10-12 ms. No good answer there passes 56 ms.
//!
//!   In the other cells the caller that came 37 ms in found a permit and was answered in
//!   51-55 ms, and the first waiter came 42-43 ms in, a few milliseconds before the cut. The
//!   trim read no overload and kept the waiters. (The trace does not show which of the
//!   trim's two readings, the window's or the busy spell's, decided in the cells it
//!   trimmed: in both kinds the first waiter came under a no-load duration before the cut.)
//!   The spell's own reading (its span padded by a no-load duration) stayed under the burst
//!   mark for up to about 35 ms after the cut. So the callers that came 53-80 ms in were
//!   queued by their budget alone and answered in 57-80 ms.
//!
//!   The cells of the two leaves without the right limit went 1 trimmed to 10 late in one
//!   pair of runs (three rounds each), and 9 to 8 in the next three. A millisecond or two in
//!   the sockets' timing decides.
//! - **At 4x**, the cut comes about 46 ms in. It sheds the 8-9 waiters that came 19-40 ms
//!   in, after 5-27 ms; 6-7 of them waited over 10 ms, over 1% of a 2 s cell's refusals.
//!
//! **Tried and withdrawn after a hostile review: slow start's trim asked again.**
//!
//! - **The rule:** when the trim at the cut read no overload in a young busy spell, each
//!   caller that found every permit taken in the next 50 ms (or two no-load durations)
//!   asked it again, with the work that came since counted.
//! - **At 2x it held the start.** In two interleaved A/B runs (2x and 4x, three rounds, two
//!   pairs each), the cells of the two leaves without the right limit went:
//!   - late cells: none of 24 with it, 9 of 24 without;
//!   - p99 of good answers at 2x: 52-57 ms with it, 53-65 ms without;
//!   - the 2x refusals' p99: 0.2-10.7 ms with it, 0.3-5.7 ms without (the waiters it shed
//!     had waited 10-16 ms);
//!   - 4x was unchanged.
//! - **It refused good callers at half the capacity.** The review (one test file of 65
//!   shapes, both trees) found random arrivals at 0.5x after idle on 2 workers (seed 2,
//!   110 ms budgets) whose first queue formed about 650 ms in. A bunch there made slow
//!   start cut in a young spell, and the rule then shed 1-3 of 100 callers (5 of 5 runs; the
//!   tree without it: 0-1, in 2 of 5).
//! - **A first form also failed mixed routes.** It asked at the asking caller's own no-load
//!   duration, so a 1 ms route's callers read an overload at once. At 0.7x on two routes
//!   sharing one limit, one 20 ms caller was shed in 4 of 5 runs (0 of 5 without). Asked at
//!   the cut route's duration, this shape passed 3 of 3.
//! - **Why the two cannot be told apart:** a spell that begins mid-load, at a light load's
//!   first queue, looks like one that begins at an overload's start.
//!
//! **Built as an experiment and withdrawn: a cut from the age of a request still in flight.**
//!
//! - **The rule:** it tracked the oldest request in flight among those that took one of the
//!   last two permits of slow start's guess, recording its start on the admitted path. Once
//!   that request was past its tolerance, with another request above the proven capacity in
//!   flight behind it and as many waiting as the new limit, the limit was cut as if by two
//!   delayed answers.
//! - **When it cut:** 28-31 ms after that request came, about 7 ms sooner.
//! - **Where the trim then read an overload:** 4-5 of the waiters it shed had waited over
//!   10 ms (the p99 to refusal was 5-8 ms).
//! - **Where it did not:** the busy spell had not yet seen work a no-load duration after its
//!   start, so the trim kept all 8 waiters. Slow start was over, so nothing trimmed them
//!   later. They were served 68-117 ms after they came (p99 of good answers 115 ms).
//! - **Why it went:** an earlier cut helps only if the trim can already tell an overload,
//!   and that is exactly what the 2x start lacks. It also cost the admitted path a
//!   comparison and a field, on a path already at its +200 bar
//!   ([the cost](#the-cost-of-the-admitted-path)).
//!
//! **Also tried and withdrawn, each in an interleaved A/B of the run**:
//!
//! - **The young bound at 1.75 delay targets instead of 2** (2x, 4x and 10x, three rounds,
//!   two runs of each).
//!   - **What it did:** `limit(2)`'s p99 of good answers over the cell (set by the load's
//!     start) went from 59-63 ms to 54-58 ms at 2x and 4x.
//!   - **What it did not:** at 10x it stayed at 62-64 ms, and the leaves without the right
//!     limit measured 53-73 ms at 2x with it and without.
//!   - **Its cost:** it serves whole only batches a quarter of a service time shorter, and
//!     `limit(2)` already refuses half of a batch of 12 with 200 ms budgets (an ignored test
//!     in `tests/s12_idle_review.rs`).
//! - **Slow start's cut counting the requests in flight past the proven capacity as
//!   waiting**, with the trim still asking as many waiting as the new limit (2x, 4x and 10x,
//!   two runs; then a variant at 2x only, three runs). The trace above showed that the late
//!   2x cells had been cut on time and not trimmed, so the cut's condition was not the
//!   cause. The runs went 7 trimmed to 5 late beside the tree's 1 to 10, then 8 to 9 beside
//!   9 to 8: no effect beyond the spread from one run to the next.
//!
//! **Slow start's step to the demand** (the latest change). A permit per binding answer on
//! time grew slow start's first guess of 4 to only 6 in the first service time (the first
//! answers of a busy spell ran with fewer in flight, so they were not binding), then 12,
//! then 24: a handler of 16 or 32 workers met at 0.8x after a quiet spell kept callers
//! queued behind the guess for three service times, and the young bound and slow start's
//! refusal at arrival, predicting waits at that limit, refused some. Now an answer on time
//! with as many in flight as slow start's last step (at first the guess) takes the limit at
//! once to the requests in flight and waiting, up to twice the proof (TCP's slow start
//! doubles its window a round trip, grown by the data there is to send: RFC 7661). On a
//! handler of 2 the guess of 4 is proven whole only when a fourth request let in at once
//! still answers near the floor, rarely, so almost nothing changes there. Interleaved
//! release runs of `tests/s13_start_review.rs`'s ignored shapes, the tree before against
//! this one, 2 runs each:
//!
//! | random arrivals after 1 s idle, budgets 5x the unloaded p99 | refused before | refused now |
//! |---|---|---|
//! | 0.8x, 32 workers, seeds 1 and 2 | 47-49 of 2,560 | 27-29 |
//! | 0.5x, 32 workers, seeds 1 and 2 | 12-24 of 1,600 | 6-7 |
//! | 0.8x, 16 workers, seed 1 (no limit, and `limit(20)`) | 7 of 1,280 | 4 |
//! | 0.8x, 16 workers, seed 2 | 5-6 of 1,280 | 5 |
//! | 0.5x, 16 workers, seed 2 | 0-1 of 800 | 0 |
//!
//! What is left comes in the first two service times, by the young bound (a caller may wait
//! two delay targets, predicted at the limit): at 16 workers 19-27 ms into the load (the
//! first answers come at about 21 ms), at 32 workers 9.5-41 ms, while the limit is the
//! guess of 4 with 8 waiting, or the step past it not yet proven. Until an answer comes
//! back, 0.8x on 16 workers (640/s) and 6x on 2 (600/s) are the same arrivals at the same
//! limit; the young bound is what keeps the second's start within its bars
//! (`tests/s7_45_review.rs`'s fresh server at 6x).
//! The overload run is unchanged: at 2x, where its misses are, the p99 of good answers of
//! the no-limit and `limit(20)` leaves was 55 / 65, 73 / 65 and 54 / 74 ms on the tree
//! before and 73 / 72, 54 / 65 and 54 / 63 ms with the change (three interleaved pairs,
//! four rounds each).
//!
//! A hostile review (`tests/s15_growth_review.rs`, 82 shapes on handlers of 3-12 workers,
//! all ignored: most fail on the tree before too) found, on the second form withdrawn
//! below, more refusals after 10 ms at 4x on 3 and 6 workers (6 workers: 13 to 20-23 of
//! 1,824). On this form, interleaved with the tree before: 6 workers 0 of 3 runs failed (0
//! of 6); on 3 workers the `limit(20)` leaf failed 2 of 5 (the p99 of good answers 70 ms)
//! against 0 of 11, though the no-limit leaf, which behaves alike there, failed 1 of 3
//! against 2 of 6; one good caller refused at 0.8x on 4 workers in 1 of 5 runs (0 of 6); a
//! batch then 4x on 6 workers failed 2 of 3 against 6 of 6 (the p99 of good answers 61-69
//! ms against 84-85, but 18-20 refusals after 10 ms against 10-11). These are weak signals,
//! kept as the review's ignored tests with their figures.
//!
//! Two forms of it were withdrawn. The first went to twice the proof whatever the demand:
//! at 0.8x on 4 workers it let 8 into a handler of 4, the slow answers raised the route's
//! need to 60-65 ms, and good callers were refused by their budgets (seed 2 failed 3 of 6
//! runs against 0 of 7 on the tree before). The second took the step to the demand on any
//! proof, not the last step's whole: on a handler of 2 a third request that waited a
//! millisecond inside it answers near the floor and proves 3, and at 2x the p99 of good
//! answers without the right limit was over 66 ms in 6 of 10 cells against 1 of 10
//! (five interleaved pairs: two of 2x, 4x and 10x with three rounds, three of 2x alone
//! with four).
//!
//! The change before that, for an overload after a quiet spell (slow start's trim, the
//! generous exemption, the young bound's end, the wait counted over the limit) and its
//! review are in [`admission_reviews`](super::admission_reviews#after-a-quiet-spell).
//!
//! Every admission leaf is at least tower's goodput at every load (1.01-1.37 of it).
//! The runs before cells began after a quiet spell, and what they showed of slow start,
//! are in [`admission_reviews`](super::admission_reviews#earlier-overload-runs).
//!
//! At 0.8x the handler alone, which refuses nobody, has a p99 of good answers of 78 ms in
//! the run above: over 3x the unloaded p99 (66 ms). **These two bars conflict at 0.8x:
//! measured floor 78 ms** (the row "the handler alone" above): no admission can refuse
//! nobody there and hold the p99 to 3x, since random arrivals alone queue that long. The
//! run judges the p99 at 0.8x against that floor and a tenth (86 ms): `limit(2)`, no
//! limit and `limit(20)` 79 ms, none of them refused; tower refuses 27% of those
//! callers. (`limit(2)` refused 0.7-1% there in the runs before a route still warming up
//! had the burst rule: a queue of a limit's worth, 2, is full in a burst of random
//! arrivals.)
//!
//! The run exits non-zero when any admission leaf misses any bar it prints (goodput, tower's
//! goodput, p99 of good answers against 3x the unloaded p99 or the 0.8x floor, no refusal at
//! 0.8x, p99 to refusal, callers that waited out their budget) at a load judged (the
//! runtime's timers at most 5 ms late at p99 over time during that load, as the tests
//! measure it); a busier machine is said
//! inconclusive. The p99 of good answers and the p99 to refusal of the two leaves without
//! the right limit are judged only in cells of at least 2 s (the default): a shorter cell
//! is mostly the load's start, and the run prints those figures and says "not judged: a
//! cell under 2 s is mostly the load's start". `tests/admission.rs` runs a short
//! version (1x and 4x, half a second a cell, one round) in CI: at 4x, when judged, every
//! admission leaf within 0.15 of tower's goodput and at most 10% of callers waiting out
//! their budget.
//!
//! What the design follows, part by part: refusal at arrival from a per-route estimate against
//! the caller's budget (Finagle's `DeadlineFilter`, without its cap on estimate refusals: a
//! probe in 32 instead); the adaptive limit (TCP's slow start until a queue is seen, its
//! steps bounded by the demand as RFC 7661's, ended early as HyStart does at a delay
//! increase; TCP
//! Vegas's delay signal, on the least of the recent answers as Vegas's and BBR's min-RTT,
//! against the no-load duration, as Netflix's `concurrency-limits` `VegasLimit`; Little's
//! law for the step down, as its `Gradient2Limit`; then a hill climb on throughput between
//! neighbouring limits, preferring the lower, as BBR's and Gradient's probing, with an
//! exponential backoff of the probes up); the queue bounded at enqueue by its predicted delay
//! (PIE, RFC 8033) and served earliest deadline first, its bounds applied to a standing
//! queue only (CoDel's good queue and bad queue, told here by the work offered over a window
//! rather than by the sojourn time, and after a quiet spell over the busy spell alone, as a
//! fresh server's); the estimate's slot taken over only on evidence (TinyLFU's admission of
//! a newcomer), two slots per route (two choices, as cuckoo hashing's); the refusal's
//! `retry-after: 0` (RFC 9110) and gRPC's UNAVAILABLE.
//!
//! # Failure modes, before and after
//!
//! Each failure mode found by the reviews of admission (eight hostile reviews and a new
//! user's), with its figures before and after, and the known limits kept as ignored tests:
//! [`admission_reviews`](super::admission_reviews).
//!
//! # When the permit comes back
//!
//! An admitted request's permit stands for its handler's work, and a streaming route's
//! work goes on in its body: the permit stays with the response's body, given back when the
//! body is dropped (its end, or a client gone), or once the body has **produced no frame
//! for its quiet time *X***, whichever comes first. A body with no frame for *X* does no work
//! admission can see, whatever it waits for:
//!
//! * **its reader** (it returned a frame and was not polled again: a client that took the
//!   head and stopped reading, HTTP/2's flow-control window full, HTTP/1's socket buffer):
//!   two such clients would otherwise shut a `limit(2)` route to everyone;
//! * **its handler** (it returned `Pending`: an event stream between events, a long poll, a
//!   gRPC server stream): two idle subscribers would otherwise hold a `limit(2)` layer's
//!   permits for their streams' whole life, every route of the layer shut
//!   (`tests/s9_body_review.rs`). tower's `ConcurrencyLimit` gives its permit back at the
//!   head.
//!
//! The body streams on uncounted after that (its next frames hold no permit, and take none
//! back). What the route learns is unchanged: its time to head, at the answer; a permit given
//! back this way teaches nothing (the quiet is the client's or the stream's, not a service
//! time).
//!
//! *X* is four of the route's no-load durations (its least time to head since an answer
//! that ran alone), at least **300 ms** and at most **500 ms**. The floor spares a reader
//! that keeps up slowly: a frame every 50 ms keeps its permit (6x under the floor), and so
//! does a client reading 64 KiB every 50 ms over HTTP/1.1 with 64 KiB socket buffers (hyper
//! polls its body about every 100 ms). The cap bounds what a stalled client or an idle
//! stream holds, so that callers with budgets of a second still get through beside them.
//! A permit is never given back before *X* without a frame: the deadline thread looks
//! every 25 ms and frees a body's slot after *X* / 25 ms looks without a change, so between
//! *X* and *X* + 25 ms after its last frame (later only if the thread is late).
//!
//! What it cannot tell apart: a reader slower than its buffers. A server polls a body only
//! when its transport has room, so with large socket buffers a steady reader is polled in
//! bursts far apart: over loopback with the kernel's default buffers, hyper polled the body
//! of a client reading 64 KiB every 50 ms (1.3 MB/s) once in 1.1 s, the same silence a
//! client that stopped reading gives, and it loses its permit after *X* (its body streams
//! on uncounted: the limit lets one more request in beside it). No quiet time both frees a
//! stopped reader's permit within a caller's second and spares such a reader; the watch
//! chooses the first (a stopped reader holding permits shuts the route; a slow one given
//! its permit back lets one more request in).
//!
//! How: a fixed array of slot words, made with the admission (one per permit of its limit,
//! at most 1,024; none with [`count_only`](crate::server::Admission::count_only)). A body
//! takes a free slot at its first frame of data short of its end and counts each frame
//! there (a compare-and-swap from the word it last wrote); the deadline thread (the same
//! thread and queue as the deadlines) looks at the admission's held slots every 25 ms while
//! one is held: one entry in its queue per admission, armed by the body that finds none
//! there. The look frees a slot unchanged for its body's looks (a compare-and-swap) and
//! gives its permit back; the body's drop frees its slot the same way: of the two, exactly
//! one gives the permit back (loom model 10 in `loom-tests/tests/admission.rs`), and a
//! freed slot's generation goes up, so a body whose slot was freed cannot touch its next
//! holder. The last look that finds no slot held stops, unless a body took one meanwhile
//! (loom model 11: exactly one look stays queued for a held slot). Tests:
//! `a_stalled_body_gives_its_permit_back_once` and
//! `a_body_being_produced_keeps_its_permit_and_every_end_gives_it_back_once` in
//! `tests/s8_45_review.rs` (a body dropped mid-stream, one ended by a trailers frame, an
//! empty one; over HTTP/2 and HTTP/1.1 beside them), and `tests/s9_body_review.rs`. A
//! body past the 1,024th streaming at once (a limit above it) is not watched: its permit
//! comes back at its drop.
//!
//! Cost: nothing is allocated per body (the slots are the admission's); a body read to its
//! end in one frame, or dropped before a frame, takes no slot; what the admitted path adds
//! is the route's hash kept in the permit and one branch at its drop. Measured with
//! `scripts/callgrind-per-op layer_timeout layer_timeout_admission
//! layer_timeout_admission_limit` on the tree before this watch (an `Arc` per streamed body)
//! and on this one, one after the other: `layer_timeout` 8,434 and 8,409;
//! `Admission::new()` 8,688 and 8,668; `limit(64)` 8,680 and 8,679 (+254 and +259, +246 and
//! +270 over `layer_timeout`: the variants take the same path, so the moves are code
//! layout; no instruction more in absolute terms). A body of more than one
//! frame takes a slot once (a compare-and-swap, and a swap of the armed flag: the deadline
//! thread's lock only when no look of its admission is queued), then one compare-and-swap
//! per frame. Allocations per request through the layer, a body of three 1 KiB frames read
//! to its end (`a_streamed_body_allocates_nothing_more_with_admission`): without admission
//! and with `limit(64)`, 7.0 and 7.0 (7.0 and 8.0 before: the watch's `Arc`); a one-frame
//! body whose end comes at the next poll, 7.0 and 7.0 (7.0 and 8.0 before). The slots cost
//! 24 bytes each, once per admission (24 KiB for the default 1,024), and the thread's looks
//! a scan of them every 25 ms while a body streams. A look that gives a permit back hands it to the next waiter on the deadline
//! thread (a wake-up; with [`count_only`](crate::server::Admission::count_only), a doomed
//! waiter's `tracing` event), contained: a panic there is caught.
//!
//! # The cost of the admitted path
//!
//! From [the run](super::performance#the-run) that gives every page its instruction figures
//! (its eight `layer_timeout` and `layer_timeout_admission` variants): instructions per
//! request under callgrind (`benches/alloc.rs`'s run mode, 8 request headers, a trivial
//! handler, a 30 s deadline). `@N`: N − 1 parked threads that have read a handle first (as
//! `benches/threads.rs`). The route is warm and every request admitted: the path a healthy
//! service pays.
//!
//! | variant | 1 thread | 8 | 256 | added (1 / 8 / 256) |
//! |---|---:|---:|---:|---:|
//! | `layer_timeout` (no admission) | 8,428 | 8,440 | 8,421 | |
//! | `layer_timeout_admission` (`Admission::new()`) | 8,620 | 8,620 | 8,623 | +192 / +180 / +202 |
//! | `layer_timeout_admission_limit` (`limit(64)`, nobody waits) | 8,620 | | 8,631 | +192 / / +210 |
//!
//! At the +200 a healthy request was meant to pay, not under it with a margin: a figure of
//! one variant moves by up to about 20 with where the process's stack starts (glibc's
//! `memcpy` in the layer's call takes a longer or a shorter path for the same copies), which
//! the length of the arguments and the environment moves, and a variant's name is one of its
//! arguments. Flat from 1 to 256 threads. Five more runs of the one-thread rows
//! (`scripts/callgrind-per-op layer_timeout layer_timeout_admission
//! layer_timeout_admission_limit`) gave 8,417 and 8,632 each time (+215, `limit(64)` the
//! same); with `EQUAL_STACK=1`, which pads every run to one length, 8,429 and 8,632 (+203,
//! three runs). On `133e00b` (a round that left the admitted path alone; its estimate fix is
//! on cold paths), `EQUAL_STACK=1`: 8,493, 8,693 and 8,688 (+200, `limit(64)` +195); without
//! it 8,461, 8,692 and 8,689 (+231 / +228: the base variant's figure is the one that moved,
//! by 32). At the bar, with no margin. In a later environment, the same
//! `EQUAL_STACK=1` measure at six stack starts (an extra variable of 0-56 bytes) gave
//! 8,453-8,477 and 8,657-8,682: **+203 to +205**. `221cb58`, the tree before `133e00b`,
//! gave +204 and +205 there too. So the code did not move. The bar is met or missed by up
//! to 5 instructions (2.5%), depending on where the process's stack starts.
//!
//! Where the added instructions go, by callgrind's own count per function
//! (`callgrind_annotate` of the 1,000 and 6,000 request runs of each variant, the difference
//! per request), the same whatever the stack's start: the layer's call 100 (the route's hash
//! about 47, most of it reading the path and the method through `http`'s accessors; the
//! route's need and the budget's comparison about 20; the ticket's fields and its reference
//! count about 12; the permit's take about 15), the answer's one call 72 (the duration in
//! nanoseconds and less the wait 12; the slot's lookup 8; the estimate, its fast follower,
//! the pace and the floor about 36; the limit's lesson about 14), the response future's poll
//! 13 (the call's arguments, the permit handed to the body) and the body's drop 18 (the
//! stall watch's test, the permit given back: one subtraction, the fence, the queue's
//! length; the reference count): **203**.
//!
//! What keeps it from a margin under the bar is the adaptive limit every admission has: its
//! permit's take, its release and the answer's lesson are about 35 of the 203; the estimate's
//! path alone (about 170 by the same count) is under the bar. The answer's call is out of line
//! and calls nothing on its hot path (a route not warm in its first slot goes out of line, with
//! its lesson); a request that is cold or doomed at arrival is judged out of line; the permit
//! goes back inline, the queue's lock and the judge out of line for when someone waits.
//!
//! The added instructions: the route's slot (the method in O(1), GET and POST without a lookup,
//! the path hashed in 8-byte words and its last bytes in one word, once per request), the route
//! word and two estimate words, one comparison with the budget in nanoseconds (a `Duration` the
//! layer already has: no clock read; whole seconds past the need's without a multiplication),
//! the ticket's fields written in place, the estimate's update and the limit's lesson at the
//! answer in one call (loads and stores on the route's own cache lines, the slot looked up
//! once), one reference count, and the permit: one compare-and-swap and one subtraction on the
//! limiter's words, a load of the queue length each way, a fence on the release (the limiter's
//! one shared line). The cap's credit is earned (one atomic add) only with a
//! [`queue_start`](crate::server::Admission::queue_start) header, whose refusals alone spend
//! it. No lock is taken while the limit does not bind (a binding answer, once the limit has
//! seen a queue, tries the probe's lock).
//!
//! Heap allocations (`alloc`'s run mode, 6,000 requests): 73,389 allocations and 18,665,798
//! bytes for each of the three variants: admission adds none.
