//! Per-request costs that criterion's means and medians hide: the latency *distribution* of reads
//! while a slow writer runs, and how many allocations wrapping a request's map costs.
//!
//! ```text
//! cargo bench --bench read_latency
//! ```
//!
//! 1. **Allocations**: a counting global allocator ([`stats_alloc`]) counts the heap allocations
//!    of `SharedHeaders::from(HeaderMap)` (target: at most 2) and of the common operations.
//! 2. **Read latency under a slow writer**: one thread times every single read (`Instant` around
//!    one `get` of `user-agent` on 48 headers, one read every 500 ns for 1 s) while another
//!    thread rewrites all 48 headers in a
//!    loop: through `SharedHeaders::update` (copy-on-write) and, for comparison, in place under a
//!    `std::sync::RwLock<HeaderMap>` write lock. Prints p50/p99/max alone and under the writer.
//!    Both publications: the default `Publication::LockFree` handle (the first rows) and a
//!    `Publication::Locked` one (the server layer's request-scoped handles, the last rows).
//!    Targets: `SharedHeaders` p99 under the writer at most 3x its own p99 alone, and at least
//!    100x lower than the `RwLock` reader's p99 under the writer.
//!
//! The numbers include the timer's own cost (the `timer only` row). The table is also written to
//! `target/criterion/read_latency.json`, which `scripts/bench-table` reads. Without `--bench`
//! (for example under `cargo test --benches`) it runs a few samples only, to check it works.

mod common;

use std::alloc::System;
use std::hint::black_box;
use std::sync::RwLock;
use std::thread;
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderName, HeaderValue};
use shared_headers::SharedHeaders;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

use common::{
    KEY, SIZES, WRITE_KEYS, request_headers, rewrite_all, update5, with_background_writer,
};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Size of the map in the latency test.
const LATENCY_HEADERS: usize = 48;
/// After this long, a background writer slows down to one write a millisecond, so that a
/// starved reader cannot hang the bench.
const WRITER_CAP: Duration = Duration::from_secs(5);

fn main() {
    let full_run = std::env::args().any(|arg| arg == "--bench");
    let allocations = allocations();
    let budget = if full_run {
        Budget {
            time: Duration::from_secs(1),
            samples: 2_000_000,
        }
    } else {
        Budget {
            time: Duration::from_millis(20),
            samples: 10_000,
        }
    };
    let latency = latency(budget);
    if full_run {
        write_json(&allocations, &latency);
    }
}

// ---------------------------------------------------------------------------------------------
// Allocations
// ---------------------------------------------------------------------------------------------

/// Heap allocations (calls to `alloc` plus `realloc`) made by `f`, with no other thread running.
fn count_allocations<R>(f: impl FnOnce() -> R) -> usize {
    let region = Region::new(GLOBAL);
    let result = f();
    let change = region.change();
    drop(black_box(result));
    change.allocations + change.reallocations
}

fn allocations() -> Vec<(String, usize)> {
    let value = HeaderValue::from_static("written");
    let mut rows = Vec::new();
    rows.push((
        "SharedHeaders::new()".to_owned(),
        count_allocations(SharedHeaders::new),
    ));
    for n in SIZES {
        let map = request_headers(n);
        rows.push((
            format!("SharedHeaders::from(map of {n})"),
            count_allocations(|| SharedHeaders::from(map)),
        ));
    }
    // Steady state: each operation runs once before it is counted, so one-time costs are left out
    // (arc-swap registering the thread on its first load; `Bytes` promoting a value parsed off
    // the wire to a shared buffer on its first clone; the map growing for the written keys).
    let shared = SharedHeaders::from(request_headers(12));
    let warm = |f: &dyn Fn() -> usize| {
        f();
        f()
    };
    let ops: [(&str, usize); 5] = [
        (
            "get (12 headers)",
            warm(&|| count_allocations(|| shared.get(&KEY))),
        ),
        (
            "read(|m| m.get(..)) (12 headers)",
            warm(&|| count_allocations(|| shared.read(|m| m.get(&KEY).is_some()))),
        ),
        (
            "snapshot (12 headers)",
            warm(&|| count_allocations(|| shared.snapshot())),
        ),
        (
            "insert (12 headers)",
            warm(&|| count_allocations(|| shared.insert(WRITE_KEYS[0].clone(), value.clone()))),
        ),
        (
            "update, 5 headers (12 headers)",
            warm(&|| count_allocations(|| shared.update(|m| update5(m, &value)))),
        ),
    ];
    rows.extend(ops.iter().map(|(name, count)| ((*name).to_owned(), *count)));

    println!("\nHeap allocations per call (alloc + realloc):\n");
    println!("| operation | allocations |");
    println!("|---|---:|");
    for (name, count) in &rows {
        println!("| {} | {count} |", md(name));
    }
    let worst_from = rows
        .iter()
        .filter(|(name, _)| name.starts_with("SharedHeaders::from"))
        .map(|(_, count)| *count)
        .max()
        .unwrap_or(0);
    println!(
        "\nfrom(HeaderMap): {worst_from} allocations (target <= 2): {}",
        verdict(worst_from <= 2)
    );
    rows
}

