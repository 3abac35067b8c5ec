//! Hostile review of the HTTP/2 frame watch in `HealthIo` (the hold-back of an unanswered
//! stream's `RST_STREAM(CANCEL)`): call orders, servers and frames its own tests do not cover.
//! Each test is named for what should hold; a failing one is a finding.
#![cfg(all(feature = "hyper-util", feature = "tonic"))]

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Body, Bytes, Frame};
use hyper::rt::Write;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use shared_headers::client::ConnRetryLayer;
use shared_headers::conn::{HealthConnector, HealthIo};
use tower::{Layer, ServiceExt};

#[path = "support/h2.rs"]
mod h2;
use h2::{
    AnyBody, BoxError, CONTINUATION, DATA, END_HEADERS, END_STREAM, H2c, HEADERS, Mock, PREFACE,
    RST_STREAM, SETTINGS, cancel, cx, frame, frames, h2c_server, health_client, io_read, write_all,
};

// ---------------------------------------------------------------------------------------------
// Sockets: a real h2c server and hyper-util's client.

/// A request body that sends one chunk and then never ends (an upload from a slow source, a
/// client-streaming call).
struct Endless(bool);

impl Body for Endless {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if self.0 {
            Poll::Pending
        } else {
            self.0 = true;
            Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"chunk")))))
        }
    }
}

fn full(bytes: &'static [u8]) -> AnyBody {
    Full::new(Bytes::from_static(bytes))
        .map_err(|never| match never {})
        .boxed()
}

fn stock_client() -> Client<HttpConnector, AnyBody> {
    Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build(HttpConnector::new())
}

/// A healthy server whose handler waits for the request body (an upload, a client-streaming
/// call) cannot answer a stream the client gave up on mid-body: the held reset is the only
/// thing that would tell it. The watch takes that silence for death and kills the connection,
/// failing the other request in flight on it (a POST the server is about to answer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_upload_to_a_healthy_server_does_not_kill_the_post_in_flight() {
    async fn run<C>(client: Client<C, AnyBody>, addr: SocketAddr) -> Result<StatusCode, String>
    where
        C: hyper_util::client::legacy::connect::Connect + Clone + Send + Sync + 'static,
    {
        let slow = {
            let client = client.clone();
            let request = Request::post(format!("http://{addr}/slow"))
                .body(full(b"payload"))
                .unwrap();
            tokio::spawn(async move {
                tokio::time::timeout(Duration::from_secs(10), client.request(request)).await
            })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        let upload = Request::post(format!("http://{addr}/upload"))
            .body(Endless(false).boxed())
            .unwrap();
        let cancelled =
            tokio::time::timeout(Duration::from_millis(300), client.request(upload)).await;
        assert!(cancelled.is_err(), "the upload never ends: {cancelled:?}");
        match slow.await.unwrap() {
            Ok(Ok(response)) => Ok(response.status()),
            Ok(Err(err)) => Err(format!("{err:?}")),
            Err(_) => Err("timed out".into()),
        }
    }
    // Control: the stock client, same server.
    let H2c { addr, accepted, .. } = h2c_server(None).await;
    assert_eq!(
        run(stock_client(), addr).await,
        Ok(StatusCode::OK),
        "control"
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "control");
    // The crate's connector.
    let H2c { addr, accepted, .. } = h2c_server(None).await;
    let result = run(health_client(), addr).await;
    assert_eq!(
        result,
        Ok(StatusCode::OK),
        "the POST in flight on a healthy connection failed after another request's upload was \
         cancelled"
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "connections");
}

/// A request body of `left` 64 KiB chunks, one every 100 ms.
struct Trickle {
    left: usize,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl Body for Trickle {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        if self.sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        let next = tokio::time::Instant::now() + Duration::from_millis(100);
        self.sleep.as_mut().reset(next);
        self.left -= 1;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(vec![0u8; 64 * 1024])))))
    }
}

