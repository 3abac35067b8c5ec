//! The only module that names `arc_swap`, `parking_lot`, `loom` or `shuttle`.
//!
//! Everything in the crate's core, `server` and `conn` modules imports its synchronization
//! primitives from here (the `client` room's refresher uses tokio's and `std`'s directly, outside
//! the loom models), so that one `--cfg` switches them between three worlds:
//!
//! * **default**: each published value lives, by its [`Strategy`], either in an
//!   [`arc_swap::ArcSwap`] (lock-free reads, O(threads) store and drop: long-lived handles) or
//!   in a `parking_lot::RwLock<Arc<T>>` whose critical sections are one reference-count
//!   increment or one pointer swap (O(1) store and drop: request-scoped handles), read through
//!   a per-thread cache ([`ReadCache`]) that takes no lock while it is current; writers are
//!   serialized by a [`parking_lot::Mutex`];
//! * **`rwlock-backend` feature**: every published value uses the lock. This is a safety valve
//!   for users who prefer not to depend on arc-swap's internals; the semantics are identical and
//!   the same test suite runs against it;
//! * **`--cfg shared_headers_loom`**: loom-visible stand-ins: for a `LockFree` cell one loom
//!   word with arc-swap's documented `SeqCst` and no more (`ModelSwap`), for a `Locked` cell
//!   `loom::sync::RwLock<Arc<T>>`, `loom::sync::Mutex` for writers, loom atomics, and a
//!   once-cell built from a loom atomic state word with `std::sync::OnceLock`'s orderings and
//!   no more. With
//!   `--cfg shared_headers_shuttle` as well, the same stand-ins are built on shuttle's primitives
//!   (randomized schedules, `shuttle-tests/`).
//!
//! loom cannot look inside arc-swap (its hazard-pointer debts use plain `std` atomics that loom
//! does not model), so **loom proves this crate's protocol** (what is published, when, under which
//! lock, and what a reader may observe), **while arc-swap is trusted for its own**: that a `load`
//! returns some value that was `store`d and never a freed one. The stand-in offers exactly the
//! guarantees that arc-swap documents (one `SeqCst` operation per `load`/`store` of whole
//! `Arc`s), no more.
//!
//! # What the crate trusts arc-swap for, and its soundness record
//!
//! On the default backend every read is an `ArcSwap::load` and every publish an
//! `ArcSwap::store`, so the crate relies on arc-swap for memory safety: a `load` returns a value
//! that was `store`d *into that same instance* and is still alive. arc-swap's record on that:
//!
//! * **1.9.0** promoted orderings whose "original proofs [were] based on wrong reading of
//!   standard" (arc-swap #198, #200): earlier releases relied on orderings the C++/Rust memory
//!   model does not give;
//! * **1.9.4** fixed a use-after-free (arc-swap #214);
//! * **1.9.5** fixed `load` returning a value stored into a *different* instance after the
//!   address of a freed instance was reused (arc-swap #210). The server layer creates and frees
//!   two handles per request, which is exactly that pattern: the worst case is a logger reading
//!   another request's headers.
//!
//! `Cargo.toml` therefore requires `arc-swap = "1.9.5"`, the first release without a known
//! memory-safety bug; `Cargo.lock` does not reach users, so the floor is in the requirement.
//! `tests/handle_churn.rs` runs the #210 pattern (handles tagged with their own identity,
//! created, loaded across threads and freed at a high rate) and checks that no load returns
//! another handle's state. It is a guard on the pattern, not a reproducer and not a proof: run
//! against arc-swap 1.9.4 (the last release with #210) it passed too, since the bug needs a rare
//! interleaving; loom cannot model arc-swap's internals (see above). `scripts/miri` runs the pattern (small) under Miri, over arc-swap's real code, on several
//! schedules; neither is a proof. The floor in `Cargo.toml` is what excludes the bug.
//!
//! The `rwlock-backend` feature publishes through `parking_lot::RwLock<Arc<T>>` instead: reads
//! then take a read lock (one reference-count increment under it) and can wait for a writer's
//! pointer swap. It does **not** remove arc-swap from the dependency graph (the dependency is
//! not optional, so it is still compiled and linked); it only stops the crate from calling it.

