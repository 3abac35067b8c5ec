//! Criterion benches of the core type, against the alternatives a user would reach for.
//!
//! Run everything (76 benches, about 4 minutes: the config below sets warm-up 0.5 s, measurement
//! 2 s, 50 samples per bench):
//!
//! ```text
//! cargo bench --bench shared
//! scripts/bench-table            # medians and ratios as a Markdown table
//! ```
//!
//! A quick sanity run: `cargo bench --bench shared -- --warm-up-time 0.2 --measurement-time 0.3`;
//! one group only: `cargo bench --bench shared -- 'read/get/12/'`.
//!
//! Bench names are `<group>/<size>/<variant>` and are stable (the README table cites them):
//!
//! * `read/get/{4,12,48}/…`: look up [`KEY`] (`x-request-id`, a `HeaderName` constant) in a map
//!   of that many request headers. Variants:
//!   `plain` (`&HeaderMap::get`, the floor), `plain_clone` (`get` + `HeaderValue::clone`, the
//!   floor for an owned value), `shared_get` (`SharedHeaders::get`, owned), `shared_read`
//!   (`SharedHeaders::read(|m| m.get(..))`), `shared_snapshot` (`snapshot()` then `get`),
//!   `parking_lot_rwlock`, `std_rwlock`, `std_mutex` (lock, `get`, unlock) and `arc_swap`
//!   (raw `ArcSwap<HeaderMap>::load`, then `get`).
//! * `read/get_standard/12/…`: `plain`, `plain_clone`, `shared_get`, `shared_read` with a
//!   standard header key (`user-agent`), the cheapest lookup, against which the shared read's
//!   constant cost weighs most.
//! * `read/reader/{4,12,48}/…`: owned reads of [`KEY`]: `plain_clone` (the floor),
//!   `shared_get` (`SharedHeaders::get`), `reader_get` (`Reader::get` on a `SharedHeaders::reader`),
//!   and `locked_get` / `locked_reader_get`, the same on a handle built with
//!   `Publication::Locked`.
//! * `read_contended/get/{n}/…`: the same reads (all but `plain*`) while a background thread
//!   inserts one header continuously into the same value (copy-on-write for `shared_*` and
//!   `arc_swap`, in place under the lock for the locks).
//! * `write/insert/{n}/…` and `write/update5/{n}/…`: set one header, or five in one batch, on a
//!   map of `n` request headers plus the five written ones (so a write replaces values and the
//!   map does not grow). Variants: `shared` (`insert` / `update`), `shared_locked` (the same on
//!   a handle built with `Publication::Locked`), `clone_insert` /
//!   `clone_update5` (`HeaderMap::clone` + the write + dropping the old map: the floor for any
//!   copy-on-write design), `floor_arc_swap` / `floor_locked` (the lean floor of a published
//!   copy-on-write write: a writer mutex, the copy, the write, one new `Arc` published with
//!   arc-swap's `swap` or a pointer swap under a `parking_lot::RwLock`, the old version dropped;
//!   no seal, limits, secret flagging, re-entrancy check or allocation reuse; as
//!   `benches/alloc.rs`'s `insert_floor`), `std_rwlock` (the write in place under
//!   `std::sync::RwLock`).
//! * `from/{n}/…`: wrapping a request's map: `shared` (`SharedHeaders::from`) and
//!   `arc_std_rwlock` (`Arc::new(RwLock::new(map))`).
//!
//! The latency distribution of reads under a slow writer and the allocation count of `from` are
//! measured by the `read_latency` bench binary.

mod common;

use std::hint::black_box;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use arc_swap::ArcSwap;
use criterion::measurement::WallTime;
use criterion::{BatchSize, BenchmarkGroup, Criterion, criterion_group, criterion_main};
use http::{HeaderMap, HeaderValue};
use shared_headers::{Publication, SharedHeaders};

use common::{
    KEY, SIZES, STANDARD_KEY, WRITE_KEYS, request_headers, update5, with_background_writer,
    write_base,
};

/// Every read variant measures this on the map it reaches.
#[inline(always)]
fn lookup(map: &HeaderMap) -> Option<usize> {
    map.get(&KEY).map(HeaderValue::len)
}

/// The same read through every way of sharing a map, with or without a background writer.
struct Subjects {
    shared: SharedHeaders,
    parking_lot: parking_lot::RwLock<HeaderMap>,
    std_rwlock: RwLock<HeaderMap>,
    std_mutex: Mutex<HeaderMap>,
    arc_swap: ArcSwap<HeaderMap>,
}

impl Subjects {
    fn new(map: &HeaderMap) -> Self {
        Subjects {
            shared: SharedHeaders::from(map.clone()),
            parking_lot: parking_lot::RwLock::new(map.clone()),
            std_rwlock: RwLock::new(map.clone()),
            std_mutex: Mutex::new(map.clone()),
            arc_swap: ArcSwap::from_pointee(map.clone()),
        }
    }
}

