//! The layer: configuration shared by every request of a service stack.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http::StatusCode;
use tower_layer::Layer;

mod admission;
mod hooks;
#[cfg(feature = "opentelemetry")]
mod otel_trace;
mod propagate;

pub(super) use propagate::PropagationCounters;

use super::SharedHeadersService;
use super::answer::{OwnAnswerHeaders, OwnAnswers};
use super::copy::RequestHeaderCopy;
use super::end::EndHooks;
use crate::builder::Builder;
use crate::deadline::BudgetHeader;
use crate::exchange::CommitHooks;
use crate::policy::Policy;

#[cfg(doc)]
use crate::exchange::{Committed, Exchange, Outcome};

/// A [`Layer`] that gives every request shared request and response headers and commits them
/// exactly once. See the [module docs](super) for the full semantics.
///
/// # Examples
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
/// # Naming
///
/// Settings are builder methods named after the setting (`timeout`, `timeout_status`, ...),
/// as in tower-http and hyper. Its two getters are counters
/// ([`refused_budgets`](Self::refused_budgets) and
/// [`propagation_counts`](Self::propagation_counts)): a layer is configured once and handed to
/// a service stack.
///
/// # The response body
///
/// The layer's responses have a [`ResponseBody`](super::ResponseBody): the inner service's
/// body, or the empty body of the layer's own answers (so the inner body needs no
/// `Default`), which reports the end of the response to the access line and the
/// [`on_response_end`](Self::on_response_end) hooks. Adding a hook never changes the layer's
/// type.
#[derive(Debug, Clone)]
#[must_use = "a layer does nothing until it wraps a service"]
pub struct SharedHeadersLayer {
    pub(super) config: Config,
}

#[derive(Clone)]
pub(super) struct Config {
    pub(super) timeout: Option<Duration>,
    /// Built once from the request [`Builder`]; shared by every request's handle.
    pub(super) request_policy: Option<Arc<Policy>>,
    pub(super) response_policy: Option<Arc<Policy>>,
    pub(super) hooks: CommitHooks,
    /// `hooks` without the access log's late-writes line: a request's exchange gets these when
    /// no subscriber may take the log's lines.
    pub(super) quiet_hooks: CommitHooks,
    pub(super) copy: RequestHeaderCopy,
    /// The timeout and rejection statuses, the headers of the layer's own answers, and
    /// whether each response carries its `Committed` record in its extensions.
    pub(super) answers: OwnAnswers,
    /// Where the peer's address is, in the request's extensions.
    pub(super) peer: Option<PeerFn>,
    /// The budget headers of the caller taken as the request's deadline (the earliest wins,
    /// and never extends the layer's own).
    pub(super) budgets: Arc<[BudgetHeader]>,
    /// Budget headers refused (malformed or absurd), shared by the layer's clones and
    /// services.
    pub(super) refused_budgets: Arc<AtomicU64>,
    /// The consumers of the end of each response (the access line, `on_response_end`).
    pub(super) end: Arc<EndHooks>,
    /// What to capture for the request's context (`propagate`); `None` when nothing is.
    pub(super) propagation: Option<Arc<crate::context::Propagation>>,
    /// What the captures refused, added up (`propagation_counts`).
    pub(super) propagation_counts: Arc<PropagationCounters>,
    /// Deadline-aware admission (`admission`, in `layer/admission.rs`); `None`: off.
    pub(super) admission: Option<super::admission::Admission>,
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
    /// A layer without a deadline (answering 503 if one is later set with
    /// [`timeout`](Self::timeout)) and without limits on the headers.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersLayer;
    /// use tower::ServiceBuilder;
    /// let service = ServiceBuilder::new()
    ///     .layer(SharedHeadersLayer::new())
    ///     .service_fn(|_req: http::Request<()>| async {
    ///         Ok::<_, std::convert::Infallible>(http::Response::new(()))
    ///     });
    /// # drop(service);
    /// ```
    pub fn new() -> Self {
        SharedHeadersLayer {
            config: Config {
                timeout: None,
                request_policy: None,
                response_policy: None,
                hooks: CommitHooks::new(),
                quiet_hooks: CommitHooks::new(),
                copy: RequestHeaderCopy::all(),
                answers: OwnAnswers {
                    timeout_status: StatusCode::SERVICE_UNAVAILABLE,
                    rejection_status: StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                    record: true,
                    headers: OwnAnswerHeaders::safe(),
                    resume_panics: false,
                },
                peer: None,
                budgets: Arc::from([]),
                refused_budgets: Arc::new(AtomicU64::new(0)),
                end: Arc::new(EndHooks::default()),
                propagation: None,
                propagation_counts: Arc::default(),
                admission: None,
            },
        }
    }
}

