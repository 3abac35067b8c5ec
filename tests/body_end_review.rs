//! How a response ends where the protocol decides it (see `Ending::Completed`): "the server
//! took the declared bytes and dropped the body" and "a 2xx to `CONNECT` is bodiless" are
//! HTTP/1.x rules (hyper's HTTP/1 server stops polling at the declared length); over HTTP/2 a
//! body is complete only when it reported its end. A body that reports its end short of its
//! `content-length` is `Aborted`. Every network test binds 127.0.0.1:0 and is bounded by
//! `LIMIT`.
//!
//! What the layer cannot know: over HTTP/1.1 hyper may take a big chunk into its write buffer,
//! see its `content-length` written and drop the body before one byte reaches the socket; a
//! client that hangs up then is not seen by the body (only by the connection), so that case is
//! `Completed` with the bytes taken, and is not tested here. Over HTTP/2 likewise: hyper hands a
//! chunk to h2's send buffer and polls the body to its end (`None`) before the client's reset
//! arrives, so the body reports a complete end for bytes the client never read.
#![cfg(feature = "server")]

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use shared_headers::server::{Ending, ResponseEnd, SharedHeadersLayer};
use tower::{Layer, service_fn};

#[path = "support/sockets.rs"]
mod sockets;
use sockets::serve;

type Ends = Arc<Mutex<Vec<ResponseEnd>>>;

const LIMIT: Duration = Duration::from_secs(20);

/// A body that yields `chunk` once and learns its end only at its next poll (a stream or a
/// channel body): no exact size hint, `is_end_stream` false until then.
struct OneChunk {
    chunk: Option<Bytes>,
}

impl Body for OneChunk {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.chunk.take().map(|c| Ok(Frame::data(c))))
    }
}

fn layer(ends: &Ends) -> SharedHeadersLayer {
    let ends = Arc::clone(ends);
    SharedHeadersLayer::new().on_response_end(move |end| ends.lock().unwrap().push(end.clone()))
}

/// The one end report, waited for (bounded).
async fn one_end(ends: &Ends) -> ResponseEnd {
    let started = Instant::now();
    loop {
        {
            let ends = ends.lock().unwrap();
            if !ends.is_empty() {
                assert_eq!(ends.len(), 1, "one end report per request");
                return ends[0].clone();
            }
        }
        assert!(started.elapsed() < LIMIT, "no end report");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A 2xx to `CONNECT` over HTTP/2 whose head says `content-length: 5`: hyper refuses it
/// ("h2 successful response to CONNECT request with body not supported"), resets the stream
/// with INTERNAL_ERROR and drops the body unpolled. "A 2xx to CONNECT is bodiless" is an
/// HTTP/1.x rule; the client got a reset, no tunnel: `Dropped`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_connect_2xx_with_a_body_refused_by_hyper_is_dropped() {
    let ends = Ends::default();
    let service = layer(&ends).layer(service_fn(|_req: Request<Incoming>| async {
        Ok::<_, Infallible>(
            Response::builder()
                .header("content-length", "5")
                .body(Full::new(Bytes::from_static(b"hello")))
                .unwrap(),
        )
    }));
    let addr = serve(service, true).await;
    let (client, end) = tokio::time::timeout(LIMIT, async {
        let io = TokioIo::new(tokio::net::TcpStream::connect(addr).await.unwrap());
        let (mut sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .unwrap();
        tokio::spawn(conn);
        let req = Request::builder()
            .method(Method::CONNECT)
            .uri("tunnel.example:443")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let client = sender
            .send_request(req)
            .await
            .map(|r| r.status())
            .map_err(|e| e.to_string());
        (client, one_end(&ends).await)
    })
    .await
    .expect("bounded");
    assert!(client.is_err(), "hyper resets the stream: {client:?}");
    assert_eq!(end.status_sent(), Some(StatusCode::OK));
    assert_eq!(
        end.ending(),
        Ending::Dropped,
        "the client got {client:?}, not a response"
    );
}

/// A body that ends (`None`) after 5 of the 10 bytes its `content-length` declares: hyper
/// fails the message and closes the connection, the client gets an incomplete message: the
/// body's `None` is not a clean end short of the declared length, `Aborted`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_ending_short_of_its_content_length_is_aborted() {
    let ends = Ends::default();
    let service = layer(&ends).layer(service_fn(|_req: Request<Incoming>| async {
        let body = OneChunk {
            chunk: Some(Bytes::from_static(b"hello")),
        };
        Ok::<_, Infallible>(
            Response::builder()
                .header("content-length", "10")
                .body(body)
                .unwrap(),
        )
    }));
    let addr = serve(service, false).await;
    let (client, end) = tokio::time::timeout(LIMIT, async {
        let io = TokioIo::new(tokio::net::TcpStream::connect(addr).await.unwrap());
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
        tokio::spawn(conn);
        let req = Request::get("/")
            .header("host", "short.example")
            .body(Empty::<Bytes>::new())
            .unwrap();
        // hyper may fail the head or the body: the client gets an error either way.
        let client = match sender.send_request(req).await {
            Ok(res) => res
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes())
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        (client, one_end(&ends).await)
    })
    .await
    .expect("bounded");
    assert!(
        client.is_err(),
        "the client got a truncated body: {client:?}"
    );
    assert_eq!(end.ending(), Ending::Aborted, "client: {client:?}");
    assert_eq!(end.bytes_sent(), 5);
}

/// A body whose exact size hint lies low (says 5, sends 10 in one frame), over HTTP/2: hyper
/// writes `content-length: 5` from the hint and h2 refuses the 10-byte DATA frame (the stream
/// is reset). A body that ends past the length it declared is `Aborted`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_exact_hint_lying_low_is_aborted() {
    struct Liar(Option<Bytes>);
    impl Body for Liar {
        type Data = Bytes;
        type Error = Infallible;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            Poll::Ready(self.0.take().map(|c| Ok(Frame::data(c))))
        }
        fn size_hint(&self) -> http_body::SizeHint {
            http_body::SizeHint::with_exact(if self.0.is_some() { 5 } else { 0 })
        }
    }
    let ends = Ends::default();
    let service = layer(&ends).layer(service_fn(|_req: Request<Incoming>| async {
        Ok::<_, Infallible>(Response::new(Liar(Some(Bytes::from_static(b"0123456789")))))
    }));
    let addr = serve(service, true).await;
    let (client, end) = tokio::time::timeout(LIMIT, async {
        let io = TokioIo::new(tokio::net::TcpStream::connect(addr).await.unwrap());
        let (mut sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .unwrap();
        tokio::spawn(conn);
        let req = Request::get("http://h2.example/")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let client = match sender.send_request(req).await {
            Ok(res) => res
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes())
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        (client, one_end(&ends).await)
    })
    .await
    .expect("bounded");
    assert!(client.is_err(), "h2 refuses the frame: {client:?}");
    assert_eq!(end.ending(), Ending::Aborted, "client: {client:?}");
}
