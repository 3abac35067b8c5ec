//! The service: one [`Exchange`] per request, committed by the response future.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Instant;

use http::{Request, Response};
use tower_layer::Layer;
use tower_service::Service;

use super::admission::{Refusal, Ticket};
use super::body::ResponseBody;
use super::connect::own_status;
use super::end::route_of;
use super::future::{CommitGuard, ResponseFuture};
use super::layer::{Config, SharedHeadersLayer};
use super::timer::timer;
use crate::context::RequestContext;
use crate::deadline::{Deadline, DeadlineSource};
use crate::exchange::{Exchange, Line, Outcome};

/// The [`Service`] made by [`SharedHeadersLayer`]. See the [module docs](super).
///
/// # Examples
///
/// Calling it in process, without a server:
///
/// ```
/// use std::convert::Infallible;
/// use http::{Request, Response};
/// use shared_headers::{Committed, Exchange, Outcome};
/// use shared_headers::server::SharedHeadersLayer;
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Infallible> {
/// let service = SharedHeadersLayer::new().layer(service_fn(|req: Request<()>| async move {
///     let exchange = req.extensions().get::<Exchange>().unwrap();
///     let _ = exchange.response().insert("x-cache", "hit".parse().unwrap()); // Err only if sealed: the answer is decided
///     Ok::<_, Infallible>(Response::new(String::from("hello")))
/// }));
/// let res = service.oneshot(Request::new(())).await?;
/// assert_eq!(res.headers()["x-cache"], "hit");
/// let committed = res.extensions().get::<Committed>().unwrap();
/// assert_eq!(committed.outcome(), Outcome::Answered);
/// assert_eq!(committed.response()["x-cache"], "hit");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct SharedHeadersService<S> {
    pub(super) inner: S,
    pub(super) config: Config,
}

impl<S> SharedHeadersService<S> {
    /// Wraps `inner` with the defaults of [`SharedHeadersLayer::new`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersService;
    /// let service = SharedHeadersService::new(());
    /// assert_eq!(service.get_ref(), &());
    /// ```
    pub fn new(inner: S) -> Self {
        SharedHeadersLayer::new().layer(inner)
    }
}

