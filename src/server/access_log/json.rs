//! The crate's own writer of the access line (feature `access-json`): one JSON object per
//! line, in one pass, into a reused buffer, handed to a background thread that writes it.
//!
//! [`JsonLines`] is a [`tracing_subscriber::Layer`]: add it to your subscriber and it writes
//! every event of the target `shared_headers::access` (the `request completed` line, and the
//! `request committed` and late-writes lines when you use them) as one line of JSON. The line
//! stays a `tracing` event: every other layer (a filter, the OpenTelemetry log bridge, a test
//! capture) sees it as before.
//!
//! ```text
//! {"timestamp":"2026-05-04T12:00:00.123456Z","level":"INFO","target":"shared_headers::access","http.request.id":"...","http.request.method":"GET","url.scheme":"http","url.path":"/users/42",...,"message":"request completed",...}
//! ```
//!
//! The keys are the line's field names (those of the
//! [module docs](super#fields)), beside `timestamp` (RFC 3339, UTC, microseconds), `level`,
//! `target` and `message`: `fmt().json().flatten_event(true)`'s object for the same event,
//! without the span list. The values are the event's: the access line has already escaped and
//! redacted them by the one rule of the [module docs](super#safe-by-default), so the writer
//! prints nothing the line hides; it escapes each value for JSON as it copies it (`"`, `\` and
//! control characters), so that no value can end a string or a line.
//!
//! The `request completed` line does not go through `tracing`'s visitor: while a writer is
//! alive, the access log formats the line's fields for it just before it emits the event
//! (keys escaped at compile time, numbers without `fmt`), and the writer copies them; the
//! event every other layer sees keeps every field. The bytes are those the visitor would
//! write. Two writers in one subscriber (a file and stdout) each write every line.
//!
//! # Not twice, and only the line
//!
//! A `fmt` layer in the same subscriber prints the line too: keep the line out of it with a
//! filter on the target, and cap its level as you would without the writer (a `filter_fn`
//! has no level of its own: without the cap every `TRACE` event of hyper and axum is printed);
//! here it writes to stderr, so that stdout holds the JSON lines alone. Give the writer the
//! opposite filter, letting the request's span (target `shared_headers::request`) through as
//! well: a line written inside that span leaves the request's ids to it (`http.request.id`,
//! and with a trace hop, `Propagation::trace_hop`, `trace_id` and `span_id`), and the writer
//! puts the span's fields on the line, before the event's. A layer without a filter makes
//! every event of the program enabled (each is built and handed to it, to be ignored),
//! whatever the other layers' filters say.
//!
//! ```
//! use shared_headers::server::access_log::json::JsonLines;
//! use tracing_subscriber::{Layer, filter::filter_fn, layer::SubscriberExt};
//!
//! let access = |meta: &tracing::Metadata<'_>| meta.target() == "shared_headers::access";
//! // The line, and the request's span: its ids go on the line written inside it.
//! let line_and_span = |meta: &tracing::Metadata<'_>| {
//!     matches!(meta.target(), "shared_headers::access" | "shared_headers::request")
//! };
//! let lines = JsonLines::new(std::io::stdout());
//! let guard = lines.guard(); // keep it: dropping it at exit flushes the last lines
//! let subscriber = tracing_subscriber::registry()
//!     .with(
//!         tracing_subscriber::fmt::layer()
//!             .with_writer(std::io::stderr)
//!             .with_filter(filter_fn(move |meta| {
//!                 !access(meta) && *meta.level() <= tracing::Level::INFO
//!             })),
//!     )
//!     .with(lines.with_filter(filter_fn(line_and_span)));
//! # let _ = subscriber;
//! // tracing::subscriber::set_global_default(subscriber)?;
//! # drop(guard);
//! ```
//!
//! # Never blocking a request
//!
//! The event's thread formats the line into a buffer of its own (reused: no allocation once
//! warm) and appends it, whole, to a bounded buffer (1 MiB by default,
//! [`JsonLines::with_capacity`]) under a lock held for the copy alone. A background thread
//! takes the buffer and writes it, in batches: woken by the first line after a pause, it
//! lets lines gather for 20 ms (or until 16 KiB came) and writes them in one call, so that a
//! busy server pays one wake-up per batch, not per line. When the output stalls and the buffer is full, a line is
//! dropped and counted ([`JsonLinesGuard::dropped_lines`]): a request never waits for the
//! output. A line is written whole or not at all: lines from many threads are never torn.
//! A write that fails counts the lines it did not write whole as dropped; if it failed inside
//! a line, the next write ends that line first, so that no line is glued to a cut one.
//! [`JsonLinesGuard::flush`] waits until the lines taken so far are written and flushed (and
//! says `false` if the wait timed out or some of them failed to be written); dropping the
//! guard does it (for at most one second). Dropping the layer (a scoped subscriber that ends)
//! writes what is left before it returns, waiting at most five seconds for a stalled output;
//! the drop runs where the subscriber's last reference goes, which `tracing` may briefly hold
//! on another thread (while that thread registers a callsite), so the end of a scope may
//! return before the lines are written: to know they are, call [`JsonLinesGuard::flush`].
//!
//! # At the end of the program
//!
//! A global subscriber is never dropped: the guard is what writes the last lines. Make it
//! outside the tokio runtime (in a plain `fn main` that builds the runtime, not inside
//! `#[tokio::main]`'s body or a task), so that it is dropped after the runtime shut down: every
//! task that could log has ended, so its lines are in, and the guard's wait (up to one second,
//! a blocking wait on the writing thread) blocks no runtime worker.
//!
//! ```
//! use shared_headers::server::access_log::json::JsonLines;
//! use tracing_subscriber::{Layer, filter::filter_fn, layer::SubscriberExt};
//!
//! fn main() {
//!     let lines = JsonLines::new(std::io::stdout());
//!     let guard = lines.guard(); // outside the runtime: dropped after it
//!     let line_and_span = filter_fn(|meta| {
//!         matches!(meta.target(), "shared_headers::access" | "shared_headers::request")
//!     });
//!     let subscriber = tracing_subscriber::registry().with(lines.with_filter(line_and_span));
//!     # let _ = subscriber;
//!     // tracing::subscriber::set_global_default(subscriber).unwrap();
//!     let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
//!     runtime.block_on(async {
//!         // serve
//!     });
//!     drop(runtime); // the tasks end, their last lines are taken
//!     drop(guard); // written and flushed, at most one second
//! }
//! ```

