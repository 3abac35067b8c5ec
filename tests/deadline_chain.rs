//! A two-hop chain over loopback: hop A (`SharedHeadersLayer` with a 300 ms deadline and
//! `caller_budget`) calls hop B from its handler through `client::PropagateLayer` (margin 50 ms)
//! over hyper-util's client; hop B takes the caller's budget (`caller_budget`, its own deadline
//! 5 s). Checked: the budget header arrives at B with what A had left minus the margin (within
//! a bound), B's deadline comes from the caller and its budget is no more than what was left,
//! and a handler whose budget is spent sends nothing to B.
//!
//! Seeded bugs, each failing this test (checked by hand): `client::propagate::set_budget`
//! returning before it inserts (no header at B: `arrived` is `None`); `budget_for` ignoring the
//! margin (the header is over `left - MARGIN`); the server taking the caller's deadline 50 ms
//! later than the header says (B's budget over what was sent); the server ignoring the
//! caller's header (B's source is `Server`); `budget_for` never answering "nothing left" (B
//! receives the exhausted call).
#![cfg(all(feature = "server", feature = "client"))]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{HeaderName, Request, Response, StatusCode};
use http_body_util::Empty;
use hyper::body::{Bytes, Incoming};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use shared_headers::client::{PropagateError, PropagateLayer};
use shared_headers::deadline::{BudgetHeader, DeadlineSource};
use shared_headers::server::SharedHeadersLayer;
use shared_headers::{Committed, Exchange};
use tower::util::BoxCloneService;
use tower::{Layer, ServiceExt, service_fn};

type Body = Empty<Bytes>;
type Svc = BoxCloneService<
    Request<Incoming>,
    Response<shared_headers::server::ResponseBody<Body>>,
    Infallible,
>;

const A_DEADLINE: Duration = Duration::from_millis(300);
const MARGIN: Duration = Duration::from_millis(50);
/// How much less than `left - MARGIN` may arrive at B: the time from A's reading of what is
/// left to the client's, on a busy machine.
const SLACK: Duration = Duration::from_millis(100);
const LIMIT: Duration = Duration::from_secs(20);

fn header() -> BudgetHeader {
    BudgetHeader::millis(HeaderName::from_static("x-budget-ms"))
}

fn client() -> Client<HttpConnector, Body> {
    Client::builder(TokioExecutor::new()).build_http()
}

async fn serve(service: Svc) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let service = TowerToHyperService::new(service.clone());
            let conn = hyper::server::conn::http1::Builder::new();
            tokio::spawn(conn.serve_connection(TokioIo::new(stream), service));
        }
    });
    addr
}

/// What the chain saw.
#[derive(Default)]
struct Seen {
    /// What A had left just before its call, per call.
    left: Vec<Duration>,
    /// The budget header B received, parsed, per request.
    arrived: Vec<Option<Duration>>,
    /// B's records.
    b_committed: Vec<Committed>,
    /// A's client's error, if its call was not made.
    a_error: Vec<String>,
}

async fn chain() -> (SocketAddr, Arc<Mutex<Seen>>) {
    let seen = Arc::new(Mutex::new(Seen::default()));

    let log = Arc::clone(&seen);
    let b = service_fn(move |req: Request<Incoming>| {
        let log = Arc::clone(&log);
        async move {
            let arrived = header().parse_from(req.headers()).map(Result::unwrap);
            log.lock().unwrap().arrived.push(arrived);
            Ok::<_, Infallible>(Response::new(Empty::new()))
        }
    });
    let log = Arc::clone(&seen);
    let b_layer = SharedHeadersLayer::new()
        .timeout(Duration::from_secs(5))
        .caller_budget(header())
        .on_commit(move |c| log.lock().unwrap().b_committed.push(c.committed().clone()));
    let b_addr = serve(b_layer.layer(b).boxed_clone()).await;

    let log = Arc::clone(&seen);
    let out = PropagateLayer::new(header()).margin(MARGIN).layer(client());
    let a = service_fn(move |req: Request<Incoming>| {
        let log = Arc::clone(&log);
        let out = out.clone();
        async move {
            let deadline = req
                .extensions()
                .get::<Exchange>()
                .unwrap()
                .deadline()
                .unwrap();
            log.lock().unwrap().left.push(deadline.remaining());
            let call = Request::get(format!("http://{b_addr}/"))
                .body(Empty::new())
                .unwrap();
            let mut res = Response::new(Empty::new());
            match out.oneshot(call).await {
                Ok(answer) => *res.status_mut() = answer.status(),
                Err(e) => {
                    let kind = match e {
                        PropagateError::Exhausted(_) => "exhausted".to_owned(),
                        PropagateError::Elapsed(_) => "elapsed".to_owned(),
                        PropagateError::Service(e) => e.to_string(),
                        other => other.to_string(),
                    };
                    log.lock().unwrap().a_error.push(kind);
                    *res.status_mut() = StatusCode::GATEWAY_TIMEOUT;
                }
            }
            Ok::<_, Infallible>(res)
        }
    });
    let a_layer = SharedHeadersLayer::new()
        .timeout(A_DEADLINE)
        .timeout_status(StatusCode::GATEWAY_TIMEOUT)
        .caller_budget(header());
    (serve(a_layer.layer(a).boxed_clone()).await, seen)
}

async fn get(addr: SocketAddr, budget: Option<&str>) -> StatusCode {
    let mut req = Request::get(format!("http://{addr}/"));
    if let Some(budget) = budget {
        req = req.header("x-budget-ms", budget);
    }
    let call = client().request(req.body(Empty::new()).unwrap());
    tokio::time::timeout(LIMIT, call)
        .await
        .unwrap()
        .unwrap()
        .status()
}

#[tokio::test]
async fn the_budget_travels_to_the_next_hop_and_is_its_deadline() {
    let (a, seen) = chain().await;
    let sent_at = Instant::now();
    assert_eq!(get(a, None).await, StatusCode::OK);
    assert!(sent_at.elapsed() < A_DEADLINE, "the chain answered late");

    let seen = seen.lock().unwrap();
    let left = seen.left[0];
    assert!(left <= A_DEADLINE, "{left:?}");
    // The header arrives with what A had left, minus the margin, within a bound.
    let arrived = seen.arrived[..]
        .first()
        .copied()
        .flatten()
        .expect("B received a budget header");
    assert!(
        arrived <= left - MARGIN,
        "{arrived:?} > {left:?} - {MARGIN:?}"
    );
    assert!(
        arrived + SLACK >= left - MARGIN,
        "{arrived:?} << {left:?} - {MARGIN:?}"
    );
    // B's deadline is the caller's, and its budget no more than what was sent.
    let b = &seen.b_committed[0];
    let deadline = b.deadline().expect("B has a deadline");
    assert_eq!(deadline.source(), DeadlineSource::Caller);
    let budget = b.budget().unwrap();
    assert!(
        budget <= arrived,
        "B's budget {budget:?} > the header's {arrived:?}"
    );
    assert!(
        budget + SLACK >= arrived,
        "B's budget {budget:?} << {arrived:?}"
    );
}

#[tokio::test]
async fn a_spent_budget_sends_nothing_to_the_next_hop() {
    let (a, seen) = chain().await;
    // A's budget (20 ms, from its caller) is less than its client's margin: nothing left.
    let status = get(a, Some("20")).await;
    let seen = seen.lock().unwrap();
    assert!(seen.arrived.is_empty(), "B received {:?}", seen.arrived);
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(seen.a_error, ["exhausted"]);
    assert!(seen.b_committed.is_empty());
}
