//! The response future: commits the exchange exactly once (at the answer, the deadline, the
//! rejection, a panic of the inner service, or its drop), makes the answer that the record
//! describes, and runs the `on_commit` hook with that answer as it leaves the layer.

use crate::server::line::LineOf;
use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use http::{Response, StatusCode};
use pin_project_lite::pin_project;

use super::admission::{Admit, BodyPermit, Ticket};
use super::answer::OwnAnswers;
use super::body::{ResponseBody, declared_length, grpc_head, grpc_status, panic_message};
use super::connect::{self, own_status};
use super::end::{EndHooks, Ending, ResponseEnd, Route, Tracker, UNKNOWN_LENGTH};
use crate::deadline::Deadline;
use crate::exchange::{Committed, Exchange, Outcome, drop_payload};
use crate::merge::merge_lenient;
use crate::sync::{AtomicBool, AtomicU64};

#[cfg(doc)]
use super::SharedHeadersService;

pin_project! {
    /// The response future of [`SharedHeadersService`].
    ///
    /// Resolves to the inner service's response (or error), to the timeout response, to the
    /// rejection response, or, if the inner service panicked, to a 500 response (or to the
    /// answer committed before the panic). If it is dropped before that, it commits the
    /// exchange with [`Outcome::Cancelled`].
    ///
    /// # Panics
    ///
    /// Polling it again after it returned `Ready` panics, as most futures do. A panic of the
    /// inner service's future is caught and answered; it leaves this future only with
    /// [`resume_panics`](super::SharedHeadersLayer::resume_panics), after the commit, with its
    /// original payload. A panic of the inner service's `call` is caught by
    /// [`SharedHeadersService`]'s `call` the same way (this future then makes the answer).
    #[must_use = "futures do nothing unless polled"]
    pub struct ResponseFuture<F> {
        // Field order is load-bearing: fields drop in declaration order, and the guard must
        // commit (`Cancelled`) before the inner future is dropped, so that writes made by the
        // handler's drop glue (guards, spawned-task handles, ...) are refused with `Sealed`
        // instead of accepted after the future was cancelled.
        pub(super) guard: CommitGuard,
        // `None` when the request was rejected (the inner service was not called), when the
        // inner service's `call` panicked (no future), or once the inner future panicked
        // (dropped at once, its drop's panic caught too).
        #[pin]
        pub(super) inner: Option<F>,
        // The wall-clock deadline. The process's timer thread commits at it; the future
        // checks it too when polled (in case the thread is late or could not start).
        pub(super) deadline: Option<Deadline>,
        // How the layer makes its own answers (the timeout's and rejection's status, which of
        // the committed headers they carry), and whether responses carry the record.
        pub(super) answers: OwnAnswers,
        // Admission's ticket (`server/admission.rs`): the permit, given back after the inner
        // future is dropped (the field order), or the place in the queue, left at the drop.
        pub(super) ticket: Ticket,
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("exchange", &self.guard.exchange)
            .field("deadline", &self.deadline)
            .field("inner", &self.inner.is_some())
            .finish_non_exhaustive()
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<ResponseBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let Some(exchange) = this.guard.exchange.as_ref() else {
            panic!("the response future of SharedHeadersService polled after completion");
        };
        let Some(inner) = this.inner.as_mut().as_pin_mut() else {
            // Rejected before the call, or the inner service's `call` panicked (committed
            // then, `Outcome::Panicked`: the answer is the commit's, as the record says). The
            // two ways `inner` is `None` while the guard holds the exchange.
            let status = this.answers.rejection_status;
            return Poll::Ready(Ok(this.guard.own_answer(
                Outcome::Rejected,
                status,
                this.answers,
            )));
        };
        if this.deadline.is_some() && timed_out(exchange) {
            // The timer thread committed: answer the timeout (a handler not polled yet never
            // runs).
            let status = this.answers.timeout_status;
            return Poll::Ready(Ok(this.guard.own_answer(
                Outcome::TimedOut,
                status,
                this.answers,
            )));
        }
        // Admission (`server/admission.rs`): a request waiting for a permit is not polled
        // until it has one; one shed while waiting is answered now; one whose deadline
        // passes while it waits is answered then by the deadline thread's commit (above).
        match this.ticket.poll(cx) {
            Poll::Ready(Admit::Go) => {}
            Poll::Ready(Admit::Shed(status)) => {
                let answer = this.guard.own_answer(Outcome::Shed, status, this.answers);
                return Poll::Ready(Ok(answer));
            }
            Poll::Pending => {
                if this.deadline.is_some() {
                    exchange.register_waker(cx.waker());
                    if timed_out(exchange) {
                        let status = this.answers.timeout_status;
                        let answer = this
                            .guard
                            .own_answer(Outcome::TimedOut, status, this.answers);
                        return Poll::Ready(Ok(answer));
                    }
                }
                return Poll::Pending;
            }
        }
        // The inner service next: an answer that is ready wins over a deadline that passed
        // without a commit yet. A panic is caught here (its cost on this path:
        // `docs::server_cost`, the server layer's tables).
        let deadline = &*this.deadline;
        // In scope for the clients the handler calls: the deadline (`Deadline::current`) and,
        // when the layer propagates anything, the context (`RequestContext::current`, one
        // reference count per poll). Two calls, so that the path without a context has no
        // guard to drop between the poll's result and its return.
        macro_rules! poll_inner {
            () => {
                match *deadline {
                    Some(deadline) => {
                        let _scope = deadline.guard();
                        inner.poll(cx)
                    }
                    None => inner.poll(cx),
                }
            };
        }
        // The request's `tracing` span around the handler's poll (`span.rs`).
        #[cfg(feature = "tracing")]
        let entered = this.guard.span.as_ref().map(tracing::Span::enter);
        let polled = match exchange.context() {
            None => catch_unwind(AssertUnwindSafe(|| poll_inner!())),
            Some(context) => catch_unwind(AssertUnwindSafe(|| {
                let _scope = context.scoped_clone();
                poll_inner!()
            })),
        };
        #[cfg(feature = "tracing")]
        drop(entered);
        match polled {
            Ok(Poll::Ready(Ok(res))) => {
                let committed = this.guard.decide(Outcome::Answered, Some(res.status()));
                if committed.outcome() == Outcome::Answered {
                    // Admission learns; its permit goes with the body (back at its end).
                    let permit = this.ticket.answered(committed.time_to_commit());
                    Poll::Ready(Ok(this.guard.send(res, committed, this.answers, permit)))
                } else {
                    // Another commit came first (the timer thread between the look above and
                    // this commit, or a rejection): the response is the winner's, as the
                    // record says.
                    drop(res);
                    Poll::Ready(Ok(this.guard.winner_answer(committed, this.answers)))
                }
            }
            Ok(Poll::Ready(Err(err))) => {
                let committed = this.guard.decide(Outcome::Failed, None);
                match committed.outcome() {
                    // Ours, or an `Exchange::commit` of the handler's: the error passes
                    // through; no response left the layer.
                    Outcome::Failed | Outcome::Answered => {
                        this.guard.done(&committed, None);
                        Poll::Ready(Err(err))
                    }
                    // The timer committed while the inner service was failing: the answer is
                    // the timeout's, as the record says (as for an `Ok` above).
                    _ => {
                        drop(err);
                        Poll::Ready(Ok(this.guard.winner_answer(committed, this.answers)))
                    }
                }
            }
            Ok(Poll::Pending) => {
                let Some(deadline) = this.deadline else {
                    return Poll::Pending;
                };
                // Pending with a deadline: register for the timer thread's wake, then look
                // again, so that a commit by the timer before the registration (which found
                // no waker) is seen here, and one after it wakes this task. A handler that
                // answers at its first poll never registers.
                exchange.register_waker(cx.waker());
                if timed_out(exchange) || Instant::now() >= deadline.instant() {
                    let status = this.answers.timeout_status;
                    return Poll::Ready(Ok(this.guard.own_answer(
                        Outcome::TimedOut,
                        status,
                        this.answers,
                    )));
                }
                Poll::Pending
            }
            Err(payload) => {
                this.guard.panic = panic_message(&*payload);
                // The panicked future is never polled again; drop it now, catching a panic
                // of its drop glue as well.
                let mut inner = this.inner;
                if let Err(again) = catch_unwind(AssertUnwindSafe(|| inner.set(None))) {
                    drop_payload(again);
                }
                if this.answers.resume_panics {
                    // Committed, logged as sent nothing, then the handler's own panic goes
                    // on to the caller's recovery (an outer `CatchPanicLayer`).
                    let committed = this.guard.decide(Outcome::Panicked, None);
                    this.guard.done(&committed, None);
                    std::panic::resume_unwind(payload);
                }
                drop_payload(payload);
                let status = StatusCode::INTERNAL_SERVER_ERROR;
                Poll::Ready(Ok(this.guard.own_answer(
                    Outcome::Panicked,
                    status,
                    this.answers,
                )))
            }
        }
    }
}

