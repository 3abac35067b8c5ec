//! The in-flight limit: permits taken without a lock while nobody waits; waiters kept in
//! deadline order (earliest first) and handed each released permit, the doomed among them
//! shed (within the cap) or served after a waiter behind them that can still finish in time.
//! The protocol, and why no permit is lost and no waiter forgotten:
//!
//! * a request takes a permit lock-free (`in_flight` below the limit) only when nobody is queued (`queued`
//!   is 0), so a waiter is never overtaken by a newcomer;
//! * a waiter, under the queue's lock, enters the queue, counts itself in `queued`, then
//!   dispatches (takes a permit if one is free);
//! * a release returns its permit (`in_flight` down), then dispatches under the lock if
//!   `queued` is not 0.
//!
//! Both sides write their counter, then read the other's, with a `SeqCst` fence between
//! (the store-buffering pattern): at least one of them sees the other, so a permit released
//! while a waiter enters the queue is dispatched by one of the two. `SeqCst` on the accesses
//! alone would be enough in the C++ memory model, but loom checks the pattern only with the
//! fences (it treats `SeqCst` accesses as `AcqRel`, a documented limit: without the fences its
//! model reports the stranded waiter), and the fence costs one instruction on a release, on
//! the limited path only. The loom world's negative control is `Limiter::broken` (a release that
//! reads `queued` before it returns the permit: the waiter can be left waiting with the permit
//! free); the models that drive both are in `loom-tests/tests/admission.rs` (built with
//! `--cfg shared_headers_loom`, the only build where this module is `pub`).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::sync::{AtomicBool, AtomicUsize, Mutex, Ordering, fence};

/// Waiting in the queue.
pub const WAITING: usize = 0;
/// A permit was handed to the waiter.
pub const GRANTED: usize = 1;
/// Shed: its deadline cannot be met; answer it now.
pub const SHED: usize = 2;
/// The waiter's future is gone.
pub const GONE: usize = 4;
/// Its deadline passed while it waited: out of the queue, uncounted; the deadline's timer
/// answers it (a timeout, once).
pub const EXPIRED: usize = 8;

/// How many waiters past a spared one dispatch looks at for one that can finish in time.
pub const LOOK_AHEAD: usize = 16;

/// The longest answer taken as free of queueing, in nanoseconds, for a route whose
/// no-load duration is `floor`: a quarter as long again, and 2 ms of scheduling noise (the
/// delay target, as CoDel's). A quarter, not a half: a handler that takes `c` at a time,
/// given `c + 1`, delays the answers by about `1 / c` of the floor on average; a half let a
/// limit of 3 or 4 stand on a handler that takes 2.
pub fn tolerated(floor: u64) -> u64 {
    floor + floor / 4 + 2_000_000
}

/// What an answer tells the limit and the route's floor ([`Limiter::lesson`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lesson {
    /// It ran alone: its duration is the route's no-load duration (the floor follows it,
    /// up as well as down: a route that got slower is followed), and the limit may grow
    /// from it when binding ([`Limiter::adapt`]).
    Alone,
    /// The limit held nothing back and the answer was not slow: the floor may drift up.
    Calm,
    /// The limit is binding, or the answer was slow: [`Limiter::adapt`].
    Limit,
}

/// The answers of a probe's window at a limit of `limit` permits: twice the limit, at
/// least 8 (the mean of fewer is noise).
fn window_len(limit: usize) -> u64 {
    (2 * limit as u64).max(8)
}

/// A probe's step from a limit: an eighth of it, at least one permit (a step of one permit
/// on a large limit changes the throughput by less than the windows' noise).
fn step(limit: usize) -> usize {
    (limit / 8).max(1)
}

/// The delayed answers, each with more in flight than any answer on time, that end slow
/// start ([`Limiter::slow_start`]).
const SLOW_START_DELAYED: u32 = 2;

/// The most windows between two probes up that found nothing (the backoff doubles from 16).
const MAX_BACKOFF: u32 = 64;

/// The longest wait for a probe up, whatever the windows left: a handler whose capacity
/// grew is found within this (a failed probe up costs one or two answers delayed by at
/// most a service time: a few a second).
const MAX_UP_WAIT: Duration = Duration::from_millis(300);

/// The settled limit's probe: a hill climb on throughput, preferring the lower limit. Each
/// window of binding answers (the limit held, every permit in use: the throughput is the
/// limit over the mean answer, Little's law) ends with one of:
///
/// * **a hold** at the limit: its mean is recorded; when the answers were slower on average
///   than their routes' tolerance (a queue somewhere, or a route that varies), the next
///   window probes a step down; else, when the probe up's backoff has run out, a step up;
/// * **a probe down judged**: the lower limit is kept if it served at least 15/16 as many
///   (the handler takes no more at once: the higher limit only queued inside it), else
///   back up, and no probe down for a backoff;
/// * **a probe up judged**: the higher limit is kept if it served at least 17/16 as many
///   (and the next window probes up again), else back down and the next probe up waits
///   twice as long (16 to [`MAX_BACKOFF`] windows). A probe up from a window whose answers
///   were on time ends at its first delayed answer ([`Limiter::adapt`]'s caller holds the
///   lock): the higher limit queued, and only the answers already let in pay for it.
///
/// A handler that takes 2 at a time settles at 2: a limit of 3 serves no more than 2 and
/// delays half the answers by a service time; one that takes any number keeps growing.
#[derive(Debug, Default)]
struct Probe {
    /// The limit the window measures (permits; 0: none yet).
    at: usize,
    /// The window's answers, the sum of their durations and of their tolerances (ns).
    n: u64,
    took: u64,
    tolerated: u64,
    /// The probe under way: the limit held before it, its window's mean (ns), the limit
    /// probed, and whether the held window's answers were on time (within their tolerance
    /// on average).
    from: Option<(usize, u64, usize, bool)>,
    /// Hold windows before the next probe up, and the backoff it restarts from.
    up_wait: u32,
    up_backoff: u32,
    /// Hold windows before the next probe down, and its backoff.
    down_wait: u32,
    down_backoff: u32,
    /// When the probe up's wait began (a failed probe up, or a probe down kept): past
    /// [`MAX_UP_WAIT`] the next probe up comes whatever the windows left (a window of a
    /// small limit is long: counted in windows alone the backoff ran to seconds).
    up_held: Option<Instant>,
    /// Probes up in a row that served more with answers on time: the next step doubles
    /// per such probe (at most to the limit: doubling it), as slow start's growth, so that
    /// a route freed of its bottleneck finds its new capacity in a few windows.
    run: u32,
    /// Slow start's exit ([`Limiter::slow_start`]): the most requests in flight (at its
    /// permit) of an answer on time, and the delayed answers since with more in flight.
    fast_load: usize,
    delayed: u32,
    /// Whether a caller was refused at arrival in slow start for an overload
    /// ([`Limiter::rushed`]): the queue it would have joined counts as waiting.
    rushed: bool,
}

