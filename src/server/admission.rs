//! Deadline-aware admission ([`Admission`]): a request whose caller cannot wait as long as
//! its route needs is answered at once, before the handler runs; an in-flight limit that
//! adapts to the handler's capacity, and a queue bounded by its predicted delay.

// The estimate's slots: private; `pub` only in the loom world, for the models in
// `loom-tests/tests/admission.rs`.
#[cfg(not(shared_headers_loom))]
mod estimate;
#[cfg(shared_headers_loom)]
#[doc(hidden)]
pub mod estimate;
mod request;
// The in-flight limit's protocol: private; `pub` only in the loom world, for the models in
// `loom-tests/tests/admission.rs`.
#[cfg(not(shared_headers_loom))]
mod limiter;
#[cfg(shared_headers_loom)]
#[doc(hidden)]
pub mod limiter;
mod queue_start;
// Whether a body that holds a permit waits on its reader: private; `pub` only in the loom
// world, for the models in `loom-tests/tests/admission.rs`.
#[cfg(not(shared_headers_loom))]
mod stall;
#[cfg(shared_headers_loom)]
#[doc(hidden)]
pub mod stall;

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{HeaderName, Method, StatusCode};

use self::estimate::{CREDIT_UNIT, SLOTS, Slot, Steps, route_hash};
pub(crate) use self::limiter::Limiter;
pub(crate) use self::request::{Admit, BodyPermit, Refusal, Ticket};
use crate::sync::{AtomicU64, Ordering};

#[cfg(doc)]
use super::SharedHeadersLayer;
#[cfg(doc)]
use crate::Outcome;

