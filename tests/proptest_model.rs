//! Model test: long random sequences of every write and read of `SharedHeaders`, checked step by
//! step against a plain `HeaderMap` (the oracle in `tests/support/model.rs`, shared with the fuzz
//! target) plus a version counter, a sealed flag and the handle's limits. Inputs include empty
//! values, 16 KiB values, tabs and obs-text bytes, values flagged sensitive, many duplicates of a
//! few names, random limits (often tiny), and a seal at a random step.
//!
//! The 32,768-entry limit of `HeaderMap` is exercised by the targeted tests at the bottom, so that
//! the random sequences stay fast.

use http::HeaderMap;
use http::header::{HeaderName, HeaderValue};
use proptest::prelude::*;
use shared_headers::{Error, Limit, SharedHeaders};

#[path = "support/model.rs"]
mod model;
use model::{Config, Edit, Op, POOL, run};

// ---------------------------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------------------------

fn name() -> impl Strategy<Value = HeaderName> {
    prop_oneof![
        4 => prop::sample::select(POOL).prop_map(HeaderName::from_static),
        1 => "[a-z0-9-]{1,24}".prop_map(|s| HeaderName::from_bytes(s.as_bytes()).unwrap()),
    ]
}

/// Valid header values: empty, short visible ASCII, tabs and obs-text bytes, and long ones.
fn value() -> impl Strategy<Value = HeaderValue> {
    let byte = prop_oneof![Just(b'\t'), 0x20u8..=0x7e, 0x80u8..=0xff,];
    prop_oneof![
        2 => Just(HeaderValue::from_static("")),
        6 => "[ -~]{0,24}".prop_map(|s| HeaderValue::from_str(&s).unwrap()),
        2 => prop::collection::vec(byte, 0..32)
            .prop_map(|b| HeaderValue::from_bytes(&b).unwrap()),
        1 => (1usize..=16 * 1024)
            .prop_map(|n| HeaderValue::from_bytes(&vec![b'v'; n]).unwrap()),
        1 => "[ -~]{0,8}".prop_map(|s| {
            let mut v = HeaderValue::from_str(&s).unwrap();
            v.set_sensitive(true);
            v
        }),
    ]
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        3 => (name(), value()).prop_map(|(n, v)| Edit::Insert(n, v)),
        3 => (name(), value()).prop_map(|(n, v)| Edit::Append(n, v)),
        1 => name().prop_map(Edit::Remove),
    ]
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    prop::collection::vec(edit(), 0..6)
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (name(), value()).prop_map(|(n, v)| Op::Insert(n, v)),
        6 => (name(), value()).prop_map(|(n, v)| Op::Append(n, v)),
        3 => name().prop_map(Op::Remove),
        2 => edits().prop_map(Op::Update),
        1 => edits().prop_map(Op::Replace),
        2 => (edits(), prop::option::of((name(), value())))
            .prop_map(|(edits, interleave)| Op::DraftCommit { edits, interleave }),
        // Sealing happens at a random step, rarely enough that most sequences run long first.
        1 => Just(Op::Seal),
        1 => edits().prop_map(Op::SealWith),
        2 => Just(Op::Hold),
        1 => Just(Op::DropHeld),
        3 => name().prop_map(Op::Get),
        2 => name().prop_map(Op::Read),
    ]
}

