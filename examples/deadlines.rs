//! Deadline propagation over loopback: an edge with a 200 ms deadline calls a middle service,
//! which calls a slow leaf (every 3rd request takes 1 s). The same load runs twice, without and
//! with propagation, and the table says how long the middle and the leaf kept working after the
//! edge had answered `504`.
//!
//! ```text
//! cargo run --features full --example deadlines
//! cargo run --features full --example deadlines -- --requests 12 --verbose
//! ```
//!
//! * **without:** plain hyper clients, no budget header, no `caller_budget`: the edge answers
//!   `504` at 200 ms (its own deadline), and the leaf works on for the rest of its second.
//! * **with:** the edge's and the middle's clients are wrapped in
//!   `client::PropagateLayer::new(BudgetHeader::millis(HeaderName::from_static("x-budget-ms")))`
//!   `.margin(10 ms)`, and the
//!   middle's and the leaf's layers take the caller's budget (`caller_budget`). The middle's
//!   call is cut when the budget is spent, and the leaf, which works in 10 ms steps in a task
//!   spawned with `context::carry`, stops once its budget is spent.
//!
//! With propagation, each layer also captures the request's context
//! (`propagate(Propagation::new().request_id().header("x-demo-n"))`): the edge generates a
//! request id, and the clients send it, with the demo's request number, to the services below;
//! no handler copies a header by hand (without propagation, the clients copy the number).
//!
//! Each service's access line (an `on_commit` hook) has the request id, the budget it was
//! given, where it came from, and how much it used; the edge tells a `504` it made itself (`timed out`) from one
//! that came from below (`answered 504`). Work is measured from timestamps the services record
//! in this process (`Instant`s): for each request, the end of the middle's handler and of the
//! leaf's work, minus the instant the edge committed its answer, counted when positive.
//!
//! The example binds 127.0.0.1:0 only, runs a few seconds, and exits non-zero if propagation
//! does not cut the leaf's work after the edge's answer to at most a fifth of the work without,
//! and to at most 25 ms per slow request (near zero; the steps are 10 ms), or if, with
//! propagation, a request's three lines do not share one request id.
//!
//! Last, one request runs through the three services with OpenTelemetry spans (`tree.rs`):
//! the example reads them back from the SDK's in-memory exporter and exits non-zero unless
//! there are three server spans and two client spans in one trace, each the child of the one
//! before, and the three access lines carry that trace id.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{HeaderName, HeaderValue, Request, Response, StatusCode};
use http_body_util::Empty;
use hyper::body::{Bytes, Incoming};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use shared_headers::Outcome;
use shared_headers::client::{self, PropagateError, PropagateLayer};
use shared_headers::context::{self, Propagation};
use shared_headers::deadline::{BudgetHeader, Deadline};
use shared_headers::server::SharedHeadersLayer;
use tower::util::BoxCloneService;
use tower::{Layer, ServiceExt, service_fn};

/// One trace across the three services, read back from the SDK's in-memory exporter.
#[path = "deadlines/tree.rs"]
mod tree;

const EDGE_DEADLINE: Duration = Duration::from_millis(200);
const SLOW: Duration = Duration::from_secs(1);
const FAST: Duration = Duration::from_millis(20);
const STEP: Duration = Duration::from_millis(10);
const MARGIN: Duration = Duration::from_millis(10);
/// Between two requests of the load (open loop).
const SPACING: Duration = Duration::from_millis(20);
/// How long a run waits, after the last answer, for the work below to end.
const DRAIN: Duration = Duration::from_secs(3);
/// The load's number of each request.
const N: &str = "x-demo-n";
/// Why a handler answered 504 itself (its client's `PropagateError`), for the edge's log.
const CUT: &str = "x-cut";

type Body = Empty<Bytes>;
type Svc = BoxCloneService<
    Request<Incoming>,
    Response<shared_headers::server::ResponseBody<Body>>,
    Infallible,
