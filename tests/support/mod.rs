//! Helpers that several test files wrote again each (`mod support;` in each that uses them):
//! a bounded multi-thread runtime for a socket test, a captured line's field as text, and a
//! writer into a shared buffer for a `fmt` subscriber. The topic modules beside this one
//! (`capture.rs`, `sockets.rs`, `server.rs`, ...) are included by `#[path]` where needed.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// Runs `test` on a two-worker multi-thread runtime (time and I/O on), failing it when it
/// takes longer than `limit`.
pub fn run_bounded(limit: Duration, test: impl Future<Output = ()>) {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(async { tokio::time::timeout(limit, test).await.expect("bounded") });
}

/// A field of a captured line (its fields as strings), as text.
pub fn field<'a>(line: &'a BTreeMap<String, String>, name: &str) -> Option<&'a str> {
    line.get(name).map(String::as_str)
}

/// Every byte a `fmt` subscriber wrote (`with_writer(move || lines.clone())`), each write
/// kept whole.
#[derive(Clone, Default)]
pub struct Lines(pub Arc<Mutex<Vec<u8>>>);

impl Lines {
    /// The buffer, locked (a panicking assertion elsewhere does not poison it for the
    /// subscriber).
    pub fn bytes(&self) -> MutexGuard<'_, Vec<u8>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What was written so far, taken out of the buffer.
    pub fn take(&self) -> String {
        String::from_utf8(std::mem::take(&mut *self.bytes())).unwrap()
    }
}

impl io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.bytes().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The `n`th end report a hook pushed to `ends`, waiting for it (bounded: 5 s).
pub async fn nth_end<T: Clone>(ends: &Mutex<Vec<T>>, n: usize) -> T {
    let until = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(end) = ends.lock().unwrap().get(n) {
            return end.clone();
        }
        assert!(std::time::Instant::now() < until, "no end report {n}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The hop of a request a service got from a sampled caller in `trace` (its span
/// `00f067aa0ba902b7`): the caller's trace, a new span id.
pub fn hop(trace: &str) -> shared_headers::context::RequestContext {
    let mut incoming = http::HeaderMap::new();
    incoming.insert(
        "traceparent",
        format!("00-{trace}-00f067aa0ba902b7-01").parse().unwrap(),
    );
    shared_headers::context::Propagation::new()
        .trace_hop()
        .capture(&incoming)
        .0
        .unwrap()
}

/// The `traceparent` a request came with, `-` when it had none (what a leaf answers).
pub fn traceparent_of<B>(req: &http::Request<B>) -> String {
    req.headers()
        .get("traceparent")
        .map_or("-".to_owned(), |v| v.to_str().unwrap().to_owned())
}

impl Lines {
    /// A JSON `fmt` subscriber writing into these lines.
    pub fn json_subscriber(&self) -> impl tracing::Subscriber + Send + Sync + 'static {
        let writer = self.clone();
        tracing_subscriber::fmt()
            .json()
            .with_writer(move || writer.clone())
            .finish()
    }

    /// Waits (bounded: 500 looks 10 ms apart) until the lines hold `text`.
    pub async fn wait_for(&self, text: &str) {
        for _ in 0..500 {
            if String::from_utf8_lossy(&self.bytes()).contains(text) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Every line written so far (left in the buffer).
    pub fn text(&self) -> String {
        String::from_utf8(self.bytes().clone()).unwrap()
    }
}