use std::sync::Arc;

#[cfg(not(shared_headers_loom))]
#[allow(unused_imports)]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};

/// The model checker's primitives: loom's, or, under `--cfg shared_headers_shuttle` (always
/// together with `--cfg shared_headers_loom`: the same stand-ins, scheduled by shuttle instead
/// of explored by loom), shuttle's. shuttle's atomics are sequentially consistent whatever the
/// ordering (it explores schedules, not weak memory), so the shuttle world checks the protocol's
/// interleavings, and the loom world its orderings.
#[cfg(all(shared_headers_loom, not(shared_headers_shuttle)))]
use loom as model;
#[cfg(shared_headers_shuttle)]
use shuttle as model;

/// loom's fence (loom models `Acquire` fences). shuttle's atomics are sequentially consistent
/// and it has no fence of its own: there, `std`'s, which adds nothing shuttle could see.
#[cfg(all(shared_headers_loom, not(shared_headers_shuttle)))]
pub(crate) use loom::sync::atomic::fence;
#[cfg(shared_headers_loom)]
#[allow(unused_imports)]
pub(crate) use model::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(shared_headers_shuttle)]
pub(crate) use std::sync::atomic::fence;

// The writer lock and the `Locked` cell's lock, one signature in every world: `sync/locks.rs`.
mod locks;

pub(crate) use locks::{Mutex, MutexGuard};
use locks::{RwLock, read_lock, try_write_lock, write_lock};

// ---------------------------------------------------------------------------------------------
// Published value
// ---------------------------------------------------------------------------------------------

/// How a [`Published`] cell publishes: chosen per cell when it is made.
///
/// * `LockFree`: an [`arc_swap::ArcSwap`]. Loads never wait for a store, but every `store` and
///   the drop of the cell walk one debt node per thread that ever loaded any `ArcSwap` in the
///   process: O(threads). For long-lived cells read by many threads and rarely written.
/// * `Locked`: a `parking_lot::RwLock<Arc<T>>` whose critical sections are a reference-count
///   increment (load) or a pointer swap (store): O(1) store and drop, and a load waits at most
///   for a concurrent pointer swap. `peek` and `load_full` go through the reading thread's
///   [`ReadCache`] and take no lock while it holds the current value. For request-scoped
///   cells, made, written and dropped per request.
///
/// With the `rwlock-backend` feature every cell is `Locked`; under loom every cell is the loom
/// stand-in (`loom::sync::RwLock<Arc<T>>`, the `Locked` protocol with loom's primitives).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Strategy {
    LockFree,
    Locked,
}

/// A `Locked` cell's swap when a reader handed a version back: that version goes to the caller,
/// to free (or reuse) unlocked. The cell's reference to the replaced one is dropped here; the
/// writer's own reference (the writer lock's slot) keeps it alive, so this frees nothing unless
/// the caller holds no reference of its own. Out of line: the swap's usual path stays short.
#[cold]
#[inline(never)]
fn handed_back<T>(replaced: Arc<T>, returned: Arc<T>) -> Arc<T> {
    drop(replaced);
    returned
}

/// What a `Locked` cell's lock guards.
struct LockedValue<T> {
    /// The published value.
    current: Arc<T>,
    /// A replaced value handed back by the reader that held its last reference (in its read
    /// cache): the next `swap` returns it to the writer, who frees it (or reuses its
    /// allocation) unlocked, instead of the reader freeing a whole map in the middle of a read.
    /// Without it, a reader whose cache held a version the writer then replaced would free
    /// that version on its next read: a 48-header map freed while the writer clones the same
    /// values (their reference counts) put the `Locked` read p99 under a writer at 3.9-4.5 µs
    /// instead of about 0.6 µs (`read_latency`).
    returned: Option<Arc<T>>,
}

/// The `Locked` strategy's cell.
struct LockedCell<T: Cacheable> {
    value: RwLock<LockedValue<T>>,
    /// This cell's identity in the threads' read caches (see [`ReadCache`]).
    key: CacheKey<T>,
}

