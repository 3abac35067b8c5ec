//! A lean layer of the same shape as `SharedHeadersLayer`: the floor plus the behaviours the
//! layer must keep, each in its cheapest form, as a baseline for the layer in the same run.
//!
//! Beyond [`Floor`](super::Floor) (the copy, one shared allocation, one extension in each
//! message) it does, per request, what the layer's issues require and nothing else:
//!
//! * the copy's secret values flagged (`authorization`, `proxy-authorization`, `cookie`,
//!   `set-cookie`), as every map the crate publishes is;
//! * the request line kept for the log (method, URI, version) and the start time;
//! * a deadline on one process-wide timer thread (a locked binary heap of weak references,
//!   finished entries dropped from its head at each arm, the thread notified only when the new
//!   deadline is earlier than the one it waits for), which commits at the deadline and wakes
//!   the task;
//! * the deadline in scope (a thread-local) while the inner service is called and polled;
//! * a panic of the inner future caught;
//! * commit-once: one atomic word (answered, timed out, cancelled), the winner records its
//!   outcome, status and latency (a second clock read) in a once-cell;
//! * the committed response headers (a locked map, empty here) merged into the response;
//! * gRPC detection for HTTP/2 requests only (none here: the bench's requests are HTTP/1.1).
//!
//! It has no hooks, no limits, no annotations, no late-writes report, no re-entrancy checks,
//! no per-handle versions or snapshots, no waker bookkeeping beyond one slot: it is a lower
//! bound for the layer's design, not an alternative to it.

use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use http::header::{AUTHORIZATION, CONTENT_TYPE, COOKIE, PROXY_AUTHORIZATION, SET_COOKIE};
use http::{HeaderMap, HeaderName, Method, Request, Response, StatusCode, Uri, Version};
use pin_project_lite::pin_project;
use tower::{Layer, Service};

pub(super) const OPEN: u8 = 0;
pub(super) const ANSWERED: u8 = 1;
pub(super) const TIMED_OUT: u8 = 2;
pub(super) const CANCELLED: u8 = 3;

/// What a commit records.
#[allow(dead_code)] // only carried, as the layer's record would be
pub struct Record {
    outcome: u8,
    status: Option<StatusCode>,
    latency: Duration,
}

/// The shared per-request context.
#[allow(dead_code)] // the line and the copy are only carried
pub struct Ctx {
    state: AtomicU8,
    record: OnceLock<Record>,
    started: Instant,
    method: Method,
    uri: Uri,
    version: Version,
    grpc: bool,
    request: HeaderMap,
    response: Mutex<HeaderMap>,
    waker: Mutex<Option<Waker>>,
}

impl Ctx {
    /// Commits with `outcome` if nothing committed yet; returns whether this call won.
    fn commit(&self, outcome: u8, status: Option<StatusCode>) -> bool {
        let won = self
            .state
            .compare_exchange(OPEN, outcome, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if won {
            let _ = self.record.set(Record {
                outcome,
                status,
                latency: self.started.elapsed(),
            });
        }
        won
    }
}

impl Deadlined for Ctx {
    fn time_out(&self) {
        if self.commit(TIMED_OUT, Some(StatusCode::SERVICE_UNAVAILABLE))
            && let Some(waker) = self.waker.lock().unwrap().take()
        {
            waker.wake();
        }
    }
}

/// What the lean layer puts in both messages' extensions.
#[allow(dead_code)]
#[derive(Clone)]
pub struct Carried(pub Arc<Ctx>);

thread_local! {
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
}

pub(super) fn in_scope<R>(deadline: Instant, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Instant>);
    impl Drop for Restore {
        fn drop(&mut self) {
            DEADLINE.with(|d| d.set(self.0));
        }
    }
    let _restore = Restore(DEADLINE.with(|d| d.replace(Some(deadline))));
    f()
}

/// A context the timer can time out (one timer thread per context type).
pub(super) trait Deadlined: Send + Sync + 'static {
    /// Commits with the timeout's outcome and, if that won, wakes the task.
    fn time_out(&self);
}

struct Entry<C> {
    at: Instant,
    seq: u64,
    ctx: Weak<C>,
}

impl<C> PartialEq for Entry<C> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl<C> Eq for Entry<C> {}
impl<C> PartialOrd for Entry<C> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<C> Ord for Entry<C> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// What the timer thread is doing, so that an arm notifies it only when it must (as the
/// layer's timer does): when it waits for nothing, or for a later deadline than the new one.
#[derive(Clone, Copy)]
enum Thread {
    Running,
    WaitingForever,
    WaitingUntil(Instant),
}

struct Queue<C> {
    heap: BinaryHeap<Reverse<Entry<C>>>,
    seq: u64,
    thread: Thread,
}

pub(super) struct Timer<C> {
    queue: Mutex<Queue<C>>,
    wake: Condvar,
}

fn timer() -> &'static Timer<Ctx> {
    static TIMER: OnceLock<&'static Timer<Ctx>> = OnceLock::new();
    TIMER.get_or_init(Timer::start)
}

