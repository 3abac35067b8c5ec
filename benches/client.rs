//! Per-request cost of applying default headers: this crate's layer against a bare client
//! service and against defaults held in `Arc<RwLock<HeaderMap>>`, on one thread and on two
//! request threads while a writer rotates the token; and what `RefreshRetryLayer` adds to an
//! accepted request (the copy it keeps for a retry), against `DefaultHeaders` alone.
//!
//! `cargo bench --features client --bench client`

use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::hint::black_box;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, RwLock};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use http::header::{ACCEPT, AUTHORIZATION, USER_AGENT};
use http::{HeaderMap, HeaderValue, Request, Response};
use shared_headers::SharedHeaders;
use shared_headers::client::{
    DefaultHeaders, DefaultHeadersLayer, Merge, RefreshRetry, RefreshRetryLayer, Refresher,
};
use tower::{Layer, Service};

/// A client service that answers at once: what is measured is what wraps it.
#[derive(Clone)]
struct Bare;

impl Service<Request<()>> for Bare {
    type Response = Response<()>;
    type Error = Infallible;
    type Future = Ready<Result<Response<()>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<()>) -> Self::Future {
        black_box(&request);
        ready(Ok(Response::new(())))
    }
}

fn defaults(generation: u64) -> HeaderMap {
    let mut map = HeaderMap::new();
    let mut token = HeaderValue::from_str(&format!("Bearer tok-{generation}")).unwrap();
    token.set_sensitive(true);
    map.insert(AUTHORIZATION, token);
    map.insert("x-token-gen", generation.into());
    map.insert(USER_AGENT, HeaderValue::from_static("bench-sdk/1.0"));
    map.insert(ACCEPT, HeaderValue::from_static("application/json"));
    map
}

/// A request with one header of its own, as most requests have.
fn request() -> Request<()> {
    let mut request = Request::new(());
    request
        .headers_mut()
        .insert("x-request-id", HeaderValue::from_static("42"));
    request
}

fn complete<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => unreachable!("the bare service answers at once"),
    }
}

fn send_bare(service: &mut Bare) {
    black_box(complete(service.call(request())).unwrap());
}

fn send_layer(service: &mut DefaultHeaders<Bare>) {
    black_box(complete(service.call(request())).unwrap());
}

fn send_rwlock(service: &mut Bare, defaults: &RwLock<HeaderMap>) {
    let mut request = request();
    let copied = defaults.read().unwrap().clone();
    for (name, value) in &copied {
        if name == AUTHORIZATION || !request.headers().contains_key(name) {
            request.headers_mut().append(name.clone(), value.clone());
        }
    }
    black_box(complete(service.call(request)).unwrap());
}

type RefreshFn = fn() -> Ready<Result<HeaderMap, Infallible>>;

fn send_retry(service: &mut RefreshRetry<DefaultHeaders<Bare>, RefreshFn, Infallible>) {
    black_box(complete(service.call(request())).unwrap());
}

fn retry_service(
    shared: &SharedHeaders,
) -> RefreshRetry<DefaultHeaders<Bare>, RefreshFn, Infallible> {
    let refresh: RefreshFn = || ready(Ok(HeaderMap::new()));
    RefreshRetryLayer::new(Refresher::new(shared.clone()), refresh).layer(layer_service(shared))
}

fn layer_service(shared: &SharedHeaders) -> DefaultHeaders<Bare> {
    DefaultHeadersLayer::new(shared.clone())
        .merge(AUTHORIZATION, Merge::Override)
        .layer(Bare)
}

fn one_thread(c: &mut Criterion) {
    let mut group = c.benchmark_group("client/one thread");
    let shared = SharedHeaders::from(defaults(0));
    let locked = RwLock::new(defaults(0));
    group.bench_function("bare service", |b| {
        let mut service = Bare;
        b.iter(|| send_bare(&mut service))
    });
    group.bench_function("DefaultHeaders layer", |b| {
        let mut service = layer_service(&shared);
        b.iter(|| send_layer(&mut service))
    });
    group.bench_function("RwLock<HeaderMap> defaults", |b| {
        let mut service = Bare;
        b.iter(|| send_rwlock(&mut service, &locked))
    });
    // Accepted at once: the retry layer's cost is the request copy it keeps, a clone of the
    // inner service and the check of the response.
    group.bench_function("RefreshRetry over DefaultHeaders", |b| {
        let mut service = retry_service(&shared);
        b.iter(|| send_retry(&mut service))
    });
    group.finish();
}

/// Runs a sender made by `sender` on each of two request threads, `iters` times each, while a
/// writer rotates the token every 100 µs with `rotate`; returns the wall time of the slower
/// thread.
fn two_threads<S: FnMut()>(
    iters: u64,
    sender: impl Fn() -> S + Sync,
    rotate: impl Fn(u64) + Sync,
) -> Duration {
    let stop = AtomicBool::new(false);
    let barrier = Barrier::new(3);
    thread::scope(|s| {
        s.spawn(|| {
            barrier.wait();
            let mut generation = 0;
            while !stop.load(Ordering::Relaxed) {
                generation += 1;
                rotate(generation);
                thread::sleep(Duration::from_micros(100));
            }
        });
        let requesters: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let mut send = sender();
                    barrier.wait();
                    let start = Instant::now();
                    for _ in 0..iters {
                        send();
                    }
                    start.elapsed()
                })
            })
            .collect();
        let slowest = requesters
            .into_iter()
            .map(|t| t.join().unwrap())
            .max()
            .unwrap_or_default();
        stop.store(true, Ordering::Relaxed);
        slowest
    })
}

fn contended(c: &mut Criterion) {
    let mut group = c.benchmark_group("client/two request threads, rotating writer");
    group.bench_function("DefaultHeaders layer", |b| {
        let shared = SharedHeaders::from(defaults(0));
        let service = layer_service(&shared);
        b.iter_custom(|iters| {
            two_threads(
                iters,
                || {
                    let mut service = service.clone();
                    move || send_layer(&mut service)
                },
                |g| {
                    let new = defaults(g);
                    shared.update(|m| m.extend(new)).unwrap();
                },
            )
        })
    });
    group.bench_function("RwLock<HeaderMap> defaults", |b| {
        let locked = Arc::new(RwLock::new(defaults(0)));
        b.iter_custom(|iters| {
            two_threads(
                iters,
                || {
                    let locked = Arc::clone(&locked);
                    move || send_rwlock(&mut Bare, &locked)
                },
                |g| {
                    let new = defaults(g);
                    locked.write().unwrap().extend(new);
                },
            )
        })
    });
    group.finish();
}

criterion_group!(benches, one_thread, contended);
criterion_main!(benches);
