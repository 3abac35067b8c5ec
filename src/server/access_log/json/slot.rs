//! The line's values handed to the writer directly: the access log, when a [`JsonLines`] is
//! alive, formats its `request completed` line's fields into this thread's slot just before
//! it emits the event, and clears the slot right after; the writer copies them from the slot
//! in place of visiting the event's fields (one pass, keys escaped at compile time, no
//! `tracing` value set walked). Every other subscriber sees the event as before, with every
//! field; an event with no armed slot (any other event, or the line while the slot is off)
//! goes through the visitor, whose bytes the slot's must equal.

use std::cell::RefCell;
use std::net::IpAddr;
use std::sync::atomic::AtomicUsize;

use super::*;
use format::{write_f64, write_u64};

/// Live [`JsonLines`] layers: the slot is filled only when one may read it.
pub(super) static LIVE: AtomicUsize = AtomicUsize::new(0);

/// One thread's slot: the fields of the line being emitted, `,"key":value` each, message
/// first (the order of the event's value set).
pub(super) struct Slot {
    /// Filled for the event being emitted on this thread.
    pub(super) armed: bool,
    pub(super) fields: Vec<u8>,
}

thread_local! {
    pub(super) static SLOT: RefCell<Slot> = const {
        RefCell::new(Slot { armed: false, fields: Vec::new() })
    };
}

/// Whether `meta` is a callsite of the `request completed` line, the event the slot is
/// filled for: emitted from the access log's module (`module_path!` is the macro's own: no
/// event from outside the crate has it), its fields the line's (the message, the method, the
/// scheme: the crate's other lines there differ by the third). Any other event, emitted while
/// the slot is armed (by another layer seeing the line, on the same thread), goes through the
/// visitor. The identity is the callsite's, not a stored `&Metadata`: `tracing::event!` keeps
/// its callsite static to itself, so the access log cannot name it before it emits.
/// The module that emits the access lines, `server::access_log::emit` (the callsites' test
/// below, `the_lines_callsites_and_no_other_are_the_line`, fails if it moves).
pub(crate) const LINE_MODULE: &str = "shared_headers::server::access_log::emit";

#[inline]
pub(super) fn is_the_line(meta: &Metadata<'_>) -> bool {
    meta.module_path() == Some(LINE_MODULE) && {
        let mut names = meta.fields().iter().map(|f| f.name());
        names.next() == Some("message")
            && names.next() == Some("http.request.method")
            && names.next() == Some("url.scheme")
    }
}

/// Armed while alive: the event emitted under it reads the slot; dropping it (after the
/// event, or on a panic) disarms the slot, giving back the state it found.
pub(crate) struct Armed {
    /// The slot was armed by an outer line (a line emitted while another one is written):
    /// disarmed for this one, armed again after it.
    outer: Option<Vec<u8>>,
}

impl Armed {
    /// Fills the slot with the fields `fill` writes, when a writer is alive; `None` (nothing
    /// done) when none is.
    // Not inlined: one call a line, and callgrind can count the formatting by this name.
    #[inline(never)]
    pub(crate) fn fill(fill: impl FnOnce(&mut LineFields<'_>)) -> Option<Armed> {
        if LIVE.load(Ordering::Relaxed) == 0 {
            return None;
        }
        SLOT.try_with(|slot| {
            let mut slot = slot.try_borrow_mut().ok()?;
            // An outer line's fields: kept aside, this line formats its own.
            let outer = slot.armed.then(|| std::mem::take(&mut slot.fields));
            slot.armed = false;
            slot.fields.clear();
            fill(&mut LineFields {
                line: &mut slot.fields,
            });
            slot.armed = true;
            Some(Armed { outer })
        })
        .ok()
        .flatten()
    }
}

impl Drop for Armed {
    fn drop(&mut self) {
        let _ = SLOT.try_with(|slot| {
            if let Ok(mut slot) = slot.try_borrow_mut() {
                match self.outer.take() {
                    Some(outer) => slot.fields = outer,
                    None => {
                        slot.armed = false;
                        if slot.fields.capacity() > KEPT_LINE {
                            slot.fields = Vec::new();
                        }
                    }
                }
            }
        });
    }
}

/// The line's fields as the writer prints them, in the order the event's value set records
/// them: each call one field, `,"key":value`, its key given already escaped (`key!`).
pub(crate) struct LineFields<'a> {
    line: &'a mut Vec<u8>,
}

/// `,"name":`, the key of a field as the line prints it (the crate's names need no escaping).
macro_rules! key {
    ($name:literal) => {
        concat!(",\"", $name, "\":")
    };
}
pub(crate) use key;

