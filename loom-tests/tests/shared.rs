//! loom models of `SharedHeaders`' publication protocol.
//!
//! Under `--cfg shared_headers_loom`, `src/sync.rs` replaces arc-swap with a loom-visible
//! stand-in (`loom::sync::RwLock<Arc<State>>` for the published value, `loom::sync::Mutex` for the
//! writer lock), so loom explores every interleaving of the crate's own protocol: which version a
//! writer starts from, when it publishes, under which lock, and what a reader can observe.
//! arc-swap itself is not modelled (its reclamation is trusted).
//!
//! Run (release, bounded preemptions):
//!
//! ```text
//! RUSTFLAGS="--cfg shared_headers_loom" LOOM_MAX_PREEMPTIONS=2 \
//!     cargo test --release -p shared-headers-loom-tests --target-dir target/loom
//! ```
//!
//! Every model is small on purpose (2-3 threads, 1-2 operations each).

#![cfg(shared_headers_loom)]

use http::{HeaderMap, HeaderValue};
use loom::thread;
use shared_headers::{Error, SharedHeaders, Snapshot};
use shared_headers_loom_tests::explore;

const COUNTER: &str = "x-counter";

// The distinct outcomes each model reaches under the test command's `LOOM_MAX_PREEMPTIONS=2`
// (lower bounds: a larger bound reaches as many or more). See `explore`.
const MIN_TWO_UPDATES: usize = 2;
const MIN_THREE_UPDATES: usize = 6;
const MIN_HALF: usize = 3;
const MIN_MONOTONIC: usize = 7;
const MIN_ORIGIN: usize = 5;
const MIN_SEAL_IN_PLACE: usize = 13;
const MIN_READER_SEES: usize = 3;
// Model 9 reaches (racing read saw the write: false; later version 1 or 2) only: with the writer
// spawned, loom never runs its whole insert before the main thread's racing read (the shape of
// tokio-rs/loom#392). Its "sees the write after it returned" checks run after the join.
const MIN_LOCKED_CACHE: usize = 2;
const MIN_SECOND_CACHE: usize = 5;
const MIN_SB: usize = 4;

/// Reads the counter header as a number (absent = 0).
fn counter(map: &HeaderMap) -> u64 {
    map.get(COUNTER)
        .map(|v| v.to_str().unwrap().parse().unwrap())
        .unwrap_or(0)
}

/// The read-modify-write every incrementing thread performs, as one `update`; returns the
/// value it wrote (its place in the order of the updates).
fn increment(headers: &SharedHeaders) -> u64 {
    headers
        .update(|m| {
            let next = counter(m) + 1;
            m.insert(COUNTER, HeaderValue::from(next));
            next
        })
        .expect("not sealed")
}

// ---------------------------------------------------------------------------------------------
// 1. No lost update
// ---------------------------------------------------------------------------------------------

/// `writers` threads (the main thread among them) each run one incrementing `update`.
/// Outcome: the value each thread wrote (main thread first), i.e. the order of the updates.
fn concurrent_increments(name: &str, writers: u64, min: usize) {
    explore(name, min, move || {
        let headers = SharedHeaders::new();
        let threads: Vec<_> = (1..writers)
            .map(|_| {
                let h = headers.clone();
                thread::spawn(move || increment(&h))
            })
            .collect();
        let mut order = vec![increment(&headers)];
        order.extend(threads.into_iter().map(|t| t.join().unwrap()));

        let snap = headers.snapshot();
        assert_eq!(counter(&snap), writers, "lost update");
        assert_eq!(
            snap.version(),
            writers,
            "each update publishes exactly one version"
        );
        order
    });
}

/// Property: two concurrent `update`s that each read the counter and write counter + 1 are
/// serialized; the final counter is 2 and the version is 2 (each update published exactly once).
/// Outcomes: both orders.
#[test]
fn two_concurrent_updates_lose_nothing() {
    concurrent_increments("two_concurrent_updates_lose_nothing", 2, MIN_TWO_UPDATES);
}

/// Property: the same with three concurrent `update`s: the counter and the version are both 3.
/// Outcomes: the orders of the three updates.
#[test]
fn three_concurrent_updates_lose_nothing() {
    concurrent_increments(
        "three_concurrent_updates_lose_nothing",
        3,
        MIN_THREE_UPDATES,
    );
}

// ---------------------------------------------------------------------------------------------
// 2. No half-applied update
// ---------------------------------------------------------------------------------------------

