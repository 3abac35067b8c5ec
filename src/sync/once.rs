//! The once-set cell (see [`OnceCell`]): a part of [`sync`](super), whose model primitives
//! it uses under loom and shuttle.

#[cfg(shared_headers_loom)]
use super::model;

/// A cell written at most once (the first `set` wins) whose value readers clone out.
///
/// `set` releases and `get` acquires, in every world: a thread that sees the value also sees what
/// the writer did before `set`, and a thread whose `set` loses has seen the winner's value (it
/// waited for the winner's completion with an acquire, as `OnceLock::set` does).
///
/// Under loom the stand-in gives **what `std::sync::OnceLock` gives, and no more**: the only
/// thing loom sees is a state word (`EMPTY` → `RUNNING` → `SET`) with `std::sync::Once`'s
/// orderings: an Acquire CAS to start (Acquire on failure), a Release store on completion, and
/// Acquire loads in a losing `set`'s wait and in `get`/`get_ref` (`Once` documents that the
/// initializer's writes happen-before whoever sees it complete). No mutex: a
/// `loom::sync::Mutex` here would add a happens-before on every `get`, which the real cell does
/// not give, and which once hid weakened orderings in `conn`.
///
/// The crate relies on that ordering in one place: `conn`'s `mark_dead`, when its own `set`
/// lost (another thread recorded the first cause) but its `fetch_or` made the transition, reads
/// the winner's cause to fire `on_close` (`recorded_cause`), ordered by the losing `set`'s
/// acquire wait. Everywhere else the cell is read after another acquire (the exchange's record
/// after the commit lock or the `visible` flag, `conn`'s cause after the DEAD bit's Acquire).
/// (They must not be weakened to Relaxed because every model still passes: a "weakened, still
/// passes" that no model showed reaching a forbidden outcome is not evidence, and with them
/// Relaxed the stand-in no longer models the losing `set` above.)
///
/// The value itself is kept in a real `std::sync::OnceLock`, used only as storage: loom runs its
/// threads one at a time on one OS thread and does not model `std` atomics, so that lock adds no
/// happens-before loom could credit, and the state word guarantees the value is written before
/// any thread reads it. No `unsafe` is needed.
pub(crate) struct OnceCell<T> {
    #[cfg(not(shared_headers_loom))]
    inner: std::sync::OnceLock<T>,
    #[cfg(shared_headers_loom)]
    state: model::sync::atomic::AtomicU8,
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
            state: model::sync::atomic::AtomicU8::new(once_state::EMPTY),
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
            // `std::sync::Once`'s orderings: see the type's docs.
            use model::sync::atomic::Ordering::{Acquire, Release};
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
                        model::thread::yield_now();
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
            if self.state.load(model::sync::atomic::Ordering::Acquire) == once_state::SET {
                self.value.get()
            } else {
                None
            }
        }
    }
}

impl<T: Clone> OnceCell<T> {
    /// The stored value, if any.
    // Used by the `conn` room only (its recorded cause).
    #[cfg_attr(not(feature = "conn"), allow(dead_code))]
    pub(crate) fn get(&self) -> Option<T> {
        #[cfg(not(shared_headers_loom))]
        {
            self.inner.get().cloned()
        }
        #[cfg(shared_headers_loom)]
        {
            if self.state.load(model::sync::atomic::Ordering::Acquire) == once_state::SET {
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
