//! The per-handle policy: size limits and which headers are secret.
//!
//! A handle built without any option has no policy at all (`None`): its writes skip every check
//! below and it redacts only the default sensitive headers. A configured policy lives in one
//! `Arc` shared by every version the handle publishes, so snapshots know it without any cost on
//! the read path.

use http::header::{AUTHORIZATION, COOKIE, HeaderName, PROXY_AUTHORIZATION, SET_COOKIE};
use http::{HeaderMap, HeaderValue};

use crate::error::{Error, Limit};

/// Limits and secrets of one handle, fixed at construction.
#[derive(Debug, Clone, Default)]
pub(crate) struct Policy {
    pub(crate) max_entries: Option<usize>,
    pub(crate) max_bytes: Option<usize>,
    /// Extra sensitive names, as the keys of a map (a hash lookup per name).
    pub(crate) sensitive: HeaderMap<()>,
    /// What `Builder::mark_sensitive` was given. Secret values are flagged on every write
    /// whatever it says (see [`mark_secrets`]); kept so that the option still type-checks.
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

    /// Checks `map` against the limits and marks its secret values.
    ///
    /// O(1) for the entry limit; O(number of values) for the byte limit (when configured) and
    /// for marking.
    pub(crate) fn admit(&self, map: &mut HeaderMap) -> Result<(), Error> {
        self.check_limits(map)?;
        mark_secrets(map, Some(self));
        Ok(())
    }

    /// Checks `map` against the limits only (its values are flagged already).
    pub(crate) fn check_limits(&self, map: &HeaderMap) -> Result<(), Error> {
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
        Ok(())
    }
}

/// Admits `map` under `policy` (the defaults when `None`): checks the limits, then flags every
/// secret value (see [`mark_secrets`]). Every map a handle publishes goes through here.
pub(crate) fn admit(policy: Option<&Policy>, map: &mut HeaderMap) -> Result<(), Error> {
    match policy {
        Some(policy) => policy.admit(map),
        None => {
            mark_secrets(map, None);
            Ok(())
        }
    }
}

/// Checks `map` against `policy`'s limits only, for a write that flagged the values it added
/// itself (`SharedHeaders::insert`/`append`).
#[inline]
pub(crate) fn check_limits(policy: Option<&Policy>, map: &HeaderMap) -> Result<(), Error> {
    match policy {
        Some(policy) => policy.check_limits(map),
        None => Ok(()),
    }
}

/// Flags every value whose name is secret under `policy` (the always-secret names, and the
/// policy's own) with `HeaderValue::set_sensitive(true)`, so that every way out of the crate
/// (`get`, a snapshot's map, the server layer's merge into a response, the client layer's merge
/// into a request) carries the flag and HTTP/2's HPACK and header-logging middleware treat the
/// value as sensitive. Values that are already flagged (every value of the previous version) are
/// skipped before their name is compared.
///
/// O(number of values), one flag test each; a name comparison only for values not yet flagged.
#[inline]
pub(crate) fn mark_secrets(map: &mut HeaderMap, policy: Option<&Policy>) {
    for (name, value) in map.iter_mut() {
        if !value.is_sensitive() && is_sensitive_name(name, policy) {
            value.set_sensitive(true);
        }
    }
}

/// The size [`Limit::Bytes`] measures: every name and value, a name counted once per value.
pub(crate) fn total_bytes(map: &HeaderMap) -> usize {
    map.iter()
        .map(|(name, value)| name.as_str().len() + value.len())
        .sum()
}

/// Credential header names: never printed by the access line, never propagated to another
/// service (`AccessLog::SENSITIVE_HEADERS`, `Propagation::header`).
pub(crate) const CREDENTIAL_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-api-key",
    "api-key",
    "x-auth-token",
    "x-csrf-token",
    "x-xsrf-token",
    "x-access-token",
    "x-amz-security-token",
];

/// Whether values of `name` are secret under `policy`: always `authorization`,
/// `proxy-authorization`, `cookie` and `set-cookie`, and the policy's own names.
#[inline]
pub(crate) fn is_sensitive_name(name: &HeaderName, policy: Option<&Policy>) -> bool {
    (*name == AUTHORIZATION
        || *name == PROXY_AUTHORIZATION
        || *name == COOKIE
        || *name == SET_COOKIE)
        || policy.is_some_and(|policy| policy.sensitive.contains_key(name))
}

/// Whether `value`, stored under `name`, must not be printed.
#[inline]
pub(crate) fn is_secret(name: &HeaderName, value: &HeaderValue, policy: Option<&Policy>) -> bool {
    value.is_sensitive() || is_sensitive_name(name, policy)
}
