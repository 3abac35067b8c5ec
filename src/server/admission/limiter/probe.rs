//! The settled limit's probe ([`Probe`]): windows of binding answers at two neighbouring
//! limits, compared by throughput; and the tolerance ([`tolerated`]) against which every rule
//! of the limit judges an answer on time.
//!
//! It decides the limit for the next window from a full one ([`Probe::closed`]) and the
//! backoffs between probes; which answers a window counts, and when a probe up ends early,
//! are [`adapt`](super::adapt)'s. Under the same lock it keeps slow start's exit state, read
//! and written by [`slow_start`](super::slow_start). It relies on nothing else of the
//! limiter.

use std::time::{Duration, Instant};

/// The longest answer taken as free of queueing, in nanoseconds, for a route whose
/// no-load duration is `floor`: a quarter as long again, and 2 ms of scheduling noise (the
/// delay target, as CoDel's). A quarter, not a half: a handler that takes `c` at a time,
/// given `c + 1`, delays the answers by about `1 / c` of the floor on average; a half let a
/// limit of 3 or 4 stand on a handler that takes 2.
pub fn tolerated(floor: u64) -> u64 {
    floor + floor / 4 + 2_000_000
}

/// The answers of a probe's window at a limit of `limit` permits: twice the limit, at
/// least 8 (the mean of fewer is noise).
pub(super) fn window_len(limit: usize) -> u64 {
    (2 * limit as u64).max(8)
}

/// A probe's step from a limit: an eighth of it, at least one permit (a step of one permit
/// on a large limit changes the throughput by less than the windows' noise).
fn step(limit: usize) -> usize {
    (limit / 8).max(1)
}

/// The most windows between two probes up that found nothing (the backoff doubles from 16).
const MAX_BACKOFF: u32 = 64;

/// The longest wait for a probe up, whatever the windows left: a handler whose capacity
/// grew is found within this (a failed probe up costs one or two answers delayed by at
/// most a service time: a few a second).
const MAX_UP_WAIT: Duration = Duration::from_millis(300);

/// The settled limit's probe: a hill climb on throughput, preferring the lower limit. Each
/// window of binding answers (the limit held, every permit in use: the throughput is the
/// limit over the mean answer, Little's law) ends with one of:
///
/// * **a hold** at the limit: its mean is recorded; when the answers were slower on average
///   than their routes' tolerance (a queue somewhere, or a route that varies), the next
///   window probes a step down; else, when the probe up's backoff has run out, a step up;
/// * **a probe down judged**: the lower limit is kept if it served at least 15/16 as many
///   (the handler takes no more at once: the higher limit only queued inside it), else
///   back up, and no probe down for a backoff;
/// * **a probe up judged**: the higher limit is kept if it served at least 17/16 as many
///   (and the next window probes up again), else back down and the next probe up waits twice as
///   long (16 to [`MAX_BACKOFF`] windows). A probe up from a window whose answers were on time ends
///   at its first delayed answer ([`Limiter::adapt`](super::Limiter::adapt)'s caller holds the
///   lock): the higher limit queued, and only the answers already let in pay for it.
///
/// A handler that takes 2 at a time settles at 2: a limit of 3 serves no more than 2 and
/// delays half the answers by a service time; one that takes any number keeps growing.
#[derive(Debug, Default)]
pub(super) struct Probe {
    /// The limit the window measures (permits; 0: none yet).
    pub(super) at: usize,
    /// The window's answers, the sum of their durations and of their tolerances (ns).
    pub(super) n: u64,
    pub(super) took: u64,
    pub(super) tolerated: u64,
    /// The probe under way: the limit held before it, its window's mean (ns), the limit
    /// probed, and whether the held window's answers were on time (within their tolerance
    /// on average).
    pub(super) from: Option<(usize, u64, usize, bool)>,
    /// Hold windows before the next probe up, and the backoff it restarts from.
    pub(super) up_wait: u32,
    pub(super) up_backoff: u32,
    /// Hold windows before the next probe down, and its backoff.
    pub(super) down_wait: u32,
    pub(super) down_backoff: u32,
    /// When the probe up's wait began (a failed probe up, or a probe down kept): past
    /// [`MAX_UP_WAIT`] the next probe up comes whatever the windows left (a window of a
    /// small limit is long: counted in windows alone the backoff ran to seconds).
    pub(super) up_held: Option<Instant>,
    /// Probes up in a row that served more with answers on time: the next step doubles
    /// per such probe (at most to the limit: doubling it), as slow start's growth, so that
    /// a route freed of its bottleneck finds its new capacity in a few windows.
    pub(super) run: u32,
    /// Slow start's exit ([`Limiter::slow_start`](super::Limiter::slow_start)): the most requests
    /// in flight (at its permit) of an answer on time, and the delayed answers since with more in
    /// flight.
    pub(super) fast_load: usize,
    pub(super) delayed: u32,
    /// Slow start's last step to the demand ([`Limiter::slow_start`](super::Limiter::slow_start)):
    /// the limit it went to (at first, the first guess). The next such step waits for an
    /// answer on time with that many in flight.
    pub(super) round: usize,
    /// Whether a caller was refused at arrival in slow start for an overload
    /// ([`Limiter::rushed`](super::Limiter::rushed)): the queue it would have joined counts as
    /// waiting.
    pub(super) rushed: bool,
    /// The limit (permits) before the delay rule's cuts since the last full window (0:
    /// none): what an answer that ran alone and proved the route slower
    /// ([`Limiter::relearned`](super::Limiter::relearned)) gives back.
    pub(super) cut_from: usize,
}

