//! What a request under a deadline is sent with: the margin, the budget, the cut, and the
//! deadline and context in scope. Shared by [`Propagate`](super::Propagate) and the reqwest
//! `PropagateMiddleware`.

use std::time::{Duration, Instant};

use http::{Extensions, HeaderMap};

use crate::context::RequestContext;
use crate::deadline::BudgetHeader;

/// The default margin's share of what is left: a tenth.
const DEFAULT_MARGIN_DIVISOR: u32 = 10;
/// The default margin's cap: 100 ms.
const DEFAULT_MARGIN_CAP: Duration = Duration::from_millis(100);

/// The margin kept for `remaining`: the fixed one, or the default rule (a tenth of what is
/// left, at most 100 ms).
#[inline]
pub(crate) fn margin_for(margin: Option<Duration>, remaining: Duration) -> Duration {
    match margin {
        Some(fixed) => fixed,
        None => (remaining / DEFAULT_MARGIN_DIVISOR).min(DEFAULT_MARGIN_CAP),
    }
}

/// What a request under a deadline is sent with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    /// Written in the budget header: what is left, less the margin.
    pub(crate) budget: Duration,
    /// The instant the call is cut at: now + what is left, less half the margin.
    pub(crate) cut: Instant,
}

/// What a request under `deadline` is sent with. `None`: nothing left (with the margin), do
/// not send.
pub(crate) fn budget_for(
    deadline: &crate::deadline::Deadline,
    margin: Option<Duration>,
    header: &BudgetHeader,
) -> Option<Budget> {
    let now = Instant::now();
    let remaining = deadline.remaining_at(now);
    let margin = margin_for(margin, remaining);
    let budget = remaining.saturating_sub(margin);
    // A budget the header would write as zero is nothing: the next hop would refuse it.
    if budget < header.resolution() {
        return None;
    }
    // The first half of the margin is the next hop's answer's to come back in; the second
    // half is the caller's, to answer from a cut before its own deadline.
    let wait = remaining - margin / 2;
    Some(Budget {
        budget,
        cut: now + wait,
    })
}

/// The request's deadline (its extensions' if it has one, else the one in scope) and the
/// context its extensions carry, if any ([`apply_context`] falls back to the one in scope).
/// A request without extensions (the common case) costs one thread-local read.
#[inline]
pub(crate) fn in_scope(
    extensions: &Extensions,
) -> (Option<crate::deadline::Deadline>, Option<RequestContext>) {
    if extensions.is_empty() {
        return (crate::deadline::Deadline::current(), None);
    }
    let deadline = match extensions.get::<crate::deadline::Deadline>() {
        Some(deadline) => Some(*deadline),
        None => crate::deadline::Deadline::current(),
    };
    (deadline, extensions.get::<RequestContext>().cloned())
}

/// Adds the request's context to `headers` (only the names they lack): `own`, the one its
/// extensions carried, else the one in scope, borrowed where it is (no reference count).
#[inline]
pub(crate) fn apply_context(own: Option<RequestContext>, headers: &mut HeaderMap) {
    match own {
        Some(context) => context.apply_to(headers),
        None => RequestContext::with_current(|context| {
            if let Some(context) = context {
                context.apply_to(headers);
            }
        }),
    }
}

/// Sets the budget header to `budget`, unless the request already carries a valid smaller one
/// (the smaller wins: a caller may tighten its own call, never extend the deadline). Returns
/// the budget written, as the next hop reads it (the header may drop a fraction of its unit),
/// or `None` when the request's own smaller budget was kept: that one is the caller's, not
/// the deadline's.
pub(crate) fn set_budget(
    headers: &mut HeaderMap,
    header: &BudgetHeader,
    budget: Duration,
) -> Option<Duration> {
    if let Some(Ok(own)) = header.parse_from(headers) {
        if own <= budget {
            return None;
        }
    }
    let value = header.encode(budget);
    let told = header.parse(&value).unwrap_or(budget);
    headers.insert(header.name().clone(), value);
    Some(told)
}

/// How [`Propagate`](super::Propagate) wrote a request's budget, for a layer below it that
/// sends the request again later ([`ConnRetry`](crate::client::ConnRetry)): the resend carries
/// the budget left at its own instant, not the first send's.
#[derive(Debug, Clone)]
pub(crate) struct Rebudget {
    pub(crate) header: BudgetHeader,
    pub(crate) margin: Option<Duration>,
    pub(crate) deadline: crate::deadline::Deadline,
}

impl Rebudget {
    /// Writes the budget left now in `headers`. `None`: nothing is left, do not send.
    pub(crate) fn apply(&self, headers: &mut HeaderMap) -> Option<()> {
        let budget = budget_for(&self.deadline, self.margin, &self.header)?;
        // The first send's value is larger than what is left now: replace it, unless the caller
        // wrote a smaller one itself (kept, as on the first send).
        if let Some(Ok(own)) = self.header.parse_from(headers) {
            if own <= budget.budget {
                return Some(());
            }
        }
        headers.insert(
            self.header.name().clone(),
            self.header.encode(budget.budget),
        );
        Some(())
    }
}

std::thread_local! {
    /// Set by `Propagate` while it calls the service inside, read by `ConnRetry::call`.
    static REBUDGET: std::cell::RefCell<Option<Rebudget>> = const { std::cell::RefCell::new(None) };
}

/// Runs `call` with `rebudget` visible to [`take_rebudget`] (restores what was there before).
#[inline]
pub(crate) fn with_rebudget<R>(rebudget: Rebudget, call: impl FnOnce() -> R) -> R {
    /// Restores the slot, also when `call` panics.
    struct Restore(Option<Rebudget>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            let _ = REBUDGET.try_with(|slot| *slot.borrow_mut() = previous);
        }
    }
    let _restore = Restore(REBUDGET.with(|slot| slot.replace(Some(rebudget))));
    call()
}

/// The budget writer of the `Propagate` calling this thread's service now, if any.
#[inline]
pub(crate) fn take_rebudget() -> Option<Rebudget> {
    REBUDGET.with(|slot| slot.borrow_mut().take())
}
