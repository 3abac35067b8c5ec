//! Inputs shared by the benches: realistic request headers, the keys every variant reads and
//! writes, a background writer thread, parked reader threads, and the request shapes' handlers.

#![allow(dead_code)] // each bench binary uses a different subset

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;

use std::convert::Infallible;

use http::header::{HeaderName, HeaderValue, USER_AGENT};
use http::{HeaderMap, Request, Response};
use shared_headers::Exchange;

/// The map sizes every group is measured at.
pub const SIZES: [usize; 3] = [4, 12, 48];

/// The key every read variant looks up: `x-request-id`, what a logger reads, present in every map
/// size. Every variant uses this same `HeaderName` constant, so none pays for parsing a `&str`.
/// Being a custom name, looking it up hashes its bytes (~35 ns on 12 headers).
pub const KEY: HeaderName = HeaderName::from_static("x-request-id");

/// A standard header (`user-agent`): the cheapest possible lookup (no byte hashing), so the
/// constant cost of a shared read weighs most against it (`read/get_standard`).
pub const STANDARD_KEY: HeaderName = USER_AGENT;

/// The keys the write benches set (`insert` sets the first one, `update5` all five).
pub static WRITE_KEYS: [HeaderName; 5] = [
    HeaderName::from_static("x-write-0"),
    HeaderName::from_static("x-write-1"),
    HeaderName::from_static("x-write-2"),
    HeaderName::from_static("x-write-3"),
    HeaderName::from_static("x-write-4"),
];

/// Typical request headers, most common first (`x-request-id` among the first four, so every
/// map size contains [`KEY`]); sizes beyond this list are padded with `x-custom-N` headers.
const REQUEST_HEADERS: [(&str, &str); 18] = [
    ("host", "api.example.com"),
    (
        "user-agent",
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36",
    ),
    (
        "accept",
        "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    ),
    ("x-request-id", "7f3c2a10-5b6e-4d8f-9a21-0c4e8b7d6f5a"),
    ("accept-encoding", "gzip, deflate, br"),
    ("accept-language", "en-US,en;q=0.9"),
    ("cookie", "session=4f2a9c0e7b1d; theme=dark; consent=1"),
    (
        "authorization",
        "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.c2lnbmF0dXJl",
    ),
    (
        "traceparent",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    ),
    ("content-type", "application/json"),
    ("content-length", "348"),
    ("x-forwarded-for", "203.0.113.7, 198.51.100.23"),
    ("x-forwarded-proto", "https"),
    ("referer", "https://www.example.com/products?page=2"),
    ("origin", "https://www.example.com"),
    ("cache-control", "no-cache"),
    (
        "if-none-match",
        "\"33a64df551425fcc55e4d42a148795d9f25f89d4\"",
    ),
    ("sec-fetch-mode", "cors"),
];

/// A map of `n` request headers. Values are parsed from strings, as a server parses them off
/// the wire.
pub fn request_headers(n: usize) -> HeaderMap {
    let mut map = HeaderMap::with_capacity(n);
    for i in 0..n {
        let (name, value) = match REQUEST_HEADERS.get(i) {
            Some(&(name, value)) => (HeaderName::from_static(name), value.to_owned()),
            None => (
                HeaderName::from_bytes(format!("x-custom-{i}").as_bytes()).unwrap(),
                format!("custom-value-{i}"),
            ),
        };
        map.insert(name, HeaderValue::from_str(&value).unwrap());
    }
    assert_eq!(map.len(), n);
    assert!(map.contains_key(&KEY) && map.contains_key(&STANDARD_KEY));
    map
}

/// `request_headers(n)` plus the five [`WRITE_KEYS`], so that a write replaces existing values
/// (the steady state of a handle that is written repeatedly) and the map size does not change
/// from one iteration to the next.
pub fn write_base(n: usize) -> HeaderMap {
    let mut map = request_headers(n);
    update5(&mut map, &HeaderValue::from_static("initial"));
    map
}

/// The 5-header batch write used by the `update5` benches.
#[inline]
pub fn update5(map: &mut HeaderMap, value: &HeaderValue) {
    for key in &WRITE_KEYS {
        map.insert(key.clone(), value.clone());
    }
}

/// Sets every header of a `n`-header map again: the slow write of the latency bench.
#[inline]
pub fn rewrite_all(map: &mut HeaderMap, names: &[HeaderName], value: &HeaderValue) {
    for name in names {
        map.insert(name.clone(), value.clone());
    }
}

/// Runs `measure` while another thread calls `write` in a loop, then stops and joins the writer
/// (also if `measure` panics). Returns what `measure` returned and how many writes ran.
pub fn with_background_writer<W, M, R>(mut write: W, measure: M) -> (R, u64)
where
    W: FnMut() + Send,
    M: FnOnce() -> R,
{
    struct StopOnDrop<'a>(&'a AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }

    let stop = AtomicBool::new(false);
    let started = AtomicBool::new(false);
    thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let mut writes = 0u64;
            while !stop.load(Ordering::Relaxed) {
                write();
                writes += 1;
                started.store(true, Ordering::Relaxed);
            }
            writes
        });
        let guard = StopOnDrop(&stop);
        while !started.load(Ordering::Relaxed) && !writer.is_finished() {
            thread::yield_now();
        }
        let result = measure();
        drop(guard);
        (result, writer.join().expect("background writer panicked"))
    })
}