impl Probe {
    /// A new window at `limit`; a probe whose limit is not `limit` (moved by another rule)
    /// failed.
    pub(super) fn restart(&mut self, limit: usize) {
        if let Some((held, _, probed, _)) = self.from {
            if probed != limit {
                self.from = None;
                self.failed(probed > held);
            }
        }
        self.at = limit;
        self.n = 0;
        self.took = 0;
        self.tolerated = 0;
    }

    pub(super) fn failed(&mut self, up: bool) {
        if up {
            self.up_held = Some(Instant::now());
            self.run = 0;
        }
        let (wait, backoff) = if up {
            (&mut self.up_wait, &mut self.up_backoff)
        } else {
            (&mut self.down_wait, &mut self.down_backoff)
        };
        *backoff = (*backoff * 2).clamp(16, MAX_BACKOFF);
        *wait = *backoff;
    }

    /// A full window at `limit` (at most `ceiling`): the limit for the next one.
    pub(super) fn closed(&mut self, limit: usize, ceiling: usize) -> usize {
        let mean = (self.took / self.n.max(1)).max(1);
        if let Some((held, held_mean, _, _)) = self.from.take() {
            // Throughput here ÷ throughput held, in 1/16: (limit / mean) ÷ (held / held_mean).
            let ratio = (16 * limit as u128 * u128::from(held_mean))
                / (held as u128 * u128::from(mean)).max(1);
            if limit > held {
                if ratio < 17 {
                    self.failed(true);
                    return held;
                }
                // It served more: on up (this window is the new limit's hold), the step
                // doubling while the answers stay on time.
                self.up_backoff = 0;
                self.run = if self.took <= self.tolerated {
                    (self.run + 1).min(16)
                } else {
                    0
                };
                if limit < ceiling {
                    let stride = step(limit).saturating_mul(1 << self.run).min(limit);
                    let probed = (limit + stride).min(ceiling);
                    self.from = Some((limit, mean, probed, self.took <= self.tolerated));
                    return probed;
                }
                return limit;
            }
            if ratio < 15 {
                self.failed(false);
                return held;
            }
            // As many at the lower limit: kept (this window is its hold); no probe up soon.
            self.down_backoff = 0;
            self.up_wait = self.up_wait.max(16);
            self.up_held = Some(Instant::now());
            self.run = 0;
        }
        let slow = self.took > self.tolerated;
        if slow && limit > 1 && self.down_wait == 0 {
            let probed = limit - step(limit);
            self.from = Some((limit, mean, probed, false));
            return probed;
        }
        let waited = self.up_wait == 0
            || self
                .up_held
                .is_some_and(|held| held.elapsed() >= MAX_UP_WAIT);
        if waited && limit < ceiling {
            self.up_wait = 0;
            self.up_held = None;
            let probed = (limit + step(limit)).min(ceiling);
            self.from = Some((limit, mean, probed, !slow));
            return probed;
        }
        self.up_wait = self.up_wait.saturating_sub(1);
        self.down_wait = self.down_wait.saturating_sub(1);
        limit
    }
}

#[cfg(all(test, not(shared_headers_loom)))]
mod tests {
    use super::*;

    /// Drives the probe with windows whose mean is what a handler taking `capacity` at a
    /// time gives (20 ms alone, a service time more per limit's worth past its capacity):
    /// where it holds, and the share of windows spent above `capacity`.
    fn settle(capacity: usize, start: usize, windows: usize) -> (usize, f64) {
        let mut probe = Probe::default();
        let mut limit = start;
        let mut above = 0;
        for _ in 0..windows {
            let mean = 20_000_000 * limit.max(capacity) as u64 / capacity as u64;
            probe.restart(limit);
            probe.n = 16;
            probe.took = 16 * mean;
            probe.tolerated = 16 * tolerated(20_000_000);
            limit = probe.closed(limit, 1024);
            above += usize::from(limit > capacity);
        }
        (limit, above as f64 / windows as f64)
    }

    #[test]
    fn the_probe_settles_on_the_handlers_capacity() {
        // From above (a limit of 3 or 8 on a handler that takes 2): down to 2, and a probe
        // up now and then whose backoff doubles.
        for start in [3, 8] {
            let (limit, above) = settle(2, start, 400);
            assert!(limit <= 3, "from {start}: {limit} (2, or a probe up)");
            assert!(above < 0.05, "{above} of the windows above the capacity");
        }
        // A handler that takes any number: the limit keeps growing.
        let (limit, _) = settle(1024, 2, 200);
        assert!(limit >= 64, "{limit}");
        // A handler that takes 40: found within a step (an eighth; 45 delays the answers by
        // an eighth of a service time, within the tolerance).
        let (limit, _) = settle(40, 4, 400);
        assert!((35..=46).contains(&limit), "{limit}");
    }
}
