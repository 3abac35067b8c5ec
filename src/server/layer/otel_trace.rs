//! The layer's OpenTelemetry server spans: the tracer it makes them with.

use std::sync::Arc;

use opentelemetry::global::BoxedTracer;
use opentelemetry::trace::{Span, Tracer};

use super::SharedHeadersLayer;
use crate::context::Propagation;
use crate::server::otel_trace::ServerTracer;

impl SharedHeadersLayer {
    /// Makes an OpenTelemetry server span per request with `tracer` (feature
    /// `opentelemetry`; the SDK and its exporter are yours), as a hop of the request's trace:
    ///
    /// * **kind** server, **name** `{method} {route}` (`{method}` without a route), the HTTP
    ///   server **attributes** of the semantic conventions (`http.request.method`,
    ///   `url.path`, `url.scheme`, `network.protocol.*`, `server.address`, `server.port`,
    ///   `http.response.status_code`, `http.route`, `error.type`), **status** `Error`
    ///   exactly when `error.type` is set (the access line's and the metric's value);
    /// * a **child of the caller's span** when a valid `traceparent` came, and the parent of
    ///   the calls made in the request's scope: its span id is the one they send in their
    ///   `traceparent` ([`Propagation::trace_hop`]);
    /// * **started** when the layer's service is called, **ended** when the response ended
    ///   (the duration metric's instant), **exactly once** for every outcome: answered,
    ///   timed out, rejected, panicked, failed, cancelled by a client that hung up or by an
    ///   outer timeout, dropped before its first poll.
    ///
    /// The layer makes each request a trace hop: a propagation without one gets
    /// [`trace_hop`](Propagation::trace_hop) added, and a layer without a propagation gets
    /// `Propagation::new().trace_hop()`. Call [`propagate`](Self::propagate) before this
    /// (a later `propagate` replaces the propagation; the spans are still made, their ids
    /// then the tracer's). A second call replaces the tracer.
    ///
    /// # Examples
    ///
    /// ```
    /// use shared_headers::context::Propagation;
    /// use shared_headers::server::SharedHeadersLayer;
    ///
    /// let tracer = opentelemetry::global::tracer("my-server"); // the SDK's in a real server
    /// let layer = SharedHeadersLayer::new()
    ///     .propagate(Propagation::new().request_id())?
    ///     .otel_tracer(tracer);
    /// # Ok::<(), shared_headers::context::PropagationError>(())
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "opentelemetry")))]
    pub fn otel_tracer<T>(mut self, tracer: T) -> Self
    where
        T: Tracer + Send + Sync + 'static,
        T::Span: Span + Send + Sync + 'static,
    {
        let tracer = Arc::new(ServerTracer {
            tracer: BoxedTracer::new(Box::new(tracer)),
        });
        let end = Arc::make_mut(&mut self.config.end);
        end.set(Arc::clone(&tracer));
        end.tracer = Some(tracer);
        let hop = match self.config.propagation.take() {
            Some(propagation) => (*propagation).clone().trace_hop(),
            None => Propagation::new().trace_hop(),
        };
        self.config.propagation = Some(Arc::new(hop));
        self
    }
}