/// Makes `headers` a gRPC trailers-only answer for `outcome` (gRPC over HTTP/2: the status in
/// the response headers of an empty, ended stream): `grpc-status` 4 DEADLINE_EXCEEDED for a
/// timeout, 8 RESOURCE_EXHAUSTED for a rejection (headers over the limits), 13 INTERNAL for a
/// caught panic or a commit without an answer, with a `grpc-message`.
fn grpc_answer(headers: &mut http::HeaderMap, outcome: Outcome) {
    use http::HeaderValue;
    let (code, message) = match outcome {
        Outcome::TimedOut => ("4", "deadline exceeded"),
        Outcome::Rejected => ("8", "request headers over the server's limits"),
        // A refusal: UNAVAILABLE, "try elsewhere now" (a timeout is DEADLINE_EXCEEDED).
        Outcome::Shed => ("14", "refused: overloaded or the deadline cannot be met"),
        _ => ("13", "internal error"),
    };
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    headers.insert("grpc-status", HeaderValue::from_static(code));
    headers.insert("grpc-message", HeaderValue::from_static(message));
}

/// Whether the exchange was committed as timed out (by the process's timer thread).
/// Adds the request's id to a response that has none (out of line: the path without a
/// context stays as short as it was).
#[inline(never)]
fn add_request_id(headers: &mut http::HeaderMap, context: &crate::context::RequestContext) {
    if let Some((name, id)) = context.request_id_header() {
        if let http::header::Entry::Vacant(slot) = headers.entry(name) {
            slot.insert(id.clone());
        }
    }
}

