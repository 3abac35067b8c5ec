//! The body of every response of the layer ([`ResponseBody`]): the inner service's body or the
//! body of an own answer (empty, or a Connect answer's static bytes), which reports the end of
//! the response once.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Method, StatusCode, Version};
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use super::admission::BodyPermit;
use super::end::{Ending, ResponseEnd, Tracker, UNKNOWN_LENGTH};
use crate::sync::Ordering;

pin_project! {
    /// The body of every response of [`SharedHeadersService`](super::SharedHeadersService):
    /// the inner service's body, or the body of the layer's own answers (a timeout, a
    /// rejection, a caught panic): empty, or for a Connect call a short static JSON error, so
    /// the inner body needs no `Default`. It is a [`Body`] when the inner body is one whose
    /// data can be made from `&'static [u8]` (`B::Data: From<&'static [u8]>`): every body
    /// whose data is `Bytes` (hyper's `Incoming`, axum's, tonic's, `Full<Bytes>`, `String`)
    /// or `Vec<u8>`; an inner body with another data type (a custom `Buf`) needs that `From`
    /// impl, or to be mapped to `Bytes` (`http_body_util::BodyExt::map_frame`). It reports the end
    /// of the response once (see [`ResponseEnd`]): to the access line and the
    /// [`on_response_end`](super::SharedHeadersLayer::on_response_end) hooks, when the layer
    /// has any. Frames, size hints and the end of the stream are the inner body's. With
    /// [`Admission`](super::Admission), it holds the request's in-flight permit until it is
    /// dropped (a streaming response holds it while it streams), or until it has produced no
    /// frame for a while (its client stopped reading, or it is `Pending` between events): it
    /// gives its permit back then.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use http::{Request, Response};
    /// use http_body_util::{BodyExt, Full};
    /// use hyper::body::Bytes;
    /// use shared_headers::server::{ResponseBody, SharedHeadersLayer};
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    /// let service = SharedHeadersLayer::new().layer(service_fn(|_req: Request<()>| async {
    ///     Ok::<_, Infallible>(Response::new(Full::new(Bytes::from("hello"))))
    /// }));
    /// let res: Response<ResponseBody<Full<Bytes>>> = service.oneshot(Request::new(())).await?;
    /// assert_eq!(res.into_body().collect().await?.to_bytes(), "hello");
    /// # Ok(())
    /// # }
    /// ```
    pub struct ResponseBody<B> {
        // `None`: the layer's own answer, an empty body.
        #[pin]
        inner: Option<B>,
        // The body of an own answer still to send (a Connect answer's; empty otherwise).
        answer: &'static [u8],
        tracker: Option<Tracker>,
        // Admission's permit, given back when the body is dropped (its end), or once it has
        // produced no frame for a while (its client stopped reading, or its handler has no
        // event yet): a streaming route holds it while it produces frames.
        permit: Option<BodyPermit>,
    }

    impl<B> PinnedDrop for ResponseBody<B> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if let Some(mut tracker) = this.tracker.take() {
                let ending = if let Some(message) = tracker.panicked.take() {
                    tracker.end.panic = message;
                    Ending::Panicked
                } else if tracker.at_end.load(Ordering::Relaxed) {
                    at_end(&tracker)
                } else if bodiless(&tracker.end)
                    || (http1(&tracker.end) && sent_in_full(&tracker))
                {
                    Ending::Completed
                } else {
                    Ending::Dropped
                };
                tracker.report(ending);
            }
        }
    }
}

/// How a body that reported its end (`poll_frame` returned `None`, or `is_end_stream` said
/// so) ended: complete with the bytes its `content-length` (or the exact size hint a server
/// wrote as one) declares (or with none,
/// when its response has no body: a `HEAD`'s `content-length` is the one a `GET` would get),
/// else aborted (a message that ends short of its declared length, or goes past it, fails:
/// hyper closes the HTTP/1 connection, an HTTP/2 peer resets the stream).
fn at_end(tracker: &Tracker) -> Ending {
    // The header's length, else the one the server wrote from an exact size hint.
    let declared = tracker.complete_at.load(Ordering::Relaxed);
    if declared != UNKNOWN_LENGTH && tracker.end.bytes_sent != declared && !bodiless(&tracker.end) {
        Ending::Aborted
    } else {
        Ending::Completed
    }
}

/// Whether the request came over HTTP/1.x, where hyper's server stops polling a body at its
/// declared length and takes a 2xx to `CONNECT` as a tunnel. Over HTTP/2 it polls a body to
/// its end (the `None` that ends the stream), and refuses a `CONNECT` 2xx with a body.
fn http1(end: &ResponseEnd) -> bool {
    end.committed
        .version()
        .is_some_and(|version| version <= Version::HTTP_11)
}

