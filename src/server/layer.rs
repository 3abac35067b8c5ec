//! The layer: configuration shared by every request of a service stack, resolved once when
//! it is built.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tower_layer::Layer;

pub(super) use propagate::PropagationCounters;

use super::SharedHeadersService;
use super::admission::{Admission, AdmissionCounts};
use super::answer::OwnAnswers;
use super::end::EndHooks;
use super::selection::HeaderSelection;
use crate::context::{Propagation, PropagationCounts};
use crate::deadline::BudgetHeader;
use crate::exchange::CommitHooks;
use crate::policy::Policy;

#[cfg(doc)]
use crate::exchange::{Committed, Exchange, Outcome};

/// A [`Layer`] that gives every request shared request and response headers and commits them
/// exactly once. See the [module docs](super) for the full semantics.
///
/// # What to call
///
/// | task | method | what it does |
/// |---|---|---|
/// | deadline | [`timeout`](Self::timeout) | a wall-clock deadline per request, answered 503 |
/// | deadline (gRPC) | [`caller_budget`](Self::caller_budget) | the caller's `grpc-timeout` (or another budget header) shortens it |
/// | deadline | [`admission`](Self::admission) | a request that cannot finish in time is answered at once, never started |
/// | line and metric | [`tracing_access_log`](Self::tracing_access_log) | one `tracing` access line per request, safe by default |
/// | line and metric | [`otel_metrics`](Self::otel_metrics) | OpenTelemetry's `http.server.request.duration` and active requests |
/// | line and metric | [`otel_tracer`](Self::otel_tracer) | an OpenTelemetry server span per request, a hop of the caller's trace |
/// | the request's context | [`propagate`](Self::propagate) | the request id and trace headers, passed on by the client room |
/// | limits | [`request_policy`](Self::request_policy) | limits and secret names of the request headers |
/// | answers | [`own_answer_headers`](Self::own_answer_headers) | which committed headers the layer's own answers carry |
///
/// The rest, by the same tasks: [`timeout_status`](Self::timeout_status) (deadline);
/// [`access_log`](Self::access_log), [`otel_metric_attribute`](Self::otel_metric_attribute),
/// [`on_commit`](Self::on_commit), [`on_response_end`](Self::on_response_end),
/// [`on_late_writes`](Self::on_late_writes), [`peer_address`](Self::peer_address),
/// [`default_scheme`](Self::default_scheme) (line and metric);
/// [`response_policy`](Self::response_policy), [`rejection_status`](Self::rejection_status),
/// [`copy_request_headers`](Self::copy_request_headers) (limits);
/// [`record_in_response`](Self::record_in_response), [`resume_panics`](Self::resume_panics)
/// (answers). Counters (refused
/// budgets, propagation, admission's counts and estimates) are read from
/// [`stats`](Self::stats), not from the layer or its settings.
///
/// # Examples
///
/// The usual server: a deadline, the access line, the metric, the request's context (and, for
/// gRPC, the caller's budget).
///
/// ```
/// use std::time::Duration;
/// use shared_headers::context::Propagation;
/// use shared_headers::server::SharedHeadersLayer;
///
/// # #[cfg(all(feature = "tracing", feature = "opentelemetry"))] {
/// let meter = opentelemetry::global::meter("my-server");
/// let layer = SharedHeadersLayer::new()
///     .timeout(Duration::from_secs(5)) // a deadline: answered 503 at the wall clock
///     .tracing_access_log() // the line: one per request, when its response ends
///     .otel_metrics(&meter) // the metric: http.server.request.duration
///     .propagate(Propagation::new().request_id().w3c()); // the request's context
///     // .caller_budget(BudgetHeader::grpc_timeout()) // gRPC: the caller's deadline too
/// # drop(layer);
/// # }
/// ```
///
/// A deadline, seen from the response:
///
/// ```
/// use std::{convert::Infallible, time::Duration};
/// use http::{Request, Response, StatusCode};
/// use shared_headers::{Committed, Outcome};
/// use shared_headers::server::SharedHeadersLayer;
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Infallible> {
/// let layer = SharedHeadersLayer::new()
///     .timeout(Duration::from_millis(10))
///     .timeout_status(StatusCode::GATEWAY_TIMEOUT);
/// let slow = layer.layer(service_fn(|_req: Request<()>| async {
///     tokio::time::sleep(Duration::from_secs(10)).await;
///     Ok::<_, Infallible>(Response::new(String::from("too late")))
/// }));
/// let res = slow.oneshot(Request::new(())).await?;
/// assert_eq!(res.status(), StatusCode::GATEWAY_TIMEOUT);
/// assert_eq!(res.extensions().get::<Committed>().unwrap().outcome(), Outcome::TimedOut);
/// # Ok(())
/// # }
/// ```
///
/// # Settings
///
/// Setters are named after the setting (`timeout`, `timeout_status`, ...), as in tower-http
/// and hyper, take already-checked values (`Duration`, `StatusCode`, `HeaderName`s,
/// [`Builder`](crate::Builder)s, a [`Propagation`]) and cannot fail. The first line of each
/// says whether it **sets** (a second call replaces) or **adds** (hooks and budget headers
/// add up). The order of the calls never matters otherwise: settings that depend on each
/// other are resolved by one rule each, when the layer is built, whatever the order (a name
/// secret in either policy is never propagated, nor printed by the access line or the
/// OpenTelemetry span; a tracer makes every request a trace hop, whatever propagation is
/// set; [`default_scheme`](Self::default_scheme) is the line's, the metric's and the span's
/// `url.scheme`; an explicit
/// [`access_log`](Self::access_log) wins over the defaults of
/// [`tracing_access_log`](Self::tracing_access_log);
/// [`otel_metric_attribute`](Self::otel_metric_attribute)s go to the metric whichever comes
/// first;
/// the access line runs before the `on_response_end` hooks; the budget headers are read in
/// one order). Nothing is resolved per request.
///
/// # The response body
///
/// The layer's responses have a [`ResponseBody`](super::ResponseBody): the inner service's
/// body, or the empty body of the layer's own answers (so the inner body needs no
/// `Default`), which reports the end of the response to the access line and the
/// [`on_response_end`](Self::on_response_end) hooks. Adding a hook never changes the layer's
/// type.
#[derive(Clone)]
#[must_use = "a layer does nothing until it wraps a service"]
pub struct SharedHeadersLayer {
    /// What every service gets, resolved from `settings`.
    pub(super) config: Config,
    /// The settings as given, from which `config` is resolved (not cloned into services).
    settings: Settings,
}

impl std::fmt::Debug for SharedHeadersLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedHeadersLayer")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The settings that other settings depend on, as given.
#[derive(Clone)]
struct Settings {
    request: Option<Arc<Policy>>,
    response: Option<Arc<Policy>>,
    propagation: Option<Arc<Propagation>>,
    #[cfg(feature = "tracing")]
    log: Option<Arc<crate::server::access_log::AccessLog>>,
    /// Whether `log` came from `access_log` (it wins over `tracing_access_log`).
    #[cfg(feature = "tracing")]
    log_explicit: bool,
    #[cfg(feature = "opentelemetry")]
    metrics: Option<Arc<crate::server::metrics::HttpServerMetrics>>,
    /// The attributes of `otel_metric_attribute`, in the order added.
    #[cfg(feature = "opentelemetry")]
    metric_attributes: Vec<Arc<crate::server::metrics::AttributeFn>>,
    /// The OpenTelemetry tracer of the server spans (`otel_tracer`).
    #[cfg(feature = "opentelemetry")]
    tracer: Option<Arc<dyn super::otel_trace::StartSpan>>,
    /// The `on_response_end` hooks, in the order added.
    user_end: EndHooks,
    scheme: &'static str,
}

#[derive(Clone)]
pub(super) struct Config {
    pub(super) timeout: Option<Duration>,
    /// Built once from the request [`Builder`]; shared by every request's handle.
    pub(super) request_policy: Option<Arc<Policy>>,
    pub(super) response_policy: Option<Arc<Policy>>,
    /// `quiet_hooks` and the access log's late-writes line.
    pub(super) hooks: CommitHooks,
    /// The user's hooks (`on_commit`, `on_late_writes`): a request's exchange gets these when
    /// no subscriber may take the log's lines.
    pub(super) quiet_hooks: CommitHooks,
    pub(super) copy: HeaderSelection,
    /// The timeout and rejection statuses, the headers of the layer's own answers, and
    /// whether each response carries its `Committed` record in its extensions.
    pub(super) answers: OwnAnswers,
    /// Where the peer's address is, in the request's extensions.
    pub(super) peer: Option<PeerFn>,
    /// The budget headers of the caller taken as the request's deadline (the earliest wins,
    /// and never extends the layer's own).
    pub(super) budgets: Arc<[BudgetHeader]>,
    /// Budget headers refused (malformed or absurd), shared by the layer's clones, its
    /// services and its [`LayerStats`].
    pub(super) refused_budgets: Arc<AtomicU64>,
    /// The consumers of the end of each response (the access line, `on_response_end`).
    pub(super) end: Arc<EndHooks>,
    /// What to capture for the request's context (`propagate`, without the layer's secret
    /// names); `None` when nothing is.
    pub(super) propagation: Option<Arc<crate::context::Propagation>>,
    /// What the captures refused, added up ([`LayerStats::propagation_counts`]).
    pub(super) propagation_counts: Arc<PropagationCounters>,
    /// Deadline-aware admission (`admission`); `None`: off. Its counts and estimates are read
    /// through [`LayerStats`].
    pub(super) admission: Option<Admission>,
    /// The layer's OpenTelemetry tracer (`otel_trace.rs`), also in `end` as a consumer: the
    /// call starts its span.
    #[cfg(feature = "opentelemetry")]
    pub(super) tracer: Option<Arc<super::otel_trace::ServerTracer>>,
    /// The names the access log adds to the credential rule, for every printer of a request's
    /// path (the record's `Debug`, the span): `None` when it adds none.
    pub(super) rule: Option<Arc<crate::redact::QueryRule>>,
}

/// Finds the peer's address in a request's extensions.
pub(super) type PeerFn = Arc<dyn Fn(&http::Extensions) -> Option<SocketAddr> + Send + Sync>;

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("timeout", &self.timeout)
            .field("request_policy", &self.request_policy)
            .field("response_policy", &self.response_policy)
            .field("hooks", &self.hooks)
            .field("copy", &self.copy)
            .field("answers", &self.answers)
            .field("peer", &self.peer.is_some())
            .field("propagation", &self.propagation)
            .finish_non_exhaustive()
    }
}

