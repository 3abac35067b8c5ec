//! The locks of [`sync`](super), with one signature in every world: `parking_lot`'s in
//! production, the model checker's (loom's, or shuttle's) under `--cfg shared_headers_loom`.
//!
//! Under the model checkers these are the stand-ins for `parking_lot`'s locks, and they are
//! no more than a wrapper: the model's own `Mutex` and `RwLock`, whose `lock`, `read` and
//! `write` unwrap a poisoned lock instead of returning an error (a panicking writer publishes
//! nothing, so there is nothing to poison; `parking_lot` does not poison either), so that the
//! code that locks is the same in every world (as tokio does with its loom locks).

#[cfg(shared_headers_loom)]
use super::model;

/// A mutex whose `lock` has the same signature in every world and never reports poisoning:
/// a panicking writer publishes nothing, so there is nothing to poison.
#[derive(Debug, Default)]
pub(crate) struct Mutex<T> {
    #[cfg(not(shared_headers_loom))]
    inner: parking_lot::Mutex<T>,
    #[cfg(shared_headers_loom)]
    inner: model::sync::Mutex<T>,
}

#[cfg(not(shared_headers_loom))]
pub(crate) type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;
#[cfg(shared_headers_loom)]
pub(crate) type MutexGuard<'a, T> = model::sync::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Self {
            #[cfg(not(shared_headers_loom))]
            inner: parking_lot::Mutex::new(value),
            #[cfg(shared_headers_loom)]
            inner: model::sync::Mutex::new(value),
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

    /// The lock if nobody holds it now (`None` when held).
    #[cfg_attr(not(feature = "server"), allow(dead_code))] // the admission's probe only
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        #[cfg(not(shared_headers_loom))]
        {
            self.inner.try_lock()
        }
        #[cfg(shared_headers_loom)]
        {
            match self.inner.try_lock() {
                Ok(guard) => Some(guard),
                Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => None,
            }
        }
    }
}

/// The `Locked` cell's lock (see [`Strategy`](super::Strategy)).
#[cfg(not(shared_headers_loom))]
pub(super) type RwLock<T> = parking_lot::RwLock<T>;
#[cfg(shared_headers_loom)]
pub(super) type RwLock<T> = model::sync::RwLock<T>;

#[cfg(not(shared_headers_loom))]
pub(super) fn read_lock<T>(lock: &RwLock<T>) -> parking_lot::RwLockReadGuard<'_, T> {
    lock.read()
}
#[cfg(shared_headers_loom)]
pub(super) fn read_lock<T>(lock: &RwLock<T>) -> model::sync::RwLockReadGuard<'_, T> {
    lock.read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
#[cfg(not(shared_headers_loom))]
pub(super) fn write_lock<T>(lock: &RwLock<T>) -> parking_lot::RwLockWriteGuard<'_, T> {
    lock.write()
}
#[cfg(shared_headers_loom)]
pub(super) fn write_lock<T>(lock: &RwLock<T>) -> model::sync::RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(not(shared_headers_loom))]
pub(super) fn try_write_lock<T>(lock: &RwLock<T>) -> Option<parking_lot::RwLockWriteGuard<'_, T>> {
    lock.try_write()
}
#[cfg(shared_headers_loom)]
pub(super) fn try_write_lock<T>(lock: &RwLock<T>) -> Option<model::sync::RwLockWriteGuard<'_, T>> {
    lock.try_write().ok()
}
