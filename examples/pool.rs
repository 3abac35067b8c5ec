//! A dead pooled connection in the clients Rust users run: hyper-util's legacy `Client`
//! (HTTP/1.1 and h2c), tonic's `Channel` and reqwest (h2c), through an in-process fault proxy
//! on loopback, stock, with keep-alive pings, and with this crate's `HealthConnector` +
//! `ConnRetryLayer` (reqwest, which has no hook for it: with the crate's ping settings alone).
//!
//! ```text
//! cargo run --release --features full --example pool                  # 100 requests a row
//! cargo run --release --features full --example pool -- --requests 200 # the 20 s runs
//! cargo run --release --features full --example pool -- --quick        # 10 requests a row
//! ```
//!
//! Each row: two warm-up requests, then the fault on the connections open at that instant
//! (fresh connections work), then one request every 100 ms, each with a 1 s deadline. The
//! columns: requests failed; failed requests sent after the first failure had been returned
//! (lost to a connection the caller had seen fail); when the client closed the faulted
//! connection, seen by the proxy (black hole and write stall, where the proxy keeps reading);
//! connections opened. The last rows: a server alive but slower (1.5 s) than the deadline, and
//! an HTTP/2 server that answers pings but never a request.
//! The rows of one client kind run at once, the kinds one after another; the crate's rows are
//! judged only when a 10 ms timer beside them kept time (at most 250 ms late). The harness is
//! `examples/pool/fault.rs`, and `tests/conn_clients.rs` asserts the crate's rows on a short
//! version.

#[path = "pool/fault.rs"]
mod fault;

use std::time::Duration;

use fault::{Config, Fault, Kind};
use http::Method;

/// The requests of a ping-only row, `--quick` included.
const PING_ONLY_REQUESTS: usize = 25;

fn parse_requests() -> Result<usize, String> {
    let mut args = std::env::args().skip(1);
    let mut requests = 100;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => requests = 10,
            "--requests" => {
                requests = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|&n| n > 0)
                    .ok_or("--requests takes a positive number")?;
            }
            other => {
                return Err(format!(
                    "unknown argument {other:?} (--requests N, --quick)"
                ));
            }
        }
    }
    Ok(requests)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let requests = parse_requests()?;
    println!(
        "{requests} requests a row, one every 100 ms, 1 s deadline each; the fault starts after \
         2 warm-up requests"
    );
    let mut runs = Vec::new();
    for kind in [Kind::HyperH1, Kind::HyperH2, Kind::Tonic, Kind::Reqwest] {
        // reqwest has no hook for the crate's connector: its own settings, and the crate's
        // ping constants alone.
        let configs = match kind {
            Kind::Reqwest => [Config::Stock, Config::Ping, Config::CratePing],
            _ => [Config::Stock, Config::Ping, Config::Crate],
        };
        for config in configs {
            for fault in Fault::MATRIX
                .into_iter()
                .chain([Fault::Slow, Fault::PingOnly])
            {
                if matches!(fault, Fault::Slow | Fault::PingOnly) && kind == Kind::HyperH1 {
                    // HTTP/1.1 cannot reuse a connection with an answer outstanding, and has
                    // no ping.
                    continue;
                }
                runs.push((kind, config, fault));
            }
        }
    }
    // The machine's timekeeping beside the rows: a 10 ms timer's worst lateness. A starved
    // runtime times requests out whatever the client does, so the verdict below is given only
    // when the timers kept time (a quarter of the deadline).
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let probe = tokio::spawn(worst_timer_lateness(stopped));
    // One client kind at a time, its rows at once: fewer sockets and tasks in flight on a
    // busy machine.
    let mut rows = Vec::new();
    for kind in [Kind::HyperH1, Kind::HyperH2, Kind::Tonic, Kind::Reqwest] {
        let tasks: Vec<_> = runs
            .iter()
            .filter(|(k, _, _)| *k == kind)
            .map(|&(kind, config, fault)| {
                // The ping-only server is told from a slow one only when the first cancelled
                // stream is 1.75 s old: requests keep coming past 2 s.
                let requests = if fault == Fault::PingOnly {
                    requests.max(PING_ONLY_REQUESTS)
                } else {
                    requests
                };
                tokio::spawn(fault::run(
                    kind,
                    config,
                    fault,
                    Method::GET,
                    requests,
                    Duration::from_millis(100),
                    Duration::from_secs(1),
                ))
            })
            .collect();
        for task in tasks {
            rows.push(task.await??);
        }
    }
    let _ = stop.send(true);
    let lateness = probe.await?;
    println!("\n{}", fault::HEAD);
    let special = |r: &fault::Row| matches!(r.fault, Fault::Slow | Fault::PingOnly);
    for row in rows.iter().filter(|r| !special(r)) {
        println!("{row}");
    }
    println!("\nA server alive but slower than the deadline (1.5 s answers, 1 s deadlines):\n");
    println!("{}", fault::HEAD);
    for row in rows.iter().filter(|r| r.fault == Fault::Slow) {
        println!("{row}");
    }
    println!(
        "\nA server that answers pings but never a request (HTTP/2; at least \
         {PING_ONLY_REQUESTS} requests):\n"
    );
    println!("{}", fault::HEAD);
    for row in rows.iter().filter(|r| r.fault == Fault::PingOnly) {
        println!("{row}");
    }
    // The crate's rows must hold what the docs claim (the smoke run checks them).
    let mut broken = Vec::new();
    for row in rows.iter().filter(|r| r.config == Config::Crate) {
        let silent = matches!(row.fault, Fault::BlackHole | Fault::WriteStall);
        let ok = match (row.fault, row.kind) {
            (Fault::Slow, _) => row.connections == 1,
            // Left within 2 s of the fault (judged with the harness's 250 ms of timer
            // lateness), and no request lost to it after the first failure was returned.
            (Fault::PingOnly, _) => {
                row.closed_at
                    .is_some_and(|at| at <= Duration::from_millis(2250))
                    && row.failed_after_first_failure() == 0
            }
            (_, Kind::HyperH1) if silent => row.failed() <= 1,
            _ => row.failed() == 0,
        };
        if !ok {
            broken.push(format!("{row} ({:?})", row.first_error()));
        }
    }
    if !broken.is_empty() {
        if lateness > Duration::from_millis(250) {
            println!(
                "\nnot judged: the machine did not keep time (a 10 ms timer fired {} ms late), \
                 so timeouts say nothing of the clients; the crate's rows that missed:\n{}",
                lateness.as_millis(),
                broken.join("\n")
            );
            return Ok(());
        }
        return Err(format!("the crate's rows do not hold:\n{}", broken.join("\n")).into());
    }
    println!(
        "\nthe crate's rows hold (timers kept time: worst lateness {} ms)",
        lateness.as_millis()
    );
    Ok(())
}

/// The worst lateness of a 10 ms timer until `stopped` turns true.
async fn worst_timer_lateness(mut stopped: tokio::sync::watch::Receiver<bool>) -> Duration {
    let tick = Duration::from_millis(10);
    let mut worst = Duration::ZERO;
    while !*stopped.borrow() {
        let start = std::time::Instant::now();
        tokio::select! {
            _ = tokio::time::sleep(tick) => {
                worst = worst.max(start.elapsed().saturating_sub(tick));
            }
            _ = stopped.changed() => break,
        }
    }
    worst
}
