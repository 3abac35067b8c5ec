//! The wall-clock deadline: one std thread for the whole process commits expired exchanges at
//! their deadline, whether or not the task serving the request is polled. Why a thread, and the
//! queue's design: `docs::internals`, "The deadline thread".
//!
//! Every layer, every clone of a layer and every deadline length shares the one queue, a
//! binary heap ordered by deadline (then by arrival), so deadlines of any mix of lengths fire
//! in order; a push is O(log n) under one short lock. The thread runs no user code: a commit at
//! the deadline seals the exchange's handles and wakes its response future, which runs the
//! `on_commit` hook itself (`Exchange::announce`). So a hook that sleeps, blocks or panics
//! cannot delay another request's deadline, and cannot kill the thread.
//!
//! The same queue holds the looks at the response bodies that hold an admission's permits
//! ([`Watched`]: one entry per admission while one of its bodies streams): the thread looks
//! at them every 25 ms, and gives back the permit of a body that produced no frame for a
//! while (`server::admission`'s stall watch). That release
//! hands the permit to the next waiter (a wake-up), and with `count_only` may emit a
//! `tracing` event for a doomed waiter: the only code not the crate's that the thread can
//! reach, contained (a panic there is caught).

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::Instant;

use http::StatusCode;

use crate::exchange::{Exchange, Inner, WeakExchange, contain};

/// The smallest queue length that triggers a compaction.
const MIN_COMPACT: usize = 1024;

/// The process's deadline queue and its thread.
pub(super) struct Timer {
    queue: Mutex<Queue>,
    wake: Condvar,
    /// Whether the thread started (`false`: spawning failed; the futures enforce their
    /// deadlines when polled).
    started: OnceLock<bool>,
}

struct Queue {
    /// A min-heap of deadlines (`Reverse` of a max-heap).
    entries: BinaryHeap<Reverse<Entry>>,
    /// Arrival order, to keep equal deadlines in the order they were armed.
    next_seq: u64,
    compact_at: usize,
    /// What the thread does, so that `arm` notifies it only when it must.
    thread: ThreadState,
    /// Exchanges whose last reference the thread held after expiring them: dropped by the
    /// next `arm`, on a request's thread, as their drop may run user code (the hooks' state).
    last: Vec<Inner>,
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
    seq: u64,
    target: Target,
}

/// What an entry does at its deadline.
enum Target {
    /// Commits this exchange as timed out, with this status in the record.
    Expire(WeakExchange, StatusCode),
    /// Looks at this (the word it saw at its last look).
    Look(Weak<dyn Watched>, u64),
}

impl Target {
    /// Whether the entry can do nothing any more (its exchange or its watched thing gone).
    fn is_dead(&self) -> bool {
        match self {
            Target::Expire(exchange, _) => exchange.is_dead(),
            Target::Look(watched, _) => watched.strong_count() == 0,
        }
    }
}

/// Something the thread looks at every so often, until it says it is done.
pub(super) trait Watched: Send + Sync {
    /// A look, `seen` the word returned by the last (or given when armed): the instant of the
    /// next look and the word to give it, or `None` when done. Runs no user code and does not
    /// block (it runs on the thread).
    fn look(&self, seen: u64) -> Option<(Instant, u64)>;
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.deadline, self.seq) == (other.deadline, other.seq)
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.deadline, self.seq).cmp(&(other.deadline, other.seq))
    }
}

/// The process's timer, created at the first deadline.
pub(super) fn timer() -> &'static Timer {
    static TIMER: OnceLock<Timer> = OnceLock::new();
    TIMER.get_or_init(|| Timer {
        queue: Mutex::new(Queue {
            entries: BinaryHeap::new(),
            next_seq: 0,
            compact_at: MIN_COMPACT,
            thread: ThreadState::Running,
            last: Vec::new(),
        }),
        wake: Condvar::new(),
        started: OnceLock::new(),
    })
}

impl Timer {
    /// Commits `exchange` with [`Outcome::TimedOut`](crate::Outcome::TimedOut) (and `status`
    /// in the record) at `deadline`, unless it is committed or gone by then; then wakes the
    /// waker it registered. Returns `false` if the timer thread could not be started.
    pub(super) fn arm(
        &'static self,
        deadline: Instant,
        exchange: &Exchange,
        status: StatusCode,
    ) -> bool {
        self.push(deadline, Target::Expire(exchange.downgrade(), status))
    }

    /// Calls `watched.look(seen)` at `at`, and again when it asks (until it is gone or done).
    /// Returns `false` if the timer thread could not be started.
    pub(super) fn watch(&'static self, at: Instant, watched: Weak<dyn Watched>, seen: u64) -> bool {
        self.push(at, Target::Look(watched, seen))
    }

