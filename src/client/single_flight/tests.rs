//! The single-flight gate’s tests: the examples that were its docs when the module was public
//! (`example_*`, one per item), and the regressions that drive the gate directly from threads.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::Duration;

use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderValue};

use super::{Rendezvous, Role, SingleFlight};
use crate::{Error, SharedHeaders};

/// How long a step that must not block may take before it counts as deadlocked.
const STUCK: Duration = Duration::from_secs(5);
/// Long enough for a thread that was just released to reach the lock it will wait on.
const SETTLE: Duration = Duration::from_millis(50);

/// A rendezvous that carries nothing, for driving the gate directly from threads.
#[derive(Default)]
struct Slot;

impl Rendezvous for Slot {
    fn abandon(&self) {}
}

fn v(s: &'static str) -> HeaderValue {
    HeaderValue::from_static(s)
}

fn token(value: &'static str) -> HeaderMap {
    let mut map = HeaderMap::new();
    map.insert(AUTHORIZATION, value.parse().unwrap());
    map.insert("x-token-id", value.len().to_string().parse().unwrap());
    map
}

/// Runs `f` on a new thread; `None` if it has not finished within `STUCK`.
fn finishes<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (done, result) = mpsc::channel();
    thread::spawn(move || {
        let _ = done.send(f());
    });
    result.recv_timeout(STUCK).ok()
}

/// Runs `f` on a thread; fails if it does not finish within 10 s (a deadlock).
fn bounded<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(catch_unwind(AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(Ok(r)) => r,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => panic!("deadlocked: a re-entrant write waited for its own writer lock"),
    }
}

/// The panic message of `f`, which must panic.
fn panic_message(f: impl FnOnce()) -> String {
    let payload = catch_unwind(AssertUnwindSafe(f)).expect_err("the re-entrant write must panic");
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap()
}

#[test]
fn example_module() -> Result<(), Box<dyn std::error::Error>> {
    use crate::SharedHeaders;
    use crate::client::single_flight::{Rendezvous, Role, SingleFlight};
    use http::HeaderMap;
    use std::sync::{Condvar, Mutex};

    /// The outcome of one attempt: `Some(Ok(version))`, `Some(Err(()))`, or `None` while running.
    #[derive(Default)]
    struct Slot(Mutex<Option<Result<u64, ()>>>, Condvar);

    impl Rendezvous for Slot {
        fn abandon(&self) {
            *self.0.lock().unwrap() = Some(Err(()));
            self.1.notify_all();
        }
    }

    let defaults = SharedHeaders::new();
    let flight = SingleFlight::<Slot>::new(defaults.clone());

    let failed = defaults.version();
    match flight.begin(failed) {
        Role::Leader(lead) => {
            let mut new = HeaderMap::new();
            new.insert("authorization", "Bearer t1".parse()?);
            let (snapshot, slot) = lead.publish(&new)?;
            *slot.0.lock().unwrap() = Some(Ok(snapshot.version()));
            slot.1.notify_all();
        }
        Role::Follower(slot) => {
            let guard = slot
                .1
                .wait_while(slot.0.lock().unwrap(), |o| o.is_none())
                .unwrap();
            assert!(guard.is_some());
        }
        Role::Stale { current } => assert!(current > failed),
    }
    assert_eq!(defaults.get("authorization").unwrap(), "Bearer t1");

    // The same failed version again: it is stale now, nothing runs.
    assert!(matches!(flight.begin(failed), Role::Stale { current: 1 }));
    Ok(())
}

#[test]
fn example_rendezvous() {
    use crate::client::single_flight::Rendezvous;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Flag(Mutex<bool>);
    impl Rendezvous for Flag {
        fn abandon(&self) {
            *self.0.lock().unwrap() = true;
        }
    }
    let flag = Flag::default();
    flag.abandon();
    assert!(*flag.0.lock().unwrap());
}

#[test]
fn example_abandon() {
    use crate::SharedHeaders;
    use crate::client::single_flight::{Rendezvous, Role, SingleFlight};
    use std::sync::atomic::{AtomicBool, Ordering};

    #[derive(Default)]
    struct Slot(AtomicBool);
    impl Rendezvous for Slot {
        fn abandon(&self) {
            self.0.store(true, Ordering::Release);
        }
    }

    let flight = SingleFlight::<Slot>::new(SharedHeaders::new());
    let Role::Leader(lead) = flight.begin(0) else {
        unreachable!()
    };
    let slot = lead.attempt().clone();
    drop(lead); // the leader's task was cancelled
    assert!(slot.0.load(Ordering::Acquire));
}

