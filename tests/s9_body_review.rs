//! A hostile review of "a stalled response body gives admission's permit back" (the stall
//! watch: `server::admission::stall`, `ticket/watch.rs`, the deadline thread's looks) with
//! shapes its own tests do not try: a slow but steady reader, event streams idle between
//! events, the allocation a streamed body costs. Each test failed as reviewed (6 of 6; a body
//! whose poll panics, and 3,000 bodies read at once, held: not kept here).
#![cfg(feature = "server")]

#[path = "support/server.rs"]
mod server;

#[path = "support/timekeeping.rs"]
mod timekeeping;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Bytes, Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use shared_headers::deadline::BudgetHeader;
use shared_headers::server::{Admission, ResponseBody, SharedHeadersLayer};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};
use timekeeping::retried;
use tower::{Layer, ServiceExt, service_fn};

const BUDGET: &str = "x-envoy-expected-rq-timeout-ms";

/// Allocations counted by `stats_alloc` (the whole process: the tests here run one at a
/// time, each under `timekeeping::retried`'s lock).
#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

static CHUNK: [u8; 1024] = [b'x'; 1024];

/// `frames` frames of 1 KiB of data, each ready at once (`usize::MAX`: endless); `.1`: it
/// does not know its end before it is polled for it (a stream's body: `StreamBody`, axum's
/// `Body::from_stream`, a proxied chunked body).
struct Frames(usize, bool);

impl Body for Frames {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.0 == 0 {
            return Poll::Ready(None);
        }
        self.0 -= 1;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(&CHUNK)))))
    }

    fn is_end_stream(&self) -> bool {
        self.0 == 0 && !self.1
    }
}

/// An event stream: one small event, then `Pending` (no event yet) for as long as it lives.
struct Events(bool);

impl Body for Events {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.0 {
            return Poll::Pending;
        }
        self.0 = true;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(
            b"data: hello\n\n",
        )))))
    }
}

/// Polls `body` once, in one go: whether it returned a frame of data.
async fn poll_once<B: Body + Unpin>(body: &mut B) -> bool {
    std::future::poll_fn(|cx| {
        Poll::Ready(matches!(
            Pin::new(&mut *body).poll_frame(cx),
            Poll::Ready(Some(Ok(ref frame))) if frame.is_data()
        ))
    })
    .await
}

