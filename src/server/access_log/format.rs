//! What the lines print, but URLs: the request's authority, method and budget, text escaped
//! for a field, and the configured header lists with secrets redacted (URLs and queries are
//! in `url.rs`).

use std::fmt;

use std::borrow::Cow;

use http::header::HeaderName;
use http::{HeaderMap, HeaderValue, Method};

use super::AccessLog;
use crate::exchange::Committed;
pub(super) use crate::redact::escape::{is_plain_text, write_escaped};
use crate::redact::url::write_header_value;
use crate::server::HeaderSelection;
use crate::snapshot::Snapshot;

pub(super) use crate::semconv::protocol_version;

/// OpenTelemetry's `http.request.method`, and the original when it is `_OTHER`.
pub(super) fn otel_method(method: Option<&Method>) -> (&str, Option<&str>) {
    let Some(method) = method else {
        return ("", None);
    };
    match crate::semconv::method(method) {
        "_OTHER" => ("_OTHER", Some(method.as_str())),
        known => (known, None),
    }
}

/// A gRPC call's service and method, from its path `/package.Service/Method`.
pub(super) fn rpc_parts(path: &str) -> Option<(&str, &str)> {
    let (service, method) = path.strip_prefix('/')?.split_once('/')?;
    (!service.is_empty() && !method.is_empty() && !method.contains('/'))
        .then_some((service, method))
}

/// A duration in whole microseconds (an integer field formats for a tenth of a float's cost).
pub(super) fn micros(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

/// The budget and its source, when they say more than the layer's configuration: a caller's
/// budget, or the layer's own when a caller's header was refused. The layer's own timeout
/// alone is the same on every line, and left out.
pub(super) fn budget_of(
    committed: &Committed,
) -> (Option<std::time::Duration>, Option<&'static str>) {
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

// ---- the one rule of printed text (`escape.rs`) applied to a field ----

/// Text from a request for a quoted field (a header's value, the host, a panic's message): as
/// it is when it is printable ASCII (borrowed: the common case costs one pass), else with the
/// other bytes percent-encoded (allocates, for bad or non-ASCII input only).
pub(super) fn text(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(plain) if is_plain_text(bytes) => Cow::Borrowed(plain),
        _ => {
            let mut escaped = String::with_capacity(bytes.len() + 16);
            let _ = write_escaped(&mut escaped, bytes, false);
            Cow::Owned(escaped)
        }
    }
}

/// A writer that escapes `"` and `\` for text written between quotes.
struct Quoting<'a, 'b>(&'a mut fmt::Formatter<'b>);

impl fmt::Write for Quoting<'_, '_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut start = 0;
        for (at, b) in s.bytes().enumerate() {
            if b == b'"' || b == b'\\' {
                self.0.write_str(&s[start..at])?;
                self.0.write_str(if b == b'"' { "\\\"" } else { "\\\\" })?;
                start = at + 1;
            }
        }
        self.0.write_str(&s[start..])
    }
}

// ---- header lists ----

/// The longest header value a line prints; a longer one prints as its size.
pub(super) const MAX_LOGGED_VALUE: usize = 1024;

/// Every name, for the annotations' list.
pub(super) static ALL: HeaderSelection = crate::server::selection::ALL;

/// The headers a line prints: the selected ones of `map`, secrets redacted by `handle`'s
/// rules and the log's ([`AccessLog::is_secret`]).
pub(super) struct HeaderList<'a> {
    pub(super) log: &'a AccessLog,
    pub(super) select: &'a HeaderSelection,
    pub(super) handle: &'a Snapshot,
    /// Another handle whose secret names are secret here too (the annotations': the
    /// request's).
    pub(super) also: Option<&'a Snapshot>,
    pub(super) map: &'a HeaderMap,
}

impl<'a> HeaderList<'a> {
    pub(super) fn of(
        log: &'a AccessLog,
        select: &'a HeaderSelection,
        handle: &'a Snapshot,
        map: Option<&'a HeaderMap>,
    ) -> Option<Self> {
        if select.is_none() {
            return None;
        }
        Some(HeaderList {
            log,
            select,
            handle,
            also: None,
            map: map?,
        })
    }
}

impl fmt::Display for HeaderList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (name, value) in self.map {
            if !self.select.contains(name) {
                continue;
            }
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            write!(f, "{name}: ")?;
            let shown = Value {
                log: self.log,
                name,
                value,
            };
            if self.log.is_secret(self.handle, name, Some(value))
                || self.also.is_some_and(|also| also.is_secret_name(name))
            {
                f.write_str("[redacted]")?;
            } else if value.len() > MAX_LOGGED_VALUE {
                // Never a client's oversized value in a line (a 10 KB request id): its size.
                write!(f, "[{} bytes]", value.len())?;
            } else if value.as_bytes().contains(&b',') {
                // Quoted, so that it can never pass for more entries.
                f.write_str("\"")?;
                fmt::Write::write_fmt(&mut Quoting(f), format_args!("{shown}"))?;
                f.write_str("\"")?;
            } else {
                fmt::Display::fmt(&shown, f)?;
            }
        }
        Ok(())
    }
}

/// A header's value as a list prints it (not a secret, not oversized): a URL-valued header's
/// as a URL ([`Url`]); any other's escaped, the userinfo of each URL in it redacted.
struct Value<'a> {
    log: &'a AccessLog,
    name: &'a HeaderName,
    value: &'a HeaderValue,
}

impl fmt::Display for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_header_value(f, &self.log.query, self.name, self.value.as_bytes())
    }
}

/// A trusted token (a method, a scheme, the crate's own words) written as it is: `Display`
/// straight to the writer, without `Formatter::pad`'s look at width and precision.
pub(super) struct Raw<'a>(pub(super) &'a str);

impl fmt::Display for Raw<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}