/// Property: an `update` that sets two headers together is never seen half-applied. A concurrent
/// reader, through `snapshot` or through `read`, sees both old values at version 1 or both new
/// values at version 2, nothing in between.
#[test]
fn update_of_two_headers_is_never_seen_half_applied() {
    explore(
        "update_of_two_headers_is_never_seen_half_applied",
        MIN_HALF,
        || {
            let headers = SharedHeaders::new();
            headers
                .update(|m| {
                    m.insert("x-token", HeaderValue::from_static("old"));
                    m.insert("x-expires", HeaderValue::from_static("old"));
                })
                .unwrap();

            let writer = headers.clone();
            let t = thread::spawn(move || {
                writer
                    .update(|m| {
                        m.insert("x-token", HeaderValue::from_static("new"));
                        m.insert("x-expires", HeaderValue::from_static("new"));
                    })
                    .unwrap();
            });

            let check = |m: &HeaderMap, version: u64| {
                let (token, expires) = (&m["x-token"], &m["x-expires"]);
                assert_eq!(token, expires, "half-applied update seen");
                let expected = if version == 1 { "old" } else { "new" };
                assert_eq!(token, expected, "version {version} does not match content");
            };
            let snap = headers.snapshot();
            check(&snap, snap.version());
            let read = headers.read(|m| {
                assert_eq!(m["x-token"], m["x-expires"], "half-applied update seen");
                m["x-token"] == "new"
            });

            t.join().unwrap();
            check(&headers.snapshot(), 2);
            // Outcome: (the snapshot's version, whether the later read saw the update).
            (snap.version(), read)
        },
    );
}

// ---------------------------------------------------------------------------------------------
// 3. Seal racing a write
// ---------------------------------------------------------------------------------------------

/// Property: a write racing `seal` is either contained in the sealed snapshot (it returned `Ok`)
/// or refused with `Err(Sealed)` carrying the sealed version (and absent from it); never accepted
/// and missing. The sealed snapshot never changes afterwards, and the version is 1 + accepted.
#[test]
fn seal_racing_a_write_never_loses_an_accepted_write() {
    explore(
        "seal_racing_a_write_never_loses_an_accepted_write",
        2,
        || {
            let headers = SharedHeaders::new();
            let writer = headers.clone();
            let t = thread::spawn(move || writer.insert("x-late", HeaderValue::from_static("1")));

            let sealed = headers.seal().expect("the only sealer wins");
            let write = t.join().unwrap();

            match write {
                Ok(None) => {
                    assert!(sealed.contains_key("x-late"), "accepted write missing");
                    assert_eq!(sealed.version(), 2);
                }
                Err(Error::Sealed { version }) => {
                    assert!(!sealed.contains_key("x-late"));
                    assert_eq!(version, sealed.version());
                    assert_eq!(sealed.version(), 1);
                }
                other => panic!("unexpected write result {other:?}"),
            }
            // Sealed means final: the current snapshot is the sealed one, and writes keep failing.
            assert_eq!(headers.snapshot(), sealed);
            assert!(headers.remove("x-late").is_err());
            assert!(Snapshot::ptr_eq(&headers.snapshot(), &sealed));
            // Outcome: whether the write was accepted (before the seal) or refused.
            write.is_ok()
        },
    );
}

// ---------------------------------------------------------------------------------------------
// 4. Concurrent seals
// ---------------------------------------------------------------------------------------------

/// Property: of three concurrent `seal` calls exactly one returns `Ok`; the others return
/// `Err(Sealed)` with the winner's version, and the current snapshot is the winner's.
#[test]
fn exactly_one_of_three_concurrent_seals_wins() {
    explore("exactly_one_of_three_concurrent_seals_wins", 3, || {
        let headers = SharedHeaders::new();
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let h = headers.clone();
                thread::spawn(move || h.seal())
            })
            .collect();
        let mut results = vec![headers.seal()];
        results.extend(threads.into_iter().map(|t| t.join().unwrap()));

        let winners: Vec<&Snapshot> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(winners.len(), 1, "exactly one seal must win");
        let winner = winners[0];
        assert_eq!(winner.version(), 1);
        for r in &results {
            if let Err(e) = r {
                assert_eq!(*e, Error::Sealed { version: 1 });
            }
        }
        assert!(Snapshot::ptr_eq(&headers.snapshot(), winner));
        // Outcome: which of the three won.
        results.iter().position(Result::is_ok)
    });
}

// ---------------------------------------------------------------------------------------------
// 5. Versions seen by a reader
// ---------------------------------------------------------------------------------------------

/// Property: the versions a reader sees never decrease, whichever read method it uses, and a
/// snapshot's version always matches its content (the writer's n-th write stores value n).
#[test]
fn reader_versions_are_monotonic_and_match_content() {
    explore(
        "reader_versions_are_monotonic_and_match_content",
        MIN_MONOTONIC,
        || {
            let headers = SharedHeaders::new();
            let writer = headers.clone();
            let t = thread::spawn(move || {
                writer.insert("x-v", HeaderValue::from(1u64)).unwrap();
                writer.insert("x-v", HeaderValue::from(2u64)).unwrap();
            });

            let content = |m: &HeaderMap| -> u64 {
                m.get("x-v")
                    .map(|v| v.to_str().unwrap().parse().unwrap())
                    .unwrap_or(0)
            };
            let first = headers.snapshot();
            assert_eq!(
                content(&first),
                first.version(),
                "version does not match content"
            );
            let second = headers.version();
            assert!(second >= first.version(), "version went backwards");
            let third = headers.read(content);
            assert!(third >= second, "content went backwards");

            t.join().unwrap();
            assert_eq!(headers.version(), 2);
            // Outcome: the three versions seen.
            (first.version(), second, third)
        },
    );
}

