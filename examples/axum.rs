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

use std::time::Duration;

use axum::{Router, routing::get};
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use shared_headers::Exchange;
use shared_headers::server::SharedHeadersLayer;

/// Annotates the log line, adds a response header, answers.
async fn hello(exchange: Exchange) -> &'static str {
    exchange
        .annotations()
        .insert("x-route", "/".parse().unwrap())
        .unwrap();
    exchange
        .response()
        .insert("x-cache", "miss".parse().unwrap())
        .unwrap();
    "hello\n"
}

/// Takes longer than the deadline: answered 503 by the layer.
async fn slow(exchange: Exchange) -> &'static str {
    exchange
        .annotations()
        .insert("x-route", "/slow".parse().unwrap())
        .unwrap();
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
            .insert("x-audit", "done".parse().unwrap());
        assert!(refused.is_err(), "sealed at the commit");
    });
    "answered before the task wrote\n"
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let layer = SharedHeadersLayer::new()
        .timeout(Duration::from_millis(200))
        .on_commit(|c| {
            println!(
                "access: {} {} status={} outcome={:?} latency_ms={:.1} annotations: {}",
                c.method().unwrap(),
                c.uri().unwrap(),
                c.status().map_or(0, |s| s.as_u16()),
                c.outcome().to_string(),
                c.latency().as_secs_f64() * 1e3,
                c.annotations()
                    .map(|a| a.redacted().to_string())
                    .unwrap_or_default(),
            )
        })
        .on_late_writes(|late| {
            println!(
                "post-commit activity: {} {} refused_writes={} since_commit_ms={:.1}",
                late.committed().method().unwrap(),
                late.committed().uri().unwrap(),
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
