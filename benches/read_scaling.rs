//! Do reads of one handle scale with readers? Two threads reading one handle against one thread
//! reading it, for both publications (`LockFree`, the default, and `Locked`, the server layer's
//! request-scoped handles).
//!
//! ```text
//! cargo bench --bench read_scaling
//! ```
//!
//! One handle of 12 request headers per publication (as the `shared` bench's read groups). A
//! measurement runs `threads` threads, each calling one read (`read(|m| m.get(..))` or
//! `get(..)` of `x-request-id`) on that one handle in a loop for [`WINDOW`], and counts the
//! reads they did. A round measures 1 thread, then 2 threads (A, B), and its ratio is
//! reads(2) / reads(1); rounds follow each other (A, B, A, B, ...), and the table gives the
//! median of the per-round ratios, so a change of machine load between rounds moves both sides
//! of a ratio alike. On a 2-core machine, 2.0x is perfect scaling, 1.0x is "two readers get no
//! more done than one", and below 1.0x the readers slow each other down (a shared cache line:
//! a lock word or a reference count written by both).
//!
//! Without `--bench` (for example under `cargo test --benches`) it runs short windows and one
//! round only, to check it works.

mod common;

use std::hint::black_box;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use http::{HeaderMap, HeaderValue};
use shared_headers::{Publication, SharedHeaders};

use common::{KEY, request_headers};

/// Headers in the handle (as the read benches' middle size).
const HEADERS: usize = 12;
/// How long each measurement reads.
const WINDOW: Duration = Duration::from_millis(100);
/// Rounds (each one A and one B) per row.
const ROUNDS: usize = 7;
/// Reads between two looks at the stop flag.
const BATCH: u64 = 64;

/// One row's reader: which handle, which read.
struct Subject<'a> {
    publication: &'static str,
    op: &'static str,
    read: Box<dyn Fn() + Sync + 'a>,
}

/// Reads done by `threads` threads calling `read` for `window`.
fn reads(read: &(dyn Fn() + Sync), threads: usize, window: Duration) -> u64 {
    let stop = AtomicBool::new(false);
    let start = Barrier::new(threads + 1);
    thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    // Warm up (arc-swap registers the thread on its first load).
                    for _ in 0..BATCH {
                        read();
                    }
                    start.wait();
                    let mut done = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..BATCH {
                            read();
                        }
                        done += BATCH;
                    }
                    done
                })
            })
            .collect();
        start.wait();
        thread::sleep(window);
        stop.store(true, Ordering::Relaxed);
        workers
            .into_iter()
            .map(|w| w.join().expect("reader panicked"))
            .sum()
    })
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let full_run = std::env::args().any(|arg| arg == "--bench");
    let (window, rounds) = if full_run {
        (WINDOW, ROUNDS)
    } else {
        (Duration::from_millis(5), 1)
    };
    // Values parsed from strings, as a server parses them off the wire: each is a `Bytes` whose
    // clone (what `get` returns) increments a reference count shared by every reader of the
    // value, whatever holds the map. The same names with `'static` values (a clone touches
    // nothing) show what the handle itself costs.
    let parsed = request_headers(HEADERS);
    let mut fixed = HeaderMap::new();
    for name in parsed.keys() {
        fixed.insert(
            name.clone(),
            HeaderValue::from_static("a-static-header-value"),
        );
    }
    let locked = |map: &HeaderMap| {
        SharedHeaders::builder()
            .publication(Publication::Locked)
            .build_from(map.clone())
            .expect("no limits")
    };
    let lock_free = [
        SharedHeaders::from(parsed.clone()),
        SharedHeaders::from(fixed.clone()),
    ];
    let locked = [locked(&parsed), locked(&fixed)];
    let plain = [&parsed, &fixed];

    let mut subjects: Vec<Subject<'_>> = Vec::new();
    subjects.push(Subject {
        publication: "plain &HeaderMap (ceiling)",
        op: "get",
        read: Box::new(|| drop(black_box(black_box(plain[0]).get(&KEY).cloned()))),
    });
    subjects.push(Subject {
        publication: "plain &HeaderMap (ceiling)",
        op: "get, 'static values",
        read: Box::new(|| drop(black_box(black_box(plain[1]).get(&KEY).cloned()))),
    });
    for (publication, handles) in [("LockFree", &lock_free), ("Locked", &locked)] {
        subjects.push(Subject {
            publication,
            op: "read(|m| m.get(..))",
            read: Box::new(|| {
                black_box(handles[0].read(|m| m.get(&KEY).map(HeaderValue::len)));
            }),
        });
        subjects.push(Subject {
            publication,
            op: "get",
            read: Box::new(|| drop(black_box(handles[0].get(&KEY)))),
        });
        subjects.push(Subject {
            publication,
            op: "get, 'static values",
            read: Box::new(|| drop(black_box(handles[1].get(&KEY)))),
        });
    }

    println!(
        "\nReads of one handle ({HEADERS} headers), 2 threads / 1 thread, median of {rounds} \
         interleaved rounds of {window:?} each (A: 1 thread, B: 2 threads):\n"
    );
    println!(
        "| publication | read | 1 thread, reads/s | 2 threads, reads/s | 2 / 1 (median of \
         rounds) | min | max |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    for subject in &subjects {
        let mut ones = Vec::new();
        let mut twos = Vec::new();
        let mut ratios = Vec::new();
        for _ in 0..rounds {
            let one = reads(&*subject.read, 1, window);
            let two = reads(&*subject.read, 2, window);
            ones.push(one as f64 / window.as_secs_f64());
            twos.push(two as f64 / window.as_secs_f64());
            ratios.push(two as f64 / one.max(1) as f64);
        }
        let min = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let max = ratios.iter().copied().fold(0.0, f64::max);
        println!(
            "| {} | `{}` | {:.1} M | {:.1} M | {:.2}x | {min:.2}x | {max:.2}x |",
            subject.publication,
            subject.op.replace('|', "\\|"),
            median(ones) / 1e6,
            median(twos) / 1e6,
            median(ratios),
        );
    }
    println!(
        "\ntarget: 2 / 1 >= 1.0x for the handles' rows on a 2-core machine (1 / 1 thread columns: \
         medians of the rounds)"
    );
}