/// Whether an HTTP/1.x server took all of the body before it dropped it: the bytes taken
/// reached its declared length. It writes no more than a `content-length` (or an exact size
/// hint) declares and stops polling there, so a body that learns its end only at its next poll
/// (a stream, a file read to its length) is dropped after its last byte, complete (as far as
/// the layer sees: the bytes may still sit in the server's write buffer).
fn sent_in_full(tracker: &Tracker) -> bool {
    tracker.end.bytes_sent >= tracker.complete_at.load(Ordering::Relaxed)
}

/// Whether a response has no body by its method or status (RFC 9110 §6.4.1, §9.3.6; RFC 9112
/// §6.3): a `HEAD` request, a 1xx (a `101` upgrade), 204 or 304 status, and over HTTP/1.x a
/// 2xx to `CONNECT` (the connection becomes a tunnel; over HTTP/2 the stream does, and hyper
/// takes it only with a body at its end). A server drops such a body unpolled, and that drop
/// is its complete end.
fn bodiless(end: &ResponseEnd) -> bool {
    end.bytes_sent == 0
        && end.status_sent.is_some_and(|status| {
            status.is_informational()
                || status == StatusCode::NO_CONTENT
                || status == StatusCode::NOT_MODIFIED
                || match end.committed.method() {
                    Some(&Method::HEAD) => true,
                    Some(&Method::CONNECT) => status.is_success() && http1(end),
                    _ => false,
                }
        })
}

/// The length a response's head declares (its `content-length`, digits only), else
/// [`UNKNOWN_LENGTH`].
pub(super) fn declared_length(headers: &http::HeaderMap) -> u64 {
    let Some(value) = headers.get(http::header::CONTENT_LENGTH) else {
        return UNKNOWN_LENGTH;
    };
    let digits = value.as_bytes();
    if digits.is_empty() || digits.len() > 19 {
        return UNKNOWN_LENGTH;
    }
    let mut length = 0u64;
    for &digit in digits {
        if !digit.is_ascii_digit() {
            return UNKNOWN_LENGTH;
        }
        // 19 digits fit in a `u64`.
        length = length * 10 + u64::from(digit - b'0');
    }
    length
}

impl<B> ResponseBody<B> {
    /// `inner` as a body of this type that reports nothing: for a stack whose branches must
    /// have one body type, some of them without the layer.
    ///
    /// # Examples
    ///
    /// ```
    /// use http_body_util::Full;
    /// use hyper::body::Bytes;
    /// use shared_headers::server::ResponseBody;
    ///
    /// let body: ResponseBody<Full<Bytes>> = ResponseBody::new(Full::from("not through the layer"));
    /// # drop(body);
    /// ```
    pub fn new(inner: B) -> Self {
        Self::tracked(inner, None)
    }

    /// The inner service's body.
    #[inline]
    pub(super) fn tracked(inner: B, tracker: Option<Tracker>) -> Self {
        ResponseBody {
            inner: Some(inner),
            answer: &[],
            tracker,
            permit: None,
        }
    }

    /// The empty body of an own answer.
    #[inline]
    pub(super) fn empty(tracker: Option<Tracker>) -> Self {
        ResponseBody {
            inner: None,
            answer: &[],
            tracker,
            permit: None,
        }
    }

    /// The inner service's body holding admission's permit (given back when the body is
    /// dropped).
    #[inline]
    pub(super) fn holding(inner: B, tracker: Option<Tracker>, permit: Option<BodyPermit>) -> Self {
        ResponseBody {
            inner: Some(inner),
            answer: &[],
            tracker,
            permit,
        }
    }

    /// Gives an own answer its body (static bytes: a Connect answer's).
    #[inline]
    pub(super) fn set_answer(&mut self, answer: &'static [u8]) {
        if self.inner.is_none() {
            self.answer = answer;
        }
    }

    /// The inner service's body, or `None` for the layer's own answers (an empty body). The
    /// end of the response is reported now, as if the body was dropped.
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
    /// # async fn main() -> Result<(), Infallible> {
    /// let service = SharedHeadersLayer::new().layer(service_fn(|_req: Request<()>| async {
    ///     Ok::<_, Infallible>(Response::new(String::from("hello")))
    /// }));
    /// let res = service.oneshot(Request::new(())).await?;
    /// assert_eq!(res.into_body().into_inner().as_deref(), Some("hello"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn into_inner(self) -> Option<B> {
        let mut this = self;
        let inner = this.inner.take();
        drop(this);
        inner
    }
}