fn timed_out(exchange: &Exchange) -> bool {
    exchange.committed_outcome() == Some(Outcome::TimedOut)
}

/// Owns the exchange until its hook ran; commits with [`Outcome::Cancelled`] (and runs the
/// hooks with nothing sent) if dropped first. A separate field (not a `PinnedDrop` on the
/// future) so the drop logic needs no pinning.
pub(super) struct CommitGuard {
    pub(super) exchange: Option<Exchange>,
    /// The consumers of the end of the response, when one is interested in this request
    /// (`None`: no tracking, nothing paid for it).
    pub(super) end: Option<Arc<EndHooks>>,
    /// The request's route (axum's `MatchedPath`), for the end's consumers.
    pub(super) route: Option<Route>,
    /// The message of the inner future's panic, if it panicked.
    pub(super) panic: Option<Box<str>>,
    /// Whether this future made the commit (then the head leaves at the commit's instant).
    pub(super) won: bool,
    /// The request's `tracing` span, entered while the hooks run (feature `tracing`, when the
    /// layer's access log asks for it), so that every line of the request is in its span,
    /// whichever thread made the commit.
    #[cfg(feature = "tracing")]
    pub(super) span: Option<tracing::Span>,
}

impl CommitGuard {
    fn exchange(&self) -> &Exchange {
        self.exchange
            .as_ref()
            .expect("ResponseFuture committed twice")
    }

    /// Commits with `outcome` and `status`, or takes the record of whoever committed first
    /// (the timer thread, or the handler itself calling [`Exchange::commit`]). Returns the
    /// record; the hook has not run yet ([`done`](Self::done) runs it).
    fn decide(&mut self, outcome: Outcome, status: Option<StatusCode>) -> Committed {
        let exchange = self.exchange();
        // The future is done: nothing is left to wake (and its task must not stay alive for
        // as long as a spawned task holds the exchange).
        exchange.drop_waker();
        match exchange.commit_with(outcome, status) {
            Ok(committed) => {
                self.won = true;
                committed
            }
            Err(lost) => lost.into_winner(),
        }
    }

