//! Queries as the lines print them: the credential parameters' values redacted, and a value
//! that carries secrets of its own (a URL, JSON-ish text) redacted inside.

use std::fmt;

use super::{Url, find, put_url};
use crate::redact::QueryRule;
use crate::redact::credential::is_credential;

/// A query with the values of credential parameters redacted (escaped by the URL rule).
/// Pairs are separated by `&` or `;`; a credential's value runs to the next `&` (a `;` in it
/// is taken as part of it: both readings of `token=a;b=c` keep `a` out of the line).
pub(crate) struct QueryShown<'a> {
    pub(crate) rule: &'a QueryRule,
    pub(crate) query: &'a str,
}

impl fmt::Display for QueryShown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let extra: &[Box<str>] = match self.rule {
            QueryRule::Shown { extra } => extra,
            QueryRule::Omitted { .. } => return Ok(()),
        };
        // One pass over the bytes: a run of plain pairs is written at once, a credential's
        // value replaced (`&`, `;` and `=` are ASCII, so every cut is a character boundary).
        let query = self.query;
        let bytes = query.as_bytes();
        let mut written = 0; // the query is written up to here
        let mut start = 0; // the current pair starts here
        while start <= bytes.len() {
            let end = bytes[start..]
                .iter()
                .position(|&b| b == b'&' || b == b';')
                .map_or(bytes.len(), |at| start + at);
            let name_end = bytes[start..end]
                .iter()
                .position(|&b| b == b'=')
                .map_or(end, |at| start + at);
            if is_credential(&query[start..name_end], extra) {
                // The value runs to the next `&`.
                let value_end = bytes[name_end..]
                    .iter()
                    .position(|&b| b == b'&')
                    .map_or(bytes.len(), |at| name_end + at);
                put_url(f, &query[written..name_end])?;
                f.write_str("=[redacted]")?;
                written = value_end;
                start = value_end + 1;
            } else {
                // A value that is itself a URL or JSON-ish text: its secrets redacted inside.
                if name_end < end {
                    if let Some(shown) = nested(&query[name_end + 1..end], self.rule) {
                        put_url(f, &query[written..=name_end])?;
                        f.write_str(&shown)?;
                        written = end;
                    }
                }
                start = end + 1;
            }
        }
        if written < query.len() {
            put_url(f, &query[written..])?;
        }
        Ok(())
    }
}

/// How deep values nest in one another (a URL in a parameter of a URL in a parameter...)
/// before a nested value is redacted whole: a bound on the recursion a query can ask for.
const MAX_NESTING: u8 = 4;

thread_local! {
    static NESTING: std::cell::Cell<u8> = const { std::cell::Cell::new(0) };
}

/// A parameter's value as printed when it carries a secret of its own: a URL (`scheme://`,
/// `//host`, or with a query of its own) with userinfo or credential parameters, or JSON-ish
/// text (`{...}`, `[...]`) with a credential key; redacted as such, and percent-encoded again
/// when the value came encoded. `None` for any other value (printed as it is): the common
/// value (`2`, `rust`) is looked at once, for a byte that could start either.
pub(crate) fn nested(value: &str, rule: &QueryRule) -> Option<String> {
    let bytes = value.as_bytes();
    if !bytes
        .iter()
        .any(|&b| matches!(b, b':' | b'%' | b'{' | b'[' | b'@' | b'?' | b'/' | b'+'))
    {
        return None;
    }
    let encoded = bytes.iter().any(|&b| b == b'%' || b == b'+');
    let decoded: Vec<u8> = if encoded {
        crate::redact::credential::decoded(bytes).collect()
    } else {
        bytes.to_vec()
    };
    let trimmed = decoded.trim_ascii_start();
    let json = trimmed.starts_with(b"{") || trimmed.starts_with(b"[");
    let url = !json
        && (find(&decoded, b"://").is_some() || trimmed.starts_with(b"//") || {
            decoded.contains(&b'?')
                || decoded.contains(&b'@')
                || (trimmed.starts_with(b"/") && decoded.contains(&b';'))
        });
    // Encoded twice (a `return_to` carrying an encoded `next`): decoded once it is still
    // encoded text, looked at as a value of its own.
    let twice = encoded && !json && !url && decoded.contains(&b'%');
    if !json && !url && !twice {
        return None;
    }
    let depth = NESTING.with(|n| n.get());
    if depth >= MAX_NESTING {
        return Some("[redacted]".to_owned());
    }
    NESTING.with(|n| n.set(depth + 1));
    struct Leave;
    impl Drop for Leave {
        fn drop(&mut self) {
            NESTING.with(|n| n.set(n.get().saturating_sub(1)));
        }
    }
    let _leave = Leave;
    let shown = if twice {
        nested(std::str::from_utf8(&decoded).ok()?, rule)?
    } else if json {
        // Not UTF-8 once decoded: its keys cannot be read, it is redacted whole.
        let Some(raw) = redact_json(&decoded, rule) else {
            return Some("[redacted]".to_owned());
        };
        if encoded {
            raw
        } else {
            let mut shown = String::with_capacity(raw.len());
            put_url(&mut shown, &raw).ok()?;
            shown
        }
    } else {
        let mut shown = String::new();
        fmt::write(
            &mut shown,
            format_args!(
                "{}",
                Url {
                    rule,
                    url: &decoded
                }
            ),
        )
        .ok()?;
        shown
    };
    let marks = |text: &[u8]| {
        text.windows(REDACTED.len())
            .filter(|w| *w == REDACTED)
            .count()
    };
    if marks(shown.as_bytes()) <= marks(&decoded) {
        return None;
    }
    if !encoded {
        return Some(shown);
    }
    // Encoded again, but for the marks: the value stays one value of its query.
    let mut out = String::with_capacity(shown.len() + 16);
    let text = shown.as_bytes();
    let mut at = 0;
    while at < text.len() {
        if text[at..].starts_with(REDACTED) {
            out.push_str("[redacted]");
            at += REDACTED.len();
            continue;
        }
        let b = text[at];
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            const HEX: &[u8; 16] = b"0123456789ABCDEF";
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        }
        at += 1;
    }
    Some(out)
}

