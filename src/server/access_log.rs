//! A ready access log on `tracing` (feature `tracing`): one structured event per request at the
//! commit, and one per request whose tasks wrote after the commit.
//!
//! Install it with [`SharedHeadersLayer::tracing_access_log`] (the defaults) or
//! [`SharedHeadersLayer::access_log`] (an [`AccessLog`] with your settings), or call
//! [`AccessLog::commit`] and [`AccessLog::late_writes`] from hooks of your own (for example
//! inside a hook that also counts metrics).
//!
//! Events have the target `shared_headers::access`. Field names follow OpenTelemetry's HTTP
//! semantic conventions where one exists, so `tracing-opentelemetry` exports them as they are;
//! the crate's own fields are under `shared_headers.`:
//!
//! | field | what | example |
//! |---|---|---|
//! | `http.request.method` | the request's method | `GET` |
//! | `url.path` | the request's path | `/users/1` |
//! | `url.query` | the query, with [`redact_query_params`](AccessLog::redact_query_params) values replaced (absent without a query, or with [`omit_query`](AccessLog::omit_query)) | `page=2&token=[redacted]` |
//! | `network.protocol.version` | the request's HTTP version | `1.1`, `2` |
//! | `http.response.status_code` | the status **sent** by the layer (absent if no response left it: failed, cancelled) | `503` |
//! | `client.address`, `client.port` | the peer ([`SharedHeadersLayer::peer_address`]; absent without it) | `127.0.0.1`, `50412` |
//! | `user_agent.original` | the request's `user-agent` (absent if none, or not copied) | `curl/8.5.0` |
//! | `shared_headers.outcome` | who committed ([`Outcome`]) | `timed out` |
//! | `rpc.grpc.status_code` | the `grpc-status` of a gRPC answer the layer made (timeout 4, rejection 8, panic 13; absent otherwise: a handler's status is in its trailers) | `4` |
//! | `shared_headers.latency_ms` | the call of the layer to the commit (the budget used), ms, 3 decimals | `102.182` |
//! | `shared_headers.budget_ms` | the budget the request was given: the call to its deadline ([`Committed::budget`]; absent without a deadline) | `200.000` |
//! | `shared_headers.budget_source` | where the deadline came from: `server` (the layer's `timeout`) or `caller` (a budget header, [`SharedHeadersLayer::caller_budget`]) | `caller` |
//! | `shared_headers.budget_error` | why the caller's budget header was refused, if it was | `a sign before the digits` |
//! | `shared_headers.request_headers` | the sealed request headers | `host: a, accept: */*` |
//! | `shared_headers.response_headers` | the response headers **as sent** (the handler's own included; empty if nothing was sent) | `content-type: text/plain, x-cache: miss` |
//! | `shared_headers.committed_response_headers` | only when nothing was sent: the committed response headers, which were **not** sent | `x-early: 1` |
//! | `shared_headers.annotations` | the sealed annotations | `x-user: ada` |
//!
//! The late-writes event (`writes refused after the commit`, `WARN`) has `http.request.method`,
//! `url.path`, `shared_headers.outcome`, `shared_headers.refused_writes` and
//! `shared_headers.since_commit_ms`.
//!
//! Levels by default: `INFO` for answers below 500, `WARN` for 5xx answers, timeouts,
//! rejections and cancelled requests, `ERROR` for caught panics; each overridable
//! ([`AccessLog::level`]). Every event is emitted inside the request's span: the layer keeps
//! the span that is current when its service is called and enters it to run the hook,
//! whichever thread commits.
//!
//! Header fields are printed with each handle's secret names redacted: a secret value is never
//! in an event. Annotations have no secret names; do not annotate secrets.

use std::fmt;

use tracing::Level;

use crate::exchange::{CommitEvent, Committed, LateWrites, Outcome};
use crate::snapshot::Snapshot;

