//! The `tracing` access log in process: one line per request when its response ends (cancelled
//! ones included), the level per outcome, every line inside its request's span, configured
//! headers with secrets redacted, one post-commit activity event, and the commit-time line for
//! an `on_commit` hook. Events are captured by a bare `Subscriber` installed as the global
//! default (one test in this binary). Over sockets: `tests/access_line.rs`.
#![cfg(feature = "tracing")]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use shared_headers::Builder;
use shared_headers::Exchange;
use shared_headers::server::SharedHeadersLayer;
use shared_headers::server::access_log::AccessLog;
use tower::Layer;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

type Fields = BTreeMap<String, String>;

/// Records every event's message, level, target, fields and the span it was emitted in (the
/// innermost entered span's name, per thread).
#[derive(Clone, Default)]
struct Capture {
    events: Arc<Mutex<Vec<Fields>>>,
    names: Arc<Mutex<Vec<(String, &'static Metadata<'static>)>>>,
}

thread_local! {
    static ENTERED: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

struct Visitor<'a>(&'a mut Fields);

impl Visit for Visitor<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attributes: &Attributes<'_>) -> Id {
        let mut fields = Fields::new();
        attributes.record(&mut Visitor(&mut fields));
        let mut names = self.names.lock().unwrap();
        // A span without a path (the layer's own `request` span, a child of the caller's)
        // is named after its parent's: the line is still in the caller's request span.
        let parent = attributes
            .parent()
            .map(Id::into_u64)
            .or_else(|| ENTERED.with(|stack| stack.borrow().last().copied()));
        let path = fields.get("path").cloned().unwrap_or_else(|| {
            parent
                .map(|id| names[id as usize - 1].0.clone())
                .unwrap_or_default()
        });
        names.push((path, attributes.metadata()));
        Id::from_u64(names.len() as u64)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields::new();
        fields.insert("level".into(), event.metadata().level().to_string());
        fields.insert("target".into(), event.metadata().target().into());
        let span = ENTERED.with(|stack| stack.borrow().last().copied());
        if let Some(id) = span {
            let name = self.names.lock().unwrap()[id as usize - 1].0.clone();
            fields.insert("span".into(), name);
        }
        event.record(&mut Visitor(&mut fields));
        self.events.lock().unwrap().push(fields);
    }
    fn current_span(&self) -> tracing_core::span::Current {
        match ENTERED.with(|stack| stack.borrow().last().copied()) {
            Some(id) => {
                let metadata = self.names.lock().unwrap()[id as usize - 1].1;
                tracing_core::span::Current::new(Id::from_u64(id), metadata)
            }
            None => tracing_core::span::Current::none(),
        }
    }
    fn enter(&self, id: &Id) {
        ENTERED.with(|stack| stack.borrow_mut().push(id.into_u64()));
    }
    fn exit(&self, _: &Id) {
        ENTERED.with(|stack| stack.borrow_mut().pop());
    }
}

/// Calls `service` for `req` with a span named after the path current at the call (as an outer
/// `TraceLayer` would make), then awaits the response outside that span: every line of the
/// request must still carry it, including those of commits the timer thread made and of a
/// future dropped by an outer timeout.
fn call_in_span<S>(service: &S, req: Request<()>) -> S::Future
where
    S: tower::Service<Request<()>> + Clone,
{
    let span = tracing::info_span!("request", path = req.uri().path().to_owned());
    let mut service = service.clone();
    span.in_scope(|| service.call(req))
}

