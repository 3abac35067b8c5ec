//! What the log decides for each request, from the layer's rules: the level of a line, which
//! headers are secret, and how a query prints.

use std::fmt;
use std::sync::Arc;

use http::header::HeaderName;
use http::{HeaderValue, StatusCode};
use tracing::Level;

use super::AccessLog;
use crate::exchange::Outcome;
use crate::policy::Policy;
use crate::redact::QueryRule;
use crate::redact::url::QueryShown;
use crate::server::end::Ending;
use crate::snapshot::Snapshot;

impl AccessLog {
    /// The rule every printer of a request's path and query follows under this log: `Some`
    /// when the log adds names of its own to the credential rule, or omits the query (then no
    /// printer shows it), when the layer is built.
    pub(in crate::server) fn printers_rule(&self) -> Option<Arc<QueryRule>> {
        match &self.query {
            QueryRule::Shown { extra } if extra.is_empty() => None,
            _ => Some(Arc::new(self.query.clone())),
        }
    }

    /// This log with the layer's secret names (both policies'), when the layer is built.
    pub(in crate::server) fn with_secrets(&self, secrets: Option<Arc<Policy>>) -> AccessLog {
        let mut log = self.clone();
        log.hidden_defaults = DEFAULT_FIELDS.map(|name| {
            secrets
                .as_deref()
                .is_some_and(|secrets| secrets.has_secret(&name))
        });
        log.secrets = secrets;
        log
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
        QueryShown {
            rule: &self.query,
            query,
        }
    }

    /// Whether a subscriber may take one of the log's lines: its most severe level is enabled
    /// (one atomic load).
    #[inline]
    pub(in crate::server) fn interested(&self) -> bool {
        tracing::level_filters::STATIC_MAX_LEVEL >= self.severest
            && tracing::level_filters::LevelFilter::current() >= self.severest
    }

    pub(in crate::server) fn logs_response_headers(&self) -> bool {
        !self.response_headers.is_none()
    }

    pub(super) fn level_of(
        &self,
        outcome: Outcome,
        status: Option<StatusCode>,
        ending: Ending,
    ) -> Level {
        match outcome {
            Outcome::Answered => match (status, ending) {
                (Some(status), _) if status.is_server_error() => self.server_error,
                (_, Ending::Panicked) => self.panicked,
                (_, Ending::Aborted) => self.failed,
                (_, Ending::Dropped) => self.cancelled,
                _ => self.answered,
            },
            Outcome::Failed => self.failed,
            Outcome::TimedOut => self.timed_out,
            Outcome::Cancelled => self.cancelled,
            Outcome::Rejected => self.rejected,
            Outcome::Panicked => self.panicked,
            Outcome::Shed => self.shed,
        }
    }

    /// Whether a header named `name` (its value `value`, if the request has one) is secret:
    /// the one question every printed field asks (the default fields, the header lists, the
    /// annotations, the host behind `server.address`). Secret when the value is flagged
    /// sensitive, or the name is secret under `handle`'s rules (the always-secret names, its
    /// policy's) or the layer's (both policies' names).
    pub(in crate::server) fn is_secret(
        &self,
        handle: &Snapshot,
        name: &HeaderName,
        value: Option<&HeaderValue>,
    ) -> bool {
        value.is_some_and(HeaderValue::is_sensitive)
            || handle.is_secret_name(name)
            || self.secret_name(name)
    }

    /// Whether the layer's secret names hold `name`; the three names printed by default are
    /// looked up in `hidden_defaults` (kept by [`with_secrets`](Self::with_secrets)).
    #[inline]
    pub(super) fn secret_name(&self, name: &HeaderName) -> bool {
        match DEFAULT_FIELDS.iter().position(|default| default == name) {
            Some(at) => self.hidden_defaults[at],
            None => self
                .secrets
                .as_deref()
                .is_some_and(|secrets| secrets.has_secret(name)),
        }
    }

    /// A request header that the line prints by default (`user-agent`, `referer`), unless it
    /// is secret ([`is_secret`](Self::is_secret)).
    pub(super) fn request_value<'a>(
        &self,
        request: &'a Snapshot,
        name: &HeaderName,
    ) -> Option<&'a HeaderValue> {
        let value = request.get(name);
        if self.is_secret(request, name, value) {
            return None;
        }
        value
    }
}

/// The headers the line prints by default, in `hidden_defaults`' order.
const DEFAULT_FIELDS: [HeaderName; 3] = [
    http::header::USER_AGENT,
    http::header::REFERER,
    http::header::HOST,
];