>;
type Plain = Client<HttpConnector, Body>;

fn budget_header() -> BudgetHeader {
    BudgetHeader::millis(HeaderName::from_static("x-budget-ms"))
}

/// What the services record: the edge's answer and the end of the work below, per request.
#[derive(Default)]
struct Record {
    edge_answered: Mutex<HashMap<u64, Instant>>,
    middle_end: Mutex<HashMap<u64, Instant>>,
    leaf_end: Mutex<HashMap<u64, Instant>>,
    /// How many works started (middle handlers, leaf works), to wait for their ends.
    started: Mutex<(usize, usize)>,
    lines: Mutex<Vec<(u64, String)>>,
    /// Each line's request id, by request and service.
    ids: Mutex<Vec<(u64, &'static str, String)>>,
    /// The edge's 504s: made by its own deadline, by its client's cut, from below.
    edge_504: Mutex<[u32; 3]>,
}

/// Records the end of a piece of work when dropped (finished, or cancelled with its task).
struct WorkEnd(Arc<Record>, u64, bool);

impl Drop for WorkEnd {
    fn drop(&mut self) {
        let map = if self.2 {
            &self.0.leaf_end
        } else {
            &self.0.middle_end
        };
        map.lock().unwrap().insert(self.1, Instant::now());
    }
}

/// The load's number of a request (which requests are slow, and the demo's bookkeeping): a
/// header of the demo's own, copied by hand without propagation and propagated with it.
fn request_n(headers: &http::HeaderMap) -> u64 {
    headers
        .get(N)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(u64::MAX)
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1e3)
}

/// The layer of a service: one compact access line per request, with the chain's budget and
/// (with propagation) the request id: taken from the caller, or generated at the edge.
fn layer(name: &'static str, record: &Arc<Record>, propagate: bool) -> SharedHeadersLayer {
    let record = Arc::clone(record);
    let context = if propagate {
        Propagation::new()
            .request_id()
            .header(HeaderName::from_static(N))
            .expect("not a secret")
    } else {
        Propagation::new()
    };
    SharedHeadersLayer::new()
        .propagate(context)
        .timeout_status(StatusCode::GATEWAY_TIMEOUT)
        .on_commit(move |c| {
            let now = Instant::now();
            let id = request_n(c.committed().request().header_map());
            let status = c.committed().committed_status().map_or(0, |s| s.as_u16());
            let shown = c
                .committed()
                .committed_status()
                .map_or("-".to_owned(), |s| s.as_u16().to_string());
            let cut = c.sent().is_some_and(|head| head.headers.contains_key(CUT));
            let why = match (c.committed().outcome(), status) {
                (Outcome::TimedOut, _) => " (made here: own deadline)",
                (Outcome::Answered, 504) if cut => " (made here: the client's PropagateError)",
                (Outcome::Answered, 504) => " (from below)",
                _ => "",
            };
            let budget = match (c.committed().budget(), c.committed().deadline()) {
                (Some(b), Some(d)) => format!("budget {:>6} ({:?})", ms(b), d.source()),
                _ => format!("budget {:>6}", "none"),
            };
            let request_id = c.committed().context().and_then(|c| c.request_id()).unwrap_or("-").to_owned();
            let line = format!(
                "{name:<6} #{id:<3} id={request_id:<32} {:<9} {shown:<3} {budget:<24} used {:>7}{why}",
                c.committed().outcome().to_string(),
                ms(c.committed().time_to_commit()),
            );
            record.lines.lock().unwrap().push((id, line));
            record.ids.lock().unwrap().push((id, name, request_id));
            if name == "edge" {
                record.edge_answered.lock().unwrap().insert(id, now);
                if status == 504 {
                    let kind = match (c.committed().outcome(), cut) {
                        (Outcome::TimedOut, _) => 0,
                        (_, true) => 1,
                        _ => 2,
                    };
                    record.edge_504.lock().unwrap()[kind] += 1;
                }
            }
        })
}

