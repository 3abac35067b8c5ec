//! HTTP/2 by hand and an h2c server, for the tests of the frame watch in `HealthIo`
//! (`tests/s7_44_review.rs`, `tests/s7_44_review2.rs`, `tests/s7_44_review3.rs`): frames
//! built ([`frame`], [`cancel`]) and read back ([`frames`]); an in-memory connection
//! ([`Mock`]) to drive a `HealthIo` with ([`write_all`], [`io_read`]); an h2c server whose
//! paths answer at once, late or never ([`h2c_server`], or [`h2c_server_in_thread`] on a
//! runtime of its own); and hyper-util's client over `HealthConnector` ([`health_client`]).

#![allow(dead_code)]

use std::collections::VecDeque;
use std::convert::Infallible;
use std::error::Error as StdError;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker, ready};
use std::time::Duration;

use http::{Request, Response};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Bytes, Frame, Incoming};
use hyper::rt::{Read, ReadBuf, Write};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use shared_headers::conn::{HealthConnector, HealthIo};
use tokio::net::TcpListener;

pub type BoxError = Box<dyn StdError + Send + Sync>;
pub type AnyBody = BoxBody<Bytes, BoxError>;

pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
pub const DATA: u8 = 0;
pub const HEADERS: u8 = 1;
pub const RST_STREAM: u8 = 3;
pub const SETTINGS: u8 = 4;
pub const CONTINUATION: u8 = 9;
pub const END_STREAM: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;

/// A frame: its 9-byte header, then `payload`.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    out.extend([kind, flags]);
    out.extend(stream.to_be_bytes());
    out.extend(payload);
    out
}

/// The `RST_STREAM(CANCEL)` h2 writes when the caller gives up on `stream`.
pub fn cancel(stream: u32) -> Vec<u8> {
    frame(RST_STREAM, 0, stream, &8u32.to_be_bytes())
}

/// The frames (kind, flags, stream) in `bytes`, which start at a frame boundary.
pub fn frames(mut bytes: &[u8]) -> Vec<(u8, u8, u32)> {
    let mut out = Vec::new();
    while bytes.len() >= 9 {
        let len = u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]) as usize;
        let stream = u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]) & 0x7fff_ffff;
        out.push((bytes[3], bytes[4], stream));
        bytes = &bytes[(9 + len).min(bytes.len())..];
    }
    out
}

/// An in-memory connection: records what is written (at most `max` bytes per write), hands
/// out queued reads, `Pending` when none is queued.
pub struct Mock {
    pub out: Vec<u8>,
    max: usize,
    pub input: Mutex<VecDeque<Vec<u8>>>,
}

impl Mock {
    pub fn new(max: usize) -> Self {
        Self {
            out: Vec::new(),
            max,
            input: Mutex::new(VecDeque::new()),
        }
    }
}

impl Read for Mock {
    fn poll_read(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let next = self.input.lock().unwrap().pop_front();
        match next {
            Some(chunk) => {
                buf.put_slice(&chunk);
                Poll::Ready(Ok(()))
            }
            None => Poll::Pending,
        }
    }
}

impl Write for Mock {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let n = buf.len().min(this.max);
        this.out.extend_from_slice(&buf[..n]);
        Poll::Ready(Ok(n))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let mut n = 0;
        for buf in bufs {
            let take = buf.len().min(this.max - n);
            this.out.extend_from_slice(&buf[..take]);
            n += take;
            if n == this.max {
                break;
            }
        }
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// A context whose waker does nothing.
pub fn cx() -> Context<'static> {
    Context::from_waker(Waker::noop())
}

/// Writes all of `bytes` through `io` as a caller (h2) would.
pub fn write_all(io: &mut HealthIo<Mock>, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        match Pin::new(&mut *io).poll_write(&mut cx(), bytes) {
            Poll::Ready(Ok(n)) => bytes = &bytes[n..],
            other => panic!("write: {other:?}"),
        }
    }
}