    /// Runs the commit hooks with what is sent (`None`: nothing left the layer) and lets the
    /// exchange go: the future is finished. A request that sent nothing has ended: its end is
    /// reported now.
    fn done(&mut self, committed: &Committed, sent: Option<&http::response::Parts>) {
        if let Some(exchange) = self.exchange.take() {
            let unsent = match sent {
                None => self.tracker(committed, None, None),
                Some(_) => None,
            };
            // The span only around something to run in it: a commit hook, the end's report.
            #[cfg(feature = "tracing")]
            let _entered = if unsent.is_some() || exchange.announces() {
                self.span.as_ref().map(tracing::Span::enter)
            } else {
                None
            };
            exchange.announce(committed, sent);
            if let Some(tracker) = unsent {
                tracker.report(Ending::Unsent);
            }
        }
    }

    /// What the end's consumers need (made only when one is interested).
    fn tracker(
        &mut self,
        committed: &Committed,
        head: Option<&http::response::Parts>,
        head_at: Option<std::time::Duration>,
    ) -> Option<Tracker> {
        let hooks = self.end.take()?;
        let sent_headers = match head {
            Some(head) if hooks.wants_sent_headers() => Some(Box::new(head.headers.clone())),
            _ => None,
        };
        let declared = head.map_or(UNKNOWN_LENGTH, |head| declared_length(&head.headers));
        let (grpc_response, trailer_announced) =
            head.map_or((false, false), |head| grpc_head(&head.headers));
        Some(Tracker {
            end: ResponseEnd {
                committed: committed.clone(),
                status_sent: head.map(|head| head.status),
                bytes_sent: 0,
                duration: std::time::Duration::ZERO,
                time_to_head: head_at,
                ending: Ending::Unsent,
                grpc_status: match head {
                    // The same rule as the trailers' (`body.rs`): a gRPC call's gRPC response.
                    Some(head) if committed.is_grpc() && grpc_response => {
                        grpc_status(&head.headers)
                    }
                    _ => None,
                },
                panic: self.panic.take(),
                route: self.route.take(),
                sent_headers,
                scheme: hooks.scheme,
                // The request's span carries its ids (`span.rs`); the report runs in it.
                #[cfg(feature = "tracing")]
                ids_in_span: self
                    .span
                    .as_ref()
                    .and_then(tracing::Span::metadata)
                    .is_some_and(|meta| meta.target() == super::span::TARGET),
            },
            hooks,
            declared,
            complete_at: AtomicU64::new(declared),
            panicked: std::sync::OnceLock::new(),
            at_end: AtomicBool::new(false),
            grpc_response,
            trailer_announced,
            // Moved in by `leave` once the commit hooks ran (no clone); a report made by
            // `done` runs in the span `done` entered.
            #[cfg(feature = "tracing")]
            span: None,
        })
    }

    /// Sends the inner service's response `res`: the committed response headers merged in,
    /// the record attached if asked for, then the hook with the response as it leaves.
    fn send<B>(
        &mut self,
        mut res: Response<B>,
        committed: Committed,
        how: &OwnAnswers,
        permit: Option<BodyPermit>,
    ) -> Response<ResponseBody<B>> {
        merge_lenient(res.headers_mut(), committed.response());
        let (head, body) = res.into_parts();
        self.leave(head, Some((body, permit)), committed, how)
    }

    /// The inner service's `call` panicked (no future to poll): caught as a panic of its
    /// future is. With [`resume_panics`](super::SharedHeadersLayer::resume_panics), commits,
    /// reports that nothing was sent and resumes the unwind with the original payload; else
    /// commits [`Outcome::Panicked`] with the status of the layer's answer (500; gRPC: 200
    /// with `grpc-status` 13), which the future makes when polled (the winner's answer).
    pub(super) fn call_panicked(
        &mut self,
        payload: Box<dyn std::any::Any + Send>,
        how: &OwnAnswers,
    ) {
        self.panic = panic_message(&*payload);
        if how.resume_panics {
            let committed = self.decide(Outcome::Panicked, None);
            self.done(&committed, None);
            std::panic::resume_unwind(payload);
        }
        drop_payload(payload);
        let status = own_status(
            self.exchange(),
            Outcome::Panicked,
            StatusCode::INTERNAL_SERVER_ERROR,
        );
        // Whoever committed first (a handler's `Exchange::commit` before its panic), the
        // future answers the winner's record.
        let _committed = self.decide(Outcome::Panicked, Some(status));
    }