impl<S> SharedHeadersService<S> {
    /// The wrapped service.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersService;
    /// assert_eq!(*SharedHeadersService::new(7).get_ref(), 7);
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Unwraps the inner service.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersService;
    /// assert_eq!(SharedHeadersService::new("inner").into_inner(), "inner");
    /// ```
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for SharedHeadersService<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    /// The inner service's readiness. A panic of the inner `poll_ready` is not caught: no
    /// request is in flight yet (nothing to commit, log or answer), and the service that
    /// panicked cannot be assumed ready, so the panic goes on to the caller, as tower-http's
    /// `CatchPanicLayer` lets it (it catches a panic of `call` and of the future, as this
    /// layer does).
    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<ReqBody>) -> Self::Future {
        let started = Instant::now();
        let config = &self.config;
        let received = config.copy.copy(req.headers());
        // Only the limits here: the handle flags the policy's secret values when it is made.
        let admitted = match (&config.request_policy, &received) {
            (Some(policy), Some(received)) => policy.check_limits(received),
            _ => Ok(()),
        };
        // A deadline too far to represent is no deadline.
        let mut deadline = config
            .timeout
            .and_then(|timeout| started.checked_add(timeout))
            .map(|at| Deadline::at(at, DeadlineSource::Server));
        // The same as a budget from `started` (admission compares it with its estimate: no
        // clock arithmetic per request).
        let mut budget = deadline.and(config.timeout);
        let mut budget_error = None;
        for header in config.budgets.iter() {
            match header.parse_from(req.headers()) {
                None => {}
                Some(Ok(caller_budget)) => {
                    if let Some(at) = started.checked_add(caller_budget) {
                        let caller = Deadline::at(at, DeadlineSource::Caller);
                        deadline = Some(deadline.map_or(caller, |own| own.min(caller)));
                        budget = Some(budget.map_or(caller_budget, |own| own.min(caller_budget)));
                    }
                }
                Some(Err(error)) => {
                    config.refused_budgets.fetch_add(1, Ordering::Relaxed);
                    budget_error = Some(error);
                }
            }
        }
        // Admission's queue-start header: the time spent before the layer saw the request
        // comes off the budget and the deadline now, before the line is made, so that the
        // record, the line, the timer and `Deadline::current` tell one deadline.
        // (Its route's hash, for the arrival below.)
        let admission_route = match &config.admission {
            Some(admission) => admission.before(&req, &mut deadline, &mut budget, started),
            None => 0,
        };
        // A gRPC call: a gRPC content-type, over HTTP/2 (and HTTP/3), or over HTTP/1.1 when
        // the request asked for trailers (`te: trailers`, hyper's HTTP/1 server's rule for
        // sending them; never HTTP/1.0, which hyper never chunks). One rule for the layer's
        // answers, `rpc.system` and every `grpc-status` the record keeps.
        let grpc = super::line::is_grpc(req.headers())
            && (req.version() >= http::Version::HTTP_2
                || (req.version() == http::Version::HTTP_11 && te_trailers(req.headers())));
        // A Connect call gets the layer's answers in Connect's words (`connect.rs`).
        let connect = if grpc {
            None
        } else {
            super::connect::detect(req.method(), req.uri(), req.headers())
        };
        // The end of the response is tracked only for an interested consumer (the access
        // log asks its subscriber: one atomic load).
        let tracked = config.end.interested();
        // The server's address, kept once as received (a handler that rewrites `host` changes
        // no printer's answer): the authority, else `host` (a reference count). Only its
        // end's consumers print it.
        let (host, host_secret) = if tracked {
            super::line::received_host(req.uri(), req.headers(), config.request_policy.as_deref())
        } else {
            (None, false)
        };
        // The request's context (its id, the headers that travel on): only when configured.
        let context = match &config.propagation {
            Some(propagation) => capture(propagation, &req, host, host_secret, config, started),
            None => None,
        };
        let host = host.cloned();
        // Over the limits or not, the handle holds the headers as received (with the policy's
        // secret names): a rejected request is committed at once, and its log shows them.
        let line = Line {
            method: req.method().clone(),
            uri: req.uri().clone(),
            version: req.version(),
            peer: config.peer.as_ref().and_then(|peer| peer(req.extensions())),
            deadline,
            budget_error,
            grpc,
            connect,
            rule: config.rule.clone(),
            host,
            host_secret,
        };
        let policies = [
            config.request_policy.clone(),
            config.response_policy.clone(),
        ];
        let end = tracked.then(|| config.end.clone());
        let route = match &end {
            Some(end) => {
                // The metrics' active requests go up (down at the end, reported once).
                end.start(req.method(), req.uri());
                route_of(req.extensions())
            }
            None => None,
        };
        #[cfg(feature = "tracing")]
        let span = match &end {
            // The request's own span (`span.rs`): handler, body and lines run in it.
            Some(end) if end.wants_span() => Some(super::span::request_span(context.as_ref())),
            // Without the access log, whenever a subscriber takes it (a callsite's interest:
            // one atomic load with none).
            _ if tracing::enabled!(target: "shared_headers::request", tracing::Level::INFO) => {
                Some(super::span::request_span(context.as_ref()))
            }
            _ => None,
        };
        // The access log's post-commit activity line only where its lines may be taken.
        let hooks = if end.is_some() && config.end.wants_late_writes() {
            &config.hooks
        } else {
            &config.quiet_hooks
        };
        let exchange = Exchange::for_request(received, policies, hooks, line, context, started);
        let guard = CommitGuard {
            exchange: Some(exchange),
            end,
            route,
            panic: None,
            won: false,
            #[cfg(feature = "tracing")]
            span,
        };
        if admitted.is_err() {
            return ResponseFuture {
                guard,
                inner: None,
                deadline: None,
                answers: config.answers.clone(),
                ticket: Ticket::none(started),
            };
        }
        let exchange = guard.exchange.as_ref().expect("just made");
        // Admission (`server/admission.rs`): shed at arrival (committed here, answered by the
        // future as a rejection's winner), or a ticket: a permit, or a place in the queue.
        let mut ticket = Ticket::none(started);
        if let Some(admission) = &config.admission {
            if let Err(refusal) = admission.arrive(&mut ticket, admission_route, deadline, budget) {
                // A budget spent before arrival is a timeout (gRPC's DEADLINE_EXCEEDED,
                // no `retry-after`); a refusal for load is `Shed`.
                let (outcome, configured) = match refusal {
                    Refusal::Spent => (Outcome::TimedOut, config.answers.timeout_status),
                    Refusal::Load => (Outcome::Shed, admission.shed_status()),
                };
                let status = own_status(exchange, outcome, configured);
                let _ = exchange.commit_with(outcome, Some(status));
                return ResponseFuture {
                    guard,
                    inner: None,
                    deadline: None,
                    answers: config.answers.clone(),
                    ticket: Ticket::none(started),
                };
            }
        }
        if let Some(deadline) = deadline {
            // A gRPC call's timeout is an HTTP 200 with `grpc-status: 4`; a Connect call's,
            // Connect's (`connect.rs`).
            let status = own_status(exchange, Outcome::TimedOut, config.answers.timeout_status);
            timer().arm(deadline.instant(), exchange, status);
        }
        req.extensions_mut().insert(exchange.clone());
        // The deadline is in scope while the inner service is called (and polled: see the
        // future), for the clients deeper down (`Deadline::current`). A guard, not
        // `RequestScope::enter`: a closure would take the request by one more move.
        let scope = deadline.map(Deadline::guard);
        // The context too, when the layer propagates anything (one reference count).
        let context = exchange.context().map(RequestContext::scoped_clone);
        // A panic of `call` itself (a handler that panics before it makes its future) is
        // caught as one of the future is (`AssertUnwindSafe` as there: the request is the
        // inner service's, and the layer's own state is sealed by the commit).
        #[cfg(feature = "tracing")]
        let entered = guard.span.as_ref().map(tracing::Span::enter);
        let inner = catch_unwind(AssertUnwindSafe(|| self.inner.call(req)));
        #[cfg(feature = "tracing")]
        drop(entered);
        drop(context);
        drop(scope);
        let inner = match inner {
            Ok(inner) => Some(inner),
            Err(payload) => {
                let mut guard = guard;
                // Resumes here with `resume_panics`; else committed, answered when polled.
                guard.call_panicked(payload, &config.answers);
                return ResponseFuture {
                    guard,
                    inner: None,
                    deadline: None,
                    answers: config.answers.clone(),
                    ticket,
                };
            }
        };
        ResponseFuture {
            guard,
            inner,
            deadline,
            answers: config.answers.clone(),
            ticket,
        }
    }
}