// ---------------------------------------------------------------------------------------------
// Latency
// ---------------------------------------------------------------------------------------------

/// p50, p99 and max of one set of samples, in nanoseconds.
#[derive(Clone, Copy, Debug)]
struct Dist {
    p50: u64,
    p99: u64,
    max: u64,
    samples: usize,
}

impl Dist {
    fn of(mut samples: Vec<u64>) -> Dist {
        assert!(!samples.is_empty());
        samples.sort_unstable();
        let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
        Dist {
            p50: at(0.50),
            p99: at(0.99),
            max: *samples.last().unwrap(),
            samples: samples.len(),
        }
    }
}

/// How long each reader is sampled, alone and under the writer, and the most samples kept.
#[derive(Clone, Copy)]
struct Budget {
    time: Duration,
    samples: usize,
}

/// The reader's other work between two reads: a request does more than read headers, and a
/// reader that never pauses would measure throughput, not latency.
const GAP: Duration = Duration::from_nanos(500);

/// Times single calls of `read`, one every [`GAP`], for the budget's time or sample count.
fn sample<O>(budget: Budget, mut read: impl FnMut() -> O) -> Dist {
    for _ in 0..10_000 {
        black_box(read()); // warm caches and the branch predictor
    }
    let mut samples = Vec::with_capacity(budget.samples);
    let start = Instant::now();
    while samples.len() < budget.samples {
        let before = Instant::now();
        black_box(read());
        let after = Instant::now();
        samples.push((after - before).as_nanos() as u64);
        while after.elapsed() < GAP {
            std::hint::spin_loop();
        }
        if after - start > budget.time {
            break;
        }
    }
    Dist::of(samples)
}

/// One reader, measured alone and while its writer runs in a loop.
struct Row {
    name: &'static str,
    alone: Dist,
    under_writer: Option<(Dist, f64)>, // and the writer's writes per second
}

/// Runs `measure` while `write` runs in a loop on another thread (see [`WRITER_CAP`]).
fn under_writer<W: Fn() + Sync>(write: W, measure: impl FnOnce() -> Dist) -> (Dist, f64) {
    let start = Instant::now();
    let ((dist, elapsed), writes) = with_background_writer(
        || {
            write();
            if start.elapsed() > WRITER_CAP {
                thread::sleep(Duration::from_millis(1));
            }
        },
        || {
            let dist = measure();
            (dist, start.elapsed())
        },
    );
    (dist, writes as f64 / elapsed.as_secs_f64())
}

