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
//! This paragraph is the one list of what the line prints of the request's headers by default
//! (other pages link here). With no configuration the line prints **no header value** except
//! these three request headers:
//!
//! * `user-agent`, as `user_agent.original`;
//! * `referer`, as `http.request.header.referer`, its userinfo and query redacted as below;
//! * `host`, as `server.address` and `server.port`, when the URI has no authority (an
//!   HTTP/2 request's `:authority` is the URI's, and is printed in its place).
//!
//! nginx's `combined` format logs the first two; none of the three carries a credential. One
//! more field comes from a header only when you ask for it: with
//! [`SharedHeadersLayer::propagate`] and a request id, `http.request.id` is the incoming id
//! when it is valid (else a generated one). Any of the three is left out when its name is
//! secret (below). OWASP's logging cheat sheet lists access tokens, API keys,
//! session ids and passwords as data never to log.
//!
//! **Secret headers.** One question decides, for every field of the line, whether a header's
//! value may be printed, and it is the crate's one notion of a secret: a value flagged
//! sensitive (`HeaderValue::is_sensitive`), a name of
//! [`Builder::ALWAYS_SECRET`](crate::Builder::ALWAYS_SECRET) (`authorization`, `cookie`,
//! `x-api-key`, ...), or a name that either of the layer's policies makes secret
//! ([`Builder::sensitive`](crate::Builder::sensitive) given to
//! [`request_policy`](SharedHeadersLayer::request_policy) or
//! [`response_policy`](SharedHeadersLayer::response_policy): secret for the whole layer) is
//! never printed: not in the header lists and the annotations (where it prints as
//! `[redacted]`), not in `user_agent.original` or `http.request.header.referer` (absent), and
//! a secret `host` hides `server.address`, whether it came from the `host` header or the URI's
//! authority (HTTP/2's `:authority`). The same names are never propagated
//! ([`SharedHeadersLayer::propagate`]).
//!
//! **Query parameters.** A parameter's value prints as `[redacted]` (in `url.query`, and in
//! the query of every URL the line prints) when its name marks a credential. The name is
//! percent-decoded (`+` is a space) and cut into tokens at every byte that is not an ASCII
//! letter or digit (brackets of `user[password]`, `api_key[]`, `_`, `-`, `.`, a space) and
//! where a lowercase letter or a digit meets an uppercase one (`apiKey`); a token's trailing
//! digits are dropped (`password2` is `password`), tokens are compared without case, and a
//! plural (`credentials`, `tokens`) as its singular. A name is a credential when one of its
//! tokens
//! * is `password`, `passwd`, `pwd`, `pass`, `passphrase`, `passcode`, `secret`, `token`,
//!   `credential`, `auth`, `authorization`, `authentication`, `apikey`, `accesskey`,
//!   `secretkey`, `privatekey`, `clientkey`, `jwt`, `bearer`, `cookie`, `otp`, `session`,
//!   `sessionid`, `sid`, `phpsessid`, `jsessionid`, `sessid`, `cfid`, `signature`, `sig`,
//!   `awsaccesskeyid`, `accesskeyid`, `assertion` (OAuth's `client_assertion`), `ticket`
//!   (CAS), `hmac`, `samlresponse`, `totp`, `mfa`, `pw`, `pin`, `verifier`
//!   (`oauth_verifier`, `code_verifier`) or `dpop` (RFC 9449's proof header), or `response`
//!   after `saml`;
//! * ends in `token`, `secret`, `password`, `passwd`, `apikey`, `signature` or `credential`
//!   (`xsrftoken`, `clientsecret`);
//! * is `key` first in the name, or after `api`, `private`, `access`, `secret`, `signing`,
//!   `client`, `consumer`, `app`, `application`, `master`, `encryption`, `license`,
//!   `subscription`, `shared`, `function` (or a token ending in `access`, `private`, `secret`,
//!   `signing`): `key`, `api_key`, `private+key`, `subscription-key`, but not `sort_key`,
//!   `primary_key` or `keyboard`;
//! * is `code` first in the name, or after one of those or `oauth`, `authorization`,
//!   `verification`, `verify`, `mfa`, `totp`, `2fa`, `sms`, `email`, `otp`, `time`
//!   (`one_time_code`), `security`, `reset`, `recovery`, `login`, `confirmation`,
//!   `activation`: `code`, `auth_code`, but not `country_code`;
//!
//! and none of its tokens says the name is about a credential rather than one: `policy`,
//! `algorithm`, `alg`, `timeout`, `consent`, `remaining`, `version`, `method`, `max`, `min`,
//! `limit`, `ratelimit`, `length`, `expiry`, `ttl` (singular or plural): `x-password-policy`,
//! `x-session-timeout`, `max_tokens`, `SignatureVersion` are not credentials.
//!
//! Every name of [`AccessLog::CREDENTIAL_PARAMS`] is one. The names given to
//! [`redact_query_params`](AccessLog::redact_query_params) are credentials too, matching the
//! whole decoded name or a part of it between brackets (`filter[email]`), without case. Pairs
//! are separated by `&` or `;`; a credential's value runs to the next `&` (a `;` inside it is
//! kept with it, so that neither reading of `token=a;b=c` shows `a`). The same rule redacts
//! the value of a `;name=value` parameter of the path (`url.path`, `/cart;jsessionid=…`), up
//! to the next `/`.
//!
//! **Values that carry their own secrets.** Any other parameter's value that is a URL
//! (`scheme://…`, `//host…`, or with a `?` or `@` of its own), raw or percent-encoded, prints
//! as a URL does below: its userinfo `[redacted]@`, its query's credentials redacted
//! (`redirect=https://[redacted]@evil.example/?token=[redacted]`); one that is JSON-ish text
//! (`{…}`, `[…]`) prints with the value of each credential key redacted
//! (`filter={"password":"[redacted]"}`; a key is read with JSON's escapes, `"p\u0061ssword"`
//! is `password`; a string value that is a URL prints as a URL); JSON-ish text that is not
//! UTF-8 once decoded is `[redacted]` whole. A value encoded twice is decoded twice. An
//! encoded value is printed encoded again, so that it stays one value of its query. Values
//! nest four deep at most; deeper, a nested value is `[redacted]` whole.
//!
//! The names given to [`redact_query_params`](AccessLog::redact_query_params) hold for every
//! printer of the request's path: the line's `url.path`, the OpenTelemetry server span's
//! `url.path` and the `Debug` of the request's record.
//!
//! **Header names.** A header's name is secret by the same token rule (and the
//! [`Builder::ALWAYS_SECRET`](crate::Builder::ALWAYS_SECRET) names are its common cases), so
//! under [`HeaderSelection::all`](super::HeaderSelection::all) `x-vault-token`,
//! `private-token`, `x-goog-api-key`, `x-client-secret` and `x-authorization` print as
//! `[redacted]`; CORS's `access-control-*` names are not secret. The rule is the crate's one
//! rule, in its core: the OpenTelemetry spans (server and client), the record's `Debug` and
//! [`Redacted`](crate::Redacted) ask it too.
//!
//! **URLs in headers.** A URL-valued header (`referer`, `location`, `content-location`,
//! `origin`, and the rewrite headers proxies set: `x-original-url`, `x-original-uri`,
//! `x-forwarded-uri`, `x-rewrite-url`) prints without its fragment, its userinfo replaced by
//! `[redacted]@` (`https://[redacted]@host/p`, also for `//user@host/` and
//! `https:user@host/`), its path parameters and its query redacted as above (the query left
//! out, with its `?`, under [`omit_query`](AccessLog::omit_query)); so do each `<target>` of
//! a `link` and the `url=` of a `refresh`, relative or not; in any other header value the
//! line prints, each absolute URL (`scheme://…`, each of several glued together) is printed
//! the same way, whether or not the value is UTF-8, in time linear in the value's length. A `host` in a
//! header list prints without its userinfo.
//!
//! # Fields
//!
//! Events have the target `shared_headers::access`. Names and types are OpenTelemetry's HTTP
//! server semantic conventions (stable), so `tracing-opentelemetry` and OTel log pipelines
//! read them as they are; the crate's own fields are under `shared_headers.` (its durations in
//! whole microseconds: an integer formats for a fraction of a float's cost). A field without a
//! value is absent.
//!
//! **Request text is printable ASCII**: every field built from what a client sent (the path,
//! the query, the route, the gRPC service and method, the host, the user agent, the referer,
//! the header lists, the annotations, a panic's message) prints each byte that is a control
//! character, DEL or part of a non-ASCII character percent-encoded (`%E2%80%A8` for U+2028,
//! `%09` for a tab); so a line is never broken or extended by what it reports, whatever the
//! formatter. A URL and its parts are written unquoted, their space, `"` and `\` encoded too
//! (`%20`, `%22`, `%5C`); other text (the user agent, the header lists, the annotations) is
//! recorded as a string, which a text formatter quotes and escapes.
//! A `%` of the text itself is written as it is.
//!
//! | field | type | what | example |
//! |---|---|---|---|
//! | `http.request.method` | string | the method; `_OTHER` for one outside RFC 9110 and RFC 5789 (PATCH) | `GET` |
//! | `http.request.method_original` | string | the method as received, when it is `_OTHER` | `PURGE` |
//! | `url.scheme` | string | the request's scheme, else the layer's [`default_scheme`](SharedHeadersLayer::default_scheme) | `http` |
//! | `url.path` | string | the path, escaped | `/caf%C3%A9` |
//! | `url.query` | string | the query, credentials redacted, escaped (absent without one, or with [`omit_query`](AccessLog::omit_query)) | `page=2&api_key=[redacted]` |
//! | `http.route` | string | the route template: axum's `MatchedPath` (feature `axum`, layer added with `Router::layer`); never the raw path | `/users/{id}` |
//! | `server.address`, `server.port` | string, int | the URI's authority (HTTP/2 `:authority`) or the `host` header (neither when `host` is secret); the port only when it is not the scheme's default | `api.example.com`, `8443` |
//! | `client.address`, `client.port` | string, int | the peer ([`SharedHeadersLayer::peer_address`]) | `127.0.0.1`, `50412` |
//! | `network.protocol.version` | string | the HTTP version | `1.1`, `2` |
//! | `user_agent.original` | string | the `user-agent` header | `curl/8.5.0` |
//! | `http.request.header.referer` | string | the `referer` header, its userinfo and query redacted | `https://[redacted]@a.example/?q=1` |
//! | `http.request.id` | string | the request id ([`SharedHeadersLayer::propagate`] with a request id: the incoming one when valid, else generated; the name is Elastic Common Schema's, as OpenTelemetry has none) | `4bf92f3577b34da6a3ce929d0e0e4736` |
//! | `http.response.status_code` | int | the status **sent** (absent if nothing was sent) | `503` |
//! | `http.response.body.size` | int | the bytes of body the server took (absent if nothing was sent) | `5` |
//! | `error.type` | string | [`ResponseEnd::error_type`], first match: the reason the layer knows (`timeout`, `panic`, `cancelled`, `failed` for the inner service's error), else how the body ended (`body_error`, `body_dropped`, `body_panic`), else a 5xx status sent (`503`), else the code of a server-error `grpc-status` (`13`); absent for a success | `timeout` |
//! | `http.server.request.duration` | float, s | the call of the layer to the end above | `1.002114` |
//! | `rpc.system`, `rpc.service`, `rpc.method` | string | for a gRPC call: `grpc` and its path's parts; for a Connect call: `connect_rpc` and the same | `grpc`, `pkg.Greeter`, `SayHello` |
//! | `rpc.grpc.status_code` | int | the `grpc-status` sent: in the trailers, or the head of a trailers-only answer | `4` |
//! | `exception.message` | string | the handler's panic message (`&str`/`String`), cut to 512 bytes | `index out of bounds` |
//! | `shared_headers.outcome` | string | who committed ([`Outcome`], as one token) | `timed_out` |
//! | `shared_headers.time_to_commit_us` | int, µs | the call to the commit ([`Committed::time_to_commit`]): where the head leaves, for an answer the layer sent at once | `200132` |
//! | `shared_headers.time_to_head_us` | int, µs | the call to the response head leaving the layer, when later than the commit (a handler that blocked its thread past the deadline) | `1001870` |
//! | `shared_headers.budget_us` | int, µs | the budget the request was given ([`Committed::budget`]), when a caller's budget header set it or was refused (the layer's own timeout is the same on every line) | `200000` |
//! | `shared_headers.budget_source` | string | `caller` (a budget header), or `server` when the caller's was refused | `caller` |
//! | `shared_headers.budget_error` | string | why the caller's budget header was refused, if it was | `a sign before the digits` |
//! | `shared_headers.annotations` | string | the sealed annotations (absent if none) | `x-user: ada` |
//! | `shared_headers.request_headers` | string | the configured request headers, secrets redacted (absent by default) | `accept: */*` |
//! | `shared_headers.response_headers` | string | the configured response headers **as sent**, secrets redacted (absent by default) | `content-type: text/plain` |
//!
//! In the header lists, a value longer than 1,024 bytes prints as its size (`[10240 bytes]`),
//! and a value with a comma is quoted, so that it never passes for more entries.
//!
//! The late-writes event (`writes refused after the commit`, `WARN`) has
//! `http.request.method`, `url.path`, `shared_headers.outcome`, `http.request.id`,
//! `shared_headers.refused_writes` and `shared_headers.since_commit_us` (int, µs).
//!
//! Levels by default: `INFO` for answers below 500, `WARN` for 5xx answers, failures,
//! timeouts, rejections, sheds, cancellations and bodies that failed or were dropped, `ERROR` for
//! panics (the handler's or the body's); each overridable ([`AccessLog::level`]). Every line is emitted inside the
//! request's span (the one current when the layer's service was called), whichever thread
//! emits it.
//!
//! # Cost
//!
//! The layer asks, at each call, whether a subscriber may take any of the log's lines (its most
//! severe level is enabled: one atomic load); if none may, the request pays nothing more for
//! the log, not even its post-commit activity line. Otherwise the line
//! allocates nothing of its own. Figures beside tower-http's `TraceLayer` stacks:
//! [`docs::server_cost`](crate::docs::server_cost#the-access-line-beside-tower-https-tracelayer).
//! With feature `access-json`, the crate's own writer of the line (`json::JsonLines`, one JSON
//! object per line, off the request's thread) costs a fraction of a `fmt` subscriber's.

