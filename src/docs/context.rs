//! The request's context on every call made for it: a request id, the trace and tenant
//! headers, and the deadline, with one piece on each side.
//!
//! Istio's documentation: "each application must collect headers from each incoming request
//! and forward the headers to all outgoing requests triggered by that incoming request". In
//! Rust that is done by hand at every call site: tower-http's `PropagateHeaderLayer` and
//! `PropagateRequestIdLayer` copy request to response only, and reqwest-tracing injects trace
//! context only when a global propagator is set. Here:
//!
//! * **the server side**: [`SharedHeadersLayer::propagate`](crate::server::SharedHeadersLayer::propagate)
//!   with a [`Propagation`](crate::context::Propagation) captures each request's id and the
//!   headers to pass on, checks and bounds them, and puts them in scope while the handler runs;
//! * **the client side**: [`PropagateLayer`](crate::client::PropagateLayer) (any tower client:
//!   hyper-util's, a tonic `Channel`) or the reqwest
//!   [`PropagateMiddleware`](crate::client::reqwest::PropagateMiddleware) sends them on every
//!   outgoing call made in the request's scope, with what is left of the deadline; a task
//!   spawned with [`context::carry`](crate::context::carry) keeps both.
//!
//! ```
//! # #[cfg(feature = "client")]
//! # mod recipe {
//! use std::convert::Infallible;
//! use http::{Request, Response};
//! use shared_headers::client::PropagateLayer;
//! use shared_headers::context::Propagation;
//! use shared_headers::deadline::BudgetHeader;
//! use shared_headers::server::SharedHeadersLayer;
//! use tower::{Layer, ServiceBuilder, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # pub async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! // The next hop (any tower client): it answers with the headers it was sent.
//! let next_hop = ServiceBuilder::new()
//!     .layer(PropagateLayer::new(BudgetHeader::grpc_timeout()))
//!     .service_fn(|req: Request<()>| async move {
//!         Ok::<_, Infallible>(Response::new(req.headers().clone()))
//!     });
//!
//! // The server: a 1 s deadline, the request id and W3C trace context captured.
//! let server = SharedHeadersLayer::new()
//!     .timeout(std::time::Duration::from_secs(1))
//!     .propagate(Propagation::new().request_id().w3c())
//!     .layer(service_fn(move |_req: Request<()>| {
//!         let next_hop = next_hop.clone();
//!         async move {
//!             // No parameter threads the context: the call is made in the request's scope.
//!             let sent = next_hop.oneshot(Request::new(())).await?.into_body();
//!             Ok::<_, Box<dyn std::error::Error + Send + Sync>>(Response::new(sent))
//!         }
//!     }));
//!
//! let req = Request::builder()
//!     .header("x-request-id", "req-7")
//!     .header("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
//!     .body(())?;
//! let res = server.oneshot(req).await?;
//! assert_eq!(res.headers()["x-request-id"], "req-7"); // on the response too
//! let sent = res.into_body().into_inner().unwrap();
//! assert_eq!(sent["x-request-id"], "req-7");
//! assert_eq!(sent["traceparent"], "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
//! assert!(sent.contains_key("grpc-timeout")); // what is left, less the margin
//! # Ok(())
//! # }
//! # }
//! # fn main() {
//! #     #[cfg(feature = "client")]
//! #     recipe::main().unwrap();
//! # }
//! ```
//!
//! # What travels
//!
//! | configured with | headers | checked |
//! |---|---|---|
//! | [`request_id`](crate::context::Propagation::request_id) (or [`request_id_header`](crate::context::Propagation::request_id_header)) | `x-request-id` | 1 to 128 bytes of visible ASCII, once; else replaced by a generated id |
//! | [`w3c`](crate::context::Propagation::w3c) | `traceparent`, `tracestate`, `baggage` | `traceparent`'s format (lowercase hex, ids not zero, version not `ff`); `tracestate` only with a valid `traceparent`, at most 32 members and 512 bytes; `baggage` at most 64 members and 8,192 bytes; repeated `tracestate`/`baggage` lines joined |
//! | [`b3`](crate::context::Propagation::b3) | `b3`, `x-b3-traceid`, `x-b3-spanid`, `x-b3-parentspanid`, `x-b3-sampled`, `x-b3-flags` | B3's formats |
//! | [`envoy`](crate::context::Propagation::envoy) | the request id, the B3 set, `traceparent`, `tracestate`, `x-ot-span-context`, `x-cloud-trace-context`, `grpc-trace-bin`, `sw8` | as above; the others: visible ASCII |
//! | [`header`](crate::context::Propagation::header) | any name but a secret, hop-by-hop or budget header | visible ASCII, space and tab |
//!
//! Every value is visible ASCII, space or tab; a name that takes one value and comes twice is a
//! duplicate. What fails is not propagated and is counted
//! ([`LayerStats::propagation_counts`](crate::server::LayerStats::propagation_counts)); the request
//! is served all the same. The whole is bounded: at most 16 values and 10 KiB by default
//! ([`max_headers`](crate::context::Propagation::max_headers),
//! [`max_bytes`](crate::context::Propagation::max_bytes)).
//!
//! **Secrets never travel.** `authorization`, `proxy-authorization`, `cookie`, `set-cookie` and
//! the access log's credential names are refused when the propagation is made, a name of the
//! layer's request policy when the layer is built, and a name the policy marks secret later is
//! dropped from the propagation.
//!
//! **An outgoing request's own header wins**: the client side adds only what the request does
//! not have.
//!
//! **Trace headers travel as received** (Istio's model: the sidecars make the spans), unless
//! the propagation makes each request a hop of the trace
//! ([`Propagation::trace_hop`](crate::context::Propagation::trace_hop), and the spans of
//! [Spans](#spans) below). A process that makes its own spans otherwise injects its
//! `traceparent` in a layer before this one: the outgoing request's header wins.
//!
//! # The request id
//!
//! Taken from the request when valid, otherwise generated: 32 lowercase hex digits (the size
//! and alphabet of a W3C trace id): the standard library's SipHash-1-3, keyed once per process
//! from the OS, of a process-wide counter (two 64-bit outputs). No part is shared between ids
//! (no process prefix, no time), and without the key no id tells the next one or the process
//! that made it; ids repeat only by a 128-bit collision. One atomic add and two short hashes,
//! no lock, no system call per id. [`Propagation::request_id_with`](crate::context::Propagation::request_id_with) makes them your way.
//!
//! The id is on every response (the layer's own 503, 500 and gRPC answers too, unless the
//! response has the header already), in the access line (`http.request.id`, Elastic Common
//! Schema's name: OpenTelemetry has none), in the handler's
//! [`Exchange::context`](crate::Exchange::context), and on every outgoing call. An
//! invalid incoming id is replaced and counted; the access line's header lists print a value
//! over 1,024 bytes as its size, and every field of the line writes a control character or a
//! byte outside ASCII percent-encoded (`%09`, `%E9`), so bad input is never reproduced raw in a
//! log.
//!
//! # Cost
//!
//! Instructions per request under callgrind (exact, unaffected by other load) and allocations
//! per request, from `benches/alloc.rs` (instructions from the one run of `scripts/callgrind-per-op` that
//! gives every page its figures, see [`performance`](super::performance#the-run); the bench's run mode prints the allocations), each
//! against a baseline in the same run:
//!
//! | side | variant | instructions | allocations | bytes |
//! |---|---|---:|---:|---:|
//! | server | `layer_timeout` (nothing propagated) | 8,428 | 12 | 3,000 |
//! | server | `layer_timeout_id`: the same requests, an id generated, in scope, on the response | 10,081 (+1,653) | 15 (+3) | 3,864 |
//! | server | `layer_timeout_traced`: 3 more request headers (an id, `traceparent`, `tracestate`), nothing propagated | 9,466 | 12 | 3,416 |
//! | server | `layer_timeout_context`: the same requests, `Propagation::new().request_id().w3c()` | 12,648 (+3,182) | 16 (+4) | 4,568 |
//! | client | `client_bare`: a request to a service that answers at once, no layer | 1,359 | 3 | 668 |
//! | client | `client_deadline_none`: through `PropagateLayer`, nothing in scope | 1,560 (+201) | 3 | 668 |
//! | client | `client_context`: a deadline and that context in scope (`grpc-timeout`, the id, `traceparent`, `tracestate` added) | 4,616 (+3,056) | 4 (+1) | 670 |
//!
//! What allocates on the server: the context (one `Arc`), the values it holds, and the
//! response's header map when the response had no header at all (the bench's response has
//! none; a response with any pays for the insert only). On the client: the budget header's
//! value; the context's values are shared with the incoming request's (reference counts), and
//! the outgoing request's header map had room for them.
//!
//! **With nothing configured**, the layer pays a test where the context would be captured, one
//! on the call and on each poll (is a context to be put in scope?), one where the response
//! leaves (a request id to add?) and one at the exchange's drop; the poll is written in two
//! arms so that the path without a context drops no guard. What that came to against the layer
//! before it had a context (two builds, the same bench source) is in the CHANGELOG.
//! The client's `PropagateLayer` with neither a deadline nor a context in scope looks at the
//! request's extensions and reads two thread-locals: `client_deadline_none` against
//! `client_bare` in the table above.
//!
//! # Spans
//!
//! * **A hop of the trace**: with [`Propagation::trace_hop`](crate::context::Propagation::trace_hop)
//!   each request gets a new span id under the caller's trace (a new trace without a valid
//!   `traceparent`), and the calls made in its scope send it as their parent.
//! * **The request's `tracing` span** (feature `tracing`, with or without the access log):
//!   the handler's polls and the access line run in a span `request` with
//!   `http.request.id`, `trace_id` and `span_id`, and the body's polls too when the layer
//!   tracks the response's end (a log, metrics, a tracer or an `on_response_end` hook). With
//!   no subscriber interested it is not made (a callsite's interest: one atomic load).
//! * **OpenTelemetry spans** (feature `opentelemetry`):
//!   [`SharedHeadersLayer::otel_tracer`](crate::server::SharedHeadersLayer::otel_tracer) makes
//!   a server span per request; the propagation clients make a client span per call when given
//!   a tracer, [`PropagateLayer::otel_tracer`](crate::client::PropagateLayer::otel_tracer)
//!   (tower) and `client::reqwest::PropagateMiddleware::otel_tracer` (reqwest): child of the
//!   server span, made in the propagation's own call, so its id is the parent the call's
//!   `traceparent` names; `otel_metrics` records `http.client.request.duration` once per call.
//!
//! Exactly once, over sockets: `tests/otel_server_spans.rs` (the server span for answered,
//! timed out, rejected, shed, panicked, failed, hung up, outer timeout and dropped before its
//! first poll, over HTTP/1.1 and h2c; status `Error` exactly when `error.type` is set) and
//! `tests/client_spans.rs` (a client span and a duration point per call: answered, a 500, cut
//! at the deadline, cancelled; tower and reqwest).
//!
//! ## Side by side
//!
//! The same request mix over sockets, each request from a caller with a `traceparent`,
//! through this crate's layer, tower-http's `TraceLayer` under `tracing-opentelemetry` 0.34
//! (the parent set from the `traceparent` with the global propagator, as users do), and
//! `opentelemetry-instrumentation-tower` 0.19, each stack with its own timeout (1 s) and panic
//! catch (`tests/span_side_by_side.rs` prints and asserts this table). The answered request's
//! body ends 150 ms after its head; the client hangs up after 300 ms.
//!
//! | request | this crate | `TraceLayer` + `tracing-opentelemetry` | `opentelemetry-instrumentation-tower` |
//! |---|---|---|---|
//! | answered | 1 span, ends at body end, child | 1 span, ends at body end, child | 1 span, **ends at the head**, child |
//! | a 500 | 1 span, Error | 1 span, Error | 1 span, Error |
//! | timed out | 1 span, Error | 1 span, Error | 1 span, Error |
//! | panicked | 1 span, Error | 1 span, Error | 1 span, Error |
//! | client hung up | 1 span, Error (`cancelled`) | 1 span, **Unset** | 1 span, **Unset** |
//! | dropped before its first poll | 1 span, Error (`cancelled`) | 1 span, **Unset** | 1 span, **Unset** |
//! | a call the handler makes | a client span, the next hop's parent | none (no client layer) | none (no client layer) |
//!
//! Every stack exports each request's span once and makes it the caller's child when told the
//! parent; the differences are when the span ends (the contrib layer's when the head is
//! ready, not when the body ended) and whether a request that never got its answer says so.
//!
//! ## Cost
//!
//! Instructions per request under callgrind ((Ir(HIGH) - Ir(LOW)) / (HIGH - LOW), as
//! `scripts/callgrind-per-op` and `scripts/access-line-table`), release build:
//!
//! | what | bench, variants | instructions | bar |
//! |---|---|---:|---|
//! | the span and the line with no subscriber | `access_line --no-subscriber`: `layer_log` - `layer_nolog` | 21 | at most 50: met |
//! | the line and the span, `fmt` subscriber | `access_line`: `layer_log` / `th_same_eos` | 32,606 / 29,494 = 1.11x | 0.9x: **missed** (floor below) |
//! | the line through the crate's writer (`JsonLines`) and the span, against tower-http's with `fmt().json()` | `access_line --crate` / `--json`: `layer_log` / `th_same_eos` | 20,933 / 195,668 = 0.11x | 0.4x: met |
//! | the line's formatting alone, the crate's writer | callgrind inclusive: `Armed::fill` + `JsonLines::format` (`scripts/access-line-table`'s breakdown, `layer_log`) | 6,208 (the visitor path 7,856); the writer's own 2,689, the secret rule's printers 3,519 | 1,500: **missed** ([floor](super::server_cost#the-access-line-beside-tower-https-tracelayer)) |
//! | the server span, a sampler that drops the request | `metrics`: `layer_traced_dropped` - `layer_hop` | 15,206 - 12,138 = 3,068, 3 allocations (the sampling attributes); the floor, `sdk_dropped_floor` - `bare`: 1,637 and 3 | 300: **missed**, below the floor ([floor](super::server_cost#the-server-span-sampled-and-dropped-by-the-sampler)) |
//! | the server span, the SDK exporting: its share | `metrics --sdk`: (`layer_traced` - `layer`) / (`otel_tower_traced` - `otel_tower`) | 11,808 / 3,694 = 3.20x | 0.5x: **missed** (floor below) |
//! | the same, whole layers | `metrics --sdk`: `layer_traced` / `otel_tower_traced` | 21,329 / 19,258 = 1.11x | |
//! | the server span, no-op tracer | `metrics`: `layer_traced` - `layer` | 15,516 - 9,544 = 5,972 (the hop's ids and context included: `layer_hop` - `layer` = 2,594) | |
//!
//! The floors. The line's (split on an earlier build): `fmt`'s `format_event` for the line's
//! fields is about 17,300 instructions (the timestamp 2,400, the user agent and host 1,600,
//! the message 1,200, the float duration 800), the request span about 2,600 (created 740,
//! closed 570, three enter/exit pairs 680), the layer without its log 8,908 (tower-http's stack
//! about 5,800: the request headers' copy 844, two `Extensions` inserts 761, the commit 683,
//! the timer 322); the crate's own code in the line is about 4,100. With that code at zero the
//! layer would still be about 28,600 = 0.97x: 0.9x needs fewer fields, no span, or a lighter
//! commit. The span share's: the SDK's own work on one span (build, end, the simple
//! processor's export) is about 4,000 instructions, more than half the contrib layer's share
//! (3,694), which builds its span's name and attributes whether tracing is on or off, so its
//! difference holds little but the SDK's work; whole layers against whole layers, the crate's
//! costs 1.11x the contrib layer's. No allocation is added with no trace configured: the
//! `alloc` bench's `layer_timeout` makes 12 allocations per request.
//!
//! # The fuzz target
//!
//! `fuzz/fuzz_targets/context.rs` feeds arbitrary header lines and bounds to
//! [`Propagation::capture`](crate::context::Propagation::capture): no panic, every propagated
//! value checked and within the bounds, every configured name that came propagated or counted
//! once. `tests/context_props.rs` runs the same property with proptest in the test command.
