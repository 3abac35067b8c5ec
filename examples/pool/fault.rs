//! The fault matrix's harness, shared by `examples/pool.rs` and `tests/conn_clients.rs`: a local
//! HTTP/1.1 + h2c server, an in-process fault proxy in front of it (127.0.0.1:0), and the
//! clients under test (hyper-util's legacy `Client` and tonic's `Channel`; stock, with
//! keep-alive pings, and with this crate's `HealthConnector` + `ConnRetryLayer`).
//!
//! One run: two warm-up requests, then the fault on every connection open at that instant
//! (connections made after it are healthy: a fresh connection works), then `requests`
//! requests, one every `interval`, each with its own deadline, each in its own task.

#![allow(dead_code)]

use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{Request, Response, StatusCode};
use http_body_util::{Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use shared_headers::client::ConnRetryLayer;
use shared_headers::conn::HealthConnector;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tower::{Layer, ServiceExt};

/// What goes wrong, on the connections open when it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Nothing passes, either way; the sockets stay open.
    BlackHole,
    /// The client's bytes stop reaching the server (the server's would still pass).
    WriteStall,
    /// The proxy resets the idle connection (RST).
    RstIdle,
    /// The proxy closes the idle connection (FIN).
    FinIdle,
    /// The proxy closes the connection (FIN) when the next request's bytes arrive.
    FinOnRequest,
    /// The proxy resets the connection (RST) when the next request's bytes arrive.
    RstOnRequest,
    /// The server sends GOAWAY (HTTP/2; HTTP/1: it closes once idle).
    GoAway,
    /// The proxy sends the client an HTTP/2 GOAWAY with an error code (`ENHANCE_YOUR_CALM`)
    /// on the idle connection, then closes it (FIN), as a server that gives up on a client.
    GoAwayError,
    /// No fault: the server answers at 1.5 times the deadline (1.5 s after a 1 s deadline).
    Slow,
    /// HTTP/2: the server's stack stays alive (its pings, settings and connection window pass
    /// both ways) but no request reaches its application (the proxy drops the client's
    /// `HEADERS`, `DATA`, `RST_STREAM` and every stream-level frame): it answers a ping, never
    /// a request.
    PingOnly,
}

impl Fault {
    /// Every fault of the matrix, in the table's order.
    pub const MATRIX: [Fault; 8] = [
        Fault::BlackHole,
        Fault::WriteStall,
        Fault::RstIdle,
        Fault::FinIdle,
        Fault::FinOnRequest,
        Fault::RstOnRequest,
        Fault::GoAway,
        Fault::GoAwayError,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fault::BlackHole => "black hole",
            Fault::WriteStall => "write stall",
            Fault::RstIdle => "RST idle",
            Fault::FinIdle => "FIN idle",
            Fault::FinOnRequest => "FIN at request",
            Fault::RstOnRequest => "RST at request",
            Fault::GoAway => "GOAWAY",
            Fault::GoAwayError => "GOAWAY(error)",
            Fault::Slow => "slow server",
            Fault::PingOnly => "ping-only server",
        }
    }
}

/// Which client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// hyper-util's legacy `Client`, HTTP/1.1.
    HyperH1,
    /// hyper-util's legacy `Client`, h2c (prior knowledge).
    HyperH2,
    /// tonic's `Channel` (h2c).
    Tonic,
    /// reqwest's `Client`, h2c (prior knowledge): hyper-util's legacy `Client` inside, with no
    /// hook for a connector of ours (its connection type is sealed).
    Reqwest,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::HyperH1 => "hyper-util, HTTP/1.1",
            Kind::HyperH2 => "hyper-util, HTTP/2",
            Kind::Tonic => "tonic Channel, HTTP/2",
            Kind::Reqwest => "reqwest, HTTP/2",
        }
    }
}

/// How the client is set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Config {
    /// The defaults.
    Stock,
    /// Keep-alive ping every 1 s, 1 s timeout, while idle too (and the timer it needs).
    Ping,
    /// `HealthConnector` (its builder or its ping settings) and `ConnRetryLayer`.
    Crate,
    /// The crate's ping settings (`PING_AFTER`, `PING_TIMEOUT`, only with requests in flight)
    /// and nothing else: what a client without a connector hook (reqwest) can take of them.
    CratePing,
}

