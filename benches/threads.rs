//! Thread-count sweep: what one request costs when the process has N live threads that have read
//! a `SharedHeaders` once and are now parked (a server's worker and blocking-pool threads).
//!
//! ```text
//! cargo bench --features full --bench threads
//! cargo bench --features full,rwlock-backend --bench threads     # the alternative backend
//! cargo bench --features full --bench threads -- 'threads/layer_timeout/'  # one variant
//! ```
//!
//! N is the total number of threads that have read a handle: the bench thread plus N - 1
//! helpers, for N in 1, 8, 64, 256. Each helper creates a handle, reads it with `get` and
//! `snapshot` (which, on the default backend, gives the thread one of arc-swap's debt nodes) and
//! then blocks on a channel until the bench ends. Ids are `threads/<variant>/<N>`:
//!
//! * `layer_timeout`: one request through `SharedHeadersLayer` with a deadline around a trivial
//!   `service_fn`, 8 request headers, inside one `block_on` of a current-thread runtime per
//!   sample (as `benches/layer.rs` does);
//! * `layer_timeout_annotate`: the same, the handler writes one annotation through
//!   `Exchange::annotations()` (the README's axum example; the handle is created at that call);
//! * `layer_timeout_write`: the same, the handler writes one response header through
//!   `Exchange::response()`;
//! * `tower_http`: the same request through tower-http's `TimeoutLayer` instead: the baseline
//!   that does not depend on the thread count, for ratios within the same run;
//! * `bare`: the same request with no layer;
//! * `insert`: one `insert` (replacing a value) on a long-lived handle of 8 headers;
//! * `raw`: `SharedHeaders::new()`, one `get`, two `insert`s, drop: the request-scoped pattern;
//! * `raw_locked`: the same on a handle built with `Publication::Locked` (as the server layer's);
//! * `arc_swap` (default backend only): the same pattern on a raw `ArcSwap<HeaderMap>`
//!   (`from_pointee`, `load`, two `store`s, drop).
//!
//! **Run order matters.** arc-swap never frees a debt node: a thread that exits leaves its node
//! in the global list for the next thread to reuse, and every `store` and every drop of an
//! `ArcSwap` walks the whole list. So the list only grows within a process, and the sweep runs
//! in increasing N (a filtered run of `/1` alone is still an N = 1 measurement). After N = 256
//! the helpers are released and joined, and `layer_timeout` and `raw` are measured once more
//! (`threads/<variant>/256_exited`): whether the cost follows live threads or the peak.
//! To interleave runs, run the whole binary again (a new process starts from an empty list).

mod common;

use std::convert::Infallible;
use std::future::Future;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, criterion_group, criterion_main};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use shared_headers::SharedHeaders;
use shared_headers::server::SharedHeadersLayer;
use tower::{Layer, Service, ServiceExt, service_fn};

use common::{
    KEY, ParkedReaders, WRITE_KEYS, bare, request_headers, with_annotation, with_exchange,
};

/// Total thread counts of the sweep (the bench thread included).
const THREADS: [usize; 4] = [1, 8, 64, 256];
/// Request headers per request, and headers in the written handle.
const HEADERS: usize = 8;
const DEADLINE: Duration = Duration::from_secs(30);

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

/// The subjects every N is measured on, built once so that each sample sees the same state.
struct Subjects {
    runtime: tokio::runtime::Runtime,
    headers: HeaderMap,
    written: SharedHeaders,
    value: HeaderValue,
}

