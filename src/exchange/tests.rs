//! Unit tests of the exchange.

use super::*;
use crate::error::Error;

#[test]
fn exchange_is_send_sync_static() {
    fn assert<T: Send + Sync + 'static>() {}
    assert::<Exchange>();
    assert::<Committed>();
    assert::<AlreadyCommitted>();
}

#[test]
fn every_refused_write_path_is_counted_and_nothing_else() {
    let headers = SharedHeaders::new();
    let draft = headers.draft();
    let stale = headers.draft();
    headers.insert("x-a", "1".parse().unwrap()).unwrap();
    assert!(matches!(headers.commit(stale), Err(Error::Conflict { .. })));
    headers.seal().unwrap();
    assert!(headers.seal().is_err());
    assert_eq!(
        headers.refused_writes(),
        0,
        "conflicts and seals are not counted"
    );
    let v = || "2".parse().unwrap();
    assert!(headers.insert("x-a", v()).is_err());
    assert!(headers.append("x-a", v()).is_err());
    assert!(headers.remove("x-b").is_err());
    assert!(headers.update(|_| ()).is_err());
    assert!(headers.replace(http::HeaderMap::new()).is_err());
    assert!(headers.commit(draft).is_err());
    assert_eq!(headers.refused_writes(), 6);
    assert_eq!(headers.clone().refused_writes(), 6, "shared by clones");
}

#[test]
fn a_handle_sealed_by_other_code_keeps_its_seal() {
    let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    exchange
        .request()
        .insert("x-a", "1".parse().unwrap())
        .unwrap();
    let early = exchange.request().seal().unwrap();
    let committed = exchange.commit(Outcome::Answered).unwrap();
    assert_eq!(*committed.request(), early);
    assert_eq!(committed.response().version(), 1);
}

