//! The runtime's timekeeping, measured: [`LagProbe`], a task beside a scenario that sleeps
//! 1 ms at a time and reports how late its wake-ups came, as a p99 over time. One file for
//! the tests' timekeeping (`timekeeping.rs`, by `#[path]`) and the overload example
//! (`examples/overload.rs`, by `#[path]`), so that the example's "timers N ms late" and the
//! tests' are the same figure.

use std::time::{Duration, Instant};

/// A task that sleeps 1 ms at a time and records how late each wake-up came.
pub struct LagProbe {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Vec<Duration>>,
}

impl LagProbe {
    /// Starts the probe on the current runtime.
    pub fn start() -> Self {
        let (stop, mut stopped) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let mut lags = Vec::new();
            while stopped.try_recv().is_err() {
                let asked = Instant::now();
                tokio::time::sleep(Duration::from_millis(1)).await;
                lags.push(asked.elapsed().saturating_sub(Duration::from_millis(1)));
            }
            lags
        });
        LagProbe { stop, task }
    }

    /// The p99 of the lateness seen since the start, over time: the lateness that the
    /// wake-ups later than it span 1% of the run with (each wake-up weighs the time it
    /// waited, 1 ms and its lateness). A stall of 50 ms in a 5 s scenario is 1% of it, and
    /// queues a verdict's requests as long, though it is one wake-up in thousands.
    pub async fn stop(self) -> Duration {
        let _ = self.stop.send(());
        let mut lags = self.task.await.unwrap_or_default();
        lags.sort_unstable_by(|a, b| b.cmp(a));
        let tick = Duration::from_millis(1);
        let total: Duration = lags.iter().map(|&lag| tick + lag).sum();
        let mut spanned = Duration::ZERO;
        for lag in lags {
            spanned += tick + lag;
            if spanned * 100 >= total {
                return lag;
            }
        }
        Duration::ZERO
    }
}
