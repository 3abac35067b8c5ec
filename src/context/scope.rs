//! The request scope ([`RequestScope`]): a deadline and a request context in scope on this
//! thread together, for a closure or each poll of a future ([`Scoped`]), and [`carry`] for a
//! task to spawn.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use super::{Lend, RequestContext, Restore, replace_current};
use crate::deadline::Deadline;

/// The request scope: a deadline and a request context, put in scope on this thread together.
///
/// While a scope is in place, [`Deadline::current`] and [`RequestContext::current`] read its
/// two parts, and the client room sends both on every outgoing call. The server layer puts its
/// request's scope in place around each call and poll of the inner service; use this type to
/// do the same elsewhere (a client outside any server, a background job, a test), and
/// [`carry`] for a task to spawn.
///
/// A scope replaces the whole scope around it: what it does not hold is not in scope while it
/// runs. To change one part and keep the other, start from [`current`](Self::current).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use shared_headers::context::{Propagation, RequestContext, RequestScope};
/// use shared_headers::deadline::{Deadline, DeadlineSource};
///
/// let (context, _) = Propagation::new().request_id().capture(&http::HeaderMap::new());
/// let deadline = Deadline::after(Duration::from_secs(1), DeadlineSource::Explicit).unwrap();
/// let scope = RequestScope::new().deadline(deadline).context(context.unwrap());
/// scope.enter(|| {
///     assert_eq!(Deadline::current(), Some(deadline));
///     assert!(RequestContext::current().is_some());
///     // Tighten the deadline, keep the context.
///     let sooner = Deadline::after(Duration::from_millis(5), DeadlineSource::Explicit).unwrap();
///     RequestScope::current().deadline(sooner).enter(|| {
///         assert_eq!(Deadline::current(), Some(sooner));
///         assert!(RequestContext::current().is_some());
///     });
/// });
/// assert_eq!(Deadline::current(), None);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestScope {
    deadline: Option<Deadline>,
    context: Option<RequestContext>,
}

impl RequestScope {
    /// A scope with neither a deadline nor a context: entered, it hides the scope around.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::RequestScope;
    /// # use shared_headers::deadline::{Deadline, DeadlineSource};
    /// let deadline = Deadline::after(std::time::Duration::from_secs(1), DeadlineSource::Explicit);
    /// RequestScope::new().deadline(deadline.unwrap()).enter(|| {
    ///     RequestScope::new().enter(|| assert_eq!(Deadline::current(), None));
    /// });
    /// ```
    pub fn new() -> RequestScope {
        RequestScope::default()
    }

    /// The scope in place on this thread now: its deadline, and its context (one reference
    /// count). What [`carry`] captures.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::RequestScope;
    /// assert_eq!(RequestScope::current(), RequestScope::new());
    /// ```
    pub fn current() -> RequestScope {
        RequestScope {
            deadline: Deadline::current(),
            context: RequestContext::current(),
        }
    }

    /// Replaces the scope's deadline.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Instant;
    /// # use shared_headers::context::RequestScope;
    /// # use shared_headers::deadline::{Deadline, DeadlineSource};
    /// let deadline = Deadline::at(Instant::now(), DeadlineSource::Explicit);
    /// RequestScope::new()
    ///     .deadline(deadline)
    ///     .enter(|| assert_eq!(Deadline::current(), Some(deadline)));
    /// ```
    #[must_use]
    pub fn deadline(mut self, deadline: Deadline) -> RequestScope {
        self.deadline = Some(deadline);
        self
    }

    /// Replaces the scope's context.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::{Propagation, RequestContext, RequestScope};
    /// let (context, _) = Propagation::new().request_id().capture(&http::HeaderMap::new());
    /// let context = context.unwrap();
    /// RequestScope::new()
    ///     .context(context.clone())
    ///     .enter(|| assert_eq!(RequestContext::current(), Some(context)));
    /// ```
    #[must_use]
    pub fn context(mut self, context: RequestContext) -> RequestScope {
        self.context = Some(context);
        self
    }