impl Probe {
    /// A new window at `limit`; a probe whose limit is not `limit` (moved by another rule)
    /// failed.
    fn restart(&mut self, limit: usize) {
        if let Some((held, _, probed, _)) = self.from {
            if probed != limit {
                self.from = None;
                self.failed(probed > held);
            }
        }
        self.at = limit;
        self.n = 0;
        self.took = 0;
        self.tolerated = 0;
    }

    fn failed(&mut self, up: bool) {
        if up {
            self.up_held = Some(Instant::now());
            self.run = 0;
        }
        let (wait, backoff) = if up {
            (&mut self.up_wait, &mut self.up_backoff)
        } else {
            (&mut self.down_wait, &mut self.down_backoff)
        };
        *backoff = (*backoff * 2).clamp(16, MAX_BACKOFF);
        *wait = *backoff;
    }

    /// A full window at `limit` (at most `ceiling`): the limit for the next one.
    fn closed(&mut self, limit: usize, ceiling: usize) -> usize {
        let mean = (self.took / self.n.max(1)).max(1);
        if let Some((held, held_mean, _, _)) = self.from.take() {
            // Throughput here ÷ throughput held, in 1/16: (limit / mean) ÷ (held / held_mean).
            let ratio = (16 * limit as u128 * u128::from(held_mean))
                / (held as u128 * u128::from(mean)).max(1);
            if limit > held {
                if ratio < 17 {
                    self.failed(true);
                    return held;
                }
                // It served more: on up (this window is the new limit's hold), the step
                // doubling while the answers stay on time.
                self.up_backoff = 0;
                self.run = if self.took <= self.tolerated {
                    (self.run + 1).min(16)
                } else {
                    0
                };
                if limit < ceiling {
                    let stride = step(limit).saturating_mul(1 << self.run).min(limit);
                    let probed = (limit + stride).min(ceiling);
                    self.from = Some((limit, mean, probed, self.took <= self.tolerated));
                    return probed;
                }
                return limit;
            }
            if ratio < 15 {
                self.failed(false);
                return held;
            }
            // As many at the lower limit: kept (this window is its hold); no probe up soon.
            self.down_backoff = 0;
            self.up_wait = self.up_wait.max(16);
            self.up_held = Some(Instant::now());
            self.run = 0;
        }
        let slow = self.took > self.tolerated;
        if slow && limit > 1 && self.down_wait == 0 {
            let probed = limit - step(limit);
            self.from = Some((limit, mean, probed, false));
            return probed;
        }
        let waited = self.up_wait == 0
            || self
                .up_held
                .is_some_and(|held| held.elapsed() >= MAX_UP_WAIT);
        if waited && limit < ceiling {
            self.up_wait = 0;
            self.up_held = None;
            let probed = (limit + step(limit)).min(ceiling);
            self.from = Some((limit, mean, probed, !slow));
            return probed;
        }
        self.up_wait = self.up_wait.saturating_sub(1);
        self.down_wait = self.down_wait.saturating_sub(1);
        limit
    }
}

/// What dispatch does with the earliest waiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Give it a permit.
    Grant,
    /// Shed it (state [`SHED`]).
    Shed,
    /// Its deadline passed: out of the queue (state [`EXPIRED`]), answered by its timer.
    Expire,
    /// Doomed but spared (the cap, or counted once already): the permit goes to the first
    /// of the next [`LOOK_AHEAD`] waiters that gets [`Grant`](Verdict::Grant), else to the
    /// first spared one. Never left waiting with a permit free.
    Spare,
}

/// One queued request.
#[derive(Debug)]
pub struct Waiter {
    state: AtomicUsize,
    waker: Mutex<Option<Waker>>,
    key: (u64, u64),
    /// When its caller stops waiting (`None`: no deadline, served after every deadline).
    pub deadline: Option<Instant>,
    /// Already counted as doomed (at arrival or by an earlier dispatch): counted once.
    pub counted: AtomicBool,
    /// Its route's hash.
    pub route: u64,
    /// When it entered the queue (its sojourn, at its grant: [`Sojourn`]).
    since: Instant,
}

impl Waiter {
    /// The waiter's state.
    pub fn state(&self) -> usize {
        self.state.load(Ordering::SeqCst)
    }

