//! axum 0.8 with `SharedHeadersLayer`: the `Exchange` extractor, the access line
//! (`tracing_access_log`, printed by `tracing_subscriber::fmt`), a hook of our own beside it
//! (`on_response_end`: hooks add up), and a handler that leaves a task behind that writes too
//! late (the post-commit activity line).
//!
//! ```text
//! cargo run --features axum,tracing --example axum
//! ```
//!
//! It serves on 127.0.0.1 (a free port), sends three requests to itself (one answered, one
//! timed out, one whose task writes after the answer), prints the log lines, checks that each
//! request got exactly one access line, and exits (non-zero if not).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
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
        .insert("x-user", HeaderValue::from_static("ada"));
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
        .insert("x-user", HeaderValue::from_static("ada"));
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

/// The lines the subscriber wrote, kept to be counted (and printed as they come).
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        std::io::stdout().write_all(buf)?;
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let lines = Lines::default();
    let writer = lines.clone();
    tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .init();
    let ended = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&ended);
    let layer = SharedHeadersLayer::new()
        .timeout(Duration::from_millis(200))
        // axum's `ConnectInfo` (served with `into_make_service_with_connect_info` below).
        .peer_address(|ext| ext.get::<ConnectInfo<SocketAddr>>().map(|info| info.0))
        // One line per request when its response ends, and the post-commit activity line.
        .tracing_access_log()
        // A hook of our own (a metric, say): it runs too, once per request.
        .on_response_end(move |_end| {
            count.fetch_add(1, Ordering::Relaxed);
        });
    let app = Router::new()
        .route("/users/{id}", get(hello))
        .route("/slow", get(slow))
        .route("/late", get(late))
        .layer(layer); // after the routes it applies to

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    println!("listening on http://{addr}");
    let app = app.into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, app).await });

    for (path, expected) in [
        ("/users/42?api_key=s3cr3t", StatusCode::OK),
        ("/slow", StatusCode::SERVICE_UNAVAILABLE),
        ("/late", StatusCode::OK),
    ] {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        let req = Request::get(path)
            .header("host", "localhost")
            .header("user-agent", "example/1.0")
            .header("x-api-key", "s3cr3t")
            .body(Empty::<Bytes>::new())?;
        let res = sender.send_request(req).await?;
        assert_eq!(res.status(), expected, "{path}");
        let cache = res.headers().get("x-cache").cloned();
        res.into_body().collect().await?;
        println!("client: GET {path} -> {expected} x-cache={cache:?}");
    }
    // Give the late task time to write and let go.
    tokio::time::sleep(Duration::from_millis(200)).await;

    let text = String::from_utf8(lines.0.lock().unwrap().clone())?;
    let completed = text.matches("request completed").count();
    let late = text.matches("writes refused after the commit").count();
    println!(
        "access lines: {completed}, post-commit activity lines: {late}, our hook: {} calls, secrets in the log: {}",
        ended.load(Ordering::Relaxed),
        text.matches("s3cr3t").count()
    );
    if completed != 3 || late != 1 || ended.load(Ordering::Relaxed) != 3 || text.contains("s3cr3t")
    {
        eprintln!("FAIL: expected one access line per request, one late line, no secret");
        std::process::exit(1);
    }
    Ok(())
}
