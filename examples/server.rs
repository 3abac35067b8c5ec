//! The headline demo: a real HTTP/1.1 server under load, with handlers whose background tasks
//! keep writing headers around the deadline, and an access log that must agree with what was
//! committed.
//!
//! ```text
//! cargo run --release --features server --example server                 # 20,000 requests
//! cargo run --release --features server --example server -- --compare     # + the naive way
//! cargo run --features server --example server -- --quick --compare       # smoke test (< 15 s)
//! ```
//!
//! Flags: `--requests N` (20000), `--concurrency N` client connections (64), `--deadline-ms N`
//! (20), `--compare`, `--quick` (1,000 requests over 16 connections), `--help`.
//!
//! Each request goes through the stack under test (its access log, its timeout) to a handler,
//! the same for both. The handler works for 0.2 to 1.4 deadlines, so about a third
//! of the requests time out. It spawns two background tasks that write a request annotation
//! and a response header after 0 to 2 deadlines, so many of them write after the response was
//! committed. Every 50th request is abandoned by its client: it gives up after a quarter of the
//! deadline, while the handler works for almost the whole deadline, and closes the connection
//! (nginx's 499). Afterwards, every log line is checked against the truth: the response headers
//! the client received, and the request context as it ended up once every task finished.
//!
//! * **shared-headers**: `SharedHeadersLayer` with `.timeout(deadline)`; the access log is the
//!   layer's `on_commit` hook, which gets the sealed `Committed` record of every request (one
//!   call each, whatever the outcome); late writes get `Err(Sealed)`, and the layer's
//!   `on_late_writes` hook reports them once per request, when its last task let go. An abandoned
//!   request is logged too, with outcome `cancelled`: hyper drops the layer's future, and the
//!   drop commits.
//! * **naive** (`--compare`): `Arc<tokio::sync::Mutex<HeaderMap>>` for each side plus
//!   `tokio::time::timeout`; the log locks and clones the maps when the response comes out of
//!   the stack. Late writes succeed silently, and an abandoned request leaves no log line at all.
//!
//! The verdict is about the crate, not about the machine. A request *reached the server* when
//! the stack under test was called with it (a `map_request` in front of it marks it); an
//! abandoned request its client gave up on before hyper read it never did, has nothing to log,
//! and is reported apart, not as a failure. The process exits with an error if a request that
//! reached the server has no log line or more than one, if a line disagrees with the truth
//! (the status and headers the client received, which must also be the head the hook's
//! `CommitEvent::sent` says left the layer; for an abandoned request, outcome `cancelled` and
//! nothing sent, or the outcome committed before hyper noticed), if a request failed, or if the
//! counts do not add up: the smoke test relies on it.

use std::convert::Infallible;
use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderName, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use shared_headers::server::SharedHeadersLayer;
use shared_headers::{Committed, Error, Exchange, Outcome, SharedHeaders};
use tokio::sync::Mutex as AsyncMutex;
use tower::util::BoxCloneService;
use tower::{ServiceBuilder, ServiceExt};

type Body = Full<Bytes>;
type Svc = BoxCloneService<
    Request<Incoming>,
    Response<shared_headers::server::ResponseBody<Body>>,
    Infallible,
>;

const TASKS: u64 = 2;

#[derive(Debug, Clone, Copy)]
struct Args {
    requests: usize,
    concurrency: usize,
    deadline: Duration,
    compare: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        requests: 20_000,
        concurrency: 64,
        deadline: Duration::from_millis(20),
        compare: false,
    };
    let mut it = std::env::args().skip(1);
    let number = |flag: &str, value: Option<String>| -> Result<u64, String> {
        let value = value.ok_or_else(|| format!("{flag} needs a value"))?;
        match value.parse() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!(
                "{flag}: expected a positive integer, got {value:?}"
            )),
        }
    };
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--requests" => args.requests = number(&flag, it.next())? as usize,
            "--concurrency" => args.concurrency = number(&flag, it.next())? as usize,
            "--deadline-ms" => args.deadline = Duration::from_millis(number(&flag, it.next())?),
            "--compare" => args.compare = true,
            "--quick" => (args.requests, args.concurrency) = (1_000, 16),
            "--help" | "-h" => {
                println!(
                    "usage: server [--requests N] [--concurrency N] [--deadline-ms N] \
                     [--compare] [--quick]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown flag {other:?} (try --help)")),
        }
    }
    args.concurrency = args.concurrency.min(args.requests);
    Ok(args)
}

