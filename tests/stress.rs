//! Thread stress: invariants under real contention, not timings.
//!
//! * no lost update: counters incremented through `update` by several writers end at exactly the
//!   number of increments, and the version counts every increment once;
//! * no half-applied snapshot: an `update` that sets N headers to one value is never seen by a
//!   reader with some headers old and some new, through `snapshot` or `read`;
//! * per reader, versions never decrease and always match the content;
//! * optimistic drafts retried on `Conflict` lose nothing either;
//! * seal racing writers: one winner, and every accepted write is in the sealed snapshot;
//! * no leak: once every handle, snapshot and draft is dropped, every version is freed;
//! * a mixed workload (module `mixed`): writers, drafters, readers holding snapshots and two
//!   racing sealers on one handle per round, with and without limits, checking no lost update,
//!   no torn snapshot, monotonic versions, commit-once, the refused-write count and the limits.
//!   It runs in two configurations of the same code: short in `cargo test`, and long
//!   (`#[ignore]`, release, `STRESS_SECS`, run by `scripts/test-all`), which also checks after
//!   every round that live heap bytes and allocations are back at their starting level.
//!
//! The leak check counts live header values rather than bytes: each value is a `Bytes` built with
//! `Bytes::from_owner` around an owner whose `Drop` decrements a counter. Every version's map
//! holds such values (map clones share them), so a version that is never freed keeps its values
//! alive and the counter above zero. This works while other tests run in parallel, which a
//! process-wide counting allocator does not; the long configuration uses one (`stats_alloc`).

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
    // A thread that read a `Locked` handle (every handle with `rwlock-backend`) keeps the last
    // version it read in its per-thread read cache until it reads another or exits, and a
    // scoped thread's thread-locals are destroyed just after `thread::scope` returns: wait for
    // them, boundedly (a version that is never freed still fails).
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while live.load(Ordering::SeqCst) != 0 && std::time::Instant::now() < until {
        thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(
        live.load(Ordering::SeqCst),
        0,
        "some version is still alive after every handle and snapshot was dropped"
    );
}

// ---------------------------------------------------------------------------------------------
// The mixed workload: every kind of thread on one handle per round, in two configurations
// ---------------------------------------------------------------------------------------------

mod mixed {
    use std::collections::VecDeque;
    use std::sync::Barrier;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
    use std::time::{Duration, Instant};

    use http::HeaderValue;
    use http::header::HeaderName;
    use shared_headers::{Error, SharedHeaders, Snapshot};
    use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

    // The process-wide counting allocator: only the long configuration reads it, and it runs
    // alone (`--ignored` selects it alone), so nothing else moves the counts meanwhile.
    #[global_allocator]
    static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

    /// Live heap bytes and live allocations of the whole process.
    fn live() -> (i64, i64) {
        let s = GLOBAL.stats();
        // (`realloc`s are already in `bytes_allocated`/`bytes_deallocated` as their size change.)
        let bytes = s.bytes_allocated as i64 - s.bytes_deallocated as i64;
        let blocks = s.allocations as i64 - s.deallocations as i64;
        (bytes, blocks)
    }

    const WRITERS: usize = 4;
    const DRAFTERS: usize = 2;
    const READERS: usize = 4;
    const MAX_ENTRIES: usize = 48;

    #[derive(Default)]
    struct Counts {
        rounds: AtomicU64,
        reads: AtomicU64,
        snapshots_held: AtomicU64,
        writes: AtomicU64,
        commits: AtomicU64,
        conflicts: AtomicU64,
        refused_sealed: AtomicU64,
        refused_limit: AtomicU64,
        seals: AtomicU64,
    }

    fn count_of(snap: &Snapshot, name: &str) -> u64 {
        snap.get(name)
            .and_then(|v| v.to_str().ok()?.parse().ok())
            .unwrap_or(0)
    }

    fn num(n: u64) -> HeaderValue {
        HeaderValue::from(n)
    }

    /// Increments `x-count` and `x-count-copy` together; returns the new count.
    fn bump(m: &mut http::HeaderMap) -> Result<u64, http::header::MaxSizeReached> {
        let next = m
            .get("x-count")
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
            .unwrap_or(0)
            + 1;
        m.try_insert("x-count", num(next))?;
        m.try_insert("x-count-copy", num(next))?;
        Ok(next)
    }

