//! The access line's JSON writer (`JsonLines`, feature `access-json`), in process (no
//! sockets), each test bounded:
//!
//! * **the same line as `fmt` JSON**: a matrix of requests (outcomes: answered, a 5xx, the
//!   layer's timeout, a panic, a body dropped before its end, a trace hop with a request id;
//!   values: plain, quotes and backslashes, control characters, non-UTF-8 bytes, long values,
//!   non-ASCII text; with every header printed), each line written by the writer and by
//!   `fmt().json()` in the same subscriber: the writer's line parses as JSON, and its fields
//!   are exactly `fmt`'s (the float duration within a nanosecond), beside `timestamp`, `level`
//!   and `target`; no secret of the request is in its bytes;
//! * **never blocking**: an output that blocks until the test ends: every request completes,
//!   the dropped-lines counter rises, and the lines taken are written once the output moves;
//! * **no torn or lost lines**: four threads of requests at once: every line parses, each
//!   request's line is there exactly once;
//! * **flush on drop**: dropping the layer writes what is left.
#![cfg(all(feature = "access-json", feature = "full"))]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::io;
use std::pin::pin;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use serde_json::{Map, Value};
use shared_headers::Exchange;
use shared_headers::context::Propagation;
use shared_headers::server::access_log::AccessLog;
use shared_headers::server::access_log::json::JsonLines;
use shared_headers::server::{HeaderSelection, SharedHeadersLayer};
use tower::{Layer, Service, ServiceExt, service_fn};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{Layer as _, filter::filter_fn};

/// A writer into a shared buffer.
#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Buffer {
    fn take(&self) -> String {
        let bytes = std::mem::take(&mut *self.0.lock().unwrap());
        String::from_utf8(bytes).expect("the writer's output is UTF-8")
    }
}

