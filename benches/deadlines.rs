//! The lateness of a timeout storm (issue 20): `REQUESTS` requests whose deadlines are the same
//! instant, each with a slow `on_commit` hook (1 ms of `thread::sleep`), on a 2-worker runtime;
//! prints the distribution of (commit - deadline) over the requests, where the commit is the
//! record's `time_to_commit()` (the seal made by the process's deadline thread) and the deadline its
//! `budget()`. The figure the issue asks for; `tests/layer_deadlines.rs` asserts a bound on it.
//!
//! ```text
//! cargo bench --features full --bench deadlines            # 5 rounds of 1,000 requests
//! cargo bench --features full --bench deadlines -- 10000 3 # 3 rounds of 10,000
//! ```
//!
//! Without `--bench` (as `cargo test --benches` runs it) one small round runs, as a smoke test.
//! Wall-clock figures on a shared machine: compare rounds of one run, not runs of two days.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{Request, Response};
use shared_headers::Committed;
use shared_headers::server::SharedHeadersLayer;
use tower::{Layer, Service, ServiceExt, service_fn};

/// One round: the sorted lateness of every commit.
async fn round(requests: usize, hook: Duration) -> Vec<Duration> {
    let slow = Arc::new(move |_: &shared_headers::CommitEvent<'_>| std::thread::sleep(hook));
    // Far enough that every request is armed (and its future spawned) before the instant.
    let at =
        Instant::now() + Duration::from_millis(200) + Duration::from_micros(requests as u64 * 50);
    let mut tasks = Vec::with_capacity(requests);
    for _ in 0..requests {
        let slow = slow.clone();
        let mut service = SharedHeadersLayer::new()
            .timeout(at.saturating_duration_since(Instant::now()))
            .on_commit(move |c| slow(c))
            .layer(service_fn(|_req: Request<()>| async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok::<_, Infallible>(Response::new(String::new()))
            }));
        let future = service.ready().await.unwrap().call(Request::new(()));
        tasks.push(tokio::spawn(future));
    }
    assert!(
        Instant::now() < at,
        "arming took past the instant: fewer requests"
    );
    let mut late = Vec::with_capacity(requests);
    for task in tasks {
        let res = task.await.unwrap().unwrap();
        let committed = res.extensions().get::<Committed>().unwrap();
        late.push(
            committed
                .time_to_commit()
                .saturating_sub(committed.budget().unwrap()),
        );
    }
    late.sort();
    late
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let bench = args.iter().any(|a| a == "--bench");
    let mut numbers = args.iter().filter_map(|a| a.parse::<usize>().ok());
    let (requests, rounds) = if bench {
        (numbers.next().unwrap_or(1_000), numbers.next().unwrap_or(5))
    } else {
        (100, 1)
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!("deadlines/storm: {requests} requests expiring at one instant, a 1 ms on_commit each");
    println!("| round | p50 | p90 | p99 | max |");
    println!("|---:|---:|---:|---:|---:|");
    for n in 1..=rounds {
        let late = rt.block_on(round(requests, Duration::from_millis(1)));
        let pick = |q: usize| late[(late.len() * q / 100).min(late.len() - 1)];
        println!(
            "| {n} | {:.2?} | {:.2?} | {:.2?} | {:.2?} |",
            pick(50),
            pick(90),
            pick(99),
            late[late.len() - 1]
        );
    }
}
