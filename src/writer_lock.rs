//! The writer lock of every handle and of an exchange's commit: a mutex that turns a re-entrant
//! write on the same thread (which would deadlock) into a clear panic naming both writes.
//!
//! It names no synchronization crate: the mutex comes from [`sync`](crate::sync), and the owner
//! word is a plain `std` atomic that only the holding thread compares with its own token.

use crate::sync::{Mutex, MutexGuard};

/// The writes that take a [`WriterLock`], named in the panic of a re-entrant write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum WriteOp {
    Insert = 1,
    Append,
    Remove,
    Update,
    TryUpdate,
    Replace,
    Commit,
    Seal,
    SealWith,
    RefreshPublish,
    ExchangeCommit,
}

// The names are used only by the panic, which the loom world compiles out.
#[cfg_attr(shared_headers_loom, allow(dead_code))]
impl WriteOp {
    const ALL: [WriteOp; 11] = [
        WriteOp::Insert,
        WriteOp::Append,
        WriteOp::Remove,
        WriteOp::Update,
        WriteOp::TryUpdate,
        WriteOp::Replace,
        WriteOp::Commit,
        WriteOp::Seal,
        WriteOp::SealWith,
        WriteOp::RefreshPublish,
        WriteOp::ExchangeCommit,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            WriteOp::Insert => "SharedHeaders::insert",
            WriteOp::Append => "SharedHeaders::append",
            WriteOp::Remove => "SharedHeaders::remove",
            WriteOp::Update => "SharedHeaders::update",
            WriteOp::TryUpdate => "SharedHeaders::try_update",
            WriteOp::Replace => "SharedHeaders::replace",
            WriteOp::Commit => "SharedHeaders::commit",
            WriteOp::Seal => "SharedHeaders::seal",
            WriteOp::SealWith => "SharedHeaders::seal_with",
            WriteOp::RefreshPublish => "Lead::publish (a refresh)",
            WriteOp::ExchangeCommit => "Exchange::commit",
        }
    }

    fn from_code(code: u8) -> Option<WriteOp> {
        WriteOp::ALL.into_iter().find(|op| *op as u8 == code)
    }
}

/// A writer lock that turns a re-entrant lock on the same thread (which would deadlock) into a
/// clear panic, like `RefCell`'s "already borrowed".
///
/// Next to the mutex sits an owner word: the holding thread's token and the write it runs, or 0.
/// Relaxed loads and stores suffice: the only comparison that matters is "is the owner *this*
/// thread?", and a thread always sees its own latest store to the word (coherence), so it sees
/// its own token exactly while it holds the lock and never afterwards; another thread's token,
/// stale or not, never equals this thread's. The word is reset before the mutex is released.
///
/// Under `--cfg shared_headers_loom` the check is compiled out (loom runs its threads on one OS
/// thread, so a `std` thread-local cannot tell them apart); the models never re-enter a write.
///
/// It guards a value `T` like a mutex (the handle's writer slot; `()` for the exchange's commit).
#[derive(Debug)]
pub(crate) struct WriterLock<T> {
    lock: Mutex<T>,
    #[cfg(not(shared_headers_loom))]
    owner: std::sync::atomic::AtomicU64,
}

/// Holds a [`WriterLock`] and dereferences to its value; clears the owner word, then unlocks,
/// when dropped.
pub(crate) struct WriterGuard<'a, T> {
    #[cfg(not(shared_headers_loom))]
    owner: &'a std::sync::atomic::AtomicU64,
    lock: MutexGuard<'a, T>,
}

impl<T> std::ops::Deref for WriterGuard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        &self.lock
    }
}

impl<T> std::ops::DerefMut for WriterGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        &mut self.lock
    }
}

impl<T> Drop for WriterGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        #[cfg(not(shared_headers_loom))]
        self.owner.store(0, std::sync::atomic::Ordering::Relaxed);
        // `lock` is dropped after this body: the word is clear before the mutex is released.
    }
}

/// This thread's token: a number no other live thread has (never 0).
#[cfg(not(shared_headers_loom))]
#[inline]
fn thread_token() -> u64 {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        // No destructor, so it stays readable while the thread's other thread-locals drop.
        static TOKEN: Cell<u64> = const { Cell::new(0) };
    }
    TOKEN.with(|token| match token.get() {
        0 => {
            let fresh = NEXT.fetch_add(1, Ordering::Relaxed);
            token.set(fresh);
            fresh
        }
        known => known,
    })
}

impl<T> WriterLock<T> {
    pub(crate) fn new(value: T) -> Self {
        WriterLock {
            lock: Mutex::new(value),
            #[cfg(not(shared_headers_loom))]
            owner: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Panics if this thread holds the lock (a write `op` from inside a write closure).
    #[inline]
    #[track_caller]
    pub(crate) fn assert_not_held(&self, op: WriteOp) {
        #[cfg(not(shared_headers_loom))]
        {
            let owner = self.owner.load(std::sync::atomic::Ordering::Relaxed);
            if owner != 0 && owner >> 8 == thread_token() {
                reentrant_write(op, WriteOp::from_code(owner as u8));
            }
        }
        #[cfg(shared_headers_loom)]
        let _ = op;
    }

    /// Takes the lock for the write `op`.
    ///
    /// # Panics
    ///
    /// If this thread already holds it: the write would wait for itself forever.
    #[inline]
    #[track_caller]
    pub(crate) fn lock(&self, op: WriteOp) -> WriterGuard<'_, T> {
        self.assert_not_held(op);
        let lock = self.lock.lock();
        #[cfg(not(shared_headers_loom))]
        {
            self.owner.store(
                (thread_token() << 8) | op as u64,
                std::sync::atomic::Ordering::Relaxed,
            );
            WriterGuard {
                owner: &self.owner,
                lock,
            }
        }
        #[cfg(shared_headers_loom)]
        WriterGuard { lock }
    }
}

#[cfg(not(shared_headers_loom))]
#[cold]
#[inline(never)]
#[track_caller]
fn reentrant_write(op: WriteOp, outer: Option<WriteOp>) -> ! {
    let outer = outer.map_or("another write", WriteOp::name);
    panic!(
        "{} called from inside {} on the same headers (re-entrant write): it would deadlock, \
         because the writer lock is held while the write's closure runs. Make the change on the \
         closure's own `&mut HeaderMap`, use a Draft, or do the write after the closure returns",
        op.name(),
        outer,
    )
}
