//! The request line of a request the layer served ([`RequestLine`]), read from the commit's
//! record, for the server room's own code (its public view is [`Committed`]'s accessors), and
//! the server's address as every printer shows it.

use std::fmt;

use http::{Method, Uri};

use std::borrow::Cow;

use http::HeaderValue;

use crate::exchange::{Committed, Line};

/// The request line of a request the server layer served: what the layer saw of the request
/// when its service was called. A view of the commit's record ([`Committed`]); an exchange
/// made without the layer ([`Exchange::new`](crate::Exchange::new)) has none.
///
/// Its `Debug` (and the record's, which prints it) never prints a secret of the URI: its
/// userinfo is `[redacted]@`, and the values of its credential path and query parameters
/// (`;jsessionid=`, `?token=`) are redacted by the crate's one rule, the one every printer
/// asks (with the names the layer's access log adds to it).
#[derive(Clone, Copy)]
pub(crate) struct RequestLine<'a> {
    line: &'a Line,
}

impl fmt::Debug for RequestLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.line, f)
    }
}

impl<'a> RequestLine<'a> {
    /// The request line of the request `committed` records, if the server layer served it.
    #[inline]
    pub(crate) fn of(committed: &'a Committed) -> Option<Self> {
        committed.line().map(|line| RequestLine { line })
    }

    /// The request's method, as received.
    #[inline]
    pub(crate) fn method(&self) -> &'a Method {
        &self.line.method
    }

    /// The request's URI, as received.
    #[inline]
    pub(crate) fn uri(&self) -> &'a Uri {
        &self.line.uri
    }

    /// Whether the layer served the request as a gRPC call (`content-type: application/grpc`).
    #[inline]
    pub(crate) fn is_grpc(&self) -> bool {
        self.line.grpc
    }

    /// The server's host and port as every printer shows them ([`server_address`]), from
    /// what the record kept at the call: the URI's authority, else `host` as received.
    pub(crate) fn server_address(&self, scheme: &str) -> Option<(Cow<'a, str>, Option<u16>)> {
        server_address(
            &self.line.uri,
            self.line.host.as_ref(),
            self.line.host_secret,
            scheme,
        )
    }
}

/// The request's `host` as the record keeps it at the call: the received value when the URI
/// has no authority (else the authority is read), and whether `host` is secret under
/// `policy` (the layer's request policy, which holds every secret name of the layer).
pub(crate) fn received_host<'a>(
    uri: &Uri,
    headers: &'a http::HeaderMap,
    policy: Option<&crate::policy::Policy>,
) -> (Option<&'a HeaderValue>, bool) {
    let host = headers.get(http::header::HOST);
    let secret = match host {
        Some(value) => crate::policy::is_secret(&http::header::HOST, value, policy),
        None => crate::policy::is_secret_name(&http::header::HOST, policy),
    };
    (host.filter(|_| uri.authority().is_none()), secret)
}

/// The request line's parts read straight from a record, for the server room's own code (the
/// access line, the metrics, the response future): `None` for an exchange the layer did not
/// make.
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) trait LineOf {
    /// The request line, if the layer served the request.
    fn request_line(&self) -> Option<RequestLine<'_>>;

    /// Whether the layer served the request as a gRPC call.
    fn is_grpc(&self) -> bool {
        self.request_line().is_some_and(|line| line.is_grpc())
    }
}

impl LineOf for Committed {
    #[inline]
    fn request_line(&self) -> Option<RequestLine<'_>> {
        RequestLine::of(self)
    }
}

impl LineOf for crate::exchange::Exchange {
    #[inline]
    fn request_line(&self) -> Option<RequestLine<'_>> {
        self.line().map(|line| RequestLine { line })
    }
}

/// The server's host and port as every printer shows them (the access line, the server span):
/// the URI's authority (HTTP/2's `:authority`, an absolute-form target), else the `host`
/// header; neither when `host` is secret (`host_secret`: the authority is the host header's
/// value by another name). The host escaped as request text is (printable ASCII, the rest
/// percent-encoded), without userinfo; the port only when it is not `scheme`'s default
/// (OpenTelemetry's rule).
#[cfg_attr(
    not(any(feature = "tracing", feature = "opentelemetry")),
    allow(dead_code)
)]
pub(crate) fn server_address<'a>(
    uri: &'a Uri,
    host: Option<&'a HeaderValue>,
    host_secret: bool,
    scheme: &str,
) -> Option<(Cow<'a, str>, Option<u16>)> {
    if host_secret {
        return None;
    }
    let authority = match uri.authority() {
        Some(authority) => authority.as_str(),
        None => std::str::from_utf8(host?.as_bytes()).ok()?,
    };
    let (host, port) = split_authority(authority)?;
    let default = match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    };
    Some((
        crate::redact::escape::text_str(host),
        port.filter(|p| Some(*p) != default),
    ))
}

pub(crate) use crate::semconv::split_authority;

/// Whether a header block's `content-type` is gRPC's: `application/grpc`, alone or with a
/// `+format` or `;parameters` (`application/grpc+proto`; gRPC-Web's `application/grpc-web…`
/// excluded). The one content-type rule for a request and for its response.
pub(super) fn is_grpc(headers: &http::HeaderMap) -> bool {
    let Some(value) = headers.get(http::header::CONTENT_TYPE) else {
        return false;
    };
    let value = value.as_bytes();
    let prefix = b"application/grpc";
    value.len() >= prefix.len()
        && value[..prefix.len()].eq_ignore_ascii_case(prefix)
        && matches!(value.get(prefix.len()), None | Some(b'+') | Some(b';'))
}

#[cfg(test)]
mod tests {
    #[test]
    fn grpc_content_types() {
        let is = |value: &str| {
            let mut headers = http::HeaderMap::new();
            headers.insert("content-type", value.parse().unwrap());
            super::is_grpc(&headers)
        };
        assert!(is("application/grpc"));
        assert!(is("application/grpc+proto"));
        assert!(is("Application/GRPC;charset=utf-8"));
        assert!(!is("application/grpc-web"));
        assert!(!is("application/json"));
        assert!(!is("application/grp"));
        assert!(!super::is_grpc(&http::HeaderMap::new()));
    }
}