impl LineFields<'_> {
    /// A string field (`&str`, the visitor's `record_str`) or a `Display` of a string the
    /// line writes as it is: quoted, escaped on copy.
    #[inline]
    pub(crate) fn str(&mut self, key: &'static str, value: &str) {
        self.line.extend_from_slice(key.as_bytes());
        self.line.push(b'"');
        escape_into(self.line, value);
        self.line.push(b'"');
    }

    /// A `Display` value (the visitor's `record_debug` of a `display(..)`): quoted, escaped.
    #[inline]
    pub(crate) fn display(&mut self, key: &'static str, value: &dyn fmt::Display) {
        self.line.extend_from_slice(key.as_bytes());
        self.line.push(b'"');
        let start = self.line.len();
        let _ = write!(format::Bytes(self.line), "{value}");
        format::escape_tail(self.line, start);
        self.line.push(b'"');
    }

    /// An address as `IpAddr`'s `Display` prints it (an IPv4 one without `fmt`).
    #[inline]
    pub(crate) fn ip(&mut self, key: &'static str, value: IpAddr) {
        match value {
            IpAddr::V4(v4) => {
                self.line.extend_from_slice(key.as_bytes());
                self.line.push(b'"');
                let [a, b, c, d] = v4.octets();
                write_u64(self.line, u64::from(a));
                self.line.push(b'.');
                write_u64(self.line, u64::from(b));
                self.line.push(b'.');
                write_u64(self.line, u64::from(c));
                self.line.push(b'.');
                write_u64(self.line, u64::from(d));
                self.line.push(b'"');
            }
            IpAddr::V6(_) => self.display(key, &value),
        }
    }

    /// An unsigned integer (`u16`, `u64`: the visitor's `record_u64`).
    #[inline]
    pub(crate) fn u64(&mut self, key: &'static str, value: u64) {
        self.line.extend_from_slice(key.as_bytes());
        write_u64(self.line, value);
    }

    /// A float (the visitor's `record_f64`).
    #[inline]
    pub(crate) fn f64(&mut self, key: &'static str, value: f64) {
        self.line.extend_from_slice(key.as_bytes());
        write_f64(self.line, value);
    }

    /// The event's message, first in its value set.
    #[inline]
    pub(crate) fn message(&mut self, message: &'static str) {
        self.str(key!("message"), message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot() -> (bool, Vec<u8>) {
        SLOT.with(|slot| {
            let slot = slot.borrow();
            (slot.armed, slot.fields.clone())
        })
    }

    /// The `request completed` line's callsites (the usual one, the one with the request's
    /// id, the one with the rare fields; at each level) are the line, the crate's other lines
    /// (`request committed`) and an event of the same target from elsewhere are not.
    #[test]
    fn the_lines_callsites_and_no_other_are_the_line() {
        use crate::context::Propagation;
        use crate::server::SharedHeadersLayer;
        use crate::server::access_log::AccessLog;
        use std::sync::{Arc, Mutex};
        use tower::{Layer as _, Service, ServiceExt, service_fn};
        use tracing_subscriber::layer::SubscriberExt;

        type Seen = Arc<Mutex<Vec<(String, bool)>>>;
        struct Message(String);
        impl Visit for Message {
            fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
                if field.name() == "message" {
                    self.0 = format!("{value:?}");
                }
            }
        }
        struct See(Seen);
        impl<S: Subscriber> Layer<S> for See {
            fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
                if event.metadata().target() == TARGET {
                    let mut message = Message(String::new());
                    event.record(&mut message);
                    let line = is_the_line(event.metadata());
                    self.0.lock().unwrap().push((message.0, line));
                }
            }
        }
        let seen = Seen::default();
        let subscriber = tracing_subscriber::registry().with(See(seen.clone()));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let log = AccessLog::new();
        let mut service = SharedHeadersLayer::new()
            .propagate(Propagation::new().request_id())
            .access_log(AccessLog::new())
            .on_commit(move |c| log.commit(c))
            .layer(service_fn(|req: http::Request<()>| async move {
                let status = match req.uri().path() {
                    "/fail" => 500,
                    "/missing" => 404,
                    _ => 200,
                };
                Ok::<_, std::convert::Infallible>(
                    http::Response::builder()
                        .status(status)
                        .body(String::new())
                        .unwrap(),
                )
            }));
        tracing::subscriber::with_default(subscriber, || {
            for (uri, id) in [
                ("/ok", None),
                ("/ok", Some("r-1")),
                ("http://h:8080/ok", None),
                ("/fail", None),
                ("/missing", Some("r-2")),
            ] {
                let mut req = http::Request::get(uri);
                if let Some(id) = id {
                    req = req.header("x-request-id", id);
                }
                let req = req.body(()).unwrap();
                runtime.block_on(async {
                    let res = service.ready().await.unwrap().call(req).await.unwrap();
                    http_body_util::BodyExt::collect(res.into_body())
                        .await
                        .unwrap();
                });
            }
            tracing::info!(target: "shared_headers::access", { "http.request.method" = "GET", "url.scheme" = "http" }, "request completed");
        });
        let seen = seen.lock().unwrap();
        let completed = seen
            .iter()
            .filter(|(m, _)| m == "request completed")
            .count();
        let committed = seen
            .iter()
            .filter(|(m, _)| m == "request committed")
            .count();
        assert_eq!((completed, committed), (6, 5), "{seen:?}");
        let lines: Vec<bool> = seen
            .iter()
            .filter(|(m, _)| m == "request completed")
            .map(|(_, line)| *line)
            .collect();
        assert_eq!(lines, [true, true, true, true, true, false], "{seen:?}");
        assert!(
            seen.iter()
                .all(|(m, line)| m == "request completed" || !line)
        );
    }

    /// Armed for its event only; a line emitted while another is written has its own
    /// fields, and the outer line finds its own again.
    #[test]
    fn armed_for_its_event_and_nested_lines_keep_their_own() {
        LIVE.fetch_add(1, Ordering::Relaxed);
        let outer = Armed::fill(|w| w.message("outer")).unwrap();
        assert_eq!(slot(), (true, b",\"message\":\"outer\"".to_vec()));
        {
            let inner = Armed::fill(|w| w.u64(key!("n"), 7)).unwrap();
            assert_eq!(slot(), (true, b",\"n\":7".to_vec()));
            drop(inner);
        }
        assert_eq!(slot(), (true, b",\"message\":\"outer\"".to_vec()));
        drop(outer);
        assert!(!slot().0);
        // A fill that panics leaves the slot unarmed.
        let panicked = std::panic::catch_unwind(|| {
            let _armed = Armed::fill(|_| panic!("a value's Display"));
        });
        assert!(panicked.is_err());
        assert!(!slot().0);
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
}
