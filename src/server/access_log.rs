//! A ready access log on `tracing` (feature `tracing`): one structured line per request when
//! its response ends, safe by default, and one line per request whose tasks wrote after the
//! commit.
//!
//! Install it with [`SharedHeadersLayer::tracing_access_log`] (the defaults) or
//! [`SharedHeadersLayer::access_log`] (an [`AccessLog`] with your settings). It adds up with
//! the layer's other hooks. [`AccessLog::commit`] emits a line at the commit instead, for an
//! `on_commit` hook of your own.
//!
//! # When
//!
//! One line per request, `request completed`, when nginx writes its access line and
//! OpenTelemetry ends `http.server.request.duration`: when the server took the last frame of
//! the response body, when the body failed, when it was dropped before its end (the client
//! went away), or, for a request that got no response from the layer (its future dropped by a
//! client that hung up or an outer timeout, an error of the inner service, a resumed panic),
//! when the layer knew it. Exactly one per request, for every outcome.
//!
//! # Safe by default
//!
//! With no configuration the line prints **no header value** except `user-agent`
//! (`user_agent.original`), `referer` (`http.request.header.referer`, its query redacted as
//! below) and the host (`server.address`): nginx's `combined` format logs the same two
//! headers, and none of them carries a credential. Query parameters whose names mark
//! credentials print as `[redacted]` (`url.query`, and the referer's query): the names of
//! [`AccessLog::CREDENTIAL_PARAMS`], and any name ending in `token`, `secret`, `password`,
//! `passwd`, `signature`, `credential`, `apikey`, `api_key` or `api-key`; compared without
//! case, after percent-decoding. OWASP's logging cheat sheet lists access tokens, API keys,
//! session ids and passwords as data never to log.
//!
//! More headers are logged by name ([`request_headers`](AccessLog::request_headers),
//! [`response_headers`](AccessLog::response_headers)) or all of them
//! ([`all_headers`](AccessLog::all_headers)); a secret value is never printed, even then: a
//! value flagged sensitive (`HeaderValue::is_sensitive`), a secret name of the handle's
//! [`Builder`](crate::Builder), or a name of [`AccessLog::SENSITIVE_HEADERS`] or of
//! [`sensitive_headers`](AccessLog::sensitive_headers) prints as `[redacted]`.
//!
//! # Fields
//!
//! Events have the target `shared_headers::access`. Names and types are OpenTelemetry's HTTP
//! server semantic conventions (stable), so `tracing-opentelemetry` and OTel log pipelines
//! read them as they are; the crate's own fields are under `shared_headers.` (its durations in
//! whole microseconds: an integer formats for a fraction of a float's cost). A field without a
//! value is absent. Text that cannot hold a space (a method, a URI's path and query, a token of
//! the crate's) is written as it is; header text a client sent is a string, which a text
//! formatter quotes and escapes, so that it cannot pass for more fields (a `referer` that is not
//! a well-formed URL prints as `[malformed]`).
//!
//! | field | type | what | example |
//! |---|---|---|---|
//! | `http.request.method` | string | the method; `_OTHER` for one outside RFC 9110 and RFC 5789 (PATCH) | `GET` |
//! | `http.request.method_original` | string | the method as received, when it is `_OTHER` | `PURGE` |
//! | `url.scheme` | string | the request's scheme, else the layer's [`url_scheme`](SharedHeadersLayer::url_scheme) | `http` |
//! | `url.path` | string | the path | `/users/42` |
//! | `url.query` | string | the query, credentials redacted (absent without one, or with [`omit_query`](AccessLog::omit_query)) | `page=2&api_key=[redacted]` |
//! | `http.route` | string | the route template: axum's `MatchedPath` (feature `axum`, layer added with `Router::layer`); never the raw path | `/users/{id}` |
//! | `server.address`, `server.port` | string, int | the URI's authority (HTTP/2 `:authority`) or the `host` header; the port only when it is not the scheme's default | `api.example.com`, `8443` |
//! | `client.address`, `client.port` | string, int | the peer ([`SharedHeadersLayer::peer_address`]) | `127.0.0.1`, `50412` |
//! | `network.protocol.version` | string | the HTTP version | `1.1`, `2` |
//! | `user_agent.original` | string | the `user-agent` header | `curl/8.5.0` |
//! | `http.request.header.referer` | string | the `referer` header, its query redacted | `https://a.example/?q=1` |
//! | `http.response.status_code` | int | the status **sent** (absent if nothing was sent) | `503` |
//! | `http.response.body.size` | int | the bytes of body the server took (absent if nothing was sent) | `5` |
//! | `error.type` | string | for a 5xx answer of the handler its status; else the reason: `timeout`, `panic`, `cancelled`, `failed` (the inner service's error), `body_error`, `body_dropped`; for gRPC, the code of a server-error `grpc-status` | `timeout` |
//! | `http.server.request.duration` | float, s | the call of the layer to the end above | `1.002114` |
//! | `rpc.system`, `rpc.service`, `rpc.method` | string | for a gRPC call: `grpc` and its path's parts | `grpc`, `pkg.Greeter`, `SayHello` |
//! | `rpc.grpc.status_code` | int | the `grpc-status` sent: in the trailers, or the head of a trailers-only answer | `4` |
//! | `exception.message` | string | the handler's panic message (`&str`/`String`), cut to 512 bytes | `index out of bounds` |
//! | `shared_headers.outcome` | string | who committed ([`Outcome`], as one token) | `timed_out` |
//! | `shared_headers.time_to_commit_us` | int, µs | the call to the commit ([`Committed::latency`]): where the head leaves, for an answer the layer sent at once | `200132` |
//! | `shared_headers.time_to_head_us` | int, µs | the call to the response head leaving the layer, when later than the commit (a handler that blocked its thread past the deadline) | `1001870` |
//! | `shared_headers.budget_us` | int, µs | the budget the request was given ([`Committed::budget`]), when a caller's budget header set it or was refused (the layer's own timeout is the same on every line) | `200000` |
//! | `shared_headers.budget_source` | string | `caller` (a budget header), or `server` when the caller's was refused | `caller` |
//! | `shared_headers.budget_error` | string | why the caller's budget header was refused, if it was | `a sign before the digits` |
//! | `shared_headers.annotations` | string | the sealed annotations (absent if none) | `x-user: ada` |
//! | `shared_headers.request_headers` | string | the configured request headers, secrets redacted (absent by default) | `accept: */*` |
//! | `shared_headers.response_headers` | string | the configured response headers **as sent**, secrets redacted (absent by default) | `content-type: text/plain` |
//!
//! The late-writes event (`writes refused after the commit`, `WARN`) has
//! `http.request.method`, `url.path`, `shared_headers.outcome`,
//! `shared_headers.refused_writes` and `shared_headers.since_commit_us` (int, µs).
//!
//! Levels by default: `INFO` for answers below 500, `WARN` for 5xx answers, failures,
//! timeouts, rejections, cancellations and bodies that failed or were dropped, `ERROR` for
//! panics; each overridable ([`AccessLog::level`]). Every line is emitted inside the
//! request's span (the one current when the layer's service was called), whichever thread
//! emits it.
//!
//! # Cost
//!
//! The layer asks, at each call, whether a subscriber may take any of the log's lines (its most
//! severe level is enabled: one atomic load); if none may, the request pays nothing more for
//! the log, not even its post-commit activity line. Otherwise the line
//! allocates nothing of its own. Figures beside tower-http's `TraceLayer` stacks:
//! [`docs::server_performance`](crate::docs::server_performance).

