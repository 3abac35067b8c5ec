//! The credential-token rule checked against a plain reference implementation.
//!
//! The reference is the oracle, so it stays a separate implementation: it cuts the name into
//! owned tokens, carries each token's qualifier forward, checks the words about a credential
//! on the token list, and matches the credential words without the `CREDENTIAL_TAILS` filter;
//! the rule under test has a fast path for plain names, a 32-byte two-buffer window, a lazily
//! computed qualifier and the tails filter. The word lists are kept here as the specification
//! they are (a word dropped from the rule's `credential_words!` or its tails fails the test);
//! only the percent-decoding, the same code on both sides, is called rather than copied.

use crate::redact::credential::*;

/// The token rule as first written (owned tokens, each token's qualifier computed), the
/// reference the faster rule of `redact::credential` is checked against.
mod reference {
    // The percent-decoding is the rule's own (`redact::credential::decoded`, called, not
    // copied): the fast rule skips it on a plain name and the general one calls the same code.
    use crate::redact::credential::decoded;

    pub(super) fn credential_tokens(name: &[u8]) -> bool {
        // A credential word, and no word saying the name is about one (`x-password-policy`).
        let tokens = tokens(name);
        credential_word(name)
            && !tokens.iter().any(|t| {
                let about = |t: &[u8]| {
                    [
                        &b"policy"[..],
                        b"policie",
                        b"algorithm",
                        b"alg",
                        b"timeout",
                        b"consent",
                        b"remaining",
                        b"version",
                        b"method",
                        b"max",
                        b"min",
                        b"limit",
                        b"ratelimit",
                        b"length",
                        b"expiry",
                        b"ttl",
                    ]
                    .contains(&t)
                };
                about(t)
                    || t.strip_suffix(b"s")
                        .is_some_and(|r| r.len() >= 2 && about(r))
            })
    }

    /// The name's tokens as the rule cuts them (lowercase, the last 32 bytes, without
    /// trailing digits).
    fn tokens(name: &[u8]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut token: Vec<u8> = Vec::new();
        let mut lower_before = false;
        let mut push = |token: &mut Vec<u8>| {
            let start = token.len().saturating_sub(32);
            let mut t = token[start..].to_vec();
            while t.last().is_some_and(u8::is_ascii_digit) {
                t.pop();
            }
            if !t.is_empty() {
                out.push(t);
            }
            token.clear();
        };
        for b in decoded(name) {
            if b.is_ascii_alphanumeric() {
                if b.is_ascii_uppercase() && lower_before {
                    push(&mut token);
                }
                lower_before = !b.is_ascii_uppercase();
                token.push(b.to_ascii_lowercase());
            } else {
                lower_before = false;
                push(&mut token);
            }
        }
        push(&mut token);
        out
    }