    fn set(&self, state: usize) {
        self.state.store(state, Ordering::SeqCst);
        let waker = self.waker.lock().take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// The state once it is decided (not [`WAITING`]); else registers `cx`'s waker and looks
    /// again.
    pub fn poll(&self, cx: &mut Context<'_>) -> Poll<usize> {
        let decided = |s: usize| s != WAITING;
        let state = self.state();
        if decided(state) {
            return Poll::Ready(state);
        }
        {
            let mut slot = self.waker.lock();
            match &*slot {
                Some(current) if current.will_wake(cx.waker()) => {}
                _ => *slot = Some(cx.waker().clone()),
            }
        }
        let state = self.state();
        if decided(state) {
            Poll::Ready(state)
        } else {
            Poll::Pending
        }
    }
}

#[derive(Debug, Default)]
struct Queue {
    waiters: BTreeMap<(u64, u64), Arc<Waiter>>,
    seq: u64,
    offered: Offered,
    sojourn: Sojourn,
}

/// The least wait of the waiters granted a permit, over two halves of [`SOJOURN_HALF`]:
/// a queue whose least wait stays above a target for the whole window stands (CoDel's
/// test: a good queue drains within an interval), whatever the work offered says.
#[derive(Debug)]
struct Sojourn {
    /// When the current half started.
    since: Instant,
    /// The least wait of the current half and of the half before (ns; `u64::MAX`: no
    /// grant in it).
    cur: u64,
    prev: u64,
}

impl Default for Sojourn {
    fn default() -> Sojourn {
        Sojourn {
            since: Instant::now(),
            cur: u64::MAX,
            prev: u64::MAX,
        }
    }
}

impl Sojourn {
    /// Moves the halves on to `now`.
    fn roll(&mut self, now: Instant) {
        if now >= self.since + SOJOURN_HALF {
            let one = now < self.since + 2 * SOJOURN_HALF;
            self.prev = if one { self.cur } else { u64::MAX };
            self.cur = u64::MAX;
            self.since = if one { self.since + SOJOURN_HALF } else { now };
        }
    }
}

/// A half of the sojourn's window (CoDel's interval, 100 ms, in two halves).
pub const SOJOURN_HALF: Duration = Duration::from_millis(50);

/// The work offered at the queue (requests that found every permit taken, each its route's
/// need; one of a cold route counts as the need of the request asking) in a sliding window
/// of two halves of [`OFFERED_HALF`]: what tells a burst (the work offered below what the
/// limit serves: the queue drains) from an overload (above it: the queue stands).
#[derive(Debug)]
struct Offered {
    /// When the current half started (the first at the limiter's making).
    since: Instant,
    /// The work of the current half and of the half before, in nanoseconds.
    cur: u64,
    prev: u64,
    /// The requests of cold routes in the current half and in the half before.
    cur_cold: u64,
    prev_cold: u64,
    /// Whether the half before was measured (the window spans it).
    spans: bool,
    /// When a request was last counted (`None`: never).
    last: Option<Instant>,
}

impl Default for Offered {
    fn default() -> Offered {
        Offered {
            since: Instant::now(),
            cur: 0,
            prev: 0,
            cur_cold: 0,
            prev_cold: 0,
            spans: false,
            last: None,
        }
    }
}

/// The least time with no request counted in the offered work (every one found a permit
/// free: the queue empty all along) after which the window restarts at the last one counted
/// (CoDel's interval; or twice the asking request's need when longer: an overload of a slow
/// route finds the permits taken about once a need over the limit).
pub const OFFERED_IDLE: Duration = Duration::from_millis(100);

/// The offered load (in 1/256 of what the limit serves) under which the queue is read as
/// a burst: 1.25, as the route's need (a high quantile of its answers) overstates the mean
/// work of a request by a quarter or so.
pub const BURST_LOAD: u64 = 320;

/// What [`Limiter::offered`] tells, in 1/256 of what is served.
#[derive(Debug, Clone, Copy)]
pub struct Offer {
    /// The work offered at the queue over what the limit serves (`None`: too young).
    pub load: Option<u64>,
    /// The same over what slow start's proven permits serve (`None`: not asked, or the
    /// window spans less than one service time).
    pub early: Option<u64>,
}

/// A half of the offered work's window.
pub const OFFERED_HALF: Duration = Duration::from_millis(1000);

/// The in-flight limit and its deadline-ordered queue.
#[derive(Debug)]
pub struct Limiter {
    /// Requests holding a permit.
    in_flight: AtomicUsize,
    /// The limit now, in 1/256 of a permit (at least one permit, at most `ceiling`): moved
    /// by [`Limiter::adapt`] (loads and stores: a racing update is lost, as a step of the
    /// estimate is; any value is a valid limit).
    limit: AtomicUsize,
    /// The most permits: the user's limit.
    ceiling: usize,
    /// Whether the limit ever decreased (a queue seen): until then the limit grows by a
    /// permit an answer (TCP's slow start), after it by a permit a limit's worth of answers.
    settled: AtomicBool,
    queued: AtomicUsize,
    queue: Mutex<Queue>,
    /// The probe of the settled limit ([`Probe`]): under its own lock, taken by binding
    /// answers with `try_lock` (an answer that finds it held is not counted, as a lost step
    /// of the estimate): no atomic word of its own.
    probe: Mutex<Probe>,
    /// The negative control of the loom model: read `queued` before returning the permit.
    #[cfg(shared_headers_loom)]
    broken: bool,
}

impl Limiter {
    /// A limit of `permits` requests in flight (at first; [`Limiter::adapt`] moves it
    /// between 1 and `permits`).
    pub fn new(permits: usize) -> Limiter {
        let permits = permits.clamp(1, usize::MAX >> 9);
        Limiter {
            in_flight: AtomicUsize::new(0),
            limit: AtomicUsize::new(permits << 8),
            ceiling: permits,
            settled: AtomicBool::new(false),
            queued: AtomicUsize::new(0),
            queue: Mutex::new(Queue::default()),
            probe: Mutex::new(Probe::default()),
            #[cfg(shared_headers_loom)]
            broken: false,
        }
    }

