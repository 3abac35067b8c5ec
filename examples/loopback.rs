//! A minimal HTTP/1.1 hello-world server for loopback load tests (wrk, h2load): the same
//! handler bare, under tower-http's `TimeoutLayer`, or under `SharedHeadersLayer` with a
//! deadline, so that the three can be compared over real sockets.
//!
//! ```text
//! cargo run --release --features server --example loopback -- layer --seconds 8
//! # prints "port 40123"; then, from another shell:
//! wrk -t1 -c1 -d5s -H 'accept: */*' ... http://127.0.0.1:40123/
//! ```
//!
//! Arguments: the mode, `bare` (default), `tower_http` or `layer`; `--seconds N` (default 3):
//! the server exits by itself after N seconds. It binds 127.0.0.1:0 and prints the port it got
//! as `port N` on the first line of stdout. The handler returns a 13-byte body and reads nothing;
//! the deadline of both timeout layers is 30 s, so it never fires. Without a load generator the
//! example just waits out its time: `cargo run --features server --example loopback` is a 3 s
//! smoke run.

use std::convert::Infallible;
use std::io::Write as _;
use std::time::Duration;

use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use shared_headers::server::SharedHeadersLayer;
use tower::util::BoxCloneService;
use tower::{Layer, ServiceExt, service_fn};

type Body = Full<Bytes>;
/// One body type for the three stacks (the layer's responses have its `ResponseBody`): each
/// mode boxes its body once, so the comparison stays like for like.
type AnyBody = http_body_util::combinators::UnsyncBoxBody<Bytes, Infallible>;
type Svc = BoxCloneService<Request<Incoming>, Response<AnyBody>, Infallible>;

const DEADLINE: Duration = Duration::from_secs(30);

async fn hello(_req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(
        b"Hello, world!",
    ))))
}

fn service(mode: &str) -> Svc {
    match mode {
        "bare" => service_fn(hello)
            .map_response(|res| res.map(BodyExt::boxed_unsync))
            .boxed_clone(),
        "tower_http" => tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            DEADLINE,
        )
        .layer(service_fn(hello))
        .map_response(|res| res.map(BodyExt::boxed_unsync))
        .boxed_clone(),
        "layer" => SharedHeadersLayer::new()
            .timeout(DEADLINE)
            .layer(service_fn(hello))
            .map_response(|res| res.map(BodyExt::boxed_unsync))
            .boxed_clone(),
        other => {
            eprintln!("unknown mode {other:?}: expected bare, tower_http or layer");
            std::process::exit(2);
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut mode = "bare".to_owned();
    let mut seconds = 3u64;
    let mut at = 0;
    while at < args.len() {
        match args[at].as_str() {
            "--seconds" => {
                at += 1;
                seconds = args
                    .get(at)
                    .and_then(|s| s.parse().ok())
                    .ok_or("--seconds needs a number")?;
            }
            other => mode = other.to_owned(),
        }
        at += 1;
    }
    let service = service(&mode);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        println!("port {}", listener.local_addr()?.port());
        std::io::stdout().flush()?;
        let serve = async {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let service = TowerToHyperService::new(service.clone());
                tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        };
        tokio::select! {
            () = serve => {}
            () = tokio::time::sleep(Duration::from_secs(seconds)) => {}
        }
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    // Open connections' tasks are dropped with the runtime.
    runtime.shutdown_timeout(Duration::from_millis(100));
    Ok(())
}