use std::fmt;

use http::header::{HeaderName, REFERER, USER_AGENT};
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use tracing::Level;

use super::end::{Ending, ResponseEnd, version_str};
use crate::exchange::{CommitEvent, Committed, LateWrites, Outcome};
use crate::snapshot::Snapshot;

#[cfg(doc)]
use super::SharedHeadersLayer;

/// The settings of the `tracing` access log: levels, which headers it prints, and the query's
/// redaction. See the [module docs](self) for the line and its fields.
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
///     .request_headers(["accept", "x-request-id"])
///     .redact_query_params(["session_key"]);
/// assert_eq!(
///     log.query_for_log("a=1&session_key=abc&token=t").to_string(),
///     "a=1&session_key=[redacted]&token=[redacted]"
/// );
/// let layer = SharedHeadersLayer::new().access_log(log);
/// # drop(layer);
/// ```
#[derive(Debug, Clone)]
#[must_use = "an AccessLog does nothing until given to SharedHeadersLayer::access_log"]
pub struct AccessLog {
    answered: Level,
    server_error: Level,
    failed: Level,
    timed_out: Level,
    cancelled: Level,
    rejected: Level,
    panicked: Level,
    /// The most severe of the levels: a request is tracked if a subscriber takes it (a
    /// subscriber's level is a threshold: if it takes none of the log's levels, it takes not
    /// this one).
    severest: Level,
    query: Query,
    request_headers: Select,
    response_headers: Select,
    /// Names never printed, beyond the handles' own rules.
    sensitive: Vec<HeaderName>,
    /// Whether `user-agent`, `referer` and `host` are among `sensitive` (looked up once).
    hidden_defaults: [bool; 3],
}

#[derive(Debug, Clone)]
enum Query {
    /// With these names redacted beyond the credential rules.
    Shown {
        extra: Vec<Box<str>>,
    },
    Omitted,
}

/// Which headers a line prints.
#[derive(Debug, Clone)]
enum Select {
    None,
    Named(Vec<HeaderName>),
    All,
}

impl Select {
    fn includes(&self, name: &HeaderName) -> bool {
        match self {
            Select::None => false,
            Select::Named(names) => names.contains(name),
            Select::All => true,
        }
    }
}

impl Default for AccessLog {
    fn default() -> Self {
        Self::new()
    }
}