impl io::Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // A few bytes at a time: a line must come out whole all the same.
        let n = buf.len().min(7);
        self.0.lock().unwrap().extend_from_slice(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Buffer {
    type Writer = Buffer;
    fn make_writer(&'a self) -> Buffer {
        self.clone()
    }
}

const SECRET: &str = "S3CR3T";

#[derive(Clone, Copy, Debug, PartialEq)]
enum Outcome {
    Answered,
    ServerError,
    Timeout,
    Panic,
    BodyDropped,
    Hop,
}

#[derive(Clone, Copy, Debug)]
enum Value_ {
    Plain,
    Quotes,
    Control,
    NonUtf8,
    Long,
    NonAscii,
}

const OUTCOMES: [Outcome; 6] = [
    Outcome::Answered,
    Outcome::ServerError,
    Outcome::Timeout,
    Outcome::Panic,
    Outcome::BodyDropped,
    Outcome::Hop,
];
const VALUES: [Value_; 6] = [
    Value_::Plain,
    Value_::Quotes,
    Value_::Control,
    Value_::NonUtf8,
    Value_::Long,
    Value_::NonAscii,
];

/// The value of the cell's `user-agent`, `x-note` header and annotation.
fn header_value(value: Value_) -> HeaderValue {
    let bytes: Vec<u8> = match value {
        Value_::Plain => b"curl/8.5.0".to_vec(),
        Value_::Quotes => br#"a "quoted" \ value, with a comma"#.to_vec(),
        // A header value holds no control character but a tab: the panic message has more.
        Value_::Control => b"tab\there".to_vec(),
        Value_::NonUtf8 => b"agent\xff\xfe\x80end".to_vec(),
        Value_::Long => "x".repeat(3000).into_bytes(),
        Value_::NonAscii => "caf\u{e9} \u{2028} \u{1F600}".as_bytes().to_vec(),
    };
    HeaderValue::from_bytes(&bytes).unwrap()
}

/// The cell's path: escaped by the line (a percent-encoded one for non-ASCII text).
fn path(outcome: Outcome, value: Value_) -> String {
    let tail = match value {
        Value_::NonAscii => "caf%C3%A9",
        Value_::Quotes => "a%22b%5Cc",
        Value_::Long => "long",
        _ => "p",
    };
    format!("/{outcome:?}/{value:?}/{tail};jsessionid={SECRET}-path")
}

fn request(outcome: Outcome, value: Value_) -> Request<Empty<Bytes>> {
    let uri = format!(
        "{}?page=2&api_key={SECRET}-q1&token={SECRET}-q2&x=%22y%5C",
        path(outcome, value)
    );
    let mut builder = Request::get(uri)
        .header("host", "api.example:8443")
        .header("user-agent", header_value(value))
        .header("x-note", header_value(value))
        .header("x-api-key", format!("AKIA-{SECRET}-apikey"))
        .header("authorization", format!("Bearer {SECRET}-auth"))
        .header("cookie", format!("sid={SECRET}-cookie"))
        .header(
            "referer",
            format!("https://user:{SECRET}-pw@app.example/p?access_token={SECRET}-ref&x=1"),
        );
    if outcome == Outcome::Hop {
        builder = builder
            .header(
                "traceparent",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            )
            .header("x-request-id", "req-42");
    }
    builder.body(Empty::new()).unwrap()
}

type Body = http_body_util::combinators::UnsyncBoxBody<Bytes, Infallible>;

/// The handler: by the path's first segment; it annotates the cell's value, and panics with
/// control characters in its message.
async fn handler(req: Request<Empty<Bytes>>) -> Result<Response<Body>, Infallible> {
    let exchange = req.extensions().get::<Exchange>().unwrap().clone();
    let note = req.headers().get("x-note").unwrap().clone();
    let _ = exchange.annotations().insert("x-note", note);
    let outcome = req.uri().path().split('/').nth(1).unwrap_or("").to_owned();
    let mut res = Response::new(Full::new(Bytes::from_static(b"hello")).boxed_unsync());
    res.headers_mut()
        .insert("set-cookie", HeaderValue::from_static("sid=S3CR3T-set"));
    if req
        .headers()
        .get("content-type")
        .is_some_and(|t| t == "application/grpc")
    {
        // A gRPC answer: its content type says so (a status counts only on a gRPC response).
        res.headers_mut()
            .insert("content-type", HeaderValue::from_static("application/grpc"));
        res.headers_mut()
            .insert("grpc-status", HeaderValue::from_static("5"));
    }
    match outcome.as_str() {
        "ServerError" => *res.status_mut() = StatusCode::INTERNAL_SERVER_ERROR,
        "Timeout" => tokio::time::sleep(Duration::from_secs(5)).await,
        "Panic" => panic!("boom\n\u{1}\u{7f}\"quoted\"\\ \u{2028} end"),
        _ => {}
    }
    Ok(res)
}

fn layer() -> SharedHeadersLayer {
    SharedHeadersLayer::new()
        .timeout(Duration::from_millis(50))
        .propagate(Propagation::new().request_id().trace_hop())
        .access_log(
            AccessLog::new()
                .request_headers(HeaderSelection::all())
                .response_headers(HeaderSelection::all()),
        )
}

/// Sends one request through `service`, its body read to its end (or dropped first).
async fn send<S, B>(service: &mut S, req: Request<Empty<Bytes>>, drop_body: bool)
where
    S: Service<Request<Empty<Bytes>>, Response = Response<B>>,
    S::Error: std::fmt::Debug,
    B: http_body::Body,
{
    let res = service.ready().await.unwrap().call(req).await;
    let Ok(res) = res else { return };
    if drop_body {
        return;
    }
    let mut body = pin!(res.into_body());
    while let Some(frame) = body.as_mut().frame().await {
        if frame.is_err() {
            break;
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The one line of `output`, parsed.
fn one_line(output: &str, who: &str, cell: &str) -> Map<String, Value> {
    let lines: Vec<&str> = output.lines().collect();
    assert_eq!(lines.len(), 1, "{cell}: {who} wrote {output:?}");
    assert!(output.ends_with('\n'), "{cell}: {who}: {output:?}");
    match serde_json::from_str(lines[0]) {
        Ok(Value::Object(object)) => object,
        other => panic!("{cell}: {who}'s line is not a JSON object ({other:?}): {output}"),
    }
}

#[test]
fn the_same_fields_as_fmt_json_in_every_cell() {
    let ours = Buffer::default();
    let theirs = Buffer::default();
    let lines = JsonLines::new(ours.clone());
    let guard = lines.guard();
    let subscriber = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .json()
                .with_writer(theirs.clone())
                .with_filter(filter_fn(|meta| {
                    matches!(
                        meta.target(),
                        "shared_headers::access" | "shared_headers::request"
                    )
                })),
        )
        .with(lines);
    let runtime = runtime();
    let mut service = layer().layer(service_fn(handler));
    let mut checked = 0;
    tracing::subscriber::with_default(subscriber, || {
        for outcome in OUTCOMES {
            for value in VALUES {
                let cell = format!("{outcome:?}/{value:?}");
                runtime.block_on(send(
                    &mut service,
                    request(outcome, value),
                    outcome == Outcome::BodyDropped,
                ));
                assert!(guard.flush(Duration::from_secs(10)), "{cell}: not flushed");
                let raw = ours.take();
                for secret in [SECRET, "AKIA", "Bearer", "sid="] {
                    assert!(!raw.contains(secret), "{cell}: {secret} in {raw}");
                }
                if std::env::var_os("SHOW_LINES").is_some() {
                    eprintln!("{raw}");
                }
                let line = one_line(&raw, "the writer", &cell);
                let fmt = one_line(&theirs.take(), "fmt", &cell);
                let Some(Value::Object(fields)) = fmt.get("fields") else {
                    panic!("{cell}: fmt's line has no fields: {fmt:?}");
                };
                assert_eq!(line.get("level"), fmt.get("level"), "{cell}");
                assert_eq!(line.get("target"), fmt.get("target"), "{cell}");
                let time = line.get("timestamp").and_then(Value::as_str).unwrap_or("");
                assert!(
                    time.len() == 27 && time.ends_with('Z') && time.as_bytes()[10] == b'T',
                    "{cell}: {time:?}"
                );
                let ours_fields: BTreeMap<&str, &Value> = line
                    .iter()
                    .filter(|(key, _)| !matches!(key.as_str(), "timestamp" | "level" | "target"))
                    .map(|(key, value)| (key.as_str(), value))
                    .collect();
                // The line written inside the request's span leaves the request's ids to it:
                // `fmt` prints them in its `span` object, the writer on the line itself.
                let span_fields = match fmt.get("span") {
                    Some(Value::Object(span))
                        if span.get("name").and_then(Value::as_str) == Some("request") =>
                    {
                        span.iter()
                            .filter(|(key, _)| key.as_str() != "name")
                            .collect()
                    }
                    _ => Vec::new(),
                };
                let fmt_fields: BTreeMap<&str, &Value> = fields
                    .iter()
                    .chain(span_fields)
                    .map(|(key, value)| (key.as_str(), value))
                    .collect();
                assert_eq!(
                    ours_fields.keys().collect::<Vec<_>>(),
                    fmt_fields.keys().collect::<Vec<_>>(),
                    "{cell}: the keys differ"
                );
                for (key, value) in &fmt_fields {
                    let mine = ours_fields[key];
                    if let (Some(a), Some(b)) = (mine.as_f64(), value.as_f64())
                        && key.ends_with("duration")
                    {
                        assert!((a - b).abs() < 1e-9, "{cell}: {key}: {a} != {b}");
                    } else {
                        assert_eq!(mine, *value, "{cell}: {key}");
                    }
                }
                // The cell's own field is in the line, as the line escaped it.
                let agent = ours_fields.get("user_agent.original");
                assert!(agent.is_some(), "{cell}: no user agent");
                if outcome == Outcome::Panic {
                    assert!(ours_fields.contains_key("exception.message"), "{cell}");
                }
                if outcome == Outcome::Hop {
                    for key in ["http.request.id", "trace_id", "span_id"] {
                        assert!(ours_fields.contains_key(key), "{cell}: no {key}");
                    }
                }
                checked += 1;
            }
        }
    });
    assert_eq!(checked, OUTCOMES.len() * VALUES.len());
    assert_eq!(guard.dropped_lines(), 0);
}

/// An output that blocks every write until it is opened (at the end of the test).
#[derive(Clone)]
struct Stalled {
    open: Arc<(Mutex<bool>, Condvar)>,
    written: Arc<Mutex<Vec<u8>>>,
}

impl io::Write for Stalled {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let (open, moved) = &*self.open;
        let mut is_open = open.lock().unwrap();
        while !*is_open {
            is_open = moved.wait(is_open).unwrap();
        }
        self.written.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_stalled_output_never_blocks_a_request() {
    let stalled = Stalled {
        open: Arc::new((Mutex::new(false), Condvar::new())),
        written: Arc::default(),
    };
    // Room for a few lines only.
    let lines = JsonLines::with_capacity(stalled.clone(), 8 * 1024);
    let guard = lines.guard();
    let subscriber = tracing_subscriber::registry().with(lines);
    let runtime = runtime();
    let mut service = SharedHeadersLayer::new()
        .timeout(Duration::from_secs(30))
        .tracing_access_log()
        .layer(service_fn(handler));
    const REQUESTS: usize = 300;
    let started = Instant::now();
    // Kept alive until the output opens: dropping the layer waits (bounded) for its last lines.
    let dispatch = tracing::Dispatch::new(subscriber);
    tracing::dispatcher::with_default(&dispatch, || {
        runtime.block_on(async {
            for i in 0..REQUESTS {
                let req = Request::get(format!("/Answered/stalled/{i}"))
                    .header("x-note", "n")
                    .body(Empty::new())
                    .unwrap();
                tokio::time::timeout(Duration::from_secs(10), send(&mut service, req, false))
                    .await
                    .expect("a request waited for the stalled output");
            }
        });
    });
    // Generous: 300 in-process requests take milliseconds; a blocked one would take forever.
    assert!(started.elapsed() < Duration::from_secs(60));
    let dropped = guard.dropped_lines();
    assert!(dropped > 0, "no line was dropped");
    assert!(dropped < REQUESTS as u64, "every line was dropped");
    assert!(
        !guard.flush(Duration::from_millis(50)),
        "flushed a stalled output"
    );
    // Opened: the lines taken are written, whole.
    {
        let (open, moved) = &*stalled.open;
        *open.lock().unwrap() = true;
        moved.notify_all();
    }
    assert!(guard.flush(Duration::from_secs(10)));
    drop(dispatch);
    let written = String::from_utf8(stalled.written.lock().unwrap().clone()).unwrap();
    let count = written.lines().count() as u64;
    assert_eq!(count + dropped, REQUESTS as u64);
    for line in written.lines() {
        serde_json::from_str::<Value>(line).expect("a whole line");
    }
}

#[test]
fn lines_from_many_threads_are_whole_and_each_there_once() {
    const THREADS: usize = 4;
    const PER_THREAD: usize = 150;
    let output = Buffer::default();
    let lines = JsonLines::new(output.clone());
    let guard = lines.guard();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(lines));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let dispatch = dispatch.clone();
            std::thread::spawn(move || {
                tracing::dispatcher::with_default(&dispatch, || {
                    let runtime = runtime();
                    let mut service = SharedHeadersLayer::new()
                        .timeout(Duration::from_secs(30))
                        .tracing_access_log()
                        .layer(service_fn(handler));
                    runtime.block_on(async {
                        for i in 0..PER_THREAD {
                            let req = Request::get(format!("/Answered/t{t}/{i}"))
                                .header("x-note", "n")
                                .header("user-agent", "a \"quoted\" \\ agent")
                                .body(Empty::new())
                                .unwrap();
                            send(&mut service, req, false).await;
                        }
                    });
                })
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert!(guard.flush(Duration::from_secs(10)));
    assert_eq!(guard.dropped_lines(), 0);
    let written = output.take();
    let mut seen = BTreeMap::new();
    for line in written.lines() {
        let line: Value = serde_json::from_str(line).expect("a whole line");
        let path = line["url.path"].as_str().unwrap().to_owned();
        *seen.entry(path).or_insert(0) += 1;
    }
    assert_eq!(seen.len(), THREADS * PER_THREAD);
    assert!(seen.values().all(|n| *n == 1));
}

#[test]
fn dropping_the_layer_writes_what_is_left() {
    let output = Buffer::default();
    let lines = JsonLines::new(output.clone());
    let guard = lines.guard();
    let runtime = runtime();
    let mut service = SharedHeadersLayer::new()
        .tracing_access_log()
        .layer(service_fn(handler));
    tracing::subscriber::with_default(tracing_subscriber::registry().with(lines), || {
        runtime.block_on(async {
            for i in 0..20 {
                let req = Request::get(format!("/Answered/drop/{i}"))
                    .header("x-note", "n")
                    .body(Empty::new())
                    .unwrap();
                send(&mut service, req, false).await;
            }
        });
    });
    // The subscriber, and the layer with it, are dropped: the thread writes the rest.
    assert!(guard.flush(Duration::from_secs(10)));
    assert_eq!(output.take().lines().count(), 20);
}

#[test]
fn a_key_or_value_that_needs_escaping_is_escaped() {
    // Not one of the crate's lines: an event of the same target with a key of its own.
    let output = Buffer::default();
    let lines = JsonLines::new(output.clone());
    let guard = lines.guard();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(lines), || {
        tracing::info!(
            target: "shared_headers::access",
            { "we\"ird\\key\n" = "a\u{1}b\n\"c\\\u{2028}\u{7f}", plain = 3u64, neg = -7i64, ok = true, float = 0.5f64 },
            "message with a \" quote"
        );
        tracing::info!(target: "elsewhere", "not written");
    });
    assert!(guard.flush(Duration::from_secs(10)));
    let written = output.take();
    assert_eq!(written.lines().count(), 1, "{written}");
    let line: Value = serde_json::from_str(written.trim_end()).unwrap();
    assert_eq!(line["we\"ird\\key\n"], "a\u{1}b\n\"c\\\u{2028}\u{7f}");
    assert_eq!(line["plain"], 3);
    assert_eq!(line["neg"], -7);
    assert_eq!(line["ok"], true);
    assert_eq!(line["float"], 0.5);
    assert_eq!(line["message"], "message with a \" quote");
}

/// An output that takes `budget` bytes, a few at a time, fails once, then takes everything.
struct Flaky {
    budget: usize,
    failed: bool,
    out: Arc<Mutex<Vec<u8>>>,
}

impl io::Write for Flaky {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if !self.failed && self.budget == 0 {
            self.failed = true;
            return Err(io::Error::other("the disk is full"));
        }
        let n = if self.failed {
            buf.len()
        } else {
            buf.len().min(self.budget).min(7)
        };
        self.budget = self.budget.saturating_sub(n);
        self.out.lock().unwrap().extend_from_slice(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_write_that_fails_inside_a_line_never_glues_two_lines() {
    let out = Arc::new(Mutex::new(Vec::new()));
    // Fails inside the second line.
    let lines = JsonLines::new(Flaky {
        budget: 500,
        failed: false,
        out: Arc::clone(&out),
    });
    let guard = lines.guard();
    let runtime = runtime();
    let mut service = SharedHeadersLayer::new()
        .tracing_access_log()
        .layer(service_fn(handler));
    const REQUESTS: u64 = 30;
    tracing::subscriber::with_default(tracing_subscriber::registry().with(lines), || {
        runtime.block_on(async {
            for i in 0..REQUESTS {
                let req = Request::get(format!("/Answered/flaky/{i}"))
                    .header("x-note", "n")
                    .body(Empty::new())
                    .unwrap();
                send(&mut service, req, false).await;
                // A batch per line: the failure cuts one, the next batch follows it.
                guard.flush(Duration::from_secs(10));
            }
        });
    });
    assert!(guard.flush(Duration::from_secs(10)));
    let written = String::from_utf8(out.lock().unwrap().clone()).unwrap();
    let mut whole = 0;
    let mut cut = 0;
    for line in written.lines() {
        assert!(
            line.matches("{\"timestamp\"").count() <= 1,
            "two lines glued: {line}"
        );
        match serde_json::from_str::<Value>(line) {
            Ok(_) => whole += 1,
            Err(_) => cut += 1,
        }
    }
    assert!(cut <= 1, "{cut} cut lines: {written}");
    assert!(guard.dropped_lines() >= 1);
    assert_eq!(whole + guard.dropped_lines(), REQUESTS, "{written}");
}

/// As the module docs set it up: `fmt` without the line, the writer with the line and the
/// request's span. The line written inside the span carries the request's ids once.
#[test]
fn with_the_docs_filters_the_line_carries_the_request_ids_once() {
    let ours = Buffer::default();
    let lines = JsonLines::new(ours.clone());
    let guard = lines.guard();
    let access = |meta: &tracing::Metadata<'_>| meta.target() == "shared_headers::access";
    let line_and_span = |meta: &tracing::Metadata<'_>| {
        matches!(
            meta.target(),
            "shared_headers::access" | "shared_headers::request"
        )
    };
    let subscriber = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(io::sink)
                .with_filter(filter_fn(move |meta| !access(meta))),
        )
        .with(lines.with_filter(filter_fn(line_and_span)));
    let runtime = runtime();
    let mut service = layer().layer(service_fn(handler));
    tracing::subscriber::with_default(subscriber, || {
        runtime.block_on(send(
            &mut service,
            request(Outcome::Hop, Value_::Plain),
            false,
        ));
    });
    assert!(guard.flush(Duration::from_secs(10)));
    let raw = ours.take();
    let line = one_line(&raw, "the writer", "docs filters");
    for key in ["http.request.id", "trace_id", "span_id"] {
        assert!(line.get(key).is_some(), "no {key}: {raw}");
        assert_eq!(
            raw.matches(&format!("\"{key}\":")).count(),
            1,
            "{key}: {raw}"
        );
    }
}

/// The access line's fields as the access log hands them to the writer, and as the writer's
/// `tracing` visitor reads them from the event: the same bytes. Two writers in one
/// subscriber see each event once; one takes the handed values, the other is made to visit.
/// Every cell of the matrix, through the layer with every rare field (headers, ids, a
/// timeout, a panic), through one with the request's id only, and one with neither; a
/// gRPC call; IPv4 and IPv6 peers.
#[test]
fn the_handed_values_print_the_visitors_bytes() {
    let handed = Buffer::default();
    let visited = Buffer::default();
    let fast = JsonLines::new(handed.clone());
    let slow = JsonLines::new(visited.clone()).visitor_only();
    let (fast_guard, slow_guard) = (fast.guard(), slow.guard());
    let subscriber = tracing_subscriber::registry().with(fast).with(slow);
    let runtime = runtime();
    let peer = |ext: &http::Extensions| ext.get::<std::net::SocketAddr>().copied();
    let layers = [
        ("all", layer().peer_address(peer)),
        (
            "id",
            SharedHeadersLayer::new()
                .timeout(Duration::from_millis(50))
                .propagate(Propagation::new().request_id())
                .peer_address(peer)
                .access_log(AccessLog::new()),
        ),
        (
            "plain",
            SharedHeadersLayer::new()
                .timeout(Duration::from_millis(50))
                .peer_address(peer)
                .access_log(AccessLog::new()),
        ),
    ];
    let peers: [std::net::SocketAddr; 2] = [
        "192.0.2.7:40001".parse().unwrap(),
        "[2001:db8::1]:443".parse().unwrap(),
    ];
    let mut checked = 0;
    tracing::subscriber::with_default(subscriber, || {
        for (name, layer) in layers {
            let mut service = layer.layer(service_fn(handler));
            let mut requests = Vec::new();
            for outcome in OUTCOMES {
                for value in VALUES {
                    requests.push((format!("{name}/{outcome:?}/{value:?}"), outcome, {
                        request(outcome, value)
                    }));
                }
            }
            let grpc = Request::post("/pkg.Greeter/SayHello")
                .version(http::Version::HTTP_2)
                .header("content-type", "application/grpc")
                .header("host", "api.example")
                .header("x-note", "n")
                .body(Empty::new())
                .unwrap();
            requests.push((format!("{name}/grpc"), Outcome::Answered, grpc));
            for (i, (cell, outcome, mut req)) in requests.into_iter().enumerate() {
                req.extensions_mut().insert(peers[i % 2]);
                runtime.block_on(send(&mut service, req, outcome == Outcome::BodyDropped));
                assert!(fast_guard.flush(Duration::from_secs(10)), "{cell}");
                assert!(slow_guard.flush(Duration::from_secs(10)), "{cell}");
                let (a, b) = (handed.take(), visited.take());
                one_line(&a, "the handed values", &cell);
                one_line(&b, "the visitor", &cell);
                // After the timestamp (the two writers read the clock each).
                let after = |line: &str| line[line.find(",\"level\"").unwrap()..].to_owned();
                assert_eq!(after(&a), after(&b), "{cell}");
                if cell.ends_with("grpc") {
                    assert!(a.contains("\"rpc.grpc.status_code\":5"), "{a}");
                }
                checked += 1;
            }
        }
    });
    assert_eq!(checked, 3 * (OUTCOMES.len() * VALUES.len() + 1));
}
