//! Allocation counts of the core's handles, exact (a counting global allocator from the
//! `stats_alloc` crate, no `unsafe` of ours). A binary of its own: the allocator counts the whole
//! process, so nothing else may run beside these tests.

use http::HeaderValue;
use shared_headers::SharedHeaders;
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

/// Allocations made by `f` (the fewest of a few tries, in case the test harness allocates
/// meanwhile).
fn allocations_of<T>(f: impl Fn() -> T) -> i64 {
    (0..5)
        .map(|_| {
            let before = GLOBAL.stats().allocations;
            let value = f();
            let after = GLOBAL.stats().allocations;
            drop(value);
            (after - before) as i64
        })
        .min()
        .unwrap()
}

/// Limits and redaction cost nothing to handles that do not use them: an empty handle without
/// a policy is one allocation (the shared cell; its first version is the thread's shared empty
/// version), a non-empty map adds its first version, and a configured policy adds exactly one
/// (and a first version of its own).
#[test]
fn plain_handles_allocate_once() {
    assert_eq!(
        allocations_of(|| SharedHeaders::from(http::HeaderMap::new())),
        1
    );
    assert_eq!(allocations_of(SharedHeaders::new), 1);
    assert_eq!(allocations_of(|| SharedHeaders::builder().build()), 1);
    let mut one = http::HeaderMap::new();
    one.insert("x-a", HeaderValue::from_static("1"));
    assert_eq!(allocations_of(|| SharedHeaders::from(one.clone())), 2 + 2); // + the map's clone
    assert_eq!(
        allocations_of(|| SharedHeaders::builder().max_entries(8).build()),
        3
    );
    // Reads allocate nothing; a snapshot is a reference count.
    let h = SharedHeaders::builder().max_bytes(1024).build();
    h.insert("x-a", HeaderValue::from_static("1")).unwrap();
    assert_eq!(allocations_of(|| h.snapshot()), 0);
    assert_eq!(allocations_of(|| h.contains_key("x-a")), 0);
}
