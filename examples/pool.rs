//! golang/go#39750 on loopback: a pool that learns of a connection's death only from its reader
//! keeps handing out a connection whose writes fail; `shared_headers::conn::Pool` recovers after
//! one error.
//!
//! ```text
//! cargo run --release --features conn --example pool                  # 200 requests per pool
//! cargo run --release --features conn --example pool -- --requests 2000
//! ```
//!
//! Both pools send the same sequential requests to one local HTTP/1.1 server. After request
//! `requests / 10`, the writer of the pooled connection breaks (its side of the socket is shut
//! down, so each write fails with `EPIPE`), while the server keeps the connection open and
//! silent, so the reader sees nothing: the state of the kubelet connection in the Go issue.
//!
//! * The naive pool marks a connection dead only when its reader sees an error. Writers return
//!   their errors to the caller and move on, so every later request gets the same connection.
//! * This crate's pool: the writer records the error ([`ConnHealth::observe`]), the connection
//!   is evicted at once, and the next request opens a fresh connection.

#[path = "pool/http1.rs"]
mod http1;

use std::io::{self, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use http1::Conn;
use shared_headers::conn::{ConnHealth, Lease, Pool, Pooled, Status};

const KEY: &str = "127.0.0.1";

fn main() -> io::Result<()> {
    let requests = parse_requests()?;
    let server = Server::start()?;
    let fault_at = (requests / 10).max(1);
    println!(
        "golang/go#39750 on loopback: {requests} sequential requests per pool; \
         the pooled connection's writer breaks before request {}",
        fault_at + 1
    );

    let naive = run(
        "naive pool",
        requests,
        fault_at,
        &mut NaivePool::default(),
        &server,
    )?;
    let ours = run(
        "conn::Pool",
        requests,
        fault_at,
        &mut OurPool::default(),
        &server,
    )?;

    println!();
    println!("{:<40} {:>12} {:>12}", "", "naive pool", "conn::Pool");
    let rows = [
        ("requests", naive.requests, ours.requests),
        ("succeeded", naive.ok, ours.ok),
        ("failed", naive.failed, ours.failed),
        ("connections opened", naive.opened, ours.opened),
        (
            "checkouts of a conn whose write failed",
            naive.reused_broken,
            ours.reused_broken,
        ),
    ];
    for (name, a, b) in rows {
        println!("{name:<40} {a:>12} {b:>12}");
    }
    println!(
        "{:<40} {:>12} {:>12}",
        "first error",
        naive
            .first_error
            .map_or("-".into(), |kind| format!("{kind:?}")),
        ours.first_error
            .map_or("-".into(), |kind| format!("{kind:?}"))
    );
    println!(
        "{:<40} {:>12} {:>12}",
        "time",
        format!("{:.0?}", naive.elapsed),
        format!("{:.0?}", ours.elapsed)
    );

    // The smoke test: the demo must show the bug and the fix, or fail.
    let naive_stuck = naive.failed == requests - fault_at && naive.opened == 1;
    let ours_recovered = ours.failed == 1 && ours.opened == 2;
    if !(naive_stuck && ours_recovered) {
        eprintln!(
            "unexpected outcome: naive stuck = {naive_stuck}, ours recovered = {ours_recovered}"
        );
        std::process::exit(1);
    }
    println!(
        "\nnaive pool: stuck on the broken connection; conn::Pool: recovered after one error."
    );
    server.stop();
    Ok(())
}

fn parse_requests() -> io::Result<usize> {
    let mut args = std::env::args().skip(1);
    let mut requests = 200;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--requests" => {
                requests = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|&n| (10..=1_000_000).contains(&n))
                    .ok_or_else(|| io::Error::other("--requests takes a number in 10..=1000000"))?;
            }
            _ => return Err(io::Error::other(format!("unknown argument {arg:?}"))),
        }
    }
    Ok(requests)
}

/// What both pools must do: hand out a connection, connecting when needed.
trait DemoPool {
    /// Whether this pool records writer errors in the connection's health.
    const RECORDS_WRITE_ERRORS: bool;
    fn checkout(&mut self, addr: SocketAddr) -> io::Result<Checked>;
}

/// A checked-out connection of either pool.
enum Checked {
    Naive {
        conn: Arc<Conn>,
        id: u64,
        _lease: Lease,
    },
    Ours(Pooled<Conn>),
}

impl Checked {
    fn id(&self) -> u64 {
        match self {
            Checked::Naive { id, .. } => *id,
            Checked::Ours(pooled) => pooled.id(),
        }
    }
}

impl Deref for Checked {
    type Target = Conn;

    fn deref(&self) -> &Conn {
        match self {
            Checked::Naive { conn, .. } => conn,
            Checked::Ours(pooled) => pooled,
        }
    }
}