impl AccessLog {
    /// Query parameter names whose values are always redacted (compared without case, after
    /// percent-decoding), beside the suffix rule of the [module docs](self#safe-by-default):
    /// OAuth's and OpenID's, AWS's and Google Cloud's signed URLs, Azure's SAS signature, and
    /// the usual names of passwords, sessions and one-time codes.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::access_log::AccessLog;
    /// assert!(AccessLog::CREDENTIAL_PARAMS.contains(&"x-amz-signature"));
    /// let log = AccessLog::new();
    /// assert_eq!(log.query_for_log("X-Amz-Signature=abc&page=2").to_string(),
    ///     "X-Amz-Signature=[redacted]&page=2");
    /// ```
    pub const CREDENTIAL_PARAMS: &'static [&'static str] = &[
        "access_token",
        "refresh_token",
        "id_token",
        "token",
        "api_key",
        "apikey",
        "key",
        "password",
        "passwd",
        "pwd",
        "pass",
        "secret",
        "client_secret",
        "signature",
        "sig",
        "code",
        "auth",
        "jwt",
        "otp",
        "session",
        "sessionid",
        "session_id",
        "sid",
        "access_key",
        "secret_key",
        "private_key",
        "awsaccesskeyid",
        "x-amz-signature",
        "x-amz-credential",
        "x-amz-security-token",
        "x-goog-signature",
        "x-goog-credential",
    ];

    /// Header names whose values the line never prints, beside the handles' own rules
    /// (`authorization`, `proxy-authorization`, `cookie`, `set-cookie`, values flagged
    /// sensitive, and the [`Builder::sensitive`](crate::Builder::sensitive) names).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::access_log::AccessLog;
    /// assert!(AccessLog::SENSITIVE_HEADERS.contains(&"x-api-key"));
    /// // Printed as `[redacted]` even when every header is logged:
    /// let log = AccessLog::new().all_headers();
    /// # drop(log);
    /// ```
    pub const SENSITIVE_HEADERS: &'static [&'static str] = &[
        "authorization",
        "proxy-authorization",
        "cookie",
        "set-cookie",
        "x-api-key",
        "api-key",
        "x-auth-token",
        "x-csrf-token",
        "x-xsrf-token",
        "x-access-token",
        "x-amz-security-token",
    ];

    /// The defaults: no header value but `user-agent`, `referer` and the host; credential
    /// query parameters redacted; `INFO` for answers below 500, `WARN` for 5xx answers,
    /// failures, timeouts, rejections, cancellations and bodies that failed or were dropped,
    /// `ERROR` for panics.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::access_log::AccessLog;
    /// let log = AccessLog::new();
    /// assert_eq!(log.query_for_log("page=2&api_key=zzz").to_string(), "page=2&api_key=[redacted]");
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
            severest: Level::ERROR,
            query: Query::Shown { extra: Vec::new() },
            request_headers: Select::None,
            response_headers: Select::None,
            sensitive: Self::SENSITIVE_HEADERS
                .iter()
                .map(|name| HeaderName::from_static(name))
                .collect(),
            hidden_defaults: [false; 3],
        }
    }

    /// The level of the lines of requests with `outcome`. For [`Outcome::Answered`] it is the
    /// level of answers below 500; 5xx answers have their own
    /// ([`server_error_level`](Self::server_error_level)). A body that failed takes the level
    /// of [`Outcome::Failed`], one dropped before its end that of [`Outcome::Cancelled`].
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
        self.severest = self.most_severe();
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
        self.severest = self.most_severe();
        self
    }

    fn most_severe(&self) -> Level {
        // `tracing` orders levels by verbosity: ERROR is the least.
        [
            self.answered,
            self.server_error,
            self.failed,
            self.timed_out,
            self.cancelled,
            self.rejected,
            self.panicked,
        ]
        .into_iter()
        .min()
        .unwrap_or(Level::ERROR)
    }

    /// More query parameters whose values are logged as `[redacted]`, beside the credential
    /// rules of the [module docs](self#safe-by-default) (names compared without case, after
    /// percent-decoding).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::access_log::AccessLog;
    /// let log = AccessLog::new().redact_query_params(["email"]);
    /// assert_eq!(
    ///     log.query_for_log("a=1&Email=x%40y&token=abc").to_string(),
    ///     "a=1&Email=[redacted]&token=[redacted]"
    /// );
    /// ```
    pub fn redact_query_params<S: Into<String>>(
        mut self,
        names: impl IntoIterator<Item = S>,
    ) -> Self {
        let mut extra = match self.query {
            Query::Shown { extra } => extra,
            Query::Omitted => Vec::new(),
        };
        extra.extend(names.into_iter().map(|name| name.into().into_boxed_str()));
        self.query = Query::Shown { extra };
        self
    }

    /// Leaves the query out of every line (and the referer's query).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::access_log::AccessLog;
    /// let log = AccessLog::new().omit_query();
    /// assert_eq!(log.query_for_log("a=1").to_string(), "");
    /// ```
    pub fn omit_query(mut self) -> Self {
        self.query = Query::Omitted;
        self
    }

    /// Also prints these request headers (`shared_headers.request_headers`), as sealed, a
    /// secret value as `[redacted]`.
    ///
    /// # Panics
    ///
    /// If a name is not a valid header name.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::access_log::AccessLog;
    /// let log = AccessLog::new().request_headers(["accept", "x-request-id"]);
    /// # drop(log);
    /// ```
    pub fn request_headers<N: AsRef<str>>(mut self, names: impl IntoIterator<Item = N>) -> Self {
        self.request_headers = Select::Named(names.into_iter().map(header_name).collect());
        self
    }

    /// Also prints these response headers **as sent** (`shared_headers.response_headers`), a
    /// secret value as `[redacted]`. The layer then keeps a copy of the sent headers until the
    /// line (one allocation per request).
    ///
    /// # Panics
    ///
    /// If a name is not a valid header name.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::access_log::AccessLog;
    /// let log = AccessLog::new().response_headers(["content-type", "x-cache"]);
    /// # drop(log);
    /// ```
    pub fn response_headers<N: AsRef<str>>(mut self, names: impl IntoIterator<Item = N>) -> Self {
        self.response_headers = Select::Named(names.into_iter().map(header_name).collect());
        self
    }

    /// Prints every request and response header, each secret value as `[redacted]` (see the
    /// [module docs](self#safe-by-default)). Long lines: for debugging, not for a busy
    /// server.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::access_log::AccessLog;
    /// let log = AccessLog::new().all_headers().sensitive_headers(["x-tenant-key"]);
    /// # drop(log);
    /// ```
    pub fn all_headers(mut self) -> Self {
        self.request_headers = Select::All;
        self.response_headers = Select::All;
        self
    }

    /// More header names whose values are never printed, beside
    /// [`SENSITIVE_HEADERS`](Self::SENSITIVE_HEADERS) and the handles' own rules.
    ///
    /// # Panics
    ///
    /// If a name is not a valid header name.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::access_log::AccessLog;
    /// let log = AccessLog::new().all_headers().sensitive_headers(["x-tenant-key"]);
    /// # drop(log);
    /// ```
    pub fn sensitive_headers<N: AsRef<str>>(mut self, names: impl IntoIterator<Item = N>) -> Self {
        self.sensitive.extend(names.into_iter().map(header_name));
        self
    }

    /// A query as this log prints it (see [`redact_query_params`](Self::redact_query_params)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::access_log::AccessLog;
    /// let log = AccessLog::new();
    /// assert_eq!(log.query_for_log("q=rust").to_string(), "q=rust");
    /// assert_eq!(
    ///     log.query_for_log("X-Amz-Credential=a&X-Amz-Signature=b&x=1").to_string(),
    ///     "X-Amz-Credential=[redacted]&X-Amz-Signature=[redacted]&x=1"
    /// );
    /// ```
    pub fn query_for_log<'a>(&'a self, query: &'a str) -> impl fmt::Display + 'a {
        QueryShown { log: self, query }
    }

    /// Whether a subscriber may take one of the log's lines: its most severe level is enabled
    /// (one atomic load).
    #[inline]
    pub(super) fn interested(&self) -> bool {
        tracing::level_filters::STATIC_MAX_LEVEL >= self.severest
            && tracing::level_filters::LevelFilter::current() >= self.severest
    }

    pub(super) fn logs_response_headers(&self) -> bool {
        !matches!(self.response_headers, Select::None)
    }

    fn level_of(&self, outcome: Outcome, status: Option<StatusCode>, ending: Ending) -> Level {
        match outcome {
            Outcome::Answered => match (status, ending) {
                (Some(status), _) if status.is_server_error() => self.server_error,
                (_, Ending::Aborted) => self.failed,
                (_, Ending::Dropped) => self.cancelled,
                _ => self.answered,
            },
            Outcome::Failed => self.failed,
            Outcome::TimedOut => self.timed_out,
            Outcome::Cancelled => self.cancelled,
            Outcome::Rejected => self.rejected,
            Outcome::Panicked => self.panicked,
        }
    }

    /// Whether `name`'s `value` must not be printed, stored in `handle`.
    fn is_secret(&self, handle: &Snapshot, name: &HeaderName, value: &HeaderValue) -> bool {
        handle.is_secret(name, value) || self.sensitive.contains(name)
    }

    /// A request header that the line prints by default (`user-agent`, `referer`, `host`:
    /// `default` is its place in `hidden_defaults`), unless it is secret.
    fn request_value<'a>(
        &self,
        request: &'a Snapshot,
        name: &HeaderName,
        default: usize,
    ) -> Option<&'a str> {
        let value = request.get(name)?;
        if self.hidden_defaults[default] || request.is_secret(name, value) {
            return None;
        }
        // UTF-8 (checked a word at a time), not `to_str`'s byte-by-byte visible-ASCII check:
        // a header value has no CR, LF or NUL, and the line quotes and escapes what needs it.
        std::str::from_utf8(value.as_bytes()).ok()
    }

    /// Emits the `request completed` line for `end`, the end of a response (see the
    /// [module docs](self)). The layer calls it when the access log is installed; call it
    /// from an [`on_response_end`](SharedHeadersLayer::on_response_end) hook of your own to
    /// log with several settings.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::{SharedHeadersLayer, access_log::AccessLog};
    /// let log = AccessLog::new();
    /// let layer = SharedHeadersLayer::new().on_response_end(move |end| log.end(end));
    /// # drop(layer);
    /// ```
    pub fn end(&self, end: &ResponseEnd) {
        let committed = end.committed();
        let outcome = committed.outcome();
        let status = end.status();
        let level = self.level_of(outcome, status, end.ending());
        if !(tracing::level_filters::STATIC_MAX_LEVEL >= level
            && tracing::level_filters::LevelFilter::current() >= level)
        {
            return;
        }
        let request = committed.request();
        let uri = committed.uri();
        let (method, method_original) = otel_method(committed.method());
        let scheme = end.url_scheme();
        let query = match (&self.query, uri.and_then(|uri| uri.query())) {
            (Query::Shown { .. }, Some(query)) => Some(QueryShown { log: self, query }),
            _ => None,
        };
        // `server.port` only when not the scheme's default (OpenTelemetry's rule).
        let (address, port) = match server_authority(self, committed, request) {
            Some((host, port)) => (
                Some(host),
                port.filter(|p| Some(*p) != default_port(scheme)),
            ),
            None => (None, None),
        };
        let peer = committed.peer_address();
        let user_agent = self.request_value(request, &USER_AGENT, 0);
        let referer = self
            .request_value(request, &REFERER, 1)
            .map(|referer| Referer { log: self, referer });
        let grpc = committed.is_grpc();
        let rpc = if grpc {
            uri.and_then(|uri| rpc_parts(uri.path()))
        } else {
            None
        };
        let error = end.error_type();
        let (budget, source) = budget_of(committed);
        let to_commit = committed.latency();
        let to_head = end.head_elapsed();
        let budget_error = committed.budget_error();
        let request_headers = HeaderList::of(self, &self.request_headers, request, Some(request));
        let response_headers = match end.sent_headers() {
            Some(sent) => HeaderList::of(
                self,
                &self.response_headers,
                committed.response(),
                Some(sent),
            ),
            None => None,
        };
        let annotations = committed.annotations().filter(|a| !a.is_empty());
        // Two callsites: the usual line, and one with the fields most requests lack (an
        // error's, a port that is not the scheme's, annotations, a gRPC call's, a panic's, a
        // caller's budget, configured headers). A callsite's every
        // field costs each line (the value set has an entry per field), present or not.
        let rare = method_original.is_some()
            || port.is_some()
            || error.is_some()
            || annotations.is_some()
            || grpc
            || end.panic_message().is_some()
            || to_head.is_some_and(|head| head != to_commit)
            || source.is_some()
            || request_headers.is_some()
            || response_headers.is_some();
        macro_rules! emit {
            ($level:expr $(, $($rare:tt)+)?) => {
                // Text that cannot hold a space (a method, a scheme, a URI's path and query,
                // the crate's own words) is written as it is (`Raw`: to a typed consumer, the
                // same string); header text a client sent is a `&str`, which a text formatter
                // quotes and escapes, so that it cannot pass for more fields.
                tracing::event!(
                    target: "shared_headers::access",
                    $level,
                    http.request.method = tracing::field::display(Raw(method)),
                    url.scheme = tracing::field::display(Raw(scheme)),
                    url.path = tracing::field::display(Raw(uri.map(|u| u.path()).unwrap_or(""))),
                    url.query = query.as_ref().map(tracing::field::display),
                    http.route = end.route().map(tracing::field::display),
                    server.address = address,
                    client.address = peer.map(|peer| tracing::field::display(peer.ip())),
                    client.port = peer.map(|peer| peer.port()),
                    network.protocol.version = committed.version().map(|v| tracing::field::display(Raw(version_str(v)))),
                    user_agent.original = user_agent,
                    http.request.header.referer = referer.as_ref().map(tracing::field::display),
                    http.response.status_code = status.map(|s| s.as_u16()),
                    http.response.body.size = status.map(|_| end.bytes_sent()),
                    http.server.request.duration = end.elapsed().as_secs_f64(),
                    shared_headers.outcome = tracing::field::display(Raw(outcome.token())),
                    shared_headers.time_to_commit_us = micros(to_commit),
                    $($($rare)+)?
                    "request completed"
                )
            };
        }
        macro_rules! emit_at {
            ($level:expr) => {
                if rare {
                    emit!(
                        $level,
                        server.port = port,
                        error.type = error.map(|e| tracing::field::display(Raw(e))),
                        shared_headers.annotations =
                            annotations.map(|a| tracing::field::display(a.redacted())),
                        http.request.method_original =
                            method_original.map(|m| tracing::field::display(Raw(m))),
                        rpc.system = grpc.then_some(tracing::field::display(Raw("grpc"))),
                        rpc.service = rpc.map(|(service, _)| tracing::field::display(Raw(service))),
                        rpc.method = rpc.map(|(_, method)| tracing::field::display(Raw(method))),
                        rpc.grpc.status_code = end.grpc_status(),
                        exception.message = end.panic_message(),
                        shared_headers.time_to_head_us =
                            to_head.filter(|head| *head != to_commit).map(micros),
                        shared_headers.budget_us = budget.map(micros),
                        shared_headers.budget_source =
                            source.map(|s| tracing::field::display(Raw(s))),
                        shared_headers.budget_error =
                            budget_error.as_ref().map(tracing::field::display),
                        shared_headers.request_headers =
                            request_headers.as_ref().map(tracing::field::display),
                        shared_headers.response_headers =
                            response_headers.as_ref().map(tracing::field::display),
                    )
                } else {
                    emit!($level)
                }
            };
        }
        match level {
            Level::ERROR => emit_at!(Level::ERROR),
            Level::WARN => emit_at!(Level::WARN),
            Level::INFO => emit_at!(Level::INFO),
            Level::DEBUG => emit_at!(Level::DEBUG),
            _ => emit_at!(Level::TRACE),
        }
    }

    /// Emits a `request committed` line at the commit, for an
    /// [`on_commit`](SharedHeadersLayer::on_commit) hook of your own: the outcome, the status
    /// and headers of the head that left the layer (none yet of the body), with this log's
    /// redaction. The access log that [`SharedHeadersLayer::access_log`] installs writes its
    /// line at the end of the response instead ([`end`](Self::end)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::{SharedHeadersLayer, access_log::AccessLog};
    /// let log = AccessLog::new();
    /// let layer = SharedHeadersLayer::new().on_commit(move |c| log.commit(c));
    /// # drop(layer);
    /// ```
    pub fn commit(&self, event: &CommitEvent<'_>) {
        let committed: &Committed = event.committed();
        let outcome = committed.outcome();
        let sent = event.sent();
        let status = sent.map(|head| head.status);
        let level = self.level_of(outcome, status, Ending::Completed);
        if !(tracing::level_filters::STATIC_MAX_LEVEL >= level
            && tracing::level_filters::LevelFilter::current() >= level)
        {
            return;
        }
        let uri = committed.uri();
        let (method, method_original) = otel_method(committed.method());
        let query = match (&self.query, uri.and_then(|uri| uri.query())) {
            (Query::Shown { .. }, Some(query)) => Some(QueryShown { log: self, query }),
            _ => None,
        };
        let request = committed.request();
        let grpc_status = sent.and_then(|head| super::end::grpc_status(&head.headers));
        let request_headers = HeaderList::of(self, &self.request_headers, request, Some(request));
        let response_headers = HeaderList::of(
            self,
            &self.response_headers,
            committed.response(),
            sent.map(|head| &head.headers),
        );
        macro_rules! emit {
            ($level:expr) => {
                tracing::event!(
                    target: "shared_headers::access",
                    $level,
                    http.request.method = %method,
                    http.request.method_original = method_original.map(tracing::field::display),
                    url.path = uri.map(|u| u.path()).unwrap_or(""),
                    url.query = query.as_ref().map(tracing::field::display),
                    http.response.status_code = status.map(|s| s.as_u16()),
                    rpc.grpc.status_code = grpc_status,
                    user_agent.original = self.request_value(request, &USER_AGENT, 0),
                    shared_headers.outcome = %outcome.token(),
                    shared_headers.time_to_commit_us = micros(committed.latency()),
                    shared_headers.request_headers = request_headers.as_ref().map(tracing::field::display),
                    shared_headers.response_headers = response_headers.as_ref().map(tracing::field::display),
                    "request committed"
                )
            };
        }
        match level {
            Level::ERROR => emit!(Level::ERROR),
            Level::WARN => emit!(Level::WARN),
            Level::INFO => emit!(Level::INFO),
            Level::DEBUG => emit!(Level::DEBUG),
            _ => emit!(Level::TRACE),
        }
    }

    /// Emits the `writes refused after the commit` event for `late` (see the
    /// [module docs](self)). The access log installs it as a late-writes hook.
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
            http.request.method = %otel_method(committed.method()).0,
            url.path = committed.uri().map(|u| u.path()).unwrap_or(""),
            shared_headers.outcome = %committed.outcome().token(),
            shared_headers.refused_writes = late.refused_writes(),
            shared_headers.since_commit_us = micros(late.since_commit()),
            "writes refused after the commit"
        );
    }
}