// ---------------------------------------------------------------------------------------------
// 6. Concurrent draft commits
// ---------------------------------------------------------------------------------------------

/// Property: two drafts taken from the same base and committed concurrently: exactly one commit
/// succeeds (version 1, its content), the other gets `Conflict { expected: 0, found: 1 }`.
#[test]
fn concurrent_commits_of_drafts_from_one_base_exactly_one_wins() {
    explore(
        "concurrent_commits_of_drafts_from_one_base_exactly_one_wins",
        2,
        || {
            let headers = SharedHeaders::new();
            let mut a = headers.draft();
            let mut b = headers.draft();
            a.insert("x-who", HeaderValue::from_static("a"));
            b.insert("x-who", HeaderValue::from_static("b"));

            let other = headers.clone();
            let t = thread::spawn(move || other.commit(b));
            let ra = headers.commit(a);
            let rb = t.join().unwrap();

            let (won, lost, name) = match (ra, rb) {
                (Ok(s), Err(e)) => (s, e, "a"),
                (Err(e), Ok(s)) => (s, e, "b"),
                (ra, rb) => panic!("exactly one commit must win: {ra:?} / {rb:?}"),
            };
            assert_eq!(
                lost,
                Error::Conflict {
                    expected: 0,
                    found: 1
                }
            );
            assert_eq!(won.version(), 1);
            assert_eq!(won["x-who"], name);
            assert_eq!(headers.snapshot(), won);
            // Outcome: which draft won.
            name
        },
    );
}

// ---------------------------------------------------------------------------------------------
// 7. The origin scenario
// ---------------------------------------------------------------------------------------------

/// Property (the scenario the crate exists for): a handler writes a header then seals, a timeout
/// seals with its own marker, and a logger tries to seal and then reads. Exactly one seal wins;
/// the logger's read is exactly the winner's snapshot; a handler write that was accepted is in it.
#[test]
fn origin_scenario_logger_sees_exactly_the_winner() {
    explore(
        "origin_scenario_logger_sees_exactly_the_winner",
        MIN_ORIGIN,
        || {
            let headers = SharedHeaders::new();

            let handler = headers.clone();
            let handler = thread::spawn(move || {
                let wrote = handler.insert("x-status", HeaderValue::from_static("200"));
                (wrote.is_ok(), handler.seal())
            });
            let timeout = headers.clone();
            let timeout = thread::spawn(move || {
                timeout
                    .seal_with(|m| {
                        m.insert("x-status", HeaderValue::from_static("504"));
                    })
                    .map(|((), s)| s)
            });

            // The logger runs on the main thread.
            let logger_seal = headers.seal();
            let logged = headers.snapshot();

            let (handler_wrote, handler_seal) = handler.join().unwrap();
            let timeout_seal = timeout.join().unwrap();

            let results = [&handler_seal, &timeout_seal, &logger_seal];
            let winners: Vec<&Snapshot> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
            assert_eq!(winners.len(), 1, "exactly one seal must win");
            let winner = winners[0];
            assert!(winner.is_sealed());
            assert!(
                Snapshot::ptr_eq(&logged, winner),
                "logger saw another snapshot"
            );
            for r in results {
                if let Err(e) = r {
                    assert_eq!(
                        *e,
                        Error::Sealed {
                            version: winner.version()
                        }
                    );
                }
            }
            if timeout_seal.is_ok() {
                assert_eq!(winner["x-status"], "504");
            } else if handler_wrote {
                assert_eq!(winner["x-status"], "200", "accepted handler write missing");
            }
            assert_eq!(winner.version(), u64::from(handler_wrote) + 1);
            // Outcome: (which seal won: handler, timeout, logger; whether the handler's write was
            // accepted).
            (results.iter().position(|r| r.is_ok()), handler_wrote)
        },
    );
}

// ---------------------------------------------------------------------------------------------
// 7b. A seal in place: a snapshot's version, seal and content stay one version
// ---------------------------------------------------------------------------------------------

/// What a snapshot reports, read once: (version, sealed, value of `x-v`).
fn triple(snap: &Snapshot) -> (u64, bool, Option<HeaderValue>) {
    (snap.version(), snap.is_sealed(), snap.get("x-v").cloned())
}

