//! OpenTelemetry's HTTP semantic conventions as values: the names of methods, protocol versions,
//! schemes and errors, and the duration histograms' buckets. In the core because both rooms
//! name things this way: the server's end report, access line, metrics and span, and the
//! client's spans and `http.client.request.duration` (it imports neither room).
#![cfg_attr(not(feature = "server"), allow(dead_code))]

use http::{Method, StatusCode, Version};

use crate::exchange::Outcome;

/// The advisory bucket boundaries of `http.server.request.duration` and
/// `http.client.request.duration`, in seconds.
#[cfg_attr(not(feature = "opentelemetry"), allow(dead_code))]
pub(crate) const DURATION_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];

/// `http.request.method` for `method`: the method if RFC 9110 or RFC 5789 defines it, else
/// `_OTHER`.
pub(crate) fn method(method: &Method) -> &'static str {
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

/// `network.protocol.version` for `version`.
#[cfg_attr(
    not(any(feature = "tracing", feature = "opentelemetry")),
    allow(dead_code)
)]
pub(crate) fn protocol_version(version: Version) -> &'static str {
    match version {
        Version::HTTP_09 => "0.9",
        Version::HTTP_10 => "1.0",
        Version::HTTP_11 => "1.1",
        Version::HTTP_2 => "2",
        Version::HTTP_3 => "3",
        _ => "",
    }
}

/// `url.scheme` as a bounded value: `http`, `https`, `default` when the request has none,
/// `_OTHER` for any other scheme a client sent.
pub(crate) fn scheme(scheme: Option<&str>, default: &'static str) -> &'static str {
    match scheme {
        None => default,
        Some("http") => "http",
        Some("https") => "https",
        Some(_) => "_OTHER",
    }
}

/// `error.type` of an outcome the layer knows to be a failure (`timeout`, `panic`,
/// `cancelled`, `failed`); `None` for an answer (its status decides).
pub(crate) fn outcome_error(outcome: Outcome) -> Option<&'static str> {
    match outcome {
        Outcome::TimedOut => Some("timeout"),
        Outcome::Panicked => Some("panic"),
        Outcome::Cancelled => Some("cancelled"),
        Outcome::Failed => Some("failed"),
        Outcome::Shed => Some("deadline_unmeetable"),
        Outcome::Answered | Outcome::Rejected => None,
    }
}

/// `error.type` of a status sent: the status of a 5xx as a static string
/// (`StatusCode::as_str` borrows the status), `None` for any other.
pub(crate) fn status_error(status: StatusCode) -> Option<&'static str> {
    const CODES: [&str; 12] = [
        "500", "501", "502", "503", "504", "505", "506", "507", "508", "509", "510", "511",
    ];
    if !status.is_server_error() {
        return None;
    }
    Some(
        CODES
            .get(usize::from(status.as_u16() - 500))
            .copied()
            .unwrap_or("5xx"),
    )
}

/// `error.type` of a `grpc-status`: the code of a server error (OpenTelemetry's RPC
/// conventions: 2, 4, 12, 13, 14, 15), `None` for any other.
pub(crate) fn grpc_error(code: u16) -> Option<&'static str> {
    match code {
        2 => Some("2"),
        4 => Some("4"),
        12 => Some("12"),
        13 => Some("13"),
        14 => Some("14"),
        15 => Some("15"),
        _ => None,
    }
}

/// `host[:port]` (an IPv6 literal in brackets) into the host and the port; userinfo (never
/// printed) is not part of the host. The one split of the server's line and span and the
/// client's span and metric. An empty host (`host:` as HTTP/1.1 allows, `:80`, `[]`) is no
/// address: `None`.
pub(crate) fn split_authority(authority: &str) -> Option<(&str, Option<u16>)> {
    split_host_port(authority).filter(|(host, _)| !host.is_empty())
}

fn split_host_port(authority: &str) -> Option<(&str, Option<u16>)> {
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
