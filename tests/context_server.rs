//! The request's context at the server, over real sockets (HTTP/1.1 and HTTP/2 on
//! 127.0.0.1:0):
//!
//! * **the request id everywhere**: the incoming id (or a generated one) is on the response of
//!   every outcome (answered, the layer's timeout, a caught panic, a rejection, a gRPC own
//!   answer), in the access line (`http.request.id`), in the handler's `Exchange`, in scope
//!   for its calls and in a task spawned with `context::carry`;
//! * **bad input**: request ids that are 10 KB long, hold a tab or obs-text, or come twice are
//!   replaced and counted; two `traceparent`s, an oversized `baggage` and a malformed `b3` are
//!   not propagated and are counted; no raw bad value reaches any event or span field, even
//!   with every header in the line; every request is served;
//! * **a user's id generator** (`request_id_with`) makes the ids; an invalid id or a panic
//!   from it falls back to a generated id, counted;
//! * **secrets never travel**: a secret name is refused when the layer is built.
//!
//! Events are captured by a bare `Subscriber` installed once as the global default; each test
//! tells its requests apart by their paths.
#![cfg(all(feature = "tracing", feature = "client"))]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use shared_headers::context::{self, Propagation, PropagationError, RequestContext};
use shared_headers::server::SharedHeadersLayer;
use shared_headers::server::access_log::AccessLog;
use shared_headers::{Builder, Exchange};
use tower::{Layer, ServiceExt, service_fn};

#[path = "support/capture.rs"]
mod capture;
use capture::{capture, lock, wait_access_lines_of};

#[path = "support/sockets.rs"]
mod sockets;
use sockets::serve;

/// A header to send: its name and raw value.
type Header<'a> = (&'a str, &'a [u8]);

/// Every field of every captured event and span, for the sweeps.
fn every_field() -> Vec<String> {
    let events = lock(&capture().events);
    let spans = lock(&capture().spans);
    events
        .iter()
        .chain(spans.iter())
        .flat_map(|fields| fields.values().cloned())
        .collect()
}

