//! One hop of the trace, over loopback: a server layer with `Propagation::trace_hop` gives each
//! request a new span id under the caller's trace, and the calls its handler makes through
//! `PropagateLayer` send `traceparent` with the same trace id, this hop's span id as their
//! parent, and the flags, with `tracestate` and `baggage` as they came. Without a valid
//! `traceparent`, a new trace (flags `03`); an outgoing request's own `traceparent` wins.
//! Every server binds 127.0.0.1:0; the runtime bounds every test.
#![cfg(all(feature = "server", feature = "client"))]

use std::convert::Infallible;
use std::net::SocketAddr;

use http::{HeaderMap, Request, Response};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use shared_headers::client::PropagateLayer;
use shared_headers::context::{Propagation, RequestContext};
use shared_headers::deadline::BudgetHeader;
use shared_headers::server::SharedHeadersLayer;
use tower::{Layer, ServiceExt};

#[path = "support/server.rs"]
mod server;
use server::{run, serve};

const INCOMING: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// A leaf that answers with the trace headers it was sent, one a line (`-` when absent).
async fn leaf() -> SocketAddr {
    let svc =
        SharedHeadersLayer::new().layer(tower::service_fn(|req: Request<Incoming>| async move {
            let text: Vec<String> = ["traceparent", "tracestate", "baggage"]
                .iter()
                .map(|name| {
                    req.headers()
                        .get(*name)
                        .map_or("-".to_owned(), |v| v.to_str().unwrap().to_owned())
                })
                .collect();
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(text.join("\n")))))
        }));
    serve(svc.boxed_clone(), false).await
}

/// A middle service (a trace hop) that calls `leaf` through `PropagateLayer`, with its own
/// `traceparent` when `own` is set, and answers with its hop's ids and what the leaf saw.
async fn middle(leaf: SocketAddr, own: Option<&'static str>) -> SocketAddr {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let client = PropagateLayer::new(BudgetHeader::grpc_timeout()).layer(client);
    let svc = SharedHeadersLayer::new()
        .propagate(Propagation::new().request_id().trace_hop())
        .layer(tower::service_fn(move |_req: Request<Incoming>| {
            let client = client.clone();
            async move {
                let context = RequestContext::current().expect("in scope");
                let mut out = Request::get(format!("http://{leaf}/"))
                    .body(Empty::new())
                    .unwrap();
                if let Some(own) = own {
                    out.headers_mut()
                        .insert("traceparent", own.parse().unwrap());
                }
                let res = client.oneshot(out).await.expect("the leaf answers");
                let seen = res.into_body().collect().await.unwrap().to_bytes();
                let text = format!(
                    "{}\n{}\n{}\n{}",
                    context.trace_id().unwrap(),
                    context.span_id().unwrap(),
                    context.parent_span_id().unwrap_or("-"),
                    String::from_utf8_lossy(&seen)
                );
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(text))))
            }
        }));
    serve(svc.boxed_clone(), false).await
}

/// Calls `addr` with `headers`: the middle's trace id, span id, parent id, and the leaf's
/// `traceparent`, `tracestate`, `baggage`.
async fn call(addr: SocketAddr, headers: HeaderMap) -> Vec<String> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut req = Request::get(format!("http://{addr}/"))
        .body(Empty::new())
        .unwrap();
    *req.headers_mut() = headers;
    let res = client.request(req).await.unwrap();
    let body = res.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(body.to_vec())
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn is_hex(text: &str, len: usize) -> bool {
    text.len() == len
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && text.bytes().any(|b| b != b'0')
}

