//! A tonic request body that is not replayable (a message stream) but is taken back when the
//! client dropped it unread: the request was never written, so it is sent again with it.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::Request;
use http_body::{Frame, SizeHint};
use tonic::body::Body;

use crate::sync::Mutex;

/// Where the body is.
pub enum Held {
    /// Not read yet by the first send's client: it can be taken back.
    Unread(Body),
    /// Handed to the resend (the first send's client never read it).
    Resent(Body),
    /// Read by one of the two sends.
    Read,
}

/// The body both sends share.
pub type Slot = Arc<Mutex<Held>>;

/// The body a send's client reads: the first send reads it only while it is unread, the resend
/// only once handed over.
struct TakeBack {
    slot: Slot,
    resend: bool,
    body: Option<Body>,
}

impl TakeBack {
    /// The body, if this send may still read it (under the slot's lock).
    fn with_held<R>(&self, f: impl FnOnce(Option<&Body>) -> R) -> R {
        match (&*self.slot.lock(), self.resend) {
            (Held::Unread(body), false) | (Held::Resent(body), true) => f(Some(body)),
            _ => f(None),
        }
    }
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
            let mut held = this.slot.lock();
            let mine = matches!(
                (&*held, this.resend),
                (Held::Unread(_), false) | (Held::Resent(_), true)
            );
            if !mine {
                drop(held);
                return Poll::Ready(Some(Err(tonic::Status::cancelled(
                    "the request's body was sent again on another connection",
                ))));
            }
            if let Held::Unread(body) | Held::Resent(body) =
                std::mem::replace(&mut *held, Held::Read)
            {
                this.body = Some(body);
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
            None => self.with_held(|body| body.is_some_and(Body::is_end_stream)),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.body {
            Some(body) => body.size_hint(),
            None => self.with_held(|body| body.map(Body::size_hint).unwrap_or_default()),
        }
    }
}

/// If `request`'s body is a tonic `Body`, puts it where it can be taken back and returns the
/// resend's request (the same head, a body that reads what is taken back) and the slot.
pub(super) fn arm<B: 'static>(request: &mut Request<B>) -> Option<(Request<B>, Slot)> {
    let body = (request.body_mut() as &mut dyn std::any::Any).downcast_mut::<Body>()?;
    let slot: Slot = Arc::new(Mutex::new(Held::Unread(std::mem::replace(
        body,
        Body::empty(),
    ))));
    *body = Body::new(TakeBack {
        slot: Arc::clone(&slot),
        resend: false,
        body: None,
    });
    let resend = Body::new(TakeBack {
        slot: Arc::clone(&slot),
        resend: true,
        body: None,
    });
    let mut resend = Some(resend);
    let body = (&mut resend as &mut dyn std::any::Any)
        .downcast_mut::<Option<B>>()?
        .take()?;
    let mut again = Request::new(body);
    *again.method_mut() = request.method().clone();
    *again.uri_mut() = request.uri().clone();
    *again.version_mut() = request.version();
    *again.headers_mut() = request.headers().clone();
    *again.extensions_mut() = request.extensions().clone();
    Some((again, slot))
}

/// Hands the body to the resend if the first send never read it.
pub(super) fn reserve(slot: &Slot) -> bool {
    let mut held = slot.lock();
    match std::mem::replace(&mut *held, Held::Read) {
        Held::Unread(body) => {
            *held = Held::Resent(body);
            true
        }
        other => {
            *held = other;
            false
        }
    }
}