// The per-thread read cache of `Locked` cells: `sync/read_cache.rs`.
mod read_cache;

#[cfg(doc)]
use read_cache::ReadCache;
#[cfg(shared_headers_loom)]
pub(crate) use read_cache::model_thread_local;
pub(crate) use read_cache::read_cache;
use read_cache::{CacheKey, put_cache, with_cached};
pub(crate) use read_cache::{Cacheable, LocalKey, Slot};

enum Cell<T: Cacheable> {
    #[cfg(all(not(shared_headers_loom), not(feature = "rwlock-backend")))]
    LockFree(arc_swap::ArcSwap<T>),
    #[cfg(shared_headers_loom)]
    LockFree(ModelSwap<T>),
    Locked(LockedCell<T>),
}

// The loom stand-in for arc-swap: `sync/model_swap.rs`.
#[cfg(shared_headers_loom)]
mod model_swap;
#[cfg(shared_headers_loom)]
use model_swap::ModelSwap;

/// A cell holding one `Arc<T>` that readers load and writers replace as a whole.
pub(crate) struct Published<T: Cacheable> {
    cell: Cell<T>,
    /// Twice the number of completed swaps, plus one while a swap is in progress (a sequence
    /// count, whatever the strategy): a [`Cached`] reader compares it with the count of its
    /// copy, with one atomic load, to know whether its copy is still current. Changed only by
    /// the handle's writer (under its writer lock), so plain loads and stores suffice.
    stores: AtomicU64,
}

/// What [`Published::load`] returns: something that derefs to the current `T` and must not be
/// kept long (it may pin a slot of arc-swap's debt list).
pub(crate) struct Loaded<T> {
    inner: LoadedInner<T>,
}

enum LoadedInner<T> {
    #[cfg(all(not(shared_headers_loom), not(feature = "rwlock-backend")))]
    Guard(arc_swap::Guard<Arc<T>>),
    #[allow(dead_code)] // not built when only the lock-free branch is reachable
    Owned(Arc<T>),
}

impl<T> std::ops::Deref for Loaded<T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        match &self.inner {
            #[cfg(all(not(shared_headers_loom), not(feature = "rwlock-backend")))]
            LoadedInner::Guard(guard) => guard,
            LoadedInner::Owned(arc) => arc,
        }
    }
}

impl<T: Cacheable> Published<T> {
    pub(crate) fn new(value: Arc<T>, strategy: Strategy) -> Self {
        let cell = match strategy {
            #[cfg(all(not(shared_headers_loom), not(feature = "rwlock-backend")))]
            Strategy::LockFree => Cell::LockFree(arc_swap::ArcSwap::new(value)),
            #[cfg(shared_headers_loom)]
            Strategy::LockFree => Cell::LockFree(ModelSwap::new(value)),
            _ => Cell::Locked(LockedCell {
                value: RwLock::new(LockedValue {
                    current: value,
                    returned: None,
                }),
                key: CacheKey::new(),
            }),
        };
        Published {
            cell,
            stores: AtomicU64::new(0),
        }
    }

    /// The strategy this cell actually uses (`Locked` for every cell with `rwlock-backend` or
    /// under loom).
    #[allow(dead_code)]
    pub(crate) fn strategy(&self) -> Strategy {
        match &self.cell {
            #[cfg(all(not(shared_headers_loom), not(feature = "rwlock-backend")))]
            Cell::LockFree(_) => Strategy::LockFree,
            #[cfg(shared_headers_loom)]
            Cell::LockFree(_) => Strategy::LockFree,
            Cell::Locked(_) => Strategy::Locked,
        }
    }