/// Deadline-aware admission for [`SharedHeadersLayer::admission`]: never start work that
/// cannot finish in time, and never let a queue stand.
///
/// The layer knows each request's deadline (its own [`timeout`](SharedHeadersLayer::timeout),
/// or the caller's budget: `grpc-timeout`, Connect's, Envoy's, see
/// [`caller_budget`](SharedHeadersLayer::caller_budget)). With admission it also learns how
/// long each route takes, and:
///
/// 1. **at arrival**, a request whose remaining budget is below its route's need, or
///    already spent whatever the estimate (even on a cold route), is refused at once,
///    without calling the handler (as Finagle's `DeadlineFilter`). Time spent before the
///    layer saw the request (a [`queue_start`](Self::queue_start) header) counts as spent,
///    and the request's deadline (its record's, its line's, its timer's,
///    `Deadline::current`'s) is that much earlier;
/// 2. **an in-flight limit that adapts** (delay-based, as TCP Vegas and Netflix's
///    `concurrency-limits`): the least of a route's recent answers (8 to 16 of them, as
///    Vegas's and BBR's min-RTT) is compared with its no-load duration (its least answer
///    since one that ran alone, which sets it up or down: a route that got slower is
///    followed); well above it
///    (a quarter as long again, and 2 ms) means requests queue past the permits, in the
///    handler where admission cannot see (a queue delays every answer; a slow answer among
///    fast ones is no queue), and the limit moves toward what Little's law says keeps
///    answers within that tolerance. Until that first decrease, answers near the no-load
///    duration of requests that started with the limit binding grow it by a permit each, up
///    to twice the most requests in flight of an answer on time (TCP's slow start, which
///    doubles a window per round trip); slow start also ends sooner, from the answers' own delays: two
///    delayed answers, each with more in flight at its start than any answer on time, while
///    a queue of that many waits (or callers were refused for one, below), cut the limit to
///    that many (the handler takes no more at once, as HyStart ends TCP's slow start at a
///    delay increase), and in an overload the waiters those extra requests would delay past
///    a service time are refused then. Until that cut, a caller with a budget that finds
///    every permit taken is refused at arrival when the work offered at the queue is an
///    overload for the capacity answers have shown (the most in flight of an answer on
///    time) and the wait predicted at that capacity passes the delay target below (a fresh
///    server met by 4x-10x its capacity at once refuses at arrival, not after a wait in the
///    queue); so is a caller without a budget on a route still warming up (its need not
///    known yet), once the work offered over the last sixteenth of a second or more is an
///    overload for the limit too; before any answer the queue holds half a limit's worth
///    of callers with a budget.
///    After it, the limit moves only by probing: windows of binding
///    answers (twice the limit, at least 8) at two neighbouring limits are compared by
///    throughput (the limit over the mean answer, Little's law); the lower limit is kept
///    when it serves as many (within a sixteenth), a higher one only when it serves more
///    (a sixteenth more), and a probe up from answers on time ends at its first delayed
///    answer, its next one waiting twice as long (16 to 64 windows, and never over 300 ms:
///    a handler whose capacity grew is found within that). Probes up that keep serving more
///    with answers on time double their step (a route freed of its bottleneck finds its new
///    capacity in a few windows), and an answer counts in a window at most a service time
///    past its tolerance (a step over the handler's capacity delays an answer by about a
///    service time at most: a longer one is the route varying, which would make windows of
///    a few answers noise). A limit one above a
///    handler's capacity delays only some answers, which the least of the recent answers
///    cannot see and the throughput does. It starts
///    at 4 and stays between 1 and [`limit`](Self::limit) (1,024 without one): a limit
///    given too high (or none) finds the handler's capacity;
/// 3. **a queue bounded by delay, not by deadline**: a request that finds every permit taken
///    waits only if its predicted wait (the queue ahead of it over the limit, times the
///    route's need, or its pace when faster: the route's answers, down at once to a
///    faster one) is within the route's no-load duration and 2 ms (for a caller with a
///    budget, once the limit has seen a queue and unless the budget is ten times the
///    route's need or more), the queue holds less
///    than a limit's worth, and the wait and the need fit its budget; else it is refused at
///    once (as PIE, RFC 8033, drops at enqueue from the predicted delay). Those bounds hold
///    in an overload only: while the work offered at the queue (each request that found
///    every permit taken, at its route's need) in the last one to two seconds stays under
///    1.25 times what the limit serves, the queue is a burst that drains by itself (as CoDel
///    tells a good queue from a standing one), and a request waits if the wait and the need
///    fit its budget (without a budget, or on a route still warming up: if fewer than 16
///    limits' worth wait ahead). From what the limit serves up to 1.25 times it, the queue's
///    own delay decides, as CoDel's: when every waiter given a permit over the last 100 ms
///    waited over the route's no-load duration and 2 ms (the delay target), the queue stands and the bounds of
///    an overload hold. A waiter whose caller hangs up takes its work back out of the work
///    offered, and after 100 ms (or twice the request's need, when longer) in which no
///    request found every permit taken, the window restarts at the last one that did (a
///    flood of refused or reset requests is not read as an overload once it has drained).
///    Waiters are served
///    earliest deadline first; a freed permit skips a waiter that can no longer finish in
///    time (refused then), and one whose deadline passes while it waits is answered by its
///    deadline's timer ([`Outcome::TimedOut`], counted once): neither is ever polled. A
///    caller that hangs up leaves the queue at once. A waiting request's handler future is
///    made (the inner service's `call`) but not polled;
/// 4. **a refusal says so**: [`Outcome::Shed`], the layer's [`status`](Self::status) (503
///    by default) with `retry-after: 0` (RFC 9110: try again now, elsewhere), gRPC's
///    `grpc-status` 14 (UNAVAILABLE), Connect's `unavailable`; a timeout has no
///    `retry-after` and is gRPC's 4 (DEADLINE_EXCEEDED), so a caller tells the two apart
///    whatever the statuses. The permit is given back when the response's body is dropped
///    (its end), or earlier, once, when the body has produced no frame for four of its
///    route's no-load durations (at least 300 ms, at most 500 ms), whether its client
///    stopped reading it (a server stops polling a body its client does not read: HTTP/2's
///    flow control, HTTP/1's socket buffer) or it is `Pending` (an event stream between
///    events): a streaming route holds it while its body produces frames; the body streams
///    on uncounted after. The route's service time (what the estimate learns) is its time
///    to head. See [`docs::admission`](crate::docs::admission#when-the-permit-comes-back).
///
/// A refusal on the estimate is not capped: one doomed request in 32 is let run instead (a
/// probe), so that the estimate keeps learning when every caller's budget is below it (a
/// route that got faster is seen at the next probe). A queue-start header that dooms a
/// request (its whole budget spent before, or what it leaves below the route's need when the
/// whole budget was not) is believed within [`max_shed`](Self::max_shed) (a fifth
/// of the route's requests in 10 s by default): a proxy clock behind this one, or a client
/// that writes the header, fails at most that share. A budget spent before arrival is answered
/// as a timeout ([`Outcome::TimedOut`], gRPC's DEADLINE_EXCEEDED, no `retry-after`), never
/// started; only refusals for load carry `retry-after`. [`count_only`](Self::count_only)
/// counts (and, with feature `tracing`, logs) what would have been refused, and changes
/// nothing a caller sees.
///
/// # The estimate
///
/// Per route (axum's `MatchedPath` with the method, else the method and the path, hashed
/// into two of 256 slots, so the memory is fixed whatever the traffic): a running
/// [`quantile`](Self::quantile) of the answered requests' durations from their permit to
/// the answer, kept by stochastic approximation (each answer moves it up by 5% × q of
/// itself if it took longer, down by 5% × (1 − q) if not), and a fast follower of the recent
/// answers (up at once to a longer one, half-way down to a shorter one). The route's need
/// is the smaller of the two: a lone slow answer moves the quantile a step; a slow start
/// or a slow phase is forgotten in a few answers.
///
/// * **What teaches it**: answers; and a request cut by its deadline while it ran, as a
///   lower bound (it can only raise the need, and counts toward a warm-up: a route no
///   caller ever gets an answer from is learned from its timeouts; two in a row raise the
///   need to the bound at once, so a route that got slower than its callers' budgets is
///   refused from its second timeout on, while a lone one moves it a step). A caller that hangs up,
///   an error or a panic teaches nothing. An answer teaches whatever its status: a client
///   error (a 4xx) may be the route's work (a 404 after a database miss, a 401 after a slow
///   auth call).
/// * **Default quantile 0.9**: under overload capacity is what is scarce, and starting a
///   request that finishes in time with less than 9 chances in 10 spends a whole service
///   time for less than 0.9 of an answer.
/// * **Cold start**: a route admits everything until it has [`warm_up`](Self::warm_up)
///   answers (16 by default), counted in
///   [`admitted_cold`](AdmissionCounts::admitted_cold). A slot learns for one route at a
///   time (its full hash is kept: a request is never judged by another route's estimate);
///   another route takes it over only with a whole warm-up of answers with none of the
///   holder's between them (as TinyLFU admits a newcomer only on evidence), so a flood of
///   distinct paths (a scanner's 404s, paths with parameters without `MatchedPath`) never
///   makes a warm route cold. A route has two slots (two choices, as cuckoo hashing's): one
///   whose slot a busier route holds warms in its other one; it stays cold (counted) only
///   while routes answered between each of its answers hold both.
/// * **A bimodal route** (most answers fast, some slow): admission cannot tell in advance
///   which request will be slow. The need is the smaller of the quantile and the recent
///   answers, so a route whose fast answers fit the callers' budgets is admitted, and its
///   slow requests time out (one in 7 slow, 100 ms callers: six in seven served, the
///   seventh times out); one whose slow answers dominate is refused but for probes.
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use std::time::Duration;
/// use http::{Request, Response, StatusCode};
/// use shared_headers::{Committed, Outcome};
/// use shared_headers::deadline::BudgetHeader;
/// use shared_headers::server::{Admission, SharedHeadersLayer};
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let layer = SharedHeadersLayer::new()
///     .caller_budget(BudgetHeader::envoy_expected_rq_timeout_ms())
///     .admission(Admission::new().warm_up(2).max_shed(1.0));
/// let stats = layer.stats();
/// let service = layer.layer(service_fn(|_req: Request<()>| async {
///     tokio::time::sleep(Duration::from_millis(30)).await;
///     Ok::<_, Infallible>(Response::new(String::new()))
/// }));
/// for _ in 0..2 {
///     service.clone().oneshot(Request::new(())).await?; // the route takes 30 ms
/// }
/// assert!(stats.admission_estimate(&http::Method::GET, "/").unwrap() >= Duration::from_millis(30));
///
/// let req = Request::get("/").header("x-envoy-expected-rq-timeout-ms", "5").body(())?;
/// let res = service.oneshot(req).await?;
/// assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
/// assert_eq!(res.extensions().get::<Committed>().unwrap().outcome(), Outcome::Shed);
/// // A refusal for the estimate (the budget under the route's need) counts as `shed`; one
/// // for the load (the queue full, or its predicted wait too long) as `overloaded`.
/// assert_eq!(stats.admission_counts().shed, 1);
/// assert_eq!(stats.admission_counts().overloaded, 0);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "admission does nothing until given to SharedHeadersLayer::admission"]
pub struct Admission {
    shared: Arc<Shared>,
}