/// A healthy server reading a 1.6 MB upload for 2.5 s (its WINDOW_UPDATEs say so all along)
/// while a `GET` beside it times out unanswered: the watch counts only incoming HEADERS and
/// DATA as life, kills the connection, and the upload fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_the_server_is_reading_survives_a_timed_out_get_beside_it() {
    async fn run<C>(client: Client<C, AnyBody>) -> (Result<StatusCode, String>, usize)
    where
        C: hyper_util::client::legacy::connect::Connect + Clone + Send + Sync + 'static,
    {
        let H2c { addr, accepted, .. } = h2c_server(None).await;
        let upload = {
            let client = client.clone();
            let request = Request::post(format!("http://{addr}/upload"))
                .body(
                    Trickle {
                        left: 25,
                        sleep: Box::pin(tokio::time::sleep(Duration::ZERO)),
                    }
                    .boxed(),
                )
                .unwrap();
            tokio::spawn(async move {
                tokio::time::timeout(Duration::from_secs(15), client.request(request)).await
            })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        let get = Request::get(format!("http://{addr}/slow"))
            .body(full(b""))
            .unwrap();
        let timed_out = tokio::time::timeout(Duration::from_millis(300), client.request(get)).await;
        assert!(timed_out.is_err(), "the GET times out: {timed_out:?}");
        let result = match upload.await.unwrap() {
            Ok(Ok(response)) => Ok(response.status()),
            Ok(Err(err)) => Err(format!("{err:?}")),
            Err(_) => Err("timed out".into()),
        };
        (result, accepted.load(Ordering::SeqCst))
    }
    assert_eq!(
        run(stock_client()).await,
        (Ok(StatusCode::OK), 1),
        "control"
    );
    assert_eq!(
        run(health_client::<AnyBody>()).await,
        (Ok(StatusCode::OK), 1),
        "an upload the server was reading failed with its connection"
    );
}

/// tonic: a client-streaming call (the server answers once the stream ends) cancelled
/// mid-stream, beside a unary call the server answers in 2.5 s, through a `Channel` over
/// `HealthConnector`: the healthy connection is killed and the unary call fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tonic_client_stream_cancelled_mid_stream_does_not_kill_the_channel() {
    async fn run(health: bool) -> (Result<StatusCode, String>, usize) {
        let H2c { addr, accepted, .. } = h2c_server(None).await;
        let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{addr}/"))
            .unwrap()
            .http2_keep_alive_interval(HealthConnector::PING_AFTER)
            .keep_alive_timeout(HealthConnector::PING_TIMEOUT)
            .keep_alive_while_idle(false);
        let channel = if health {
            endpoint.connect_with_connector_lazy(HealthConnector::new(HttpConnector::new()))
        } else {
            endpoint.connect_lazy()
        };
        let unary = {
            let channel = channel.clone();
            let request = Request::post(format!("http://{addr}/slow"))
                .header("content-type", "application/grpc")
                .body(tonic::body::Body::new(Full::new(Bytes::from_static(
                    b"\0\0\0\0\0",
                ))))
                .unwrap();
            tokio::spawn(async move {
                tokio::time::timeout(Duration::from_secs(10), channel.oneshot(request)).await
            })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        let stream = Request::post(format!("http://{addr}/upload"))
            .header("content-type", "application/grpc")
            .body(tonic::body::Body::new(Endless(false)))
            .unwrap();
        let cancelled =
            tokio::time::timeout(Duration::from_millis(300), channel.clone().oneshot(stream)).await;
        assert!(cancelled.is_err(), "the stream never ends: {cancelled:?}");
        let result = match unary.await.unwrap() {
            Ok(Ok(response)) => Ok(response.status()),
            Ok(Err(err)) => Err(format!("{err:?}")),
            Err(_) => Err("timed out".into()),
        };
        (result, accepted.load(Ordering::SeqCst))
    }
    assert_eq!(run(false).await, (Ok(StatusCode::OK), 1), "control");
    assert_eq!(
        run(true).await,
        (Ok(StatusCode::OK), 1),
        "the unary call on a healthy channel failed after a client stream was cancelled"
    );
}

