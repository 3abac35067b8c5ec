//! URLs and queries as the lines print them: the referer and the URL-valued headers with
//! their userinfo and query redacted, the request's query with its credential parameters
//! redacted (the rule that tells their names: `credential.rs`).
#![cfg_attr(not(feature = "tracing"), allow(dead_code))]

use std::fmt;

use http::HeaderName;
use http::header::REFERER;

use super::QueryRule;
use super::credential::is_credential_bytes;
use super::escape::{is_plain_text, is_plain_url, write_escaped};

/// A URL or a part of one from a request (a path, a route, a gRPC service's name), for an
/// unquoted field: escaped by [`write_escaped`]'s URL rule. Allocates nothing.
pub(crate) struct UrlText<'a>(pub(crate) &'a str);

impl fmt::Display for UrlText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        put_url(f, self.0)
    }
}

/// Writes a piece of a URL: as it is when plain (one pass), else escaped.
#[inline]
fn put_url(f: &mut dyn fmt::Write, piece: &str) -> fmt::Result {
    // Already UTF-8: plain text is written as it is, with no second look at its encoding.
    if is_plain_url(piece.as_bytes()) {
        f.write_str(piece)
    } else {
        write_escaped(f, piece.as_bytes(), true)
    }
}

/// [`put_url`] on raw bytes (a header's value need not be UTF-8).
#[inline]
fn put_url_bytes(f: &mut dyn fmt::Write, piece: &[u8]) -> fmt::Result {
    match std::str::from_utf8(piece) {
        Ok(plain) if is_plain_url(piece) => f.write_str(plain),
        _ => write_escaped(f, piece, true),
    }
}

/// A request's path as printed ([`UrlText`]), the value of each `;name=value` path parameter
/// whose name marks a credential (`;jsessionid=…`) redacted by the query rule, up to the next
/// `/`.
#[derive(Clone, Copy)]
pub(crate) struct PathText<'a> {
    pub(crate) rule: &'a QueryRule,
    pub(crate) path: &'a str,
}

impl<'a> PathText<'a> {
    /// The path itself when it prints as it is (no parameter, nothing to escape): the common
    /// case, for a printer that can copy it without `fmt`.
    #[inline]
    pub(crate) fn as_plain(&self) -> Option<&'a str> {
        let bytes = self.path.as_bytes();
        (!bytes.contains(&b';') && is_plain_url(bytes)).then_some(self.path)
    }
}

impl fmt::Display for PathText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(plain) = self.as_plain() {
            return f.write_str(plain);
        }
        if !self.path.as_bytes().contains(&b';') {
            return put_url(f, self.path);
        }
        write_path(f, self.rule, self.path.as_bytes())
    }
}

/// Writes a path (or the part of a URL before its query) escaped, the value of each
/// `;name=value` parameter whose name marks a credential redacted up to the next `/`.
fn write_path(f: &mut dyn fmt::Write, rule: &QueryRule, bytes: &[u8]) -> fmt::Result {
    let Some(first) = bytes.iter().position(|&b| b == b';') else {
        return put_url_bytes(f, bytes);
    };
    let extra = rule.extra();
    let mut written = 0;
    let mut at = first;
    while at < bytes.len() {
        // A parameter starts after `;` and ends at the next `;` or `/`.
        let start = at + 1;
        let end = bytes[start..]
            .iter()
            .position(|&b| b == b';' || b == b'/')
            .map_or(bytes.len(), |p| start + p);
        let name_end = bytes[start..end]
            .iter()
            .position(|&b| b == b'=')
            .map_or(end, |p| start + p);
        if name_end < end && is_credential_bytes(&bytes[start..name_end], extra) {
            let value_end = bytes[name_end..]
                .iter()
                .position(|&b| b == b'/')
                .map_or(bytes.len(), |p| name_end + p);
            put_url_bytes(f, &bytes[written..name_end])?;
            f.write_str("=[redacted]")?;
            written = value_end;
        }
        at = match bytes[end.max(written)..].iter().position(|&b| b == b';') {
            Some(p) => end.max(written) + p,
            None => bytes.len(),
        };
    }
    put_url_bytes(f, &bytes[written..])
}