/// Property: a seal marks the current version sealed in place (no new version is stored), yet
/// every snapshot is one consistent version: a reader racing "insert, then seal" sees exactly
/// (0, unsealed, nothing), (1, unsealed, "1") or (2, sealed, "1"), through `snapshot`, through
/// a `Reader`, and through `version`/`is_sealed`; and a snapshot taken before the seal keeps
/// reporting what it reported when taken (unsealed, its old version) after the seal.
#[test]
fn seal_in_place_keeps_every_snapshot_one_consistent_version() {
    explore(
        "seal_in_place_keeps_every_snapshot_one_consistent_version",
        MIN_SEAL_IN_PLACE,
        || {
            let headers = SharedHeaders::new();
            let mut reader = headers.reader();
            let writer = headers.clone();
            let t = thread::spawn(move || {
                writer.insert("x-v", HeaderValue::from(1u64)).unwrap();
                writer.seal().unwrap()
            });

            let allowed = |t: &(u64, bool, Option<HeaderValue>)| match t {
                (0, false, None) => true,
                (1, false, Some(v)) | (2, true, Some(v)) => v == "1",
                _ => false,
            };
            let snap = headers.snapshot();
            let first = triple(&snap);
            assert!(allowed(&first), "inconsistent snapshot {first:?}");
            let cached = reader.snapshot();
            let second = triple(&cached);
            assert!(allowed(&second), "inconsistent reader snapshot {second:?}");
            assert!(second.0 >= first.0, "reader went backwards");
            // Two reads may see two versions; but sealed is final, so a version read after
            // `is_sealed` returned true is the sealed one.
            let sealed_seen = headers.is_sealed();
            let version = headers.version();
            assert!(version >= second.0, "version went backwards");
            if sealed_seen {
                assert_eq!(version, 2, "sealed, yet a later read saw version {version}");
            }

            let sealed = t.join().unwrap();
            assert_eq!(triple(&sealed), (2, true, Some(HeaderValue::from(1u64))));
            // Taken before (or after) the seal: unchanged by it.
            assert_eq!(
                triple(&snap),
                first,
                "a snapshot changed after it was taken"
            );
            assert_eq!(
                triple(&cached),
                second,
                "a snapshot changed after it was taken"
            );
            assert!(Snapshot::ptr_eq(&headers.snapshot(), &sealed));
            assert!(Snapshot::ptr_eq(&reader.snapshot(), &sealed));
            // Outcome: (snapshot's version, reader's version, `is_sealed`, then `version`).
            (first.0, second.0, sealed_seen, version)
        },
    );
}

/// Property (model 7c): a `Reader` made before a write sees the write once the write has
/// returned (its cache never keeps a value older than the last completed write), is never
/// behind a direct read made before it, and what it sees is a whole version whose content
/// matches its version. (Checked to fail, "stale read after the write returned", with the store
/// count bumped outside the write lock.)
#[test]
fn reader_sees_every_completed_write() {
    explore("reader_sees_every_completed_write", MIN_READER_SEES, || {
        let headers = SharedHeaders::new();
        let mut reader = headers.reader();
        let writer = headers.clone();
        let t = thread::spawn(move || {
            writer.insert("x-v", HeaderValue::from(1u64)).unwrap();
            writer
        });
        let direct = headers.snapshot();
        let snap = reader.snapshot();
        assert!(
            snap.version() >= direct.version(),
            "the reader is behind a direct read"
        );
        let content = u64::from(snap.contains_key("x-v"));
        assert_eq!(content, snap.version(), "version does not match content");
        let writer = t.join().unwrap();
        // The write has returned: the reader's next read sees it.
        assert_eq!(reader.version(), 1, "stale read after the write returned");
        assert_eq!(reader.get("x-v").unwrap(), "1");
        drop(writer);
        // Outcome: (the direct read's version, the reader's).
        (direct.version(), snap.version())
    });
}

// ---------------------------------------------------------------------------------------------
// 9. The per-thread read cache of request-scoped (`Locked`) handles
// ---------------------------------------------------------------------------------------------

/// A request-scoped handle, as the server layer makes them.
fn locked() -> SharedHeaders {
    SharedHeaders::builder()
        .publication(shared_headers::Publication::Locked)
        .build()
}

