//! The per-thread read cache of `Locked` cells (see [`ReadCache`]): a part of
//! [`sync`](super), whose primitives it uses (the model's `thread_local!` under loom and
//! shuttle).

use std::sync::Arc;

#[cfg(shared_headers_loom)]
use super::model;
use super::{AtomicU64, Ordering};
#[cfg(doc)]
use super::{LockedValue, Published, consistent};

/// A type whose `Locked` cells use the per-thread read cache: it names its own slot (one per
/// thread and type), declared with [`read_cache!`]. Typed rather than one slot of
/// `Arc<dyn Any>`: a hit then does no downcast (a virtual call and a 16-byte compare).
pub(crate) trait Cacheable: Send + Sync + Sized + 'static {
    /// This thread's slot for this type.
    fn read_cache() -> &'static LocalKey<Slot<Self>>;
}

/// One thread's read cache for one type.
pub(crate) type Slot<T> = std::cell::RefCell<Option<ReadCache<T>>>;

#[cfg(not(shared_headers_loom))]
pub(crate) type LocalKey<T> = std::thread::LocalKey<T>;
#[cfg(shared_headers_loom)]
pub(crate) type LocalKey<T> = model::thread::LocalKey<T>;
/// The model's `thread_local!`, for [`read_cache!`] under loom and shuttle.
#[cfg(shared_headers_loom)]
pub(crate) use model::thread_local as model_thread_local;

/// Implements [`Cacheable`] for a type: declares its per-thread slot (`std`'s `thread_local!`,
/// or the model's under loom and shuttle, one per model thread).
macro_rules! read_cache {
    ($t:ty) => {
        impl $crate::sync::Cacheable for $t {
            #[inline]
            fn read_cache() -> &'static $crate::sync::LocalKey<$crate::sync::Slot<$t>> {
                #[cfg(not(shared_headers_loom))]
                ::std::thread_local! {
                    static SLOT: $crate::sync::Slot<$t> =
                        const { ::std::cell::RefCell::new(None) };
                }
                #[cfg(shared_headers_loom)]
                $crate::sync::model_thread_local! {
                    static SLOT: $crate::sync::Slot<$t> = ::std::cell::RefCell::new(None);
                }
                &SLOT
            }
        }
    };
}
pub(crate) use read_cache;

/// One thread's cached read of one `Locked` cell: which cell (`id`), at which sequence count
/// (`stores`, always even: the count read before and after loading the value under the read
/// lock), and the value.
///
/// Each thread keeps one such slot per cached type ([`Cacheable`]). A
/// [`peek`](Published::peek) or [`load_full`](Published::load_full) of a `Locked` cell loads
/// the cell's count and, if the slot holds that cell at that count, uses the cached value
/// without writing any shared cache line (no lock word; no reference count for `peek`): that
/// is what lets two threads read one request-scoped handle without slowing each other down.
/// Otherwise it takes the read lock, clones the `Arc` and replaces the slot (the old value is
/// dropped outside the slot's borrow and every lock).
///
/// * **Identity is an id, never an address.** A cell gets an id from [`next_id`] when a thread
///   first caches it ([`CacheKey`]), unique for the life of the process. A freed cell's
///   address can be reused by a new cell whose count is also 0; a slot keyed by address would
///   then serve the old cell's value: a read returning another request's headers (arc-swap
///   #210's failure).
/// * **Re-entrancy.** The slot is a `RefCell` used only through `try_borrow` and
///   `try_borrow_mut`, so it never panics: a hit runs the reader's closure under a shared
///   borrow (the user's `read(f)` included: `f` may read other handles, which then hit under
///   a second shared borrow or miss without caching, and may panic, which releases the
///   borrow); a miss fills the slot under a mutable borrow held only for the `replace`, and
///   drops the old value after releasing it (its destructors are anyone's code).
/// * **Who frees a replaced version.** A miss that replaces this cell's stale value holding its
///   last reference hands it back to the cell ([`LockedValue::returned`], under `try_write`);
///   the next swap returns it to the writer, who frees or reuses it unlocked, as it would have
///   without the cache. (Freed by the reader, a 48-header map cost a read 4 µs under a busy
///   writer.)
/// * **Retention.** A thread's slot keeps the version it cached alive until that thread reads
///   another `Locked` cell, or exits; a cell's drop clears the dropping thread's slot if it
///   holds that cell (one thread-local access: O(1) whatever the number of threads). So a
///   thread that read a handle and did not drop it keeps one version of it: at most one
///   version per thread in the process.
/// * **Ordering.** The slot is thread-local and gives no ordering. A hit needs none (this
///   thread loaded the value earlier, at the count it reads now); the count load acquires, as
///   [`consistent`]'s first load does (a miss uses it as the count "before"), pairing with the
///   even count's release in [`Published::swap`]. (For a `Locked` cell the read lock would
///   order the value by itself: loom passes with that load Relaxed.)
///
/// Under loom and shuttle the slot is the model's `thread_local!` and the id a model atomic
/// (Relaxed), and the id counter a plain `std` atomic (uniqueness only, invisible to the
/// model): the cache adds no ordering that the real code lacks.
pub(crate) struct ReadCache<T> {
    pub(super) id: u64,
    pub(super) stores: u64,
    pub(super) value: Arc<T>,
}