use std::cell::RefCell;
use std::fmt::{self, Write as _};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber, callsite};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

mod format;
mod guard;
mod output;
mod shared;
mod slot;
mod spans;

use format::{Fields, escape_into, is_plain, timestamp};
pub use guard::JsonLinesGuard;
use output::write_lines;
use shared::{Shared, State};
pub(crate) use slot::{Armed, key};

/// The target of the access line's events: the only events the writer writes.
const TARGET: &str = "shared_headers::access";

/// The target of the request's span: its fields (the request's ids) are written on the line
/// written inside it, which then leaves them to the span.
const SPAN_TARGET: &str = "shared_headers::request";

/// The default bound of the buffer between the events and the writing thread.
const DEFAULT_CAPACITY: usize = 1 << 20;

/// A formatting buffer grown beyond this (a very long line) is not kept for the next line.
const KEPT_LINE: usize = 64 * 1024;

/// The room made at the start in each of the two buffers between the events and the writing
/// thread (more only when a batch needs it): no allocation in steady state.
const KEPT_BATCH: usize = 64 * 1024;

/// How long the writing thread lets lines gather after the first of a batch.
const LINGER: Duration = Duration::from_millis(20);

/// A batch this long is written without waiting for the rest of [`LINGER`].
const WAKE_AT: usize = 16 * 1024;

/// How long dropping a [`JsonLinesGuard`] waits for the last lines.
const DROP_FLUSH: Duration = Duration::from_secs(1);

/// How long dropping the [`JsonLines`] layer waits for the writing thread to write what is
/// left and end (an output stalled longer loses those lines, counted dropped by no one: the
/// program is ending).
const DROP_CLOSE: Duration = Duration::from_secs(5);

/// A `tracing_subscriber` layer writing the crate's access line as one JSON object per line
/// (see the [module docs](self)).
///
/// # Examples
///
/// ```
/// use shared_headers::server::access_log::json::JsonLines;
/// use tracing_subscriber::layer::SubscriberExt;
///
/// let lines = JsonLines::new(std::io::stderr());
/// let guard = lines.guard();
/// let subscriber = tracing_subscriber::registry().with(lines);
/// tracing::subscriber::with_default(subscriber, || {
///     // serve requests through `SharedHeadersLayer::new().tracing_access_log()`
/// });
/// assert!(guard.flush(std::time::Duration::from_secs(5)));
/// assert_eq!(guard.dropped_lines(), 0);
/// ```
pub struct JsonLines {
    shared: Arc<Shared>,
    /// Whether a callsite with a key that needs escaping was registered.
    odd_keys: AtomicBool,
    /// Those callsites (their keys are escaped as they are written).
    odd: RwLock<Vec<callsite::Identifier>>,
    /// The writing thread (none: it could not be started).
    thread: Option<std::thread::JoinHandle<()>>,
    /// The access line's fields through the visitor even when the slot has them (tests).
    visitor_only: bool,
    /// The open request spans' fields (their ids), by span.
    spans: spans::Spans,
}