/// Benches `read`, alone or while a background thread runs `write` in a loop.
fn read_variant<O>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    id: String,
    write: Option<&(dyn Fn() + Sync)>,
    mut read: impl FnMut() -> O,
) {
    let measure = || {
        group.bench_function(id, |b| b.iter(&mut read));
    };
    match write {
        None => measure(),
        Some(write) => {
            with_background_writer(write, measure);
        }
    }
}

/// The background writer of a variant, in the contended group only.
fn pick(write: &(dyn Fn() + Sync), contended: bool) -> Option<&(dyn Fn() + Sync)> {
    contended.then_some(write)
}

fn reads(c: &mut Criterion, contended: bool) {
    let name = if contended {
        "read_contended/get"
    } else {
        "read/get"
    };
    let mut group = c.benchmark_group(name);
    // Alternate between two values so every background write really changes the map.
    let values = [HeaderValue::from_static("a"), HeaderValue::from_static("b")];
    let next = std::sync::atomic::AtomicUsize::new(0);
    let value = || &values[next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) & 1];

    for n in SIZES {
        let map = request_headers(n);
        let s = Subjects::new(&map);
        let key = &WRITE_KEYS[0];

        // Background writers, one per variant: the same one-header insert, done the way each
        // design does writes.
        let write_shared = || {
            s.shared.insert(key.clone(), value().clone()).unwrap();
        };
        let write_parking_lot = || {
            s.parking_lot.write().insert(key.clone(), value().clone());
        };
        let write_std_rwlock = || {
            s.std_rwlock
                .write()
                .unwrap()
                .insert(key.clone(), value().clone());
        };
        let write_std_mutex = || {
            s.std_mutex
                .lock()
                .unwrap()
                .insert(key.clone(), value().clone());
        };
        let write_arc_swap = || {
            let mut next = HeaderMap::clone(&s.arc_swap.load());
            next.insert(key.clone(), value().clone());
            s.arc_swap.store(Arc::new(next));
        };

        if !contended {
            read_variant(&mut group, format!("{n}/plain"), None, || {
                lookup(black_box(&map))
            });
            read_variant(&mut group, format!("{n}/plain_clone"), None, || {
                black_box(&map).get(&KEY).cloned()
            });
        }
        read_variant(
            &mut group,
            format!("{n}/shared_get"),
            pick(&write_shared, contended),
            || black_box(&s.shared).get(&KEY),
        );
        read_variant(
            &mut group,
            format!("{n}/shared_read"),
            pick(&write_shared, contended),
            || black_box(&s.shared).read(lookup),
        );
        read_variant(
            &mut group,
            format!("{n}/shared_snapshot"),
            pick(&write_shared, contended),
            || lookup(&black_box(&s.shared).snapshot()),
        );
        read_variant(
            &mut group,
            format!("{n}/parking_lot_rwlock"),
            pick(&write_parking_lot, contended),
            || lookup(&black_box(&s.parking_lot).read()),
        );
        read_variant(
            &mut group,
            format!("{n}/std_rwlock"),
            pick(&write_std_rwlock, contended),
            || lookup(&black_box(&s.std_rwlock).read().unwrap()),
        );
        read_variant(
            &mut group,
            format!("{n}/std_mutex"),
            pick(&write_std_mutex, contended),
            || lookup(&black_box(&s.std_mutex).lock().unwrap()),
        );
        read_variant(
            &mut group,
            format!("{n}/arc_swap"),
            pick(&write_arc_swap, contended),
            || lookup(&black_box(&s.arc_swap).load()),
        );
    }
    group.finish();
}

fn uncontended_reads(c: &mut Criterion) {
    reads(c, false);
}

/// The cheapest lookup there is (a standard header: no byte hashing), at 12 headers only: the
/// shared read's constant cost weighs most against it.
fn standard_key_reads(c: &mut Criterion) {
    let mut group = c.benchmark_group("read/get_standard");
    let map = request_headers(12);
    let shared = SharedHeaders::from(map.clone());
    let lookup = |m: &HeaderMap| m.get(&STANDARD_KEY).map(HeaderValue::len);
    group.bench_function("12/plain", |b| b.iter(|| lookup(black_box(&map))));
    group.bench_function("12/plain_clone", |b| {
        b.iter(|| black_box(&map).get(&STANDARD_KEY).cloned())
    });
    group.bench_function("12/shared_get", |b| {
        b.iter(|| black_box(&shared).get(&STANDARD_KEY))
    });
    group.bench_function("12/shared_read", |b| {
        b.iter(|| black_box(&shared).read(lookup))
    });
    group.finish();
}

