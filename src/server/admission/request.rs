//! What admission does with one request: at arrival (the estimate against the budget, the
//! cap, a permit or a place in the queue), in the queue (the judge of each freed permit), and
//! at its answer (the route learns, the permit goes back): the [`Ticket`] its future keeps.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use http::{HeaderName, Request, StatusCode};

use super::estimate::{HALF_WINDOW_SECS, Slot, nanos, route_hash, slot_of};
use super::limiter::{GRANTED, Limiter, SHED, Verdict, Waiter};
use super::queue_start;
use super::{Admission, Shared};
use crate::deadline::Deadline;
use crate::sync::Ordering;

impl Admission {
    /// A request arrives (the layer's `call`) with its `deadline` and the same as a `budget`
    /// from `started` (no clock arithmetic here): its ticket, or `Err` when it is shed. With
    /// a queue-start header, the time spent before the layer is taken from both: `deadline`
    /// is the one to arm then.
    /// Inlined into the layer's one call (the ticket made in place, no call frame: a third of
    /// the admitted path's instructions otherwise).
    #[inline(always)]
    pub(in crate::server) fn arrive<B>(
        &self,
        req: &Request<B>,
        deadline: &mut Option<Deadline>,
        budget: Option<Duration>,
        started: Instant,
    ) -> Result<Ticket, ()> {
        let shared = &*self.shared;
        let settings = &shared.settings;
        let route = route_hash(req.method().as_str().as_bytes(), route(req));
        let slot = &shared.table[slot_of(route)];
        slot.earn(settings.credit_gain);
        let budget = match (&settings.queue_start, budget) {
            (Some(header), Some(budget)) => Some(spent_before(req, header, deadline, budget)),
            _ => budget,
        };
        // Whether it was counted as doomed here (would-shed or capped): counted once.
        let mut counted = false;
        if let Some(remaining) = budget {
            // A budget already spent is shed whatever the route's estimate (even cold).
            let need = slot.estimate(route);
            // (A warm estimate is at least 1 ns: a zero budget is below it.)
            let doomed = match need {
                Some(need) => remaining < need,
                None => remaining.is_zero(),
            };
            if doomed {
                if shared.reject(slot, remaining, need.unwrap_or_default(), false) {
                    return Err(());
                }
                counted = true;
            }
        }
        let deadline = deadline.map(|d| d.instant());
        let mut ticket = Ticket {
            shared: Some(self.shared.clone()),
            route,
            permit: false,
            running: false,
            waiter: None,
            started,
            waited: 0,
        };
        if shared.limiter.is_some() {
            shared.acquire(&mut ticket, deadline, counted);
        }
        Ok(ticket)
    }

    /// The status of a shed answer (before gRPC's rewrite to 200).
    pub(in crate::server) fn shed_status(&self) -> StatusCode {
        self.shared.settings.status
    }
}

/// The bytes of a request's route: axum's `MatchedPath`, else its path.
#[inline]
fn route<B>(req: &Request<B>) -> &[u8] {
    #[cfg(feature = "axum")]
    if let Some(matched) = req.extensions().get::<axum::extract::MatchedPath>() {
        return matched.as_str().as_bytes();
    }
    req.uri().path().as_bytes()
}

/// The budget less the time spent before the layer saw the request, and the deadline made
/// that much earlier (out of line: only with a queue-start header).
#[inline(never)]
fn spent_before<B>(
    req: &Request<B>,
    header: &HeaderName,
    deadline: &mut Option<Deadline>,
    budget: Duration,
) -> Duration {
    let spent = req
        .headers()
        .get(header)
        .and_then(|value| queue_start::spent(value.as_bytes(), SystemTime::now()));
    let Some(spent) = spent else { return budget };
    if let Some(d) = deadline {
        let at = d.instant();
        *d = Deadline::at(at.checked_sub(spent).unwrap_or(at), d.source());
    }
    budget.saturating_sub(spent)
}

impl Shared {
    /// A request whose `remaining` budget is below `need`: whether to reject it (counted
    /// either way).
    #[cold]
    fn reject(&self, slot: &Slot, remaining: Duration, need: Duration, waiting: bool) -> bool {
        let counters = &self.counters;
        if self.settings.count_only {
            counters.would_shed.fetch_add(1, Ordering::Relaxed);
            #[cfg(feature = "tracing")]
            tracing::info!(
                target: "shared_headers::admission",
                remaining_ms = remaining.as_secs_f64() * 1e3,
                estimate_ms = need.as_secs_f64() * 1e3,
                waiting,
                "would shed: the deadline cannot be met"
            );
            #[cfg(not(feature = "tracing"))]
            let _ = (remaining, need, waiting);
            return false;
        }
        let _ = (remaining, need);
        let epoch = Instant::now()
            .saturating_duration_since(self.base)
            .as_secs()
            / HALF_WINDOW_SECS;
        if slot.spend(epoch) {
            let counter = if waiting {
                &counters.shed_waiting
            } else {
                &counters.shed
            };
            counter.fetch_add(1, Ordering::Relaxed);
            true
        } else {
            counters.capped.fetch_add(1, Ordering::Relaxed);
            false
        }
    }