    /// One round: a fresh handle, every kind of thread, a seal race, then checks and drops.
    fn round(limited: bool, length: Duration, counts: &Counts) {
        let headers = if limited {
            SharedHeaders::builder()
                .max_entries(MAX_ENTRIES)
                .sensitive([http::HeaderName::from_static("x-secret")])
                .build()
        } else {
            SharedHeaders::new()
        };
        let increments = AtomicU64::new(0);
        // Writes (not seals) refused with `Sealed` this round, as the threads saw them.
        let late = AtomicU64::new(0);
        let stop = AtomicBool::new(false);
        let start = Barrier::new(WRITERS + DRAFTERS + READERS + 1);
        let mut own = [0u64; WRITERS];

        std::thread::scope(|s| {
            let mut writers = Vec::new();
            for i in 0..WRITERS {
                let (h, increments, start, late) = (headers.clone(), &increments, &start, &late);
                writers.push(s.spawn(move || {
                    let mine = HeaderName::from_bytes(format!("x-w{i}").as_bytes()).unwrap();
                    let mut ok = 0u64;
                    let mut step = 0u64;
                    start.wait();
                    loop {
                        step += 1;
                        // Shared counter: a read-modify-write inside one atomic update.
                        let r = match h.update(bump) {
                            Ok(Ok(_)) => {
                                increments.fetch_add(1, Relaxed);
                                Ok(())
                            }
                            Ok(Err(_)) => unreachable!("map cannot be full"),
                            Err(e) => Err(e),
                        };
                        // Own counter: read, then insert (only this thread writes this name).
                        let r = r.and_then(|()| {
                            let next = h
                                .get(&mine)
                                .map_or(0, |v| v.to_str().unwrap().parse().unwrap());
                            assert_eq!(next, ok, "writer {i} lost one of its own updates");
                            h.insert(&mine, num(next + 1)).map(|_| ok += 1)
                        });
                        // A growing log that the limit trims, and a secret.
                        let r = r.and_then(|()| match h.append("x-log", num(step)) {
                            Err(Error::LimitExceeded { .. }) => {
                                counts.refused_limit.fetch_add(1, Relaxed);
                                h.remove("x-log").map(drop)
                            }
                            other => other.map(drop),
                        });
                        let r = r.and_then(|()| h.insert("x-secret", num(step)).map(drop));
                        match r {
                            Ok(()) => {
                                counts.writes.fetch_add(4, Relaxed);
                            }
                            Err(Error::Sealed { .. }) => {
                                counts.refused_sealed.fetch_add(1, Relaxed);
                                late.fetch_add(1, Relaxed);
                                return ok;
                            }
                            Err(Error::LimitExceeded { .. }) => {
                                counts.refused_limit.fetch_add(1, Relaxed);
                            }
                            Err(e) => panic!("unexpected error {e}"),
                        }
                    }
                }));
            }
            for _ in 0..DRAFTERS {
                let (h, increments, start, late) = (headers.clone(), &increments, &start, &late);
                s.spawn(move || {
                    start.wait();
                    loop {
                        let mut draft = h.draft();
                        bump(&mut draft).unwrap();
                        match h.commit(draft) {
                            Ok(_) => {
                                increments.fetch_add(1, Relaxed);
                                counts.commits.fetch_add(1, Relaxed);
                            }
                            Err(Error::Conflict { expected, found }) => {
                                assert!(found > expected, "conflict went backwards");
                                counts.conflicts.fetch_add(1, Relaxed);
                            }
                            Err(Error::Sealed { .. }) => {
                                counts.refused_sealed.fetch_add(1, Relaxed);
                                late.fetch_add(1, Relaxed);
                                return;
                            }
                            Err(Error::LimitExceeded { .. }) => {
                                counts.refused_limit.fetch_add(1, Relaxed);
                            }
                            Err(e) => panic!("unexpected error {e}"),
                        }
                    }
                });
            }
            for r in 0..READERS {
                let (h, stop, start) = (headers.clone(), &stop, &start);
                s.spawn(move || {
                    let mut held: VecDeque<Snapshot> = VecDeque::new();
                    let (mut last_version, mut last_count, mut seen_sealed) = (0, 0, false);
                    start.wait();
                    let mut n = 0u64;
                    while !stop.load(Relaxed) {
                        n += 1;
                        let snap = h.snapshot();
                        let count = count_of(&snap, "x-count");
                        assert_eq!(count, count_of(&snap, "x-count-copy"), "torn snapshot");
                        assert!(snap.version() >= last_version, "version went backwards");
                        assert!(count >= last_count, "counter went backwards");
                        assert!(!seen_sealed || snap.is_sealed(), "unsealed after sealed");
                        if limited {
                            assert!(snap.len() <= MAX_ENTRIES, "limit broken: {}", snap.len());
                            assert!(snap.get("x-secret").is_none_or(|v| v.is_sensitive()));
                        }
                        (last_version, last_count) = (snap.version(), count);
                        seen_sealed = snap.is_sealed();
                        // The cheap reads agree with the rules too.
                        let (a, b) =
                            h.read(|m| (m.get("x-count").cloned(), m.get("x-count-copy").cloned()));
                        assert_eq!(a, b, "torn read");
                        let _ = h.get("x-log");
                        // Hold a few snapshots (of different versions) for a while.
                        if n % (r as u64 + 2) == 0 {
                            held.push_back(snap);
                            counts.snapshots_held.fetch_add(1, Relaxed);
                            if held.len() > 16 {
                                held.pop_front();
                            }
                        }
                    }
                    counts.reads.fetch_add(n * 3, Relaxed);
                });
            }

            start.wait();
            std::thread::sleep(length);
            // Two sealers race: exactly one wins.
            let sealers: Vec<_> = (0..2)
                .map(|_| {
                    let h = headers.clone();
                    s.spawn(move || h.seal())
                })
                .collect();
            let results: Vec<_> = sealers.into_iter().map(|t| t.join().unwrap()).collect();
            let winners: Vec<&Snapshot> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
            assert_eq!(winners.len(), 1, "exactly one seal must win: {results:?}");
            let sealed = winners[0].clone();
            for r in &results {
                if let Err(e) = r {
                    assert_eq!(
                        *e,
                        Error::Sealed {
                            version: sealed.version()
                        }
                    );
                }
            }
            counts.seals.fetch_add(1, Relaxed);
            for (slot, w) in own.iter_mut().zip(writers) {
                *slot = w.join().unwrap();
            }
            stop.store(true, Relaxed);
            assert_eq!(headers.snapshot(), sealed, "changed after the seal");
        });

        // The handle's own count of refused writes misses none and counts no refused seal.
        assert_eq!(
            headers.refused_writes(),
            late.load(Relaxed),
            "refused writes miscounted"
        );
        let last = headers.snapshot();
        assert!(last.is_sealed());
        assert_eq!(
            count_of(&last, "x-count"),
            increments.load(Relaxed),
            "lost update"
        );
        for (i, ok) in own.iter().enumerate() {
            assert_eq!(
                count_of(&last, &format!("x-w{i}")),
                *ok,
                "writer {i} lost an update"
            );
        }
        if limited {
            assert!(
                !format!("{last:?}").contains("\"x-secret\": \""),
                "secret printed"
            );
        }
        counts.rounds.fetch_add(1, Relaxed);
    }