/// Property (model 9): reads of a `Locked` handle, served from the reading thread's cache
/// while it is current, see every write that returned before them, never go backwards, see a
/// whole version, and never serve one handle's headers for another handle at the same count
/// (two handles written once each, read one after the other on one thread). The reader reads
/// `a` while another thread writes it, then `b`, then `a` again after the write returned.
/// (Checked to fail with the cache compared by count and not by id: "another handle's
/// headers".)
#[test]
fn locked_reads_from_the_thread_cache_are_current_and_never_another_handles() {
    explore(
        "locked_reads_from_the_thread_cache_are_current_and_never_another_handles",
        MIN_LOCKED_CACHE,
        || {
            let (a, b) = (locked(), locked());
            a.insert("x-h", HeaderValue::from_static("a")).unwrap();
            b.insert("x-h", HeaderValue::from_static("b")).unwrap();
            // Both handles get an id in this thread's cache (given on a first cached read), and
            // the cache holds `a`, at the count `b` is at too.
            assert_eq!(b.get("x-h").unwrap(), "b");
            assert_eq!(a.get("x-h").unwrap(), "a");
            let writer = a.clone();
            let t = thread::spawn(move || {
                writer.insert("x-v", HeaderValue::from(1u64)).unwrap();
                writer
            });
            let (seen_write, own) = a.read(|m| (m.contains_key("x-v"), m["x-h"] == "a"));
            assert!(own, "another handle's headers");
            assert_eq!(b.get("x-h").unwrap(), "b", "another handle's headers");
            let later = a.snapshot();
            assert!(
                later.version() >= 1 + u64::from(seen_write),
                "went backwards"
            );
            assert_eq!(
                later.contains_key("x-v"),
                later.version() == 2,
                "version does not match content"
            );
            let writer = t.join().unwrap();
            // The write has returned: this thread's next reads of `a` see it.
            assert_eq!(
                a.get("x-v").map(|v| v == "1"),
                Some(true),
                "stale read after the write returned"
            );
            assert_eq!(a.version(), 2, "stale read after the write returned");
            assert_eq!(b.get("x-h").unwrap(), "b", "another handle's headers");
            drop(writer);
            // Outcome: (whether the racing read saw the write, the later snapshot's version).
            (seen_write, later.version())
        },
    );
}

/// Property (model 9b): a thread reading a `Locked` handle through its own cache while
/// another thread writes it sees versions in order, and sees the write once it knows the write
/// returned (a flag the writer sets after the write, Release/Acquire); the writing thread's own
/// reads see its write. (Checked to fail with the cached count loaded after the value, "stale
/// read after the write returned": the reader caches the old value under the new count.)
#[test]
fn a_second_threads_cache_of_a_locked_handle_follows_the_write() {
    use loom::sync::Arc;
    use loom::sync::atomic::{AtomicBool, Ordering};
    explore(
        "a_second_threads_cache_of_a_locked_handle_follows_the_write",
        MIN_SECOND_CACHE,
        || {
            let headers = locked();
            assert_eq!(headers.version(), 0); // the main thread caches version 0
            let written = Arc::new(AtomicBool::new(false));
            let (reader, done) = (headers.clone(), Arc::clone(&written));
            let t = thread::spawn(move || {
                let first = reader.version();
                let returned = done.load(Ordering::Acquire);
                let second = reader.read(|m| m.len() as u64);
                assert!(second >= first, "went backwards");
                if returned {
                    assert_eq!(second, 1, "stale read after the write returned");
                }
                (first, returned, second)
            });
            headers.insert("x-v", HeaderValue::from(1u64)).unwrap();
            written.store(true, Ordering::Release);
            assert_eq!(headers.version(), 1, "stale read after the write returned");
            // Outcome: what the second thread saw: (first version, the flag, second version).
            t.join().unwrap()
        },
    );
}

// ---------------------------------------------------------------------------------------------
// 10. Seal order: a later seal implies every earlier one
// ---------------------------------------------------------------------------------------------

/// How the spawned reader of model 10 reads the two handles.
#[derive(Clone, Copy)]
enum SealReader {
    /// `is_sealed` on the handles.
    Direct,
    /// `is_sealed` on a `Reader` of each handle (made on the reading thread).
    Readers,
}

/// One execution of model 10: the main thread seals `first`, then `second` (as
/// `Exchange::commit` seals the request, then the response), with a reader spawned before the
/// seals and ordered after them by nothing but what it reads. Returns what the reader saw:
/// (second sealed, first sealed).
fn seal_in_order(
    first: SharedHeaders,
    second: SharedHeaders,
    how: SealReader,
    seal: impl FnOnce(),
) -> (bool, bool) {
    let (a, b) = (first.clone(), second.clone());
    let reader = thread::spawn(move || match how {
        SealReader::Direct => (b.is_sealed(), a.is_sealed()),
        SealReader::Readers => {
            let (mut a, mut b) = (a.reader(), b.reader());
            (b.is_sealed(), a.is_sealed())
        }
    });
    seal();
    let seen = reader.join().unwrap();
    assert!(first.is_sealed() && second.is_sealed());
    assert!(
        !(seen.0 && !seen.1),
        "a later seal without an earlier one: the second handle sealed, the first not"
    );
    seen
}

/// Two handles with one header each (so a seal marks the version in place, as the server
/// layer's handles are sealed), of the given publication.
fn written_pair(publication: shared_headers::Publication) -> (SharedHeaders, SharedHeaders) {
    let make = || {
        let headers = SharedHeaders::builder().publication(publication).build();
        headers
            .insert("x-h", HeaderValue::from_static("1"))
            .unwrap();
        headers
    };
    (make(), make())
}

