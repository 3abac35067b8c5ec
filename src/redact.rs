//! Printing headers and URLs for logs without printing secrets: the crate's one secret rule.
//!
//! Every printer of the crate asks this module: a header's value is secret by its name
//! ([`is_secret_name`](crate::policy::is_secret_name): the always-secret names, a handle's
//! policy, and any name the credential rule of `credential.rs` marks, the same rule that
//! judges a query parameter's or a path parameter's name); a URL prints without its userinfo
//! and with the values of its credential parameters redacted (`url.rs`), a parameter's value
//! that is itself a URL or JSON-ish text redacted inside as well. The access line, the
//! server's and the client's OpenTelemetry spans, the record's `Debug` and the metrics all
//! print through it.

use std::fmt;

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::policy::{Policy, is_secret};

pub(crate) mod credential;
pub(crate) mod escape;
pub(crate) mod url;

/// How a printer treats a URL's query: shown with the credential parameters' values
/// redacted (and these names too: a whole decoded name, or a part between brackets, without
/// case), or left out.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) enum QueryRule {
    /// Shown, the values of credential parameters (and of `extra`'s) redacted.
    Shown { extra: Vec<Box<str>> },
    /// Left out; `extra`'s names still mark credentials elsewhere (a path parameter, a
    /// JSON-ish value).
    Omitted { extra: Vec<Box<str>> },
}

impl QueryRule {
    /// The credential rule alone: what every printer without settings of its own uses.
    pub(crate) const DEFAULT: QueryRule = QueryRule::Shown { extra: Vec::new() };

    /// The layer's rule when it has one, else the default (a printer's `Option`).
    pub(crate) fn or_default(rule: Option<&QueryRule>) -> &QueryRule {
        static DEFAULT: QueryRule = QueryRule::DEFAULT;
        rule.unwrap_or(&DEFAULT)
    }

    /// The names this rule adds to the credential rule, whether the query shows or not.
    pub(crate) fn extra(&self) -> &[Box<str>] {
        match self {
            QueryRule::Shown { extra } | QueryRule::Omitted { extra } => extra,
        }
    }
}

/// Headers formatted for logs: secret values are replaced by `[redacted]`.
///
/// Made by [`Snapshot::redacted`](crate::Snapshot::redacted) (which knows the handle's own list
/// of sensitive names) or by [`Redacted::new`] for any `HeaderMap` (default rules only).
///
/// A value is secret, and shown as `[redacted]` (not even its length is disclosed, like `http`'s
/// own `Debug`, which prints `Sensitive`), when
/// * it is flagged with [`HeaderValue::set_sensitive(true)`](HeaderValue::set_sensitive), or
/// * its name is one of [`Builder::ALWAYS_SECRET`](crate::Builder::ALWAYS_SECRET)
///   (`authorization`, `cookie`, `x-api-key`, ...), or
/// * its name was given to [`Builder::sensitive`](crate::Builder::sensitive) (in the server
///   layer: for either handle's policy, which makes it secret for the whole layer).
///
/// This is the one rule of the crate's printers: the access line asks the same question. A
/// name is also secret when the credential rule marks it (its tokens: `x-vault-token`,
/// `x-client-secret`, `x-goog-api-key`; see [`Builder::ALWAYS_SECRET`](crate::Builder::ALWAYS_SECRET)).
/// A value that is not secret but holds a URL (a `referer`, a `location`, or any
/// `scheme://…` inside a value) prints with the URL's userinfo as `[redacted]@` and the values
/// of its query's credential parameters as `[redacted]`.
///
/// `Display` prints one line, `name: value, name: value`, in the map's iteration order; a value
/// that contains a comma or is not visible ASCII is printed quoted and escaped as in `Debug`, so
/// a value can never pass for further entries in a log line. `Debug` prints a map like
/// `HeaderMap`'s own `Debug`. Names are never hidden: that a header is present is not a secret, its value is.
///
/// # Examples
///
/// ```
/// use http::header::{AUTHORIZATION, HOST};
/// use shared_headers::SharedHeaders;
///
/// let headers = SharedHeaders::new();
/// headers.insert(HOST, "example.com".parse()?)?;
/// headers.insert(AUTHORIZATION, "Bearer abc".parse()?)?;
/// let snap = headers.snapshot();
///
/// assert_eq!(
///     snap.redacted().to_string(),
///     "host: example.com, authorization: [redacted]"
/// );
/// assert_eq!(
///     format!("{:?}", snap.redacted()),
///     r#"{"host": "example.com", "authorization": [redacted]}"#
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy)]
pub struct Redacted<'a> {
    map: &'a HeaderMap,
    policy: Option<&'a Policy>,
    /// The names a layer's printers add to the credential rule (for a URL-valued value's
    /// query and path parameters); `None`: the rule alone.
    rule: Option<&'a QueryRule>,
}