fn config() -> impl Strategy<Value = Config> {
    (
        prop::option::weighted(0.4, 0usize..40),
        prop::option::weighted(0.4, 0usize..40_000),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(max_entries, max_bytes, extra_sensitive, locked)| Config {
            max_entries,
            max_bytes,
            extra_sensitive,
            locked,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random sequences of up to 200 operations under a random configuration agree with the
    /// oracle at every step.
    #[test]
    fn agrees_with_header_map(config in config(), ops in prop::collection::vec(op(), 1..200)) {
        run(config, ops);
    }
}

// ---------------------------------------------------------------------------------------------
// Targeted: HeaderMap's own capacity, far past 32,768 values
// ---------------------------------------------------------------------------------------------

fn distinct(i: usize) -> HeaderName {
    HeaderName::from_bytes(format!("x-{i}").as_bytes()).unwrap()
}

/// Filling a map with distinct names ends in `MaxSizeReached` from every write, never a panic,
/// exactly where `HeaderMap` itself stops; replace, commit and seal of the full map still work.
#[test]
fn full_map_is_an_error_not_a_panic() {
    let mut oracle = HeaderMap::new();
    let mut filled = 0;
    while oracle
        .try_append(distinct(filled), HeaderValue::from_static("v"))
        .is_ok()
    {
        filled += 1;
    }
    assert!(filled >= 16_384, "HeaderMap stopped early at {filled}");

    let h = SharedHeaders::new();
    let (n, _) = h
        .update(|m| {
            let mut n = 0;
            while m
                .try_append(distinct(n), HeaderValue::from_static("v"))
                .is_ok()
            {
                n += 1;
            }
            n
        })
        .map(|n| (n, ()))
        .unwrap();
    assert_eq!(n, filled);
    assert_eq!(h.snapshot().header_map(), &oracle);
    let v = h.version();

    let next = distinct(filled + 1);
    assert_eq!(
        h.insert(&next, HeaderValue::from_static("v")),
        Err(Error::MaxSizeReached)
    );
    assert_eq!(
        h.append(&next, HeaderValue::from_static("v")),
        Err(Error::MaxSizeReached)
    );
    // Even an existing name: HeaderMap reserves a slot before it looks.
    assert_eq!(
        oracle
            .try_insert(distinct(0), HeaderValue::from_static("w"))
            .is_err(),
        h.insert(distinct(0), HeaderValue::from_static("w")) == Err(Error::MaxSizeReached)
    );
    assert_eq!(h.version(), v, "refused writes published something");

    // A closure using the panicking `insert` panics in the caller; nothing is published.
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        h.update(|m| {
            m.insert(distinct(filled + 2), HeaderValue::from_static("v"));
        })
    }));
    assert!(panicked.is_err());
    assert_eq!(h.version(), v);

    // Whole maps at capacity go through replace and commit.
    let snap = h.replace(oracle.clone()).unwrap();
    assert_eq!(snap.len(), filled);
    let draft = h.draft();
    assert_eq!(h.commit(draft).unwrap().len(), filled);
    assert!(h.remove(distinct(0)).unwrap().is_some());
    assert_eq!(h.append(&next, HeaderValue::from_static("v")), Ok(false));
    let sealed = h.seal().unwrap();
    assert_eq!(sealed.len(), filled);
    assert!(!format!("{sealed:?}").is_empty());
}

/// Many duplicates of one name go past 32,768 values (HeaderMap stores them apart from its
/// index); the handle follows HeaderMap, and an entry limit stops them exactly at its maximum.
#[test]
fn many_duplicates_of_one_name() {
    const N: usize = 40_000;
    let name = HeaderName::from_static("x-dup");
    let h = SharedHeaders::new();
    h.update(|m| {
        for _ in 0..N {
            m.try_append(&name, HeaderValue::from_static("d")).unwrap();
        }
    })
    .unwrap();
    assert_eq!(h.len(), N);
    assert!(h.append(&name, HeaderValue::from_static("d")).unwrap());
    assert_eq!(h.get_all(&name).len(), N + 1);
    assert!(h.contains_key(&name));
    // (Not `insert`/`remove` of this name here: in debug builds, a consistency check inside
    // `HeaderMap` makes dropping a name's extra values quadratic, over a minute for 40,000; it is
    // linear in release, about 0.5 ms.)
    let snap = h.replace(HeaderMap::new()).unwrap();
    assert!(snap.is_empty());

    let limited = SharedHeaders::builder().max_entries(N).build();
    limited
        .update(|m| {
            for _ in 0..N {
                m.try_append(&name, HeaderValue::from_static("d")).unwrap();
            }
        })
        .unwrap();
    assert_eq!(
        limited.append(&name, HeaderValue::from_static("d")),
        Err(Error::LimitExceeded {
            limit: Limit::Entries,
            max: N,
            attempted: N + 1
        })
    );
    assert_eq!(limited.len(), N);
    assert_eq!(limited.version(), 1);
}

/// A long value counts fully against the byte limit; an exact fit is allowed, one more is not.
#[test]
fn byte_limit_is_exact() {
    let h = SharedHeaders::builder().max_bytes(64 * 1024).build();
    let fit = HeaderValue::from_bytes(&vec![b'a'; 64 * 1024 - "x-big".len()]).unwrap();
    h.insert("x-big", fit).unwrap();
    assert_eq!(
        h.append("x-c", HeaderValue::from_static("")),
        Err(Error::LimitExceeded {
            limit: Limit::Bytes,
            max: 64 * 1024,
            attempted: 64 * 1024 + 3
        })
    );
    // An empty value still costs its name.
    let zero = SharedHeaders::builder().max_bytes(0).build();
    assert!(zero.insert("x", HeaderValue::from_static("")).is_err());
    assert_eq!(zero.version(), 0);
}
