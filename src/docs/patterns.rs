//! Recipes: reading consistently, committing once, hyper, axum and tower-http servers, an
//! access log, limits, OpenTelemetry metrics. The calls a service makes (client default
//! headers, refresh and retry, reqwest, deadline propagation, a connection pool):
//! [`outgoing`](super::outgoing).
//!
//! The server recipes need the `server` feature; the rest needs no feature.
//!
//! # Read once: two reads can see two versions
//!
//! Every read of a handle sees the newest version. Two reads in a row can therefore see two
//! different versions, if a writer published in between. This logs a token with the expiry of
//! another one:
//!
//! ```
//! use shared_headers::SharedHeaders;
//!
//! let headers = SharedHeaders::new();
//! headers.update(|m| {
//!     m.insert("x-token", "t1".parse().unwrap());
//!     m.insert("x-expires", "100".parse().unwrap());
//! })?;
//!
//! let token = headers.get("x-token").unwrap(); // version 1
//! // ... a refresh publishes a new pair in one write ...
//! headers.update(|m| {
//!     m.insert("x-token", "t2".parse().unwrap());
//!     m.insert("x-expires", "200".parse().unwrap());
//! })?;
//! let expires = headers.get("x-expires").unwrap(); // version 2
//! assert_eq!(token, "t1");
//! assert_eq!(expires, "200"); // a pair that was never published
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Take one [`Snapshot`](crate::Snapshot) (or one [`read`](crate::SharedHeaders::read)) and
//! read everything from it: it is one version, whatever writers do meanwhile.
//!
//! ```
//! use shared_headers::SharedHeaders;
//!
//! let headers = SharedHeaders::new();
//! headers.update(|m| {
//!     m.insert("x-token", "t1".parse().unwrap());
//!     m.insert("x-expires", "100".parse().unwrap());
//! })?;
//!
//! let snapshot = headers.snapshot(); // version 1, owned: it may cross an `.await`
//! headers.update(|m| {
//!     m.insert("x-token", "t2".parse().unwrap());
//!     m.insert("x-expires", "200".parse().unwrap());
//! })?;
//! assert_eq!(snapshot["x-token"], "t1");
//! assert_eq!(snapshot["x-expires"], "100");
//! assert_eq!(snapshot.version(), 1);
//!
//! // Or borrow the current version for a moment, without cloning anything:
//! let (token, expires) = headers.read(|m| (m["x-token"].clone(), m["x-expires"].clone()));
//! assert_eq!(token, "t2");
//! assert_eq!(expires, "200");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The same goes for writes: set headers that belong together in one
//! [`update`](crate::SharedHeaders::update), never in two writes.
//!
//! # Commit once, without a server
//!
//! [`Exchange`](crate::Exchange) is the commit-once protocol as a plain value: a handler, a
//! timeout and a logger race, exactly one commit wins, and the log is exactly what was
//! committed. No runtime, no feature:
//!
//! ```
//! use std::thread;
//! use shared_headers::{Error, Exchange, Outcome, SharedHeaders};
//!
//! let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
//!
//! let handler = {
//!     let exchange = exchange.clone();
//!     thread::spawn(move || {
//!         match exchange.response().insert("x-handler", "done".parse().unwrap()) {
//!             Ok(_) => { let _ = exchange.commit(Outcome::Answered); }
//!             Err(Error::Sealed { .. }) => {} // the timeout won: refused and counted
//!             Err(e) => panic!("{e}"),
//!         }
//!     })
//! };
//! let timeout = {
//!     let exchange = exchange.clone();
//!     thread::spawn(move || exchange.commit(Outcome::TimedOut))
//! };
//! handler.join().unwrap();
//! let _ = timeout.join().unwrap();
//!
//! // The logger logs the winner's record: what was sent, whoever won.
//! let committed = exchange.committed().unwrap();
//! let sent_by_handler = committed.response().contains_key("x-handler");
//! match committed.outcome() {
//!     Outcome::Answered => assert!(sent_by_handler),
//!     Outcome::TimedOut => assert_eq!(sent_by_handler, exchange.refused_writes() == 0),
//!     other => unreachable!("{other}"),
//! }
//! ```
//!
//! # Server: hyper
//!
//! `server::SharedHeadersLayer` (feature `server`) gives every request an
//! `Exchange` in its extensions: `exchange.request()` is a `SharedHeaders` with a copy of the
//! request headers (`req.headers()` stays as received, so ordinary middleware keeps working),
//! `exchange.response()` one for the response headers. The layer commits exactly once, at the
//! first of: the handler answers, its deadline fires (503 by default, as Go's
//! `http.TimeoutHandler`), or the future is dropped (an outer timeout, a closed connection). Later
//! writes get `Err(Sealed)` and are counted (`Exchange::refused_writes`, Kubernetes' "post-timeout
//! activity"). The committed response headers are merged into the response, each name replacing
//! the handler's own, and the `Committed` record is the response's one extension, so a logging
//! layer outside logs exactly what was committed. Requests that end without a response
//! (cancelled by an outer timeout or a closed connection) are seen by the layer's `on_commit`
//! hook, which runs once for every request; writes refused after the commit are reported by
//! `on_late_writes` once the last task let go of the exchange.
//!
//! A complete HTTP/1.1 server on hyper 1 and hyper-util, and one request to it. The handler
//! spawns a task that adds a response header while the handler works:
//!
//! ```
//! # #[cfg(feature = "server")]
//! # mod recipe {
//! use std::{convert::Infallible, time::Duration};
//!
//! use http::{Request, Response};
//! use http_body_util::{BodyExt, Empty, Full};
//! use hyper::body::{Bytes, Incoming};
//! use hyper_util::rt::TokioIo;
//! use hyper_util::service::TowerToHyperService;
//! use shared_headers::{Committed, Exchange};
//! use shared_headers::server::{ResponseBody, SharedHeadersLayer};
//! use tower::ServiceBuilder;
//!
//! async fn handler(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
//!     let exchange = req.extensions().get::<Exchange>().unwrap().clone();
//!     let task = {
//!         let exchange = exchange.clone();
//!         tokio::spawn(async move {
//!             // Runs concurrently with the handler; no lock is held across this await.
//!             tokio::time::sleep(Duration::from_millis(1)).await;
//!             exchange.response().insert("x-cache", "miss".parse().unwrap())
//!         })
//!     };
//!     let _ = exchange.request().insert("x-user", "ada".parse().unwrap()); // Err only if sealed: the answer is decided
//!     let _ = task.await.unwrap(); // the task's write: Err only if sealed
//!     Ok(Response::new(Full::from("hello")))
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # pub async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let service = ServiceBuilder::new()
//!     .map_response(|res: Response<ResponseBody<Full<Bytes>>>| {
//!         // A logging layer: log exactly what was committed.
//!         let committed = res.extensions().get::<Committed>().unwrap();
//!         assert_eq!(committed.request()["x-user"], "ada");
//!         res
//!     })
//!     .layer(SharedHeadersLayer::new().timeout(Duration::from_secs(5)))
//!     .service_fn(handler);
//!
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let addr = listener.local_addr()?;
//! tokio::spawn(async move {
//!     loop {
//!         let Ok((stream, _)) = listener.accept().await else { return };
//!         let service = TowerToHyperService::new(service.clone());
//!         tokio::spawn(
//!             hyper::server::conn::http1::Builder::new()
//!                 .serve_connection(TokioIo::new(stream), service),
//!         );
//!     }
//! });
//!
//! // A client.
//! let stream = tokio::net::TcpStream::connect(addr).await?;
//! let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
//! tokio::spawn(conn);
//! let req = Request::get("/").header("host", "localhost").body(Empty::<Bytes>::new())?;
//! let res = sender.send_request(req).await?;
//! assert_eq!(res.status(), 200);
//! assert_eq!(res.headers()["x-cache"], "miss");
//! assert_eq!(res.into_body().collect().await?.to_bytes(), "hello");
//! # Ok(())
//! # }
//! # }
//! # fn main() {
//! #     #[cfg(feature = "server")]
//! #     recipe::main().unwrap();
//! # }
//! ```
//!
//! # Server: axum
//!
//! The layer is a plain tower layer, so axum takes it as any other: add it with
//! `Router::new().route("/", get(handler)).layer(SharedHeadersLayer::new().timeout(..))`, and
//! take the exchange as a handler argument (`exchange: Exchange`, feature `axum`; without the
//! layer the handler is answered 500 with a message naming it) or with
//! `Extension(exchange): Extension<Exchange>`; then
//! `exchange.request()` and `exchange.response()` are the two handles, as in the hyper recipe
//! above. A task the handler spawns moves a clone of the exchange; its writes return `Ok` before
//! the commit and `Err(Sealed)`, counted, after it.
//!
//! # Server: tower-http around the layer
//!
//! tower-http's `TimeoutLayer` drops the inner future when it fires. Placed outside
//! `SharedHeadersLayer`, that drop still commits the exchange (`Outcome::Cancelled`), so a task
//! that writes afterwards is refused and counted instead of writing into a map nobody reads.
//! Prefer the layer's own `timeout`, which answers with the committed headers; an outer timeout is
//! a safety net. For logging, a `TraceLayer` or `map_response` outside the layer reads the
//! `Committed` record from the response's extensions, but a request the outer timeout cut off
//! has no such response: log with the layer's `on_commit` hook, which runs once for every
//! request, cancelled ones included.
//!
//! ```
//! # #[cfg(feature = "server")]
//! # mod recipe {
//! use std::sync::{Arc, Mutex};
//! use std::{convert::Infallible, time::Duration};
//!
//! use http::{Request, Response, StatusCode};
//! use http_body_util::Full;
//! use hyper::body::Bytes;
//! use shared_headers::server::SharedHeadersLayer;
//! use shared_headers::{Error, Exchange, Outcome};
//! use tower::{ServiceBuilder, ServiceExt};
//! use tower_http::timeout::TimeoutLayer;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # pub async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let seen = Arc::new(Mutex::new(None::<Exchange>)); // what a spawned task would hold
//! let handler_seen = Arc::clone(&seen);
//! let service = ServiceBuilder::new()
//!     .layer(TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, Duration::from_millis(10)))
//!     .layer(SharedHeadersLayer::new())
//!     .service_fn(move |req: Request<Full<Bytes>>| {
//!         let seen = Arc::clone(&handler_seen);
//!         async move {
//!             *seen.lock().unwrap() = req.extensions().get::<Exchange>().cloned();
//!             tokio::time::sleep(Duration::from_secs(60)).await; // far too slow
//!             Ok::<_, Infallible>(Response::new(Full::<Bytes>::default()))
//!         }
//!     });
//!
//! let res = service.oneshot(Request::new(Full::default())).await?;
//! assert_eq!(res.status(), StatusCode::REQUEST_TIMEOUT);
//!
//! // The outer timeout dropped the layer's future: the exchange was committed then.
//! let exchange = seen.lock().unwrap().take().unwrap();
//! assert_eq!(exchange.committed().unwrap().outcome(), Outcome::Cancelled);
//! let late = exchange.response().insert("x-late", "1".parse()?);
//! assert!(matches!(late, Err(Error::Sealed { .. })));
//! assert_eq!(exchange.refused_writes(), 1);
//! # Ok(())
//! # }
//! # }
//! # fn main() {
//! #     #[cfg(feature = "server")]
//! #     recipe::main().unwrap();
//! # }
//! ```
//!
//! # Server: an access log
//!
//! The layer's [`on_commit`] hook is the access log: it runs exactly once per request, at the
//! commit, for every outcome (answered, failed, timed out, rejected, and cancelled by a client
//! that hung up or by an outer timeout, which no logging layer outside sees), before the response
//! leaves the layer. Its `Committed` record has the outcome, method, URI, status, latency and the
//! sealed request, response and annotation snapshots. Handler code and its tasks attach log
//! fields with `Exchange::annotations()`: headers-shaped, sealed in the same commit, never sent.
//! [`on_late_writes`] reports post-commit activity once per request whose tasks wrote after the
//! commit, when the last of them let go of the exchange (it keeps nothing alive longer).
//!
//! [`on_commit`]: crate::CommitHooks::on_commit
//! [`on_late_writes`]: crate::CommitHooks::on_late_writes
//!
//! ```
//! # #[cfg(feature = "server")]
//! # mod recipe {
//! use std::sync::{Arc, Mutex};
//! use std::{convert::Infallible, time::Duration};
//!
//! use http::{Request, Response};
//! use http_body_util::Full;
//! use hyper::body::Bytes;
//! use shared_headers::Exchange;
//! use shared_headers::server::SharedHeadersLayer;
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # pub async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let log = Arc::new(Mutex::new(Vec::<String>::new())); // your log sink
//! let (access, activity) = (Arc::clone(&log), Arc::clone(&log));
//! let (reported, report) = tokio::sync::oneshot::channel();
//! let reported = Mutex::new(Some(reported));
//! let layer = SharedHeadersLayer::new()
//!     .timeout(Duration::from_secs(5))
//!     .on_commit(move |event| {
//!         let c = event.committed(); // the record; `event.sent()` is the head as it left
//!         let annotations = c.annotations();
//!         let user = annotations.and_then(|a| a.get("x-user")?.to_str().ok());
//!         access.lock().unwrap().push(format!(
//!             "{} {} status={} outcome={} user={} time_to_commit={:?}",
//!             c.method().unwrap(),
//!             c.uri().unwrap().path(),
//!             c.committed_status().map_or(0, |s| s.as_u16()), // none if failed or cancelled
//!             c.outcome(),
//!             user.unwrap_or("-"),
//!             c.time_to_commit(),
//!         ));
//!     })
//!     .on_late_writes(move |late| {
//!         activity.lock().unwrap().push(format!(
//!             "post-commit activity: {} refused_writes={}",
//!             late.committed().uri().unwrap().path(),
//!             late.refused_writes(),
//!         ));
//!         reported.lock().unwrap().take().map(|tx| tx.send(()));
//!     });
//! let service = ServiceBuilder::new()
//!     .layer(layer)
//!     .service_fn(|req: Request<()>| async move {
//!         let exchange = req.extensions().get::<Exchange>().unwrap().clone();
//!         let _ = exchange.annotations().insert("x-user", "ada".parse().unwrap()); // Err only if sealed: the answer is decided
//!         tokio::spawn(async move {
//!             tokio::time::sleep(Duration::from_millis(10)).await; // after the answer
//!             let refused = exchange.response().insert("x-audit", "1".parse().unwrap());
//!             assert!(refused.is_err()); // sealed at the commit, and counted
//!         });
//!         Ok::<_, Infallible>(Response::new(Full::<Bytes>::default()))
//!     });
//!
//! let res = service.oneshot(Request::get("/orders").body(())?).await?;
//! assert!(res.headers().get("x-user").is_none()); // annotations are never sent
//! report.await?; // the task ended, its exchange clone dropped: reported once
//! let log = log.lock().unwrap();
//! assert!(log[0].starts_with("GET /orders status=200 outcome=answered user=ada time_to_commit="));
//! assert_eq!(log[1], "post-commit activity: /orders refused_writes=1");
//! # Ok(())
//! # }
//! # }
//! # fn main() {
//! #     #[cfg(feature = "server")]
//! #     recipe::main().unwrap();
//! # }
//! ```
//!
//! With the `tracing` feature, `tracing_access_log()` writes one `tracing` event per request
//! when its response ends (target `shared_headers::access`, OpenTelemetry's field names, safe by
//! default: [`server::access_log`](crate::server::access_log)) and one per request with
//! post-commit activity. Hooks add up: a metric or an error reporter beside the log is one more
//! hook, and the log stays:
//!
//! ```
//! # #[cfg(feature = "tracing")]
//! # fn main() {
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use shared_headers::server::SharedHeadersLayer;
//! use shared_headers::server::access_log::AccessLog;
//!
//! let server_errors = Arc::new(AtomicU64::new(0));
//! let count = Arc::clone(&server_errors);
//! let layer = SharedHeadersLayer::new()
//!     .timeout(Duration::from_secs(5))
//!     .tracing_access_log() // INFO/WARN/ERROR "request completed", at the end of the response
//!     .on_response_end(move |end| {
//!         // ... and your own counter, from the same end of the response:
//!         if end.status_sent().is_some_and(|s| s.is_server_error()) {
//!             count.fetch_add(1, Ordering::Relaxed);
//!         }
//!     });
//! # drop(layer);
//! // The commit-time line instead (or as well), from a hook of your own:
//! let log = AccessLog::new();
//! let layer = SharedHeadersLayer::new().on_commit(move |c| log.commit(c));
//! # drop(layer);
//! # }
//! # #[cfg(not(feature = "tracing"))]
//! # fn main() {}
//! ```
//!
//! # Server: limits per request
//!
//! `request_policy(Builder)` and `response_policy(Builder)` give each request's handles limits
//! and secret names ([`security`](super::security#limits)). A request already over the request
//! limits is answered with `rejection_status` (431 by default) without calling the handler:
//!
//! ```
//! # #[cfg(feature = "server")]
//! # mod recipe {
//! use std::convert::Infallible;
//!
//! use http::{Request, Response, StatusCode};
//! use http_body_util::Full;
//! use hyper::body::Bytes;
//! use shared_headers::server::SharedHeadersLayer;
//! use shared_headers::{Builder, Committed, Outcome};
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # pub async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let service = ServiceBuilder::new()
//!     .layer(SharedHeadersLayer::new().request_policy(Builder::new().max_entries(2)))
//!     .service_fn(|_req: Request<()>| async {
//!         Ok::<_, Infallible>(Response::new(Full::<Bytes>::from("the handler ran")))
//!     });
//!
//! let req = Request::get("/").header("a", "1").header("b", "2").header("c", "3").body(())?;
//! let res = service.oneshot(req).await?;
//! assert_eq!(res.status(), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
//! let committed = res.extensions().get::<Committed>().unwrap();
//! assert_eq!(committed.outcome(), Outcome::Rejected);
//! # Ok(())
//! # }
//! # }
//! # fn main() {
//! #     #[cfg(feature = "server")]
//! #     recipe::main().unwrap();
//! # }
//! ```
//!
//! # Server: OpenTelemetry metrics
//!
//! With feature `opentelemetry`, [`otel_metrics`] records the convention's
//! `http.server.request.duration` histogram and `http.server.active_requests` counter through a
//! `Meter` you pass (the `opentelemetry` 0.33 API; the SDK and the exporter are yours): every
//! request exactly once, answered, failed, timed out, rejected, panicked, or cancelled by a
//! client that hung up or an outer timeout, its duration ending when the response ended (the
//! access line's instant). `http.route` is axum's route template, never the path. An axum server
//! exporting to the SDK's in-memory exporter (a `PeriodicReader` over an OTLP or stdout exporter
//! in production):
//!
//! [`otel_metrics`]: crate::server::SharedHeadersLayer::otel_metrics
//!
//! ```
//! # #[cfg(all(feature = "axum", feature = "opentelemetry"))]
//! # mod recipe {
//! use std::time::Duration;
//!
//! use axum::{Router, body::Body, routing::get};
//! use http::Request;
//! use http_body_util::BodyExt;
//! use opentelemetry::metrics::MeterProvider;
//! use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
//! use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
//! use shared_headers::server::SharedHeadersLayer;
//! use tower::ServiceExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # pub async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let exporter = InMemoryMetricExporter::default();
//! let provider = SdkMeterProvider::builder()
//!     .with_reader(PeriodicReader::builder(exporter.clone()).build())
//!     .build();
//! let meter = provider.meter("my-server");
//!
//! let app = Router::new()
//!     .route("/users/{id}", get(|| async { "ada" }))
//!     // `Router::layer`: inside the router, where the route template is known.
//!     .layer(SharedHeadersLayer::new().timeout(Duration::from_secs(5)).otel_metrics(&meter));
//! let res = app.oneshot(Request::get("/users/42").body(Body::empty())?).await?;
//! // The response ends when its body is read to the end, as a server does; a body dropped
//! // unread would be recorded as an error (`error.type` `body_dropped`).
//! assert_eq!(res.into_body().collect().await?.to_bytes(), "ada");
//!
//! provider.force_flush()?;
//! let exported = exporter.get_finished_metrics()?;
//! let metric = exported[0].scope_metrics().flat_map(|s| s.metrics())
//!     .find(|m| m.name() == "http.server.request.duration").unwrap();
//! let AggregatedMetrics::F64(MetricData::Histogram(histogram)) = metric.data() else { panic!() };
//! let point = histogram.data_points().next().unwrap();
//! assert_eq!(point.count(), 1);
//! let route = point.attributes().find(|kv| kv.key.as_str() == "http.route").unwrap();
//! assert_eq!(route.value.as_str(), "/users/{id}"); // the template, not `/users/42`
//! let status = point.attributes().find(|kv| kv.key.as_str() == "http.response.status_code");
//! assert_eq!(status.unwrap().value, opentelemetry::Value::I64(200));
//! assert!(point.attributes().all(|kv| kv.key.as_str() != "error.type")); // a success
//! # Ok(())
//! # }
//! # }
//! # fn main() {
//! #     #[cfg(all(feature = "axum", feature = "opentelemetry"))]
//! #     recipe::main().unwrap();
//! # }
//! ```
//!
//! A bounded attribute of your own: [`SharedHeadersLayer::otel_metric_attribute`]. The instruments, the
//! attributes and the cardinality rule: [`server::metrics`]. The cost, beside
//! `opentelemetry-instrumentation-tower`: [`docs::server_cost`].
//!
//! [`SharedHeadersLayer::otel_metric_attribute`]: crate::server::SharedHeadersLayer::otel_metric_attribute
//! [`server::metrics`]: crate::server::metrics
//! [`docs::server_cost`]: crate::docs::server_cost#the-http-server-metrics-beside-opentelemetry-instrumentation-tower
