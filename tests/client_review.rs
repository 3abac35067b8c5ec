//! Client deadlines under inputs the first tests missed (a hostile review's findings): a
//! reqwest body read bounded by the deadline when the timeout is known, and a budget the caller
//! tightened itself leaves the service's own error as it is. Every network test binds
//! 127.0.0.1:0 and is bounded by `LIMIT`.
#![cfg(all(feature = "client", feature = "reqwest"))]

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Empty;
use shared_headers::client::{PropagateError, PropagateLayer};
use shared_headers::context::RequestScope;
use shared_headers::deadline::{BudgetHeader, Deadline, DeadlineSource};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::{Layer, ServiceExt, service_fn};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const LIMIT: Duration = Duration::from_secs(20);

/// A server that sends its head at once and its 4-byte body 3 s later.
async fn slow_body_server() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf).await;
                let _ = stream
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\n")
                    .await;
                tokio::time::sleep(Duration::from_secs(3)).await;
                let _ = stream.write_all(b"late").await;
            });
        }
    });
    addr
}

/// `send` and the body read under a 200 ms deadline: how long it took and how it ended.
async fn read_under_deadline(
    middleware: shared_headers::client::reqwest::PropagateMiddleware,
    client_timeout: Option<Duration>,
    request_timeout: Option<Duration>,
) -> (Duration, Result<Bytes, BoxError>) {
    let addr = slow_body_server().await;
    let mut builder = reqwest::Client::builder().no_proxy();
    if let Some(timeout) = client_timeout {
        builder = builder.timeout(timeout);
    }
    let client = reqwest_middleware::ClientBuilder::new(builder.build().unwrap())
        .with(middleware)
        .build();
    let deadline = Deadline::after(Duration::from_millis(200), DeadlineSource::Server).unwrap();
    let started = Instant::now();
    let result = tokio::time::timeout(
        LIMIT,
        RequestScope::new().deadline(deadline).scope(async {
            let mut request = client.get(format!("http://{addr}/"));
            if let Some(timeout) = request_timeout {
                request = request.timeout(timeout);
            }
            let res = request.send().await?;
            Ok::<_, BoxError>(res.bytes().await?)
        }),
    )
    .await
    .expect("bounded");
    (started.elapsed(), result)
}

/// A reqwest client whose timeout (30 s) the middleware was told: the request's timeout
/// becomes the shorter of it and the deadline's cut, which bounds the body read too. Seeded
/// bug: the middleware racing only `send` (the head) lets the body arrive after ~3 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_told_client_timeout_lets_the_deadline_bound_the_body_read() {
    let middleware =
        shared_headers::client::reqwest::PropagateMiddleware::new(BudgetHeader::grpc_timeout())
            .client_timeout(Duration::from_secs(30));
    let (took, result) = read_under_deadline(middleware, Some(Duration::from_secs(30)), None).await;
    assert!(result.is_err(), "{result:?}");
    assert!(
        took < Duration::from_secs(1),
        "a 200 ms deadline; took {took:?}"
    );
}

/// A request with its own (longer) timeout: the middleware can read it, so the deadline's
/// cut becomes the request's timeout and bounds the body read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requests_own_timeout_lets_the_deadline_bound_the_body_read() {
    let middleware =
        shared_headers::client::reqwest::PropagateMiddleware::new(BudgetHeader::grpc_timeout());
    let (took, result) = read_under_deadline(middleware, None, Some(Duration::from_secs(30))).await;
    assert!(result.is_err(), "{result:?}");
    assert!(
        took < Duration::from_secs(1),
        "a 200 ms deadline; took {took:?}"
    );
}

/// `PropagateLayer` under a 10 s deadline, for a request that carries its own tighter budget
/// (`grpc-timeout: 1m`, 1 ms: "a caller may tighten its own call"). The inner service fails
/// with a real error 50 ms later. Mapping "an error once the budget the request carried is
/// spent" to the deadline would turn it into `PropagateError::Elapsed(deadline)` for a
/// deadline with ~10 s left, and the service's error would be gone. The caller's own budget is
/// not the deadline's: the error stays `Service`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_tightened_budget_leaves_the_services_error_as_it_is() {
    let inner = service_fn(|_req: Request<Empty<Bytes>>| async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        Err::<Response<Empty<Bytes>>, _>(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "connection refused",
        ))
    });
    let client = PropagateLayer::new(BudgetHeader::grpc_timeout()).layer(inner);
    let deadline = Deadline::after(Duration::from_secs(10), DeadlineSource::Server).unwrap();
    let req = Request::get("http://next.example/")
        .header("grpc-timeout", "1m")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let result = tokio::time::timeout(
        LIMIT,
        RequestScope::new()
            .deadline(deadline)
            .scope(client.oneshot(req)),
    )
    .await
    .expect("bounded");
    match result {
        Err(PropagateError::Service(e)) => {
            assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused)
        }
        other => panic!(
            "the service's own error, with {:?} of the deadline left; got {other:?}",
            deadline.remaining()
        ),
    }
}
