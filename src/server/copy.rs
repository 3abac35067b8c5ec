//! Which received request headers the layer copies into the request handle.

use std::sync::Arc;

use http::{HeaderMap, HeaderName};

#[cfg(doc)]
use super::SharedHeadersLayer;

/// Which of the received request headers [`SharedHeadersLayer`] copies into each request's
/// request handle ([`Exchange::request`](crate::Exchange::request)), set with
/// [`SharedHeadersLayer::copy_request_headers`].
///
/// * [`all`](Self::all) (the default): the handle starts as a copy of every received header.
/// * [`only`](Self::only): only the named headers (all their values, in order) are copied.
/// * [`none`](Self::none): the handle starts empty. Nothing is copied, which saves the copy's
///   two allocations and its time per request; use it when the handler reads the received
///   headers from `req.headers()` and uses the handle only for headers it adds.
///
/// What is not copied is neither in the handle nor in the [`Committed`](crate::Committed)
/// record (the log), and is not checked against the
/// [`request_headers`](SharedHeadersLayer::request_headers) limits: the limits apply to the
/// handle's content, so a request is rejected only if the copied headers are over them.
/// `req.headers()` is untouched in every case.
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use http::{Request, Response};
/// use shared_headers::{Committed, Exchange};
/// use shared_headers::server::{RequestHeaderCopy, SharedHeadersLayer};
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let layer = SharedHeadersLayer::new()
///     .copy_request_headers(RequestHeaderCopy::only([http::HeaderName::from_static("x-request-id")]));
/// let service = layer.layer(service_fn(|req: Request<()>| async move {
///     let exchange = req.extensions().get::<Exchange>().unwrap();
///     assert_eq!(exchange.request().len(), 1);
///     assert_eq!(req.headers().len(), 2); // as received
///     Ok::<_, Infallible>(Response::new(String::new()))
/// }));
/// let req = Request::builder()
///     .header("x-request-id", "42")
///     .header("cookie", "session=s3cr3t")
///     .body(())?;
/// let res = service.oneshot(req).await?;
/// let committed = res.extensions().get::<Committed>().unwrap();
/// assert_eq!(committed.request()["x-request-id"], "42");
/// assert!(!committed.request().contains_key("cookie"));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use = "a setting does nothing until given to SharedHeadersLayer::copy_request_headers"]
pub struct RequestHeaderCopy {
    kind: Kind,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
enum Kind {
    #[default]
    All,
    Only(Arc<[HeaderName]>),
    None,
}

impl RequestHeaderCopy {
    /// Copy every received header (the default).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::RequestHeaderCopy;
    /// assert_eq!(RequestHeaderCopy::all(), RequestHeaderCopy::default());
    /// ```
    pub fn all() -> Self {
        RequestHeaderCopy { kind: Kind::All }
    }

    /// Copy only the headers named in `names` (each with all its values, in order).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::RequestHeaderCopy;
    /// use http::header::{HeaderName, USER_AGENT};
    /// let copy = RequestHeaderCopy::only([USER_AGENT, HeaderName::from_static("x-request-id")]);
    /// # drop(copy);
    /// ```
    pub fn only(names: impl IntoIterator<Item = HeaderName>) -> Self {
        RequestHeaderCopy {
            kind: Kind::Only(names.into_iter().collect()),
        }
    }

    /// Copy nothing: the request handle starts empty.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::RequestHeaderCopy;
    /// assert_ne!(RequestHeaderCopy::none(), RequestHeaderCopy::all());
    /// ```
    pub fn none() -> Self {
        RequestHeaderCopy { kind: Kind::None }
    }

    /// The copy of `received` that the request handle starts with; `None` for no copy at all
    /// (the handle starts empty without making a map).
    pub(super) fn copy(&self, received: &HeaderMap) -> Option<HeaderMap> {
        Some(match &self.kind {
            Kind::All => received.clone(),
            Kind::None => return None,
            Kind::Only(names) => {
                let mut copy = HeaderMap::new();
                for name in names.iter() {
                    for value in received.get_all(name) {
                        copy.append(name.clone(), value.clone());
                    }
                }
                copy
            }
        })
    }
}
