//! A hyper server and client on 127.0.0.1:0 for the socket tests that serve a layer over
//! HTTP/1.1 or HTTP/2 (`tests/access_line.rs`, `tests/body_end.rs`,
//! `tests/body_end_review.rs`, `tests/context_server.rs`, `tests/layer_metrics.rs`,
//! `tests/secret_sweep.rs`): [`serve`] any tower service, a
//! [`Client`] on one connection ([`connect`]), one request read to its end ([`fetch`], or
//! [`send`] for its head and body) or hung up on ([`hang_up`]).

#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Serves `service` on 127.0.0.1:0 over HTTP/1.1 (with upgrades) or HTTP/2 (prior
/// knowledge).
pub async fn serve<S, B>(service: S, h2: bool) -> SocketAddr
where
    S: tower::Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let service = TowerToHyperService::new(service.clone());
            let io = TokioIo::new(stream);
            if h2 {
                tokio::spawn(
                    hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(io, service),
                );
            } else {
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, service)
                        .with_upgrades(),
                );
            }
        }
    });
    addr
}

/// A client on one connection, HTTP/1.1 or HTTP/2.
pub enum Client {
    H1(hyper::client::conn::http1::SendRequest<Empty<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Empty<Bytes>>),
}

/// A client connection to `addr`, and the task that drives it.
pub async fn connect(addr: SocketAddr, h2: bool) -> (Client, tokio::task::JoinHandle<()>) {
    let io = TokioIo::new(tokio::net::TcpStream::connect(addr).await.unwrap());
    if h2 {
        let (sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .unwrap();
        (
            Client::H2(sender),
            tokio::spawn(async move { drop(conn.await) }),
        )
    } else {
        let (sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
        (
            Client::H1(sender),
            tokio::spawn(async move { drop(conn.await) }),
        )
    }
}

impl Client {
    pub async fn send(&mut self, req: Request<Empty<Bytes>>) -> hyper::Result<Response<Incoming>> {
        match self {
            Client::H1(sender) => {
                sender.ready().await?;
                sender.send_request(req).await
            }
            Client::H2(sender) => {
                sender.ready().await?;
                sender.send_request(req).await
            }
        }
    }
}

/// One request on a new connection, its body read to the end: the status (`None` if the
/// connection failed). The request goes as it is built: an absolute URI goes in absolute
/// form over HTTP/1.1 (build an origin-form one with a `host` header for the common case,
/// [`origin_form`]).
pub async fn fetch(addr: SocketAddr, h2: bool, req: Request<Empty<Bytes>>) -> Option<StatusCode> {
    fetch_trailers(addr, h2, req)
        .await
        .map(|(status, _)| status)
}

/// [`fetch`], with the trailers the client got (`None`: none came).
pub async fn fetch_trailers(
    addr: SocketAddr,
    h2: bool,
    req: Request<Empty<Bytes>>,
) -> Option<(StatusCode, Option<HeaderMap>)> {
    let (mut client, conn) = connect(addr, h2).await;
    let got = match client.send(req).await {
        Ok(res) => {
            let status = res.status();
            let trailers = match res.into_body().collect().await {
                Ok(collected) => collected.trailers().cloned(),
                Err(_) => None,
            };
            Some((status, trailers))
        }
        Err(_) => None,
    };
    drop(client);
    conn.abort();
    got
}

/// A `GET` of `path` on `addr` as clients send it: over HTTP/1.1 in origin form with a
/// `host` header (the server learns its address from `host` alone), over HTTP/2 with the
/// authority in the URI (`:authority`).
pub fn origin_form(addr: SocketAddr, h2: bool, path: &str) -> http::request::Builder {
    if h2 {
        Request::get(format!("http://{addr}{path}"))
    } else {
        Request::get(path).header(http::header::HOST, addr.to_string())
    }
}

/// Sends a request and hangs up after `after`, without waiting for the answer.
pub async fn hang_up(addr: SocketAddr, h2: bool, req: Request<Empty<Bytes>>, after: Duration) {
    let (mut client, conn) = connect(addr, h2).await;
    let _ = tokio::time::timeout(after, client.send(req)).await;
    drop(client);
    conn.abort();
}

/// One request over a new connection (HTTP/1.1, or h2c when `h2`), read to its end: status,
/// headers, body.
pub async fn send(
    addr: SocketAddr,
    h2: bool,
    req: Request<Full<Bytes>>,
) -> (StatusCode, HeaderMap, Bytes) {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let io = TokioIo::new(stream);
    let res = if h2 {
        let (mut sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .unwrap();
        tokio::spawn(conn);
        sender.send_request(req).await.unwrap()
    } else {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
        tokio::spawn(conn);
        sender.send_request(req).await.unwrap()
    };
    let (head, body) = res.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    (head.status, head.headers, body)
}
