//! URLs and queries as the lines print them: the referer and the URL-valued headers with
//! their userinfo and query redacted, the request's query with its credential parameters
//! redacted, and the rule that tells a credential parameter's name.

use std::fmt;

use http::HeaderName;
use http::header::REFERER;

use super::escape::{is_plain_text, is_plain_url, write_escaped};
use super::{AccessLog, Query};

/// A URL or a part of one from a request (a path, a route, a gRPC service's name), for an
/// unquoted field: escaped by [`write_escaped`]'s URL rule. Allocates nothing.
pub(super) struct UrlText<'a>(pub(super) &'a str);

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
pub(super) struct PathText<'a> {
    pub(super) log: &'a AccessLog,
    pub(super) path: &'a str,
}

impl fmt::Display for PathText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = self.path.as_bytes();
        let Some(first) = bytes.iter().position(|&b| b == b';') else {
            return put_url(f, self.path);
        };
        let extra: &[Box<str>] = match &self.log.query {
            Query::Shown { extra } => extra,
            Query::Omitted => &[],
        };
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
            if name_end < end && is_credential(&self.path[start..name_end], extra) {
                let value_end = bytes[name_end..]
                    .iter()
                    .position(|&b| b == b'/')
                    .map_or(bytes.len(), |p| name_end + p);
                put_url(f, &self.path[written..name_end])?;
                f.write_str("=[redacted]")?;
                written = value_end;
            }
            at = match bytes[end.max(written)..].iter().position(|&b| b == b';') {
                Some(p) => end.max(written) + p,
                None => bytes.len(),
            };
        }
        put_url(f, &self.path[written..])
    }
}

/// Writes header text escaped, each absolute URL in it (`scheme://…`, up to a space, `"`,
/// `<`, `>`, `\` or the scheme of the next `://`) written as a [`Url`]: its userinfo and the
/// credentials of its query redacted (a `link`, a `refresh`, a header of the application's
/// that carries a callback). Works on the raw bytes (a value need not be UTF-8).
pub(super) fn write_embedded_urls(
    f: &mut fmt::Formatter<'_>,
    log: &AccessLog,
    bytes: &[u8],
) -> fmt::Result {
    let mut written = 0;
    let mut from = 0;
    while let Some(found) = find(&bytes[from..], b"://") {
        let sep = from + found;
        // The scheme: letters, digits, `+`, `-`, `.` before `://`.
        let start = bytes[..sep]
            .iter()
            .rposition(|&b| !(b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')))
            .map_or(0, |at| at + 1)
            .max(written);
        let mut end = bytes[sep..]
            .iter()
            .position(|&b| b <= b' ' || matches!(b, b'"' | b'<' | b'>' | b'\\' | 0x7f))
            .map_or(bytes.len(), |at| sep + at);
        // A second URL glued on (`https://a/,https://b/`) starts its own.
        if let Some(next) = find(&bytes[sep + 3..end], b"://") {
            let next = sep + 3 + next;
            end = bytes[..next]
                .iter()
                .rposition(|&b| !(b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')))
                .map_or(next, |at| at + 1)
                .max(sep + 3);
        }
        write_escaped(f, &bytes[written..start], false)?;
        fmt::Display::fmt(
            &Url {
                log,
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
/// redacts as a whole.
pub(super) fn carries_url(name: &HeaderName) -> bool {
    *name == REFERER
        || *name == http::header::LOCATION
        || *name == http::header::CONTENT_LOCATION
        || *name == http::header::ORIGIN
}

/// The referer as printed: a [`Url`].
pub(super) struct Referer<'a> {
    pub(super) log: &'a AccessLog,
    pub(super) referer: &'a str,
}

impl fmt::Display for Referer<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The text is UTF-8 already: its pieces are written without a second check.
        write_url(f, self.log, self.referer.as_bytes(), Some(self.referer))
    }
}

/// A URL as a line prints it (unquoted: escaped by [`write_escaped`]'s URL rule): its
/// fragment dropped (never sent in a referer, and where OAuth's implicit grant puts its
/// token), its userinfo replaced by `[redacted]@`, its query redacted as the request's (left
/// out with its `?` under [`AccessLog::omit_query`]). The authority follows `scheme://`, a
/// leading `//` (after any whitespace), or a special scheme's `:` and any `/` and `\`
/// (`https:user@host`, as WHATWG parsers read it). Raw bytes: a value need not be UTF-8.
pub(super) struct Url<'a> {
    pub(super) log: &'a AccessLog,
    pub(super) url: &'a [u8],
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
        write_url(f, self.log, self.url, None)
    }
}

/// A [`Url`]'s text: `bytes`, which are `text` when the caller knows them to be UTF-8 (every
/// cut below is after an ASCII byte, a character boundary of `text`).
fn write_url(
    f: &mut fmt::Formatter<'_>,
    log: &AccessLog,
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
    match userinfo {
        Some((start, after)) => {
            put(f, 0, start)?;
            f.write_str("[redacted]@")?;
            put(f, after, head)?;
        }
        None => put(f, 0, head)?,
    }
    if let (Some(query), Query::Shown { .. }) = (query, &log.query) {
        f.write_str("?")?;
        let query = match text {
            Some(text) => Ok(&text[query..url]),
            None => std::str::from_utf8(&bytes[query..url]),
        };
        match query {
            Ok(query) => fmt::Display::fmt(&QueryShown { log, query }, f)?,
            // Not UTF-8: the query's bytes cannot be weighed, none is printed.
            Err(_) => f.write_str("[redacted]")?,
        }
    }
    Ok(())
}

// ---- queries ----

/// A query with the values of credential parameters redacted (escaped by the URL rule).
/// Pairs are separated by `&` or `;`; a credential's value runs to the next `&` (a `;` in it
/// is taken as part of it: both readings of `token=a;b=c` keep `a` out of the line).
pub(super) struct QueryShown<'a> {
    pub(super) log: &'a AccessLog,
    pub(super) query: &'a str,
}

impl fmt::Display for QueryShown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let extra: &[Box<str>] = match &self.log.query {
            Query::Shown { extra } => extra,
            Query::Omitted => return Ok(()),
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
                start = end + 1;
            }
        }
        if written < query.len() {
            put_url(f, &query[written..])?;
        }
        Ok(())
    }
}