/// An outgoing client: plain, or under the deadline in scope.
#[derive(Clone)]
enum Out {
    Plain(Plain),
    /// Under the deadline (with a client span per call in `tree.rs`).
    Propagate(client::Propagate<Plain>),
}

impl Out {
    fn new(propagate: bool) -> Out {
        let plain = Client::builder(TokioExecutor::new()).build_http();
        if propagate {
            Out::Propagate(
                PropagateLayer::new(budget_header())
                    .margin(MARGIN)
                    .layer(plain),
            )
        } else {
            Out::Plain(plain)
        }
    }

    /// Calls `addr` for request `id`: its status, or `Err(true)` if the deadline cut it. A
    /// plain client copies the request's number by hand; `PropagateLayer` sends it (and the
    /// request id, and the budget) by itself.
    async fn call(self, addr: SocketAddr, id: u64) -> Result<StatusCode, bool> {
        let mut req = Request::get(format!("http://{addr}/"))
            .body(Empty::new())
            .unwrap();
        if let Out::Plain(_) = self {
            req.headers_mut().insert(N, HeaderValue::from(id));
        }
        match self {
            Out::Plain(client) => client.request(req).await.map_err(|_| false),
            Out::Propagate(client) => client
                .oneshot(req)
                .await
                .map_err(|e| !matches!(e, PropagateError::Service(_))),
        }
        .map(|res| res.status())
    }
}

fn answer(result: Result<StatusCode, bool>) -> Response<Body> {
    let mut res = Response::new(Empty::new());
    match result {
        Ok(status) => *res.status_mut() = status,
        Err(cut) => {
            *res.status_mut() = StatusCode::GATEWAY_TIMEOUT;
            if cut {
                res.headers_mut().insert(CUT, HeaderValue::from_static("1"));
            }
        }
    }
    res
}

async fn serve(service: Svc) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let service = TowerToHyperService::new(service.clone());
            let conn = hyper::server::conn::http1::Builder::new();
            tokio::spawn(conn.serve_connection(TokioIo::new(stream), service));
        }
    });
    (addr, task)
}

/// The leaf's work: small steps, and a stop once the deadline in scope (the caller's budget,
/// carried into this task) has passed. No deadline: it works to the end.
/// Whether it finished.
async fn leaf_work(total: Duration, _end: WorkEnd) -> bool {
    let start = Instant::now();
    while start.elapsed() < total {
        let step = match Deadline::current() {
            Some(d) if d.is_expired() => return false,
            Some(d) => STEP.min(d.remaining()),
            None => STEP,
        };
        tokio::time::sleep(step).await;
    }
    true
}

struct Stats {
    requests: usize,
    edge_504: [u32; 3],
    middle_after: Duration,
    leaf_after: Duration,
    slow: usize,
    unfinished: usize,
    lines: Vec<(u64, String)>,
    /// Requests whose three lines have one request id, and requests whose lines disagree.
    one_id: usize,
    mixed_ids: Vec<u64>,
}

