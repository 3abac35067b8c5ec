//! hyper-util's and tonic's clients with connection health: a connector whose connections each
//! carry a [`ConnHealth`], and the client settings that verify a silent connection.

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};

use crate::error::NotWritten;
use hyper_util::client::legacy::connect::{Connected, Connection};
use tower_service::Service;

use super::h2watch::{PREFACE, RST_LEN, SCRATCH, Watch};
use super::health::ConnHealth;
use super::park::Parked;
use super::status::Cause;

/// A connector for hyper-util's legacy `Client` or a tonic `Channel`
/// (`Endpoint::connect_with_connector`) whose connections each carry a [`ConnHealth`].
///
/// It wraps any connector (hyper-util's `HttpConnector`, a TLS connector) and returns its
/// connections as [`HealthIo`]:
///
/// * an I/O error on the connection is recorded in its health ([`ConnHealth::observe`]);
/// * once the health is dead, whoever marked it (the connection itself, your code through the
///   health in a response's extensions, a health checker), every read, write and flush of the
///   connection fails with an error that names the cause, and a connection task parked on a
///   silent socket is woken to see it: the client closes the connection and its pool never
///   hands it out again (hyper-util's pool drops a connection whose task ended; tonic's
///   `Channel` reconnects). No request is written to it after that instant;
/// * with [`health_in_responses`](Self::health_in_responses), hyper-util puts the health in
///   every response's extensions (`response.extensions().get::<ConnHealth>()`).
///
/// The silent connection (a black hole, a peer that stopped reading) sends no error at all:
/// the client's HTTP/2 keep-alive ping finds it. [`client_builder`](Self::client_builder) sets
/// the ping (and the timer hyper-util panics without when a ping is set); for tonic, pass
/// [`PING_AFTER`](Self::PING_AFTER) and [`PING_TIMEOUT`](Self::PING_TIMEOUT) to the `Endpoint`.
/// With a request in flight and nothing read for `PING_AFTER`, the client pings; no answer
/// within `PING_TIMEOUT` closes the connection, and the requests in flight on it fail, to be
/// retried by [`client::ConnRetryLayer`](crate::client) when they may be. A server that is
/// slow but alive answers the ping and keeps its connection.
///
/// Over HTTP/2 whose frames the connection sees (h2c, or TLS done by the wrapped connector),
/// it also finds a server that answers pings but never a request: the reset of a request sent
/// whole that the caller gave up on before any answer, with nothing of any stream read since it
/// opened and no answered stream still open beside it, is held back (released after 0.3 s,
/// but for one per connection kept until it is judged); if the stream is
/// 1.75 s old (held 0.25 s at least) and no frame of any stream arrived meanwhile, the
/// connection is dead ([`Cause::HealthCheck`]); any such frame keeps it. A tokio timer wakes
/// the connection when that is due, so an idle connection is closed on time, before the next
/// request (without a current tokio runtime with timers, at its next read or write; under
/// `panic = "abort"`, a runtime without timers aborts at the first hold, as tokio's timer
/// panics there: [`HealthConnector::client_builder`]'s ping needs timers anyway). When the
/// verdict fails a request h2 had not yet written while every stream written was cancelled,
/// the error says the request was never written, and `ConnRetryLayer` sends it again. A quiet
/// stream nobody cancelled is never judged. The numbers, the matrix of faults and the limits
/// are in [`docs::outgoing`](crate::docs::outgoing).
///
/// # Examples
///
/// ```
/// use http_body_util::Empty;
/// use hyper::body::Bytes;
/// use hyper_util::client::legacy::connect::HttpConnector;
/// use hyper_util::rt::TokioExecutor;
/// use shared_headers::conn::{ConnHealth, HealthConnector};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let client = HealthConnector::client_builder(TokioExecutor::new())
///     .build::<_, Empty<Bytes>>(HealthConnector::new(HttpConnector::new()).health_in_responses());
/// # let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// # let addr = listener.local_addr()?;
/// # tokio::spawn(async move {
/// #     let (stream, _) = listener.accept().await.unwrap();
/// #     let ok = hyper::service::service_fn(|_| async {
/// #         Ok::<_, std::convert::Infallible>(hyper::Response::new(Empty::<Bytes>::new()))
/// #     });
/// #     let _ = hyper::server::conn::http1::Builder::new()
/// #         .serve_connection(hyper_util::rt::TokioIo::new(stream), ok).await;
/// # });
/// let response = client.get(format!("http://{addr}/").parse()?).await?;
/// // The connection's health travels with its answers.
/// let health = response.extensions().get::<ConnHealth>().unwrap();
/// assert!(health.cause().is_none());
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct HealthConnector<C> {
    inner: C,
    in_responses: bool,
}