impl SharedHeadersLayer {
    /// Enforces a deadline of `duration` per request, counted from the call of the service,
    /// **at the wall clock**.
    ///
    /// When it fires before the inner service answers, the layer commits with
    /// [`Outcome::TimedOut`] at that moment, even if the task serving the request is not being
    /// polled (a handler that blocks its thread, a starved worker): from then on every write is
    /// refused. The response future, when next polled, answers with
    /// [`timeout_status`](Self::timeout_status) and an empty [`ResponseBody`](super::ResponseBody)
    /// (the inner body needs no `Default`); the
    /// inner future is dropped with the response future. If the inner service's answer is
    /// ready when the future is polled and nothing has committed yet, the answer wins (as with
    /// tower's `Timeout`), even past the deadline. If the deadline passes before the response
    /// future is polled for the first time (a starved worker), the inner future is dropped
    /// without ever being polled: the handler does not run at all, and the request is logged as
    /// timed out.
    ///
    /// The commit at the deadline is made by **one thread for the whole process** (shared by
    /// every layer, clone and duration; started at the first deadline, then parked while no
    /// deadline is pending), so it needs no Tokio time driver and works on any runtime; its
    /// queue is a heap ordered by deadline, so deadlines of any mix of lengths fire in order.
    /// That thread runs no user code: it seals the request's handles and wakes the response
    /// future, which makes the timeout answer and runs the [`on_commit`](Self::on_commit) hook
    /// in the request's own task. A hook that sleeps, blocks or panics therefore delays no
    /// other request's deadline. Its cost per request is measured by `benches/layer.rs`
    /// (`layer/per_request/shared_headers_timeout` against `shared_headers`): one heap push
    /// under a short lock. If the thread cannot be started, the deadline is applied when the
    /// future is polled.
    ///
    /// # Panics
    ///
    /// Never because of the runtime: the deadline needs no Tokio runtime and no time driver, so
    /// `call` works outside one too (the thread above does the timing).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new().timeout(Duration::from_millis(250));
    /// # drop(layer);
    /// ```
    pub fn timeout(mut self, duration: Duration) -> Self {
        self.config.timeout = Some(duration);
        self
    }

    /// The status of the response sent when the deadline fires. Default: 503 Service
    /// Unavailable, as Go's `http.TimeoutHandler`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use http::StatusCode;
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new().timeout_status(StatusCode::GATEWAY_TIMEOUT);
    /// # drop(layer);
    /// ```
    pub fn timeout_status(mut self, status: StatusCode) -> Self {
        self.config.answers.timeout_status = status;
        self
    }

