//! The event and span capture shared by the tests that read `tracing` output (the access
//! lines, the request spans): a bare `Subscriber`, installed once as the global default, that
//! keeps every event's and span's fields as strings, and the access lines picked from it.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

pub type Fields = BTreeMap<String, String>;

/// Every event and every span's fields, as strings (an event's also carry its `level` and
/// `target`).
#[derive(Clone, Default)]
pub struct Capture {
    pub events: Arc<Mutex<Vec<Fields>>>,
    pub spans: Arc<Mutex<Vec<Fields>>>,
}

/// A lock that a panicking assertion elsewhere does not poison for the subscriber (a panic
/// inside `event` during an unwind would abort the test binary).
pub fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
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
        let mut spans = lock(&self.spans);
        spans.push(fields);
        let id = spans.len() as u64;
        lock(metadata()).insert(id, attributes.metadata());
        if attributes.metadata().target() == "shared_headers::request" {
            lock(request_spans()).insert(id);
        }
        Id::from_u64(id)
    }
    fn record(&self, id: &Id, values: &Record<'_>) {
        let mut spans = lock(&self.spans);
        values.record(&mut Visitor(&mut spans[id.into_u64() as usize - 1]));
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields::new();
        fields.insert("level".into(), event.metadata().level().to_string());
        fields.insert("target".into(), event.metadata().target().into());
        event.record(&mut Visitor(&mut fields));
        // An event as a formatter prints it: with the fields of the request span it is
        // written in (`http.request.id`, `trace_id`, `span_id`), marked as the span's.
        let current = ENTERED.with(|entered| entered.borrow().last().copied());
        if let Some(id) = current.filter(|id| lock(request_spans()).contains(id)) {
            let spans = lock(&self.spans);
            for (name, value) in &spans[id as usize - 1] {
                if fields.insert(name.clone(), value.clone()).is_some() {
                    fields.insert(format!("{name}#twice"), value.clone());
                }
            }
        }
        lock(&self.events).push(fields);
    }
    fn current_span(&self) -> tracing_core::span::Current {
        let current = ENTERED.with(|entered| entered.borrow().last().copied());
        match current.and_then(|id| Some((id, *lock(metadata()).get(&id)?))) {
            Some((id, meta)) => tracing_core::span::Current::new(Id::from_u64(id), meta),
            None => tracing_core::span::Current::none(),
        }
    }
    fn enter(&self, id: &Id) {
        ENTERED.with(|entered| entered.borrow_mut().push(id.into_u64()));
    }
    fn exit(&self, id: &Id) {
        ENTERED.with(|entered| {
            let mut entered = entered.borrow_mut();
            if let Some(at) = entered.iter().rposition(|e| *e == id.into_u64()) {
                entered.remove(at);
            }
        });
    }
}

thread_local! {
    /// The spans entered on this thread, innermost last.
    static ENTERED: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Each span's metadata, by id (`Span::current()` asks the subscriber).
fn metadata() -> &'static Mutex<std::collections::HashMap<u64, &'static Metadata<'static>>> {
    static METADATA: OnceLock<Mutex<std::collections::HashMap<u64, &'static Metadata<'static>>>> =
        OnceLock::new();
    METADATA.get_or_init(|| Mutex::new(std::collections::HashMap::new()))
}

/// The ids of the request spans (`shared_headers::request`).
fn request_spans() -> &'static Mutex<std::collections::HashSet<u64>> {
    static IDS: OnceLock<Mutex<std::collections::HashSet<u64>>> = OnceLock::new();
    IDS.get_or_init(|| Mutex::new(std::collections::HashSet::new()))
}

/// The process's capture, installed on first use; the handlers' expected panics (payload
/// `"handler bug"`) are kept out of the output.
pub fn capture() -> &'static Capture {
    static CAPTURE: OnceLock<Capture> = OnceLock::new();
    CAPTURE.get_or_init(|| {
        std::panic::set_hook(Box::new(|info| {
            if info.payload().downcast_ref::<&str>() != Some(&"handler bug") {
                eprintln!("{info}");
            }
        }));
        let capture = Capture::default();
        tracing::subscriber::set_global_default(capture.clone()).unwrap();
        capture
    })
}

/// The access lines (`request completed`) that `keep` picks, in the order emitted.
pub fn access_lines(keep: impl Fn(&Fields) -> bool) -> Vec<Fields> {
    lock(&capture().events)
        .iter()
        .filter(|e| e.get("message").is_some_and(|m| m == "request completed") && keep(e))
        .cloned()
        .collect()
}

/// The access lines of `path`.
pub fn access_lines_of(path: &str) -> Vec<Fields> {
    access_lines(|e| e.get("url.path").is_some_and(|p| p == path))
}

/// The access lines that `keep` picks, waiting (at most 5 s) until there are `n`.
pub async fn wait_access_lines(keep: impl Fn(&Fields) -> bool, n: usize) -> Vec<Fields> {
    let start = std::time::Instant::now();
    loop {
        let found = access_lines(&keep);
        if found.len() >= n || start.elapsed() > std::time::Duration::from_secs(5) {
            return found;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

/// The access lines of `path`, waiting (at most 5 s) until there are `n`.
pub async fn wait_access_lines_of(path: &str, n: usize) -> Vec<Fields> {
    wait_access_lines(|e| e.get("url.path").is_some_and(|p| p == path), n).await
}
