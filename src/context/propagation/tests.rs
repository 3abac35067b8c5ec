use super::check::{is_b3_single, is_traceparent};
use super::*;

const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn map(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    map
}

#[test]
fn traceparent_formats() {
    assert!(is_traceparent(TP.as_bytes()));
    assert!(!is_traceparent(TP.to_uppercase().as_bytes()));
    assert!(!is_traceparent(format!("{TP}-x").as_bytes())); // version 00: exact
    assert!(is_traceparent(format!("01{}-x", &TP[2..]).as_bytes()));
    assert!(!is_traceparent(format!("ff{}", &TP[2..]).as_bytes()));
    assert!(!is_traceparent(
        b"00-00000000000000000000000000000000-00f067aa0ba902b7-01"
    ));
    assert!(!is_traceparent(
        b"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"
    ));
    assert!(!is_traceparent(b"00-4bf92f35"));
}

#[test]
fn b3_formats() {
    for ok in [
        "0",
        "d",
        "80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1",
        "80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1",
        "80f198ee56343ba8-e457b5a2e4d86bd1-d-05e3ac9a4f6e3b90",
    ] {
        assert!(is_b3_single(ok.as_bytes()), "{ok}");
    }
    for bad in [
        "",
        "2",
        "xyz-abc",
        "80f198ee56343ba8-e457b5a2e4d86bd1-1-05e3-9",
        "a-b",
    ] {
        assert!(!is_b3_single(bad.as_bytes()), "{bad}");
    }
}

#[test]
fn lists_join_singletons_refuse_duplicates() {
    let incoming = map(&[
        ("traceparent", TP),
        ("tracestate", "a=1"),
        ("tracestate", "b=2"),
        ("b3", "1"),
        ("b3", "0"),
    ]);
    let p = Propagation::new().w3c().b3();
    let (context, counts) = p.capture(&incoming);
    let context = context.unwrap();
    let got: Vec<_> = context
        .headers()
        .map(|(n, v)| (n.as_str(), v.to_str().unwrap()))
        .collect();
    assert_eq!(got, [("traceparent", TP), ("tracestate", "a=1,b=2")]);
    assert_eq!(counts.duplicated, 1);
}

#[test]
fn tracestate_needs_a_valid_traceparent() {
    let p = Propagation::new().w3c();
    let (context, counts) = p.capture(&map(&[("tracestate", "a=1")]));
    assert!(context.is_none());
    assert!(counts.is_empty());
    let (context, counts) = p.capture(&map(&[("traceparent", "00-bad"), ("tracestate", "a=1")]));
    assert!(context.is_none());
    assert_eq!(counts.malformed, 1);
}

#[test]
fn bounds_count_and_bytes() {
    let p = Propagation::new()
        .header(HeaderName::from_static("x-a"))
        .unwrap()
        .header(HeaderName::from_static("x-b"))
        .unwrap()
        .max_headers(1);
    let (context, counts) = p.capture(&map(&[("x-a", "1"), ("x-b", "2")]));
    assert_eq!(context.unwrap().headers().count(), 1);
    assert_eq!(counts.over_limit, 1);
    let p = p.max_headers(8).max_bytes(10);
    let (context, counts) = p.capture(&map(&[("x-a", "1234567"), ("x-b", "12345678")]));
    assert_eq!(context.unwrap().headers().count(), 1);
    assert_eq!(counts.over_limit, 1);
    // Baggage: its own bound, repeated lines joined first.
    let line = "k=v,".repeat(20);
    let pairs: Vec<(&str, &str)> = (0..4).map(|_| ("baggage", line.as_str())).collect();
    let (context, counts) = Propagation::new().w3c().capture(&map(&pairs));
    assert!(context.is_none());
    assert_eq!(counts.over_limit, 1);
}

#[test]
fn request_ids_taken_replaced_generated() {
    let p = Propagation::new().request_id();
    let id = |m: &HeaderMap| p.capture(m).0.unwrap().request_id().unwrap().to_owned();
    assert_eq!(id(&map(&[("x-request-id", "abc")])), "abc");
    let (_, counts) = p.capture(&map(&[("x-request-id", "a b")]));
    assert_eq!(counts.replaced_request_ids, 1);
    let (_, counts) = p.capture(&map(&[("x-request-id", "a"), ("x-request-id", "b")]));
    assert_eq!(counts.replaced_request_ids, 1);
    let long = "a".repeat(10 * 1024);
    let (context, counts) = p.capture(&map(&[("x-request-id", &long)]));
    assert_eq!(counts.replaced_request_ids, 1);
    assert_eq!(context.unwrap().request_id().unwrap().len(), 32);
    let (_, counts) = p.capture(&HeaderMap::new());
    assert!(counts.is_empty());
}

#[test]
fn refused_names() {
    for name in [
        "authorization",
        "cookie",
        "set-cookie",
        "x-api-key",
        "proxy-authorization",
    ] {
        let name = HeaderName::from_static(name);
        assert_eq!(
            Propagation::new().header(name.clone()).unwrap_err(),
            PropagationError::Secret { name }
        );
    }
    for name in ["host", "grpc-timeout", "content-length", "connection"] {
        let name = HeaderName::from_static(name);
        assert_eq!(
            Propagation::new()
                .request_id_header(name.clone())
                .unwrap_err(),
            PropagationError::NotEndToEnd { name }
        );
    }
}

#[test]
fn presets_do_not_repeat_names() {
    let p = Propagation::new().w3c().w3c().envoy();
    let names: Vec<_> = p.names().map(|n| n.as_str()).collect();
    let set: std::collections::HashSet<_> = names.iter().collect();
    assert_eq!(names.len(), set.len());
    assert!(!names.contains(&"x-request-id"));
}
