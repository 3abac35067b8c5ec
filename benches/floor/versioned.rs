//! The lean layer plus versioned handles: [`lean`](super::lean) with the request and response
//! headers each in a copy-on-write, versioned, sealable cell, sealed at the commit into
//! snapshots that the record keeps, as a baseline for `SharedHeadersLayer` in the same run. It
//! is the cheapest honest form of what the layer's contract needs beyond lean.
//!
//! It does everything lean does, in the same way and with lean's own items (the copy with its
//! secret values flagged, the request line and start time, the deadline on a process-wide timer
//! thread (its own, for this context type), the deadline in scope, the panic catch, the commit
//! word, the once-cell record, gRPC detection for HTTP/2 only), and, per request:
//!
//! * two cells, request and response, each a `parking_lot::RwLock<Arc<Version>>` (the published
//!   value, as the crate's request-scoped handles publish) and a `parking_lot::Mutex<()>` held
//!   through a write, where a [`Version`] is a map and its number;
//! * the request's version 0: the flagged copy in its own `Arc` (one allocation more than lean:
//!   a snapshot may outlive the exchange, so it cannot live inside the per-request allocation
//!   without unsafe code); the response's version 0: a clone of one process-wide empty
//!   `Arc<Version>` (no allocation);
//! * a write ([`Cell::write`]: under the writer lock, refuse if the commit word is no longer
//!   open, copy the current map, change it, publish the next version), used by
//!   [`Ctx::insert_response`] (which flags a secret value as lean's copy does) and so by the
//!   `lean_versioned_write` variant's handler ([`with_ctx`]), not by the bare handler;
//! * the commit: the compare-and-swap on the commit word, then, by the winner only, for each
//!   cell its writer lock taken (so an in-flight write has landed, and a later one will be
//!   refused) and the current `Arc` cloned as the sealed snapshot; the once-cell record holds
//!   outcome, status, latency and the two snapshots;
//! * the committed response snapshot's headers merged into the response (as lean merges its
//!   locked map; empty with the bare handler).
//!
//! Like lean, it has no hooks, no limits, no annotations, no late-writes report, no re-entrancy
//! checks, no waker bookkeeping beyond one slot; and no read cache (the crate's request-scoped
//! cells are read through a per-thread cache; nothing here reads a cell but the commit), no
//! snapshot type around the `Arc` and no reuse of a version's allocation. It is a lower bound
//! for the layer's design, not an alternative to it.

use std::convert::Infallible;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, LazyLock, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use http::header::{Entry, IntoHeaderName};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, Uri};
use pin_project_lite::pin_project;
use tower::{Layer, Service};

use super::lean::{
    ANSWERED, CANCELLED, Deadlined, OPEN, TIMED_OUT, Timer, flag_secrets, in_scope, is_grpc,
    is_secret,
};

/// One published version of a cell's headers.
pub struct Version {
    pub map: HeaderMap,
    pub version: u64,
}

/// The response's version 0, shared by every request.
static EMPTY: LazyLock<Arc<Version>> = LazyLock::new(|| {
    Arc::new(Version {
        map: HeaderMap::new(),
        version: 0,
    })
});

/// A write refused: the exchange has committed.
#[derive(Debug)]
pub struct Committed;

/// A versioned copy-on-write cell: the published version and the writers' lock.
pub struct Cell {
    published: parking_lot::RwLock<Arc<Version>>,
    writer: parking_lot::Mutex<()>,
}

impl Cell {
    fn new(version: Arc<Version>) -> Self {
        Self {
            published: parking_lot::RwLock::new(version),
            writer: parking_lot::Mutex::new(()),
        }
    }

