//! The layer's own answers: which committed headers they carry, the record in the response,
//! and a handler's panic.

use super::SharedHeadersLayer;
use crate::server::HeaderSelection;

#[cfg(doc)]
use crate::exchange::{Committed, Exchange, Outcome};

/// # Answers
impl SharedHeadersLayer {
    /// Sets which committed response headers the layer's own answers (timeout, rejection, a
    /// caught panic) carry (replaces the previous selection). Default:
    /// [`HeaderSelection::all`]. Whatever the selection, an own answer never carries the
    /// representation, framing, validator and caching headers listed
    /// [below](#never-on-an-own-answer). [`HeaderSelection::none`] is Go's
    /// `http.TimeoutHandler`.
    ///
    /// # Never on an own answer
    ///
    /// A handler writes response headers for *its* answer. When the layer answers instead, with
    /// its own status and an empty body, some of them would be false, and some harmful: a
    /// `content-length: 100` on an empty HTTP/2 body is a protocol error (the stream is reset,
    /// the client sees no answer at all), and a `cache-control: public, max-age=3600` lets a
    /// shared cache keep the 503 for an hour. By RFC 9110, RFC 9111 and RFC 9112 these describe
    /// the representation in the body, its framing, its validators or how it may be cached,
    /// and none of that is true of the layer's answer:
    ///
    /// | header | why it is dropped |
    /// |---|---|
    /// | `content-type`, `content-encoding`, `content-language`, `content-location`, `content-disposition` | representation metadata (RFC 9110 §8.3-8.7, RFC 6266): they describe the handler's body, which is not sent |
    /// | `content-length`, `content-range`, `transfer-encoding`, `trailer` | framing (RFC 9110 §8.6, §14.4, §6.6.2; RFC 9112 §6): wrong for an empty body; a protocol error over HTTP/2 |
    /// | `content-digest`, `repr-digest`, `digest`, `content-md5` | integrity of a body that is not sent (RFC 9530, RFC 3230, RFC 1864) |
    /// | `connect-content-encoding`, `grpc-encoding` | the compression of the handler's messages, which are not sent (a Connect end-stream message or a trailers-only gRPC answer is uncompressed) |
    /// | `etag`, `last-modified`, `accept-ranges` | validators and range support of the handler's representation (RFC 9110 §8.8, §14.3): a cache would revalidate against them |
    /// | `cache-control`, `expires`, `age`, `pragma`, `vary` | caching (RFC 9111 §5, RFC 9110 §12.5.5): the layer's answer must not be stored as if it were the handler's |
    ///
    /// A gRPC own answer then sets its own `content-type: application/grpc` (with
    /// `grpc-status` and `grpc-message`): gRPC's trailers-only form needs it, and it describes
    /// the layer's answer, not the handler's body. The [`Committed`](crate::Committed) record
    /// keeps every committed header either way; the `on_commit` hook sees what was sent
    /// ([`CommitEvent::sent`](crate::CommitEvent::sent)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use std::time::Duration;
    /// use http::{HeaderName, Request, Response, StatusCode};
    /// use shared_headers::Exchange;
    /// use shared_headers::server::{HeaderSelection, SharedHeadersLayer};
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Infallible> {
    /// let layer = SharedHeadersLayer::new()
    ///     .timeout(Duration::from_millis(10))
    ///     .own_answer_headers(HeaderSelection::only([
    ///         HeaderName::from_static("x-request-id"),
    ///         http::header::CONTENT_LENGTH,
    ///     ]));
    /// let slow = layer.layer(service_fn(|req: Request<()>| async move {
    ///     let exchange = req.extensions().get::<Exchange>().unwrap().clone();
    ///     let response = exchange.response();
    ///     // Errors are ignored here for brevity: only `Err(Sealed)` after a commit is possible.
    ///     let _ = response.insert("x-request-id", "42".parse().unwrap());
    ///     let _ = response.insert("content-length", "100".parse().unwrap());
    ///     let _ = response.insert("x-cache", "miss".parse().unwrap());
    ///     tokio::time::sleep(Duration::from_secs(10)).await;
    ///     Ok::<_, Infallible>(Response::new(String::from("too late")))
    /// }));
    /// let res = slow.oneshot(Request::new(())).await?;
    /// assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    /// assert_eq!(res.headers()["x-request-id"], "42");
    /// assert!(!res.headers().contains_key("content-length")); // never on an own answer
    /// assert!(!res.headers().contains_key("x-cache")); // not selected
    /// # Ok(())
    /// # }
    /// ```
    pub fn own_answer_headers(mut self, headers: HeaderSelection) -> Self {
        self.config.answers.headers = headers;
        self.resolve()
    }

    /// Sets whether each response carries its [`Committed`] record in its extensions (a
    /// second call replaces it; the default: `true`), for an outer layer to read
    /// (`res.extensions().get::<Committed>()`).
    ///
    /// With `false` the record reaches the log only through the [`on_commit`](Self::on_commit)
    /// hook (as with `tracing_access_log`): the layer still
    /// commits, seals and merges the committed response headers into every response exactly as
    /// before, and the hook runs for every outcome, but no response carries the record, so an
    /// outer layer finds none. It saves what the record costs a response that nobody reads it
    /// from: the response's first extension (`http::Extensions` allocates its map, its table
    /// and a box for the value: 3 allocations per request, with their frees), measured by
    /// `benches/alloc.rs` and `benches/layer.rs` (`layer_timeout_hook_no_record`). Handlers
    /// still reach the exchange in the request's extensions, and
    /// [`Exchange::committed`] still gives the record to anyone holding the exchange.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use std::sync::{Arc, Mutex};
    /// use http::{Request, Response};
    /// use shared_headers::{Committed, Exchange};
    /// use shared_headers::server::SharedHeadersLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// let lines = log.clone();
    /// let layer = SharedHeadersLayer::new()
    ///     .on_commit(move |c| lines.lock().unwrap().push(c.committed().response()["x-cache"].clone()))
    ///     .record_in_response(false);
    /// let service = layer.layer(service_fn(|req: Request<()>| async move {
    ///     let exchange = req.extensions().get::<Exchange>().unwrap();
    ///     let _ = exchange.response().insert("x-cache", "hit".parse().unwrap()); // Err only if sealed: the answer is decided
    ///     Ok::<_, Infallible>(Response::new(String::new()))
    /// }));
    /// let res = service.oneshot(Request::new(())).await?;
    /// assert_eq!(res.headers()["x-cache"], "hit"); // merged as always
    /// assert!(res.extensions().get::<Committed>().is_none()); // no record in the response
    /// assert_eq!(*log.lock().unwrap(), ["hit"]); // the hook had it
    /// # Ok(())
    /// # }
    /// ```
    pub fn record_in_response(mut self, record: bool) -> Self {
        self.config.answers.record = record;
        self.resolve()
    }

    /// Sets whether a panic of the inner service goes on to the caller after the commit (a
    /// second call replaces it; default: `false`).
    ///
    /// By default the layer catches the panic, commits [`Outcome::Panicked`] and answers 500
    /// (gRPC: `grpc-status` 13): the connection and its other requests live on, and the
    /// access line has the panic's message. A server without a recovery layer of its own
    /// would otherwise lose the connection (hyper drops it, and an HTTP/2 connection's other
    /// streams with it) and the client gets no answer, so catching is the default.
    ///
    /// With `true`, as Go's `TimeoutHandler` and the Kubernetes timeout filter do, the layer
    /// still commits first (the handles are sealed, late writes refused, the hooks and the
    /// access line run, saying that nothing was sent), then resumes the unwind with the
    /// handler's **original payload** (`std::panic::resume_unwind`), so an outer recovery
    /// (tower-http's `CatchPanicLayer::custom`, an error reporter) sees the handler's own
    /// panic and makes the answer.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use http::{Request, Response};
    /// use shared_headers::server::SharedHeadersLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// # std::panic::set_hook(Box::new(|_| ()));
    /// let service = SharedHeadersLayer::new()
    ///     .resume_panics(true)
    ///     .layer(service_fn(|_req: Request<()>| async {
    ///         if true { panic!("handler bug") }
    ///         Ok::<_, Infallible>(Response::new(String::new()))
    ///     }));
    /// let caught = tokio::spawn(service.oneshot(Request::new(()))).await.unwrap_err();
    /// let payload = caught.into_panic();
    /// assert_eq!(payload.downcast_ref::<&str>(), Some(&"handler bug")); // the handler's own
    /// # }
    /// ```
    pub fn resume_panics(mut self, resume: bool) -> Self {
        self.config.answers.resume_panics = resume;
        self.resolve()
    }
}