/// Writes header text escaped, each absolute URL in it (`scheme://…`, up to a space, `"`,
/// `<`, `>`, `\` or the scheme of the next `://`) written as a [`Url`]: its userinfo and the
/// credentials of its query redacted (a `link`, a `refresh`, a header of the application's
/// that carries a callback). Works on the raw bytes (a value need not be UTF-8).
pub(crate) fn write_embedded_urls(
    f: &mut fmt::Formatter<'_>,
    rule: &QueryRule,
    bytes: &[u8],
) -> fmt::Result {
    let mut written = 0;
    let mut from = 0;
    let scheme_byte = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.');
    while let Some(found) = find(&bytes[from..], b"://") {
        let sep = from + found;
        // The scheme: letters, digits, `+`, `-`, `.` before `://` (not before what is written).
        let start = bytes[written..sep]
            .iter()
            .rposition(|b| !scheme_byte(b))
            .map_or(written, |at| written + at + 1);
        // The URL ends at a space, `"`, `<`, `>`, `\`, or where a second URL glued on
        // (`https://a/,https://b/`) starts its scheme: one pass, each byte looked at once.
        let mut end = bytes.len();
        let mut i = sep + 3;
        while i < bytes.len() {
            let b = bytes[i];
            if b <= b' ' || matches!(b, b'"' | b'<' | b'>' | b'\\' | 0x7f) {
                end = i;
                break;
            }
            if bytes[i..].starts_with(b"://") {
                end = bytes[sep + 3..i]
                    .iter()
                    .rposition(|b| !scheme_byte(b))
                    .map_or(sep + 3, |at| sep + 3 + at + 1);
                break;
            }
            i += 1;
        }
        write_escaped(f, &bytes[written..start], false)?;
        fmt::Display::fmt(
            &Url {
                rule,
                url: &bytes[start..end],
            },
            f,
        )?;
        written = end;
        from = end;
    }
    if written == 0 && is_plain_text(bytes) {
        // The common case: printable ASCII without a URL.
        return f.write_str(std::str::from_utf8(bytes).unwrap_or_default());
    }
    write_escaped(f, &bytes[written..], false)
}

/// The first place of `needle` in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Whether a header's value is a URL (absolute or relative) whose userinfo and query the line
/// redacts as a whole: the standard ones and the rewrite headers proxies set.
pub(crate) fn carries_url(name: &HeaderName) -> bool {
    *name == REFERER
        || *name == http::header::LOCATION
        || *name == http::header::CONTENT_LOCATION
        || *name == http::header::ORIGIN
        || matches!(
            name.as_str(),
            "x-original-url" | "x-original-uri" | "x-forwarded-uri" | "x-rewrite-url"
        )
}

/// Whether a header's value holds a URL the printers redact: a URL-valued header's, a
/// `link`'s targets, a `refresh`'s `url=`, a `host` with userinfo (an authority), or any
/// absolute URL (`scheme://`) in a value.
pub(crate) fn holds_url(name: &HeaderName, value: &[u8]) -> bool {
    carries_url(name)
        || (*name == http::header::HOST && value.contains(&b'@'))
        || *name == http::header::REFRESH
        || name.as_str() == "link"
        || find(value, b"://").is_some()
}

/// A header's value with its URLs redacted (escaped: printable ASCII): a URL-valued header's
/// as a [`Url`], each `<target>` of a `link` and the `url=` of a `refresh` (relative or not)
/// as one, a `host`'s userinfo (an authority's) as `[redacted]@`, and each absolute URL in
/// any other value.
pub(crate) fn write_header_value(
    f: &mut fmt::Formatter<'_>,
    rule: &QueryRule,
    name: &HeaderName,
    bytes: &[u8],
) -> fmt::Result {
    if *name == http::header::HOST {
        // An authority: its userinfo is never printed.
        if let Some(at) = bytes.iter().rposition(|&b| b == b'@') {
            f.write_str("[redacted]@")?;
            return super::escape::write_escaped(f, &bytes[at + 1..], false);
        }
    }
    if carries_url(name) {
        return fmt::Display::fmt(&Url { rule, url: bytes }, f);
    }
    if name.as_str() == "link" {
        // `<target>; rel="next", <target>…`: each target a URL, the rest as any text.
        let mut rest = bytes;
        while let Some(open) = rest.iter().position(|&b| b == b'<') {
            let Some(close) = rest[open..].iter().position(|&b| b == b'>') else {
                // A target without its `>`: a URL to the end.
                write_embedded_urls(f, rule, &rest[..=open])?;
                return fmt::Display::fmt(
                    &Url {
                        rule,
                        url: &rest[open + 1..],
                    },
                    f,
                );
            };
            let close = open + close;
            write_embedded_urls(f, rule, &rest[..=open])?;
            fmt::Display::fmt(
                &Url {
                    rule,
                    url: &rest[open + 1..close],
                },
                f,
            )?;
            f.write_str(">")?;
            rest = &rest[close + 1..];
        }
        return write_embedded_urls(f, rule, rest);
    }
    if *name == http::header::REFRESH {
        // `0; url=/next?…`: what follows `url=` is a URL.
        if let Some(at) = bytes
            .windows(4)
            .position(|w| w.eq_ignore_ascii_case(b"url="))
        {
            write_escaped(f, &bytes[..at + 4], false)?;
            return fmt::Display::fmt(
                &Url {
                    rule,
                    url: &bytes[at + 4..],
                },
                f,
            );
        }
    }
    write_embedded_urls(f, rule, bytes)
}