/// Decides liveness the way the Go transport did in this case: only the reader marks a
/// connection dead, and checkout asks "is it still open?" before using it. Writers return their
/// errors to the caller and record nothing.
#[derive(Default)]
struct NaivePool {
    conns: Vec<(u64, Arc<Conn>, ConnHealth)>,
    next_id: u64,
}

impl DemoPool for NaivePool {
    const RECORDS_WRITE_ERRORS: bool = false;

    fn checkout(&mut self, addr: SocketAddr) -> io::Result<Checked> {
        self.conns
            .retain(|(_, _, health)| health.status() == Status::Open);
        for (id, conn, health) in &self.conns {
            if let Ok(lease) = health.try_acquire() {
                let (conn, id) = (Arc::clone(conn), *id);
                return Ok(Checked::Naive {
                    conn,
                    id,
                    _lease: lease,
                });
            }
        }
        let (conn, health) = Conn::connect(addr)?;
        let lease = health.try_acquire().map_err(io::Error::other)?;
        let (conn, id) = (Arc::new(conn), self.next_id);
        self.next_id += 1;
        self.conns.push((id, Arc::clone(&conn), health));
        Ok(Checked::Naive {
            conn,
            id,
            _lease: lease,
        })
    }
}

/// This crate's pool, used as documented.
#[derive(Default)]
struct OurPool {
    pool: Pool<&'static str, Conn>,
}

impl DemoPool for OurPool {
    const RECORDS_WRITE_ERRORS: bool = true;

    fn checkout(&mut self, addr: SocketAddr) -> io::Result<Checked> {
        if let Some(pooled) = self.pool.checkout(&KEY) {
            return Ok(Checked::Ours(pooled));
        }
        let (conn, health) = Conn::connect(addr)?;
        let pooled = self
            .pool
            .insert(KEY, conn, health)
            .map_err(io::Error::other)?;
        Ok(Checked::Ours(pooled))
    }
}

struct Outcome {
    requests: usize,
    ok: usize,
    failed: usize,
    opened: usize,
    reused_broken: usize,
    first_error: Option<io::ErrorKind>,
    elapsed: Duration,
}

fn run<P: DemoPool>(
    name: &str,
    requests: usize,
    fault_at: usize,
    pool: &mut P,
    server: &Server,
) -> io::Result<Outcome> {
    let accepted_before = server.accepted.load(Ordering::SeqCst);
    let started = Instant::now();
    let mut broken = Vec::new(); // pool ids of connections whose write failed
    let (mut ok, mut failed, mut reused_broken) = (0, 0, 0);
    let mut first_error = None;
    for i in 0..requests {
        let pooled = pool.checkout(server.addr)?;
        if broken.contains(&pooled.id()) {
            reused_broken += 1;
        }
        if i == fault_at {
            pooled.break_writer();
        }
        match pooled.get("/", P::RECORDS_WRITE_ERRORS) {
            Ok(_) => ok += 1,
            Err(failure) => {
                failed += 1;
                first_error.get_or_insert(failure.error.kind());
                if !failure.written {
                    broken.push(pooled.id());
                }
            }
        }
        if i % 20 == 0 || i + 1 == requests {
            eprint!(
                "\r[{name}] {:>7}/{requests}  ok {ok:>7}  failed {failed:>7}",
                i + 1
            );
            let _ = io::stderr().flush();
        }
    }
    eprintln!();
    Ok(Outcome {
        requests,
        ok,
        failed,
        opened: server.accepted.load(Ordering::SeqCst) - accepted_before,
        reused_broken,
        first_error,
        elapsed: started.elapsed(),
    })
}

/// An HTTP/1.1 server on 127.0.0.1:0 that answers every request with `ok` and, when the client
/// stops sending (EOF), keeps the connection open and silent until it is stopped.
struct Server {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    handlers: Arc<Mutex<Vec<thread::JoinHandle<()>>>>,
}

impl Server {
    fn start() -> io::Result<Server> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let accepted = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let handlers = Arc::new(Mutex::new(Vec::new()));
        let (a, s, h) = (accepted.clone(), stop.clone(), handlers.clone());
        thread::spawn(move || {
            for stream in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                a.fetch_add(1, Ordering::SeqCst);
                let stop = s.clone();
                h.lock()
                    .unwrap()
                    .push(thread::spawn(move || serve(stream, &stop)));
            }
        });
        Ok(Server {
            addr,
            accepted,
            stop,
            handlers,
        })
    }

    fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(self.addr); // wakes the accept loop
        for handler in self.handlers.lock().unwrap().drain(..) {
            let _ = handler.join();
        }
    }
}

fn serve(stream: std::net::TcpStream, stop: &AtomicBool) {
    let _ = stream.set_nodelay(true);
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    while let Ok(true) = http1::read_request(&mut reader) {
        if http1::write_response(&mut writer, "ok").is_err() {
            return;
        }
    }
    // The client stopped sending. Stay open and silent: the client's reader sees nothing.
    while !stop.load(Ordering::SeqCst) {
        thread::sleep(Duration::from_millis(10));
    }
}