use std::sync::Arc;

use tracing::Level;

use super::HeaderSelection;
use crate::exchange::Outcome;
use crate::policy::Policy;
use crate::redact::QueryRule;

#[cfg(doc)]
use super::{SharedHeadersLayer, end::ResponseEnd};
#[cfg(doc)]
use crate::exchange::Committed;

/// The settings of the `tracing` access log: levels, which headers it prints, and the query's
/// redaction. See the [module docs](self) for the line and its fields.
///
/// # Examples
///
/// ```
/// use http::header::{ACCEPT, HeaderName};
/// use tracing::Level;
/// use shared_headers::Outcome;
/// use shared_headers::server::{HeaderSelection, SharedHeadersLayer, access_log::AccessLog};
///
/// let log = AccessLog::new()
///     .level(Outcome::Cancelled, Level::INFO) // clients hang up all the time here
///     .request_headers(HeaderSelection::only([ACCEPT, HeaderName::from_static("x-request-id")]))
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
    shed: Level,
    /// The most severe of the levels: a request is tracked if a subscriber takes it (a
    /// subscriber's level is a threshold: if it takes none of the log's levels, it takes not
    /// this one).
    severest: Level,
    query: QueryRule,
    request_headers: HeaderSelection,
    response_headers: HeaderSelection,
    /// The layer's secret names (both policies'), set by the layer when it is built: asked
    /// for the headers of a handle without them (the annotations).
    secrets: Option<Arc<Policy>>,
    /// Whether `user-agent`, `referer` and `host` are among `secrets` (looked up once).
    hidden_defaults: [bool; 3],
}

