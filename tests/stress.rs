//! Thread stress: invariants under real contention, not timings.
//!
//! * no lost update: counters incremented through `update` by several writers end at exactly the
//!   number of increments, and the version counts every increment once;
//! * no half-applied snapshot: an `update` that sets N headers to one value is never seen by a
//!   reader with some headers old and some new, through `snapshot` or `read`;
//! * per reader, versions never decrease and always match the content;
//! * optimistic drafts retried on `Conflict` lose nothing either;
//! * seal racing writers: one winner, and every accepted write is in the sealed snapshot;
//! * no leak: once every handle, snapshot and draft is dropped, every version is freed.
//!
//! The leak check counts live header values rather than bytes: each value is a `Bytes` built with
//! `Bytes::from_owner` around an owner whose `Drop` decrements a counter. Every version's map
//! holds such values (map clones share them), so a version that is never freed keeps its values
//! alive and the counter above zero. (`tests/stress_long.rs` counts bytes too, with the
//! crate-provided counting allocator `stats_alloc`, so no `unsafe` is written here.)

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, mpsc};
use std::thread;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use shared_headers::{Error, SharedHeaders, Snapshot};

/// Parses a numeric header (absent = 0).
fn number(map: &HeaderMap, name: &str) -> u64 {
    map.get(name)
        .map(|v| v.to_str().unwrap().parse().unwrap())
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------------------------
// No lost update
// ---------------------------------------------------------------------------------------------

#[test]
fn concurrent_updates_lose_no_increment() {
    const WRITERS: usize = 4;
    const INCREMENTS: u64 = 5_000;
    const READERS: usize = 2;

    let headers = SharedHeaders::new();
    let done = AtomicBool::new(false);
    let reads = AtomicUsize::new(0);

    thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let headers = headers.clone();
                s.spawn(move || {
                    let own = format!("x-writer-{w}");
                    for _ in 0..INCREMENTS {
                        headers
                            .update(|m| {
                                let total = number(m, "x-total") + 1;
                                let mine = number(m, &own) + 1;
                                m.insert("x-total", HeaderValue::from(total));
                                m.insert(HeaderName::try_from(own.as_str()).unwrap(), mine.into());
                            })
                            .unwrap();
                    }
                })
            })
            .collect();
        for _ in 0..READERS {
            let headers = headers.clone();
            let (done, reads) = (&done, &reads);
            s.spawn(move || {
                let mut last = 0;
                loop {
                    // Read at least once, even if the writers are already done.
                    let finished = done.load(Ordering::Acquire);
                    let snap = headers.snapshot();
                    let total = number(&snap, "x-total");
                    // Every published version is exactly one increment.
                    assert_eq!(snap.version(), total, "version does not match content");
                    assert!(snap.version() >= last, "version went backwards");
                    last = snap.version();
                    // The total and the per-writer counters come from the same version.
                    let sum: u64 = (0..WRITERS)
                        .map(|w| number(&snap, &format!("x-writer-{w}")))
                        .sum();
                    assert_eq!(sum, total, "inconsistent snapshot");
                    reads.fetch_add(1, Ordering::Relaxed);
                    if finished {
                        break;
                    }
                }
            });
        }
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, Ordering::Release);
    });

    let total = WRITERS as u64 * INCREMENTS;
    let snap = headers.snapshot();
    assert_eq!(number(&snap, "x-total"), total, "lost update");
    assert_eq!(snap.version(), total);
    for w in 0..WRITERS {
        assert_eq!(number(&snap, &format!("x-writer-{w}")), INCREMENTS);
    }
    assert!(reads.load(Ordering::Relaxed) > 0, "readers never ran");
}

// ---------------------------------------------------------------------------------------------
// No half-applied snapshot
// ---------------------------------------------------------------------------------------------