impl<C> HealthConnector<C> {
    /// Wraps `inner`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use hyper_util::client::legacy::connect::HttpConnector;
    /// # use shared_headers::conn::HealthConnector;
    /// let connector = HealthConnector::new(HttpConnector::new());
    /// # let _ = connector;
    /// ```
    pub fn new(inner: C) -> Self {
        Self {
            inner,
            in_responses: false,
        }
    }

    /// Puts each connection's [`ConnHealth`] in the extensions of every response it carries
    /// (hyper-util's `Connected::extra`), for your code to read, to mark dead, or to watch
    /// ([`ConnHealth::on_close`]: its one slot is yours, the connection's own wake-up does not
    /// take it). Off by default: hyper-util copies it into each response's extension map, two
    /// allocations per response.
    ///
    /// # Examples
    ///
    /// ```
    /// # use hyper_util::client::legacy::connect::HttpConnector;
    /// # use shared_headers::conn::HealthConnector;
    /// let connector = HealthConnector::new(HttpConnector::new()).health_in_responses();
    /// # let _ = connector;
    /// ```
    pub fn health_in_responses(mut self) -> Self {
        self.in_responses = true;
        self
    }
}

impl HealthConnector<()> {
    /// How long a connection with a request in flight may read nothing before the client pings
    /// it (HTTP/2): 300 ms.
    pub const PING_AFTER: Duration = Duration::from_millis(300);

    /// How long the client waits for the ping's answer before it closes the connection: 300 ms.
    /// With [`PING_AFTER`](Self::PING_AFTER), a silent connection is found within 600 ms of
    /// its last byte read, or of the first request after an idle period.
    pub const PING_TIMEOUT: Duration = Duration::from_millis(300);

    /// hyper-util's client builder with what the connector needs: the HTTP/2 keep-alive ping
    /// ([`PING_AFTER`](HealthConnector::PING_AFTER), [`PING_TIMEOUT`](HealthConnector::PING_TIMEOUT),
    /// only while requests are in flight) and tokio's timer (hyper-util panics at the first
    /// connection without one when a ping is set) for the connections and the pool. HTTP/1
    /// has no ping: an HTTP/1 connection is not reused while its answer is outstanding.
    ///
    /// # Examples
    ///
    /// ```
    /// # use http_body_util::Empty;
    /// # use hyper::body::Bytes;
    /// use hyper_util::client::legacy::connect::HttpConnector;
    /// use hyper_util::rt::TokioExecutor;
    /// use shared_headers::conn::HealthConnector;
    ///
    /// let h2c = HealthConnector::client_builder(TokioExecutor::new())
    ///     .http2_only(true)
    ///     .build::<_, Empty<Bytes>>(HealthConnector::new(HttpConnector::new()));
    /// # let _ = h2c;
    /// ```
    pub fn client_builder<E>(executor: E) -> hyper_util::client::legacy::Builder
    where
        E: hyper::rt::Executor<Pin<Box<dyn Future<Output = ()> + Send>>>
            + Send
            + Sync
            + Clone
            + 'static,
    {
        let mut builder = hyper_util::client::legacy::Client::builder(executor);
        builder
            .timer(hyper_util::rt::TokioTimer::new())
            .pool_timer(hyper_util::rt::TokioTimer::new())
            .http2_keep_alive_interval(Self::PING_AFTER)
            .http2_keep_alive_timeout(Self::PING_TIMEOUT)
            .http2_keep_alive_while_idle(false);
        builder
    }
}

impl<C> Service<Uri> for HealthConnector<C>
where
    C: Service<Uri>,
{
    type Response = HealthIo<C::Response>;
    type Error = C::Error;
    type Future = Connecting<C::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        Connecting {
            inner: self.inner.call(uri),
            in_responses: self.in_responses,
        }
    }
}

