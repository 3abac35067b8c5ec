//! The single-flight refresher without a network: failure reporting, recovery, cancellation.
#![cfg(feature = "client")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::Duration;

use http::HeaderMap;
use http::header::AUTHORIZATION;
use shared_headers::SharedHeaders;
use shared_headers::client::{RefreshError, Refreshed, Refresher};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::timeout;

const WAITERS: usize = 8;
const LIMIT: Duration = Duration::from_secs(10);

fn token(value: &'static str) -> HeaderMap {
    let mut map = HeaderMap::new();
    map.insert(AUTHORIZATION, value.parse().unwrap());
    map.insert("x-token-id", value.len().to_string().parse().unwrap());
    map
}

/// Lets every spawned task of a current-thread runtime run until it waits.
async fn let_others_run() {
    for _ in 0..16 {
        tokio::task::yield_now().await;
    }
}

/// Spawns `WAITERS` callers for failed version 0 whose own refresh (if it ever runs) counts itself
/// in `calls`, takes 5 ms, and publishes `Bearer t1`.
fn spawn_waiters(
    refresher: &Refresher<String>,
    calls: &Arc<AtomicUsize>,
) -> Vec<JoinHandle<Result<Refreshed, RefreshError<String>>>> {
    (0..WAITERS)
        .map(|_| {
            let (refresher, calls) = (refresher.clone(), calls.clone());
            tokio::spawn(async move {
                refresher
                    .refresh_if_current(0, || async move {
                        calls.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        Ok(token("Bearer t1"))
                    })
                    .await
            })
        })
        .collect()
}

