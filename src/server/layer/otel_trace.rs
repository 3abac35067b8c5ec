//! The layer's OpenTelemetry server spans: the tracer it makes them with.

use std::sync::Arc;

use opentelemetry::trace::{Span, Tracer};

use super::SharedHeadersLayer;
#[cfg(doc)]
use crate::context::Propagation;

/// # Line and metric: the OpenTelemetry span
impl SharedHeadersLayer {
    /// Sets the tracer of an OpenTelemetry server span per request (a second call replaces
    /// it; feature `opentelemetry`; the SDK and its exporter are yours), as a hop of the
    /// request's trace:
    ///
    /// * **kind** server, **name** `{method} {route}` (`{method}` without a route), the HTTP
    ///   server **attributes** of the semantic conventions (`http.request.method`,
    ///   `url.path`, `url.query` when the request has one, `url.scheme`,
    ///   `network.protocol.*`, `server.address`, `server.port`, `http.response.status_code`,
    ///   `http.route`, `error.type`), each as the access line prints it (path and query
    ///   redacted by the one rule, the server's address as received), **status** `Error`
    ///   exactly when `error.type` is set (the access line's and the metric's value);
    /// * a **child of the caller's span** when a valid `traceparent` came, and the parent of
    ///   the calls made in the request's scope: its span id is the one they send in their
    ///   `traceparent` ([`Propagation::trace_hop`]);
    /// * **started** when the layer's service is called, **ended** when the response ended
    ///   (the duration metric's instant), **exactly once** for every outcome: answered,
    ///   timed out, rejected, panicked, failed, cancelled by a client that hung up or by an
    ///   outer timeout, dropped before its first poll.
    ///
    /// The layer makes each request a trace hop,
    /// whatever [`propagate`](Self::propagate) sets, before or after: a propagation without
    /// one gets [`trace_hop`](Propagation::trace_hop) added, and a layer without a
    /// propagation gets `Propagation::new().trace_hop()`. The span's attributes follow the
    /// layer's secret names (`server.address` and `server.port` are left out when `host` is
    /// secret, as in the access line) and its [`default_scheme`](Self::default_scheme).
    ///
    /// The tracer decides first: the span is started with its name and kind only, and the
    /// attributes are set once it records. A request the sampler drops keeps the tracer's ids
    /// (not sampled) and costs no attribute, name or end of the layer's (a sampler sees no
    /// attribute).
    ///
    /// # Examples
    ///
    /// ```
    /// use shared_headers::context::Propagation;
    /// use shared_headers::server::SharedHeadersLayer;
    ///
    /// let tracer = opentelemetry::global::tracer("my-server"); // the SDK's in a real server
    /// let layer = SharedHeadersLayer::new()
    ///     .otel_tracer(tracer)
    ///     .propagate(Propagation::new().request_id()); // a hop too: the order does not matter
    /// # drop(layer);
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "opentelemetry")))]
    pub fn otel_tracer<T>(mut self, tracer: T) -> Self
    where
        T: Tracer + Send + Sync + 'static,
        T::Span: Span + Send + Sync + 'static,
    {
        self.settings.tracer = Some(Arc::new(tracer));
        self.resolve()
    }
}
