//! The shared health value: state and in-flight count in one atomic word.

use std::fmt;
use std::io;
use std::sync::Arc;

use super::classify::{Health, classify};
use super::status::{AcquireError, Cause, Status};
use crate::sync::{AtomicU64, Mutex, OnceCell, Ordering};

/// Set once the connection is dead. Never cleared.
const DEAD: u64 = 1 << 63;
/// Set once the connection is draining. Never cleared.
const DRAINING: u64 = 1 << 62;
/// Both state bits.
const STATE: u64 = DEAD | DRAINING;
/// The low 62 bits: leases in flight.
const COUNT: u64 = DRAINING - 1;

/// The callback slot of [`ConnHealth::on_close`].
enum Notify {
    /// No callback registered yet.
    Empty,
    /// Registered, not yet fired.
    Armed(Box<dyn FnOnce(Status) + Send>),
    /// Fired (or handed to the thread that fires it). Registration is closed.
    Done,
}

struct Inner {
    /// Bit 63: dead. Bit 62: draining. Bits 0..62: leases in flight. Every change is one RMW.
    word: AtomicU64,
    /// Maximum leases in flight, at most `COUNT`.
    limit: u64,
    /// The first cause of death. Set *before* the `DEAD` bit, see `mark_dead`.
    cause: OnceCell<Cause>,
    /// Fired once, on the first transition out of open.
    notify: Mutex<Notify>,
    /// The crate's own callback (a `HealthIo`'s wake-up), beside the user's slot: fired once,
    /// on the first transition out of open, before the user's.
    wake: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

/// The health of one connection, shared (it is a cheap-to-clone handle) between the
/// connection's reader, its writers, a health checker and a pool.
///
/// * [`try_acquire`](Self::try_acquire) is the only way in: it returns a [`Lease`] (released
///   on drop) while the connection is open and below its concurrency limit.
/// * [`mark_draining`](Self::mark_draining) and [`mark_dead`](Self::mark_dead) move the state
///   forward from any thread; the first cause of death is kept; neither waits for leases in
///   flight.
/// * [`on_close`](Self::on_close) registers a callback fired once, on the first transition out
///   of open, so a pool can drop the connection at once.
///
/// The state and the lease count share one `AtomicU64`, so admission and death are ordered by a
/// single modification order: a lease is either counted by `mark_dead` or refused. See the
/// [module docs](crate::conn) for the diagram and the reasoning.
///
/// # Examples
///
/// ```
/// use std::io;
/// use shared_headers::conn::{AcquireError, Cause, ConnHealth, Health};
///
/// let health = ConnHealth::new();
/// let writer = health.clone(); // the same connection, another owner
///
/// let lease = health.try_acquire()?; // a stream starts
/// // The writer's write fails: record it where the pool looks.
/// let err = io::Error::from(io::ErrorKind::BrokenPipe);
/// assert_eq!(writer.observe(&err), Health::Dead);
///
/// // No new stream gets in; the one in flight still holds its lease.
/// let cause = Cause::Io(io::ErrorKind::BrokenPipe);
/// assert_eq!(health.try_acquire().unwrap_err(), AcquireError::Dead(cause));
/// assert_eq!(health.in_flight(), 1);
/// drop(lease);
/// assert_eq!(health.in_flight(), 0);
/// # Ok::<(), AcquireError>(())
/// ```
#[derive(Clone)]
pub struct ConnHealth {
    inner: Arc<Inner>,
}

impl ConnHealth {
    /// An open connection without a concurrency limit. For HTTP/1 (one request at a time), use
    /// [`with_max_concurrent(1)`](Self::with_max_concurrent).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::conn::{ConnHealth, Status};
    /// let health = ConnHealth::new();
    /// assert_eq!(health.status(), Status::Open);
    /// assert_eq!(health.in_flight(), 0);
    /// ```
    pub fn new() -> Self {
        Self::with_limit(COUNT)
    }

    /// An open connection that grants at most `limit` leases at a time (HTTP/2's
    /// `SETTINGS_MAX_CONCURRENT_STREAMS`; 1 for HTTP/1). A limit of 0 grants none.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::conn::{AcquireError, ConnHealth};
    /// let http1 = ConnHealth::with_max_concurrent(1);
    /// let _lease = http1.try_acquire()?;
    /// assert!(http1.try_acquire().is_err());
    /// # Ok::<(), AcquireError>(())
    /// ```
    pub fn with_max_concurrent(limit: usize) -> Self {
        Self::with_limit(u64::try_from(limit).map_or(COUNT, |l| l.min(COUNT)))
    }