pin_project_lite::pin_project! {
    /// The future of [`HealthConnector`]'s connection: the inner connector's, its connection
    /// wrapped in a [`HealthIo`].
    #[must_use = "futures do nothing unless polled"]
    pub struct Connecting<F> {
        #[pin]
        inner: F,
        in_responses: bool,
    }
}

impl<F, T, E> Future for Connecting<F>
where
    F: Future<Output = Result<T, E>>,
{
    type Output = Result<HealthIo<T>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let in_responses = *this.in_responses;
        this.inner.poll(cx).map_ok(|io| {
            let mut io = HealthIo::new(io);
            io.in_responses = in_responses;
            io
        })
    }
}

impl<F> fmt::Debug for Connecting<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connecting").finish_non_exhaustive()
    }
}

/// A connection made by [`HealthConnector`]: the inner connection and its [`ConnHealth`].
///
/// Its I/O errors are recorded in the health; once the health is dead, its reads, writes and
/// flushes fail (a parked read is woken), and hyper closes it. Dropped, it marks its health
/// dead with [`Cause::Local`] unless a cause was recorded before.
///
/// # Examples
///
/// ```
/// # use shared_headers::conn::{Cause, HealthIo};
/// let io = HealthIo::new(()); // any connection
/// io.health().mark_dead(Cause::HealthCheck);
/// assert_eq!(io.health().cause(), Some(Cause::HealthCheck));
/// ```
pub struct HealthIo<T> {
    inner: T,
    health: ConnHealth,
    parked: Parker,
    in_responses: bool,
    mode: Mode,
    wake: Wake,
}

/// The timer that wakes an HTTP/2 connection when its watch has a verdict or a release due,
/// so that an idle connection is judged on time too.
enum Wake {
    /// Never needed yet.
    Unarmed,
    /// Made at the first hold (one allocation per connection), reset since.
    Armed(Pin<Box<tokio::time::Sleep>>),
    /// No tokio runtime with timers: the watch acts at the connection's next read or write.
    Off,
}

/// Arms `wake` for `at` and polls it: whether `at` has come.
#[cold]
fn poll_wake(wake: &mut Wake, at: tokio::time::Instant, cx: &mut Context<'_>) -> bool {
    if matches!(wake, Wake::Unarmed) {
        if tokio::runtime::Handle::try_current().is_err() {
            *wake = Wake::Off;
            return false;
        }
        *wake = match std::panic::catch_unwind(|| Box::pin(tokio::time::sleep_until(at))) {
            Ok(sleep) => Wake::Armed(sleep),
            Err(_) => Wake::Off,
        };
    }
    let Wake::Armed(sleep) = wake else {
        return false;
    };
    // A runtime built without `enable_time` panics here: the timer is off then.
    let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if sleep.deadline() != at {
            sleep.as_mut().reset(at);
        }
        sleep.as_mut().poll(cx).is_ready()
    }));
    polled.unwrap_or_else(|_| {
        *wake = Wake::Off;
        false
    })
}

/// What the first write said the connection speaks.
enum Mode {
    /// This many bytes of the HTTP/2 client preface written so far (none: nothing written).
    Unknown(usize),
    /// Not HTTP/2 in the clear (HTTP/1.1, TLS records): bytes pass untouched.
    Off,
    /// HTTP/2: frames watched (`h2watch`).
    H2(Box<Watch>),
}

impl Mode {
    /// `chunk` was written while the mode was not yet known (or just became HTTP/2).
    fn written(&mut self, chunk: &[u8]) {
        match self {
            Mode::Off => {}
            // Written through the watch's own path (`plan`, `sent`).
            Mode::H2(_) => {}
            Mode::Unknown(matched) => {
                let want = &PREFACE[*matched..];
                let k = chunk.len().min(want.len());
                if chunk[..k] != want[..k] {
                    *self = Mode::Off;
                    return;
                }
                *matched += k;
                if *matched == PREFACE.len() {
                    let mut watch = Watch::new();
                    watch.sent_first(&chunk[k..]);
                    *self = Mode::H2(watch);
                }
            }
        }
    }
}

