//! The origin scenario, in plain threads: a handler that outlives its deadline, a timeout that
//! commits the response, and an access logger, all sharing one request's headers.
//!
//! In Go this crashed a kube-apiserver with `concurrent map read and map write`; with
//! `Arc<RwLock<HeaderMap>>` it logs headers that were never sent. Here the first commit wins, the
//! logger sees exactly the committed headers, and the late handler is told its writes were refused.
//!
//! Run: `cargo run --release --example origin`

use std::thread;
use std::time::{Duration, Instant};

use http::{HeaderName, HeaderValue};
use shared_headers::{Error, SharedHeaders};

fn main() {
    let deadline = Duration::from_millis(50);
    let start = Instant::now();
    let headers = SharedHeaders::new();
    headers
        .insert("x-request-id", HeaderValue::from_static("req-42"))
        .expect("fresh headers are not sealed");

    // The handler writes a header every 20 ms, for longer than the deadline allows.
    let handler = {
        let headers = headers.clone();
        thread::spawn(move || {
            let mut log = Vec::new();
            for step in 0..6 {
                thread::sleep(Duration::from_millis(20));
                let name = HeaderName::try_from(format!("x-step-{step}")).expect("valid name");
                let value = HeaderValue::from(step);
                let at = start.elapsed().as_millis();
                match headers.insert(&name, value) {
                    Ok(_) => log.push(format!("{at:>4} ms  handler  wrote {name}: accepted")),
                    Err(Error::Sealed { version }) => log.push(format!(
                        "{at:>4} ms  handler  wrote {name}: refused (sealed at version {version})"
                    )),
                    Err(other) => log.push(format!("{at:>4} ms  handler  wrote {name}: {other}")),
                }
            }
            // The handler finishes and tries to commit, too late.
            let outcome = match headers.seal() {
                Ok(_) => "handler committed".to_string(),
                Err(err) => format!("handler commit refused: {err}"),
            };
            log.push(format!(
                "{:>4} ms  handler  {outcome}",
                start.elapsed().as_millis()
            ));
            log
        })
    };

    // The timeout fires and commits the headers as they are.
    let timeout = {
        let headers = headers.clone();
        thread::spawn(move || {
            thread::sleep(deadline);
            let at = start.elapsed().as_millis();
            match headers.seal() {
                Ok(sealed) => format!(
                    "{at:>4} ms  timeout  committed version {} with {} headers, answered 503",
                    sealed.version(),
                    sealed.len()
                ),
                Err(err) => format!("{at:>4} ms  timeout  lost the race: {err}"),
            }
        })
    };

    let timeout_line = timeout.join().expect("timeout thread");
    // The logger writes its line once the response is committed: it reads the sealed snapshot,
    // while the handler is still running.
    let logged = headers.snapshot();
    let handler_lines = handler.join().expect("handler thread");

    let mut lines: Vec<&String> = handler_lines.iter().chain([&timeout_line]).collect();
    // Each line starts with its time in milliseconds, right-aligned: sort by it.
    lines.sort_by_key(|line| {
        line.trim_start()
            .split(' ')
            .next()
            .and_then(|ms| ms.parse::<u64>().ok())
    });
    for line in lines {
        println!("{line}");
    }
    let mut names: Vec<_> = logged.keys().map(|n| n.as_str()).collect();
    names.sort_unstable();
    println!(
        "        logger   logged version {} (sealed: {}): {}",
        logged.version(),
        logged.is_sealed(),
        names.join(", ")
    );
    let final_headers = headers.snapshot();
    assert!(logged.is_sealed(), "the logger read after the commit");
    assert_eq!(logged, final_headers, "the log matches what was committed");
    println!(
        "\nThe log shows exactly the committed headers; {} late handler actions were refused \
         with Error::Sealed, none was lost silently.",
        handler_lines
            .iter()
            .filter(|l| l.contains("refused"))
            .count()
    );
}