impl Subjects {
    fn new() -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        // 7 request headers plus the written one: the handle stays at 8 headers.
        let mut written = request_headers(HEADERS - 1);
        written.insert(WRITE_KEYS[0].clone(), HeaderValue::from_static("initial"));
        assert_eq!(written.len(), HEADERS);
        Subjects {
            runtime,
            headers: request_headers(HEADERS),
            written: SharedHeaders::from(written),
            value: HeaderValue::from_static("written"),
        }
    }

    /// `SharedHeadersLayer` with a deadline around `handler`, as `threads/<name>/<id>`.
    fn layer<F, Fut>(
        &self,
        group: &mut BenchmarkGroup<'_, WallTime>,
        name: &str,
        handler: F,
        id: &str,
    ) where
        F: FnMut(Request<()>) -> Fut,
        Fut: Future<Output = Result<Response<String>, Infallible>>,
    {
        let mut service = SharedHeadersLayer::new()
            .timeout(DEADLINE)
            .layer(service_fn(handler));
        group.bench_function(format!("{name}/{id}"), |b| {
            b.iter_custom(|iters| run(&self.runtime, &mut service, &self.headers, iters))
        });
    }

    /// The three request shapes through the layer: no write, one annotation, one response write.
    fn shapes(&self, group: &mut BenchmarkGroup<'_, WallTime>, id: &str) {
        self.layer(group, "layer_timeout", bare, id);
        self.layer(group, "layer_timeout_annotate", with_annotation, id);
        self.layer(group, "layer_timeout_write", with_exchange, id);
    }

    fn tower_http(&self, group: &mut BenchmarkGroup<'_, WallTime>, id: &str) {
        let mut service = tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            DEADLINE,
        )
        .layer(service_fn(bare));
        group.bench_function(format!("tower_http/{id}"), |b| {
            b.iter_custom(|iters| run(&self.runtime, &mut service, &self.headers, iters))
        });
    }

    fn bare(&self, group: &mut BenchmarkGroup<'_, WallTime>, id: &str) {
        let mut service = service_fn(bare);
        group.bench_function(format!("bare/{id}"), |b| {
            b.iter_custom(|iters| run(&self.runtime, &mut service, &self.headers, iters))
        });
    }

    fn insert(&self, group: &mut BenchmarkGroup<'_, WallTime>, id: &str) {
        let key = &WRITE_KEYS[0];
        group.bench_function(format!("insert/{id}"), |b| {
            b.iter(|| {
                black_box(&self.written)
                    .insert(key.clone(), self.value.clone())
                    .unwrap()
            })
        });
    }

    fn raw(&self, group: &mut BenchmarkGroup<'_, WallTime>, id: &str) {
        let (first, second) = (&WRITE_KEYS[0], &WRITE_KEYS[1]);
        group.bench_function(format!("raw/{id}"), |b| {
            b.iter(|| {
                let headers = SharedHeaders::new();
                black_box(headers.get(&KEY));
                headers.insert(first.clone(), self.value.clone()).unwrap();
                headers.insert(second.clone(), self.value.clone()).unwrap();
                drop(black_box(headers));
            })
        });
    }

    /// `raw` on a handle built with `Publication::Locked` (what the server layer uses).
    fn raw_locked(&self, group: &mut BenchmarkGroup<'_, WallTime>, id: &str) {
        let (first, second) = (&WRITE_KEYS[0], &WRITE_KEYS[1]);
        group.bench_function(format!("raw_locked/{id}"), |b| {
            b.iter(|| {
                let headers = SharedHeaders::builder()
                    .publication(shared_headers::Publication::Locked)
                    .build();
                black_box(headers.get(&KEY));
                headers.insert(first.clone(), self.value.clone()).unwrap();
                headers.insert(second.clone(), self.value.clone()).unwrap();
                drop(black_box(headers));
            })
        });
    }

    #[cfg(not(feature = "rwlock-backend"))]
    fn arc_swap(&self, group: &mut BenchmarkGroup<'_, WallTime>, id: &str) {
        use std::sync::Arc;
        let (first, second) = (&WRITE_KEYS[0], &WRITE_KEYS[1]);
        group.bench_function(format!("arc_swap/{id}"), |b| {
            b.iter(|| {
                let cell = arc_swap::ArcSwap::from_pointee(HeaderMap::new());
                black_box(cell.load().get(&KEY).cloned());
                let mut map = HeaderMap::clone(&cell.load());
                map.insert(first.clone(), self.value.clone());
                cell.store(Arc::new(map));
                let mut map = HeaderMap::clone(&cell.load());
                map.insert(second.clone(), self.value.clone());
                cell.store(Arc::new(map));
                drop(black_box(cell));
            })
        });
    }

    #[cfg(feature = "rwlock-backend")]
    fn arc_swap(&self, _group: &mut BenchmarkGroup<'_, WallTime>, _id: &str) {
        // The helpers do not touch arc-swap on this backend, so a raw `ArcSwap` would be flat
        // for reasons unrelated to the crate: not measured.
    }
}

fn sweep(c: &mut Criterion) {
    let subjects = Subjects::new();
    // The bench thread reads a handle too: it is one of the N.
    black_box(subjects.written.get(&KEY));
    let mut helpers = ParkedReaders::new();
    let mut group = c.benchmark_group("threads");
    for n in THREADS {
        helpers.grow_to(n);
        assert_eq!(helpers.total(), n);
        let id = n.to_string();
        subjects.shapes(&mut group, &id);
        subjects.tower_http(&mut group, &id);
        subjects.bare(&mut group, &id);
        subjects.insert(&mut group, &id);
        subjects.raw(&mut group, &id);
        subjects.raw_locked(&mut group, &id);
        subjects.arc_swap(&mut group, &id);
    }
    // The peak stays in arc-swap's node list after the threads exit.
    helpers.join();
    let id = format!("{}_exited", THREADS[THREADS.len() - 1]);
    subjects.layer(&mut group, "layer_timeout", bare, &id);
    subjects.tower_http(&mut group, &id);
    subjects.raw(&mut group, &id);
    group.finish();
}

criterion_group! {
    name = benches;
    // 4 thread counts x 9 variants + 3: about 60 s at these settings.
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(30);
    targets = sweep
}
criterion_main!(benches);
