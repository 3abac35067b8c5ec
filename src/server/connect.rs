//! The layer's own answers (a timeout, a shed, a rejection, a caught panic) in the Connect
//! protocol's words (connectrpc.com/docs/protocol): which requests are Connect calls, and the
//! status, `content-type` and body of each answer. Every body is a static byte string: an
//! answer allocates nothing.

use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, StatusCode, Uri};

use crate::exchange::{ConnectCall, Exchange, Line, Outcome};

/// Whether a request is a Connect call, and which kind:
///
/// * streaming: a `POST` with `content-type: application/connect+<codec>` (and, if the
///   request has one, `connect-protocol-version: 1`): the content type alone names the
///   protocol, as for connect-go's `ErrorWriter`;
/// * unary: a `POST` with `connect-protocol-version: 1`, or a `GET` with `connect=v1` in its
///   query. The header (or the query) is required: a plain `POST` of `application/json` is
///   an ordinary HTTP request, whose answers stay HTTP's (connect-go's
///   `WithRequireConnectProtocolHeader`; Connect's own clients always send it).
///
/// A gRPC call is never asked (its answers are gRPC's).
pub(super) fn detect(method: &Method, uri: &Uri, headers: &HeaderMap) -> Option<ConnectCall> {
    if method == Method::POST {
        if let Some(content_type) = headers.get(header::CONTENT_TYPE) {
            // gRPC and gRPC-Web first, whatever else the request carries (as connect-go's
            // `classifyRequest`).
            let bytes = content_type.as_bytes();
            if bytes.len() >= 16 && bytes[..16].eq_ignore_ascii_case(b"application/grpc") {
                return None;
            }
            if starts_with_ignore_case(content_type.as_bytes(), b"application/connect+") {
                return match headers.get("connect-protocol-version") {
                    Some(version) if version != "1" => None,
                    _ => Some(ConnectCall::Stream(content_type.clone())),
                };
            }
        }
        return headers
            .get("connect-protocol-version")
            .is_some_and(|version| version == "1")
            .then_some(ConnectCall::Unary);
    }
    if method == Method::GET {
        return uri
            .query()
            .is_some_and(|query| query.split('&').any(|pair| pair == "connect=v1"))
            .then_some(ConnectCall::Unary);
    }
    None
}

fn starts_with_ignore_case(value: &[u8], prefix: &[u8]) -> bool {
    value.len() > prefix.len() && value[..prefix.len()].eq_ignore_ascii_case(prefix)
}

/// One own answer in Connect's form: the HTTP status of a unary answer (the Connect
/// specification's code-to-HTTP table), the unary JSON body and the streaming end-stream
/// message (its envelope included).
struct Answer {
    status: StatusCode,
    unary: &'static [u8],
    stream: &'static [u8],
}

/// The end-stream envelope around `json`: flags `0x02` (end of stream, not compressed), the
/// length as 4 bytes big-endian, the JSON.
const fn envelope<const N: usize>(json: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out[0] = 0x02;
    let length = (json.len() as u32).to_be_bytes();
    out[1] = length[0];
    out[2] = length[1];
    out[3] = length[2];
    out[4] = length[3];
    let mut i = 0;
    while i < json.len() {
        out[5 + i] = json[i];
        i += 1;
    }
    out
}

macro_rules! answer {
    ($name:ident, $code:literal, $message:literal, $status:expr) => {
        static $name: Answer = {
            const UNARY: &str =
                concat!("{\"code\":\"", $code, "\",\"message\":\"", $message, "\"}");
            const END: &str = concat!(
                "{\"error\":{\"code\":\"",
                $code,
                "\",\"message\":\"",
                $message,
                "\"}}"
            );
            const STREAM: [u8; END.len() + 5] = envelope(END.as_bytes());
            Answer {
                status: $status,
                unary: UNARY.as_bytes(),
                stream: &STREAM,
            }
        };
    };
}

// The codes are gRPC's for the same answers (`future.rs`), so that both protocols say the same.
answer!(
    DEADLINE,
    "deadline_exceeded",
    "deadline exceeded",
    StatusCode::GATEWAY_TIMEOUT
);
answer!(
    SHED,
    "unavailable",
    "refused: overloaded or the deadline cannot be met",
    StatusCode::SERVICE_UNAVAILABLE
);
answer!(
    REJECTED,
    "resource_exhausted",
    "request headers over the server's limits",
    StatusCode::TOO_MANY_REQUESTS
);
answer!(
    INTERNAL,
    "internal",
    "internal error",
    StatusCode::INTERNAL_SERVER_ERROR
);

