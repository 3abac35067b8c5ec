//! API parity with `HeaderMap`, the version rules, drafts, seal, and the traits users rely on.
//!
//! Every write test runs the same operation on a plain `HeaderMap` (the oracle) and on a
//! `SharedHeaders`, and asserts the same return value, the same contents in the same iteration
//! order (including the order of multi-values), and the version accounting: a new handle is
//! version 0, each published change adds exactly 1, and a refused write or the removal of an
//! absent key publishes nothing.

use std::panic::{AssertUnwindSafe, catch_unwind};

use http::header::{ACCEPT, CONTENT_TYPE, HOST, HeaderName, SET_COOKIE, USER_AGENT};
use http::{Extensions, HeaderMap, HeaderValue, Request};
use shared_headers::{Draft, Error, SharedHeaders, Snapshot};

fn v(s: &'static str) -> HeaderValue {
    HeaderValue::from_static(s)
}

/// Asserts that `shared` holds exactly `oracle`: every read method agrees, iteration order and
/// multi-value order included.
#[track_caller]
fn assert_same(shared: &SharedHeaders, oracle: &HeaderMap) {
    let snap = shared.snapshot();
    assert_eq!(
        snap.iter().collect::<Vec<_>>(),
        oracle.iter().collect::<Vec<_>>(),
        "iteration order"
    );
    assert_eq!(
        snap.keys().collect::<Vec<_>>(),
        oracle.keys().collect::<Vec<_>>()
    );
    assert_eq!(shared.len(), oracle.len());
    assert_eq!(shared.is_empty(), oracle.is_empty());
    assert_eq!(shared.read(|m| m.keys_len()), oracle.keys_len());
    for name in oracle.keys() {
        assert_eq!(shared.get(name), oracle.get(name).cloned());
        assert_eq!(
            shared.get_all(name),
            oracle.get_all(name).iter().cloned().collect::<Vec<_>>()
        );
        assert!(shared.contains_key(name));
    }
}

/// A map with standard and custom names and a multi-valued header.
fn sample() -> HeaderMap {
    let mut map = HeaderMap::new();
    map.insert(HOST, v("example.com"));
    map.insert(USER_AGENT, v("test/1.0"));
    map.append(SET_COOKIE, v("a=1"));
    map.append(SET_COOKIE, v("b=2"));
    map.append(SET_COOKIE, v("c=3"));
    map.insert("x-request-id", v("42"));
    map
}

// ---------------------------------------------------------------------------------------------
// Construction and traits
// ---------------------------------------------------------------------------------------------

#[test]
fn new_and_default_are_empty_unsealed_version_zero() {
    for h in [SharedHeaders::new(), SharedHeaders::default()] {
        assert!(h.is_empty());
        assert_eq!(h.len(), 0);
        assert_eq!(h.version(), 0);
        assert!(!h.is_sealed());
        let snap = h.snapshot();
        assert_eq!((snap.version(), snap.is_sealed()), (0, false));
        assert!(snap.is_empty());
    }
}

#[test]
fn from_header_map_is_version_zero_with_the_same_contents() {
    let map = sample();
    let h = SharedHeaders::from(map.clone());
    assert_eq!(h.version(), 0);
    assert!(!h.is_sealed());
    assert_same(&h, &map);
    assert_eq!(*h.snapshot(), map);
}

#[test]
fn clones_share_one_map() {
    let a = SharedHeaders::new();
    let b = a.clone();
    assert!(SharedHeaders::ptr_eq(&a, &b));
    assert!(!SharedHeaders::ptr_eq(&a, &SharedHeaders::new()));
    b.insert(HOST, v("example.com")).unwrap();
    assert_eq!(a.get(HOST).unwrap(), "example.com");
    assert_eq!(a.version(), 1);
    a.seal().unwrap();
    assert!(b.is_sealed());
}

#[test]
fn debug_shows_version_sealed_and_headers() {
    let h = SharedHeaders::from(sample());
    h.insert("x-debug", v("yes")).unwrap();
    let text = format!("{h:?}");
    assert!(text.contains("SharedHeaders"), "{text}");
    assert!(text.contains("version: 1"), "{text}");
    assert!(text.contains("sealed: false"), "{text}");
    assert!(text.contains("x-debug"), "{text}");

    let snap = h.seal().unwrap();
    let text = format!("{snap:?}");
    assert!(text.contains("Snapshot"), "{text}");
    assert!(text.contains("version: 2"), "{text}");
    assert!(text.contains("sealed: true"), "{text}");
    assert!(text.contains("example.com"), "{text}");

    let draft = format!("{:?}", h.draft());
    assert!(draft.contains("x-debug"), "{draft}");
}

#[test]
fn handle_and_snapshot_are_send_sync_static() {
    fn assert_send_sync_static<T: Send + Sync + 'static>() {}
    assert_send_sync_static::<SharedHeaders>();
    assert_send_sync_static::<Snapshot>();
    assert_send_sync_static::<Draft>();
    assert_send_sync_static::<Error>();
}