    /// The current value, for a short borrow. Never blocks on a writer with `LockFree`; with
    /// `Locked`, takes the read lock (for a reference-count increment) and does not use the
    /// read cache: [`peek`](Self::peek) and [`load_full`](Self::load_full) do.
    #[inline]
    pub(crate) fn load(&self) -> Loaded<T> {
        let inner = match &self.cell {
            #[cfg(all(not(shared_headers_loom), not(feature = "rwlock-backend")))]
            Cell::LockFree(swap) => LoadedInner::Guard(swap.load()),
            #[cfg(shared_headers_loom)]
            Cell::LockFree(swap) => LoadedInner::Owned(swap.load_full()),
            Cell::Locked(cell) => LoadedInner::Owned(Arc::clone(&read_lock(&cell.value).current)),
        };
        Loaded { inner }
    }

    /// Runs `f` on the current value. `f` may be anyone's code (it may read this or other
    /// cells, and panic): with `LockFree` it runs on arc-swap's guard; with `Locked`, on this
    /// thread's cached value (no lock, no reference count) if it is current, else on an `Arc`
    /// loaded under the read lock and released before `f` runs (see [`ReadCache`]).
    #[inline]
    pub(crate) fn peek<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        match &self.cell {
            #[cfg(all(not(shared_headers_loom), not(feature = "rwlock-backend")))]
            Cell::LockFree(swap) => f(&swap.load()),
            #[cfg(shared_headers_loom)]
            Cell::LockFree(swap) => f(&swap.load_full()),
            Cell::Locked(cell) => self.peek_locked(cell, f),
        }
    }

    /// A `Locked` cell's [`peek`](Self::peek).
    #[inline]
    fn peek_locked<R>(&self, cell: &LockedCell<T>, f: impl FnOnce(&T) -> R) -> R {
        // Acquire: `consistent`'s first load (a miss uses it as the count "before").
        let stores = self.stores.load(Ordering::Acquire);
        let mut f = Some(f);
        let hit = with_cached(cell.key.get(), stores, |value| f.take().map(|f| f(value)));
        if let Some(Some(result)) = hit {
            return result;
        }
        let Some(f) = f else {
            unreachable!("`f` is taken only by a hit")
        };
        let (value, cacheable) = self.load_locked(cell, stores);
        let result = f(&value);
        if cacheable {
            self.cache(cell, stores, value);
        }
        result
    }

    /// Puts `value` (at count `stores`) in this thread's cache; a stale value of this cell that
    /// it replaces and holds the last reference to goes back to the cell for the writer to free
    /// (see [`LockedValue::returned`]), anything else is dropped here, unlocked.
    fn cache(&self, cell: &LockedCell<T>, stores: u64, value: Arc<T>) {
        let id = cell.key.get_or_give();
        let Some(mut stale) = put_cache(id, stores, value) else {
            return;
        };
        if stale.id == id && Arc::get_mut(&mut stale.value).is_some() {
            // The last reference: nobody can load it again (the cell holds another value).
            if let Some(mut locked) = try_write_lock(&cell.value) {
                if locked.returned.is_none() {
                    locked.returned = Some(stale.value);
                    return;
                }
            }
        }
        drop(stale);
    }

    /// A `Locked` cell's value under the read lock, and whether it is the value of count
    /// `before` (the count read before it, if no swap overlapped: [`consistent`]'s protocol).
    #[inline]
    fn load_locked(&self, cell: &LockedCell<T>, before: u64) -> (Arc<T>, bool) {
        let value = Arc::clone(&read_lock(&cell.value).current);
        // Relaxed, as `consistent`'s second load: the lock's acquire orders it after the value.
        let after = self.stores.load(Ordering::Relaxed);
        (value, before == after && before % 2 == 0)
    }

    /// The current value as an owned `Arc` (with `Locked`, from this thread's read cache if it
    /// is current: one reference-count increment and no lock).
    #[inline]
    pub(crate) fn load_full(&self) -> Arc<T> {
        match &self.cell {
            #[cfg(all(not(shared_headers_loom), not(feature = "rwlock-backend")))]
            Cell::LockFree(swap) => swap.load_full(),
            #[cfg(shared_headers_loom)]
            Cell::LockFree(swap) => swap.load_full(),
            Cell::Locked(cell) => {
                let stores = self.stores.load(Ordering::Acquire);
                if let Some(value) = with_cached(cell.key.get(), stores, Arc::clone) {
                    return value;
                }
                let (value, cacheable) = self.load_locked(cell, stores);
                if cacheable {
                    self.cache(cell, stores, Arc::clone(&value));
                }
                value
            }
        }
    }

    /// Publishes `value`; readers that load afterwards see it. Returns the previous value, for
    /// the caller to drop (unlocked).
    // Always inlined: out of line (it was once the `returned` hand-back made it longer) the
    // server layer's request cost grew by about 25 instructions (`callgrind-per-op
    // layer_timeout`).
    #[inline(always)]
    pub(crate) fn swap(&self, value: Arc<T>) -> Arc<T> {
        // Odd while the swap is in progress. The swap publishes with release (arc-swap's swap
        // is `SeqCst`; the lock's release), so whoever loads the new value also sees this odd
        // count: a cached reader then never keeps a copy older than a value its thread loaded
        // directly. Even again (release) once the new value is in: a reader that sees that
        // count sees that value.
        let stores = self.stores.load(Ordering::Relaxed);
        self.stores.store(stores + 1, Ordering::Relaxed);
        let old = match &self.cell {
            #[cfg(all(not(shared_headers_loom), not(feature = "rwlock-backend")))]
            Cell::LockFree(swap) => swap.swap(value),
            #[cfg(shared_headers_loom)]
            Cell::LockFree(swap) => swap.swap(value),
            Cell::Locked(cell) => {
                let mut locked = write_lock(&cell.value);
                let old = std::mem::replace(&mut locked.current, value);
                let returned = locked.returned.take();
                drop(locked);
                match returned {
                    None => old,
                    Some(returned) => handed_back(old, returned),
                }
            }
        };
        // The `Release` here matters for `LockFree`: a reader that sees the even count must
        // then load the new value from arc-swap. loom checks it with the `LockFree` stand-in
        // (`ModelSwap`, which gives only arc-swap's documented `SeqCst`):
        // `reader_sees_every_completed_write` and
        // `seal_in_place_keeps_every_snapshot_one_consistent_version` fail with it Relaxed (a
        // reader caches the old value under the new count). The Locked cell's lock would order
        // the value by itself. loom also checks the odd phase above (without it a reader falls
        // behind a direct read).
        self.stores.store(stores + 2, Ordering::Release);
        old
    }

    /// Takes the value out of a cell nobody else can reach.
    pub(crate) fn into_inner(self) -> Arc<T> {
        match self.cell {
            #[cfg(all(not(shared_headers_loom), not(feature = "rwlock-backend")))]
            Cell::LockFree(swap) => swap.into_inner(),
            #[cfg(shared_headers_loom)]
            Cell::LockFree(swap) => swap.into_inner(),
            #[cfg(not(shared_headers_loom))]
            Cell::Locked(cell) => cell.value.into_inner().current,
            #[cfg(shared_headers_loom)]
            Cell::Locked(cell) => {
                cell.value
                    .into_inner()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .current
            }
        }
    }
}

