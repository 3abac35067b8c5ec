//! The layer's own answers (a timeout, a rejection, a caught panic): which of the committed
//! response headers they may carry.

use http::StatusCode;
use http::header::{self, HeaderMap, HeaderName};

use super::{HeaderSelection, SharedHeadersLayer};
use crate::snapshot::Snapshot;

/// The list behind [`SharedHeadersLayer::never_on_own_answers`].
static NEVER: [HeaderName; 19] = [
    header::CONTENT_TYPE,
    header::CONTENT_ENCODING,
    header::CONTENT_LANGUAGE,
    header::CONTENT_LOCATION,
    header::CONTENT_DISPOSITION,
    header::CONTENT_LENGTH,
    header::CONTENT_RANGE,
    header::TRANSFER_ENCODING,
    header::TRAILER,
    HeaderName::from_static("content-digest"),
    HeaderName::from_static("repr-digest"),
    header::ETAG,
    header::LAST_MODIFIED,
    header::ACCEPT_RANGES,
    header::CACHE_CONTROL,
    header::EXPIRES,
    header::AGE,
    header::PRAGMA,
    header::VARY,
];

impl SharedHeadersLayer {
    /// The headers a layer's **own answer** (the timeout answer, the rejection answer, the 500
    /// for a caught panic) never carries from the committed ones, whatever
    /// [`own_answer_headers`](Self::own_answer_headers) selects. A slice (from a function: a
    /// `HeaderName` cannot be borrowed from a constant), so that the list can grow without a
    /// change of its type.
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
    /// | `content-digest`, `repr-digest` | integrity of a body that is not sent (RFC 9530) |
    /// | `etag`, `last-modified`, `accept-ranges` | validators and range support of the handler's representation (RFC 9110 §8.8, §14.3): a cache would revalidate against them |
    /// | `cache-control`, `expires`, `age`, `pragma`, `vary` | caching (RFC 9111 §5, RFC 9110 §12.5.5): the layer's answer must not be stored as if it were the handler's |
    ///
    /// A gRPC own answer then sets its own `content-type: application/grpc` (with
    /// `grpc-status` and `grpc-message`): gRPC's trailers-only form needs it, and it describes
    /// the layer's answer, not the handler's body. The [`Committed`](crate::Committed) record
    /// keeps every committed header either way; the `on_commit` hook sees what was sent
    /// ([`CommitEvent::sent_headers`](crate::CommitEvent::sent_headers)).
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
    /// assert!(SharedHeadersLayer::never_on_own_answers().contains(&http::header::CONTENT_LENGTH));
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
    pub fn never_on_own_answers() -> &'static [HeaderName] {
        &NEVER
    }
}

/// Whether an own answer carries a committed header named `name` under `selection`.
fn carries(selection: &HeaderSelection, name: &HeaderName) -> bool {
    !NEVER.contains(name) && selection.contains(name)
}

/// What the response future needs to make the layer's own answers.
#[derive(Debug, Clone)]
pub(super) struct OwnAnswers {
    pub(super) timeout_status: StatusCode,
    pub(super) rejection_status: StatusCode,
    /// Whether each response carries its `Committed` record in its extensions.
    pub(super) record: bool,
    pub(super) headers: HeaderSelection,
    /// Whether a caught panic of the inner future goes on to the caller after the commit.
    pub(super) resume_panics: bool,
}

impl OwnAnswers {
    /// Appends the committed headers that an own answer carries to `into` (an empty map),
    /// stopping quietly at `HeaderMap`'s size limit (the record still holds them all).
    pub(super) fn copy_safe_headers(&self, into: &mut HeaderMap, committed: &Snapshot) {
        for (name, value) in committed.iter() {
            if carries(&self.headers, name) && into.try_append(name, value.clone()).is_err() {
                return;
            }
        }
    }
}
