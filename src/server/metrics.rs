//! OpenTelemetry's HTTP server metrics (feature `opentelemetry`): `http.server.request.duration`
//! and `http.server.active_requests`, recorded by the layer for every request exactly once,
//! from a [`Meter`] you pass (the `opentelemetry` API crate; the SDK and its exporter are
//! yours).
//!
//! Install them with [`SharedHeadersLayer::otel_metrics`], and add a bounded attribute of
//! your own with [`SharedHeadersLayer::otel_metric_attribute`]. They add up with the access
//! line and the other hooks.
//!
//! # The instruments
//!
//! | instrument | kind | unit | attributes |
//! |---|---|---|---|
//! | `http.server.request.duration` | `f64` histogram, the convention's advisory buckets [`DURATION_BUCKETS`] | `s` | all of the table below |
//! | `http.server.active_requests` | `i64` up-down counter | `{request}` | `http.request.method`, `url.scheme` |
//!
//! | attribute | when | value |
//! |---|---|---|
//! | `http.request.method` | always | the method, `_OTHER` for one outside RFC 9110 and RFC 5789 ([`ResponseEnd::otel_method`]) |
//! | `url.scheme` | always | `http` or `https` (the request's own, else the layer's [`default_scheme`](SharedHeadersLayer::default_scheme)); `_OTHER` for any other scheme a client sent |
//! | `network.protocol.name` | always | `http` |
//! | `network.protocol.version` | always | `0.9`, `1.0`, `1.1`, `2`, `3` |
//! | `http.response.status_code` | a response left the layer | the status sent (int) |
//! | `http.route` | the router said it | axum's `MatchedPath` (feature `axum`, layer added with `Router::layer`); **never the raw path**: a request without a route has no `http.route` |
//! | `error.type` | the request failed | [`ResponseEnd::error_type`] (the same value as the access line's): the reason the layer knows (`timeout`, `panic`, `cancelled`, `failed`), else how the body ended (`body_error`, `body_dropped`, `body_panic`), else a 5xx status sent, else a server-error `grpc-status` code |
//!
//! # Exactly once, and when
//!
//! The duration is recorded once per request, for every outcome (answered, failed, timed out,
//! rejected, panicked, cancelled by a client that hung up or by an outer timeout, a future
//! dropped before its first poll), when the response **ended** ([`ResponseEnd::duration`]: the
//! server took the body's last frame, the body failed or was dropped, or the layer knew that
//! no response would leave): the access line's instant, not the commit's. The active-requests
//! counter goes up when the layer's service is called and down at that same end, once:
//! after every request, it is back where it was.
//!
//! # Cardinality
//!
//! Every attribute takes its value from a small, fixed set, or from the router's route
//! templates: none takes a raw path, a query, a header value or a peer address. A bounded
//! attribute of your own: [`SharedHeadersLayer::otel_metric_attribute`]; the same rule is
//! yours to keep.
//!
//! # Cost
//!
//! Without the feature, nothing. With it and no metrics installed, the layer looks at its end
//! consumers once more per call. Per request with a no-op meter and with the SDK, beside
//! `opentelemetry-instrumentation-tower`: [`docs::server_cost`](crate::docs::server_cost#the-http-server-metrics-beside-opentelemetry-instrumentation-tower)
//! and `benches/metrics.rs`.

use std::fmt;
use std::sync::Arc;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Histogram, Meter, UpDownCounter};

use http::{Method, Uri};

use super::end::{EndConsumer, ResponseEnd};
use crate::semconv;

#[cfg(doc)]
use super::SharedHeadersLayer;

/// The advisory bucket boundaries of `http.server.request.duration`, in seconds (OpenTelemetry's
/// HTTP semantic conventions), in increasing order.
///
/// # Examples
///
/// ```
/// use shared_headers::server::metrics::DURATION_BUCKETS;
///
/// assert_eq!(DURATION_BUCKETS.first(), Some(&0.005));
/// assert!(DURATION_BUCKETS.windows(2).all(|w| w[0] < w[1]));
/// ```
pub const DURATION_BUCKETS: &[f64] = semconv::DURATION_BUCKETS;

pub(crate) type AttributeFn = dyn Fn(&ResponseEnd) -> Option<KeyValue> + Send + Sync + 'static;