impl<T> HealthIo<T> {
    /// Wraps `inner` with a new, open health.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::conn::{HealthIo, Status};
    /// assert_eq!(HealthIo::new(()).health().status(), Status::Open);
    /// ```
    pub fn new(inner: T) -> Self {
        let health = ConnHealth::new();
        let parked = Arc::new(Parked::new());
        let waker = Arc::clone(&parked);
        // The crate's own slot: the user's `on_close` stays free.
        health.on_close_wake(move || waker.wake());
        Self {
            inner,
            health,
            parked: Parker {
                shared: parked,
                last: None,
            },
            in_responses: false,
            mode: Mode::Unknown(0),
            wake: Wake::Unarmed,
        }
    }

    /// The connection's health (a handle: clone it to keep it).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::conn::{Cause, HealthIo};
    /// let io = HealthIo::new(());
    /// let health = io.health().clone();
    /// drop(io); // hyper dropped the connection
    /// assert_eq!(health.cause(), Some(Cause::Local));
    /// ```
    pub fn health(&self) -> &ConnHealth {
        &self.health
    }

    /// The connection inside.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::conn::HealthIo;
    /// assert_eq!(*HealthIo::new(7).get_ref(), 7);
    /// ```
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// The error every operation returns once the health is dead.
    #[cold]
    fn died(&self) -> io::Error {
        died(self.health.cause().unwrap_or(Cause::Local))
    }

    /// Records `err` in the health; returns it.
    #[cold]
    fn record(&self, err: io::Error) -> io::Error {
        self.health.observe(&err);
        err
    }

    /// `Pending` from the inner connection: park the task's waker where a death wakes it, or
    /// fail now if it is already dead.
    fn pending<R>(&mut self, cx: &Context<'_>) -> Poll<io::Result<R>> {
        pending(&mut self.parked, &self.health, cx)
    }
}

/// The connection's waker slot, and the connection task's own copy of the waker it parked
/// last: parking the same task again locks nothing.
struct Parker {
    shared: Arc<Parked>,
    last: Option<std::task::Waker>,
}

/// [`HealthIo::pending`] over its parts.
#[inline(always)]
fn pending<R>(parked: &mut Parker, health: &ConnHealth, cx: &Context<'_>) -> Poll<io::Result<R>> {
    if parked
        .shared
        .park_cached(health, cx.waker(), &mut parked.last)
    {
        Poll::Pending
    } else {
        dead_now(health)
    }
}

/// The connection died before its task could park.
#[cold]
fn dead_now<R>(health: &ConnHealth) -> Poll<io::Result<R>> {
    Poll::Ready(Err(died(health.cause().unwrap_or(Cause::Local))))
}

/// Records `err` in `health`; returns it.
#[cold]
fn record(health: &ConnHealth, err: io::Error) -> io::Error {
    health.observe(&err);
    err
}

/// The HTTP/2 verdict before an operation: a held stream unanswered while nothing moved marks
/// the connection dead (see `h2watch`).
#[inline]
fn verdict(watch: &mut Watch, health: &ConnHealth) -> io::Result<()> {
    if !watch.quiet() && watch.dead() {
        health.mark_dead(Cause::HealthCheck);
        let err = died(health.cause().unwrap_or(Cause::HealthCheck));
        if watch.none_live() {
            // Every stream open on the connection is one its caller cancelled: the requests
            // this error fails (those h2 took but the watch never saw written) were not
            // written, and the error says so (`ConnRetryLayer` sends them again).
            return Err(io::Error::new(
                err.kind(),
                NotWritten(Died(Cause::HealthCheck)),
            ));
        }
        return Err(err);
    }
    Ok(())
}

/// Something is held: sets the timer to wake the connection when its verdict or release is
/// due, taking them if due already (hyper's connection task flushes after a pending read and
/// after its writes: a release goes out then).
#[cold]
fn arm(
    watch: &mut Watch,
    wake: &mut Wake,
    health: &ConnHealth,
    cx: &mut Context<'_>,
) -> io::Result<()> {
    let mut rounds = 0;
    while let Some(at) = watch.next_due() {
        if !poll_wake(wake, at, cx) {
            break;
        }
        verdict(watch, health)?;
        rounds += 1;
        if rounds == 3 {
            // The timer came a hair before the clock: look again soon.
            cx.waker().wake_by_ref();
            break;
        }
    }
    Ok(())
}