    /// A limit that starts at `start` permits and adapts up to `ceiling`.
    pub fn starting_at(ceiling: usize, start: usize) -> Limiter {
        let limiter = Limiter::new(ceiling);
        limiter
            .limit
            .store(start.clamp(1, limiter.ceiling) << 8, Ordering::Relaxed);
        limiter
    }

    /// The negative control (loom only).
    #[cfg(shared_headers_loom)]
    pub fn broken(permits: usize) -> Limiter {
        Limiter {
            broken: true,
            ..Limiter::new(permits)
        }
    }

    /// Permits free now, and requests queued now (for the handle).
    pub fn counts(&self) -> (usize, usize) {
        (
            self.limit()
                .saturating_sub(self.in_flight.load(Ordering::Relaxed)),
            self.queued.load(Ordering::Relaxed),
        )
    }

    /// The limit now, in permits (at least 1).
    #[inline]
    pub fn limit(&self) -> usize {
        self.limit.load(Ordering::Relaxed) >> 8
    }

    fn take(&self) -> bool {
        self.take_load() != 0
    }

    /// A permit if one is free: the requests in flight with it (0: none taken).
    #[inline]
    fn take_load(&self) -> usize {
        let limit = self.limit();
        match self
            .in_flight
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < limit).then_some(n + 1)
            }) {
            Ok(n) => n + 1,
            Err(_) => 0,
        }
    }

    /// One answer of `took` nanoseconds on a route whose no-load duration is `floor` (0:
    /// unknown), `low` the least of the route's recent answers (this one's window and the
    /// one before, [`Slot::low`](super::estimate::Slot::low)), `load` the requests in flight
    /// when it took its permit, itself included (a waiter: every permit taken): the limit
    /// follows.
    ///
    /// * **A queue in the handler** (past the permits, where admission cannot see) delays
    ///   every answer, so it shows as the recent minimum well above the floor (a delay-based
    ///   limit, as TCP Vegas and Netflix's `concurrency-limits` `VegasLimit`, on the recent
    ///   minimum as Vegas's and BBR's min-RTT); a route whose answers merely vary keeps fast
    ///   answers in every window and is never read as queueing. The limit then moves an
    ///   eighth of the way to what Little's law says keeps the answers within the tolerance
    ///   (in flight × tolerated ÷ low), at most halving.
    /// * **Slow start**: until that first decrease, an answer near the floor of a request
    ///   that took its permit with the limit binding grows it by a permit (TCP's slow start).
    /// * **Settled, the limit probes** ([`Probe`]): a limit one above what the handler takes
    ///   at once delays only some answers (the recent minimum cannot see it), so once
    ///   settled the limit moves only by comparing the throughput of windows of binding
    ///   answers at two neighbouring limits (a gradient, as Gradient2's and BBR's probing):
    ///   down while the lower limit serves as many, up only when the higher one serves more.
    #[cold]
    #[inline(never)]
    ///
    /// Returns whether slow start ended with a cut ([`Limiter::slow_start`]): the caller
    /// then trims the queue ([`Limiter::trim`]).
    pub fn adapt(&self, took: u64, floor: u64, low: u64, load: usize) -> bool {
        if floor == 0 {
            return false;
        }
        let tolerated = tolerated(floor);
        let settled = self.settled.load(Ordering::Relaxed);
        let mut most = self.ceiling;
        if !settled {
            match self.slow_start(took, floor, tolerated, load) {
                None => return true,
                Some(cap) => most = cap,
            }
        }
        self.follow(took, floor, low, load, settled, most);
        false
    }

    /// [`Limiter::adapt`] past slow start's exit; slow start's growth stops at `most`
    /// permits.
    fn follow(&self, took: u64, floor: u64, low: u64, load: usize, settled: bool, most: usize) {
        let tolerated = tolerated(floor);
        let limit = self.limit.load(Ordering::Relaxed);
        let next = if low > tolerated {
            let in_flight = self.in_flight.load(Ordering::Relaxed).max(1) as u64;
            let target = ((in_flight * tolerated) << 8) / low.max(1);
            let target = (target as usize).max(limit / 2);
            if !self.settled.load(Ordering::Relaxed) {
                self.settled.store(true, Ordering::Relaxed);
            }
            if target >= limit {
                return;
            }
            limit - (limit - target) / 8 - 1
        } else if load + 1 < limit >> 8 {
            // Not binding when it took its permit: it says nothing of the limit.
            return;
        } else if settled {
            self.window(took, tolerated, floor);
            return;
        } else if took <= floor + floor / 4 + 1_000_000 && limit < most << 8 {
            limit + 256
        } else {
            return;
        };
        let next = next.clamp(256, self.ceiling << 8);
        if next != limit {
            self.limit.store(next, Ordering::Relaxed);
        }
    }

    /// Slow start's exit, from the answers' own delays (no window): an answer on time at
    /// `load` in flight says the handler takes that many at once; two delayed answers, each
    /// with more in flight than any answer on time, say it takes no more: the limit is cut to
    /// that many and settles (the probe follows). A queue in the handler delays every answer
    /// past its capacity, so the cut comes two answers after the queue, not a window's worth
    /// later; a route whose answers merely vary answers on time at every load, so it is
    /// never cut (as HyStart's delay increase ends TCP's slow start, on the in-flight count
    /// at which the delay appeared). Returns `None` when it cut, else the most permits slow
    /// start may grow to: twice the most in flight of an answer on time (TCP's slow start
    /// doubles its window a round trip: a limit grown past what any answer has shown the
    /// handler to take only queues inside it, unseen, until the delayed answers come back).
    fn slow_start(&self, took: u64, floor: u64, tolerated: u64, load: usize) -> Option<usize> {
        let Some(mut probe) = self.probe.try_lock() else {
            return Some(0);
        };
        // A waiter's answer: every permit was taken.
        let load = load.min(self.limit());
        if took <= tolerated {
            // Proof of what the handler takes at once: an answer near the floor (a request
            // that arrived just before a worker freed waited a little inside the handler and
            // still answers within the tolerance: it proves nothing of its load).
            if load > probe.fast_load && took <= floor + floor / 16 + 1_000_000 {
                probe.fast_load = load;
                probe.delayed = 0;
            }
            return Some(probe.fast_load.saturating_mul(2));
        }
        let most = probe.fast_load.saturating_mul(2);
        if probe.fast_load == 0 || load <= probe.fast_load {
            return Some(most);
        }
        probe.delayed += 1;
        let cut = probe.fast_load.clamp(1, self.ceiling);
        if probe.delayed < SLOW_START_DELAYED
            || (self.queued.load(Ordering::Relaxed) < cut && !probe.rushed)
        {
            // No queue of the new limit's worth waiting (a burst of random arrivals delays a
            // few answers and drains by itself): the limit stays a guess.
            return Some(most);
        }
        // One more than `cut` queued: no probe up for a few windows; and the answers of the
        // requests let in above `cut` are delayed still: no probe down for two windows.
        probe.up_wait = 4;
        probe.down_wait = 2;
        probe.restart(cut);
        self.settled.store(true, Ordering::Relaxed);
        if cut < self.limit() {
            self.limit.store(cut << 8, Ordering::Relaxed);
        }
        None
    }

    /// A binding answer of `took` (its route's tolerance `tolerated`, its no-load duration
    /// `floor`) once the limit is settled: counted in the probe's window; a full window
    /// decides ([`Probe::closed`]).
    ///
    /// An answer is counted at most a service time past its tolerance: a step of the limit
    /// over what the handler takes at once delays an answer by at most about a service
    /// time, so a longer answer is the route varying (one answer in seven at 60 times the
    /// others), not the step queueing; counted whole, such answers made windows of a few
    /// answers swing by 16 times and the probe read noise. Nor does one end a probe up.
    fn window(&self, took: u64, tolerated: u64, floor: u64) {
        let most = tolerated.saturating_add(floor);
        let Some(mut probe) = self.probe.try_lock() else {
            return;
        };
        let limit = self.limit();
        if probe.at != limit {
            // Moved by another rule (a queue seen) or a lost race: a new window here; a probe
            // under way ends as failed.
            probe.restart(limit);
        }
        if let Some((held, _, probed, true)) = probe.from {
            if probed > held && took > tolerated && took <= most {
                // A probe up from answers on time, and this one delayed: the higher limit
                // queues (no need to wait for the window's mean).
                probe.from = None;
                probe.failed(true);
                probe.restart(held);
                self.limit.store(held << 8, Ordering::Relaxed);
                return;
            }
        }
        probe.n += 1;
        probe.took = probe.took.saturating_add(took.min(most));
        probe.tolerated = probe.tolerated.saturating_add(tolerated);
        if probe.n < window_len(limit) {
            return;
        }
        let next = probe.closed(limit, self.ceiling);
        probe.restart(next);
        if next != limit {
            self.limit.store(next << 8, Ordering::Relaxed);
        }
    }

    /// Whether the limit has seen a queue (a decrease): until then it is a guess (slow
    /// start), and a full queue refuses nobody.
    #[inline]
    pub fn settled(&self) -> bool {
        self.settled.load(Ordering::Relaxed)
    }

    /// What an answer of `took` on a route whose no-load duration is `floor` (not 0) tells,
    /// before its permit goes back: a few loads, the common cases decided inline.
    #[inline]
    pub fn lesson(&self, took: u64, floor: u64, load: usize) -> Lesson {
        let in_flight = self.in_flight.load(Ordering::Relaxed);
        let limit = self.limit();
        // It ran alone: nothing else in flight when it took its permit nor now (a limit of
        // one: nothing else in flight at all), however long it took.
        if in_flight == 1 && (load == 1 || limit <= 1) {
            return Lesson::Alone;
        }
        let binding = in_flight + 1 >= limit || self.queued.load(Ordering::Relaxed) > 0;
        if binding || took > tolerated(floor) {
            Lesson::Limit
        } else {
            Lesson::Calm
        }
    }

    /// A permit now, without a lock, if one is free and nobody waits.
    #[cfg(any(test, shared_headers_loom))]
    pub fn try_acquire(&self) -> bool {
        self.try_acquire_load() != 0
    }

    /// [`Limiter::try_acquire`]: the requests in flight with the permit taken (0: none).
    #[inline]
    pub fn try_acquire_load(&self) -> usize {
        if self.queued.load(Ordering::SeqCst) == 0 {
            self.take_load()
        } else {
            0
        }
    }

    /// A request that found every permit taken, its route needing `need` nanoseconds
    /// (`None`: cold), at `now`: counted in the offered work, and the offered load then: the
    /// work offered in the window over what the limit serves in it, in 1/256 (`None` before
    /// a sixteenth of a half: too little to tell). Under the queue's lock.
    ///
    /// Also, when `proven` is not 0 (slow start: the most requests in flight of an answer on
    /// time, [`Limiter::proven`]), the same work over what `proven` permits serve, once the
    /// window spans the request's need (one service time: a fresh server met by an overload
    /// is told from a few random arrivals after its first answers, not a sixteenth of a
    /// second later).
    pub fn offered(&self, need: Option<u64>, now: Instant, proven: usize) -> Offer {
        let limit = self.limit() as u128;
        let mut queue = self.queue.lock();
        let o = &mut queue.offered;
        let idle = OFFERED_IDLE.max(Duration::from_nanos(need.unwrap_or(0).saturating_mul(2)));
        if let Some(last) = o
            .last
            .filter(|&last| now.saturating_duration_since(last) >= idle)
        {
            // No request found every permit taken for that long: whatever was offered
            // before has drained (a flood of refused or reset requests included), and the
            // time since is measured, none of it offered. The window restarts there.
            (o.cur, o.prev, o.cur_cold, o.prev_cold) = (0, 0, 0, 0);
            o.spans = false;
            o.since = last.max(now.checked_sub(OFFERED_HALF).unwrap_or(last));
        }
        o.last = Some(now);
        if now >= o.since + OFFERED_HALF {
            // One half on: the current half becomes the one before; more: the half before
            // now was idle.
            let one = now < o.since + 2 * OFFERED_HALF;
            (o.prev, o.prev_cold) = if one { (o.cur, o.cur_cold) } else { (0, 0) };
            (o.cur, o.cur_cold) = (0, 0);
            o.spans = true;
            o.since = if one { o.since + OFFERED_HALF } else { now };
        }
        match need {
            Some(need) => o.cur = o.cur.saturating_add(need),
            None => o.cur_cold += 1,
        }
        let start = if o.spans {
            o.since.checked_sub(OFFERED_HALF).unwrap_or(o.since)
        } else {
            o.since
        };
        let span = now.saturating_duration_since(start);
        let (prev, prev_cold) = if o.spans {
            (o.prev, o.prev_cold)
        } else {
            (0, 0)
        };
        let cold = u128::from(o.cur_cold + prev_cold) * u128::from(need.unwrap_or(0));
        let work = u128::from(o.cur) + u128::from(prev) + cold;
        let load_at = |permits: u128| {
            ((work << 8) / (permits * span.as_nanos()).max(1)).min(u128::from(u64::MAX)) as u64
        };
        Offer {
            load: (span >= OFFERED_HALF / 16).then(|| load_at(limit)),
            early: (proven != 0 && need.is_some_and(|need| span.as_nanos() >= u128::from(need)))
                .then(|| load_at(proven as u128)),
        }
    }

    /// Slow start's proof of the handler's capacity: the most requests in flight (at its
    /// permit) of an answer on time so far (0: none yet, or the probe's lock is held).
    pub fn proven(&self) -> usize {
        self.probe.try_lock().map_or(0, |probe| probe.fast_load)
    }

    /// A caller was refused at arrival in slow start for an overload at the proven
    /// capacity: the queue it did not join counts for slow start's exit.
    pub fn rushed(&self) {
        if let Some(mut probe) = self.probe.try_lock() {
            probe.rushed = true;
        }
    }

    /// Requests holding a permit now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Whether the queue stands: every waiter granted a permit over the last two halves of
    /// [`SOJOURN_HALF`] (at least one in each) waited over `target` nanoseconds. Under the
    /// queue's lock.
    pub fn standing(&self, target: u64) -> bool {
        let mut queue = self.queue.lock();
        let sojourn = &mut queue.sojourn;
        sojourn.roll(Instant::now());
        sojourn.prev != u64::MAX
            && sojourn.prev > target
            && (sojourn.cur == u64::MAX || sojourn.cur > target)
    }

    /// A request counted by [`Limiter::offered`] left the queue unserved (its caller hung
    /// up): its work is taken back (a flood of reset streams offers none).
    pub fn withdraw(&self, need: Option<u64>) {
        let mut queue = self.queue.lock();
        let o = &mut queue.offered;
        match need {
            Some(need) => o.cur = o.cur.saturating_sub(need),
            None => o.cur_cold = o.cur_cold.saturating_sub(1),
        }
    }

    /// Whether the work offered at the queue since its window began (a request of a cold
    /// route counted as `floor`) is at least [`BURST_LOAD`] times what the limit serves in
    /// that time: an overload. Under the queue's lock.
    fn overloaded(&self, queue: &Queue, floor: u64) -> bool {
        let o = &queue.offered;
        let span = o.since.elapsed()
            + if o.spans {
                OFFERED_HALF
            } else {
                Duration::ZERO
            };
        let (prev, prev_cold) = if o.spans {
            (o.prev, o.prev_cold)
        } else {
            (0, 0)
        };
        let cold = u128::from(o.cur_cold + prev_cold) * u128::from(floor);
        let work = u128::from(o.cur) + u128::from(prev) + cold;
        let served = self.limit() as u128 * span.as_nanos();
        (work << 8) >= u128::from(BURST_LOAD) * served.max(1)
    }

    /// After slow start's cut, in an overload ([`Limiter::overloaded`]): the waiters with a deadline past the
    /// first `keep` (in deadline order; `keep` is the limit less the requests let in above
    /// it) leave the queue shed (state [`SHED`]): the requests let in above the limit delay
    /// them past a service time, and newer ones replace them at the limit's pace (as CoDel
    /// drops from a queue that stood too long). Waiters without a deadline stay. Returns how
    /// many were shed.
    pub fn trim(&self, floor: u64) -> usize {
        let limit = self.limit();
        let mut queue = self.queue.lock();
        if !self.overloaded(&queue, floor) {
            return 0;
        }
        let excess = self.in_flight.load(Ordering::SeqCst).saturating_sub(limit);
        let keep = limit.saturating_sub(excess);
        let shed: Vec<_> = queue
            .waiters
            .iter()
            .filter(|(_, w)| w.deadline.is_some())
            .skip(keep)
            .map(|(&key, _)| key)
            .collect();
        for key in &shed {
            if let Some(waiter) = queue.waiters.remove(key) {
                self.queued.fetch_sub(1, Ordering::SeqCst);
                waiter.set(SHED);
            }
        }
        shed.len()
    }

    /// Queues a request with `key` (its deadline's order: smaller first) and dispatches;
    /// `counted`: already counted as doomed at arrival.
    pub fn enqueue(
        &self,
        key: u64,
        deadline: Option<Instant>,
        route: u64,
        counted: bool,
        judge: &dyn Fn(&Waiter) -> Verdict,
    ) -> Arc<Waiter> {
        let mut queue = self.queue.lock();
        let seq = queue.seq;
        queue.seq = seq.wrapping_add(1);
        let waiter = Arc::new(Waiter {
            state: AtomicUsize::new(WAITING),
            waker: Mutex::new(None),
            key: (key, seq),
            deadline,
            counted: AtomicBool::new(counted),
            route,
            since: Instant::now(),
        });
        queue.waiters.insert(waiter.key, waiter.clone());
        self.queued.fetch_add(1, Ordering::SeqCst);
        // The write of `queued` before the read of `in_flight` (in `dispatch`): see the module
        // docs.
        fence(Ordering::SeqCst);
        self.dispatch(&mut queue, judge);
        waiter
    }

    /// Returns a permit; hands it to the earliest waiter that can still make its deadline.
    pub fn release(&self, judge: &dyn Fn(&Waiter) -> Verdict) {
        #[cfg(shared_headers_loom)]
        if self.broken {
            let queued = self.queued.load(Ordering::SeqCst);
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            if queued > 0 {
                self.dispatch(&mut self.queue.lock(), judge);
            }
            return;
        }
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        // The write of `in_flight` before the read of `queued`: see the module docs.
        fence(Ordering::SeqCst);
        if self.queued.load(Ordering::SeqCst) > 0 {
            self.dispatch(&mut self.queue.lock(), judge);
        }
    }

    /// A waiter's future is gone: it leaves the queue now; a permit handed to it and never
    /// used goes on to the next waiter.
    pub fn leave(&self, waiter: &Waiter, judge: &dyn Fn(&Waiter) -> Verdict) {
        let mut queue = self.queue.lock();
        match waiter.state.swap(GONE, Ordering::SeqCst) {
            WAITING => {
                queue.waiters.remove(&waiter.key);
                self.queued.fetch_sub(1, Ordering::SeqCst);
            }
            GRANTED => {
                self.in_flight.fetch_sub(1, Ordering::SeqCst);
                self.dispatch(&mut queue, judge);
            }
            _ => {}
        }
    }

    /// Under the queue's lock: while a permit is free, judges the waiters in deadline order,
    /// sheds those the judge sheds, and grants the first it grants; past a spared one it looks
    /// at most [`LOOK_AHEAD`] further, and grants the first spared one if none of those can
    /// finish in time. A permit is never left free while anyone waits.
    fn dispatch(&self, queue: &mut Queue, judge: &dyn Fn(&Waiter) -> Verdict) {
        while self.in_flight.load(Ordering::SeqCst) < self.limit() {
            let mut after = None;
            let mut spared = None;
            let mut looked = 0;
            let chosen = loop {
                let next = match after {
                    None => queue.waiters.first_key_value(),
                    Some(key) => queue
                        .waiters
                        .range((Bound::Excluded(key), Bound::Unbounded))
                        .next(),
                };
                let Some((&key, waiter)) = next else {
                    break spared;
                };
                let verdict = judge(waiter);
                match verdict {
                    Verdict::Grant => break Some(key),
                    Verdict::Shed | Verdict::Expire => {
                        if let Some(waiter) = queue.waiters.remove(&key) {
                            self.queued.fetch_sub(1, Ordering::SeqCst);
                            let state = if verdict == Verdict::Shed {
                                SHED
                            } else {
                                EXPIRED
                            };
                            waiter.set(state);
                        }
                    }
                    Verdict::Spare => {
                        spared = spared.or(Some(key));
                        after = Some(key);
                        looked += 1;
                        if looked > LOOK_AHEAD {
                            break spared;
                        }
                    }
                }
            };
            let Some(key) = chosen else { return };
            if !self.take() {
                return;
            }
            if let Some(waiter) = queue.waiters.remove(&key) {
                self.queued.fetch_sub(1, Ordering::SeqCst);
                let now = Instant::now();
                let sojourn = &mut queue.sojourn;
                sojourn.roll(now);
                let waited = now.saturating_duration_since(waiter.since).as_nanos();
                sojourn.cur = sojourn.cur.min(waited.min(u128::from(u64::MAX - 1)) as u64);
                waiter.set(GRANTED);
            }
        }
    }
}