/// Reads `chunk` through `io` (the server sent it).
pub fn io_read(io: &mut HealthIo<Mock>, chunk: Vec<u8>) {
    io.get_ref().input.lock().unwrap().push_back(chunk);
    let mut buf = [0u8; 4096];
    let mut read = ReadBuf::new(&mut buf);
    match Pin::new(&mut *io).poll_read(&mut cx(), read.unfilled()) {
        Poll::Ready(Ok(())) => {}
        other => panic!("read: {other:?}"),
    }
}

/// A running h2c server: its address, the connections it accepted and those that ended.
pub struct H2c {
    pub addr: SocketAddr,
    pub accepted: Arc<AtomicUsize>,
    pub closed: Arc<AtomicUsize>,
    /// The runtime it runs on when it has one of its own.
    _rt: Option<tokio::runtime::Runtime>,
}

/// An h2c server on the current runtime, `SETTINGS_MAX_CONCURRENT_STREAMS` `max_streams`
/// (hyper's default if `None`): `/never` never answers; `/upload` answers once the request
/// body has ended; `/slow` after 2.5 s, `/slowN` after N tenths of a second (`/slow05`: 0.5
/// s); `/stream` answers its head and a first chunk at once, then nothing for 10 s; anything
/// else at once (without reading the request body).
pub async fn h2c_server(max_streams: Option<u32>) -> H2c {
    serve(max_streams, false).await
}

/// [`h2c_server`] on a runtime of its own (with timers) in its own thread, for a client on a
/// runtime without them; it reads every request body before it answers.
pub fn h2c_server_in_thread() -> H2c {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut server = rt.block_on(serve(None, true));
    server._rt = Some(rt);
    server
}

async fn serve(max_streams: Option<u32>, read_bodies: bool) -> H2c {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let closed = Arc::new(AtomicUsize::new(0));
    let (count, gone) = (accepted.clone(), closed.clone());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let gone = gone.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    answer(req, read_bodies)
                });
                let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
                if let Some(max) = max_streams {
                    builder.max_concurrent_streams(max);
                }
                let _ = builder
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
                gone.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    H2c {
        addr,
        accepted,
        closed,
        _rt: None,
    }
}

/// [`h2c_server`]'s answer to `req`.
async fn answer(req: Request<Incoming>, read_body: bool) -> Result<Response<AnyBody>, Infallible> {
    let path = req.uri().path().to_owned();
    if path == "/never" {
        std::future::pending::<()>().await;
    }
    if path == "/stream" {
        let body = Trickle {
            sent: false,
            sleep: Box::pin(tokio::time::sleep(Duration::from_secs(10))),
        };
        return Ok(Response::new(body.boxed()));
    }
    if let Some(tenths) = path.strip_prefix("/slow") {
        let tenths: u64 = if tenths.is_empty() {
            25
        } else {
            tenths.parse().unwrap()
        };
        tokio::time::sleep(Duration::from_millis(100 * tenths)).await;
    }
    if read_body || path == "/upload" {
        let _ = req.into_body().collect().await;
    }
    let body: AnyBody = Full::new(Bytes::from_static(b"ok"))
        .map_err(|never| match never {})
        .boxed();
    Ok(Response::new(body))
}

/// A response body: one chunk, then nothing until `sleep` ends (a server stream between its
/// events).
struct Trickle {
    sent: bool,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl Body for Trickle {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if !self.sent {
            self.sent = true;
            return Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"first")))));
        }
        ready!(self.sleep.as_mut().poll(cx));
        Poll::Ready(None)
    }
}

/// hyper-util's client over h2c with the crate's connector and settings.
pub fn health_client<B>() -> Client<HealthConnector<HttpConnector>, B>
where
    B: Body + Send + 'static + Unpin,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    HealthConnector::client_builder(TokioExecutor::new())
        .http2_only(true)
        .build(HealthConnector::new(HttpConnector::new()))
}