/// Writes a released `RST_STREAM`, if one is due, before any other byte. Called only when
/// the watch is not quiet.
#[inline(never)]
fn push_due<T: Write + Unpin>(
    inner: &mut T,
    watch: &mut Watch,
    health: &ConnHealth,
    parked: &mut Parker,
    cx: &mut Context<'_>,
) -> Poll<io::Result<()>> {
    while let Some(rest) = watch.due() {
        match Pin::new(&mut *inner).poll_write(cx, rest) {
            Poll::Ready(Ok(0)) => {
                return Poll::Ready(Err(record(health, io::ErrorKind::WriteZero.into())));
            }
            Poll::Ready(Ok(n)) => watch.injected(n),
            Poll::Ready(Err(err)) => return Poll::Ready(Err(record(health, err))),
            Poll::Pending => return pending(parked, health, cx),
        }
    }
    Poll::Ready(Ok(()))
}

/// The error of an operation on a connection marked dead: its kind from the cause, its message
/// naming it.
fn died(cause: Cause) -> io::Error {
    let kind = match cause {
        Cause::Io(kind) => kind,
        _ => io::ErrorKind::ConnectionAborted,
    };
    io::Error::new(kind, Died(cause))
}

/// The source of [`died`]'s error.
#[derive(Debug)]
struct Died(Cause);

impl fmt::Display for Died {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the connection is dead ({})", self.0)
    }
}

impl std::error::Error for Died {}

impl<T> Drop for HealthIo<T> {
    fn drop(&mut self) {
        self.health.mark_dead(Cause::Local);
    }
}

impl<T: fmt::Debug> fmt::Debug for HealthIo<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HealthIo")
            .field("inner", &self.inner)
            .field("health", &self.health)
            .finish()
    }
}

impl<T: Read + Unpin> Read for HealthIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.health.is_dead() {
            return Poll::Ready(Err(this.died()));
        }
        let Mode::H2(watch) = &mut this.mode else {
            return match Pin::new(&mut this.inner).poll_read(cx, buf) {
                Poll::Ready(Ok(())) => Poll::Ready(Ok(())),
                Poll::Ready(Err(err)) => Poll::Ready(Err(this.record(err))),
                Poll::Pending => this.pending(cx),
            };
        };
        // HTTP/2: read through the scratch to see the frame headers, then hand the bytes on.
        verdict(watch, &this.health)?;
        let n = buf.remaining().min(SCRATCH);
        let mut read = hyper::rt::ReadBuf::new(&mut watch.scratch[..n]);
        match Pin::new(&mut this.inner).poll_read(cx, read.unfilled()) {
            Poll::Ready(Ok(())) => {
                let filled = read.filled().len();
                buf.put_slice(&watch.scratch[..filled]);
                watch.received_scratch(filled);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(err)) => Poll::Ready(Err(record(&this.health, err))),
            Poll::Pending => {
                if !watch.quiet() {
                    arm(watch, &mut this.wake, &this.health, cx)?;
                }
                pending(&mut this.parked, &this.health, cx)
            }
        }
    }
}