fn header_name<N: AsRef<str>>(name: N) -> HeaderName {
    let name = name.as_ref();
    HeaderName::try_from(name).unwrap_or_else(|_| panic!("not a header name: {name:?}"))
}

/// OpenTelemetry's `http.request.method`, and the original when it is `_OTHER`.
fn otel_method(method: Option<&Method>) -> (&str, Option<&str>) {
    let Some(method) = method else {
        return ("", None);
    };
    match super::end::otel_method(method) {
        "_OTHER" => ("_OTHER", Some(method.as_str())),
        known => (known, None),
    }
}

/// The server's host and port: the URI's authority (HTTP/2's `:authority`, an absolute-form
/// target), else the `host` header (unless secret).
fn server_authority<'a>(
    log: &AccessLog,
    committed: &'a Committed,
    request: &'a Snapshot,
) -> Option<(&'a str, Option<u16>)> {
    let authority = match committed.uri().and_then(http::Uri::authority) {
        Some(authority) => authority.as_str(),
        None => log.request_value(request, &http::header::HOST, 2)?,
    };
    split_authority(authority)
}

/// `host[:port]` (an IPv6 literal in brackets) into the host and the port; userinfo (never
/// logged) is not part of the host.
fn split_authority(authority: &str) -> Option<(&str, Option<u16>)> {
    // Byte scans (ASCII delimiters, so every cut is a character boundary): cheaper than
    // `rsplit_once`'s searcher on a string this short.
    let bytes = authority.as_bytes();
    let authority = match bytes.iter().rposition(|&b| b == b'@') {
        Some(at) => &authority[at + 1..],
        None => authority,
    };
    if let Some(rest) = authority.strip_prefix('[') {
        let close = rest.bytes().position(|b| b == b']')?;
        let port = rest[close + 1..]
            .strip_prefix(':')
            .and_then(|port| port.parse().ok());
        return Some((&rest[..close], port));
    }
    match authority.bytes().rposition(|b| b == b':') {
        Some(colon) => Some((&authority[..colon], authority[colon + 1..].parse().ok())),
        None => Some((authority, None)),
    }
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

/// A gRPC call's service and method, from its path `/package.Service/Method`.
fn rpc_parts(path: &str) -> Option<(&str, &str)> {
    let (service, method) = path.strip_prefix('/')?.split_once('/')?;
    (!service.is_empty() && !method.is_empty() && !method.contains('/'))
        .then_some((service, method))
}

/// A duration in whole microseconds (an integer field formats for a tenth of a float's cost).
fn micros(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

/// The budget and its source, when they say more than the layer's configuration: a caller's
/// budget, or the layer's own when a caller's header was refused. The layer's own timeout
/// alone is the same on every line, and left out.
fn budget_of(committed: &Committed) -> (Option<std::time::Duration>, Option<&'static str>) {
    let Some(deadline) = committed.deadline() else {
        return (None, None);
    };
    let source = match deadline.source() {
        crate::deadline::DeadlineSource::Server if committed.budget_error().is_none() => {
            return (None, None);
        }
        crate::deadline::DeadlineSource::Server => "server",
        crate::deadline::DeadlineSource::Caller => "caller",
        #[allow(unreachable_patterns)]
        _ => "explicit",
    };
    (committed.budget(), Some(source))
}

/// The headers a line prints: the selected ones of `map`, secrets redacted by `handle`'s
/// rules and the log's.
struct HeaderList<'a> {
    log: &'a AccessLog,
    select: &'a Select,
    handle: &'a Snapshot,
    map: &'a HeaderMap,
}

impl<'a> HeaderList<'a> {
    fn of(
        log: &'a AccessLog,
        select: &'a Select,
        handle: &'a Snapshot,
        map: Option<&'a HeaderMap>,
    ) -> Option<Self> {
        if matches!(select, Select::None) {
            return None;
        }
        Some(HeaderList {
            log,
            select,
            handle,
            map: map?,
        })
    }
}

impl fmt::Display for HeaderList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (name, value) in self.map {
            if !self.select.includes(name) {
                continue;
            }
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            write!(f, "{name}: ")?;
            if self.log.is_secret(self.handle, name, value) {
                f.write_str("[redacted]")?;
            } else if let (true, Ok(url)) = (carries_url(name), value.to_str()) {
                // A URL's query can carry a credential (an OAuth `code` in a redirect's
                // `location`, a token in a `referer`): redacted as the request's.
                let shown = Referer {
                    log: self.log,
                    referer: url,
                };
                if url.contains(',') {
                    // Quoted, so that it can never pass for more entries (rare: allocates).
                    fmt::Debug::fmt(&shown.to_string(), f)?;
                } else {
                    fmt::Display::fmt(&shown, f)?;
                }
            } else {
                // A value with a comma is quoted, so that it can never pass for more entries.
                match value.to_str() {
                    Ok(text) if !text.contains(',') => f.write_str(text)?,
                    _ => fmt::Debug::fmt(value, f)?,
                }
            }
        }
        Ok(())
    }
}