/// A server with `MAX_CONCURRENT_STREAMS` 1, slower than the deadline: once the first request
/// times out, h2 frees its stream slot and opens the next request at once; the held reset
/// means the server still counts the first stream and refuses the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_after_a_timeout_on_a_one_stream_server_is_answered_at_once() {
    // Control: the stock client.
    let H2c { addr, .. } = h2c_server(Some(1)).await;
    let client = stock_client();
    let slow = Request::get(format!("http://{addr}/slow05"))
        .body(full(b""))
        .unwrap();
    let first = tokio::time::timeout(Duration::from_millis(300), client.request(slow)).await;
    assert!(first.is_err(), "control: the first request times out");
    let fast = Request::get(format!("http://{addr}/fast"))
        .body(full(b""))
        .unwrap();
    let control = tokio::time::timeout(Duration::from_millis(400), client.request(fast)).await;
    assert!(
        matches!(&control, Ok(Ok(r)) if r.status() == StatusCode::OK),
        "control: {control:?}"
    );

    // The crate's defaults: `HealthConnector` + `ConnRetryLayer`.
    let H2c { addr, accepted, .. } = h2c_server(Some(1)).await;
    let client = ConnRetryLayer::new().layer(health_client::<Empty<Bytes>>());
    let slow = Request::get(format!("http://{addr}/slow05"))
        .body(Empty::new())
        .unwrap();
    let first =
        tokio::time::timeout(Duration::from_millis(300), client.clone().oneshot(slow)).await;
    assert!(first.is_err(), "the first request times out");
    let fast = Request::get(format!("http://{addr}/fast"))
        .body(Empty::new())
        .unwrap();
    let started = std::time::Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(5), client.oneshot(fast)).await;
    let status = match &result {
        Ok(Ok(r)) => Ok(r.status()),
        other => Err(format!("{other:?}")),
    };
    assert_eq!(
        (status, accepted.load(Ordering::SeqCst)),
        (Ok(StatusCode::OK), 1),
        "the request after the timeout (answered in {:?})",
        started.elapsed()
    );
    assert!(
        started.elapsed() < Duration::from_millis(400),
        "the request after the timeout waited {:?} for a server that answers at once (the \
         stock client: at once)",
        started.elapsed()
    );
}

/// A server alive (it answers pings) but slower than the deadline: 0.5 s answers, 0.3 s
/// deadlines (the shape of the finding, 1.5 s answers and 0.5 s deadlines, is 0.25 s from the
/// verdict: the verdict's dependence on the stream's opening, not the cancel, is pinned by the
/// watch's unit test `the_verdict_counts_from_the_streams_opening_and_stream_frames_are_life`).
/// A timeout alone is suspicion to verify; the ping is answered, so the connection should stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_answering_pings_slower_than_the_deadline_keeps_its_connection() {
    let H2c { addr, accepted, .. } = h2c_server(None).await;
    let client = ConnRetryLayer::new().layer(health_client::<Empty<Bytes>>());
    for _ in 0..3 {
        let request = Request::get(format!("http://{addr}/slow05"))
            .body(Empty::new())
            .unwrap();
        let result =
            tokio::time::timeout(Duration::from_millis(300), client.clone().oneshot(request)).await;
        assert!(result.is_err(), "the server answers after the deadline");
        tokio::time::sleep(Duration::from_millis(1000)).await;
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "a live server slower than the deadline lost its connection"
    );
}

// ---------------------------------------------------------------------------------------------
// The watch over an in-memory connection: frames and call orders h2 can produce.