impl SharedHeadersLayer {
    /// Resolves what every service gets from the settings as given, by one rule each,
    /// whatever the order of the calls that made them. Runs at every setter (building the
    /// layer), never per request.
    ///
    /// Every setter gives the layer fresh counters: two layers configured apart from one base
    /// count apart, as a changed [`Admission`] starts afresh. Only clones made after the last
    /// setter share them. (Admission's state is the [`Admission`]'s own, shared by its clones.)
    fn resolve(mut self) -> Self {
        self.config.refused_budgets = Arc::default();
        self.config.propagation_counts = Arc::default();
        let settings = &self.settings;
        // One secret set for the layer: a name either policy makes secret is secret in both
        // handles, in the access line, and never propagated.
        let mut secrets = Policy::default();
        for policy in [&settings.request, &settings.response]
            .into_iter()
            .flatten()
        {
            for name in policy.secret_names() {
                secrets.add_secret(name.clone());
            }
        }
        let secrets = (!secrets.is_default()).then(|| Arc::new(secrets));
        let with_secrets = |policy: &Option<Arc<Policy>>| match &secrets {
            None => policy.clone(),
            Some(secrets) => {
                let mut merged = policy.as_deref().cloned().unwrap_or_default();
                for name in secrets.secret_names() {
                    merged.add_secret(name.clone());
                }
                Some(Arc::new(merged))
            }
        };
        self.config.request_policy = with_secrets(&settings.request).map(|policy| {
            let mut policy = Arc::unwrap_or_clone(policy);
            policy.annotations = secrets.clone();
            Arc::new(policy)
        });
        self.config.response_policy = with_secrets(&settings.response);
        // A tracer makes every request a hop of its trace (before the secrets are taken out:
        // a secret `traceparent` is never read, tracer or not).
        #[cfg_attr(not(feature = "opentelemetry"), allow(unused_mut))]
        let mut propagation = settings.propagation.as_deref().cloned();
        #[cfg(feature = "opentelemetry")]
        if settings.tracer.is_some() {
            propagation = Some(propagation.unwrap_or_default().trace_hop());
        }
        self.config.propagation = propagation.and_then(|propagation| {
            let kept = propagation.without_secrets(secrets.as_deref());
            (!kept.is_empty()).then(|| Arc::new(kept))
        });

        // The access log's own credential names, for every printer of the path.
        #[cfg(feature = "tracing")]
        let rule = settings.log.as_ref().and_then(|log| log.printers_rule());
        #[cfg(not(feature = "tracing"))]
        let rule = None;
        self.config.rule = rule;

        // The end consumers in one order: the line, the metrics, the span, then the user's
        // hooks.
        let mut end = EndHooks::default();
        end.scheme = settings.scheme;
        #[cfg_attr(not(feature = "tracing"), allow(unused_mut))]
        let mut hooks = self.config.quiet_hooks.clone();
        #[cfg(feature = "tracing")]
        if let Some(log) = &settings.log {
            let log = Arc::new(log.with_secrets(secrets.clone()));
            let late = Arc::clone(&log);
            hooks = hooks.set_tagged_late_writes("access_log", move |l| late.late_writes(l));
            end.add(log);
        }
        #[cfg(feature = "opentelemetry")]
        if let Some(metrics) = &settings.metrics {
            end.add(Arc::new(
                metrics.with_attributes(settings.metric_attributes.clone()),
            ));
        }
        #[cfg(feature = "opentelemetry")]
        if let Some(tracer) = &settings.tracer {
            let tracer = Arc::new(super::otel_trace::ServerTracer {
                tracer: Arc::clone(tracer),
                scheme: settings.scheme,
                rule: self.config.rule.clone(),
            });
            end.add(Arc::clone(&tracer));
            self.config.tracer = Some(tracer);
        } else {
            self.config.tracer = None;
        }
        end.append(&settings.user_end);
        self.config.hooks = hooks;
        self.config.end = Arc::new(end);
        self
    }
}