/// A trusted token (a method, a scheme, the crate's own words) written as it is: `Display`
/// straight to the writer, without `Formatter::pad`'s look at width and precision.
struct Raw<'a>(&'a str);

impl fmt::Display for Raw<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// Whether a header's value is a URL whose query the line redacts.
fn carries_url(name: &HeaderName) -> bool {
    *name == REFERER || *name == http::header::LOCATION || *name == http::header::CONTENT_LOCATION
}

/// A referer (or any URL) with its query redacted as the request's.
struct Referer<'a> {
    log: &'a AccessLog,
    referer: &'a str,
}

impl fmt::Display for Referer<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Written as it is (redacted), so it must not be able to pass for more fields: a URL
        // has no space, quote or backslash (RFC 3986); a value with one is not printed.
        let odd = self.referer.bytes().fold(false, |any, b| {
            any | !(0x21..=0x7e).contains(&b) | (b == b'"') | (b == b'\\')
        });
        if odd {
            return f.write_str("[malformed]");
        }
        // Byte scans for the ASCII delimiters (every cut is a character boundary).
        let bytes = self.referer.as_bytes();
        // A fragment is never sent in a referer (RFC 9110 §10.1.3): dropped if present.
        let url = match bytes.iter().position(|&b| b == b'#') {
            Some(at) => &self.referer[..at],
            None => self.referer,
        };
        match url.bytes().position(|b| b == b'?') {
            Some(at) => {
                f.write_str(&url[..=at])?;
                if let Query::Omitted = self.log.query {
                    return Ok(());
                }
                fmt::Display::fmt(
                    &QueryShown {
                        log: self.log,
                        query: &url[at + 1..],
                    },
                    f,
                )
            }
            None => f.write_str(url),
        }
    }
}

