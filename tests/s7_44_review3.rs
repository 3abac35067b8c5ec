//! Third hostile review of the HTTP/2 frame watch in `HealthIo`: the verdict on a runtime
//! without timers, taken at the next request's write. (Also tried, and held: a
//! `current_thread` runtime's idle verdict, eight pooled connections each condemned, and the
//! same never-written request as a `GET`.)
//! Each test is named for what should hold; a failing one is a finding.
#![cfg(all(feature = "hyper-util", feature = "client"))]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use shared_headers::client::ConnRetryLayer;
use shared_headers::conn::HealthConnector;
use tokio::net::TcpListener;
use tower::{Layer, ServiceExt};

#[path = "support/h2.rs"]
mod h2;
use h2::{RST_STREAM, h2c_server_in_thread};

fn request(method: &str, addr: SocketAddr, path: &str) -> Request<Full<Bytes>> {
    Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"))
        .body(Full::new(Bytes::from_static(b"pay")))
        .unwrap()
}

/// docs::outgoing: on a runtime without timers "the verdict waits for the connection's next
/// read or write", and "those `ConnRetryLayer` may send again (never written, or idempotent
/// and unanswered) are sent on a fresh connection". A request cancelled at 0.3 s on a
/// never-answering server, then after 2.5 s of idle a second request: the verdict is taken
/// at that request's `HEADERS`, which were never written, so `ConnRetryLayer` should send it
/// again on a fresh connection.
fn after_a_due_verdict_without_timers(method: &str) -> Result<StatusCode, String> {
    let server = h2c_server_in_thread();
    let addr = server.addr;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_io()
        .build()
        .unwrap();
    let client: Client<HealthConnector<HttpConnector>, Full<Bytes>> =
        Client::builder(TokioExecutor::new())
            .http2_only(true)
            .build(HealthConnector::new(HttpConnector::new()));
    let client = ConnRetryLayer::new().layer(client);
    let first = {
        let client = client.clone();
        rt.spawn(async move { client.oneshot(request("GET", addr, "/never")).await })
    };
    std::thread::sleep(Duration::from_millis(300));
    assert!(!first.is_finished(), "setup: /never answered");
    first.abort();
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(
        server.closed.load(Ordering::SeqCst),
        0,
        "setup: no timer, nothing closed yet"
    );
    let (tx, rx) = mpsc::channel();
    let method = method.to_owned();
    rt.spawn(async move {
        let result = client
            .oneshot(request(&method, addr, "/"))
            .await
            .map(|r| r.status())
            .map_err(|e| {
                let mut out = e.to_string();
                let mut source = std::error::Error::source(&e);
                while let Some(s) = source {
                    out += &format!(": {s}");
                    source = s.source();
                }
                out
            });
        let _ = tx.send(result);
    });
    let result = rx
        .recv_timeout(Duration::from_secs(5))
        .unwrap_or_else(|_| Err("no answer within 5 s".into()));
    let accepted = server.accepted.load(Ordering::SeqCst);
    rt.shutdown_timeout(Duration::from_secs(1));
    result.map_err(|e| format!("{e} ({accepted} connections accepted)"))
}

#[test]
fn without_timers_a_post_after_a_due_verdict_is_sent_again_by_conn_retry() {
    assert_eq!(
        after_a_due_verdict_without_timers("POST"),
        Ok(StatusCode::OK),
        "a POST whose HEADERS met the verdict (never written) failed instead of being sent again"
    );
}

/// A proxy that passes the client's bytes at once and the server's `delay` late, counting the
/// client's `RST_STREAM(STREAM_CLOSED)` frames: h2's answers to frames of streams it forgot,
/// each one of its `max_local_error_reset_streams`.
async fn delaying_proxy(server: SocketAddr, delay: Duration) -> (SocketAddr, Arc<AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let closed_resets = Arc::new(AtomicUsize::new(0));
    let count = closed_resets.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let upstream = tokio::net::TcpStream::connect(server).await.unwrap();
            let (mut cr, mut cw) = client.into_split();
            let (mut ur, mut uw) = upstream.into_split();
            let count = count.clone();
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut at = 24; // after the preface
                let mut buf = vec![0; 16384];
                while let Ok(n) = cr.read(&mut buf).await {
                    if n == 0 || uw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    while seen.len() >= at + 9 {
                        let h = &seen[at..at + 9];
                        let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
                        if seen.len() < at + 9 + len {
                            break;
                        }
                        if h[3] == RST_STREAM && seen[at + 9..at + 13] == [0, 0, 0, 5] {
                            count.fetch_add(1, Ordering::SeqCst);
                        }
                        at += 9 + len;
                    }
                }
            });
            let (tx, mut rx) =
                tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
            tokio::spawn(async move {
                let mut buf = vec![0; 16384];
                while let Ok(n) = ur.read(&mut buf).await {
                    if n == 0
                        || tx
                            .send((tokio::time::Instant::now() + delay, buf[..n].to_vec()))
                            .is_err()
                    {
                        break;
                    }
                }
            });
            tokio::spawn(async move {
                while let Some((at, chunk)) = rx.recv().await {
                    tokio::time::sleep_until(at).await;
                    if cw.write_all(&chunk).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (addr, closed_resets)
}

/// docs::outgoing: "a held reset goes out at most 0.85 s after it was held, but one per
/// connection, the witness ... The witness makes at most one late answer at a time". h2
/// forgets a reset stream 1 s after *it* reset it (when the watch held the frame), so a
/// reset released at 0.85 s reaches a server 0.4 s away after h2 forgot the stream: an answer
/// the server sent meanwhile costs one of h2's `max_local_error_reset_streams`, and only the
/// witness's answers are counted in the 512 budget. Four requests to a server that answers in
/// 1 s, over a link whose server-to-client half takes 0.4 s, cancelled at 0.3 s.
#[test]
fn released_resets_on_a_slow_link_cost_no_more_than_the_witness() {
    let server = h2c_server_in_thread();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (count, tries) = rt.block_on(async {
        let (proxy, closed_resets) = delaying_proxy(server.addr, Duration::from_millis(400)).await;
        let client: Client<HealthConnector<HttpConnector>, Full<Bytes>> =
            Client::builder(TokioExecutor::new())
                .timer(hyper_util::rt::TokioTimer::new())
                .http2_only(true)
                .build(HealthConnector::new(HttpConnector::new()));
        // Open the connection first (its SETTINGS exchanged), so the four share it.
        let warm = client.request(request("GET", proxy, "/")).await.unwrap();
        assert_eq!(warm.status(), StatusCode::OK);
        let _ = warm.into_body().collect().await;
        let mut tasks = Vec::new();
        for _ in 0..4 {
            let client = client.clone();
            tasks.push(tokio::spawn(async move {
                tokio::time::timeout(
                    Duration::from_millis(300),
                    client.request(request("GET", proxy, "/slow10")),
                )
                .await
                .is_err()
            }));
        }
        for task in tasks {
            assert!(task.await.unwrap(), "setup: /slow10 answered within 0.3 s");
        }
        tokio::time::sleep(Duration::from_millis(2500)).await;
        (closed_resets.load(Ordering::SeqCst), 4)
    });
    assert!(
        count <= 1,
        "{count} of h2's local error resets (RST_STREAM(STREAM_CLOSED)) spent by {tries} \
         cancels on one connection: the released resets' late answers cost too, uncounted by \
         the 512 budget"
    );
}
