//! The layer's line and metric: the access line, the OpenTelemetry metrics, the hooks at the
//! commit, at the end of the response and after the commit, and what they report of the
//! request's connection.

use std::net::SocketAddr;
use std::sync::Arc;

use super::SharedHeadersLayer;
use crate::exchange::{CommitEvent, LateWrites};
use crate::server::end::ResponseEnd;

#[cfg(doc)]
use crate::exchange::{CommitHooks, Committed, Exchange, Outcome};

/// # Line and metric
impl SharedHeadersLayer {
    /// Logs every request through `tracing` (feature `tracing`) with the default
    /// [`AccessLog`](crate::server::access_log::AccessLog), unless
    /// [`access_log`](Self::access_log) gives one (before or after: it wins whatever the
    /// order). One line per request when its
    /// response ends, safe by default (the few header values it prints are listed in
    /// [`access_log`](crate::server::access_log#safe-by-default); credential query parameters
    /// redacted), and one line per request whose tasks wrote
    /// after the commit. It adds up with the other hooks. See
    /// [`access_log`](crate::server::access_log) for the fields.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use std::time::Duration;
    /// use http::{Request, Response};
    /// use http_body_util::BodyExt;
    /// use shared_headers::server::SharedHeadersLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    /// # use std::sync::{Arc, Mutex};
    /// # #[derive(Clone, Default)]
    /// # struct Buf(Arc<Mutex<Vec<u8>>>);
    /// # impl std::io::Write for Buf {
    /// #     fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
    /// #         self.0.lock().unwrap().extend_from_slice(b);
    /// #         Ok(b.len())
    /// #     }
    /// #     fn flush(&mut self) -> std::io::Result<()> { Ok(()) }
    /// # }
    /// # impl Buf { fn text(&self) -> String { String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned() } }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    /// // Any subscriber: here `tracing_subscriber`'s `fmt`, writing to a buffer.
    /// let out = Buf::default();
    /// let writer = out.clone();
    /// let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).finish();
    /// let _guard = tracing::subscriber::set_default(subscriber);
    ///
    /// let layer = SharedHeadersLayer::new()
    ///     .timeout(Duration::from_secs(5))
    ///     .tracing_access_log();
    /// let service = layer.layer(service_fn(|_req: Request<()>| async {
    ///     Ok::<_, Infallible>(Response::new(String::from("hello")))
    /// }));
    /// let res = service.oneshot(Request::get("/users/42").body(())?).await?;
    /// res.into_body().collect().await?; // the line is written when the response ends
    /// let line = out.text();
    /// assert!(line.contains("request completed"), "{line}");
    /// assert!(line.contains("url.path=/users/42"), "{line}");
    /// assert!(line.contains("http.response.status_code=200"), "{line}");
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "tracing")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tracing")))]
    pub fn tracing_access_log(mut self) -> Self {
        if !self.settings.log_explicit {
            self.settings.log = Some(Arc::new(crate::server::access_log::AccessLog::new()));
        }
        self.resolve()
    }

    /// Sets the meter of OpenTelemetry's HTTP server metrics (feature `opentelemetry`; a
    /// second call replaces it): `http.server.request.duration` once per request, for every
    /// outcome, when its response ended (the access line's instant), and
    /// `http.server.active_requests`, with the convention's attributes (cardinality-safe:
    /// never a raw path). See [`server::metrics`](crate::server::metrics) for the instruments
    /// and attributes, and [`otel_metric_attribute`](Self::otel_metric_attribute) for one of
    /// your own.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use std::time::Duration;
    /// use http::{Request, Response};
    /// use http_body_util::BodyExt;
    /// use opentelemetry::metrics::MeterProvider;
    /// use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
    /// use shared_headers::server::SharedHeadersLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    /// // The SDK's provider in a real server; here one that keeps what it exports.
    /// let exporter = InMemoryMetricExporter::default();
    /// let provider = SdkMeterProvider::builder()
    ///     .with_reader(PeriodicReader::builder(exporter.clone()).build())
    ///     .build();
    /// let meter = provider.meter("my-server");
    /// let layer = SharedHeadersLayer::new()
    ///     .timeout(Duration::from_secs(5))
    ///     .otel_metrics(&meter);
    /// let service = layer.layer(service_fn(|_req: Request<()>| async {
    ///     Ok::<_, Infallible>(Response::new(String::new()))
    /// }));
    /// let res = service.oneshot(Request::new(())).await?;
    /// res.into_body().collect().await?; // recorded when the response ends
    /// provider.force_flush()?;
    /// let names: Vec<String> = exporter.get_finished_metrics()?.iter()
    ///     .flat_map(|m| m.scope_metrics())
    ///     .flat_map(|s| s.metrics())
    ///     .map(|m| m.name().to_owned())
    ///     .collect();
    /// assert!(names.iter().any(|n| n == "http.server.request.duration"), "{names:?}");
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "opentelemetry")]
    #[cfg_attr(docsrs, doc(cfg(feature = "opentelemetry")))]
    pub fn otel_metrics(mut self, meter: &opentelemetry::metrics::Meter) -> Self {
        self.settings.metrics = Some(Arc::new(crate::server::metrics::HttpServerMetrics::new(
            meter,
        )));
        self.resolve()
    }

    /// Adds the attribute `f` returns (none when it returns `None`) to each request's
    /// `http.server.request.duration` (feature `opentelemetry`), before or after
    /// [`otel_metrics`](Self::otel_metrics). Attributes add up, in the order added.
    ///
    /// **Cardinality is yours to keep bounded**: every distinct value makes a time series in
    /// every bucket, for as long as the process lives. Map what the request says to a value of
    /// a small fixed set (a tier, a region, `true`/`false`); never return a raw path, a query,
    /// a header value, a user or tenant id, or a peer address. The active-requests counter
    /// does not get it (it is known only at the end).
    ///
    /// # Panics
    ///
    /// A panic in `f` is caught: that request's duration is not recorded, the other
    /// consumers of its end still run, and the active-requests counter still comes down.
    ///
    /// # Examples
    ///
    /// ```
    /// use opentelemetry::KeyValue;
    /// use shared_headers::server::SharedHeadersLayer;
    ///
    /// let meter = opentelemetry::global::meter("my-server");
    /// let layer = SharedHeadersLayer::new()
    ///     .otel_metrics(&meter)
    ///     // Bounded: a tenant tier from a fixed set, never a tenant id.
    ///     .otel_metric_attribute(|end| {
    ///         let tier = end.committed().request().get("x-tier")?.to_str().ok()?;
    ///         let tier = if tier == "gold" { "gold" } else { "standard" };
    ///         Some(KeyValue::new("app.tier", tier))
    ///     });
    /// # drop(layer);
    /// ```
    #[cfg(feature = "opentelemetry")]
    #[cfg_attr(docsrs, doc(cfg(feature = "opentelemetry")))]
    pub fn otel_metric_attribute(
        mut self,
        f: impl Fn(&ResponseEnd) -> Option<opentelemetry::KeyValue> + Send + Sync + 'static,
    ) -> Self {
        self.settings.metric_attributes.push(Arc::new(f));
        self.resolve()
    }
    /// Sets the access log (replaces the previous one, and wins over
    /// [`tracing_access_log`](Self::tracing_access_log)'s defaults whatever the order): every
    /// request is logged through `tracing` with `log`'s settings (levels, headers, the
    /// query's redaction), one line when the response ends and the post-commit activity line
    /// (see [`access_log`](crate::server::access_log)),
    /// each request's lines in its `tracing` span (the one current when the layer's service
    /// is called), whichever thread emits them. The other hooks (`on_commit`,
    /// `on_late_writes`, `on_response_end`) add up with it; the line is made before the
    /// `on_response_end` hooks run, whatever the order of the calls.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use http::{Request, Response};
    /// use http_body_util::BodyExt;
    /// use shared_headers::server::{SharedHeadersLayer, access_log::AccessLog};
    /// use tower::{Layer, ServiceExt, service_fn};
    /// # use std::sync::{Arc, Mutex};
    /// # #[derive(Clone, Default)]
    /// # struct Buf(Arc<Mutex<Vec<u8>>>);
    /// # impl std::io::Write for Buf {
    /// #     fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
    /// #         self.0.lock().unwrap().extend_from_slice(b);
    /// #         Ok(b.len())
    /// #     }
    /// #     fn flush(&mut self) -> std::io::Result<()> { Ok(()) }
    /// # }
    /// # impl Buf { fn text(&self) -> String { String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned() } }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    /// let out = Buf::default();
    /// let writer = out.clone();
    /// let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).finish();
    /// let _guard = tracing::subscriber::set_default(subscriber);
    ///
    /// let commits = Arc::new(AtomicUsize::new(0));
    /// let counted = commits.clone();
    /// let layer = SharedHeadersLayer::new()
    ///     .access_log(AccessLog::new().redact_query_params(["session_key"]))
    ///     .on_commit(move |_| { counted.fetch_add(1, Ordering::Relaxed); }); // both run
    /// let service = layer.layer(service_fn(|_req: Request<()>| async {
    ///     Ok::<_, Infallible>(Response::new(String::new()))
    /// }));
    /// let req = Request::get("/report?session_key=k3y&page=2").body(())?;
    /// service.oneshot(req).await?.into_body().collect().await?;
    /// let line = out.text();
    /// assert!(line.contains("session_key=[redacted]&page=2"), "{line}");
    /// assert!(!line.contains("k3y"));
    /// assert_eq!(commits.load(Ordering::Relaxed), 1);
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "tracing")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tracing")))]
    pub fn access_log(mut self, log: crate::server::access_log::AccessLog) -> Self {
        self.settings.log = Some(Arc::new(log));
        self.settings.log_explicit = true;
        self.resolve()
    }

    /// Adds `f`, run once per request, whatever the outcome (answered, failed, timed out, rejected,
    /// panicked, or cancelled because the response future was dropped: an outer timeout such as
    /// tower-http's `TimeoutLayer`, a client that disconnected), with the [`Committed`] record
    /// and **the response as it leaves the layer**: [`CommitEvent::sent`] is its head (status,
    /// version, every header, the handler's own included, and without the headers an own answer
    /// dropped), `None` when no response left the layer (failed, cancelled: a header that was
    /// committed but not sent is never shown as sent). `f` has returned before the response
    /// leaves the layer. This is the access log that sees every request: an outer logging layer
    /// sees no response, hence no record, for a cancelled one.
    ///
    /// `f` runs in the response future, in the request's own task, after the commit (whoever
    /// made it: the future, the process's deadline thread, the handler's own
    /// [`Exchange::commit`]) and after the answer was built; for a cancelled request, in the
    /// future's drop. Never on the deadline thread: a slow or stuck `f` delays only its own
    /// request's answer (it blocks the runtime worker that runs it, like any blocking code).
    /// Hooks add up: every `on_commit` hook runs, in the order added, beside the access line
    /// and the `on_response_end` hooks. The same type of hook as [`CommitHooks::on_commit`].
    ///
    /// # Panics
    ///
    /// A panic in `f` is caught (`catch_unwind`), including one whose payload panics again when
    /// dropped: it does not abort the process (even when `f` runs inside a `Drop` during an
    /// unwind) and does not change the request's outcome or response. See [`CommitHooks`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use std::sync::{Arc, Mutex};
    /// use http::{Request, Response};
    /// use shared_headers::Outcome;
    /// use shared_headers::server::SharedHeadersLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// let lines = log.clone();
    /// let layer = SharedHeadersLayer::new().on_commit(move |event| {
    ///     let c = event.committed();
    ///     let line = format!("{} {} {:?} {}", c.method().unwrap(), c.uri().unwrap(),
    ///         c.committed_status().map(|s| s.as_u16()), c.outcome());
    ///     lines.lock().unwrap().push(line);
    /// });
    /// let service = layer.layer(service_fn(|_req: Request<()>| async {
    ///     Ok::<_, Infallible>(Response::new(String::new()))
    /// }));
    /// service.oneshot(Request::get("/users/1").body(())?).await?;
    /// assert_eq!(*log.lock().unwrap(), ["GET /users/1 Some(200) answered"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn on_commit(mut self, f: impl Fn(&CommitEvent<'_>) + Send + Sync + 'static) -> Self {
        self.config.quiet_hooks = self.config.quiet_hooks.on_commit(f);
        self.resolve()
    }

    /// Adds `f`, run once per request at the end of its response: when the response body was sent
    /// to its end, failed, or was dropped before its end (the client went away), and, for a
    /// request that got no response from the layer (failed, cancelled, a resumed panic), when
    /// the layer knew it; with the bytes of body sent, the time from the call to the end and
    /// to the head ([`ResponseEnd`]: nginx's `$body_bytes_sent` and `$request_time`). The
    /// `on_commit` hooks are about what was decided and the head that left; this one is about
    /// the body on the wire. The access line is one of these.
    ///
    /// `f` runs where the body is polled or dropped (the server's connection task), inside the
    /// request's `tracing` span when the layer makes it (feature `tracing`, a subscriber
    /// taking it).
    /// Hooks add up, in the order added, after the access line and the metrics; a panic in
    /// `f` is caught and does not stop the others. The layer's type does not change.
    ///
    /// # Examples
    ///
    /// See [`ResponseEnd`].
    /// ```
    /// use std::convert::Infallible;
    /// use std::sync::mpsc;
    /// use http::{Request, Response, StatusCode};
    /// use http_body_util::BodyExt;
    /// use shared_headers::server::{Ending, SharedHeadersLayer};
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    /// let (tx, rx) = mpsc::channel();
    /// let layer = SharedHeadersLayer::new()
    ///     .on_response_end(move |end| {
    ///         println!("{:?} {} bytes in {:?} ({})",
    ///             end.status_sent(), end.bytes_sent(), end.duration(), end.ending());
    ///         tx.send((end.status_sent(), end.bytes_sent(), end.ending())).unwrap();
    ///     });
    /// let service = layer.layer(service_fn(|_req: Request<()>| async {
    ///     Ok::<_, Infallible>(Response::new(String::from("hello")))
    /// }));
    /// service.oneshot(Request::new(())).await?.into_body().collect().await?;
    /// assert_eq!(rx.try_recv()?, (Some(StatusCode::OK), 5, Ending::Completed));
    /// # Ok(())
    /// # }
    /// ```
    pub fn on_response_end(mut self, f: impl Fn(&ResponseEnd) + Send + Sync + 'static) -> Self {
        self.settings.user_end.add_fn(f);
        self.resolve()
    }

    /// Adds `f`, run once per request whose exchange had writes refused after its commit (tasks
    /// that outlived the response: Kubernetes' "post-timeout activity"), when the last clone of
    /// its [`Exchange`] is dropped, that is after the last task holding it ended. `f` gets the
    /// count and the time since the commit ([`LateWrites`]).
    ///
    /// Costs nothing per request beyond the exchange (it runs from the exchange's own drop) and
    /// keeps nothing alive. What is counted, and the case of tasks holding only a handle: see
    /// [`CommitHooks::on_late_writes`]. Hooks add up, in the order added. A panic in `f` is
    /// caught, as for [`on_commit`](Self::on_commit).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use std::sync::{Arc, Mutex};
    /// use http::{Request, Response};
    /// use shared_headers::Exchange;
    /// use shared_headers::server::SharedHeadersLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let layer = SharedHeadersLayer::new()
    ///     .on_late_writes(move |late| tx.send(late.refused_writes()).unwrap());
    /// let service = layer.layer(service_fn(|req: Request<()>| async move {
    ///     let exchange = req.extensions().get::<Exchange>().unwrap().clone();
    ///     tokio::spawn(async move {
    ///         tokio::time::sleep(std::time::Duration::from_millis(5)).await; // after the answer
    ///         assert!(exchange.response().insert("x-late", "1".parse().unwrap()).is_err());
    ///     });
    ///     Ok::<_, Infallible>(Response::new(String::new()))
    /// }));
    /// service.oneshot(Request::new(())).await?;
    /// let refused = tokio::task::spawn_blocking(move || rx.recv().unwrap()).await?;
    /// assert_eq!(refused, 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn on_late_writes(mut self, f: impl Fn(&LateWrites) + Send + Sync + 'static) -> Self {
        self.config.quiet_hooks = self.config.quiet_hooks.on_late_writes(f);
        self.resolve()
    }

    /// Sets where the peer's address is in a request's extensions, for the record
    /// ([`Committed::peer_address`](crate::Committed::peer_address)) and the access log (`client.address`): `f` gets the
    /// request's extensions at the call. The server puts it there: axum's
    /// `ConnectInfo<SocketAddr>` (with `into_make_service_with_connect_info`), or an extension
    /// your accept loop inserts. Default: none.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use std::net::SocketAddr;
    /// use http::{Request, Response};
    /// use shared_headers::Committed;
    /// use shared_headers::server::SharedHeadersLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// #[derive(Clone)]
    /// struct Peer(SocketAddr); // what an accept loop would insert, like axum's ConnectInfo
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let layer = SharedHeadersLayer::new()
    ///     .peer_address(|ext| ext.get::<Peer>().map(|peer| peer.0));
    /// let service = layer.layer(service_fn(|_req: Request<()>| async {
    ///     Ok::<_, Infallible>(Response::new(String::new()))
    /// }));
    /// let mut req = Request::new(());
    /// req.extensions_mut().insert(Peer("127.0.0.1:4000".parse()?));
    /// let res = service.oneshot(req).await?;
    /// let committed = res.extensions().get::<Committed>().unwrap();
    /// assert_eq!(committed.peer_address(), Some("127.0.0.1:4000".parse()?));
    /// # Ok(())
    /// # }
    /// ```
    pub fn peer_address(
        mut self,
        f: impl Fn(&http::Extensions) -> Option<SocketAddr> + Send + Sync + 'static,
    ) -> Self {
        self.config.peer = Some(Arc::new(f));
        self.resolve()
    }

    /// Sets the scheme assumed for requests whose URI has none (a second call replaces it):
    /// HTTP/1.1's origin-form request targets. It is the access line's, the metrics' and the
    /// OpenTelemetry span's `url.scheme` for them: `http` by default; `https` behind a TLS
    /// acceptor. HTTP/2 requests carry their own (`:scheme`).
    ///
    /// An already-checked [`Scheme`](http::uri::Scheme), reported as OpenTelemetry bounds
    /// `url.scheme`: `http` and `https` (whatever their case, as a URI's own), any other as
    /// `_OTHER`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use http::{Request, Response, uri::Scheme};
    /// use shared_headers::server::SharedHeadersLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let layer = SharedHeadersLayer::new()
    ///     .default_scheme(Scheme::HTTPS) // behind a TLS acceptor
    ///     .on_response_end(move |end| tx.send(end.url_scheme().to_owned()).unwrap());
    /// let service = layer.layer(service_fn(|_req: Request<()>| async {
    ///     Ok::<_, Infallible>(Response::new(String::new()))
    /// }));
    /// drop(service.oneshot(Request::get("/").body(())?).await?); // origin-form: no scheme
    /// assert_eq!(rx.recv()?, "https");
    /// # Ok(())
    /// # }
    /// ```
    pub fn default_scheme(mut self, scheme: http::uri::Scheme) -> Self {
        self.settings.scheme = crate::semconv::scheme(Some(scheme.as_str()), "http");
        self.resolve()
    }
}
