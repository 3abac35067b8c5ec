//! The layer's hooks: the access log at the commit, the late-writes report, the end of the
//! response, and the ready `tracing` access log.

use std::sync::Arc;

use super::SharedHeadersLayer;
use crate::exchange::{CommitEvent, LateWrites};
use crate::server::end::{EndHook, OnResponseEnd, ResponseEnd};

#[cfg(doc)]
use crate::exchange::{CommitHooks, Committed, Exchange, Outcome};

impl<H: OnResponseEnd> SharedHeadersLayer<H> {
    /// Runs `f` once per request, whatever the outcome (answered, failed, timed out, rejected,
    /// panicked, or cancelled because the response future was dropped: an outer timeout such as
    /// tower-http's `TimeoutLayer`, a client that disconnected), with the [`Committed`] record
    /// and **the response as it leaves the layer**: [`CommitEvent::sent`] is its head (status,
    /// version, every header, the handler's own included, and without the headers an own answer
    /// dropped), `None` when no response left the layer (failed, cancelled: a header that was
    /// committed but not sent is never shown as sent). `f` has returned before the response
    /// leaves the layer. This is the access log that sees every request: an outer logging layer
    /// sees no response, hence no record, for a cancelled one.
    ///
    /// `f` runs in the response future, in the request's own task, after the commit (whoever
    /// made it: the future, the process's deadline thread, the handler's own
    /// [`Exchange::commit`]) and after the answer was built; for a cancelled request, in the
    /// future's drop. Never on the deadline thread: a slow or stuck `f` delays only its own
    /// request's answer (it blocks the runtime worker that runs it, like any blocking code).
    /// Replaces a previous `on_commit`. The same type of hook as [`CommitHooks::on_commit`].
    ///
    /// # Panics
    ///
    /// A panic in `f` is caught (`catch_unwind`), including one whose payload panics again when
    /// dropped: it does not abort the process (even when `f` runs inside a `Drop` during an
    /// unwind) and does not change the request's outcome or response. See [`CommitHooks`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use std::sync::{Arc, Mutex};
    /// use http::{Request, Response};
    /// use shared_headers::Outcome;
    /// use shared_headers::server::SharedHeadersLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// let lines = log.clone();
    /// let layer = SharedHeadersLayer::new().on_commit(move |c| {
    ///     let line = format!("{} {} {:?} {}", c.method().unwrap(), c.uri().unwrap(),
    ///         c.status().map(|s| s.as_u16()), c.outcome());
    ///     lines.lock().unwrap().push(line);
    /// });
    /// let service = layer.layer(service_fn(|_req: Request<()>| async {
    ///     Ok::<_, Infallible>(Response::new(String::new()))
    /// }));
    /// service.oneshot(Request::get("/users/1").body(())?).await?;
    /// assert_eq!(*log.lock().unwrap(), ["GET /users/1 Some(200) answered"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn on_commit(mut self, f: impl Fn(&CommitEvent<'_>) + Send + Sync + 'static) -> Self {
        self.config.hooks = self.config.hooks.on_commit(f);
        self
    }

    /// Runs `f` once per request whose exchange had writes refused after its commit (tasks
    /// that outlived the response: Kubernetes' "post-timeout activity"), when the last clone of
    /// its [`Exchange`] is dropped, that is after the last task holding it ended. `f` gets the
    /// count and the time since the commit ([`LateWrites`]).
    ///
    /// Costs nothing per request beyond the exchange (it runs from the exchange's own drop) and
    /// keeps nothing alive. What is counted, and the case of tasks holding only a handle: see
    /// [`CommitHooks::on_late_writes`]. A panic in `f` is caught, as for
    /// [`on_commit`](Self::on_commit).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use std::sync::{Arc, Mutex};
    /// use http::{Request, Response};
    /// use shared_headers::Exchange;
    /// use shared_headers::server::SharedHeadersLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let layer = SharedHeadersLayer::new()
    ///     .on_late_writes(move |late| tx.send(late.refused_writes()).unwrap());
    /// let service = layer.layer(service_fn(|req: Request<()>| async move {
    ///     let exchange = req.extensions().get::<Exchange>().unwrap().clone();
    ///     tokio::spawn(async move {
    ///         tokio::time::sleep(std::time::Duration::from_millis(5)).await; // after the answer
    ///         assert!(exchange.response().insert("x-late", "1".parse().unwrap()).is_err());
    ///     });
    ///     Ok::<_, Infallible>(Response::new(String::new()))
    /// }));
    /// service.oneshot(Request::new(())).await?;
    /// let refused = tokio::task::spawn_blocking(move || rx.recv().unwrap()).await?;
    /// assert_eq!(refused, 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn on_late_writes(mut self, f: impl Fn(&LateWrites) + Send + Sync + 'static) -> Self {
        self.config.hooks = self.config.hooks.on_late_writes(f);
        self
    }

    /// Logs every request through `tracing` (feature `tracing`): installs
    /// [`access_log::commit`](crate::server::access_log::commit) as the `on_commit` hook and
    /// [`access_log::late_writes`](crate::server::access_log::late_writes) as the `on_late_writes`
    /// hook, replacing hooks set before. See [`access_log`](crate::server::access_log) for the events
    /// and their fields.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new()
    ///     .timeout(Duration::from_secs(5))
    ///     .tracing_access_log();
    /// # drop(layer);
    /// ```
    #[cfg(feature = "tracing")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tracing")))]
    pub fn tracing_access_log(self) -> Self {
        self.access_log(crate::server::access_log::AccessLog::new())
    }

    /// Logs every request through `tracing` with `log`'s settings (levels per outcome, the
    /// query's redaction): installs [`AccessLog::commit`](crate::server::access_log::AccessLog::commit)
    /// as the `on_commit` hook and
    /// [`AccessLog::late_writes`](crate::server::access_log::AccessLog::late_writes) as the
    /// `on_late_writes` hook, replacing
    /// hooks set before, and keeps each request's `tracing` span (the one current when the
    /// layer's service is called) for its lines, whichever thread emits them.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::{SharedHeadersLayer, access_log::AccessLog};
    /// let layer = SharedHeadersLayer::new()
    ///     .access_log(AccessLog::new().redact_query_params(["token"]));
    /// # drop(layer);
    /// ```
    #[cfg(feature = "tracing")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tracing")))]
    pub fn access_log(mut self, log: crate::server::access_log::AccessLog) -> Self {
        let log = Arc::new(log);
        let late = Arc::clone(&log);
        self.config.capture_span = true;
        self.on_commit(move |c| log.commit(c))
            .on_late_writes(move |l| late.late_writes(l))
    }

    /// Runs `f` once per request at the end of its response: when the response body was sent
    /// to its end, failed, or was dropped before its end (the client went away), and, for a
    /// request that got no response from the layer (failed, cancelled), at the commit; with
    /// the bytes of body sent and the time from the call to the end ([`ResponseEnd`]:
    /// nginx's `$body_bytes_sent` and `$request_time`). The commit's `on_commit` line is about
    /// what was decided and the head that left; this one is about the body on the wire.
    ///
    /// The layer's responses then have a [`TrackedBody`](crate::server::TrackedBody) around the inner
    /// service's body (the type parameter becomes [`EndHook`]); a layer without this hook
    /// returns the inner body untouched and pays nothing. `f` runs where the body is polled or
    /// dropped (the server's connection task), inside the request's `tracing` span when the
    /// layer keeps it ([`access_log`](Self::access_log)). A panic in `f` is caught. Replaces a
    /// previous `on_response_end`.
    ///
    /// # Examples
    ///
    /// See [`ResponseEnd`]. With the access log:
    /// ```
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new()
    ///     .on_response_end(|end| {
    ///         println!("{:?} {} bytes in {:?} ({})",
    ///             end.status(), end.bytes_sent(), end.elapsed(), end.ending());
    ///     });
    /// # drop(layer);
    /// ```
    pub fn on_response_end(
        self,
        f: impl Fn(&ResponseEnd) + Send + Sync + 'static,
    ) -> SharedHeadersLayer<EndHook> {
        SharedHeadersLayer {
            config: self.config,
            end: EndHook { f: Arc::new(f) },
        }
    }
}
