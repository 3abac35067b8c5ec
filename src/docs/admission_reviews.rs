//! Admission's reviews: each failure mode that the hostile reviews (and a new user's trial)
//! found, with its figures before and after the fix and the test that shows it, the rules
//! tried and withdrawn, and the known limits kept as ignored tests with their figures. The
//! overload run, the permit's return and the admitted path's cost are
//! [`admission`](super::admission)'s.
//!
//! Each over sockets in `tests/admission_review.rs` (and the estimate's unit tests). The
//! admission tests run their heavy scenarios one at a time per test binary, and a review
//! test whose verdict needs the machine to keep time (the delay-based limit reads a process
//! short of CPU as queueing) is judged only on an attempt during which the runtime's timers
//! were at most 5 ms late at p99 (`tests/support/timekeeping.rs`: at most 3 attempts, a
//! fresh layer each; inconclusive, said and not failed, when none was; no bar loosened).
//!
//! | shape | before | after |
//! |---|---|---|
//! | standing queue: 2 workers × 20 ms, 200 ms callers, 3.5-4x | p99 of good answers 196-199.8 ms, 20-56% waited out their budget | 51 ms, 0% (table above) |
//! | refusals from the queue | at 90-96 ms of a 100 ms budget | p99 0.2-1.4 ms from arrival (table above) |
//! | a 300 ms first answer on a 1 ms route | the need fell 0.5% an answer | under 10 ms within 8 answers (`a_slow_start_is_forgotten_in_a_few_answers`) |
//! | 16 hang-ups at 3 ms on a 60 ms route | warm at 3.2-3.5 ms | cold, counted in `admitted_cold` (`hang_ups_teach_nothing`) |
//! | 1,000 distinct paths in a warm route's slot | one 404 erased the route's estimate | still warm (`a_thousand_distinct_paths_never_make_a_warm_route_cold`) |
//! | a 300 ms route, 100 ms callers | 80% of its capacity on doomed work | at most the warm-up's 16 and a probe in 32 of 80 started (`a_route_no_caller_can_wait_for_is_learned_from_its_timeouts`) |
//! | a proxy clock 1.5 s behind, 1 s callers | 50 of 50 failed | at most the cap's fifth (`a_proxy_clock_behind_fails_at_most_the_caps_share`) |
//! | `count_only` with a queue-start header | deadlines shortened | none (`count_only_shortens_no_deadline`) |
//! | refusal against timeout | both 503 | a refusal has `retry-after: 0` (gRPC 14, Connect `unavailable`); a timeout none (gRPC 4) |
//! | a waiter timed out in the queue | counted as `shed_waiting` and `left_queue` | `left_queue` only (`a_waiter_that_times_out_is_counted_once`) |
//! | two clients that take the head of a 4 MiB streamed body and never read it, `limit(2)`, HTTP/2 (HTTP/1.1: 32 MiB) | every permit held: honest callers of the idle handler refused or waiting (tower's permit goes back at the head) | 3 of 3 answered 200 (`two_clients_that_never_read_their_bodies_shut_the_route`, `two_http1_clients_that_never_read_their_bodies_leave_the_route_open`, `tests/s8_45_review.rs`): each stalled body gives its permit back once (below) |
//! | a route that got faster (600 ms to 1 ms), 400 ms callers | refused until the cap's spared requests taught it | refused until the first probe (at most 31), then admitted (`a_route_that_got_faster_is_relearned_from_probes`) |
//!
//! A bimodal route (one answer in 7 takes 300 ms, the rest 5 ms) under callers with 100 ms
//! (`a_bimodal_route_is_reported`): 120 of 140 answered in time, 0 refused, the 20 slow ones
//! timed out. Admission cannot tell in advance which request will be slow: it admits the
//! route (six in seven callers are served) and spends the slow seventh's 100 ms each.
//!
//! A second review, each in `tests/issue45_review.rs` (in process unless said):
//!
//! | shape | before | after |
//! |---|---|---|
//! | a burst of 40 callers without a budget on a fresh server, a 100 ms handler nothing overloads | 32 of 40 refused (limit 4, a queue of a limit's worth) | none: a caller without a budget is refused for a full queue only once the limit has seen a queue |
//! | a route alternating 2 ms and 60 ms answers, 8 callers without a budget | the limit fell toward 1 (each slow answer read as queueing), callers refused | none refused: queueing is read from the least of the recent answers (a queue delays every answer), not from one slow answer |
//! | `count_only(true)`, 16 callers at once | at most 4 ran at once, the 13th on refused | all 16 at once, none refused: count-only has no limit and no queue |
//! | a gRPC call whose budget is spent on arrival | `grpc-status` 14 with `retry-after: 0` | 4 (DEADLINE_EXCEEDED), no `retry-after`: answered as a timeout |
//! | a proxy clock 960 ms behind, 1 s callers, a 50 ms route | every request refused on the estimate, uncapped | at most the cap's fifth: every refusal the header causes spends the cap's credit |
//! | 200 routes, each answered twice (`warm_up(2)`) | at most 64 warm (6 bits of the hash used) | more than 100: 256 slots, and two slots per route (the second when the first is held) |
//! | a 300 ms route sharing a busy route's slot, 100 ms callers | never judged: every call ran to its deadline | warm in its second slot, refused after its warm-up |
//! | a 1 ms route that slows to 300 ms, 100 ms callers | about 100 timeouts before the first refusal | refused from the second timeout in a row on (the need raised to the bound) |
//! | the overload example's verdict | only `limit(2)` against tower, within 0.05 | every bar of every admission leaf, at a load judged (the p99 of good answers of the two leaves without the right limit in cells of at least 2 s) |
//! | a streaming route under `limit(1)` | three bodies streamed at once (the permit back at the head) | one: the permit is held by the response's body until it ends |
//!
//! A third review, each in `tests/s6_45_review.rs` (in process):
//!
//! | shape | before | after |
//! |---|---|---|
//! | a cold route (2 answers: 200 ms, 1 ms), 8 callers at once with an hour's budget | refused at once by the warm-up bound | none: a cold route's queue is bounded by its length and the caller's budget |
//! | one 100 ms answer, then a burst of 40 callers without a budget | callers past the limit refused by the warm-up bound | none |
//! | 10 answers at 300 ms then 1 ms, `limit(4)`, 8 callers with 1 s budgets | a few refused by the delay bound (need still coming down, timer noise) | none: the delay bound bounds a caller with a budget only once the limit has seen a queue and if the budget is under ten times the route's need |
//! | a route warm at 200 ms that speeds up to 1 ms, `limit(4)`, 1 s callers | 9-14 of 200 refused (over 1%) | at most 2: the delay bound is paced by the route's pace, down at once |
//! | a route that got slower (0 to 20 ms), no limit, 8 callers without a budget | the limit held at 1 for good | it grows again: an answer that ran alone sets the no-load duration, up as well as down |
//! | 0.8x load on a 2-worker handler, no limit, 200 ms callers | 7 of 320 refused; later 3-7 | none refused, at most 2% timed out: a burst (the offered work under 1.25 times what the limit serves) is held to the budget |
//!
//! A fourth review, of the probe and the burst rule, each in `tests/s7_45_review.rs` (in
//! process, HTTP/2 over loopback for the resets):
//!
//! | shape | before | after |
//! |---|---|---|
//! | a handler that goes from 2 to 8 workers, no limit, 0.75x of the new capacity, 200 ms callers | 182-189 of 600 refused 1-3 s after the change (the probe up backed off to 64 windows: over 5 s) | none (the probe up waits at most 300 ms, its step doubles while answers stay on time) |
//! | a bimodal route (5 ms, one in 7 at 300 ms) whose handler is freed after the limit settled at 2, 24 callers | limit 2 for 5 s, 181 answers against about 2,553 with no limit | the limit reaches 34, 2,348-2,365 answers (an answer counts at most a service time past its tolerance) |
//! | `limit(2)`, a 10 ms route, 1.05x, callers with an hour's budget | p99 of good answers 197 ms (a standing queue read as a burst) | 43-52 ms (a queue that stands over CoDel's interval at an offered load of 1-1.25x is an overload) |
//! | `limit(2)`, a warm 10 ms route idle 2.5 s, then 60 callers at once with 1 s budgets | 26 refused (a burst cut at 16 limits' worth) | none (a burst is held by the budget) |
//! | 120 reset HTTP/2 streams on a route still warming up, then 10 honest callers with 1 s budgets 150 ms later | 6 refused | none: the offered work's window restarts after a spell (100 ms, or twice the asking request's need when longer: CoDel's interval) in which no request found every permit taken, at the last one that did (the flood's refused requests still count while it lasts: counting only admitted work let a 10x overload read as a burst) |
//! | a fresh server, no limit, a handler that takes 2 at a time, 6x from the first request, 200 ms callers | 3 of 200 refusals 20-33 ms after arrival (the waiters of slow start's first service time, refused at its cut) | none: refused at arrival (slow start's overload rule above) |
//! | a 2 ms route beside a route whose handler takes 2 at a time at 3x, no limit | 150 of 400 refused | 86-263 refused: one limit and one queue per layer; not fixed (give such a route a layer of its own) |
//!
//! A fifth review, each in `tests/s8_45_review.rs` (in process, HTTP/2 over loopback):
//!
//! | shape | before | after |
//! |---|---|---|
//! | a proxy clock 0.9 s behind, `limit(1)`, a 20 ms route warmed by 16 honest answers, then 20 callers at once with 1 s budgets | 16 of 20 failed: a header that shortens a budget but does not spend it went uncapped, and the queue refused by its predicted wait | 7-8 of 20: the cap's share (7 of the window's 36), and now and then one more, a waiter the header was believed for shed from the queue (ignored, a known limit): the header dooms a request when what it leaves is below the need and the queue's predicted wait, and is believed within the cap only |
//! | a fresh server, no limit, a handler that takes 2 at a time (50 ms), 300 callers without a budget at 320/s (8x) | p99 of good answers 1,092-1,135 ms: until the route was warm (16 answers) a caller without a budget met no bound | 455-516 ms (3 runs; the review's bar 750 ms, must hold 2's 150 ms not met): slow start's refusal at arrival bounds them on a route still warming up (`a_fresh_server_flooded_by_callers_without_a_budget_builds_a_standing_queue`); 456-459 ms with the test's client fixed (below: "Before a route's first answer") |
//! | a 2-worker handler that goes from 20 ms to 100 ms, no limit, 40/s (2x after), 1 s callers | goodput 0.30-0.65 over the last 2 s: the delay rule read the new duration against the old floor as a queue in the handler and cut the limit to 1; the queue, judging by a need still climbing, stood 17 deep | 0.70-0.72 in 3 of 8 runs, over the bar (0.75) in the others: an answer that ran alone past the old floor's tolerance undoes the cuts since the last full window (as BBR keeps its rate once its min-RTT is re-learned) and restarts the offered work's window; the offered work counts a request at no less than its route's floor and pace. Not fixed: the queue still judges waits by a need that climbs a step an answer (judging them at the floor and pace too passed 4 of 4 runs but put the overload example's p99 of good answers at 2x over its bar in 5 of 8) |
//!
//! A sixth review, a new user's (`tests/s9_45_review.rs`, in process): an overload that
//! begins after a quiet spell, as a real server's does. The route of the overload run (2
//! workers × 20 ms), 200 ms callers, served 0.5 s at 0.5x, idle 1 s, then 2x for 2 s, idle
//! 1 s again, then 4x for 1.5 s.
//!
//! | shape | before | after |
//! |---|---|---|
//! | `limit(2)`, 2x then 4x, each after 1 s idle | p99 of good answers 197-199 ms (bar: 3x the unloaded p99, 66-69 ms), refusals from the queue at 178-187 ms (p99) | 43-50 ms as first merged; 62.6-64.4 ms after the seventh review's fixes (3 runs), refusals within 0.1 ms (p99), none waited out |
//! | no limit, the same | 198-199 ms, refusals at 184 ms | 62-90 ms (judged at 5x): slow start's first guess and the probe up, as on a fresh server; after the seventh review's fixes 71-73 ms at 2x and 84-94 ms at 4x (4 runs) |
//!
//! The window of the work offered counted the quiet time as measured, with nothing offered
//! in it: a 2x overload read as a burst (under 1.25 times what the limit serves) for about a
//! second, and a burst holds its callers to their budgets. A caller the delay target bounds
//! (without a budget, or one under ten times the route's need) is now judged by the busy
//! spell too: the work counted since the first request after a quiet spell of at least 0.5
//! s (at 0.8x the gaps between requests that find every permit taken are under that), each
//! request its own route's no-load duration, over the spell and one no-load duration (slow
//! start's overload rule too, over the proven capacity); the spell only adds to the
//! window's read, never hides the window's overload. While the spell is younger than 100 ms
//! (or four no-load durations), where a batch and an overload's start look alike, a spell
//! that reads an overload (1.25 times what the limit serves) bounds such a caller by twice
//! the delay target alone (a predicted wait of two no-load durations and 4 ms), not by the
//! queue's length nor slow start's refusal: a batch of three service times' worth is served
//! whole, an overload's first callers answer within three. A window restart (100 ms with
//! nothing counted: what was offered has drained) forgets the spell's work too (not its
//! time). A fresh server met by the load at once is read by the window, which begins with
//! it, as before. A caller with a generous budget is still judged by the window: a burst
//! after idle is held to its budget.
//!
//! A seventh review, hostile, of that change (`tests/s10_idle_review.rs`, in process; the
//! same route and callers unless said). The spell as first merged counted each request at
//! the asking route's no-load duration, was judged alone for two seconds, and judged its
//! first instant as any other; each row was confirmed failing on it (4 runs). The first
//! four pass on the tree before the sixth review's fix too; the last two were over their
//! bars there as well:
//!
//! | shape | as first merged (4 runs) | now (one run of the file, and loops where said) |
//! |---|---|---|
//! | `limit(2)`, batches of 6 at once every 0.6 s (0.1x; each batch a new spell) | 19-20 of 60 refused: the spell read its own batch as 1.5x at its third waiter | 0 refused, p99 of good answers 65 ms (no limit: 0, 63 ms) |
//! | the same, batches 0.4 s apart | refused in every batch after the first | 0 refused, 65 ms |
//! | `limit(2)`, 300 callers with 30 ms budgets after idle (298 refused), then random arrivals at 0.7x 250 ms later | 4-8 of 105 refused: the flood stayed in the spell | 0 of 105 (seeds 2, 3, 7, 9) |
//! | a slow start (10 answers of 300 ms, then 1 ms), then bursts of 20 every 100 ms, 1 s callers, no limit / `limit(4)` | 5 / 11 of 400 refused: each request counted at the 300 ms floor | 0 / 0 |
//! | `limit(2)`, 2x after idle, one answer in 5 a cache hit (the route's no-load duration near 0) | p99 of good answers 159-166 ms in each second: the window's later overload read ignored | 163-164 ms in the first second (as before the sixth review's fix), 38-43 ms in the second (ignored, a known limit: a request is counted at its route's no-load duration, near 0 here) |
//! | random arrivals at 0.5x on the 2-worker route beside a 0 ms route at 1,000/s, `limit(2)`, after idle | 19-22 of 100 refused: each ping counted as a 20 ms call | 4-8 (ignored, a known limit: 4-6 before the sixth review's fix; one limit and one queue per layer, the pings fill it) |
//!
//! Tried on the way and measured worse: each request counted at its route's need or its
//! pace (the cache-hit row passed, but `tests/s6_45_review.rs`'s random arrivals at 0.8x
//! after a warm-up had 1-2 of 320 refused in every run: the need counts the handler's
//! queue); the young spell bounded by the queue's length (a burst of 20 on a 1 ms route
//! with `limit(4)` refused); restarting the spell, young again, at each window restart
//! (random arrivals at 0.7x after idle: 0-6 of 105 refused over 9 seeds); the young bound
//! whatever the spell reads (s6's 0.8x: 1 of 320 refused in 3 of 6 runs, a bunch of 5 in
//! the first 100 ms), or at 1.0x what the limit serves (the same, 3 of 6); the young bound
//! at 2.5 delay targets (s6 passed 6 of 6, but `limit(2)`'s p99 of good answers after idle
//! rose to 73-76 ms against 66); the young bound read at the capacity slow start has
//! proven rather than the guessed limit (no better: the ignored 4x start 112-113 ms in 2
//! runs, against 98-131 ms before). With the bound at two delay targets from a 1.25x read,
//! s6's 0.8x passed 8 of 8 and `tests/s9_45_review.rs` 3 of 3: `limit(2)` 62.6-64.4 ms at
//! 2x and 4x after idle against 66 (43-53 ms as first merged: the young spell's first
//! callers now wait up to two service times).
//!
//! ## A new user's trial of `Admission::new()` beside tower
//!
//! A scratch axum project over sockets (HTTP/1.1), `Admission::new()` beside tower's
//! `LoadShed` + `ConcurrencyLimit(2)` at 2x and 4x after a light load and 1 s idle, 6 runs
//! each: goodput 1.02-1.03 of the capacity (tower 0.87-0.98), p99 of good answers 44-65 ms
//! (43-51 ms after the first 500 ms), refusals within 3.3 ms (p99). Its finding: two
//! callers with 5 ms budgets on a cold 20 ms route, cut at their deadline, seeded the
//! route's estimate as if they were answers, and the need climbed from 5 ms a quantile step
//! an answer: 10.5-10.9 ms after the 16 answers of the warm-up (a 15 ms caller admitted and
//! cut). Now a cut seeds a lower bound only (an empty pace marks it) and the first answer
//! sets the need, the no-load duration and the pace
//! (`tests/issue45_review.rs`'s `cuts_on_a_cold_route_do_not_hold_its_need_below_its_answers`).
//! Its other points were the docs': the run's layer and tower's refusal are now stated, and
//! [`AdmissionCounts::overloaded`](crate::server::AdmissionCounts::overloaded) says it holds
//! the load's refusals (`shed` stayed 0 under load).
//!
//! ## After a quiet spell
//!
//! The change before the latest (its overload run on `88c8a8d`, exit 1: no limit and
//! `limit(20)` 71-72 ms at 2x, refusals' p99 12.8-12.9 ms at 4x; the 2x probe up fixed
//! since, the 2x start and the 4x refusals known limits: see
//! [`admission`](super::admission#the-overload-run)).
//!
//! **No limit and `limit(20)` at 4x-10x: 126-130 ms in the run before (commit `b35c414`,
//! capacity 94.5/s, unloaded p99 21.7 ms, exit 1), 54-61 ms after** (the run on
//! `88c8a8d`: 54-55 ms at 4x, 60-61 ms at 10x). After the light load before, their limit is still in slow start (a guess of 4 on a handler that takes 2, with
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
//! ## Shapes that still refuse good callers
//!
//! `tests/s13_start_review.rs` keeps 16 ignored tests. Each failed on the tree before the
//! change the review was of, too. Each figure below is from one release run of all 16 on
//! `874dadf` (the tree's current admission code), beside the review's own figures. Budgets
//! are 5x the unloaded p99 unless the shape says otherwise.
//!
//! | shape | refused (this run) | on `617018f`, the tree before (the review's runs) | when |
//! |---|---|---|---|
//! | random arrivals at 0.8x after 1 s idle, 16 workers × 20 ms, warmed by a lone caller, seed 1 | 7 of 1,280 | 6-8 | 19.6-41.5 ms into the load |
//! | the same, seed 2 | 5 of 1,280 | 5 | 19.1-26 ms in |
//! | the same, seed 1, `limit(20)` | 7 of 1,280 | 7-8 | from 19.6 ms in |
//! | random at 0.5x, 16 workers, seed 2 | 1 of 800 | 0-2 | 31.8 ms in |
//! | random at 0.8x, 3 workers (seeds 1, 2; a lone or a light warm-up) | 0-1 of 240 | 0-3 | 379 ms, 1.78 s in |
//! | a bimodal route at 0.8x, 4 workers, 5 ms with one answer in 4 at 60 ms | 8 of 341 | 8 and 37 | from 1.2 s in |
//! | 16 callers spread 1 ms apart, 200 ms budgets, 2 workers, no limit | 4 of 16 | 3-4 | 13.8-16.1 ms after the first |
//! | 16 spread 2 ms apart, the same | 2 of 16 | 2 | 28-31 ms |
//! | 12 spread 2 ms apart, 200 ms budgets, `limit(2)` | 5 of 12 | 5-6 | from 12.4 ms |
//! | 8 spread 3 ms apart, 150 ms budgets, `limit(2)` | 1 of 8 | 1-2 | 19.6 ms |
//! | 24 spread 1 ms apart, 200 ms budgets, 4 workers | 9 of 24 | 9-10 | from 13.3 ms |
//! | 24 or 32 spread 1 ms apart, 150 ms budgets, 8 workers | 10 of 24, 13 of 32 | 10, 9-13 | from 12.7 ms |
//! | capacity growing from 2 to 4 workers mid-overload | 308 good of 600 (tower on 4 workers: 347) | 306-308 | the limit 3 at the end |
//!
//! A later review, of a change since withdrawn (the trim asked again:
//! [`admission`](super::admission#the-overload-run)), found more such shapes on this
//! admission code. They are ignored tests in the same file, each with its figures:
//!
//! | shape | refused |
//! |---|---|
//! | random at 0.8x after idle, 2 workers × 20 ms, seed 2 | 6 of 160; 4-5 in a second run |
//! | the same, seed 1 | 4 of 160; 0 in a second run |
//! | random at 0.5x, 2 workers, seeds 2 and 3 | 0-2 of 100 |
//! | random at 0.65x, 2 workers, seed 3 | 6 and 1 of 130 |
//! | random at 0.5x, 32 workers | 13 and 18 of 1,600 |
//! | random at 0.8x, 32 workers | 47-48 of 2,560 |
//! | a bimodal route at 0.8x, 4 workers, 20 ms with one answer in 4 at 60 ms | 2-7 of 213 about 1.8 s in; 0 in another run |
//!
//! Since slow start's step to the demand
//! ([`admission`](super::admission#the-overload-run)), the many-worker rows refuse fewer, in
//! two interleaved release runs against the tree before: 32 workers at 0.8x 27-29 of 2,560
//! (47-49 before), at 0.5x 6-7 of 1,600 (12-24); 16 workers at 0.8x 4-5 of 1,280 (5-7),
//! at 0.5x none of 800 (0-1). The ignored tests carry these figures.
//!
//! Of the 2-worker rows, only seed 2 at 0.8x costs callers whatever admission does: with
//! its arrivals, a clairvoyant admission (each caller let in only if it finishes in time
//! behind those let in before it) refuses 1-3 of the 160 at 20.3-21.5 ms a request, and
//! serving every caller in order lets 1-11 finish past their budget; the crate refused
//! 4-6. The other 2-worker shapes lose nobody in order at 21 ms a request, so their
//! refusals are the crate's own
//! (`random_arrivals_on_2_workers_cost_an_admission_that_knew_every_finish`, arithmetic
//! on the tests' own arrivals). Traced, they come mid-load from the budget rule: at 0.8x
//! the limit settles one or two above what the handler takes (3 on 2 workers, 5 on 3),
//! answers wait inside the handler, the route's need climbs to 36-50 ms, and the wait and
//! need predicted from it over the limit come to up to about 1.5 times what the handler's
//! queue gives (110 ms against about 73 on 3 workers).
//!
//! So the overload run's 0.8x row, on 2 workers with 200 ms budgets, refuses nobody. With
//! budgets of five times the unloaded p99 (110 ms), random arrivals at 0.65x-0.8x after
//! idle on the same handler lose up to 6 of 160.
//!
//! **The first six rows (eight tests; one passed in this run) refuse good callers at 0.8x
//! or below**, callers with five times the unloaded p99 to spare.
//! - **16 workers.** The refusals all came 19-45 ms into the load, before the answers had
//!   proven the capacity. The limit is then slow start's first guess of 4, and grows only as
//!   answers come back on time (since the step to the demand, those of the second service
//!   time are fewer: what is left comes in the first two service times). The young spell's bound (a caller may wait at most two delay
//!   targets, 44 ms here, predicted at that limit) lets about 8 wait. Random arrivals at
//!   640/s bring 12-16 in the first 20 ms, so a few that come around the first and second
//!   rounds of answers find 8 waiting. A larger bound queues longer at a 2-worker handler's
//!   overload start: at 10x in 2 s cells, `limit(2)`'s p99 of good answers is that bound,
//!   62-64 ms against 66. Until the answers come, the two handlers look alike.
//! - **3 workers and the bimodal route.** These refusals come mid-load: a bunch of random
//!   arrivals reads as an overload at the settled limit.
//!
//! The batch rows are callers of a batch that fits its budgets. Refusing them is what bounds
//! an overload's start (above). The overload run itself (2 workers) refuses nobody at 0.8x
//! ([`admission`](super::admission#the-overload-run)).
//!
//! ## Earlier overload runs
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
//! settling the limit on a burst. What remained then was each probe up (since fixed: the offered work is read at the
//! limit held before a probe up, see [`admission`](super::admission#the-overload-run); a limit of 3 for one or
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
//! ## Before a route's first answer
//!
//! CI failed `a_fresh_server_flooded_by_callers_without_a_budget_builds_a_standing_queue`
//! (the fifth review's second row) once, in a debug build: p99 of good answers 1,343 ms
//! against 750, 26 callers queued, the limit cut to 1. In debug builds here it measured 450
//! ms, or 722-775 ms in 5 runs of 20. Two causes:
//!
//! - **The test's client.** Its HTTP/2 connection had Nagle's algorithm on: each request
//!   after the first waited for an ACK that Linux delays up to 40 ms, so the open loop at
//!   320/s reached the server in bunches 40-48 ms apart (15 requests within half a
//!   millisecond at 49 ms, with or without admission). HTTP clients set `TCP_NODELAY`
//!   (reqwest, tonic, grpc-go), and so do the review harness's client and server now
//!   (`tests/support/callers.rs`, `tests/support/server.rs`). With it the flood measures
//!   456-459 ms in 10 debug runs, no tail; the test runs under the harness's timer check
//!   (`tests/support/timekeeping.rs`: an attempt whose timers ran over 5 ms late at p99 is
//!   run again, at most 3 in all, and a failure counts only when they kept time), as every
//!   admission test that measures times now does.
//! - **No bound before the first answer.** A caller without a budget on a route with no
//!   answer yet meets no bound: every caller until the first answer queues. A bound was
//!   tried: such a request refused at arrival when a limit's worth waited and requests of
//!   routes with no answer had found every permit taken for 20 ms (the service time is at
//!   least that, the first of them still out). It bounded the flood (302-305 ms) and a
//!   fresh server whose first two answers take 500 ms (p99 1,054-1,058 -> 539-548 ms), and
//!   was withdrawn after a hostile review (`tests/s11_cold_review.rs`, each finding a
//!   test that failed under it and passes without it): one clock for the layer, not the
//!   burst's nor the route's, refused a second burst 30 ms after the first (16 of 16), a
//!   burst after a waiter hung up (16 of 20), a new route's first callers on a busy warm
//!   server (4 of 4), and a route that has answered but holds no slot (91-96 of 200); and a
//!   burst spread over 48 ms on a handler that takes any number was half refused (23-25 of
//!   48, `limit(64)` too). The floods are known limits, ignored with their figures
//!   (`tests/s8_45_review.rs`, `tests/s11_cold_review.rs`). Telling a flood from a burst
//!   before any answer needs the oldest request's age of the route, per route, which the
//!   layer does not keep.
//!
//! The same review found callers with an hour's budget refused on a fresh server: 2 of a
//! burst of 8 at once, 16 of 16 of a second burst 30 ms later (slow start's refusal at
//! arrival: before any answer, half a limit's worth of callers with a budget waits; ignored
//! with its figures in `tests/s11_cold_review.rs`).
//!
//! Known limits, each a test of `tests/s7_45_review.rs`, `tests/s8_45_review.rs` or
//! `tests/s9_shapes_review.rs` kept and ignored with its figures (run them with `--ignored`),
//! or measured as said:
//!
//! | shape | what happens |
//! |---|---|
//! | a proxy clock 0.9 s behind, 20 callers at once (the fifth review's first row) | one over the cap's share now and then |
//! | a burst of 2 s of work after idle, callers with 10 s budgets | 174-181 of 400 refused (392 on the tree before the probe): a burst of over 1.25 s of work reads as an overload. A trade-off kept on purpose: at its start a burst is not told from a sustained overload (CoDel refuses here too); a rule tried that let such callers wait until the queue had stood once refused 0 of 400 but put the p99 of good answers of a sustained 4x overload of 10 s callers at 239-331 ms over 3 s (36-39 ms without it), against must hold's bound on a standing queue |
//! | random arrivals at 0.8x on a fresh server, 200 ms callers | 3-47 of 248 refused as reviewed, 11-17 in 3 runs on a later tree: most by the standing rule with the limit settled at 2, the offered work counted at the route's need (21-33 ms in a debug build, on a 20 ms handler) reading 0.8x as 1.01-1.05 of what the limit serves, while random arrivals queued |
//! | fast 400s (a bad input refused by the handler at once) beside good requests at 2x of a 2-worker × 40 ms handler, no limit | goodput 0.67-0.82, limit 9-13: each fast 400 is an answer on time that proves in slow start that the handler takes as many at once, and keeps the least recent answer near 0 (no queue seen in it). A rule that let a client error (every 4xx but 408 and 429) teach nothing (Netflix `concurrency-limits`' `onIgnore`) fixed it (0.94-0.98) and was withdrawn: a route whose 4xx are its work (a 401 after a 40 ms auth call, a 404 after a database miss) then never warmed, its limit stayed at 4: 208 of 400 callers at 0.5x refused, and callers without a budget of a 404-only route at 2x waited 3.2 s at p99 (`tests/s9_shapes_review.rs`). Telling a fast error from the route's work needs the route's no-load time learned from its other answers first |
//! | fast 429s from a rate limiter inside the handler, or fast gRPC errors (HTTP 200, `grpc-status` 3), beside the same 2x route | goodput 0.68-1.02, p99 of good answers 394-440 ms: read as capacity, as fast 400s |
//! | a scanner of 400 expensive 404 paths (40 ms on the same 2-worker database, no budget) beside a real route at 2x | 5-46 of 100 real callers answered in time (their first-come share 34): each scanned path is a cold route whose callers without a budget meet no bound, and the limit is one for the layer |
//! | callers without a budget at 0.8x, random arrivals on a fresh server (2 × 20 ms or 2 × 100 ms handler), or 401s after a 40 ms call at 0.5x | 4-15 of 240, 4 of 64, 0-11 of 400 refused: slow start's refusal at arrival on a fresh server meets random arrivals |
//! | a route answering 9 in 10 with a 404 after 40 ms, 2x, 400 ms callers | p99 of answers 130-201 ms against a bar of 200 (5x the unloaded p99), goodput 0.94-0.99 |
//! | a route alternating 1 ms and 40 ms each second, 1 s callers | 17-32 of 400 refused in about one run in four: the slow phase read as a queue |
//! | a 20 -> 100 ms route at 2x (the second row of the fifth review) | goodput under the bar in 3 runs of 8 |
//! | random arrivals at 0.85x that begin after a quiet spell, 200 ms callers | in `tests/s6_45_review.rs`'s 0.8x scenario (no limit, 20 answers one at a time, then the load; 160 callers, 50 seeds), read as a busy spell from its first queued request (on the tree before a fresh server's start was left to the window): 1-2 callers refused in 5 runs of 50 (0 before the sixth review's fix; 10 of 50 with the spell judged at what the limit serves rather than 1.25 times it): arrivals bunched in the spell's first few hundred milliseconds read as the start of an overload. Must hold 2 after idle (detected within a few tens of milliseconds at 2x) and 0 refusals at 0.8x conflict there: the first tens of milliseconds of both look alike |
//! | the overload run, no limit and `limit(20)`, each overload after a quiet spell (the table above) | p99 of good answers 71-72 ms at 2x against 66 ms (69-71 ms after the first 500 ms: the settled limit's probe up on a handler that takes 2); refusals' p99 12.8-12.9 ms at 4x against 10 ms (the waiters let in under slow start's guess, shed at its cut); 54-61 ms at 4x-10x (126-130 ms before the fix above) |
//! | the overload run's 0.8x cells after a quiet spell (a run of the example with every cell so started, on commit `90f679d`) | `limit(2)` refused 1% in the full run (0.7% in its verdict's figure) and 2.8% in the `--seconds 0.5` run (one caller of about 37 a cell: its fixed seed's first arrivals bunched); no limit and `limit(20)` none. The first row of this list; so the example's 0.8x cells start a fresh server, as before |
//! | an overload after a quiet spell of 0.1-0.5 s | judged by the window as before: the quiet time counted, the queue held to the budget for about as long as the quiet spell |
//! | an overload after idle, callers with budgets of ten times the route's need or more | held to their budgets by the burst rule until the window reads the overload (up to a second) |
//! | 120 reset HTTP/2 streams, then 10 honest callers 150 ms later (fourth review) | 1 of 10 refused in one run of 10-20 with the timers on time: the restarted window begins at the flood's last request, and a spell under about 175 ms still reads as an overload |
//! | a client reading 64 KiB every 50 ms over HTTP/1.1 with the kernel's default loopback buffers (not a test: measured beside `tests/s9_body_review.rs`) | hyper polls its body 1.1 s apart: it loses its permit after 300-500 ms and streams on uncounted (see "When the permit comes back") |
//! | an event stream idle between events for over 300-500 ms | its permit goes back; its later events are sent uncounted |
//!
//! A bimodal route's lone timeout (one answer in 7 at 300 ms) still moves the need a step
//! only: the need is raised to a timeout's bound only when the answer before it was as slow.
//! A route stays cold (admitted unjudged, counted in `admitted_cold`) only while both of its
//! slots are held by routes answered between each of its answers.