#[cfg(not(shared_headers_loom))]
thread_local! {
    /// This thread's block of ids: (next, end).
    static IDS: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}
#[cfg(shared_headers_loom)]
model::thread_local! {
    static IDS: std::cell::Cell<(u64, u64)> = std::cell::Cell::new((0, 0));
}

/// Ids handed out so far, in blocks of [`ID_BLOCK`] per thread (0 is never an id).
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
/// Ids a thread takes from [`NEXT_ID`] at a time: giving ids touches the shared counter once
/// per this many.
const ID_BLOCK: u64 = 1024;

/// A new id, unique in the process: from this thread's block, refilled from [`NEXT_ID`].
/// (2^64 ids: at a billion a second, centuries.)
fn next_id() -> u64 {
    use std::sync::atomic::Ordering::Relaxed;
    IDS.try_with(|ids| {
        let (next, end) = ids.get();
        if next < end {
            ids.set((next + 1, end));
            next
        } else {
            let start = NEXT_ID.fetch_add(ID_BLOCK, Relaxed);
            ids.set((start + 1, start + ID_BLOCK));
            start
        }
    })
    // This thread's storage is being torn down: an id of its own.
    .unwrap_or_else(|_| NEXT_ID.fetch_add(1, Relaxed))
}

/// `f` on this thread's cached value, if the slot holds cell `id` at count `stores` (and is
/// not being replaced by an outer frame).
#[inline]
pub(super) fn with_cached<T: Cacheable, R>(
    id: u64,
    stores: u64,
    f: impl FnOnce(&Arc<T>) -> R,
) -> Option<R> {
    if id == 0 {
        return None; // never cached
    }
    T::read_cache()
        .try_with(|slot| {
            let cache = slot.try_borrow().ok()?;
            let cache = cache.as_ref()?;
            (cache.id == id && cache.stores == stores).then(|| f(&cache.value))
        })
        .ok()
        .flatten()
}

/// Puts `value` of cell `id` at count `stores` in this thread's slot, unless an outer frame is
/// reading from it; returns what it replaced (or `value`), released from the slot.
#[must_use = "the replaced value is dropped by the caller, unlocked"]
pub(super) fn put_cache<T: Cacheable>(id: u64, stores: u64, value: Arc<T>) -> Option<ReadCache<T>> {
    let cache = ReadCache { id, stores, value };
    T::read_cache()
        .try_with(|slot| match slot.try_borrow_mut() {
            Ok(mut slot) => slot.replace(cache),
            Err(_) => Some(cache),
        })
        .ok()
        .flatten()
}

/// A `Locked` cell's id in the read caches, given when a thread first caches the cell (0 until
/// then: a cell nobody reads costs no id, and its drop looks at no thread-local); its drop
/// clears this thread's slot if the slot holds the cell.
pub(super) struct CacheKey<T: Cacheable> {
    id: AtomicU64,
    _slot: std::marker::PhantomData<fn() -> T>,
}

impl<T: Cacheable> CacheKey<T> {
    pub(super) fn new() -> Self {
        CacheKey {
            id: AtomicU64::new(0),
            _slot: std::marker::PhantomData,
        }
    }

    /// The id if one was given (else 0, which no slot holds).
    #[inline]
    pub(super) fn get(&self) -> u64 {
        // Relaxed: the id is an identity, not a publication (a reader that sees 0 misses and
        // takes the lock path).
        self.id.load(Ordering::Relaxed)
    }

    /// The id, given now if it was not yet (the first of racing readers wins).
    pub(super) fn get_or_give(&self) -> u64 {
        match self.get() {
            0 => {
                let id = next_id();
                match self
                    .id
                    .compare_exchange(0, id, Ordering::Relaxed, Ordering::Relaxed)
                {
                    Ok(_) => id,
                    Err(given) => given,
                }
            }
            id => id,
        }
    }
}

impl<T: Cacheable> Drop for CacheKey<T> {
    fn drop(&mut self) {
        let id = self.get();
        if id == 0 {
            return;
        }
        let stale = T::read_cache()
            .try_with(|slot| {
                let mut slot = slot.try_borrow_mut().ok()?;
                if slot.as_ref()?.id == id {
                    slot.take()
                } else {
                    None
                }
            })
            .ok()
            .flatten();
        // Dropped after releasing the slot: its destructors are anyone's code.
        drop(stale);
    }
}
