//! One notion of a secret header: a name marked secret in any place (the request policy, the
//! response policy, the always-secret names, a value flagged sensitive) is secret for every
//! printer and for the propagation. The walk visits each place and, for each, every printer:
//! the access line's fields (`user_agent.original`, the request and response header lists, the
//! annotations), `Debug` of the record as the `on_commit` hook sees it, `Snapshot::redacted`
//! of the request, response and annotations handles, `Redacted::new`, the request's `tracing`
//! span (its `http.request.id`, taken from the walked header), the OpenTelemetry server span's
//! name and attributes (`server.address` from a secret `host`), and the request's context
//! (what would travel on).
#![cfg(all(feature = "tracing", feature = "opentelemetry"))]

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use http::{HeaderName, HeaderValue, Request, Response};
use http_body_util::BodyExt;
use shared_headers::context::{Propagation, RequestContext};
use shared_headers::server::access_log::AccessLog;
use shared_headers::server::{HeaderSelection, SharedHeadersLayer};
use shared_headers::{Builder, Committed, Exchange, Redacted};
use tower::{Layer, ServiceExt, service_fn};

#[path = "support/capture.rs"]
mod capture;
use capture::{capture, lock};

#[path = "support/otel_spans.rs"]
mod otel_spans;
use otel_spans::Spans;

/// Every planted value starts with it.
const MARK: &str = "W4lk-s3cr3t";

/// Where the walk marks the name secret.
#[derive(Debug, Clone, Copy)]
enum Place {
    RequestPolicy,
    ResponsePolicy,
    /// `Builder::ALWAYS_SECRET` (`x-api-key`): no setting at all.
    Always,
    /// The value flagged `set_sensitive(true)` by the handler (annotations and response).
    Flagged,
}

