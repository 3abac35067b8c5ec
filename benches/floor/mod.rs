//! The floor of a commit-once layer over `http`'s types: the work any such layer must do per
//! request, and nothing else, as a baseline for `SharedHeadersLayer` in the same run.
//!
//! Whatever its design, a layer that gives the handler a shared per-request context and the
//! outer layers a record of the commit, over `http`'s own types, must at least: make one shared
//! allocation per request (the context), copy the received request headers into it (unless told
//! not to), put a handle to it in the request's extensions (`http::Extensions` allocates a map,
//! its table and a box for the first value: 3 allocations), and put the record in the
//! response's extensions (3 more). [`Floor`] does exactly that: an `Arc` holding the copied
//! headers (or nothing), inserted into both messages. It seals nothing, has no deadline, no
//! hooks, no request line, no limits, no secrets: it is a lower bound, not an alternative.
//!
//! `SharedHeadersLayer` minus `Floor` is what the crate's own protocol costs per request.

pub mod lean;
pub mod versioned;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderMap, Request, Response};
use pin_project_lite::pin_project;
use tower::{Layer, Service};

/// What the floor puts in both messages' extensions.
#[allow(dead_code)] // only carried, as a real layer's record would be
#[derive(Clone)]
pub struct Carried(pub Arc<HeaderMap>);

/// The floor layer; `copy` says whether it copies the request headers, `RESPONSE` whether it
/// puts the shared allocation in the response's extensions too (the record for outer layers;
/// without it, a log would get it from a hook, as `SharedHeadersLayer::record_in_response(false)`).
/// A type parameter, so that the floor with both extensions runs no branch for it.
#[derive(Clone, Copy)]
pub struct Floor<const RESPONSE: bool> {
    pub copy: bool,
}

impl<S, const RESPONSE: bool> Layer<S> for Floor<RESPONSE> {
    type Service = FloorService<S, RESPONSE>;

    fn layer(&self, inner: S) -> Self::Service {
        FloorService {
            inner,
            copy: self.copy,
        }
    }
}

#[derive(Clone)]
pub struct FloorService<S, const RESPONSE: bool> {
    inner: S,
    copy: bool,
}

impl<S, B, R, const RESPONSE: bool> Service<Request<B>> for FloorService<S, RESPONSE>
where
    S: Service<Request<B>, Response = Response<R>>,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = FloorFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let copy = if self.copy {
            req.headers().clone()
        } else {
            HeaderMap::new()
        };
        let context = Arc::new(copy);
        req.extensions_mut().insert(Carried(Arc::clone(&context)));
        FloorFuture {
            inner: self.inner.call(req),
            context: if RESPONSE { Some(context) } else { None },
        }
    }
}

pin_project! {
    pub struct FloorFuture<F> {
        #[pin]
        inner: F,
        context: Option<Arc<HeaderMap>>,
    }
}

impl<F, R, E> Future for FloorFuture<F>
where
    F: Future<Output = Result<Response<R>, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut res = std::task::ready!(this.inner.poll(cx))?;
        if let Some(context) = this.context.take() {
            res.extensions_mut().insert(Carried(context));
        }
        Poll::Ready(Ok(res))
    }
}
