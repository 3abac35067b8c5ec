//! A tonic request body that is not replayable (a message stream) but is taken back when the
//! client dropped it unread: the request was never written, so it is sent again with it.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::Request;
use http_body::{Frame, SizeHint};
use tonic::body::Body;

use super::handoff::Handoff;

/// The body both sends share.
pub type Slot = Arc<Handoff<Body>>;

/// The body a send's client reads: the first send reads it only while it is unread, the resend
/// only once handed over.
struct TakeBack {
    slot: Slot,
    resend: bool,
    body: Option<Body>,
}

impl http_body::Body for TakeBack {
    type Data = <Body as http_body::Body>::Data;
    type Error = tonic::Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        if this.body.is_none() {
            match this.slot.take(this.resend) {
                Some(body) => this.body = Some(body),
                None => {
                    return Poll::Ready(Some(Err(tonic::Status::cancelled(
                        "the request's body was sent again on another connection",
                    ))));
                }
            }
        }
        match this.body.as_mut() {
            Some(body) => Pin::new(body).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.body {
            Some(body) => body.is_end_stream(),
            None => self
                .slot
                .peek(self.resend, |body| body.is_some_and(Body::is_end_stream)),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.body {
            Some(body) => body.size_hint(),
            None => self.slot.peek(self.resend, |body| {
                body.map(Body::size_hint).unwrap_or_default()
            }),
        }
    }
}

/// If `request`'s body is a tonic `Body`, puts it where it can be taken back and returns the
/// slot; the resend's body is built from it only when a resend needs it ([`resend_body`]).
pub(super) fn arm<B: 'static>(request: &mut Request<B>) -> Option<Slot> {
    let body = (request.body_mut() as &mut dyn std::any::Any).downcast_mut::<Body>()?;
    let slot: Slot = Arc::new(Handoff::new(std::mem::replace(body, Body::empty())));
    *body = Body::new(TakeBack {
        slot: Arc::clone(&slot),
        resend: false,
        body: None,
    });
    Some(slot)
}

/// The resend's body: it reads what is taken back (`None` unless `B` is tonic's `Body`).
pub(super) fn resend_body<B: 'static>(slot: &Slot) -> Option<B> {
    let mut resend = Some(Body::new(TakeBack {
        slot: Arc::clone(slot),
        resend: true,
        body: None,
    }));
    (&mut resend as &mut dyn std::any::Any)
        .downcast_mut::<Option<B>>()?
        .take()
}

/// Hands the body to the resend if the first send never read it.
pub(super) fn reserve(slot: &Slot) -> bool {
    slot.reserve()
}
