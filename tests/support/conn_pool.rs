//! A small keyed connection pool built on `conn::ConnHealth`, for the tests and the loom
//! models: what a hand-rolled client does with the crate's health (the crate itself ships no
//! pool; hyper-util's `Client` with `conn::HealthConnector` is its pool). A checkout is one
//! `try_acquire` per candidate; a connection whose health refuses is evicted there, and its
//! `on_close` callback evicts it the moment it dies, from whichever thread records it.
//!
//! Under `cfg(shared_headers_loom)` the lock and the id counter are loom's, so the models
//! explore the pool's own interleavings too.
#![allow(dead_code)]

use std::collections::HashMap;
use std::hash::Hash;
use std::ops::Deref;
use std::sync::{Arc, Weak};

#[cfg(shared_headers_loom)]
use loom::sync::{
    Mutex,
    atomic::{AtomicU64, Ordering},
};
#[cfg(not(shared_headers_loom))]
use std::sync::{
    Mutex,
    atomic::{AtomicU64, Ordering},
};

use shared_headers::conn::{AcquireError, ConnHealth, Lease};

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
    fn remove(&self, key: &K, id: u64) -> Option<Entry<C>> {
        let mut conns = self.conns.lock().unwrap();
        let list = conns.get_mut(key)?;
        let at = list.iter().position(|entry| entry.id == id)?;
        let entry = list.swap_remove(at);
        if list.is_empty() {
            conns.remove(key);
        }
        Some(entry)
    }
}

/// Connections by key; clones share the pool.
pub struct Pool<K, C> {
    inner: Arc<Inner<K, C>>,
}

impl<K, C> Clone for Pool<K, C> {
    fn clone(&self) -> Self {
        Pool {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K, C> Pool<K, C>
where
    K: Eq + Hash + Clone + Send + 'static,
    C: Send + Sync + 'static,
{
    pub fn new() -> Self {
        Pool {
            inner: Arc::new(Inner {
                conns: Mutex::new(HashMap::new()),
                next_id: AtomicU64::new(0),
            }),
        }
    }

    /// A connection for `key` with room for one more request, leased; `None` if none has
    /// room. Connections whose health refuses (draining, dead) are evicted on the way.
    pub fn checkout(&self, key: &K) -> Option<Pooled<C>> {
        let mut evicted = Vec::new();
        let found = {
            let mut conns = self.inner.conns.lock().unwrap();
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
        // Connections (and their sockets) are dropped outside the lock.
        drop(evicted);
        found
    }

    /// Adds a new connection for `key` and leases it to the caller.
    pub fn insert(&self, key: K, conn: C, health: ConnHealth) -> Result<Pooled<C>, AcquireError> {
        let lease = health.try_acquire()?;
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(conn);
        self.inner
            .conns
            .lock()
            .unwrap()
            .entry(key.clone())
            .or_default()
            .push(Entry {
                id,
                conn: Arc::clone(&conn),
                health: health.clone(),
            });
        // Registered once the entry is visible, so a death at any point evicts it (before
        // registration, `on_close` runs the callback at once, on this thread); never called
        // under the pool's lock.
        let pool: Weak<Inner<K, C>> = Arc::downgrade(&self.inner);
        let _registered = health.on_close(move |_status| {
            if let Some(pool) = pool.upgrade() {
                drop(pool.remove(&key, id));
            }
        });
        Ok(Pooled { conn, id, lease })
    }

    /// The connections pooled for `key`.
    pub fn connections(&self, key: &K) -> usize {
        self.inner
            .conns
            .lock()
            .unwrap()
            .get(key)
            .map_or(0, Vec::len)
    }

    /// Whether no connection is pooled.
    pub fn is_empty(&self) -> bool {
        self.inner.conns.lock().unwrap().is_empty()
    }
}

/// A leased connection: the lease is released when it is dropped.
pub struct Pooled<C> {
    conn: Arc<C>,
    id: u64,
    lease: Lease,
}

impl<C> Pooled<C> {
    pub fn health(&self) -> &ConnHealth {
        self.lease.health()
    }

    /// The connection's id in its pool, in the order inserted from 0.
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

impl<C> std::fmt::Debug for Pooled<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pooled").field("id", &self.id).finish()
    }
}