    /// What to do with a waiter when a permit is free: a doomed one is counted once (at
    /// arrival or at its first judgement), then shed if the cap lets, else spared: it gets a
    /// permit unless a waiter behind it can still finish in time, so the cap's spared run
    /// and their route keeps learning (count-only: it gets the permit, as without admission).
    fn judge(&self, waiter: &Waiter) -> Verdict {
        let Some(deadline) = waiter.deadline else {
            return Verdict::Grant;
        };
        let slot = &self.table[slot_of(waiter.route)];
        let Some(need) = slot.estimate(waiter.route) else {
            return Verdict::Grant;
        };
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining >= need {
            return Verdict::Grant;
        }
        if !waiter.counted.swap(true, Ordering::Relaxed) && self.reject(slot, remaining, need, true)
        {
            Verdict::Shed
        } else if self.settings.count_only {
            Verdict::Grant
        } else {
            Verdict::Spare
        }
    }

    /// A permit for `ticket` (the limit's path, out of line: the path without a limit stays
    /// short), or its place in the queue.
    #[inline(never)]
    fn acquire(&self, ticket: &mut Ticket, deadline: Option<Instant>, counted: bool) {
        let Some(limiter) = &self.limiter else { return };
        if limiter.try_acquire() {
            ticket.permit = true;
        } else {
            ticket.waiter = Some(self.enqueue(limiter, deadline, ticket.route, counted));
        }
    }

    #[cold]
    fn enqueue(
        &self,
        limiter: &Limiter,
        deadline: Option<Instant>,
        route: u64,
        counted: bool,
    ) -> Arc<Waiter> {
        self.counters.queued.fetch_add(1, Ordering::Relaxed);
        let key = deadline.map_or(u64::MAX, |at| {
            u64::try_from(at.saturating_duration_since(self.base).as_micros())
                .unwrap_or(u64::MAX - 1)
                .min(u64::MAX - 1)
        });
        limiter.enqueue(key, deadline, route, counted, &|w| self.judge(w))
    }
}

/// What admission decided for one request, kept by its response future: the permit it
/// holds (given back when the future is done or dropped) or its place in the queue.
pub(crate) struct Ticket {
    shared: Option<Arc<Shared>>,
    /// Its route's hash (its slot: `slot_of`).
    route: u64,
    permit: bool,
    /// Whether its handler was let run (polled).
    running: bool,
    waiter: Option<Arc<Waiter>>,
    started: Instant,
    /// Its wait for a permit, in nanoseconds.
    waited: u64,
}

/// What the response future does with a request after its ticket is polled.
pub(crate) enum Admit {
    /// Poll the handler.
    Go,
    /// Shed while waiting: answer with this status.
    Shed(StatusCode),
}

impl Ticket {
    /// No admission.
    #[inline]
    pub(crate) fn none(started: Instant) -> Ticket {
        Ticket {
            shared: None,
            route: 0,
            permit: false,
            running: false,
            waiter: None,
            started,
            waited: 0,
        }
    }

    /// Ready when the request may be polled (at once without a queue), or when it was shed
    /// waiting.
    #[inline]
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Admit> {
        let Some(waiter) = &self.waiter else {
            self.running = true;
            return Poll::Ready(Admit::Go);
        };
        let state = match waiter.poll(cx) {
            Poll::Ready(state) => state,
            Poll::Pending => return Poll::Pending,
        };
        self.waiter = None;
        match state {
            GRANTED => {
                self.permit = true;
                self.running = true;
                self.waited = nanos(self.started.elapsed());
                Poll::Ready(Admit::Go)
            }
            SHED => {
                let status = self
                    .shared
                    .as_ref()
                    .map_or(StatusCode::SERVICE_UNAVAILABLE, |s| s.settings.status);
                Poll::Ready(Admit::Shed(status))
            }
            _ => {
                self.running = true;
                Poll::Ready(Admit::Go)
            }
        }
    }

    /// The handler answered after `latency` from the call: the route learns how long it
    /// took (less its wait for a permit), and the permit goes back.
    #[inline(always)]
    pub(crate) fn answered(&mut self, latency: Duration) {
        if let Some(shared) = self.shared.take() {
            let settings = &shared.settings;
            shared.table[slot_of(self.route)].learn(
                self.route,
                nanos(latency).saturating_sub(self.waited),
                settings.steps,
                settings.warm,
            );
            if self.permit {
                shared.release_permit();
            }
        }
    }

    fn shared_release(&mut self, cut_short: bool) {
        let Some(shared) = self.shared.take() else {
            return;
        };
        if cut_short && self.running {
            // Started, then cut short (deadline, hang-up, error, panic): at least this long.
            let settings = &shared.settings;
            shared.table[slot_of(self.route)].learn_at_least(
                self.route,
                nanos(self.started.elapsed()).saturating_sub(self.waited),
                settings.steps,
                settings.warm,
            );
        }
        if self.permit {
            shared.release_permit();
        }
    }
}

impl Shared {
    /// Gives a permit back (out of line: only with a limit).
    #[inline(never)]
    fn release_permit(&self) {
        if let Some(limiter) = &self.limiter {
            limiter.release(&|w| self.judge(w));
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let Some(shared) = &self.shared else { return };
        if let Some(waiter) = self.waiter.take() {
            if let Some(limiter) = &shared.limiter {
                if waiter.state() != GRANTED {
                    shared.counters.left_queue.fetch_add(1, Ordering::Relaxed);
                }
                limiter.leave(&waiter, &|w| shared.judge(w));
            }
            return;
        }
        self.shared_release(true);
    }
}