/// The request's context, what was refused counted (out of line: the path without a
/// propagation stays as short as it was).
#[inline(never)]
fn capture<B>(
    propagation: &crate::context::Propagation,
    req: &Request<B>,
    host: Option<&http::HeaderValue>,
    host_secret: bool,
    config: &Config,
    started: Instant,
) -> Option<RequestContext> {
    // The server's OpenTelemetry span, when the layer has a tracer (`otel_trace.rs`).
    #[cfg(feature = "opentelemetry")]
    let (context, refused) = super::otel_trace::capture(
        propagation,
        req,
        (host, host_secret),
        config.tracer.as_deref(),
        started,
    );
    #[cfg(not(feature = "opentelemetry"))]
    let (context, refused) = (
        propagation.capture(req.headers()),
        started,
        host,
        host_secret,
    )
        .0;
    if !refused.is_empty() {
        config.propagation_counts.add(&refused);
    }
    context
}

/// Whether a request asked for trailers: a `te` token `trailers` (hyper's HTTP/1 server's
/// rule for sending them).
fn te_trailers(headers: &http::HeaderMap) -> bool {
    headers.get_all(http::header::TE).iter().any(|value| {
        value.to_str().is_ok_and(|line| {
            line.split(',')
                .any(|token| token.trim().eq_ignore_ascii_case("trailers"))
        })
    })
}