// ---------------------------------------------------------------------------------------------
// Workload: the same for both approaches
// ---------------------------------------------------------------------------------------------

/// A deterministic pseudo-random number per (request, salt): splitmix64.
fn mix(id: u64, salt: u64) -> u64 {
    let mut z = id
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(salt.wrapping_mul(0xBF58_476D_1CE4_E5B9));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `deadline` scaled by a pseudo-random factor in `[lo, hi)` percent.
fn around(deadline: Duration, id: u64, salt: u64, lo: u64, hi: u64) -> Duration {
    deadline * (lo + mix(id, salt) % (hi - lo)) as u32 / 100
}

/// Every 50th request: its client gives up after [`client_patience`], before the handler answers.
fn abandoned(id: u64) -> bool {
    id % 50 == 49
}

fn client_patience(deadline: Duration) -> Duration {
    deadline / 4
}

fn handler_time(deadline: Duration, id: u64) -> Duration {
    if abandoned(id) {
        // Longer than the client waits, shorter than the deadline: nobody but the client ends it.
        deadline * 95 / 100
    } else {
        around(deadline, id, 0, 20, 140)
    }
}

fn task_time(deadline: Duration, id: u64, task: u64) -> Duration {
    around(deadline, id, task + 1, 0, 200)
}

fn task_header(task: u64) -> HeaderName {
    HeaderName::from_static(["x-task-0", "x-task-1"][task as usize])
}

fn request_id<B>(req: &Request<B>) -> u64 {
    req.headers()["x-id"].to_str().unwrap().parse().unwrap()
}

/// Only the headers the handler and its tasks contribute, to compare logs with responses.
fn contributed(headers: &HeaderMap) -> HeaderMap {
    headers
        .iter()
        .filter(|(name, _)| name.as_str().starts_with("x-task-") || *name == "x-handler")
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}

/// What one run records, indexed by request id, plus counters.
struct Record<Ctx, Log> {
    /// Each request's context, to read its final state once all tasks are done.
    contexts: Vec<OnceLock<Ctx>>,
    /// Each request's access-log line.
    log: Vec<OnceLock<Log>>,
    /// Log lines beyond the first for a request (must stay 0: one line per request).
    extra_lines: AtomicUsize,
    /// Each request that reached the server: the stack under test was called with it (set in
    /// a `map_request` outside it). Only these can have a log line; a request its client gave
    /// up on before hyper read it never reached the server and is no failure of the log.
    reached: Vec<AtomicBool>,
    /// Background tasks still running.
    tasks_running: AtomicUsize,
    /// Naive only: writes accepted after the response was sent.
    late_accepted: AtomicU64,
    /// shared-headers only: the sum of the `on_late_writes` reports, and how many there were.
    late_reported: AtomicU64,
    late_reports: AtomicU64,
    /// shared-headers only: one post-commit activity line, to show it.
    late_sample: OnceLock<String>,
}

impl<Ctx, Log> Record<Ctx, Log> {
    fn new(requests: usize) -> Arc<Self> {
        Arc::new(Record {
            contexts: (0..requests).map(|_| OnceLock::new()).collect(),
            log: (0..requests).map(|_| OnceLock::new()).collect(),
            extra_lines: AtomicUsize::new(0),
            reached: (0..requests).map(|_| AtomicBool::new(false)).collect(),
            tasks_running: AtomicUsize::new(0),
            late_accepted: AtomicU64::new(0),
            late_reported: AtomicU64::new(0),
            late_reports: AtomicU64::new(0),
            late_sample: OnceLock::new(),
        })
    }

    /// Records a log line; a second one for the same request is counted, not kept.
    fn log_line(&self, id: usize, line: Log) {
        if self.log[id].set(line).is_err() {
            self.extra_lines.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn reached(&self) -> usize {
        self.reached
            .iter()
            .filter(|r| r.load(Ordering::Relaxed))
            .count()
    }

    fn logged(&self) -> usize {
        self.log.iter().filter(|line| line.get().is_some()).count()
    }

    async fn wait_for_tasks(&self) {
        while self.tasks_running.load(Ordering::Acquire) > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// shared-headers
// ---------------------------------------------------------------------------------------------

/// The request handle (not the exchange: holding it would delay the late-writes report to the
/// end of the run), and the log line: the committed record and the head that left the layer
/// (`CommitEvent::sent`: status and the contributed headers; `None` when nothing was sent).
type CrateRecord = Record<SharedHeaders, (Committed, Option<(StatusCode, HeaderMap)>)>;

/// The outermost entry of both stacks: marks the request as having reached the server.
fn mark_reached<Ctx: Send + Sync + 'static, Log: Send + Sync + 'static>(
    record: &Arc<Record<Ctx, Log>>,
) -> impl Fn(Request<Incoming>) -> Request<Incoming> + Clone + use<Ctx, Log> {
    let record = Arc::clone(record);
    move |req| {
        record.reached[request_id(&req) as usize].store(true, Ordering::Relaxed);
        req
    }
}

async fn crate_handler(
    req: Request<Incoming>,
    record: Arc<CrateRecord>,
    deadline: Duration,
) -> Result<Response<Body>, Infallible> {
    let id = request_id(&req);
    let exchange = req.extensions().get::<Exchange>().unwrap().clone();
    for task in 0..TASKS {
        let (exchange, record) = (exchange.clone(), Arc::clone(&record));
        record.tasks_running.fetch_add(1, Ordering::AcqRel);
        tokio::spawn(async move {
            tokio::time::sleep(task_time(deadline, id, task)).await;
            let value = HeaderValue::from(id);
            // After the commit both return Err(Sealed): counted by the handles and reported
            // once by `on_late_writes`, nothing lost, and a background task has nothing else to
            // do about it, so the results are deliberately ignored (never `unwrap`ped: a panic
            // here would only kill the task). Both are tried, to show both refused.
            let _ = exchange.request().insert(task_header(task), value.clone());
            let _ = exchange.response().insert(task_header(task), value);
            // The last clone's drop runs the late-writes report before the count goes down.
            drop(exchange);
            record.tasks_running.fetch_sub(1, Ordering::AcqRel);
        });
    }
    tokio::time::sleep(handler_time(deadline, id)).await;
    // The handler's writes, the safe way: `Err(Sealed)` means the exchange was committed
    // already (the deadline fired): the client has the 503 and the log its line, so whatever
    // this handler returns now is dropped. Stop working and return; never `unwrap` a write.
    if let Err(Error::Sealed { .. }) = exchange
        .request()
        .insert("x-user", HeaderValue::from(id % 1000))
    {
        return Ok(Response::new(Body::default()));
    }
    match exchange
        .response()
        .insert("x-handler", HeaderValue::from_static("done"))
    {
        Ok(_) => {}
        Err(Error::Sealed { .. }) => return Ok(Response::new(Body::default())),
        // No limits are set here; with `response_policy(Builder::new().max_entries(..))`
        // this is a `LimitExceeded`: answer without the header.
        Err(_) => {}
    }
    Ok(Response::new(Body::from("ok")))
}

fn crate_service(record: Arc<CrateRecord>, deadline: Duration) -> Svc {
    let (log, late) = (Arc::clone(&record), Arc::clone(&record));
    let layer = SharedHeadersLayer::new()
        .timeout(deadline)
        // The access log: exactly the committed, sealed snapshots and the head that left the
        // layer, once per request.
        .on_commit(move |event| {
            let id = event.committed().request()["x-id"]
                .to_str()
                .unwrap()
                .parse::<usize>();
            let sent = event
                .sent()
                .map(|head| (head.status, contributed(&head.headers)));
            log.log_line(id.unwrap(), (event.committed().clone(), sent));
        })
        // Post-commit activity: once per request whose tasks wrote after the commit.
        .on_late_writes(move |report| {
            late.late_reported
                .fetch_add(report.refused_writes(), Ordering::Relaxed);
            late.late_reports.fetch_add(1, Ordering::Relaxed);
            let c = report.committed();
            let _ = late.late_sample.get_or_init(|| {
                format!(
                    "{} {} outcome=\"{}\" refused_writes={} since_commit_ms={:.1}",
                    c.method().unwrap(),
                    c.uri().unwrap(),
                    c.outcome(),
                    report.refused_writes(),
                    report.since_commit().as_secs_f64() * 1e3,
                )
            });
        });
    ServiceBuilder::new()
        .map_request(mark_reached(&record))
        .layer(layer)
        .service_fn(move |req: Request<Incoming>| {
            // Called by the layer, at once: the request's context is known even if the deadline
            // passes before the handler's first poll (then the handler never runs).
            if let Some(exchange) = req.extensions().get::<Exchange>() {
                let _ = record.contexts[request_id(&req) as usize].set(exchange.request().clone());
            }
            crate_handler(req, Arc::clone(&record), deadline)
        })
        .boxed_clone()
}

// ---------------------------------------------------------------------------------------------
// The naive way: Arc<tokio::sync::Mutex<HeaderMap>>
// ---------------------------------------------------------------------------------------------

#[derive(Clone)]
struct NaiveCtx {
    request: Arc<AsyncMutex<HeaderMap>>,
    response: Arc<AsyncMutex<HeaderMap>>,
    /// Set under the response lock when the response headers are merged.
    responded: Arc<AtomicBool>,
}

type NaiveRecord = Record<NaiveCtx, (HeaderMap, HeaderMap)>;

async fn naive_handler(
    req: Request<Incoming>,
    record: Arc<NaiveRecord>,
    deadline: Duration,
) -> Result<Response<Body>, Infallible> {
    let id = request_id(&req);
    let ctx = req.extensions().get::<NaiveCtx>().unwrap().clone();
    let _ = record.contexts[id as usize].set(ctx.clone());
    for task in 0..TASKS {
        let (ctx, record) = (ctx.clone(), Arc::clone(&record));
        record.tasks_running.fetch_add(1, Ordering::AcqRel);
        tokio::spawn(async move {
            tokio::time::sleep(task_time(deadline, id, task)).await;
            let value = HeaderValue::from(id);
            // Both writes succeed; after the response was sent, nobody will ever see them.
            let mut request = ctx.request.lock().await;
            if ctx.responded.load(Ordering::Acquire) {
                record.late_accepted.fetch_add(1, Ordering::Relaxed);
            }
            request.insert(task_header(task), value.clone());
            drop(request);
            let mut response = ctx.response.lock().await;
            if ctx.responded.load(Ordering::Acquire) {
                record.late_accepted.fetch_add(1, Ordering::Relaxed);
            }
            response.insert(task_header(task), value);
            drop(response);
            record.tasks_running.fetch_sub(1, Ordering::AcqRel);
        });
    }
    tokio::time::sleep(handler_time(deadline, id)).await;
    ctx.request
        .lock()
        .await
        .insert("x-user", HeaderValue::from(id % 1000));
    ctx.response
        .lock()
        .await
        .insert("x-handler", HeaderValue::from_static("done"));
    Ok(Response::new(Body::from("ok")))
}

fn naive_service(record: Arc<NaiveRecord>, deadline: Duration) -> Svc {
    let log = Arc::clone(&record);
    let reached = mark_reached(&record);
    let handler = move |mut req: Request<Incoming>| {
        let record = Arc::clone(&record);
        async move {
            let ctx = NaiveCtx {
                request: Arc::new(AsyncMutex::new(req.headers().clone())),
                response: Arc::default(),
                responded: Arc::default(),
            };
            req.extensions_mut().insert(ctx.clone());
            let mut res =
                match tokio::time::timeout(deadline, naive_handler(req, record, deadline)).await {
                    Ok(answered) => answered?,
                    Err(_elapsed) => {
                        let mut res = Response::new(Body::default());
                        *res.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                        res
                    }
                };
            {
                let response = ctx.response.lock().await;
                for (name, value) in response.iter() {
                    res.headers_mut().insert(name.clone(), value.clone());
                }
                ctx.responded.store(true, Ordering::Release);
            }
            res.extensions_mut().insert(ctx);
            Ok::<_, Infallible>(res)
        }
    };
    ServiceBuilder::new()
        .map_request(reached)
        // The access log: lock and clone, as a logging layer would.
        .and_then(move |res: Response<Body>| {
            let log = Arc::clone(&log);
            async move {
                let ctx = res.extensions().get::<NaiveCtx>().unwrap().clone();
                let request = ctx.request.lock().await.clone();
                let response = ctx.response.lock().await.clone();
                let id: usize = request["x-id"].to_str().unwrap().parse().unwrap();
                log.log_line(id, (request, response));
                Ok(res.map(shared_headers::server::ResponseBody::new))
            }
        })
        .service_fn(handler)
        .boxed_clone()
}

// ---------------------------------------------------------------------------------------------
// Server, load, report
// ---------------------------------------------------------------------------------------------

async fn serve(service: Svc) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            let service = TowerToHyperService::new(service.clone());
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    addr
}

/// What the client saw.
struct Load {
    elapsed: Duration,
    latencies: Vec<Duration>,
    /// Per request id: status and the contributed headers received.
    received: Vec<Option<(StatusCode, HeaderMap)>>,
    failed: usize,
    /// Requests the client gave up on (no response, connection closed).
    abandoned: usize,
}

type Sender = hyper::client::conn::http1::SendRequest<Empty<Bytes>>;

/// A client connection: the sender, and the task driving the socket (aborted to close it).
type Client = (Sender, tokio::task::JoinHandle<()>);

async fn connect(addr: SocketAddr) -> Result<Client, Box<dyn std::error::Error + Send + Sync>> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    let conn = tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok((sender, conn))
}

async fn one_request(
    sender: &mut Sender,
    id: usize,
) -> Result<(StatusCode, HeaderMap), Box<dyn std::error::Error + Send + Sync>> {
    sender.ready().await?;
    let req = Request::get("/work")
        .header("host", "localhost")
        .header("x-id", id)
        .body(Empty::new())?;
    let res = sender.send_request(req).await?;
    let (parts, body) = res.into_parts();
    body.collect().await?;
    Ok((parts.status, contributed(&parts.headers)))
}

async fn drive(addr: SocketAddr, args: Args, label: &str) -> Load {
    let next = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut clients = tokio::task::JoinSet::new();
    for _ in 0..args.concurrency {
        let (next, done) = (Arc::clone(&next), Arc::clone(&done));
        clients.spawn(async move {
            let (mut seen, mut failed, mut abandoned_count) = (Vec::new(), 0, 0);
            let Ok((mut sender, mut conn)) = connect(addr).await else {
                return (seen, args.requests, 0);
            };
            loop {
                let id = next.fetch_add(1, Ordering::Relaxed);
                if id >= args.requests {
                    break;
                }
                let sent = Instant::now();
                let request = one_request(&mut sender, id);
                let result = if abandoned(id as u64) {
                    tokio::time::timeout(client_patience(args.deadline), request).await
                } else {
                    Ok(request.await)
                };
                done.fetch_add(1, Ordering::Relaxed);
                match result {
                    Ok(Ok(response)) => seen.push((id, sent.elapsed(), response)),
                    Ok(Err(_)) => failed += 1,
                    Err(_gave_up) => {
                        // Drop the request and close the connection, then open a new one.
                        abandoned_count += 1;
                        conn.abort();
                        match connect(addr).await {
                            Ok(client) => (sender, conn) = client,
                            Err(_) => {
                                failed += 1;
                                break;
                            }
                        }
                    }
                }
            }
            (seen, failed, abandoned_count)
        });
    }
    let progress = {
        let (done, label, total) = (Arc::clone(&done), label.to_owned(), args.requests);
        tokio::spawn(async move {
            loop {
                let n = done.load(Ordering::Relaxed);
                eprint!("\r  {label:<24} {n:>7} / {total} requests");
                let _ = std::io::stderr().flush();
                if n >= total {
                    eprintln!();
                    return;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    let mut load = Load {
        elapsed: Duration::ZERO,
        latencies: Vec::with_capacity(args.requests),
        received: vec![None; args.requests],
        failed: 0,
        abandoned: 0,
    };
    while let Some(joined) = clients.join_next().await {
        let (seen, failed, abandoned) = joined.expect("client task panicked");
        load.failed += failed;
        load.abandoned += abandoned;
        for (id, latency, response) in seen {
            load.latencies.push(latency);
            load.received[id] = Some(response);
        }
    }
    load.elapsed = start.elapsed();
    done.store(args.requests, Ordering::Relaxed);
    let _ = progress.await;
    load
}

/// One column of the summary table.
#[derive(Debug, Default)]
struct Summary {
    requests: usize,
    failed: usize,
    answered: usize,
    timed_out: usize,
    /// Requests the client abandoned.
    abandoned: usize,
    /// shared-headers: abandoned requests logged as `cancelled`, and those the server had
    /// committed before it noticed (rare, on a starved machine).
    cancelled: usize,
    abandoned_after_commit: usize,
    late_refused: u64,
    late_accepted: u64,
    mismatched_logs: usize,
    throughput: f64,
    p50: Duration,
    p99: Duration,
    /// One access-log line of a timed-out request, to show what is logged.
    sample: Option<String>,
    /// shared-headers: late-writes reports (requests with post-commit activity), and one line.
    late_reports: u64,
    late_sample: Option<String>,
    /// One access-log line of an abandoned request.
    cancelled_sample: Option<String>,
    /// Requests with an access-log line.
    logged: usize,
    /// Requests that reached the server (the stack under test was called with them), and
    /// abandoned requests that never did (the client gave up before hyper read them).
    reached: usize,
    abandoned_before_server: usize,
    /// Log lines beyond the first for a request.
    extra_lines: usize,
    /// shared-headers: the first line that disagrees, and why, for the verdict.
    first_mismatch: Option<String>,
}

/// The `x-` headers of `map`, as a log line would print them.
fn log_fields(map: &HeaderMap) -> String {
    let fields: Vec<String> = map
        .iter()
        .filter(|(name, _)| name.as_str().starts_with("x-"))
        .map(|(name, value)| format!("{name}={}", value.to_str().unwrap_or("?")))
        .collect();
    if fields.is_empty() {
        "-".to_owned()
    } else {
        fields.join(" ")
    }
}

impl Summary {
    fn from_load(load: &mut Load) -> Self {
        load.latencies.sort_unstable();
        let pct = |p: usize| {
            let n = load.latencies.len();
            if n == 0 {
                Duration::ZERO
            } else {
                load.latencies[((n - 1) * p / 100).min(n - 1)]
            }
        };
        Summary {
            requests: load.latencies.len() + load.failed + load.abandoned,
            failed: load.failed,
            abandoned: load.abandoned,
            throughput: load.latencies.len() as f64 / load.elapsed.as_secs_f64(),
            p50: pct(50),
            p99: pct(99),
            ..Summary::default()
        }
    }
}

async fn run_crate(args: Args) -> Summary {
    let record = CrateRecord::new(args.requests);
    let addr = serve(crate_service(Arc::clone(&record), args.deadline)).await;
    let mut load = drive(addr, args, "shared-headers").await;
    record.wait_for_tasks().await;
    let mut summary = Summary::from_load(&mut load);
    summary.late_refused = record.late_reported.load(Ordering::Relaxed);
    summary.late_reports = record.late_reports.load(Ordering::Relaxed);
    summary.late_sample = record.late_sample.get().cloned();
    summary.logged = record.logged();
    summary.reached = record.reached();
    summary.extra_lines = record.extra_lines.load(Ordering::Relaxed);
    for (id, received) in load.received.iter().enumerate() {
        let reached = record.reached[id].load(Ordering::Relaxed);
        if !reached {
            // Only a request its client gave up on may never reach the server; it has no line
            // (checked by `logged == reached` below).
            if abandoned(id as u64) {
                summary.abandoned_before_server += 1;
            }
            if received.is_some() || record.log[id].get().is_some() {
                summary.mismatched_logs += 1;
            }
            continue;
        }
        // Reached the server: exactly one line (`logged == reached`, no extra lines), and the
        // layer called the stack below it (no rejections here), which recorded the context.
        let (Some((logged, sent)), Some(request)) =
            (record.log[id].get(), record.contexts[id].get())
        else {
            summary.mismatched_logs += 1;
            continue;
        };
        // The request side must be what the tasks' context ended as; the response side what
        // the client received, both as committed and as `CommitEvent::sent` says it left.
        let request_agrees = logged.request().header_map() == request.snapshot().header_map();
        let agrees = match (received, logged.outcome()) {
            (Some((status, received)), outcome) => {
                match outcome {
                    Outcome::Answered if *status == StatusCode::OK => summary.answered += 1,
                    Outcome::TimedOut if *status == StatusCode::SERVICE_UNAVAILABLE => {
                        summary.timed_out += 1
                    }
                    _ => {}
                }
                if summary.sample.is_none()
                    && outcome == Outcome::TimedOut
                    && !logged.response().is_empty()
                {
                    summary.sample = Some(log_line(logged));
                }
                request_agrees
                    && logged.committed_status() == Some(*status)
                    && contributed(logged.response()) == *received
                    && sent.as_ref() == Some(&(*status, received.clone()))
            }
            (None, Outcome::Cancelled) if abandoned(id as u64) => {
                summary.cancelled += 1;
                let _ = summary
                    .cancelled_sample
                    .get_or_insert_with(|| log_line(logged));
                // Nothing left the layer, and the line must not say otherwise.
                request_agrees && sent.is_none()
            }
            // On a starved machine the server may answer before it notices the closed
            // connection: the line then tells what the server did, which is still the truth.
            // An answer was sent by the layer (hyper could not deliver it); a deadline's
            // commit may have come before hyper dropped the future, with nothing sent.
            (None, Outcome::Answered) if abandoned(id as u64) => {
                summary.abandoned_after_commit += 1;
                request_agrees && sent.is_some()
            }
            (None, Outcome::TimedOut) if abandoned(id as u64) => {
                summary.abandoned_after_commit += 1;
                request_agrees
            }
            // A failed request, or a log line that says something other than what happened.
            (None, _) => false,
        };
        if !agrees {
            summary.mismatched_logs += 1;
            let _ = summary.first_mismatch.get_or_insert_with(|| {
                format!(
                    "request {id}: received {received:?}, logged {} sent {sent:?}, \
                     request context {:?}",
                    log_line(logged),
                    request.snapshot().header_map()
                )
            });
        }
    }
    summary
}

/// An access-log line, from what the `on_commit` hook got.
fn log_line(c: &Committed) -> String {
    format!(
        "{} {} status={} outcome=\"{}\" latency_ms={:.1} request: {} | response: {}",
        c.method().unwrap(),
        c.uri().unwrap(),
        c.committed_status()
            .map_or("-".to_owned(), |s| s.as_u16().to_string()),
        c.outcome(),
        c.time_to_commit().as_secs_f64() * 1e3,
        log_fields(c.request()),
        log_fields(c.response()),
    )
}

async fn run_naive(args: Args) -> Summary {
    let record = NaiveRecord::new(args.requests);
    let addr = serve(naive_service(Arc::clone(&record), args.deadline)).await;
    let mut load = drive(addr, args, "Arc<Mutex<HeaderMap>>").await;
    record.wait_for_tasks().await;
    let mut summary = Summary::from_load(&mut load);
    summary.late_accepted = record.late_accepted.load(Ordering::Relaxed);
    summary.logged = record.logged();
    summary.reached = record.reached();
    summary.extra_lines = record.extra_lines.load(Ordering::Relaxed);
    summary.abandoned_before_server = (0..args.requests)
        .filter(|&id| abandoned(id as u64) && !record.reached[id].load(Ordering::Relaxed))
        .count();
    for (id, received) in load.received.iter().enumerate() {
        let (Some((status, sent)), Some((logged_request, logged_response)), Some(ctx)) =
            (received, record.log[id].get(), record.contexts[id].get())
        else {
            continue;
        };
        match *status {
            StatusCode::OK => summary.answered += 1,
            StatusCode::SERVICE_UNAVAILABLE => summary.timed_out += 1,
            _ => {}
        }
        let truth_request = ctx.request.lock().await.clone();
        if *logged_request != truth_request || contributed(logged_response) != *sent {
            summary.mismatched_logs += 1;
        }
    }
    summary
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

fn print_table(columns: &[(&str, &Summary)]) {
    type Row = (&'static str, fn(&Summary) -> String);
    let rows: [Row; 14] = [
        ("requests", |s| thousands(s.requests as u64)),
        ("  answered by handler (200)", |s| {
            thousands(s.answered as u64)
        }),
        ("  answered by timeout (503)", |s| {
            thousands(s.timed_out as u64)
        }),
        ("  abandoned by the client", |s| {
            thousands(s.abandoned as u64)
        }),
        ("    of which before reaching the server", |s| {
            thousands(s.abandoned_before_server as u64)
        }),
        ("requests that reached the server", |s| {
            thousands(s.reached as u64)
        }),
        ("  failed", |s| thousands(s.failed as u64)),
        ("late writes refused (Err(Sealed))", |s| {
            thousands(s.late_refused)
        }),
        ("late writes accepted, never seen", |s| {
            thousands(s.late_accepted)
        }),
        ("log lines != committed headers", |s| {
            thousands(s.mismatched_logs as u64)
        }),
        ("reached the server, no log line", |s| {
            thousands(s.reached.saturating_sub(s.logged) as u64)
        }),
        ("throughput (req/s)", |s| thousands(s.throughput as u64)),
        ("latency p50 (ms)", |s| ms(s.p50)),
        ("latency p99 (ms)", |s| ms(s.p99)),
    ];
    print!("\n{:<40}", "");
    for (name, _) in columns {
        print!("{name:>24}");
    }
    println!();
    for (label, cell) in rows {
        print!("{label:<40}");
        for (_, summary) in columns {
            print!("{:>24}", cell(summary));
        }
        println!();
    }
}

fn main() {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("error: {message}");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    println!(
        "{} requests over {} connections, deadline {} ms; handlers take 0.2-1.4 deadlines, \
         each spawns {TASKS} tasks writing after 0-2 deadlines",
        thousands(args.requests as u64),
        args.concurrency,
        args.deadline.as_millis(),
    );
    let (ours, naive) = runtime.block_on(async {
        let limit = Duration::from_secs(600);
        let ours = tokio::time::timeout(limit, run_crate(args))
            .await
            .expect("shared-headers run did not finish");
        let naive = if args.compare {
            let naive = tokio::time::timeout(limit, run_naive(args))
                .await
                .expect("naive run did not finish");
            Some(naive)
        } else {
            None
        };
        (ours, naive)
    });
    let mut columns = vec![("shared-headers", &ours)];
    if let Some(naive) = &naive {
        columns.push(("Arc<Mutex<HeaderMap>>", naive));
    }
    print_table(&columns);
    if let Some(sample) = &ours.sample {
        println!(
            "\nan access-log line (shared-headers' on_commit hook, at the commit):\n  {sample}"
        );
    }
    if let Some(sample) = &ours.cancelled_sample {
        println!(
            "a request its client abandoned (on_commit, when hyper dropped the layer's future; \
             {} of {} abandoned requests that reached the server):\n  {sample}",
            ours.cancelled,
            ours.abandoned.saturating_sub(ours.abandoned_before_server)
        );
    }
    if ours.abandoned_before_server > 0 {
        println!(
            "  ({} abandoned requests never reached the server: the client gave up before \
             hyper read them, so there is nothing to log)",
            ours.abandoned_before_server
        );
    }
    if ours.abandoned_after_commit > 0 {
        println!(
            "  ({} more the server had committed before it noticed the closed connection: \
             logged with that outcome)",
            ours.abandoned_after_commit
        );
    }
    if let Some(sample) = &ours.late_sample {
        println!(
            "a post-commit activity line (on_late_writes, after the last task; {} such requests):\n  {sample}",
            thousands(ours.late_reports)
        );
    }

    let mut problems = Vec::new();
    if ours.mismatched_logs != 0 {
        problems.push(format!(
            "{} log lines differ (first: {})",
            ours.mismatched_logs,
            ours.first_mismatch
                .as_deref()
                .unwrap_or("a request without a line")
        ));
    }
    if ours.failed != 0 {
        problems.push(format!("{} requests failed", ours.failed));
    }
    if ours.answered + ours.timed_out + ours.abandoned != args.requests {
        problems.push("answered + timed out + abandoned != requests".to_owned());
    }
    // Abandoned requests that reached the server: each logged as cancelled, or with the
    // outcome the server committed before it noticed. Those that never reached it are not
    // the crate's to log (reported above, not a failure).
    let abandoned_reached = ours.abandoned.saturating_sub(ours.abandoned_before_server);
    if ours.cancelled + ours.abandoned_after_commit != abandoned_reached {
        problems.push(format!(
            "{} of {} abandoned requests that reached the server logged",
            ours.cancelled + ours.abandoned_after_commit,
            abandoned_reached
        ));
    }
    if ours.logged != ours.reached {
        problems.push(format!(
            "{} of {} requests that reached the server logged",
            ours.logged, ours.reached
        ));
    }
    if ours.reached + ours.abandoned_before_server != args.requests {
        problems.push(format!(
            "{} requests reached the server, {} abandoned before: not all {} accounted for",
            ours.reached, ours.abandoned_before_server, args.requests
        ));
    }
    if ours.extra_lines != 0 {
        problems.push(format!("{} extra log lines", ours.extra_lines));
    }
    if !problems.is_empty() {
        eprintln!("\nFAILED: shared-headers: {}", problems.join("; "));
        std::process::exit(1);
    }
}
