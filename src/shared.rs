//! The handle: reads that never wait for a writer's work, serialized copy-on-write writes,
//! commit-once seal.

mod reader;
#[cfg(test)]
mod tests;
mod write;
mod writer;

pub use reader::Reader;

use std::fmt;
use std::sync::Arc;

use http::header::AsHeaderName;
use http::{HeaderMap, HeaderValue};

use crate::policy::Policy;
use crate::redact::Redacted;
use crate::snapshot::{Snapshot, State};
use crate::sync::{AtomicU64, Holder, Ordering, Published, Strategy};
use crate::writer_lock::{WriteOp, WriterLock};

#[cfg(doc)]
use crate::error::Error;

/// A cheap-to-clone handle to one copy-on-write [`HeaderMap`] shared by many tasks and threads.
///
/// * **Reads** ([`get`](Self::get), [`read`](Self::read), [`snapshot`](Self::snapshot), ...)
///   load the current published version and never wait for a writer's work. On the default
///   handle, [`Publication::LockFree`](crate::Publication::LockFree), they take no lock. A
///   handle built with [`Publication::Locked`](crate::Publication::Locked), as the server
///   layer's per-request handles are, reads from a per-thread cache while the version it
///   cached is current (no lock), and otherwise takes a read lock for one reference-count
///   increment (waiting at most for a writer's pointer swap); in exchange its writes and its
///   drop cost the same whatever the number of threads (see
///   [`Publication`](crate::Publication)). A read in a loop keeps a [`reader`](Self::reader).
/// * **Writes** ([`insert`](Self::insert), [`update`](Self::update), ...) are serialized by a
///   mutex, copy the current map once, change the copy, and publish it as a whole new version.
///   A failed or panicking write publishes nothing.
/// * **[`seal`](Self::seal)** commits the headers once: the first caller wins, the headers never
///   change again, and every later write returns [`Error::Sealed`]. Sealing copies and
///   allocates nothing.
///
/// Clones of a handle share the same headers. The handle is `Send + Sync + 'static`, so it can be
/// moved into spawned tasks and stored in `http::Extensions`.
///
/// [`SharedHeaders::builder`] adds size limits and more secret header names. `Debug` never prints
/// the values of secret headers (see [`Snapshot::redacted`]).
///
/// # Examples
///
/// ```
/// use http::header::{CONTENT_TYPE, HOST};
/// use shared_headers::{Error, SharedHeaders};
///
/// let headers = SharedHeaders::new();
/// let handler = headers.clone(); // same headers, another owner
///
/// handler.insert(HOST, "example.com".parse()?)?;
/// assert_eq!(headers.get(HOST).unwrap(), "example.com");
///
/// // The timeout fires first and commits the headers as they are.
/// let committed = headers.seal()?;
/// assert_eq!(committed.len(), 1);
///
/// // The late handler's write is refused, not silently lost.
/// let late = handler.insert(CONTENT_TYPE, "text/plain".parse()?);
/// assert_eq!(late, Err(Error::Sealed { version: committed.version() }));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct SharedHeaders {
    owner: Owner,
}

/// Where a handle's [`Shared`] lives: an allocation of its own, or inside a [`Host`]'s (a
/// type built on the handle that keeps a request and a response handle in one allocation with
/// its own state; the handle names no such type).
#[derive(Clone)]
pub(crate) enum Owner {
    Alone(Arc<Shared>),
    Hosted(Arc<dyn Host>, Side),
}

/// An allocation that holds the shared parts of a request handle and a response handle among
/// its own state. Implemented above the handle (the handle only asks it for its part).
pub(crate) trait Host: Send + Sync + 'static {
    /// The shared part of the handle of `side`.
    fn side(&self, side: Side) -> &Shared;
    /// The handle of `side`, if the host was made over a handle that existed before it (then
    /// that handle is the origin of drafts taken through the host).
    fn external(&self, side: Side) -> Option<&SharedHeaders>;
}

/// Which of a host's two handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Request,
    Response,
}

pub(crate) struct Shared {
    /// The current version. Replaced as a whole, only while `writer` is held.
    current: Published<State>,
    /// Serializes writers, so each write starts from the version the previous one published,
    /// and holds the writer's own reference to that version (the `Arc` in `current`): a write
    /// reads its base without loading `current`. A re-entrant write on the same thread panics
    /// instead of deadlocking (see [`WriterLock`]).
    writer: WriterLock<WriterSlot>,
    /// Writes refused with `Error::Sealed` (not counting refused seals). Statistics only.
    refused: AtomicU64,
}