    /// Builds every request's request handle with `builder`'s limits and secret names.
    ///
    /// The handle starts as a copy of the received headers, checked against the limits: writes
    /// that would take it past them are refused with
    /// [`Error::LimitExceeded`](crate::Error::LimitExceeded). A request whose headers are over
    /// the limits already is rejected: the inner service is not called, the exchange is
    /// committed with [`Outcome::Rejected`] (its request snapshot holds the headers as
    /// received, for the log), and the layer answers with
    /// [`rejection_status`](Self::rejection_status) and an empty body. The policy is built
    /// once, here, and shared by all handles.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use http::{Request, Response, StatusCode};
    /// use shared_headers::{Builder, Committed, Error, Exchange, Outcome};
    /// use shared_headers::server::SharedHeadersLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let layer = SharedHeadersLayer::new()
    ///     .request_headers(Builder::new().max_entries(2).sensitive(["x-api-key"]));
    /// let service = layer.layer(service_fn(|req: Request<()>| async move {
    ///     let exchange = req.extensions().get::<Exchange>().unwrap();
    ///     let _ = exchange.request().insert("x-user", "ada".parse().unwrap()); // 2 of 2 (Err only if sealed)
    ///     let over = exchange.request().append("x-more", "1".parse().unwrap());
    ///     assert!(matches!(over, Err(Error::LimitExceeded { .. })));
    ///     Ok::<_, Infallible>(Response::new(String::from("hello")))
    /// }));
    ///
    /// let req = Request::builder().header("x-api-key", "s3cr3t").body(())?;
    /// let res = service.clone().oneshot(req).await?;
    /// assert_eq!(res.status(), StatusCode::OK);
    /// let committed = res.extensions().get::<Committed>().unwrap();
    /// assert!(!format!("{committed:?}").contains("s3cr3t")); // a secret name: redacted
    ///
    /// let req = Request::builder()
    ///     .header("x-a", "1").header("x-b", "2").header("x-c", "3")
    ///     .body(())?;
    /// let res = service.oneshot(req).await?;
    /// assert_eq!(res.status(), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    /// let committed = res.extensions().get::<Committed>().unwrap();
    /// assert_eq!(committed.outcome(), Outcome::Rejected);
    /// assert_eq!(committed.request().len(), 3);
    /// # Ok(())
    /// # }
    /// ```
    pub fn request_headers(mut self, builder: Builder) -> Self {
        self.config.request_policy = builder.into_policy();
        // A name this policy keeps secret never travels (`propagate`).
        if let Some(propagation) = &self.config.propagation {
            let kept = propagation.without_secrets(self.config.request_policy.as_deref());
            self.config.propagation = (!kept.is_empty()).then(|| Arc::new(kept));
        }
        self
    }

    /// Builds every request's response handle with `builder`'s limits and secret names.
    ///
    /// Writes that would take the response headers past the limits are refused with
    /// [`Error::LimitExceeded`](crate::Error::LimitExceeded); secret names are redacted when
    /// the handle, its snapshots or the [`Committed`] record are printed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use http::{Request, Response};
    /// use shared_headers::{Builder, Committed, Error, Exchange, Limit};
    /// use shared_headers::server::SharedHeadersLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let layer = SharedHeadersLayer::new()
    ///     .response_headers(Builder::new().max_bytes(64).sensitive(["x-session"]));
    /// let service = layer.layer(service_fn(|req: Request<()>| async move {
    ///     let exchange = req.extensions().get::<Exchange>().unwrap();
    ///     let _ = exchange.response().insert("x-session", "s3cr3t".parse().unwrap()); // Err only if sealed: the answer is decided
    ///     let huge = "a".repeat(100).parse().unwrap();
    ///     let refused = exchange.response().insert("x-huge", huge);
    ///     assert!(matches!(refused, Err(Error::LimitExceeded { limit: Limit::Bytes, .. })));
    ///     Ok::<_, Infallible>(Response::new(String::new()))
    /// }));
    /// let res = service.oneshot(Request::new(())).await?;
    /// assert_eq!(res.headers()["x-session"], "s3cr3t"); // sent as written
    /// assert!(!res.headers().contains_key("x-huge"));
    /// let committed = res.extensions().get::<Committed>().unwrap();
    /// assert!(!format!("{committed:?}").contains("s3cr3t")); // never logged
    /// # Ok(())
    /// # }
    /// ```
    pub fn response_headers(mut self, builder: Builder) -> Self {
        self.config.response_policy = builder.into_policy();
        self
    }

    /// The status of the response sent when a request is rejected because its headers are
    /// over the [`request_headers`](Self::request_headers) limits. Default: 431 Request Header
    /// Fields Too Large.
    ///
    /// # Examples
    ///
    /// ```
    /// # use http::StatusCode;
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new().rejection_status(StatusCode::BAD_REQUEST);
    /// # drop(layer);
    /// ```
    pub fn rejection_status(mut self, status: StatusCode) -> Self {
        self.config.answers.rejection_status = status;
        self
    }

