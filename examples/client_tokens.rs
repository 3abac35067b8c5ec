//! Live token rotation under load: `shared_headers::client` against `Arc<RwLock<HeaderMap>>`.
//!
//! A local API server on `127.0.0.1:0` rotates the token it accepts every few hundred
//! milliseconds and answers `401` to stale tokens (and `400` to a torn credential set: a token
//! whose companion header `x-token-gen` comes from another generation). An in-process auth
//! server issues the current token after a short delay, serving a few token requests at a time
//! (the rest queue, as they would against a real, rate-limited auth server). 64 concurrent request loops go through
//! hyper-util's client, first with this crate's stack (`RefreshRetryLayer` outside
//! `DefaultHeadersLayer`: one single-flight refresh per refused token, one retry per request),
//! then with the naive approach (`Arc<RwLock<HeaderMap>>` copied into every request, refresh on every `401`,
//! token and companion written in two steps). The table compares the two.
//!
//! ```text
//! cargo run --release --features client --example client_tokens -- [--seconds N] [--loops N] [--rotate-ms N] [--auth-capacity N]
//! ```
//!
//! Exits with an error if the layer ever sent a torn set, or refreshed more than twice per
//! rotation, so it doubles as a smoke test.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body_util::Empty;
use hyper::body::{Bytes, Incoming};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use shared_headers::SharedHeaders;
use shared_headers::client::{DefaultHeadersLayer, Merge, RefreshRetryLayer, Refresher};
use tower::{Layer, Service, ServiceExt};

const COMPANION: &str = "x-token-gen";
const ISSUE_DELAY: Duration = Duration::from_millis(20);
/// Attempts per logical request of the naive client (the layer approach retries once, inside).
const MAX_ATTEMPTS: usize = 8;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

type Error = Box<dyn std::error::Error + Send + Sync>;
type HttpClient = Client<HttpConnector, Empty<Bytes>>;

struct Options {
    seconds: f64,
    loops: usize,
    rotate: Duration,
    auth_capacity: usize,
}

fn options() -> Result<Options, Error> {
    let mut options = Options {
        seconds: 3.0,
        loops: 64,
        rotate: Duration::from_millis(300),
        auth_capacity: 4,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--seconds" => options.seconds = value()?.parse()?,
            "--loops" => options.loops = value()?.parse()?,
            "--rotate-ms" => options.rotate = Duration::from_millis(value()?.parse()?),
            "--auth-capacity" => options.auth_capacity = value()?.parse()?,
            "-h" | "--help" => {
                println!(
                    "usage: client_tokens [--seconds N] [--loops N] [--rotate-ms N] [--auth-capacity N]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    if !(options.seconds > 0.0 && options.seconds <= 600.0)
        || options.loops == 0
        || options.auth_capacity == 0
    {
        return Err("--seconds must be in (0, 600], --loops and --auth-capacity at least 1".into());
    }
    Ok(options)
}

// ---------------------------------------------------------------------------------------------
// The API server and the auth server
// ---------------------------------------------------------------------------------------------

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    unauthorized: AtomicU64,
    torn: AtomicU64,
    refreshes: AtomicU64,
    rotations: AtomicU64,
    failed: AtomicU64,
}

/// The generation of the token the API accepts now; the auth server hands it out.
struct Auth {
    generation: AtomicU64,
    /// How many token requests the auth server serves at once (the rest queue).
    capacity: tokio::sync::Semaphore,
}

impl Auth {
    /// The auth server: takes a while, then issues the current token and its companion.
    async fn issue(&self, counters: &Counters) -> HeaderMap {
        counters.refreshes.fetch_add(1, Ordering::Relaxed);
        let _serving = self.capacity.acquire().await;
        tokio::time::sleep(ISSUE_DELAY).await;
        credentials(self.generation.load(Ordering::SeqCst))
    }
}

fn token(generation: u64) -> HeaderValue {
    let mut token = HeaderValue::from_str(&format!("Bearer tok-{generation}")).unwrap();
    token.set_sensitive(true);
    token
}

fn credentials(generation: u64) -> HeaderMap {
    let mut map = HeaderMap::new();
    map.insert(AUTHORIZATION, token(generation));
    map.insert(COMPANION, generation.into());
    map
}

fn check(auth: &Auth, counters: &Counters, headers: &HeaderMap) -> StatusCode {
    counters.requests.fetch_add(1, Ordering::Relaxed);
    let token = headers.get(AUTHORIZATION).and_then(|v| {
        v.to_str()
            .ok()?
            .strip_prefix("Bearer tok-")?
            .parse::<u64>()
            .ok()
    });
    let companion = headers
        .get(COMPANION)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    match (token, companion) {
        (Some(t), Some(c)) if t != c => {
            counters.torn.fetch_add(1, Ordering::Relaxed);
            StatusCode::BAD_REQUEST
        }
        (Some(t), _) if t == auth.generation.load(Ordering::SeqCst) => StatusCode::OK,
        _ => {
            counters.unauthorized.fetch_add(1, Ordering::Relaxed);
            StatusCode::UNAUTHORIZED
        }
    }
}

/// Starts the API server and its token rotation; both stop when `stop` is set.
async fn start_api(
    auth: Arc<Auth>,
    counters: Arc<Counters>,
    rotate: Duration,
    stop: Arc<AtomicBool>,
) -> Result<SocketAddr, Error> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    {
        let (auth, counters, stop) = (auth.clone(), counters.clone(), stop.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(rotate);
            tick.tick().await;
            while !stop.load(Ordering::SeqCst) {
                tick.tick().await;
                auth.generation.fetch_add(1, Ordering::SeqCst);
                counters.rotations.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (auth, counters) = (auth.clone(), counters.clone());
            let api = hyper::service::service_fn(move |req: Request<Incoming>| {
                let status = check(&auth, &counters, req.headers());
                let mut response = Response::new(Empty::<Bytes>::new());
                *response.status_mut() = status;
                std::future::ready(Ok::<_, Infallible>(response))
            });
            let conn = hyper::server::conn::http1::Builder::new();
            tokio::spawn(conn.serve_connection(TokioIo::new(stream), api));
        }
    });
    Ok(addr)
}

// ---------------------------------------------------------------------------------------------
// The two clients
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum Approach {
    Layer,
    Naive,
}

impl Approach {
    fn name(self) -> &'static str {
        match self {
            Approach::Layer => "shared-headers RefreshRetryLayer",
            Approach::Naive => "Arc<RwLock<HeaderMap>> + refresh on 401",
        }
    }
}

