//! The fault matrix over sockets: hyper-util's legacy `Client` (HTTP/1.1 and h2c) and tonic's
//! `Channel` through an in-process fault proxy on 127.0.0.1, with this crate's
//! `HealthConnector` + `ConnRetryLayer`, against a stock control. A short version of
//! `examples/pool.rs` (fewer requests); every run of a test goes at once, so the test takes
//! about as long as its longest run (a few seconds).
#![cfg(all(feature = "hyper-util", feature = "tonic"))]

#[path = "../examples/pool/fault.rs"]
mod fault;

use std::time::Duration;

use fault::{Config, Fault, Kind, Row, run};
use http::Method;

const REQUESTS: usize = 10;
const INTERVAL: Duration = Duration::from_millis(100);
const DEADLINE: Duration = Duration::from_secs(1);

async fn rows(runs: Vec<(Kind, Config, Fault, Method)>) -> Vec<Row> {
    rows_within(runs, DEADLINE).await
}

/// [`rows`] with `deadline` for each request.
async fn rows_within(runs: Vec<(Kind, Config, Fault, Method)>, deadline: Duration) -> Vec<Row> {
    let tasks: Vec<_> = runs
        .into_iter()
        .map(|(kind, config, fault, method)| {
            tokio::spawn(run(
                kind, config, fault, method, REQUESTS, INTERVAL, deadline,
            ))
        })
        .collect();
    let mut rows = Vec::new();
    for task in tasks {
        rows.push(task.await.expect("a run").expect("a run's sockets"));
    }
    println!("{}", fault::HEAD);
    for row in &rows {
        println!("{row}");
    }
    rows
}

fn explain(row: &Row) -> String {
    format!("{row}\nfirst error: {:?}", row.first_error())
}

/// With the crate's defaults, no idempotent request fails over HTTP/2 (hyper-util and tonic),
/// whatever the fault, and a silent connection is closed within 2 s of the fault while
/// requests keep coming. Over HTTP/1.1, which has no ping, the one request written to a silent
/// connection waits for its deadline; every other fault costs nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_idempotent_request_fails_and_a_silent_connection_goes_within_2_s() {
    let mut runs = Vec::new();
    for kind in [Kind::HyperH1, Kind::HyperH2, Kind::Tonic] {
        for fault in Fault::MATRIX {
            runs.push((kind, Config::Crate, fault, Method::GET));
        }
    }
    // The control: the stock client loses requests to a black hole.
    runs.push((Kind::HyperH2, Config::Stock, Fault::BlackHole, Method::GET));
    let rows = rows(runs).await;
    for row in &rows {
        let silent = matches!(row.fault, Fault::BlackHole | Fault::WriteStall);
        match (row.config, row.kind) {
            (Config::Stock, _) => assert!(row.failed() > 0, "{}", explain(row)),
            (_, Kind::HyperH1) if silent => assert!(row.failed() <= 1, "{}", explain(row)),
            _ => assert_eq!(row.failed(), 0, "{}", explain(row)),
        }
        if row.config == Config::Crate && silent && row.kind != Kind::HyperH1 {
            let closed = row.closed_at.expect("the faulted connection was closed");
            assert!(closed <= Duration::from_secs(2), "{}", explain(row));
        }
    }
}

/// A connection that went silent while idle is found from the next request on: no request
/// fails, and the connection is closed within 2 s of that request (the ping goes at once: nothing
/// was read for longer than `PING_AFTER`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_idle_connection_goes_within_2_s_of_the_next_request() {
    let idle = Duration::from_millis(1500);
    let tasks: Vec<_> = [Kind::HyperH2, Kind::Tonic]
        .into_iter()
        .flat_map(|kind| [(kind, Fault::BlackHole), (kind, Fault::WriteStall)])
        .map(|(kind, fault)| {
            tokio::spawn(fault::run_after(
                kind,
                Config::Crate,
                fault,
                Method::GET,
                REQUESTS,
                INTERVAL,
                DEADLINE,
                idle,
            ))
        })
        .collect();
    for task in tasks {
        let row = task.await.unwrap().unwrap();
        println!("{row}");
        assert_eq!(row.failed(), 0, "{}", explain(&row));
        let closed = row.closed_at.expect("the faulted connection was closed");
        assert!(closed > idle, "{}", explain(&row));
        assert!(closed - idle <= Duration::from_secs(2), "{}", explain(&row));
    }
}

/// Ten `GET`s sent 1 ms apart as the connection is reset or closed under the first: every one
/// is answered (sent again on a fresh connection, or never written to the dead one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_at_the_fault_are_all_answered() {
    let mut tasks = Vec::new();
    for kind in [Kind::HyperH1, Kind::HyperH2, Kind::Tonic] {
        for fault in [Fault::RstOnRequest, Fault::FinOnRequest] {
            tasks.push(tokio::spawn(fault::run_after(
                kind,
                Config::Crate,
                fault,
                Method::GET,
                REQUESTS,
                Duration::from_millis(1),
                DEADLINE,
                Duration::from_millis(50),
            )));
        }
    }
    for task in tasks {
        let row = task.await.unwrap().unwrap();
        println!("{row}");
        assert_eq!(row.failed(), 0, "{}", explain(&row));
    }
}

