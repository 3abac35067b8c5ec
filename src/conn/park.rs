//! The handoff between a connection's I/O task and whoever marks the connection dead: the task
//! parks its waker here when its socket has nothing to give, and the death wakes it, so the
//! task fails its I/O at once instead of waiting for bytes that never come.

use std::task::Waker;

use super::health::ConnHealth;
use crate::sync::Mutex;

/// One waker slot. A connection's I/O is driven by one task (hyper's connection task polls
/// both reads and writes), so the last waker parked is the one to wake.
#[derive(Default)]
pub struct Parked {
    slot: Mutex<Option<Waker>>,
}

impl Parked {
    /// An empty slot.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parks `waker` unless `health` is dead; returns `false` (nothing parked) if it is.
    ///
    /// The check is made under the slot's lock, and [`wake`](Self::wake) takes the waker under
    /// the same lock after the death was published: either this call sees the death, or the
    /// waker it parked is taken and woken (loom: `loom-tests/tests/conn.rs`,
    /// `a_parked_reader_is_woken_by_death`; checking before taking the lock loses the wakeup,
    /// `park_check_outside_the_lock_loses_the_wakeup`).
    #[inline]
    pub fn park(&self, health: &ConnHealth, waker: &Waker) -> bool {
        let mut slot = self.slot.lock();
        if health.is_dead() {
            return false;
        }
        match &mut *slot {
            Some(parked) if parked.will_wake(waker) => {}
            other => *other = Some(waker.clone()),
        }
        true
    }

    /// [`park`](Self::park) for a task that keeps its own copy of the waker it parked last,
    /// `last`: when `last` wakes the same task as `waker`, nothing is locked. The slot then
    /// still holds that waker, or the death took it and woke it (so the task is polled again
    /// and sees the death): the slot is only ever emptied by [`wake`](Self::wake).
    ///
    /// loom: `loom-tests/tests/conn.rs`, `a_cached_park_is_woken_by_death`; a copy kept of a
    /// waker the slot never took loses the wakeup, `a_cache_of_an_unparked_waker_loses_the_wakeup`.
    #[inline(always)]
    pub fn park_cached(
        &self,
        health: &ConnHealth,
        waker: &Waker,
        last: &mut Option<Waker>,
    ) -> bool {
        if matches!(last, Some(last) if last.will_wake(waker)) {
            return true;
        }
        self.park_keeping(health, waker, last)
    }

    /// [`park_cached`](Self::park_cached) when `last` is not the same task's: park, and keep a
    /// copy of what was parked.
    #[inline(never)]
    fn park_keeping(&self, health: &ConnHealth, waker: &Waker, last: &mut Option<Waker>) -> bool {
        if !self.park(health, waker) {
            return false;
        }
        *last = Some(waker.clone());
        true
    }

    /// The negative control of the loom models: the same as [`park`](Self::park), but the
    /// death is checked before the lock is taken.
    #[cfg(shared_headers_loom)]
    pub fn park_checking_outside_the_lock(&self, health: &ConnHealth, waker: &Waker) -> bool {
        if health.is_dead() {
            return false;
        }
        let mut slot = self.slot.lock();
        *slot = Some(waker.clone());
        true
    }

    /// Wakes the parked waker, if any (called once the connection is dead).
    pub fn wake(&self) {
        let waker = self.slot.lock().take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// Registers `wake` in the health's own close slot, as `HealthIo::new` does (the user's
/// `on_close` slot stays free): for the loom models.
#[cfg(shared_headers_loom)]
pub fn on_close_wake(health: &ConnHealth, wake: impl FnOnce() + Send + 'static) {
    health.on_close_wake(wake);
}