#[test]
fn readers_never_see_a_half_applied_update() {
    const WRITERS: usize = 3;
    const UPDATES: u64 = 3_000;
    const N: usize = 8;
    let names: Vec<HeaderName> = (0..N)
        .map(|i| HeaderName::try_from(format!("x-field-{i}")).unwrap())
        .collect();

    let mut initial = HeaderMap::new();
    for name in &names {
        initial.insert(name, HeaderValue::from(0u64));
    }
    let headers = SharedHeaders::from(initial);
    let done = AtomicBool::new(false);

    // Checks one consistent view: all N fields equal, equal to the version, in a stable order.
    let check = |m: &HeaderMap, version: Option<u64>| -> u64 {
        let values: Vec<u64> = names.iter().map(|n| number(m, n.as_str())).collect();
        assert!(
            values.iter().all(|v| *v == values[0]),
            "half-applied update seen: {values:?}"
        );
        if let Some(version) = version {
            assert_eq!(values[0], version, "version does not match content");
        }
        assert!(m.keys().eq(names.iter()), "iteration order changed");
        values[0]
    };

    thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|_| {
                let headers = headers.clone();
                let names = &names;
                s.spawn(move || {
                    for _ in 0..UPDATES {
                        headers
                            .update(|m| {
                                let next = number(m, names[0].as_str()) + 1;
                                for name in names {
                                    m.insert(name, HeaderValue::from(next));
                                }
                            })
                            .unwrap();
                    }
                })
            })
            .collect();
        for reader in 0..2 {
            let headers = headers.clone();
            let (done, check) = (&done, &check);
            s.spawn(move || {
                let mut last = 0;
                loop {
                    let finished = done.load(Ordering::Acquire);
                    let value = if reader == 0 {
                        let snap = headers.snapshot();
                        check(&snap, Some(snap.version()))
                    } else {
                        headers.read(|m| check(m, None))
                    };
                    assert!(value >= last, "content went backwards: {value} < {last}");
                    last = value;
                    if finished {
                        break;
                    }
                }
            });
        }
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, Ordering::Release);
    });

    let total = WRITERS as u64 * UPDATES;
    assert_eq!(check(&headers.snapshot(), Some(total)), total);
}

// ---------------------------------------------------------------------------------------------
// Optimistic drafts
// ---------------------------------------------------------------------------------------------

#[test]
fn drafts_retried_on_conflict_lose_nothing() {
    const THREADS: usize = 3;
    const COMMITS: u64 = 1_000;
    let headers = SharedHeaders::new();

    thread::scope(|s| {
        for _ in 0..THREADS {
            let headers = headers.clone();
            s.spawn(move || {
                for _ in 0..COMMITS {
                    loop {
                        let mut draft = headers.draft();
                        let next = number(&draft, "x-count") + 1;
                        draft.insert("x-count", HeaderValue::from(next));
                        match headers.commit(draft) {
                            Ok(snap) => {
                                assert_eq!(snap.version(), next);
                                break;
                            }
                            // Someone published first: take a new draft and retry.
                            Err(Error::Conflict { expected, found }) => {
                                assert!(found > expected, "{found} <= {expected}");
                            }
                            Err(other) => panic!("unexpected {other}"),
                        }
                    }
                }
            });
        }
    });

    let total = THREADS as u64 * COMMITS;
    assert_eq!(number(&headers.snapshot(), "x-count"), total, "lost commit");
    assert_eq!(headers.version(), total);
}

// ---------------------------------------------------------------------------------------------
// Seal racing writers
// ---------------------------------------------------------------------------------------------

#[test]
fn seal_racing_writers_keeps_every_accepted_write() {
    const ROUNDS: usize = 300;
    for round in 0..ROUNDS {
        let headers = SharedHeaders::new();
        let start = Barrier::new(3);
        let (writer, sealers) = thread::scope(|s| {
            let writer = {
                let (headers, start) = (headers.clone(), &start);
                s.spawn(move || {
                    start.wait();
                    let mut accepted = Vec::new();
                    // Bounded, so a late sealer cannot make the map (and each clone) grow.
                    for i in 0..64u64 {
                        match headers.append("x-write", HeaderValue::from(i)) {
                            Ok(_) => accepted.push(i),
                            Err(Error::Sealed { version }) => return (accepted, Some(version)),
                            Err(other) => panic!("unexpected {other}"),
                        }
                    }
                    (accepted, None)
                })
            };
            let sealers: Vec<_> = (0..2)
                .map(|_| {
                    let (headers, start) = (headers.clone(), &start);
                    s.spawn(move || {
                        start.wait();
                        headers.seal()
                    })
                })
                .collect();
            let sealers: Vec<Result<Snapshot, Error>> =
                sealers.into_iter().map(|t| t.join().unwrap()).collect();
            (writer.join().unwrap(), sealers)
        });

        let winners: Vec<&Snapshot> = sealers.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: exactly one seal wins");
        let sealed = winners[0];
        let (accepted, refused_at) = writer;
        if let Some(version) = refused_at {
            assert_eq!(
                version,
                sealed.version(),
                "round {round}: refusal names the seal"
            );
        }
        // Every accepted write is in the sealed snapshot, in order, and nothing else is.
        let in_snapshot: Vec<u64> = sealed
            .get_all("x-write")
            .iter()
            .map(|v| v.to_str().unwrap().parse().unwrap())
            .collect();
        assert_eq!(
            in_snapshot, accepted,
            "round {round}: accepted write missing"
        );
        assert_eq!(sealed.version(), accepted.len() as u64 + 1);
        assert!(Snapshot::ptr_eq(sealed, &headers.snapshot()));
    }
}

// ---------------------------------------------------------------------------------------------
// No leak
// ---------------------------------------------------------------------------------------------

