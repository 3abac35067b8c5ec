//! The end of a response: one report per request when its response ends ([`ResponseEnd`]),
//! for the access line, the metrics and the
//! [`on_response_end`](super::SharedHeadersLayer::on_response_end) hooks; the body that carries
//! it is in `body.rs`.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::{Method, StatusCode};

use crate::exchange::{Committed, Outcome, contain};
use crate::sync::AtomicU64;

/// [`Tracker::complete_at`] of a body whose length is not known.
pub(super) const UNKNOWN_LENGTH: u64 = u64::MAX;

/// How a response ended (see [`ResponseEnd`]).
///
/// # Examples
///
/// ```
/// use shared_headers::server::{Ending, SharedHeadersLayer};
///
/// let layer = SharedHeadersLayer::new().on_response_end(|end| {
///     if end.ending() == Ending::Dropped {
///         eprintln!("the client went away after {} bytes", end.bytes_sent());
///     }
/// });
/// # drop(layer);
/// assert_eq!(Ending::Completed.to_string(), "completed");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Ending {
    /// The body was sent to its end: its last frame was taken by the server, or the server
    /// took all the bytes the response declared (its `content-length`, or the body's exact
    /// size hint) and dropped it there, as an HTTP/1.1 server does. A response without a
    /// body (to `HEAD`, a 1xx, 204 or 304 status, a 2xx to `CONNECT`) completes when the
    /// server drops its body unpolled.
    Completed,
    /// The body failed (its `poll_frame` returned an error): the server aborts the response.
    Aborted,
    /// The body was dropped before its end: the server stopped sending (the client went away,
    /// the connection closed).
    Dropped,
    /// No response left the layer: the request failed (the inner service's error passed
    /// through), was cancelled (its future was dropped), or its panic was resumed
    /// ([`resume_panics`](super::SharedHeadersLayer::resume_panics)).
    Unsent,
}

impl fmt::Display for Ending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Ending::Completed => "completed",
            Ending::Aborted => "aborted",
            Ending::Dropped => "dropped",
            Ending::Unsent => "unsent",
        })
    }
}

/// The route template of a request (axum's `MatchedPath`, feature `axum`).
#[cfg(feature = "axum")]
pub(super) type Route = axum::extract::MatchedPath;

/// No route without axum: a type with no value.
#[cfg(not(feature = "axum"))]
#[derive(Debug, Clone)]
pub(super) enum Route {}

/// The route of a request, from its extensions (axum puts its `MatchedPath` there when the
/// layer is added with `Router::layer`, inside the router).
#[inline]
pub(super) fn route_of(extensions: &http::Extensions) -> Option<Route> {
    #[cfg(feature = "axum")]
    return extensions.get::<Route>().cloned();
    #[cfg(not(feature = "axum"))]
    {
        let _ = extensions;
        None
    }
}

fn route_str(route: &Route) -> &str {
    #[cfg(feature = "axum")]
    return route.as_str();
    #[cfg(not(feature = "axum"))]
    match *route {}
}

/// OpenTelemetry's `http.request.method` for `method`: the method if RFC 9110 or RFC 5789
/// defines it, else `_OTHER`.
pub(super) fn otel_method(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::CONNECT => "CONNECT",
        Method::OPTIONS => "OPTIONS",
        Method::TRACE => "TRACE",
        Method::PATCH => "PATCH",
        _ => "_OTHER",
    }
}

/// A 5xx status as a static string (`StatusCode::as_str` borrows the status).
pub(super) fn status_str(status: StatusCode) -> &'static str {
    const CODES: [&str; 12] = [
        "500", "501", "502", "503", "504", "505", "506", "507", "508", "509", "510", "511",
    ];
    CODES
        .get(usize::from(status.as_u16() - 500))
        .copied()
        .unwrap_or("5xx")
}

/// OpenTelemetry's `network.protocol.version` for `version`.
#[cfg_attr(
    not(any(feature = "tracing", feature = "opentelemetry")),
    allow(dead_code)
)]
pub(super) fn version_str(version: http::Version) -> &'static str {
    match version {
        http::Version::HTTP_09 => "0.9",
        http::Version::HTTP_10 => "1.0",
        http::Version::HTTP_11 => "1.1",
        http::Version::HTTP_2 => "2",
        http::Version::HTTP_3 => "3",
        _ => "",
    }
}