    fn with_limit(limit: u64) -> Self {
        Self {
            inner: Arc::new(Inner {
                word: AtomicU64::new(0),
                limit,
                cause: OnceCell::new(),
                notify: Mutex::new(Notify::Empty),
                wake: Mutex::new(None),
            }),
        }
    }

    /// The concurrency limit, or `None` if there is none.
    fn max_concurrent(&self) -> Option<usize> {
        (self.inner.limit < COUNT).then(|| to_usize(self.inner.limit))
    }

    /// Admits one unit of work (a request, a stream) if the connection is open and below its
    /// limit, in one atomic read-modify-write.
    ///
    /// The returned [`Lease`] counts as in flight until it is dropped. There is no separate
    /// "is it usable?" check to race with: a connection that is marked dead before this call
    /// (in happens-before order) is refused; one that dies after it counts this lease in the
    /// in-flight number [`mark_dead`](Self::mark_dead) returns.
    ///
    /// # Errors
    ///
    /// [`AcquireError::Dead`] with the first recorded cause, [`AcquireError::Draining`], or
    /// [`AcquireError::AtLimit`] when the connection is open but full.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::conn::{AcquireError, ConnHealth};
    /// let health = ConnHealth::with_max_concurrent(2);
    /// let a = health.try_acquire()?;
    /// let b = health.try_acquire()?;
    /// assert_eq!(health.try_acquire().unwrap_err(), AcquireError::AtLimit { limit: 2 });
    /// drop(a);
    /// let _c = health.try_acquire()?; // room again
    /// assert_eq!(health.in_flight(), 2);
    /// # drop(b);
    /// # Ok::<(), AcquireError>(())
    /// ```
    pub fn try_acquire(&self) -> Result<Lease, AcquireError> {
        let inner = &*self.inner;
        // Acquire: a word with DEAD set leads to `refusal`, which reads the cause (loom:
        // every conn model but the split control fails with this load Relaxed).
        let mut word = inner.word.load(Ordering::Acquire);
        loop {
            if word & STATE != 0 {
                return Err(self.refusal(word));
            }
            if word & COUNT >= inner.limit {
                return Err(AcquireError::AtLimit {
                    limit: to_usize(inner.limit),
                });
            }
            // Success Relaxed: it means no state bit was set, so nothing published through the
            // word is read on this path (the lease holder's own work is ordered by its drop's
            // Release, which `in_flight`, `mark_dead` and `mark_draining` acquire; nothing on this
            // path reads what another thread published, so no outcome depends on it being
            // stronger). Failure Acquire: the
            // actual word may have DEAD set and is then refused with the cause (loom: every conn
            // model but the split control fails with it Relaxed).
            match inner.word.compare_exchange_weak(
                word,
                word + 1,
                Ordering::Relaxed,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    return Ok(Lease {
                        health: self.clone(),
                    });
                }
                Err(actual) => word = actual,
            }
        }
    }

    /// Stops admitting new work; leases in flight are not affected. Forward only: a dead
    /// connection stays dead.
    ///
    /// Returns `Some(in_flight)` if this call moved the connection out of open (then the
    /// [`on_close`](Self::on_close) callback fires on this thread), `None` if it was not open.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::conn::{AcquireError, ConnHealth};
    /// let health = ConnHealth::new();
    /// let lease = health.try_acquire()?;
    /// assert_eq!(health.mark_draining(), Some(1)); // GOAWAY: one stream still in flight
    /// assert_eq!(health.mark_draining(), None);
    /// assert_eq!(health.try_acquire().unwrap_err(), AcquireError::Draining);
    /// drop(lease); // the stream finishes normally
    /// # Ok::<(), AcquireError>(())
    /// ```
    pub fn mark_draining(&self) -> Option<usize> {
        // Acquire, as `in_flight`'s load, paired with the lease drop's Release: the count this
        // returns is a count of leases in flight, so a caller that sees 0 (and closes the
        // connection) sees everything the holders of the leases released before did (loom:
        // `lease_work_is_visible_once_mark_draining_counts_zero` fails with it Relaxed). No
        // Release half: draining publishes no data (no cause), the `on_close` slot is under its
        // mutex, and any RMW continues the release sequence of a `mark_dead`, so readers that
        // acquire a later word still see the cause.
        let prev = self.inner.word.fetch_or(DRAINING, Ordering::Acquire);
        if prev & STATE != 0 {
            return None;
        }
        self.fire(Status::Draining);
        Some(to_usize(prev & COUNT))
    }