#[cfg(all(test, not(shared_headers_loom)))]
mod tests {
    use super::*;

    fn grant(_: &Waiter) -> Verdict {
        Verdict::Grant
    }

    /// Drives the probe with windows whose mean is what a handler taking `capacity` at a
    /// time gives (20 ms alone, a service time more per limit's worth past its capacity):
    /// where it holds, and the share of windows spent above `capacity`.
    fn settle(capacity: usize, start: usize, windows: usize) -> (usize, f64) {
        let mut probe = Probe::default();
        let mut limit = start;
        let mut above = 0;
        for _ in 0..windows {
            let mean = 20_000_000 * limit.max(capacity) as u64 / capacity as u64;
            probe.restart(limit);
            probe.n = 16;
            probe.took = 16 * mean;
            probe.tolerated = 16 * tolerated(20_000_000);
            limit = probe.closed(limit, 1024);
            above += usize::from(limit > capacity);
        }
        (limit, above as f64 / windows as f64)
    }

    #[test]
    fn the_probe_settles_on_the_handlers_capacity() {
        // From above (a limit of 3 or 8 on a handler that takes 2): down to 2, and a probe
        // up now and then whose backoff doubles.
        for start in [3, 8] {
            let (limit, above) = settle(2, start, 400);
            assert!(limit <= 3, "from {start}: {limit} (2, or a probe up)");
            assert!(above < 0.05, "{above} of the windows above the capacity");
        }
        // A handler that takes any number: the limit keeps growing.
        let (limit, _) = settle(1024, 2, 200);
        assert!(limit >= 64, "{limit}");
        // A handler that takes 40: found within a step (an eighth; 45 delays the answers by
        // an eighth of a service time, within the tolerance).
        let (limit, _) = settle(40, 4, 400);
        assert!((35..=46).contains(&limit), "{limit}");
    }