impl<T: Cacheable> std::fmt::Debug for Published<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Published").finish_non_exhaustive()
    }
}

/// What owns a [`Published`] cell (a handle): a [`Cached`] reader keeps a clone of it, and so
/// the cell, alive.
pub(crate) trait Holder {
    type Item: Cacheable;
    fn published(&self) -> &Published<Self::Item>;
}

/// One reader's cached copy of a [`Published`] value: `load` costs one atomic load (the cell's
/// sequence count) while the value is unchanged, and keeps the cached `Arc` (so that version's
/// value) alive until a `load` that finds a newer one.
pub(crate) struct Cached<H: Holder> {
    holder: H,
    /// The sequence count of `value` (always even), or `u64::MAX` if `value` was loaded while a
    /// swap was in progress (then the next `load` loads again).
    stores: u64,
    value: Arc<H::Item>,
}

/// A second reader at the same cached value: the pair (count, value) stays consistent.
impl<H: Holder + Clone> Clone for Cached<H> {
    fn clone(&self) -> Self {
        Cached {
            holder: self.holder.clone(),
            stores: self.stores,
            value: Arc::clone(&self.value),
        }
    }
}

impl<H: Holder> Cached<H> {
    /// A cache of `holder`'s cell, filled with its current value.
    pub(crate) fn new(holder: H) -> Self {
        let (stores, value) = consistent(holder.published());
        Cached {
            holder,
            stores,
            value,
        }
    }

