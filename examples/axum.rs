//! axum 0.8 with `SharedHeadersLayer`: the `Exchange` extractor, an access log through the
//! `on_commit` hook, a post-commit activity line through `on_late_writes`, and a handler that
//! leaves a task behind that writes too late.
//!
//! ```text
//! cargo run --features axum --example axum
//! ```
//!
//! It serves on 127.0.0.1 (a free port), sends three requests to itself (one answered, one
//! timed out, one whose task writes after the answer), prints the log lines, and exits.

use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::{Router, routing::get};
use http::{HeaderValue, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use shared_headers::server::SharedHeadersLayer;
use shared_headers::{Error, Exchange};

/// Annotates the log line, adds a response header, answers.
///
/// A write through the exchange fails only once the request is committed (the deadline
/// fired, or the client went away): `Err(Error::Sealed { .. })`. The answer is decided then, so
/// the handler has nothing left to add; it must not `unwrap` (a panic there would be caught by
/// the layer, but it is still a bug).
async fn hello(exchange: Exchange) -> &'static str {
    let annotated = exchange
        .annotations()
        .insert("x-route", HeaderValue::from_static("/"));
    let written = exchange
        .response()
        .insert("x-cache", HeaderValue::from_static("miss"));
    if let Err(Error::Sealed { .. }) = annotated.and(written) {
        return "too late: the answer was already decided\n";
    }
    "hello\n"
}

/// Takes longer than the deadline: answered 503 by the layer.
async fn slow(exchange: Exchange) -> &'static str {
    // Errors ignored on purpose: only `Err(Sealed)` is possible, and then the log already has
    // its line.
    let _ = exchange
        .annotations()
        .insert("x-route", HeaderValue::from_static("/slow"));
    tokio::time::sleep(Duration::from_secs(2)).await;
    "too late\n"
}

/// Leaves a task behind that writes after the response was committed: refused, and reported
/// once the task lets go of the exchange.
async fn late(exchange: Exchange) -> &'static str {
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let refused = exchange
            .response()
            .insert("x-audit", HeaderValue::from_static("done"));
        assert!(
            matches!(refused, Err(Error::Sealed { .. })),
            "sealed at the commit"
        );
    });
    "answered before the task wrote\n"
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let layer = SharedHeadersLayer::new()
        .timeout(Duration::from_millis(200))
        // axum's `ConnectInfo` (served with `into_make_service_with_connect_info` below).
        .peer_address(|ext| ext.get::<ConnectInfo<SocketAddr>>().map(|info| info.0))
        .on_commit(|c| {
            // `c.sent()`: the response as it left the layer (the handler's own headers
            // included); `None` if none left it.
            println!(
                "access: {} {} {:?} peer={} status={} outcome={:?} latency_ms={:.3} sent: {} annotations: {}",
                c.method().map_or("", |m| m.as_str()),
                c.uri().map_or("", |u| u.path()),
                c.version(),
                c.peer_address().map(|p| p.to_string()).unwrap_or_default(),
                c.sent().map_or(0, |head| head.status.as_u16()),
                c.outcome().to_string(),
                c.latency().as_secs_f64() * 1e3,
                c.sent_redacted().map(|h| h.to_string()).unwrap_or_default(),
                c.annotations()
                    .map(|a| a.redacted().to_string())
                    .unwrap_or_default(),
            )
        })
        .on_late_writes(|late| {
            println!(
                "post-commit activity: {} {} refused_writes={} since_commit_ms={:.1}",
                late.committed().method().map_or("", |m| m.as_str()),
                late.committed().uri().map_or("", |u| u.path()),
                late.refused_writes(),
                late.since_commit().as_secs_f64() * 1e3,
            )
        });
    let app = Router::new()
        .route("/", get(hello))
        .route("/slow", get(slow))
        .route("/late", get(late))
        .layer(layer); // after the routes it applies to

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    println!("listening on http://{addr}");
    let app = app.into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, app).await });

    for (path, expected) in [
        ("/", StatusCode::OK),
        ("/slow", StatusCode::SERVICE_UNAVAILABLE),
        ("/late", StatusCode::OK),
    ] {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        let req = Request::get(path)
            .header("host", "localhost")
            .body(Empty::<Bytes>::new())?;
        let res = sender.send_request(req).await?;
        assert_eq!(res.status(), expected, "{path}");
        let cache = res.headers().get("x-cache").cloned();
        res.into_body().collect().await?;
        println!("client: GET {path} -> {expected} x-cache={cache:?}");
    }
    // Give the late task time to write and let go.
    tokio::time::sleep(Duration::from_millis(200)).await;
    Ok(())
}