/// Whether a query parameter's name marks a credential: by the token rule of the module
/// docs, or as one of the log's own names (the whole name, or a part between brackets).
pub(super) fn is_credential(name: &str, extra: &[Box<str>]) -> bool {
    credential_tokens(name.as_bytes())
        || (!extra.is_empty()
            && extra
                .iter()
                .any(|known| names_match(name.as_bytes(), known.as_bytes())))
}

/// The bytes of a query parameter's name, percent-decoded and with `+` as a space.
fn decoded(name: &[u8]) -> impl Iterator<Item = u8> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        let byte = *name.get(i)?;
        i += 1;
        Some(match byte {
            b'%' => match (
                name.get(i).copied().and_then(hex),
                name.get(i + 1).copied().and_then(hex),
            ) {
                (Some(hi), Some(lo)) => {
                    i += 2;
                    hi << 4 | lo
                }
                _ => b'%',
            },
            b'+' => b' ',
            other => other,
        })
    })
}

/// Whether the decoded `name`, or one of its parts between brackets, is `known` (without
/// case).
fn names_match(name: &[u8], known: &[u8]) -> bool {
    if decoded(name)
        .map(|b| b.to_ascii_lowercase())
        .eq(known.iter().map(u8::to_ascii_lowercase))
    {
        return true;
    }
    // The parts: `a[b][c]` is `a`, `b`, `c`.
    let mut at = 0; // matched bytes of `known` in this part, or usize::MAX once it differs
    let check = |at: usize| at == known.len();
    for b in decoded(name) {
        if b == b'[' || b == b']' {
            if check(at) {
                return true;
            }
            at = 0;
        } else if at < known.len() && known[at].eq_ignore_ascii_case(&b) {
            at += 1;
        } else {
            at = usize::MAX;
        }
    }
    check(at)
}

