//! The rule that tells a credential parameter's name (a query's or a path's): by tokens of
//! the name (`api_key`, `X-Amz-Signature`, `access_token`, `client_secret`...), percent-decoded,
//! or as one of the log's own names; the one rule every printer of a URL asks.

/// Whether a query parameter's name marks a credential: by the token rule of the module
/// docs, or as one of the log's own names (the whole name, or a part between brackets).
pub(crate) fn is_credential(name: &str, extra: &[Box<str>]) -> bool {
    is_credential_bytes(name.as_bytes(), extra)
}

/// [`is_credential`] on raw bytes (a header's value need not be UTF-8).
pub(crate) fn is_credential_bytes(name: &[u8], extra: &[Box<str>]) -> bool {
    credential_tokens(name)
        || (!extra.is_empty()
            && extra
                .iter()
                .any(|known| names_match(name, known.as_bytes())))
}

/// The bytes of a query parameter's name, percent-decoded and with `+` as a space.
pub(crate) fn decoded(name: &[u8]) -> impl Iterator<Item = u8> + '_ {
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
pub(crate) fn credential_tokens(name: &[u8]) -> bool {
    // The common name (`page`, `api_key`) has nothing to decode and no uppercase letter: its
    // tokens are its own pieces between the other bytes, compared where they are, in the same
    // pass that looks for a byte that needs the general rule.
    let mut previous: &[u8] = &[];
    let mut start = 0;
    for at in 0..=name.len() {
        match name.get(at) {
            Some(b'a'..=b'z' | b'0'..=b'9') => continue,
            Some(b'A'..=b'Z' | b'%' | b'+') => {
                return tokens_have_credential(decoded(name))
                    && !names_about_a_credential(decoded(name));
            }
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
            return !plain_name_about_a_credential(name);
        }
        previous = token;
    }
    false
}

/// Whether a name that holds a credential word names something about a credential rather
/// than one: one of its tokens (cut as [`credential_tokens`] cuts them, trailing digits and a
/// plural `s` dropped) is a word such as `policy`, `algorithm`, `timeout`, `consent`,
/// `remaining`, `version`, `method` or `max` (`x-password-policy`, `SignatureVersion`,
/// `max_tokens`, `x-ratelimit-remaining-tokens`). Asked only of a name the token rule marks.
fn names_about_a_credential(bytes: impl Iterator<Item = u8>) -> bool {
    let mut token = [0u8; 32];
    let mut len = 0;
    let mut lower_before = false;
    let about = is_about_word;
    for b in bytes {
        if b.is_ascii_alphanumeric() {
            if b.is_ascii_uppercase() && lower_before {
                if about(&token[..len]) {
                    return true;
                }
                len = 0;
            }
            lower_before = !b.is_ascii_uppercase();
            if len == token.len() {
                token.copy_within(1.., 0);
                len -= 1;
            }
            token[len] = b.to_ascii_lowercase();
            len += 1;
        } else {
            lower_before = false;
            if about(&token[..len]) {
                return true;
            }
            len = 0;
        }
    }
    about(&token[..len])
}

/// [`names_about_a_credential`] on a name with nothing to decode and no uppercase letter
/// (the common name, `api_key`): its tokens are its pieces between the bytes that are not ASCII
/// letters or digits, each kept to its last 32 bytes, as the general rule cuts them, compared
/// where they are.
/// A name with such a byte after its credential token (`api_key_Max`) takes the general rule.
fn plain_name_about_a_credential(name: &[u8]) -> bool {
    if name.iter().any(|b| matches!(b, b'A'..=b'Z' | b'%' | b'+')) {
        return names_about_a_credential(decoded(name));
    }
    name.split(|b| !b.is_ascii_alphanumeric())
        .any(|token| is_about_word(&token[token.len().saturating_sub(32)..]))
}

/// Whether a token (lowercase, as cut by [`names_about_a_credential`]) is one of the words
/// about a credential, without its trailing digits and with or without a plural `s`.
fn is_about_word(token: &[u8]) -> bool {
    let token = match token.iter().rposition(|b| !b.is_ascii_digit()) {
        Some(last) => &token[..=last],
        None => token,
    };
    let word = |t: &[u8]| {
        matches!(
            t,
            b"policy"
                | b"policie"
                | b"algorithm"
                | b"alg"
                | b"timeout"
                | b"consent"
                | b"remaining"
                | b"version"
                | b"method"
                | b"max"
                | b"min"
                | b"limit"
                | b"ratelimit"
                | b"length"
                | b"expiry"
                | b"ttl"
        )
    };
    word(token) || matches!(token, [rest @ .., b's'] if rest.len() >= 2 && word(rest))
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
    /// `saml`: a `response` after it is SAML's assertion (`saml_response`).
    Saml,
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
                | b"function"
                | b"functions"
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
            | b"2fa"
            | b"sms"
            | b"time"
            | b"email"
            | b"otp"
            | b"security"
            | b"reset"
            | b"recovery"
            | b"login"
            | b"confirmation"
            | b"activation"
    ) {
        return Qualifier::Code;
    }
    if token == b"saml" {
        return Qualifier::Saml;
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
        | b"assertion"
        | b"ticket"
        | b"hmac"
        | b"samlresponse"
        | b"totp"
        | b"mfa"
        | b"pw"
        | b"pin"
        | b"verifier"
        | b"dpop"
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
    add(&mut table, &[b"key", b"code", b"response"]);
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
            || (t == b"code"
                && (first || !matches!(qualifier_of(before), Qualifier::None | Qualifier::Saml)))
            || (t == b"response" && qualifier_of(before) == Qualifier::Saml)
    };
    word(token) || singular.is_some_and(word)
}

pub(crate) fn hex(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}
