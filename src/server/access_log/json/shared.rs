//! The buffer the events and the writing thread share: whole lines, and the counts a flush
//! waits on.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

use super::WAKE_AT;

/// What the events and the writing thread share.
pub(super) struct Shared {
    pub(super) state: Mutex<State>,
    /// The writing thread waits on it for lines (or the close).
    pub(super) lines: Condvar,
    /// Flushes wait on it for the writing thread's progress.
    pub(super) written: Condvar,
    pub(super) capacity: usize,
    pub(super) dropped: AtomicU64,
}

pub(super) struct State {
    /// Whole lines, waiting for the writing thread.
    pub(super) buffer: Vec<u8>,
    /// The lines in `buffer`.
    pub(super) pending: u64,
    /// Lines taken since the start.
    pub(super) taken: u64,
    /// Lines the writing thread is done with (written, or failed and counted dropped).
    pub(super) done: u64,
    /// The writing thread waits on `lines` for a first line (no timeout): the line that
    /// makes the buffer non-empty wakes it.
    pub(super) idle: bool,
    /// Flushes waiting: the writing thread writes at once.
    pub(super) flushing: usize,
    /// The layer was dropped: the thread writes what is left and ends.
    pub(super) closed: bool,
    /// The writing thread ended (after `closed`, with nothing left).
    pub(super) finished: bool,
    /// The first line (in the order taken) whose write failed and that no flush has
    /// reported yet, and the end of the last such failed range.
    pub(super) failed: Option<(u64, u64)>,
}

impl State {
    /// Whether every line before `target` (all done) was written; a failure among them is
    /// reported once.
    pub(super) fn report_failures(&mut self, target: u64) -> bool {
        match self.failed {
            Some((first, last)) if first < target => {
                // Failed lines past `target` (a later batch) stay for the next flush.
                self.failed = (last > target).then_some((target, last));
                false
            }
            _ => true,
        }
    }
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing the lock guards is left half-done by a panic: the state stays usable.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Appends one whole line, or counts it dropped when the buffer has no room.
    pub(super) fn push(&self, line: &[u8]) {
        let mut state = self.lock();
        // Closed: no writing thread (it could not be started).
        if state.closed || state.buffer.len() + line.len() > self.capacity {
            drop(state);
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let below = state.buffer.len() < WAKE_AT;
        state.buffer.extend_from_slice(line);
        state.pending += 1;
        state.taken += 1;
        // Woken by the first line after a pause, then by a batch that grew past `WAKE_AT`:
        // otherwise the thread takes what came when its `LINGER` is over (one wake-up per batch,
        // not per line).
        let wake = state.idle || (below && state.buffer.len() >= WAKE_AT);
        drop(state);
        if wake {
            self.lines.notify_one();
        }
    }
}
