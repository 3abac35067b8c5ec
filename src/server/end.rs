//! The end of a response: one report per request when its response ends ([`ResponseEnd`]),
//! and the list of its consumers ([`EndConsumer`]: the access line, the metrics and the
//! [`on_response_end`](super::SharedHeadersLayer::on_response_end) hooks register themselves;
//! this file names none of them). The body that carries it is in `body.rs`.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use http::StatusCode;

use super::line::RequestLine;
use crate::exchange::Committed;
use crate::redact::QueryRule;
use crate::redact::url::{PathText, QueryShown};
use crate::semconv;

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
    /// The body was sent to its end, as far as the layer can see (the server took it; the
    /// layer does not see the socket, so bytes the server buffered and could not flush count
    /// as sent):
    ///
    /// * on any protocol: the body reported its end (`poll_frame` returned `None`, or
    ///   `is_end_stream` said so, or it yielded its trailers frame, its last, and was
    ///   dropped with no error after it) with at least the bytes its `content-length`
    ///   declares; or
    ///   the response has no body by its method or status (to `HEAD`, a 1xx, 204 or 304
    ///   status) and the server dropped the body unpolled;
    /// * over HTTP/1.x only: the server took all the bytes the response declared (its
    ///   `content-length`, else the body's exact size hint) and dropped the body there, as
    ///   hyper's HTTP/1 server does; or a 2xx to `CONNECT` (the connection becomes a tunnel)
    ///   was dropped unpolled. Over HTTP/2 and later a server polls a body to its end, so a
    ///   body dropped before it reported its end is [`Dropped`](Ending::Dropped), whatever it
    ///   sent.
    Completed,
    /// The body failed (its `poll_frame` returned an error), or reported its end short of
    /// the `content-length` its response declared: the server aborts the response.
    Aborted,
    /// The body was dropped before its end: the server stopped sending (the client went away,
    /// the connection closed).
    Dropped,
    /// The body panicked while the server polled it: its message is
    /// [`ResponseEnd::panic_message`], and its panic goes on with its own payload after the
    /// report (the head has left: no answer can replace the response, and the server drops
    /// it).
    Panicked,
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
            Ending::Panicked => "panicked",
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
///
/// Its `Debug` never prints a secret: the record as [`Committed`]'s `Debug`, the kept sent
/// headers redacted by the layer's secret names and the always-secret ones.
#[derive(Clone)]
pub struct ResponseEnd {
    pub(super) committed: Committed,
    pub(super) status_sent: Option<StatusCode>,
    pub(super) bytes_sent: u64,
    pub(super) duration: Duration,
    pub(super) time_to_head: Option<Duration>,
    pub(super) ending: Ending,
    pub(super) grpc_status: Option<u16>,
    pub(super) panic: Option<Box<str>>,
    pub(super) route: Option<Route>,
    pub(super) sent_headers: Option<Box<http::HeaderMap>>,
    pub(super) scheme: &'static str,
    /// Whether the report runs in the request's own span, which carries its ids (feature
    /// `tracing`): a line written there does not repeat them.
    #[cfg(feature = "tracing")]
    pub(super) ids_in_span: bool,
}