impl fmt::Debug for JsonLines {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JsonLines")
            .field("capacity", &self.shared.capacity)
            .field(
                "dropped_lines",
                &self.shared.dropped.load(Ordering::Relaxed),
            )
            .finish_non_exhaustive()
    }
}

impl JsonLines {
    /// A writer to `output` (a file, a socket, any `io::Write`), through a background thread
    /// and a buffer of 1 MiB.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::access_log::json::JsonLines;
    /// let file = std::env::temp_dir().join("access.jsonl");
    /// let lines = JsonLines::new(std::fs::File::create(&file)?);
    /// # drop(lines);
    /// # let _ = std::fs::remove_file(file);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new<W: io::Write + Send + 'static>(output: W) -> Self {
        Self::with_capacity(output, DEFAULT_CAPACITY)
    }

    /// A writer to `output` whose buffer holds at most `capacity` bytes of lines not yet
    /// written: beyond it, a line is dropped and counted. A line longer than `capacity` is
    /// always dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::access_log::json::JsonLines;
    /// let lines = JsonLines::with_capacity(std::io::stderr(), 64 * 1024);
    /// # drop(lines);
    /// ```
    pub fn with_capacity<W: io::Write + Send + 'static>(output: W, capacity: usize) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                buffer: Vec::with_capacity(capacity.min(KEPT_BATCH)),
                pending: 0,
                taken: 0,
                done: 0,
                idle: false,
                flushing: 0,
                closed: false,
                finished: false,
                failed: None,
            }),
            lines: Condvar::new(),
            written: Condvar::new(),
            capacity,
            dropped: AtomicU64::new(0),
        });
        let thread = Arc::clone(&shared);
        let spawned = std::thread::Builder::new()
            .name("shared-headers-json-lines".into())
            .spawn(move || {
                write_lines(&thread, output);
                thread.lock().finished = true;
                thread.written.notify_all();
            });
        slot::LIVE.fetch_add(1, Ordering::Relaxed);
        if spawned.is_err() {
            // No thread: no line can be written; each is counted dropped.
            let mut state = shared.lock();
            state.closed = true;
            state.finished = true;
        }
        JsonLines {
            shared,
            odd_keys: AtomicBool::new(false),
            odd: RwLock::new(Vec::new()),
            thread: spawned.ok(),
            visitor_only: false,
            spans: spans::Spans::default(),
        }
    }

    /// This writer, formatting the access line through the `tracing` visitor as it does any
    /// other event, never from the values the access log hands over (the same bytes, slower:
    /// for tests comparing both).
    #[doc(hidden)]
    pub fn visitor_only(mut self) -> Self {
        if !self.visitor_only {
            // It reads no slot: alone, it makes the access log fill none.
            slot::LIVE.fetch_sub(1, Ordering::Relaxed);
        }
        self.visitor_only = true;
        self
    }

    /// A handle on this writer's output: the dropped lines, a flush, and a flush when it is
    /// dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::access_log::json::JsonLines;
    /// let lines = JsonLines::new(std::io::sink());
    /// let guard = lines.guard();
    /// assert_eq!(guard.dropped_lines(), 0);
    /// ```
    pub fn guard(&self) -> JsonLinesGuard {
        JsonLinesGuard {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Formats `event` into `line` (emptied first): its fields from this thread's slot when
    /// the access log filled it for this event, else through the visitor.
    #[inline(never)]
    fn format(&self, event: &Event<'_>, span: Option<&Id>, line: &mut Vec<u8>) {
        line.clear();
        let meta = event.metadata();
        line.extend_from_slice(b"{\"timestamp\":\"");
        timestamp(line);
        line.extend_from_slice(b"\",\"level\":\"");
        line.extend_from_slice(meta.level().as_str().as_bytes());
        line.extend_from_slice(b"\",\"target\":\"");
        escape_into(line, meta.target());
        line.push(b'"');
        if let Some(span) = span {
            self.spans
                .with(span, |fields| line.extend_from_slice(fields));
        }
        let from_slot = !self.visitor_only
            && slot::SLOT
                .try_with(|slot| match slot.try_borrow() {
                    Ok(slot) if slot.armed && slot::is_the_line(meta) => {
                        line.extend_from_slice(&slot.fields);
                        true
                    }
                    _ => false,
                })
                .unwrap_or(false);
        if !from_slot {
            let escape_keys = self.odd_keys.load(Ordering::Relaxed)
                && self
                    .odd
                    .read()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .contains(&meta.callsite());
            event.record(&mut Fields { line, escape_keys });
        }
        line.extend_from_slice(b"}\n");
    }
}

impl Drop for JsonLines {
    /// Closes the writer: the thread writes the lines left, flushes and ends; the drop waits
    /// for it, at most five seconds (an output stalled longer loses those lines).
    fn drop(&mut self) {
        if !self.visitor_only {
            slot::LIVE.fetch_sub(1, Ordering::Relaxed);
        }
        self.shared.lock().closed = true;
        self.shared.lines.notify_one();
        let Some(thread) = self.thread.take() else {
            return;
        };
        // Dropped by the writing thread itself (its output logged through this subscriber):
        // it cannot wait for itself.
        if thread.thread().id() == std::thread::current().id() {
            return;
        }
        let deadline = Instant::now() + DROP_CLOSE;
        let mut state = self.shared.lock();
        while !state.finished {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                // Left to end on its own.
                return;
            }
            state = match self.shared.written.wait_timeout(state, left) {
                Ok((state, _)) => state,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        drop(state);
        // It has ended: the join returns at once.
        let _ = thread.join();
    }
}

impl<S> Layer<S> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _ctx: Context<'_, S>) {
        if attrs.metadata().target() != SPAN_TARGET {
            return;
        }
        span_fields(
            |fields| {
                attrs.record(&mut Fields {
                    line: fields,
                    escape_keys: false,
                })
            },
            |fields| self.spans.append(id, fields),
        );
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        if span.metadata().target() != SPAN_TARGET {
            return;
        }
        span_fields(
            |fields| {
                values.record(&mut Fields {
                    line: fields,
                    escape_keys: false,
                })
            },
            |fields| self.spans.append(id, fields),
        );
    }

    fn on_close(&self, id: Id, _ctx: Context<'_, S>) {
        self.spans.close(&id);
    }

    fn register_callsite(&self, meta: &'static Metadata<'static>) -> tracing::subscriber::Interest {
        // The keys are checked once per callsite: a key that needs escaping (never one of the
        // crate's) marks its callsite, whose keys are then escaped as they are written.
        if meta.target() == TARGET && !meta.fields().iter().all(|f| is_plain(f.name().as_bytes())) {
            self.odd
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push(meta.callsite());
            self.odd_keys.store(true, Ordering::Relaxed);
        }
        tracing::subscriber::Interest::always()
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if event.metadata().target() != TARGET {
            return;
        }
        // The request's span, when the line is written inside it: its ids go on the line.
        let span = ctx.event_scope(event).and_then(|scope| {
            scope
                .into_iter()
                .find(|span| span.metadata().target() == SPAN_TARGET)
        });
        let span = span.as_ref().map(|span| span.id());
        let span = span.as_ref();
        LINE.with(|kept| match kept.try_borrow_mut() {
            Ok(mut line) => {
                self.format(event, span, &mut line);
                self.shared.push(&line);
                if line.capacity() > KEPT_LINE {
                    *line = Vec::new();
                }
            }
            // A value's `Display` that logs a line of its own: a buffer for that one.
            Err(_) => {
                let mut line = Vec::new();
                self.format(event, span, &mut line);
                self.shared.push(&line);
            }
        });
    }
}

/// Formats a request span's fields with `record` into this thread's buffer for them and, when
/// there is any, hands them to `keep`.
fn span_fields(record: impl FnOnce(&mut Vec<u8>), keep: impl FnOnce(&[u8])) {
    FIELDS.with(|kept| match kept.try_borrow_mut() {
        Ok(mut fields) => {
            fields.clear();
            record(&mut fields);
            if !fields.is_empty() {
                keep(&fields);
            }
            if fields.capacity() > KEPT_LINE {
                *fields = Vec::new();
            }
        }
        // A value's `Display` that makes a request span of its own.
        Err(_) => {
            let mut fields = Vec::new();
            record(&mut fields);
            if !fields.is_empty() {
                keep(&fields);
            }
        }
    });
}

thread_local! {
    /// The buffer of this thread's request span fields, formatted before they are kept.
    static FIELDS: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// The formatting buffer of this thread's lines, reused.
    static LINE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// The timestamp's text up to the second, and that second.
    static SECOND: RefCell<(u64, [u8; 19])> = const { RefCell::new((u64::MAX, [0; 19])) };
}