#[derive(Debug, Clone)]
struct Settings {
    quantile: f64,
    steps: Steps,
    warm: u64,
    credit_gain: u64,
    count_only: bool,
    queue_start: Option<HeaderName>,
    limit: Option<NonZeroUsize>,
    status: StatusCode,
}

/// The state shared by the layer's services and every clone of the [`Admission`].
#[derive(Debug)]
pub(crate) struct Shared {
    settings: Settings,
    table: Table,
    limiter: Option<Limiter>,
    counters: Counters,
    base: Instant,
    /// The slots of the streaming bodies that hold a permit (`stall`).
    stalls: stall::Stalls,
}

/// The estimate's slots, a fixed array read as a slice: an index masked to `SLOTS` needs
/// no bounds check once the length is known (a constant). In the shared state itself (its
/// `Arc`'s allocation): a slot's address with no pointer to load first.
#[derive(Debug)]
struct Table([Slot; SLOTS]);

impl std::ops::Deref for Table {
    type Target = [Slot];

    #[inline]
    fn deref(&self) -> &[Slot] {
        &self.0
    }
}

#[derive(Debug, Default)]
struct Counters {
    shed: AtomicU64,
    shed_waiting: AtomicU64,
    would_shed: AtomicU64,
    capped: AtomicU64,
    queued: AtomicU64,
    left_queue: AtomicU64,
    overloaded: AtomicU64,
    probes: AtomicU64,
}