#[test]
fn example_singleflight() -> Result<(), Box<dyn std::error::Error>> {
    use crate::SharedHeaders;
    use crate::client::single_flight::{Rendezvous, Role, SingleFlight};
    use std::sync::Arc;
    #[derive(Default)]
    struct Slot;
    impl Rendezvous for Slot {
        fn abandon(&self) {}
    }

    let defaults = SharedHeaders::new();
    let flight = Arc::new(SingleFlight::<Slot>::new(defaults.clone()));
    // Two requests failed with version 0: the first leads, the second follows.
    let Role::Leader(lead) = flight.begin(0) else {
        unreachable!()
    };
    assert!(matches!(flight.begin(0), Role::Follower(_)));
    assert!(flight.in_flight());
    lead.publish(&http::HeaderMap::new())?;
    // A third request with the old version is late: the refresh is done.
    assert!(matches!(flight.begin(0), Role::Stale { current: 1 }));
    assert_eq!(flight.started(), 1);
    Ok(())
}

#[test]
fn example_role() {
    use crate::SharedHeaders;
    use crate::client::single_flight::{Rendezvous, Role, SingleFlight};
    #[derive(Default)]
    struct Slot;
    impl Rendezvous for Slot {
        fn abandon(&self) {}
    }

    let flight = SingleFlight::<Slot>::new(SharedHeaders::new());
    let what = match flight.begin(0) {
        Role::Stale { current } => format!("retry with version {current}"),
        Role::Leader(lead) => {
            let _slot = lead.fail(); // the refresh failed: tell the followers through the slot
            "refreshed, and failed".to_owned()
        }
        Role::Follower(_slot) => "wait on the slot".to_owned(),
    };
    assert_eq!(what, "refreshed, and failed");
}

#[test]
fn example_lead() {
    use crate::SharedHeaders;
    use crate::client::single_flight::{Rendezvous, Role, SingleFlight};
    #[derive(Default)]
    struct Slot;
    impl Rendezvous for Slot {
        fn abandon(&self) {}
    }

    let flight = SingleFlight::<Slot>::new(SharedHeaders::new());
    let Role::Leader(lead) = flight.begin(0) else {
        unreachable!()
    };
    drop(lead); // cancelled: the attempt is abandoned, the next caller leads
    assert!(!flight.in_flight());
    assert!(matches!(flight.begin(0), Role::Leader(_)));
}

#[test]
fn example_new() {
    use crate::SharedHeaders;
    use crate::client::single_flight::{Rendezvous, SingleFlight};
    #[derive(Default)]
    struct Slot;
    impl Rendezvous for Slot {
        fn abandon(&self) {}
    }
    let flight = SingleFlight::<Slot>::new(SharedHeaders::new());
    assert_eq!(flight.started(), 0);
}

#[test]
fn example_headers() {
    use crate::SharedHeaders;
    use crate::client::single_flight::{Rendezvous, SingleFlight};
    #[derive(Default)]
    struct Slot;
    impl Rendezvous for Slot {
        fn abandon(&self) {}
    }
    let headers = SharedHeaders::new();
    let flight = SingleFlight::<Slot>::new(headers.clone());
    assert!(SharedHeaders::ptr_eq(flight.headers(), &headers));
}

#[test]
fn example_begin() {
    use crate::SharedHeaders;
    use crate::client::single_flight::{Rendezvous, Role, SingleFlight};
    #[derive(Default)]
    struct Slot;
    impl Rendezvous for Slot {
        fn abandon(&self) {}
    }
    let flight = SingleFlight::<Slot>::new(SharedHeaders::new());
    let first = flight.begin(0);
    assert!(matches!(first, Role::Leader(_)));
    assert!(matches!(flight.begin(0), Role::Follower(_)));
    assert!(matches!(flight.begin(7), Role::Stale { current: 0 }));
}

