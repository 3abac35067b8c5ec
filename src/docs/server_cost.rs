//! What the server layer costs, measured: its access line beside tower-http's `TraceLayer`,
//! its metrics beside `opentelemetry-instrumentation-tower`, its allocations, the layer against
//! a lean layer of the same shape and the floor of one with versioned handles, against bare and
//! tower-http, over loopback, and the cost of its deadline. The hardware, the method and the
//! handle's own figures: [`performance`](super::performance).
//!
//! # The access line beside tower-http's `TraceLayer`
//!
//! What a user would otherwise run: tower-http's stack doing the layer's job
//! (`SetSensitiveRequestHeadersLayer`, `TraceLayer`, `TimeoutLayer`, `CatchPanicLayer`,
//! `SetSensitiveResponseHeadersLayer`) with a real subscriber formatting every line
//! (`tracing_subscriber::fmt` to `io::sink`, `INFO`), against the layer with its default access
//! line (`tracing_access_log()`). One request: `GET /users/42?page=2&api_key=zzz`, 8 headers
//! (a browser's user agent, a referer, an `x-api-key` and a cookie among them), a handler
//! answering 200 with a 5-byte body, the body driven to its end. `benches/access_line.rs`, one
//! binary for every variant:
//!
//! * `th_defaults`: `TraceLayer::new_for_http()` at `INFO` (method, URI, version; status and
//!   latency);
//! * `th_same`: `TraceLayer` logging the OpenTelemetry attributes the crate's line logs (a span
//!   with the request's, redacting the same credential parameters in the query and the
//!   referer; an `on_response` event with the status, the body's size hint and the latency),
//!   its line written when the head leaves;
//! * **`th_same_eos`**: the same job at the crate's moment, **the like-for-like baseline**: the
//!   line when the body ends (`on_eos`), the status, the head's latency and the bytes recorded
//!   into the span as they come (the crate's line has the same two times: to the commit and
//!   the total);
//! * `th_headers`: `th_same` plus every request header (`?req.headers()`, as people do);
//! * `layer_log`, `layer_nolog`: the layer (30 s deadline) with and without its access line;
//!   `bare`: the handler alone.
//!
//! Each variant runs under six subscribers, one per process (`--json`, `--crate`,
//! `--crate-visitor`, `--registry`, `--no-subscriber` or none): stock `fmt` (text, `io::sink`,
//! `INFO`); `fmt().json()`; **the crate's own writer** (`JsonLines`, feature `access-json`, in
//! a `tracing_subscriber::Registry`, its background thread writing to the same `io::sink`: it
//! writes only the crate's line, so a tower-http variant under it makes its span and events and
//! writes nothing); the same writer made to read the line through the `tracing` visitor, as it
//! reads any other event (`crate_visitor`: the path the writer took before the access log
//! handed it the line's values); a `Registry` alone (the floor under the writer); none.
//!
//! Instructions per request (callgrind, `scripts/access-line-table`: 1,000 and 6,000 requests,
//! the difference divided), in brackets the ratio to `th_same_eos` under the same subscriber,
//! all from one run of the script. **What is stable and what moves** (this run and three more
//! of `MODES="fmt crate crate_visitor registry" scripts/access-line-table layer_log
//! layer_log_id`, the same build): the `Registry` column repeated to one instruction (13,673
//! each time, 15,239 to 15,240); the stock `fmt` column moved by up to 0.2% for `layer_log`
//! (32,598 to 32,639) and 1.1% for `layer_log_id` (36,454 to 36,841; the cause is not traced
//! to a function); **the crate's writer moved by up to 0.6%** (`layer_log` 20,885 to 21,004,
//! `layer_log_id` 23,172 to 23,217), its visitor path by up to 0.6% (22,474 to 22,604 and
//! 24,688 to 24,846). The writer's thread runs in the measured process and callgrind
//! counts its instructions with the request's: how many lines each wake-up of that thread
//! takes (each wake-up a condition variable's notify and wait, and the loop around one write
//! to the sink) depends on how the threads were scheduled, and so does how often the
//! timestamp's cached second turns over. So the writer's figures are good to about 150
//! instructions, and a ratio to them to about 0.01x. The request's own functions in the
//! breakdown below (the fill, the printers) run on the request's thread: the printers gave
//! the same counts in the four runs, the fill the same to 4 instructions (5,479 each time
//! for `layer_log`, 5,480 to 5,483 for `layer_log_id`).
//!
//! | variant | `fmt` | `fmt().json()` | crate's writer | the writer, visitor path | `Registry` | none |
//! |---|---:|---:|---:|---:|---:|---:|
//! | `th_defaults` | 19,533 (0.66x) | 52,372 (0.27x) | 7,797 | 7,797 | 7,642 | 5,795 (1.01x) |
//! | `th_same` | 27,844 (0.94x) | 98,419 (0.50x) | 9,011 | 9,011 | 8,856 | 5,759 (1.01x) |
//! | `th_same_eos` | 29,494 (1.00x) | 195,668 (1.00x) | 9,819 | 9,818 | 9,223 | 5,721 (1.00x) |
//! | `th_headers` | 36,369 (1.23x) | 167,201 (0.85x) | 9,019 | 9,019 | 8,864 | 5,759 (1.01x) |
//! | **`layer_log`** | **32,606 (1.11x)** | 56,182 (0.29x) | **20,933** | 22,604 | 13,673 | 9,476 (1.66x) |
//! | `layer_log_id` | 36,841 (1.25x) | 66,426 (0.34x) | 23,179 | 24,796 | 15,240 | 10,766 (1.88x) |
//! | `layer_nolog` | 11,397 (0.39x) | 12,028 (0.06x) | 10,772 | 10,772 | 10,509 | 9,455 (1.65x) |
//! | `bare` | 2,343 (0.08x) | 2,343 (0.01x) | 2,343 | 2,343 | 2,343 | 2,343 (0.41x) |
//!
//! (`layer_log_id`: `layer_log` propagating the request's id, `x-request-id`, which the
//! request carries: the request's span has a field and the line carries it.)
//!
//! Allocations per request (the bench's counting allocator, 1,000 requests after 100) and the
//! bytes of the line(s) each request writes, same run:
//!
//! | variant | `fmt` | `fmt().json()` | crate's writer | the writer, visitor path | `Registry` | none |
//! |---|---:|---:|---:|---:|---:|---:|
//! | `th_same_eos` | 13 / 539 | 113 / 1,123 | 5 / 0 | 5 / 0 | 5 / 0 | 5 / 0 |
//! | `layer_log` | 16 / 588 | 20 / 735 | **14 / 669** | 14 / 669 | 14 / 0 | 14 / 0 |
//! | `layer_log_id` | 20 / 644 | 32 / 849 | **15 / 727** | 15 / 723 | 15 / 0 | 15 / 0 |
//! | `layer_nolog` | 15 / 0 | 16 / 0 | 14 / 0 | 14 / 0 | 14 / 0 | 14 / 0 |
//!
//! The comparisons (same run):
//!
//! | | instructions | ratio |
//! |---|---:|---:|
//! | **the layer with its line through the crate's writer ÷ tower-http's stack with `fmt().json()`** | 20,933 / 195,668 | **0.11x** |
//! | the same ÷ tower-http's stack with stock `fmt` (text) | 20,933 / 29,494 | 0.71x |
//! | both with `fmt().json()` | 56,182 / 195,668 | 0.29x |
//! | both with stock `fmt` | 32,606 / 29,494 | 1.11x |
//! | the writer's whole cost per line (`layer_log`: crate's writer - `Registry`) | 7,260 | |
//! | the same through the visitor (`layer_log`: visitor path - `Registry`) | 8,931 | 0.81x of it |
//! | the writer's whole cost per line with the request's id (`layer_log_id`: crate's writer - `Registry`) | 7,939 | |
//!
//! The line's formatting, by part (the same script, the same run: callgrind's inclusive costs
//! of named functions, per request from the 1,000- and 6,000-request runs above; a function
//! inlined into another has no row of its own):
//!
//! | part | `layer_log`, crate's writer | visitor path | `layer_log_id`, crate's writer |
//! |---|---:|---:|---:|
//! | **the line's formatting** (`Armed::fill` + `JsonLines::format`; visitor: `JsonLines::format`) | **6,208** | 7,856 (the writer 0.79x of it) | 6,298 |
//! | `Armed::fill`: the line's values into the slot | 5,479 | | 5,481 |
//! | `JsonLines::format`: the timestamp, level, target, span's fields, the slot's copy | 728 | 7,856 | 817 |
//! | the secret rule's printers: the query (`QueryShown`) and the referer (`write_url`) | 3,519 | 3,519 | 3,519 |
//! | of it the query's | 2,215 | 2,215 | 2,215 |
//! | of it the referer's (its query's rule included) | 1,304 | 1,304 | 1,304 |
//! | of both, the credential-name rule (`is_credential_bytes`) | 1,141 | 1,141 | 1,141 |
//! | **the writer's own formatting** (the formatting - the printers) | **2,689** | 4,337 | 2,779 |
//! | `JsonLines::on_event`: finding the request's span, `format`, the hand-over | 1,517 | | 1,640 |
//! | of it the hand-over to the writing thread (`Shared::push`) | 151 | | 185 |
//! | the request span's fields kept and read (`Spans`, every call) | 18 | | 266 |
//!
//! * **With its own writer, the line costs 0.11x tower-http's like for like on `fmt().json()`,
//!   0.71x tower-http's on stock `fmt`**, and allocates nothing: 14 allocations per request
//!   with the line or without it (`layer_nolog`), as under the `Registry` alone, and with the
//!   request's id propagated (`layer_log_id`) 15, as under the `Registry` alone. The writer
//!   keeps a request span's fields (its ids) in a table of its own by span id, whose buffers
//!   are emptied at the span's close and reused by the next span, not in the span's
//!   extensions (a box per span); a request without ids takes no lock there (266
//!   instructions with the id, 18 without). `fmt().json()` is the expensive one for a
//!   `TraceLayer` stack: it keeps each span's fields as a JSON string and parses and
//!   re-serializes it at every `record` (`th_same_eos` records three times: 113 allocations a
//!   request).
//! * **The line's values handed to the writer**: the access log, when a `JsonLines` is alive,
//!   formats its line's fields into a per-thread slot just before it emits the event (keys
//!   escaped at compile time, integers and the float without `fmt`, client text escaped as it
//!   is copied, eight bytes at a time), and the writer copies them in place of visiting the
//!   event's value set, for that event only: the slot is read for an event of the `request
//!   completed` line's callsites (the access log's module, the line's fields); any other
//!   event, even one emitted by another layer while the line is dispatched, goes through the
//!   visitor. Every other layer sees the event with every field (`tests/access_json.rs`
//!   checks both paths print the same bytes for every cell of its matrix). The line's
//!   formatting, in the table above: **6,208 instructions per line, against 7,856 through the
//!   visitor** (0.79x). Of it 3,519 are the line's own values that any formatter asks for,
//!   the secret rule's printers of the query and the referer; the writer's own formatting is
//!   **2,689** (4,337 through the visitor): the timestamp, the float (the shortest round-trip
//!   text, as serde_json writes it), the integers, `fmt`'s machinery around the two redacting
//!   printers, the keys, the escaping scans of the client's text and the copies. The rest of
//!   the writer's 7,260 is finding the request's span and the hand-over to the writing
//!   thread, one wake-up per batch. **1,500 for the formatting is missed**: the secret rule's
//!   printers alone are 3,519 of it, and the field-by-field values from the record (each an
//!   `Option` read from the request's record) most of the rest.
//! * **Stock `fmt`: 1.11x** tower-http's like for like, and the layer under it costs more
//!   than tower-http's layers (9,476 against about 5,700 without a subscriber): one event with
//!   every field and the request's own span (created, entered around the call, each poll of
//!   the handler and of the body, closed), against a span with every field plus an event.
//! * **The line allocates 2 of its own under `fmt`** (16 against 14 under the `Registry`):
//!   the request's span in `fmt`'s registry (`fmt` formats its fields into a string);
//!   tower-http's span adds 8 (its formatted fields and their growth).
//! * **Configured but nobody listening**: 9,476 against 9,455 without the log, 21
//!   instructions: the layer asks once per request whether a subscriber may take the line (one
//!   atomic load) and, if not, makes no end state, no span and no post-commit activity report.
//! * **Where the line's cost goes under stock `fmt`**: most of it is `tracing_subscriber`'s
//!   `format_event` (the timestamp, each field's name, client text quoted and escaped a
//!   character at a time, the float duration), then the request's span (created, entered,
//!   closed) and gathering the fields. Callgrind on the bench binary's `fmt` run (as
//!   `scripts/access-line-table` runs it), read with `callgrind_annotate --inclusive=yes`,
//!   prints the split for the build at hand (figures from older builds are not repeated here:
//!   no script of this tree prints them).
//! * **Wall clock** (criterion, `cargo bench --features full --bench access_line -- --criterion
//!   --rounds 4`: the variants interleaved in one process, 4 rounds, no other build running;
//!   measured before the token rule and the request's span, at 0.88x by instructions):
//!   `layer_log` 2.73 µs, `th_same_eos` 3.40 µs, `th_same` 3.15 µs, `th_defaults` 2.46 µs,
//!   `layer_nolog` 1.09 µs (medians over rounds). Medians of the per-round ratios: **0.83x**
//!   `th_same_eos` (rounds 0.71x to 0.92x), **0.88x** `th_same` (0.80x to 1.00x), 1.12x
//!   `th_defaults`. With builds running beside it, rounds spread from 0.90x to 1.45x: the
//!   instruction counts above are the figures.
//!
//! ```sh
//! scripts/access-line-table                                   # the tables (about 3 minutes)
//! cargo bench --features full --bench access_line             # allocations, line bytes, the lines
//! cargo bench --features full --bench access_line -- --criterion --rounds 4
//! ```
//!
//! # The HTTP server metrics beside opentelemetry-instrumentation-tower
//!
//! `SharedHeadersLayer::otel_metrics` (feature `opentelemetry`) against the OpenTelemetry
//! contrib crate's tower layer, `opentelemetry-instrumentation-tower` 0.19 (the maintained one,
//! on the same `opentelemetry` 0.33; its spans off, `with_tracing(false)`), each with a no-op
//! meter (no global provider) and with the SDK (`SdkMeterProvider`, a `PeriodicReader` over the
//! in-memory exporter). The request and handler of the access line's table; `benches/metrics.rs`,
//! `scripts/metrics-table` (instructions per request under callgrind, runs of 1,000 and 6,000
//! requests, one build; the run of the server span's table below). The metrics' share is each variant minus its baseline
//! from the same run: `layer_metrics - layer`, `otel_tower - bare`.
//!
//! | variant | instructions (no-op meter) | instructions (SDK) | metrics' share (no-op / SDK) | allocations (no-op / SDK) | ÷ bare (no-op / SDK) |
//! |---|---:|---:|---:|---:|---:|
//! | `bare` (the handler) | 2,383 | 2,382 | | 4 / 4 | 1.00x / 1.00x |
//! | `layer` (30 s timeout, no metrics) | 9,544 | 9,521 | | 14 / 14 | 4.01x / 4.00x |
//! | `layer_metrics` | 11,431 | 15,829 | **1,887 / 6,308** | 14 / 14 | 4.80x / 6.65x |
//! | `otel_tower` | 8,896 | 15,564 | **6,513 / 13,182** | 16 / 16 | 3.73x / 6.53x |
//! | `otel_tower_stack` (+ `TimeoutLayer`, `CatchPanicLayer`) | 10,054 | 16,723 | | 17 / 17 | 4.22x / 7.02x |
//!
//! The crate's metrics cost 0.29x (no-op meter) and 0.48x (SDK) of the contrib layer's share,
//! and no allocation (the attributes are on the stack; a request with an axum route allocates
//! its `http.route` string once): the contrib layer formats a span name, copies the method
//! and runs the propagator's extraction even with its spans off, and allocates two more times.
//!
//! Which requests each counts (`--mix`, the SDK; the contrib layer outermost in
//! `otel_tower_stack`, its most favourable place; "active" is the counter's running sum):
//!
//! | request | `SharedHeadersLayer`: durations recorded | active after | `otel_tower_stack`: durations recorded | active after |
//! |---|---:|---:|---:|---:|
//! | answered | 1 | 0 | 1 | 0 |
//! | timed out (50 ms) | 1 | 0 | 1 | 0 |
//! | hung up (future dropped after its first poll) | 1 | 0 | **0** | **1** |
//! | panicked | 1 | 0 | 1 | 1 |
//!
//! The contrib layer records at the response head (before the body is sent) and has no `Drop`:
//! a request whose future is dropped (a client that hung up, an outer timeout, a future dropped
//! before its first poll) is never recorded and leaves `http.server.active_requests` one
//! higher for the life of the process. Inside a `CatchPanicLayer` (the other order) it would
//! miss panics as well. The crate records every request once, at the end of its response
//! (`tests/layer_metrics.rs` over sockets, HTTP/1.1 and HTTP/2).
//!
//! Without metrics installed the feature costs nothing measurable: `layer_timeout` (metrics
//! off, `--features full`) is 8,428 instructions in [the run](super::performance#the-run);
//! the build with the feature off was not measured beside it on this build.
//!
//! # The server span: sampled, and dropped by the sampler
//!
//! `SharedHeadersLayer::otel_tracer` beside the contrib layer's spans, `benches/metrics.rs`,
//! instructions per request (callgrind, 1,000 and 6,000 requests, the difference divided) and
//! allocations, one run of `scripts/metrics-table bare sdk_dropped_floor layer layer_metrics
//! layer_hop layer_traced_dropped layer_traced otel_tower otel_tower_stack otel_tower_traced`
//! (the metrics' table above and the `--sdk` rows are the same run):
//!
//! | variant | instructions | allocations |
//! |---|---:|---:|
//! | `bare` (the handler) | 2,383 | 4 |
//! | `sdk_dropped_floor` (the handler, and what the API and the SDK make any server span pay for a request the sampler drops: below) | 4,020 | 7 |
//! | `layer` (30 s deadline, nothing else) | 9,544 | 14 |
//! | `layer_hop` (`propagate(trace_hop())`: the request a hop of a trace, no tracer) | 12,138 | 18 |
//! | **`layer_traced_dropped`** (the SDK's tracer, `Sampler::AlwaysOff`) | **15,206** | **21** |
//! | `layer_traced`, the global no-op tracer | 15,516 | 22 |
//! | `layer` / `layer_traced`, the SDK exporting every span (`--sdk`) | 9,521 / 21,329 | 14 / 31 |
//! | `otel_tower` / `otel_tower_traced`, the SDK exporting (`--sdk`) | 15,564 / 19,258 | 16 / 24 |
//!
//! * **A request the sampler drops**: the tracing part is `layer_traced_dropped - layer_hop` =
//!   **3,068 instructions and 3 allocations** (752 bytes: 728 of them the sampler's `Vec`, with
//!   the room of the 13 attributes a recording span can get, so that the SDK, which keeps it
//!   as the span's, never grows it). **Its floor is 1,637 instructions and 3 allocations**
//!   (248 bytes: a `Vec` of the 4 attributes this request has): `sdk_dropped_floor - bare`,
//!   what any server span on the OpenTelemetry API pays there. The HTTP semantic conventions
//!   say what must be there at the span's creation for sampling decisions
//!   (`http.request.method`, `url.path`, `url.scheme`, `server.address`, `server.port`: a
//!   sampler that drops health checks by their path needs them), the SDK's
//!   `ShouldSample::should_sample` takes them as `&[KeyValue]` and the API's `SpanBuilder` as
//!   a `Vec<KeyValue>` of owned values: the `Vec`, a copy of the path and a copy of the host
//!   are the 3 allocations, and the tracer's `build_with_context` (the decision, the ids, a
//!   span that does not record, and the builder's attributes freed) the bulk of the
//!   instructions. The 1,431 above the floor: the
//!   host and port split and escaped as every printer shows them (`server_address`), the path
//!   checked against the secret rule (a credential path parameter is never given to a
//!   sampler), the call's start instant for a span that records (two clock reads), and the
//!   hop's context around the tracer's ids. The other
//!   attributes (the protocol, an unknown method's text) are set only on a span that
//!   records, and a span that does not record is dropped where it was made, with no box.
//!   **300 and no allocation are missed**, by the floor: the SDK's decision on a builder with
//!   the attributes a conforming sampler must see is 5.5x the bar, and 3 allocations.
//! * **A sampled request**, the SDK exporting: the span's share is `layer_traced - layer` =
//!   11,808 against the contrib layer's `otel_tower_traced - otel_tower` = 3,694 (3.20x); whole
//!   layers, 21,329 against 19,258 (1.11x). The SDK's own work on one span (build, end, the
//!   simple processor's export) is about 4,000 of each. Part of the share is the span's
//!   `url.query` (the contrib layer sets none): the secret rule's printer over
//!   `page=2&api_key=zzz` (the rule every printer asks) is 1,636 instructions per request
//!   (`QueryShown`'s inclusive cost under callgrind, `callgrind_annotate --inclusive=yes`, in
//!   the bench's `layer_traced --sdk` runs of 1,000 and 6,000 requests, the difference
//!   divided), and the string's copy and one more attribute in the SDK come on top of it.
//!
//! # The server layer: allocations per request
//!
//! Every response has a [`ResponseBody`](crate::server::ResponseBody) (any body type, and the
//! end of the response for the access line and the `on_response_end` hooks): 192 bytes for a
//! `String` body, moved with the response, inline (no allocation). Instruction counts below
//! are from [the run](super::performance#the-run) unless a paragraph names another.
//!
//! `cargo bench --features full --bench alloc` (a counting global allocator, exact): 8 request
//! headers, a `service_fn` returning `Response<String>`, 1,000 requests after 100 unmeasured;
//! from building the request (a clone of the 8 headers) to dropping the response. "Own" is the
//! row minus the bare row. The floor (`benches/floor`) is what any commit-once layer over
//! `http`'s types must allocate: one shared per-request allocation holding the copy of the
//! request headers (2 allocations for the copy's `HeaderMap`), and one entry in each message's
//! `http::Extensions` (3 allocations each: the map, its table and the boxed value).
//!
//! | per request | first measured | previous own | own | own bytes |
//! |---|---:|---:|---:|---:|
//! | bare `service_fn` (2 allocations in all: the request's headers) | 0 | 0 | 0 | 0 |
//! | tower-http `TimeoutLayer` | 0 | 0 | 0 | 0 |
//! | floor: the copy, one `Arc`, one extension each way | | | 9 | 1,384 |
//! | floor with the copy, the extension in the request only (`floor_request_only`) | | | 6 | 1,196 |
//! | floor without the copy | | | 7 | 488 |
//! | `SharedHeadersLayer`, no deadline | 17 | 13 | 10 | 1,936 |
//! | `SharedHeadersLayer` with a deadline | 17 | 13 | **10** | 1,936 |
//! | … with `copy_request_headers(HeaderSelection::none())` (the request's headers not copied) | | 11 | **7** | 896 |
//! | … with an `on_commit` hook | | 13 | 10 | 1,936 |
//! | … with an `on_commit` hook and `record_in_response(false)` (the record reaches the log through the hook only) | | | **7** | 1,748 |
//! | … and the handler writes 1 response header | | 20 | 17 | 3,423 |
//!
//! The layer's 10: the request header copy (2), the exchange with both handles (1: their
//! shared parts live inside the exchange's allocation), the request handle's first version
//! (1: the copied map, which a `Snapshot` can outlive the exchange with), and the two extension
//! entries (3 + 3). The response handle and a `copy_request_headers(HeaderSelection::none())` request handle start
//! from a shared empty version (one per thread, no allocation) and are sealed by publishing its
//! sealed twin (no allocation). So the layer is at the floor without the copy (7 = 7), and one
//! above it with the copy (10 against 9: the floor keeps its copy in its one `Arc`, the layer
//! in a version of its own). A stack whose access log is an `on_commit` hook (such as
//! `tracing_access_log`) does not need the record in the response:
//! [`record_in_response(false)`](crate::server::SharedHeadersLayer::record_in_response) leaves
//! it out, and with it the response's extension map: 7 with the copy (the floor of that shape,
//! `floor_request_only`, is 6).
//!
//! With the per-thread read cache of `Locked` handles (same bench): the layer's own allocations are unchanged (10; 7
//! without the copy or with `record_in_response(false)`; 17 with one response write, 15 with
//! one annotation), own bytes 2,032 (the read cache's two words per handle); the lean layer of
//! the same shape (`benches/floor/lean.rs`, below) 9 and 1,680.
//!
//! Per core operation (same bench): `SharedHeaders::new()` 1 allocation (88 bytes; previous 2),
//! `From<HeaderMap>` of 8 headers 2; `get`, `snapshot` and `seal` 0; `insert` replacing a value
//! on 8 headers 2 (896 bytes); new + `get` + 2 `insert`s + drop 8.
//!
//! # The server layer against a lean layer of the same shape
//!
//! `benches/floor/lean.rs` is the floor plus what the layer's contract requires, each in its
//! cheapest form: the copy's secret values flagged, the request line and start time kept, a
//! deadline on one process-wide timer thread (a locked heap of weak references, notified only
//! for an earlier deadline), the deadline in scope around the call and each poll, the inner
//! future's panic caught, commit-once by one atomic word with the record (outcome, status,
//! latency: a second clock read) in a once-cell, the committed response headers merged. It has
//! no per-handle versions or snapshots, no hooks, limits, annotations, late-writes report or
//! re-entrancy checks. Instructions per request, [the run](super::performance#the-run); allocations from
//! `cargo bench --features full --bench alloc`:
//!
//! | | instructions | / tower-http | / lean | own allocations |
//! |---|---:|---:|---:|---:|
//! | tower-http `TimeoutLayer` | 2,529 | 1.00x | | 0 |
//! | floor | 4,675 | 1.85x | | 9 |
//! | lean | 5,620 | 2.22x | 1.00x | 9 |
//! | `layer_timeout` | **8,428** | 3.33x | **1.50x** | 10 |
//! | `layer_timeout_hook_no_record` | 7,743 | 3.06x | | 7 |
//! | `layer_timeout_copy_none` | 6,826 | 2.70x | | 7 |
//! | `layer_timeout_write` (one response header) | 10,982 | 4.34x | | 17 |
//!
//! Wall clock, `layer/per_request/{tower_http_timeout,floor,lean,shared_headers_timeout}`
//! (`cargo bench --features full --bench layer -- --warm-up-time 0.5 --measurement-time 2`,
//! 3 rounds, load about 1, on an earlier build, before the read cache): tower-http 850, 840, 765 ns; floor 1.28, 1.29, 1.20 µs (median of
//! per-round ratios 1.53x); lean 1.69, 1.54, 1.60 µs (1.99x); the layer 2.30, 2.21, 2.29 µs
//! (2.70x; 1.36, 1.43, 1.43 of lean: **1.43x**).
//!
//! Where the layer's instructions over lean went on an earlier build, when they were 1,889
//! (callgrind, inclusive, per request; not re-split on this build): the
//! service's `call` 2,757 against lean's 1,921 (the exchange with two handles, each a published
//! cell and a writer lock, the request's first version in an allocation of its own, four moves
//! of the 544-byte exchange while it is built); the response future's `poll` 2,358 against
//! 1,602 (the commit: two seals under their writer locks, the commit lock, the annotations'
//! lock, the record's once-cell, 606 in all against lean's compare-and-swap and once-cell; the
//! hook's deferral, which splits the response into parts and rebuilds it); the record's drop
//! 671 against 545. Cut from the layer's path: the gRPC `content-type` lookup for HTTP/1 requests (gRPC
//! runs over HTTP/2 and later; about 140), the exchange's construction inlined (about 55), the
//! refused-writes count at the commit for an exchange without a late-writes report (21). The
//! per-thread read cache for `Locked` handles ([`performance`](super::performance#two-readers-of-one-request-scoped-handle)) added about 40 (one build pair).
//!
//! # The floor of a layer with versioned handles (`lean_versioned`)
//!
//! [The run](super::performance#the-run): tower-http 2,529, floor 4,675, lean 5,620,
//! `lean_versioned` 5,955, `layer_timeout` **8,428** (8,421 with 256 threads in the process):
//! **1.42x its versioned floor**, 3.33x tower-http. The bar of 1.15x its versioned floor
//! (6,848) is not met: the 2,473 over the floor are the layer's hooks, limits, annotations,
//! late-writes report and re-entrancy checks, split (on an earlier build) in
//! [the section above](#the-server-layer-against-a-lean-layer-of-the-same-shape).
//!
//! Lean has no per-handle versions or snapshots, which the layer's contract needs: the request
//! and response headers are each a copy-on-write, versioned, sealable handle, and the record
//! keeps their sealed snapshots, which may outlive the exchange (`Committed::request()` returns
//! a `&Snapshot` that users clone and keep). `benches/floor/versioned.rs` is lean plus the
//! cheapest honest form of that: two cells, each a `parking_lot::RwLock<Arc<Version>>` and a
//! writer mutex; the request's version 0 in its own `Arc` (a snapshot that can outlive the
//! exchange cannot live inside the exchange's allocation without `unsafe`), the response's a
//! clone of one shared empty version; writes refused under the writer lock once the commit
//! word has left "open"; the commit's winner takes each writer lock and keeps each current
//! `Arc` in the once-cell record. No hooks, limits, annotations, late-writes report,
//! re-entrancy checks or read cache. [The run](super::performance#the-run); allocations
//! from `cargo bench --features full --bench alloc`:
//!
//! | | instructions | / tower-http | / lean | / its versioned floor | own allocations |
//! |---|---:|---:|---:|---:|---:|
//! | tower-http `TimeoutLayer` | 2,529 | 1.00x | | | 0 |
//! | floor | 4,675 | 1.85x | | | 9 |
//! | lean | 5,620 | 2.22x | 1.00x | | 9 |
//! | `lean_versioned` | **5,955** | 2.35x | 1.06x | 1.00x | **10** |
//! | `layer_timeout` | 8,428 | 3.33x | 1.50x | **1.42x** | 10 |
//! | `lean_versioned_no_record` (no context in the response) | **5,243** | | | 1.00x | **7** |
//! | `layer_timeout_hook_no_record` (`record_in_response(false)`) | 7,743 | | | **1.48x** | 7 |
//! | `lean_versioned_write` (one response header, `"x-cache"` as a `&str`) | **8,562** | | | 1.00x | 17 |
//! | `layer_timeout_write` | 10,982 | | | **1.28x** | 17 |
//!
//! So these bars for the layer would sit below this floor: 5,700 instructions for the default
//! layer (the floor of versioned handles is 5,955 before any hook, limit or annotation), 7,500
//! with one response write (8,562: the write's key, given as a `&str`, costs about 670 of them
//! to parse, as it does for a plain `HeaderMap::insert`), 9 allocations (10: the request's
//! version 0) and 6 without the record in the response (7). The layer is at the floor's
//! allocations in all four shapes.
//!
//! Wall clock, `layer/per_request/{tower_http_timeout,lean,lean_versioned,shared_headers_timeout}`
//! (`cargo bench --features full --bench layer -- --warm-up-time 0.5 --measurement-time 2`, 4
//! rounds): tower-http 380, 375, 376, 353 ns; lean 809, 748, 821, 715 ns; `lean_versioned`
//! 856, 891, 749, 890 ns; the layer 1.16, 1.14, 1.06, 1.20 µs. Medians of per-round ratios:
//! the layer 3.05x tower-http, 1.48x lean, **1.36x `lean_versioned`**; `lean_versioned` 1.12x
//! lean.
//!
//! The same source builds to counts that differ by up to about 70 instructions from one bench
//! binary to the next (inlining and layout change: `layer_timeout` moved by 67 across a change
//! to the OpenTelemetry span, code this variant never runs, in two runs of other builds), so
//! compare rows of one run only. The breakdowns here come from the same bench binary under
//! callgrind (`valgrind --tool=callgrind <alloc bench> --run <variant> 20000`, read with `callgrind_annotate
//! --inclusive=yes` and `--tree=calling`): the write's key parse is `HdrName::from_static` inside
//! `SharedHeaders::insert` in `--run layer_timeout_write`; the `memcpy` calls are those under the
//! service's `call`. Where `lean_versioned`'s instructions over lean go (differences of runs at
//! 10,000 and 20,000 requests, in that earlier build: 352 in all): the request's version in an
//! allocation of its own, 129 in `malloc` and `free`; the two seals (each writer lock, a read
//! lock, an `Arc` clone) 76; the drop of the context, with the cells' and record's `Arc`s, 82
//! more. The layer's remainder over its versioned floor is what the floor leaves out: hooks
//! and their deferral to the response future, policies and limits, annotations and the
//! late-writes report, re-entrancy checks on every writer lock, the read cache, the waker
//! bookkeeping. Two changes measured this way: committed headers onto a response without
//! headers are cloned in rather than removed and appended one by one (`layer_timeout_write`
//! 10,031 -> 9,927 in one build pair); the deadline is in scope around the inner call by a
//! guard instead of a closure that moves the request once more (one `memcpy` call of the
//! request fewer, 9 -> 8 in the service's `call`; 7,440 -> 7,425 in one build pair, within
//! the build-to-build spread).
//!
//! # The server layer against bare and tower-http
//!
//! Instructions per request (callgrind, [the run](super::performance#the-run)):
//!
//! | | bare | tower-http | floor | floor, copy none | layer | layer, deadline | deadline, copy none | deadline + hook | deadline + 1 write |
//! |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|
//! | instructions | 1,610 | 2,529 | 4,675 | 3,553 | 8,070 | **8,428** | 6,826 | 8,465 | 10,982 |
//! | ratio to tower-http | 0.64x | 1.00x | 1.85x | 1.40x | 3.19x | **3.33x** | 2.70x | 3.35x | 4.34x |
//!
//! What the layer pays for beyond the floor: the hook's view of the response as sent and its
//! deferral to the future, the own-answer header filter, the request line's
//! version/peer/deadline fields, the gRPC check of the `content-type`, the deadline in scope
//! around the call and each poll, the process-wide heap. They were not split by a bench (a
//! one-off build with a plain call in place of the `catch_unwind` around the inner poll
//! measured 15 fewer; no variant in `benches/` reproduces that, so take it as an estimate).
//! Allocations
//! per request are unchanged (`cargo bench --features full --bench alloc`: 12, of which the
//! layer's own 10; bytes 2,832 -> 2,896, the record's larger request line).
//!
//! Without the record in the response (same run): `floor_request_only` (the copy, one `Arc`,
//! the extension in the request only) 3,956 (1.56x); `layer_timeout_hook_no_record` (deadline,
//! `on_commit` hook, `record_in_response(false)`) **7,743 (3.06x)**, 722 fewer than with the record (`layer_timeout_hook`, 8,465).
//!
//! Wall clock, `cargo bench --features full --bench layer -- --warm-up-time 0.5
//! --measurement-time 2`, group `layer/per_request` (5 rounds, median of per-round ratios to
//! `tower_http_timeout`, on an earlier build: compare its rows with each other only):
//!
//! | bench id `layer/per_request/…` | median | ratio to tower-http | per round |
//! |---|---:|---:|---|
//! | `bare` | 314 ns | 0.61x | 0.59, 0.61, 0.61, 0.63, 0.61 |
//! | `tower_http_timeout` | 515 ns | 1.00x | |
//! | `floor` | 763 ns | 1.49x | 1.43, 1.52, 1.52, 1.49, 1.47 |
//! | `floor_request_only` | 721 ns | 1.40x | 1.35, 1.40, 1.43, 1.41, 1.39 |
//! | `floor_copy_none` | 503 ns | 0.97x | 1.00, 0.96, 0.99, 0.97, 0.97 |
//! | `shared_headers` (no deadline) | 1.25 µs | 2.44x | 2.50, 2.51, 2.43, 2.44, 2.42 |
//! | `shared_headers_timeout` | 1.29 µs | **2.50x** | 2.57, 2.55, 2.49, 2.50, 2.49 |
//! | `shared_headers_timeout_copy_none` | 1.02 µs | 1.99x | 1.91, 1.99, 1.99, 2.00, 1.99 |
//! | `shared_headers_timeout_hook` | 1.31 µs | 2.53x | 2.46, 2.51, 2.57, 2.54, 2.53 |
//! | `shared_headers_timeout_hook_no_record` | 1.26 µs | 2.44x | 2.36, 2.46, 2.44, 2.45, 2.44 |
//! | `shared_headers_timeout_one_write` | 1.62 µs | 3.13x | 3.05, 3.13, 3.13, 3.16, 3.20 |
//!
//! This run was quiet (±3% between rounds); it ran on code within 20 instructions per request
//! of the figures above (6,950 then, for `layer_timeout`). An earlier run, on code 19
//! instructions cheaper than that, spread by ±45% (`shared_headers_timeout` 2.55x, one round
//! 3.74x, the next 2.15x); two older runs gave 2.69x and 2.44x, on code within 20 instructions
//! of each other: the spread between runs on this VM is larger than most changes, and the
//! instruction counts above are exact and decide.
//! Over its floor in the same rounds: `shared_headers_timeout` / `floor` 1.68x,
//! `..._hook_no_record` / `floor_request_only` 1.75x, `..._copy_none` / `floor_copy_none` 2.05x.
//!
//! What the layer costs beyond the floor (3,753 instructions, 500-1,000 ns with a deadline) is
//! its own protocol: the request handle's first version, the two seals under their writer
//! locks, the commit (commit lock, the refused-writes count, the record, set once; the request
//! line is kept in the exchange from the start, not moved into the record), the deadline (two
//! clock reads, an entry in the timer thread's queue), the waker, and the clones and drops of
//! the record and the exchange. The floor with the copy is 1.3x to 1.6x tower-http by wall
//! clock and 1.85x by instructions: a layer that copies the request headers and puts one value
//! in each message's extensions cannot be within 1.6x of a timeout that does neither, whatever
//! its own cost. Without the record in the response the floor is 1.56x by instructions (1.40x
//! by wall clock): a layer of that shape within 1.6x of tower-http would have about 70
//! instructions for its whole protocol;
//! without the copy the floor is tower-http's cost by wall clock (0.97x).
//!
//! # The server layer over loopback
//!
//! `cargo run --release --features server --example loopback -- <mode> --seconds 12` (driven by
//! `scripts/loopback-rounds`): a hyper 1
//! HTTP/1.1 hello-world server on 127.0.0.1 (tokio multi-thread runtime, 2 workers), the same
//! handler `bare`, under tower-http's `TimeoutLayer` (`tower_http`), or under
//! `SharedHeadersLayer` with a 30 s deadline (`layer`). Load: wrk 4.1 on the same 2 cores, 8
//! request headers (`-H`, plus wrk's `Host`), 4 s per run; modes interleaved A B C A B C over 3
//! rounds. Requests per second, median over rounds, and the median of the per-round ratio to bare:
//!
//! | wrk | bare | tower-http | layer | tower-http / bare (per round) | layer / bare (per round) |
//! |---|---:|---:|---:|---|---|
//! | `-t1 -c1` | 47,517 | 45,438 | 39,944 | **0.96x** (0.90, 0.98, 0.96) | **0.83x** (0.83, 0.92, 0.78) |
//! | `-t2 -c16` | 127,593 | 134,884 | 124,796 | **1.06x** (1.10, 0.88, 1.06) | **1.00x** (1.00, 0.75, 1.01) |
//! | `-t1 -c1`, an earlier run | 39,725 | 36,450 | 34,856 | 0.95x (0.97, 0.88, 0.95) | 0.90x (0.90, 0.84, 0.94) |
//! | `-t2 -c16`, an earlier run | 109,114 | 103,722 | 91,132 | 0.98x (0.98, 0.95, 0.99) | 0.88x (0.88, 0.84, 0.89) |
//! | an older run, `-t1 -c1` / `-t2 -c16` | | | | 0.98x / 0.93x | 0.90x / 0.82x |
//!
//! `ROUNDS=3 SECS=4 scripts/loopback-rounds` (the three modes interleaved, 3 rounds of 4 s;
//! earlier, 5 rounds of 5 s: layer / bare 0.86x at `-t1 -c1`, 1.00x at `-t2 -c16`). The
//! per-round ratios spread by ±10-30% (the load generator, the server and other processes
//! share 2 cores): on that VM the layer's 1.2 µs is barely resolvable against a round trip of
//! 25-30 µs (one connection): the same code gave 0.88x and then 1.00x at `-t2 -c16` within the
//! hour. By instructions the layer with its deadline adds 6,818 instructions per request to
//! bare, tower-http 919 ([the run](super::performance#the-run)).
//!
//! # The server layer: the cost of the deadline
//!
//! **The deadline** is one entry pushed on the layer's FIFO under an uncontended lock, read by
//! the layer's deadline thread ([`internals`](super::internals#the-deadline-thread)); the
//! entry lives in a buffer reused across requests, so it adds no allocation per request in the
//! `alloc` table above (the buffer's occasional growth aside) and no Tokio timer. In time it
//! does not show above the noise: `layer/per_request/shared_headers_timeout` 1.29 µs against
//! `shared_headers` 1.25 µs in the table above (2.50x against 2.44x of tower-http as medians of
//! per-round ratios; `cargo bench --features full --bench layer`), and by instructions 8,428
//! against 8,070 (+358, `layer_timeout` and `layer` in [the run](super::performance#the-run)).
//! It is therefore the default behaviour of `timeout`, not an option. An
//! `on_commit` hook adds no allocation and 37 instructions (`layer_timeout_hook`).
