//! Heap allocations per request and per core operation, counted exactly by a counting global
//! allocator ([`stats_alloc`]): cheap and deterministic, no timing.
//!
//! ```text
//! cargo bench --features full --bench alloc
//! ```
//!
//! Prints a Markdown table. Per request, 8 request headers, the same trivial `service_fn` in
//! each row, driven by a current-thread runtime: bare, under tower-http's `TimeoutLayer`, under
//! the floor of any commit-once layer over `http`'s types (`benches/floor`: the copy, one shared
//! allocation, one extension in each message), and under `SharedHeadersLayer` (without and with
//! a deadline, with a handler that writes one response header through the exchange, and with one
//! that writes one annotation). A request row counts everything from building the
//! request (a clone of the 8 headers into it) to dropping the response; "own" is the row minus
//! the bare row. Each row is the average over [`REQUESTS`] requests after [`WARM_UP`] unmeasured
//! ones (so one-time costs such as arc-swap registering the thread are left out); counts are
//! whole numbers when the cost per request is fixed.
//!
//! With `-- --run <variant> <count> [--threads N]` it only runs `count` iterations of one variant
//! and exits, for instruction counts under callgrind (run it with two counts and divide the
//! difference of the totals): the request variants (`bare`, `tower_http`, `floor`,
//! `floor_request_only`, `floor_copy_none`, `lean`, `lean_versioned`, `lean_versioned_no_record`, `lean_versioned_write`,
//! `layer`, `layer_timeout`, `layer_timeout_admission`, `layer_timeout_admission_limit`,
//! `layer_timeout_write`,
//! `layer_timeout_annotate`, `layer_timeout_hook`, `layer_timeout_hook_no_record`, `layer_timeout_copy_none`,
//! `layer_timeout_id`, `layer_timeout_traced`, `layer_timeout_context`), the client
//! room's `client_defaults` (a request through `DefaultHeaders`), `client_defaults_clone`
//! (through a clone of it per request), `client_deadline_none` (a request without a deadline
//! or a context through `PropagateLayer`), `client_context` (the same layer with a deadline and
//! a request id and W3C trace context in scope) and `client_bare`, and the
//! `threads` bench's core patterns (`insert`:
//! one `insert` on a handle of 8 headers; `raw`: new handle, `get`, two `insert`s, drop) and the
//! `shared` bench's subjects, `<op>:<headers>` with `<op>` one of `insert_shared`,
//! `insert_locked`, `insert_clone` (`write/insert/<n>/{shared,shared_locked,clone_insert}`),
//! `insert_floor` and `insert_floor_locked` (the lean floor of a copy-on-write insert, with
//! arc-swap's `swap` or a `parking_lot::RwLock` pointer swap: see `run_only`), `get_shared`,
//! `get_reader`, `get_plain_clone`, `get_plain` (`read/get/<n>/{shared_get,plain_clone,plain}`),
//! and `get_locked`, `read_shared`, `read_locked` (one `get`, or one `read(|m| m.get(..))`, on a
//! `LockFree` or a `Locked` handle: the `read_scaling` bench's reads, one thread).
//! The run mode also prints the allocations and bytes allocated over the whole run on
//! standard error (two counts' difference is per iteration).
//! `--threads N` first parks N - 1 helper threads that have read a handle, as the `threads` bench
//! does (callgrind runs one thread at a time, so the parked ones cost nothing but their debt
//! nodes). `scripts/callgrind-per-op` does the runs and the division.
//!
//! ```text
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/deps/alloc-<hash> \
//!     --run layer_timeout 20000 --threads 64
//! ```

mod common;
mod floor;

use std::alloc::System;
use std::convert::Infallible;
use std::future::Future;
use std::hint::black_box;
use std::time::Duration;

use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use shared_headers::SharedHeaders;
use shared_headers::server::{Admission, HeaderSelection, SharedHeadersLayer};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use tower::{Layer, Service, ServiceExt, service_fn};

use common::{
    KEY, ParkedReaders, WRITE_KEYS, bare, request_headers, with_annotation, with_exchange,
    write_base,
};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const HEADERS: usize = 8;
const DEADLINE: Duration = Duration::from_secs(30);
const WARM_UP: u64 = 100;
const REQUESTS: u64 = 1_000;
const OPS: u64 = 1_000;