impl fmt::Debug for ResponseEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The response handle's policy holds the layer's secret names (both policies').
        let sent_headers = self.sent_headers.as_deref().map(|sent| {
            let rule = self.committed.line().and_then(|line| line.rule.as_deref());
            self.committed
                .response()
                .redact_with_policy(sent)
                .with_rule(rule)
        });
        f.debug_struct("ResponseEnd")
            .field("committed", &self.committed)
            .field("status_sent", &self.status_sent)
            .field("bytes_sent", &self.bytes_sent)
            .field("duration", &self.duration)
            .field("time_to_head", &self.time_to_head)
            .field("ending", &self.ending)
            .field("grpc_status", &self.grpc_status)
            .field("panic", &self.panic)
            .field("route", &self.route)
            .field("sent_headers", &sent_headers)
            .field("scheme", &self.scheme)
            .finish()
    }
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
    /// let layer = SharedHeadersLayer::new().on_response_end(|end| println!("{:?}", end.status_sent()));
    /// # drop(layer);
    /// ```
    pub fn status_sent(&self) -> Option<StatusCode> {
        self.status_sent
    }

    /// The request line of the request (see [`RequestLine::of`]).
    #[inline]
    pub(crate) fn request_line(&self) -> Option<RequestLine<'_>> {
        RequestLine::of(&self.committed)
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
    /// the commit's [`time_to_commit`](Committed::time_to_commit): a handler that blocks its thread past
    /// its deadline is committed at the deadline, and answered when its thread comes back.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new().on_response_end(|end| println!("{:?}", end.duration()));
    /// # drop(layer);
    /// ```
    pub fn duration(&self) -> Duration {
        self.duration
    }

    /// The time from the call of the layer's service until the response's head left the
    /// layer; `None` if no response left it.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new()
    ///     .on_response_end(|end| println!("head after {:?}", end.time_to_head()));
    /// # drop(layer);
    /// ```
    pub fn time_to_head(&self) -> Option<Duration> {
        self.time_to_head
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

    /// The `grpc-status` of a gRPC call's gRPC response: the request is a gRPC call (its
    /// `content-type` is `application/grpc` or `application/grpc+<format>`, over HTTP/2, or
    /// over HTTP/1.1 with `te: trailers`) and so is the response (the same `content-type`
    /// rule; gRPC-Web's `application/grpc-web…` is neither). From the head of a trailers-only
    /// answer (the layer's own, or the handler's), or from the trailers the body ended with
    /// when they reach the client (over HTTP/1.1, hyper's rule: the body is chunked and the
    /// head's `trailer` names `grpc-status`). `None` for any other response, so that
    /// `rpc.grpc.status_code` never shows without `rpc.system`.
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
    /// or of the response body's ([`Ending::Panicked`]), for `&str` and `String` payloads,
    /// cut to 512 bytes; `None` otherwise.
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

    /// The request's URI scheme (`url.scheme`), as the access line, the metrics and the server
    /// span all print it: the request's own (HTTP/2's `:scheme`, an absolute-form URI), else
    /// the layer's [`default_scheme`](super::SharedHeadersLayer::default_scheme) (`http` by
    /// default); `_OTHER` for a scheme other than `http` and `https` (a bounded value).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new()
    ///     .default_scheme(http::uri::Scheme::HTTPS) // behind a TLS acceptor
    ///     .on_response_end(|end| assert_eq!(end.url_scheme(), "https"));
    /// # drop(layer);
    /// ```
    pub fn url_scheme(&self) -> &'static str {
        semconv::scheme(
            self.request_line().and_then(|line| line.uri().scheme_str()),
            self.scheme,
        )
    }

    /// The server's address and port (`server.address`, `server.port`), as the access line
    /// and the server span print them: the request's authority (HTTP/2's `:authority`, an
    /// absolute-form target), else its `host` header, both as the layer received them (a
    /// handler that rewrites `host` changes no printer's answer); the host escaped as request
    /// text is, without userinfo; the port only when it is not the
    /// [scheme](Self::url_scheme)'s default. `None` without either, or when `host` is one of
    /// the layer's secret names.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new().on_response_end(|end| {
    ///     if let Some((address, port)) = end.server_address() {
    ///         println!("{address} {port:?}");
    ///     }
    /// });
    /// # drop(layer);
    /// ```
    pub fn server_address(&self) -> Option<(Cow<'_, str>, Option<u16>)> {
        // What the record kept at the call, as every printer reads it.
        self.request_line()?.server_address(self.url_scheme())
    }

    /// The request's path as every printer shows it (`url.path`): the values of its
    /// credential path parameters (`;jsessionid=`) redacted by the crate's one rule (with the
    /// names the layer's access log adds to it), request text escaped. `None` for an exchange
    /// the layer did not make.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new().on_response_end(|end| {
    ///     // `GET /a;jsessionid=S3CR3T` prints `/a;jsessionid=[redacted]`.
    ///     println!("{}", end.url_path().map(|path| path.to_string()).unwrap_or_default());
    /// });
    /// # drop(layer);
    /// ```
    pub fn url_path(&self) -> Option<impl fmt::Display + '_> {
        let line = self.committed.line()?;
        Some(PathText {
            rule: QueryRule::or_default(line.rule.as_deref()),
            path: line.uri.path(),
        })
    }

    /// The request's query as the printers show it (`url.query`): the values of credential
    /// parameters redacted by the crate's one rule (with the names the layer's access log
    /// adds to it), URL-valued values redacted as URLs (userinfo, nested query), credential
    /// keys inside JSON-ish values redacted. `None` without a query (or for an exchange the
    /// layer did not make), and when the layer's access log is set to
    /// [`omit_query`](super::access_log::AccessLog::omit_query): then no printer shows it
    /// (the line, the server span, the record's `Debug`).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new().on_response_end(|end| {
    ///     // `?page=2&access_token=S3CR3T` prints `page=2&access_token=[redacted]`.
    ///     if let Some(query) = end.url_query() {
    ///         println!("{query}");
    ///     }
    /// });
    /// # drop(layer);
    /// ```
    pub fn url_query(&self) -> Option<impl fmt::Display + '_> {
        let line = self.committed.line()?;
        let rule = QueryRule::or_default(line.rule.as_deref());
        if matches!(rule, QueryRule::Omitted { .. }) {
            return None;
        }
        Some(QueryShown {
            rule,
            query: line.uri.query()?,
        })
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
        self.request_line()
            .map(|line| semconv::method(line.method()))
    }

    /// OpenTelemetry's `error.type`, a low-cardinality reason, `None` for a success: the
    /// reason the layer knows (`timeout`, `panic`, `cancelled`, `failed` for the inner
    /// service's error, `body_error`, `body_dropped`, `body_panic`), else a 5xx status sent
    /// (`503`), else
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
        if let Some(error) = semconv::outcome_error(self.committed.outcome()) {
            return Some(error);
        }
        match self.ending {
            Ending::Aborted => return Some("body_error"),
            Ending::Dropped => return Some("body_dropped"),
            Ending::Panicked => return Some("body_panic"),
            _ => {}
        }
        if let Some(error) = self.status_sent.and_then(semconv::status_error) {
            return Some(error);
        }
        semconv::grpc_error(self.grpc_status?)
    }

    /// The response headers as sent, when a consumer asked the layer to keep them (an access
    /// log that logs response headers).
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(crate) fn sent_headers(&self) -> Option<&http::HeaderMap> {
        self.sent_headers.as_deref()
    }
}

mod hooks;
#[cfg(any(feature = "tracing", feature = "opentelemetry"))]
pub(super) use hooks::EndConsumer;
pub(super) use hooks::{EndHooks, Tracker};