impl Config {
    pub fn name(self) -> &'static str {
        match self {
            Config::Stock => "stock",
            Config::Ping => "stock + ping 1 s/1 s/idle",
            Config::Crate => "HealthConnector + ConnRetryLayer",
            Config::CratePing => "stock + ping 300 ms/300 ms",
        }
    }
}

/// The state the proxy and the server share with the run: the fault, and from which
/// connection on connections are healthy again.
#[derive(Clone, Copy, Debug)]
struct State {
    fault: Option<Fault>,
    /// Proxy connections with an id below this one are faulted.
    proxy_before: u64,
    /// Server connections with an id below this one get GOAWAY.
    server_before: u64,
    at: Instant,
}

struct Shared {
    state: watch::Sender<State>,
    proxy_conns: AtomicU64,
    server_conns: AtomicU64,
    /// When the client closed a faulted connection, after the fault.
    client_closed: Mutex<Vec<Duration>>,
}

/// A server and its fault proxy.
pub struct Bench {
    shared: Arc<Shared>,
    pub proxy: SocketAddr,
}

impl Bench {
    /// Starts the server (answers every request with 200 after `delay`) and the proxy.
    pub async fn start(delay: Duration) -> std::io::Result<Bench> {
        let (state, _) = watch::channel(State {
            fault: None,
            proxy_before: 0,
            server_before: 0,
            at: Instant::now(),
        });
        let shared = Arc::new(Shared {
            state,
            proxy_conns: AtomicU64::new(0),
            server_conns: AtomicU64::new(0),
            client_closed: Mutex::new(Vec::new()),
        });
        let server = TcpListener::bind("127.0.0.1:0").await?;
        let upstream = server.local_addr()?;
        tokio::spawn(serve(server, shared.clone(), delay));
        let proxy = TcpListener::bind("127.0.0.1:0").await?;
        let proxy_addr = proxy.local_addr()?;
        tokio::spawn(run_proxy(proxy, upstream, shared.clone()));
        Ok(Bench {
            shared,
            proxy: proxy_addr,
        })
    }

    /// Starts `fault` on every connection open now.
    pub fn fault(&self, fault: Fault) -> Instant {
        let at = Instant::now();
        self.shared.state.send_replace(State {
            fault: Some(fault),
            proxy_before: self.shared.proxy_conns.load(Ordering::SeqCst),
            server_before: self.shared.server_conns.load(Ordering::SeqCst),
            at,
        });
        at
    }

    /// Connections the clients opened through the proxy.
    pub fn connections(&self) -> u64 {
        self.shared.proxy_conns.load(Ordering::SeqCst)
    }

    /// When the client closed its first faulted connection, after the fault (seen by the proxy
    /// for the faults it reads through: black hole, write stall).
    pub fn first_client_close(&self) -> Option<Duration> {
        self.shared
            .client_closed
            .lock()
            .unwrap()
            .iter()
            .min()
            .copied()
    }
}

async fn serve(listener: TcpListener, shared: Arc<Shared>, delay: Duration) {
    while let Ok((stream, _)) = listener.accept().await {
        let id = shared.server_conns.fetch_add(1, Ordering::SeqCst);
        let mut state = shared.state.subscribe();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |_req: Request<Incoming>| async move {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
            });
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            let mut shut = false;
            loop {
                tokio::select! {
                    _ = conn.as_mut() => return,
                    changed = state.changed(), if !shut => {
                        if changed.is_err() {
                            shut = true;
                            continue;
                        }
                        let now = *state.borrow_and_update();
                        if now.fault == Some(Fault::GoAway) && id < now.server_before {
                            conn.as_mut().graceful_shutdown();
                            shut = true;
                        }
                    }
                }
            }
        });
    }
}