impl<T: Write + Unpin> Write for HealthIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.health.is_dead() {
            return Poll::Ready(Err(this.died()));
        }
        let Mode::H2(watch) = &mut this.mode else {
            return match Pin::new(&mut this.inner).poll_write(cx, buf) {
                Poll::Ready(Ok(n)) => {
                    if matches!(this.mode, Mode::Unknown(_)) {
                        this.mode.written(&buf[..n.min(buf.len())]);
                    }
                    Poll::Ready(Ok(n))
                }
                Poll::Ready(Err(err)) => Poll::Ready(Err(this.record(err))),
                Poll::Pending => this.pending(cx),
            };
        };
        verdict(watch, &this.health)?;
        let (planned, after) = loop {
            if !watch.quiet() {
                ready!(push_due(
                    &mut this.inner,
                    watch,
                    &this.health,
                    &mut this.parked,
                    cx
                ))?;
            }
            let (at, after) = watch.plan(buf);
            match at {
                Some(0) => {
                    if watch.at_stop(buf) {
                        arm(watch, &mut this.wake, &this.health, cx)?;
                        return Poll::Ready(Ok(RST_LEN));
                    }
                    // The held resets were released to go first: write them.
                }
                Some(at) => break (&buf[..at], after),
                None => break (buf, after),
            }
        };
        match Pin::new(&mut this.inner).poll_write(cx, planned) {
            Poll::Ready(Ok(n)) => {
                watch.sent(planned, n, after);
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(err)) => Poll::Ready(Err(record(&this.health, err))),
            Poll::Pending => pending(&mut this.parked, &this.health, cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.health.is_dead() {
            return Poll::Ready(Err(this.died()));
        }
        let Mode::H2(watch) = &mut this.mode else {
            return match Pin::new(&mut this.inner).poll_write_vectored(cx, bufs) {
                Poll::Ready(Ok(n)) => {
                    let mut left = n;
                    for buf in bufs {
                        if left == 0 {
                            break;
                        }
                        let take = left.min(buf.len());
                        match &mut this.mode {
                            Mode::Off => break,
                            Mode::Unknown(_) => this.mode.written(&buf[..take]),
                            // The preface ended in an earlier buffer: note what follows it.
                            Mode::H2(watch) => watch.sent_first(&buf[..take]),
                        }
                        left -= take;
                    }
                    Poll::Ready(Ok(n))
                }
                Poll::Ready(Err(err)) => Poll::Ready(Err(this.record(err))),
                Poll::Pending => this.pending(cx),
            };
        };
        verdict(watch, &this.health)?;
        let (at, after) = loop {
            if !watch.quiet() {
                ready!(push_due(
                    &mut this.inner,
                    watch,
                    &this.health,
                    &mut this.parked,
                    cx
                ))?;
            }
            let (at, after) = watch.plan_vectored(bufs);
            if at != Some(0) {
                break (at, after);
            }
            let (whole, n) = Watch::head_of(bufs);
            if watch.at_stop(&whole[..n]) {
                arm(watch, &mut this.wake, &this.health, cx)?;
                return Poll::Ready(Ok(RST_LEN));
            }
            // The held resets were released to go first: write them.
        };
        let result = match at {
            None => Pin::new(&mut this.inner).poll_write_vectored(cx, bufs),
            Some(at) => {
                // A frame to stop at, not first: write what comes before it in the first
                // buffer that is not empty.
                let first: &[u8] = bufs.iter().find(|b| !b.is_empty()).map_or(&[], |b| b);
                let part = &first[..at.min(first.len())];
                return match Pin::new(&mut this.inner).poll_write(cx, part) {
                    Poll::Ready(Ok(n)) => {
                        if at <= first.len() {
                            watch.sent(part, n, after);
                        } else {
                            // The walk went past this buffer: step over what was written.
                            watch.step(&part[..n.min(part.len())]);
                        }
                        Poll::Ready(Ok(n))
                    }
                    Poll::Ready(Err(err)) => Poll::Ready(Err(record(&this.health, err))),
                    Poll::Pending => pending(&mut this.parked, &this.health, cx),
                };
            }
        };
        match result {
            Poll::Ready(Ok(n)) => {
                watch.sent_vectored(bufs, n, after);
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(err)) => Poll::Ready(Err(record(&this.health, err))),
            Poll::Pending => pending(&mut this.parked, &this.health, cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.health.is_dead() {
            return Poll::Ready(Err(this.died()));
        }
        if let Mode::H2(watch) = &mut this.mode {
            verdict(watch, &this.health)?;
            if !watch.quiet() {
                ready!(push_due(
                    &mut this.inner,
                    watch,
                    &this.health,
                    &mut this.parked,
                    cx
                ))?;
                // A reset held by the writes this flush ends: wake when it is due.
                arm(watch, &mut this.wake, &this.health, cx)?;
            }
        }
        match Pin::new(&mut this.inner).poll_flush(cx) {
            Poll::Ready(Ok(())) => Poll::Ready(Ok(())),
            Poll::Ready(Err(err)) => Poll::Ready(Err(this.record(err))),
            Poll::Pending => this.pending(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Closing goes through even on a dead connection.
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

impl<T: Connection> Connection for HealthIo<T> {
    fn connected(&self) -> Connected {
        let mut connected = self.inner.connected();
        if self.in_responses {
            connected = connected.extra(self.health.clone());
        }
        if self.health.is_dead() {
            connected.poison();
        }
        connected
    }
}