#[test]
fn one_event_per_request_with_its_fields_its_span_and_no_secret() {
    // The handler's panic is expected: a silent hook (printing a backtrace can take longer
    // than the 50 ms deadline, and the deadline would then win, rightly, over the panic).
    std::panic::set_hook(Box::new(|info| {
        if info.payload().downcast_ref::<&str>() != Some(&"handler bug") {
            eprintln!("{info}");
        }
    }));
    let capture = Capture::default();
    tracing::subscriber::set_global_default(capture.clone()).unwrap();
    let events = || capture.events.lock().unwrap().clone();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let layer = SharedHeadersLayer::new()
            .timeout(Duration::from_millis(50))
            .request_policy(Builder::new().sensitive([http::HeaderName::from_static("x-api-key")]))
            .response_policy(Builder::new().sensitive([http::HeaderName::from_static("x-session")]))
            .access_log(
                AccessLog::new()
                    .request_headers(shared_headers::server::HeaderSelection::only([
                        http::HeaderName::from_static("x-api-key"),
                        http::HeaderName::from_static("user-agent"),
                    ]))
                    .response_headers(shared_headers::server::HeaderSelection::only([
                        http::HeaderName::from_static("content-type"),
                        http::HeaderName::from_static("x-session"),
                        http::HeaderName::from_static("x-early"),
                    ])),
            )
            .on_commit({
                let log = AccessLog::new();
                move |c| log.commit(c)
            });
        let service = layer.layer(tower::service_fn(|req: Request<()>| async move {
            let exchange = req.extensions().get::<Exchange>().unwrap().clone();
            let _ = exchange
                .annotations()
                .insert("x-user-id", "42".parse().unwrap());
            let _ = exchange.response().insert("x-early", "1".parse().unwrap());
            match req.uri().path() {
                "/slow" => tokio::time::sleep(Duration::from_secs(5)).await,
                "/panic" => panic!("handler bug"),
                "/late" => {
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        let _ = exchange.response().insert("x-late", "1".parse().unwrap());
                    });
                }
                _ => {}
            }
            let mut res = Response::new(String::new());
            res.headers_mut()
                .insert("content-type", "text/plain".parse().unwrap());
            res.headers_mut()
                .insert("x-session", "s3cr3t-session".parse().unwrap());
            Ok::<_, Infallible>(res)
        }));
        let request = |path: &str| {
            Request::get(path)
                .header("x-api-key", "s3cr3t-key")
                .header("user-agent", "curl/8.5.0")
                .body(())
                .unwrap()
        };
        let res = call_in_span(&service, request("/ok?page=2&token=s3cr3t-token"))
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        res.into_body().collect().await.unwrap(); // the line: at the end of the body
        let res = call_in_span(&service, request("/slow")).await.unwrap();
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
        res.into_body().collect().await.unwrap();
        let cancelled = tokio::time::timeout(
            Duration::from_millis(5),
            call_in_span(&service, request("/cancel")),
        )
        .await;
        assert!(cancelled.is_ok(), "answered at once");
        let cancelled = tokio::time::timeout(
            Duration::from_millis(5),
            call_in_span(&service, request("/slow")),
        )
        .await;
        assert!(cancelled.is_err());
        let res = call_in_span(&service, request("/panic")).await.unwrap();
        assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
        res.into_body().collect().await.unwrap();
        let res = call_in_span(&service, request("/late")).await.unwrap();
        res.into_body().collect().await.unwrap();
        // Wait (bounded) for the late write's report.
        for _ in 0..200 {
            if events().len() >= 13 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });

    let events = events();
    let commits: Vec<_> = events
        .iter()
        .filter(|e| e["message"] == "request completed")
        .collect();
    // The commit-time line of `AccessLog::commit`, from the `on_commit` hook: one per request
    // too, added up with the access log.
    let at_commit = events
        .iter()
        .filter(|e| e["message"] == "request committed")
        .count();
    assert_eq!(at_commit, 6, "{events:#?}");
    let by_path = |path: &str| -> Vec<&Fields> {
        commits
            .iter()
            .copied()
            .filter(|e| e["url.path"] == path)
            .collect()
    };
    assert_eq!(commits.len(), 6, "{events:#?}");
    for commit in &commits {
        assert_eq!(
            commit["span"], commit["url.path"],
            "in its request's span: {commit:?}"
        );
        assert_eq!(commit["target"], "shared_headers::access");
        assert_eq!(commit["http.request.method"], "GET");
        assert_eq!(commit["network.protocol.version"], "1.1");
        assert_eq!(commit["user_agent.original"], "curl/8.5.0");
        let total: f64 = commit["http.server.request.duration"].parse().unwrap();
        let to_commit = commit["shared_headers.time_to_commit_us"]
            .parse::<u64>()
            .unwrap() as f64
            / 1e6;
        assert!(total >= to_commit && to_commit >= 0.0, "{commit:?}");
        assert_eq!(
            commit["shared_headers.request_headers"],
            "x-api-key: [redacted], user-agent: curl/8.5.0"
        );
        assert!(commit["shared_headers.annotations"].contains("x-user-id: 42"));
    }
    let ok = by_path("/ok");
    assert_eq!(ok.len(), 1);
    assert_eq!(ok[0]["level"], "INFO");
    assert_eq!(ok[0]["http.response.status_code"], "200");
    assert_eq!(ok[0]["shared_headers.outcome"], "answered");
    assert_eq!(ok[0]["url.query"], "page=2&token=[redacted]");
    assert_eq!(ok[0]["http.response.body.size"], "0");
    assert!(!ok[0].contains_key("error.type"));
    // As sent: the handler's own headers included, the secret one redacted.
    assert_eq!(
        ok[0]["shared_headers.response_headers"],
        "content-type: text/plain, x-session: [redacted], x-early: 1",
        "{:?}",
        ok[0]
    );

    let slow = by_path("/slow");
    let outcomes: Vec<&str> = slow
        .iter()
        .map(|e| e["shared_headers.outcome"].as_str())
        .collect();
    assert_eq!(outcomes.len(), 2, "{slow:#?}");
    assert!(outcomes.contains(&"timed_out") && outcomes.contains(&"cancelled"));
    let timed_out = slow
        .iter()
        .find(|e| e["shared_headers.outcome"] == "timed_out")
        .unwrap();
    assert_eq!(timed_out["level"], "WARN");
    assert_eq!(timed_out["http.response.status_code"], "503");
    assert_eq!(timed_out["shared_headers.response_headers"], "x-early: 1");
    assert_eq!(timed_out["error.type"], "timeout");
    let cancelled = slow
        .iter()
        .find(|e| e["shared_headers.outcome"] == "cancelled")
        .unwrap();
    assert_eq!(cancelled["level"], "WARN");
    assert!(
        !cancelled.contains_key("http.response.status_code"),
        "no status for a cancelled request"
    );
    // Nothing was sent: no response headers, no body size.
    assert!(!cancelled.contains_key("shared_headers.response_headers"));
    assert!(!cancelled.contains_key("http.response.body.size"));
    assert_eq!(cancelled["error.type"], "cancelled");

    let panicked = by_path("/panic");
    assert_eq!(panicked.len(), 1);
    assert_eq!(panicked[0]["level"], "ERROR");
    assert_eq!(panicked[0]["shared_headers.outcome"], "panicked");
    assert_eq!(panicked[0]["http.response.status_code"], "500");
    assert_eq!(panicked[0]["exception.message"], "handler bug");
    assert_eq!(panicked[0]["error.type"], "panic");
    assert_eq!(by_path("/late").len(), 1);

    let late: Vec<_> = events
        .iter()
        .filter(|e| e["message"] == "writes refused after the commit")
        .collect();
    assert_eq!(late.len(), 1, "{events:#?}");
    assert_eq!(late[0]["level"], "WARN");
    assert_eq!(late[0]["url.path"], "/late");
    assert_eq!(late[0]["shared_headers.refused_writes"], "1");

    for event in &events {
        for value in event.values() {
            assert!(!value.contains("s3cr3t"), "a secret in the log: {event:?}");
        }
    }
}