/// Model 10 on two handles sealed one after the other by `seal`.
fn seal_order(name: &str, publication: shared_headers::Publication, how: SealReader) {
    let seen = explore(name, 3, move || {
        let (first, second) = written_pair(publication);
        let (a, b) = (first.clone(), second.clone());
        seal_in_order(first, second, how, move || {
            a.seal().unwrap();
            b.seal().unwrap();
        })
    });
    // Every outcome the stronger ordering allows: neither seal seen, only the earlier, both.
    assert_eq!(seen.len(), 3);
}

/// Property (model 10, `LockFree` handles read directly): a reader that sees a handle sealed
/// sees sealed every handle that the same thread sealed before it. It holds by the seal's
/// Release store and `Snapshot`'s Acquire load of it (`Writer::seal_as_is`, `State::seal`):
/// with either weakened to `Relaxed` this model reaches "the second sealed, the first not"
/// and fails (checked by hand; the naive control below shows loom reaches that outcome in this
/// shape). Outcomes reached (second, first): (false, false), (false, true), (true, true).
#[test]
fn a_later_seal_implies_every_earlier_one() {
    seal_order(
        "a_later_seal_implies_every_earlier_one",
        shared_headers::Publication::LockFree,
        SealReader::Direct,
    );
}

/// Property (model 10b): the same through a `Reader` of each handle.
#[test]
fn a_later_seal_implies_every_earlier_one_through_readers() {
    seal_order(
        "a_later_seal_implies_every_earlier_one_through_readers",
        shared_headers::Publication::LockFree,
        SealReader::Readers,
    );
}

/// Property (model 10c): the same on `Locked` handles (the server layer's), read through the
/// reading thread's read cache.
#[test]
fn a_later_seal_implies_every_earlier_one_locked() {
    seal_order(
        "a_later_seal_implies_every_earlier_one_locked",
        shared_headers::Publication::Locked,
        SealReader::Direct,
    );
}

/// Property (model 10d): an exchange's commit seals its request, then its response: a reader
/// that sees the response sealed sees the request sealed (the server docs' "the handles are
/// sealed at that moment"), on `Locked` handles as the server layer makes them.
#[test]
fn an_exchange_reader_that_sees_the_response_sealed_sees_the_request_sealed() {
    let seen = explore(
        "an_exchange_reader_that_sees_the_response_sealed_sees_the_request_sealed",
        3,
        || {
            let (request, response) = written_pair(shared_headers::Publication::Locked);
            let exchange = shared_headers::Exchange::new(request, response);
            let committer = exchange.clone();
            seal_in_order(
                exchange.request().clone(),
                exchange.response().clone(),
                SealReader::Direct,
                move || drop(committer.commit(shared_headers::Outcome::Answered).unwrap()),
            )
        },
    );
    assert_eq!(seen.len(), 3);
}

/// Two seal flags stored `Relaxed`, one after the other, and loaded `Relaxed`: the seal as it
/// was before issue 28.
struct RelaxedSeals {
    first: loom::sync::atomic::AtomicBool,
    second: loom::sync::atomic::AtomicBool,
}

/// Property (negative control for model 10): with the seals stored and loaded `Relaxed`, loom
/// finds a reader (spawned, as in model 10) that sees the second seal and not the first. This
/// shows that model 10's shape reaches the outcome its property forbids.
#[test]
#[should_panic(expected = "a later seal without an earlier one")]
fn negative_control_relaxed_seals_show_a_later_seal_without_an_earlier_one() {
    use loom::sync::atomic::Ordering::Relaxed;
    loom::model(|| {
        let seals = std::sync::Arc::new(RelaxedSeals {
            first: loom::sync::atomic::AtomicBool::new(false),
            second: loom::sync::atomic::AtomicBool::new(false),
        });
        let other = std::sync::Arc::clone(&seals);
        let reader = thread::spawn(move || (other.second.load(Relaxed), other.first.load(Relaxed)));
        seals.first.store(true, Relaxed);
        seals.second.store(true, Relaxed);
        let (second, first) = reader.join().unwrap();
        assert!(!(second && !first), "a later seal without an earlier one");
    });
}

// ---------------------------------------------------------------------------------------------
// 11. Across handles: store buffering is allowed (a documented weakness, not a bug)
// ---------------------------------------------------------------------------------------------

/// How model 11's threads read the other thread's handle.
#[derive(Clone, Copy)]
enum SbRead {
    /// `Locked` handles read directly: a hit in the reading thread's cache.
    LockedCache,
    /// `LockFree` handles read through a `Reader` made before the race.
    Reader,
}