/// One request on a new connection: the status, the response's `x-request-id` and body.
async fn fetch(
    addr: SocketAddr,
    h2: bool,
    req: Request<Empty<Bytes>>,
) -> (StatusCode, Option<HeaderValue>, Bytes) {
    let io = TokioIo::new(tokio::net::TcpStream::connect(addr).await.unwrap());
    let res = if h2 {
        let (mut sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .unwrap();
        tokio::spawn(conn);
        sender.send_request(req).await.unwrap()
    } else {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
        tokio::spawn(conn);
        sender.send_request(req).await.unwrap()
    };
    let status = res.status();
    let id = res.headers().get("x-request-id").cloned();
    let body = res.into_body().collect().await.unwrap().to_bytes();
    (status, id, body)
}

fn request(path: &str, h2: bool, headers: &[(&str, &[u8])]) -> Request<Empty<Bytes>> {
    let uri = if h2 {
        format!("http://localhost{path}")
    } else {
        path.to_owned()
    };
    let mut builder = Request::builder().uri(uri);
    if h2 {
        builder = builder.version(http::Version::HTTP_2);
    }
    for (name, value) in headers {
        builder = builder.header(*name, HeaderValue::from_bytes(value).unwrap());
    }
    builder.body(Empty::new()).unwrap()
}

/// The handler behind every test: `/…/slow` sleeps past the deadline, `/…/panic` panics,
/// anything else answers with what it sees of its context, in three places.
async fn handler(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path().to_owned();
    if path.ends_with("/slow") {
        tokio::time::sleep(Duration::from_secs(10)).await;
    }
    if path.ends_with("/panic") {
        panic!("handler bug");
    }
    let exchange = req.extensions().get::<Exchange>().unwrap().clone();
    let in_exchange = exchange
        .context()
        .and_then(|c| c.request_id())
        .map(str::to_owned);
    let in_scope = RequestContext::current().and_then(|c| c.request_id().map(str::to_owned));
    let spawned = tokio::spawn(context::carry(async {
        RequestContext::current().map(|c| {
            let names: Vec<String> = c.headers().map(|(n, _)| n.to_string()).collect();
            (c.request_id().map(str::to_owned), names)
        })
    }))
    .await
    .unwrap();
    let plain = tokio::spawn(async { RequestContext::current().is_some() })
        .await
        .unwrap();
    let (in_task, names) = spawned.unwrap_or_default();
    let body = format!(
        "{}|{}|{}|{}|{}",
        in_exchange.unwrap_or_default(),
        in_scope.unwrap_or_default(),
        in_task.unwrap_or_default(),
        plain,
        names.join(",")
    );
    Ok(Response::new(Full::new(Bytes::from(body))))
}

fn layer() -> SharedHeadersLayer {
    SharedHeadersLayer::new()
        .timeout(Duration::from_millis(300))
        .request_policy(Builder::new().max_entries(16))
        .propagate(Propagation::new().request_id().w3c().b3())
        .access_log(
            AccessLog::new()
                .request_headers(shared_headers::server::HeaderSelection::all())
                .response_headers(shared_headers::server::HeaderSelection::all()),
        )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_id_is_on_every_answer_in_the_line_and_in_every_scope() {
    capture();
    for h2 in [false, true] {
        let proto = if h2 { "h2" } else { "h1" };
        let addr = serve(layer().layer(service_fn(handler)), h2).await;

        // Answered: the incoming id, in the exchange, in scope, in a carried task; a plain
        // spawn sees none; the propagated names follow the id.
        let path = format!("/id/{proto}/ok");
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let req = request(
            &path,
            h2,
            &[("x-request-id", b"req-ok"), ("traceparent", tp.as_bytes())],
        );
        let (status, id, body) = fetch(addr, h2, req).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(id.unwrap(), "req-ok");
        assert_eq!(body, "req-ok|req-ok|req-ok|false|x-request-id,traceparent");
        let lines = wait_access_lines_of(&path, 1).await;
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0]["http.request.id"], "req-ok");

        // No id sent: a generated one, the same on the response, in the handler and the line.
        let path = format!("/id/{proto}/none");
        let (_, id, body) = fetch(addr, h2, request(&path, h2, &[])).await;
        let id = id.unwrap().to_str().unwrap().to_owned();
        assert_eq!(id.len(), 32);
        assert!(body.starts_with(format!("{id}|{id}|{id}|").as_bytes()));
        assert_eq!(
            wait_access_lines_of(&path, 1).await[0]["http.request.id"],
            id
        );

        // The layer's own answers carry it too: the timeout, a caught panic, a rejection.
        for (end, status) in [
            ("slow", StatusCode::SERVICE_UNAVAILABLE),
            ("panic", StatusCode::INTERNAL_SERVER_ERROR),
        ] {
            let path = format!("/id/{proto}/{end}");
            let want = format!("req-{end}");
            let req = request(&path, h2, &[("x-request-id", want.as_bytes())]);
            let (got, id, _) = fetch(addr, h2, req).await;
            assert_eq!(got, status, "{path}");
            assert_eq!(id.unwrap(), want.as_str(), "{path}");
            assert_eq!(
                wait_access_lines_of(&path, 1).await[0]["http.request.id"],
                want
            );
        }
        let path = format!("/id/{proto}/reject");
        let many: Vec<(String, Vec<u8>)> = (0..20)
            .map(|i| (format!("x-h{i}"), b"v".to_vec()))
            .collect();
        let mut headers: Vec<(&str, &[u8])> = many
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_slice()))
            .collect();
        headers.push(("x-request-id", b"req-reject"));
        let (got, id, _) = fetch(addr, h2, request(&path, h2, &headers)).await;
        assert_eq!(got, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
        assert_eq!(id.unwrap(), "req-reject");
        assert_eq!(
            wait_access_lines_of(&path, 1).await[0]["http.request.id"],
            "req-reject"
        );
    }
}