/// Owned reads through a per-reader cache (`SharedHeaders::reader`), against the floor for an
/// owned value and the uncached owned read, in one group so their ratios come from one run.
fn reader_reads(c: &mut Criterion) {
    let mut group = c.benchmark_group("read/reader");
    for n in SIZES {
        let map = request_headers(n);
        let shared = SharedHeaders::from(map.clone());
        let locked = SharedHeaders::builder()
            .publication(Publication::Locked)
            .build_from(map.clone())
            .unwrap();
        let mut reader = shared.reader();
        let mut locked_reader = locked.reader();
        group.bench_function(format!("{n}/plain_clone"), |b| {
            b.iter(|| black_box(&map).get(&KEY).cloned())
        });
        group.bench_function(format!("{n}/shared_get"), |b| {
            b.iter(|| black_box(&shared).get(&KEY))
        });
        group.bench_function(format!("{n}/reader_get"), |b| {
            b.iter(|| black_box(&mut reader).get(&KEY))
        });
        group.bench_function(format!("{n}/locked_get"), |b| {
            b.iter(|| black_box(&locked).get(&KEY))
        });
        group.bench_function(format!("{n}/locked_reader_get"), |b| {
            b.iter(|| black_box(&mut locked_reader).get(&KEY))
        });
    }
    group.finish();
}

fn contended_reads(c: &mut Criterion) {
    reads(c, true);
}

/// One write group: the same change through `SharedHeaders` (`shared`), as `HeaderMap::clone` +
/// the change + dropping a map (`floor`), and in place under `std::sync::RwLock`.
fn write_group<R>(
    c: &mut Criterion,
    name: &str,
    floor: &str,
    shared_write: impl Fn(&SharedHeaders) -> R,
    map_write: impl Fn(&mut HeaderMap),
) {
    let mut group = c.benchmark_group(name);
    for n in SIZES {
        let base = write_base(n);
        let shared = SharedHeaders::from(base.clone());
        let locked = SharedHeaders::builder()
            .publication(Publication::Locked)
            .build_from(base.clone())
            .unwrap();
        let lock = RwLock::new(base.clone());
        let floor_writer = parking_lot::Mutex::new(());
        let floor_swap = ArcSwap::from_pointee(base.clone());
        let floor_locked = parking_lot::RwLock::new(Arc::new(base.clone()));
        group.bench_function(format!("{n}/shared"), |b| {
            b.iter(|| shared_write(black_box(&shared)))
        });
        group.bench_function(format!("{n}/shared_locked"), |b| {
            b.iter(|| shared_write(black_box(&locked)))
        });
        group.bench_function(format!("{n}/{floor}"), |b| {
            b.iter(|| {
                let mut map = black_box(&base).clone();
                map_write(&mut map);
                map
            })
        });
        group.bench_function(format!("{n}/floor_arc_swap"), |b| {
            b.iter(|| {
                let guard = black_box(&floor_writer).lock();
                let mut map = HeaderMap::clone(&floor_swap.load());
                map_write(&mut map);
                let old = floor_swap.swap(Arc::new(map));
                drop(guard);
                old
            })
        });
        group.bench_function(format!("{n}/floor_locked"), |b| {
            b.iter(|| {
                let guard = black_box(&floor_writer).lock();
                let mut map = HeaderMap::clone(&floor_locked.read());
                map_write(&mut map);
                let old = std::mem::replace(&mut *floor_locked.write(), Arc::new(map));
                drop(guard);
                old
            })
        });
        group.bench_function(format!("{n}/std_rwlock"), |b| {
            b.iter(|| map_write(&mut black_box(&lock).write().unwrap()))
        });
    }
    group.finish();
}

fn writes(c: &mut Criterion) {
    let value = HeaderValue::from_static("written");
    let key = &WRITE_KEYS[0];
    write_group(
        c,
        "write/insert",
        "clone_insert",
        |shared| shared.insert(key.clone(), value.clone()),
        |map| {
            map.insert(key.clone(), value.clone());
        },
    );
    write_group(
        c,
        "write/update5",
        "clone_update5",
        |shared| shared.update(|m| update5(m, &value)),
        |map| update5(map, &value),
    );
}

fn from(c: &mut Criterion) {
    let mut group = c.benchmark_group("from");
    for n in SIZES {
        let map = request_headers(n);
        group.bench_function(format!("{n}/shared"), |b| {
            b.iter_batched(|| map.clone(), SharedHeaders::from, BatchSize::SmallInput)
        });
        group.bench_function(format!("{n}/arc_std_rwlock"), |b| {
            b.iter_batched(
                || map.clone(),
                |map| Arc::new(RwLock::new(map)),
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    // About 4 minutes for the whole file; `-- --warm-up-time/--measurement-time` override this.
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(50);
    targets = uncontended_reads, standard_key_reads, reader_reads, contended_reads, writes, from
}
criterion_main!(benches);