async fn walk(place: Place, index: usize) {
    let name = match place {
        Place::Always => HeaderName::from_static("x-api-key"),
        _ => HeaderName::from_static("x-walk"),
    };
    let path = format!("/walk/{index}");
    let marked =
        Builder::new().sensitive([name.clone(), http::header::USER_AGENT, http::header::HOST]);
    let spans = Spans::new();
    let records = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = records.clone();
    let mut layer = SharedHeadersLayer::new()
        .access_log(
            AccessLog::new()
                .request_headers(HeaderSelection::all())
                .response_headers(HeaderSelection::all()),
        )
        .otel_tracer(spans.tracer("walk"))
        .on_commit(move |event| {
            let c = event.committed();
            let mut printed = vec![format!("{c:?}")];
            printed.push(c.request().redacted().to_string());
            printed.push(c.response().redacted().to_string());
            if let Some(a) = c.annotations() {
                printed.push(a.redacted().to_string());
                printed.push(format!("{a:?}"));
            }
            lock(&seen).extend(printed);
        });
    // The propagation names the secret, and takes the request id from it (the always-secret
    // names are refused when it is made).
    let propagation = Propagation::new().w3c();
    let propagation = match place {
        Place::Always => {
            assert!(Propagation::new().header(name.clone()).is_err());
            assert!(Propagation::new().request_id_header(name.clone()).is_err());
            propagation
        }
        _ => propagation
            .header(name.clone())
            .unwrap()
            .request_id_header(name.clone())
            .unwrap(),
    };
    layer = layer.propagate(propagation);
    match place {
        Place::RequestPolicy => layer = layer.request_policy(marked),
        Place::ResponsePolicy => layer = layer.response_policy(marked),
        Place::Always | Place::Flagged => {}
    }
    let flag = matches!(place, Place::Flagged);
    let handler_name = name.clone();
    let service = layer.layer(service_fn(move |req: Request<()>| {
        let name = handler_name.clone();
        async move {
            let exchange = req.extensions().get::<Exchange>().unwrap();
            let mut value = HeaderValue::from_str(&format!("{MARK}-response")).unwrap();
            value.set_sensitive(flag);
            let _ = exchange.response().insert(name.clone(), value);
            let mut value = HeaderValue::from_str(&format!("{MARK}-annotation")).unwrap();
            value.set_sensitive(flag);
            let _ = exchange.annotations().insert(name.clone(), value);
            let context = RequestContext::current()
                .map(|c| {
                    c.headers()
                        .map(|(n, v)| format!("{n}={v:?}"))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default();
            Ok::<_, Infallible>(Response::new(context))
        }
    }));
    let mut req = Request::get(&path)
        .header(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )
        .body(())
        .unwrap();
    let mut value = HeaderValue::from_str(&format!("{MARK}-request")).unwrap();
    value.set_sensitive(flag);
    req.headers_mut().insert(name.clone(), value);
    if !matches!(place, Place::Always | Place::Flagged) {
        req.headers_mut().insert(
            http::header::USER_AGENT,
            HeaderValue::from_str(&format!("{MARK}-agent")).unwrap(),
        );
    }
    if !matches!(place, Place::Always) {
        let mut host = HeaderValue::from_str(&format!("{MARK}-host.example:8443")).unwrap();
        host.set_sensitive(flag);
        req.headers_mut().insert(http::header::HOST, host);
    }
    let res = service.oneshot(req).await.unwrap();
    let committed = res.extensions().get::<Committed>().unwrap().clone();
    let body = res.into_body().collect().await.unwrap().to_bytes();
    let body = String::from_utf8_lossy(&body).into_owned();

    // The propagation: the context in scope never holds the secret name.
    if !flag {
        assert!(body.contains("traceparent"), "{place:?}: {body}");
        assert!(
            !body.contains(name.as_str()),
            "{place:?}: propagated: {body}"
        );
    }
    // The record, its handles' printers, and `Redacted::new` for the always-secret names.
    let mut printed = lock(&records).clone();
    printed.push(format!("{committed:?}"));
    printed.push(committed.request().redacted().to_string());
    printed.push(committed.response().redacted().to_string());
    if matches!(place, Place::Always) {
        printed.push(Redacted::new(&committed.request().clone().into_header_map()).to_string());
    }
    for out in &printed {
        assert!(!out.contains(MARK), "{place:?}: printed: {out}");
    }
    assert!(
        printed.iter().any(|out| out.contains(name.as_str())),
        "{place:?}: name shown"
    );
    // The access line: every field.
    let lines: Vec<_> = lock(&capture().events)
        .iter()
        .filter(|e| e.get("url.path").is_some_and(|p| *p == path))
        .cloned()
        .collect();
    assert_eq!(lines.len(), 1, "{place:?}");
    let line = &lines[0];
    for (field, value) in line {
        assert!(
            !value.contains(MARK),
            "{place:?}: `{field}` printed {value}"
        );
    }
    assert!(
        line["shared_headers.request_headers"].contains(&format!("{name}: [redacted]")),
        "{place:?}: {line:?}"
    );
    assert!(
        line["shared_headers.response_headers"].contains(&format!("{name}: [redacted]")),
        "{place:?}: {line:?}"
    );
    assert!(
        line["shared_headers.annotations"].contains(&format!("{name}: [redacted]")),
        "{place:?}: {line:?}"
    );
    if !matches!(place, Place::Always | Place::Flagged) {
        assert!(
            !line.contains_key("user_agent.original"),
            "{place:?}: {line:?}"
        );
    }
    // The request's `tracing` span: every field (the request id came from the walked header).
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let request_spans: Vec<_> = lock(&capture().spans)
        .iter()
        .filter(|s| s.get("trace_id").is_some_and(|t| t == trace_id))
        .cloned()
        .collect();
    assert!(!request_spans.is_empty(), "{place:?}: no request span");
    for span in &request_spans {
        for (field, value) in span {
            assert!(
                !value.to_lowercase().contains(&MARK.to_lowercase()),
                "{place:?}: span field `{field}` printed {value}"
            );
        }
    }
    // The OpenTelemetry server span: its name and every attribute.
    let otel = spans.wait_for(1).await;
    assert_eq!(otel.len(), 1, "{place:?}");
    let span = &otel[0];
    assert!(!span.name.contains(MARK), "{place:?}: {}", span.name);
    for kv in &span.attributes {
        let value = kv.value.to_string().to_lowercase();
        assert!(
            !value.contains(&MARK.to_lowercase()),
            "{place:?}: span attribute `{}` printed {value}",
            kv.key
        );
    }
    if !matches!(place, Place::Always) {
        assert!(
            !span
                .attributes
                .iter()
                .any(|kv| kv.key.as_str() == "server.address"),
            "{place:?}: {:?}",
            span.attributes
        );
    }
}

#[tokio::test]
async fn a_name_secret_in_any_place_is_secret_for_every_printer_and_never_propagated() {
    capture();
    let places = [
        Place::RequestPolicy,
        Place::ResponsePolicy,
        Place::Always,
        Place::Flagged,
    ];
    for (index, place) in places.into_iter().enumerate() {
        walk(place, index).await;
    }
}

/// The negative control: without a mark, the same walk prints the value (the assertions above
/// would see a leak): in the access line, the record, the request span's id and the
/// OpenTelemetry span's `server.address`.
#[tokio::test]
async fn an_unmarked_name_is_printed() {
    capture();
    let spans = Spans::new();
    let propagation = Propagation::new()
        .w3c()
        .request_id_header(HeaderName::from_static("x-walk"))
        .unwrap();
    let service = SharedHeadersLayer::new()
        .access_log(AccessLog::new().request_headers(HeaderSelection::all()))
        .propagate(propagation)
        .otel_tracer(spans.tracer("walk"))
        .layer(service_fn(|_req: Request<()>| async {
            Ok::<_, Infallible>(Response::new(String::new()))
        }));
    let trace_id = "0af7651916cd43dd8448eb211c80319c";
    let req = Request::get("/walk/unmarked")
        .header("x-walk", format!("{MARK}-plain"))
        .header("host", format!("{MARK}-host.example"))
        .header("traceparent", format!("00-{trace_id}-b7ad6b7169203331-01"))
        .body(())
        .unwrap();
    let res = service.oneshot(req).await.unwrap();
    let committed = res.extensions().get::<Committed>().unwrap().clone();
    let _ = res.into_body().collect().await.unwrap();
    assert!(format!("{committed:?}").contains(MARK));
    let lines: Vec<_> = lock(&capture().events)
        .iter()
        .filter(|e| e.get("url.path").is_some_and(|p| p == "/walk/unmarked"))
        .cloned()
        .collect();
    assert!(lines[0]["shared_headers.request_headers"].contains(MARK));
    let request_span = lock(&capture().spans)
        .iter()
        .find(|s| s.get("trace_id").is_some_and(|t| t == trace_id))
        .cloned()
        .unwrap();
    assert!(
        request_span["http.request.id"].contains(MARK),
        "{request_span:?}"
    );
    let otel = spans.wait_for(1).await;
    let address = otel[0]
        .attributes
        .iter()
        .find(|kv| kv.key.as_str() == "server.address")
        .map(|kv| kv.value.to_string())
        .unwrap();
    assert!(
        address.to_lowercase().contains(&MARK.to_lowercase()),
        "{address}"
    );
}