/// The public values can cross `catch_unwind` without `AssertUnwindSafe`, as plain values can
/// (a commit's record among them, now that it is a view into the exchange's allocation).
#[test]
fn public_values_are_unwind_safe() {
    fn assert_unwind_safe<T: std::panic::UnwindSafe + std::panic::RefUnwindSafe>() {}
    assert_unwind_safe::<SharedHeaders>();
    assert_unwind_safe::<Snapshot>();
    assert_unwind_safe::<Draft>();
    assert_unwind_safe::<shared_headers::Exchange>();
    assert_unwind_safe::<shared_headers::Committed>();
    assert_unwind_safe::<shared_headers::AlreadyCommitted>();
    assert_unwind_safe::<shared_headers::LateWrites>();
    assert_unwind_safe::<shared_headers::Reader>();
}

/// A future that holds a `Snapshot` (and a `Draft`) across `.await` is `Send`: it can be spawned
/// on a multi-threaded runtime. This fails to compile if either ever holds a lock guard.
#[test]
fn future_holding_a_snapshot_across_await_is_send() {
    fn assert_send<T: Send>(_: T) {}
    let h = SharedHeaders::from(sample());
    let fut = async move {
        let snap = h.snapshot();
        let mut draft = h.draft();
        std::future::ready(()).await;
        draft.insert("x-after-await", v("1"));
        std::future::ready(()).await;
        (snap.len(), h.commit(draft).is_ok())
    };
    assert_send(fut);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_held_across_await_in_a_spawned_task() {
    let h = SharedHeaders::from(sample());
    let task = {
        let h = h.clone();
        tokio::spawn(async move {
            let snap = h.snapshot();
            tokio::task::yield_now().await;
            h.insert("x-late", v("1")).unwrap();
            tokio::task::yield_now().await;
            // The snapshot is frozen at the version it was taken.
            (snap.version(), snap.contains_key("x-late"))
        })
    };
    assert_eq!(task.await.unwrap(), (0, false));
    assert_eq!(h.version(), 1);
}

#[test]
fn handle_and_snapshot_can_live_in_http_extensions() {
    let h = SharedHeaders::from(sample());
    let mut request = Request::new(());
    request.extensions_mut().insert(h.clone());
    request.extensions_mut().insert(h.snapshot());

    let found = request.extensions().get::<SharedHeaders>().unwrap();
    assert!(SharedHeaders::ptr_eq(found, &h));
    found.insert("x-from-extensions", v("1")).unwrap();
    assert_eq!(h.get("x-from-extensions").unwrap(), "1");

    let snap = request.extensions().get::<Snapshot>().unwrap();
    assert_eq!(snap.version(), 0);

    // Extensions are Clone (http 1.1+): the clone holds the same handle.
    let mut ext = Extensions::new();
    ext.insert(h.clone());
    let cloned = ext.clone();
    assert!(SharedHeaders::ptr_eq(cloned.get().unwrap(), &h));
    let taken: SharedHeaders = ext.remove().unwrap();
    assert!(SharedHeaders::ptr_eq(&taken, &h));
}

// ---------------------------------------------------------------------------------------------
// Reads
// ---------------------------------------------------------------------------------------------

#[test]
fn reads_match_header_map_for_every_key_form() {
    let map = sample();
    let h = SharedHeaders::from(map.clone());
    assert_same(&h, &map);

    let cookie = SET_COOKIE;
    // Every `AsHeaderName` form: HeaderName, &HeaderName, &str, String, &String.
    assert_eq!(h.get(&cookie), map.get(&cookie).cloned());
    assert_eq!(h.get("set-cookie"), map.get("set-cookie").cloned());
    assert_eq!(h.get("Set-Cookie"), map.get("Set-Cookie").cloned());
    assert_eq!(
        h.get(String::from("set-cookie")),
        map.get(String::from("set-cookie")).cloned()
    );
    let id = String::from("x-request-id");
    assert_eq!(h.get(&id), map.get(&id).cloned());
    assert_eq!(h.get(id.clone()), map.get(id).cloned());
    assert_eq!(h.get_all("set-cookie"), ["a=1", "b=2", "c=3"]);
    assert_eq!(h.get_all(cookie.clone()).len(), 3);

    // Absent keys, including invalid names (HeaderMap answers None / false, never panics).
    for absent in ["x-absent", "", "bad name", "\u{e9}"] {
        assert_eq!(h.get(absent), map.get(absent).cloned());
        assert!(h.get_all(absent).is_empty());
        assert_eq!(h.contains_key(absent), map.contains_key(absent));
        assert!(!h.contains_key(absent));
    }
    assert!(h.contains_key(HOST));
    assert!(!h.contains_key(ACCEPT));
    assert_eq!(h.len(), 6);
    assert!(!h.is_empty());
    assert!(h.read(|m| m == &map));
    assert_eq!(h.read(|m| m.get_all(&cookie).iter().count()), 3);
}

#[test]
fn reads_publish_nothing() {
    let h = SharedHeaders::from(sample());
    let before = h.snapshot();
    let _ = (
        h.get(HOST),
        h.get_all(SET_COOKIE),
        h.contains_key("x"),
        h.len(),
    );
    let _ = (h.is_empty(), h.read(|m| m.len()), h.is_sealed(), h.draft());
    assert_eq!(h.version(), 0);
    assert!(Snapshot::ptr_eq(&before, &h.snapshot()));
}

/// Reads nest (deeper than arc-swap's per-thread fast slots), and a read inside `update` sees the
/// version before that update, as documented, without deadlocking.
#[test]
fn nested_reads_and_reads_inside_update() {
    fn nest(h: &SharedHeaders, depth: usize) -> usize {
        h.read(|m| {
            if depth == 0 {
                m.len()
            } else {
                nest(h, depth - 1)
            }
        })
    }
    let h = SharedHeaders::from(sample());
    assert_eq!(nest(&h, 32), 6);
    let held: Vec<Snapshot> = (0..32).map(|_| h.snapshot()).collect();

    let seen = h
        .update(|m| {
            m.insert("x-new", v("1"));
            (h.version(), h.contains_key("x-new"), nest(&h, 16))
        })
        .unwrap();
    assert_eq!(seen, (0, false, 6));
    assert_eq!(h.version(), 1);
    assert!(held.iter().all(|s| s.version() == 0 && s.len() == 6));
}

// ---------------------------------------------------------------------------------------------
// Writes: same results as HeaderMap, +1 version per published change
// ---------------------------------------------------------------------------------------------

#[test]
fn insert_matches_header_map_and_adds_one_version() {
    let mut oracle = sample();
    let h = SharedHeaders::from(oracle.clone());
    let steps: [(HeaderName, &'static str); 5] = [
        (HOST, "other.example"),                       // replaces one value
        (SET_COOKIE, "only=1"),                        // replaces three values
        (ACCEPT, "*/*"),                               // new key
        (HeaderName::from_static("x-request-id"), ""), // empty value
        (ACCEPT, "text/html"),
    ];
    for (i, (name, value)) in steps.into_iter().enumerate() {
        let expected = oracle.insert(name.clone(), v(value));
        assert_eq!(h.insert(name, v(value)).unwrap(), expected);
        assert_eq!(h.version(), i as u64 + 1);
        assert_same(&h, &oracle);
    }
    // Every `IntoHeaderName` form: HeaderName, &HeaderName, &'static str.
    assert_eq!(h.insert(&CONTENT_TYPE, v("a")).unwrap(), None);
    assert_eq!(h.insert("content-type", v("b")).unwrap().unwrap(), "a");
    assert_eq!(h.version(), 7);
}

#[test]
fn append_matches_header_map_and_keeps_multi_value_order() {
    let mut oracle = HeaderMap::new();
    let h = SharedHeaders::new();
    let steps = [
        ("x-a", "1"),
        ("x-b", "1"),
        ("x-a", "2"),
        ("x-a", "3"),
        ("x-b", "2"),
        ("set-cookie", "s=1"),
        ("x-a", "4"),
    ];
    for (i, (name, value)) in steps.into_iter().enumerate() {
        let expected = oracle.append(name, v(value));
        assert_eq!(h.append(name, v(value)).unwrap(), expected);
        assert_eq!(h.version(), i as u64 + 1);
        assert_same(&h, &oracle);
    }
    assert_eq!(h.get_all("x-a"), ["1", "2", "3", "4"]);
    assert_eq!(h.get("x-a").unwrap(), "1");
    assert_eq!(h.len(), 7);
    // Insert after appends replaces all of them, like HeaderMap.
    assert_eq!(
        h.insert("x-a", v("5")).unwrap(),
        oracle.insert("x-a", v("5"))
    );
    assert_same(&h, &oracle);
}

#[test]
fn remove_matches_header_map_and_absent_key_publishes_nothing() {
    let mut oracle = sample();
    let h = SharedHeaders::from(oracle.clone());

    let expected = oracle.remove(SET_COOKIE);
    assert_eq!(h.remove(SET_COOKIE).unwrap(), expected);
    assert_eq!(expected.unwrap(), "a=1", "remove returns the first value");
    assert_eq!(h.version(), 1);
    assert_same(&h, &oracle);

    let before = h.snapshot();
    for absent in ["set-cookie", "x-absent", "bad name"] {
        assert_eq!(h.remove(absent).unwrap(), oracle.remove(absent));
        assert_eq!(h.version(), 1, "removing {absent:?} published a version");
        assert!(Snapshot::ptr_eq(&before, &h.snapshot()));
    }

    assert_eq!(
        h.remove("x-request-id").unwrap(),
        oracle.remove("x-request-id")
    );
    assert_eq!(h.version(), 2);
    assert_same(&h, &oracle);
}

#[test]
fn update_is_one_atomic_version_and_returns_the_closure_result() {
    let mut oracle = sample();
    let h = SharedHeaders::from(oracle.clone());
    let batch = |m: &mut HeaderMap| {
        let old = m.insert(HOST, v("new.example"));
        m.append("x-a", v("1"));
        m.append("x-a", v("2"));
        m.remove(USER_AGENT);
        m.append(SET_COOKIE, v("d=4"));
        old
    };
    let expected = batch(&mut oracle);
    let before = h.snapshot();
    assert_eq!(h.update(batch).unwrap(), expected);
    assert_eq!(h.version(), 1, "five changes, one version");
    assert_same(&h, &oracle);
    // The snapshot taken before is untouched.
    assert_eq!(*before, sample());

    // The closure sees the current map.
    let seen = h.update(|m| m.get_all(SET_COOKIE).iter().count()).unwrap();
    assert_eq!(seen, 4);
}

#[test]
fn update_closure_runs_exactly_once() {
    let h = SharedHeaders::new();
    let mut runs = 0;
    h.update(|m| {
        runs += 1;
        m.insert("x-a", v("1"));
    })
    .unwrap();
    assert_eq!(runs, 1);
}

#[test]
fn replace_publishes_the_given_map_as_the_next_version() {
    let h = SharedHeaders::from(sample());
    let mut map = HeaderMap::new();
    map.append("x-z", v("1"));
    map.append("x-z", v("2"));
    let snap = h.replace(map.clone()).unwrap();
    assert_eq!((snap.version(), snap.is_sealed()), (1, false));
    assert_eq!(*snap, map);
    assert_same(&h, &map);
    assert!(Snapshot::ptr_eq(&snap, &h.snapshot()));

    let snap = h.replace(HeaderMap::new()).unwrap();
    assert_eq!(snap.version(), 2);
    assert!(h.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Draft and commit
// ---------------------------------------------------------------------------------------------

#[test]
fn draft_is_private_until_committed() {
    let h = SharedHeaders::from(sample());
    h.insert("x-a", v("1")).unwrap();
    let mut draft = h.draft();
    assert_eq!(draft.base_version(), 1);
    assert_eq!(*draft, *h.snapshot());

    draft.insert("x-b", v("2"));
    draft.append("x-a", v("3"));
    draft.remove(HOST);
    assert!(!h.contains_key("x-b"), "draft edits are private");
    assert_eq!(h.version(), 1);

    let mut oracle = (*draft).clone();
    let snap = h.commit(draft).unwrap();
    assert_eq!(snap.version(), 2);
    assert!(!snap.is_sealed());
    assert_same(&h, &oracle);

    // Draft: Clone, DerefMut, into_header_map.
    let mut d = h.draft();
    d.insert("x-c", v("c"));
    oracle.insert("x-c", v("c"));
    let copy = d.clone();
    assert_eq!(copy.base_version(), 2);
    assert_eq!(copy.into_header_map(), oracle);
    assert_eq!(d.into_header_map(), oracle);
    assert_eq!(
        h.version(),
        2,
        "dropping or unwrapping a draft publishes nothing"
    );
}

#[test]
fn stale_draft_conflicts_and_publishes_nothing() {
    let h = SharedHeaders::new();
    let stale = h.draft();
    let mut fresh = h.draft();
    fresh.insert("x-who", v("fresh"));
    h.commit(fresh).unwrap();
    h.insert("x-other", v("1")).unwrap();

    let before = h.snapshot();
    let mut stale = stale;
    stale.insert("x-who", v("stale"));
    assert_eq!(
        h.commit(stale).unwrap_err(),
        Error::Conflict {
            expected: 0,
            found: 2
        }
    );
    assert!(Snapshot::ptr_eq(&before, &h.snapshot()));
    assert_eq!(h.get("x-who").unwrap(), "fresh");

    // Retrying with a new draft works.
    let mut retry = h.draft();
    retry.insert("x-who", v("retry"));
    assert_eq!(h.commit(retry).unwrap().version(), 3);
}

// ---------------------------------------------------------------------------------------------
// Seal
// ---------------------------------------------------------------------------------------------

#[test]
fn seal_publishes_one_version_and_refuses_every_later_write() {
    let h = SharedHeaders::from(sample());
    h.insert("x-a", v("1")).unwrap();
    let draft = h.draft();
    let sealed = h.seal().unwrap();
    assert!(sealed.is_sealed());
    assert_eq!(sealed.version(), 2);
    assert!(h.is_sealed());
    assert!(Snapshot::ptr_eq(&sealed, &h.snapshot()));
    let mut contents = sample();
    contents.insert("x-a", v("1"));
    assert_eq!(*sealed, contents);

    let refused = Error::Sealed { version: 2 };
    let mut ran = false;
    assert_eq!(h.insert("x-b", v("1")), Err(refused.clone()));
    assert_eq!(h.append("x-b", v("1")), Err(refused.clone()));
    assert_eq!(h.remove("x-a"), Err(refused.clone()));
    assert_eq!(h.remove("x-absent"), Err(refused.clone()));
    assert_eq!(h.update(|_| ran = true), Err(refused.clone()));
    assert_eq!(h.replace(HeaderMap::new()), Err(refused.clone()));
    assert_eq!(h.commit(draft), Err(refused.clone()));
    assert_eq!(h.seal(), Err(refused.clone()));
    assert_eq!(
        h.seal_with(|_| ran = true).map(|(_, s)| s),
        Err(refused.clone())
    );
    assert!(!ran, "closures do not run on a sealed handle");

    // Nothing changed, reads still work, every clone sees the sealed snapshot.
    assert_eq!(h.version(), 2);
    assert!(Snapshot::ptr_eq(&sealed, &h.snapshot()));
    assert_eq!(h.get("x-a").unwrap(), "1");
    assert!(h.clone().is_sealed());
    assert_eq!(h.clone().snapshot(), sealed);
}

#[test]
fn seal_with_applies_final_changes_and_seals_in_one_version() {
    let h = SharedHeaders::new();
    h.insert("x-a", v("1")).unwrap();
    let (result, sealed) = h
        .seal_with(|m| {
            m.insert("x-outcome", v("timeout"));
            m.remove("x-a")
        })
        .unwrap();
    assert_eq!(result.unwrap(), "1");
    assert_eq!(sealed.version(), 2);
    assert!(sealed.is_sealed());
    assert_eq!(sealed.get("x-outcome").unwrap(), "timeout");
    assert!(!sealed.contains_key("x-a"));
    assert!(Snapshot::ptr_eq(&sealed, &h.snapshot()));
}

#[test]
fn sealing_an_empty_new_handle_is_version_one() {
    let h = SharedHeaders::new();
    let sealed = h.seal().unwrap();
    assert_eq!(
        (sealed.version(), sealed.is_sealed(), sealed.len()),
        (1, true, 0)
    );
    assert_eq!(h.seal().unwrap_err(), Error::Sealed { version: 1 });
}

// ---------------------------------------------------------------------------------------------
// Snapshot
// ---------------------------------------------------------------------------------------------

#[test]
fn snapshot_is_frozen_cheap_to_clone_and_comparable() {
    let h = SharedHeaders::from(sample());
    let a = h.snapshot();
    let b = a.clone();
    assert!(Snapshot::ptr_eq(&a, &b));
    assert_eq!(a, b);
    h.insert(ACCEPT, v("*/*")).unwrap();
    assert_eq!(*a, sample(), "old snapshot unchanged");
    assert_ne!(a, h.snapshot());

    // Same version + same headers but another handle: equal, not ptr_eq.
    let other = SharedHeaders::from(sample()).snapshot();
    assert_eq!(a, other);
    assert!(!Snapshot::ptr_eq(&a, &other));

    // Deref, AsRef and header_map all expose the same map.
    let as_ref: &HeaderMap = a.as_ref();
    assert!(std::ptr::eq(as_ref, a.header_map()));
    assert!(std::ptr::eq(as_ref, &*a));
    assert_eq!(a["host"], "example.com");
    assert_eq!(a.get_all(SET_COOKIE).iter().count(), 3);

    // into_header_map: with and without other references.
    assert_eq!(b.into_header_map(), sample());
    assert_eq!(a.into_header_map(), sample());
}

// ---------------------------------------------------------------------------------------------
// into_header_map
// ---------------------------------------------------------------------------------------------

#[test]
fn into_header_map_returns_the_current_map() {
    let h = SharedHeaders::from(sample());
    h.append(SET_COOKIE, v("d=4")).unwrap();
    let mut expected = sample();
    expected.append(SET_COOKIE, v("d=4"));

    // Other handle alive: a copy, the other handle keeps working.
    let other = h.clone();
    let map = h.into_header_map();
    assert_eq!(map, expected);
    assert_eq!(
        map.get_all(SET_COOKIE).iter().collect::<Vec<_>>(),
        ["a=1", "b=2", "c=3", "d=4"]
    );
    other.insert("x-more", v("1")).unwrap();

    // Last handle, but a snapshot of the current version alive: a copy, snapshot unaffected.
    let snap = other.snapshot();
    let map = other.into_header_map();
    assert_eq!(map, *snap);
    assert_eq!(snap.version(), 2);

    // Last handle, sealed: the sealed map.
    let h = SharedHeaders::from(sample());
    h.seal().unwrap();
    assert_eq!(h.into_header_map(), sample());
}

/// Where a value lives inside a map's storage: equal addresses mean the same storage, not a copy.
fn address_of(map: &HeaderMap, name: &str) -> usize {
    std::ptr::from_ref(map.get(name).unwrap()) as usize
}

#[test]
fn into_header_map_does_not_clone_for_the_last_reference() {
    let h = SharedHeaders::from(sample());
    h.insert("x-a", v("1")).unwrap();
    let stored = h.read(|m| address_of(m, "x-a"));
    let map = h.into_header_map();
    assert_eq!(
        address_of(&map, "x-a"),
        stored,
        "last handle: the map is moved out"
    );

    // With another handle alive, it must copy (and does).
    let h = SharedHeaders::from(map);
    let other = h.clone();
    let stored = h.read(|m| address_of(m, "x-a"));
    let copy = h.into_header_map();
    assert_ne!(address_of(&copy, "x-a"), stored);

    // The same for a snapshot that is the last reference to its version.
    let snap = other.snapshot();
    drop(other);
    let stored = address_of(&snap, "x-a");
    assert_eq!(address_of(&snap.into_header_map(), "x-a"), stored);
}

#[test]
fn a_snapshot_iterates_like_a_header_map() {
    let h = SharedHeaders::from(sample());
    let snap = h.snapshot();
    let mut seen = Vec::new();
    for (name, value) in &snap {
        seen.push((name.clone(), value.clone()));
    }
    let expected: Vec<_> = sample()
        .iter()
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect();
    assert_eq!(seen, expected);
}

#[test]
fn a_draft_commits_only_to_the_handle_it_came_from() {
    let request = SharedHeaders::new();
    let response = SharedHeaders::new();
    let mut draft = request.draft();
    draft.insert("x-a", v("1"));
    // Same base version (0) on both handles: only the identity check can tell them apart.
    assert_eq!(response.commit(draft.clone()), Err(Error::ForeignDraft));
    assert_eq!((response.version(), response.len()), (0, 0));
    // A clone of the origin handle is the same headers: accepted.
    let published = request.clone().commit(draft).unwrap();
    assert_eq!((published.version(), request.len()), (1, 1));
}

#[test]
fn seal_shares_the_map_instead_of_copying_it() {
    let h = SharedHeaders::from(sample());
    h.insert("x-a", v("1")).unwrap();
    let before = h.snapshot();
    let sealed = h.seal().unwrap();
    assert_eq!(sealed.version(), before.version() + 1);
    assert!(sealed.is_sealed() && !before.is_sealed());
    assert_eq!(*sealed, *before);
    assert_eq!(
        address_of(&sealed, "x-a"),
        address_of(&before, "x-a"),
        "a plain seal reads the sealed version's map, it does not copy it"
    );

    // The sealed handle, as the last reference, still moves its map out without a copy.
    let stored = address_of(&before, "x-a");
    drop((before, sealed));
    assert_eq!(address_of(&h.into_header_map(), "x-a"), stored);
}

// ---------------------------------------------------------------------------------------------
// Failure atomicity
// ---------------------------------------------------------------------------------------------

#[test]
fn panicking_update_publishes_nothing_and_leaves_the_handle_usable() {
    let h = SharedHeaders::from(sample());
    h.insert("x-a", v("1")).unwrap();
    let before = h.snapshot();

    let result = catch_unwind(AssertUnwindSafe(|| {
        h.update(|m| {
            m.insert("x-half", v("written"));
            m.clear();
            panic!("closure fails halfway");
        })
    }));
    assert!(result.is_err(), "the panic propagates");
    assert_eq!(h.version(), 1);
    assert!(Snapshot::ptr_eq(&before, &h.snapshot()));
    assert!(!h.contains_key("x-half"));

    // seal_with panicking does not seal.
    let result = catch_unwind(AssertUnwindSafe(|| h.seal_with(|_| panic!("no seal"))));
    assert!(result.is_err());
    assert!(!h.is_sealed());
    assert_eq!(h.version(), 1);

    // The writer lock was released: this thread and another one can still write.
    h.insert("x-b", v("2")).unwrap();
    let other = h.clone();
    std::thread::spawn(move || other.insert("x-c", v("3")).unwrap())
        .join()
        .unwrap();
    assert_eq!(h.version(), 3);
    assert_eq!(h.seal().unwrap().version(), 4);
}

#[test]
fn errors_are_distinct_and_explain_what_to_do() {
    let errors = [
        Error::Sealed { version: 7 },
        Error::MaxSizeReached,
        Error::Conflict {
            expected: 1,
            found: 2,
        },
    ];
    let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert!(messages[0].contains('7'));
    assert!(messages[1].contains("32,768") || messages[1].contains("32768"));
    assert!(messages[2].contains('1') && messages[2].contains('2'));
    assert_ne!(messages[0], messages[1]);
    assert_ne!(messages[1], messages[2]);
    let _: &dyn std::error::Error = &errors[0];
    assert_eq!(errors[0].clone(), errors[0]);
}

// ---------------------------------------------------------------------------------------------
// HeaderMap's capacity limit
// ---------------------------------------------------------------------------------------------

/// Distinct header names `x-fill-0`, `x-fill-1`, ...
fn fill_name(i: usize) -> HeaderName {
    HeaderName::try_from(format!("x-fill-{i}")).unwrap()
}

/// A map holding as many distinct names as `HeaderMap` accepts, and that count.
///
/// `HeaderMap` has 32,768 slots and fills them to 3/4, so the limit on distinct names is 24,576;
/// values appended to an existing name are not limited. The tests find the limit by asking the
/// oracle rather than hard-coding it.
fn full_map() -> (HeaderMap, usize) {
    let mut map = HeaderMap::new();
    let mut i = 0;
    while map.try_insert(fill_name(i), v("x")).is_ok() {
        i += 1;
        assert!(
            i <= 32_768,
            "HeaderMap accepted more than its documented maximum"
        );
    }
    (map, i)
}

#[test]
fn filling_past_the_limit_is_an_error_not_a_panic() {
    let (full, count) = full_map();
    assert_eq!(full.len(), count);

    // Inside `update`, `try_insert` reports the limit; nothing panics. The handle fills up in
    // one write (one clone), exactly as far as a plain HeaderMap does.
    let h = SharedHeaders::new();
    let filled = h
        .update(|m| {
            let mut i = 0;
            while m.try_insert(fill_name(i), v("x")).is_ok() {
                i += 1;
            }
            i
        })
        .unwrap();
    assert_eq!(filled, count);
    assert_eq!(h.len(), count);
    assert_eq!(h.version(), 1);

    // insert and append of a new name: Err(MaxSizeReached), nothing published.
    let before = h.snapshot();
    let new = fill_name(count + 1);
    assert_eq!(h.insert(new.clone(), v("y")), Err(Error::MaxSizeReached));
    assert_eq!(h.append(new.clone(), v("y")), Err(Error::MaxSizeReached));
    assert_eq!(h.version(), 1);
    assert!(Snapshot::ptr_eq(&before, &h.snapshot()));
    assert!(!h.contains_key(&new));
    drop(before);

    // try_insert inside a later update reports the limit to the closure.
    let inner = h.update(|m| m.try_insert(new.clone(), v("y"))).unwrap();
    assert!(inner.is_err());
    assert!(!h.contains_key(&new));
    assert_eq!(h.len(), count);

    // At the limit HeaderMap refuses even a write to an existing name (it reserves room first);
    // the handle answers exactly like the oracle, with an error instead of a panic.
    let mut oracle = full.clone();
    let existing = fill_name(0);
    for name in [existing.clone(), new.clone()] {
        let expected = oracle.try_insert(&name, v("z")).map_err(Error::from);
        assert_eq!(h.insert(&name, v("z")), expected, "insert {name}");
        let expected = oracle.try_append(&name, v("z")).map_err(Error::from);
        assert_eq!(h.append(&name, v("z")), expected, "append {name}");
    }
    assert_eq!(h.version(), 2, "only the update above published");

    // Removing one name makes room again.
    assert_eq!(h.remove(fill_name(2)).unwrap(), oracle.remove(fill_name(2)));
    assert_eq!(
        h.insert(new.clone(), v("y")).unwrap(),
        oracle.try_insert(new.clone(), v("y")).unwrap()
    );
    assert_eq!(h.len(), count);
    assert_eq!(h.version(), 4);
    assert!(h.read(|m| m == &oracle));

    // The same limit through From and replace: a full map is accepted as is.
    let h = SharedHeaders::from(full.clone());
    assert_eq!(h.append(new, v("y")), Err(Error::MaxSizeReached));
    assert_eq!(h.replace(full).unwrap().len(), count);
}

#[test]
fn many_values_of_one_name_behave_like_header_map() {
    // Past 32,768 values of one name HeaderMap keeps accepting appends; so does the handle.
    const VALUES: usize = 33_000;
    let h = SharedHeaders::new();
    let accepted = h
        .update(|m| (0..VALUES).all(|_| m.try_append("x-many", v("x")).is_ok()))
        .unwrap();
    assert!(accepted);
    let mut oracle = HeaderMap::new();
    for _ in 0..VALUES {
        oracle.append("x-many", v("x"));
    }
    let expected = oracle.try_append("x-many", v("y")).map_err(Error::from);
    assert_eq!(h.append("x-many", v("y")), expected);
    assert_eq!(h.len(), oracle.len());
    assert_eq!(h.get_all("x-many").last().unwrap(), "y");
}

// ---------------------------------------------------------------------------------------------
// Publication strategies, seal in place, and the cached reader
// ---------------------------------------------------------------------------------------------

fn both_publications() -> [SharedHeaders; 2] {
    use shared_headers::Publication;
    [
        SharedHeaders::builder()
            .publication(Publication::LockFree)
            .build(),
        SharedHeaders::builder()
            .publication(Publication::Locked)
            .build(),
    ]
}

#[test]
fn a_snapshot_taken_before_the_seal_keeps_its_version_and_stays_unsealed() {
    for headers in both_publications() {
        headers.insert(HOST, v("example.com")).unwrap();
        let before = headers.snapshot();
        let sealed = headers.seal().unwrap();
        // The seal marks the same map sealed in place, but `before` keeps what it read.
        assert_eq!((before.version(), before.is_sealed()), (1, false));
        assert_eq!((sealed.version(), sealed.is_sealed()), (2, true));
        assert_eq!(before.header_map(), sealed.header_map());
        assert!(!Snapshot::ptr_eq(&before, &sealed));
        assert_ne!(before, sealed);
        assert!(Snapshot::ptr_eq(&headers.snapshot(), &sealed));
        assert_eq!(
            headers.insert(ACCEPT, v("*/*")),
            Err(Error::Sealed { version: 2 })
        );
        assert!(format!("{before:?}").contains("sealed: false"));
        assert!(format!("{sealed:?}").contains("sealed: true"));
    }
}

#[test]
fn locked_publication_behaves_like_the_default_for_every_write() {
    for headers in both_publications() {
        assert_eq!(headers.insert(HOST, v("a")).unwrap(), None);
        assert!(!headers.append(ACCEPT, v("1")).unwrap());
        assert!(headers.append(ACCEPT, v("2")).unwrap());
        assert_eq!(headers.remove(HOST).unwrap().unwrap(), "a");
        let draft = headers.draft();
        headers.update(|m| m.insert(HOST, v("b"))).unwrap();
        assert_eq!(
            headers.commit(draft).unwrap_err(),
            Error::Conflict {
                expected: 4,
                found: 5
            }
        );
        let (_, sealed) = headers
            .seal_with(|m| m.insert(USER_AGENT, v("ua")))
            .unwrap();
        assert_eq!(
            (sealed.version(), sealed.is_sealed(), sealed.len()),
            (6, true, 4)
        );
        assert_eq!(headers.seal(), Err(Error::Sealed { version: 6 }));
        assert_eq!(headers.refused_writes(), 0);
        assert_eq!(headers.into_header_map().len(), 4);
    }
}

#[test]
fn reader_is_send_and_follows_every_write_and_the_seal() {
    fn assert_send_static<T: Send + 'static>() {}
    assert_send_static::<shared_headers::Reader>();
    for headers in both_publications() {
        let mut reader = headers.reader();
        assert_eq!((reader.version(), reader.is_sealed()), (0, false));
        assert!(reader.get(HOST).is_none());
        headers.insert(HOST, v("a")).unwrap();
        assert_eq!(reader.get(HOST).unwrap(), "a");
        assert!(reader.contains_key(HOST));
        let kept = reader.snapshot();
        headers.seal().unwrap();
        assert!(reader.is_sealed());
        assert_eq!(reader.version(), 2);
        assert_eq!((kept.version(), kept.is_sealed()), (1, false));
        assert_eq!(reader.read(|m| m.len()), 1);
        // Writes from inside `read` are allowed (refused here: sealed), and do not deadlock.
        assert!(reader.read(|_| headers.insert(ACCEPT, v("x")).is_err()));
        assert_eq!(format!("{reader:?}"), "Reader { .. }", "prints no headers");
    }
    // A reader of an exchange's handle (cached through the handle, not its `Arc<Shared>`).
    let exchange = shared_headers::Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    let mut reader = exchange.response().reader();
    exchange.response().insert(HOST, v("a")).unwrap();
    assert_eq!((reader.get(HOST).unwrap(), reader.version()), (v("a"), 1));
    exchange.commit(shared_headers::Outcome::Answered).unwrap();
    assert!(reader.is_sealed());
}

/// What a `Reader` keeps alive: the version it cached, until a read that finds a newer one.
#[test]
fn reader_keeps_its_cached_version_until_its_next_read() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    struct Owner(Arc<AtomicUsize>);
    impl AsRef<[u8]> for Owner {
        fn as_ref(&self) -> &[u8] {
            b"counted"
        }
    }
    impl Drop for Owner {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }
    for headers in both_publications() {
        let live = Arc::new(AtomicUsize::new(1));
        let value =
            HeaderValue::from_maybe_shared(bytes::Bytes::from_owner(Owner(Arc::clone(&live))))
                .unwrap();
        headers.insert(HOST, value).unwrap();
        let mut reader = headers.reader();
        assert_eq!(reader.get(HOST).unwrap(), "counted");
        headers.insert(HOST, v("other")).unwrap();
        assert_eq!(
            live.load(Ordering::SeqCst),
            1,
            "the reader's cached version is alive"
        );
        assert_eq!(reader.get(HOST).unwrap(), "other");
        assert_eq!(
            live.load(Ordering::SeqCst),
            0,
            "freed by the reader's next read"
        );
    }
}
