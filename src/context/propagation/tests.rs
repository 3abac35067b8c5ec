//! Tests of the propagation's checks: trace header formats, lists and duplicates, bounds, request ids, refused names.
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

/// What a propagation does with a request: the id (a generated one as `<generated>`), the
/// headers that travel, in order (the id first), and the counts.
type Outcome = (
    Option<(String, String)>,
    Vec<(String, String)>,
    PropagationCounts,
);

fn outcome(p: &Propagation, incoming: &HeaderMap) -> Outcome {
    let (context, counts) = p.capture(incoming);
    let Some(context) = context else {
        return (None, Vec::new(), counts);
    };
    let id = context.request_id_header().map(|(name, value)| {
        let value = value.to_str().unwrap();
        let generated = value.len() == 32
            && value
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase());
        let value = if generated { "<generated>" } else { value };
        (name.to_string(), value.to_owned())
    });
    // The id is among the headers too: as above.
    let headers = context
        .headers()
        .map(|(n, v)| match &id {
            Some((name, value)) if name == n.as_str() => (name.clone(), value.clone()),
            _ => (n.to_string(), v.to_str().unwrap().to_owned()),
        })
        .collect();
    (id, headers, counts)
}

/// Requests that tell the setters apart: ids valid, invalid and missing, a trace context with
/// and without a valid `traceparent`, and more values and bytes than the small bounds allow.
fn order_requests() -> Vec<HeaderMap> {
    let everything = [
        ("x-request-id", "rid-1"),
        ("x-correlation-id", "corr-1"),
        ("traceparent", TP),
        ("tracestate", "a=1,b=2"),
        ("baggage", "k=v"),
        ("b3", "80f198ee56343ba8-e457b5a2e4d86bd1-1"),
        ("x-b3-sampled", "1"),
        ("x-b3-flags", "2"),
        ("x-tenant", "acme"),
        ("sw8", "sw8-value"),
    ];
    vec![
        HeaderMap::new(),
        map(&everything),
        map(&[
            ("x-request-id", "bad id"),
            ("x-correlation-id", "one"),
            ("x-correlation-id", "two"),
            ("tracestate", "a=1"),
            ("x-tenant", "acme"),
        ]),
        map(&[
            ("traceparent", "00-bad"),
            ("tracestate", "a=1"),
            ("baggage", "k=v"),
            ("baggage", "l=w"),
            ("x-tenant", "a-rather-long-tenant-name-that-takes-bytes"),
        ]),
    ]
}