async fn run(propagate: bool, requests: usize) -> Stats {
    let record = Arc::new(Record::default());

    let rec = Arc::clone(&record);
    let leaf = service_fn(move |req: Request<Incoming>| {
        let rec = Arc::clone(&rec);
        async move {
            let id = request_n(req.headers());
            let total = if id % 3 == 2 { SLOW } else { FAST };
            rec.started.lock().unwrap().1 += 1;
            let end = WorkEnd(Arc::clone(&rec), id, true);
            // A job that a dropped connection does not cancel (a query, a computation):
            // only the deadline carried into it stops it early.
            // Stopped early: the budget is spent, the answer is a 504 (if the layer's own
            // deadline has not answered first).
            let done = tokio::spawn(context::carry(leaf_work(total, end))).await;
            let result = if done.unwrap_or(false) {
                Ok(StatusCode::OK)
            } else {
                Err(true)
            };
            Ok::<_, Infallible>(answer(result))
        }
    });
    let mut leaf_layer = layer("leaf", &record, propagate);
    if propagate {
        leaf_layer = leaf_layer.caller_budget(budget_header());
    }
    let (leaf_addr, leaf_task) = serve(leaf_layer.layer(leaf).boxed_clone()).await;

    let rec = Arc::clone(&record);
    let out = Out::new(propagate);
    let middle = service_fn(move |req: Request<Incoming>| {
        let rec = Arc::clone(&rec);
        let out = out.clone();
        async move {
            let id = request_n(req.headers());
            rec.started.lock().unwrap().0 += 1;
            let _end = WorkEnd(Arc::clone(&rec), id, false);
            Ok::<_, Infallible>(answer(out.call(leaf_addr, id).await))
        }
    });
    let mut middle_layer = layer("middle", &record, propagate);
    if propagate {
        middle_layer = middle_layer.caller_budget(budget_header());
    }
    let (middle_addr, middle_task) = serve(middle_layer.layer(middle).boxed_clone()).await;

    let out = Out::new(propagate);
    let edge = service_fn(move |req: Request<Incoming>| {
        let out = out.clone();
        async move {
            let id = request_n(req.headers());
            Ok::<_, Infallible>(answer(out.call(middle_addr, id).await))
        }
    });
    let edge_layer = layer("edge", &record, propagate).timeout(EDGE_DEADLINE);
    let (edge_addr, edge_task) = serve(edge_layer.layer(edge).boxed_clone()).await;

    // The load: `requests` requests, one every SPACING, from a client without a deadline.
    let load = Out::new(false);
    let mut calls = Vec::new();
    for id in 0..requests as u64 {
        calls.push(tokio::spawn(load.clone().call(edge_addr, id)));
        tokio::time::sleep(SPACING).await;
    }
    for call in calls {
        let _ = call.await;
    }
    // Wait (bounded) for the work below to end.
    let drain = Instant::now();
    loop {
        let (middles, leaves) = *record.started.lock().unwrap();
        let done = record.middle_end.lock().unwrap().len() >= middles
            && record.leaf_end.lock().unwrap().len() >= leaves;
        if done || drain.elapsed() > DRAIN {
            break;
        }
        tokio::time::sleep(STEP).await;
    }
    for task in [leaf_task, middle_task, edge_task] {
        task.abort();
    }

    let answered = record.edge_answered.lock().unwrap().clone();
    let after = |ends: &HashMap<u64, Instant>| -> Duration {
        ends.iter()
            .filter_map(|(id, end)| Some(end.saturating_duration_since(*answered.get(id)?)))
            .sum()
    };
    let (middles, leaves) = *record.started.lock().unwrap();
    let middle_end = record.middle_end.lock().unwrap();
    let leaf_end = record.leaf_end.lock().unwrap();
    Stats {
        requests,
        edge_504: *record.edge_504.lock().unwrap(),
        middle_after: after(&middle_end),
        leaf_after: after(&leaf_end),
        slow: (0..requests).filter(|id| id % 3 == 2).count(),
        unfinished: (middles - middle_end.len()) + (leaves - leaf_end.len()),
        lines: std::mem::take(&mut *record.lines.lock().unwrap()),
        one_id: one_id(&record).0,
        mixed_ids: one_id(&record).1,
    }
}