/// A server slower than the deadline keeps its HTTP/2 connection: the timeouts are not taken
/// for death, the ping is answered. 0.3 s deadlines, answers at 0.45 s: about 4 times sooner
/// than the 1.75 s a held stream waits (the 1.5 s / 1 s shape, 0.25 s from the
/// verdict, is the pool example's slow-server row, judged only when its timer kept time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_server_keeps_its_connection() {
    let runs = [Kind::HyperH2, Kind::Tonic]
        .into_iter()
        .map(|kind| (kind, Config::Crate, Fault::Slow, Method::GET))
        .collect();
    for row in rows_within(runs, Duration::from_millis(300)).await {
        assert_eq!(row.failed(), REQUESTS, "{}", explain(&row));
        assert_eq!(row.connections, 1, "{}", explain(&row));
        assert!(row.first_error() == Some("timed out"), "{}", explain(&row));
    }
}

/// A `POST` written to a connection that dies is not sent again, and its error says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_written_post_fails_with_an_error_that_says_the_connection_died() {
    let runs = [Kind::HyperH1, Kind::HyperH2]
        .into_iter()
        .map(|kind| (kind, Config::Crate, Fault::RstOnRequest, Method::POST))
        .collect();
    for row in rows(runs).await {
        assert!(row.failed() >= 1, "{}", explain(&row));
        let error = row.first_error().unwrap();
        assert!(
            error.starts_with("the connection died with the request in flight"),
            "{}",
            explain(&row)
        );
    }
}

/// `HealthIo` on its own: once its health is dead (marked from elsewhere), a read parked on a
/// silent socket wakes with an error naming the cause, and no write reaches the peer.
#[tokio::test]
async fn a_dead_connection_wakes_its_reader_and_writes_nothing() {
    use hyper_util::rt::TokioIo;
    use shared_headers::conn::{Cause, HealthIo};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let (ours, mut peer) = tokio::io::duplex(1024);
    let io = HealthIo::new(TokioIo::new(ours));
    let health = io.health().clone();
    let mut io = TokioIo::new(io);
    let reader = tokio::spawn(async move {
        let mut buf = [0u8; 16];
        let read = io.read(&mut buf).await;
        (io, read)
    });
    tokio::time::sleep(Duration::from_millis(20)).await; // the read is parked
    health.mark_dead(Cause::HealthCheck);
    let (mut io, read) = tokio::time::timeout(Duration::from_secs(5), reader)
        .await
        .expect("the parked read was woken")
        .unwrap();
    let err = read.unwrap_err();
    assert!(err.to_string().contains("the health check failed"), "{err}");
    assert!(io.write_all(b"GET / HTTP/1.1\r\n\r\n").await.is_err());
    drop(io);
    let mut seen = Vec::new();
    peer.read_to_end(&mut seen).await.unwrap();
    assert!(seen.is_empty(), "{seen:?}");
}

/// A connection marked dead from outside (through the health in a response's extensions) is
/// closed and never used again: the next request goes on a new connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_marked_dead_from_outside_is_never_used_again() {
    use shared_headers::conn::{Cause, ConnHealth};
    let bench = fault::Bench::start(Duration::ZERO).await.unwrap();
    let client =
        shared_headers::conn::HealthConnector::client_builder(hyper_util::rt::TokioExecutor::new())
            .http2_only(true)
            .build::<_, http_body_util::Empty<hyper::body::Bytes>>(
                shared_headers::conn::HealthConnector::new(
                    hyper_util::client::legacy::connect::HttpConnector::new(),
                )
                .health_in_responses(),
            );
    let uri: http::Uri = format!("http://{}/", bench.proxy).parse().unwrap();
    let first = client.get(uri.clone()).await.unwrap();
    let health = first.extensions().get::<ConnHealth>().unwrap().clone();
    assert_eq!(client.get(uri.clone()).await.unwrap().status(), 200);
    assert_eq!(bench.connections(), 1);
    health.mark_dead(Cause::HealthCheck);
    // The connection's task closes it once it runs; a request checked out of the pool before
    // then is refused unwritten ("the connection is dead", hyper's error, no retry layer here)
    // and never reaches the wire. The next one goes to a fresh connection.
    let next = match client.get(uri.clone()).await {
        Ok(res) => res,
        Err(e) => {
            let mut chain = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(inner) = source {
                chain.push_str(&format!(": {inner}"));
                source = inner.source();
            }
            assert!(
                chain.contains("dead"),
                "refused for another reason: {chain}"
            );
            client.get(uri).await.unwrap()
        }
    };
    let next_health = next.extensions().get::<ConnHealth>().unwrap();
    assert!(!ConnHealth::ptr_eq(&health, next_health));
    assert_eq!(bench.connections(), 2);
    assert_eq!(health.cause(), Some(Cause::HealthCheck));
}

