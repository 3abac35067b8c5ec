//! `conn::ConnHealth` in a small pool (`support/conn_pool.rs`) over real sockets on 127.0.0.1: a server answers one request on a kept-alive
//! connection and then closes it, half-closes it, resets it, or closes it right after reading
//! the next request. The client's next request must end on a fresh connection, the old one must
//! be dead with the right cause, and no lease is ever granted on a connection after its death
//! was recorded.
//!
//! Run with `--nocapture` to see what each scenario measured (which cause, whether the write on
//! the dead connection went through).

#![cfg(feature = "conn")]

#[path = "support/http1.rs"]
#[allow(dead_code)]
mod http1;

use std::io::{BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use http1::Conn;
use shared_headers::conn::{Cause, ConnHealth, Health, Status, classify};

#[path = "support/conn_pool.rs"]
mod conn_pool;
use conn_pool::Pool;

const KEY: &str = "127.0.0.1";
const WAIT: Duration = Duration::from_secs(3);

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    /// (a) close after the first response (FIN).
    Close,
    /// (b) shut down the write side after the first response; keep reading.
    HalfClose,
    /// (c) reset after the first response (`SO_LINGER` 0, then close: RST).
    Reset,
    /// (d) read the next request, then close without answering.
    CloseAfterRead,
    /// Serve until the client stops sending, then hold the connection open and silent for
    /// `WAIT` (like the demo's server): only the client's writer can notice anything.
    Serve,
}

struct Server {
    addr: SocketAddr,
    accepts: Arc<AtomicUsize>,
    acted: Receiver<()>,
    stop: Arc<AtomicBool>,
}

impl Server {
    /// Connection 0 misbehaves as `mode` says; later connections serve until EOF.
    fn start(mode: Mode) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let accepts = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, acted) = mpsc::channel();
        let (count, stopped) = (accepts.clone(), stop.clone());
        thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let n = count.fetch_add(1, Ordering::SeqCst);
                let tx = tx.clone();
                thread::spawn(move || handle(stream, n, mode, &tx));
            }
        });
        Server {
            addr,
            accepts,
            acted,
            stop,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, WAIT); // wakes the accept loop
    }
}

fn handle(stream: TcpStream, n: usize, mode: Mode, acted: &Sender<()>) {
    // Bounded: a handler never waits more than WAIT for a byte.
    stream.set_read_timeout(Some(WAIT)).unwrap();
    stream.set_nodelay(true).unwrap();
    let mut reader = BufReader::new(&stream);
    if n > 0 || mode == Mode::Serve {
        while let Ok(true) = http1::read_request(&mut reader) {
            if http1::write_response(&mut &stream, &format!("conn{n}")).is_err() {
                return;
            }
        }
        if mode == Mode::Serve {
            thread::sleep(WAIT);
        }
        return;
    }
    if !matches!(http1::read_request(&mut reader), Ok(true)) {
        return;
    }
    http1::write_response(&mut &stream, "conn0").unwrap();
    match mode {
        Mode::Close => {
            drop(reader);
            drop(stream);
            let _ = acted.send(());
        }
        Mode::HalfClose => {
            stream.shutdown(Shutdown::Write).unwrap();
            let _ = acted.send(());
            // Keep reading (and never answering) until the client closes or WAIT passes.
            while let Ok(true) = http1::read_request(&mut reader) {}
        }
        Mode::Reset => {
            socket2::SockRef::from(&stream)
                .set_linger(Some(Duration::ZERO))
                .unwrap();
            drop(reader);
            drop(stream);
            let _ = acted.send(());
        }
        Mode::Serve => unreachable!("served above"),
        Mode::CloseAfterRead => {
            let _ = http1::read_request(&mut reader);
            drop(reader);
            drop(stream);
            let _ = acted.send(());
        }
    }
}