#[test]
fn example_begin_owned() {
    use crate::SharedHeaders;
    use crate::client::single_flight::{Rendezvous, Role, SingleFlight};
    use http::HeaderMap;
    use std::sync::Arc;
    #[derive(Default)]
    struct Slot;
    impl Rendezvous for Slot {
        fn abandon(&self) {}
    }
    let flight = Arc::new(SingleFlight::<Slot>::new(SharedHeaders::new()));
    let Role::Leader(lead) = SingleFlight::begin_owned(&flight, 0) else {
        unreachable!()
    };
    // The leader runs elsewhere; the caller may go away.
    let refresh = std::thread::spawn(move || {
        let mut new = HeaderMap::new();
        new.insert("authorization", "Bearer t1".parse().unwrap());
        lead.publish(&new)
            .map(|(snapshot, _slot)| snapshot.version())
            .unwrap()
    });
    assert_eq!(refresh.join().unwrap(), 1);
    assert!(matches!(flight.begin(0), Role::Stale { current: 1 }));
}

#[test]
fn example_started() {
    use crate::SharedHeaders;
    use crate::client::single_flight::{Rendezvous, SingleFlight};
    #[derive(Default)]
    struct Slot;
    impl Rendezvous for Slot {
        fn abandon(&self) {}
    }
    let flight = SingleFlight::<Slot>::new(SharedHeaders::new());
    drop(flight.begin(0)); // a leader, abandoned at once
    assert_eq!(flight.started(), 1);
}

#[test]
fn example_in_flight() {
    use crate::SharedHeaders;
    use crate::client::single_flight::{Rendezvous, SingleFlight};
    #[derive(Default)]
    struct Slot;
    impl Rendezvous for Slot {
        fn abandon(&self) {}
    }
    let flight = SingleFlight::<Slot>::new(SharedHeaders::new());
    let lead = flight.begin(0);
    assert!(flight.in_flight());
    drop(lead);
    assert!(!flight.in_flight());
}

#[test]
fn example_publish() -> Result<(), Box<dyn std::error::Error>> {
    use crate::SharedHeaders;
    use crate::client::single_flight::{Rendezvous, Role, SingleFlight};
    use http::HeaderMap;
    #[derive(Default)]
    struct Slot;
    impl Rendezvous for Slot {
        fn abandon(&self) {}
    }
    let headers = SharedHeaders::new();
    headers.insert("x-client", "demo".parse()?)?;
    let flight = SingleFlight::<Slot>::new(headers.clone());
    let Role::Leader(lead) = flight.begin(1) else {
        unreachable!()
    };
    let mut new = HeaderMap::new();
    new.insert("authorization", "Bearer t2".parse()?);
    new.insert("x-token-expires", "1700000000".parse()?);
    let (snapshot, _slot) = lead.publish(&new)?;
    assert_eq!(snapshot.version(), 2);
    assert_eq!(snapshot.len(), 3);
    assert!(!flight.in_flight());
    Ok(())
}

#[test]
fn example_fail() {
    use crate::SharedHeaders;
    use crate::client::single_flight::{Rendezvous, Role, SingleFlight};
    #[derive(Default)]
    struct Slot;
    impl Rendezvous for Slot {
        fn abandon(&self) {}
    }
    let flight = SingleFlight::<Slot>::new(SharedHeaders::new());
    let Role::Leader(lead) = flight.begin(0) else {
        unreachable!()
    };
    let _slot = lead.fail();
    assert!(matches!(flight.begin(0), Role::Leader(_))); // the next attempt may run
}

#[test]
fn example_attempt() {
    use crate::SharedHeaders;
    use crate::client::single_flight::{Rendezvous, Role, SingleFlight};
    use std::sync::Arc;
    #[derive(Default)]
    struct Slot;
    impl Rendezvous for Slot {
        fn abandon(&self) {}
    }
    let flight = SingleFlight::<Slot>::new(SharedHeaders::new());
    let Role::Leader(lead) = flight.begin(0) else {
        unreachable!()
    };
    let Role::Follower(slot) = flight.begin(0) else {
        unreachable!()
    };
    assert!(Arc::ptr_eq(lead.attempt(), &slot));
}