/// Heap traffic of some number of calls.
#[derive(Clone, Copy, Default)]
struct Count {
    /// `alloc` plus `realloc` calls.
    allocations: usize,
    /// `dealloc` calls.
    frees: usize,
    bytes: usize,
    calls: u64,
}

impl Count {
    fn per_call(&self) -> (f64, f64) {
        let calls = self.calls as f64;
        (self.allocations as f64 / calls, self.bytes as f64 / calls)
    }

    fn frees_per_call(&self) -> f64 {
        self.frees as f64 / self.calls as f64
    }
}

/// Counts the heap traffic of `f`, with no other thread running.
fn count(calls: u64, f: impl FnOnce()) -> Count {
    let region = Region::new(GLOBAL);
    f();
    let change = region.change();
    Count {
        allocations: change.allocations + change.reallocations,
        frees: change.deallocations,
        bytes: change.bytes_allocated,
        calls,
    }
}

/// Runs `n` requests through `service`, each from a fresh request with a copy of `headers`.
async fn requests<S, B>(service: &mut S, headers: &HeaderMap, n: u64)
where
    S: Service<Request<()>, Response = Response<B>, Error = Infallible>,
{
    for _ in 0..n {
        let mut req = Request::new(());
        *req.headers_mut() = headers.clone();
        let res = service.ready().await.unwrap().call(req).await.unwrap();
        drop(black_box(res));
    }
}

/// A boxed request variant, so that the table and the callgrind mode share one list.
type Variant = Box<
    dyn FnMut(
        &tokio::runtime::Runtime,
        &HeaderMap,
        u64,
        &mut dyn FnMut(&mut dyn FnMut()) -> Count,
    ) -> Count,
>;

fn variant<S, B>(mut service: S) -> Variant
where
    S: Service<Request<()>, Response = Response<B>, Error = Infallible> + 'static,
    B: 'static,
{
    Box::new(move |runtime, headers, n, measure| {
        runtime.block_on(requests(&mut service, headers, WARM_UP));
        measure(&mut || runtime.block_on(requests(&mut service, headers, n)))
    })
}

/// A request id and W3C trace context, as an edge's request carries them.
const TRACE_HEADERS: &[(&str, &str)] = &[
    ("x-request-id", "4bf92f3577b34da6a3ce929d0e0e4736"),
    (
        "traceparent",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    ),
    ("tracestate", "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"),
];

/// As [`variant`], with [`TRACE_HEADERS`] added to each request (the context rows, and their
/// baseline without `propagate`).
fn variant_traced<S, B>(service: S) -> Variant
where
    S: Service<Request<()>, Response = Response<B>, Error = Infallible> + 'static,
    B: 'static,
{
    let mut inner = variant(service);
    Box::new(move |runtime, headers, n, measure| {
        let mut headers = headers.clone();
        for (name, value) in TRACE_HEADERS {
            headers.insert(*name, HeaderValue::from_static(value));
        }
        drop(black_box(headers.clone()));
        inner(runtime, &headers, n, measure)
    })
}

