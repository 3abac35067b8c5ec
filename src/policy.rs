//! The per-handle policy: size limits and which headers are secret.
//!
//! A handle built without any option has no policy at all (`None`): its writes skip every check
//! below and it redacts only the default sensitive headers. A configured policy lives in one
//! `Arc` shared by every version the handle publishes, so snapshots know it without any cost on
//! the read path.

use http::header::{AUTHORIZATION, COOKIE, HeaderName, PROXY_AUTHORIZATION, SET_COOKIE};
use std::sync::Arc;

use http::{HeaderMap, HeaderValue};

use crate::error::{Error, Limit};

/// Limits and secrets of one handle, fixed at construction.
#[derive(Debug, Clone, Default)]
pub(crate) struct Policy {
    pub(crate) max_entries: Option<usize>,
    pub(crate) max_bytes: Option<usize>,
    /// Extra sensitive names, as the keys of a map (a hash lookup per name).
    pub(crate) sensitive: HeaderMap<()>,
    /// Names past `HeaderMap`'s capacity (32,768 names), so that no name given is dropped.
    pub(crate) overflow: Vec<HeaderName>,
    /// The server layer's secret names alone (no limits), for a request's annotations: set on
    /// the layer's request policy when the layer has secret names.
    pub(crate) annotations: Option<Arc<Policy>>,
}

impl Policy {
    /// Whether this policy changes anything compared to no policy.
    pub(crate) fn is_default(&self) -> bool {
        self.max_entries.is_none() && self.max_bytes.is_none() && self.sensitive.is_empty()
    }

    /// Makes `name` secret.
    pub(crate) fn add_secret(&mut self, name: HeaderName) {
        if self.sensitive.contains_key(&name) || self.overflow.contains(&name) {
            return;
        }
        if self.sensitive.try_insert(name.clone(), ()).is_err() {
            self.overflow.push(name);
        }
    }

    /// Every name this policy makes secret beyond the always-secret ones.
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn secret_names(&self) -> impl Iterator<Item = &HeaderName> {
        self.sensitive.keys().chain(&self.overflow)
    }

    /// Whether this policy itself makes `name` secret.
    #[inline]
    pub(crate) fn has_secret(&self, name: &HeaderName) -> bool {
        self.sensitive.contains_key(name) || self.overflow.contains(name)
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

/// The always-secret header names (`Builder::ALWAYS_SECRET`): never printed by any printer of
/// the crate, never propagated to another service (`Propagation::header`). The first four are
/// also flagged sensitive on every write ([`mark_secrets`]).
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

/// Whether values of `name` are flagged sensitive as they are written under `policy`: always
/// `authorization`, `proxy-authorization`, `cookie` and `set-cookie`, and the policy's own
/// names. (The write path's question: four comparisons and a lookup.)
#[inline]
pub(crate) fn is_sensitive_name(name: &HeaderName, policy: Option<&Policy>) -> bool {
    (*name == AUTHORIZATION
        || *name == PROXY_AUTHORIZATION
        || *name == COOKIE
        || *name == SET_COOKIE)
        || policy.is_some_and(|policy| policy.has_secret(name))
}

/// Whether values of `name` are secret under `policy`: the one question of every printer
/// (`Debug`, `Redacted`, the access line, the spans) and of the propagation. The policy's own
/// names, and every name the credential rule marks, the rule that judges a query
/// parameter's name ([`crate::redact::credential`]: `x-vault-token`, `private-token`,
/// `x-goog-api-key`, `x-client-secret`, `x-authorization`, every name of
/// [`CREDENTIAL_HEADERS`]), but CORS's `access-control-*` names (a header about credentials,
/// never one).
#[inline]
pub(crate) fn is_secret_name(name: &HeaderName, policy: Option<&Policy>) -> bool {
    is_sensitive_name(name, policy) || (!is_plain_default(name) && credential_header(name.as_str()))
}

/// The access line's default fields (`user-agent`, `referer`, `host`: asked on every line),
/// which the credential rule never marks: known without a look at their tokens (three
/// comparisons of standard names).
#[inline]
fn is_plain_default(name: &HeaderName) -> bool {
    *name == http::header::USER_AGENT
        || *name == http::header::REFERER
        || *name == http::header::HOST
}

/// The credential rule on a header's name (lowercase ASCII: the rule's one-pass case).
#[inline]
pub(crate) fn credential_header(name: &str) -> bool {
    !name.starts_with("access-control-")
        && crate::redact::credential::credential_tokens(name.as_bytes())
}

/// Whether `value`, stored under `name`, must not be printed.
#[inline]
pub(crate) fn is_secret(name: &HeaderName, value: &HeaderValue, policy: Option<&Policy>) -> bool {
    value.is_sensitive() || is_secret_name(name, policy)
}