#[test]
fn a_valid_traceparent_gives_a_new_span_under_the_same_trace() {
    run(async {
        let middle = middle(leaf().await, None).await;
        let mut headers = HeaderMap::new();
        headers.insert("traceparent", INCOMING.parse().unwrap());
        headers.insert("tracestate", "vendor=opaque".parse().unwrap());
        headers.insert("baggage", "tenant=acme".parse().unwrap());
        let seen = call(middle, headers.clone()).await;
        let [trace, span, parent, sent, state, baggage] = &seen[..] else {
            panic!("{seen:?}")
        };
        assert_eq!(trace, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(parent, "00f067aa0ba902b7");
        assert!(is_hex(span, 16) && span != parent, "{span}");
        // The leaf's parent is the middle's hop; the trace, the flags, tracestate and
        // baggage travel as they came.
        assert_eq!(sent, &format!("00-{trace}-{span}-01"));
        assert_eq!(state, "vendor=opaque");
        assert_eq!(baggage, "tenant=acme");

        // A second request under the same caller: another span id.
        let again = call(middle, headers).await;
        assert_eq!(again[0], *trace);
        assert_ne!(again[1], *span);

        // Not sampled stays not sampled; only the flags W3C defines travel.
        let mut headers = HeaderMap::new();
        headers.insert(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-f0"
                .parse()
                .unwrap(),
        );
        let seen = call(middle, headers).await;
        assert_eq!(seen[3], format!("00-{}-{}-00", seen[0], seen[1]));
    });
}

#[test]
fn without_a_valid_traceparent_the_hop_starts_a_trace() {
    run(async {
        let middle = middle(leaf().await, None).await;
        let mut traces = std::collections::HashSet::new();
        for incoming in [None, Some("not a traceparent"), Some(&INCOMING[..54])] {
            let mut headers = HeaderMap::new();
            headers.insert("tracestate", "vendor=opaque".parse().unwrap());
            if let Some(incoming) = incoming {
                headers.insert("traceparent", incoming.parse().unwrap());
            }
            let seen = call(middle, headers).await;
            let [trace, span, parent, sent, state, _] = &seen[..] else {
                panic!("{seen:?}")
            };
            assert!(is_hex(trace, 32) && is_hex(span, 16), "{seen:?}");
            assert_eq!(parent, "-");
            // Sampled and random (W3C level 2): the hop drew the whole trace id.
            assert_eq!(sent, &format!("00-{trace}-{span}-03"));
            // A `tracestate` without a valid `traceparent` means nothing: dropped.
            assert_eq!(state, "-");
            traces.insert(trace.clone());
        }
        assert_eq!(traces.len(), 3, "a new trace each time");
    });
}

#[test]
fn an_outgoing_requests_own_traceparent_wins() {
    const OWN: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    run(async {
        let middle = middle(leaf().await, Some(OWN)).await;
        let mut headers = HeaderMap::new();
        headers.insert("traceparent", INCOMING.parse().unwrap());
        let seen = call(middle, headers).await;
        assert_eq!(seen[3], OWN);
    });
}

#[test]
fn without_trace_hop_traceparent_travels_as_it_came() {
    run(async {
        let leaf = leaf().await;
        let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
        let client = PropagateLayer::new(BudgetHeader::grpc_timeout()).layer(client);
        let svc = SharedHeadersLayer::new()
            .propagate(Propagation::new().w3c())
            .layer(tower::service_fn(move |_req: Request<Incoming>| {
                let client = client.clone();
                async move {
                    assert_eq!(RequestContext::current().unwrap().trace_id(), None);
                    let out = Request::get(format!("http://{leaf}/"))
                        .body(Empty::new())
                        .unwrap();
                    let res = client.oneshot(out).await.unwrap();
                    let seen = res.into_body().collect().await.unwrap().to_bytes();
                    Ok::<_, Infallible>(Response::new(Full::new(seen)))
                }
            }));
        let addr = serve(svc.boxed_clone(), false).await;
        let mut headers = HeaderMap::new();
        headers.insert("traceparent", INCOMING.parse().unwrap());
        let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
        let mut req = Request::get(format!("http://{addr}/"))
            .body(Empty::new())
            .unwrap();
        *req.headers_mut() = headers;
        let res = client.request(req).await.unwrap();
        let body = res.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(
            body.split(|b| *b == b'\n').next().unwrap(),
            INCOMING.as_bytes()
        );
    });
}
