//! hyper-util's and tonic's clients with connection health: a connector whose connections each
//! carry a [`ConnHealth`], and the client settings that verify a silent connection.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Uri;
use tower_service::Service;

#[cfg(doc)]
use super::health::ConnHealth;
use super::health_io::HealthIo;
#[cfg(doc)]
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