/// The HTTP server metrics of OpenTelemetry's semantic conventions, made from a [`Meter`] by
/// [`SharedHeadersLayer::otel_metrics`]. See the [module docs](self) for the instruments and
/// their attributes.
#[derive(Clone)]
pub(crate) struct HttpServerMetrics {
    duration: Histogram<f64>,
    active: UpDownCounter<i64>,
    extra: Vec<Arc<AttributeFn>>,
}

impl fmt::Debug for HttpServerMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpServerMetrics")
            .field("attributes", &self.extra.len())
            .finish_non_exhaustive()
    }
}

impl HttpServerMetrics {
    /// The two instruments, made from `meter`: `http.server.request.duration` (unit `s`, the
    /// buckets [`DURATION_BUCKETS`]) and `http.server.active_requests` (unit `{request}`).
    pub(crate) fn new(meter: &Meter) -> Self {
        HttpServerMetrics {
            duration: meter
                .f64_histogram("http.server.request.duration")
                .with_description("Duration of HTTP server requests.")
                .with_unit("s")
                .with_boundaries(DURATION_BUCKETS.to_vec())
                .build(),
            active: meter
                .i64_up_down_counter("http.server.active_requests")
                .with_description("Number of active HTTP server requests.")
                .with_unit("{request}")
                .build(),
            extra: Vec::new(),
        }
    }

    /// These instruments with `extra`'s attributes (see
    /// [`SharedHeadersLayer::otel_metric_attribute`]).
    pub(crate) fn with_attributes(&self, extra: Vec<Arc<AttributeFn>>) -> Self {
        HttpServerMetrics {
            extra,
            ..self.clone()
        }
    }

    /// A request starts: the active-requests counter goes up.
    fn start_request(&self, method: &'static str, scheme: &'static str) {
        self.active.add(
            1,
            &[
                KeyValue::new("http.request.method", method),
                KeyValue::new("url.scheme", scheme),
            ],
        );
    }

    /// A request ended: the counter goes down (first, so that a panicking attribute of the
    /// user's cannot keep it up), and its duration is recorded.
    fn end_request(&self, end: &ResponseEnd) {
        let method = end.otel_method().unwrap_or("_OTHER");
        let scheme = end.url_scheme();
        self.active.add(
            -1,
            &[
                KeyValue::new("http.request.method", method),
                KeyValue::new("url.scheme", scheme),
            ],
        );
        // On the stack: 7 attributes at most of the layer's own.
        // (The filler of the unused places is never passed to the instruments.)
        let mut attributes: [KeyValue; 7] = std::array::from_fn(|_| KeyValue::new("", 0_i64));
        attributes[0] = KeyValue::new("http.request.method", method);
        attributes[1] = KeyValue::new("url.scheme", scheme);
        attributes[2] = KeyValue::new("network.protocol.name", "http");
        let mut n = 3;
        let mut push = |kv: KeyValue| {
            attributes[n] = kv;
            n += 1;
        };
        if let Some(version) = end.committed().version() {
            push(KeyValue::new(
                "network.protocol.version",
                semconv::protocol_version(version),
            ));
        }
        if let Some(status) = end.status_sent() {
            push(KeyValue::new(
                "http.response.status_code",
                i64::from(status.as_u16()),
            ));
        }
        if let Some(route) = end.route() {
            push(KeyValue::new("http.route", route.to_owned()));
        }
        if let Some(error) = end.error_type() {
            push(KeyValue::new("error.type", error));
        }
        let seconds = end.duration().as_secs_f64();
        if self.extra.is_empty() {
            self.duration.record(seconds, &attributes[..n]);
        } else {
            let mut all = Vec::with_capacity(n + self.extra.len());
            all.extend(attributes.into_iter().take(n));
            all.extend(self.extra.iter().filter_map(|f| f(end)));
            self.duration.record(seconds, &all);
        }
    }
}

// The metrics register themselves as a consumer of the end report (it names them not).
impl EndConsumer for HttpServerMetrics {
    // Its active-requests counter goes up at the call: it must come down at the end.
    fn interested(&self) -> bool {
        true
    }

    fn start(&self, method: &Method, uri: &Uri, default_scheme: &'static str) {
        let scheme = semconv::scheme(uri.scheme_str(), default_scheme);
        self.start_request(semconv::method(method), scheme);
    }

    fn end(&self, end: &ResponseEnd) {
        self.end_request(end);
    }
}