    /// Copies the current map, changes it with `f` and publishes it as the next version, unless
    /// `state` (the commit word) is no longer open: checked under the writer lock, which the
    /// commit takes before it seals.
    pub fn write<T>(
        &self,
        state: &AtomicU8,
        f: impl FnOnce(&mut HeaderMap) -> T,
    ) -> Result<T, Committed> {
        let writer = self.writer.lock();
        if state.load(Ordering::Acquire) != OPEN {
            return Err(Committed);
        }
        let (mut map, version) = {
            let current = self.published.read();
            (current.map.clone(), current.version)
        };
        let out = f(&mut map);
        let next = Arc::new(Version {
            map,
            version: version + 1,
        });
        let old = std::mem::replace(&mut *self.published.write(), next);
        drop(writer);
        drop(old);
        Ok(out)
    }

    /// The sealed snapshot: the current version, once no write is in flight. Called after the
    /// commit word left `OPEN`, so every later write is refused.
    fn seal(&self) -> Arc<Version> {
        let _writer = self.writer.lock();
        Arc::clone(&self.published.read())
    }
}

/// What a commit records.
#[allow(dead_code)] // only carried, as the layer's record would be
pub struct Record {
    outcome: u8,
    status: Option<StatusCode>,
    latency: Duration,
    request: Arc<Version>,
    response: Arc<Version>,
}

/// The shared per-request context.
#[allow(dead_code)] // the line is only carried
pub struct Ctx {
    state: AtomicU8,
    record: OnceLock<Record>,
    started: Instant,
    method: Method,
    uri: Uri,
    version: http::Version,
    grpc: bool,
    request: Cell,
    response: Cell,
    waker: Mutex<Option<Waker>>,
}

impl Ctx {
    /// Commits with `outcome` if nothing committed yet; the winner seals both cells and gets
    /// the record.
    fn commit(&self, outcome: u8, status: Option<StatusCode>) -> Option<&Record> {
        self.state
            .compare_exchange(OPEN, outcome, Ordering::AcqRel, Ordering::Acquire)
            .ok()?;
        let request = self.request.seal();
        let response = self.response.seal();
        Some(self.record.get_or_init(|| Record {
            outcome,
            status,
            latency: self.started.elapsed(),
            request,
            response,
        }))
    }

    /// Inserts one response header (its value flagged if the name is secret), unless committed.
    pub fn insert_response<K: IntoHeaderName>(
        &self,
        key: K,
        mut value: HeaderValue,
    ) -> Result<Option<HeaderValue>, Committed> {
        self.response
            .write(&self.state, |map| match map.entry(key) {
                Entry::Occupied(mut entry) => {
                    if is_secret(entry.key()) {
                        value.set_sensitive(true);
                    }
                    Some(entry.insert(value))
                }
                Entry::Vacant(entry) => {
                    if is_secret(entry.key()) {
                        value.set_sensitive(true);
                    }
                    entry.insert(value);
                    None
                }
            })
    }
}

impl Deadlined for Ctx {
    fn time_out(&self) {
        if self
            .commit(TIMED_OUT, Some(StatusCode::SERVICE_UNAVAILABLE))
            .is_some()
            && let Some(waker) = self.waker.lock().unwrap().take()
        {
            waker.wake();
        }
    }
}

/// What the layer puts in both messages' extensions.
#[derive(Clone)]
pub struct Carried(pub Arc<Ctx>);

/// The `lean_versioned_write` handler: one response header through the context from the
/// request's extensions, as `with_exchange` (`benches/common`) writes one through the exchange.
#[allow(dead_code)] // the alloc bench's only
pub async fn with_ctx(req: Request<()>) -> Result<Response<String>, Infallible> {
    if let Some(Carried(ctx)) = req.extensions().get::<Carried>() {
        let _ = ctx.insert_response("x-cache", HeaderValue::from_static("hit"));
    }
    Ok(Response::new(String::new()))
}

fn timer() -> &'static Timer<Ctx> {
    static TIMER: OnceLock<&'static Timer<Ctx>> = OnceLock::new();
    TIMER.get_or_init(Timer::start)
}

/// Appends the committed response headers to the response, as lean does.
fn merge<R>(res: &mut Response<R>, committed: &HeaderMap) {
    if !committed.is_empty() {
        res.headers_mut()
            .extend(committed.iter().map(|(n, v)| (n.clone(), v.clone())));
    }
}

