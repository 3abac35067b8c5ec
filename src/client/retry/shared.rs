//! What the retry layer, its services and their futures share with the reqwest
//! `DefaultHeadersMiddleware`'s retry: the refresher, the refresh function and the "credential
//! refused" test.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use http::{HeaderMap, StatusCode};

#[cfg(doc)]
use super::RefreshRetryLayer;
use crate::client::refresher::{RefreshError, Refreshed, Refresher};

/// Decides whether a response means "credential refused" (see [`RefreshRetryLayer::refused_when`]).
pub(crate) type Classify = Arc<dyn Fn(StatusCode, &HeaderMap) -> bool + Send + Sync>;

/// The default classifier: `401 Unauthorized`.
fn unauthorized() -> Classify {
    Arc::new(|status, _| status == StatusCode::UNAUTHORIZED)
}

/// The boxed refresh of one refused request (it runs only on a refused response).
pub(crate) type RefreshFuture<R> =
    Pin<Box<dyn Future<Output = Result<Refreshed, RefreshError<R>>> + Send>>;

/// What the layer, its services and their futures share.
pub(crate) struct Shared<F, R> {
    pub(crate) refresher: Refresher<R>,
    pub(crate) refresh: Arc<F>,
    pub(crate) classify: Classify,
}

impl<F, R> Shared<F, R> {
    /// The state of a new retry layer or middleware: "refused" means `401` until told otherwise.
    pub(crate) fn new(refresher: Refresher<R>, refresh: F) -> Arc<Self> {
        Arc::new(Shared {
            refresher,
            refresh: Arc::new(refresh),
            classify: unauthorized(),
        })
    }

    /// Replaces the "credential refused" test of `this`; clones made before keep theirs.
    pub(crate) fn set_classify(this: &mut Arc<Self>, classify: Classify) {
        match Arc::get_mut(this) {
            Some(shared) => shared.classify = classify,
            None => {
                *this = Arc::new(Shared {
                    refresher: this.refresher.clone(),
                    refresh: Arc::clone(&this.refresh),
                    classify,
                });
            }
        }
    }
}

/// Runs the refresh for `failed` through the single-flight refresher, as a `'static` future.
pub(crate) fn refresh_for<F, Fut, R>(shared: &Arc<Shared<F, R>>, failed: u64) -> RefreshFuture<R>
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<HeaderMap, R>> + Send + 'static,
    R: Send + Sync + 'static,
{
    let shared = Arc::clone(shared);
    Box::pin(async move {
        shared
            .refresher
            .refresh_if_current(failed, || (shared.refresh)())
            .await
    })
}