    /// The short configuration, run by `cargo test`: a few short rounds of each kind. It checks
    /// every property of a round; memory is checked by the drop-counted values above instead
    /// (other tests of this binary allocate concurrently).
    #[test]
    fn mixed_workload_short() {
        let counts = Counts::default();
        for i in 0..4 {
            round(i % 2 == 1, Duration::from_millis(60), &counts);
        }
        assert_eq!(counts.rounds.load(Relaxed), 4);
        assert!(counts.reads.load(Relaxed) > 0 && counts.writes.load(Relaxed) > 0);
    }

    /// The long configuration: rounds of 250 ms for `STRESS_SECS` (default 60), checking after each
    /// that memory is back where it started. Run in release, alone:
    /// `STRESS_SECS=60 cargo test --release --test stress -- --ignored --nocapture`.
    #[test]
    #[ignore = "long: run with --ignored in release, bounded by STRESS_SECS"]
    fn mixed_workload_long() {
        const ROUND: Duration = Duration::from_millis(250);
        let secs: u64 = std::env::var("STRESS_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(60);
        let deadline = Instant::now() + Duration::from_secs(secs);
        let counts = Counts::default();

        // Warm up once: the first threads allocate process-wide structures that stay (arc-swap's
        // per-thread debt nodes are kept for reuse, std's thread bookkeeping).
        round(false, ROUND, &counts);
        round(true, ROUND, &counts);
        let (base_bytes, base_blocks) = live();
        let mut peak = 0i64;

        let mut i = 0u64;
        while Instant::now() < deadline {
            round(i % 2 == 1, ROUND, &counts);
            i += 1;
            // Everything of the round is dropped: memory is back where it started.
            let (bytes, blocks) = live();
            peak = peak.max(bytes - base_bytes);
            assert!(
                bytes - base_bytes < 64 * 1024 && blocks - base_blocks < 256,
                "round {i}: memory did not return: +{} bytes, +{} allocations",
                bytes - base_bytes,
                blocks - base_blocks
            );
        }
        let (bytes, blocks) = live();
        let c = |a: &AtomicU64| a.load(Relaxed);
        println!(
            "mixed_workload_long: {secs}s, {} rounds, {} reads, {} snapshots held, {} writes, \
             {} draft commits, {} conflicts, {} writes refused after seal, {} refused by limit, \
             {} seals; memory after: {:+} bytes, {:+} allocations vs start (largest after a round: \
             {:+} bytes)",
            c(&counts.rounds),
            c(&counts.reads),
            c(&counts.snapshots_held),
            c(&counts.writes),
            c(&counts.commits),
            c(&counts.conflicts),
            c(&counts.refused_sealed),
            c(&counts.refused_limit),
            c(&counts.seals),
            bytes - base_bytes,
            blocks - base_blocks,
            peak,
        );
        assert!(c(&counts.rounds) >= 3);
    }
}