type Setter = (&'static str, fn(Propagation) -> Propagation);

fn setters() -> Vec<Setter> {
    fn name(s: &'static str) -> HeaderName {
        HeaderName::from_static(s)
    }
    vec![
        ("request_id", |p| p.request_id()),
        ("request_id_header(x-correlation-id)", |p| {
            p.request_id_header(name("x-correlation-id")).unwrap()
        }),
        ("request_id_with", |p| {
            p.request_id_with(|_: &HeaderMap| Some(HeaderValue::from_static("made-here")))
        }),
        ("w3c", |p| p.w3c()),
        ("b3", |p| p.b3()),
        ("envoy", |p| p.envoy()),
        ("header(tracestate)", |p| {
            p.header(name("tracestate")).unwrap()
        }),
        ("header(traceparent)", |p| {
            p.header(name("traceparent")).unwrap()
        }),
        ("header(x-tenant)", |p| p.header(name("x-tenant")).unwrap()),
        ("header(sw8)", |p| p.header(name("sw8")).unwrap()),
        ("header(x-request-id)", |p| {
            p.header(name("x-request-id")).unwrap()
        }),
        ("header(x-correlation-id)", |p| {
            p.header(name("x-correlation-id")).unwrap()
        }),
        ("max_headers(2)", |p| p.max_headers(2)),
        ("max_bytes(80)", |p| p.max_bytes(80)),
    ]
}

#[test]
fn every_pair_of_setters_gives_the_same_propagation_in_either_order() {
    let requests = order_requests();
    let setters = setters();
    let mut differ = Vec::new();
    for (i, (a_name, a)) in setters.iter().enumerate() {
        for (b_name, b) in &setters[i + 1..] {
            let ab = b(a(Propagation::new()));
            let ba = a(b(Propagation::new()));
            let same_config = ab.request_id == ba.request_id
                && ab.names().eq(ba.names())
                && ab.get_max_headers() == ba.get_max_headers()
                && ab.get_max_bytes() == ba.get_max_bytes();
            let same_outcomes = requests.iter().all(|r| outcome(&ab, r) == outcome(&ba, r));
            if !same_config || !same_outcomes {
                let first = requests
                    .iter()
                    .map(|r| (outcome(&ab, r), outcome(&ba, r)))
                    .find(|(x, y)| x != y);
                differ.push(format!("{a_name} / {b_name}: {ab:?} {ba:?} {first:?}"));
            }
        }
    }
    assert!(differ.is_empty(), "order matters for: {differ:#?}");
}

#[test]
fn tracestate_added_before_w3c_still_travels_and_is_counted() {
    let early = Propagation::new()
        .header(HeaderName::from_static("tracestate"))
        .unwrap()
        .w3c();
    let (context, _) = early.capture(&map(&[("traceparent", TP), ("tracestate", "a=1")]));
    let got: Vec<_> = context.unwrap().headers().map(|(n, _)| n.clone()).collect();
    assert_eq!(got, ["traceparent", "tracestate"]);
    let (_, counts) = early.capture(&map(&[
        ("traceparent", TP),
        ("tracestate", "a=1,".repeat(40).as_str()),
    ]));
    assert_eq!(counts.over_limit, 1);
}

#[test]
fn a_user_generator_makes_the_ids_ours_when_it_fails() {
    let id_and_counts = |p: &Propagation, incoming: &HeaderMap| {
        let (context, counts) = p.capture(incoming);
        (context.unwrap().request_id().unwrap().to_owned(), counts)
    };
    let is_ours = |id: &str| id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit());
    // From the request's headers; only when the request has no valid id.
    let from_tenant = Propagation::new().request_id_with(|headers: &HeaderMap| {
        let tenant = headers.get("x-tenant")?.to_str().ok()?;
        HeaderValue::try_from(format!("{tenant}-1")).ok()
    });
    let (id, counts) = id_and_counts(&from_tenant, &map(&[("x-tenant", "acme")]));
    assert_eq!(
        (id.as_str(), counts),
        ("acme-1", PropagationCounts::default())
    );
    let bad_id = map(&[("x-tenant", "acme"), ("x-request-id", "a b")]);
    let (id, counts) = id_and_counts(&from_tenant, &bad_id);
    assert_eq!((id.as_str(), counts.replaced_request_ids), ("acme-1", 1));
    let good_id = map(&[("x-tenant", "acme"), ("x-request-id", "req-7")]);
    assert_eq!(id_and_counts(&from_tenant, &good_id).0, "req-7");
    // `None`: ours, not counted.
    let (id, counts) = id_and_counts(&from_tenant, &HeaderMap::new());
    assert!(is_ours(&id), "{id}");
    assert!(counts.is_empty());
    // An invalid id, an empty one, one too long: ours, counted.
    for bad in ["has space", "", &"a".repeat(129)] {
        let bad = HeaderValue::from_str(bad).unwrap();
        let p = Propagation::new().request_id_with(move |_: &HeaderMap| Some(bad.clone()));
        let (id, counts) = id_and_counts(&p, &HeaderMap::new());
        assert!(is_ours(&id), "{id}");
        assert_eq!(counts.failed_request_id_generators, 1);
    }
    // A panic: caught, ours, counted.
    let panics = Propagation::new()
        .request_id_with(|_: &HeaderMap| -> Option<HeaderValue> { panic!("generator bug") });
    let (id, counts) = id_and_counts(&panics, &HeaderMap::new());
    assert!(is_ours(&id), "{id}");
    assert_eq!(counts.failed_request_id_generators, 1);
    // The header stays the one named, before or after.
    let corr = HeaderName::from_static("x-correlation-id");
    let p = Propagation::new()
        .request_id_header(corr.clone())
        .unwrap()
        .request_id_with(|_: &HeaderMap| Some(HeaderValue::from_static("made")));
    assert_eq!(p.request_id.as_ref(), Some(&corr));
    assert!(format!("{p:?}").contains("request_id_with: true"));
}