#[cfg(doc)]
use super::SharedHeadersLayer;

/// The settings of the `tracing` access log: the level of each kind of line and the query's
/// redaction. See the [module docs](self) for the fields.
///
/// # Examples
///
/// ```
/// use tracing::Level;
/// use shared_headers::Outcome;
/// use shared_headers::server::{SharedHeadersLayer, access_log::AccessLog};
///
/// let log = AccessLog::new()
///     .level(Outcome::Cancelled, Level::INFO) // clients hang up all the time here
///     .redact_query_params(["token", "sig"]);
/// let layer = SharedHeadersLayer::new().access_log(log);
/// # drop(layer);
/// ```
#[derive(Debug, Clone)]
pub struct AccessLog {
    answered: Level,
    server_error: Level,
    failed: Level,
    timed_out: Level,
    cancelled: Level,
    rejected: Level,
    panicked: Level,
    query: Query,
}

#[derive(Debug, Clone)]
enum Query {
    Shown { redacted: Vec<String> },
    Omitted,
}

impl Default for AccessLog {
    fn default() -> Self {
        Self::new()
    }
}

impl AccessLog {
    /// The defaults: `INFO` for answers below 500, `WARN` for 5xx answers, failures,
    /// timeouts, rejections and cancellations, `ERROR` for caught panics; the query logged as
    /// it is.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::access_log::AccessLog;
    /// let log = AccessLog::new();
    /// # drop(log);
    /// ```
    pub fn new() -> Self {
        AccessLog {
            answered: Level::INFO,
            server_error: Level::WARN,
            failed: Level::WARN,
            timed_out: Level::WARN,
            cancelled: Level::WARN,
            rejected: Level::WARN,
            panicked: Level::ERROR,
            query: Query::Shown {
                redacted: Vec::new(),
            },
        }
    }

    /// The level of the lines of requests with `outcome`. For [`Outcome::Answered`] it is the
    /// level of answers below 500; 5xx answers have their own
    /// ([`server_error_level`](Self::server_error_level)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::Outcome;
    /// # use shared_headers::server::access_log::AccessLog;
    /// let log = AccessLog::new().level(Outcome::TimedOut, tracing::Level::ERROR);
    /// # drop(log);
    /// ```
    pub fn level(mut self, outcome: Outcome, level: Level) -> Self {
        match outcome {
            Outcome::Answered => self.answered = level,
            Outcome::Failed => self.failed = level,
            Outcome::TimedOut => self.timed_out = level,
            Outcome::Cancelled => self.cancelled = level,
            Outcome::Rejected => self.rejected = level,
            Outcome::Panicked => self.panicked = level,
        }
        self
    }

    /// The level of the lines of answered requests whose status is 5xx. Default `WARN`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::access_log::AccessLog;
    /// let log = AccessLog::new().server_error_level(tracing::Level::ERROR);
    /// # drop(log);
    /// ```
    pub fn server_error_level(mut self, level: Level) -> Self {
        self.server_error = level;
        self
    }

    /// Query parameters whose values are logged as `[redacted]` (names compared exactly,
    /// after no decoding: `token=abc` and `token=` both match `token`).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::access_log::AccessLog;
    /// let log = AccessLog::new().redact_query_params(["token"]);
    /// assert_eq!(log.query_for_log("a=1&token=abc").to_string(), "a=1&token=[redacted]");
    /// ```
    pub fn redact_query_params<S: Into<String>>(
        mut self,
        names: impl IntoIterator<Item = S>,
    ) -> Self {
        self.query = Query::Shown {
            redacted: names.into_iter().map(Into::into).collect(),
        };
        self
    }

    /// Leaves the query out of every line.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::access_log::AccessLog;
    /// let log = AccessLog::new().omit_query();
    /// # drop(log);
    /// ```
    pub fn omit_query(mut self) -> Self {
        self.query = Query::Omitted;
        self
    }