/// The token rule, on a raw name: percent-decoded (`+` a space), cut into tokens at every
/// byte that is not an ASCII letter or digit (brackets, `_`, `-`, `.`, a space) and where a
/// lowercase letter or digit meets an uppercase one (`apiKey`), compared without case; a
/// token's last 32 bytes are kept (a longer one is compared by its end). One pass, no
/// allocation.
pub(super) fn credential_tokens(name: &[u8]) -> bool {
    // The common name (`page`, `api_key`) has nothing to decode and no uppercase letter: its
    // tokens are its own pieces between the other bytes, compared where they are, in the same
    // pass that looks for a byte that needs the general rule.
    let mut previous: &[u8] = &[];
    let mut start = 0;
    for at in 0..=name.len() {
        match name.get(at) {
            Some(b'a'..=b'z' | b'0'..=b'9') => continue,
            Some(b'A'..=b'Z' | b'%' | b'+') => return tokens_have_credential(decoded(name)),
            _ => {}
        }
        let token = &name[start..at];
        start = at + 1;
        if token.is_empty() {
            continue;
        }
        // As the general rule keeps it: the last 32 bytes, without trailing digits.
        let token = &token[token.len().saturating_sub(32)..];
        let token = match token.iter().rposition(|b| !b.is_ascii_digit()) {
            Some(last) => &token[..=last],
            None => token,
        };
        if token_is_credential(token, previous.is_empty(), previous) {
            return true;
        }
        previous = token;
    }
    false
}

/// [`credential_tokens`] on the decoded bytes.
#[inline(always)]
fn tokens_have_credential(bytes: impl Iterator<Item = u8>) -> bool {
    // A name is a few bytes: one pass over them, each token compared once it ends. Two
    // buffers in turn: the token being read, and the one before it (the qualifier of a `key`
    // or a `code`, looked at only then).
    let mut tokens = [[0u8; 32]; 2];
    let mut current = 0; // the buffer being read into
    let mut len = 0;
    let mut previous = 0; // the length of the token before (in the other buffer), 0: none
    let mut lower_before = false;
    // Ends the token in `tokens[*current][..len]`; whether it marks a credential.
    fn finish(
        tokens: &[[u8; 32]; 2],
        current: &mut usize,
        len: usize,
        previous: &mut usize,
    ) -> bool {
        if len == 0 {
            return false;
        }
        let token = &tokens[*current][..len];
        // Trailing digits say nothing (`password2`, `token1`): the token without them.
        let token = match token.iter().rposition(|b| !b.is_ascii_digit()) {
            Some(last) => &token[..=last],
            None => token,
        };
        let before = &tokens[*current ^ 1][..*previous];
        if token_is_credential(token, *previous == 0, before) {
            return true;
        }
        *previous = token.len();
        *current ^= 1;
        false
    }
    for b in bytes {
        if b.is_ascii_alphanumeric() {
            if b.is_ascii_uppercase() && lower_before {
                if finish(&tokens, &mut current, len, &mut previous) {
                    return true;
                }
                len = 0;
            }
            lower_before = !b.is_ascii_uppercase();
            let token = &mut tokens[current];
            if len == token.len() {
                token.copy_within(1.., 0);
                len -= 1;
            }
            token[len] = b.to_ascii_lowercase();
            len += 1;
        } else {
            lower_before = false;
            if finish(&tokens, &mut current, len, &mut previous) {
                return true;
            }
            len = 0;
        }
    }
    finish(&tokens, &mut current, len, &mut previous)
}

/// What a token allows of the next one: a `key` after `api`, `private`, `access`…; a `code`
/// after `auth`, `oauth`, `verification`….
#[derive(Clone, Copy, PartialEq, Eq)]
enum Qualifier {
    None,
    Key,
    Code,
}

