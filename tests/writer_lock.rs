//! The writer lock's owner word under contention: a re-entrant write panics (instead of
//! deadlocking) however the lock is handed from thread to thread.
//!
//! The owner word must be cleared *before* the mutex is released. Cleared after, a thread that
//! takes the mutex in between and stores its own token has that token overwritten with 0: its
//! re-entrant write is no longer recognised and waits for the lock its own thread holds
//! forever. Here several threads take the lock in a tight loop and each re-enters inside its
//! closure; a watchdog fails the test ("deadlocked") instead of letting it hang. Alone in its
//! binary because it silences the panic hook (thousands of expected panics).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use http::HeaderValue;
use shared_headers::SharedHeaders;

const THREADS: usize = 3;
/// Stops each thread after this many rounds or this budget, whichever comes first: a bound on
/// the test's time, not a speed target.
const ROUNDS: usize = 200_000;
const BUDGET: Duration = Duration::from_millis(1_500);

#[test]
fn reentrant_writes_under_contention_always_panic() {
    let headers = SharedHeaders::new();
    std::panic::set_hook(Box::new(|_| {}));
    let (tx, rx) = mpsc::channel();
    for _ in 0..THREADS {
        let (headers, tx) = (headers.clone(), tx.clone());
        thread::spawn(move || {
            let start = Instant::now();
            let mut rounds = 0;
            while rounds < ROUNDS && start.elapsed() < BUDGET {
                let mut panicked = false;
                headers
                    .update(|m| {
                        m.insert("x-n", HeaderValue::from(rounds as u64));
                        panicked = catch_unwind(AssertUnwindSafe(|| {
                            let _ = headers.insert("x-inner", HeaderValue::from_static("1"));
                        }))
                        .is_err();
                    })
                    .unwrap();
                assert!(panicked, "a re-entrant write did not panic");
                rounds += 1;
            }
            let _ = tx.send(rounds);
        });
    }
    drop(tx);
    let watchdog = Instant::now() + Duration::from_secs(10);
    let results: Vec<_> = (0..THREADS)
        .map(|_| rx.recv_timeout(watchdog.saturating_duration_since(Instant::now())))
        .collect();
    let _ = std::panic::take_hook(); // the default hook again, for the failures below
    let mut total = 0;
    for result in results {
        match result {
            Ok(rounds) => total += rounds,
            Err(_) => panic!("deadlocked: a re-entrant write under contention waited for itself"),
        }
    }
    assert!(total > 0);
    assert!(headers.get("x-inner").is_none());
}