#[test]
fn example_publisherror() -> Result<(), Box<dyn std::error::Error>> {
    use crate::client::single_flight::{Rendezvous, Role, SingleFlight};
    use crate::{Error, SharedHeaders};
    use http::HeaderMap;
    #[derive(Default)]
    struct Slot;
    impl Rendezvous for Slot {
        fn abandon(&self) {}
    }
    let headers = SharedHeaders::new();
    headers.seal()?;
    let flight = SingleFlight::<Slot>::new(headers);
    let Role::Leader(lead) = flight.begin(1) else {
        unreachable!()
    };
    let err = lead.publish(&HeaderMap::new()).err().unwrap();
    assert_eq!(err.error, Error::Sealed { version: 1 });
    Ok(())
}

// Moved from tests/regressions.rs when the module became private.
/// `PublishError::source` replaced by `None` would hide the cause from error reporters.
#[test]
fn publish_error_source_is_the_headers_error() {
    let headers = SharedHeaders::new();
    headers.seal().unwrap();
    let flight = SingleFlight::<Slot>::new(headers);
    let Role::Leader(lead) = flight.begin(1) else {
        panic!("no leader")
    };
    let err = lead.publish(&HeaderMap::new()).err().unwrap();
    let source = std::error::Error::source(&err).expect("a source");
    assert_eq!(
        source.downcast_ref::<Error>(),
        Some(&Error::Sealed { version: 1 })
    );
}

// Moved from tests/client_refresh.rs when the module became private.
/// Regression (publishing looped over draft/commit while holding the gate's lock): a leader
/// whose publish waits for the writer lock (held by another write) does not hold the gate, so
/// another caller's `begin` is answered at once (as a follower).
#[test]
fn a_leader_waiting_to_publish_does_not_block_begin() {
    let defaults = SharedHeaders::new();
    let flight = Arc::new(SingleFlight::<Slot>::new(defaults.clone()));

    // A long write holds the writer lock until released.
    let (entered, in_write) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    let writer = {
        let defaults = defaults.clone();
        thread::spawn(move || {
            defaults
                .update(|map| {
                    entered.send(()).unwrap();
                    released.recv().unwrap();
                    map.insert("x-other", "1".parse().unwrap());
                })
                .unwrap()
        })
    };
    in_write.recv_timeout(STUCK).unwrap();

    // The leader is elected for version 0 and then waits for the writer lock to publish.
    let (elected, leading) = mpsc::channel();
    let leader = {
        let flight = flight.clone();
        thread::spawn(move || {
            let Role::Leader(lead) = flight.begin(0) else {
                panic!("the first caller leads")
            };
            elected.send(()).unwrap();
            let (snapshot, _slot) = lead.publish(&token("Bearer t1")).unwrap();
            snapshot.version()
        })
    };
    leading.recv_timeout(STUCK).unwrap();
    thread::sleep(SETTLE);

    let follows = finishes({
        let flight = flight.clone();
        move || matches!(flight.begin(0), Role::Follower(_))
    });
    assert_eq!(
        follows,
        Some(true),
        "begin answers while the leader waits for the writer lock"
    );

    release.send(()).unwrap();
    writer.join().unwrap();
    assert_eq!(
        leader.join().unwrap(),
        2,
        "published on top of the other write"
    );
    assert_eq!(
        defaults.get("x-other").unwrap(),
        "1",
        "the other write is kept"
    );
    assert_eq!(defaults.get(AUTHORIZATION).unwrap(), "Bearer t1");
    assert!(!flight.in_flight());
}

// Moved from tests/reentrancy.rs when the module became private.
#[test]
fn a_refresh_publish_inside_a_write_panics_and_the_flight_recovers() {
    bounded(|| {
        let headers = SharedHeaders::new();
        let flight = SingleFlight::<Slot>::new(headers.clone());
        let message = panic_message(|| {
            let _ = headers.update(|_| {
                let Role::Leader(lead) = flight.begin(0) else {
                    unreachable!()
                };
                let _ = lead.publish(&HeaderMap::new());
            });
        });
        assert!(
            message
                .starts_with("Lead::publish (a refresh) called from inside SharedHeaders::update"),
            "{message}"
        );
        // The abandoned attempt ended; a new leader publishes.
        assert!(!flight.in_flight());
        let Role::Leader(lead) = flight.begin(0) else {
            panic!("no leader after the panic")
        };
        let mut new = HeaderMap::new();
        new.insert("authorization", v("Bearer t1"));
        assert_eq!(lead.publish(&new).unwrap().0.version(), 1);
    });
}
