//! Per-request overhead of `SharedHeadersLayer`, in process (no sockets): the same trivial
//! handler, bare, under tower-http's `TimeoutLayer`, and under `SharedHeadersLayer` without and
//! with its own deadline (the difference is the wall-clock deadline's cost: arming the layer's
//! timer thread), with an `on_commit` hook (and with it alone carrying the record:
//! `record_in_response(false)`), and without copying the request headers
//! (`HeaderSelection::none()`); and the floor of any such layer (`benches/floor`). Requests
//! carry 8 typical headers, since the layer copies them.
//!
//! Each sample runs a batch of requests inside one `block_on` of a current-thread runtime, so
//! the runtime's entry cost is not in the per-request number.
//!
//! `cargo bench --features server --bench layer`

use std::convert::Infallible;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use http::{HeaderMap, Request, Response, StatusCode};
use shared_headers::Exchange;
use shared_headers::server::{HeaderSelection, SharedHeadersLayer};
use tower::{Layer, Service, ServiceExt, service_fn};

mod floor;

const DEADLINE: Duration = Duration::from_secs(30);

fn typical_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in [
        ("host", "api.example.com"),
        ("user-agent", "Mozilla/5.0 (X11; Linux x86_64) bench/1.0"),
        ("accept", "application/json"),
        ("accept-encoding", "gzip, br"),
        (
            "authorization",
            "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.sig",
        ),
        ("x-request-id", "0f8fad5b-d9cb-469f-a165-70867728950e"),
        (
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ),
        ("content-type", "application/json"),
    ] {
        headers.insert(name, value.parse().unwrap());
    }
    headers
}

async fn bare(_req: Request<()>) -> Result<Response<String>, Infallible> {
    Ok(Response::new(String::new()))
}

/// The handler a user of the layer writes: one response header through the exchange.
async fn with_exchange(req: Request<()>) -> Result<Response<String>, Infallible> {
    if let Some(exchange) = req.extensions().get::<Exchange>() {
        let _ = exchange
            .response()
            .insert("x-cache", "hit".parse().unwrap());
    }
    Ok(Response::new(String::new()))
}

/// Times `iters` requests through `service`, all inside one `block_on`.
fn run<S, B>(
    runtime: &tokio::runtime::Runtime,
    service: &mut S,
    headers: &HeaderMap,
    iters: u64,
) -> Duration
where
    S: Service<Request<()>, Response = Response<B>, Error = Infallible>,
{
    runtime.block_on(async {
        let start = Instant::now();
        for _ in 0..iters {
            let mut req = Request::new(());
            *req.headers_mut() = headers.clone();
            let res = service.ready().await.unwrap().call(req).await.unwrap();
            black_box(res);
        }
        start.elapsed()
    })
}

fn overhead(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let headers = typical_headers();
    let mut group = c.benchmark_group("layer/per_request");

    let mut service = service_fn(bare);
    group.bench_function("bare", |b| {
        b.iter_custom(|iters| run(&runtime, &mut service, &headers, iters))
    });

    let mut service = tower_http::timeout::TimeoutLayer::with_status_code(
        StatusCode::SERVICE_UNAVAILABLE,
        DEADLINE,
    )
    .layer(service_fn(bare));
    group.bench_function("tower_http_timeout", |b| {
        b.iter_custom(|iters| run(&runtime, &mut service, &headers, iters))
    });

    let mut service = floor::Floor::<true> { copy: true }.layer(service_fn(bare));
    group.bench_function("floor", |b| {
        b.iter_custom(|iters| run(&runtime, &mut service, &headers, iters))
    });

    let mut service = floor::Floor::<false> { copy: true }.layer(service_fn(bare));
    group.bench_function("floor_request_only", |b| {
        b.iter_custom(|iters| run(&runtime, &mut service, &headers, iters))
    });

    let mut service = floor::Floor::<true> { copy: false }.layer(service_fn(bare));
    group.bench_function("floor_copy_none", |b| {
        b.iter_custom(|iters| run(&runtime, &mut service, &headers, iters))
    });

    let mut service = floor::lean::Lean { timeout: DEADLINE }.layer(service_fn(bare));
    group.bench_function("lean", |b| {
        b.iter_custom(|iters| run(&runtime, &mut service, &headers, iters))
    });

    let mut service = floor::versioned::LeanVersioned {
        timeout: DEADLINE,
        record_in_response: true,
    }
    .layer(service_fn(bare));
    group.bench_function("lean_versioned", |b| {
        b.iter_custom(|iters| run(&runtime, &mut service, &headers, iters))
    });

    let mut service = SharedHeadersLayer::new().layer(service_fn(bare));
    group.bench_function("shared_headers", |b| {
        b.iter_custom(|iters| run(&runtime, &mut service, &headers, iters))
    });

    let mut service = SharedHeadersLayer::new()
        .timeout(DEADLINE)
        .layer(service_fn(bare));
    group.bench_function("shared_headers_timeout", |b| {
        b.iter_custom(|iters| run(&runtime, &mut service, &headers, iters))
    });

    let mut service = SharedHeadersLayer::new()
        .timeout(DEADLINE)
        .layer(service_fn(with_exchange));
    group.bench_function("shared_headers_timeout_one_write", |b| {
        b.iter_custom(|iters| run(&runtime, &mut service, &headers, iters))
    });

    let mut service = SharedHeadersLayer::new()
        .timeout(DEADLINE)
        .copy_request_headers(HeaderSelection::none())
        .layer(service_fn(bare));
    group.bench_function("shared_headers_timeout_copy_none", |b| {
        b.iter_custom(|iters| run(&runtime, &mut service, &headers, iters))
    });

    let mut service = SharedHeadersLayer::new()
        .timeout(DEADLINE)
        .on_commit(|c| {
            black_box(c.committed().outcome());
        })
        .layer(service_fn(bare));
    group.bench_function("shared_headers_timeout_hook", |b| {
        b.iter_custom(|iters| run(&runtime, &mut service, &headers, iters))
    });

    let mut service = SharedHeadersLayer::new()
        .timeout(DEADLINE)
        .on_commit(|c| {
            black_box(c.committed().outcome());
        })
        .record_in_response(false)
        .layer(service_fn(bare));
    group.bench_function("shared_headers_timeout_hook_no_record", |b| {
        b.iter_custom(|iters| run(&runtime, &mut service, &headers, iters))
    });

    group.finish();
}

criterion_group!(benches, overhead);
criterion_main!(benches);