struct Report {
    approach: Approach,
    completed: u64,
    counters: Arc<Counters>,
    p50: Duration,
    p99: Duration,
    elapsed: Duration,
}

/// One logical request of the layer approach: one call; `RefreshRetryLayer` refreshes (once per
/// refused token, however many requests were refused with it) and retries once. A request
/// refused again after its retry (a rotation between the refresh and the retry) counts as failed.
async fn layer_request<S>(client: &S, uri: &str) -> Result<bool, Error>
where
    S: Service<Request<Empty<Bytes>>, Response = Response<Incoming>> + Clone,
    S::Error: std::error::Error + Send + Sync + 'static,
{
    let request = Request::get(uri).body(Empty::new())?;
    let response = client.clone().oneshot(request).await?;
    Ok(response.status() == StatusCode::OK)
}

/// One logical request of the naive approach: copy the defaults under the read lock; on a 401,
/// refresh (every caller does) and write the token and its companion in two steps.
async fn naive_request(
    client: &HttpClient,
    defaults: &RwLock<HeaderMap>,
    auth: &Auth,
    counters: &Counters,
    uri: &str,
) -> Result<bool, Error> {
    for _ in 0..MAX_ATTEMPTS {
        let mut request = Request::get(uri).body(Empty::new())?;
        let copied = defaults.read().unwrap_or_else(|e| e.into_inner()).clone();
        request.headers_mut().extend(copied);
        let response = client.request(request).await?;
        if response.status() != StatusCode::UNAUTHORIZED {
            return Ok(response.status() == StatusCode::OK);
        }
        let mut new = auth.issue(counters).await;
        if let Some(token) = new.remove(AUTHORIZATION) {
            let mut map = defaults.write().unwrap_or_else(|e| e.into_inner());
            map.insert(AUTHORIZATION, token);
        }
        if let Some(companion) = new.remove(COMPANION) {
            let mut map = defaults.write().unwrap_or_else(|e| e.into_inner());
            map.insert(COMPANION, companion);
        }
    }
    Ok(false)
}

