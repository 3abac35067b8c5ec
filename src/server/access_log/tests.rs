//! Unit tests of the access log's formatting.

use super::format::*;
use super::url::*;
use super::*;
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
            log: &log,
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
            log: &omitted,
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
        log: &log,
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
    assert_eq!(
        rpc_parts("/pkg.Greeter/SayHello"),
        Some(("pkg.Greeter", "SayHello"))
    );
    assert_eq!(rpc_parts("/users/1/x"), None);
    assert_eq!(otel_method(Some(&Method::GET)), ("GET", None));
    let purge = Method::from_bytes(b"PURGE").unwrap();
    assert_eq!(otel_method(Some(&purge)), ("_OTHER", Some("PURGE")));
    assert_eq!(
        super::super::semconv::status_error(StatusCode::SERVICE_UNAVAILABLE).unwrap(),
        "503"
    );
}
