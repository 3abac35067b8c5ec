//! The only module that names `arc_swap`, `parking_lot` or `loom`.
//!
//! Everything in the crate's core, `server` and `conn` modules imports its synchronization
//! primitives from here (the `client` room's refresher uses tokio's and `std`'s directly, outside
//! the loom models), so that one `--cfg` switches them between three worlds:
//!
//! * **default**: each published value lives, by its [`Strategy`], either in an
//!   [`arc_swap::ArcSwap`] (lock-free reads, O(threads) store and drop: long-lived handles) or
//!   in a `parking_lot::RwLock<Arc<T>>` whose critical sections are one reference-count
//!   increment or one pointer swap (O(1) store and drop: request-scoped handles); writers are
//!   serialized by a [`parking_lot::Mutex`];
//! * **`rwlock-backend` feature**: every published value uses the lock. This is a safety valve
//!   for users who prefer not to depend on arc-swap's internals; the semantics are identical and
//!   the same test suite runs against it;
//! * **`--cfg shared_headers_loom`**: a loom-visible stand-in (`loom::sync::RwLock<Arc<T>>` for
//!   the published value, `loom::sync::Mutex` for writers, loom atomics, and a once-cell built
//!   from a loom atomic state word that gives no more ordering than `std::sync::OnceLock`).
//!
//! loom cannot look inside arc-swap (its hazard-pointer debts use plain `std` atomics that loom
//! does not model), so **loom proves this crate's protocol** (what is published, when, under which
//! lock, and what a reader may observe), **while arc-swap is trusted for its own**: that a `load`
//! returns some value that was `store`d and never a freed one. The stand-in offers exactly the
//! guarantees that arc-swap documents (linearizable `load`/`store` of whole `Arc`s), no more.
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
//! interleaving; loom cannot model arc-swap's internals (see above), and the crate does not run
//! Miri over arc-swap. The floor in `Cargo.toml` is what excludes the bug.
//!
//! The `rwlock-backend` feature publishes through `parking_lot::RwLock<Arc<T>>` instead: reads
//! then take a read lock (one reference-count increment under it) and can wait for a writer's
//! pointer swap. It does **not** remove arc-swap from the dependency graph (the dependency is
//! not optional, so it is still compiled and linked); it only stops the crate from calling it.

use std::sync::Arc;

#[cfg(not(shared_headers_loom))]
#[allow(unused_imports)]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

#[cfg(shared_headers_loom)]
#[allow(unused_imports)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

// ---------------------------------------------------------------------------------------------
// Writer lock
// ---------------------------------------------------------------------------------------------

/// A mutex whose `lock` has the same signature in every world and never reports poisoning:
/// a panicking writer publishes nothing, so there is nothing to poison.
#[derive(Debug, Default)]
pub(crate) struct Mutex<T> {
    #[cfg(not(shared_headers_loom))]
    inner: parking_lot::Mutex<T>,
    #[cfg(shared_headers_loom)]
    inner: loom::sync::Mutex<T>,
}

#[cfg(not(shared_headers_loom))]
pub(crate) type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;
#[cfg(shared_headers_loom)]
pub(crate) type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Self {
            #[cfg(not(shared_headers_loom))]
            inner: parking_lot::Mutex::new(value),
            #[cfg(shared_headers_loom)]
            inner: loom::sync::Mutex::new(value),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        #[cfg(not(shared_headers_loom))]
        {
            self.inner.lock()
        }
        #[cfg(shared_headers_loom)]
        {
            self.inner
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        }
    }
}

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
///   for a concurrent pointer swap. For request-scoped cells, made, written and dropped per
///   request.
///
/// With the `rwlock-backend` feature every cell is `Locked`; under loom every cell is the loom
/// stand-in (`loom::sync::RwLock<Arc<T>>`, the `Locked` protocol with loom's primitives).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Strategy {
    LockFree,
    Locked,
}

#[cfg(not(shared_headers_loom))]
type RwLock<T> = parking_lot::RwLock<T>;
#[cfg(shared_headers_loom)]
type RwLock<T> = loom::sync::RwLock<T>;

#[cfg(not(shared_headers_loom))]
fn read_lock<T>(lock: &RwLock<T>) -> parking_lot::RwLockReadGuard<'_, T> {
    lock.read()
}
#[cfg(shared_headers_loom)]
fn read_lock<T>(lock: &RwLock<T>) -> loom::sync::RwLockReadGuard<'_, T> {
    lock.read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