/// A reader that keeps up, slowly (a frame every 50 ms: a client 50 ms of round trip away
/// refilling its HTTP/2 window, or a phone on a slow link): it is reading all along, so its
/// body is the handler's work still going out and should keep its permit. Under `limit(1)`
/// a second request should wait for it. The watch looks every 20 ms (the floor, for a fast
/// route) and takes the permit after 20-40 ms without a poll: the body streams on
/// uncounted, and a second request is admitted beside it (two streams under `limit(1)`).
#[test]
fn a_slow_but_steady_reader_keeps_its_permit_while_it_reads() {
    retried(|| async {
        let layer = SharedHeadersLayer::new()
            .timeout(Duration::from_secs(60))
            .admission(Admission::new().limit(NonZeroUsize::new(1).unwrap()));
        let stats = layer.stats();
        let service = layer.layer(service_fn(|_req: Request<()>| async {
            Ok::<_, Infallible>(Response::new(Frames(usize::MAX, false)))
        }));
        let mut body = service
            .clone()
            .oneshot(Request::new(()))
            .await
            .unwrap()
            .into_body();
        let t0 = Instant::now();
        let mut lost_at = None;
        for _ in 0..12 {
            assert!(poll_once(&mut body).await);
            if stats.admission_counts().free_permits != 0 && lost_at.is_none() {
                lost_at = Some(t0.elapsed().as_millis());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // While it still reads (a frame every 50 ms): is a second request admitted beside
        // it? (As reviewed, the first body was not read during this wait: 500 ms without a
        // frame is a stall by any rule that frees a stopped reader's permit within a second.)
        let reading = async {
            for _ in 0..10 {
                assert!(poll_once(&mut body).await, "the first body still streams");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        let (second, ()) = tokio::join!(
            tokio::time::timeout(
                Duration::from_millis(500),
                service.clone().oneshot(Request::new(())),
            ),
            reading
        );
        let second = second.is_ok();
        assert!(poll_once(&mut body).await, "the first body still streams");
        let counts = stats.admission_counts();
        drop(body);
        assert!(
            lost_at.is_none() && !second,
            "a reader taking a frame every 50 ms lost its permit after {lost_at:?} ms of \
             reading; a second request admitted beside it under limit(1): {second} (free \
             permits {}, limit {})",
            counts.free_permits,
            counts.limit
        );
    });
}

/// Event streams (SSE, long-poll bodies) whose clients read every event: between events
/// their bodies are `Pending`, "being produced", and keep their permits for as long as the
/// stream lives (the looks back off to one a second, never release). Two subscribers hold
/// both permits of a `limit(2)` layer: an honest caller of another route (its handler idle,
/// a 1 s budget) is not answered 200. (tower's `ConcurrencyLimit` gives its permit back at
/// the head.) Over HTTP/2, one connection for the subscribers, another for the caller.
#[test]
fn two_event_streams_idle_between_events_shut_every_route_of_the_layer() {
    retried(|| async {
        let layer = SharedHeadersLayer::new()
            .caller_budget(BudgetHeader::envoy_expected_rq_timeout_ms())
            .timeout_status(StatusCode::GATEWAY_TIMEOUT)
            .admission(Admission::new().limit(NonZeroUsize::new(2).unwrap()));
        let stats = layer.stats();
        let service = layer.layer(service_fn(|req: Request<Incoming>| async move {
            let body = if req.uri().path() == "/events" {
                http_body_util::Either::Left(Events(false))
            } else {
                http_body_util::Either::Right(Full::new(Bytes::from_static(b"ok")))
            };
            Ok::<_, Infallible>(Response::new(body))
        }));
        let addr = serve_h2(service).await;
        let get = |path: &str, budget: bool| {
            let mut req = Request::get(format!("http://{addr}{path}"));
            if budget {
                req = req.header(BUDGET, "1000");
            }
            req.body(Full::<Bytes>::new(Bytes::new())).unwrap()
        };
        let subscribers = connect(addr).await;
        let mut streams = Vec::new();
        for _ in 0..2 {
            let mut sender = subscribers.clone();
            let res = sender.send_request(get("/events", false)).await.unwrap();
            let mut body = res.into_body();
            // The client reads the first event and waits for the next (it keeps up).
            let first = body.frame().await.unwrap().unwrap();
            assert!(first.is_data());
            streams.push(body);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let caller = connect(addr).await;
        let mut fates = Vec::new();
        for _ in 0..3 {
            let t0 = Instant::now();
            let mut sender = caller.clone();
            let fate = tokio::time::timeout(Duration::from_secs(3), async {
                let res = sender.send_request(get("/other", true)).await.unwrap();
                let status = res.status();
                res.into_body().collect().await.unwrap();
                status
            })
            .await
            .unwrap_or(StatusCode::REQUEST_TIMEOUT);
            fates.push((fate.as_u16(), t0.elapsed().as_millis()));
        }
        let counts = stats.admission_counts();
        drop(streams);
        assert!(
            fates.iter().all(|f| f.0 == 200),
            "honest callers of an idle route beside 2 event streams waiting for their next \
             event ((status, took ms): {fates:?}); free permits {}, waiting {}, limit {}",
            counts.free_permits,
            counts.waiting,
            counts.limit
        );
    });
}

/// The cost bar (must hold 6: "the admitted path ... no allocation"): a response of
/// three frames read to its end through the layer with `Admission::limit(64)` allocates no
/// more than through the same layer without admission. The watch allocates an `Arc` per
/// body of more than one frame (and takes the deadline thread's lock to arm it).
#[test]
fn a_streamed_body_allocates_nothing_more_with_admission() {
    retried(|| async {
        let limit = || Some(Admission::new().limit(NonZeroUsize::new(64).unwrap()));
        let one_frame = (
            per_body(None, 1, false).await,
            per_body(limit(), 1, false).await,
        );
        let three = (
            per_body(None, 3, false).await,
            per_body(limit(), 3, false).await,
        );
        assert!(
            three.1 <= three.0,
            "allocations per body of 3 frames: {:.2} without admission, {:.2} with \
             limit(64) (one frame: {:.2} and {:.2})",
            three.0,
            three.1,
            one_frame.0,
            one_frame.1
        );
    });
}

/// The docs ("When the permit comes back": "a body read to its end in one frame ... is never
/// watched: nothing allocated, nothing armed"): a body of one frame whose end comes with the
/// next poll (`Ready(None)`: a stream's body, axum's `Body::from_stream`, a proxied chunked
/// body) is watched like a stream: an allocation and an arming of the deadline thread.
#[test]
fn a_one_frame_body_that_learns_its_end_at_the_next_poll_is_never_watched() {
    retried(|| async {
        let limit = || Some(Admission::new().limit(NonZeroUsize::new(64).unwrap()));
        let known = (
            per_body(None, 1, false).await,
            per_body(limit(), 1, false).await,
        );
        let unknown = (
            per_body(None, 1, true).await,
            per_body(limit(), 1, true).await,
        );
        assert!(
            unknown.1 <= unknown.0,
            "allocations per body of one frame, its end at the next poll: {:.2} without \
             admission, {:.2} with limit(64) (its end known with the frame: {:.2} and {:.2})",
            unknown.0,
            unknown.1,
            known.0,
            known.1
        );
    });
}

/// Allocations per request through a layer (with `admission` if any) whose handler answers
/// `frames` frames (`unknown`: its end learnt at the next poll), the body read to its end.
async fn per_body(admission: Option<Admission>, frames: usize, unknown: bool) -> f64 {
    let mut layer = SharedHeadersLayer::new().timeout(Duration::from_secs(60));
    if let Some(admission) = admission {
        layer = layer.admission(admission);
    }
    let service = layer.layer(service_fn(move |_req: Request<()>| async move {
        Ok::<_, Infallible>(Response::new(Frames(frames, unknown)))
    }));
    for _ in 0..50 {
        read_one(&service).await;
    }
    // The fewest of a few tries (anything else the process does meanwhile counts).
    const N: usize = 200;
    let mut fewest = f64::MAX;
    for _ in 0..3 {
        let before = GLOBAL.stats().allocations;
        for _ in 0..N {
            read_one(&service).await;
        }
        let after = GLOBAL.stats().allocations;
        fewest = fewest.min((after - before) as f64 / N as f64);
    }
    fewest
}

/// One request through `service`, its body read to its end.
async fn read_one<S>(service: &S)
where
    S: tower::Service<Request<()>, Response = Response<ResponseBody<Frames>>, Error = Infallible>
        + Clone,
{
    let mut body = service
        .clone()
        .oneshot(Request::new(()))
        .await
        .unwrap()
        .into_body();
    while poll_once(&mut body).await {}
}

type Sender = hyper::client::conn::http2::SendRequest<Full<Bytes>>;

/// An HTTP/2 connection to `addr`.
async fn connect(addr: SocketAddr) -> Sender {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    sender
}

/// Serves `service` over HTTP/2 on 127.0.0.1:0.
async fn serve_h2<S, B>(service: S) -> SocketAddr
where
    S: tower::Service<Request<Incoming>, Response = Response<B>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let service = hyper_util::service::TowerToHyperService::new(service.clone());
            tokio::spawn(
                hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    addr
}

/// As `a_slow_but_steady_reader_keeps_its_permit_while_it_reads`, over HTTP/1.1 sockets: a
/// client that reads 64 KiB every 50 ms (1.3 MB/s, steady) of an endless streamed body. The
/// kernel wakes the server's writer only once a share of the socket's buffer is free, so
/// hyper polls the body in bursts tens of ms apart however steadily the client reads: the
/// permit is taken from a reader that never stopped.
#[test]
fn a_steady_http1_reader_of_a_long_stream_keeps_its_permit() {
    retried(|| async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let layer = SharedHeadersLayer::new()
            .admission(Admission::new().limit(NonZeroUsize::new(1).unwrap()));
        let stats = layer.stats();
        let service = layer.layer(service_fn(|_req: Request<Incoming>| async {
            Ok::<_, Infallible>(Response::new(Frames(usize::MAX, false)))
        }));
        let addr = serve_h1(service).await;
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(64 * 1024).unwrap();
        let mut stream = socket.connect(addr).await.unwrap();
        stream
            .write_all(b"GET /stream HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut buf = vec![0u8; 64 * 1024];
        let t0 = Instant::now();
        let (mut read, mut lost_at) = (0usize, None);
        while t0.elapsed() < Duration::from_millis(1500) {
            read += stream.read(&mut buf).await.unwrap();
            if stats.admission_counts().free_permits != 0 && lost_at.is_none() {
                lost_at = Some(t0.elapsed().as_millis());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let counts = stats.admission_counts();
        drop(stream);
        assert!(
            lost_at.is_none(),
            "a client reading 64 KiB every 50 ms ({read} bytes in 1.5 s) lost its permit \
             after {lost_at:?} ms (free permits {}, limit {})",
            counts.free_permits,
            counts.limit
        );
    });
}

/// A body of a frame, `Pending` until its flag is set, then endless frames.
struct Later(u8, Arc<std::sync::atomic::AtomicBool>);

impl Body for Later {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.0 == 1 && !self.1.load(std::sync::atomic::Ordering::SeqCst) {
            return Poll::Pending;
        }
        self.0 = self.0.saturating_add(1);
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(&CHUNK)))))
    }
}

/// `Admission`'s docs and the CHANGELOG: "a body that returned a frame and was not polled
/// again for one to two of its route's no-load durations (at least 20 ms, at most 1 s) ...
/// gives it back then". A body that was `Pending` a while (an event stream between events,
/// its looks backed off to one a second) and then stalls on its reader keeps its permit
/// until the next backed-off look: up to 1 s more, 50x a fast route's 20 ms. Five bodies
/// (five layers, `limit(1)` each) go `Pending` 200 ms apart (their looks' phases spread over
/// the second), each returns a frame at once 2.5 s later, and none is polled again: each
/// should be free within 200 ms (5x the 40 ms promised). (Under the quiet-time rule each
/// permit goes back during the `Pending` spell, 300 ms after the first frame: free at the
/// stall.)
#[test]
fn a_body_that_stalls_after_a_pending_spell_gives_its_permit_back_within_two_looks() {
    retried(|| async {
        use std::sync::atomic::{AtomicBool, Ordering};
        let go = Arc::new(AtomicBool::new(false));
        let mut bodies = Vec::new();
        for _ in 0..5 {
            let layer = SharedHeadersLayer::new()
                .admission(Admission::new().limit(NonZeroUsize::new(1).unwrap()));
            let stats = layer.stats();
            let go = go.clone();
            let service = layer.layer(service_fn(move |_req: Request<()>| {
                let go = go.clone();
                async move { Ok::<_, Infallible>(Response::new(Later(0, go))) }
            }));
            let mut body = service.oneshot(Request::new(())).await.unwrap().into_body();
            assert!(poll_once(&mut body).await, "the first frame");
            assert!(!poll_once(&mut body).await, "then Pending");
            bodies.push((body, stats));
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        tokio::time::sleep(Duration::from_millis(2500)).await;
        go.store(true, Ordering::SeqCst);
        let t0 = Instant::now();
        for (body, _) in &mut bodies {
            assert!(
                poll_once(body).await,
                "a frame, then no poll: its reader stalled"
            );
        }
        let mut freed = vec![None; bodies.len()];
        while t0.elapsed() < Duration::from_secs(3) && freed.iter().any(Option::is_none) {
            for (i, (_, stats)) in bodies.iter().enumerate() {
                if freed[i].is_none() && stats.admission_counts().free_permits == 1 {
                    freed[i] = Some(t0.elapsed().as_millis());
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(bodies);
        assert!(
            freed.iter().all(|f| f.is_some_and(|ms| ms <= 200)),
            "ms from the stall to the permit's return, per body: {freed:?}"
        );
    });
}

/// Serves `service` over HTTP/1.1 on 127.0.0.1:0.
async fn serve_h1<S, B>(service: S) -> SocketAddr
where
    S: tower::Service<Request<Incoming>, Response = Response<B>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    // Buffers of 64 KiB each way (accepted sockets take the listener's send buffer).
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_send_buffer_size(64 * 1024).unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(64).unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let service = hyper_util::service::TowerToHyperService::new(service.clone());
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    addr
}