// The methods by task, in the order the docs show them (keep this order): making the
// layer and reading its counters first.
mod make;
// Deadline.
mod admission;
mod deadline;
// Line and metric.
mod hooks;
#[cfg(feature = "opentelemetry")]
mod otel_trace;
// The request's context.
mod propagate;
// Limits.
mod limits;
// Answers.
mod answers;

/// The live counters of a [`SharedHeadersLayer`], its clones and its services: what they
/// refused, and what admission learned and decided. Made by [`SharedHeadersLayer::stats`]:
/// take it from the layer you serve, after its last setter (a setter gives the layer fresh
/// counters); clones share.
///
/// # Examples
///
/// ```
/// # use shared_headers::server::SharedHeadersLayer;
/// let stats = SharedHeadersLayer::new().stats();
/// assert_eq!(stats.refused_budgets(), 0);
/// ```
#[derive(Debug, Clone)]
pub struct LayerStats {
    refused_budgets: Arc<AtomicU64>,
    propagation: Arc<PropagationCounters>,
    admission: Option<Admission>,
}

impl LayerStats {
    /// How many caller budget headers were refused as malformed or absurd (see
    /// [`SharedHeadersLayer::caller_budget`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersLayer;
    /// assert_eq!(SharedHeadersLayer::new().stats().refused_budgets(), 0);
    /// ```
    pub fn refused_budgets(&self) -> u64 {
        self.refused_budgets.load(Ordering::Relaxed)
    }

