//! Long stress test, `#[ignore]`d by default. Run it in release, bounded by `STRESS_SECS`
//! (default 60):
//!
//! ```text
//! STRESS_SECS=60 cargo test --release --test stress_long -- --ignored --nocapture
//! ```
//!
//! Many threads share one handle per round: writers (`update`, `insert`, `append`, `remove`),
//! drafters (`draft` + `commit`, retrying on conflict), readers (`snapshot`, `get`, `read`,
//! holding snapshots for a while), and two sealers racing at the end of the round. Every round
//! then drops everything. Properties asserted:
//!
//! * **no lost update**: the shared counter equals the number of successful increments, and each
//!   writer's own counter equals its number of successful writes;
//! * **no torn snapshot**: two headers always written together are always read together;
//! * **versions are monotonic** for every reader, and so is the counter along them;
//! * **commit-once**: exactly one sealer wins, nothing changes after the seal, and
//!   `refused_writes()` counts exactly the writes refused after it (not the losing seal);
//! * **limits hold**: no reader ever sees more entries than the round's limit;
//! * **memory returns to its starting level** after every round: old versions are reclaimed once
//!   their last reader drops (live bytes and live allocations are counted by a counting global
//!   allocator in this test binary).

use std::collections::VecDeque;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use http::HeaderValue;
use http::header::HeaderName;
use shared_headers::{Error, SharedHeaders, Snapshot};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

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
const ROUND: Duration = Duration::from_millis(250);
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
fn round(limited: bool, counts: &Counts) {
    let headers = if limited {
        SharedHeaders::builder()
            .max_entries(MAX_ENTRIES)
            .sensitive(["x-secret"])
            .mark_sensitive(true)
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
        std::thread::sleep(ROUND);
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

#[test]
#[ignore = "long: run with --ignored in release, bounded by STRESS_SECS"]
fn stress_long() {
    let secs: u64 = std::env::var("STRESS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let counts = Counts::default();

    // Warm up once: the first threads allocate process-wide structures that stay (arc-swap's
    // per-thread debt nodes are kept for reuse, std's thread bookkeeping).
    round(false, &counts);
    round(true, &counts);
    let (base_bytes, base_blocks) = live();
    let mut peak = 0i64;

    let mut i = 0u64;
    while Instant::now() < deadline {
        round(i % 2 == 1, &counts);
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
        "stress_long: {secs}s, {} rounds, {} reads, {} snapshots held, {} writes, \
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

/// Limits and redaction cost nothing to handles that do not use them: wrapping a map is two
/// allocations (the shared cell and the first version), and a configured policy adds exactly one.
/// (Not ignored: this is the only test of this binary that `cargo test` runs.)
#[test]
fn plain_handles_allocate_twice() {
    assert_eq!(
        allocations_of(|| SharedHeaders::from(http::HeaderMap::new())),
        2
    );
    assert_eq!(allocations_of(|| SharedHeaders::builder().build()), 2);
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
