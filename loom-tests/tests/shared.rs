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

const COUNTER: &str = "x-counter";

/// Reads the counter header as a number (absent = 0).
fn counter(map: &HeaderMap) -> u64 {
    map.get(COUNTER)
        .map(|v| v.to_str().unwrap().parse().unwrap())
        .unwrap_or(0)
}

/// The read-modify-write every incrementing thread performs, as one `update`.
fn increment(headers: &SharedHeaders) {
    headers
        .update(|m| {
            let next = counter(m) + 1;
            m.insert(COUNTER, HeaderValue::from(next));
        })
        .expect("not sealed");
}

// ---------------------------------------------------------------------------------------------
// 1. No lost update
// ---------------------------------------------------------------------------------------------

/// `writers` threads (the main thread among them) each run one incrementing `update`.
fn concurrent_increments(writers: u64) {
    loom::model(move || {
        let headers = SharedHeaders::new();
        let threads: Vec<_> = (1..writers)
            .map(|_| {
                let h = headers.clone();
                thread::spawn(move || increment(&h))
            })
            .collect();
        increment(&headers);
        for t in threads {
            t.join().unwrap();
        }

        let snap = headers.snapshot();
        assert_eq!(counter(&snap), writers, "lost update");
        assert_eq!(
            snap.version(),
            writers,
            "each update publishes exactly one version"
        );
    });
}

/// Property: two concurrent `update`s that each read the counter and write counter + 1 are
/// serialized; the final counter is 2 and the version is 2 (each update published exactly once).
#[test]
fn two_concurrent_updates_lose_nothing() {
    concurrent_increments(2);
}

/// Property: the same with three concurrent `update`s: the counter and the version are both 3.
#[test]
fn three_concurrent_updates_lose_nothing() {
    concurrent_increments(3);
}

// ---------------------------------------------------------------------------------------------
// 2. No half-applied update
// ---------------------------------------------------------------------------------------------

/// Property: an `update` that sets two headers together is never seen half-applied. A concurrent
/// reader, through `snapshot` or through `read`, sees both old values at version 1 or both new
/// values at version 2, nothing in between.
#[test]
fn update_of_two_headers_is_never_seen_half_applied() {
    loom::model(|| {
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
        headers.read(|m| assert_eq!(m["x-token"], m["x-expires"], "half-applied update seen"));

        t.join().unwrap();
        check(&headers.snapshot(), 2);
    });
}

// ---------------------------------------------------------------------------------------------
// 3. Seal racing a write
// ---------------------------------------------------------------------------------------------

/// Property: a write racing `seal` is either contained in the sealed snapshot (it returned `Ok`)
/// or refused with `Err(Sealed)` carrying the sealed version (and absent from it); never accepted
/// and missing. The sealed snapshot never changes afterwards, and the version is 1 + accepted.
#[test]
fn seal_racing_a_write_never_loses_an_accepted_write() {
    loom::model(|| {
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
    });
}

// ---------------------------------------------------------------------------------------------
// 4. Concurrent seals
// ---------------------------------------------------------------------------------------------

/// Property: of three concurrent `seal` calls exactly one returns `Ok`; the others return
/// `Err(Sealed)` with the winner's version, and the current snapshot is the winner's.
#[test]
fn exactly_one_of_three_concurrent_seals_wins() {
    loom::model(|| {
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
    });
}

// ---------------------------------------------------------------------------------------------
// 5. Versions seen by a reader
// ---------------------------------------------------------------------------------------------

/// Property: the versions a reader sees never decrease, whichever read method it uses, and a
/// snapshot's version always matches its content (the writer's n-th write stores value n).
#[test]
fn reader_versions_are_monotonic_and_match_content() {
    loom::model(|| {
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
    });
}

// ---------------------------------------------------------------------------------------------
// 6. Concurrent draft commits
// ---------------------------------------------------------------------------------------------

/// Property: two drafts taken from the same base and committed concurrently: exactly one commit
/// succeeds (version 1, its content), the other gets `Conflict { expected: 0, found: 1 }`.
#[test]
fn concurrent_commits_of_drafts_from_one_base_exactly_one_wins() {
    loom::model(|| {
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
    });
}

// ---------------------------------------------------------------------------------------------
// 7. The origin scenario
// ---------------------------------------------------------------------------------------------

/// Property (the scenario the crate exists for): a handler writes a header then seals, a timeout
/// seals with its own marker, and a logger tries to seal and then reads. Exactly one seal wins;
/// the logger's read is exactly the winner's snapshot; a handler write that was accepted is in it.
#[test]
fn origin_scenario_logger_sees_exactly_the_winner() {
    loom::model(|| {
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
    });
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
