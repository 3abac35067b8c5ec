//! `ConnHealth` under real threads (the loom models in `loom-tests/tests/conn.rs` prove the
//! same properties exhaustively for small cases).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use shared_headers::conn::{AcquireError, Cause, ConnHealth, Pool, Status};

/// No lease after death under real threads: acquirers race one `mark_dead`; every lease they
/// got was counted by it, and none came later.
#[test]
fn concurrent_acquirers_never_outnumber_the_count_mark_dead_saw() {
    for _ in 0..50 {
        let health = ConnHealth::new();
        let granted = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let mut leases_held = Vec::new();
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let (health, granted, stop) = (health.clone(), granted.clone(), stop.clone());
                thread::spawn(move || {
                    let mut kept = Vec::new();
                    while !stop.load(Ordering::Relaxed) && kept.len() < 1_000 {
                        if let Ok(lease) = health.try_acquire() {
                            granted.fetch_add(1, Ordering::Relaxed);
                            kept.push(lease);
                        }
                    }
                    kept
                })
            })
            .collect();
        thread::sleep(Duration::from_micros(200));
        let observed = health.mark_dead(Cause::Local).unwrap();
        stop.store(true, Ordering::Relaxed);
        for t in threads {
            leases_held.extend(t.join().unwrap());
        }
        assert_eq!(granted.load(Ordering::Relaxed), observed);
        assert_eq!(health.in_flight(), leases_held.len());
        drop(leases_held);
        assert_eq!(health.in_flight(), 0);
        assert!(health.try_acquire().is_err());
    }
}

/// The pool's eviction callback runs on whichever thread records the death, while other
/// threads check out and release: the dead connection is never returned afterwards, and busy
/// connections are evicted without waiting.
#[test]
fn pool_evicts_busy_connections_from_any_thread() {
    let pool: Pool<u8, u32> = Pool::new();
    for round in 0..20u32 {
        let busy = pool
            .insert(1, round, ConnHealth::with_max_concurrent(4))
            .unwrap();
        let (tx, rx) = mpsc::channel();
        let users: Vec<_> = (0..2)
            .map(|_| {
                let (pool, tx) = (pool.clone(), tx.clone());
                thread::spawn(move || {
                    for _ in 0..200 {
                        if let Some(pooled) = pool.checkout(&1) {
                            tx.send((pooled.id(), pooled.health().clone())).unwrap();
                        }
                    }
                })
            })
            .collect();
        let killer = {
            let health = busy.health().clone();
            thread::spawn(move || health.mark_dead(Cause::HealthCheck))
        };
        assert!(killer.join().unwrap().is_some());
        // From here on, the connection is never handed out.
        assert!(pool.checkout(&1).is_none());
        assert_eq!(pool.connections(&1), 0);
        for user in users {
            user.join().unwrap();
        }
        drop(tx);
        for (id, health) in rx {
            assert_eq!(id, busy.id());
            assert!(health.ptr_eq(busy.health()));
        }
        assert_eq!(busy.health().in_flight(), 1);
        assert_eq!(
            busy.health().try_acquire().unwrap_err(),
            AcquireError::Dead(Cause::HealthCheck)
        );
        assert_eq!(busy.health().status(), Status::Dead(Cause::HealthCheck));
    }
}

/// Forward only: once dead, draining does not bring a connection back, and the status never
/// moves backwards under concurrent marks.
#[test]
fn states_only_move_forward() {
    for _ in 0..100 {
        let health = ConnHealth::new();
        let fired = Arc::new(AtomicUsize::new(0));
        let counter = fired.clone();
        let registered = health.on_close(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        assert!(registered.is_ok());
        let seen_dead = Arc::new(AtomicBool::new(false));
        let marks: Vec<_> = (0..3)
            .map(|i| {
                let (health, seen_dead) = (health.clone(), seen_dead.clone());
                thread::spawn(move || {
                    if i == 0 {
                        health.mark_dead(Cause::PeerClosed);
                    } else {
                        health.mark_draining();
                    }
                    let was_dead = seen_dead.load(Ordering::SeqCst);
                    let status = health.status();
                    if matches!(status, Status::Dead(_)) {
                        seen_dead.store(true, Ordering::SeqCst);
                    }
                    assert!(!was_dead || matches!(status, Status::Dead(_)), "{status:?}");
                    assert_ne!(status, Status::Open);
                })
            })
            .collect();
        for t in marks {
            t.join().unwrap();
        }
        assert_eq!(health.status(), Status::Dead(Cause::PeerClosed));
        assert_eq!(fired.load(Ordering::SeqCst), 1);
        thread::sleep(Duration::ZERO);
    }
}
