//! Unit tests of the access log's formatting.

use super::format::*;
use super::*;
use crate::redact::credential::*;
use crate::redact::escape::*;
use crate::redact::url::*;
use crate::server::line::split_authority;
use http::{Method, StatusCode};

#[test]
fn credential_names() {
    let extra: [Box<str>; 1] = ["Email".into()];
    for name in [
        "token",
        "tokens",
        "access_token",
        "accessToken",
        "X-Amz-Signature",
        "x-amz-credential",
        "X-Amz-Security-Token",
        "api%5Fkey",
        "API_KEY",
        "apiKey",
        "apikey",
        "api-keys",
        "key",
        "password",
        "user[password]",
        "user%5Btoken%5D",
        "user%5btoken%5d",
        "api_key[]",
        "data[user][pass]",
        "credentials",
        "authorization",
        "auth_code",
        "oauth_code",
        "private+key",
        "private%20key",
        "secret_key",
        "client_secret",
        "xsrfToken",
        "sig",
        "code",
        "codes",
        "otp",
        "jwt",
        "bearer",
        "cookie",
        "sessionId",
        "session_id",
        "sid",
        "email",
        "filter[EMAIL]",
        "AWSAccessKeyId",
        "subscription-key",
        "a_very_long_parameter_name_that_goes_on_and_on_past_the_buffer_refresh_token",
        "a_very_long_parameter_name_that_goes_on_and_on_pastthebufferrefreshtoken",
    ] {
        assert!(is_credential(name, &extra), "{name}");
    }
    for name in [
        "page",
        "q",
        "sort",
        "keyword",
        "keyboard",
        "monkey",
        "tokenizer",
        "author",
        "country_code",
        "zip_code",
        "primary_key",
        "sort_key",
        "client_id",
        "state",
        "redirect_uri",
        "filter[name]",
        "emails",
        "",
        "%",
        "%zz",
        "[]",
    ] {
        assert!(!is_credential(name, &extra), "{name}");
    }
}

#[test]
fn escaping_is_one_rule() {
    let plain = |s: &str| {
        let mut out = String::new();
        write_escaped(&mut out, s.as_bytes(), false).unwrap();
        out
    };
    let url = |s: &str| UrlText(s).to_string();
    assert_eq!(plain("curl/8.5.0 (x)"), "curl/8.5.0 (x)");
    assert_eq!(
        plain("a\u{2028}b\u{2029}c\u{85}d\te\u{7f}\u{e9}"),
        "a%E2%80%A8b%E2%80%A9c%C2%85d%09e%7F%C3%A9"
    );
    assert_eq!(url("/users/42"), "/users/42");
    assert_eq!(url("/a b\"c\\d\u{2028}"), "/a%20b%22c%5Cd%E2%80%A8");
    assert!(matches!(
        text(b"plain"),
        std::borrow::Cow::Borrowed("plain")
    ));
    assert_eq!(text(b"caf\xe9\n"), "caf%E9%0A");
    assert!(is_plain_text(b" ~") && !is_plain_text(b"\x7f") && !is_plain_text(b"\x1f"));
    assert!(is_plain_url(b"!~") && !is_plain_url(b" ") && !is_plain_url(b"\\"));
}

#[test]
fn urls_lose_their_userinfo_and_fragment() {
    let log = AccessLog::new();
    let shown = |url: &str| {
        Url {
            rule: &log.query,
            url: url.as_bytes(),
        }
        .to_string()
    };
    for (url, expect) in [
        ("https://admin:hunter2@host/p", "https://[redacted]@host/p"),
        (
            "https://a@b@host:8443/p?x=1",
            "https://[redacted]@host:8443/p?x=1",
        ),
        ("//u:p@host/", "//[redacted]@host/"),
        (
            "https://host/p@x?token=t",
            "https://host/p@x?token=[redacted]",
        ),
        ("https://host", "https://host"),
        (
            "/cb?code=c&state=s#access_token=t",
            "/cb?code=[redacted]&state=s",
        ),
        ("https://h/caf\u{e9} x", "https://h/caf%C3%A9%20x"),
        (
            "https://h/?q=\u{2028}&token=a;b&c=1",
            "https://h/?q=%E2%80%A8&token=[redacted]&c=1",
        ),
    ] {
        assert_eq!(shown(url), expect, "{url}");
    }
    let omitted = AccessLog::new().omit_query();
    assert_eq!(
        Url {
            rule: &omitted.query,
            url: b"https://u:p@h/?token=t"
        }
        .to_string(),
        "https://[redacted]@h/"
    );
}

