//! The end of a response: one call when the response body ends, is aborted, or is dropped
//! unsent, with the bytes sent and the time to the last byte (opt-in:
//! [`SharedHeadersLayer::on_response_end`](super::SharedHeadersLayer::on_response_end)).

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::StatusCode;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use crate::exchange::Committed;
use crate::sync::{AtomicBool, Ordering};

/// How a response ended (see [`ResponseEnd`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Ending {
    /// The body was sent to its end (its last frame was taken by the server).
    Completed,
    /// The body failed (its `poll_frame` returned an error): the server aborts the response.
    Aborted,
    /// The body was dropped before its end: the server stopped sending (the client went away,
    /// the connection closed).
    Dropped,
    /// No response left the layer: the request failed (the inner service's error passed
    /// through) or was cancelled (its future was dropped).
    Unsent,
}

impl fmt::Display for Ending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Ending::Completed => "completed",
            Ending::Aborted => "aborted",
            Ending::Dropped => "dropped",
            Ending::Unsent => "unsent",
        })
    }
}

/// The end of one response, as the [`on_response_end`](super::SharedHeadersLayer::on_response_end)
/// hook sees it: nginx's `$body_bytes_sent` and `$request_time`, with the commit's record.
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use std::sync::mpsc;
/// use http::{Request, Response};
/// use http_body_util::{BodyExt, Full};
/// use hyper::body::Bytes;
/// use shared_headers::server::{Ending, SharedHeadersLayer};
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let (tx, rx) = mpsc::channel();
/// let layer = SharedHeadersLayer::new()
///     .on_response_end(move |end| tx.send((end.ending(), end.bytes_sent())).unwrap());
/// let service = layer.layer(service_fn(|_req: Request<()>| async {
///     Ok::<_, Infallible>(Response::new(Full::new(Bytes::from("hello"))))
/// }));
/// let res = service.oneshot(Request::new(())).await?;
/// assert!(rx.try_recv().is_err()); // the body was not sent yet
/// let body = res.into_body().collect().await?.to_bytes();
/// assert_eq!(body, "hello");
/// assert_eq!(rx.try_recv()?, (Ending::Completed, 5));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ResponseEnd {
    committed: Committed,
    status: Option<StatusCode>,
    bytes_sent: u64,
    elapsed: Duration,
    ending: Ending,
}

impl ResponseEnd {
    /// The record of the request's commit.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new()
    ///     .on_response_end(|end| println!("{}", end.committed().outcome()));
    /// # drop(layer);
    /// ```
    pub fn committed(&self) -> &Committed {
        &self.committed
    }

    /// The status of the response that left the layer; `None` if none did
    /// ([`Ending::Unsent`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new().on_response_end(|end| println!("{:?}", end.status()));
    /// # drop(layer);
    /// ```
    pub fn status(&self) -> Option<StatusCode> {
        self.status
    }

    /// The bytes of body data the server took from the body (`$body_bytes_sent`): for a
    /// [`Ending::Dropped`] body, what was taken before the drop.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new().on_response_end(|end| println!("{}", end.bytes_sent()));
    /// # drop(layer);
    /// ```
    pub fn bytes_sent(&self) -> u64 {
        self.bytes_sent
    }

    /// The time from the call of the layer's service to the end (`$request_time`): the last
    /// frame taken, the error, the drop, or the commit of an unsent request.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersLayer;
    /// let layer = SharedHeadersLayer::new().on_response_end(|end| println!("{:?}", end.elapsed()));
    /// # drop(layer);
    /// ```
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// How the response ended.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::{Ending, SharedHeadersLayer};
    /// let layer = SharedHeadersLayer::new()
    ///     .on_response_end(|end| assert_ne!(end.ending().to_string(), ""));
    /// # drop(layer);
    /// ```
    pub fn ending(&self) -> Ending {
        self.ending
    }
}

mod sealed {
    pub trait Sealed {}
}

/// Whether the layer tracks the end of its responses: [`NoEndHook`] (the default: the
/// response body is the inner service's, untouched) or [`EndHook`] (set by
/// [`on_response_end`](super::SharedHeadersLayer::on_response_end): the body is wrapped in a
/// [`TrackedBody`]). Sealed: only these two implement it.
pub trait OnResponseEnd: sealed::Sealed + Clone + Send + Sync + 'static {
    /// The response body the layer's service returns for an inner body `B`.
    type Body<B>;

    /// Wraps the body of a response that leaves the layer (`end` is called only if the
    /// state is needed: the default pays nothing for it).
    #[doc(hidden)]
    fn wrap<B>(&self, body: B, end: impl FnOnce() -> EndState) -> Self::Body<B>;

    /// Reports a request that got no response from the layer.
    #[doc(hidden)]
    fn unsent(&self, end: impl FnOnce() -> EndState);
}

/// What the end of a response needs to know, made by the layer.
#[doc(hidden)]
#[derive(Debug)]
pub struct EndState {
    pub(super) committed: Committed,
    pub(super) status: Option<StatusCode>,
    pub(super) started: Instant,
    #[cfg(feature = "tracing")]
    pub(super) span: Option<tracing::Span>,
}

