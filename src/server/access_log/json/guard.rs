//! [`JsonLinesGuard`], the handle on a [`JsonLines`]' output: its dropped lines and its flush.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{DROP_FLUSH, Shared};

#[cfg(doc)]
use super::JsonLines;

/// A handle on a [`JsonLines`]' output: how many lines it dropped, and a flush. Dropping it
/// flushes (waiting at most one second): keep it alive until the program's end.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use shared_headers::server::access_log::json::JsonLines;
///
/// let lines = JsonLines::new(Vec::new());
/// let guard = lines.guard();
/// assert!(guard.flush(Duration::from_secs(5))); // nothing to write
/// assert_eq!(guard.dropped_lines(), 0);
/// ```
#[must_use = "dropping the guard flushes at once: keep it until the end"]
pub struct JsonLinesGuard {
    pub(super) shared: Arc<Shared>,
}

impl fmt::Debug for JsonLinesGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JsonLinesGuard")
            .field("dropped_lines", &self.dropped_lines())
            .finish()
    }
}

impl JsonLinesGuard {
    /// The lines dropped so far: the buffer was full (the output stalled or was too slow),
    /// or writing them failed.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::access_log::json::JsonLines;
    /// let lines = JsonLines::new(std::io::sink());
    /// assert_eq!(lines.guard().dropped_lines(), 0);
    /// ```
    pub fn dropped_lines(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Waits, at most `timeout`, until every line taken before the call is written and the
    /// output flushed; `true` if they were, `false` if the wait timed out or a line taken
    /// before the call failed to be written since the last flush that said so (counted in
    /// [`dropped_lines`](Self::dropped_lines)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::access_log::json::JsonLines;
    /// let guard = JsonLines::new(std::io::sink()).guard();
    /// assert!(guard.flush(std::time::Duration::from_secs(1)));
    /// ```
    pub fn flush(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.lock();
        let target = state.taken;
        if state.done >= target {
            return state.report_failures(target);
        }
        state.flushing += 1;
        self.shared.lines.notify_one();
        let flushed = loop {
            if state.done >= target {
                break state.report_failures(target);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break false;
            }
            state = match self.shared.written.wait_timeout(state, left) {
                Ok((state, _)) => state,
                Err(poisoned) => poisoned.into_inner().0,
            };
        };
        state.flushing -= 1;
        flushed
    }
}

impl Drop for JsonLinesGuard {
    fn drop(&mut self) {
        let _ = self.flush(DROP_FLUSH);
    }
}
