//! The `tracing` access log: one event per request at the commit (cancelled ones included), the
//! fields a log line needs, secrets redacted, and one post-commit activity event. Events are
//! captured by a bare `Subscriber` installed as the global default (one test in this binary).
#![cfg(feature = "tracing")]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use shared_headers::Builder;
use shared_headers::Exchange;
use shared_headers::server::SharedHeadersLayer;
use tower::{Layer, ServiceExt};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

type Fields = BTreeMap<String, String>;

/// Records every event's message, level, target and fields.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Fields>>>);

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
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields::new();
        fields.insert("level".into(), event.metadata().level().to_string());
        fields.insert("target".into(), event.metadata().target().into());
        event.record(&mut Visitor(&mut fields));
        self.0.lock().unwrap().push(fields);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn one_event_per_request_with_its_fields_and_no_secret() {
    let capture = Capture::default();
    tracing::subscriber::set_global_default(capture.clone()).unwrap();
    let events = || capture.0.lock().unwrap().clone();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let layer = SharedHeadersLayer::new()
            .timeout(Duration::from_millis(50))
            .request_headers(Builder::new().sensitive(["x-api-key"]))
            .tracing_access_log();
        let service = layer.layer(tower::service_fn(|req: Request<()>| async move {
            let exchange = req.extensions().get::<Exchange>().unwrap().clone();
            exchange
                .annotations()
                .insert("x-user-id", "42".parse().unwrap())
                .unwrap();
            match req.uri().path() {
                "/slow" => tokio::time::sleep(Duration::from_secs(5)).await,
                "/late" => {
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        let _ = exchange.response().insert("x-late", "1".parse().unwrap());
                    });
                }
                _ => {}
            }
            Ok::<_, Infallible>(Response::new(String::new()))
        }));
        let request = |path: &str| {
            Request::get(path)
                .header("x-api-key", "s3cr3t-key")
                .body(())
                .unwrap()
        };
        let res = service.clone().oneshot(request("/ok")).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let res = service.clone().oneshot(request("/slow")).await.unwrap();
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
        let cancelled = tokio::time::timeout(
            Duration::from_millis(5),
            service.clone().oneshot(request("/slow")),
        )
        .await;
        assert!(cancelled.is_err());
        service.oneshot(request("/late")).await.unwrap();
        // Wait (bounded) for the late write's report.
        for _ in 0..200 {
            if events().len() >= 5 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });

    let events = events();
    let commits: Vec<_> = events
        .iter()
        .filter(|e| e["message"] == "request committed")
        .collect();
    let by_path = |path: &str| -> Vec<&Fields> {
        commits
            .iter()
            .copied()
            .filter(|e| e["path"] == path)
            .collect()
    };
    assert_eq!(commits.len(), 4, "{events:#?}");
    let ok = by_path("/ok");
    assert_eq!(ok.len(), 1);
    assert_eq!(ok[0]["target"], "shared_headers::access");
    assert_eq!(ok[0]["level"], "INFO");
    assert_eq!(ok[0]["method"], "GET");
    assert_eq!(ok[0]["status"], "200");
    assert_eq!(ok[0]["outcome"], "answered");
    assert!(ok[0].contains_key("latency_ms"));
    assert!(
        ok[0]["request_headers"].contains("x-api-key"),
        "{:?}",
        ok[0]
    );
    assert!(
        ok[0]["annotations"].contains("x-user-id: 42"),
        "{:?}",
        ok[0]
    );
    let slow = by_path("/slow");
    let outcomes: Vec<&str> = slow.iter().map(|e| e["outcome"].as_str()).collect();
    assert_eq!(outcomes.len(), 2);
    assert!(outcomes.contains(&"timed out") && outcomes.contains(&"cancelled"));
    let cancelled = slow.iter().find(|e| e["outcome"] == "cancelled").unwrap();
    assert!(
        !cancelled.contains_key("status"),
        "no status for a cancelled request"
    );
    assert_eq!(by_path("/late").len(), 1);

    let late: Vec<_> = events
        .iter()
        .filter(|e| e["message"] == "writes refused after the commit")
        .collect();
    assert_eq!(late.len(), 1, "{events:#?}");
    assert_eq!(late[0]["level"], "WARN");
    assert_eq!(late[0]["path"], "/late");
    assert_eq!(late[0]["refused_writes"], "1");

    for event in &events {
        for value in event.values() {
            assert!(!value.contains("s3cr3t"), "a secret in the log: {event:?}");
        }
    }
}
