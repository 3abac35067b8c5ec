//! Review of the access line's per-thread slot (`JsonLines` taking the `request completed`
//! line's values from the access log): lines whose printed fields are not their event's.
//! In process, no sockets, bounded.
#![cfg(all(feature = "access-json", feature = "full"))]

use std::convert::Infallible;
use std::io;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty, Full};
use serde_json::{Map, Value};
use shared_headers::server::SharedHeadersLayer;
use shared_headers::server::access_log::AccessLog;
use shared_headers::server::access_log::json::JsonLines;
use tower::{Layer, Service, ServiceExt, service_fn};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Buffer {
    fn take(&self) -> String {
        String::from_utf8(std::mem::take(&mut *self.0.lock().unwrap())).unwrap()
    }
}

impl io::Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

type Body = http_body_util::combinators::UnsyncBoxBody<Bytes, Infallible>;

async fn hello(_req: Request<Empty<Bytes>>) -> Result<Response<Body>, Infallible> {
    Ok(Response::new(
        Full::new(Bytes::from_static(b"hello")).boxed_unsync(),
    ))
}

/// One request through the layer with its access line, its body read to the end.
fn serve_one(path: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut service = SharedHeadersLayer::new()
        .timeout(Duration::from_secs(30))
        .access_log(AccessLog::new())
        .layer(service_fn(hello));
    let req = Request::get(path)
        .header("host", "api.example")
        .header("user-agent", "curl/8.5.0")
        .body(Empty::new())
        .unwrap();
    runtime.block_on(async {
        let res = service.ready().await.unwrap().call(req).await.unwrap();
        let mut body = pin!(res.into_body());
        while let Some(frame) = body.as_mut().frame().await {
            frame.unwrap();
        }
    });
}

fn lines(output: &str) -> Vec<Map<String, Value>> {
    output
        .lines()
        .map(|line| match serde_json::from_str(line) {
            Ok(Value::Object(object)) => object,
            other => panic!("not a JSON object ({other:?}): {line}"),
        })
        .collect()
}

/// A layer that, seeing the access line, emits an event of its own on the same target (an
/// audit trail, a bridge that re-logs): with a global subscriber (no scoped one in the
/// process, the usual server), `tracing` dispatches that nested event to the same subscriber.
struct Audit;

impl<S: Subscriber> tracing_subscriber::Layer<S> for Audit {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        if event.metadata().target() != "shared_headers::access"
            || event.metadata().level() != &tracing::Level::INFO
        {
            return;
        }
        tracing::warn!(
            target: "shared_headers::access",
            audit_kind = "forwarded",
            "audit"
        );
    }
}

/// Runs `name` alone in a child process of this test binary with `S6_46_CHILD` set (a global
/// subscriber can be set once a process, and only with no scoped one in the process are
/// nested events dispatched), and fails with the child's output if it failed.
fn in_child(name: &str) -> bool {
    if std::env::var("S6_46_CHILD").as_deref() == Ok(name) {
        return true;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("S6_46_CHILD", name)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "child {name} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    false
}

/// An event of the access target emitted while the access line is being dispatched (from
/// another layer of the same global subscriber) is written by `JsonLines` with the access
/// line's fields from the armed slot, in place of its own: its message and fields are the
/// access line's, and the line carries a `url.path` its event never had.
#[test]
fn an_access_target_event_emitted_inside_the_lines_dispatch_prints_its_own_fields() {
    if !in_child("an_access_target_event_emitted_inside_the_lines_dispatch_prints_its_own_fields") {
        return;
    }
    let output = Buffer::default();
    let writer = JsonLines::new(output.clone());
    let guard = writer.guard();
    let subscriber = tracing_subscriber::registry().with(Audit).with(writer);
    tracing::subscriber::set_global_default(subscriber).unwrap();
    serve_one("/orders/42");
    assert!(guard.flush(Duration::from_secs(10)));
    let output = output.take();
    let lines = lines(&output);
    assert_eq!(lines.len(), 2, "{output}");
    let messages: Vec<_> = lines
        .iter()
        .map(|l| l.get("message").and_then(Value::as_str).unwrap_or("").to_owned())
        .collect();
    assert_eq!(
        messages,
        ["audit", "request completed"],
        "the audit event's line has the access line's message: {output}"
    );
    let audit = &lines[0];
    assert_eq!(
        audit.get("audit_kind").and_then(Value::as_str),
        Some("forwarded"),
        "the audit event's own field is missing: {output}"
    );
    assert!(
        audit.get("url.path").is_none(),
        "the audit event's line carries the access line's fields: {output}"
    );
}
