//! The once-set cell (see [`OnceCell`]): a part of [`sync`](super), whose model primitives
//! it uses under loom and shuttle.

#[cfg(shared_headers_loom)]
use super::model;

/// A cell written at most once (the first `set` wins) whose value readers clone out.
///
/// `set` releases and `get` acquires, in every world: a thread that sees the value also sees what
/// the writer did before `set`, and a thread whose `set` loses has seen the winner's value.
///
/// Under loom the stand-in gives **no ordering at all** (less than `std::sync::OnceLock`), which
/// is what lets a model catch a weakened ordering elsewhere: the only thing loom sees is a state
/// word (`EMPTY` → `RUNNING` → `SET`) whose accesses are all Relaxed (a losing `set` waits until
/// the winner completes, as `OnceLock::set` blocks). std's `Once` uses an Acquire CAS, a Release
/// completion and Acquire loads; with those in the stand-in, and with each of the six weakened to
/// Relaxed one at a time, every loom model passed: the crate never relies on the cell's own
/// ordering (the record is read after the commit lock or the `visible` flag, `conn`'s cause
/// after the DEAD bit's Acquire), so the stand-in does not give it, and a model fails if a
/// reader of the cell loses that other ordering. The value itself is kept in a
/// real `std::sync::OnceLock`, used only as storage: loom runs its threads one at a time on one OS
/// thread and does not model `std` atomics, so that lock adds no happens-before loom could credit,
/// and the state word guarantees the value is written before any thread reads it. (A
/// `loom::sync::Mutex` here would add a happens-before on every `get`, which hid weakened
/// orderings in `conn`.) No `unsafe` is needed.
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
            // Every access to the state word is Relaxed: see the type's docs.
            use model::sync::atomic::Ordering::Relaxed;
            use once_state::{EMPTY, RUNNING, SET};
            match self
                .state
                .compare_exchange(EMPTY, RUNNING, Relaxed, Relaxed)
            {
                Ok(_) => {
                    let stored = self.value.set(value).is_ok();
                    debug_assert!(stored, "only the RUNNING thread stores");
                    self.state.store(SET, Relaxed);
                    true
                }
                Err(_) => {
                    // Like `OnceLock::set`: wait for the winner to complete, then lose.
                    while self.state.load(Relaxed) != SET {
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
            if self.state.load(model::sync::atomic::Ordering::Relaxed) == once_state::SET {
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
            if self.state.load(model::sync::atomic::Ordering::Relaxed) == once_state::SET {
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