impl Default for AccessLog {
    fn default() -> Self {
        Self::new()
    }
}

impl AccessLog {
    /// Query parameter names whose values are always redacted: OAuth's and OpenID's, AWS's
    /// and Google Cloud's signed URLs, Azure's SAS signature, and the usual names of
    /// passwords, sessions and one-time codes. Each is a credential by the token rule of the
    /// [module docs](self#safe-by-default), which redacts more (`user[password]`,
    /// `credentials`, `apiKey`); the list names the rule's common cases.
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

    /// The defaults: no header value but the three of the
    /// [module docs](self#safe-by-default); credential query parameters redacted; `INFO` for
    /// answers below 500, `WARN` for 5xx answers,
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
            shed: Level::WARN,
            severest: Level::ERROR,
            query: QueryRule::DEFAULT,
            request_headers: HeaderSelection::none(),
            response_headers: HeaderSelection::none(),
            secrets: None,
            hidden_defaults: [false; 3],
        }
    }

    /// The level of the lines of requests with `outcome`. For [`Outcome::Answered`] it is the
    /// level of answers below 500; 5xx answers have their own
    /// ([`server_error_level`](Self::server_error_level)). A body that failed takes the level
    /// of [`Outcome::Failed`], one dropped before its end that of [`Outcome::Cancelled`], one
    /// that panicked that of [`Outcome::Panicked`].
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
            Outcome::Shed => self.shed = level,
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
            self.shed,
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
        // Under `omit_query` no query prints, but the names still mark credentials in a
        // path parameter or a JSON-ish value.
        let (QueryRule::Shown { extra } | QueryRule::Omitted { extra }) = &mut self.query;
        extra.extend(names.into_iter().map(|name| name.into().into_boxed_str()));
        self
    }

    /// Leaves the query out of every line (and the query of every URL the line prints),
    /// whether [`redact_query_params`](Self::redact_query_params) is called before or after;
    /// its names still mark credentials in a path parameter (`/a;mytok=…`) for every printer.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::access_log::AccessLog;
    /// let log = AccessLog::new().omit_query();
    /// assert_eq!(log.query_for_log("a=1").to_string(), "");
    /// ```
    pub fn omit_query(mut self) -> Self {
        // The log's own credential names stay: they judge path parameters too.
        let (QueryRule::Shown { extra } | QueryRule::Omitted { extra }) = &mut self.query;
        let extra = std::mem::take(extra);
        self.query = QueryRule::Omitted { extra };
        self
    }

    /// Sets which request headers the line also prints (`shared_headers.request_headers`), as
    /// sealed, a secret value as `[redacted]`. Replaces the previous selection; default
    /// [`HeaderSelection::none`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::{HeaderSelection, access_log::AccessLog};
    /// use http::header::{ACCEPT, HeaderName};
    /// let log = AccessLog::new()
    ///     .request_headers(HeaderSelection::only([ACCEPT, HeaderName::from_static("x-request-id")]));
    /// # drop(log);
    /// ```
    pub fn request_headers(mut self, selection: HeaderSelection) -> Self {
        self.request_headers = selection;
        self
    }

    /// Sets which response headers the line also prints **as sent**
    /// (`shared_headers.response_headers`), a secret value as `[redacted]`. Replaces the
    /// previous selection; default [`HeaderSelection::none`]. With any other, the layer keeps
    /// a copy of the sent headers until the line (one allocation per request).
    /// [`HeaderSelection::all`] on both prints every header: long lines, for debugging.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::{HeaderSelection, access_log::AccessLog};
    /// let log = AccessLog::new()
    ///     .request_headers(HeaderSelection::all())
    ///     .response_headers(HeaderSelection::all());
    /// # drop(log);
    /// ```
    pub fn response_headers(mut self, selection: HeaderSelection) -> Self {
        self.response_headers = selection;
        self
    }
}

mod decide;
mod emit;
mod format;
#[cfg(feature = "access-json")]
#[cfg_attr(docsrs, doc(cfg(feature = "access-json")))]
pub mod json;
#[cfg(test)]
mod tests;
