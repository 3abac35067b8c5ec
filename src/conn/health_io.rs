//! The connection [`HealthConnector`](super::HealthConnector) makes: [`HealthIo`], the inner
//! connection and its [`ConnHealth`].
//!
//! It decides what an operation on the connection returns once its health is dead (the error
//! naming the cause), parks the connection task where a death wakes it, marks the health dead
//! when dropped, and tells from the first write whether the connection speaks HTTP/2 in the
//! clear (then its frames are watched, [`h2watch`](super::h2watch)). It relies on
//! [`ConnHealth`] for the state and on [`park`](super::park) for the waker slot. Its hyper
//! `Read`/`Write` impls are in `rw`, the timer that wakes an idle HTTP/2 connection in `wake`.

mod rw;
mod wake;

use std::fmt;
use std::io;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper_util::client::legacy::connect::{Connected, Connection};

use self::wake::Wake;
#[cfg(doc)]
use super::HealthConnector;
use super::h2watch::{PREFACE, Watch};
use super::health::ConnHealth;
use super::park::Parked;
use super::status::Cause;

/// A connection made by [`HealthConnector`]: the inner connection and its [`ConnHealth`].
///
/// Its I/O errors are recorded in the health; once the health is dead, its reads, writes and
/// flushes fail (a parked read is woken), and hyper closes it. Dropped, it marks its health
/// dead with [`Cause::Local`] unless a cause was recorded before.
///
/// # Examples
///
/// ```
/// # use shared_headers::conn::{Cause, HealthIo};
/// let io = HealthIo::new(()); // any connection
/// io.health().mark_dead(Cause::HealthCheck);
/// assert_eq!(io.health().cause(), Some(Cause::HealthCheck));
/// ```
pub struct HealthIo<T> {
    inner: T,
    health: ConnHealth,
    parked: Parker,
    /// The health goes in every response's extensions ([`HealthConnector::health_in_responses`]).
    pub(super) in_responses: bool,
    mode: Mode,
    wake: Wake,
}

/// What the first write said the connection speaks.
enum Mode {
    /// This many bytes of the HTTP/2 client preface written so far (none: nothing written).
    Unknown(usize),
    /// Not HTTP/2 in the clear (HTTP/1.1, TLS records): bytes pass untouched.
    Off,
    /// HTTP/2: frames watched (`h2watch`).
    H2(Box<Watch>),
}

impl Mode {
    /// `chunk` was written while the mode was not yet known (or just became HTTP/2).
    fn written(&mut self, chunk: &[u8]) {
        match self {
            Mode::Off => {}
            // Written through the watch's own path (`plan`, `sent`).
            Mode::H2(_) => {}
            Mode::Unknown(matched) => {
                let want = &PREFACE[*matched..];
                let k = chunk.len().min(want.len());
                if chunk[..k] != want[..k] {
                    *self = Mode::Off;
                    return;
                }
                *matched += k;
                if *matched == PREFACE.len() {
                    let mut watch = Watch::new();
                    watch.sent_first(&chunk[k..]);
                    *self = Mode::H2(watch);
                }
            }
        }
    }
}

impl<T> HealthIo<T> {
    /// Wraps `inner` with a new, open health.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::conn::{HealthIo, Status};
    /// assert_eq!(HealthIo::new(()).health().status(), Status::Open);
    /// ```
    pub fn new(inner: T) -> Self {
        let health = ConnHealth::new();
        let parked = Arc::new(Parked::new());
        let waker = Arc::clone(&parked);
        // The crate's own slot: the user's `on_close` stays free.
        health.on_close_wake(move || waker.wake());
        Self {
            inner,
            health,
            parked: Parker {
                shared: parked,
                last: None,
            },
            in_responses: false,
            mode: Mode::Unknown(0),
            wake: Wake::Unarmed,
        }
    }

    /// The connection's health (a handle: clone it to keep it).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::conn::{Cause, HealthIo};
    /// let io = HealthIo::new(());
    /// let health = io.health().clone();
    /// drop(io); // hyper dropped the connection
    /// assert_eq!(health.cause(), Some(Cause::Local));
    /// ```
    pub fn health(&self) -> &ConnHealth {
        &self.health
    }

    /// The connection inside.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::conn::HealthIo;
    /// assert_eq!(*HealthIo::new(7).get_ref(), 7);
    /// ```
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// The error every operation returns once the health is dead.
    #[cold]
    fn died(&self) -> io::Error {
        died(self.health.cause().unwrap_or(Cause::Local))
    }

    /// Records `err` in the health; returns it.
    #[cold]
    fn record(&self, err: io::Error) -> io::Error {
        self.health.observe(&err);
        err
    }

    /// `Pending` from the inner connection: park the task's waker where a death wakes it, or
    /// fail now if it is already dead.
    fn pending<R>(&mut self, cx: &Context<'_>) -> Poll<io::Result<R>> {
        pending(&mut self.parked, &self.health, cx)
    }
}

/// The connection's waker slot, and the connection task's own copy of the waker it parked
/// last: parking the same task again locks nothing.
struct Parker {
    shared: Arc<Parked>,
    last: Option<std::task::Waker>,
}

/// [`HealthIo::pending`] over its parts.
#[inline(always)]
fn pending<R>(parked: &mut Parker, health: &ConnHealth, cx: &Context<'_>) -> Poll<io::Result<R>> {
    if parked
        .shared
        .park_cached(health, cx.waker(), &mut parked.last)
    {
        Poll::Pending
    } else {
        dead_now(health)
    }
}

/// The connection died before its task could park.
#[cold]
fn dead_now<R>(health: &ConnHealth) -> Poll<io::Result<R>> {
    Poll::Ready(Err(died(health.cause().unwrap_or(Cause::Local))))
}

/// Records `err` in `health`; returns it.
#[cold]
fn record(health: &ConnHealth, err: io::Error) -> io::Error {
    health.observe(&err);
    err
}

/// The error of an operation on a connection marked dead: its kind from the cause, its message
/// naming it.
fn died(cause: Cause) -> io::Error {
    let kind = match cause {
        Cause::Io(kind) => kind,
        _ => io::ErrorKind::ConnectionAborted,
    };
    io::Error::new(kind, Died(cause))
}

/// The source of [`died`]'s error.
#[derive(Debug)]
struct Died(Cause);

impl fmt::Display for Died {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the connection is dead ({})", self.0)
    }
}

impl std::error::Error for Died {}

impl<T> Drop for HealthIo<T> {
    fn drop(&mut self) {
        self.health.mark_dead(Cause::Local);
    }
}

impl<T: fmt::Debug> fmt::Debug for HealthIo<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HealthIo")
            .field("inner", &self.inner)
            .field("health", &self.health)
            .finish()
    }
}

impl<T: Connection> Connection for HealthIo<T> {
    fn connected(&self) -> Connected {
        let mut connected = self.inner.connected();
        if self.in_responses {
            connected = connected.extra(self.health.clone());
        }
        if self.health.is_dead() {
            connected.poison();
        }
        connected
    }
}