/// The lean layer with versioned handles, with the layer's deadline.
#[derive(Clone, Copy)]
pub struct LeanVersioned {
    pub timeout: Duration,
    /// Whether the response carries the context in its extensions (the layer's
    /// `record_in_response`): without it, the response's extension map is never made.
    pub record_in_response: bool,
}

impl<S> Layer<S> for LeanVersioned {
    type Service = LeanVersionedService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        LeanVersionedService {
            inner,
            timeout: self.timeout,
            record: self.record_in_response,
        }
    }
}

#[derive(Clone)]
pub struct LeanVersionedService<S> {
    inner: S,
    timeout: Duration,
    record: bool,
}

impl<S, B, R> Service<Request<B>> for LeanVersionedService<S>
where
    S: Service<Request<B>, Response = Response<R>>,
    R: Default,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = LeanVersionedFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let started = Instant::now();
        let mut request = req.headers().clone();
        flag_secrets(&mut request);
        let grpc = is_grpc(&req);
        let ctx = Arc::new(Ctx {
            state: AtomicU8::new(OPEN),
            record: OnceLock::new(),
            started,
            method: req.method().clone(),
            uri: req.uri().clone(),
            version: req.version(),
            grpc,
            request: Cell::new(Arc::new(Version {
                map: request,
                version: 0,
            })),
            response: Cell::new(Arc::clone(&EMPTY)),
            waker: Mutex::new(None),
        });
        let deadline = started + self.timeout;
        timer().arm(deadline, &ctx);
        req.extensions_mut().insert(Carried(Arc::clone(&ctx)));
        let inner = in_scope(deadline, || self.inner.call(req));
        LeanVersionedFuture {
            ctx: Some(ctx),
            inner,
            deadline,
            record: self.record,
        }
    }
}

pin_project! {
    pub struct LeanVersionedFuture<F> {
        ctx: Option<Arc<Ctx>>,
        #[pin]
        inner: F,
        deadline: Instant,
        record: bool,
    }

    impl<F> PinnedDrop for LeanVersionedFuture<F> {
        fn drop(this: Pin<&mut Self>) {
            if let Some(ctx) = this.project().ctx.take() {
                ctx.commit(CANCELLED, None);
            }
        }
    }
}

impl<F, R, E> Future for LeanVersionedFuture<F>
where
    F: Future<Output = Result<Response<R>, E>>,
    R: Default,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let deadline = *this.deadline;
        let inner = this.inner;
        let polled = catch_unwind(AssertUnwindSafe(|| in_scope(deadline, || inner.poll(cx))));
        let ctx = this.ctx.as_ref().expect("polled after completion");
        match polled {
            Ok(Poll::Ready(Ok(mut res))) => {
                let status = res.status();
                match ctx.commit(ANSWERED, Some(status)) {
                    Some(record) => merge(&mut res, &record.response.map),
                    None => {
                        // The timer won: its answer, with the response as it sealed it (not
                        // reached in the bench).
                        res = Response::new(R::default());
                        *res.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                        merge(&mut res, &ctx.response.seal().map);
                    }
                }
                let ctx = this.ctx.take().expect("present");
                if *this.record {
                    res.extensions_mut().insert(Carried(ctx));
                }
                Poll::Ready(Ok(res))
            }
            Ok(Poll::Ready(Err(err))) => {
                ctx.commit(ANSWERED, None);
                this.ctx.take();
                Poll::Ready(Err(err))
            }
            Ok(Poll::Pending) => {
                *ctx.waker.lock().unwrap() = Some(cx.waker().clone());
                Poll::Pending
            }
            Err(_panic) => {
                ctx.commit(ANSWERED, Some(StatusCode::INTERNAL_SERVER_ERROR));
                let mut res = Response::new(R::default());
                *res.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
                let ctx = this.ctx.take().expect("present");
                if *this.record {
                    res.extensions_mut().insert(Carried(ctx));
                }
                Poll::Ready(Ok(res))
            }
        }
    }
}
