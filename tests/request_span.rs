//! The request's `tracing` span, over loopback: with the access log installed, a handler's own
//! events run inside a span carrying `http.request.id`, `trace_id` and `span_id`, as
//! `tracing-subscriber`'s JSON formatter shows them; so do the response body's polls; the
//! access line carries `trace_id` and `span_id` too.
#![cfg(all(feature = "tracing", feature = "client"))]

use std::convert::Infallible;

use http::{Request, Response};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use shared_headers::context::Propagation;
use shared_headers::server::SharedHeadersLayer;
use tower::{Layer, ServiceExt};

#[path = "support/server.rs"]
mod server;

mod support;
use server::serve;
use support::Lines;

#[test]
fn handler_lines_and_the_access_line_carry_the_ids() {
    let lines = Lines::default();
    let subscriber = lines.json_subscriber();
    // One thread: the server, the client and the subscriber all on it.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _default = tracing::subscriber::set_default(subscriber);
    runtime
        .block_on(async {
            tokio::time::timeout(server::LIMIT, async {
                let svc = SharedHeadersLayer::new()
                    .propagate(Propagation::new().request_id().trace_hop())
                    .tracing_access_log()
                    .layer(tower::service_fn(|_req: Request<Incoming>| async {
                        tracing::info!("in the handler");
                        tokio::task::yield_now().await;
                        tracing::info!("after a suspension");
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from("ok"))))
                    }));
                let addr = serve(svc.boxed_clone(), false).await;
                let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
                let mut req = Request::get(format!("http://{addr}/"))
                    .body(Empty::new())
                    .unwrap();
                req.headers_mut()
                    .insert("x-request-id", "req-7".parse().unwrap());
                req.headers_mut().insert(
                    "traceparent",
                    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
                        .parse()
                        .unwrap(),
                );
                let res = client.request(req).await.unwrap();
                res.into_body().collect().await.unwrap();
                // The access line is written when the server dropped the body: wait for it.
                lines.wait_for("request completed").await;
            })
            .await
        })
        .expect("bounded");
    let text = lines.text();
    let lines: Vec<&str> = text.lines().collect();
    let find = |what: &str| {
        *lines
            .iter()
            .find(|line| line.contains(what))
            .unwrap_or_else(|| panic!("no {what:?} in {text}"))
    };
    for event in ["in the handler", "after a suspension"] {
        let line = find(event);
        println!("{line}");
        assert!(line.contains(r#""http.request.id":"req-7""#), "{line}");
        assert!(
            line.contains(r#""trace_id":"4bf92f3577b34da6a3ce929d0e0e4736""#),
            "{line}"
        );
        assert!(line.contains(r#""span_id":""#), "{line}");
        assert!(line.contains(r#""name":"request""#), "{line}");
        assert!(
            !line.contains(r#""span_id":"00f067aa0ba902b7""#),
            "a new span id: {line}"
        );
    }
    let access = find("request completed");
    println!("{access}");
    // The ids once: the span's (`span`, and the JSON formatter's list of the spans), not
    // repeated by the line's own fields.
    let (fields, spans) = access.split_once(r#""target":"#).unwrap();
    for id in [
        r#""trace_id":"4bf92f3577b34da6a3ce929d0e0e4736""#,
        r#""http.request.id":"req-7""#,
    ] {
        assert!(!fields.contains(id), "{access}");
        assert!(spans.contains(id), "{access}");
    }
    let field_names = ["\"http.request.id\"", "\"trace_id\"", "\"span_id\""];
    assert!(
        field_names.iter().all(|name| !fields.contains(name)),
        "{access}"
    );
    let handler = find("in the handler");
    let span_id = |line: &str| {
        let at = line.find(r#""span_id":""#).unwrap() + 11;
        line[at..at + 16].to_owned()
    };
    assert_eq!(span_id(access), span_id(handler));
}