    #[test]
    fn slow_start_ends_at_the_in_flight_count_where_answers_were_delayed() {
        const MS: u64 = 1_000_000;
        // A handler that takes 2: on time at 1 and 2 in flight, delayed at 3 and 4, with a
        // queue of 2 waiting: cut to 2, settled.
        let limiter = Limiter::starting_at(1024, 4);
        for _ in 0..4 {
            assert!(limiter.try_acquire());
        }
        let waiters: Vec<_> = (0..2)
            .map(|k| limiter.enqueue(k, None, 0, false, &grant))
            .collect();
        assert!(!limiter.adapt(20 * MS, 20 * MS, 20 * MS, 1));
        assert!(!limiter.adapt(20 * MS, 20 * MS, 20 * MS, 2));
        assert!(
            !limiter.adapt(40 * MS, 20 * MS, 20 * MS, 3),
            "one delayed answer"
        );
        assert!(limiter.adapt(40 * MS, 20 * MS, 20 * MS, 4));
        assert_eq!((limiter.limit(), limiter.settled()), (2, true));
        assert_eq!(waiters[0].state(), WAITING);
        // Answers that merely vary: one on time at 4 in flight, then slow ones at 3 and 4:
        // no cut (the window's rule judges them).
        let limiter = Limiter::starting_at(1024, 4);
        for _ in 0..4 {
            assert!(limiter.try_acquire());
        }
        let _waiters: Vec<_> = (0..4)
            .map(|k| limiter.enqueue(k, None, 0, false, &grant))
            .collect();
        assert!(!limiter.adapt(2 * MS, 2 * MS, 2 * MS, 4));
        assert!(!limiter.adapt(60 * MS, 2 * MS, 2 * MS, 3));
        assert!(!limiter.adapt(60 * MS, 2 * MS, 2 * MS, 4));
        // (The answer on time, binding, grew the limit by a permit: slow start goes on.)
        assert_eq!((limiter.limit(), limiter.settled()), (5, false));
        // Delayed answers with nobody waiting (a burst below the capacity): no cut.
        let limiter = Limiter::starting_at(1024, 4);
        assert!(!limiter.adapt(20 * MS, 20 * MS, 20 * MS, 2));
        assert!(!limiter.adapt(40 * MS, 20 * MS, 20 * MS, 3));
        assert!(!limiter.adapt(40 * MS, 20 * MS, 20 * MS, 4));
        assert!(!limiter.settled());
    }