/// RFC 9113 6.2: a HEADERS frame without END_HEADERS must be followed by CONTINUATION frames
/// of the same stream, nothing else (else PROTOCOL_ERROR, the whole connection). h2 writes a
/// header block larger than the frame size as HEADERS, then CONTINUATION in a later write; a
/// released reset is due "at the next frame boundary", which is between them.
#[test]
fn a_released_reset_is_never_written_between_headers_and_continuation() {
    let mut io = HealthIo::new(Mock::new(usize::MAX));
    write_all(&mut io, PREFACE);
    write_all(&mut io, &frame(SETTINGS, 0, 0, &[]));
    write_all(
        &mut io,
        &frame(HEADERS, END_STREAM | END_HEADERS, 1, b"get"),
    );
    let before = io.get_ref().out.len();
    // The caller gives up on stream 1: its reset is held.
    match Pin::new(&mut io).poll_write(&mut cx(), &cancel(1)) {
        Poll::Ready(Ok(13)) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(
        io.get_ref().out.len(),
        before,
        "the reset of stream 1 is held"
    );
    // Stream 3: a header block split into HEADERS (no END_HEADERS) ...
    write_all(&mut io, &frame(HEADERS, END_STREAM, 3, &[0x82; 32]));
    // ... the answer of stream 1 arrives (the reset is released) ...
    io_read(&mut io, frame(HEADERS, END_HEADERS, 1, b"\x88"));
    // ... then the CONTINUATION.
    write_all(&mut io, &frame(CONTINUATION, END_HEADERS, 3, &[0x82; 8]));
    let sent = frames(&io.get_ref().out[PREFACE.len()..]);
    for pair in sent.windows(2) {
        let (kind, flags, stream) = pair[0];
        if (kind == HEADERS || kind == CONTINUATION) && flags & END_HEADERS == 0 {
            assert_eq!(
                (pair[1].0, pair[1].2),
                (CONTINUATION, stream),
                "a frame was written inside a header block (PROTOCOL_ERROR): {sent:?}"
            );
        }
    }
}

/// The preface and the first frames in one vectored write (a caller other than h2 may write
/// them so): the frames after the preface's buffer are not noted, so the stream they open is
/// unknown to the watch and its unanswered reset is not held.
#[test]
fn frames_in_the_prefaces_vectored_write_are_noted() {
    // Control: the same bytes in separate writes.
    let mut io = HealthIo::new(Mock::new(usize::MAX));
    write_all(&mut io, PREFACE);
    write_all(
        &mut io,
        &frame(HEADERS, END_STREAM | END_HEADERS, 1, b"get"),
    );
    write_all(&mut io, &cancel(1));
    assert!(
        !frames(&io.get_ref().out[PREFACE.len()..])
            .iter()
            .any(|f| f.0 == RST_STREAM),
        "control: the reset is held"
    );

    let mut io = HealthIo::new(Mock::new(usize::MAX));
    let headers = frame(HEADERS, END_STREAM | END_HEADERS, 1, b"get");
    let bufs = [io::IoSlice::new(PREFACE), io::IoSlice::new(&headers)];
    match Pin::new(&mut io).poll_write_vectored(&mut cx(), &bufs) {
        Poll::Ready(Ok(n)) => assert_eq!(n, PREFACE.len() + headers.len()),
        other => panic!("{other:?}"),
    }
    write_all(&mut io, &cancel(1));
    assert!(
        !frames(&io.get_ref().out[PREFACE.len()..])
            .iter()
            .any(|f| f.0 == RST_STREAM),
        "the reset of an unanswered stream opened in the preface's vectored write was not held"
    );
}

/// Writes all of `bytes` through `io` with `poll_write_vectored`, `slice` bytes per buffer.
fn write_all_vectored(io: &mut HealthIo<Mock>, mut bytes: &[u8], slice: usize) {
    while !bytes.is_empty() {
        let bufs: Vec<io::IoSlice<'_>> =
            bytes.chunks(slice).take(64).map(io::IoSlice::new).collect();
        match Pin::new(&mut *io).poll_write_vectored(&mut cx(), &bufs) {
            Poll::Ready(Ok(n)) => bytes = &bytes[n..],
            other => panic!("write: {other:?}"),
        }
    }
}

/// Every split of the outgoing bytes (partial writes of 1..=23 bytes, vectored writes of
/// 1..=23-byte buffers): padded and prioritised HEADERS, CONTINUATION, a 17,000-byte DATA,
/// SETTINGS, WINDOW_UPDATE, PING, GOAWAY and resets with other codes pass byte for byte; the
/// one unanswered `CANCEL` (written whole, as h2 does) is held, and an answer releases it
/// after the bytes, whole.
#[test]
fn every_split_of_the_bytes_either_way_passes_them_unchanged() {
    let mut before = Vec::new();
    before.extend(frame(SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 100]));
    before.extend(frame(
        HEADERS,
        0x8 | 0x20,
        1,
        &[2, 0, 0, 0, 0, 16, 0x82, 0x84, 0, 0],
    ));
    before.extend(frame(CONTINUATION, END_HEADERS, 1, &[0x86; 5]));
    before.extend(frame(DATA, END_STREAM, 1, &[0x55; 17_000]));
    before.extend(frame(8, 0, 0, &[0, 1, 0, 0]));
    before.extend(frame(6, 0, 0, &[7; 8]));
    before.extend(frame(HEADERS, END_HEADERS, 3, &[0x82]));
    before.extend(frame(RST_STREAM, 0, 3, &2u32.to_be_bytes()));
    before.extend(frame(HEADERS, END_HEADERS | END_STREAM, 5, &[0x82]));
    let after = frame(7, 0, 0, &[0, 0, 0, 5, 0, 0, 0, 0]);
    let mut expected = PREFACE.to_vec();
    expected.extend(&before);
    expected.extend(cancel(5));
    expected.extend(&after);
    for max in 1..=23 {
        for vectored in [false, true] {
            let mut io = HealthIo::new(Mock::new(max));
            let write = |io: &mut HealthIo<Mock>, bytes: &[u8]| {
                if vectored {
                    write_all_vectored(io, bytes, max);
                } else {
                    write_all(io, bytes);
                }
            };
            write(&mut io, PREFACE);
            write(&mut io, &before);
            write_all(&mut io, &cancel(5));
            assert_eq!(
                io.get_ref().out.len(),
                PREFACE.len() + before.len(),
                "max {max}, vectored {vectored}: the cancel of stream 5 is held"
            );
            // The server's bytes, split the same way: SETTINGS, a ping answer, a padded
            // 17,000-byte DATA of stream 1, WINDOW_UPDATE, then stream 5's answer.
            let mut incoming = frame(SETTINGS, 0, 0, &[]);
            incoming.extend(frame(6, 1, 0, &[7; 8]));
            let mut padded = vec![200u8];
            padded.extend([0x33; 16_800]);
            padded.extend([0u8; 200]);
            incoming.extend(frame(DATA, 0x8, 1, &padded));
            incoming.extend(frame(8, 0, 0, &[0, 1, 0, 0]));
            incoming.extend(frame(
                HEADERS,
                0x20 | END_HEADERS,
                5,
                &[0, 0, 0, 1, 9, 0x88],
            ));
            for chunk in incoming.chunks(max.min(4096)) {
                io_read(&mut io, chunk.to_vec());
            }
            write(&mut io, &after);
            assert!(
                io.get_ref().out == expected,
                "max {max}, vectored {vectored}: the bytes written differ: {:?}",
                frames(&io.get_ref().out[PREFACE.len()..])
            );
        }
    }
}