async fn run_proxy(listener: TcpListener, upstream: SocketAddr, shared: Arc<Shared>) {
    while let Ok((client, _)) = listener.accept().await {
        let id = shared.proxy_conns.fetch_add(1, Ordering::SeqCst);
        let shared = shared.clone();
        tokio::spawn(async move {
            if let Ok(server) = TcpStream::connect(upstream).await {
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                pump(id, client, server, shared).await;
            }
        });
    }
}

enum End {
    Fin,
    Rst,
    ClientClosed,
    Done,
}

/// Forwards one connection both ways, applying the fault when it concerns this connection.
async fn pump(id: u64, mut client: TcpStream, mut server: TcpStream, shared: Arc<Shared>) {
    let mut state = shared.state.subscribe();
    let mut from_client = vec![0u8; 64 * 1024];
    let mut from_server = vec![0u8; 64 * 1024];
    let mut frames = ClientFrames::default();
    let mut kept = Vec::with_capacity(64 * 1024);
    let end = {
        let (mut cr, mut cw) = client.split();
        let (mut sr, mut sw) = server.split();
        loop {
            let now = *state.borrow_and_update();
            let fault = now.fault.filter(|_| id < now.proxy_before);
            match fault {
                Some(Fault::RstIdle) => break End::Rst,
                Some(Fault::FinIdle) => break End::Fin,
                Some(Fault::GoAwayError) => {
                    // GOAWAY, stream 0, last stream id 2^31 - 1, ENHANCE_YOUR_CALM.
                    const GOAWAY: [u8; 17] = [
                        0, 0, 8, 7, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0x0b,
                    ];
                    let _ = cw.write_all(&GOAWAY).await;
                    break End::Fin;
                }
                _ => {}
            }
            tokio::select! {
                read = cr.read(&mut from_client) => {
                    let n = match read {
                        Ok(0) | Err(_) => {
                            if fault.is_some() {
                                break End::ClientClosed;
                            }
                            break End::Done;
                        }
                        Ok(n) => n,
                    };
                    // "At request": the first bytes 30 ms or more after the fault (HTTP/2's
                    // acknowledgements of the warm-up's frames come before).
                    let request = now.at.elapsed() >= Duration::from_millis(30);
                    kept.clear();
                    frames.filter(
                        &from_client[..n],
                        fault == Some(Fault::PingOnly),
                        &mut kept,
                    );
                    match fault {
                        Some(Fault::BlackHole | Fault::WriteStall) => {}
                        Some(Fault::FinOnRequest) if request => break End::Fin,
                        Some(Fault::RstOnRequest) if request => break End::Rst,
                        Some(Fault::PingOnly) => {
                            if sw.write_all(&kept).await.is_err() {
                                break End::Done;
                            }
                        }
                        _ => {
                            if sw.write_all(&from_client[..n]).await.is_err() {
                                break End::Done;
                            }
                        }
                    }
                }
                read = sr.read(&mut from_server) => {
                    let n = match read {
                        Ok(0) | Err(_) => break End::Fin,
                        Ok(n) => n,
                    };
                    if fault != Some(Fault::BlackHole)
                        && cw.write_all(&from_server[..n]).await.is_err()
                    {
                        break End::Done;
                    }
                }
                changed = state.changed() => {
                    if changed.is_err() {
                        break End::Done;
                    }
                }
            }
        }
    };
    match end {
        End::Rst => {
            #[allow(deprecated)] // `set_linger`: what makes the close an RST.
            let _ = client.set_linger(Some(Duration::ZERO));
            drop(client);
        }
        End::Fin => {
            let _ = client.shutdown().await;
            // Read what is left so that the close stays a FIN, then let go.
            let _ = tokio::time::timeout(Duration::from_millis(50), async {
                let mut sink = [0u8; 4096];
                while matches!(client.read(&mut sink).await, Ok(n) if n > 0) {}
            })
            .await;
        }
        End::ClientClosed => {
            let at = shared.state.borrow().at;
            shared.client_closed.lock().unwrap().push(at.elapsed());
        }
        End::Done => {}
    }
}

