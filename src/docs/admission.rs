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
//! without admission: 93.7 requests/s, unloaded p99 22.1 ms). Leaves: **tower** (`LoadShed` over
//! `ConcurrencyLimit(2)`, the right limit, what a user writes in two lines), **admission
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
//! | 0.8x | admission limit(2) | 0.77 | 1.37 | 78 ms | 78 ms | 0% | 0.0 ms | 0.0% | 0.0% | 2 |
//! | 0.8x | admission, no limit | 0.77 | 1.37 | 79 ms | 79 ms | 0% | 0.0 ms | 0.0% | 0.0% | 2 |
//! | 0.8x | admission limit(20) | 0.77 | 1.37 | 78 ms | 78 ms | 0% | 0.0 ms | 0.0% | 0.0% | 2 |
//! | 0.8x | the handler alone | 0.77 | 1.37 | 79 ms | 79 ms | 0% | 0.0 ms | 0.0% | 0.0% |  |
//! | 1x | tower | 0.79 | 1.00 | 22 ms | 22 ms | 21% | 0.2 ms | 0.0% | 0.0% |  |
//! | 1x | admission limit(2) | 0.99 | 1.26 | 24 ms | 23 ms | 0% | 0.0 ms | 0.0% | 0.0% | 2 |
//! | 1x | admission, no limit | 0.99 | 1.26 | 23 ms | 23 ms | 0% | 0.0 ms | 0.0% | 0.0% | 5 |
//! | 1x | admission limit(20) | 0.99 | 1.26 | 24 ms | 24 ms | 0% | 0.0 ms | 0.0% | 0.0% | 5 |
//! | 2x | tower | 0.90 | 1.00 | 22 ms | 22 ms | 55% | 0.2 ms | 0.0% | 0.0% |  |
//! | 2x | admission limit(2) | 1.00 | 1.11 | 58 ms | 44 ms | 49% | 0.2 ms | 0.0% | 0.0% | 2 |
//! | 2x | admission, no limit | 1.00 | 1.11 | 72 ms | 71 ms | 49% | 4.4 ms | 0.0% | 0.0% | 2 |
//! | 2x | admission limit(20) | 1.00 | 1.11 | 71 ms | 69 ms | 49% | 3.3 ms | 0.0% | 0.0% | 2 |
//! | 4x | tower | 0.96 | 1.00 | 22 ms | 22 ms | 76% | 0.2 ms | 0.0% | 0.0% |  |
//! | 4x | admission limit(2) | 1.00 | 1.04 | 61 ms | 44 ms | 75% | 0.2 ms | 0.0% | 0.0% | 2 |
//! | 4x | admission, no limit | 1.00 | 1.04 | 54 ms | 46 ms | 75% | 12.8 ms | 0.0% | 0.0% | 2 |
//! | 4x | admission limit(20) | 1.00 | 1.04 | 55 ms | 43 ms | 75% | 12.9 ms | 0.0% | 0.0% | 2 |
//! | 10x | tower | 1.00 | 1.00 | 22 ms | 22 ms | 90% | 0.1 ms | 0.0% | 0.0% |  |
//! | 10x | admission limit(2) | 1.00 | 1.01 | 63 ms | 44 ms | 90% | 0.1 ms | 0.0% | 0.0% | 2 |
//! | 10x | admission, no limit | 1.00 | 1.01 | 61 ms | 47 ms | 90% | 0.2 ms | 0.0% | 0.0% | 2 |
//! | 10x | admission limit(20) | 1.00 | 1.01 | 60 ms | 44 ms | 90% | 0.2 ms | 0.0% | 0.0% | 2 |
//!
//! (`cargo run --release --features full --example overload`, one run on commit `88c8a8d`,
//! the overloads after a quiet spell, 0.8x on a fresh server: capacity 94.2 requests/s,
//! unloaded p99 21.9 ms, so 3x is 66 ms; every load judged, the timers on time; **exit 1**:
//! no limit and `limit(20)` miss the p99 of good answers at 2x (72 / 71 ms; 71 / 69 ms after
//! the first 500 ms: the settled limit's probe up on a handler that takes 2) and the p99 to
//! refusal at 4x (12.8-12.9 ms against 10: the waiters let in under slow start's guess, shed
//! at its cut; below). `limit(2)` holds every bar at every load: goodput 1.01-1.37 of
//! tower's, p99 of good answers 58-63 ms at 2x-10x (the young spell's first callers wait up
//! to two service times; 44 ms after each load's first 500 ms), 78 ms at 0.8x (the handler
//! alone: 79 ms, the floor), no refusal at 0.8x, refusals within 0.2 ms (p99), nobody waited
//! out a budget. An earlier run on `2386892`, with a young bound at the capacity slow start
//! had proven (withdrawn after the review in
//! [`admission_reviews`](super::admission_reviews): it refused good callers at 0.8x on a
//! handler bigger than proven), measured 64-65 ms at 4x-10x for no limit and refusals within
//! 0.3 ms.)
//!
//! **No limit and `limit(20)` at 4x-10x: 126-130 ms in the run before (commit `b35c414`,
//! capacity 94.5/s, unloaded p99 21.7 ms, exit 1), 54-61 ms now** (this run: 54-55 ms at 4x, 60-61 ms at 10x). After the light load
//! before, their limit is still in slow start (a guess of 4 on a handler that takes 2, with
//! 1 or 2 in flight proven), so the load's first requests wait in the handler, unseen. The
//! load's first 40 ms of callers (16 at 4x) were admitted and answered in pairs a service
//! time apart, the last at about 130 ms: the busy spell's load read at the guessed limit of
//! 4 stayed under the burst mark until about 40 ms in, and slow start's cut at about 45 ms
//! did not trim the queue, whose test read the window (which counts the idle time); after
//! the cut, the young spell's bound of two delay targets let more wait, their wait
//! predicted without the requests in flight over the new limit. Now
//! (`src/server/admission/limiter/overload.rs`, `src/server/admission/request/queue.rs`):
//!
//! - slow start's cut trims the queue when the busy spell's work that kept coming after
//!   its first no-load duration reads an overload at the new limit (a batch's requests all
//!   come in its first instant: a batch is not trimmed), leaving any waiter with ten
//!   no-load durations of budget or more;
//! - an overload found there ends the spell's young bound (it is no batch);
//! - a waiter's predicted wait counts the requests in flight over the limit, and is
//!   predicted at the limit held before a probe up (the probe's extra permit tests the
//!   handler; it is no capacity yet);
//! - a spell is young for 50 ms or two no-load durations (was 100 ms or four): a batch's
//!   callers arrive at once, an overload's keep coming.
//!
//! The waiters the cut sheds were let in under the guess 20-40 ms before: at a 4x start,
//! the refusals' p99 is 12-14 ms against the 10 ms bar in process (the overload run's 2 s
//! cells: 12.8-12.9 ms at 4x, 0.2 ms at 10x, where the refusals are many more).
//!
//! In process (`tests/s9_45_review.rs`): the 4x start after idle with no limit, p99 of good
//! answers 98-131 ms in 8 runs before, 53-58 ms in 3 release runs now (refusals' p99 12.9-14.3
//! ms, ignored against 10 ms as a known limit); a second 4x after another quiet spell, the
//! limit settled by the first one's cut, 68-93 ms before a waiter's wait was predicted at the
//! limit held before a probe up, 55-58 ms now (refusals 12.7-15.2 ms); the no limit test's
//! 2x and 4x after idle 59.6-69.6 and 61-63 ms (judged at 5x).
//!
//! A hostile review of the change (`tests/s12_idle_review.rs`, 34 shapes: batches of 8 to 40
//! with budgets of 150 ms to an hour, with no limit, `limit(2)`, `limit(4)`, `limit(20)`;
//! random 0.8x after idle on 2, 4 and 8 workers; bimodal routes) found two regressions
//! against the tree before it, both fixed and kept as passing tests: the trim as first
//! written read a batch's own spell as an overload (12 callers with 200 ms budgets lost 5-6,
//! shed 42 ms after arrival; 16 with 10 s or an hour's budget lost 9 before the generous
//! exemption); and a young bound predicted at the capacity slow start had proven refused 2-4
//! of 640 random arrivals at 0.8x after idle on an 8-worker handler whose warm-up had proven
//! less (withdrawn: it had put the 4x start's refusals within 0.1 ms, by refusing at arrival
//! the callers the cut now sheds). Nine shapes that fail on the tree before the change too
//! are ignored with their figures: cron batches of 8-16 every 0.6 s with 200 ms budgets
//! (14-93 refused of 80-160: a batch of more than three service times reads as an overload),
//! 24 at once on 8 workers with 5x budgets (12 refused), a batch of 12 at `limit(2)` (6).
//!
//! Every admission leaf is at least tower's goodput at every load (1.01-1.37 of it).
//!
//! The table before cells began after a quiet spell (each cell a fresh server met by the
//! load at once) is in the history of this page; its figures, which the paragraphs below
//! discuss: goodput 1.00 at 2x-10x (1.01-1.09 of tower's), p99 of good answers 44-45 ms with
//! `limit(2)` and 61-64 ms with no limit or `limit(20)` at 2x-10x, no refusal at 0.8x.
//!
//! (That table: `cargo run --release --features full --example overload`, one run on the
//! tree before the fifth review's fixes below: capacity 93.8 requests/s, unloaded p99 21.7 ms, so 3x is 65 ms;
//! every load judged, the timers on time; every bar of every admission leaf holds; exit 0.
//! One run of the same command after those fixes, also exit 0 with every load judged:
//! capacity 92.5/s, unloaded p99 24.5 ms; goodput 1.02 at 2x-10x (1.08 / 1.04-1.05 / 1.01 of
//! tower's), 0.99 at 1x (1.10); p99 of good answers 44 / 73 / 69 ms at 2x (limit(2) / no limit
//! / limit(20)), 44 / 63-65 ms at 4x-10x; refusals within 0.4 ms at p99. One run after the
//! fixes of three of the fifth review's known limits (callers without a budget bounded on a
//! route warming up, and two rules since withdrawn: client errors that taught nothing and a
//! burst rule for generous callers; see the known limits), exit 0 with
//! every load judged: capacity 93.1/s, unloaded p99 23.8 ms; goodput 0.99 at 1x (1.18-1.19
//! of tower's), 1.00-1.01 at 2x-10x (1.02-1.08); p99 of good answers 44 / 63 / 67 ms at 2x,
//! 46-47 / 64-68 ms at 4x-10x, 78-79 ms at 0.8x (the handler alone 78 ms), none refused
//! there; refusals within 0.7 ms at p99.) The machine is shared: of four
//! runs of the same command on the trees just before this one (slow start's proof of
//! capacity then taken from any answer within the tolerance), under a load average of 3 to
//! 9, one passed and three had one or two rows over a bar (2x, no limit and `limit(20)`, 72
//! ms against 68; 0.8x `limit(2)` 101 ms against 85 and 1x, no limit, 85 ms against 73; 10x
//! goodput 1.00 against tower's 1.00, two loads not judged), and one-round runs with and
//! without the offered work's restart (the review table below) showed such spikes alike
//! (1x and 2x rows of 95-173 ms in one round of either).
//!
//! Every admission leaf is at least tower's goodput at every load (1.01-1.36 of it), refuses
//! in under 1 ms (p99), and no caller waits out its budget. With the right limit the p99 of
//! good answers is 24-45 ms at 1x-10x. With no limit or one ten times too high it is 63-64
//! ms over the whole 2 s cell at 2x-10x (84-86 ms before the probe, in an earlier run on the
//! same machine, same command: capacity 92.7/s, unloaded p99 26.1 ms).
//!
//! What set those leaves' p99 was each cell's start: the limit starts at 4 on a handler that
//! takes 2, and good answers waited in the handler, and a limit's worth in the queue, until
//! the least of the recent answers (8 to 16 of them) showed the queue. Slow start now ends
//! from the answers' own delays (HyStart's exit, on the in-flight count where the delay
//! appeared): two delayed answers, each with more in flight at its start than any answer on
//! time, while a queue of that many waits, cut the limit to that many (2 here, about 45 ms
//! in), and in an overload the waiters the requests already let in above it would delay
//! past a service time are refused then. A route whose answers merely vary (2 ms and 60 ms
//! alternating: `tests/issue45_review.rs`) answers on time at every load and is never cut;
//! the "queue of that many waits" condition keeps random arrivals below the capacity from
//! settling the limit on a burst. What remains is each probe up (a limit of 3 for one or
//! two answers: 60-65 ms each; at most 300 ms apart, so that a handler whose capacity grows
//! is found) and, at 2x, the start's last waiters.
//!
//! A cell's start alone (the `--seconds 0.5` run, where each cell is mostly its start) had
//! two more misses before slow start met an overload at arrival: the waiters queued in the
//! first 40 ms were refused when the cut came, after waiting (p99 to refusal 21-25 ms at 4x,
//! bar 10 ms), and the two on-time answers of the first service time grew the limit from 4
//! to 6 while the handler's own queue was already full (p99 of good answers 78-88 ms at
//! 10x, bar about 72 ms). Now slow start grows the limit only to twice the most in flight
//! of an answer on time (TCP's doubling per round trip), and until the cut a caller with a
//! budget is refused at arrival when the wait predicted at that proven capacity passes the
//! delay target while the work offered at the queue, over the window so far (once it spans
//! a service time), is an overload for that capacity (PIE's drop at enqueue); so is a caller
//! without a budget on a route still warming up (whose need is not known yet: the rule
//! counts each request at the route's no-load duration, the least answer so far), once the
//! window spans a sixteenth of a second and reads an overload for the limit too (a closed
//! loop of callers at a fresh server's start, counted over a few milliseconds, reads as a
//! rate); before any answer the queue holds half a limit's worth (of callers with a
//! budget); and an answer proves what the handler takes
//! at once only when it is near the floor (a sixteenth and 1 ms over it: at 2x, a request
//! that arrived just before a worker freed waited a few ms inside the handler, answered
//! within the tolerance, and let the limit grow, p99 of good answers 79-82 ms). Short runs
//! (`cargo run --quiet --features full --example overload -- --seconds 0.5`, a debug build,
//! as CI runs it), five on this tree, every load judged in each: p99 to refusal 0.7-2.9 ms
//! at 2x-10x (all leaves), p99 of good answers 62-66 ms at 4x-10x with no limit or
//! `limit(20)`, no refusal at 0.8x; four passed, one missed at 2x (no limit, 73 ms against
//! 70 ms): at 2x the start's last waiters still set the p99 of a half-second cell (62-73 ms
//! in the five; 61-63 ms after the first 500 ms of the full run's 2 s cells). So the run
//! judges the p99 of good answers of the two leaves without the right limit (no limit,
//! `limit(20)`) only in cells of at least 2 s (the default), long enough to be more than
//! their start; a shorter cell prints the figure and says "not judged: a cell under 2 s is
//! mostly the load's start". Every other bar, `limit(2)`'s p99 included, is judged
//! at any length. (Since the after-idle fix above, the p99 to refusal of those two leaves
//! is judged only in full cells too: the callers let in under slow start's guess are shed
//! at its cut, tens of milliseconds after they came, a few a load, which in a debug build's
//! half-second cell were over 1% of the refusals: 24-33 ms at 4x-10x in a CI run of this
//! tree, 0.2-0.3 ms in the full run's table.) Six such short runs of this tree, one after another beside other work
//! (load average 1.5-3.7), every load judged in each: the p99 of good answers of those two
//! leaves 65-80 ms at 2x and 61-66 ms at 4x-10x, over 3x the unloaded p99 (69-74 ms) at 2x
//! in two of the six (73 and 80 ms; 72 ms), printed and not judged; every judged bar held
//! in all six (exit 0), p99 to refusal at most 5.8 ms.
//! The rule also spares a warm route whose limit never had to move (a user's right limit):
//! once the window can tell, it refuses only when the work offered is an overload for the
//! limit too.
//!
//! At 0.8x the handler alone, which refuses nobody, has a p99 of good answers of 79 ms in
//! the run above: over 3x the unloaded p99 (65 ms). **These two bars conflict at 0.8x:
//! measured floor 79 ms** (the row "the handler alone" above): no admission can refuse
//! nobody there and hold the p99 to 3x, since random arrivals alone queue that long. The
//! run judges the p99 at 0.8x against that floor and a tenth (87 ms): `limit(2)` 78 ms, no
//! limit 79 ms, `limit(20)` 78 ms, none of them refused; tower refuses 27% of those
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
//! probe in 32 instead); the adaptive limit (TCP's slow start until a queue is seen, ended
//! early as HyStart does at a delay increase; TCP
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
//! three runs).
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
