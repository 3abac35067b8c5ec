//! The per-handle policy: size limits and which headers are secret.
//!
//! A handle built without any option has no policy at all (`None`): its writes skip every check
//! below and it redacts only the default sensitive headers. A configured policy lives in one
//! `Arc` shared by every version the handle publishes, so snapshots know it without any cost on
//! the read path.

use http::header::{AUTHORIZATION, COOKIE, HeaderName, PROXY_AUTHORIZATION, SET_COOKIE};
use http::{HeaderMap, HeaderValue};

use crate::error::{Error, Limit};

/// The names whose values are always redacted, whatever the policy.
pub(crate) const DEFAULT_SENSITIVE: [HeaderName; 4] =
    [AUTHORIZATION, PROXY_AUTHORIZATION, COOKIE, SET_COOKIE];

/// Limits and secrets of one handle, fixed at construction.
#[derive(Debug, Clone, Default)]
pub(crate) struct Policy {
    pub(crate) max_entries: Option<usize>,
    pub(crate) max_bytes: Option<usize>,
    /// Extra sensitive names, as the keys of a map (a hash lookup per name).
    pub(crate) sensitive: HeaderMap<()>,
    /// Mark sensitive headers with `HeaderValue::set_sensitive(true)` as they are written.
    pub(crate) mark_sensitive: bool,
}

impl Policy {
    /// Whether this policy changes anything compared to no policy.
    pub(crate) fn is_default(&self) -> bool {
        self.max_entries.is_none()
            && self.max_bytes.is_none()
            && self.sensitive.is_empty()
            && !self.mark_sensitive
    }

    /// Checks `map` against the limits and, if asked to, marks its sensitive values.
    ///
    /// O(1) for the entry limit; O(number of values) for the byte limit and for marking, each
    /// only when configured.
    pub(crate) fn admit(&self, map: &mut HeaderMap) -> Result<(), Error> {
        if let Some(max) = self.max_entries {
            let attempted = map.len();
            if attempted > max {
                return Err(Error::LimitExceeded {
                    limit: Limit::Entries,
                    max,
                    attempted,
                });
            }
        }
        if let Some(max) = self.max_bytes {
            let attempted = total_bytes(map);
            if attempted > max {
                return Err(Error::LimitExceeded {
                    limit: Limit::Bytes,
                    max,
                    attempted,
                });
            }
        }
        if self.mark_sensitive {
            for (name, value) in map.iter_mut() {
                if !value.is_sensitive() && is_sensitive_name(name, Some(self)) {
                    value.set_sensitive(true);
                }
            }
        }
        Ok(())
    }
}

/// The size [`Limit::Bytes`] measures: every name and value, a name counted once per value.
pub(crate) fn total_bytes(map: &HeaderMap) -> usize {
    map.iter()
        .map(|(name, value)| name.as_str().len() + value.len())
        .sum()
}

/// Whether values of `name` are secret under `policy` (the defaults when `None`).
#[inline]
pub(crate) fn is_sensitive_name(name: &HeaderName, policy: Option<&Policy>) -> bool {
    DEFAULT_SENSITIVE.contains(name)
        || policy.is_some_and(|policy| policy.sensitive.contains_key(name))
}

/// Whether `value`, stored under `name`, must not be printed.
#[inline]
pub(crate) fn is_secret(name: &HeaderName, value: &HeaderValue, policy: Option<&Policy>) -> bool {
    value.is_sensitive() || is_sensitive_name(name, policy)
}