/// The parked helpers only block on a channel; they need little stack.
const HELPER_STACK: usize = 64 * 1024;

/// Parked helper threads, each of which has read a `SharedHeaders` once (with `get` and
/// `snapshot`: on the default backend, that gives the thread one of arc-swap's debt nodes, which
/// it keeps while it lives) and then blocks on a channel until released. Used by the `threads`
/// and `alloc` benches to put N threads in the process.
#[derive(Default)]
pub struct ParkedReaders {
    release: Vec<mpsc::Sender<()>>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl ParkedReaders {
    pub fn new() -> Self {
        Self::default()
    }

    /// Total threads that have read a handle: the helpers and the bench thread.
    pub fn total(&self) -> usize {
        self.threads.len() + 1
    }

    /// Spawns helpers until `total` threads have read a handle; returns once all of them have.
    pub fn grow_to(&mut self, total: usize) {
        let (ready_tx, ready_rx) = mpsc::channel();
        let mut spawned = 0;
        while self.total() < total {
            let (release_tx, release_rx) = mpsc::channel::<()>();
            let ready = ready_tx.clone();
            let handle = thread::Builder::new()
                .name(format!("parked-{}", self.threads.len()))
                .stack_size(HELPER_STACK)
                .spawn(move || {
                    let headers = shared_headers::SharedHeaders::from(request_headers(8));
                    black_box(headers.get(&KEY));
                    black_box(headers.snapshot());
                    drop(headers);
                    ready.send(()).unwrap();
                    // Parked until the bench drops the sender.
                    let _ = release_rx.recv();
                })
                .expect("spawn helper thread");
            self.release.push(release_tx);
            self.threads.push(handle);
            spawned += 1;
        }
        for _ in 0..spawned {
            ready_rx.recv().expect("helper thread panicked");
        }
    }

    /// Releases and joins every helper.
    pub fn join(&mut self) {
        self.release.clear();
        for handle in self.threads.drain(..) {
            handle.join().expect("helper thread panicked");
        }
    }
}

impl Drop for ParkedReaders {
    fn drop(&mut self) {
        self.join();
    }
}

/// The request shapes' handler with no work of its own.
pub async fn bare(_req: Request<()>) -> Result<Response<String>, Infallible> {
    Ok(Response::new(String::new()))
}

/// The handler a user of the layer writes: one response header through the exchange.
pub async fn with_exchange(req: Request<()>) -> Result<Response<String>, Infallible> {
    if let Some(exchange) = req.extensions().get::<Exchange>() {
        let _ = exchange
            .response()
            .insert("x-cache", HeaderValue::from_static("hit"));
    }
    Ok(Response::new(String::new()))
}

/// The handler of the README's axum example, its log half: one annotation through the
/// exchange (created at this first call), nothing written to the response.
pub async fn with_annotation(req: Request<()>) -> Result<Response<String>, Infallible> {
    if let Some(exchange) = req.extensions().get::<Exchange>() {
        let _ = exchange
            .annotations()
            .insert("x-user", HeaderValue::from_static("ada"));
    }
    Ok(Response::new(String::new()))
}