impl SharedHeaders {
    /// Creates a handle to an empty, unsealed map at version 0.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::new();
    /// assert!(headers.is_empty());
    /// assert_eq!(headers.version(), 0);
    /// assert!(!headers.is_sealed());
    /// ```
    pub fn new() -> Self {
        Self::from(HeaderMap::new())
    }

    /// A handle to `map` at version 0 with `policy`, publishing with `strategy`.
    pub(crate) fn with_policy(
        map: HeaderMap,
        policy: Option<Arc<Policy>>,
        strategy: Strategy,
    ) -> Self {
        SharedHeaders {
            owner: Owner::Alone(Arc::new(Shared::new(map, policy, strategy))),
        }
    }

    /// The handle of `side` of `host`, whose `Shared` lives inside it.
    #[inline]
    pub(crate) fn hosted(host: Arc<dyn Host>, side: Side) -> Self {
        SharedHeaders {
            owner: Owner::Hosted(host, side),
        }
    }

    /// The owner of this handle's `Shared`.
    #[inline]
    pub(crate) fn owner(&self) -> &Owner {
        &self.owner
    }

    /// The shared part of the handle.
    #[inline]
    pub(crate) fn shared(&self) -> &Shared {
        match &self.owner {
            Owner::Alone(shared) => shared,
            Owner::Hosted(host, side) => host.side(*side),
        }
    }

    /// Panics if this thread is inside a write to these headers (see [`WriterLock`]): for
    /// operations (a host's commit) that take the writer lock after other locks.
    pub(crate) fn assert_not_writing(&self, op: WriteOp) {
        self.shared().writer.assert_not_held(op);
    }

    // ---------------------------------------------------------------------------------------
    // Reads
    // ---------------------------------------------------------------------------------------