const REDACTED: &[u8] = b"[redacted]";

/// JSON-ish text with the value of each credential key redacted (a key: a quoted string or a
/// bare word followed by `:`; its value: a string, a scalar, or a whole object or array);
/// `None` if it is not UTF-8.
fn redact_json(text: &[u8], rule: &QueryRule) -> Option<String> {
    let extra = rule.extra();
    let text = std::str::from_utf8(text).ok()?;
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut written = 0;
    let mut at = 0;
    // The end of the quoted string that starts at `from` (its closing quote, excluded).
    let string_end = |from: usize| {
        let quote = bytes[from];
        let mut i = from + 1;
        while i < bytes.len() {
            match bytes[i] {
                b'\\' => i += 2,
                b if b == quote => return i,
                _ => i += 1,
            }
        }
        bytes.len()
    };
    while at < bytes.len() {
        let b = bytes[at];
        let (key, key_end) = if b == b'"' || b == b'\'' {
            let end = string_end(at);
            (&text[at + 1..end], (end + 1).min(bytes.len()))
        } else if b.is_ascii_alphanumeric() || b == b'_' {
            let end = bytes[at..]
                .iter()
                .position(|&c| !(c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.')))
                .map_or(bytes.len(), |p| at + p);
            (&text[at..end], end)
        } else {
            at += 1;
            continue;
        };
        let colon = bytes[key_end..]
            .iter()
            .position(|c| !c.is_ascii_whitespace())
            .map(|p| key_end + p);
        let Some(colon) = colon.filter(|&c| bytes[c] == b':') else {
            // A string that is a value, not a key: a URL in it is redacted as a URL.
            if (b == b'"' || b == b'\'') && key_end > at + 1 {
                if let Some(shown) = nested(key, rule) {
                    out.push_str(&text[written..=at]);
                    out.push_str(&shown);
                    // From its closing quote on (none: the text ends in the string).
                    written = string_end(at);
                }
            }
            at = key_end.max(at + 1);
            continue;
        };
        let unescaped;
        let key = if key.contains('\\') {
            unescaped = json_unescape(key);
            unescaped.as_str()
        } else {
            key
        };
        if !crate::redact::credential::is_credential(key, extra) {
            at = colon + 1;
            continue;
        }
        let value = bytes[colon + 1..]
            .iter()
            .position(|c| !c.is_ascii_whitespace())
            .map_or(bytes.len(), |p| colon + 1 + p);
        let value_end = match bytes.get(value) {
            None => bytes.len(),
            Some(b'"' | b'\'') => (string_end(value) + 1).min(bytes.len()),
            Some(b'{' | b'[') => {
                // The whole object or array, strings inside skipped.
                let mut depth = 0usize;
                let mut i = value;
                while i < bytes.len() {
                    match bytes[i] {
                        b'"' | b'\'' => i = string_end(i),
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
                (i + 1).min(bytes.len())
            }
            Some(_) => bytes[value..]
                .iter()
                .position(|&c| matches!(c, b',' | b'}' | b']') || c.is_ascii_whitespace())
                .map_or(bytes.len(), |p| value + p),
        };
        out.push_str(&text[written..value]);
        out.push_str("\"[redacted]\"");
        written = value_end;
        at = value_end.max(at + 1);
    }
    out.push_str(&text[written..]);
    Some(out)
}

/// A JSON string's text with its escapes read (`\u0061` is `a`, `\"` is `"`): a key is
/// judged as a JSON reader sees it.
fn json_unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(c) => out.push(c),
                    None => out.push_str(&hex),
                }
            }
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}
