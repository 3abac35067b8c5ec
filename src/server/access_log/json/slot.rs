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
