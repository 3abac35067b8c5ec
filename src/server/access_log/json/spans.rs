//! The request spans' fields (the request's ids), kept by the writer from the span's start to
//! its close, outside the span's extensions (an extension is a box a span: an allocation a
//! request): a table of the open spans' fields by span id, in shards, whose buffers are
//! reused from one span to the next. In steady state a span with fields allocates nothing.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use tracing::span::Id;

/// Shards of the table (a power of two): spans on different threads rarely share a lock.
const SHARDS: usize = 16;

/// A span's buffer grown beyond this (very long ids) is not kept for the next span.
const KEPT_FIELDS: usize = 1024;

/// Buffers kept free in a shard, at most (the rest of a burst is freed).
const KEPT_FREE: usize = 256;

/// The open request spans' fields, `,"key":value` each, by span id.
#[derive(Default)]
pub(super) struct Spans {
    shards: [Mutex<Shard>; SHARDS],
    /// Spans with fields kept: none, and a line or a span's close takes no lock (the writer
    /// sees every span's close, and most requests have no ids to keep).
    open: AtomicUsize,
}

#[derive(Default)]
struct Shard {
    open: HashMap<u64, Vec<u8>, BuildHasherDefault<IdHasher>>,
    /// Emptied buffers of closed spans, for the next ones.
    free: Vec<Vec<u8>>,
}

/// A span id is already unique: multiplied (Fibonacci hashing) to spread its bits.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, id: u64) {
        self.0 = id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

impl Spans {
    fn shard(&self, id: &Id) -> MutexGuard<'_, Shard> {
        let id = id.into_u64();
        // The registry's ids are slab indices: the low bits differ between open spans.
        let at = (id ^ id >> 17) as usize % SHARDS;
        self.shards[at]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Appends `fields` (not empty) to the span's, making its entry if it has none.
    pub(super) fn append(&self, id: &Id, fields: &[u8]) {
        let mut shard = self.shard(id);
        let Shard { open, free } = &mut *shard;
        open.entry(id.into_u64())
            .or_insert_with(|| {
                self.open.fetch_add(1, Ordering::Relaxed);
                free.pop().unwrap_or_default()
            })
            .extend_from_slice(fields);
    }

    /// Calls `f` with the span's fields, if it has any.
    pub(super) fn with<R>(&self, id: &Id, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        // The span's entry, if any, was counted before the span reached this thread.
        if self.open.load(Ordering::Relaxed) == 0 {
            return None;
        }
        self.shard(id)
            .open
            .get(&id.into_u64())
            .map(|fields| f(fields))
    }

    /// The span closed: its buffer, emptied, kept for the next.
    pub(super) fn close(&self, id: &Id) {
        // Counted under the shard's lock that adds the entry, before the span can close.
        if self.open.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut shard = self.shard(id);
        if let Some(mut fields) = shard.open.remove(&id.into_u64()) {
            self.open.fetch_sub(1, Ordering::Relaxed);
            if fields.capacity() <= KEPT_FIELDS && shard.free.len() < KEPT_FREE {
                fields.clear();
                shard.free.push(fields);
            }
        }
    }

    /// Whether the span has fields kept (tests).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap().open.len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fields appended, read, and the buffer reused after the close: no allocation for the
    /// next span once the first has closed.
    #[test]
    fn fields_kept_until_the_close_and_their_buffer_reused() {
        let spans = Spans::default();
        let a = Id::from_u64(1);
        spans.append(&a, b",\"x\":1");
        spans.append(&a, b",\"y\":2");
        assert_eq!(spans.with(&a, <[u8]>::to_vec).unwrap(), b",\"x\":1,\"y\":2");
        assert!(spans.with(&Id::from_u64(2), |_| ()).is_none());
        let buffer = spans.with(&a, <[u8]>::as_ptr).unwrap();
        spans.close(&a);
        assert_eq!(spans.len(), 0);
        // The same shard's next span takes the emptied buffer.
        let b = Id::from_u64(1);
        spans.append(&b, b",\"z\":3");
        assert_eq!(spans.with(&b, <[u8]>::as_ptr).unwrap(), buffer);
        assert_eq!(spans.with(&b, <[u8]>::to_vec).unwrap(), b",\"z\":3");
        spans.close(&b);
        spans.close(&b);
        assert_eq!(spans.len(), 0);
    }
}