/// One execution of model 11: thread 1 writes `a`, then reads `b`; thread 2 writes `b`, then
/// reads `a`; each has read the other's handle once before (so its read cache or `Reader`
/// holds it). Returns (thread 1 saw `b`'s write, thread 2 saw `a`'s write).
fn store_buffering(how: SbRead) -> (bool, bool) {
    let publication = match how {
        SbRead::LockedCache => shared_headers::Publication::Locked,
        SbRead::Reader => shared_headers::Publication::LockFree,
    };
    let (a, b) = written_pair(publication);
    // Each thread's view of the other's handle: a cached read, or a `Reader`.
    let view = move |h: SharedHeaders| -> Box<dyn FnMut() -> bool + Send> {
        match how {
            SbRead::LockedCache => {
                drop(h.get("x-w")); // cached by this thread (before or after the write)
                Box::new(move || h.get("x-w").is_some())
            }
            SbRead::Reader => {
                let mut reader = h.reader();
                drop(reader.get("x-w"));
                Box::new(move || reader.get("x-w").is_some())
            }
        }
    };
    let mut sees_b = view(b.clone());
    let (a2, b2) = (a.clone(), b.clone());
    let other = thread::spawn(move || {
        let mut sees_a = view(a2);
        b2.insert("x-w", HeaderValue::from_static("1")).unwrap();
        sees_a()
    });
    a.insert("x-w", HeaderValue::from_static("1")).unwrap();
    let saw_b = sees_b();
    let saw_a = other.join().unwrap();
    (saw_b, saw_a)
}

/// Property (model 11, on `Locked` handles read from the thread's read cache): reads of two
/// handles are ordered only by happens-before. Each thread writes one handle and then reads
/// the other; loom reaches the outcome where both reads miss both completed writes (store
/// buffering: the C++20/Rust memory model allows it, and the crate documents it in
/// `docs::internals`). The assertion is that the outcome is reached: if a change made it
/// unreachable, the documentation would be too weak, not wrong; this model says which.
#[test]
fn store_buffering_across_two_handles_is_allowed() {
    let seen = explore(
        "store_buffering_across_two_handles_is_allowed",
        MIN_SB,
        || store_buffering(SbRead::LockedCache),
    );
    assert!(
        seen.contains(&(false, false)),
        "store buffering not reached: {seen:?}"
    );
}