impl Shared {
    fn new(settings: Settings) -> Shared {
        // Count-only: no limit, no queue (nothing a caller sees changes).
        let limiter = match (settings.count_only, settings.limit) {
            (true, _) => None,
            (false, Some(limit)) => Some(Limiter::starting_at(limit.get(), DEFAULT_START)),
            (false, None) => Some(Limiter::starting_at(DEFAULT_CEILING, DEFAULT_START)),
        };
        // A slot for each permit there can be (none without a limit).
        let slots = match (settings.count_only, settings.limit) {
            (true, _) => 0,
            (false, Some(limit)) => limit.get(),
            (false, None) => DEFAULT_CEILING,
        };
        Shared {
            limiter,
            stalls: stall::Stalls::new(slots),
            table: Table(std::array::from_fn(|_| Slot::default())),
            counters: Counters::default(),
            base: Instant::now(),
            settings,
        }
    }
}

/// Changing a setting of a shared [`Admission`] starts a fresh state (no estimate, no
/// counts) with the new settings; configure first, then clone.
impl Clone for Shared {
    fn clone(&self) -> Shared {
        Shared::new(self.settings.clone())
    }
}

/// What [`LayerStats::admission_counts`](super::LayerStats::admission_counts) reads: what was
/// rejected, spared and queued since the admission was made.
///
/// # Examples
///
/// ```
/// # use shared_headers::server::{Admission, SharedHeadersLayer};
/// let counts = SharedHeadersLayer::new().admission(Admission::new()).stats().admission_counts();
/// assert_eq!(counts.shed + counts.shed_waiting + counts.would_shed, 0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AdmissionCounts {
    /// Requests refused at arrival (their budget spent, or below their route's need).
    pub shed: u64,
    /// Requests refused while waiting for a permit (their budget fell below the need).
    pub shed_waiting: u64,
    /// Requests that would have been shed, in [`count_only`](Admission::count_only) mode.
    pub would_shed: u64,
    /// Queue-start headers ignored past the cap ([`max_shed`](Admission::max_shed)).
    pub capped: u64,
    /// Requests that waited for a permit.
    pub queued: u64,
    /// Waiters that left the queue without a permit and without a refusal: their deadline
    /// passed (answered by the timer), or their caller hung up.
    pub left_queue: u64,
    /// Requests refused for the load, all answered with `retry-after`: at arrival (the
    /// queue full, its predicted wait past the delay target, or with the route's need past
    /// the budget), or waiting when slow start's cut trimmed the queue. Under an overload
    /// this is where the refusals are; [`shed`](Self::shed) counts the refusals by the
    /// estimate.
    pub overloaded: u64,
    /// Doomed requests let run anyway so that the estimate keeps learning (one in 32).
    pub probes: u64,
    /// Requests admitted while their route had no estimate (warming up, or its slot held
    /// by another route): what admission let through unjudged.
    pub admitted_cold: u64,
    /// Requests waiting now.
    pub waiting: u64,
    /// Permits free now.
    pub free_permits: u64,
    /// The in-flight limit now (it adapts between 1 and [`Admission::limit`]).
    pub limit: u64,
}

