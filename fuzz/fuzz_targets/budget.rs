//! Fuzz target `budget`: feeds the input bytes, as a header value, to every `BudgetHeader`'s
//! parser. No input may panic; a value that parses must encode back to a value that parses to
//! the same budget or less (encoding never extends a budget), and the encoding of any budget
//! parses again.
//!
//! Run: `cargo +nightly fuzz run budget` (from the repository root; see `fuzz/README.md`).

#![no_main]

use std::time::Duration;

use http::header::{HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;
use shared_headers::deadline::BudgetHeader;

fuzz_target!(|data: &[u8]| {
    let headers = [
        BudgetHeader::grpc_timeout(),
        BudgetHeader::connect_timeout_ms(),
        BudgetHeader::envoy_expected_rq_timeout_ms(),
        BudgetHeader::millis(HeaderName::from_static("x-budget-ms")),
    ];
    // The same bytes as a budget to encode: 8 bytes of seconds, 4 of nanoseconds.
    let mut raw = [0u8; 12];
    for (slot, byte) in raw.iter_mut().zip(data) {
        *slot = *byte;
    }
    let secs = u64::from_le_bytes(raw[..8].try_into().unwrap());
    let nanos = u32::from_le_bytes(raw[8..].try_into().unwrap()) % 1_000_000_000;
    let budget = Duration::new(secs, nanos);
    let value = HeaderValue::from_bytes(data).ok();
    for header in &headers {
        if let Some(value) = &value {
            if let Ok(parsed) = header.parse(value) {
                let again = header.parse(&header.encode(parsed)).expect("an encoding parses");
                assert!(again <= parsed, "{header:?}: {value:?} -> {parsed:?} -> {again:?}");
            }
        }
        let back = header.parse(&header.encode(budget)).expect("an encoding parses");
        assert!(back <= budget, "{header:?}: {budget:?} -> {back:?}");
    }
});