/// The end of one request's response, as the access line and the
/// [`on_response_end`](super::SharedHeadersLayer::on_response_end) hooks see it: nginx's
/// `$body_bytes_sent` and `$request_time`, with the commit's record.
///
/// There is exactly one per request, whatever the outcome: when the last frame of the body
/// was taken by the server, when the body failed, when it was dropped before its end (the
/// client went away), or, for a request that got no response from the layer (failed,
/// cancelled by a client that hung up or an outer timeout), when the layer knew it.
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use std::sync::mpsc;
/// use http::{Request, Response};
/// use http_body_util::{BodyExt, Full};
/// use hyper::body::Bytes;
/// use shared_headers::server::{Ending, SharedHeadersLayer};
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let (tx, rx) = mpsc::channel();
/// let layer = SharedHeadersLayer::new()
///     .on_response_end(move |end| tx.send((end.ending(), end.bytes_sent())).unwrap());
/// let service = layer.layer(service_fn(|_req: Request<()>| async {
///     Ok::<_, Infallible>(Response::new(Full::new(Bytes::from("hello"))))
/// }));
/// let res = service.oneshot(Request::new(())).await?;
/// assert!(rx.try_recv().is_err()); // the body was not sent yet
/// let body = res.into_body().collect().await?.to_bytes();
/// assert_eq!(body, "hello");
/// assert_eq!(rx.try_recv()?, (Ending::Completed, 5));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ResponseEnd {
    pub(super) committed: Committed,
    pub(super) status: Option<StatusCode>,
    pub(super) bytes_sent: u64,
    pub(super) elapsed: Duration,
    pub(super) head: Option<Duration>,
    pub(super) ending: Ending,
    pub(super) grpc_status: Option<u16>,
    pub(super) panic: Option<Box<str>>,
    pub(super) route: Option<Route>,
    pub(super) sent_headers: Option<Box<http::HeaderMap>>,
    pub(super) scheme: &'static str,
}

impl ResponseEnd {
    /// The record of the request's commit.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new()
    ///     .on_response_end(|end| println!("{}", end.committed().outcome()));
    /// # drop(layer);
    /// ```
    pub fn committed(&self) -> &Committed {
        &self.committed
    }

    /// The status of the response that left the layer; `None` if none did
    /// ([`Ending::Unsent`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new().on_response_end(|end| println!("{:?}", end.status()));
    /// # drop(layer);
    /// ```
    pub fn status(&self) -> Option<StatusCode> {
        self.status
    }

    /// The bytes of body data the server took from the body (`$body_bytes_sent`): for a
    /// [`Ending::Dropped`] body, what was taken before the drop.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new().on_response_end(|end| println!("{}", end.bytes_sent()));
    /// # drop(layer);
    /// ```
    pub fn bytes_sent(&self) -> u64 {
        self.bytes_sent
    }

    /// The time from the call of the layer's service to the end (`$request_time`, and
    /// OpenTelemetry's `http.server.request.duration`): the last frame taken, the error, the
    /// drop, or, for a request that got no response, the moment the layer knew it. It is not
    /// the commit's [`latency`](Committed::latency): a handler that blocks its thread past
    /// its deadline is committed at the deadline, and answered when its thread comes back.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new().on_response_end(|end| println!("{:?}", end.elapsed()));
    /// # drop(layer);
    /// ```
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// The time from the call of the layer's service until the response's head left the
    /// layer; `None` if no response left it.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new()
    ///     .on_response_end(|end| println!("head after {:?}", end.head_elapsed()));
    /// # drop(layer);
    /// ```
    pub fn head_elapsed(&self) -> Option<Duration> {
        self.head
    }

    /// How the response ended.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::{Ending, SharedHeadersLayer};
    /// let layer = SharedHeadersLayer::new()
    ///     .on_response_end(|end| assert_ne!(end.ending().to_string(), ""));
    /// # drop(layer);
    /// ```
    pub fn ending(&self) -> Ending {
        self.ending
    }

    /// The `grpc-status` of a gRPC response: from the trailers the body ended with, or from
    /// the head of a trailers-only answer (the layer's own, or the handler's). `None` for
    /// other responses.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new()
    ///     .on_response_end(|end| println!("grpc-status {:?}", end.grpc_status()));
    /// # drop(layer);
    /// ```
    pub fn grpc_status(&self) -> Option<u16> {
        self.grpc_status
    }