    /// Marks the connection dead from any thread, without waiting for leases in flight.
    ///
    /// The first cause recorded by any caller is kept and is what everyone sees afterwards (the
    /// kernel reports `ECONNRESET` once; later calls usually see a vaguer error).
    ///
    /// Returns `Some(in_flight)` if this call made the connection dead: `in_flight` leases were
    /// outstanding at that instant, and no lease is granted after it. Returns `None` if it was
    /// already dead. The [`on_close`](Self::on_close) callback fires on this thread if the
    /// connection was still open.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::io::ErrorKind;
    /// # use shared_headers::conn::{Cause, ConnHealth, Status};
    /// let health = ConnHealth::new();
    /// let _busy = health.try_acquire()?;
    /// assert_eq!(health.mark_dead(Cause::Io(ErrorKind::ConnectionReset)), Some(1));
    /// assert_eq!(health.mark_dead(Cause::Io(ErrorKind::BrokenPipe)), None);
    /// // Sticky: the first cause stays.
    /// assert_eq!(health.status(), Status::Dead(Cause::Io(ErrorKind::ConnectionReset)));
    /// # Ok::<(), shared_headers::conn::AcquireError>(())
    /// ```
    pub fn mark_dead(&self, cause: Cause) -> Option<usize> {
        // Publication order: the cause goes into its once-cell (a release) *before* the DEAD bit
        // is set (a Release RMW). A reader that acquires a word with DEAD set therefore
        // synchronizes with this RMW (or with the head of the release sequence of RMWs it
        // continues), and so sees the cell set: by this thread, or by the thread whose value
        // this thread's losing `set` observed (the losing `set` acquires the winner's
        // completion: `OnceLock`'s ordering, which the chain needs).
        let _first_cause = self.inner.cause.set(cause);
        // Release is required (loom: the conn models fail with it Relaxed or Acquire: "DEAD
        // published before its cause"). Acquire as well, as `in_flight`'s load, paired with the
        // lease drop's Release: the count this returns is a count of leases in flight, so a
        // caller that sees 0 sees the work of the holders of the leases released before (loom:
        // `lease_work_is_visible_once_mark_dead_counts_zero` fails with it Release). The cause
        // the winner reads for `on_close` is the one it set, or, if its `set` lost, the
        // winner's, which the losing `set` waited for with an acquire (`OnceLock`'s own
        // ordering, which the loom stand-in gives); a loser (DEAD already set) reads nothing.
        let prev = self.inner.word.fetch_or(DEAD, Ordering::AcqRel);
        if prev & DEAD != 0 {
            return None;
        }
        if prev & DRAINING == 0 {
            self.fire(Status::Dead(self.recorded_cause()));
        }
        Some(to_usize(prev & COUNT))
    }

    /// Sorts `err` with [`classify`](super::classify) and records it: [`Health::Dead`] marks the
    /// connection dead with [`Cause::from(err)`](Cause), [`Health::Draining`] marks it
    /// draining, [`Health::Transient`] changes nothing. Returns the classification.
    ///
    /// Call it with every error a reader, writer or health check of the connection sees.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::io::{Error, ErrorKind};
    /// # use shared_headers::conn::{ConnHealth, Health, Status};
    /// let health = ConnHealth::new();
    /// assert_eq!(health.observe(&Error::from(ErrorKind::WouldBlock)), Health::Transient);
    /// assert_eq!(health.status(), Status::Open);
    /// assert_eq!(health.observe(&Error::from(ErrorKind::TimedOut)), Health::Draining);
    /// assert_eq!(health.status(), Status::Draining);
    /// ```
    pub fn observe(&self, err: &io::Error) -> Health {
        let health = classify(err);
        match health {
            Health::Dead => {
                self.mark_dead(Cause::from(err));
            }
            Health::Draining => {
                self.mark_draining();
            }
            Health::Transient => {}
        }
        health
    }