/// A query with the values of credential parameters redacted.
struct QueryShown<'a> {
    log: &'a AccessLog,
    query: &'a str,
}

impl fmt::Display for QueryShown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let extra: &[Box<str>] = match &self.log.query {
            Query::Shown { extra } => extra,
            Query::Omitted => return Ok(()),
        };
        // One pass over the bytes: a run of plain pairs is written at once, a credential's
        // value replaced (`&` and `=` are ASCII, so every cut is a character boundary).
        let query = self.query;
        let bytes = query.as_bytes();
        let mut written = 0; // the query is written up to here
        let mut start = 0; // the current pair starts here
        while start <= bytes.len() {
            let end = bytes[start..]
                .iter()
                .position(|&b| b == b'&')
                .map_or(bytes.len(), |at| start + at);
            let pair = &bytes[start..end];
            let name_end = pair
                .iter()
                .position(|&b| b == b'=')
                .map_or(end, |at| start + at);
            if is_credential(&query[start..name_end], extra) {
                f.write_str(&query[written..name_end])?;
                f.write_str("=[redacted]")?;
                written = end;
            }
            start = end + 1;
        }
        f.write_str(&query[written..])
    }
}

/// Whether a query parameter's name marks a credential (see the module docs).
fn is_credential(name: &str, extra: &[Box<str>]) -> bool {
    // Percent-decoded and lowercased into a stack buffer; a longer name is compared by its
    // suffix only, decoded as far as the buffer goes from its end.
    let bytes = name.as_bytes();
    // Most names need no decoding: lowercase, no `%` or `+` (checked branch-free).
    let plain = !bytes.iter().fold(false, |any, &b| {
        any | b.is_ascii_uppercase() | (b == b'%') | (b == b'+')
    });
    let mut buf = [0u8; 64];
    let decoded = if plain {
        bytes
    } else {
        decode_lower(bytes, &mut buf)
    };
    known_credential(decoded)
        || extra
            .iter()
            .any(|known| known.as_bytes().eq_ignore_ascii_case(decoded))
}