    /// The message of the handler's panic ([`Outcome::Panicked`](crate::Outcome::Panicked)),
    /// for `&str` and `String` payloads, cut to 512 bytes; `None` otherwise.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new().on_response_end(|end| {
    ///     if let Some(message) = end.panic_message() {
    ///         eprintln!("handler panicked: {message}");
    ///     }
    /// });
    /// # drop(layer);
    /// ```
    pub fn panic_message(&self) -> Option<&str> {
        self.panic.as_deref()
    }

    /// The request's route template (`/users/{id}`), when the router said it: axum's
    /// `MatchedPath` (feature `axum`, with the layer added by `Router::layer`). Never the raw
    /// path.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new()
    ///     .on_response_end(|end| println!("{}", end.route().unwrap_or("-")));
    /// # drop(layer);
    /// ```
    pub fn route(&self) -> Option<&str> {
        self.route.as_ref().map(route_str)
    }

    /// The request's URI scheme (`url.scheme`): the request's own (HTTP/2's `:scheme`, an
    /// absolute-form URI), else the layer's [`default_scheme`](super::SharedHeadersLayer::default_scheme)
    /// (`http` by default).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new()
    ///     .default_scheme("https") // behind a TLS acceptor
    ///     .on_response_end(|end| assert_eq!(end.url_scheme(), "https"));
    /// # drop(layer);
    /// ```
    pub fn url_scheme(&self) -> &str {
        self.committed
            .uri()
            .and_then(http::Uri::scheme_str)
            .unwrap_or(self.scheme)
    }

    /// OpenTelemetry's `http.request.method`: the method if RFC 9110 or RFC 5789 (PATCH)
    /// defines it, else `_OTHER` (the method as received is [`Committed::method`]). The
    /// access line and the metrics (feature `opentelemetry`) both use it.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new()
    ///     .on_response_end(|end| assert_ne!(end.otel_method(), Some("PURGE")));
    /// # drop(layer);
    /// ```
    pub fn otel_method(&self) -> Option<&'static str> {
        self.committed.method().map(otel_method)
    }

    /// OpenTelemetry's `error.type`, a low-cardinality reason, `None` for a success: the
    /// reason the layer knows (`timeout`, `panic`, `cancelled`, `failed` for the inner
    /// service's error, `body_error`, `body_dropped`), else a 5xx status sent (`503`), else
    /// the code of a server-error `grpc-status` (`2`, `4`, `12`, `13`, `14`, `15`). The access
    /// line and the metrics (feature `opentelemetry`) both use it, so they always agree.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new().on_response_end(|end| {
    ///     if let Some(error) = end.error_type() {
    ///         eprintln!("request failed: {error}");
    ///     }
    /// });
    /// # drop(layer);
    /// ```
    pub fn error_type(&self) -> Option<&'static str> {
        match self.committed.outcome() {
            Outcome::TimedOut => return Some("timeout"),
            Outcome::Panicked => return Some("panic"),
            Outcome::Cancelled => return Some("cancelled"),
            Outcome::Failed => return Some("failed"),
            Outcome::Answered | Outcome::Rejected => {}
        }
        match self.ending {
            Ending::Aborted => return Some("body_error"),
            Ending::Dropped => return Some("body_dropped"),
            _ => {}
        }
        if let Some(status) = self.status.filter(StatusCode::is_server_error) {
            return Some(status_str(status));
        }
        // gRPC's server errors (OpenTelemetry's RPC conventions).
        match self.grpc_status? {
            2 => Some("2"),
            4 => Some("4"),
            12 => Some("12"),
            13 => Some("13"),
            14 => Some("14"),
            15 => Some("15"),
            _ => None,
        }
    }

    /// The response headers as sent, when a consumer asked the layer to keep them (an access
    /// log that logs response headers).
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(crate) fn sent_headers(&self) -> Option<&http::HeaderMap> {
        self.sent_headers.as_deref()
    }
}

type EndFn = dyn Fn(&ResponseEnd) + Send + Sync + 'static;

/// One consumer of the end of a response.
#[derive(Clone)]
pub(super) enum EndHook {
    User(Arc<EndFn>),
    #[cfg(feature = "tracing")]
    Log(Arc<super::access_log::AccessLog>),
    #[cfg(feature = "opentelemetry")]
    Metrics(Arc<super::metrics::HttpServerMetrics>),
}