/// The default: no end-of-response tracking, the inner body is returned as it is (nothing
/// is paid for it).
///
/// # Examples
///
/// ```
/// # use shared_headers::server::{NoEndHook, SharedHeadersLayer};
/// let layer: SharedHeadersLayer<NoEndHook> = SharedHeadersLayer::new();
/// # drop(layer);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct NoEndHook;

impl sealed::Sealed for NoEndHook {}

impl OnResponseEnd for NoEndHook {
    type Body<B> = B;

    #[inline(always)]
    fn wrap<B>(&self, body: B, _end: impl FnOnce() -> EndState) -> B {
        body
    }

    #[inline(always)]
    fn unsent(&self, _end: impl FnOnce() -> EndState) {}
}

type EndFn = dyn Fn(&ResponseEnd) + Send + Sync + 'static;

/// The end-of-response hook of
/// [`on_response_end`](super::SharedHeadersLayer::on_response_end).
///
/// # Examples
///
/// ```
/// # use shared_headers::server::{EndHook, SharedHeadersLayer};
/// let layer: SharedHeadersLayer<EndHook> =
///     SharedHeadersLayer::new().on_response_end(|end| println!("{} bytes", end.bytes_sent()));
/// # drop(layer);
/// ```
#[derive(Clone)]
pub struct EndHook {
    pub(super) f: Arc<EndFn>,
}

impl fmt::Debug for EndHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EndHook").finish_non_exhaustive()
    }
}

impl sealed::Sealed for EndHook {}

impl OnResponseEnd for EndHook {
    type Body<B> = TrackedBody<B>;

    fn wrap<B>(&self, body: B, end: impl FnOnce() -> EndState) -> TrackedBody<B> {
        TrackedBody {
            inner: body,
            tracker: Some(Tracker {
                hook: self.clone(),
                end: end(),
                bytes: 0,
            }),
            at_end: AtomicBool::new(false),
        }
    }

    fn unsent(&self, end: impl FnOnce() -> EndState) {
        Tracker {
            hook: self.clone(),
            end: end(),
            bytes: 0,
        }
        .report(Ending::Unsent);
    }
}

/// What a [`TrackedBody`] reports at its end.
struct Tracker {
    hook: EndHook,
    end: EndState,
    bytes: u64,
}

impl Tracker {
    fn report(self, ending: Ending) {
        let Tracker { hook, end, bytes } = self;
        let event = ResponseEnd {
            status: end.status,
            bytes_sent: bytes,
            elapsed: end.started.elapsed(),
            ending,
            committed: end.committed,
        };
        #[cfg(feature = "tracing")]
        let _entered = end.span.as_ref().map(tracing::Span::enter);
        crate::exchange::contain(|| (hook.f)(&event));
    }
}

pin_project! {
    /// A response body that reports its end once (see [`ResponseEnd`]): the body of the
    /// responses of a layer with an
    /// [`on_response_end`](super::SharedHeadersLayer::on_response_end) hook. Frames, size
    /// hints and the end of the stream are the inner body's.
    ///
    /// # Examples
    ///
    /// See [`ResponseEnd`].
    /// ```
    /// # use shared_headers::server::{SharedHeadersLayer, TrackedBody};
    /// # use tower::Layer;
    /// let service = SharedHeadersLayer::new()
    ///     .on_response_end(|_| ())
    ///     .layer(tower::service_fn(|_req: http::Request<()>| async {
    ///         Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    ///     }));
    /// # drop(service);
    /// ```
    pub struct TrackedBody<B> {
        #[pin]
        inner: B,
        tracker: Option<Tracker>,
        // Set once the inner body said it is at its end (`is_end_stream`): a server stops
        // polling then, and the drop that follows is the end of a complete body.
        at_end: AtomicBool,
    }

    impl<B> PinnedDrop for TrackedBody<B> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if let Some(tracker) = this.tracker.take() {
                // A server stops polling once `is_end_stream` says so: such a body is
                // complete, not dropped early.
                let ending = if this.at_end.load(Ordering::Relaxed) {
                    Ending::Completed
                } else {
                    Ending::Dropped
                };
                tracker.report(ending);
            }
        }
    }
}

impl<B> fmt::Debug for TrackedBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TrackedBody")
            .field("ended", &self.tracker.is_none())
            .finish_non_exhaustive()
    }
}

impl<B: Body> Body for TrackedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let mut this = self.project();
        let polled = this.inner.as_mut().poll_frame(cx);
        let ending = match &polled {
            Poll::Pending => return polled,
            Poll::Ready(None) => Some(Ending::Completed),
            Poll::Ready(Some(Err(_))) => Some(Ending::Aborted),
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(data), Some(tracker)) = (frame.data_ref(), this.tracker.as_mut()) {
                    tracker.bytes += bytes::Buf::remaining(data) as u64;
                }
                this.inner.is_end_stream().then_some(Ending::Completed)
            }
        };
        if let Some(ending) = ending {
            if let Some(tracker) = this.tracker.take() {
                tracker.report(ending);
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        let at_end = self.inner.is_end_stream();
        if at_end {
            // Only this body's own thread reads it (in its drop): no ordering needed.
            self.at_end.store(true, Ordering::Relaxed);
        }
        at_end
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
