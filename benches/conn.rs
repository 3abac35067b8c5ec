//! What admission costs: `ConnHealth::try_acquire` + dropping the lease (one CAS + one
//! `fetch_sub`, plus the `Arc` clone the lease holds) against the same protocol on a
//! `Mutex`-guarded state (lock, check, count, unlock; lock, uncount, unlock), uncontended and
//! with two background threads hammering the same connection.
//!
//! ```text
//! cargo bench --features conn --bench conn
//! ```

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use criterion::{Criterion, criterion_group, criterion_main};
use shared_headers::conn::{Cause, ConnHealth};

/// The straightforward alternative: the same state behind a mutex.
#[derive(Default)]
struct Locked {
    dead: Option<Cause>,
    draining: bool,
    in_flight: usize,
}

/// A lease on a `Locked` state: released (under the lock again) on drop.
struct LockedLease<'a>(&'a Mutex<Locked>);

fn locked_acquire(state: &Mutex<Locked>) -> Option<LockedLease<'_>> {
    let mut guard = state.lock().unwrap();
    if guard.dead.is_some() || guard.draining {
        return None;
    }
    guard.in_flight += 1;
    Some(LockedLease(state))
}

impl Drop for LockedLease<'_> {
    fn drop(&mut self) {
        self.0.lock().unwrap().in_flight -= 1;
    }
}

/// Runs `work` on two background threads until the returned guard is dropped.
struct Background {
    stop: Arc<AtomicBool>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl Background {
    fn start(work: impl Fn() + Send + Sync + 'static) -> Background {
        let stop = Arc::new(AtomicBool::new(false));
        let work = Arc::new(work);
        let threads = (0..2)
            .map(|_| {
                let (stop, work) = (stop.clone(), work.clone());
                thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        work();
                    }
                })
            })
            .collect();
        Background { stop, threads }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            t.join().unwrap();
        }
    }
}

fn uncontended(c: &mut Criterion) {
    let mut group = c.benchmark_group("acquire+release/uncontended");
    let health = ConnHealth::with_max_concurrent(100);
    group.bench_function("ConnHealth", |b| {
        b.iter(|| drop(black_box(health.try_acquire())))
    });
    let locked = Mutex::new(Locked::default());
    group.bench_function("Mutex<state>", |b| {
        b.iter(|| drop(black_box(locked_acquire(&locked))))
    });
    group.finish();
}

fn contended(c: &mut Criterion) {
    let mut group = c.benchmark_group("acquire+release/2 background threads");
    {
        let health = ConnHealth::new();
        let h = health.clone();
        let _bg = Background::start(move || drop(black_box(h.try_acquire())));
        group.bench_function("ConnHealth", |b| {
            b.iter(|| drop(black_box(health.try_acquire())))
        });
    }
    {
        let locked = Arc::new(Mutex::new(Locked::default()));
        let l = locked.clone();
        let _bg = Background::start(move || drop(black_box(locked_acquire(&l))));
        group.bench_function("Mutex<state>", |b| {
            b.iter(|| drop(black_box(locked_acquire(&locked))))
        });
    }
    group.finish();
}

criterion_group!(benches, uncontended, contended);
criterion_main!(benches);