#[cfg(not(shared_headers_loom))]
fn write_lock<T>(lock: &RwLock<T>) -> parking_lot::RwLockWriteGuard<'_, T> {
    lock.write()
}
#[cfg(shared_headers_loom)]
fn write_lock<T>(lock: &RwLock<T>) -> loom::sync::RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The `Locked` strategy: the value, and a count of stores made under the same write lock (so
/// a [`Cached`] reader can tell, with one atomic load, whether its copy is still current).
struct LockedCell<T> {
    value: RwLock<Arc<T>>,
    stores: AtomicU64,
}

enum Cell<T> {
    #[cfg(all(not(shared_headers_loom), not(feature = "rwlock-backend")))]
    LockFree(arc_swap::ArcSwap<T>),
    Locked(LockedCell<T>),
}

/// A cell holding one `Arc<T>` that readers load and writers replace as a whole.
pub(crate) struct Published<T> {
    cell: Cell<T>,
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

impl<T> Published<T> {
    pub(crate) fn new(value: Arc<T>, strategy: Strategy) -> Self {
        let cell = match strategy {
            #[cfg(all(not(shared_headers_loom), not(feature = "rwlock-backend")))]
            Strategy::LockFree => Cell::LockFree(arc_swap::ArcSwap::new(value)),
            _ => Cell::Locked(LockedCell {
                value: RwLock::new(value),
                stores: AtomicU64::new(0),
            }),
        };
        Published { cell }
    }

    /// The strategy this cell actually uses (`Locked` for every cell with `rwlock-backend` or
    /// under loom).
    #[allow(dead_code)]
    pub(crate) fn strategy(&self) -> Strategy {
        match &self.cell {
            #[cfg(all(not(shared_headers_loom), not(feature = "rwlock-backend")))]
            Cell::LockFree(_) => Strategy::LockFree,
            Cell::Locked(_) => Strategy::Locked,
        }
    }

    /// The `Locked` cell, if this is one.
    #[inline]
    fn locked_cell(&self) -> Option<&LockedCell<T>> {
        match &self.cell {
            Cell::Locked(cell) => Some(cell),
            #[cfg(all(not(shared_headers_loom), not(feature = "rwlock-backend")))]
            Cell::LockFree(_) => None,
        }
    }

    /// The current value, for a short borrow. Never blocks on a writer with `LockFree`.
    #[inline]
    pub(crate) fn load(&self) -> Loaded<T> {
        let inner = match &self.cell {
            #[cfg(all(not(shared_headers_loom), not(feature = "rwlock-backend")))]
            Cell::LockFree(swap) => LoadedInner::Guard(swap.load()),
            Cell::Locked(cell) => LoadedInner::Owned(Arc::clone(&read_lock(&cell.value))),
        };
        Loaded { inner }
    }

    /// Runs `f` on the current value. `f` must be the crate's own code and must not touch this
    /// cell: with `Locked` it runs under the read lock (saving a reference-count round trip).
    #[inline]
    pub(crate) fn peek<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        match &self.cell {
            #[cfg(all(not(shared_headers_loom), not(feature = "rwlock-backend")))]
            Cell::LockFree(swap) => f(&swap.load()),
            Cell::Locked(cell) => f(&read_lock(&cell.value)),
        }
    }

    /// The current value as an owned `Arc`.
    #[inline]
    pub(crate) fn load_full(&self) -> Arc<T> {
        match &self.cell {
            #[cfg(all(not(shared_headers_loom), not(feature = "rwlock-backend")))]
            Cell::LockFree(swap) => swap.load_full(),
            Cell::Locked(cell) => Arc::clone(&read_lock(&cell.value)),
        }
    }

    /// Publishes `value`; readers that load afterwards see it. Returns the previous value, for
    /// the caller to drop (unlocked).
    #[inline]
    pub(crate) fn swap(&self, value: Arc<T>) -> Arc<T> {
        match &self.cell {
            #[cfg(all(not(shared_headers_loom), not(feature = "rwlock-backend")))]
            Cell::LockFree(swap) => swap.swap(value),
            Cell::Locked(cell) => {
                let mut slot = write_lock(&cell.value);
                let old = std::mem::replace(&mut *slot, value);
                // Under the write lock: a cached reader that sees the old count holds a value
                // that was current when it loaded the count.
                // Only a holder of the write lock changes the count: no read-modify-write needed.
                let stores = cell.stores.load(Ordering::Relaxed);
                cell.stores.store(stores + 1, Ordering::Release);
                drop(slot);
                old
            }
        }
    }

    /// Takes the value out of a cell nobody else can reach.
    pub(crate) fn into_inner(self) -> Arc<T> {
        match self.cell {
            #[cfg(all(not(shared_headers_loom), not(feature = "rwlock-backend")))]
            Cell::LockFree(swap) => swap.into_inner(),
            #[cfg(not(shared_headers_loom))]
            Cell::Locked(cell) => cell.value.into_inner(),
            #[cfg(shared_headers_loom)]
            Cell::Locked(cell) => cell
                .value
                .into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        }
    }
}

impl<T> std::fmt::Debug for Published<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Published").finish_non_exhaustive()
    }
}

