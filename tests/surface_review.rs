//! A hostile review of the layer's surface (the method table, the setters, `stats()`,
//! `HeaderSelection`, the one secret set): each test states a promise of the docs or of the
//! surface's contract and failed on the code it was written against (each was confirmed
//! failing, then un-ignored with its fix).
#![cfg(all(feature = "tracing", feature = "opentelemetry"))]

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use shared_headers::context::Propagation;
use shared_headers::deadline::BudgetHeader;
use shared_headers::server::access_log::AccessLog;
use shared_headers::server::{HeaderSelection, SharedHeadersLayer};
use shared_headers::{Builder, Committed, Exchange};
use tower::{Layer, ServiceExt, service_fn};

#[path = "support/capture.rs"]
mod capture;
use capture::{capture, lock, wait_access_lines_of};

#[path = "support/otel_memory.rs"]
mod otel_memory;
use otel_memory::Metrics;

#[path = "support/sockets.rs"]
mod sockets;

/// Every planted value starts with it.
const MARK: &str = "R3v36-s3cr3t";

fn name(s: &'static str) -> HeaderName {
    HeaderName::from_static(s)
}

/// Finding 1: `HeaderSelection::only` with a name given twice copies each received value
/// twice into the request handle, so a request with one `x-tenant` header holds two, and
/// with `max_entries(1)` it is rejected with 431 on the wire although it sent one header.
/// A selection is a set of names: a name given twice picks it once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_given_twice_to_only_is_copied_once() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let keep = seen.clone();
    let service = SharedHeadersLayer::new()
        .request_policy(Builder::new().max_entries(1))
        .copy_request_headers(HeaderSelection::only([name("x-tenant"), name("x-tenant")]))
        .layer(service_fn(move |req: Request<_>| {
            let keep = keep.clone();
            async move {
                let exchange = req.extensions().get::<Exchange>().unwrap();
                let values = exchange.request().get_all("x-tenant");
                lock(&keep).push(values.len());
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
            }
        }));
    let addr = sockets::serve(service, false).await;
    let req = Request::get("/dup")
        .header("x-tenant", "acme")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), sockets::fetch(addr, false, req))
        .await
        .unwrap();
    assert_eq!(status, Some(StatusCode::OK), "one header, a limit of one");
    assert_eq!(*lock(&seen), [1], "the handle holds the one value sent");
}

/// A handler that answers with credentials of its own on the response it returns (not
/// through the response handle): an always-secret `x-api-key` and a `set-cookie`.
async fn answers_with_credentials(_req: Request<()>) -> Result<Response<String>, Infallible> {
    let mut res = Response::new(String::new());
    res.headers_mut().insert(
        "x-api-key",
        HeaderValue::from_str(&format!("{MARK}-key")).unwrap(),
    );
    res.headers_mut().insert(
        http::header::SET_COOKIE,
        HeaderValue::from_str(&format!("session={MARK}-cookie")).unwrap(),
    );
    res.headers_mut()
        .insert("x-cache", HeaderValue::from_static("miss"));
    Ok(res)
}

/// Finding 2: `CommitEvent`'s `Debug` (derived) prints the head that left the layer as
/// `http::response::Parts` does: every header value in clear, the always-secret names
/// included. `Builder::ALWAYS_SECRET` says they are "never printed by any printer of the
/// crate (`Debug`, ...)"; an `on_commit` hook that logs `{event:?}` is the obvious use.
#[tokio::test]
async fn commit_events_debug_never_prints_a_secret() {
    let printed = Arc::new(Mutex::new(Vec::new()));
    let keep = printed.clone();
    let service = SharedHeadersLayer::new()
        .on_commit(move |event| lock(&keep).push(format!("{event:?}")))
        .layer(service_fn(answers_with_credentials));
    let res = service.oneshot(Request::new(())).await.unwrap();
    // The secrets are sent (the handler's answer), never printed.
    assert!(res.headers().contains_key("x-api-key"));
    let printed = lock(&printed).clone();
    assert_eq!(printed.len(), 1);
    assert!(printed[0].contains("x-api-key"), "{printed:?}");
    assert!(!printed[0].contains(MARK), "printed: {}", printed[0]);
}