impl<C: Deadlined> Timer<C> {
    /// Leaks a timer and starts its thread: call it once per context type (from a static).
    pub(super) fn start() -> &'static Self {
        let timer: &'static Self = Box::leak(Box::new(Timer {
            queue: Mutex::new(Queue {
                heap: BinaryHeap::new(),
                seq: 0,
                thread: Thread::Running,
            }),
            wake: Condvar::new(),
        }));
        std::thread::spawn(move || timer.run());
        timer
    }

    pub(super) fn arm(&self, at: Instant, ctx: &Arc<C>) {
        let mut queue = self.queue.lock().unwrap();
        while queue
            .heap
            .peek()
            .is_some_and(|entry| entry.0.ctx.strong_count() == 0)
        {
            queue.heap.pop();
        }
        let notify = match queue.thread {
            Thread::Running => false,
            Thread::WaitingForever => true,
            Thread::WaitingUntil(until) => at < until,
        };
        if notify {
            queue.thread = Thread::Running;
        }
        let seq = queue.seq;
        queue.seq += 1;
        queue.heap.push(Reverse(Entry {
            at,
            seq,
            ctx: Arc::downgrade(ctx),
        }));
        drop(queue);
        if notify {
            self.wake.notify_one();
        }
    }

    fn run(&self) {
        let mut queue = self.queue.lock().unwrap();
        loop {
            let now = Instant::now();
            match queue.heap.peek().map(|entry| entry.0.at) {
                None => {
                    queue.thread = Thread::WaitingForever;
                    queue = self.wake.wait(queue).unwrap();
                    queue.thread = Thread::Running;
                }
                Some(at) if at > now => {
                    queue.thread = Thread::WaitingUntil(at);
                    queue = self.wake.wait_timeout(queue, at - now).unwrap().0;
                    queue.thread = Thread::Running;
                }
                Some(_) => {
                    let entry = queue.heap.pop().expect("peeked").0;
                    drop(queue);
                    if let Some(ctx) = entry.ctx.upgrade() {
                        ctx.time_out();
                    }
                    queue = self.queue.lock().unwrap();
                }
            }
        }
    }
}

/// Whether values of `name` are flagged secret (the crate's default list).
pub(super) fn is_secret(name: &HeaderName) -> bool {
    *name == AUTHORIZATION || *name == PROXY_AUTHORIZATION || *name == COOKIE || *name == SET_COOKIE
}

pub(super) fn flag_secrets(map: &mut HeaderMap) {
    for (name, value) in map.iter_mut() {
        if is_secret(name) {
            value.set_sensitive(true);
        }
    }
}

/// Whether the request is gRPC: HTTP/2 or later with an `application/grpc` content type.
pub(super) fn is_grpc<B>(req: &Request<B>) -> bool {
    req.version() >= Version::HTTP_2
        && req
            .headers()
            .get(CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

/// The lean layer, with the layer's deadline.
#[derive(Clone, Copy)]
pub struct Lean {
    pub timeout: Duration,
}

impl<S> Layer<S> for Lean {
    type Service = LeanService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        LeanService {
            inner,
            timeout: self.timeout,
        }
    }
}

#[derive(Clone)]
pub struct LeanService<S> {
    inner: S,
    timeout: Duration,
}

impl<S, B, R> Service<Request<B>> for LeanService<S>
where
    S: Service<Request<B>, Response = Response<R>>,
    R: Default,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = LeanFuture<S::Future>;

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
            request,
            response: Mutex::new(HeaderMap::new()),
            waker: Mutex::new(None),
        });
        let deadline = started + self.timeout;
        timer().arm(deadline, &ctx);
        req.extensions_mut().insert(Carried(Arc::clone(&ctx)));
        let inner = in_scope(deadline, || self.inner.call(req));
        LeanFuture {
            ctx: Some(ctx),
            inner,
            deadline,
        }
    }
}

pin_project! {
    pub struct LeanFuture<F> {
        ctx: Option<Arc<Ctx>>,
        #[pin]
        inner: F,
        deadline: Instant,
    }

    impl<F> PinnedDrop for LeanFuture<F> {
        fn drop(this: Pin<&mut Self>) {
            if let Some(ctx) = this.project().ctx.take() {
                ctx.commit(CANCELLED, None);
            }
        }
    }
}

impl<F, R, E> Future for LeanFuture<F>
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
                if !ctx.commit(ANSWERED, Some(status)) {
                    // The timer won: its answer (not reached in the bench).
                    res = Response::new(R::default());
                    *res.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                }
                {
                    let committed = ctx.response.lock().unwrap();
                    if !committed.is_empty() {
                        res.headers_mut()
                            .extend(committed.iter().map(|(n, v)| (n.clone(), v.clone())));
                    }
                }
                let ctx = this.ctx.take().expect("present");
                res.extensions_mut().insert(Carried(ctx));
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
                res.extensions_mut().insert(Carried(ctx));
                Poll::Ready(Ok(res))
            }
        }
    }
}