fn variants() -> Vec<(&'static str, &'static str, Variant)> {
    let tower_http = tower_http::timeout::TimeoutLayer::with_status_code(
        StatusCode::SERVICE_UNAVAILABLE,
        DEADLINE,
    );
    vec![
        ("bare", "bare `service_fn`", variant(service_fn(bare))),
        (
            "tower_http",
            "tower-http `TimeoutLayer`",
            variant(tower_http.layer(service_fn(bare))),
        ),
        (
            "floor",
            "floor: copy + `Arc` + one extension each way (`benches/floor`)",
            variant(floor::Floor::<true> { copy: true }.layer(service_fn(bare))),
        ),
        (
            "floor_request_only",
            "floor with the copy, the extension in the request only",
            variant(floor::Floor::<false> { copy: true }.layer(service_fn(bare))),
        ),
        (
            "floor_copy_none",
            "floor without the copy",
            variant(floor::Floor::<true> { copy: false }.layer(service_fn(bare))),
        ),
        (
            "lean",
            "lean layer of the same shape: floor + deadline timer, scope, panic catch, commit word (`benches/floor/lean.rs`)",
            variant(floor::lean::Lean { timeout: DEADLINE }.layer(service_fn(bare))),
        ),
        (
            "lean_versioned",
            "lean + versioned copy-on-write request and response cells, sealed at the commit (`benches/floor/versioned.rs`)",
            variant(
                floor::versioned::LeanVersioned {
                    timeout: DEADLINE,
                    record_in_response: true,
                }
                .layer(service_fn(bare)),
            ),
        ),
        (
            "lean_versioned_no_record",
            "lean + versioned cells, the context not in the response (as `record_in_response(false)`)",
            variant(
                floor::versioned::LeanVersioned {
                    timeout: DEADLINE,
                    record_in_response: false,
                }
                .layer(service_fn(bare)),
            ),
        ),
        (
            "lean_versioned_write",
            "lean + versioned cells, handler writes 1 response header",
            variant(
                floor::versioned::LeanVersioned {
                    timeout: DEADLINE,
                    record_in_response: true,
                }
                .layer(service_fn(floor::versioned::with_ctx)),
            ),
        ),
        (
            "layer",
            "`SharedHeadersLayer`, no deadline",
            variant(SharedHeadersLayer::new().layer(service_fn(bare))),
        ),
        (
            "layer_timeout",
            "`SharedHeadersLayer` with a deadline",
            variant(
                SharedHeadersLayer::new()
                    .timeout(DEADLINE)
                    .layer(service_fn(bare)),
            ),
        ),
        (
            "layer_timeout_admission",
            "`SharedHeadersLayer` with a deadline and `Admission::new()` (warm route, admitted)",
            variant(
                SharedHeadersLayer::new()
                    .timeout(DEADLINE)
                    .admission(Admission::new())
                    .layer(service_fn(bare)),
            ),
        ),
        (
            "layer_timeout_admission_limit",
            "the same with `Admission::limit(64)` (a permit taken and given back, nobody waits)",
            variant(
                SharedHeadersLayer::new()
                    .timeout(DEADLINE)
                    .admission(Admission::new().limit(std::num::NonZeroUsize::new(64).unwrap()))
                    .layer(service_fn(bare)),
            ),
        ),
        (
            "layer_timeout_write",
            "`SharedHeadersLayer` with a deadline, handler writes 1 response header",
            variant(
                SharedHeadersLayer::new()
                    .timeout(DEADLINE)
                    .layer(service_fn(with_exchange)),
            ),
        ),
        (
            "layer_timeout_annotate",
            "`SharedHeadersLayer` with a deadline, handler writes 1 annotation",
            variant(
                SharedHeadersLayer::new()
                    .timeout(DEADLINE)
                    .layer(service_fn(with_annotation)),
            ),
        ),
        (
            "layer_timeout_hook",
            "`SharedHeadersLayer` with a deadline and an `on_commit` hook",
            variant(
                SharedHeadersLayer::new()
                    .timeout(DEADLINE)
                    .on_commit(|c| {
                        black_box(c.committed().outcome());
                    })
                    .layer(service_fn(bare)),
            ),
        ),
        (
            "layer_timeout_hook_no_record",
            "`SharedHeadersLayer` with a deadline, an `on_commit` hook, `record_in_response(false)`",
            variant(
                SharedHeadersLayer::new()
                    .timeout(DEADLINE)
                    .on_commit(|c| {
                        black_box(c.committed().outcome());
                    })
                    .record_in_response(false)
                    .layer(service_fn(bare)),
            ),
        ),
        (
            "layer_timeout_traced",
            "`SharedHeadersLayer` with a deadline, 3 more request headers (an id, `traceparent`, `tracestate`), nothing propagated",
            variant_traced(
                SharedHeadersLayer::new()
                    .timeout(DEADLINE)
                    .layer(service_fn(bare)),
            ),
        ),
        (
            "layer_timeout_context",
            "the same, `propagate(Propagation::new().request_id().w3c())`: the id taken, the trace context captured, in scope, on the response",
            variant_traced(
                SharedHeadersLayer::new()
                    .timeout(DEADLINE)
                    .propagate(
                        shared_headers::context::Propagation::new()
                            .request_id()
                            .w3c(),
                    )
                    .layer(service_fn(bare)),
            ),
        ),
        (
            "layer_timeout_id",
            "`layer_timeout`'s requests (no id), `propagate(Propagation::new().request_id())`: an id generated, in scope, on the response",
            variant(
                SharedHeadersLayer::new()
                    .timeout(DEADLINE)
                    .propagate(shared_headers::context::Propagation::new().request_id())
                    .layer(service_fn(bare)),
            ),
        ),
        (
            "layer_timeout_copy_none",
            "`SharedHeadersLayer` with a deadline, `HeaderSelection::none()`",
            variant(
                SharedHeadersLayer::new()
                    .timeout(DEADLINE)
                    .copy_request_headers(HeaderSelection::none())
                    .layer(service_fn(bare)),
            ),
        ),
    ]
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

fn fmt_count(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.3}")
    }
}

