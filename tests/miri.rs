//! The crate's real primitives under Miri (`scripts/miri`): small, threaded versions of the
//! core's properties, sized so that Miri (about a thousand times slower than a native run)
//! finishes them in seconds per seed. Natively they run as ordinary, quick tests.
//!
//! Under Miri they run the real `Published` cells (no loom stand-in): arc-swap's `ArcSwap` and
//! its debt lists (the default `Publication::LockFree`), the `parking_lot::RwLock<Arc<_>>` cell
//! (`Publication::Locked`, every exchange handle), the writer lock and its owner word, the
//! `Cached` reader, and the exchange's commit. Miri checks each run for undefined behaviour,
//! data races and leaks, with weak-memory emulation (a load may return an older store that the
//! memory model allows) and a random preemptive scheduler; `scripts/miri` runs several seeds.
//! The assertions check the crate's properties on every explored schedule.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use http::HeaderValue;
use shared_headers::{Exchange, Outcome, Publication, SharedHeaders};

/// Iterations: small under Miri, larger natively (where they cost nothing).
const fn n(miri: usize, native: usize) -> usize {
    if cfg!(miri) { miri } else { native }
}

fn handle(publication: Publication) -> SharedHeaders {
    SharedHeaders::builder().publication(publication).build()
}

fn num(i: usize) -> HeaderValue {
    HeaderValue::from(i as u64)
}

/// One writer publishes versions whose two headers are always equal; two readers (direct reads
/// and a `Reader`) see whole versions only, never going back, and the last version at the end.
fn writer_and_readers(publication: Publication) {
    let writes = n(6, 2_000);
    let headers = handle(publication);
    let start = Arc::new(Barrier::new(3));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (headers, start) = (headers.clone(), Arc::clone(&start));
            thread::spawn(move || {
                let mut reader = headers.reader();
                start.wait();
                let mut last = 0;
                loop {
                    let snap = reader.snapshot();
                    assert_eq!(snap.get("x-a"), snap.get("x-b"), "torn version {snap:?}");
                    assert!(snap.version() >= last, "reader went back");
                    last = snap.version();
                    let direct = headers.snapshot();
                    assert_eq!(direct.get("x-a"), direct.get("x-b"), "torn {direct:?}");
                    assert!(direct.version() >= last, "direct read behind the reader");
                    if direct.version() == writes as u64 {
                        break;
                    }
                    thread::yield_now();
                }
                assert_eq!(reader.version(), writes as u64);
            })
        })
        .collect();
    start.wait();
    for i in 1..=writes {
        headers
            .update(|m| {
                m.insert("x-a", num(i));
                m.insert("x-b", num(i));
            })
            .unwrap();
    }
    for reader in readers {
        reader.join().unwrap();
    }
}

#[test]
fn lock_free_cell_publishes_whole_versions_in_order() {
    writer_and_readers(Publication::LockFree);
}

#[test]
fn locked_cell_publishes_whole_versions_in_order() {
    writer_and_readers(Publication::Locked);
}

/// The `Cached` reader's sequence count: on every thread, a `Reader` read never returns a
/// version older than one a direct read of the same handle already returned on that thread (a
/// read that starts after another finished sees that version or a later one). Without the odd
/// phase of the count (or with `consistent` accepting an odd count), a reader that cached a
/// value loaded during a swap keeps it after a direct read saw the swap's new value. Two
/// writers: the reader threads also race a second writer's swap.
fn reader_never_behind_a_direct_read(publication: Publication) {
    let writes = n(8, 20_000);
    let threads = 2;
    let headers = handle(publication);
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..threads)
        .map(|_| {
            let (headers, done) = (headers.clone(), Arc::clone(&done));
            thread::spawn(move || {
                let mut reader = headers.reader();
                let mut behind = 0u64;
                while !done.load(Ordering::Relaxed) {
                    let cached = reader.version();
                    let direct = headers.version();
                    let again = reader.version();
                    if again < direct || again < cached {
                        behind += 1;
                    }
                }
                behind
            })
        })
        .collect();
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let headers = headers.clone();
            thread::spawn(move || {
                for i in 0..writes / 2 {
                    headers.insert("x-a", num(w * writes + i)).unwrap();
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    done.store(true, Ordering::Relaxed);
    let behind: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert_eq!(
        behind, 0,
        "a Reader returned a version older than a direct read"
    );
}

#[test]
fn lock_free_reader_never_behind_a_direct_read() {
    reader_never_behind_a_direct_read(Publication::LockFree);
}

#[test]
fn locked_reader_never_behind_a_direct_read() {
    reader_never_behind_a_direct_read(Publication::Locked);
}

/// The arc-swap #210 pattern (address reuse): handles tagged with their own identity are
/// created, loaded on another thread while their owner writes, and freed, on several threads;
/// no load returns another handle's state. Under Miri a freed allocation's address is reused
/// (Miri reuses addresses, like a real allocator), and a load through a stale debt of a freed
/// cell would be reported as a use-after-free.
#[test]
fn address_reuse_canary() {
    let rounds = n(3, 500);
    let threads = 2;
    let start = Arc::new(Barrier::new(threads));
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let start = Arc::clone(&start);
            thread::spawn(move || {
                start.wait();
                for r in 0..rounds {
                    let tag = HeaderValue::from_str(&format!("{t}.{r}")).unwrap();
                    let headers = SharedHeaders::new();
                    headers.insert("x-id", tag.clone()).unwrap();
                    let reader = {
                        let (headers, tag) = (headers.clone(), tag.clone());
                        thread::spawn(move || {
                            for _ in 0..2 {
                                assert_eq!(headers.get("x-id").as_ref(), Some(&tag));
                                let mut reader = headers.reader();
                                assert_eq!(reader.get("x-id").as_ref(), Some(&tag));
                            }
                        })
                    };
                    headers.insert("x-n", num(r)).unwrap();
                    assert_eq!(headers.get("x-id").as_ref(), Some(&tag));
                    reader.join().unwrap();
                    drop(headers);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
}

/// The exchange's commit on the real locks and once-cell: of racing commits exactly one wins,
/// and a write racing them either is in the record or was refused.
#[test]
fn racing_commits_have_one_winner_and_lose_no_accepted_write() {
    for _ in 0..n(2, 200) {
        let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
        let _ = exchange.annotations();
        let committers: Vec<_> = [Outcome::Answered, Outcome::TimedOut]
            .into_iter()
            .map(|outcome| {
                let exchange = exchange.clone();
                thread::spawn(move || exchange.commit(outcome).is_ok())
            })
            .collect();
        let writer = {
            let exchange = exchange.clone();
            thread::spawn(move || {
                [
                    exchange.request().insert("x-a", num(1)).is_ok(),
                    exchange.response().insert("x-b", num(2)).is_ok(),
                    exchange.annotations().insert("x-c", num(3)).is_ok(),
                ]
            })
        };
        let wins = committers
            .into_iter()
            .map(|c| c.join().unwrap())
            .filter(|won| *won)
            .count();
        assert_eq!(wins, 1);
        let [request, response, annotation] = writer.join().unwrap();
        let committed = exchange.committed().unwrap();
        assert_eq!(committed.request().contains_key("x-a"), request);
        assert_eq!(committed.response().contains_key("x-b"), response);
        assert_eq!(
            committed.annotations().unwrap().contains_key("x-c"),
            annotation
        );
    }
}