fn of(outcome: Outcome) -> &'static Answer {
    match outcome {
        Outcome::TimedOut => &DEADLINE,
        // Refused by admission (overloaded, or the deadline cannot be met here): `unavailable`,
        // "try elsewhere now", told apart from a timeout's `deadline_exceeded`.
        Outcome::Shed => &SHED,
        Outcome::Rejected => &REJECTED,
        _ => &INTERNAL,
    }
}

/// The HTTP status of the layer's own answer for `outcome` to a Connect call: the code's
/// status for a unary call, 200 for a streaming one (its error is in the end-stream message).
pub(super) fn status(call: &ConnectCall, outcome: Outcome) -> StatusCode {
    match call {
        ConnectCall::Unary => of(outcome).status,
        ConnectCall::Stream(_) => StatusCode::OK,
    }
}

/// The HTTP status of the layer's own answer for `outcome` to the request of `exchange`:
/// 200 for a gRPC call (its status is `grpc-status`), Connect's for a Connect call, else
/// `configured` (the layer's setting).
pub(super) fn own_status(
    exchange: &Exchange,
    outcome: Outcome,
    configured: StatusCode,
) -> StatusCode {
    match exchange.line() {
        Some(line) if line.grpc => StatusCode::OK,
        Some(Line {
            connect: Some(call),
            ..
        }) => status(call, outcome),
        _ => configured,
    }
}

/// Makes `headers` those of the layer's own answer for `outcome` to a Connect call (its
/// `content-type`), and returns its body.
pub(super) fn answer(
    call: &ConnectCall,
    outcome: Outcome,
    headers: &mut HeaderMap,
) -> &'static [u8] {
    let answer = of(outcome);
    match call {
        ConnectCall::Unary => {
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            answer.unary
        }
        ConnectCall::Stream(content_type) => {
            headers.insert(header::CONTENT_TYPE, content_type.clone());
            answer.stream
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detect_of(
        method: Method,
        uri: &str,
        headers: &[(&'static str, &'static str)],
    ) -> Option<ConnectCall> {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.insert(*name, HeaderValue::from_static(value));
        }
        detect(&method, &uri.parse().unwrap(), &map)
    }

    #[test]
    fn detection() {
        let unary = Some(ConnectCall::Unary);
        let v1 = ("connect-protocol-version", "1");
        let json = ("content-type", "application/json");
        assert_eq!(detect_of(Method::POST, "/a.B/C", &[json, v1]), unary);
        assert_eq!(detect_of(Method::POST, "/a.B/C", &[json]), None);
        assert_eq!(
            detect_of(
                Method::POST,
                "/a.B/C",
                &[json, ("connect-protocol-version", "2")]
            ),
            None
        );
        assert_eq!(
            detect_of(Method::GET, "/a.B/C?encoding=json&connect=v1", &[]),
            unary
        );
        assert_eq!(detect_of(Method::GET, "/a.B/C?connect=v10", &[]), None);
        assert_eq!(detect_of(Method::GET, "/a.B/C", &[v1]), None);
        assert_eq!(detect_of(Method::PUT, "/a.B/C", &[json, v1]), None);
        let stream = ("content-type", "application/connect+proto");
        assert_eq!(
            detect_of(Method::POST, "/a.B/C", &[stream]),
            Some(ConnectCall::Stream(HeaderValue::from_static(
                "application/connect+proto"
            )))
        );
        assert_eq!(
            detect_of(
                Method::POST,
                "/a.B/C",
                &[stream, ("connect-protocol-version", "0")]
            ),
            None
        );
        assert_eq!(
            detect_of(
                Method::POST,
                "/a.B/C",
                &[("content-type", "application/connect+")]
            ),
            None
        );
    }

    #[test]
    fn bodies() {
        assert_eq!(
            DEADLINE.unary,
            br#"{"code":"deadline_exceeded","message":"deadline exceeded"}"#
        );
        let end = br#"{"error":{"code":"deadline_exceeded","message":"deadline exceeded"}}"#;
        assert_eq!(DEADLINE.stream[0], 0x02);
        assert_eq!(DEADLINE.stream[1..5], (end.len() as u32).to_be_bytes());
        assert_eq!(&DEADLINE.stream[5..], end);
        for answer in [&DEADLINE, &SHED, &REJECTED, &INTERNAL] {
            let length = u32::from_be_bytes(answer.stream[1..5].try_into().unwrap());
            assert_eq!(length as usize, answer.stream.len() - 5);
        }
    }
}