    /// Returns an owned, immutable view of the current version.
    ///
    /// Never waits for a writer's work (a [`Locked`](crate::Publication::Locked) handle waits
    /// at most for a pointer swap). The snapshot is consistent (all headers from one version)
    /// and may be held for as long as needed, including across `.await`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::new();
    /// headers.update(|m| {
    ///     m.insert("x-token", "t2".parse().unwrap());
    ///     m.insert("x-token-expires", "1700000000".parse().unwrap());
    /// })?;
    /// let snap = headers.snapshot();
    /// assert_eq!(snap.version(), 1);
    /// assert_eq!(snap["x-token"], "t2");
    /// assert_eq!(snap["x-token-expires"], "1700000000");
    /// # Ok::<(), shared_headers::Error>(())
    /// ```
    #[inline]
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::from_state(self.shared().current.load_full())
    }

    /// Returns a clone of the first value of `key`, like [`HeaderMap::get`].
    ///
    /// Every read method loads the current version afresh: **two reads can see two versions**.
    /// To decide on one read and act on another, read once, with [`snapshot`](Self::snapshot)
    /// or [`read`](Self::read) (see the examples).
    ///
    /// # Examples
    ///
    /// This does **not** work: it passes here, alone, but another thread may `remove` the
    /// header between the two reads, and `unwrap` then panics.
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// # let headers = SharedHeaders::new();
    /// # headers.insert("x-token", "t1".parse()?)?;
    /// if headers.contains_key("x-token") {
    ///     let token = headers.get("x-token").unwrap(); // may panic: a second version
    ///     # drop(token);
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// This does: both lookups see one version.
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::new();
    /// headers.insert("x-token", "t1".parse()?)?;
    /// let snap = headers.snapshot();
    /// if snap.contains_key("x-token") {
    ///     assert_eq!(snap["x-token"], "t1"); // same version as the check
    /// }
    /// // Or, without cloning anything:
    /// let len = headers.read(|m| m.contains_key("x-token").then(|| m["x-token"].len()));
    /// assert_eq!(len, Some(2));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// A plain lookup:
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// use http::header::HOST;
    /// let headers = SharedHeaders::new();
    /// assert!(headers.get(HOST).is_none());
    /// headers.insert(HOST, "example.com".parse()?)?;
    /// assert_eq!(headers.get("host").unwrap(), "example.com");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn get<K: AsHeaderName>(&self, key: K) -> Option<HeaderValue> {
        self.shared().current.peek(|s| s.map.get(key).cloned())
    }

    /// Returns clones of all values of `key`, in insertion order, like [`HeaderMap::get_all`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::new();
    /// headers.append("x-a", "1".parse()?)?;
    /// headers.append("x-a", "2".parse()?)?;
    /// assert_eq!(headers.get_all("x-a"), ["1", "2"]);
    /// assert!(headers.get_all("x-b").is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get_all<K: AsHeaderName>(&self, key: K) -> Vec<HeaderValue> {
        self.shared()
            .current
            .peek(|s| s.map.get_all(key).iter().cloned().collect())
    }

    /// Whether `key` has at least one value, like [`HeaderMap::contains_key`].
    ///
    /// A later read may see a later version: do not check with `contains_key` and then `get`
    /// (see [`get`](Self::get) for the broken form and the correct one with
    /// [`snapshot`](Self::snapshot) or [`read`](Self::read)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::new();
    /// headers.insert("x-a", "1".parse()?)?;
    /// assert!(headers.contains_key("x-a"));
    /// assert!(!headers.contains_key("x-b"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn contains_key<K: AsHeaderName>(&self, key: K) -> bool {
        self.shared().current.peek(|s| s.map.contains_key(key))
    }

    /// The number of values (not names), like [`HeaderMap::len`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::new();
    /// headers.append("x-a", "1".parse()?)?;
    /// headers.append("x-a", "2".parse()?)?;
    /// assert_eq!(headers.len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn len(&self) -> usize {
        self.shared().current.peek(|s| s.map.len())
    }

    /// Whether the map has no values.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// assert!(SharedHeaders::new().is_empty());
    /// ```
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.shared().current.peek(|s| s.map.is_empty())
    }

    /// Runs `f` on the current map without cloning it, and returns its result.
    ///
    /// This is the cheapest read: no reference count is taken (on a
    /// [`Locked`](crate::Publication::Locked) handle, none while this thread's cached version is
    /// current). Keep `f` short and do not block in it; to keep the headers, take a
    /// [`snapshot`](Self::snapshot). Everything `f` sees is from one version. `f` may read this
    /// and other handles, and may panic.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::new();
    /// headers.insert("x-request-id", "42".parse()?)?;
    /// let id_len = headers.read(|m| m.get("x-request-id").map(|v| v.len()));
    /// assert_eq!(id_len, Some(2));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn read<R>(&self, f: impl FnOnce(&HeaderMap) -> R) -> R {
        self.shared().current.peek(|current| f(current.map()))
    }

    /// Runs `f` on the current map and its version, read together without cloning (for the
    /// crate's middleware: one consistent read, no reference count taken).
    #[cfg(feature = "reqwest")]
    #[inline]
    pub(crate) fn read_versioned<R>(&self, f: impl FnOnce(&HeaderMap, u64) -> R) -> R {
        let current = self.shared().current.load();
        f(current.map(), current.version_sealed().0)
    }

    /// The current version: 0 for a new handle, plus one for every published change.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::new();
    /// headers.insert("x-a", "1".parse()?)?;
    /// headers.insert("x-a", "2".parse()?)?;
    /// assert_eq!(headers.version(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn version(&self) -> u64 {
        self.shared().current.peek(|s| s.version_sealed().0)
    }

    /// Whether the headers are sealed. Once `true`, always `true`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::new();
    /// headers.seal()?;
    /// assert!(headers.is_sealed());
    /// # Ok::<(), shared_headers::Error>(())
    /// ```
    #[inline]
    pub fn is_sealed(&self) -> bool {
        self.shared().current.peek(|s| s.seal() != 0)
    }

    /// How many writes were refused with [`Error::Sealed`] so far, across all clones.
    ///
    /// Counts [`insert`](Self::insert), [`append`](Self::append), [`remove`](Self::remove),
    /// [`update`](Self::update), [`try_update`](Self::try_update), [`replace`](Self::replace),
    /// [`commit`](Self::commit) and [`seal_with`](Self::seal_with) calls that found the headers
    /// sealed (a late `seal_with` is a handler trying to finalize after the commit); a second
    /// plain [`seal`](Self::seal) is not a write and is not counted. A non-zero count on committed headers is what Kubernetes calls "post-timeout
    /// activity": work that kept writing after its response was committed.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::new();
    /// headers.seal()?;
    /// assert!(headers.insert("x-late", "1".parse()?).is_err());
    /// assert!(headers.try_update(|_| Ok::<_, shared_headers::Error>(())).is_err());
    /// assert!(headers.seal_with(|_| ()).is_err());
    /// assert!(headers.seal().is_err()); // not a write
    /// assert_eq!(headers.refused_writes(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn refused_writes(&self) -> u64 {
        self.shared().refused_writes()
    }

    /// Turns the handle into its current map, without cloning when this is the last handle and
    /// no snapshot of the current version is alive.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::new();
    /// headers.insert("x-a", "1".parse()?)?;
    /// let map = headers.into_header_map();
    /// assert_eq!(map["x-a"], "1");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn into_header_map(self) -> HeaderMap {
        let shared = match self.owner {
            Owner::Alone(shared) => shared,
            owner @ Owner::Hosted(..) => {
                return SharedHeaders { owner }.snapshot().into_header_map();
            }
        };
        match Arc::try_unwrap(shared) {
            Ok(Shared {
                current, writer, ..
            }) => {
                drop(writer); // the writer's reference to the current version
                Snapshot::from_state(current.into_inner()).into_header_map()
            }
            Err(shared) => SharedHeaders {
                owner: Owner::Alone(shared),
            }
            .snapshot()
            .into_header_map(),
        }
    }

    /// Whether two handles share the same headers.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let a = SharedHeaders::new();
    /// let b = a.clone();
    /// assert!(SharedHeaders::ptr_eq(&a, &b));
    /// assert!(!SharedHeaders::ptr_eq(&a, &SharedHeaders::new()));
    /// ```
    #[inline]
    pub fn ptr_eq(this: &SharedHeaders, other: &SharedHeaders) -> bool {
        std::ptr::eq(this.shared(), other.shared())
    }
}