/// What owns a [`Published`] cell (a handle): a [`Cached`] reader keeps a clone of it, and so
/// the cell, alive.
pub(crate) trait Holder {
    type Item;
    fn published(&self) -> &Published<Self::Item>;
}

/// Lends arc-swap's `Cache` the `ArcSwap` inside a holder whose cell is `LockFree`.
#[cfg(all(not(shared_headers_loom), not(feature = "rwlock-backend")))]
struct SwapOf<H>(H);

#[cfg(all(not(shared_headers_loom), not(feature = "rwlock-backend")))]
impl<H: Holder> std::ops::Deref for SwapOf<H> {
    type Target = arc_swap::ArcSwap<H::Item>;

    #[inline]
    fn deref(&self) -> &Self::Target {
        match &self.0.published().cell {
            Cell::LockFree(swap) => swap,
            // A cell's strategy is fixed when it is made; `SwapOf` is only made for `LockFree`.
            Cell::Locked(_) => unreachable!("SwapOf made for a Locked cell"),
        }
    }
}

/// One reader's cached copy of a [`Published`] value: `load` costs one atomic load while the
/// value is unchanged, and keeps the cached `Arc` (so that version's value) alive until a
/// `load` that finds a newer one.
pub(crate) struct Cached<H: Holder> {
    inner: CachedInner<H>,
}

enum CachedInner<H: Holder> {
    #[cfg(all(not(shared_headers_loom), not(feature = "rwlock-backend")))]
    LockFree(arc_swap::Cache<SwapOf<H>, Arc<H::Item>>),
    Locked {
        holder: H,
        stores: u64,
        value: Arc<H::Item>,
    },
}

impl<H: Holder> Cached<H> {
    /// A cache of `holder`'s cell, filled with its current value.
    pub(crate) fn new(holder: H) -> Self {
        let inner = match &holder.published().cell {
            #[cfg(all(not(shared_headers_loom), not(feature = "rwlock-backend")))]
            Cell::LockFree(_) => CachedInner::LockFree(arc_swap::Cache::new(SwapOf(holder))),
            Cell::Locked(cell) => {
                let (stores, value) = {
                    let guard = read_lock(&cell.value);
                    (cell.stores.load(Ordering::Acquire), Arc::clone(&guard))
                };
                CachedInner::Locked {
                    holder,
                    stores,
                    value,
                }
            }
        };
        Cached { inner }
    }

    /// The current value, refreshing the cache if a newer one was published.
    #[inline]
    pub(crate) fn load(&mut self) -> &Arc<H::Item> {
        match &mut self.inner {
            #[cfg(all(not(shared_headers_loom), not(feature = "rwlock-backend")))]
            CachedInner::LockFree(cache) => cache.load(),
            CachedInner::Locked {
                holder,
                stores,
                value,
            } => {
                let Some(cell) = holder.published().locked_cell() else {
                    unreachable!("a Locked cache is made from a Locked cell")
                };
                // `stores` changes only under the write lock, together with the value: seeing
                // the count of the cached value means the cached value is still the current one.
                if cell.stores.load(Ordering::Acquire) != *stores {
                    let (now, current) = {
                        let guard = read_lock(&cell.value);
                        (cell.stores.load(Ordering::Acquire), Arc::clone(&guard))
                    };
                    *stores = now;
                    // The old value may be the last reference to its version: it is dropped
                    // here, unlocked (its headers' destructors may be anyone's code).
                    drop(std::mem::replace(value, current));
                }
                value
            }
        }
    }
}