/// Finding 3: `ResponseEnd`'s `Debug` (derived) prints the copy of the sent headers the
/// access log keeps (`AccessLog::response_headers`) as a plain `HeaderMap`: every value in
/// clear, the always-secret names and `set-cookie` included, although the access line itself
/// prints only the selected ones, redacted.
#[tokio::test]
async fn response_ends_debug_never_prints_a_secret() {
    capture();
    let printed = Arc::new(Mutex::new(Vec::new()));
    let keep = printed.clone();
    let service = SharedHeadersLayer::new()
        .access_log(AccessLog::new().response_headers(HeaderSelection::only([name("x-cache")])))
        .on_response_end(move |end| lock(&keep).push(format!("{end:?}")))
        .layer(service_fn(answers_with_credentials));
    let req = Request::get("/review/response-end").body(()).unwrap();
    let res = service.oneshot(req).await.unwrap();
    let _ = res.into_body().collect().await.unwrap();
    let lines = wait_access_lines_of("/review/response-end", 1).await;
    assert_eq!(lines.len(), 1);
    assert!(!format!("{lines:?}").contains(MARK), "{lines:?}");
    let printed = lock(&printed).clone();
    assert_eq!(printed.len(), 1);
    assert!(!printed[0].contains(MARK), "printed: {}", printed[0]);
}

/// Finding 4: the record's `Debug` prints the request's URI as received, so a credential
/// query parameter that the access line redacts (`access_token`, `AccessLog::CREDENTIAL_PARAMS`)
/// is printed in clear by `{committed:?}` (the `on_commit` hook's and `Exchange::committed`'s
/// record): whether a value is secret depends on which printer asks.
#[tokio::test]
async fn the_records_debug_redacts_what_the_line_redacts() {
    capture();
    let service = SharedHeadersLayer::new()
        .tracing_access_log()
        .layer(service_fn(|_req: Request<()>| async {
            Ok::<_, Infallible>(Response::new(String::new()))
        }));
    let req = Request::get(format!("/review/query?access_token={MARK}&page=2"))
        .body(())
        .unwrap();
    let res = service.oneshot(req).await.unwrap();
    let committed = res.extensions().get::<Committed>().unwrap().clone();
    let _ = res.into_body().collect().await.unwrap();
    let lines = wait_access_lines_of("/review/query", 1).await;
    assert_eq!(lines.len(), 1);
    assert!(
        !format!("{lines:?}").contains(MARK),
        "the line redacts it: {lines:?}"
    );
    let printed = format!("{committed:?}");
    assert!(!printed.contains(MARK), "printed: {printed}");
    // The URI as `url.path` and `url.query` print it: the credential's value alone redacted.
    assert!(
        printed.contains("/review/query?access_token=[redacted]&page=2"),
        "printed: {printed}"
    );
}

/// Finding 5: two layers configured differently from one base (`base.clone().x()`,
/// `base.clone().y()`: a public and an admin router) share their counters, so each one's
/// `stats()` reports the other's refusals. `Admission`, the other builder with live state,
/// starts a fresh state when a setting changes ("configure first, then clone"); the layer
/// does not, and its docs say only that *clones* share.
#[tokio::test]
async fn two_layers_configured_apart_count_apart() {
    let base = SharedHeadersLayer::new().caller_budget(BudgetHeader::grpc_timeout());
    let public = base.clone().timeout(Duration::from_secs(1));
    let admin = base.timeout(Duration::from_secs(5));
    let (public_stats, admin_stats) = (public.stats(), admin.stats());
    let service = admin.layer(service_fn(|_req: Request<()>| async {
        Ok::<_, Infallible>(Response::new(String::new()))
    }));
    let req = Request::get("/")
        .header("grpc-timeout", "-1S")
        .body(())
        .unwrap();
    service.oneshot(req).await.unwrap();
    assert_eq!(admin_stats.refused_budgets(), 1);
    assert_eq!(
        public_stats.refused_budgets(),
        0,
        "the public layer refused nothing"
    );
}

/// Finding 6: `HeaderSelection`'s `PartialEq` compares the list as given: `only([])` and
/// `none()` pick the same (nothing), as do `only([a, b])` and `only([b, a])`, yet they
/// compare unequal (and `only([])` still makes a copy per request, which `none()` saves).
#[test]
fn selections_that_pick_the_same_compare_equal() {
    let (a, b) = (name("x-a"), name("x-b"));
    assert_eq!(
        HeaderSelection::only([a.clone(), b.clone()]),
        HeaderSelection::only([b, a])
    );
    assert_eq!(HeaderSelection::only([]), HeaderSelection::none());
}