impl Default for Admission {
    fn default() -> Self {
        Self::new()
    }
}

impl Admission {
    /// Admission with the defaults: quantile 0.9, a warm-up of 16 answers per route, an
    /// in-flight limit that adapts (from 4, at most 1,024), a fifth of a route's requests
    /// at most refused on a queue-start header's word, 503 for a refused request.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::{Admission, SharedHeadersLayer};
    /// let layer = SharedHeadersLayer::new().admission(Admission::new());
    /// # drop(layer);
    /// ```
    pub fn new() -> Self {
        let quantile = 0.9;
        Admission {
            shared: Arc::new(Shared::new(Settings {
                quantile,
                steps: Steps::new(quantile, GAIN),
                warm: 16,
                credit_gain: CREDIT_UNIT / 5,
                count_only: false,
                queue_start: None,
                limit: None,
                status: StatusCode::SERVICE_UNAVAILABLE,
            })),
        }
    }

    fn settings(&mut self) -> &mut Settings {
        &mut Arc::make_mut(&mut self.shared).settings
    }

    /// The quantile of a route's answered durations that a request's remaining budget must
    /// reach (default 0.9; see [the estimate](Self#the-estimate)). Clamped to 0.5 ..= 0.99.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::Admission;
    /// let admission = Admission::new().quantile(0.99);
    /// # drop(admission);
    /// ```
    pub fn quantile(mut self, quantile: f64) -> Self {
        let quantile = if quantile.is_nan() {
            0.9
        } else {
            quantile.clamp(0.5, 0.99)
        };
        let settings = self.settings();
        settings.quantile = quantile;
        settings.steps = Steps::new(quantile, GAIN);
        self
    }

    /// How many answers a route needs before its estimate is used (default 16; at least 1).
    /// Until then the route admits everything.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::Admission;
    /// let admission = Admission::new().warm_up(100);
    /// # drop(admission);
    /// ```
    pub fn warm_up(mut self, answers: u64) -> Self {
        self.settings().warm = answers.max(1);
        self
    }

    /// The most of a route's requests that may be refused because a
    /// [`queue_start`](Self::queue_start) header dooms (their whole budget spent before the
    /// layer, or what it leaves below their route's need and the queue's predicted wait), in a sliding window of about 10 s (default 0.2 in 10 s, Finagle's
    /// `DeadlineFilter`'s cap): each request earns `share` of a refusal, and a refusal
    /// spends credit earned in the last two 5-second halves only. Past it the header is
    /// ignored for the request (counted as [`capped`](AdmissionCounts::capped)): a clock
    /// behind this one fails at most that share. Clamped to 0 ..= 1, in hundredths.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::Admission;
    /// let admission = Admission::new().max_shed(0.5);
    /// # drop(admission);
    /// ```
    pub fn max_shed(mut self, share: f64) -> Self {
        let share = if share.is_nan() {
            0.2
        } else {
            share.clamp(0.0, 1.0)
        };
        self.settings().credit_gain = (share * CREDIT_UNIT as f64).round() as u64;
        self
    }

    /// Counts (and with feature `tracing` logs, target `shared_headers::admission`, level
    /// INFO) what would be refused, and changes nothing a caller sees (default `false`):
    /// nothing refused, the queue-start header ignored (no deadline shortened), no in-flight
    /// limit and no queue (so only refusals on the estimate are counted, not those for a
    /// full queue); to see what admission would do before letting it.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::Admission;
    /// let admission = Admission::new().count_only(true);
    /// # drop(admission);
    /// ```
    pub fn count_only(mut self, count_only: bool) -> Self {
        self.settings().count_only = count_only;
        let settings = self.shared.settings.clone();
        self.shared = Arc::new(Shared::new(settings));
        self
    }