/// The consumers of the end of each response, in the order added.
#[derive(Clone)]
pub(super) struct EndHooks {
    pub(super) list: Vec<EndHook>,
    /// `url.scheme` when the request's URI has none.
    pub(super) scheme: &'static str,
}

impl Default for EndHooks {
    fn default() -> Self {
        EndHooks {
            list: Vec::new(),
            scheme: "http",
        }
    }
}

impl fmt::Debug for EndHooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EndHooks")
            .field("hooks", &self.list.len())
            .finish()
    }
}

impl EndHooks {
    /// Whether any consumer wants this request's end: a user hook always, the access log
    /// when a subscriber takes its least severe level (one atomic load).
    #[inline]
    pub(super) fn interested(&self) -> bool {
        self.list.iter().any(|hook| match hook {
            EndHook::User(_) => true,
            #[cfg(feature = "tracing")]
            EndHook::Log(log) => log.interested(),
            // Its active-requests counter went up at the call: it must come down at the end.
            #[cfg(feature = "opentelemetry")]
            EndHook::Metrics(_) => true,
        })
    }

    /// The start of a tracked request: the metrics' active-requests counter goes up (it
    /// comes down in their end report, made exactly once for a tracked request). Nothing
    /// without feature `opentelemetry`.
    #[inline]
    pub(super) fn start(&self, method: &Method, uri: &http::Uri) {
        #[cfg(feature = "opentelemetry")]
        for hook in &self.list {
            if let EndHook::Metrics(metrics) = hook {
                let scheme = super::metrics::scheme_of(uri.scheme_str(), self.scheme);
                contain(|| metrics.start(otel_method(method), scheme));
            }
        }
        #[cfg(not(feature = "opentelemetry"))]
        let _ = (method, uri);
    }

    /// Whether a consumer needs the response headers as sent.
    #[inline]
    pub(super) fn wants_sent_headers(&self) -> bool {
        #[cfg(feature = "tracing")]
        return self
            .list
            .iter()
            .any(|hook| matches!(hook, EndHook::Log(log) if log.logs_response_headers()));
        #[cfg(not(feature = "tracing"))]
        false
    }

    /// Whether the access log is there and may be taken by a subscriber (then the request's
    /// exchange carries the log's late-writes line).
    #[inline]
    pub(super) fn log_interested(&self) -> bool {
        #[cfg(feature = "tracing")]
        return self
            .list
            .iter()
            .any(|hook| matches!(hook, EndHook::Log(log) if log.interested()));
        #[cfg(not(feature = "tracing"))]
        false
    }

    /// Whether a consumer is the access log (which wants the request's span).
    #[cfg(feature = "tracing")]
    #[inline]
    pub(super) fn wants_span(&self) -> bool {
        self.list.iter().any(|hook| matches!(hook, EndHook::Log(_)))
    }

    fn report(&self, end: &ResponseEnd) {
        for hook in &self.list {
            match hook {
                EndHook::User(f) => contain(|| f(end)),
                #[cfg(feature = "tracing")]
                EndHook::Log(log) => contain(|| log.end(end)),
                #[cfg(feature = "opentelemetry")]
                EndHook::Metrics(metrics) => contain(|| metrics.end(end)),
            }
        }
    }
}

/// What the end of a response needs, carried by its body (inline: no allocation).
pub(super) struct Tracker {
    pub(super) hooks: Arc<EndHooks>,
    pub(super) end: ResponseEnd,
    /// The bytes sent at which the body is complete (see `ResponseBody`'s drop): its declared
    /// length (the response's `content-length`, lowered by an exact size hint the server
    /// asked for), 0 once the body said it is at its end, [`UNKNOWN_LENGTH`] else. An atomic
    /// for `Body::size_hint` and `Body::is_end_stream`, which take `&self`; only the body's
    /// own thread touches it (relaxed loads and stores: plain moves, no read-modify-write).
    pub(super) complete_at: AtomicU64,
    #[cfg(feature = "tracing")]
    pub(super) span: Option<tracing::Span>,
}

impl Tracker {
    /// Reports the end: `ending`, the elapsed time now.
    pub(super) fn report(mut self, ending: Ending) {
        self.end.ending = ending;
        self.end.elapsed = self.end.committed.started().elapsed();
        #[cfg(feature = "tracing")]
        let _entered = self.span.as_ref().map(tracing::Span::enter);
        self.hooks.report(&self.end);
    }
}
