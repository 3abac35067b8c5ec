//! A small connection pool keyed by authority, built on [`ConnHealth`].

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::ops::Deref;
use std::sync::{Arc, Weak};

use super::health::{ConnHealth, Lease};
use super::status::AcquireError;
use crate::sync::{AtomicU64, Mutex, Ordering};

struct Entry<C> {
    id: u64,
    conn: Arc<C>,
    health: ConnHealth,
}

struct Inner<K, C> {
    conns: Mutex<HashMap<K, Vec<Entry<C>>>>,
    next_id: AtomicU64,
}

impl<K: Eq + Hash, C> Inner<K, C> {
    /// Removes connection `id` under `key`; the caller drops it after the lock is released.
    fn remove(&self, key: &K, id: u64) -> Option<Entry<C>> {
        let mut conns = self.conns.lock();
        let list = conns.get_mut(key)?;
        let at = list.iter().position(|entry| entry.id == id)?;
        let entry = list.swap_remove(at);
        if list.is_empty() {
            conns.remove(key);
        }
        Some(entry)
    }
}

/// A small, generic connection pool: connections of type `C` grouped by a key `K` (the
/// authority, e.g. `"example.com:443"`), each with its [`ConnHealth`].
///
/// * [`checkout`](Self::checkout) hands out a connection only through
///   [`ConnHealth::try_acquire`]: it skips full connections and evicts draining and dead ones on
///   the way. There is no "is it alive?" check that could race with the connection's death.
/// * [`insert`](Self::insert) registers the health's [`on_close`](ConnHealth::on_close)
///   callback, so a connection is evicted the moment anyone marks it draining or dead (its
///   reader, a writer, a health check), even while it is busy; the pool never waits for leases
///   in flight. The socket closes when the last [`Pooled`] handle to it is dropped.
///
/// Use [`ConnHealth::with_max_concurrent(1)`](ConnHealth::with_max_concurrent) for HTTP/1 (a
/// connection is "idle" when its one lease is free) and the peer's stream limit for HTTP/2.
///
/// # Examples
///
/// ```
/// use shared_headers::conn::{Cause, ConnHealth, Pool};
///
/// let pool: Pool<&str, String> = Pool::new();
/// // No connection yet: connect, and insert it checked out.
/// assert!(pool.checkout(&"example.com:80").is_none());
/// let http1 = ConnHealth::with_max_concurrent(1);
/// let first = pool.insert("example.com:80", "conn #1".to_string(), http1)?;
/// drop(first); // request done: the connection is idle again
///
/// let again = pool.checkout(&"example.com:80").unwrap();
/// assert_eq!(*again, "conn #1");
///
/// // Its writer fails: the pool drops it at once, although it is still checked out.
/// again.health().mark_dead(Cause::PeerClosed);
/// assert_eq!(pool.connections(&"example.com:80"), 0);
/// assert!(pool.checkout(&"example.com:80").is_none());
/// # Ok::<(), shared_headers::conn::AcquireError>(())
/// ```
pub struct Pool<K, C> {
    inner: Arc<Inner<K, C>>,
}