/// The client's HTTP/2 frames, followed from the connection's first byte, for
/// [`Fault::PingOnly`]: once `filtering`, only connection-level frames pass (PING, SETTINGS,
/// WINDOW_UPDATE on stream 0). Not HTTP/2 (no preface): nothing passes while filtering.
#[derive(Default)]
struct ClientFrames {
    /// Preface bytes seen (24: done).
    preface: usize,
    not_h2: bool,
    head: Vec<u8>,
    /// Payload bytes left of the current frame, and whether it passes.
    left: usize,
    keep: bool,
}

impl ClientFrames {
    const PREFACE: &'static [u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

    fn filter(&mut self, mut bytes: &[u8], filtering: bool, out: &mut Vec<u8>) {
        while !bytes.is_empty() {
            if self.not_h2 {
                if !filtering {
                    out.extend_from_slice(bytes);
                }
                return;
            }
            if self.preface < 24 {
                let want = &Self::PREFACE[self.preface..];
                let k = want.len().min(bytes.len());
                if bytes[..k] != want[..k] {
                    self.not_h2 = true;
                    continue;
                }
                out.extend_from_slice(&bytes[..k]);
                self.preface += k;
                bytes = &bytes[k..];
                continue;
            }
            if self.left > 0 {
                let k = self.left.min(bytes.len());
                if self.keep {
                    out.extend_from_slice(&bytes[..k]);
                }
                self.left -= k;
                bytes = &bytes[k..];
                continue;
            }
            let k = (9 - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..k]);
            bytes = &bytes[k..];
            if self.head.len() == 9 {
                let h = &self.head;
                let len = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
                let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
                self.keep = !filtering || matches!(h[3], 4 | 6) || (h[3] == 8 && stream == 0);
                if self.keep {
                    out.extend_from_slice(h);
                }
                self.left = len;
                self.head.clear();
            }
        }
    }
}

/// One request's outcome.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub sent: Duration,
    pub returned: Duration,
    pub error: Option<String>,
}

type Send = Arc<
    dyn Fn() -> Pin<Box<dyn Future<Output = Result<StatusCode, String>> + std::marker::Send>>
        + std::marker::Send
        + Sync,
>;

/// The full error chain, one line.
fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = err.to_string();
    let mut next = err.source();
    while let Some(e) = next {
        out.push_str(": ");
        out.push_str(&e.to_string());
        next = e.source();
    }
    out
}

