//! The README's quick start: an axum server with the layer, one request to itself, its line.

use std::time::Duration;

use axum::{Router, routing::get};
use http::HeaderValue;
use shared_headers::context::Propagation;
use shared_headers::{Error, Exchange, server::SharedHeadersLayer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn hello(exchange: Exchange) -> &'static str {
    // Logged with the request's access line, never sent:
    let user = exchange
        .annotations()
        .insert("x-user", HeaderValue::from_static("ada"));
    // Sent with the response:
    let cache = exchange
        .response()
        .insert("x-cache", HeaderValue::from_static("miss"));
    // The one possible error: the request was committed (its deadline fired) and the answer
    // decided. Never `unwrap` it: stop instead.
    if let Err(Error::Sealed { .. }) = user.and(cache) {
        return "too late";
    }
    "hello"
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().init(); // prints the access line (a `tracing` event)
    let meter = opentelemetry::global::meter("my-server");
    let layer = SharedHeadersLayer::new()
        .timeout(Duration::from_secs(5)) // a deadline: answered 503 at the wall clock
        .tracing_access_log() // the line: one per request, when its response ends
        .otel_metrics(&meter) // the metric: http.server.request.duration
        .propagate(Propagation::new().request_id().w3c()); // the request's context
    let app = Router::new().route("/users/{id}", get(hello)).layer(layer); // after the routes

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });

    // One request to itself, then exit (a real server awaits `axum::serve` instead).
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let request = "GET /users/42?api_key=s3cr3t HTTP/1.1\r\nhost: localhost\r\n\
                   user-agent: quickstart/1.0\r\nconnection: close\r\n\r\n";
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    println!("{}", response.lines().next().unwrap_or_default()); // HTTP/1.1 200 OK
    Ok(())
}