impl<'a> Redacted<'a> {
    /// Formats any map with the default rules (flagged values and the
    /// [`ALWAYS_SECRET`](crate::Builder::ALWAYS_SECRET) names).
    ///
    /// # Examples
    ///
    /// ```
    /// use http::HeaderMap;
    /// use shared_headers::Redacted;
    ///
    /// let mut map = HeaderMap::new();
    /// map.insert("cookie", "id=42".parse()?);
    /// let mut key: http::HeaderValue = "k".parse()?;
    /// key.set_sensitive(true);
    /// map.insert("x-key", key);
    /// assert_eq!(
    ///     Redacted::new(&map).to_string(),
    ///     "cookie: [redacted], x-key: [redacted]"
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(map: &'a HeaderMap) -> Self {
        Redacted {
            map,
            policy: None,
            rule: None,
        }
    }

    pub(crate) fn with_policy(map: &'a HeaderMap, policy: Option<&'a Policy>) -> Self {
        Redacted {
            map,
            policy,
            rule: None,
        }
    }

    /// The same, its URL-valued values printed by a layer's rule (the access log's names).
    pub(crate) fn with_rule(self, rule: Option<&'a QueryRule>) -> Self {
        Redacted { rule, ..self }
    }

    fn entries(&self) -> impl Iterator<Item = (&'a str, Shown<'a>)> + 'a {
        let policy = self.policy;
        let rule = QueryRule::or_default(self.rule);
        self.map.iter().map(move |(name, value)| {
            let shown = if is_secret(name, value, policy) {
                Shown::Hidden
            } else if url::holds_url(name, value.as_bytes()) {
                Shown::Url(value, name, rule)
            } else {
                Shown::Plain(value)
            };
            (name.as_str(), shown)
        })
    }
}

/// One value as printed.
enum Shown<'a> {
    Plain(&'a HeaderValue),
    /// A value with URLs, printed by the one URL rule (userinfo and the query's credentials
    /// redacted), as its header's name tells (`referer`: a URL; `link`: its targets...).
    Url(&'a HeaderValue, &'a HeaderName, &'a QueryRule),
    Hidden,
}

impl Shown<'_> {
    /// A value with URLs, their secrets redacted (escaped: printable ASCII).
    fn write_url(
        f: &mut fmt::Formatter<'_>,
        value: &HeaderValue,
        name: &HeaderName,
        rule: &QueryRule,
    ) -> fmt::Result {
        url::write_header_value(f, rule, name, value.as_bytes())
    }
}

/// A value's text with its URLs redacted ([`Shown::write_url`]).
struct UrlsOf<'a>(&'a HeaderValue, &'a HeaderName, &'a QueryRule);

impl fmt::Display for UrlsOf<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Shown::write_url(f, self.0, self.1, self.2)
    }
}

impl fmt::Debug for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shown::Plain(value) => fmt::Debug::fmt(value, f),
            Shown::Url(value, name, rule) => {
                // Quoted as `HeaderValue`'s `Debug` quotes: a `"` or `\` of the value escaped,
                // so that the value cannot close its quotes and pass for further entries.
                let text = UrlsOf(value, name, rule).to_string();
                f.write_str("\"")?;
                for piece in text.split_inclusive(['"', '\\']) {
                    match piece.strip_suffix(['"', '\\']) {
                        Some(head) => {
                            f.write_str(head)?;
                            f.write_str("\\")?;
                            f.write_str(&piece[head.len()..])?;
                        }
                        None => f.write_str(piece)?,
                    }
                }
                f.write_str("\"")
            }
            Shown::Hidden => f.write_str("[redacted]"),
        }
    }
}

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // A value with a comma is quoted, so that it can never pass for more entries
            // (`a, authorization: forged`): unquoted values never contain the separator.
            Shown::Plain(value) => match value.to_str() {
                Ok(text) if !text.contains(',') => f.write_str(text),
                _ => fmt::Debug::fmt(value, f),
            },
            Shown::Url(value, _, _) if value.as_bytes().contains(&b',') => fmt::Debug::fmt(self, f),
            Shown::Url(value, name, rule) => Shown::write_url(f, value, name, rule),
            Shown::Hidden => fmt::Debug::fmt(self, f),
        }
    }
}

impl fmt::Display for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (name, shown)) in self.entries().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{name}: {shown}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.entries()).finish()
    }
}
