//! Fuzz target `context`: feeds the input, as request headers, to the request context's
//! parsers (`Propagation::capture`: the request id, W3C `traceparent`/`tracestate`/`baggage`,
//! B3 single and multi, Envoy's set, a custom name) under bounds drawn from the input. No
//! input may panic, and whatever is captured must be what the docs promise:
//!
//! * a request id is always there, 1 to 128 bytes of visible ASCII, and the incoming one only
//!   when it came once and was valid;
//! * every propagated value is visible ASCII, space or tab, and a configured name;
//! * the propagated values fit the bounds (count and bytes);
//! * every configured name that came is either propagated or counted (a `tracestate` without
//!   a valid `traceparent` excepted), and nothing is counted twice.
//!
//! Run: `cargo +nightly fuzz run context` (from the repository root; see `fuzz/README.md`).
//! `tests/context_props.rs` checks the same properties with proptest in the test command.

#![no_main]

use libfuzzer_sys::fuzz_target;

include!("../../tests/support/context_check.rs");

fuzz_target!(|data: &[u8]| {
    check_capture(data);
});