/// Finding 7: `default_scheme` takes any `&'static str`, unchecked, against the crate's rule
/// that setters take already-checked values; and the metric reports it as given, so
/// `url.scheme` is no longer the bounded value (`http`, `https`, `_OTHER`) it is for a URI's
/// own scheme: `default_scheme("HTTPS")` reported `HTTPS` where a URI's `HTTPS` is `https`.
/// It now takes an already-checked `http::uri::Scheme`, reported by the semconv rule.
#[tokio::test]
async fn the_default_scheme_is_a_bounded_url_scheme() {
    let metrics = Metrics::new();
    let service = SharedHeadersLayer::new()
        .otel_metrics(&metrics.meter())
        .default_scheme("HTTPS".parse().unwrap())
        .layer(service_fn(|_req: Request<()>| async {
            Ok::<_, Infallible>(Response::new(String::new()))
        }));
    let res = service.oneshot(Request::new(())).await.unwrap();
    let _ = res.into_body().collect().await.unwrap();
    let read = metrics.wait(1, Duration::from_secs(5)).await;
    metrics.shutdown();
    assert_eq!(read.count(), 1);
    let scheme = read.points[0].0["url.scheme"].clone();
    assert!(
        ["http", "https", "_OTHER"].contains(&scheme.as_str()),
        "url.scheme={scheme}"
    );
}

/// Finding 8: `propagate`'s docs say the request id is written "in the **access line**
/// (`request_id`)"; the line's field is `http.request.id` (as the access log's field table
/// says).
#[tokio::test]
async fn the_line_has_the_field_propagate_names() {
    capture();
    let service = SharedHeadersLayer::new()
        .tracing_access_log()
        .propagate(Propagation::new().request_id())
        .layer(service_fn(|_req: Request<()>| async {
            Ok::<_, Infallible>(Response::new(String::new()))
        }));
    let req = Request::get("/review/request-id")
        .header("x-request-id", "review-42")
        .body(())
        .unwrap();
    let res = service.oneshot(req).await.unwrap();
    let _ = res.into_body().collect().await.unwrap();
    let lines = wait_access_lines_of("/review/request-id", 1).await;
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["http.request.id"], "review-42");
    // The field the docs name: the first backquoted name after "**access line**".
    let docs = include_str!("../src/server/layer/propagate.rs");
    let after = &docs[docs
        .find("**access line** (`")
        .expect("propagate names the line")..];
    let named = after.split('`').nth(1).unwrap();
    assert_eq!(
        lines[0].get(named).map(String::as_str),
        Some("review-42"),
        "propagate's docs name `{named}`: {:?}",
        lines[0]
    );
}

/// The layer's setter files, as written.
const LAYER_SOURCES: &[(&str, &str)] = &[
    (
        "admission.rs",
        include_str!("../src/server/layer/admission.rs"),
    ),
    ("answers.rs", include_str!("../src/server/layer/answers.rs")),
    (
        "deadline.rs",
        include_str!("../src/server/layer/deadline.rs"),
    ),
    ("hooks.rs", include_str!("../src/server/layer/hooks.rs")),
    ("limits.rs", include_str!("../src/server/layer/limits.rs")),
    (
        "otel_trace.rs",
        include_str!("../src/server/layer/otel_trace.rs"),
    ),
    (
        "propagate.rs",
        include_str!("../src/server/layer/propagate.rs"),
    ),
];

/// Every `pub fn` of the layer's setter files with the first paragraph of its docs.
fn setters() -> Vec<(String, String)> {
    let mut found = Vec::new();
    for (file, source) in LAYER_SOURCES {
        let lines: Vec<&str> = source.lines().collect();
        for (at, line) in lines.iter().enumerate() {
            let Some(rest) = line.trim_start().strip_prefix("pub fn ") else {
                continue;
            };
            let fn_name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            // Up over the attributes to the doc block, then its first paragraph.
            let mut start = at;
            while start > 0 && !lines[start - 1].trim_start().starts_with("///") {
                start -= 1;
                if at - start > 4 {
                    break;
                }
            }
            let mut top = start;
            while top > 0 && lines[top - 1].trim_start().starts_with("///") {
                top -= 1;
            }
            let paragraph: Vec<&str> = lines[top..start]
                .iter()
                .map(|l| l.trim_start().trim_start_matches("///").trim())
                .take_while(|l| !l.is_empty())
                .collect();
            found.push((format!("{file}: {fn_name}"), paragraph.join(" ")));
        }
    }
    found
}

/// Finding 9: issue 36's rule "whether a setter adds or replaces is in its name or its first
/// doc line", and the layer's own docs ("The first line of each says whether it **sets** (a
/// second call replaces) or **adds**"): several setters' first paragraphs say neither.
#[test]
fn every_setters_first_doc_paragraph_says_sets_or_adds() {
    let setters = setters();
    assert!(setters.len() >= 20, "{setters:?}");
    let silent: Vec<&String> = setters
        .iter()
        .filter(|(_, doc)| {
            let doc = doc.to_lowercase();
            !(doc.contains("sets ")
                || doc.contains("adds ")
                || doc.contains("adds:")
                || doc.contains("replaces"))
        })
        .map(|(name, _)| name)
        .collect();
    assert!(silent.is_empty(), "say neither: {silent:#?}");
}