    /// What was refused to propagate so far, by reason: request ids replaced, values
    /// malformed, duplicated or over a bound (see [`SharedHeadersLayer::propagate`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let counts = SharedHeadersLayer::new().stats().propagation_counts();
    /// assert_eq!(counts, Default::default());
    /// ```
    pub fn propagation_counts(&self) -> PropagationCounts {
        self.propagation.get()
    }

    /// What admission rejected, spared and queued so far (all zeros without
    /// [`admission`](SharedHeadersLayer::admission)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// use shared_headers::server::{Admission, SharedHeadersLayer};
    ///
    /// let layer = SharedHeadersLayer::new()
    ///     .admission(Admission::new().limit(NonZeroUsize::new(32).unwrap()));
    /// let counts = layer.stats().admission_counts();
    /// assert_eq!((counts.shed, counts.free_permits), (0, 4)); // the limit starts at 4
    /// ```
    pub fn admission_counts(&self) -> AdmissionCounts {
        self.admission
            .as_ref()
            .map(Admission::counts)
            .unwrap_or_default()
    }

    /// Admission's estimate of a route (axum's route template, else the request's path) for
    /// `method`: `None` while the route is warming up, or without
    /// [`admission`](SharedHeadersLayer::admission). Routes that share a slot share an
    /// estimate.
    ///
    /// # Examples
    ///
    /// ```
    /// use shared_headers::server::{Admission, SharedHeadersLayer};
    ///
    /// let stats = SharedHeadersLayer::new().admission(Admission::new()).stats();
    /// assert_eq!(stats.admission_estimate(&http::Method::GET, "/users/{id}"), None);
    /// ```
    pub fn admission_estimate(&self, method: &http::Method, route: &str) -> Option<Duration> {
        self.admission.as_ref()?.estimate(method, route)
    }
}

impl Default for SharedHeadersLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl<S> Layer<S> for SharedHeadersLayer {
    type Service = SharedHeadersService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        SharedHeadersService {
            inner,
            config: self.config.clone(),
        }
    }
}