fn qualifier_of(token: &[u8]) -> Qualifier {
    // `AWSAccessKeyId` is `awsaccess`, `key`, `id`: a word ending as a qualifier qualifies.
    if [&b"access"[..], b"private", b"secret", b"signing"]
        .iter()
        .any(|end| token.ends_with(end))
        || matches!(
            token,
            b"api"
                | b"private"
                | b"access"
                | b"secret"
                | b"signing"
                | b"client"
                | b"consumer"
                | b"app"
                | b"application"
                | b"master"
                | b"encryption"
                | b"license"
                | b"subscription"
                | b"shared"
        )
    {
        return Qualifier::Key;
    }
    if matches!(
        token,
        b"oauth"
            | b"authorization"
            | b"verification"
            | b"verify"
            | b"mfa"
            | b"totp"
            | b"security"
            | b"reset"
            | b"recovery"
            | b"login"
            | b"confirmation"
            | b"activation"
    ) {
        return Qualifier::Code;
    }
    Qualifier::None
}

/// The credential words (a token equal to one, singular or plural, marks a credential), as
/// a list and as a `match` (one source for both).
macro_rules! credential_words {
    ($($word:literal)|+) => {
        const CREDENTIAL_WORDS: &[&[u8]] = &[$($word),+];
        fn is_credential_word(token: &[u8]) -> bool {
            matches!(token, $($word)|+)
        }
    };
}

credential_words!(
    b"password"
        | b"passwd"
        | b"pwd"
        | b"pass"
        | b"passphrase"
        | b"passcode"
        | b"secret"
        | b"token"
        | b"credential"
        | b"auth"
        | b"authorization"
        | b"authentication"
        | b"apikey"
        | b"jwt"
        | b"bearer"
        | b"cookie"
        | b"otp"
        | b"session"
        | b"sessionid"
        | b"sid"
        | b"signature"
        | b"sig"
        | b"awsaccesskeyid"
        | b"accesskeyid"
        | b"accesskey"
        | b"secretkey"
        | b"privatekey"
        | b"clientkey"
        | b"phpsessid"
        | b"jsessionid"
        | b"sessid"
        | b"cfid"
);

/// The endings that make a token a credential (`xsrftoken`, `clientsecret`).
const CREDENTIAL_ENDINGS: &[&[u8]] = &[
    b"token",
    b"secret",
    b"password",
    b"passwd",
    b"apikey",
    b"signature",
    b"credential",
];

/// For each last byte of a credential word, an ending, `key` or `code`, the lowercase
/// letters that come before it (bit `b - b'a'`): a token whose last two bytes are of none of
/// them is no credential, without a comparison.
static CREDENTIAL_TAILS: [u32; 256] = {
    const fn add(table: &mut [u32; 256], words: &[&[u8]]) {
        let mut i = 0;
        while i < words.len() {
            let word = words[i];
            let n = word.len();
            table[word[n - 1] as usize] |= 1 << (word[n - 2] - b'a');
            i += 1;
        }
    }
    let mut table = [0; 256];
    add(&mut table, CREDENTIAL_WORDS);
    add(&mut table, CREDENTIAL_ENDINGS);
    add(&mut table, &[b"key", b"code"]);
    table
};

/// Whether one token (lowercase) marks a credential: a credential word, singular or plural;
/// a word ending as a credential word does (`xsrftoken`, `clientsecret`); `key` and `code`
/// first in the name or after a qualifier (the token `before`, looked at only then).
fn token_is_credential(token: &[u8], first: bool, before: &[u8]) -> bool {
    let singular = match token {
        [rest @ .., b's'] if rest.len() >= 2 => Some(rest),
        _ => None,
    };
    let word = |t: &[u8]| {
        // Every word is three letters or more: its last two bytes filter first.
        let [.., pen, last] = *t else {
            return false;
        };
        if !pen.is_ascii_lowercase()
            || CREDENTIAL_TAILS[usize::from(last)] & (1 << (pen - b'a')) == 0
        {
            return false;
        }
        is_credential_word(t)
            || CREDENTIAL_ENDINGS.iter().any(|end| t.ends_with(end))
            || (t == b"key" && (first || qualifier_of(before) == Qualifier::Key))
            || (t == b"code" && (first || qualifier_of(before) != Qualifier::None))
    };
    word(token) || singular.is_some_and(word)
}

pub(super) fn hex(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}
