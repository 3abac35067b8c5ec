//! The reqwest `PropagateMiddleware` keeps the shorter of the client's own timeout and the
//! deadline, over loopback: a server on 127.0.0.1:0 answers every request after 600 ms.
//!
//! * the client's timeout (100 ms, `ClientBuilder::timeout`) under a 5 s deadline: reqwest's
//!   own timeout error, well before the answer;
//! * a client without a timeout under a 200 ms deadline: the crate's `PropagateError::Elapsed`;
//! * a request's own shorter timeout is kept, a longer one does not outlive the deadline;
//! * no deadline: reqwest's own behaviour (its timeout error, or the answer).
//!
//! Every call is bounded by `LIMIT`.
#![cfg(feature = "reqwest")]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use http::{Request, Response, StatusCode};
use http_body_util::Empty;
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::TokioIo;
use shared_headers::client::PropagateError;
use shared_headers::client::reqwest::PropagateMiddleware;
use shared_headers::context::RequestScope;
use shared_headers::deadline::{BudgetHeader, Deadline, DeadlineSource};
use tokio::time::timeout;

const LIMIT: Duration = Duration::from_secs(20);
/// How long the server takes to answer.
const ANSWER_AFTER: Duration = Duration::from_millis(600);
/// The client's own timeout, when it has one.
const CLIENT_TIMEOUT: Duration = Duration::from_millis(100);

/// A server that answers `200` after `ANSWER_AFTER`.
async fn slow_server() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let service = hyper::service::service_fn(|_: Request<Incoming>| async {
                tokio::time::sleep(ANSWER_AFTER).await;
                Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
            });
            let conn = hyper::server::conn::http1::Builder::new();
            tokio::spawn(conn.serve_connection(TokioIo::new(stream), service));
        }
    });
    addr
}

/// reqwest through `PropagateMiddleware`, with the client-wide `timeout` if any.
fn client(timeout: Option<Duration>) -> reqwest_middleware::ClientWithMiddleware {
    let mut builder = reqwest::Client::builder().no_proxy();
    if let Some(timeout) = timeout {
        builder = builder.timeout(timeout);
    }
    reqwest_middleware::ClientBuilder::new(builder.build().unwrap())
        .with(PropagateMiddleware::new(BudgetHeader::grpc_timeout()))
        .build()
}

/// What a call ended with.
#[derive(Debug, PartialEq)]
enum Ended {
    Answered(StatusCode),
    /// reqwest's own timeout error.
    ReqwestTimeout,
    /// The crate's deadline error.
    Deadline(PropagateError<Infallible>),
    Other(String),
}

/// Sends `request` (under `deadline` if any); what it ended with and how long it took.
async fn send(
    request: reqwest_middleware::RequestBuilder,
    deadline: Option<Deadline>,
) -> (Ended, Duration) {
    let started = Instant::now();
    let result = match deadline {
        Some(deadline) => {
            timeout(
                LIMIT,
                RequestScope::new().deadline(deadline).scope(request.send()),
            )
            .await
        }
        None => timeout(LIMIT, request.send()).await,
    };
    let took = started.elapsed();
    let ended = match result.expect("the call ended within LIMIT") {
        Ok(response) => Ended::Answered(response.status()),
        Err(reqwest_middleware::Error::Reqwest(e)) if e.is_timeout() => Ended::ReqwestTimeout,
        Err(reqwest_middleware::Error::Middleware(e)) => {
            match e.downcast_ref::<PropagateError<Infallible>>() {
                Some(deadline) => Ended::Deadline(deadline.clone()),
                None => Ended::Other(format!("{e:#}")),
            }
        }
        Err(e) => Ended::Other(e.to_string()),
    };
    (ended, took)
}

// The bug: the middleware set the request's timeout to the deadline's when the request had
// none, which replaced the client's shorter one: the call waited for the answer (600 ms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_shorter_timeout_is_kept_under_a_long_deadline() {
    let addr = slow_server().await;
    let url = format!("http://{addr}/");
    let deadline = Deadline::after(Duration::from_secs(5), DeadlineSource::Server).unwrap();
    let (ended, took) = send(client(Some(CLIENT_TIMEOUT)).get(&url), Some(deadline)).await;
    assert_eq!(ended, Ended::ReqwestTimeout, "after {took:?}");
    // 5x the client's timeout, and before the answer could come.
    assert!(took < CLIENT_TIMEOUT * 5, "{took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shorter_deadline_cuts_with_the_crates_error() {
    let addr = slow_server().await;
    let url = format!("http://{addr}/");
    // A client without a timeout.
    let deadline = Deadline::after(Duration::from_millis(200), DeadlineSource::Server).unwrap();
    let (ended, took) = send(client(None).get(&url), Some(deadline)).await;
    assert_eq!(ended, Ended::Deadline(PropagateError::Elapsed(deadline)));
    assert!(took >= Duration::from_millis(150), "cut early: {took:?}");
    // A client whose timeout is longer than the deadline: the deadline's cut first.
    let deadline = Deadline::after(Duration::from_millis(200), DeadlineSource::Server).unwrap();
    let long = client(Some(Duration::from_secs(3)));
    let (ended, _) = send(long.get(&url), Some(deadline)).await;
    assert_eq!(ended, Ended::Deadline(PropagateError::Elapsed(deadline)));
    // A request's own longer timeout does not outlive the deadline either.
    let deadline = Deadline::after(Duration::from_millis(200), DeadlineSource::Server).unwrap();
    let request = client(None).get(&url).timeout(Duration::from_secs(3));
    let (ended, _) = send(request, Some(deadline)).await;
    assert_eq!(ended, Ended::Deadline(PropagateError::Elapsed(deadline)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requests_own_shorter_timeout_is_kept() {
    let addr = slow_server().await;
    let url = format!("http://{addr}/");
    let deadline = Deadline::after(Duration::from_secs(5), DeadlineSource::Server).unwrap();
    let request = client(None).get(&url).timeout(CLIENT_TIMEOUT);
    let (ended, took) = send(request, Some(deadline)).await;
    assert_eq!(ended, Ended::ReqwestTimeout, "after {took:?}");
    assert!(took < CLIENT_TIMEOUT * 5, "{took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_deadline_reqwest_behaves_as_its_own() {
    let addr = slow_server().await;
    let url = format!("http://{addr}/");
    let (ended, took) = send(client(Some(CLIENT_TIMEOUT)).get(&url), None).await;
    assert_eq!(ended, Ended::ReqwestTimeout, "after {took:?}");
    assert!(took < CLIENT_TIMEOUT * 5, "{took:?}");
    let (ended, took) = send(client(None).get(&url), None).await;
    assert_eq!(ended, Ended::Answered(StatusCode::OK));
    assert!(took >= ANSWER_AFTER - Duration::from_millis(50), "{took:?}");
}