#[test]
fn query_pairs() {
    let log = AccessLog::new();
    for (query, shown) in [
        ("", ""),
        ("&", "&"),
        ("a=1", "a=1"),
        ("token", "token=[redacted]"),
        ("token=", "token=[redacted]"),
        ("a=1&&token=x&b", "a=1&&token=[redacted]&b"),
        ("sig=a=b&c=d", "sig=[redacted]&c=d"),
        ("x=1&key=2", "x=1&key=[redacted]"),
        ("a=1;token=x;b=2&c=3", "a=1;token=[redacted]&c=3"),
        (";token=x", ";token=[redacted]"),
        (
            "q=caf\u{e9}&user[password]=p",
            "q=caf%C3%A9&user[password]=[redacted]",
        ),
    ] {
        assert_eq!(log.query_for_log(query).to_string(), shown, "{query}");
    }
}

#[test]
fn the_listed_names_are_the_matched_names() {
    for name in AccessLog::CREDENTIAL_PARAMS {
        assert!(credential_tokens(name.as_bytes()), "{name}");
    }
    assert!(!credential_tokens(b"page"));
}

#[test]
fn query_and_referer() {
    let log = AccessLog::new();
    assert_eq!(
        log.query_for_log("page=2&api_key=zzz&token&a=%20")
            .to_string(),
        "page=2&api_key=[redacted]&token=[redacted]&a=%20"
    );
    let referer = Referer {
        rule: &log.query,
        referer: "https://a.example/p?x=1&access_token=abc#frag",
    };
    assert_eq!(
        referer.to_string(),
        "https://a.example/p?x=1&access_token=[redacted]"
    );
}

#[test]
fn authorities() {
    let split = |authority| split_authority(authority).unwrap();
    assert_eq!(split("a.example:8080"), ("a.example", Some(8080)));
    assert_eq!(split("user:pw@a.example:8080"), ("a.example", Some(8080)));
    assert_eq!(split("[::1]:80"), ("::1", Some(80)));
    assert_eq!(split("[::1]"), ("::1", None));
    assert_eq!(split("a.example"), ("a.example", None));
    assert_eq!(split_authority("[::1"), None);
    // An empty host is no address.
    assert_eq!(split_authority(""), None);
    assert_eq!(split_authority(":80"), None);
    assert_eq!(split_authority("u@"), None);
    assert_eq!(split_authority("[]:80"), None);
    assert_eq!(
        rpc_parts("/pkg.Greeter/SayHello"),
        Some(("pkg.Greeter", "SayHello"))
    );
    assert_eq!(rpc_parts("/users/1/x"), None);
    assert_eq!(otel_method(Some(&Method::GET)), ("GET", None));
    let purge = Method::from_bytes(b"PURGE").unwrap();
    assert_eq!(otel_method(Some(&purge)), ("_OTHER", Some("PURGE")));
    assert_eq!(
        crate::semconv::status_error(StatusCode::SERVICE_UNAVAILABLE).unwrap(),
        "503"
    );
}

#[test]
fn values_that_carry_their_own_secrets() {
    let log = AccessLog::new();
    let shown = |query: &str| log.query_for_log(query).to_string();
    assert_eq!(
        shown("redirect=https://u:p@evil.example/?token=t&page=2"),
        "redirect=https://[redacted]@evil.example/?token=[redacted]&page=2"
    );
    assert_eq!(
        shown("next=https%3A%2F%2Fu%3Ap%40e.example%2F%3Ftoken%3Dt"),
        "next=https%3A%2F%2F[redacted]%40e.example%2F%3Ftoken%3D[redacted]"
    );
    assert_eq!(
        shown("filter=%7B%22password%22%3A%22P%22%2C%22a%22%3A1%7D"),
        "filter=%7B%22password%22%3A%22[redacted]%22%2C%22a%22%3A1%7D"
    );
    assert_eq!(
        shown("f={password:P,page:2}"),
        "f={password:%22[redacted]%22,page:2}"
    );
    assert_eq!(
        shown("f={\"secret\":{\"a\":\"b\"},\"x\":1}"),
        "f={%22secret%22:%22[redacted]%22,%22x%22:1}"
    );
    // Nothing to redact: the value as it came.
    for plain in [
        "next=/home",
        "next=%2Fhome%3Fpage%3D2",
        "u=https://example.com/a?b=c",
        "f={\"page\":2}",
        "q=a@b",
    ] {
        assert_eq!(shown(plain), plain.replace('"', "%22"));
    }
    for query in [
        "client_assertion=a",
        "assertion=a",
        "SAMLResponse=a",
        "saml_response=a",
        "ticket=a",
        "hmac=a",
    ] {
        assert!(shown(query).ends_with("=[redacted]"), "{query}");
    }
    // Deep nesting ends redacted whole, never in a panic or a deep recursion.
    let mut deep = "token%3Dt".to_owned();
    for _ in 0..12 {
        deep = format!("u%3Dhttps%3A%2F%2Fh%2F%3F{}", deep.replace('%', "%25"));
    }
    assert!(!shown(&format!("n={deep}")).contains("token%3Dt"));
}