    /// The current status. An observation, not a permission (see [`Status`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::conn::{Cause, ConnHealth, Status};
    /// let health = ConnHealth::new();
    /// health.mark_dead(Cause::Local);
    /// assert_eq!(health.status(), Status::Dead(Cause::Local));
    /// ```
    pub fn status(&self) -> Status {
        // Acquire: DEAD leads to reading the cause (loom: `on_close_fires_exactly_once` fails
        // with this load Relaxed, through `on_close` on a closed connection).
        let word = self.inner.word.load(Ordering::Acquire);
        if word & DEAD != 0 {
            Status::Dead(self.recorded_cause())
        } else if word & DRAINING != 0 {
            Status::Draining
        } else {
            Status::Open
        }
    }

    /// Whether the connection is dead: one acquire load (the cause is then readable).
    #[cfg(any(feature = "hyper-util", shared_headers_loom))]
    #[inline]
    pub(crate) fn is_dead(&self) -> bool {
        // Acquire, as `status`'s: a caller that sees DEAD reads the cause next.
        self.inner.word.load(Ordering::Acquire) & DEAD != 0
    }

    /// The first recorded cause of death, if the connection is dead.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::conn::{Cause, ConnHealth};
    /// let health = ConnHealth::new();
    /// assert_eq!(health.cause(), None);
    /// health.mark_dead(Cause::HealthCheck);
    /// assert_eq!(health.cause(), Some(Cause::HealthCheck));
    /// ```
    pub fn cause(&self) -> Option<Cause> {
        match self.status() {
            Status::Dead(cause) => Some(cause),
            Status::Open | Status::Draining => None,
        }
    }

    /// The number of leases in flight right now (an observation).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::conn::ConnHealth;
    /// let health = ConnHealth::new();
    /// let lease = health.try_acquire()?;
    /// assert_eq!(health.in_flight(), 1);
    /// drop(lease);
    /// assert_eq!(health.in_flight(), 0);
    /// # Ok::<(), shared_headers::conn::AcquireError>(())
    /// ```
    pub fn in_flight(&self) -> usize {
        // Acquire, paired with the lease drop's Release: a thread that sees the count at 0 sees
        // the lease holders' work (loom: `lease_work_is_visible_once_in_flight_is_zero` fails
        // with either Relaxed).
        to_usize(self.inner.word.load(Ordering::Acquire) & COUNT)
    }

    /// Registers `callback`, fired exactly once, on the first transition out of open (to
    /// draining or dead), with the status that transition produced.
    ///
    /// The callback runs synchronously on the thread that made the transition, after the state
    /// changed and outside any lock of this crate; keep it short, and do not call `mark_*`
    /// while holding a lock the callback takes. If the connection has already left open, the
    /// callback runs now, on this thread, with the current status.
    ///
    /// # Errors
    ///
    /// Gives `callback` back if a callback was registered before: there is only one.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use shared_headers::conn::{Cause, ConnHealth, Status};
    ///
    /// let health = ConnHealth::new();
    /// let (tx, rx) = mpsc::channel();
    /// assert!(health.on_close(move |status| tx.send(status).unwrap()).is_ok());
    /// assert!(health.on_close(|_| {}).is_err()); // only one
    ///
    /// health.mark_dead(Cause::PeerClosed);
    /// health.mark_dead(Cause::Local);
    /// assert_eq!(rx.try_iter().collect::<Vec<_>>(), [Status::Dead(Cause::PeerClosed)]);
    /// ```
    pub fn on_close<F>(&self, callback: F) -> Result<(), F>
    where
        F: FnOnce(Status) + Send + 'static,
    {
        let mut slot = self.inner.notify.lock();
        if !matches!(*slot, Notify::Empty) {
            return Err(callback);
        }
        // Checked under the lock: a transition that happened before the winner took this lock
        // is visible here (we fire now); one whose winner locks after us finds the callback
        // armed (it fires). Either way exactly once.
        let status = self.status();
        if status == Status::Open {
            *slot = Notify::Armed(Box::new(callback));
        } else {
            *slot = Notify::Done;
            drop(slot);
            callback(status);
        }
        Ok(())
    }

    /// Whether two handles share the same connection health.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::conn::ConnHealth;
    /// let a = ConnHealth::new();
    /// assert!(ConnHealth::ptr_eq(&a, &a.clone()));
    /// assert!(!ConnHealth::ptr_eq(&a, &ConnHealth::new()));
    /// ```
    pub fn ptr_eq(this: &ConnHealth, other: &ConnHealth) -> bool {
        Arc::ptr_eq(&this.inner, &other.inner)
    }

