//! The wall-clock deadline: one lazily started std thread per layer commits expired exchanges
//! at their deadline, whether or not the task serving the request is polled. Why a thread, and
//! the queue's design: `docs::internals`, "The deadline thread".

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::time::Instant;

use http::StatusCode;

use crate::exchange::{Exchange, Outcome, WeakExchange};

/// The smallest queue length that triggers a compaction.
const MIN_COMPACT: usize = 1024;

/// Owned by the layer's configuration (shared by its clones and services). Dropping the last
/// one lets the thread end once no live deadline is left.
pub(super) struct Timer {
    shared: Arc<Shared>,
    /// Whether the thread started (`false`: spawning failed; the future enforces the deadline
    /// when polled, as without a timer).
    started: OnceLock<bool>,
}

struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
}

struct Queue {
    entries: VecDeque<Entry>,
    compact_at: usize,
    /// Set when the `Timer` is dropped: no new entries will come.
    closing: bool,
    /// What the thread does, so that `arm` notifies it only when it must.
    thread: ThreadState,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ThreadState {
    /// Awake: it looks at the queue again before it waits.
    Running,
    /// Waiting until this instant (the head's deadline when it looked).
    WaitingUntil(Instant),
    /// Waiting for a notification (the queue was empty).
    WaitingForever,
}

struct Entry {
    deadline: Instant,
    exchange: WeakExchange,
    status: StatusCode,
}

impl Timer {
    pub(super) fn new() -> Self {
        Timer {
            shared: Arc::new(Shared {
                queue: Mutex::new(Queue {
                    entries: VecDeque::new(),
                    compact_at: MIN_COMPACT,
                    closing: false,
                    thread: ThreadState::Running,
                }),
                wake: Condvar::new(),
            }),
            started: OnceLock::new(),
        }
    }

    /// Commits `exchange` with [`Outcome::TimedOut`] (and `status` in the record) at
    /// `deadline`, unless it is committed or gone by then; then wakes the waker it registered.
    /// Returns `false` if the timer thread could not be started.
    pub(super) fn arm(&self, deadline: Instant, exchange: &Exchange, status: StatusCode) -> bool {
        let started = *self.started.get_or_init(|| {
            let shared = Arc::clone(&self.shared);
            std::thread::Builder::new()
                .name("shared-headers-deadline".into())
                .spawn(move || run(&shared))
                .is_ok()
        });
        if !started {
            return false;
        }
        let mut queue = lock(&self.shared.queue);
        // Entries of finished requests at the head go now (amortized O(1): each entry is
        // popped once): under a steady load the queue stays short and the exchanges'
        // allocations are freed while still in cache, not in a batch much later.
        while queue
            .entries
            .front()
            .is_some_and(|entry| entry.exchange.is_dead())
        {
            queue.entries.pop_front();
        }
        // Deadlines arrive in order, so the thread needs a notification only if it waits for
        // nothing, or (if the duration was shortened by a clone of the layer) for later.
        let notify = match queue.thread {
            ThreadState::Running => false,
            ThreadState::WaitingForever => true,
            ThreadState::WaitingUntil(at) => deadline < at,
        };
        queue.entries.push_back(Entry {
            deadline,
            exchange: exchange.downgrade(),
            status,
        });
        if queue.entries.len() >= queue.compact_at {
            queue.entries.retain(|entry| !entry.exchange.is_dead());
            queue.compact_at = MIN_COMPACT.max(2 * queue.entries.len());
        }
        if notify {
            queue.thread = ThreadState::Running;
        }
        drop(queue);
        if notify {
            self.shared.wake.notify_one();
        }
        true
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        lock(&self.shared.queue).closing = true;
        self.shared.wake.notify_one();
    }
}

impl std::fmt::Debug for Timer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timer")
            .field("started", &self.started.get())
            .finish_non_exhaustive()
    }
}

/// The queue's lock. Nothing panics while holding it (hooks run outside it), so a poisoned
/// lock still holds a consistent queue.
fn lock(queue: &Mutex<Queue>) -> std::sync::MutexGuard<'_, Queue> {
    queue.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The timer thread: sleeps until the head deadline, commits what expired, drops dead entries.
fn run(shared: &Shared) {
    let mut expired = Vec::new();
    let mut queue = lock(&shared.queue);
    loop {
        queue.thread = ThreadState::Running;
        let now = Instant::now();
        while let Some(head) = queue.entries.front() {
            if head.exchange.is_dead() {
                queue.entries.pop_front();
            } else if head.deadline <= now {
                expired.extend(queue.entries.pop_front());
            } else {
                break;
            }
        }
        if !expired.is_empty() {
            drop(queue);
            for entry in expired.drain(..) {
                fire(entry);
            }
            queue = lock(&shared.queue);
            continue;
        }
        queue = match queue.entries.front() {
            Some(head) => {
                let (deadline, wait) =
                    (head.deadline, head.deadline.saturating_duration_since(now));
                queue.thread = ThreadState::WaitingUntil(deadline);
                shared
                    .wake
                    .wait_timeout(queue, wait)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
            None if queue.closing => return,
            None => {
                queue.thread = ThreadState::WaitingForever;
                shared
                    .wake
                    .wait(queue)
                    .unwrap_or_else(PoisonError::into_inner)
            }
        };
    }
}

/// Commits one expired exchange (its `on_commit` hook runs here, its panic caught by the
/// exchange) and wakes its response future, which then answers the timeout.
fn fire(entry: Entry) {
    if let Some(exchange) = entry.exchange.upgrade() {
        if exchange
            .commit_with(Outcome::TimedOut, Some(entry.status))
            .is_ok()
        {
            exchange.wake();
        }
        // If this was the last clone, the exchange's drop (its late-writes report) runs here.
    }
}