/// An empty body that reports nothing: what an outer layer's own answer (tower-http's
/// `TimeoutLayer`) makes.
impl<B> Default for ResponseBody<B> {
    fn default() -> Self {
        ResponseBody::empty(None)
    }
}

impl<B> fmt::Debug for ResponseBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseBody")
            .field("own_answer", &self.inner.is_none())
            .field("ended", &self.tracker.is_none())
            .finish_non_exhaustive()
    }
}

/// Puts the request's span back into the tracker (if the body still has one) when a poll
/// ends, however it ends.
#[cfg(feature = "tracing")]
struct Restore<'a> {
    tracker: &'a mut Option<Tracker>,
    span: Option<tracing::Span>,
}

#[cfg(feature = "tracing")]
impl Drop for Restore<'_> {
    fn drop(&mut self) {
        if let Some(tracker) = self.tracker.as_mut() {
            tracker.span = self.span.take();
        }
    }
}

/// Calls a body's `is_end_stream` or `size_hint`: a panic there marks the tracker (the end is
/// then reported as panicked, with its message, when the server drops the body) and goes on
/// with its own payload, as one in `poll_frame` does.
fn guarded<T>(tracker: Option<&Tracker>, call: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(call)) {
        Ok(value) => value,
        Err(payload) => {
            if let Some(tracker) = tracker {
                let _ = tracker.panicked.set(panic_message(&*payload));
            }
            std::panic::resume_unwind(payload);
        }
    }
}

/// Whether the trailers of a response reach its client, so that their `grpc-status` is the
/// call's: a gRPC call (the request rule, `Line::is_grpc`: over HTTP/1.1 it asked for
/// trailers) answered with a gRPC response (the same content-type rule), and over HTTP/1.1
/// only when hyper's HTTP/1 server sends trailers: the body is chunked (no `content-length`,
/// no exact size hint written as one) and the head's `trailer` header names `grpc-status`.
fn trailers_sent(tracker: &Tracker) -> bool {
    if !tracker.grpc_response || !super::line::LineOf::is_grpc(&tracker.end.committed) {
        return false;
    }
    !http1(&tracker.end)
        || (tracker.trailer_announced
            && tracker.complete_at.load(Ordering::Relaxed) == UNKNOWN_LENGTH)
}

/// Whether a response head is a gRPC response's (its `content-type` by the request's rule,
/// [`is_grpc`](super::line::is_grpc): gRPC-Web excluded), and whether its `trailer` header
/// names `grpc-status` (hyper's HTTP/1 server sends only the trailer fields the head
/// announces).
pub(super) fn grpc_head(headers: &http::HeaderMap) -> (bool, bool) {
    let grpc = super::line::is_grpc(headers);
    let announced = grpc
        && headers.get_all(http::header::TRAILER).iter().any(|value| {
            value.to_str().is_ok_and(|line| {
                line.split(',')
                    .any(|name| name.trim().eq_ignore_ascii_case("grpc-status"))
            })
        });
    (grpc, announced)
}

/// The `grpc-status` in a header block, if any.
pub(super) fn grpc_status(headers: &http::HeaderMap) -> Option<u16> {
    headers
        .get("grpc-status")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse().ok())
}