/// The referer as printed: a [`Url`].
pub(crate) struct Referer<'a> {
    pub(crate) rule: &'a QueryRule,
    pub(crate) referer: &'a str,
}

impl fmt::Display for Referer<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The text is UTF-8 already: its pieces are written without a second check.
        write_url(f, self.rule, self.referer.as_bytes(), Some(self.referer))
    }
}

/// A URL as a line prints it (unquoted: escaped by [`write_escaped`]'s URL rule): its
/// fragment dropped (never sent in a referer, and where OAuth's implicit grant puts its
/// token), its userinfo replaced by `[redacted]@`, its query redacted as the request's (left
/// out with its `?` under an omitted query ([`QueryRule::Omitted`](QueryRule::Omitted))). The authority follows `scheme://`, a
/// leading `//` (after any whitespace), or a special scheme's `:` and any `/` and `\`
/// (`https:user@host`, as WHATWG parsers read it). Raw bytes: a value need not be UTF-8.
pub(crate) struct Url<'a> {
    pub(crate) rule: &'a QueryRule,
    pub(crate) url: &'a [u8],
}

/// Where the authority of `head` (a URL without query and fragment) starts, if it has one.
fn authority_start(head: &[u8]) -> Option<usize> {
    let lead = head
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(head.len());
    if head[lead..].starts_with(b"//") {
        return Some(lead + 2);
    }
    let colon = head.iter().position(|&b| b == b':')?;
    let scheme = &head[lead..colon];
    let special = [&b"http"[..], b"https", b"ws", b"wss", b"ftp"]
        .iter()
        .any(|s| scheme.eq_ignore_ascii_case(s));
    if special {
        let after = head[colon + 1..]
            .iter()
            .position(|&b| b != b'/' && b != b'\\')
            .map_or(head.len(), |at| colon + 1 + at);
        return Some(after);
    }
    head[colon + 1..].starts_with(b"//").then_some(colon + 3)
}

impl fmt::Display for Url<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_url(f, self.rule, self.url, None)
    }
}

/// A [`Url`]'s text: `bytes`, which are `text` when the caller knows them to be UTF-8 (every
/// cut below is after an ASCII byte, a character boundary of `text`).
fn write_url(
    f: &mut fmt::Formatter<'_>,
    rule: &QueryRule,
    bytes: &[u8],
    text: Option<&str>,
) -> fmt::Result {
    // A piece of the URL, from `text` when known.
    let put = |f: &mut fmt::Formatter<'_>, from: usize, to: usize| match text {
        Some(text) => put_url(f, &text[from..to]),
        None => put_url_bytes(f, &bytes[from..to]),
    };
    // One branch-free pass (a URL is short: cheaper than two `memchr`s) tells the common URL,
    // without a fragment or an `@`.
    let (hash, at) = bytes.iter().fold((false, false), |(hash, at), &b| {
        (hash | (b == b'#'), at | (b == b'@'))
    });
    let url = if hash {
        bytes.iter().position(|&b| b == b'#').unwrap_or(bytes.len())
    } else {
        bytes.len()
    };
    let (head, query) = match bytes[..url].iter().position(|&b| b == b'?') {
        Some(at) => (at, Some(at + 1)),
        None => (url, None),
    };
    // No `@`: no userinfo, no authority to find.
    let userinfo = if at {
        let head = &bytes[..head];
        authority_start(head).and_then(|start| {
            let end = head[start..]
                .iter()
                .position(|&b| b == b'/' || b == b'\\')
                .map_or(head.len(), |at| start + at);
            head[start..end]
                .iter()
                .rposition(|&b| b == b'@')
                .map(|at| (start, start + at + 1))
        })
    } else {
        None
    };
    // The rest of the head (the path), a credential path parameter (`;jsessionid=…`)
    // redacted as in the request's own path.
    let put_path = |f: &mut fmt::Formatter<'_>, from: usize| {
        if bytes[from..head].contains(&b';') {
            write_path(f, rule, &bytes[from..head])
        } else {
            put(f, from, head)
        }
    };
    match userinfo {
        Some((start, after)) => {
            put(f, 0, start)?;
            f.write_str("[redacted]@")?;
            put_path(f, after)?;
        }
        None => put_path(f, 0)?,
    }
    if let (Some(query), QueryRule::Shown { .. }) = (query, rule) {
        f.write_str("?")?;
        let query = match text {
            Some(text) => Ok(&text[query..url]),
            None => std::str::from_utf8(&bytes[query..url]),
        };
        match query {
            Ok(query) => fmt::Display::fmt(&QueryShown { rule, query }, f)?,
            // Not UTF-8: the query's bytes cannot be weighed, none is printed.
            Err(_) => f.write_str("[redacted]")?,
        }
    }
    Ok(())
}

mod query;
pub(crate) use query::QueryShown;