impl<H: Holder> std::fmt::Debug for Cached<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cached").finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------------------------
// Once-set cell
// ---------------------------------------------------------------------------------------------

/// A cell written at most once (the first `set` wins) whose value readers clone out.
///
/// `set` releases and `get` acquires, in every world: a thread that sees the value also sees what
/// the writer did before `set`, and a thread whose `set` loses has seen the winner's value.
///
/// Under loom the stand-in gives **no more ordering than `std::sync::OnceLock`**, which is what
/// lets a model catch a weakened ordering elsewhere: the only synchronization loom sees is a state
/// word (`EMPTY` → `RUNNING` → `SET`) with the orderings of std's `Once` (an Acquire CAS to start,
/// a Release store on completion, Acquire loads to observe it; a losing `set` waits, with Acquire
/// loads, until the winner completes, as `OnceLock::set` blocks). The value itself is kept in a
/// real `std::sync::OnceLock`, used only as storage: loom runs its threads one at a time on one OS
/// thread and does not model `std` atomics, so that lock adds no happens-before loom could credit,
/// and the state word guarantees the value is written before any thread reads it. (A
/// `loom::sync::Mutex` here would add a happens-before on every `get`, which hid weakened
/// orderings in `conn`.) No `unsafe` is needed.
pub(crate) struct OnceCell<T> {
    #[cfg(not(shared_headers_loom))]
    inner: std::sync::OnceLock<T>,
    #[cfg(shared_headers_loom)]
    state: loom::sync::atomic::AtomicU8,
    #[cfg(shared_headers_loom)]
    value: std::sync::OnceLock<T>,
}

#[cfg(shared_headers_loom)]
mod once_state {
    pub(super) const EMPTY: u8 = 0;
    pub(super) const RUNNING: u8 = 1;
    pub(super) const SET: u8 = 2;
}

impl<T> OnceCell<T> {
    pub(crate) fn new() -> Self {
        Self {
            #[cfg(not(shared_headers_loom))]
            inner: std::sync::OnceLock::new(),
            #[cfg(shared_headers_loom)]
            state: loom::sync::atomic::AtomicU8::new(once_state::EMPTY),
            #[cfg(shared_headers_loom)]
            value: std::sync::OnceLock::new(),
        }
    }

    /// Stores `value` unless a value is already stored; returns whether this call stored it.
    pub(crate) fn set(&self, value: T) -> bool {
        #[cfg(not(shared_headers_loom))]
        {
            self.inner.set(value).is_ok()
        }
        #[cfg(shared_headers_loom)]
        {
            use loom::sync::atomic::Ordering::{Acquire, Release};
            use once_state::{EMPTY, RUNNING, SET};
            match self
                .state
                .compare_exchange(EMPTY, RUNNING, Acquire, Acquire)
            {
                Ok(_) => {
                    let stored = self.value.set(value).is_ok();
                    debug_assert!(stored, "only the RUNNING thread stores");
                    self.state.store(SET, Release);
                    true
                }
                Err(_) => {
                    // Like `OnceLock::set`: wait for the winner to complete, then lose.
                    while self.state.load(Acquire) != SET {
                        loom::thread::yield_now();
                    }
                    false
                }
            }
        }
    }

    /// The stored value, borrowed, if any.
    #[inline]
    pub(crate) fn get_ref(&self) -> Option<&T> {
        #[cfg(not(shared_headers_loom))]
        {
            self.inner.get()
        }
        #[cfg(shared_headers_loom)]
        {
            if self.state.load(loom::sync::atomic::Ordering::Acquire) == once_state::SET {
                self.value.get()
            } else {
                None
            }
        }
    }
}

impl<T: Clone> OnceCell<T> {
    /// The stored value, if any.
    pub(crate) fn get(&self) -> Option<T> {
        #[cfg(not(shared_headers_loom))]
        {
            self.inner.get().cloned()
        }
        #[cfg(shared_headers_loom)]
        {
            if self.state.load(loom::sync::atomic::Ordering::Acquire) == once_state::SET {
                self.value.get().cloned()
            } else {
                None
            }
        }
    }
}

impl<T> std::fmt::Debug for OnceCell<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnceCell").finish_non_exhaustive()
    }
}
