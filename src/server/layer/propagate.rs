//! The request's context: what the layer captures from each request for the calls made for
//! it, and what it refused.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::SharedHeadersLayer;
use crate::context::{Propagation, PropagationCounts};

/// [`PropagationCounts`], added up across requests.
#[derive(Debug, Default)]
pub(in crate::server) struct PropagationCounters {
    replaced_request_ids: AtomicU64,
    malformed: AtomicU64,
    duplicated: AtomicU64,
    over_limit: AtomicU64,
    failed_request_id_generators: AtomicU64,
}

impl PropagationCounters {
    /// Adds one request's refusals (called only when there are some).
    #[cold]
    pub(in crate::server) fn add(&self, counts: &PropagationCounts) {
        let add = |counter: &AtomicU64, n: u64| {
            if n > 0 {
                counter.fetch_add(n, Ordering::Relaxed);
            }
        };
        add(&self.replaced_request_ids, counts.replaced_request_ids);
        add(&self.malformed, counts.malformed);
        add(&self.duplicated, counts.duplicated);
        add(&self.over_limit, counts.over_limit);
        add(
            &self.failed_request_id_generators,
            counts.failed_request_id_generators,
        );
    }

    pub(super) fn get(&self) -> PropagationCounts {
        PropagationCounts {
            replaced_request_ids: self.replaced_request_ids.load(Ordering::Relaxed),
            malformed: self.malformed.load(Ordering::Relaxed),
            duplicated: self.duplicated.load(Ordering::Relaxed),
            over_limit: self.over_limit.load(Ordering::Relaxed),
            failed_request_id_generators: self.failed_request_id_generators.load(Ordering::Relaxed),
        }
    }
}

/// # The request's context
impl SharedHeadersLayer {
    /// Sets how each request's context is captured (replaces the previous propagation; an
    /// empty one turns it off): with `propagation`: its request id (taken when valid,
    /// generated otherwise) and the headers to pass on (W3C trace context, B3, Envoy's set,
    /// your own names), each value checked and the whole bounded.
    ///
    /// For every request, the layer then
    ///
    /// * puts the **request id on the response** (unless the response has that header
    ///   already), the layer's own answers (timeout, rejection, a caught panic, gRPC's) too;
    /// * writes it in the **access line** (`http.request.id`), and prints a propagated header's
    ///   checked value there, never the raw one;
    /// * gives the handler the context through [`Exchange::context`](crate::Exchange::context)
    ///   (its [`request_id`](crate::context::RequestContext::request_id)), and puts it **in scope**
    ///   while it polls the inner service
    ///   ([`RequestContext::current`](crate::context::RequestContext::current)), so the client
    ///   room's [`PropagateLayer`](crate::client::PropagateLayer) sends it on every outgoing
    ///   call, with what is left of the deadline.
    ///
    /// A refused value (malformed, duplicated, over a bound) never fails the request: it is
    /// not propagated, and counted ([`LayerStats::propagation_counts`](super::LayerStats::propagation_counts)).
    ///
    /// **Secret wins.** The always-secret names (every name the credential rule marks:
    /// [`Builder::ALWAYS_SECRET`](crate::Builder::ALWAYS_SECRET)) were refused when the [`Propagation`] was made
    /// ([`PropagationError::Secret`](crate::context::PropagationError::Secret)). A name that
    /// the layer's policies make secret ([`Builder::sensitive`](crate::Builder::sensitive) in
    /// [`request_policy`](Self::request_policy) or
    /// [`response_policy`](Self::response_policy)) is left out of the propagation when the
    /// layer is built: never captured, never sent on, whatever the order of the calls. So this
    /// setter cannot fail, and no `?` lands in a `Router` expression.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use http::{HeaderName, Request, Response};
    /// use shared_headers::Builder;
    /// use shared_headers::context::{Propagation, RequestContext};
    /// use shared_headers::server::SharedHeadersLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let layer = SharedHeadersLayer::new()
    ///     .propagate(Propagation::new().request_id().w3c());
    /// let service = layer.layer(service_fn(|_req: Request<()>| async {
    ///     // In scope while the handler runs: the client layer sends it on.
    ///     let context = RequestContext::current().unwrap();
    ///     Ok::<_, Infallible>(Response::new(context.headers().count().to_string()))
    /// }));
    /// let req = Request::builder()
    ///     .header("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
    ///     .body(())?;
    /// let res = service.oneshot(req).await?;
    /// assert_eq!(res.headers()["x-request-id"].len(), 32); // generated
    /// assert_eq!(res.into_body().into_inner().unwrap(), "2"); // the id and traceparent
    ///
    /// // A name the layer keeps secret is never propagated, whatever the order of the calls.
    /// let session = HeaderName::from_static("x-tenant");
    /// let service = SharedHeadersLayer::new()
    ///     .propagate(Propagation::new().header(session.clone())?)
    ///     .request_policy(Builder::new().sensitive([session]))
    ///     .layer(service_fn(|_req: Request<()>| async {
    ///         Ok::<_, Infallible>(Response::new(RequestContext::current().is_some().to_string()))
    ///     }));
    /// let req = Request::builder().header("x-tenant", "s3cr3t").body(())?;
    /// let res = service.oneshot(req).await?;
    /// assert_eq!(res.into_body().into_inner().unwrap(), "false"); // nothing captured
    /// # Ok(())
    /// # }
    /// ```
    pub fn propagate(mut self, propagation: Propagation) -> Self {
        self.settings.propagation = Some(Arc::new(propagation));
        self.resolve()
    }
}