/// Property (model 11b): the same through `Reader`s of `LockFree` handles.
#[test]
fn store_buffering_across_two_handles_is_allowed_through_readers() {
    let seen = explore(
        "store_buffering_across_two_handles_is_allowed_through_readers",
        MIN_SB,
        || store_buffering(SbRead::Reader),
    );
    assert!(
        seen.contains(&(false, false)),
        "store buffering not reached: {seen:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// 8. Negative control
// ---------------------------------------------------------------------------------------------

/// The naive copy-on-write design: load the current map, clone it, change the clone, store it,
/// with no writer lock. Each step is atomic (the same loom `RwLock<Arc<_>>` stand-in the crate
/// uses), but the load-to-store window is not.
struct Naive {
    current: loom::sync::RwLock<std::sync::Arc<HeaderMap>>,
}

impl Naive {
    fn increment(&self) {
        let loaded = std::sync::Arc::clone(&self.current.read().unwrap());
        let mut next = HeaderMap::clone(&loaded);
        next.insert(COUNTER, HeaderValue::from(counter(&loaded) + 1));
        *self.current.write().unwrap() = std::sync::Arc::new(next);
    }
}

/// Property (negative control): the naive design above loses an update, and loom finds the
/// interleaving (both threads load version 0 before either stores). This shows the models above
/// can fail, and that the writer lock is what makes `update` correct.
#[test]
#[should_panic(expected = "lost update")]
fn negative_control_naive_load_clone_store_loses_an_update() {
    loom::model(|| {
        let naive = std::sync::Arc::new(Naive {
            current: loom::sync::RwLock::new(std::sync::Arc::new(HeaderMap::new())),
        });
        let other = std::sync::Arc::clone(&naive);
        let t = thread::spawn(move || other.increment());
        naive.increment();
        t.join().unwrap();
        assert_eq!(counter(&naive.current.read().unwrap()), 2, "lost update");
    });
}

/// A second naive design, for model 3: the sealed flag lives outside the published map and the
/// seal does not take the writer lock. A writer checks the flag, the seal sets it and takes its
/// snapshot, then the writer stores: the write was accepted but is missing from the sealed
/// snapshot.
struct NaiveSeal {
    current: loom::sync::RwLock<std::sync::Arc<HeaderMap>>,
    sealed: loom::sync::atomic::AtomicBool,
    writer: loom::sync::Mutex<()>,
}

impl NaiveSeal {
    /// Returns whether the write was accepted.
    fn insert(&self, name: &'static str) -> bool {
        let _writer = self.writer.lock().unwrap();
        if self.sealed.load(loom::sync::atomic::Ordering::SeqCst) {
            return false;
        }
        let mut next = HeaderMap::clone(&self.current.read().unwrap());
        next.insert(name, HeaderValue::from_static("1"));
        *self.current.write().unwrap() = std::sync::Arc::new(next);
        true
    }

    fn seal(&self) -> std::sync::Arc<HeaderMap> {
        self.sealed
            .store(true, loom::sync::atomic::Ordering::SeqCst);
        std::sync::Arc::clone(&self.current.read().unwrap())
    }
}

/// Property (negative control for model 3): with the flag checked apart from the data, loom
/// finds a write that returned "accepted" yet is missing from the sealed snapshot. The crate
/// avoids this by keeping the flag inside the published value and sealing under the writer lock.
#[test]
#[should_panic(expected = "accepted write missing")]
fn negative_control_seal_flag_outside_the_published_value_loses_a_write() {
    loom::model(|| {
        let naive = std::sync::Arc::new(NaiveSeal {
            current: loom::sync::RwLock::new(std::sync::Arc::new(HeaderMap::new())),
            sealed: loom::sync::atomic::AtomicBool::new(false),
            writer: loom::sync::Mutex::new(()),
        });
        let other = std::sync::Arc::clone(&naive);
        let t = thread::spawn(move || other.insert("x-late"));
        let sealed = naive.seal();
        if t.join().unwrap() {
            assert!(sealed.contains_key("x-late"), "accepted write missing");
        }
    });
}

/// A third naive design, for model 7b: the version and seal live in one word beside the
/// published map (per handle, not per version), read after loading the map. A reader can load
/// the map of one version and the word of another.
struct NaiveWord {
    current: loom::sync::RwLock<std::sync::Arc<HeaderMap>>,
    /// version << 1 | sealed
    word: loom::sync::atomic::AtomicU64,
    writer: loom::sync::Mutex<()>,
}

impl NaiveWord {
    fn insert_then_seal(&self) {
        let _writer = self.writer.lock().unwrap();
        let mut next = HeaderMap::clone(&self.current.read().unwrap());
        next.insert("x-v", HeaderValue::from_static("1"));
        *self.current.write().unwrap() = std::sync::Arc::new(next);
        self.word
            .store(1 << 1, loom::sync::atomic::Ordering::SeqCst);
        self.word
            .store(2 << 1 | 1, loom::sync::atomic::Ordering::SeqCst);
    }

    fn snapshot(&self) -> (u64, bool, bool) {
        let map = std::sync::Arc::clone(&self.current.read().unwrap());
        let word = self.word.load(loom::sync::atomic::Ordering::SeqCst);
        (word >> 1, word & 1 == 1, map.contains_key("x-v"))
    }
}

/// Property (negative control for model 7b): with the version and seal in a handle-level word
/// beside the map, loom finds a snapshot that says "sealed at version 2" but lacks the write of
/// version 1. The crate keeps the seal inside each published version instead.
#[test]
#[should_panic(expected = "inconsistent snapshot")]
fn negative_control_version_word_beside_the_map_mixes_versions() {
    loom::model(|| {
        let naive = std::sync::Arc::new(NaiveWord {
            current: loom::sync::RwLock::new(std::sync::Arc::new(HeaderMap::new())),
            word: loom::sync::atomic::AtomicU64::new(0),
            writer: loom::sync::Mutex::new(()),
        });
        let other = std::sync::Arc::clone(&naive);
        let t = thread::spawn(move || other.insert_then_seal());
        let (version, _sealed, has_write) = naive.snapshot();
        assert_eq!(has_write, version >= 1, "inconsistent snapshot");
        t.join().unwrap();
    });
}

/// A naive per-reader cache, for model 7c: the store count is bumped before the value is
/// replaced, outside the lock that replaces it.
struct NaiveCache {
    value: loom::sync::RwLock<std::sync::Arc<u64>>,
    stores: loom::sync::atomic::AtomicU64,
}

impl NaiveCache {
    fn store(&self, v: u64) {
        self.stores
            .fetch_add(1, loom::sync::atomic::Ordering::SeqCst);
        *self.value.write().unwrap() = std::sync::Arc::new(v);
    }

    fn load(&self, cache: &mut (u64, std::sync::Arc<u64>)) -> u64 {
        let stores = self.stores.load(loom::sync::atomic::Ordering::SeqCst);
        if stores != cache.0 {
            *cache = (stores, std::sync::Arc::clone(&self.value.read().unwrap()));
        }
        *cache.1
    }
}

/// Property (negative control for model 7c): with the count bumped apart from the value, loom
/// finds a reader that caches the old value under the new count and keeps returning it after
/// the write returned. The crate bumps the count under the write lock that swaps the value.
#[test]
#[should_panic(expected = "stale read after the write returned")]
fn negative_control_cache_count_bumped_apart_from_the_value_goes_stale() {
    loom::model(|| {
        let naive = std::sync::Arc::new(NaiveCache {
            value: loom::sync::RwLock::new(std::sync::Arc::new(0)),
            stores: loom::sync::atomic::AtomicU64::new(0),
        });
        let mut cache = (0, std::sync::Arc::new(0));
        let other = std::sync::Arc::clone(&naive);
        let t = thread::spawn(move || other.store(1));
        naive.load(&mut cache);
        t.join().unwrap();
        assert_eq!(
            naive.load(&mut cache),
            1,
            "stale read after the write returned"
        );
    });
}