/// A client of `kind` set up as `config`, sending `method` requests to `addr`.
pub fn client(kind: Kind, config: Config, addr: SocketAddr, method: http::Method) -> Send {
    let url = format!("http://{addr}/");
    match kind {
        Kind::Reqwest => reqwest_client(config, url, method),
        Kind::HyperH1 | Kind::HyperH2 => {
            let h2 = kind == Kind::HyperH2;
            match config {
                Config::Stock | Config::Ping | Config::CratePing => {
                    let mut builder = Client::builder(TokioExecutor::new());
                    builder.http2_only(h2);
                    if config == Config::Ping {
                        builder
                            .timer(TokioTimer::new())
                            .http2_keep_alive_interval(Duration::from_secs(1))
                            .http2_keep_alive_timeout(Duration::from_secs(1))
                            .http2_keep_alive_while_idle(true);
                    }
                    if config == Config::CratePing {
                        builder
                            .timer(TokioTimer::new())
                            .http2_keep_alive_interval(HealthConnector::PING_AFTER)
                            .http2_keep_alive_timeout(HealthConnector::PING_TIMEOUT)
                            .http2_keep_alive_while_idle(false);
                    }
                    let client = builder.build_http::<Empty<Bytes>>();
                    Arc::new(move || {
                        let client = client.clone();
                        let request = get(&url, &method);
                        Box::pin(async move {
                            client
                                .request(request)
                                .await
                                .map(|r| r.status())
                                .map_err(|e| chain(&e))
                        })
                    })
                }
                Config::Crate => {
                    let client = HealthConnector::client_builder(TokioExecutor::new())
                        .http2_only(h2)
                        .build::<_, Empty<Bytes>>(HealthConnector::new(HttpConnector::new()));
                    let client = ConnRetryLayer::new().layer(client);
                    Arc::new(move || {
                        let client = client.clone();
                        let request = get(&url, &method);
                        Box::pin(async move {
                            client
                                .oneshot(request)
                                .await
                                .map(|r| r.status())
                                .map_err(|e| chain(&e))
                        })
                    })
                }
            }
        }
        Kind::Tonic => {
            let endpoint = tonic::transport::Endpoint::from_shared(url.clone()).expect("a URL");
            let channel = match config {
                Config::Stock => endpoint.connect_lazy(),
                Config::Ping => endpoint
                    .http2_keep_alive_interval(Duration::from_secs(1))
                    .keep_alive_timeout(Duration::from_secs(1))
                    .keep_alive_while_idle(true)
                    .connect_lazy(),
                Config::CratePing => endpoint
                    .http2_keep_alive_interval(HealthConnector::PING_AFTER)
                    .keep_alive_timeout(HealthConnector::PING_TIMEOUT)
                    .keep_alive_while_idle(false)
                    .connect_lazy(),
                Config::Crate => endpoint
                    .http2_keep_alive_interval(HealthConnector::PING_AFTER)
                    .keep_alive_timeout(HealthConnector::PING_TIMEOUT)
                    .keep_alive_while_idle(false)
                    .connect_with_connector_lazy(HealthConnector::new(HttpConnector::new())),
            };
            let retry = config == Config::Crate;
            let client = ConnRetryLayer::new().layer(channel.clone());
            Arc::new(move || {
                let request = Request::builder()
                    .method(method.clone())
                    .uri(&url)
                    .body(tonic::body::Body::empty())
                    .expect("a request");
                let (client, channel) = (client.clone(), channel.clone());
                Box::pin(async move {
                    if retry {
                        client
                            .oneshot(request)
                            .await
                            .map(|r| r.status())
                            .map_err(|e| chain(&e))
                    } else {
                        channel
                            .oneshot(request)
                            .await
                            .map(|r| r.status())
                            .map_err(|e| chain(&e))
                    }
                })
            })
        }
    }
}

/// reqwest's client over h2c (prior knowledge), as `config` sets it up: its own settings only
/// (there is no `Crate` setup: no connector of ours fits under it).
fn reqwest_client(config: Config, url: String, method: http::Method) -> Send {
    let mut builder = reqwest::Client::builder()
        .http2_prior_knowledge()
        .no_proxy();
    match config {
        Config::Stock => {}
        Config::Ping => {
            builder = builder
                .http2_keep_alive_interval(Duration::from_secs(1))
                .http2_keep_alive_timeout(Duration::from_secs(1))
                .http2_keep_alive_while_idle(true);
        }
        Config::CratePing | Config::Crate => {
            builder = builder
                .http2_keep_alive_interval(HealthConnector::PING_AFTER)
                .http2_keep_alive_timeout(HealthConnector::PING_TIMEOUT)
                .http2_keep_alive_while_idle(false);
        }
    }
    let client = builder.build().expect("a reqwest client");
    Arc::new(move || {
        let request = client.request(method.clone(), &url);
        Box::pin(async move {
            request
                .send()
                .await
                .map(|r| r.status())
                .map_err(|e| chain(&e))
        })
    })
}

fn get(url: &str, method: &http::Method) -> Request<Empty<Bytes>> {
    Request::builder()
        .method(method.clone())
        .uri(url)
        .body(Empty::new())
        .expect("a request")
}

/// One row of the matrix.
#[derive(Clone, Debug)]
pub struct Row {
    pub kind: Kind,
    pub config: Config,
    pub fault: Fault,
    pub outcomes: Vec<Outcome>,
    /// Connections opened, warm-up included.
    pub connections: u64,
    /// When the client closed the faulted connection (proxy's view), after the fault.
    pub closed_at: Option<Duration>,
}

impl Row {
    pub fn failed(&self) -> usize {
        self.outcomes.iter().filter(|o| o.error.is_some()).count()
    }

