//! What the lines print: the request's authority, method and budget, the configured headers
//! with secrets redacted, and queries and URLs with their credentials redacted.

use std::fmt;

use http::header::{HeaderName, REFERER};
use http::{HeaderMap, Method};

use super::{AccessLog, Query, Select};
use crate::exchange::Committed;
use crate::snapshot::Snapshot;

pub(super) use crate::server::end::version_str;

pub(super) fn header_name<N: AsRef<str>>(name: N) -> HeaderName {
    let name = name.as_ref();
    HeaderName::try_from(name).unwrap_or_else(|_| panic!("not a header name: {name:?}"))
}

/// OpenTelemetry's `http.request.method`, and the original when it is `_OTHER`.
pub(super) fn otel_method(method: Option<&Method>) -> (&str, Option<&str>) {
    let Some(method) = method else {
        return ("", None);
    };
    match crate::server::end::otel_method(method) {
        "_OTHER" => ("_OTHER", Some(method.as_str())),
        known => (known, None),
    }
}

/// The server's host and port: the URI's authority (HTTP/2's `:authority`, an absolute-form
/// target), else the `host` header (unless secret).
pub(super) fn server_authority<'a>(
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
pub(super) fn split_authority(authority: &str) -> Option<(&str, Option<u16>)> {
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

pub(super) fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
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

/// The longest header value a line prints; a longer one prints as its size.
pub(super) const MAX_LOGGED_VALUE: usize = 1024;

/// The headers a line prints: the selected ones of `map`, secrets redacted by `handle`'s
/// rules and the log's.
pub(super) struct HeaderList<'a> {
    pub(super) log: &'a AccessLog,
    pub(super) select: &'a Select,
    pub(super) handle: &'a Snapshot,
    pub(super) map: &'a HeaderMap,
}

impl<'a> HeaderList<'a> {
    pub(super) fn of(
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
            } else if value.len() > MAX_LOGGED_VALUE {
                // Never a client's oversized value in a line (a 10 KB request id): its size.
                write!(f, "[{} bytes]", value.len())?;
            } else if value
                .as_bytes()
                .iter()
                .any(|&b| !(b' '..=b'~').contains(&b))
            {
                // A control character (a tab too) or a byte outside ASCII is bad input, not
                // something to reproduce, even escaped.
                f.write_str("[malformed]")?;
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
pub(super) struct Raw<'a>(pub(super) &'a str);

impl fmt::Display for Raw<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// Whether a header's value is a URL whose query the line redacts.
pub(super) fn carries_url(name: &HeaderName) -> bool {
    *name == REFERER || *name == http::header::LOCATION || *name == http::header::CONTENT_LOCATION
}

/// A referer (or any URL) with its query redacted as the request's.
pub(super) struct Referer<'a> {
    pub(super) log: &'a AccessLog,
    pub(super) referer: &'a str,
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
pub(super) struct QueryShown<'a> {
    pub(super) log: &'a AccessLog,
    pub(super) query: &'a str,
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
pub(super) fn is_credential(name: &str, extra: &[Box<str>]) -> bool {
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
pub(super) fn known_credential(name: &[u8]) -> bool {
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
pub(super) fn decode_lower<'b>(name: &[u8], buf: &'b mut [u8; 64]) -> &'b [u8] {
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

pub(super) fn hex(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}