    fn push(&'static self, deadline: Instant, target: Target) -> bool {
        let started = *self.started.get_or_init(|| {
            std::thread::Builder::new()
                .name("shared-headers-deadline".into())
                .spawn(move || self.run())
                .is_ok()
        });
        if !started {
            return false;
        }
        let mut queue = self.lock();
        // Entries of finished requests at the head go now: under a steady load of one
        // duration the heap stays short, and the exchanges' allocations are freed while still
        // in cache.
        while queue
            .entries
            .peek()
            .is_some_and(|entry| entry.0.target.is_dead())
        {
            queue.entries.pop();
        }
        // The thread needs a notification only if it waits for nothing, or for later.
        let notify = match queue.thread {
            ThreadState::Running => false,
            ThreadState::WaitingForever => true,
            ThreadState::WaitingUntil(at) => deadline < at,
        };
        let seq = queue.next_seq;
        queue.next_seq = seq.wrapping_add(1);
        queue.entries.push(Reverse(Entry {
            deadline,
            seq,
            target,
        }));
        if queue.entries.len() >= queue.compact_at {
            queue.entries.retain(|entry| !entry.0.target.is_dead());
            queue.compact_at = MIN_COMPACT.max(2 * queue.entries.len());
        }
        if notify {
            queue.thread = ThreadState::Running;
        }
        let last = std::mem::take(&mut queue.last);
        drop(queue);
        if !last.is_empty() {
            contain(|| drop(last));
        }
        if notify {
            self.wake.notify_one();
        }
        true
    }

    /// The queue's lock. Nothing panics while holding it (no user code runs under it), so a
    /// poisoned lock still holds a consistent queue.
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The timer thread: sleeps until the head deadline, commits what expired, drops dead
    /// entries. It never ends (one parked thread for the process once a deadline was set).
    fn run(&self) {
        let mut expired = Vec::new();
        let mut last = Vec::new();
        let mut again = Vec::new();
        let mut queue = self.lock();
        loop {
            queue.thread = ThreadState::Running;
            let now = Instant::now();
            while let Some(head) = queue.entries.peek() {
                if head.0.target.is_dead() {
                    queue.entries.pop();
                } else if head.0.deadline <= now {
                    expired.extend(queue.entries.pop());
                } else {
                    break;
                }
            }
            if !expired.is_empty() {
                drop(queue);
                // Outside the lock: a commit takes the exchange's locks, and dropping the
                // last reference frees the exchange. No user code runs here (see the module
                // docs), so nothing here can stop the thread or make it late for long.
                for Reverse(entry) in expired.drain(..) {
                    match entry.target {
                        Target::Expire(exchange, status) => {
                            exchange.expire(status, &mut last);
                        }
                        Target::Look(watched, seen) => {
                            let next = watched.upgrade().and_then(|w| w.look(seen));
                            if let Some((at, seen)) = next {
                                again.push((at, Target::Look(watched, seen)));
                            }
                        }
                    }
                }
                queue = self.lock();
                queue.last.append(&mut last);
                for (deadline, target) in again.drain(..) {
                    let seq = queue.next_seq;
                    queue.next_seq = seq.wrapping_add(1);
                    queue.entries.push(Reverse(Entry {
                        deadline,
                        seq,
                        target,
                    }));
                }
                continue;
            }
            queue = match queue.entries.peek() {
                Some(head) => {
                    let (deadline, wait) = (
                        head.0.deadline,
                        head.0.deadline.saturating_duration_since(now),
                    );
                    queue.thread = ThreadState::WaitingUntil(deadline);
                    self.wake
                        .wait_timeout(queue, wait)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
                None => {
                    queue.thread = ThreadState::WaitingForever;
                    self.wake
                        .wait(queue)
                        .unwrap_or_else(PoisonError::into_inner)
                }
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_order_by_deadline_then_arrival() {
        let now = Instant::now();
        let later = now + std::time::Duration::from_millis(5);
        let mut heap = BinaryHeap::new();
        for (seq, deadline) in [(0, later), (1, now), (2, later), (3, now)] {
            heap.push(Reverse(Entry {
                deadline,
                seq,
                target: Target::Expire(crate::exchange::WeakExchange::dangling(), StatusCode::OK),
            }));
        }
        let order: Vec<u64> = std::iter::from_fn(|| heap.pop().map(|e| e.0.seq)).collect();
        assert_eq!(order, [1, 3, 0, 2]);
    }
}