    /// Runs `f` in this scope, then restores the previous one (also if `f` panics).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use shared_headers::context::RequestScope;
    /// # use shared_headers::deadline::{Deadline, DeadlineSource};
    /// let deadline = Deadline::after(Duration::from_secs(1), DeadlineSource::Explicit).unwrap();
    /// let scope = RequestScope::new().deadline(deadline);
    /// let left = scope.clone().enter(|| Deadline::current().map(|d| d.remaining()));
    /// assert!(left.unwrap() <= Duration::from_secs(1));
    /// let panicked = std::panic::catch_unwind(|| scope.enter(|| panic!("handler bug")));
    /// assert!(panicked.is_err());
    /// assert_eq!(Deadline::current(), None); // restored on unwind
    /// ```
    pub fn enter<R>(self, f: impl FnOnce() -> R) -> R {
        let _deadline = crate::deadline::Restore::set(self.deadline);
        let _context = Restore(replace_current(self.context));
        f()
    }

    /// Wraps `future` so that this scope is in place during each of its polls (only those:
    /// a task it spawns is polled elsewhere and sees none, unless wrapped with [`carry`]).
    /// The deadline is not enforced here: this only says what it is.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use shared_headers::context::RequestScope;
    /// # use shared_headers::deadline::{Deadline, DeadlineSource};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let deadline = Deadline::after(Duration::from_secs(1), DeadlineSource::Server).unwrap();
    /// let seen = RequestScope::new()
    ///     .deadline(deadline)
    ///     .scope(async {
    ///         tokio::task::yield_now().await; // still in scope after a suspension
    ///         Deadline::current()
    ///     })
    ///     .await;
    /// assert_eq!(seen, Some(deadline));
    /// # }
    /// ```
    pub fn scope<F: Future>(self, future: F) -> Scoped<F> {
        Scoped {
            deadline: self.deadline,
            context: self.context,
            future,
        }
    }
}

/// Wraps `future` in the [`RequestScope`] in place now, for a task to spawn: the task sees its
/// deadline and its context, and the client layer sends both on its outgoing calls. A plain
/// `tokio::spawn(fut)` sees neither. Short for `RequestScope::current().scope(future)`.
///
/// What is not in scope now is not in scope in the task either (an outer scope where it is
/// polled is hidden).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use shared_headers::context::{self, Propagation, RequestContext, RequestScope};
/// use shared_headers::deadline::{Deadline, DeadlineSource};
///
/// # #[tokio::main]
/// # async fn main() {
/// let deadline = Deadline::after(Duration::from_secs(1), DeadlineSource::Caller).unwrap();
/// let (request, _) = Propagation::new().request_id().capture(&http::HeaderMap::new());
/// let scope = RequestScope::new().deadline(deadline).context(request.unwrap());
/// let task = scope.enter(|| {
///     tokio::spawn(context::carry(async {
///         (Deadline::current(), RequestContext::current().is_some())
///     }))
/// });
/// assert_eq!(task.await.unwrap(), (Some(deadline), true));
/// # }
/// ```
pub fn carry<F: Future>(future: F) -> Scoped<F> {
    RequestScope::current().scope(future)
}

pin_project! {
    /// A future polled in a [`RequestScope`]: made by [`RequestScope::scope`] and [`carry`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::{self, RequestScope};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let scoped: context::Scoped<_> = RequestScope::new().scope(async { 7 });
    /// assert_eq!(scoped.await, 7);
    /// # }
    /// ```
    #[derive(Debug)]
    #[must_use = "futures do nothing unless polled"]
    pub struct Scoped<F> {
        deadline: Option<Deadline>,
        context: Option<RequestContext>,
        #[pin]
        future: F,
    }
}

impl<F: Future> Future for Scoped<F> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _deadline = crate::deadline::Restore::set(*this.deadline);
        // The context is lent to the thread, not cloned: no reference count per poll.
        let _context = Lend::new(this.context);
        this.future.poll(cx)
    }
}