    #[test]
    fn waiters_are_served_earliest_deadline_first() {
        let limiter = Limiter::new(1);
        assert!(limiter.try_acquire());
        let late = limiter.enqueue(30, None, 0, false, &grant);
        let early = limiter.enqueue(10, None, 0, false, &grant);
        let middle = limiter.enqueue(20, None, 0, false, &grant);
        assert!(
            !limiter.try_acquire(),
            "a newcomer never overtakes a waiter"
        );
        limiter.release(&grant);
        assert_eq!(early.state(), GRANTED);
        assert_eq!((middle.state(), late.state()), (WAITING, WAITING));
        limiter.leave(&middle, &grant); // hung up: gone at once
        assert_eq!(limiter.counts(), (0, 1));
        limiter.release(&grant);
        assert_eq!(late.state(), GRANTED);
    }

    #[test]
    fn the_doomed_get_no_permit_and_an_unused_grant_goes_on() {
        let limiter = Limiter::new(1);
        assert!(limiter.try_acquire());
        let doomed = limiter.enqueue(1, None, 7, false, &grant);
        let next = limiter.enqueue(2, None, 0, false, &grant);
        let judge = |w: &Waiter| {
            if w.route == 7 {
                Verdict::Shed
            } else {
                Verdict::Grant
            }
        };
        limiter.release(&judge);
        assert_eq!((doomed.state(), next.state()), (SHED, GRANTED));
        let after = limiter.enqueue(3, None, 0, false, &grant);
        limiter.leave(&next, &grant); // granted, dropped before it used the permit
        assert_eq!(after.state(), GRANTED);
        assert_eq!(limiter.counts(), (0, 0));
    }

    #[test]
    fn a_spared_waiter_runs_unless_one_behind_can_finish_in_time() {
        let limiter = Limiter::new(1);
        assert!(limiter.try_acquire());
        // Route 7 is doomed and spared by the cap.
        let judge = |w: &Waiter| {
            if w.route == 7 {
                Verdict::Spare
            } else {
                Verdict::Grant
            }
        };
        let spared = limiter.enqueue(1, None, 7, false, &judge);
        let spared_too = limiter.enqueue(2, None, 7, false, &judge);
        let feasible = limiter.enqueue(3, None, 0, false, &judge);
        limiter.release(&judge);
        assert_eq!(
            feasible.state(),
            GRANTED,
            "the permit to the one that can finish"
        );
        assert_eq!((spared.state(), spared_too.state()), (WAITING, WAITING));
        // Nobody behind can finish in time: the earliest spared one runs (never a permit
        // left free while anyone waits).
        limiter.release(&judge);
        assert_eq!((spared.state(), spared_too.state()), (GRANTED, WAITING));
        limiter.release(&judge);
        assert_eq!(spared_too.state(), GRANTED);
        assert_eq!(limiter.counts(), (0, 0));
    }
}