impl<K, C> Pool<K, C>
where
    K: Eq + Hash + Clone + Send + 'static,
    C: Send + Sync + 'static,
{
    /// An empty pool.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::conn::Pool;
    /// let pool: Pool<String, ()> = Pool::new();
    /// assert!(pool.is_empty());
    /// ```
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Inner {
                conns: Mutex::new(HashMap::new()),
                next_id: AtomicU64::new(0),
            }),
        }
    }

    /// Checks out a connection for `key`: the first one whose
    /// [`try_acquire`](ConnHealth::try_acquire) succeeds. Connections at their limit are
    /// skipped; draining and dead ones are evicted (dropped by the pool). Returns `None` when no
    /// connection can take the work: connect a new one and [`insert`](Self::insert) it.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::conn::{ConnHealth, Pool};
    /// let pool: Pool<&str, u32> = Pool::new();
    /// let busy = pool.insert("a", 1, ConnHealth::with_max_concurrent(1))?;
    /// assert!(pool.checkout(&"a").is_none()); // its one lease is taken
    /// drop(busy);
    /// assert_eq!(*pool.checkout(&"a").unwrap(), 1);
    /// # Ok::<(), shared_headers::conn::AcquireError>(())
    /// ```
    pub fn checkout(&self, key: &K) -> Option<Pooled<C>> {
        let mut evicted = Vec::new();
        let found = {
            let mut conns = self.inner.conns.lock();
            let list = conns.get_mut(key)?;
            let mut found = None;
            let mut at = 0;
            while at < list.len() {
                let entry = &list[at];
                match entry.health.try_acquire() {
                    Ok(lease) => {
                        found = Some(Pooled {
                            conn: Arc::clone(&entry.conn),
                            id: entry.id,
                            lease,
                        });
                        break;
                    }
                    Err(AcquireError::AtLimit { .. }) => at += 1,
                    Err(_) => evicted.push(list.swap_remove(at)),
                }
            }
            if list.is_empty() {
                conns.remove(key);
            }
            found
        };
        // Connections (and their sockets) are dropped here, outside the lock.
        drop(evicted);
        found
    }

    /// Adds a new connection under `key` and returns it checked out (one lease taken), since
    /// whoever just connected has work for it.
    ///
    /// Registers a callback on `health` (see [`ConnHealth::on_close`]) that evicts the
    /// connection on its first transition out of open. If `health` already has a callback, the
    /// connection is evicted at the next [`checkout`](Self::checkout) that meets it instead.
    ///
    /// # Errors
    ///
    /// The [`AcquireError`] of the first lease, if `health` refuses it (the connection died
    /// already, or its limit is 0). The connection is then dropped, not pooled.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::conn::{AcquireError, Cause, ConnHealth, Pool};
    /// let pool: Pool<&str, u32> = Pool::new();
    /// let pooled = pool.insert("a", 7, ConnHealth::new())?;
    /// assert_eq!((*pooled, pool.connections(&"a")), (7, 1));
    ///
    /// let dead = ConnHealth::new();
    /// dead.mark_dead(Cause::Local);
    /// assert_eq!(pool.insert("a", 8, dead).unwrap_err(), AcquireError::Dead(Cause::Local));
    /// assert_eq!(pool.connections(&"a"), 1);
    /// # Ok::<(), AcquireError>(())
    /// ```
    pub fn insert(&self, key: K, conn: C, health: ConnHealth) -> Result<Pooled<C>, AcquireError> {
        let lease = health.try_acquire()?;
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(conn);
        self.inner
            .conns
            .lock()
            .entry(key.clone())
            .or_default()
            .push(Entry {
                id,
                conn: Arc::clone(&conn),
                health: health.clone(),
            });
        // Registered after the entry is visible, so a death at any point evicts it: before
        // registration, `on_close` fires on this thread. Never called under the pool lock.
        let pool: Weak<Inner<K, C>> = Arc::downgrade(&self.inner);
        let _registered = health.on_close(move |_status| {
            if let Some(pool) = pool.upgrade() {
                drop(pool.remove(&key, id));
            }
        });
        Ok(Pooled { conn, id, lease })
    }

    /// The number of connections held for `key`, busy or idle.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::conn::{ConnHealth, Pool};
    /// let pool: Pool<&str, ()> = Pool::new();
    /// let _a = pool.insert("a", (), ConnHealth::new())?;
    /// assert_eq!(pool.connections(&"a"), 1);
    /// assert_eq!(pool.connections(&"b"), 0);
    /// # Ok::<(), shared_headers::conn::AcquireError>(())
    /// ```
    pub fn connections(&self, key: &K) -> usize {
        self.inner.conns.lock().get(key).map_or(0, Vec::len)
    }

    /// Whether the pool holds no connection at all.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::conn::{Cause, ConnHealth, Pool};
    /// let pool: Pool<&str, ()> = Pool::new();
    /// let conn = pool.insert("a", (), ConnHealth::new())?;
    /// assert!(!pool.is_empty());
    /// conn.health().mark_dead(Cause::Local);
    /// assert!(pool.is_empty());
    /// # Ok::<(), shared_headers::conn::AcquireError>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.inner.conns.lock().is_empty()
    }
}

impl<K, C> Default for Pool<K, C>
where
    K: Eq + Hash + Clone + Send + 'static,
    C: Send + Sync + 'static,
{
    fn default() -> Self {
        Self::new()
    }
}

impl<K, C> Clone for Pool<K, C> {
    /// Another handle to the same pool.
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K, C> fmt::Debug for Pool<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool").finish_non_exhaustive()
    }
}

/// A connection checked out of a [`Pool`]: derefs to the connection and holds a [`Lease`] on it
/// until dropped.
///
/// # Examples
///
/// ```
/// # use shared_headers::conn::{ConnHealth, Pool};
/// let pool: Pool<&str, String> = Pool::new();
/// let pooled = pool.insert("a", "conn".to_string(), ConnHealth::new())?;
/// assert_eq!(pooled.len(), 4); // String::len, through Deref
/// assert_eq!(pooled.health().in_flight(), 1);
/// # Ok::<(), shared_headers::conn::AcquireError>(())
/// ```
pub struct Pooled<C> {
    conn: Arc<C>,
    id: u64,
    lease: Lease,
}

impl<C> Pooled<C> {
    /// The connection's health, to record what this use of it observes.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::conn::{ConnHealth, Pool, Status};
    /// let pool: Pool<&str, ()> = Pool::new();
    /// let pooled = pool.insert("a", (), ConnHealth::new())?;
    /// assert_eq!(pooled.health().status(), Status::Open);
    /// # Ok::<(), shared_headers::conn::AcquireError>(())
    /// ```
    pub fn health(&self) -> &ConnHealth {
        self.lease.health()
    }

    /// The pool's id of this connection (unique per pool, in insertion order).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::conn::{ConnHealth, Pool};
    /// let pool: Pool<&str, ()> = Pool::new();
    /// let a = pool.insert("a", (), ConnHealth::new())?;
    /// let b = pool.insert("a", (), ConnHealth::new())?;
    /// assert!(a.id() < b.id());
    /// # Ok::<(), shared_headers::conn::AcquireError>(())
    /// ```
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl<C> Deref for Pooled<C> {
    type Target = C;

    fn deref(&self) -> &C {
        &self.conn
    }
}

impl<C: fmt::Debug> fmt::Debug for Pooled<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pooled")
            .field("id", &self.id)
            .field("conn", &self.conn)
            .field("lease", &self.lease)
            .finish()
    }
}
