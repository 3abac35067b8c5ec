//! Which headers: the one selector every setting that picks headers takes.

use std::sync::Arc;

use http::{HeaderMap, HeaderName};

#[cfg(doc)]
use super::SharedHeadersLayer;

/// Which headers a setting picks: every one, the named ones, or none. The one selector of the
/// server room, taken by each setting that picks headers:
///
/// | setting | what it picks | default |
/// |---|---|---|
/// | [`SharedHeadersLayer::copy_request_headers`] | the received request headers copied into the request handle | [`all`](Self::all) |
/// | [`SharedHeadersLayer::own_answer_headers`] | the committed response headers the layer's own answers carry (never [those listed there](SharedHeadersLayer#never-on-an-own-answer)) | [`all`](Self::all) |
/// | [`AccessLog::request_headers`](super::access_log::AccessLog::request_headers), [`AccessLog::response_headers`](super::access_log::AccessLog::response_headers) | the headers the access line prints (secrets as `[redacted]`) | [`none`](Self::none) |
///
/// Names are [`HeaderName`]s, checked when they were made: building a selection cannot fail.
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use http::{HeaderName, Request, Response};
/// use shared_headers::{Committed, Exchange};
/// use shared_headers::server::{HeaderSelection, SharedHeadersLayer};
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let layer = SharedHeadersLayer::new()
///     .copy_request_headers(HeaderSelection::only([HeaderName::from_static("x-request-id")]));
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
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a selection does nothing until given to a setting"]
pub struct HeaderSelection {
    kind: Kind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    All,
    Only(Arc<[HeaderName]>),
    None,
}

/// Every header, for the places that print a whole map (the annotations).
pub(crate) const ALL: HeaderSelection = HeaderSelection { kind: Kind::All };

impl HeaderSelection {
    /// Every header.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use http::{Request, Response};
    /// use shared_headers::Exchange;
    /// use shared_headers::server::{HeaderSelection, SharedHeadersLayer};
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let layer = SharedHeadersLayer::new().copy_request_headers(HeaderSelection::all());
    /// let service = layer.layer(service_fn(|req: Request<()>| async move {
    ///     // Every received header is in the request handle.
    ///     let exchange = req.extensions().get::<Exchange>().unwrap();
    ///     assert_eq!(exchange.request().len(), 2);
    ///     Ok::<_, Infallible>(Response::new(String::new()))
    /// }));
    /// let req = Request::builder().header("x-a", "1").header("x-b", "2").body(())?;
    /// service.oneshot(req).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn all() -> Self {
        ALL
    }

    /// Only the headers named in `names` (each with all its values, in order). Names are
    /// already checked [`HeaderName`]s: parse a run-time string with `str::parse` first.
    ///
    /// A selection is a set of names: the order they are given in does not matter, a name
    /// given twice is picked once, and no name at all is [`none`](Self::none) (which makes
    /// no copy). Two selections that pick the same headers compare equal.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::{HeaderSelection, SharedHeadersLayer};
    /// use http::header::{HeaderName, USER_AGENT};
    /// let from_config: HeaderName = "x-request-id".parse()?;
    /// let selection = HeaderSelection::only([USER_AGENT, from_config.clone()]);
    /// // A set of names: order and repeats do not matter.
    /// assert_eq!(selection, HeaderSelection::only([from_config, USER_AGENT.clone(), USER_AGENT]));
    /// let layer = SharedHeadersLayer::new().copy_request_headers(selection);
    /// # drop(layer);
    /// # Ok::<(), http::header::InvalidHeaderName>(())
    /// ```
    pub fn only(names: impl IntoIterator<Item = HeaderName>) -> Self {
        let mut names: Vec<HeaderName> = names.into_iter().collect();
        names.sort_unstable_by(|a, b| a.as_str().cmp(b.as_str()));
        names.dedup();
        if names.is_empty() {
            return Self::none();
        }
        HeaderSelection {
            kind: Kind::Only(names.into()),
        }
    }

    /// No header.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use http::{Request, Response};
    /// use shared_headers::Exchange;
    /// use shared_headers::server::{HeaderSelection, SharedHeadersLayer};
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // An empty `only` is `none`.
    /// assert_eq!(HeaderSelection::only([]), HeaderSelection::none());
    /// let layer = SharedHeadersLayer::new().copy_request_headers(HeaderSelection::none());
    /// let service = layer.layer(service_fn(|req: Request<()>| async move {
    ///     // The request handle starts empty; the request keeps what it received.
    ///     let exchange = req.extensions().get::<Exchange>().unwrap();
    ///     assert!(exchange.request().is_empty());
    ///     assert_eq!(req.headers().len(), 1);
    ///     Ok::<_, Infallible>(Response::new(String::new()))
    /// }));
    /// service.oneshot(Request::builder().header("x-a", "1").body(())?).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn none() -> Self {
        HeaderSelection { kind: Kind::None }
    }

    /// Whether the selection picks headers named `name`.
    pub(crate) fn contains(&self, name: &HeaderName) -> bool {
        match &self.kind {
            Kind::All => true,
            // Sorted by name at construction: a binary search.
            Kind::Only(names) => names
                .binary_search_by(|known| known.as_str().cmp(name.as_str()))
                .is_ok(),
            Kind::None => false,
        }
    }

    /// Whether the selection picks nothing.
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(crate) fn is_none(&self) -> bool {
        match &self.kind {
            Kind::None => true,
            Kind::Only(names) => names.is_empty(),
            Kind::All => false,
        }
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