    /// Commits with `outcome` and answers with the layer's own answer for the winner.
    fn own_answer<B>(
        &mut self,
        outcome: Outcome,
        status: StatusCode,
        how: &OwnAnswers,
    ) -> Response<ResponseBody<B>> {
        // A gRPC client reads `grpc-status`, not the HTTP status: its answers are 200; a
        // Connect call's are Connect's (`connect.rs`).
        let status = own_status(self.exchange(), outcome, status);
        let committed = self.decide(outcome, Some(status));
        self.winner_answer(committed, how)
    }

    /// The layer's own answer for `committed` (a timeout, a rejection, a caught panic):
    /// its status, an empty body, and the committed response headers that are safe on an
    /// answer without the handler's body (see [`OwnAnswers`]).
    fn winner_answer<B>(
        &mut self,
        committed: Committed,
        how: &OwnAnswers,
    ) -> Response<ResponseBody<B>> {
        let status = match committed.outcome() {
            Outcome::TimedOut | Outcome::Rejected | Outcome::Panicked | Outcome::Shed => committed
                .committed_status()
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            // A commit made by user code (`Exchange::commit`) with no answer of the inner
            // service to send: the layer has nothing but an error to give, in the form the
            // protocol reads (200 and a status in the body or trailers for gRPC and streaming
            // Connect).
            _ => own_status(
                self.exchange(),
                Outcome::Panicked,
                StatusCode::INTERNAL_SERVER_ERROR,
            ),
        };
        let (mut head, ()) = Response::new(()).into_parts();
        head.status = status;
        how.copy_safe_headers(&mut head.headers, committed.response());
        let mut body: &'static [u8] = &[];
        if committed.outcome() == Outcome::Shed {
            // A refusal (admission): `retry-after: 0`, "try again now, elsewhere"; a timeout
            // has none, so a caller tells the two apart whatever their statuses.
            head.headers.insert(
                http::header::RETRY_AFTER,
                http::HeaderValue::from_static("0"),
            );
        }
        if committed.is_grpc() {
            grpc_answer(&mut head.headers, committed.outcome());
        } else if let Some(call) = committed.line().and_then(|line| line.connect.as_ref()) {
            body = connect::answer(call, committed.outcome(), &mut head.headers);
        }
        let mut res = self.leave::<B>(head, None, committed, how);
        res.body_mut().set_answer(body);
        res
    }

    /// Attaches the record (if asked for), runs the commit hooks with the response's head,
    /// and gives the body what the end of the response needs.
    fn leave<B>(
        &mut self,
        mut head: http::response::Parts,
        body: Option<(B, Option<BodyPermit>)>,
        committed: Committed,
        how: &OwnAnswers,
    ) -> Response<ResponseBody<B>> {
        // The request id on every response: the handler's, an own answer, gRPC's (unless the
        // response has that header already).
        if let Some(context) = committed.context() {
            add_request_id(&mut head.headers, context);
        }
        let tracker = if self.end.is_some() {
            // The head leaves now: at the commit's instant if this future just made it (no
            // second clock read), else (the timer committed while the handler blocked its
            // thread) now.
            let head_at = if self.won {
                committed.time_to_commit()
            } else {
                committed.started().elapsed()
            };
            self.tracker(&committed, Some(&head), Some(head_at))
        } else {
            None
        };
        if how.record {
            head.extensions.insert(committed.clone());
        }
        self.done(&committed, Some(&head));
        // The future is finished: the body carries the span on (moved, not cloned).
        #[cfg(feature = "tracing")]
        let tracker = tracker.map(|mut tracker| {
            tracker.span = self.span.take();
            tracker
        });
        let body = match body {
            Some((body, permit)) => ResponseBody::holding(body, tracker, permit),
            None => ResponseBody::empty(tracker),
        };
        Response::from_parts(head, body)
    }
}

impl Drop for CommitGuard {
    fn drop(&mut self) {
        if self.exchange.is_some() {
            // Losing here is fine: someone committed first, and the hook still runs once,
            // with nothing sent (the response never left this layer).
            let committed = self.decide(Outcome::Cancelled, None);
            self.done(&committed, None);
        }
    }
}