/// hyper-util's `Client` and tonic's `Channel` lose nothing by resending through the spare
/// cloned when the layer wrapped them: their clones share the pool (and the connection) the
/// caller's handle opened after that, so the resend uses it; no connection is opened for it.
#[cfg(all(feature = "tonic", feature = "hyper-util"))]
mod clones_share_state {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Poll};
    use std::time::Duration;

    use http::{Request, Response, Uri};
    use http_body_util::{BodyExt, Empty, Full};
    use hyper::body::{Bytes, Incoming};
    use hyper_util::client::legacy::Client;
    use hyper_util::client::legacy::connect::HttpConnector;
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use shared_headers::client::ConnRetryLayer;
    use tokio::net::TcpListener;
    use tower::{Layer, Service, ServiceExt};

    type BoxError = Box<dyn std::error::Error + Send + Sync>;

    /// An h2c server answering every request at once; it counts the connections it accepted.
    async fn counting_server() -> (std::net::SocketAddr, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(|_: Request<Incoming>| async {
                        Ok::<_, hyper::Error>(
                            Response::builder()
                                .header("content-type", "application/grpc")
                                .header("grpc-status", "0")
                                .body(Full::new(Bytes::new()))
                                .unwrap(),
                        )
                    });
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        (addr, accepted)
    }

    /// A client whose `fail`-th call (counting all its clones) fails as a reset connection,
    /// without sending; every other call goes to the client inside. The resend is counted.
    #[derive(Clone)]
    struct FailOne<S> {
        inner: S,
        calls: Arc<AtomicUsize>,
        fail: usize,
    }

    impl<S, R> Service<R> for FailOne<S>
    where
        S: Service<R>,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
        S::Response: Send + 'static,
    {
        type Response = S::Response;
        type Error = std::io::Error;
        type Future = Pin<Box<dyn Future<Output = Result<S::Response, std::io::Error>> + Send>>;

        fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), std::io::Error>> {
            self.inner.poll_ready(cx).map_err(std::io::Error::other)
        }

        fn call(&mut self, request: R) -> Self::Future {
            if self.calls.fetch_add(1, Ordering::SeqCst) + 1 == self.fail {
                return Box::pin(std::future::ready(Err(std::io::Error::from(
                    std::io::ErrorKind::ConnectionReset,
                ))));
            }
            let answer = self.inner.call(request);
            Box::pin(async move { answer.await.map_err(std::io::Error::other) })
        }
    }

    /// Three GETs through the caller's handle of a wrapped client (the first opens the one
    /// connection), the third failing and resent through the spare: 4 calls, 1 connection.
    async fn three_gets<S, B>(client: S, request: impl Fn() -> Request<B>, accepted: &AtomicUsize)
    where
        S: Clone + Service<Request<B>> + Send + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
        S::Response: Send + 'static,
        B: shared_headers::client::ReplayBody + Send + 'static,
    {
        let calls = Arc::new(AtomicUsize::new(0));
        let mut client = ConnRetryLayer::new().layer(FailOne {
            inner: client,
            calls: calls.clone(),
            fail: 3,
        });
        for _ in 0..3 {
            let answer = client.ready().await.unwrap().call(request());
            tokio::time::timeout(Duration::from_secs(10), answer)
                .await
                .expect("bounded")
                .expect("answered, the third after its resend");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 4, "3 sends and 1 resend");
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            1,
            "the resend went out on the connection the caller's handle opened after the spare \
             was cloned"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn hyper_util_client_resends_on_the_callers_pool() {
        let (addr, accepted) = counting_server().await;
        let mut builder = Client::builder(TokioExecutor::new());
        builder.http2_only(true);
        let client = builder.build::<_, Empty<Bytes>>(HttpConnector::new());
        let client = tower::ServiceBuilder::new()
            .map_response(|r: Response<Incoming>| {
                tokio::spawn(r.into_body().collect());
            })
            .service(client);
        let uri: Uri = format!("http://{addr}/").parse().unwrap();
        three_gets(
            client,
            || Request::get(uri.clone()).body(Empty::new()).unwrap(),
            &accepted,
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tonic_channel_resends_on_the_callers_connection() {
        let (addr, accepted) = counting_server().await;
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect_lazy();
        let client = channel;
        let uri: Uri = format!("http://{addr}/svc/Method").parse().unwrap();
        three_gets(
            client,
            || {
                Request::get(uri.clone())
                    .header("content-type", "application/grpc")
                    .body(tonic::body::Body::empty())
                    .unwrap()
            },
            &accepted,
        )
        .await;
    }
}
