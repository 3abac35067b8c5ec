// The property shared by the fuzz target `context` (`fuzz/fuzz_targets/context.rs`) and the
// proptest `tests/context_props.rs`: the input bytes become request headers and bounds, go
// through `Propagation::capture`, and what comes out must be what the docs promise. Included
// with `include!` by both (no crate of its own).

use http::header::{HeaderMap, HeaderName, HeaderValue};
use shared_headers::context::Propagation;

/// The names the input picks from (its first byte of each line, modulo the length).
const NAMES: &[&str] = &[
    "x-request-id",
    "traceparent",
    "tracestate",
    "baggage",
    "b3",
    "x-b3-traceid",
    "x-b3-spanid",
    "x-b3-parentspanid",
    "x-b3-sampled",
    "x-b3-flags",
    "x-ot-span-context",
    "sw8",
    "x-tenant",
    "x-other",
];

/// Decodes `data` (2 bytes of bounds, then lines of a name-picking byte and a value) and
/// checks the capture; panics on a broken promise. Returns how many values were propagated
/// and what was refused, for the proptest to see which outcomes it reached.
pub fn check_capture(data: &[u8]) -> (usize, shared_headers::context::PropagationCounts) {
    let (bounds, lines) = data.split_at(data.len().min(2));
    let max_headers = bounds.first().map_or(16, |b| usize::from(*b % 20));
    let max_bytes = bounds.get(1).map_or(10240, |b| usize::from(*b) * 64);
    let mut headers = HeaderMap::new();
    for line in lines.split(|&b| b == b'\n') {
        let Some((&pick, value)) = line.split_first() else {
            continue;
        };
        let name = HeaderName::from_static(NAMES[usize::from(pick) % NAMES.len()]);
        if let Ok(value) = HeaderValue::from_bytes(value) {
            headers.append(name, value);
        }
    }
    let propagation = Propagation::new()
        .envoy()
        .w3c()
        .header(HeaderName::from_static("x-tenant"))
        .unwrap()
        .max_headers(max_headers)
        .max_bytes(max_bytes);
    let (context, counts) = propagation.capture(&headers);
    let context = context.expect("a request id is configured: always a context");
    let id = context.request_id().expect("always an id");
    assert!((1..=128).contains(&id.len()));
    assert!(id.bytes().all(|b| (b'!'..=b'~').contains(&b)));
    let incoming: Vec<_> = headers.get_all("x-request-id").iter().collect();
    if incoming.len() == 1 && incoming[0].as_bytes() == id.as_bytes() {
        assert_eq!(counts.replaced_request_ids, 0);
    }
    assert!(counts.replaced_request_ids <= 1);
    let mut bytes = 0;
    let mut values = 0;
    for (name, value) in context.headers().skip(1) {
        assert!(propagation.names().any(|n| n == name), "{name} not configured");
        assert!(value.as_bytes().iter().all(|&b| b == b'\t' || (b' '..=b'~').contains(&b)));
        bytes += name.as_str().len() + value.len();
        values += 1;
    }
    assert!(values <= max_headers && bytes <= max_bytes);
    let came = propagation
        .names()
        .filter(|name| headers.contains_key(*name))
        .count() as u64;
    let refused = counts.malformed + counts.duplicated + counts.over_limit;
    assert!(values as u64 + refused <= came);
    let tracestate_skipped = u64::from(headers.contains_key("tracestate"));
    assert!(values as u64 + refused + tracestate_skipped >= came);
    (values, counts)
}
