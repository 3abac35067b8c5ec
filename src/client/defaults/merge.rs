//! How the defaults are merged into a request's own headers: the [`Merge`] policy and the
//! merge itself, shared by [`DefaultHeaders`] and the reqwest `DefaultHeadersMiddleware`.

use http::HeaderMap;
use http::header::AsHeaderName;

#[cfg(doc)]
use super::DefaultHeaders;
#[cfg(feature = "reqwest")]
use crate::SharedHeaders;
use crate::error::Error;
#[cfg(doc)]
use crate::shared::Reader;

/// How a default header is combined with the request's own values of the same name.
///
/// # Examples
///
/// ```
/// use http::header::{ACCEPT, AUTHORIZATION};
/// use shared_headers::SharedHeaders;
/// use shared_headers::client::{DefaultHeadersLayer, Merge};
///
/// let layer = DefaultHeadersLayer::new(SharedHeaders::new())
///     .merge(AUTHORIZATION, Merge::Override) // the live token always wins
///     .merge(ACCEPT, Merge::Append);
/// assert_eq!(layer.merge_for(AUTHORIZATION), Merge::Override);
/// assert_eq!(layer.merge_for(&ACCEPT), Merge::Append);
/// assert_eq!(layer.merge_for("x-other"), Merge::KeepRequest);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Merge {
    /// If the request has the header, keep the request's values and add nothing (the default,
    /// like a browser's or reqwest's default headers).
    #[default]
    KeepRequest,
    /// Replace the request's values with the defaults' values.
    Override,
    /// Add the defaults' values after the request's values.
    Append,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Policy {
    pub(super) default: Merge,
    /// Per-name exceptions, keyed like the headers themselves.
    pub(super) names: HeaderMap<Merge>,
}

impl Policy {
    #[inline]
    pub(super) fn for_name<K: AsHeaderName>(&self, name: K) -> Merge {
        if self.names.is_empty() {
            return self.default;
        }
        self.names.get(name).copied().unwrap_or(self.default)
    }
}

/// Merges one consistent read of the current `defaults` (map and version together, no lock, no
/// clone of the map) into a request's `headers`; returns the version applied. For the reqwest
/// middleware (through `&self`); [`DefaultHeaders`] reads through its [`Reader`] and merges with
/// the same [`apply`], so both follow the same policy.
#[cfg(feature = "reqwest")]
pub(super) fn apply_current(
    defaults: &SharedHeaders,
    policy: &Policy,
    headers: &mut HeaderMap,
) -> Result<u64, Error> {
    defaults.read_versioned(|current, version| apply(current, headers, policy).map(|()| version))
}

/// Merges `defaults` into a request's `headers`.
pub(super) fn apply(
    defaults: &HeaderMap,
    headers: &mut HeaderMap,
    policy: &Policy,
) -> Result<(), Error> {
    if headers.is_empty() {
        // Every policy gives the defaults themselves; one map clone beats per-entry inserts.
        headers.clone_from(defaults);
        return Ok(());
    }
    // Decide once per name (`keys` yields each name once), then append all its values.
    for name in defaults.keys() {
        let take = match policy.for_name(name) {
            Merge::KeepRequest => !headers.contains_key(name),
            Merge::Append => true,
            Merge::Override => {
                headers.remove(name);
                true
            }
        };
        if take {
            for value in defaults.get_all(name) {
                headers.try_append(name.clone(), value.clone())?;
            }
        }
    }
    Ok(())
}