/// [`AccessLog::CREDENTIAL_PARAMS`] and the suffix rule, on a decoded, lowercased name: one
/// `match` (a jump on the length, then a compare), the suffixes only for names that end as
/// one of them does.
fn known_credential(name: &[u8]) -> bool {
    // By length first: one jump, then a compare or a few.
    let exact = match name.len() {
        3 => matches!(name, b"key" | b"pwd" | b"sig" | b"jwt" | b"otp" | b"sid"),
        4 => matches!(name, b"pass" | b"code" | b"auth"),
        5 => matches!(name, b"token"),
        6 => matches!(name, b"apikey" | b"passwd" | b"secret"),
        7 => matches!(name, b"api_key" | b"session"),
        8 => matches!(name, b"id_token" | b"password"),
        9 => matches!(name, b"signature" | b"sessionid"),
        10 => matches!(name, b"session_id" | b"access_key" | b"secret_key"),
        11 => matches!(name, b"private_key"),
        12 => matches!(name, b"access_token"),
        13 => matches!(name, b"refresh_token" | b"client_secret"),
        14 => matches!(name, b"awsaccesskeyid"),
        15 => matches!(name, b"x-amz-signature"),
        16 => matches!(name, b"x-amz-credential" | b"x-goog-signature"),
        17 => matches!(name, b"x-goog-credential"),
        20 => matches!(name, b"x-amz-security-token"),
        _ => false,
    };
    exact
        || match name.last() {
            Some(b'n') => name.ends_with(b"token"),
            Some(b't') => name.ends_with(b"secret"),
            Some(b'd') => name.ends_with(b"password") || name.ends_with(b"passwd"),
            Some(b'e') => name.ends_with(b"signature"),
            Some(b'l') => name.ends_with(b"credential"),
            Some(b'y') => {
                name.ends_with(b"apikey")
                    || name.ends_with(b"api_key")
                    || name.ends_with(b"api-key")
            }
            _ => false,
        }
}

