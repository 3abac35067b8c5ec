//! What may travel: the names refused outright, and the checks of a propagated value by the
//! kind of its name (the W3C trace context and baggage formats and bounds, B3's formats, and
//! visible ASCII for everything).

use http::HeaderName;

use super::PropagationError;
use crate::policy::is_secret_name;

/// W3C Baggage: a platform must propagate at most 64 list members and 8,192 bytes.
pub(super) const BAGGAGE_MAX_MEMBERS: usize = 64;
pub(super) const BAGGAGE_MAX_BYTES: usize = 8192;
/// W3C Trace Context: at most 32 `tracestate` list members; 512 bytes is what every vendor
/// must pass on.
pub(super) const TRACESTATE_MAX_MEMBERS: usize = 32;
pub(super) const TRACESTATE_MAX_BYTES: usize = 512;

/// How the value of a propagated name is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Visible ASCII, space and tab only.
    Any,
    /// W3C `traceparent`.
    TraceParent,
    /// W3C `tracestate`: a list, passed on only with a valid `traceparent`.
    TraceState,
    /// W3C `baggage`: a list.
    Baggage,
    /// B3's single header `b3`.
    B3,
    /// `x-b3-traceid`: 16 or 32 lowercase hex digits.
    B3TraceId,
    /// `x-b3-spanid`, `x-b3-parentspanid`: 16 lowercase hex digits.
    B3SpanId,
    /// `x-b3-sampled`: `0`, `1` (or `true`, `false`).
    B3Sampled,
    /// `x-b3-flags`: `1`.
    B3Flags,
}

impl Kind {
    pub(super) fn of(name: &HeaderName) -> Kind {
        match name.as_str() {
            "traceparent" => Kind::TraceParent,
            "tracestate" => Kind::TraceState,
            "baggage" => Kind::Baggage,
            "b3" => Kind::B3,
            "x-b3-traceid" => Kind::B3TraceId,
            "x-b3-spanid" | "x-b3-parentspanid" => Kind::B3SpanId,
            "x-b3-sampled" => Kind::B3Sampled,
            "x-b3-flags" => Kind::B3Flags,
            _ => Kind::Any,
        }
    }

    /// List headers: several field lines join into one value (RFC 9110, 5.3).
    pub(super) fn is_list(self) -> bool {
        matches!(self, Kind::TraceState | Kind::Baggage)
    }
}

pub(super) enum Check {
    Ok,
    Malformed,
    OverLimit,
}

pub(super) fn check(kind: Kind, value: &[u8]) -> Check {
    // Every propagated value: visible ASCII, space and tab (no control character, no
    // obs-text that another stack would reject or mangle).
    // A fold, not `all`: no early exit, so the loop vectorizes (the values are short and
    // nearly always valid).
    let visible = value.iter().fold(true, |ok, &b| {
        ok & ((b == b'\t') | (b.wrapping_sub(b' ') <= b'~' - b' '))
    });
    if !visible {
        return Check::Malformed;
    }
    let ok = match kind {
        Kind::Any => true,
        Kind::TraceParent => is_traceparent(value),
        Kind::TraceState => {
            if value.len() > TRACESTATE_MAX_BYTES || too_many(value, TRACESTATE_MAX_MEMBERS) {
                return Check::OverLimit;
            }
            true
        }
        Kind::Baggage => {
            if value.len() > BAGGAGE_MAX_BYTES || too_many(value, BAGGAGE_MAX_MEMBERS) {
                return Check::OverLimit;
            }
            true
        }
        Kind::B3 => is_b3_single(value),
        Kind::B3TraceId => is_hex(value, 16) || is_hex(value, 32),
        Kind::B3SpanId => is_hex(value, 16),
        Kind::B3Sampled => matches!(value, b"0" | b"1" | b"true" | b"false"),
        Kind::B3Flags => value == b"1",
    };
    if ok { Check::Ok } else { Check::Malformed }
}

/// Whether a comma-separated list has more than `max` members. A member takes at least one
/// byte and a comma, so a list shorter than `2 * max + 1` bytes cannot: it is not counted.
fn too_many(value: &[u8], max: usize) -> bool {
    value.len() > 2 * max && members(value) > max
}

/// The members of a comma-separated list, empty ones not counted.
fn members(value: &[u8]) -> usize {
    value
        .split(|&b| b == b',')
        .filter(|m| m.iter().any(|&b| b != b' ' && b != b'\t'))
        .count()
}

/// `len` lowercase hex digits.
fn is_hex(value: &[u8], len: usize) -> bool {
    value.len() == len
        && value.iter().fold(true, |ok, &b| {
            ok & ((b.wrapping_sub(b'0') <= 9) | (b.wrapping_sub(b'a') <= 5))
        })
}

fn all_zero(value: &[u8]) -> bool {
    value.iter().fold(true, |zero, &b| zero & (b == b'0'))
}

/// W3C `traceparent`: `version-traceid-parentid-flags`, lowercase hex, version not `ff`, ids
/// not all zero; version `00` is exactly 55 bytes, a later version may add `-...` after them.
pub(super) fn is_traceparent(v: &[u8]) -> bool {
    if v.len() < 55 || v[2] != b'-' || v[35] != b'-' || v[52] != b'-' {
        return false;
    }
    let (version, trace, parent, flags) = (&v[..2], &v[3..35], &v[36..52], &v[53..55]);
    if !is_hex(version, 2) || version == b"ff" {
        return false;
    }
    if !is_hex(trace, 32) || all_zero(trace) || !is_hex(parent, 16) || all_zero(parent) {
        return false;
    }
    if !is_hex(flags, 2) {
        return false;
    }
    match version {
        b"00" => v.len() == 55,
        _ => v.len() == 55 || v[55] == b'-',
    }
}

/// B3 single header: `0`, `1`, `d`, or `traceid-spanid[-sampling[-parentspanid]]`.
pub(super) fn is_b3_single(v: &[u8]) -> bool {
    if matches!(v, b"0" | b"1" | b"d") {
        return true;
    }
    let mut parts = v.split(|&b| b == b'-');
    let (Some(trace), Some(span)) = (parts.next(), parts.next()) else {
        return false;
    };
    if !(is_hex(trace, 16) || is_hex(trace, 32)) || !is_hex(span, 16) {
        return false;
    }
    match (parts.next(), parts.next(), parts.next()) {
        (None, _, _) => true,
        (Some(sampling), None, _) => matches!(sampling, b"0" | b"1" | b"d"),
        (Some(sampling), Some(parent), None) => {
            matches!(sampling, b"0" | b"1" | b"d") && is_hex(parent, 16)
        }
        _ => false,
    }
}

/// Names that never travel: credentials (also under a policy of none), hop-by-hop and framing
/// headers, and budget headers.
pub(super) fn refuse(name: &HeaderName) -> Result<(), PropagationError> {
    if is_secret_name(name, None) {
        return Err(PropagationError::Secret { name: name.clone() });
    }
    const HOP: &[&str] = &[
        "host",
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "content-length",
        "content-type",
        "content-encoding",
        "expect",
        "grpc-timeout",
        "connect-timeout-ms",
        "x-envoy-expected-rq-timeout-ms",
    ];
    if HOP.contains(&name.as_str()) {
        return Err(PropagationError::NotEndToEnd { name: name.clone() });
    }
    Ok(())
}