#[test]
fn odd_values_never_panic() {
    let log = AccessLog::new();
    let pieces = [
        "{", "}", "[", "]", "\"", "'", "\\", ":", ",", "%", "%2", "%ZZ", "%FF", "?", "@", "//",
        "://", "=", "&", ";", "password", "token", "a", " ", "+", "é",
    ];
    let mut count = 0;
    for a in pieces {
        for b in pieces {
            for query in [
                format!("x={a}{b}&f={{{b}password{a}:{b}"),
                format!("x=https://{a}@h/?{b}token={a}{b}"),
                format!("x=[{a}\"key\"{b}:\"{a}"),
            ] {
                let _ = log.query_for_log(&query).to_string();
                count += 1;
            }
        }
    }
    assert_eq!(count, 3 * pieces.len().pow(2));
}

#[test]
fn header_names_by_the_query_rule() {
    for name in [
        "x-vault-token",
        "private-token",
        "x-goog-api-key",
        "x-client-secret",
        "x-authorization",
        "x-functions-key",
        "ocp-apim-subscription-key",
        "x-hub-signature-256",
    ] {
        assert!(crate::policy::credential_header(name), "{name}");
    }
    for name in crate::Builder::ALWAYS_SECRET {
        assert!(crate::policy::credential_header(name), "{name}");
    }
    for name in [
        "host",
        "user-agent",
        "referer",
        "accept",
        "content-type",
        "x-request-id",
        "traceparent",
        "access-control-allow-credentials",
        "sec-websocket-key",
        "keep-alive",
        "www-authenticate",
        "content-security-policy",
    ] {
        assert!(!crate::policy::credential_header(name), "{name}");
    }
}

#[test]
fn review_forms_print_as_shown() {
    let log = AccessLog::new();
    let shown = |query: &str| log.query_for_log(query).to_string();
    for (query, expected) in [
        // A URL in a JSON string, also in one the text ends in.
        (
            r#"s={"u":"https://h/?token=t"#,
            "s={%22u%22:%22https://h/?token=[redacted]",
        ),
        (
            r#"s={"u":"https://h/?token=t","n":1}"#,
            "s={%22u%22:%22https://h/?token=[redacted]%22,%22n%22:1}",
        ),
        // Encoded twice: encoded twice again.
        (
            "r=https%253A%252F%252Fh%252F%253Ftoken%253Dt%2526a%253D1",
            "r=https%253A%252F%252Fh%252F%253Ftoken%253D[redacted]%2526a%253D1",
        ),
        // JSON-ish text that is not UTF-8: whole.
        ("f=%7B%22a%22%3A%22%FF%22%7D", "f=[redacted]"),
        // A relative path with a credential path parameter.
        (
            "next=%2Fcart%3Bjsessionid%3Dx%2Fy",
            "next=%2Fcart%3Bjsessionid%3D[redacted]%2Fy",
        ),
        (
            "x_password_policy=strict&pin=1234&code_verifier=v",
            "x_password_policy=strict&pin=[redacted]&code_verifier=[redacted]",
        ),
    ] {
        assert_eq!(shown(query), expected, "{query}");
    }
    let mut map = http::HeaderMap::new();
    for (name, value) in [
        (
            "link",
            "<https://u:p@h/a?token=t>; rel=\"a\", </b;jsessionid=s?x=1>; anchor=\"https://h/?sig=s\"",
        ),
        ("link", "<unterminated?token=t"),
        ("refresh", "5"),
        ("refresh", "0;URL='https://h/?token=t'"),
        ("x-note", "https://h/ \", authorization: \"forged"),
    ] {
        map.append(
            http::HeaderName::from_static(name),
            http::HeaderValue::from_str(value).unwrap(),
        );
    }
    assert_eq!(
        crate::Redacted::new(&map).to_string(),
        "link: \"<https://[redacted]@h/a?token=[redacted]>; rel=\\\"a\\\", \
         </b;jsessionid=[redacted]?x=1>; anchor=\\\"https://h/?sig=[redacted]\\\"\", \
         link: <unterminated?token=[redacted], refresh: 5, \
         refresh: 0;URL='https://h/?token=[redacted], \
         x-note: \"https://h/ \\\", authorization: \\\"forged\""
    );
}

mod token_rule;