#[tokio::test]
async fn a_grpc_own_answer_carries_the_request_id() {
    let layer = SharedHeadersLayer::new()
        .timeout(Duration::from_millis(50))
        .propagate(Propagation::new().request_id());
    let service = layer.layer(service_fn(|_req: Request<()>| async {
        tokio::time::sleep(Duration::from_secs(10)).await;
        Ok::<_, Infallible>(Response::new(String::new()))
    }));
    let req = Request::builder()
        .version(http::Version::HTTP_2)
        .header("content-type", "application/grpc")
        .header("x-request-id", "grpc-1")
        .body(())
        .unwrap();
    let res = service.oneshot(req).await.unwrap();
    assert_eq!(res.headers()["grpc-status"], "4");
    assert_eq!(res.headers()["x-request-id"], "grpc-1");
}

#[tokio::test]
async fn a_user_generator_makes_the_ids_and_its_failures_fall_back_to_ours() {
    let propagation = Propagation::new().request_id_with(|headers: &http::HeaderMap| match headers
        .get("x-gen")
        .map(HeaderValue::as_bytes)
    {
        Some(b"panic") => panic!("generator bug"),
        Some(b"bad") => Some(HeaderValue::from_static("not valid")),
        _ => Some(HeaderValue::from_static("gen-1")),
    });
    let layer = SharedHeadersLayer::new().propagate(propagation);
    let stats = layer.stats();
    let service = layer.layer(service_fn(|_req: Request<()>| async {
        let id = RequestContext::current().and_then(|c| c.request_id().map(str::to_owned));
        Ok::<_, Infallible>(Response::new(id.unwrap_or_default()))
    }));
    for (gen_header, want_ours) in [("ok", false), ("bad", true), ("panic", true)] {
        let req = Request::builder()
            .header("x-gen", gen_header)
            .body(())
            .unwrap();
        let res = service.clone().oneshot(req).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{gen_header}");
        let id = res.headers()["x-request-id"].to_str().unwrap().to_owned();
        let body = res.into_body().into_inner().unwrap();
        assert_eq!(body, id, "{gen_header}: the handler sees the same id");
        if want_ours {
            assert_eq!(id.len(), 32, "{gen_header}: {id}");
        } else {
            assert_eq!(id, "gen-1");
        }
    }
    assert_eq!(stats.propagation_counts().failed_request_id_generators, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_replaced_or_dropped_counted_and_never_logged_raw() {
    capture();
    let long_id = vec![b'A'; 10 * 1024];
    let tp_a = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let tp_b = b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let baggage = "k=v,".repeat(2500);
    for h2 in [false, true] {
        let proto = if h2 { "h2" } else { "h1" };
        let layer = layer();
        let stats = layer.stats();
        let addr = serve(layer.layer(service_fn(handler)), h2).await;
        let cases: Vec<(&str, Vec<Header>)> = vec![
            ("long", vec![("x-request-id", &long_id)]),
            ("tab", vec![("x-request-id", b"bad\tid")]),
            ("obs", vec![("x-request-id", b"zqxj\xe9-id")]),
            (
                "twice",
                vec![("x-request-id", b"one"), ("x-request-id", b"two")],
            ),
            (
                "trace",
                vec![
                    ("x-request-id", b"trace-ok"),
                    ("traceparent", tp_a),
                    ("traceparent", tp_b),
                    ("baggage", baggage.as_bytes()),
                    ("b3", b"not-b3"),
                    ("x-b3-sampled", b"1"),
                ],
            ),
        ];
        for (case, headers) in &cases {
            let path = format!("/bad/{proto}/{case}");
            let (status, id, body) = fetch(addr, h2, request(&path, h2, headers)).await;
            assert_eq!(status, StatusCode::OK, "{path}: the request is served");
            let id = id.unwrap();
            let body = String::from_utf8(body.to_vec()).unwrap();
            if *case == "trace" {
                assert_eq!(id, "trace-ok");
                // Neither traceparent (two of them), nor the oversized baggage, nor the
                // malformed b3: only the id and the valid x-b3-sampled travel.
                assert!(body.ends_with("|x-request-id,x-b3-sampled"), "{body}");
            } else {
                assert_eq!(id.len(), 32, "{path}: replaced by a generated id");
                assert!(id.as_bytes().iter().all(u8::is_ascii_hexdigit));
            }
            let lines = wait_access_lines_of(&path, 1).await;
            assert_eq!(lines.len(), 1, "{path}");
            assert_eq!(lines[0]["http.request.id"], id.to_str().unwrap());
        }
        let counts = stats.propagation_counts();
        assert_eq!(counts.replaced_request_ids, 4, "{proto}");
        assert_eq!(counts.duplicated, 1, "{proto}");
        assert_eq!(counts.over_limit, 1, "{proto}");
        assert_eq!(counts.malformed, 1, "{proto}");
    }
    // No raw bad value in any field of any event or span (the line prints every
    // request header: those values print as their size or percent-encoded).
    let fields = every_field();
    let long = "A".repeat(1025);
    for field in &fields {
        assert!(!field.contains(&long), "a 10 KB id in a line");
        assert!(
            !field.contains("bad\tid") && !field.contains("bad\\tid"),
            "{field}"
        );
        // The obs-text id prints percent-encoded, never raw (nor as a Rust escape). Its
        // marker "zqxj" is one no generated value can hold (not hex, not a timestamp).
        assert!(
            !field.contains("zqxj\\x") && !field.contains('\u{e9}'),
            "{field}"
        );
        assert!(
            !field.contains(&baggage[..1025]),
            "an oversized baggage in a line"
        );
    }
    assert!(fields.iter().any(|f| f.contains("[10240 bytes]")));
    assert!(fields.iter().any(|f| f.contains("bad%09id")));
    assert!(fields.iter().any(|f| f.contains("zqxj%E9-id")));
}

#[test]
fn always_secret_names_are_refused_when_the_propagation_is_made() {
    for name in [
        "authorization",
        "cookie",
        "proxy-authorization",
        "x-api-key",
    ] {
        let name = HeaderName::from_static(name);
        assert_eq!(
            Propagation::new().header(name.clone()).unwrap_err(),
            PropagationError::Secret { name }
        );
    }
    // The policy's secret names: left out by the layer, whatever the order of the calls
    // (`a_name_marked_secret_in_the_policy_never_travels`).
}

#[tokio::test]
async fn a_name_marked_secret_in_the_policy_never_travels() {
    let tenant = HeaderName::from_static("x-tenant");
    let propagation = Propagation::new().header(tenant.clone()).unwrap().w3c();
    let policy = Builder::new().sensitive([tenant]);
    // Secret wins, before or after `propagate`, in the request or the response policy.
    let layers = [
        SharedHeadersLayer::new()
            .propagate(propagation.clone())
            .request_policy(policy.clone()),
        SharedHeadersLayer::new()
            .request_policy(policy.clone())
            .propagate(propagation.clone()),
        SharedHeadersLayer::new()
            .response_policy(policy)
            .propagate(propagation),
    ];
    for layer in layers {
        let service = layer.layer(service_fn(|_req: Request<()>| async {
            let names: Vec<String> = RequestContext::current()
                .map(|c| c.headers().map(|(n, _)| n.to_string()).collect())
                .unwrap_or_default();
            Ok::<_, Infallible>(Response::new(names.join(",")))
        }));
        let req = Request::builder()
            .header("x-tenant", "acme")
            .header("baggage", "k=v")
            .body(())
            .unwrap();
        let res = service.oneshot(req).await.unwrap();
        assert_eq!(res.into_body().into_inner().unwrap(), "baggage");
    }
}