    /// The current value, refreshing the cache if a newer one was published.
    #[inline]
    pub(crate) fn load(&mut self) -> &Arc<H::Item> {
        // Relaxed: a count equal to the cached one returns the cached value, which needs nothing
        // from the writer; a different one leads to `consistent`, whose own Acquire load of the
        // count (which reads this count or a later one) orders the value load after the
        // writer's even count (loom fails with `consistent`'s first load Relaxed). The result
        // is only compared, so no outcome of the program differs from an Acquire load here.
        if self.holder.published().stores.load(Ordering::Relaxed) != self.stores {
            let (stores, current) = consistent(self.holder.published());
            self.stores = stores;
            // The old value may be the last reference to its version: it is dropped here,
            // unlocked (its headers' destructors may be anyone's code).
            drop(std::mem::replace(&mut self.value, current));
        }
        &self.value
    }
}

/// The current value of `published` and its sequence count: the count read before and after
/// loading the value, if both are the same even number (no swap overlapped the load: the value
/// is the one of that count), else `u64::MAX` (a swap was in progress: the value is still a
/// whole, current one, but its count is unknown).
///
/// The first count load acquires, paired with the even count's Release in [`Published::swap`]:
/// a reader that reads count `2n` then loads the value of swap `n` or a later one (loom, with the
/// `LockFree` stand-in: `reader_sees_every_completed_write` and
/// `seal_in_place_keeps_every_snapshot_one_consistent_version` fail with it Relaxed).
///
/// The second count load must not read a count older than the value it follows: if the value
/// load returned swap `n`'s value, this load reads swap `n`'s odd count or a later one, so
/// `before != after` unless no swap overlapped. What orders it after the value load is an
/// `Acquire` fence, from what each publication documents, not from how it is built:
///
/// * `LockFree`: arc-swap documents that every `load` and `swap` "contains at least one
///   `SeqCst` atomic read-write operation", and its safe API lets a loader read the `T` that the
///   storer wrote, so the load reads, atomically, what the publishing swap wrote with a release
///   (its `SeqCst` operation) after this count's odd store. An `Acquire` fence after the load
///   turns that read, whatever its own ordering and whichever of arc-swap's load paths made it,
///   into a synchronization with the swap: the odd count happens-before this load. (arc-swap
///   1.9.5's loads happen to be acquire reads of the pointer themselves; that is not promised.)
/// * `Locked`: a miss takes the read lock, whose acquire does the same (a lock is documented
///   to), and the fence adds nothing; a hit returns the value cached at the count the hit
///   loaded (`before` or later), and this load reads that count or a later one (coherence).
///
/// On x86-64 an `Acquire` fence is no instruction at all (a compiler barrier); on ARMv8 a
/// `dmb ishld`. Its cost on x86-64 (`scripts/callgrind-per-op`) is in `docs::testing`'s table of
/// orderings.
/// What is at stake is small: a second load that read too old a count would cache a newer
/// value under an older count, which the next count load replaces (one extra reload).
#[inline]
fn consistent<T: Cacheable>(published: &Published<T>) -> (u64, Arc<T>) {
    let before = published.stores.load(Ordering::Acquire);
    let value = published.load_full();
    fence(Ordering::Acquire);
    let after = published.stores.load(Ordering::Relaxed);
    let stores = if before == after && before % 2 == 0 {
        before
    } else {
        u64::MAX
    };
    (stores, value)
}

impl<H: Holder> std::fmt::Debug for Cached<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cached").finish_non_exhaustive()
    }
}

// The once-set cell: `sync/once.rs`.
mod once;

pub(crate) use once::OnceCell;

#[cfg(all(test, not(shared_headers_loom)))]
mod tests;