/// `B::Data: From<&'static [u8]>` lets an own answer carry a static body (a Connect answer's
/// JSON error): every body whose data is [`Bytes`](bytes::Bytes) (hyper's `Incoming`, axum's,
/// tonic's, `http-body-util`'s `Full<Bytes>`, `String`) or `Vec<u8>` has it.
impl<B> Body for ResponseBody<B>
where
    B: Body,
    B::Data: From<&'static [u8]>,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        let Some(mut inner) = this.inner.as_pin_mut() else {
            if !this.answer.is_empty() {
                let answer = std::mem::take(this.answer);
                if let Some(tracker) = this.tracker.take() {
                    let mut tracker = tracker;
                    tracker.end.bytes_sent += answer.len() as u64;
                    let ending = at_end(&tracker);
                    tracker.report(ending);
                }
                return Poll::Ready(Some(Ok(Frame::data(B::Data::from(answer)))));
            }
            if let Some(tracker) = this.tracker.take() {
                tracker.report(Ending::Completed);
            }
            return Poll::Ready(None);
        };
        // Nothing tracked (no consumer, or the end already reported): the inner poll alone
        // (and the permit's stall watch, when it holds one).
        if this.tracker.is_none() {
            let polled = inner.as_mut().poll_frame(cx);
            if let Some(permit) = this.permit.as_mut() {
                if let Poll::Ready(Some(Ok(frame))) = &polled {
                    if frame.is_data() && !inner.is_end_stream() {
                        permit.framed();
                    }
                }
            }
            return polled;
        }
        // The request's `tracing` span around the body's poll (`span.rs`), and the end's
        // report if this poll ends the body: entered once for both (the span is out of the
        // tracker meanwhile, so that the report does not enter it again; `Restore` puts it
        // back, also when the inner body panics).
        #[cfg(feature = "tracing")]
        let restore = Restore {
            span: this.tracker.as_mut().and_then(|t| t.span.take()),
            tracker: this.tracker,
        };
        #[cfg(feature = "tracing")]
        let _entered = restore.span.as_ref().map(tracing::Span::enter);
        #[cfg(feature = "tracing")]
        let tracker = &mut *restore.tracker;
        #[cfg(not(feature = "tracing"))]
        let tracker = this.tracker;
        // A body that panics ends its response as panicked (its message kept for the report),
        // then its panic goes on with its own payload: a body cannot end its stream failed
        // without an error of its own type, and the head has left, so no answer can replace
        // it (the server drops the response: HTTP/1 closes the connection, HTTP/2 resets the
        // stream).
        let polled = match catch_unwind(AssertUnwindSafe(|| inner.as_mut().poll_frame(cx))) {
            Ok(polled) => polled,
            Err(payload) => {
                if let Some(mut tracker) = tracker.take() {
                    tracker.end.panic = panic_message(&*payload);
                    tracker.report(Ending::Panicked);
                }
                std::panic::resume_unwind(payload);
            }
        };
        let ending = match &polled {
            Poll::Pending => None,
            Poll::Ready(None) => tracker.as_ref().map(at_end),
            Poll::Ready(Some(Err(_))) => Some(Ending::Aborted),
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(tracker) = tracker.as_mut() {
                    if let Some(data) = frame.data_ref() {
                        tracker.end.bytes_sent += bytes::Buf::remaining(data) as u64;
                    } else if let Some(trailers) = frame.trailers_ref() {
                        // A trailers frame is a body's last: a server may drop the body now
                        // (hyper's HTTP/1 server polls no further), and that drop is its
                        // complete end; a consumer that polls on may still get an error,
                        // an abort (so the end is not reported here).
                        tracker.at_end.store(true, Ordering::Relaxed);
                        if trailers_sent(tracker) {
                            if let Some(status) = grpc_status(trailers) {
                                tracker.end.grpc_status = Some(status);
                            }
                        }
                    }
                }
                match tracker.as_ref() {
                    Some(t) if guarded(Some(t), || inner.is_end_stream()) => Some(at_end(t)),
                    _ => None,
                }
            }
        };
        if let Some(ending) = ending {
            if let Some(tracker) = tracker.take() {
                tracker.report(ending);
            }
        } else if let Some(permit) = this.permit.as_mut() {
            // A frame of data short of its end (a trailers frame is the last).
            if let Poll::Ready(Some(Ok(frame))) = &polled {
                if frame.is_data() {
                    permit.framed();
                }
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        let at_end = match &self.inner {
            Some(inner) => guarded(self.tracker.as_ref(), || inner.is_end_stream()),
            None => self.answer.is_empty(),
        };
        if at_end {
            if let Some(tracker) = &self.tracker {
                // A server stops polling now, on any protocol (see the drop).
                tracker.at_end.store(true, Ordering::Relaxed);
            }
        }
        at_end
    }

    fn size_hint(&self) -> SizeHint {
        let hint = self.inner.as_ref().map_or_else(
            || SizeHint::with_exact(self.answer.len() as u64),
            |inner| guarded(self.tracker.as_ref(), || inner.size_hint()),
        );
        if let (Some(left), Some(tracker)) = (hint.exact(), &self.tracker) {
            // A server asks for the hint with the head and writes it as the `content-length`
            // when the head has none (a declared length wins: hyper writes the header's). An
            // HTTP/1.x server writes no more (see the drop): the body is complete once the
            // bytes taken so far and the hint are taken; any server fails a body that ends at
            // another count (see `at_end`). Only lowered: the body's own thread is the only
            // one here.
            if tracker.declared != UNKNOWN_LENGTH {
                return hint;
            }
            let at = tracker.end.bytes_sent.saturating_add(left);
            if at < tracker.complete_at.load(Ordering::Relaxed) {
                tracker.complete_at.store(at, Ordering::Relaxed);
            }
        }
        hint
    }
}

/// The message of a panic's payload (`&str` or `String`), cut to 512 bytes at a character
/// boundary.
pub(super) fn panic_message(payload: &(dyn std::any::Any + Send)) -> Option<Box<str>> {
    let message = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))?;
    let mut cut = message.len().min(512);
    while !message.is_char_boundary(cut) {
        cut -= 1;
    }
    Some(message[..cut].into())
}