/// The client: a pool on `ConnHealth` plus every health it ever created, by pool id, to check that no
/// lease is granted on a connection whose death was recorded before the checkout.
struct Client {
    addr: SocketAddr,
    pool: Pool<&'static str, Conn>,
    healths: Mutex<Vec<(u64, ConnHealth)>>,
}

/// What one request did.
#[derive(Debug)]
struct Outcome {
    body: String,
    /// Pool ids of the connections tried, in order.
    tried: Vec<u64>,
    /// For each failed attempt: whether its request had been written without error.
    failed_after_write: Vec<bool>,
}

impl Client {
    fn new(addr: SocketAddr) -> Client {
        Client {
            addr,
            pool: Pool::new(),
            healths: Mutex::new(Vec::new()),
        }
    }

    fn dead_ids(&self) -> Vec<u64> {
        let healths = self.healths.lock().unwrap();
        healths
            .iter()
            .filter(|(_, health)| matches!(health.status(), Status::Dead(_)))
            .map(|(id, _)| *id)
            .collect()
    }

    fn health(&self, id: u64) -> ConnHealth {
        let healths = self.healths.lock().unwrap();
        healths.iter().find(|(i, _)| *i == id).unwrap().1.clone()
    }

    /// GET with up to 3 attempts, each on a checked-out or fresh connection.
    fn get(&self) -> Outcome {
        let mut outcome = Outcome {
            body: String::new(),
            tried: Vec::new(),
            failed_after_write: Vec::new(),
        };
        for _ in 0..3 {
            let dead_before = self.dead_ids();
            let pooled = match self.pool.checkout(&KEY) {
                Some(pooled) => pooled,
                None => {
                    let (conn, health) = Conn::connect(self.addr).unwrap();
                    let pooled = self.pool.insert(KEY, conn, health.clone()).unwrap();
                    self.healths.lock().unwrap().push((pooled.id(), health));
                    pooled
                }
            };
            assert!(
                !dead_before.contains(&pooled.id()),
                "lease granted on connection {} after its death was recorded",
                pooled.id()
            );
            outcome.tried.push(pooled.id());
            match pooled.get("/", true) {
                Ok(body) => {
                    outcome.body = body;
                    return outcome;
                }
                Err(failure) => {
                    // Recorded before `get` returned: the connection is out of the pool.
                    assert_ne!(pooled.health().status(), Status::Open);
                    outcome.failed_after_write.push(failure.written);
                }
            }
        }
        panic!("3 attempts failed: {outcome:?}");
    }
}

/// Waits (bounded) until `done()`.
fn wait_until(done: impl Fn() -> bool, what: &str) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < WAIT, "{what}: not within {WAIT:?}");
        thread::sleep(Duration::from_millis(1));
    }
}

/// One scenario: request, the server misbehaves, request again. `eager` waits for the idle
/// reader to record the death before the second request.
fn scenario(mode: Mode, eager: bool, allowed: &[Cause]) -> (Cause, Outcome) {
    let server = Server::start(mode);
    let client = Client::new(server.addr);

    let first = client.get();
    assert_eq!(
        (first.body.as_str(), first.tried.as_slice()),
        ("conn0", &[0][..])
    );
    let old = client.health(0);

    if mode != Mode::CloseAfterRead {
        server.acted.recv_timeout(WAIT).unwrap();
    }
    if eager {
        // The idle reader records the death and the on_close callback evicts the connection,
        // without any checkout.
        wait_until(|| client.pool.connections(&KEY) == 0, "eager eviction");
        assert_ne!(old.status(), Status::Open);
    }

    let second = client.get();
    assert_eq!(
        second.body, "conn1",
        "{mode:?}: not answered on a fresh connection"
    );
    assert_eq!(*second.tried.last().unwrap(), 1);
    assert!(second.tried.len() <= 2, "{mode:?}: {second:?}");
    if eager {
        assert_eq!(second.tried, [1], "{mode:?}: the dead connection was tried");
    }
    if mode == Mode::CloseAfterRead {
        assert_eq!(
            second.tried,
            [0, 1],
            "{mode:?}: the old connection was not tried"
        );
    }
    assert_eq!(
        server.accepts.load(Ordering::SeqCst),
        2,
        "{mode:?}: accepts"
    );

    let Status::Dead(cause) = old.status() else {
        panic!("{mode:?}: old connection is {:?}", old.status());
    };
    assert!(
        allowed.contains(&cause),
        "{mode:?}: cause {cause:?} not in {allowed:?}"
    );
    assert_eq!(old.in_flight(), 0);
    (cause, second)
}