    /// Failed requests sent after the first failure had been returned: requests lost to a
    /// connection the caller had already seen fail.
    pub fn failed_after_first_failure(&self) -> usize {
        let Some(first) = self
            .outcomes
            .iter()
            .filter(|o| o.error.is_some())
            .map(|o| o.returned)
            .min()
        else {
            return 0;
        };
        self.outcomes
            .iter()
            .filter(|o| o.error.is_some() && o.sent > first)
            .count()
    }

    /// The first error, for the report.
    pub fn first_error(&self) -> Option<&str> {
        self.outcomes
            .iter()
            .filter_map(|o| o.error.as_deref())
            .next()
    }
}

impl fmt::Display for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "| {} | {} | {} | {} of {} | {} | {} | {} |",
            self.kind.name(),
            self.config.name(),
            self.fault.name(),
            self.failed(),
            self.outcomes.len(),
            self.failed_after_first_failure(),
            self.closed_at
                .map_or("-".to_string(), |d| format!("{:.2} s", d.as_secs_f64())),
            self.connections,
        )
    }
}

/// The table's head, for [`Row`]'s `Display`.
pub const HEAD: &str = "| client | setup | fault | failed | failed after the first failure returned | faulted connection closed by the client | connections |\n|---|---|---|---|---|---|---|";

/// Runs one row: warm-up, fault, `requests` requests of `method` one every `interval` with
/// `deadline` each.
pub async fn run(
    kind: Kind,
    config: Config,
    fault: Fault,
    method: http::Method,
    requests: usize,
    interval: Duration,
    deadline: Duration,
) -> std::io::Result<Row> {
    run_after(
        kind,
        config,
        fault,
        method,
        requests,
        interval,
        deadline,
        Duration::ZERO,
    )
    .await
}

/// [`run`], the requests starting `idle` after the fault (the times in the row are still
/// counted from the fault).
#[allow(clippy::too_many_arguments)]
pub async fn run_after(
    kind: Kind,
    config: Config,
    fault: Fault,
    method: http::Method,
    requests: usize,
    interval: Duration,
    deadline: Duration,
    idle: Duration,
) -> std::io::Result<Row> {
    let delay = if fault == Fault::Slow {
        deadline * 3 / 2
    } else {
        Duration::ZERO
    };
    let bench = Bench::start(delay).await?;
    let warm = client(kind, config, bench.proxy, http::Method::GET);
    if fault != Fault::Slow {
        for _ in 0..2 {
            let status = tokio::time::timeout(Duration::from_secs(5), warm())
                .await
                .map_err(|_| std::io::Error::other("warm-up timed out"))?;
            status.map_err(std::io::Error::other)?;
        }
    }
    let send = if method == http::Method::GET {
        warm
    } else {
        // Another client of the same kind would open its own connections: reuse the pool.
        client(kind, config, bench.proxy, method.clone())
    };
    if method != http::Method::GET {
        // Its own warm-up, so the fault meets an open connection.
        let _ = tokio::time::timeout(Duration::from_secs(5), send()).await;
    }
    let start = if fault == Fault::Slow {
        Instant::now()
    } else {
        bench.fault(fault)
    };
    let mut tasks = Vec::with_capacity(requests);
    for i in 0..requests {
        tokio::time::sleep_until((start + idle + interval * (i as u32 + 1) - interval / 2).into())
            .await;
        let send = send.clone();
        tasks.push(tokio::spawn(async move {
            let sent = start.elapsed();
            let result = tokio::time::timeout(deadline, send()).await;
            let error = match result {
                Ok(Ok(_)) => None,
                Ok(Err(e)) => Some(e),
                Err(_) => Some("timed out".to_string()),
            };
            Outcome {
                sent,
                returned: start.elapsed(),
                error,
            }
        }));
    }
    let mut outcomes = Vec::with_capacity(requests);
    for task in tasks {
        outcomes.push(task.await.expect("a request task"));
    }
    Ok(Row {
        kind,
        config,
        fault,
        outcomes,
        connections: bench.connections(),
        closed_at: bench.first_client_close(),
    })
}