    /// The crate's own close callback (a connection's wake-up), which leaves the user's
    /// [`on_close`](Self::on_close) slot free: fired once, on the first transition out of open,
    /// or now if the connection has left open. Call it once per health (a second one replaces
    /// the first if it has not fired).
    #[cfg_attr(
        not(any(feature = "hyper-util", shared_headers_loom)),
        allow(dead_code)
    )]
    pub(crate) fn on_close_wake(&self, wake: impl FnOnce() + Send + 'static) {
        let mut slot = self.inner.wake.lock();
        // Under the lock, as in `on_close`: exactly once either way.
        if self.status() == Status::Open {
            *slot = Some(Box::new(wake));
        } else {
            drop(slot);
            wake();
        }
    }

    /// Called by the one thread that moved the word out of open.
    fn fire(&self, status: Status) {
        let wake = self.inner.wake.lock().take();
        if let Some(wake) = wake {
            wake();
        }
        let callback = {
            let mut slot = self.inner.notify.lock();
            match std::mem::replace(&mut *slot, Notify::Done) {
                Notify::Armed(callback) => Some(callback),
                // Nobody registered: leave the slot open, a late `on_close` fires itself.
                Notify::Empty => {
                    *slot = Notify::Empty;
                    None
                }
                Notify::Done => None,
            }
        };
        if let Some(callback) = callback {
            callback(status);
        }
    }

    fn refusal(&self, word: u64) -> AcquireError {
        if word & DEAD != 0 {
            AcquireError::Dead(self.recorded_cause())
        } else {
            AcquireError::Draining
        }
    }

    /// The cause, for a caller that acquired a word with `DEAD` set (see `mark_dead`).
    fn recorded_cause(&self) -> Cause {
        let cause = self.inner.cause.get();
        debug_assert!(cause.is_some(), "DEAD published before its cause");
        // Unreachable by the publication order above. The loom conn models check it (with
        // `-C debug-assertions`): the once-cell stand-in is a loom atomic with `OnceLock`'s
        // orderings and no more, and weakening the DEAD `fetch_or` to Relaxed makes this
        // assertion fire (see the `conn` module's table).
        cause.unwrap_or(Cause::Local)
    }
}

impl Default for ConnHealth {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for ConnHealth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnHealth")
            .field("status", &self.status())
            .field("in_flight", &self.in_flight())
            .field("max_concurrent", &self.max_concurrent())
            .finish()
    }
}

/// Permission to use a connection for one unit of work; counted as in flight until dropped.
///
/// Obtained only from [`ConnHealth::try_acquire`]. A lease does not keep the connection alive
/// or open: the connection may die while the lease is held (the work then fails), and a pool
/// may evict it. Dropping the lease releases it, on any thread.
///
/// # Examples
///
/// ```
/// # use shared_headers::conn::ConnHealth;
/// let health = ConnHealth::new();
/// let lease = health.try_acquire()?;
/// assert!(ConnHealth::ptr_eq(lease.health(), &health));
/// std::thread::spawn(move || drop(lease)).join().unwrap();
/// assert_eq!(health.in_flight(), 0);
/// # Ok::<(), shared_headers::conn::AcquireError>(())
/// ```
#[must_use = "a lease is released as soon as it is dropped"]
pub struct Lease {
    health: ConnHealth,
}

impl Lease {
    /// The health of the leased connection, to record what the work observes.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::conn::{Cause, ConnHealth, Status};
    /// let health = ConnHealth::new();
    /// let lease = health.try_acquire()?;
    /// lease.health().mark_dead(Cause::PeerClosed);
    /// assert_eq!(health.status(), Status::Dead(Cause::PeerClosed));
    /// # Ok::<(), shared_headers::conn::AcquireError>(())
    /// ```
    pub fn health(&self) -> &ConnHealth {
        &self.health
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        // Release: the work done under the lease happens-before an Acquire load that sees the
        // lower count (loom: `lease_work_is_visible_once_in_flight_is_zero` fails with it
        // Relaxed). The state bits are untouched: the count is at least 1 here.
        self.health.inner.word.fetch_sub(1, Ordering::Release);
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("health", &self.health)
            .finish()
    }
}

/// Counts and limits never exceed `COUNT` (2^62 - 1), which fits `usize` on 64-bit targets; on
/// 32-bit targets they saturate.
fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}
