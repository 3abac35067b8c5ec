//! Deadline-aware admission ([`Admission`]): a request whose caller cannot wait as long as
//! its route needs is answered at once, before the handler runs; an optional in-flight limit
//! serves its waiters earliest deadline first and gives no permit to the doomed.

mod estimate;
mod request;
// The in-flight limit's protocol: private; `pub` only in the loom world, for the models in
// `loom-tests/tests/admission.rs`.
#[cfg(not(shared_headers_loom))]
mod limiter;
#[cfg(shared_headers_loom)]
#[doc(hidden)]
pub mod limiter;
mod queue_start;

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{HeaderName, Method, StatusCode};

use self::estimate::{CREDIT_UNIT, SLOTS, Slot, Steps, route_hash, slot_of};
pub(crate) use self::limiter::Limiter;
pub(crate) use self::request::{Admit, Ticket};
use crate::sync::{AtomicU64, Ordering};

#[cfg(doc)]
use super::SharedHeadersLayer;
#[cfg(doc)]
use crate::Outcome;

/// Deadline-aware admission for [`SharedHeadersLayer::admission`]: never start work that
/// cannot finish in time.
///
/// The layer knows each request's deadline (its own [`timeout`](SharedHeadersLayer::timeout),
/// or the caller's budget: `grpc-timeout`, Connect's, Envoy's, see
/// [`caller_budget`](SharedHeadersLayer::caller_budget)). With admission it also learns how
/// long each route takes, and:
///
/// 1. **at arrival**, a request whose remaining budget is below its route's estimate, or
///    already spent whatever the estimate (even on a cold route), is answered at once, without calling the handler: [`Outcome::Shed`], `error.type`
///    `deadline_unmeetable`, the layer's [`status`](Self::status) (503 by default), or for
///    gRPC a trailers-only `grpc-status` 4 (DEADLINE_EXCEEDED). Time spent before the layer
///    saw the request (a [`queue_start`](Self::queue_start) header) counts as spent;
/// 2. with a [`limit`](Self::limit), at most that many requests run at once; the others wait
///    in deadline order (earliest first, those without a deadline last). Each freed permit
///    goes to the earliest waiter that can still finish in time; a waiter that cannot is shed
///    then, and one whose deadline passes while it waits is answered at its deadline
///    ([`Outcome::TimedOut`]): neither is ever polled. A caller that hangs up leaves the
///    queue at once. A waiting request's handler future is made (the inner service's `call`)
///    but not polled: a handler runs when its future is first polled, so a service that
///    starts work in `call` itself (tower's `Buffer`, a spawn) is not held back;
/// 3. rejections are **capped**: at most [`max_shed`](Self::max_shed) of a route's requests
///    (a fifth by default) in a sliding window of 10 s, as Finagle's `DeadlineFilter`; what the cap spares is admitted at arrival, and in the queue gets a
///    permit unless one of the next waiters behind it can still finish in time (a permit is
///    never left free while anyone waits). Each request is counted once, whether it is
///    judged at arrival, in the queue or both. [`count_only`](Self::count_only) counts (and, with feature
///    `tracing`, logs) what would have been rejected, and rejects nothing.
///
/// # The estimate
///
/// Per route (axum's `MatchedPath` with the method, else the method and the path, hashed
/// into 64 slots, so the memory is fixed whatever the traffic; a slot learns for one route at
/// a time and keeps its full hash, so a request is never judged by another route's estimate:
/// a route whose slot another holds is cold, and its first answer takes the slot over), a running
/// [`quantile`](Self::quantile) of the answered requests' durations from the call (or from
/// their permit, with a limit) to the answer, kept by stochastic approximation: each answer
/// moves it up by 5% × q of itself if it took longer, down by 5% × (1 − q) if not, so that in
/// equilibrium a share q of the answers is at or below it. One load and one store per answer,
/// no histogram to scan at arrival. A request cut short (its deadline, its caller) counts as
/// "at least that long": it can only raise the estimate.
///
/// * **Default quantile 0.9**: under overload capacity is what is scarce, and starting a
///   request that finishes in time with less than 9 chances in 10 spends a whole service time
///   for less than 0.9 of an answer. Callers whose budget is far above the route's latency
///   (the usual case) are never near it; the cap bounds the harm of an estimate that is too
///   high.
/// * **Cold start**: a route admits everything until it has [`warm_up`](Self::warm_up)
///   answers (16 by default); the first one seeds the estimate. At most 64 routes are warm
///   at once: without axum's `MatchedPath` every distinct path is a route, and paths with
///   parameters (`/users/1`, `/users/2`, ...) keep taking slots from one another and stay
///   cold (admitted: admission fails open, never shut).
/// * **A route that just got slower**: every slower answer raises the estimate by 4.5%, so it
///   doubles in about 16 answers; it comes down by 0.5% an answer (halving in about 140), so a
///   slow phase is forgotten gradually. Requests the cap admits keep it learning even when
///   every caller's budget is below it.
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
/// assert_eq!(stats.admission_counts().shed, 1);
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
    table: Box<[Slot]>,
    limiter: Option<Limiter>,
    counters: Counters,
    base: Instant,
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
        let limiter = match settings.limit {
            Some(limit) => Limiter::starting_at(limit.get(), DEFAULT_START),
            None => Limiter::starting_at(DEFAULT_CEILING, DEFAULT_START),
        };
        Shared {
            limiter: Some(limiter),
            table: (0..SLOTS).map(|_| Slot::default()).collect(),
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
    /// Requests shed at arrival (their budget below the estimate).
    pub shed: u64,
    /// Requests shed while waiting for a permit (their budget fell below the estimate).
    pub shed_waiting: u64,
    /// Requests that would have been shed, in [`count_only`](Admission::count_only) mode.
    pub would_shed: u64,
    /// Rejections the cap prevented ([`max_shed`](Admission::max_shed)).
    pub capped: u64,
    /// Requests that waited for a permit.
    pub queued: u64,
    /// Waiters that left the queue without a permit: their deadline passed, or their caller
    /// hung up.
    pub left_queue: u64,
    /// Requests refused at arrival because the queue was full (a limit's worth of
    /// waiters) or their predicted wait and their route's need passed their budget.
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
    /// Admission with the defaults: quantile 0.9, a warm-up of 16 answers per route, at most
    /// a fifth of the requests shed, no in-flight limit, 503 for a shed request.
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

    /// The most of a route's requests that may be rejected in a sliding window of about 10 s
    /// (default 0.2 in 10 s, Finagle's `DeadlineFilter`'s): each request earns `share` of a
    /// rejection, and a rejection spends credit earned in the last two 5-second halves only.
    /// So after a quiet spell the first rejections wait for a few requests' credit. Clamped to
    /// 0 ..= 1, in hundredths; 0 rejects nothing (everything counted as
    /// [`capped`](AdmissionCounts::capped)).
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
    /// INFO) what would be rejected, and rejects nothing (default `false`): to see what
    /// admission would do before letting it.
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
        self
    }

    /// A header holding the time the request entered the first queue in front of this
    /// server (`x-request-start`, as Heroku, nginx's `t=${msec}` and New Relic write it: a
    /// Unix time in seconds, milliseconds or microseconds, told apart by magnitude, after an
    /// optional `t=`). The time since then counts as spent from the budget. A malformed
    /// value, one in the future or more than an hour ago is ignored. Default: none.
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

    /// At most `permits` requests in flight; the others wait, earliest deadline first (see
    /// the [type docs](Self)). Default: no limit.
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

    /// The HTTP status of a shed request (default 503 Service Unavailable; a gRPC call gets
    /// HTTP 200 with `grpc-status` 4).
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
        self.shared.table[slot_of(route)].need(route)
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
