//! The layer's deadline: its own timeout, the answer it makes, and the caller's budget.

use std::time::Duration;

use http::StatusCode;

use super::SharedHeadersLayer;
use crate::deadline::BudgetHeader;

#[cfg(doc)]
use crate::exchange::{Committed, Exchange, Outcome};

/// # Deadline
impl SharedHeadersLayer {
    /// Sets a deadline of `duration` per request (a second call replaces it), counted from
    /// the call of the service and enforced **at the wall clock**.
    ///
    /// When it fires before the inner service answers, the layer commits with
    /// [`Outcome::TimedOut`] at that moment, even if the task serving the request is not being
    /// polled (a handler that blocks its thread, a starved worker): from then on every write is
    /// refused. The response future, when next polled, answers with
    /// [`timeout_status`](Self::timeout_status) and an empty [`ResponseBody`](crate::server::ResponseBody)
    /// (the inner body needs no `Default`); the
    /// inner future is dropped with the response future. If the inner service's answer is
    /// ready when the future is polled and nothing has committed yet, the answer wins (as with
    /// tower's `Timeout`), even past the deadline. If the deadline passes before the response
    /// future is polled for the first time (a starved worker), the inner future is dropped
    /// without ever being polled: the handler does not run at all, and the request is logged as
    /// timed out.
    ///
    /// The commit at the deadline is made by **one thread for the whole process** (shared by
    /// every layer, clone and duration; started at the first deadline, then parked while no
    /// deadline is pending), so it needs no Tokio time driver and works on any runtime; its
    /// queue is a heap ordered by deadline, so deadlines of any mix of lengths fire in order.
    /// That thread runs no user code: it seals the request's handles and wakes the response
    /// future, which makes the timeout answer and runs the [`on_commit`](Self::on_commit) hook
    /// in the request's own task. A hook that sleeps, blocks or panics therefore delays no
    /// other request's deadline. Its cost per request is measured by `benches/layer.rs`
    /// (`layer/per_request/shared_headers_timeout` against `shared_headers`): one heap push
    /// under a short lock. If the thread cannot be started, the deadline is applied when the
    /// future is polled.
    ///
    /// # Panics
    ///
    /// Never because of the runtime: the deadline needs no Tokio runtime and no time driver, so
    /// `call` works outside one too (the thread above does the timing).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new().timeout(Duration::from_millis(250));
    /// # drop(layer);
    /// ```
    pub fn timeout(mut self, duration: Duration) -> Self {
        self.config.timeout = Some(duration);
        self.resolve()
    }

    /// Sets the status of the response sent when the deadline fires (a second call replaces
    /// it). Default: 503 Service Unavailable, as Go's `http.TimeoutHandler`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use http::StatusCode;
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new().timeout_status(StatusCode::GATEWAY_TIMEOUT);
    /// # drop(layer);
    /// ```
    pub fn timeout_status(mut self, status: StatusCode) -> Self {
        self.config.answers.timeout_status = status;
        self.resolve()
    }

    /// Takes the caller's budget from `header` as the request's deadline when it is earlier
    /// than the layer's own ([`timeout`](Self::timeout)): gRPC's `grpc-timeout`
    /// ([`BudgetHeader::grpc_timeout`]), Connect's `connect-timeout-ms`, Envoy's
    /// `x-envoy-expected-rq-timeout-ms`, or a header you name ([`BudgetHeader::millis`]).
    /// Adds: called several times, each header is read and the earliest deadline wins,
    /// whatever the order of the calls (the headers are kept in one order, by name, and a
    /// header given twice is read once). Off unless set.
    ///
    /// The effective deadline is the smaller of the caller's and the server's: **a caller can
    /// shorten the deadline, never extend it**; without a `timeout`, the caller's budget is the
    /// deadline. It is enforced exactly like the layer's own (the same commit, answer and log
    /// line), readable by the handler ([`Exchange::deadline`]) and by clients deeper down
    /// ([`Deadline::current`](crate::deadline::Deadline::current)), and kept in the record
    /// ([`Committed::deadline`], [`Committed::budget`]). A malformed or absurd value (a sign,
    /// 9 digits in `grpc-timeout`, an unknown unit, not digits) is refused: the layer's own
    /// deadline applies, the refusal is counted ([`LayerStats::refused_budgets`](super::LayerStats::refused_budgets))
    /// and kept in the record ([`Committed::budget_error`](crate::Committed::budget_error)); parsing never panics (fuzzed:
    /// `fuzz/fuzz_targets/budget.rs`).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use std::time::Duration;
    /// use http::{Request, Response, StatusCode};
    /// use shared_headers::Exchange;
    /// use shared_headers::deadline::{BudgetHeader, DeadlineSource};
    /// use shared_headers::server::SharedHeadersLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let layer = SharedHeadersLayer::new()
    ///     .timeout(Duration::from_secs(5))
    ///     .caller_budget(BudgetHeader::envoy_expected_rq_timeout_ms());
    /// let stats = layer.stats(); // before the layer is applied
    /// let service = layer.layer(service_fn(|req: Request<()>| async move {
    ///     let deadline = req.extensions().get::<Exchange>().unwrap().deadline().unwrap();
    ///     assert_eq!(deadline.source(), DeadlineSource::Caller);
    ///     tokio::time::sleep(Duration::from_secs(1)).await; // over the caller's 20 ms
    ///     Ok::<_, Infallible>(Response::new(String::new()))
    /// }));
    /// let req = Request::get("/").header("x-envoy-expected-rq-timeout-ms", "20").body(())?;
    /// let res = service.clone().oneshot(req).await?;
    /// assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    ///
    /// let req = Request::get("/").header("x-envoy-expected-rq-timeout-ms", "-1").body(())?;
    /// let _ = tokio::time::timeout(Duration::from_millis(50), service.oneshot(req)).await;
    /// assert_eq!(stats.refused_budgets(), 1); // refused; the server's 5 s applied
    /// # Ok(())
    /// # }
    /// ```
    pub fn caller_budget(mut self, header: BudgetHeader) -> Self {
        let mut budgets = self.config.budgets.to_vec();
        if !budgets.contains(&header) {
            budgets.push(header);
        }
        // One order whatever the order of the calls: which refusal a request's record keeps
        // when several headers are malformed does not depend on it.
        budgets.sort_by_cached_key(|header| format!("{header:?}"));
        self.config.budgets = budgets.into();
        self.resolve()
    }
}