// A panicking write publishes nothing (the new version is built on a private copy and stored
// only at the end), and the writer lock does not poison: after a caught panic every reader and
// writer sees the last published version, a consistent state. So the handle is unwind safe.
impl std::panic::UnwindSafe for SharedHeaders {}
impl std::panic::RefUnwindSafe for SharedHeaders {}

impl Default for SharedHeaders {
    fn default() -> Self {
        Self::new()
    }
}

impl From<HeaderMap> for SharedHeaders {
    /// Wraps `map` as version 0, unsealed, without copying it.
    fn from(map: HeaderMap) -> Self {
        Self::with_policy(map, None, Strategy::LockFree)
    }
}

/// What the writer lock guards.
pub(crate) struct WriterSlot {
    /// The current version (the same `Arc` as in `Shared::current`).
    pub(crate) current: Arc<State>,
    /// The allocation of a replaced version that nobody else held, emptied (its map freed):
    /// the next write reuses it instead of allocating. At most one, freed with the handle.
    pub(crate) spare: Option<Arc<State>>,
}

impl Shared {
    /// The shared part of a handle to `map` at version 0 with `policy`, publishing with
    /// `strategy`.
    #[inline(always)]
    pub(crate) fn new(mut map: HeaderMap, policy: Option<Arc<Policy>>, strategy: Strategy) -> Self {
        if map.is_empty() {
            return Self::empty(policy, strategy);
        }
        // The initial map is published too: flag its secrets like every write's.
        crate::policy::mark_secrets(&mut map, policy.as_deref());
        Self::from_state(Arc::new(State::new(map, 0, false, policy)), strategy)
    }

    /// The shared part of a handle to an empty map at version 0 with `policy`, without making a
    /// map first (the server layer's response handle, and a request handle that copies nothing).
    pub(crate) fn empty(policy: Option<Arc<Policy>>, strategy: Strategy) -> Self {
        let state = match policy {
            None => State::empty(),
            Some(policy) => Arc::new(State::new(HeaderMap::new(), 0, false, Some(policy))),
        };
        Self::from_state(state, strategy)
    }

    #[inline(always)]
    fn from_state(state: Arc<State>, strategy: Strategy) -> Self {
        Shared {
            current: Published::new(Arc::clone(&state), strategy),
            writer: WriterLock::new(WriterSlot {
                current: state,
                spare: None,
            }),
            refused: AtomicU64::new(0),
        }
    }

    /// The number of writes refused with `Error::Sealed`.
    #[inline]
    pub(crate) fn refused_writes(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

impl Holder for Arc<Shared> {
    type Item = State;

    #[inline]
    fn published(&self) -> &Published<State> {
        &self.current
    }
}

impl Holder for SharedHeaders {
    type Item = State;

    #[inline]
    fn published(&self) -> &Published<State> {
        &self.shared().current
    }
}

impl fmt::Debug for SharedHeaders {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let current = self.shared().current.load();
        let (version, sealed) = current.version_sealed();
        f.debug_struct("SharedHeaders")
            .field("version", &version)
            .field("sealed", &sealed)
            .field(
                "headers",
                &Redacted::with_policy(current.map(), current.policy.as_deref()),
            )
            .finish()
    }
}