fn latency(budget: Budget) -> Vec<Row> {
    let map = request_headers(LATENCY_HEADERS);
    let names: Vec<HeaderName> = map.keys().cloned().collect();
    let values = [HeaderValue::from_static("a"), HeaderValue::from_static("b")];
    let shared = SharedHeaders::from(map.clone());
    // The same map on a request-scoped handle (the server layer's publication).
    let locked = SharedHeaders::builder()
        .publication(shared_headers::Publication::Locked)
        .build_from(map.clone())
        .expect("no limits");
    let lock = RwLock::new(map);

    let slow_shared_write = || {
        for value in &values {
            shared.update(|m| rewrite_all(m, &names, value)).unwrap();
        }
    };
    let slow_locked_write = || {
        for value in &values {
            locked.update(|m| rewrite_all(m, &names, value)).unwrap();
        }
    };
    let slow_lock_write = || {
        for value in &values {
            rewrite_all(&mut lock.write().unwrap(), &names, value);
        }
    };

    let read_shared = || shared.read(|m: &HeaderMap| m.get(&KEY).map(HeaderValue::len));
    let get_shared = || shared.get(&KEY);
    let read_locked = || locked.read(|m: &HeaderMap| m.get(&KEY).map(HeaderValue::len));
    let get_locked = || locked.get(&KEY);
    let read_lock = || lock.read().unwrap().get(&KEY).map(HeaderValue::len);

    let rows = vec![
        Row {
            name: "timer only",
            alone: sample(budget, || ()),
            under_writer: None,
        },
        Row {
            name: "SharedHeaders::read(|m| m.get(..))",
            alone: sample(budget, read_shared),
            under_writer: Some(under_writer(slow_shared_write, || {
                sample(budget, read_shared)
            })),
        },
        Row {
            name: "SharedHeaders::get",
            alone: sample(budget, get_shared),
            under_writer: Some(under_writer(slow_shared_write, || {
                sample(budget, get_shared)
            })),
        },
        Row {
            name: "std::sync::RwLock<HeaderMap> (writer in place)",
            alone: sample(budget, read_lock),
            under_writer: Some(under_writer(slow_lock_write, || sample(budget, read_lock))),
        },
        Row {
            name: "SharedHeaders::read(|m| m.get(..)), Publication::Locked",
            alone: sample(budget, read_locked),
            under_writer: Some(under_writer(slow_locked_write, || {
                sample(budget, read_locked)
            })),
        },
        Row {
            name: "SharedHeaders::get, Publication::Locked",
            alone: sample(budget, get_locked),
            under_writer: Some(under_writer(slow_locked_write, || {
                sample(budget, get_locked)
            })),
        },
    ];

    println!(
        "\nRead latency: one `get` of `{KEY}` on {LATENCY_HEADERS} headers, timed one by one; \
         writer: all {LATENCY_HEADERS} headers rewritten in a loop.\n"
    );
    println!(
        "| reader | alone p50 | alone p99 | alone max | under writer p50 | under writer p99 \
         | under writer max | p99 under writer / alone | writes/s |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for row in &rows {
        let (p50, p99, max, ratio, rate) = match row.under_writer {
            Some((d, rate)) => (
                ns(d.p50),
                ns(d.p99),
                ns(d.max),
                format!("{:.2}x", d.p99 as f64 / row.alone.p99 as f64),
                format!("{rate:.0}"),
            ),
            None => Default::default(),
        };
        println!(
            "| {} | {} | {} | {} | {p50} | {p99} | {max} | {ratio} | {rate} |",
            md(row.name),
            ns(row.alone.p50),
            ns(row.alone.p99),
            ns(row.alone.max),
        );
    }

    let p99 = |i: usize| rows[i].under_writer.map(|(d, _)| d.p99).unwrap_or(0);
    let self_ratio = p99(1) as f64 / rows[1].alone.p99 as f64;
    let locked_ratio = p99(4) as f64 / rows[4].alone.p99 as f64;
    let lock_locked_ratio = p99(3) as f64 / p99(4).max(1) as f64;
    let lock_ratio = p99(3) as f64 / p99(1).max(1) as f64;
    println!(
        "\nSharedHeaders::read p99 under writer / alone: {self_ratio:.2}x (target <= 3x): {}",
        verdict(self_ratio <= 3.0)
    );
    println!(
        "std RwLock p99 / SharedHeaders::read p99, both under writer: {lock_ratio:.2}x \
         (target >= 100x): {}",
        verdict(lock_ratio >= 100.0)
    );
    println!(
        "Publication::Locked: read p99 under writer / alone: {locked_ratio:.2}x; std RwLock p99 \
         / its read p99, both under writer: {lock_locked_ratio:.2}x"
    );
    println!(
        "at least {} samples per phase, one read every {GAP:?} for {:?}\n",
        rows.iter()
            .flat_map(|r| [Some(r.alone), r.under_writer.map(|(d, _)| d)])
            .flatten()
            .map(|d| d.samples)
            .min()
            .unwrap_or(0),
        budget.time
    );
    rows
}

// ---------------------------------------------------------------------------------------------
// Output
// ---------------------------------------------------------------------------------------------

/// Escapes `|` for a Markdown table cell.
fn md(text: &str) -> String {
    text.replace('|', "\\|")
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "NOT met" }
}

/// A duration in nanoseconds, in a readable unit.
fn ns(ns: u64) -> String {
    match ns {
        0..1_000 => format!("{ns} ns"),
        1_000..1_000_000 => format!("{:.1} us", ns as f64 / 1e3),
        _ => format!("{:.2} ms", ns as f64 / 1e6),
    }
}

/// Writes the results next to criterion's, for `scripts/bench-table`.
fn write_json(allocations: &[(String, usize)], rows: &[Row]) {
    let dist = |d: &Dist| {
        format!(
            "{{\"p50_ns\": {}, \"p99_ns\": {}, \"max_ns\": {}, \"samples\": {}}}",
            d.p50, d.p99, d.max, d.samples
        )
    };
    let allocs: Vec<String> = allocations
        .iter()
        .map(|(name, count)| format!("    {{\"operation\": \"{name}\", \"allocations\": {count}}}"))
        .collect();
    let readers: Vec<String> = rows
        .iter()
        .map(|row| {
            let (under, rate) = match &row.under_writer {
                Some((d, rate)) => (dist(d), format!("{rate:.0}")),
                None => ("null".to_owned(), "null".to_owned()),
            };
            format!(
                "    {{\"reader\": \"{}\", \"alone\": {}, \"under_writer\": {under}, \
                 \"writes_per_sec\": {rate}}}",
                row.name,
                dist(&row.alone)
            )
        })
        .collect();
    let json = format!(
        "{{\n  \"headers\": {LATENCY_HEADERS},\n  \"allocations\": [\n{}\n  ],\n  \"latency\": [\n{}\n  ]\n}}\n",
        allocs.join(",\n"),
        readers.join(",\n")
    );
    // The bench runs as target/<profile>/deps/read_latency-<hash>.
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            let exe = std::env::current_exe().ok()?;
            Some(exe.parent()?.parent()?.parent()?.to_path_buf())
        });
    let Some(target) = target else { return };
    let dir = target.join("criterion");
    let path = dir.join("read_latency.json");
    match std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, json)) {
        Ok(()) => println!("written: {}", path.display()),
        Err(err) => eprintln!("could not write {}: {err}", path.display()),
    }
}