fn per_request_table() {
    let runtime = runtime();
    let headers = request_headers(HEADERS);
    // Promote the template's values to shared buffers (their first clone allocates) once.
    drop(black_box(headers.clone()));

    let build = count(REQUESTS, || {
        for _ in 0..REQUESTS {
            let mut req = Request::new(());
            *req.headers_mut() = headers.clone();
            drop(black_box(req));
        }
    });

    let mut rows = Vec::new();
    for (_, name, mut run) in variants() {
        let counted = run(&runtime, &headers, REQUESTS, &mut |f| count(REQUESTS, f));
        rows.push((name, counted));
    }
    let (bare_allocs, bare_bytes) = rows[0].1.per_call();

    println!("\nHeap allocations per request ({HEADERS} request headers, alloc + realloc):\n");
    println!("| per request | allocations | own (minus bare) | bytes | own bytes |");
    println!("|---|---:|---:|---:|---:|");
    let (allocs, bytes) = build.per_call();
    println!(
        "| building the request only (clone of {HEADERS} headers) | {} | | {} | |",
        fmt_count(allocs),
        fmt_count(bytes)
    );
    for (name, counted) in &rows {
        let (allocs, bytes) = counted.per_call();
        println!(
            "| {name} | {} | {} | {} | {} |",
            fmt_count(allocs),
            fmt_count(allocs - bare_allocs),
            fmt_count(bytes),
            fmt_count(bytes - bare_bytes),
        );
    }
}

fn core_ops_table() {
    let value = HeaderValue::from_static("written");
    let key = &WRITE_KEYS[0];
    let mut rows: Vec<(String, Count)> = Vec::new();

    // Warm: the thread's first load registers it with arc-swap.
    black_box(SharedHeaders::new().get(&KEY));

    let handles: Vec<SharedHeaders> = Vec::with_capacity(OPS as usize);
    let mut handles = Some(handles);
    rows.push((
        "`SharedHeaders::new()`".into(),
        count(OPS, || {
            let handles = handles.as_mut().unwrap();
            for _ in 0..OPS {
                handles.push(SharedHeaders::new());
            }
        }),
    ));
    let handles = handles.take().unwrap();
    rows.push((
        "drop of a `SharedHeaders::new()` handle".into(),
        count(OPS, || drop(handles)),
    ));

    let maps: Vec<HeaderMap> = (0..OPS).map(|_| request_headers(HEADERS)).collect();
    let mut from = Vec::with_capacity(OPS as usize);
    rows.push((
        format!("`SharedHeaders::from(map of {HEADERS})`"),
        count(OPS, || {
            from.extend(maps.into_iter().map(SharedHeaders::from))
        }),
    ));
    drop(from);

    // A handle of 8 headers, the written key already among them, warmed by one write.
    let mut base = request_headers(HEADERS - 1);
    base.insert(key.clone(), HeaderValue::from_static("initial"));
    let shared = SharedHeaders::from(base);
    shared.insert(key.clone(), value.clone()).unwrap();
    black_box(shared.get(&KEY));

    rows.push((
        format!("`get` ({HEADERS} headers)"),
        count(OPS, || {
            for _ in 0..OPS {
                black_box(shared.get(&KEY));
            }
        }),
    ));
    rows.push((
        format!("`snapshot` ({HEADERS} headers, dropped)"),
        count(OPS, || {
            for _ in 0..OPS {
                black_box(shared.snapshot());
            }
        }),
    ));
    rows.push((
        format!("`insert`, replacing a value ({HEADERS} headers)"),
        count(OPS, || {
            for _ in 0..OPS {
                black_box(shared.insert(key.clone(), value.clone()).unwrap());
            }
        }),
    ));

    // `seal` once per handle: on fresh copies of the written handle's map.
    let sealable: Vec<SharedHeaders> = (0..OPS)
        .map(|_| SharedHeaders::from(shared.snapshot().into_header_map()))
        .collect();
    for handle in &sealable {
        black_box(handle.get(&KEY));
    }
    rows.push((
        format!("`seal` ({HEADERS} headers, snapshot dropped)"),
        count(OPS, || {
            for handle in &sealable {
                black_box(handle.seal().unwrap());
            }
        }),
    ));
    drop(sealable);

    let (first, second) = (&WRITE_KEYS[0], &WRITE_KEYS[1]);
    rows.push((
        "new + `get` + 2 `insert`s + drop (the request-scoped pattern)".into(),
        count(OPS, || {
            for _ in 0..OPS {
                let headers = SharedHeaders::new();
                black_box(headers.get(&KEY));
                headers.insert(first.clone(), value.clone()).unwrap();
                headers.insert(second.clone(), value.clone()).unwrap();
                drop(black_box(headers));
            }
        }),
    ));

    println!("\nHeap allocations per core operation (alloc + realloc; frees: dealloc):\n");
    println!("| operation | allocations | bytes | frees |");
    println!("|---|---:|---:|---:|");
    for (name, counted) in &rows {
        let (allocs, bytes) = counted.per_call();
        println!(
            "| {name} | {} | {} | {} |",
            fmt_count(allocs),
            fmt_count(bytes),
            fmt_count(counted.frees_per_call())
        );
    }
}