    /// Which received request headers are copied into each request handle: all of them (the
    /// default), a named allowlist, or none. See [`RequestHeaderCopy`] for the semantics (what
    /// is not copied is not logged and not checked against the limits).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::{RequestHeaderCopy, SharedHeadersLayer};
    /// let layer = SharedHeadersLayer::new().copy_request_headers(RequestHeaderCopy::none());
    /// # drop(layer);
    /// ```
    pub fn copy_request_headers(mut self, copy: RequestHeaderCopy) -> Self {
        self.config.copy = copy;
        self
    }

    /// Takes the caller's budget from `header` as the request's deadline when it is earlier
    /// than the layer's own ([`timeout`](Self::timeout)): gRPC's `grpc-timeout`
    /// ([`BudgetHeader::grpc_timeout`]), Connect's `connect-timeout-ms`, Envoy's
    /// `x-envoy-expected-rq-timeout-ms`, or a header you name ([`BudgetHeader::millis`]).
    /// Called several times, each header is read and the earliest deadline wins. Off unless
    /// set.
    ///
    /// The effective deadline is the smaller of the caller's and the server's: **a caller can
    /// shorten the deadline, never extend it**; without a `timeout`, the caller's budget is the
    /// deadline. It is enforced exactly like the layer's own (the same commit, answer and log
    /// line), readable by the handler ([`Exchange::deadline`]) and by clients deeper down
    /// ([`Deadline::current`](crate::deadline::Deadline::current)), and kept in the record
    /// ([`Committed::deadline`], [`Committed::budget`]). A malformed or absurd value (a sign,
    /// 9 digits in `grpc-timeout`, an unknown unit, not digits) is refused: the layer's own
    /// deadline applies, the refusal is counted ([`refused_budgets`](Self::refused_budgets))
    /// and kept in the record ([`RequestLine::budget_error`](crate::server::RequestLine::budget_error)); parsing never panics (fuzzed:
    /// `fuzz/fuzz_targets/budget.rs`).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use std::time::Duration;
    /// use http::{Request, Response, StatusCode};
    /// use shared_headers::Exchange;
    /// use shared_headers::deadline::{BudgetHeader, DeadlineSource};
    /// use shared_headers::server::SharedHeadersLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let layer = SharedHeadersLayer::new()
    ///     .timeout(Duration::from_secs(5))
    ///     .caller_budget(BudgetHeader::envoy_expected_rq_timeout_ms());
    /// let service = layer.clone().layer(service_fn(|req: Request<()>| async move {
    ///     let deadline = req.extensions().get::<Exchange>().unwrap().deadline().unwrap();
    ///     assert_eq!(deadline.source(), DeadlineSource::Caller);
    ///     tokio::time::sleep(Duration::from_secs(1)).await; // over the caller's 20 ms
    ///     Ok::<_, Infallible>(Response::new(String::new()))
    /// }));
    /// let req = Request::get("/").header("x-envoy-expected-rq-timeout-ms", "20").body(())?;
    /// let res = service.clone().oneshot(req).await?;
    /// assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    ///
    /// let req = Request::get("/").header("x-envoy-expected-rq-timeout-ms", "-1").body(())?;
    /// let _ = tokio::time::timeout(Duration::from_millis(50), service.oneshot(req)).await;
    /// assert_eq!(layer.refused_budgets(), 1); // refused; the server's 5 s applied
    /// # Ok(())
    /// # }
    /// ```
    pub fn caller_budget(mut self, header: BudgetHeader) -> Self {
        let mut budgets = self.config.budgets.to_vec();
        budgets.push(header);
        self.config.budgets = budgets.into();
        self
    }

    /// How many caller budget headers this layer (with its clones and services) refused as
    /// malformed or absurd (see [`caller_budget`](Self::caller_budget)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersLayer;
    /// assert_eq!(SharedHeadersLayer::new().refused_budgets(), 0);
    /// ```
    pub fn refused_budgets(&self) -> u64 {
        self.config.refused_budgets.load(Ordering::Relaxed)
    }

    /// Which committed response headers the layer's own answers (timeout, rejection, a caught
    /// panic) carry. Default: [`OwnAnswerHeaders::safe`], every committed header except the
    /// representation, framing, validator and caching headers of [`OwnAnswerHeaders::never`],
    /// which no own answer ever carries. See [`OwnAnswerHeaders`] for the list and why.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::{OwnAnswerHeaders, SharedHeadersLayer};
    /// let layer = SharedHeadersLayer::new()
    ///     .own_answer_headers(OwnAnswerHeaders::only(["x-request-id"]));
    /// # drop(layer);
    /// ```
    pub fn own_answer_headers(mut self, headers: OwnAnswerHeaders) -> Self {
        self.config.answers.headers = headers;
        self
    }

