//! The server room: a tower layer that gives every request shared request and response headers
//! and commits them exactly once (feature `server`).
//!
//! [`SharedHeadersLayer`] wraps a [`tower` service](tower_service::Service) that answers
//! `http::Request`s. For every request, its service:
//!
//! 1. creates an [`Exchange`]: a [`SharedHeaders`] for the request headers (a copy of
//!    `req.headers()` as received, or of the part chosen with
//!    [`copy_request_headers`](SharedHeadersLayer::copy_request_headers)), an empty one for
//!    response headers and one for log [`annotations`](Exchange::annotations) (never sent), the
//!    first two with the limits and secret names of the layer's [`Builder`]s, if set
//!    ([`request_policy`](SharedHeadersLayer::request_policy),
//!    [`response_policy`](SharedHeadersLayer::response_policy)), and puts the exchange into
//!    the request's extensions (its one extension: a bare [`SharedHeaders`] that another layer
//!    stores there cannot be mistaken for it). The handler and every task it spawns clone it
//!    and read and write through [`Exchange::request`], [`Exchange::response`] and
//!    [`Exchange::annotations`] concurrently, without locks held across `.await`.
//!    A request whose headers are already over the request limits is not passed on: the layer
//!    commits it as [`Outcome::Rejected`] and answers
//!    [`rejection_status`](SharedHeadersLayer::rejection_status) (431 by default);
//! 2. calls the inner service, optionally under a wall-clock deadline: the layer's own
//!    ([`SharedHeadersLayer::timeout`]) or the caller's budget when it is earlier
//!    ([`caller_budget`](SharedHeadersLayer::caller_budget): `grpc-timeout`,
//!    `connect-timeout-ms`, Envoy's `x-envoy-expected-rq-timeout-ms`, a header you name). The
//!    deadline is in scope ([`Deadline::current`](crate::deadline::Deadline::current)) while the inner
//!    service is called and polled, so outgoing calls made there inherit it
//!    (the client room's `PropagateLayer`);
//! 3. **commits exactly once**, at the first of: the inner service answers
//!    ([`Outcome::Answered`] or [`Outcome::Failed`]), its future panics ([`Outcome::Panicked`]:
//!    caught and answered 500, or, with
//!    [`resume_panics`](SharedHeadersLayer::resume_panics), resumed to the caller's own
//!    recovery after the commit), the deadline fires ([`Outcome::TimedOut`], committed by the
//!    process's deadline thread at the deadline even if the handler blocks its thread, and
//!    answered with [`timeout_status`](SharedHeadersLayer::timeout_status), 503 by default, and
//!    an empty body), or the future is dropped by an outer layer or a closed connection
//!    ([`Outcome::Cancelled`]). The three handles are sealed at that moment: a spawned task
//!    that writes afterwards gets [`Error::Sealed`](crate::Error::Sealed), and the write is
//!    counted ([`Exchange::refused_writes`]). A gRPC call (`content-type: application/grpc`, over HTTP/2 or later, or over
//!    HTTP/1.1 with `te: trailers`) gets the layer's answers in gRPC's words: HTTP 200 with `grpc-status` 4 (deadline), 8
//!    (rejection) or 13 (panic). A Connect call (a `POST` with `connect-protocol-version: 1`
//!    or `content-type: application/connect+<codec>`, a `GET` with `connect=v1` in its query)
//!    gets them in Connect's: a unary call the status of the Connect specification's
//!    code-to-HTTP table and `content-type: application/json` with the error
//!    (`{"code":"deadline_exceeded","message":"deadline exceeded"}`: 504 for a deadline or an
//!    admission shed, `resource_exhausted` 429 for a rejection, `internal` 500 for a panic),
//!    a streaming call HTTP 200 with its own content type and one end-stream message holding
//!    the same error. Without that, a Connect client reads an empty 503 as `unavailable` (and
//!    may retry it) instead of `deadline_exceeded`. A plain `POST` of `application/json`
//!    without the protocol header is an HTTP request and keeps HTTP's answers. The access
//!    line and the metrics keep the outcome and `error.type`; the status is the one sent;
//! 4. makes the answer the record describes: the inner response with the committed response
//!    headers merged in (each name set through the handle replaces that name on the
//!    response), or the layer's own answer, which carries the committed headers except the
//!    representation and caching headers that would describe the handler's body
//!    ([never on an own answer](SharedHeadersLayer#never-on-an-own-answer)), and puts the [`Committed`] record into the response's
//!    extensions, its one extension (unless
//!    [`record_in_response(false)`](SharedHeadersLayer::record_in_response)). Its body is a
//!    [`ResponseBody`]: the inner body, or the empty body of an own answer, so the inner body
//!    needs no `Default` (a proxy's `Incoming` works);
//! 5. runs the [`on_commit`](SharedHeadersLayer::on_commit) hooks, once per request, for
//!    every outcome, with the record and **the response head as it leaves the layer**
//!    ([`CommitEvent::sent`](crate::CommitEvent::sent); `None` when no response left it), in
//!    the request's task just before the response leaves (or in the future's drop, for a
//!    cancelled request); and, **when the response ends** (its body's last frame taken by the
//!    server, its body failed or dropped early, or, for a request that got no response, when
//!    the layer knew it), the [`on_response_end`](SharedHeadersLayer::on_response_end) hooks
//!    and the access line (`server::access_log`, feature `tracing`), with the bytes sent and the
//!    true duration ([`ResponseEnd`]). Hooks add up, in the order added; a panicking one is
//!    caught and does not stop the others. This is the access log that also sees the requests
//!    that get no response from this layer, which an outer logging layer cannot;
//! 6. when the last clone of the exchange is dropped (the handler and every task that held it
//!    have finished), runs the [`on_late_writes`](SharedHeadersLayer::on_late_writes) hooks if
//!    writes were refused after the commit: the post-timeout activity, reported once.
//!
//! # What other middleware sees
//!
//! * `req.headers()` is untouched: middleware inside the layer and the handler see the headers
//!   **as received**. Writes through the [`SharedHeaders`] handle do not show there (the handle
//!   starts as a copy); read the handle to see them.
//! * The response's headers are the inner response's, plus the committed response headers.
//!   Headers that describe the body (`content-type`, `content-length`) belong on the response
//!   the handler returns, not in the shared handle: the layer's own answers (timeout,
//!   rejection, panic) have their own, empty body and never carry the committed ones
//!   ([never on an own answer](SharedHeadersLayer#never-on-an-own-answer)); a gRPC own answer
//!   sets its own `content-type: application/grpc`, which gRPC's trailers-only form needs, and
//!   a Connect one its own `content-type` and JSON body.
//! * Errors of the inner service pass through unchanged ([`Outcome::Failed`]); the timeout and
//!   the rejection are answers, not errors, so the error type does not change. An error that
//!   comes after the deadline's commit (a handler that blocked past it, then failed) is answered
//!   with the timeout, as the record says, like a late answer.
//! * A rejected request never reaches the inner service, although its `poll_ready` was called
//!   for it. A service that reserves something in `poll_ready` keeps it until its next call or
//!   until it is dropped (hyper drops the per-connection clone with the connection).
//!
//! # Cost
//!
//! Per request: a copy of the request headers into the request handle's first version, one
//! allocation for the exchange and its two handles (a third handle if the handler annotates),
//! and one extension entry each on the request and the response. Sealing copies nothing, the
//! deadline is one heap push under a short lock, a hook costs its own work; catching a panic
//! of the inner future is part of the layer's figure ([`docs::server_cost`][perf]).
//! The allocation count and its breakdown, and the time per request against a bare service and
//! tower-http's `TimeoutLayer`, each with its bench: [`docs::server_cost`][perf].
//!
//! [perf]: crate::docs::server_cost#the-server-layer-allocations-per-request
//!
//! # Example: a hyper server
//!
//! A complete HTTP/1.1 server on hyper 1 and hyper-util, and one request to it. The handler
//! spawns a task that adds a response header while the handler works:
//!
//! ```
//! use std::{convert::Infallible, time::Duration};
//!
//! use hyper::body::Bytes;
//! use http::{Request, Response};
//! use http_body_util::{BodyExt, Empty, Full};
//! use hyper::body::Incoming;
//! use hyper_util::rt::TokioIo;
//! use hyper_util::service::TowerToHyperService;
//! use shared_headers::server::{ResponseBody, SharedHeadersLayer};
//! use shared_headers::{Committed, Exchange};
//! use tower::ServiceBuilder;
//!
//! async fn handler(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
//!     let exchange = req.extensions().get::<Exchange>().unwrap().clone();
//!     let request_headers = exchange.request().clone();
//!     let task = tokio::spawn(async move {
//!         // Runs concurrently with the handler; no lock is held across this await.
//!         tokio::time::sleep(Duration::from_millis(1)).await;
//!         exchange.response().insert("x-cache", "miss".parse().unwrap())
//!     });
//!     let _ = request_headers.insert("x-user", "ada".parse().unwrap()); // Err only if sealed: the answer is decided
//!     let _ = task.await.unwrap(); // the task's write: Err only if sealed
//!     Ok(Response::new(Full::from("hello")))
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
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
//! ```
//!
//! # Example: axum
//!
//! With feature `axum`, [`Exchange`] is an axum 0.8 extractor (see its `FromRequestParts`
//! impl; without the layer the handler is answered 500 by `MissingLayer`, whose message says
//! how to add it). Add the layer to the router after the routes that use it.
//! `examples/axum.rs` is a complete server with the access log hooks
//! (`cargo run --features axum,tracing --example axum`).