    /// A query as this log prints it (see [`redact_query_params`](Self::redact_query_params)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::access_log::AccessLog;
    /// assert_eq!(AccessLog::new().query_for_log("q=rust").to_string(), "q=rust");
    /// ```
    pub fn query_for_log<'a>(&'a self, query: &'a str) -> impl fmt::Display + 'a {
        QueryShown { log: self, query }
    }

    /// The level of `event`'s line.
    fn level_of(&self, event: &CommitEvent<'_>) -> Level {
        match event.outcome() {
            Outcome::Answered => match event.sent().map(|head| head.status) {
                Some(status) if status.is_server_error() => self.server_error,
                _ => self.answered,
            },
            Outcome::Failed => self.failed,
            Outcome::TimedOut => self.timed_out,
            Outcome::Cancelled => self.cancelled,
            Outcome::Rejected => self.rejected,
            Outcome::Panicked => self.panicked,
            #[allow(unreachable_patterns)]
            _ => self.failed,
        }
    }

    /// Emits the `request committed` event for `event` (see the [module docs](self)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::{SharedHeadersLayer, access_log::AccessLog};
    /// let log = AccessLog::new();
    /// let layer = SharedHeadersLayer::new().on_commit(move |c| {
    ///     log.commit(c);
    ///     // ... and a metric, say
    /// });
    /// # drop(layer);
    /// ```
    pub fn commit(&self, event: &CommitEvent<'_>) {
        let committed: &Committed = event.committed();
        let uri = committed.uri();
        let query = match (&self.query, uri.and_then(|uri| uri.query())) {
            (Query::Shown { .. }, Some(query)) => Some(self.query_for_log(query)),
            _ => None,
        };
        let peer = committed.peer_address();
        let user_agent = committed
            .request()
            .get(http::header::USER_AGENT)
            .and_then(|value| value.to_str().ok());
        let sent = event.sent();
        let grpc_status = sent
            .and_then(|head| head.headers.get("grpc-status"))
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<u16>().ok());
        let source = committed
            .deadline()
            .map(|deadline| match deadline.source() {
                crate::deadline::DeadlineSource::Server => "server",
                crate::deadline::DeadlineSource::Caller => "caller",
                _ => "explicit",
            });
        let budget = committed.budget().map(Millis);
        let budget_error = committed.budget_error();
        macro_rules! emit {
            ($level:expr) => {
                tracing::event!(
                    target: "shared_headers::access",
                    $level,
                    http.request.method = committed.method().map(|m| m.as_str()).unwrap_or(""),
                    url.path = uri.map(|u| u.path()).unwrap_or(""),
                    url.query = query.as_ref().map(tracing::field::display),
                    network.protocol.version = committed.version().map(version_str),
                    http.response.status_code = sent.map(|head| head.status.as_u16()),
                    rpc.grpc.status_code = grpc_status,
                    client.address = peer.map(|peer| tracing::field::display(peer.ip())),
                    client.port = peer.map(|peer| peer.port()),
                    user_agent.original = user_agent,
                    shared_headers.outcome = %committed.outcome(),
                    shared_headers.latency_ms = %Millis(committed.latency()),
                    shared_headers.budget_ms = budget.as_ref().map(tracing::field::display),
                    shared_headers.budget_source = source,
                    shared_headers.budget_error = budget_error.as_ref().map(tracing::field::display),
                    shared_headers.request_headers = %committed.request().redacted(),
                    shared_headers.response_headers = %SentHeaders(event),
                    shared_headers.committed_response_headers = sent
                        .is_none()
                        .then(|| tracing::field::display(committed.response().redacted())),
                    shared_headers.annotations = %Annotations(committed.annotations()),
                    "request committed"
                )
            };
        }
        match self.level_of(event) {
            Level::ERROR => emit!(Level::ERROR),
            Level::WARN => emit!(Level::WARN),
            Level::INFO => emit!(Level::INFO),
            Level::DEBUG => emit!(Level::DEBUG),
            _ => emit!(Level::TRACE),
        }
    }

    /// Emits the `writes refused after the commit` event for `late` (see the
    /// [module docs](self)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::{SharedHeadersLayer, access_log::AccessLog};
    /// let log = AccessLog::new();
    /// let layer = SharedHeadersLayer::new().on_late_writes(move |late| log.late_writes(late));
    /// # drop(layer);
    /// ```
    pub fn late_writes(&self, late: &LateWrites) {
        let committed = late.committed();
        tracing::event!(
            target: "shared_headers::access",
            Level::WARN,
            http.request.method = committed.method().map(|m| m.as_str()).unwrap_or(""),
            url.path = committed.uri().map(|u| u.path()).unwrap_or(""),
            shared_headers.outcome = %committed.outcome(),
            shared_headers.refused_writes = late.refused_writes(),
            shared_headers.since_commit_ms = %Millis(late.since_commit()),
            "writes refused after the commit"
        );
    }
}