/// The same unanswered `CANCEL`, handed over in two vectored buffers (its header, then its
/// code): still the same frame on the wire, so it should be held as when whole.
#[test]
fn a_cancel_split_across_vectored_buffers_is_held() {
    let mut io = HealthIo::new(Mock::new(usize::MAX));
    write_all(&mut io, PREFACE);
    write_all(
        &mut io,
        &frame(HEADERS, END_STREAM | END_HEADERS, 1, b"get"),
    );
    let before = io.get_ref().out.len();
    let reset = cancel(1);
    let bufs = [io::IoSlice::new(&reset[..9]), io::IoSlice::new(&reset[9..])];
    let _ = Pin::new(&mut io).poll_write_vectored(&mut cx(), &bufs);
    assert_eq!(
        io.get_ref().out.len(),
        before,
        "an unanswered CANCEL split across buffers went out at once"
    );
}

/// Must-hold 3: a server that answers pings but never a request is evicted "within the same
/// bound" as a black hole (2 s of the fault while requests keep coming). With 3 s deadlines
/// (one `GET` every 100 ms from the fault on), the watch acts only at the first deadline plus
/// 0.75 s: nothing leaves the connection for 3.75 s, and every request sent meanwhile is
/// queued on it. (Since the review: 0.25 s after the first cancel, about 3.25 s; see the
/// `ignore` reason.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a known limit, documented in docs::outgoing: until a caller gives up on it, a \
            quiet request on a server that answers pings looks exactly like a long poll, so \
            with 3 s deadlines the first verdict comes 0.25 s after the first cancel (about \
            3.25 s), not within 2.5 s; with the matrix's 1 s deadlines the connection is left at about 1.8 s"]
