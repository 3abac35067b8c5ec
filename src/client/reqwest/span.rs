//! The client span of a reqwest call, for [`PropagateMiddleware`](super::PropagateMiddleware)
//! (features `reqwest` and `opentelemetry`): where the call goes, read from its `Url`, and the
//! `error.type` of a failed call.

use std::convert::Infallible;

use http::Extensions;
use reqwest::Request;

use crate::client::propagate::PropagateError;
use crate::client::span::{ClientOtel, Pending, Target, begin};

/// The call's span and point, pending; none when `otel` is off. Called before the middleware
/// adds anything, so a `traceparent` the request has is its own.
pub(crate) fn begin_reqwest(
    otel: &ClientOtel,
    request: &mut Request,
    extensions: &Extensions,
) -> Pending {
    if !otel.is_on() {
        return Pending::none();
    }
    let method = request.method().clone();
    // Read from the `Url` itself: `http::Uri` refuses some URLs reqwest sends (over 64 KiB),
    // which would leave the span without its address. The headers are taken out while the URL
    // is borrowed (an empty map allocates nothing).
    let mut headers = std::mem::take(request.headers_mut());
    let url = request.url();
    let target = Target {
        scheme: Some(url.scheme()),
        host: url.host_str(),
        port: url.port(),
        userinfo: !url.username().is_empty() || url.password().is_some(),
        path: url.path(),
    };
    let call = begin(otel, &method, target, &mut headers, extensions);
    *request.headers_mut() = headers;
    Pending::of(call)
}

/// Ends `pending` with the call's outcome: the answer's status, or the error's type.
pub(crate) fn end_reqwest(
    pending: &mut Pending,
    result: &reqwest_middleware::Result<reqwest::Response>,
) {
    if pending.is_pending() {
        match result {
            Ok(response) => pending.end_head(response.status(), response.headers()),
            Err(error) => pending.end(None, Some(error_type(error))),
        }
    }
}

/// The `error.type` of a failed call.
fn error_type(error: &reqwest_middleware::Error) -> &'static str {
    match error {
        reqwest_middleware::Error::Middleware(error) => {
            if error.is::<PropagateError<Infallible>>() {
                "PropagateError"
            } else {
                "reqwest_middleware::Error"
            }
        }
        reqwest_middleware::Error::Reqwest(error) if error.is_timeout() => "timeout",
        reqwest_middleware::Error::Reqwest(error) if error.is_connect() => "connect",
        reqwest_middleware::Error::Reqwest(_) => "reqwest::Error",
    }
}
