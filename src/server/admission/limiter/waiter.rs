//! One queued request ([`Waiter`]): its state (one word, moved once from [`WAITING`], by
//! dispatch or by the waiter leaving), its waker, and what dispatch does with it
//! ([`Verdict`]).
//!
//! It decides nothing of admission: the judge is the caller's, and when a state moves is
//! the protocol's ([`permits`](super::permits)). It relies on `crate::sync` alone: the state
//! is stored before the waker is taken, and [`Waiter::poll`] registers its waker and then
//! reads the state again, so a state set between its two reads is never missed.

use std::task::{Context, Poll, Waker};
use std::time::Instant;

use crate::sync::{AtomicBool, AtomicUsize, Mutex, Ordering};

/// Waiting in the queue.
pub const WAITING: usize = 0;
/// A permit was handed to the waiter.
pub const GRANTED: usize = 1;
/// Shed: its deadline cannot be met; answer it now.
pub const SHED: usize = 2;
/// The waiter's future is gone.
pub const GONE: usize = 4;
/// Its deadline passed while it waited: out of the queue, uncounted; the deadline's timer
/// answers it (a timeout, once).
pub const EXPIRED: usize = 8;

/// How many waiters past a spared one dispatch looks at for one that can finish in time.
pub const LOOK_AHEAD: usize = 16;

/// What dispatch does with the earliest waiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Give it a permit.
    Grant,
    /// Shed it (state [`SHED`]).
    Shed,
    /// Its deadline passed: out of the queue (state [`EXPIRED`]), answered by its timer.
    Expire,
    /// Doomed but spared (the cap, or counted once already): the permit goes to the first
    /// of the next [`LOOK_AHEAD`] waiters that gets [`Grant`](Verdict::Grant), else to the
    /// first spared one. Never left waiting with a permit free.
    Spare,
}

/// One queued request.
#[derive(Debug)]
pub struct Waiter {
    pub(super) state: AtomicUsize,
    pub(super) waker: Mutex<Option<Waker>>,
    pub(super) key: (u64, u64),
    /// When its caller stops waiting (`None`: no deadline, served after every deadline).
    pub deadline: Option<Instant>,
    /// Already counted as doomed (at arrival or by an earlier dispatch): counted once.
    pub counted: AtomicBool,
    /// Its route's hash.
    pub route: u64,
    /// When it entered the queue (its sojourn, read at its grant:
    /// [`Sojourn`](super::queue::Sojourn)).
    pub(super) since: Instant,
}

impl Waiter {
    /// The waiter's state.
    pub fn state(&self) -> usize {
        self.state.load(Ordering::SeqCst)
    }

    pub(super) fn set(&self, state: usize) {
        self.state.store(state, Ordering::SeqCst);
        let waker = self.waker.lock().take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// The state once it is decided (not [`WAITING`]); else registers `cx`'s waker and looks
    /// again.
    pub fn poll(&self, cx: &mut Context<'_>) -> Poll<usize> {
        let decided = |s: usize| s != WAITING;
        let state = self.state();
        if decided(state) {
            return Poll::Ready(state);
        }
        {
            let mut slot = self.waker.lock();
            match &*slot {
                Some(current) if current.will_wake(cx.waker()) => {}
                _ => *slot = Some(cx.waker().clone()),
            }
        }
        let state = self.state();
        if decided(state) {
            Poll::Ready(state)
        } else {
            Poll::Pending
        }
    }
}