    fn credential_word(name: &[u8]) -> bool {
        // A name is a few bytes: one pass over them, each token compared once it ends.
        let mut token = [0u8; 32];
        let mut len = 0;
        let mut index = 0; // tokens finished so far
        let mut qualifier = Qualifier::None; // what the previous token allows
        let mut lower_before = false;
        fn finish(token: &[u8], index: &mut usize, qualifier: &mut Qualifier) -> bool {
            // Trailing digits say nothing (`password2`, `token1`): the token without them.
            let token = match token.iter().rposition(|b| !b.is_ascii_digit()) {
                Some(last) => &token[..=last],
                None => token,
            };
            if token.is_empty() {
                return false;
            }
            let hit = token_is_credential(token, *index == 0, *qualifier);
            *qualifier = qualifier_of(token);
            *index += 1;
            hit
        }
        for b in decoded(name) {
            if b.is_ascii_alphanumeric() {
                if b.is_ascii_uppercase() && lower_before {
                    if finish(&token[..len], &mut index, &mut qualifier) {
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
                if finish(&token[..len], &mut index, &mut qualifier) {
                    return true;
                }
                len = 0;
            }
        }
        finish(&token[..len], &mut index, &mut qualifier)
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

    /// Whether one token (lowercase) marks a credential: a credential word, singular or plural;
    /// a word ending as a credential word does (`xsrftoken`, `clientsecret`); `key` and `code`
    /// first in the name or after a qualifier.
    fn token_is_credential(token: &[u8], first: bool, before: Qualifier) -> bool {
        let singular = match token {
            [rest @ .., b's'] if rest.len() >= 2 => Some(rest),
            _ => None,
        };
        let word = |t: &[u8]| {
            matches!(
                t,
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
            ) || t.ends_with(b"token")
                || t.ends_with(b"secret")
                || t.ends_with(b"password")
                || t.ends_with(b"passwd")
                || t.ends_with(b"apikey")
                || t.ends_with(b"signature")
                || t.ends_with(b"credential")
                || (matches!(t, b"key") && (first || before == Qualifier::Key))
                || (matches!(t, b"code")
                    && (first || !matches!(before, Qualifier::None | Qualifier::Saml)))
                || (matches!(t, b"response") && before == Qualifier::Saml)
        };
        word(token) || singular.is_some_and(word)
    }
}

#[test]
fn the_token_rule_matches_its_reference() {
    let fragments = [
        "password",
        "passwd",
        "pwd",
        "pass",
        "passphrase",
        "passcode",
        "secret",
        "token",
        "credential",
        "auth",
        "authorization",
        "authentication",
        "apikey",
        "jwt",
        "bearer",
        "cookie",
        "otp",
        "session",
        "sessionid",
        "sid",
        "signature",
        "sig",
        "awsaccesskeyid",
        "accesskeyid",
        "accesskey",
        "secretkey",
        "privatekey",
        "clientkey",
        "phpsessid",
        "jsessionid",
        "sessid",
        "cfid",
        "key",
        "code",
        "api",
        "private",
        "access",
        "signing",
        "client",
        "consumer",
        "app",
        "application",
        "master",
        "encryption",
        "license",
        "subscription",
        "shared",
        "oauth",
        "verification",
        "verify",
        "mfa",
        "totp",
        "security",
        "reset",
        "recovery",
        "login",
        "confirmation",
        "activation",
        "page",
        "id",
        "sort",
        "primary",
        "keyboard",
        "country",
        "xsrf",
        "user",
        "ey",
        "s",
        "2",
        "Key",
        "KEY",
        "Token",
        // Words about a credential (`max_tokens`, `token_policy`), plain and cased.
        "policy",
        "max",
        "Max",
        "timeouts",
        "x",
        "",
    ];
    let separators = [
        "", "_", "-", ".", "[", "]", "%5F", "+", "%20", "%", "1", "s",
    ];
    let mut checked = 0;
    let mut check = |name: &str| {
        assert_eq!(
            credential_tokens(name.as_bytes()),
            reference::credential_tokens(name.as_bytes()),
            "{name}"
        );
        checked += 1;
    };
    for a in fragments {
        for sep in separators {
            for b in fragments {
                check(&format!("{a}{sep}{b}"));
                check(&format!("{}{sep}{b}s", a.to_uppercase()));
                for c in ["key", "code", "id", "Key"] {
                    check(&format!("{a}{sep}{b}{sep}{c}"));
                }
            }
        }
    }
    // A deterministic walk over short names of a small alphabet (no randomness: the same
    // names every run).
    let alphabet = b"akeycodsAK_%5+2t";
    let mut state: u32 = 1;
    for _ in 0..200_000 {
        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        let len = (state >> 28) as usize;
        let name: Vec<u8> = (0..len)
            .map(|i| alphabet[((state >> (i % 7 * 4)) as usize + i) % alphabet.len()])
            .collect();
        assert_eq!(
            credential_tokens(&name),
            reference::credential_tokens(&name),
            "{:?}",
            String::from_utf8_lossy(&name)
        );
    }
    assert!(checked > 300_000);
}
