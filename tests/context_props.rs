//! The request context's parsers under random input, in the test command: the property of the
//! fuzz target `context` (`tests/support/context_check.rs`), over inputs biased toward the
//! formats (valid and nearly valid trace headers, ids, lists) as well as random bytes. Each
//! run counts the outcomes it reached (values propagated; values refused as malformed,
//! duplicated, over a bound; ids replaced) and fails if one was never reached: a property that
//! only ever saw empty captures would prove nothing.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use shared_headers::context::PropagationCounts;

include!("support/context_check.rs");

/// A line: a byte that picks the name, then a value.
fn line() -> impl Strategy<Value = Vec<u8>> {
    let value = prop_oneof![
        // Nearly valid: W3C and B3 shapes with random hex, a wrong digit, a wrong length.
        "0[0-9a-f]-[0-9a-f]{32}-[0-9a-f]{16}-0[0-1]",
        "[0-9a-fA-F]{16,32}-[0-9a-f]{16}(-[01d](-[0-9a-f]{16})?)?",
        "[01d]|true|false",
        "([a-z]{1,4}=[a-z0-9]{0,8},){0,80}",
        "[!-~]{0,140}",
        proptest::collection::vec(any::<u8>(), 0..200)
            .prop_map(|v| String::from_utf8_lossy(&v).into_owned()),
    ];
    (any::<u8>(), value).prop_map(|(pick, value)| {
        let mut line = vec![pick];
        line.extend(value.bytes().filter(|&b| b != b'\n'));
        line
    })
}

fn run(strategy: impl Strategy<Value = Vec<u8>>, cases: u32) -> (usize, PropagationCounts) {
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let reached = std::cell::RefCell::new((0usize, PropagationCounts::default()));
    runner
        .run(&strategy, |data| {
            let (values, counts) = check_capture(&data);
            let mut reached = reached.borrow_mut();
            reached.0 += values;
            reached.1.replaced_request_ids += counts.replaced_request_ids;
            reached.1.malformed += counts.malformed;
            reached.1.duplicated += counts.duplicated;
            reached.1.over_limit += counts.over_limit;
            Ok(())
        })
        .unwrap();
    reached.into_inner()
}

#[test]
fn capture_keeps_its_promises_and_reaches_every_outcome() {
    let input =
        (any::<[u8; 2]>(), proptest::collection::vec(line(), 0..24)).prop_map(|(bounds, lines)| {
            let mut data = bounds.to_vec();
            data.extend(lines.join(&b'\n'));
            data
        });
    let (values, counts) = run(input, 600);
    assert!(values > 0, "no value was ever propagated");
    assert!(counts.replaced_request_ids > 0, "no id was ever replaced");
    assert!(counts.malformed > 0, "no value was ever malformed");
    assert!(counts.duplicated > 0, "no value was ever duplicated");
    assert!(counts.over_limit > 0, "no value was ever over a bound");
}

#[test]
fn capture_never_panics_on_raw_bytes() {
    run(proptest::collection::vec(any::<u8>(), 0..2048), 400);
}
