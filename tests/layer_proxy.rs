//! Any response body: the layer wraps a proxy whose body is hyper's `Incoming` (no `Default`),
//! over real sockets, and its own answer (a timeout) still goes out with an empty body of its
//! own.
#![cfg(feature = "server")]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use shared_headers::server::SharedHeadersLayer;
use tower::Layer;

/// Serves `service` over HTTP/1.1 on 127.0.0.1:0.
async fn serve<S, B>(service: S) -> SocketAddr
where
    S: tower::Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let service = TowerToHyperService::new(service.clone());
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_whose_body_is_incoming_is_wrapped_and_answered() {
    // The origin: slow on `/slow`.
    let origin = serve(tower::service_fn(|req: Request<Incoming>| async move {
        if req.uri().path() == "/slow" {
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        Ok::<_, Infallible>(Response::new(Full::<Bytes>::from("from the origin")))
    }))
    .await;
    // The proxy: hyper-util's client, its response body `Incoming` as it is.
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let proxy = tower::service_fn(move |req: Request<Incoming>| {
        let client = client.clone();
        async move {
            let uri = format!("http://{origin}{}", req.uri().path());
            let res: Response<Incoming> = client
                .request(Request::get(uri).body(Empty::new()).unwrap())
                .await?;
            Ok::<_, hyper_util::client::legacy::Error>(res)
        }
    });
    let layer = SharedHeadersLayer::new().timeout(Duration::from_millis(300));
    let addr = serve(layer.layer(proxy)).await;

    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let get = |path: &str| {
        let client = client.clone();
        let uri = format!("http://{addr}{path}");
        async move {
            let res = tokio::time::timeout(
                Duration::from_secs(10),
                client.request(Request::get(uri).body(Empty::new()).unwrap()),
            )
            .await
            .expect("bounded")
            .unwrap();
            let status = res.status();
            (status, res.into_body().collect().await.unwrap().to_bytes())
        }
    };
    assert_eq!(
        get("/").await,
        (StatusCode::OK, Bytes::from("from the origin"))
    );
    // The layer's own answer, with its own empty body.
    assert_eq!(
        get("/slow").await,
        (StatusCode::SERVICE_UNAVAILABLE, Bytes::new())
    );
}