/// Emits the `request committed` event for `event` with the default [`AccessLog`] settings.
///
/// # Examples
///
/// ```
/// # use shared_headers::server::{SharedHeadersLayer, access_log};
/// let layer = SharedHeadersLayer::new().on_commit(access_log::commit);
/// # drop(layer);
/// ```
pub fn commit(event: &CommitEvent<'_>) {
    AccessLog::new().commit(event);
}

/// Emits the `writes refused after the commit` event for `late` with the default
/// [`AccessLog`] settings.
///
/// # Examples
///
/// ```
/// # use shared_headers::server::{SharedHeadersLayer, access_log};
/// let layer = SharedHeadersLayer::new().on_late_writes(access_log::late_writes);
/// # drop(layer);
/// ```
pub fn late_writes(late: &LateWrites) {
    AccessLog::new().late_writes(late);
}

fn version_str(version: http::Version) -> &'static str {
    match version {
        http::Version::HTTP_09 => "0.9",
        http::Version::HTTP_10 => "1.0",
        http::Version::HTTP_11 => "1.1",
        http::Version::HTTP_2 => "2",
        http::Version::HTTP_3 => "3",
        _ => "",
    }
}

/// A duration in milliseconds with three decimals (`102.182`), not a raw float.
struct Millis(std::time::Duration);

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let micros = self.0.as_micros();
        write!(f, "{}.{:03}", micros / 1000, micros % 1000)
    }
}

/// The response headers as sent; nothing if no response was sent.
struct SentHeaders<'a, 'b>(&'a CommitEvent<'b>);

impl fmt::Display for SentHeaders<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.sent_redacted() {
            Some(headers) => fmt::Display::fmt(&headers, f),
            None => Ok(()),
        }
    }
}

/// The annotations as the header fields print them; nothing if the request had none.
struct Annotations<'a>(Option<&'a Snapshot>);

impl fmt::Display for Annotations<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(snapshot) => fmt::Display::fmt(&snapshot.redacted(), f),
            None => Ok(()),
        }
    }
}

/// A query with the values of some parameters redacted.
struct QueryShown<'a> {
    log: &'a AccessLog,
    query: &'a str,
}

impl fmt::Display for QueryShown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redacted = match &self.log.query {
            Query::Shown { redacted } if !redacted.is_empty() => redacted,
            _ => return f.write_str(self.query),
        };
        for (i, pair) in self.query.split('&').enumerate() {
            if i > 0 {
                f.write_str("&")?;
            }
            match pair.split_once('=') {
                Some((name, _)) if redacted.iter().any(|r| r == name) => {
                    write!(f, "{name}=[redacted]")?;
                }
                None if redacted.iter().any(|r| r == pair) => write!(f, "{pair}=[redacted]")?,
                _ => f.write_str(pair)?,
            }
        }
        Ok(())
    }
}