async fn a_ping_only_server_is_left_within_2_5_s_while_requests_keep_coming() {
    let H2c { addr, accepted, .. } = h2c_server(None).await;
    let client = ConnRetryLayer::new().layer(health_client::<Empty<Bytes>>());
    let mut tasks = Vec::new();
    for _ in 0..25 {
        let request = Request::get(format!("http://{addr}/never"))
            .body(Empty::new())
            .unwrap();
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            tokio::time::timeout(Duration::from_secs(3), client.oneshot(request)).await
        }));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let connections = accepted.load(Ordering::SeqCst);
    for task in tasks {
        task.abort();
    }
    assert!(
        connections >= 2,
        "2.5 s of requests went to the first connection of a server that never answers \
         ({connections} connection)"
    );
}

/// Must-hold 3 under concurrency: 0.5 s answers, 0.3 s deadlines, three rounds of 20 requests
/// at once (more than the 8 resets held): the slow server keeps its one connection. The
/// connection is made first, by a request answered at once: the test is about keeping it (20
/// first requests at once on a fresh client made two connections, a few ms apart, in 3 runs
/// of 63 under load).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_server_under_20_concurrent_timeouts_keeps_its_connection() {
    let H2c { addr, accepted, .. } = h2c_server(None).await;
    let client = ConnRetryLayer::new().layer(health_client::<Empty<Bytes>>());
    let up = Request::get(format!("http://{addr}/"))
        .body(Empty::new())
        .unwrap();
    let up = tokio::time::timeout(Duration::from_secs(5), client.clone().oneshot(up)).await;
    assert!(
        matches!(&up, Ok(Ok(r)) if r.status() == StatusCode::OK),
        "{up:?}"
    );
    drop(up);
    for round in 0..3 {
        let mut tasks = Vec::new();
        for _ in 0..20 {
            let request = Request::get(format!("http://{addr}/slow05"))
                .body(Empty::new())
                .unwrap();
            let client = client.clone();
            tasks.push(tokio::spawn(async move {
                tokio::time::timeout(Duration::from_millis(300), client.oneshot(request)).await
            }));
        }
        for task in tasks {
            let result = task.await.unwrap();
            assert!(
                result.is_err(),
                "round {round}: answered before the deadline"
            );
        }
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "a slow server lost its connection under concurrent timeouts"
    );
}