    /// Where the peer's address is in a request's extensions, for the record
    /// ([`RequestLine::peer_address`](crate::server::RequestLine::peer_address)) and the access log (`client.address`): `f` gets the
    /// request's extensions at the call. The server puts it there: axum's
    /// `ConnectInfo<SocketAddr>` (with `into_make_service_with_connect_info`), or an extension
    /// your accept loop inserts. Default: none.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use std::net::SocketAddr;
    /// use http::{Request, Response};
    /// use shared_headers::Committed;
    /// use shared_headers::server::{RequestLine, SharedHeadersLayer};
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// #[derive(Clone)]
    /// struct Peer(SocketAddr); // what an accept loop would insert, like axum's ConnectInfo
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let layer = SharedHeadersLayer::new()
    ///     .peer_address(|ext| ext.get::<Peer>().map(|peer| peer.0));
    /// let service = layer.layer(service_fn(|_req: Request<()>| async {
    ///     Ok::<_, Infallible>(Response::new(String::new()))
    /// }));
    /// let mut req = Request::new(());
    /// req.extensions_mut().insert(Peer("127.0.0.1:4000".parse()?));
    /// let res = service.oneshot(req).await?;
    /// let committed = res.extensions().get::<Committed>().unwrap();
    /// let line = RequestLine::of(committed).unwrap();
    /// assert_eq!(line.peer_address(), Some("127.0.0.1:4000".parse()?));
    /// # Ok(())
    /// # }
    /// ```
    pub fn peer_address(
        mut self,
        f: impl Fn(&http::Extensions) -> Option<SocketAddr> + Send + Sync + 'static,
    ) -> Self {
        self.config.peer = Some(Arc::new(f));
        self
    }

    /// Whether each response carries its [`Committed`] record in its extensions (the default:
    /// `true`), for an outer layer to read (`res.extensions().get::<Committed>()`).
    ///
    /// With `false` the record reaches the log only through the [`on_commit`](Self::on_commit)
    /// hook (as with `tracing_access_log`): the layer still
    /// commits, seals and merges the committed response headers into every response exactly as
    /// before, and the hook runs for every outcome, but no response carries the record, so an
    /// outer layer finds none. It saves what the record costs a response that nobody reads it
    /// from: the response's first extension (`http::Extensions` allocates its map, its table
    /// and a box for the value: 3 allocations per request, with their frees), measured by
    /// `benches/alloc.rs` and `benches/layer.rs` (`layer_timeout_hook_no_record`). Handlers
    /// still reach the exchange in the request's extensions, and
    /// [`Exchange::committed`] still gives the record to anyone holding the exchange.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use std::sync::{Arc, Mutex};
    /// use http::{Request, Response};
    /// use shared_headers::{Committed, Exchange};
    /// use shared_headers::server::SharedHeadersLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// let lines = log.clone();
    /// let layer = SharedHeadersLayer::new()
    ///     .on_commit(move |c| lines.lock().unwrap().push(c.committed().response()["x-cache"].clone()))
    ///     .record_in_response(false);
    /// let service = layer.layer(service_fn(|req: Request<()>| async move {
    ///     let exchange = req.extensions().get::<Exchange>().unwrap();
    ///     let _ = exchange.response().insert("x-cache", "hit".parse().unwrap()); // Err only if sealed: the answer is decided
    ///     Ok::<_, Infallible>(Response::new(String::new()))
    /// }));
    /// let res = service.oneshot(Request::new(())).await?;
    /// assert_eq!(res.headers()["x-cache"], "hit"); // merged as always
    /// assert!(res.extensions().get::<Committed>().is_none()); // no record in the response
    /// assert_eq!(*log.lock().unwrap(), ["hit"]); // the hook had it
    /// # Ok(())
    /// # }
    /// ```
    pub fn record_in_response(mut self, record: bool) -> Self {
        self.config.answers.record = record;
        self
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