#[tokio::test(flavor = "current_thread")]
async fn a_failed_refresh_reaches_every_waiter_and_the_next_attempt_works() {
    let refresher = Refresher::<String>::new(SharedHeaders::new());
    let calls = Arc::new(AtomicUsize::new(0));
    let release = Arc::new(Notify::new());

    // The leader: fails when released.
    let leader = {
        let (refresher, calls, release) = (refresher.clone(), calls.clone(), release.clone());
        tokio::spawn(async move {
            refresher
                .refresh_if_current(0, || async move {
                    calls.fetch_add(1, Ordering::SeqCst);
                    release.notified().await;
                    Err("auth server down".to_string())
                })
                .await
        })
    };
    let_others_run().await;
    // The waiters would succeed if they ran, but must not run.
    let followers = spawn_waiters(&refresher, &calls);
    let_others_run().await;
    release.notify_one();

    let RefreshError::Refresh(original) =
        timeout(LIMIT, leader).await.unwrap().unwrap().unwrap_err()
    else {
        panic!("expected the refresh function's error")
    };
    for follower in followers {
        match timeout(LIMIT, follower).await.unwrap().unwrap() {
            Err(RefreshError::Refresh(seen)) => {
                assert!(
                    Arc::ptr_eq(&seen, &original),
                    "every waiter gets the same error"
                );
            }
            other => panic!("a waiter must see the failure, got {other:?}"),
        }
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1, "only the leader ran");
    assert_eq!((refresher.performed(), refresher.failed()), (0, 1));
    assert_eq!(
        refresher.defaults().version(),
        0,
        "a failed refresh publishes nothing"
    );

    // Not poisoned: the same failed version may be refreshed again, and now it works.
    let again = refresher
        .refresh_if_current(0, || async { Ok(token("Bearer t1")) })
        .await
        .unwrap();
    assert_eq!(again, Refreshed::Performed { version: 1 });
    assert_eq!(
        refresher.defaults().get(AUTHORIZATION).unwrap(),
        "Bearer t1"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_cancelled_leader_hands_over_to_one_waiter() {
    let refresher = Refresher::<String>::new(SharedHeaders::new());
    let calls = Arc::new(AtomicUsize::new(0));

    let leader = {
        let refresher = refresher.clone();
        tokio::spawn(async move {
            refresher
                .refresh_if_current(0, std::future::pending::<Result<HeaderMap, String>>)
                .await
        })
    };
    let_others_run().await;
    let followers = spawn_waiters(&refresher, &calls);
    let_others_run().await;
    leader.abort();

    let mut performed = 0;
    for follower in followers {
        let outcome = timeout(LIMIT, follower)
            .await
            .expect("no waiter hangs")
            .unwrap()
            .unwrap();
        assert_eq!(outcome.version(), 1);
        performed += usize::from(matches!(outcome, Refreshed::Performed { .. }));
    }
    assert_eq!(performed, 1, "exactly one waiter took over");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(refresher.performed(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_callers_of_one_version_refresh_once_then_late_callers_are_stale() {
    let refresher = Refresher::<String>::new(SharedHeaders::new());
    let calls = Arc::new(AtomicUsize::new(0));
    let barrier = Arc::new(tokio::sync::Barrier::new(WAITERS));
    let tasks: Vec<_> = (0..WAITERS)
        .map(|_| {
            let (refresher, calls, barrier) = (refresher.clone(), calls.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                refresher
                    .refresh_if_current(0, || async move {
                        calls.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        Ok(token("Bearer t1"))
                    })
                    .await
            })
        })
        .collect();
    for task in tasks {
        let outcome = timeout(LIMIT, task).await.unwrap().unwrap().unwrap();
        assert_eq!(outcome.version(), 1, "every caller sees the new version");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let late = refresher
        .refresh_if_current(0, || async { Err("must not run".to_string()) })
        .await
        .unwrap();
    assert_eq!(late, Refreshed::Stale { version: 1 });
}

#[tokio::test]
async fn publishing_to_sealed_defaults_is_a_typed_failure() {
    let defaults = SharedHeaders::new();
    defaults.seal().unwrap();
    let refresher = Refresher::<String>::new(defaults);
    let result = refresher
        .refresh_if_current(1, || async { Ok(token("Bearer t1")) })
        .await;
    assert!(matches!(
        result,
        Err(RefreshError::Publish(shared_headers::Error::Sealed {
            version: 1
        }))
    ));
    assert_eq!(refresher.failed(), 1);
}

/// A refresh whose headers would break a limit of the defaults is a typed failure for the
/// leader and its followers, and publishes nothing.
#[tokio::test(flavor = "current_thread")]
async fn publishing_over_a_limit_is_a_typed_failure_for_every_waiter() {
    let defaults = SharedHeaders::builder().max_entries(1).build();
    let refresher = Refresher::<String>::new(defaults.clone());
    let release = Arc::new(Notify::new());
    let leader = {
        let (refresher, release) = (refresher.clone(), release.clone());
        tokio::spawn(async move {
            refresher
                .refresh_if_current(0, || async move {
                    release.notified().await;
                    Ok(token("Bearer t1")) // two entries: over the limit of one
                })
                .await
        })
    };
    let_others_run().await;
    let follower = {
        let refresher = refresher.clone();
        tokio::spawn(async move {
            refresher
                .refresh_if_current(0, || async { Err("must not run".to_string()) })
                .await
        })
    };
    let_others_run().await;
    release.notify_one();
    for task in [leader, follower] {
        let result = timeout(LIMIT, task).await.unwrap().unwrap();
        assert!(
            matches!(
                result,
                Err(RefreshError::Publish(
                    shared_headers::Error::LimitExceeded {
                        limit: shared_headers::Limit::Entries,
                        max: 1,
                        attempted: 2,
                    }
                ))
            ),
            "{result:?}"
        );
    }
    assert_eq!(defaults.version(), 0, "nothing published");
    assert_eq!((refresher.performed(), refresher.failed()), (0, 1));
}

#[tokio::test]
async fn a_refresh_replaces_only_the_names_it_returns() {
    let defaults = SharedHeaders::new();
    defaults
        .insert("user-agent", "sdk/1".parse().unwrap())
        .unwrap();
    defaults
        .append(AUTHORIZATION, "Bearer a".parse().unwrap())
        .unwrap();
    defaults
        .append(AUTHORIZATION, "Bearer b".parse().unwrap())
        .unwrap();
    let refresher = Refresher::<String>::new(defaults.clone());
    refresher
        .refresh_if_current(3, || async { Ok(token("Bearer t1")) })
        .await
        .unwrap();
    let snapshot = defaults.snapshot();
    assert_eq!(
        snapshot.version(),
        4,
        "one write for the token and its companion"
    );
    assert_eq!(
        snapshot.get_all(AUTHORIZATION).iter().collect::<Vec<_>>(),
        ["Bearer t1"]
    );
    assert_eq!(snapshot["x-token-id"], "9");
    assert_eq!(snapshot["user-agent"], "sdk/1");
}

// ---------------------------------------------------------------------------------------------
// Locks: the gate never blocks while a leader waits for the writer lock, and can be observed
// from inside a write. Each runs the possibly-blocking step on a thread of its own and waits a
// bounded time for it: a deadlock fails the test (the stuck threads are left behind).
// ---------------------------------------------------------------------------------------------

/// How long a step that must not block may take before it counts as deadlocked.
const STUCK: Duration = Duration::from_secs(5);
/// Long enough for a thread that was just released to reach the lock it will wait on.
const SETTLE: Duration = Duration::from_millis(50);

/// Runs `f` on a new thread; `None` if it has not finished within `STUCK`.
fn finishes<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (done, result) = mpsc::channel();
    thread::spawn(move || {
        let _ = done.send(f());
    });
    result.recv_timeout(STUCK).ok()
}

/// Regression (lock-order inversion): formatting a `Refresher` (or asking its gate anything)
/// inside a write to its defaults, while the leader waits for that write to publish, does not
/// deadlock.
#[test]
fn debug_inside_a_write_does_not_deadlock_with_a_publishing_leader() {
    let defaults = SharedHeaders::new();
    let refresher = Refresher::<String>::new(defaults.clone());

    // The leader runs on a runtime of its own thread, so that a deadlock strands only threads.
    let (refreshing, in_refresh) = mpsc::channel();
    let (go, went) = tokio::sync::oneshot::channel::<()>();
    let (done, leader) = mpsc::channel();
    {
        let refresher = refresher.clone();
        thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            let outcome = runtime.block_on(refresher.refresh_if_current(0, || async move {
                refreshing.send(()).unwrap();
                went.await.unwrap();
                Ok(token("Bearer t1"))
            }));
            let _ = done.send(outcome);
        });
    }
    in_refresh.recv_timeout(STUCK).unwrap();

    let shown = finishes({
        let (defaults, refresher) = (defaults.clone(), refresher.clone());
        move || {
            defaults
                .update(|_| {
                    // The refresh returns; the leader now waits for this write to publish.
                    go.send(()).unwrap();
                    thread::sleep(SETTLE);
                    format!("{refresher:?}")
                })
                .unwrap()
        }
    })
    .expect("Debug inside a write must not deadlock against a publishing leader");
    assert!(shown.contains("in_flight: true"), "{shown}");
    assert!(shown.contains("started: 1"), "{shown}");

    let outcome = leader.recv_timeout(STUCK).expect("the leader publishes");
    assert_eq!(outcome.unwrap(), Refreshed::Performed { version: 2 });
    assert_eq!(refresher.performed(), 1);
}

/// The documented cancellation behaviour, both ways: a refresh that runs inside its caller is
/// restarted by every caller that gives up before it finishes (and never finishes), while a
/// refresh whose call runs in a task of its own survives the callers' timeouts, runs once, and
/// publishes.
#[tokio::test(flavor = "current_thread")]
async fn only_a_refresh_in_its_own_task_outlives_callers_that_give_up() {
    const CALLERS: usize = 3;
    let patience = Duration::from_millis(5);

    // Inside the callers: each one leads, gives up, and the next starts over.
    let refresher = Refresher::<String>::new(SharedHeaders::new());
    let calls = Arc::new(AtomicUsize::new(0));
    for _ in 0..CALLERS {
        let calls = calls.clone();
        let call = refresher.refresh_if_current(0, || async move {
            calls.fetch_add(1, Ordering::SeqCst);
            std::future::pending::<Result<HeaderMap, String>>().await
        });
        assert!(
            timeout(patience, call).await.is_err(),
            "the caller gives up"
        );
    }
    assert_eq!(calls.load(Ordering::SeqCst), CALLERS, "restarted by each");
    assert_eq!(refresher.defaults().version(), 0, "never finished");

    // In a task of its own: the first call's refresh keeps running; the others join it. The
    // refresh waits for a gate opened only once every caller gave up, so no caller can find it
    // finished however slow the machine (a sleep would race the callers' patience).
    let refresher = Refresher::<String>::new(SharedHeaders::new());
    let calls = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let mut tasks = Vec::new();
    for _ in 0..CALLERS {
        let (refresher, calls, gate) = (refresher.clone(), calls.clone(), gate.clone());
        let mut task = tokio::spawn(async move {
            refresher
                .refresh_if_current(0, || async move {
                    calls.fetch_add(1, Ordering::SeqCst);
                    let _open = gate.acquire().await;
                    Ok(token("Bearer t1"))
                })
                .await
        });
        assert!(
            timeout(patience, &mut task).await.is_err(),
            "the caller gives up"
        );
        tasks.push(task);
    }
    gate.add_permits(CALLERS);
    for task in tasks {
        let outcome = timeout(LIMIT, task).await.unwrap().unwrap().unwrap();
        assert_eq!(outcome.version(), 1);
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "one refresh, never restarted"
    );
    assert_eq!(refresher.performed(), 1);
    assert_eq!(
        refresher.defaults().get(AUTHORIZATION).unwrap(),
        "Bearer t1"
    );
}