/// The owner of one header value's bytes; counts itself in `live` while it exists.
struct Counted {
    text: String,
    live: Arc<AtomicUsize>,
}

impl AsRef<[u8]> for Counted {
    fn as_ref(&self) -> &[u8] {
        self.text.as_bytes()
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A header value whose bytes are freed (and counted) only when no map references it any more.
fn counted(live: &Arc<AtomicUsize>, n: u64) -> HeaderValue {
    live.fetch_add(1, Ordering::SeqCst);
    let owner = Counted {
        text: format!("value-{n}"),
        live: Arc::clone(live),
    };
    HeaderValue::from_maybe_shared(Bytes::from_owner(owner)).unwrap()
}

#[test]
fn counted_values_are_shared_by_map_clones_not_copied() {
    // Sanity check of the technique: clones of a map share the counted value, and it is freed
    // exactly when the last map holding it is dropped.
    let live = Arc::new(AtomicUsize::new(0));
    let mut a = HeaderMap::new();
    a.insert("x-a", counted(&live, 1));
    let b = a.clone();
    assert_eq!(live.load(Ordering::SeqCst), 1);
    drop(a);
    assert_eq!(live.load(Ordering::SeqCst), 1);
    assert_eq!(b["x-a"], "value-1");
    drop(b);
    assert_eq!(live.load(Ordering::SeqCst), 0);
}

#[test]
fn old_versions_are_freed_as_soon_as_their_last_snapshot_drops() {
    let live = Arc::new(AtomicUsize::new(0));
    let headers = SharedHeaders::new();
    // Every version replaces the one counted value: version k holds value k only.
    let mut kept = Vec::new();
    for k in 1..=100 {
        headers.insert("x-counted", counted(&live, k)).unwrap();
        kept.push(headers.snapshot());
    }
    assert_eq!(
        live.load(Ordering::SeqCst),
        100,
        "each kept snapshot keeps its version"
    );
    kept.truncate(10);
    assert_eq!(
        live.load(Ordering::SeqCst),
        11,
        "versions 11..=99 must be freed"
    );
    kept.clear();
    assert_eq!(
        live.load(Ordering::SeqCst),
        1,
        "only the current version is alive"
    );
    let sealed = headers.seal().unwrap();
    drop(headers);
    assert_eq!(
        live.load(Ordering::SeqCst),
        1,
        "the sealed snapshot keeps it"
    );
    drop(sealed);
    assert_eq!(live.load(Ordering::SeqCst), 0);
}

#[test]
fn dropping_every_handle_snapshot_and_draft_frees_every_version() {
    const WRITERS: usize = 3;
    const WRITES: u64 = 2_000;
    let live = Arc::new(AtomicUsize::new(0));

    let mut initial = HeaderMap::new();
    initial.insert("x-initial", counted(&live, 0));
    let headers = SharedHeaders::from(initial);
    let (keep_tx, keep_rx) = mpsc::channel::<Snapshot>();

    thread::scope(|s| {
        for w in 0..WRITERS {
            let (headers, live) = (headers.clone(), &live);
            s.spawn(move || {
                for i in 0..WRITES {
                    let n = w as u64 * WRITES + i + 1;
                    let name = if i % 2 == 0 { "x-even" } else { "x-odd" };
                    match i % 5 {
                        0 => {
                            headers.append(name, counted(live, n)).unwrap();
                        }
                        1 => {
                            headers
                                .update(|m| {
                                    m.insert(name, counted(live, n));
                                    m.remove("x-gone");
                                    m.append("x-gone", counted(live, n));
                                })
                                .unwrap();
                        }
                        2 => {
                            let mut draft = headers.draft();
                            draft.insert(name, counted(live, n));
                            let _ = headers.commit(draft); // a conflict drops the draft
                        }
                        3 => {
                            headers.remove(name).unwrap();
                        }
                        _ => {
                            headers.insert(name, counted(live, n)).unwrap();
                        }
                    }
                }
            });
        }
        // A reader that keeps snapshots of many versions in another thread for a while.
        let reader = headers.clone();
        s.spawn(move || {
            for _ in 0..500 {
                keep_tx.send(reader.snapshot()).unwrap();
                thread::yield_now();
            }
        });
        s.spawn(move || {
            let kept: Vec<Snapshot> = keep_rx.iter().collect();
            assert_eq!(kept.len(), 500);
            drop(kept);
        });
    });

    let sealed = headers.seal().unwrap();
    let map = headers.clone().into_header_map();
    assert!(
        live.load(Ordering::SeqCst) > 0,
        "the current version must still be alive (the check can fail)"
    );
    drop((headers, sealed, map));
    assert_eq!(
        live.load(Ordering::SeqCst),
        0,
        "some version is still alive after every handle and snapshot was dropped"
    );
}