    /// A header holding the time the request entered the first queue in front of this
    /// server (`x-request-start`, as Heroku, nginx's `t=${msec}` and New Relic write it: a
    /// Unix time in seconds, milliseconds or microseconds, told apart by magnitude, after an
    /// optional `t=`). The time since then counts as spent from the budget and makes the
    /// deadline earlier (the record's, the line's, the timer's and `Deadline::current`'s
    /// alike). A malformed value, one in the future or more than an hour ago is ignored;
    /// one that dooms the request (its whole budget spent, or what it leaves below the
    /// route's need) is believed within [`max_shed`](Self::max_shed). Default: none.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::Admission;
    /// let admission = Admission::new()
    ///     .queue_start(http::HeaderName::from_static("x-request-start"));
    /// # drop(admission);
    /// ```
    pub fn queue_start(mut self, header: HeaderName) -> Self {
        self.settings().queue_start = Some(header);
        self
    }

    /// At most `permits` requests in flight: the adaptive limit's ceiling (it starts at 4,
    /// or `permits` if fewer; see the [type docs](Self)). Default: 1,024.
    ///
    /// When you know how many requests the handler can work on at once (its workers, a
    /// pool's connections, a semaphore inside it), give that number: the queue then forms
    /// where admission sees it. When you do not, leave the default: the limit learns the
    /// handler's concurrency from its answers (the overload run measures both, and a limit
    /// ten times too high: [`docs::admission`](crate::docs::admission)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::num::NonZeroUsize;
    /// # use shared_headers::server::Admission;
    /// let admission = Admission::new().limit(NonZeroUsize::new(64).unwrap());
    /// # drop(admission);
    /// ```
    pub fn limit(mut self, permits: NonZeroUsize) -> Self {
        self.settings().limit = Some(permits);
        let settings = self.shared.settings.clone();
        self.shared = Arc::new(Shared::new(settings));
        self
    }

    /// The HTTP status of a refused request (default 503 Service Unavailable, with
    /// `retry-after: 0`; a gRPC call gets HTTP 200 with `grpc-status` 14, UNAVAILABLE).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::Admission;
    /// let admission = Admission::new().status(http::StatusCode::GATEWAY_TIMEOUT);
    /// # drop(admission);
    /// ```
    pub fn status(mut self, status: StatusCode) -> Self {
        self.settings().status = status;
        self
    }

    /// The estimate of a route (axum's route template, else the request's path) for
    /// `method`; `None` while the route is warming up, or cold because another route holds
    /// its slot (see [the estimate](Self#the-estimate)). Read by
    /// [`LayerStats::admission_estimate`](super::LayerStats::admission_estimate).
    pub(crate) fn estimate(&self, method: &Method, route: &str) -> Option<Duration> {
        let route = route_hash(method.as_str().as_bytes(), route.as_bytes());
        estimate::need(&self.shared.table, route)
    }

    /// What was rejected, spared and queued so far, by this admission's layers. Read by
    /// [`LayerStats::admission_counts`](super::LayerStats::admission_counts).
    pub(crate) fn counts(&self) -> AdmissionCounts {
        let c = &self.shared.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (free, waiting) = self.shared.limiter.as_ref().map_or((0, 0), Limiter::counts);
        let limit = self.shared.limiter.as_ref().map_or(0, Limiter::limit);
        AdmissionCounts {
            shed: load(&c.shed),
            shed_waiting: load(&c.shed_waiting),
            would_shed: load(&c.would_shed),
            capped: load(&c.capped),
            queued: load(&c.queued),
            left_queue: load(&c.left_queue),
            overloaded: load(&c.overloaded),
            probes: load(&c.probes),
            admitted_cold: self.shared.table.iter().map(Slot::cold_count).sum(),
            waiting: waiting as u64,
            free_permits: free as u64,
            limit: limit as u64,
        }
    }
}

/// The gain of the running quantile.
const GAIN: f64 = 0.05;

/// Without [`Admission::limit`]: the most permits the adaptive limit may reach, and where it
/// starts.
const DEFAULT_CEILING: usize = 1024;
const DEFAULT_START: usize = 4;