/// How many requests have a line from each of the three services, all with one request id;
/// and which requests' lines disagree on it.
fn one_id(record: &Record) -> (usize, Vec<u64>) {
    let mut by_request: HashMap<u64, Vec<(&'static str, String)>> = HashMap::new();
    for (n, service, id) in record.ids.lock().unwrap().iter() {
        by_request
            .entry(*n)
            .or_default()
            .push((service, id.clone()));
    }
    let mut all_three = 0;
    let mut mixed = Vec::new();
    for (n, lines) in &by_request {
        let first = &lines[0].1;
        if lines.iter().any(|(_, id)| id != first) {
            mixed.push(*n);
        } else if lines.len() == 3 && first != "-" {
            all_three += 1;
        }
    }
    mixed.sort_unstable();
    (all_three, mixed)
}

fn print_chain(title: &str, stats: &Stats, verbose: bool) {
    println!("{title}: the access lines of request #2 (slow), in commit order");
    for (id, line) in &stats.lines {
        if verbose || *id == 2 {
            println!("  {line}");
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut requests = 30usize;
    let mut verbose = false;
    let mut at = 0;
    while at < args.len() {
        match args[at].as_str() {
            "--requests" => {
                at += 1;
                requests = args
                    .get(at)
                    .and_then(|s| s.parse().ok())
                    .filter(|&n| (3..=1000).contains(&n))
                    .ok_or("--requests needs a number from 3 to 1000")?;
            }
            "--verbose" => verbose = true,
            other => return Err(format!("unknown argument {other:?}").into()),
        }
        at += 1;
    }

    let without = run(false, requests).await;
    let with = run(true, requests).await;
    print_chain("without propagation", &without, verbose);
    print_chain("with propagation", &with, verbose);

    println!();
    println!(
        "| {:<23} | {:>8} | {:>29} | {:>29} | {:>27} |",
        "",
        "requests",
        "edge 504s (own/cut/below)",
        "middle work after edge (ms)",
        "leaf work after edge (ms)"
    );
    println!(
        "|{:-<25}|{:->10}|{:->31}|{:->31}|{:->29}|",
        "", "", "", "", ""
    );
    for (name, s) in [
        ("without propagation", &without),
        ("with propagation", &with),
    ] {
        let [own, cut, below] = s.edge_504;
        println!(
            "| {:<23} | {:>8} | {:>29} | {:>29.0} | {:>27.0} |",
            name,
            s.requests,
            format!("{} ({own}/{cut}/{below})", own + cut + below),
            s.middle_after.as_secs_f64() * 1e3,
            s.leaf_after.as_secs_f64() * 1e3,
        );
    }

    let mut failures = Vec::new();
    let slow = without.slow as f64;
    let (w, p) = (
        without.leaf_after.as_secs_f64() * 1e3,
        with.leaf_after.as_secs_f64() * 1e3,
    );
    if w < 300.0 * slow {
        failures.push(format!(
            "without propagation the leaf worked only {w:.0} ms after the edge's answers \
             (expected at least 300 ms per slow request): the demo shows nothing"
        ));
    }
    if p * 5.0 > w {
        failures.push(format!(
            "propagation did not cut the leaf's work to a fifth ({p:.0} ms vs {w:.0} ms)"
        ));
    }
    if p > 25.0 * slow {
        failures.push(format!(
            "with propagation the leaf worked {p:.0} ms after the edge's answers \
             (expected at most 25 ms per slow request)"
        ));
    }
    if !with.mixed_ids.is_empty() {
        failures.push(format!(
            "with propagation, the lines of requests {:?} do not share one request id",
            with.mixed_ids
        ));
    }
    if with.one_id * 2 < with.requests {
        failures.push(format!(
            "with propagation, only {} of {} requests have one request id in all three lines",
            with.one_id, with.requests
        ));
    }
    if without.unfinished + with.unfinished > 0 {
        failures.push(format!(
            "{} pieces of work had not ended {DRAIN:?} after the last answer",
            without.unfinished + with.unfinished
        ));
    }
    // One trace, one tree across the three services (`tree.rs`).
    failures.extend(tree::run().await);
    if failures.is_empty() {
        println!(
            "\nok: propagation cut the leaf's work after the edge's answer ({w:.0} -> {p:.0} ms); \
             {} of {} requests carried one request id through all three services",
            with.one_id, with.requests
        );
        Ok(())
    } else {
        for failure in &failures {
            eprintln!("FAIL: {failure}");
        }
        std::process::exit(1);
    }
}