/// Regression: reads of the exchange took the lock `commit` holds while it waits for a
/// handle's writer lock. A task reading the exchange inside `update` (holding that writer
/// lock) while another thread committed deadlocked both. Reads are lock-free now; a
/// deadlock fails this test through the timeout instead of hanging it.
#[test]
fn reading_the_exchange_inside_update_while_committing_does_not_deadlock() {
    use std::sync::mpsc;
    use std::time::Duration;

    let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    let (inside_tx, inside_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel();
    let task = exchange.clone();
    // Plain threads, not scoped ones: a deadlocked thread must not block the test's end.
    std::thread::spawn(move || {
        let read = task.request().update(|_| {
            inside_tx.send(()).unwrap();
            // Give the committer time to take the commit lock and block on this handle's
            // writer lock, which this closure holds.
            std::thread::sleep(Duration::from_millis(100));
            (task.is_committed(), task.committed(), format!("{task:?}"))
        });
        done_tx.send(read).unwrap();
    });
    inside_rx.recv().unwrap();
    let committer = exchange.clone();
    let (commit_tx, commit_rx) = mpsc::channel();
    std::thread::spawn(move || {
        commit_tx.send(committer.commit(Outcome::TimedOut)).unwrap();
    });

    let limit = Duration::from_secs(10);
    let (is_committed, committed, debug) = done_rx
        .recv_timeout(limit)
        .expect("deadlock: a read inside update waited for the committer")
        .expect("the update started before the commit");
    // The commit had not sealed the handle yet: the update's read saw it uncommitted.
    assert!(!is_committed && committed.is_none());
    assert!(debug.contains("committed: None"), "{debug}");
    let won = commit_rx
        .recv_timeout(limit)
        .expect("deadlock: the committer never finished")
        .unwrap();
    // The update published before the seal, so it is in the committed version.
    assert_eq!(won.request().version(), 2);
    assert_eq!(exchange.committed(), Some(won));
}

#[test]
fn concurrent_commits_have_one_winner_and_agree() {
    // A few rounds under Miri (each is thousands of times slower there; it runs several seeds).
    for _ in 0..if cfg!(miri) { 4 } else { 200 } {
        let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
        let outcomes = [Outcome::Answered, Outcome::TimedOut, Outcome::Cancelled];
        let results: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = outcomes
                .iter()
                .map(|&o| {
                    let exchange = exchange.clone();
                    s.spawn(move || {
                        let _ = exchange.response().insert("x-try", "1".parse().unwrap());
                        exchange.commit(o)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(winners.len(), 1);
        for lost in results.iter().filter_map(|r| r.as_ref().err()) {
            assert_eq!(lost.winner(), winners[0]);
        }
        assert_eq!(exchange.committed().as_ref(), Some(winners[0]));
        assert_eq!(
            exchange.response().insert("x-late", "1".parse().unwrap()),
            Err(Error::Sealed {
                version: winners[0].response().version()
            })
        );
    }
}

#[test]
fn annotations_created_after_the_commit_are_sealed_and_not_in_the_record() {
    let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    let committed = exchange.commit(Outcome::Answered).unwrap();
    assert!(committed.annotations().is_none());
    let late = exchange
        .annotations()
        .insert("x-late", "1".parse().unwrap());
    assert!(matches!(late, Err(Error::Sealed { .. })));
    assert_eq!(exchange.refused_writes(), 1);
    assert!(SharedHeaders::ptr_eq(
        &exchange.annotations(),
        &exchange.annotations()
    ));
}

/// The first `annotations()` call races the commit: an accepted write is always in the
/// record, a refused one never, and the record has annotations iff the handle existed first.
#[test]
fn a_first_annotation_racing_the_commit_is_never_lost() {
    // A few rounds under Miri (each is thousands of times slower there; it runs several seeds).
    for _ in 0..if cfg!(miri) { 4 } else { 200 } {
        let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
        let task = exchange.clone();
        let writer =
            std::thread::spawn(move || task.annotations().insert("x-a", "1".parse().unwrap()));
        let committed = exchange.commit(Outcome::TimedOut).unwrap();
        let wrote = writer.join().unwrap();
        let logged = committed
            .annotations()
            .is_some_and(|a| a.contains_key("x-a"));
        assert_eq!(wrote.is_ok(), logged);
    }
}

/// The first `annotations()` call inside an `update` of the request handle, while another
/// thread commits (and waits for that writer lock): no deadlock, as for the other reads.
#[test]
fn first_annotations_call_inside_update_while_committing_does_not_deadlock() {
    use std::sync::mpsc;
    use std::time::Duration;

    let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    let (inside_tx, inside_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel();
    let task = exchange.clone();
    std::thread::spawn(move || {
        let result = task.request().update(|_| {
            inside_tx.send(()).unwrap();
            std::thread::sleep(Duration::from_millis(100));
            task.annotations()
                .insert("x-a", "1".parse().unwrap())
                .is_ok()
        });
        done_tx.send(result).unwrap();
    });
    inside_rx.recv().unwrap();
    let committer = exchange.clone();
    std::thread::spawn(move || drop(committer.commit(Outcome::TimedOut)));
    let annotated = done_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("deadlock: annotations() inside update waited for the committer")
        .unwrap();
    // The commit waited for the update (the request seal), so the annotation was in time.
    assert!(annotated);
}

/// A hook that panics while the thread is already unwinding (the commit runs in a `Drop`
/// during a panic, as the layer's guard does) is caught: no abort, the outer panic goes on,
/// and the exchange is committed.
#[test]
fn a_hook_panicking_in_a_drop_during_an_unwind_does_not_abort() {
    struct CommitOnDrop(Exchange);
    impl Drop for CommitOnDrop {
        fn drop(&mut self) {
            let _ = self.0.commit(Outcome::Cancelled);
        }
    }
    let hooks = CommitHooks::new()
        .on_commit(|_| panic!("hook panicked"))
        .on_late_writes(|_| panic!("late hook panicked"));
    let exchange = Exchange::with_hooks(SharedHeaders::new(), SharedHeaders::new(), &hooks);
    let guard = CommitOnDrop(exchange.clone());
    let outer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _guard = guard;
        panic!("the handler panicked");
    }));
    let message = outer.unwrap_err();
    assert_eq!(
        message.downcast_ref::<&str>(),
        Some(&"the handler panicked")
    );
    assert_eq!(exchange.committed().unwrap().outcome(), Outcome::Cancelled);
    // The late-writes hook panics in the exchange's last drop: caught as well.
    assert!(
        exchange
            .response()
            .insert("x-late", "1".parse().unwrap())
            .is_err()
    );
    drop(exchange);
}