/// `--run <variant> <count>`: the iterations only, for callgrind.
fn run_only(name: &str, n: u64) {
    let value = HeaderValue::from_static("written");
    let (first, second) = (&WRITE_KEYS[0], &WRITE_KEYS[1]);
    // `<op>:<headers>`: the `shared` bench's `write/insert/<n>/…` and `read/get/<n>/…` subjects.
    if let Some((op, n_headers)) = name.split_once(':') {
        let size: usize = n_headers.parse().expect("<op>:<headers>");
        let base = write_base(size);
        let shared = SharedHeaders::from(base.clone());
        black_box(shared.get(&KEY));
        let locked = SharedHeaders::builder()
            .publication(shared_headers::Publication::Locked)
            .build_from(base.clone())
            .unwrap();
        let mut reader = shared.reader();
        // The lean floor of a copy-on-write insert (`insert_floor`, `insert_floor_locked`): a
        // writer mutex, the copy, the insert, one new `Arc`, the publication (arc-swap's
        // `swap`, or a pointer swap under a `parking_lot::RwLock`), the old version dropped.
        // No seal, limits, secret flagging, re-entrancy check, version or allocation reuse.
        let floor_writer = parking_lot::Mutex::new(());
        let floor_swap = arc_swap::ArcSwap::from_pointee(base.clone());
        let floor_locked = parking_lot::RwLock::new(std::sync::Arc::new(base.clone()));
        for _ in 0..n {
            match op {
                "insert_shared" => drop(black_box(
                    black_box(&shared).insert(first.clone(), value.clone()),
                )),
                "insert_clone" => {
                    let mut map = black_box(&base).clone();
                    map.insert(first.clone(), value.clone());
                    drop(black_box(map));
                }
                "insert_floor" => {
                    let guard = black_box(&floor_writer).lock();
                    let mut map = HeaderMap::clone(&floor_swap.load());
                    map.insert(first.clone(), value.clone());
                    let old = floor_swap.swap(std::sync::Arc::new(map));
                    drop(guard);
                    drop(black_box(old));
                }
                "insert_floor_locked" => {
                    let guard = black_box(&floor_writer).lock();
                    let mut map = HeaderMap::clone(&floor_locked.read());
                    map.insert(first.clone(), value.clone());
                    let old =
                        std::mem::replace(&mut *floor_locked.write(), std::sync::Arc::new(map));
                    drop(guard);
                    drop(black_box(old));
                }
                "insert_locked" => drop(black_box(
                    black_box(&locked).insert(first.clone(), value.clone()),
                )),
                "get_shared" => drop(black_box(black_box(&shared).get(&KEY))),
                "get_locked" => drop(black_box(black_box(&locked).get(&KEY))),
                "read_shared" => {
                    black_box(black_box(&shared).read(|m| m.get(&KEY).map(HeaderValue::len)));
                }
                "read_locked" => {
                    black_box(black_box(&locked).read(|m| m.get(&KEY).map(HeaderValue::len)));
                }
                "get_reader" => drop(black_box(black_box(&mut reader).get(&KEY))),
                "get_plain_clone" => drop(black_box(black_box(&base).get(&KEY).cloned())),
                "get_plain" => drop(black_box(black_box(&base).get(&KEY).map(HeaderValue::len))),
                _ => panic!("unknown op {op:?}"),
            }
        }
        return;
    }
    match name {
        "insert" => {
            let mut base = request_headers(HEADERS - 1);
            base.insert(first.clone(), HeaderValue::from_static("initial"));
            let shared = SharedHeaders::from(base);
            for _ in 0..n {
                black_box(shared.insert(first.clone(), value.clone()).unwrap());
            }
        }
        // The client room's per-request read of long-lived defaults: `DefaultHeaders` over a
        // service that answers at once, 4 default headers, a request with 1 of its own (as
        // `benches/client.rs`), on one service or on a clone per request
        // (`client_defaults_clone`); `client_bare` is the same request without the layer.
        "client_defaults" | "client_defaults_clone" | "client_bare" => {
            use shared_headers::client::{DefaultHeadersLayer, Merge};
            // Built from a map, not by `insert`s: another instantiation of `insert` in this
            // binary changes how the `insert_*` variants are inlined (by about 70 instructions).
            let mut map = HeaderMap::new();
            map.insert(
                http::header::AUTHORIZATION,
                HeaderValue::from_static("Bearer tok-1"),
            );
            map.insert(
                http::header::USER_AGENT,
                HeaderValue::from_static("bench-sdk/1.0"),
            );
            map.insert(
                http::header::ACCEPT,
                HeaderValue::from_static("application/json"),
            );
            map.insert("x-token-gen", HeaderValue::from_static("1"));
            let defaults = SharedHeaders::from(map);
            let answer = service_fn(|req: Request<()>| {
                black_box(&req);
                std::future::ready(Ok::<_, Infallible>(Response::new(())))
            });
            let mut layered = DefaultHeadersLayer::new(defaults.clone())
                .merge(http::header::AUTHORIZATION, Merge::Override)
                .layer(answer);
            let mut bare = answer;
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            for _ in 0..n {
                let mut req = Request::new(());
                req.headers_mut()
                    .insert("x-request-id", HeaderValue::from_static("42"));
                let response = if name == "client_bare" {
                    std::pin::pin!(bare.call(req))
                        .poll(&mut cx)
                        .map(|r| r.unwrap())
                } else if name == "client_defaults_clone" {
                    // A clone per request, as `RefreshRetry` and `oneshot` on a clone do.
                    let mut clone = layered.clone();
                    std::pin::pin!(clone.call(req))
                        .poll(&mut cx)
                        .map(|r| r.unwrap())
                } else {
                    std::pin::pin!(layered.call(req))
                        .poll(&mut cx)
                        .map(|r| r.unwrap())
                };
                drop(black_box(response));
            }
        }
        // The connection-health path on a healthy connection: a real hyper-util client over h2c
        // on loopback (current-thread runtime, one connection), each request sent and its
        // body read. `conn_hyper_stock`: the defaults; `conn_hyper_ping`: the same with the
        // keep-alive ping and timer `HealthConnector::client_builder` sets; `conn_hyper_crate`:
        // that builder, `HealthConnector` and `ConnRetryLayer`; `conn_hyper_health`: the same
        // without `ConnRetryLayer`. `conn_hyper_health_noping` and `conn_hyper_crate_noping`: the
        // same two without the ping (no timer runs, so the count does not depend on how fast the
        // machine is under callgrind): `ConnRetryLayer`'s own cost, measured exactly. With
        // `_headers`, each request has two headers built from strings.
        #[cfg(feature = "hyper-util")]
        "conn_hyper_stock"
        | "conn_hyper_ping"
        | "conn_hyper_health"
        | "conn_hyper_crate"
        | "conn_hyper_health_noping"
        | "conn_hyper_crate_noping" => conn_hyper(name, n, false),
        // The two `_noping` variants with two request headers built from strings (a request id
        // and a budget, as `PropagateLayer` writes them): the kept head's copy of them.
        #[cfg(feature = "hyper-util")]
        "conn_hyper_health_noping_headers" | "conn_hyper_crate_noping_headers" => {
            conn_hyper(name.trim_end_matches("_headers"), n, true)
        }
        // The client room's propagate layer on a request made without a deadline or a context (none in the
        // request's extensions, none in scope), against `client_bare`, the same request and
        // service without the layer.
        "client_deadline_none" => {
            use shared_headers::client::PropagateLayer;
            use shared_headers::deadline::BudgetHeader;
            let answer = service_fn(|req: Request<()>| {
                black_box(&req);
                std::future::ready(Ok::<_, Infallible>(Response::new(())))
            });
            let mut layered = PropagateLayer::new(BudgetHeader::grpc_timeout()).layer(answer);
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            for _ in 0..n {
                let mut req = Request::new(());
                req.headers_mut()
                    .insert("x-request-id", HeaderValue::from_static("42"));
                let response = std::pin::pin!(layered.call(req))
                    .poll(&mut cx)
                    .map(|r| r.unwrap());
                drop(black_box(response));
            }
        }
        // The same layer on a request made in a request's scope: a deadline and a context (a
        // request id and W3C trace context, captured by `Propagation` as the server layer does)
        // entered around the loop, so each request gets `grpc-timeout`, the id, `traceparent`
        // and `tracestate`. Against `client_deadline_none`: what sending the context costs.
        "client_context" => {
            use shared_headers::client::PropagateLayer;
            use shared_headers::context::{Propagation, RequestScope};
            use shared_headers::deadline::{BudgetHeader, Deadline, DeadlineSource};
            let answer = service_fn(|req: Request<()>| {
                black_box(&req);
                std::future::ready(Ok::<_, Infallible>(Response::new(())))
            });
            let mut layered = PropagateLayer::new(BudgetHeader::grpc_timeout()).layer(answer);
            let mut incoming = HeaderMap::new();
            incoming.insert(
                "x-request-id",
                HeaderValue::from_static("4bf92f3577b34da6a3ce929d0e0e4736"),
            );
            incoming.insert(
                "traceparent",
                HeaderValue::from_static("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
            );
            incoming.insert("tracestate", HeaderValue::from_static("congo=t61rcWkgMzE"));
            let (context, _) = Propagation::new().request_id().w3c().capture(&incoming);
            let context = context.expect("the id and trace context are valid");
            let deadline = Deadline::after(Duration::from_secs(3600), DeadlineSource::Caller)
                .expect("an hour from now is representable");
            // The cut (half the margin before the deadline) is a tokio timer.
            let runtime = runtime();
            let _runtime = runtime.enter();
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            let scope = RequestScope::new().deadline(deadline).context(context);
            scope.enter(|| {
                for _ in 0..n {
                    let mut req = Request::new(());
                    req.headers_mut()
                        .insert("x-call", HeaderValue::from_static("42"));
                    let response = std::pin::pin!(layered.call(req))
                        .poll(&mut cx)
                        .map(|r| r.unwrap());
                    drop(black_box(response));
                }
            });
        }
        "raw_locked" => {
            for _ in 0..n {
                let headers = SharedHeaders::builder()
                    .publication(shared_headers::Publication::Locked)
                    .build();
                black_box(headers.get(&KEY));
                headers.insert(first.clone(), value.clone()).unwrap();
                headers.insert(second.clone(), value.clone()).unwrap();
                drop(black_box(headers));
            }
        }
        "raw" => {
            for _ in 0..n {
                let headers = SharedHeaders::new();
                black_box(headers.get(&KEY));
                headers.insert(first.clone(), value.clone()).unwrap();
                headers.insert(second.clone(), value.clone()).unwrap();
                drop(black_box(headers));
            }
        }
        _ => {
            let runtime = runtime();
            let headers = request_headers(HEADERS);
            drop(black_box(headers.clone()));
            let (_, _, mut run) = variants()
                .into_iter()
                .find(|(id, _, _)| *id == name)
                .unwrap_or_else(|| panic!("unknown variant {name:?}"));
            run(&runtime, &headers, n, &mut |f| {
                f();
                Count::default()
            });
        }
    }
}

/// See the `conn_hyper_*` variants.
#[cfg(feature = "hyper-util")]
fn conn_hyper(name: &str, n: u64, headers: bool) {
    use http_body_util::{BodyExt, Empty};
    use hyper::body::Bytes;
    use hyper_util::client::legacy::Client;
    use hyper_util::client::legacy::connect::HttpConnector;
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    use shared_headers::client::ConnRetryLayer;
    use shared_headers::conn::HealthConnector;

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let ok = hyper::service::service_fn(|_req| async {
                    Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
                });
                tokio::spawn(
                    hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), ok),
                );
            }
        });
        let uri: http::Uri = format!("http://{addr}/").parse().unwrap();
        let request = || {
            let mut request = Request::get(uri.clone());
            if headers {
                request = request
                    .header("x-request-id", "abc")
                    .header("grpc-timeout", "900m");
            }
            request.body(Empty::<Bytes>::new()).unwrap()
        };
        match name {
            "conn_hyper_crate" => {
                let client = ConnRetryLayer::new().layer(
                    HealthConnector::client_builder(TokioExecutor::new())
                        .http2_only(true)
                        .build::<_, Empty<Bytes>>(HealthConnector::new(HttpConnector::new())),
                );
                for _ in 0..n {
                    let response = client.clone().oneshot(request()).await.unwrap();
                    black_box(response.into_body().collect().await.unwrap());
                }
            }
            "conn_hyper_crate_noping" => {
                let mut builder = Client::builder(TokioExecutor::new());
                builder.http2_only(true);
                let client = ConnRetryLayer::new().layer(
                    builder.build::<_, Empty<Bytes>>(HealthConnector::new(HttpConnector::new())),
                );
                for _ in 0..n {
                    let response = client.clone().oneshot(request()).await.unwrap();
                    black_box(response.into_body().collect().await.unwrap());
                }
            }
            "conn_hyper_health_noping" => {
                let mut builder = Client::builder(TokioExecutor::new());
                builder.http2_only(true);
                let client =
                    builder.build::<_, Empty<Bytes>>(HealthConnector::new(HttpConnector::new()));
                for _ in 0..n {
                    let response = client.clone().oneshot(request()).await.unwrap();
                    black_box(response.into_body().collect().await.unwrap());
                }
            }
            "conn_hyper_health" => {
                let client = HealthConnector::client_builder(TokioExecutor::new())
                    .http2_only(true)
                    .build::<_, Empty<Bytes>>(HealthConnector::new(HttpConnector::new()));
                for _ in 0..n {
                    let response = client.clone().oneshot(request()).await.unwrap();
                    black_box(response.into_body().collect().await.unwrap());
                }
            }
            _ => {
                let mut builder = Client::builder(TokioExecutor::new());
                builder.http2_only(true);
                if name == "conn_hyper_ping" {
                    builder
                        .timer(TokioTimer::new())
                        .pool_timer(TokioTimer::new())
                        .http2_keep_alive_interval(HealthConnector::PING_AFTER)
                        .http2_keep_alive_timeout(HealthConnector::PING_TIMEOUT)
                        .http2_keep_alive_while_idle(false);
                }
                let client = builder.build_http::<Empty<Bytes>>();
                for _ in 0..n {
                    let response = client.clone().oneshot(request()).await.unwrap();
                    black_box(response.into_body().collect().await.unwrap());
                }
            }
        }
    });
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|arg| arg == "--run") {
        let usage = "--run <variant> <count> [--threads N]";
        let name = args.get(at + 1).expect(usage);
        let n = args.get(at + 2).and_then(|n| n.parse().ok()).expect(usage);
        let threads = match args.iter().position(|arg| arg == "--threads") {
            Some(at) => args.get(at + 1).and_then(|n| n.parse().ok()).expect(usage),
            None => 1,
        };
        // The main thread reads a handle too: it is one of the N.
        black_box(SharedHeaders::new().get(&KEY));
        let mut parked = ParkedReaders::new();
        parked.grow_to(threads);
        let region = Region::new(GLOBAL);
        run_only(name, n);
        let change = region.change();
        // Totals for the whole run (set-up included): two counts' difference is per request.
        eprintln!(
            "allocations {} bytes {}",
            change.allocations, change.bytes_allocated
        );
        parked.join();
        return;
    }
    per_request_table();
    core_ops_table();
}
