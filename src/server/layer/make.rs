//! Making the layer, and the handle that reads its counters.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use http::StatusCode;

use super::{Config, LayerStats, Settings, SharedHeadersLayer};
use crate::exchange::CommitHooks;
#[cfg(doc)]
use crate::server::Admission;
use crate::server::HeaderSelection;
use crate::server::answer::OwnAnswers;
use crate::server::end::EndHooks;

/// # Making the layer, reading its counters
impl SharedHeadersLayer {
    /// A layer without a deadline (answering 503 if one is later set with
    /// [`timeout`](Self::timeout)) and without limits on the headers.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::SharedHeadersLayer;
    /// use tower::ServiceBuilder;
    /// let service = ServiceBuilder::new()
    ///     .layer(SharedHeadersLayer::new())
    ///     .service_fn(|_req: http::Request<()>| async {
    ///         Ok::<_, std::convert::Infallible>(http::Response::new(()))
    ///     });
    /// # drop(service);
    /// ```
    pub fn new() -> Self {
        SharedHeadersLayer {
            config: Config {
                timeout: None,
                request_policy: None,
                response_policy: None,
                hooks: CommitHooks::new(),
                quiet_hooks: CommitHooks::new(),
                copy: HeaderSelection::all(),
                answers: OwnAnswers {
                    timeout_status: StatusCode::SERVICE_UNAVAILABLE,
                    rejection_status: StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                    record: true,
                    headers: HeaderSelection::all(),
                    resume_panics: false,
                },
                peer: None,
                budgets: Arc::from([]),
                refused_budgets: Arc::new(AtomicU64::new(0)),
                end: Arc::new(EndHooks::default()),
                #[cfg(feature = "opentelemetry")]
                tracer: None,
                rule: None,
                propagation: None,
                propagation_counts: Arc::default(),
                admission: None,
            },
            settings: Settings {
                request: None,
                response: None,
                propagation: None,
                #[cfg(feature = "tracing")]
                log: None,
                #[cfg(feature = "tracing")]
                log_explicit: false,
                #[cfg(feature = "opentelemetry")]
                metrics: None,
                #[cfg(feature = "opentelemetry")]
                metric_attributes: Vec::new(),
                #[cfg(feature = "opentelemetry")]
                tracer: None,
                user_end: EndHooks::default(),
                scheme: EndHooks::default().scheme,
            },
        }
    }

    /// The layer's counters, read live while the layer's services run: take it from the
    /// layer you serve, after its last setter; clones share. Every clone of the layer and
    /// every service it makes add to the same counters; a setter gives the layer fresh ones,
    /// so two layers configured apart from one base count apart, and a handle taken before a
    /// later setter reads counters the layer no longer adds to. Admission's counts are those
    /// of the [`admission`](Self::admission) set when the handle is taken (an [`Admission`]'s
    /// state is shared by its clones).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use http::{Request, Response};
    /// use shared_headers::deadline::BudgetHeader;
    /// use shared_headers::server::SharedHeadersLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let layer = SharedHeadersLayer::new().caller_budget(BudgetHeader::grpc_timeout());
    /// let stats = layer.stats();
    /// let service = layer.layer(service_fn(|_req: Request<()>| async {
    ///     Ok::<_, Infallible>(Response::new(String::new()))
    /// }));
    /// let req = Request::get("/").header("grpc-timeout", "-1S").body(())?;
    /// service.oneshot(req).await?;
    /// assert_eq!(stats.refused_budgets(), 1);
    /// assert_eq!(stats.propagation_counts(), Default::default());
    /// # Ok(())
    /// # }
    /// ```
    pub fn stats(&self) -> LayerStats {
        LayerStats {
            refused_budgets: Arc::clone(&self.config.refused_budgets),
            propagation: Arc::clone(&self.config.propagation_counts),
            admission: self.config.admission.clone(),
        }
    }
}