#[cfg(feature = "tracing")]
#[cfg_attr(docsrs, doc(cfg(feature = "tracing")))]
pub mod access_log;
#[cfg(not(shared_headers_loom))]
mod admission;
// `pub` only in the loom world, for the limiter's models in `loom-tests/tests/admission.rs`.
#[cfg(shared_headers_loom)]
#[doc(hidden)]
pub mod admission;
mod answer;
#[cfg(feature = "axum")]
mod axum;
mod body;
mod connect;
mod end;
mod future;
mod layer;
mod line;
#[cfg(feature = "opentelemetry")]
#[cfg_attr(docsrs, doc(cfg(feature = "opentelemetry")))]
pub mod metrics;
#[cfg(feature = "opentelemetry")]
mod otel_trace;
mod selection;
mod service;
#[cfg(feature = "tracing")]
mod span;
mod timer;

pub use admission::{Admission, AdmissionCounts};
#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
pub use axum::{MissingLayer, RequestHeaders};
pub use body::ResponseBody;
pub use end::{Ending, ResponseEnd};
pub use layer::{LayerStats, SharedHeadersLayer};
pub use selection::HeaderSelection;
pub use service::SharedHeadersService;

#[cfg(doc)]
use crate::{Builder, CommitEvent, Committed, Exchange, Outcome, SharedHeaders};