/// `name` percent-decoded and lowercased into `buf`; the last `buf.len()` bytes of a longer
/// name.
fn decode_lower<'b>(name: &[u8], buf: &'b mut [u8; 64]) -> &'b [u8] {
    let mut len = 0;
    let mut i = 0;
    while i < name.len() {
        let mut byte = name[i];
        if byte == b'%' && i + 2 < name.len() {
            if let (Some(hi), Some(lo)) = (hex(name[i + 1]), hex(name[i + 2])) {
                byte = hi << 4 | lo;
                i += 2;
            }
        } else if byte == b'+' {
            byte = b' ';
        }
        if len == buf.len() {
            // Keep the end: shift left by one.
            buf.copy_within(1.., 0);
            len -= 1;
        }
        buf[len] = byte.to_ascii_lowercase();
        len += 1;
        i += 1;
    }
    &buf[..len]
}

fn hex(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_names() {
        let extra: [Box<str>; 1] = ["Email".into()];
        for name in [
            "token",
            "access_token",
            "X-Amz-Signature",
            "x-amz-credential",
            "X-Amz-Security-Token",
            "api%5Fkey",
            "API_KEY",
            "apikey",
            "key",
            "password",
            "sig",
            "code",
            "client_secret",
            "email",
            "AWSAccessKeyId",
            "a_very_long_parameter_name_that_goes_on_and_on_past_the_buffer_refresh_token",
        ] {
            assert!(is_credential(name, &extra), "{name}");
        }
        for name in ["page", "q", "keyword", "monkey", "tokens", "sort", "", "%"] {
            assert!(!is_credential(name, &extra), "{name}");
        }
    }

    #[test]
    fn query_pairs() {
        let log = AccessLog::new();
        for (query, shown) in [
            ("", ""),
            ("&", "&"),
            ("a=1", "a=1"),
            ("token", "token=[redacted]"),
            ("token=", "token=[redacted]"),
            ("a=1&&token=x&b", "a=1&&token=[redacted]&b"),
            ("sig=a=b&c=d", "sig=[redacted]&c=d"),
            ("x=1&key=2", "x=1&key=[redacted]"),
        ] {
            assert_eq!(log.query_for_log(query).to_string(), shown, "{query}");
        }
    }

    #[test]
    fn the_listed_names_are_the_matched_names() {
        for name in AccessLog::CREDENTIAL_PARAMS {
            assert!(known_credential(name.as_bytes()), "{name}");
        }
        assert!(!known_credential(b"page"));
    }

    #[test]
    fn query_and_referer() {
        let log = AccessLog::new();
        assert_eq!(
            log.query_for_log("page=2&api_key=zzz&token&a=%20")
                .to_string(),
            "page=2&api_key=[redacted]&token=[redacted]&a=%20"
        );
        let referer = Referer {
            log: &log,
            referer: "https://a.example/p?x=1&access_token=abc#frag",
        };
        assert_eq!(
            referer.to_string(),
            "https://a.example/p?x=1&access_token=[redacted]"
        );
    }

    #[test]
    fn authorities() {
        let split = |authority| split_authority(authority).unwrap();
        assert_eq!(split("a.example:8080"), ("a.example", Some(8080)));
        assert_eq!(split("user:pw@a.example:8080"), ("a.example", Some(8080)));
        assert_eq!(split("[::1]:80"), ("::1", Some(80)));
        assert_eq!(split("[::1]"), ("::1", None));
        assert_eq!(split("a.example"), ("a.example", None));
        assert_eq!(split_authority("[::1"), None);
        assert_eq!(
            rpc_parts("/pkg.Greeter/SayHello"),
            Some(("pkg.Greeter", "SayHello"))
        );
        assert_eq!(rpc_parts("/users/1/x"), None);
        assert_eq!(otel_method(Some(&Method::GET)), ("GET", None));
        let purge = Method::from_bytes(b"PURGE").unwrap();
        assert_eq!(otel_method(Some(&purge)), ("_OTHER", Some("PURGE")));
        assert_eq!(
            super::super::end::status_str(StatusCode::SERVICE_UNAVAILABLE),
            "503"
        );
    }
}