fn run_all(mode: Mode, allowed: &[Cause]) {
    const RUNS: usize = 5;
    for eager in [true, false] {
        if eager && mode == Mode::CloseAfterRead {
            continue; // nothing to see before the second request
        }
        let mut seen = Vec::new();
        for _ in 0..RUNS {
            let (cause, second) = scenario(mode, eager, allowed);
            seen.push((cause, second.failed_after_write));
        }
        println!("{mode:?} (eager: {eager}): cause, failed attempts (written?): {seen:?}");
    }
}

const RESET: Cause = Cause::Io(std::io::ErrorKind::ConnectionReset);
const PIPE: Cause = Cause::Io(std::io::ErrorKind::BrokenPipe);

#[test]
fn a_close() {
    run_all(Mode::Close, &[Cause::PeerClosed, RESET, PIPE]);
}

#[test]
fn b_half_close() {
    run_all(Mode::HalfClose, &[Cause::PeerClosed]);
}

#[test]
fn c_reset() {
    run_all(Mode::Reset, &[RESET, PIPE]);
}

#[test]
fn d_close_after_reading_the_next_request() {
    run_all(Mode::CloseAfterRead, &[Cause::PeerClosed, RESET]);
}

/// The measurement behind the module docs: after the peer's FIN has arrived (a read returned
/// 0), the next write still succeeds: the kernel accepts the bytes, the peer answers them with
/// RST, and only a later write (or read) fails. Learning of death from writes alone is too late.
#[test]
fn write_after_fin_first_succeeds_then_fails() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    client.set_read_timeout(Some(WAIT)).unwrap();
    client.set_write_timeout(Some(WAIT)).unwrap();
    let (server, _) = listener.accept().unwrap();
    drop(server); // FIN

    let mut byte = [0];
    assert_eq!(client.read(&mut byte).unwrap(), 0, "FIN arrived");

    let mut results = Vec::new();
    let failure = loop {
        let result = client.write(b"GET / HTTP/1.1\r\n\r\n");
        results.push(result.as_ref().map(|_| ()).map_err(|e| e.kind()));
        match result {
            Ok(_) => {
                assert!(results.len() < 10, "writes never failed: {results:?}");
                thread::sleep(Duration::from_millis(10));
            }
            Err(err) => break err,
        }
    };
    println!("writes after FIN: {results:?}");
    assert_eq!(classify(&failure), Health::Dead, "{failure:?}");
    #[cfg(target_os = "linux")]
    assert!(
        results[0].is_ok(),
        "on Linux the first write after FIN succeeds: {results:?}"
    );
}

/// The writer records its own failure: a write that fails with EPIPE marks the connection
/// dead at once, and the pool never hands it out again (the write-side half of the demo).
#[test]
fn broken_writer_is_recorded_and_evicted() {
    let server = Server::start(Mode::Serve);
    let client = Client::new(server.addr);
    assert_eq!(client.get().body, "conn0");
    let pooled = client.pool.checkout(&KEY).unwrap();
    pooled.break_writer();
    let failure = pooled.get("/", true).unwrap_err();
    assert!(!failure.written);
    assert_eq!(
        pooled.health().status(),
        Status::Dead(Cause::Io(std::io::ErrorKind::BrokenPipe))
    );
    assert!(client.pool.checkout(&KEY).is_none());
    drop(pooled);
}