async fn run(approach: Approach, options: &Options, http: HttpClient) -> Result<Report, Error> {
    let counters = Arc::new(Counters::default());
    let auth = Arc::new(Auth {
        generation: AtomicU64::new(1),
        capacity: tokio::sync::Semaphore::new(options.auth_capacity),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let addr = start_api(auth.clone(), counters.clone(), options.rotate, stop.clone()).await?;
    let uri: Arc<str> = format!("http://{addr}/").into();

    // Both start with the current token.
    let shared = SharedHeaders::from(credentials(1));
    let refresher = Refresher::<Infallible>::new(shared.clone());
    let refresh = {
        let (auth, counters) = (auth.clone(), counters.clone());
        move || {
            let (auth, counters) = (auth.clone(), counters.clone());
            async move { Ok(auth.issue(&counters).await) }
        }
    };
    let layered = RefreshRetryLayer::new(refresher, refresh).layer(
        DefaultHeadersLayer::new(shared)
            .merge(AUTHORIZATION, Merge::Override)
            .layer(http.clone()),
    );
    let naive = Arc::new(RwLock::new(credentials(1)));

    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(options.seconds);
    let completed = Arc::new(AtomicU64::new(0));
    let progress = {
        let (counters, completed, stop) = (counters.clone(), completed.clone(), stop.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(500));
            while !stop.load(Ordering::SeqCst) {
                tick.tick().await;
                eprint!(
                    "\r  {:<40} {:>5.1}s  requests {:>8}  401s {:>6}  refreshes {:>6}   ",
                    approach.name(),
                    started.elapsed().as_secs_f64(),
                    completed.load(Ordering::Relaxed),
                    counters.unauthorized.load(Ordering::Relaxed),
                    counters.refreshes.load(Ordering::Relaxed),
                );
            }
        })
    };

    let loops: Vec<_> = (0..options.loops)
        .map(|_| {
            let (counters, auth, uri, completed) = (
                counters.clone(),
                auth.clone(),
                uri.clone(),
                completed.clone(),
            );
            let (layered, naive, http) = (layered.clone(), naive.clone(), http.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                while Instant::now() < deadline {
                    let start = Instant::now();
                    let request = async {
                        match approach {
                            Approach::Layer => layer_request(&layered, &uri).await,
                            Approach::Naive => {
                                naive_request(&http, &naive, &auth, &counters, &uri).await
                            }
                        }
                    };
                    // Bounded even if something hangs: a stuck request counts as failed.
                    let ok = tokio::time::timeout(REQUEST_TIMEOUT, request)
                        .await
                        .unwrap_or(Ok(false));
                    match ok {
                        Ok(true) => {
                            latencies.push(start.elapsed());
                            completed.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(false) | Err(_) => {
                            counters.failed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for task in loops {
        latencies.extend(task.await?);
    }
    let elapsed = started.elapsed();
    stop.store(true, Ordering::SeqCst);
    progress.abort();
    eprintln!();

    latencies.sort_unstable();
    let percentile = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    Ok(Report {
        approach,
        completed: completed.load(Ordering::Relaxed),
        p50: percentile(0.50),
        p99: percentile(0.99),
        counters,
        elapsed,
    })
}

fn print(reports: &[Report], options: &Options) {
    println!();
    println!(
        "{} loops, token rotated every {} ms, auth server answers in {} ms, {} at a time",
        options.loops,
        options.rotate.as_millis(),
        ISSUE_DELAY.as_millis(),
        options.auth_capacity,
    );
    println!();
    println!(
        "| approach | requests ok | req/s | 401s | refreshes | rotations | refreshes/rotation | torn sets | failed | p50 | p99 |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in reports {
        let c = &r.counters;
        let rotations = c.rotations.load(Ordering::Relaxed);
        let refreshes = c.refreshes.load(Ordering::Relaxed);
        println!(
            "| {} | {} | {:.0} | {} | {} | {} | {:.1} | {} | {} | {:.2} ms | {:.2} ms |",
            r.approach.name(),
            r.completed,
            r.completed as f64 / r.elapsed.as_secs_f64(),
            c.unauthorized.load(Ordering::Relaxed),
            refreshes,
            rotations,
            refreshes as f64 / rotations.max(1) as f64,
            c.torn.load(Ordering::Relaxed),
            c.failed.load(Ordering::Relaxed),
            r.p50.as_secs_f64() * 1e3,
            r.p99.as_secs_f64() * 1e3,
        );
    }
    println!();
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let options = options()?;
    let http: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    eprintln!(
        "client_tokens: {} s per approach (--seconds), {} loops (--loops)",
        options.seconds, options.loops
    );
    // Whichever approach runs first pays for warming up the process, the client's connection pool
    // and the allocator; a short unmeasured run of each takes that out of the comparison.
    let warm_up = Options {
        seconds: (options.seconds / 10.0).clamp(0.1, 0.5),
        ..options
    };
    for approach in [Approach::Layer, Approach::Naive] {
        run(approach, &warm_up, http.clone()).await?;
    }
    eprintln!("(warmed up; measuring)");
    let mut reports = Vec::new();
    for approach in [Approach::Layer, Approach::Naive] {
        reports.push(run(approach, &options, http.clone()).await?);
    }
    print(&reports, &options);

    // The smoke-test checks: the layer must never send a torn set and must not stampede.
    let layer = &reports[0].counters;
    let rotations = layer.rotations.load(Ordering::Relaxed);
    let refreshes = layer.refreshes.load(Ordering::Relaxed);
    if layer.torn.load(Ordering::Relaxed) != 0 {
        return Err("the layer sent a torn credential set".into());
    }
    if refreshes > 2 * rotations + 1 {
        return Err(
            format!("the layer refreshed {refreshes} times for {rotations} rotations").into(),
        );
    }
    if reports[0].completed == 0 {
        return Err("no request succeeded through the layer".into());
    }
    Ok(())
}
