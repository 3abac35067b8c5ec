//! A reader's cached handle: owned reads at the cost of a borrow while nothing changes.

use std::fmt;

use http::HeaderValue;
use http::header::AsHeaderName;

use std::sync::Arc;

use super::{Owner, Shared, SharedHeaders};
use crate::snapshot::{Snapshot, State};
use crate::sync::Cached;

/// One reader's cached view of a [`SharedHeaders`]: the same reads, each costing one atomic
/// load while the headers have not changed since the reader's last read.
///
/// [`SharedHeaders::get`] and [`SharedHeaders::snapshot`] load the current version each time
/// (on the default, lock-free publication, arc-swap's `load`: a few atomic operations). A
/// `Reader` keeps the version it last saw and checks only whether a newer one was published; if
/// not, its reads are plain reads of the cached map. Reads that loop over the same headers (a
/// connection's requests reading client defaults, a worker polling configuration) should keep
/// a `Reader`.
///
/// Made by [`SharedHeaders::reader`]. Its reads take `&mut self`: a `Reader` belongs to one
/// thread or task at a time (it is `Send`, so it can move with its task; make one per
/// thread or task, cheaply, rather than sharing one).
///
/// # What it keeps alive
///
/// The version it cached, until a read finds a newer one (or the reader is dropped): a reader
/// that stops reading pins that version's map in memory, as a [`Snapshot`] would. It also keeps
/// the handle's shared state alive, as a clone of the handle does. It never delays a writer.
///
/// # Consistency
///
/// The same as the handle's: every read sees one whole version, never older than the version
/// the reader saw before, and a read that starts after a write returned sees that write (or a
/// later version).
///
/// # Examples
///
/// ```
/// use shared_headers::SharedHeaders;
///
/// let defaults = SharedHeaders::new();
/// defaults.insert("x-client", "demo".parse()?)?;
///
/// let mut reader = defaults.reader();
/// for _ in 0..3 {
///     assert_eq!(reader.get("x-client").unwrap(), "demo"); // one atomic load each
/// }
///
/// // A write is seen by the next read.
/// defaults.insert("x-client", "demo/2".parse()?)?;
/// assert_eq!(reader.get("x-client").unwrap(), "demo/2");
/// assert_eq!(reader.version(), 2);
///
/// // A reader moves to another thread with its task.
/// std::thread::spawn(move || assert_eq!(reader.snapshot().len(), 1)).join().unwrap();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A clone is a reader of its own that starts from the same cached version (two reference
/// counts, no load of the handle's current version): a template for per-task readers.
///
/// ```
/// use shared_headers::SharedHeaders;
///
/// let defaults = SharedHeaders::new();
/// let mut template = defaults.reader();
/// let mut task_reader = template.clone();
/// defaults.insert("x-client", "demo".parse()?)?;
/// assert_eq!(task_reader.get("x-client").unwrap(), "demo"); // each sees the write
/// assert_eq!(template.version(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Reader {
    cache: Cache,
}

/// A handle with a `Shared` of its own is cached through that `Arc` directly (no look-up of
/// where the `Shared` lives on each read); a hosted handle through the handle.
#[derive(Clone)]
enum Cache {
    Alone(Cached<Arc<Shared>>),
    Hosted(Cached<SharedHeaders>),
}

impl SharedHeaders {
    /// A [`Reader`]: a cached view of these headers for one thread or task, whose reads cost one
    /// atomic load while nothing changes.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::new();
    /// let mut reader = headers.reader();
    /// assert!(reader.get("x-a").is_none());
    /// headers.insert("x-a", "1".parse()?)?;
    /// assert_eq!(reader.get("x-a").unwrap(), "1");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reader(&self) -> Reader {
        Reader {
            cache: match self.owner() {
                Owner::Alone(shared) => Cache::Alone(Cached::new(Arc::clone(shared))),
                Owner::Hosted(..) => Cache::Hosted(Cached::new(self.clone())),
            },
        }
    }
}

impl Reader {
    #[inline]
    fn current(&mut self) -> &Arc<State> {
        match &mut self.cache {
            Cache::Alone(cache) => cache.load(),
            Cache::Hosted(cache) => cache.load(),
        }
    }

    /// Returns a clone of the first value of `key` in the current version, like
    /// [`SharedHeaders::get`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// use http::header::HOST;
    /// let headers = SharedHeaders::new();
    /// headers.insert(HOST, "example.com".parse()?)?;
    /// let mut reader = headers.reader();
    /// assert_eq!(reader.get(HOST).unwrap(), "example.com");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn get<K: AsHeaderName>(&mut self, key: K) -> Option<HeaderValue> {
        self.current().map().get(key).cloned()
    }

    /// Whether `key` has a value in the current version, like [`SharedHeaders::contains_key`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::new();
    /// let mut reader = headers.reader();
    /// assert!(!reader.contains_key("x-a"));
    /// headers.insert("x-a", "1".parse()?)?;
    /// assert!(reader.contains_key("x-a"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn contains_key<K: AsHeaderName>(&mut self, key: K) -> bool {
        self.current().map().contains_key(key)
    }

    /// Runs `f` on the current map, like [`SharedHeaders::read`]; `f` may call anything,
    /// including writes to the same headers (they do not change what `f` is reading).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::new();
    /// headers.insert("x-request-id", "42".parse()?)?;
    /// let mut reader = headers.reader();
    /// assert_eq!(reader.read(|m| m["x-request-id"].len()), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn read<R>(&mut self, f: impl FnOnce(&http::HeaderMap) -> R) -> R {
        f(self.current().map())
    }

    /// An owned snapshot of the current version, like [`SharedHeaders::snapshot`] (one
    /// reference-count increment while nothing changed).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::new();
    /// let mut reader = headers.reader();
    /// let before = reader.snapshot();
    /// headers.seal()?;
    /// assert!(!before.is_sealed()); // taken before the seal, and kept as it was
    /// assert!(reader.snapshot().is_sealed());
    /// # Ok::<(), shared_headers::Error>(())
    /// ```
    #[inline]
    pub fn snapshot(&mut self) -> Snapshot {
        Snapshot::from_state(Arc::clone(self.current()))
    }

    /// The current version, like [`SharedHeaders::version`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::new();
    /// let mut reader = headers.reader();
    /// headers.insert("x-a", "1".parse()?)?;
    /// assert_eq!(reader.version(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn version(&mut self) -> u64 {
        self.current().version_sealed().0
    }

    /// Runs `f` on the current map and its version, read together from one version (for the
    /// client room's middleware, which reads its defaults once per request).
    #[cfg(feature = "client")]
    #[inline]
    pub(crate) fn read_versioned<R>(&mut self, f: impl FnOnce(&http::HeaderMap, u64) -> R) -> R {
        let current = self.current();
        f(current.map(), current.version_sealed().0)
    }

    /// Whether the headers are sealed, like [`SharedHeaders::is_sealed`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::new();
    /// let mut reader = headers.reader();
    /// headers.seal()?;
    /// assert!(reader.is_sealed());
    /// # Ok::<(), shared_headers::Error>(())
    /// ```
    #[inline]
    pub fn is_sealed(&mut self) -> bool {
        self.current().seal() != 0
    }
}

impl fmt::Debug for Reader {
    /// Prints no headers (that would need `&mut self` to refresh): only that it is a reader.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reader").finish_non_exhaustive()
    }
}

// A reader reads published versions only, which are never left half-made, and its cache is
// valid after any caught panic (a panicking `f` in `read` changes nothing).
impl std::panic::UnwindSafe for Reader {}
impl std::panic::RefUnwindSafe for Reader {}
