//! Unit tests of the access log's formatting.

use super::format::*;
use super::*;
use http::{Method, StatusCode};

#[test]
fn credential_names() {
    let extra: [Box<str>; 1] = ["Email".into()];
    for name in [
        "token",
        "access_token",
        "X-Amz-Signature",
        "x-amz-credential",
        "X-Amz-Security-Token",
        "api%5Fkey",
        "API_KEY",
        "apikey",
        "key",
        "password",
        "sig",
        "code",
        "client_secret",
        "email",
        "AWSAccessKeyId",
        "a_very_long_parameter_name_that_goes_on_and_on_past_the_buffer_refresh_token",
    ] {
        assert!(is_credential(name, &extra), "{name}");
    }
    for name in ["page", "q", "keyword", "monkey", "tokens", "sort", "", "%"] {
        assert!(!is_credential(name, &extra), "{name}");
    }
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
    ] {
        assert_eq!(log.query_for_log(query).to_string(), shown, "{query}");
    }
}

#[test]
fn the_listed_names_are_the_matched_names() {
    for name in AccessLog::CREDENTIAL_PARAMS {
        assert!(known_credential(name.as_bytes()), "{name}");
    }
    assert!(!known_credential(b"page"));
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
        super::super::end::status_str(StatusCode::SERVICE_UNAVAILABLE),
        "503"
    );
}
