//! A minimal HTTP/1.1 client connection over blocking `std` TCP, for `tests/conn_sockets.rs`.
//!
//! Each [`Conn`] has a reader thread that parses responses and hands them to the requester. The
//! reader also watches the idle socket: the FIN or RST of a peer that closes a kept-alive
//! connection is recorded in the connection's [`ConnHealth`] as soon as it arrives, not at the
//! next request.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::Mutex;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

use shared_headers::conn::{Cause, ConnHealth};

/// How long any single step may take before the connection is given up.
pub const TIMEOUT: Duration = Duration::from_secs(3);

/// What the reader thread hands to the requester.
type Reply = Result<String, io::ErrorKind>;

/// How a request failed, and whether its write had gone through.
#[derive(Debug)]
pub struct Failure {
    /// The error the requester saw.
    pub error: io::Error,
    /// Whether the request was written without error before the failure (after a FIN it is).
    pub written: bool,
}

/// One HTTP/1.1 connection: a writer (used under a lease) and a reader thread.
pub struct Conn {
    stream: Mutex<TcpStream>,
    replies: Mutex<Receiver<Reply>>,
    health: ConnHealth,
}

impl Conn {
    /// Connects to `addr`; the returned health allows one request at a time.
    pub fn connect(addr: SocketAddr) -> io::Result<(Conn, ConnHealth)> {
        let stream = TcpStream::connect_timeout(&addr, TIMEOUT)?;
        stream.set_write_timeout(Some(TIMEOUT))?;
        stream.set_nodelay(true)?;
        let health = ConnHealth::with_max_concurrent(1);
        let (tx, rx) = mpsc::channel();
        let (reader, watched) = (stream.try_clone()?, health.clone());
        std::thread::spawn(move || read_loop(reader, &watched, &tx));
        let conn = Conn {
            stream: Mutex::new(stream),
            replies: Mutex::new(rx),
            health: health.clone(),
        };
        Ok((conn, health))
    }

    /// Sends `GET path` and waits for the response body. Every failure is recorded in the
    /// connection's health before it is returned ([`ConnHealth::observe`]), unless `record` is
    /// false: that is the naive pool, which leaves it to the reader.
    pub fn get(&self, path: &str, record: bool) -> Result<String, Failure> {
        let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n");
        let written = self.stream.lock().unwrap().write_all(request.as_bytes());
        if let Err(error) = written {
            if record {
                self.health.observe(&error);
            }
            return Err(Failure {
                error,
                written: false,
            });
        }
        let reply = self.replies.lock().unwrap().recv_timeout(TIMEOUT);
        let error = match reply {
            Ok(Ok(body)) => return Ok(body),
            // The reader recorded this already.
            Ok(Err(kind)) => io::Error::from(kind),
            Err(RecvTimeoutError::Disconnected) => io::Error::from(io::ErrorKind::NotConnected),
            Err(RecvTimeoutError::Timeout) => {
                // An HTTP/1 exchange that timed out leaves the stream out of sync.
                if record {
                    self.health.mark_dead(Cause::Io(io::ErrorKind::TimedOut));
                }
                io::Error::from(io::ErrorKind::TimedOut)
            }
        };
        Err(Failure {
            error,
            written: true,
        })
    }

    /// The writer breaks: its side of the socket is shut down, so every later write fails with
    /// `EPIPE`, while the reader keeps waiting on the idle socket. This is the state of the
    /// connection in golang/go#39750 ("use of closed network connection" on every write).
    pub fn break_writer(&self) {
        let _ = self.stream.lock().unwrap().shutdown(Shutdown::Write);
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        // Stops the reader thread (its read returns), which then ends by itself: joining here
        // could run on the reader thread itself, via the pool's eviction callback.
        self.health.mark_dead(Cause::Local);
        if let Ok(stream) = self.stream.get_mut() {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

/// Reads responses until the connection ends, recording how it ended.
fn read_loop(stream: TcpStream, health: &ConnHealth, replies: &mpsc::Sender<Reply>) {
    let mut reader = BufReader::new(stream);
    loop {
        let reply = match read_response(&mut reader) {
            Ok(Some(body)) => {
                if health.in_flight() == 0 {
                    // Nobody asked: HTTP/1 has no unsolicited responses.
                    health.mark_dead(Cause::Protocol("unsolicited response"));
                    return;
                }
                Ok(body)
            }
            Ok(None) => {
                // EOF while idle or mid-exchange: the peer sent FIN.
                health.mark_dead(Cause::PeerClosed);
                Err(io::ErrorKind::UnexpectedEof)
            }
            Err(error) => {
                health.observe(&error);
                Err(error.kind())
            }
        };
        let done = reply.is_err();
        if replies.send(reply).is_err() || done {
            return;
        }
    }
}

/// One response: `Ok(None)` on a clean EOF before its first byte.
fn read_response(reader: &mut BufReader<TcpStream>) -> io::Result<Option<String>> {
    let invalid = |what| io::Error::new(io::ErrorKind::InvalidData, what);
    let Some(head) = read_head(reader)? else {
        return Ok(None);
    };
    let Some((status, headers)) = head.split_first() else {
        return Err(invalid("empty response head"));
    };
    if !status.starts_with("HTTP/1.1 ") {
        return Err(invalid("bad status line"));
    }
    let mut content_length = 0;
    for (name, value) in headers.iter().filter_map(|h| h.split_once(':')) {
        if name.eq_ignore_ascii_case("content-length") {
            content_length = value
                .trim()
                .parse()
                .map_err(|_| invalid("content-length"))?;
        }
    }
    let mut body = vec![0; content_length];
    reader.read_exact(&mut body)?;
    String::from_utf8(body)
        .map(Some)
        .map_err(|_| invalid("body is not UTF-8"))
}

/// Reads one request head from `reader`; `Ok(false)` on a clean EOF before it.
pub fn read_request(reader: &mut impl BufRead) -> io::Result<bool> {
    read_head(reader).map(|head| head.is_some())
}

/// The lines of one message head (start line first, without the blank line); `Ok(None)` on a
/// clean EOF before its first byte.
fn read_head(reader: &mut impl BufRead) -> io::Result<Option<Vec<String>>> {
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return if head.is_empty() {
                Ok(None)
            } else {
                Err(io::ErrorKind::UnexpectedEof.into())
            };
        }
        let line = line.trim_end();
        if line.is_empty() {
            return Ok(Some(head));
        }
        head.push(line.to_owned());
    }
}

/// One `write` call, so that Nagle's algorithm never holds back a piece of it.
pub fn write_response(stream: &mut impl Write, body: &str) -> io::Result<()> {
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes())
}
