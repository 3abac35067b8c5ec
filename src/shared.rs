//! The handle: lock-free reads, serialized copy-on-write writes, commit-once seal.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Weak};

use http::header::{AsHeaderName, IntoHeaderName};
use http::{HeaderMap, HeaderValue};

use crate::builder::Builder;
use crate::error::Error;
use crate::policy::Policy;
use crate::redact::Redacted;
use crate::snapshot::{Snapshot, State};
use crate::sync::{AtomicU64, Loaded, Mutex, Ordering, Published, loaded_into_arc};

/// A cheap-to-clone handle to one copy-on-write [`HeaderMap`] shared by many tasks and threads.
///
/// * **Reads** ([`get`](Self::get), [`read`](Self::read), [`snapshot`](Self::snapshot), ...) take
///   no lock and never wait for a writer: they load the current published version.
/// * **Writes** ([`insert`](Self::insert), [`update`](Self::update), ...) are serialized by a
///   mutex, copy the current map once, change the copy, and publish it as a whole new version.
///   A failed or panicking write publishes nothing.
/// * **[`seal`](Self::seal)** commits the headers once: the first caller wins, the headers never
///   change again, and every later write returns [`Error::Sealed`].
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
    shared: Arc<Shared>,
}

struct Shared {
    /// The current version. Replaced as a whole, only while `writer` is held.
    current: Published<State>,
    /// Serializes writers, so each write starts from the version the previous one published.
    writer: Mutex<()>,
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

    /// Starts configuring a handle with size limits and secret headers.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Error, Limit, SharedHeaders};
    /// let headers = SharedHeaders::builder().max_entries(1).build();
    /// headers.insert("x-a", "1".parse()?)?;
    /// assert!(matches!(
    ///     headers.insert("x-b", "2".parse()?),
    ///     Err(Error::LimitExceeded { limit: Limit::Entries, max: 1, attempted: 2 })
    /// ));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn builder() -> Builder {
        Builder::new()
    }

    pub(crate) fn with_policy(map: HeaderMap, policy: Option<Arc<Policy>>) -> Self {
        SharedHeaders {
            shared: Arc::new(Shared {
                current: Published::new(Arc::new(State {
                    own: map,
                    sealed_from: None,
                    version: 0,
                    sealed: false,
                    policy,
                })),
                writer: Mutex::new(()),
                refused: AtomicU64::new(0),
            }),
        }
    }

    // ---------------------------------------------------------------------------------------
    // Reads
    // ---------------------------------------------------------------------------------------

    /// Returns an owned, immutable view of the current version.
    ///
    /// Never blocks. The snapshot is consistent (all headers from one version) and may be held
    /// for as long as needed, including across `.await`.
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
        Snapshot::from_state(self.shared.current.load_full())
    }

    /// Returns a clone of the first value of `key`, like [`HeaderMap::get`].
    ///
    /// # Examples
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
        self.shared.current.load().map().get(key).cloned()
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
        self.shared
            .current
            .load()
            .map()
            .get_all(key)
            .iter()
            .cloned()
            .collect()
    }

    /// Whether `key` has at least one value, like [`HeaderMap::contains_key`].
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
        self.shared.current.load().map().contains_key(key)
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
        self.shared.current.load().map().len()
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
        self.shared.current.load().map().is_empty()
    }

    /// Runs `f` on the current map without cloning it, and returns its result.
    ///
    /// This is the cheapest read: no reference count is taken on the default backend. Keep `f`
    /// short and do not block in it; to keep the headers, take a [`snapshot`](Self::snapshot).
    /// Everything `f` sees is from one version.
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
        f(self.shared.current.load().map())
    }

    /// Runs `f` on the current map and its version, read together without cloning (for the
    /// crate's middleware: one consistent read, no reference count taken).
    #[cfg(feature = "client")]
    #[inline]
    pub(crate) fn read_versioned<R>(&self, f: impl FnOnce(&HeaderMap, u64) -> R) -> R {
        let current = self.shared.current.load();
        f(current.map(), current.version)
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
        self.shared.current.load().version
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
        self.shared.current.load().sealed
    }

    /// How many writes were refused with [`Error::Sealed`] so far, across all clones.
    ///
    /// Counts [`insert`](Self::insert), [`append`](Self::append), [`remove`](Self::remove),
    /// [`update`](Self::update), [`replace`](Self::replace) and [`commit`](Self::commit) calls
    /// that found the headers sealed; a second [`seal`](Self::seal) is not a write and is not
    /// counted. A non-zero count on committed headers is what Kubernetes calls "post-timeout
    /// activity": work that kept writing after its response was committed.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::new();
    /// headers.seal()?;
    /// assert!(headers.insert("x-late", "1".parse()?).is_err());
    /// assert!(headers.seal().is_err()); // not a write
    /// assert_eq!(headers.refused_writes(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn refused_writes(&self) -> u64 {
        self.shared.refused.load(Ordering::Relaxed)
    }

    // ---------------------------------------------------------------------------------------
    // Writes
    // ---------------------------------------------------------------------------------------

    /// Inserts `value` for `key`, replacing all previous values, like [`HeaderMap::insert`].
    /// Returns the first previous value.
    ///
    /// # Errors
    ///
    /// [`Error::Sealed`] after [`seal`](Self::seal); [`Error::MaxSizeReached`] if the map is full;
    /// [`Error::LimitExceeded`] if the result would be over a [`Builder`] limit. Nothing is
    /// published on error.
    ///
    /// # Panics
    ///
    /// Like `HeaderMap`, if `key` is a `&'static str` that is not a valid header name (`http`
    /// converts it with [`HeaderName::from_static`](http::HeaderName::from_static)). Parse names
    /// that come from input into a [`HeaderName`](http::HeaderName) first, which reports an
    /// invalid name as an error.
    ///
    /// # Complexity
    ///
    /// Clones the map once: O(number of headers).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::new();
    /// assert_eq!(headers.insert("x-a", "1".parse()?)?, None);
    /// assert_eq!(headers.insert("x-a", "2".parse()?)?.unwrap(), "1");
    /// assert_eq!(headers.get("x-a").unwrap(), "2");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn insert<K: IntoHeaderName>(
        &self,
        key: K,
        value: HeaderValue,
    ) -> Result<Option<HeaderValue>, Error> {
        self.write(false, false, |map| Ok((map.try_insert(key, value)?, true)))
            .map(|(previous, _)| previous)
    }

    /// Appends `value` to the values of `key`, like [`HeaderMap::append`]. Returns `true` if
    /// `key` had no value before.
    ///
    /// # Errors
    ///
    /// [`Error::Sealed`] after [`seal`](Self::seal); [`Error::MaxSizeReached`] if the map is full;
    /// [`Error::LimitExceeded`] if the result would be over a [`Builder`] limit. Nothing is
    /// published on error.
    ///
    /// # Panics
    ///
    /// Like `HeaderMap`, if `key` is a `&'static str` that is not a valid header name (`http`
    /// converts it with [`HeaderName::from_static`](http::HeaderName::from_static)). Parse names
    /// that come from input into a [`HeaderName`](http::HeaderName) first, which reports an
    /// invalid name as an error.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::new();
    /// assert!(!headers.append("x-a", "1".parse()?)?);
    /// assert!(headers.append("x-a", "2".parse()?)?);
    /// assert_eq!(headers.get_all("x-a"), ["1", "2"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn append<K: IntoHeaderName>(&self, key: K, value: HeaderValue) -> Result<bool, Error> {
        self.write(false, false, |map| Ok((map.try_append(key, value)?, true)))
            .map(|(existed, _)| existed)
    }

    /// Removes every value of `key`, like [`HeaderMap::remove`], and returns the first one.
    ///
    /// Removing a key that is absent publishes nothing and leaves the version unchanged.
    ///
    /// # Errors
    ///
    /// [`Error::Sealed`] after [`seal`](Self::seal), even if `key` is absent.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::new();
    /// headers.insert("x-a", "1".parse()?)?;
    /// assert_eq!(headers.remove("x-a")?.unwrap(), "1");
    /// assert_eq!(headers.remove("x-a")?, None);
    /// assert_eq!(headers.version(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn remove<K: AsHeaderName>(&self, key: K) -> Result<Option<HeaderValue>, Error> {
        self.write(false, false, |map| {
            let removed = map.remove(key);
            let changed = removed.is_some();
            Ok((removed, changed))
        })
        .map(|(removed, _)| removed)
    }

    /// Applies several changes as one atomic write and returns what `f` returns.
    ///
    /// `f` runs exactly once, on a private copy of the current map, while other writers wait.
    /// Readers see either none or all of its changes. An `update` always publishes a new version,
    /// even if `f` changed nothing (comparing maps would cost more than it saves). If `f` panics, nothing is published, the
    /// panic propagates, and the handle stays fully usable.
    ///
    /// Inside `f`, prefer [`HeaderMap::try_insert`] and [`HeaderMap::try_append`]: the
    /// non-`try` forms panic when the map is full.
    ///
    /// # Errors
    ///
    /// [`Error::Sealed`] after [`seal`](Self::seal); `f` does not run then.
    /// [`Error::LimitExceeded`] if the map `f` leaves is over a [`Builder`] limit; `f` ran, but
    /// its changes are discarded (it returned a value nobody receives).
    ///
    /// # Panics
    ///
    /// Only if `f` panics, for example by calling [`HeaderMap::insert`] on a map at `HeaderMap`'s
    /// capacity: the panic is the closure's own and propagates to the caller, nothing is
    /// published, and the handle stays usable. Use `try_insert`/`try_append` in `f` to get
    /// [`http::header::MaxSizeReached`] instead.
    ///
    /// # Deadlocks
    ///
    /// `f` must not write to the same headers through another handle method: the writer lock is
    /// held while `f` runs. Reading (for example [`SharedHeaders::get`]) inside `f` is fine and
    /// sees the version before this write.
    ///
    /// # Examples
    ///
    /// Rotating a token and its expiry together, so that no reader sees one without the other:
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// use http::header::AUTHORIZATION;
    /// let headers = SharedHeaders::new();
    /// let old = headers.update(|m| {
    ///     let old = m.insert(AUTHORIZATION, "Bearer t2".parse().unwrap());
    ///     m.insert("x-token-expires", "1700000000".parse().unwrap());
    ///     old
    /// })?;
    /// assert_eq!(old, None);
    /// assert_eq!(headers.len(), 2);
    /// assert_eq!(headers.version(), 1);
    /// # Ok::<(), shared_headers::Error>(())
    /// ```
    pub fn update<R>(&self, f: impl FnOnce(&mut HeaderMap) -> R) -> Result<R, Error> {
        self.write(false, false, |map| Ok((f(map), true)))
            .map(|(result, _)| result)
    }

    /// Like [`update`](Self::update), for a closure that can fail: if `f` returns `Err`, nothing
    /// is published and the error is returned.
    ///
    /// This is the way to batch fallible changes, such as [`HeaderMap::try_insert`] (whose error
    /// converts into [`Error::MaxSizeReached`] with `?`), or to abandon a batch on a condition of
    /// your own. `f` runs exactly once; there is no retry loop.
    ///
    /// # Errors
    ///
    /// What `f` returns; [`Error::Sealed`] after [`seal`](Self::seal) (`f` does not run then);
    /// [`Error::LimitExceeded`] if the result is over a [`Builder`] limit.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Error, SharedHeaders};
    /// let headers = SharedHeaders::new();
    /// headers.try_update(|m| {
    ///     m.try_insert("x-a", "1".parse().unwrap())?;
    ///     m.try_append("x-a", "2".parse().unwrap())?;
    ///     Ok::<_, Error>(())
    /// })?;
    /// assert_eq!(headers.get_all("x-a"), ["1", "2"]);
    ///
    /// // An error of the closure abandons the whole batch.
    /// #[derive(Debug)]
    /// enum AppError { Headers(Error), Rejected }
    /// impl From<Error> for AppError {
    ///     fn from(e: Error) -> Self { AppError::Headers(e) }
    /// }
    /// let refused = headers.try_update(|m| {
    ///     m.clear();
    ///     Err::<(), _>(AppError::Rejected)
    /// });
    /// assert!(matches!(refused, Err(AppError::Rejected)));
    /// assert_eq!((headers.len(), headers.version()), (2, 1));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn try_update<R, E: From<Error>>(
        &self,
        f: impl FnOnce(&mut HeaderMap) -> Result<R, E>,
    ) -> Result<R, E> {
        self.write(false, false, |map| f(map).map(|result| (result, true)))
            .map(|(result, _)| result)
    }

    /// [`try_update`](Self::try_update) that also returns the snapshot it published, for the
    /// crate's middleware.
    pub(crate) fn try_update_published<R>(
        &self,
        f: impl FnOnce(&mut HeaderMap) -> Result<R, Error>,
    ) -> Result<(R, Snapshot), Error> {
        let (result, snapshot) = self.write(false, true, |map| f(map).map(|r| (r, true)))?;
        // `keep` makes `write` return the published snapshot; it always publishes here.
        Ok((result, snapshot.unwrap_or_else(|| self.snapshot())))
    }

    /// Replaces the whole map with `map` and returns the new snapshot.
    ///
    /// # Errors
    ///
    /// [`Error::Sealed`] after [`seal`](Self::seal); [`Error::LimitExceeded`] if `map` is over a
    /// [`Builder`] limit. Nothing is published on error.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// use http::HeaderMap;
    /// let headers = SharedHeaders::new();
    /// let mut map = HeaderMap::new();
    /// map.insert("x-a", "1".parse()?);
    /// let snap = headers.replace(map)?;
    /// assert_eq!((snap.version(), snap.len()), (1, 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn replace(&self, map: HeaderMap) -> Result<Snapshot, Error> {
        self.publish(None, map)
    }

    /// Takes a private, editable copy of the current map, remembering its version.
    ///
    /// A draft holds no lock: edit it across `.await` points for as long as needed, then hand it
    /// to [`commit`](Self::commit), which publishes it only if nobody wrote in between.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::new();
    /// let mut draft = headers.draft();
    /// draft.insert("x-a", "1".parse()?);
    /// assert!(headers.is_empty()); // not published yet
    /// headers.commit(draft)?;
    /// assert_eq!(headers.get("x-a").unwrap(), "1");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn draft(&self) -> Draft {
        let current = self.shared.current.load();
        Draft {
            map: current.map().clone(),
            base_version: current.version,
            policy: current.policy.clone(),
            origin: Arc::downgrade(&self.shared),
        }
    }

    /// Publishes `draft` if the headers are still at the draft's base version.
    ///
    /// # Errors
    ///
    /// [`Error::Conflict`] if another write was published after the draft was taken (take a new
    /// draft and apply the change again); [`Error::ForeignDraft`] if the draft was taken from
    /// another handle (not a clone of this one); [`Error::Sealed`] after [`seal`](Self::seal);
    /// [`Error::LimitExceeded`] if the draft is over a [`Builder`] limit. Nothing is published on
    /// error.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Error, SharedHeaders};
    /// let headers = SharedHeaders::new();
    /// let first = headers.draft();
    /// let second = headers.draft();
    /// assert_eq!(headers.commit(first)?.version(), 1);
    /// assert_eq!(
    ///     headers.commit(second).unwrap_err(),
    ///     Error::Conflict { expected: 0, found: 1 }
    /// );
    /// # Ok::<(), Error>(())
    /// ```
    pub fn commit(&self, draft: Draft) -> Result<Snapshot, Error> {
        if !std::ptr::eq(draft.origin.as_ptr(), Arc::as_ptr(&self.shared)) {
            return Err(Error::ForeignDraft);
        }
        self.publish(Some(draft.base_version), draft.map)
    }

    // ---------------------------------------------------------------------------------------
    // Commit-once
    // ---------------------------------------------------------------------------------------

    /// Seals the headers as they are now and returns the sealed snapshot.
    ///
    /// Exactly one of any number of concurrent `seal` calls succeeds. From then on the headers
    /// never change: every write returns [`Error::Sealed`] and every read sees the sealed
    /// snapshot. Sealing publishes one version (the version grows by one) and does not copy the
    /// map: the sealed version shares it with the version it seals.
    ///
    /// # Errors
    ///
    /// [`Error::Sealed`] if the headers were already sealed; the winner's snapshot is then
    /// available from [`snapshot`](Self::snapshot).
    ///
    /// # Examples
    ///
    /// The handler and the timeout race to commit; whoever loses learns who won:
    ///
    /// ```
    /// # use shared_headers::{Error, SharedHeaders};
    /// let headers = SharedHeaders::new();
    /// let winner = headers.seal()?;
    /// assert_eq!(headers.seal(), Err(Error::Sealed { version: winner.version() }));
    /// assert_eq!(headers.snapshot(), winner);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn seal(&self) -> Result<Snapshot, Error> {
        let _writer = self.shared.writer.lock();
        let current = loaded_into_arc(self.unsealed(true)?);
        // No copy: the sealed version reads the map of the version it seals, which stays alive
        // as long as the sealed one does. The map was admitted by the policy when it was
        // published, and nothing changes it.
        let sealed = Arc::new(State {
            own: HeaderMap::new(),
            version: current.version + 1,
            sealed: true,
            policy: current.policy.clone(),
            sealed_from: Some(current),
        });
        self.shared.current.store(Arc::clone(&sealed));
        Ok(Snapshot::from_state(sealed))
    }

    /// Applies final changes and seals, as one atomic write.
    ///
    /// Like [`update`](Self::update) followed by [`seal`](Self::seal), except that no other write
    /// and no other seal can come in between, and only one version is published.
    ///
    /// # Errors
    ///
    /// [`Error::Sealed`] if the headers were already sealed; `f` does not run then.
    /// [`Error::LimitExceeded`] if the map `f` leaves is over a [`Builder`] limit: nothing is
    /// published and the headers stay unsealed.
    ///
    /// # Panics
    ///
    /// Only if `f` panics (see [`update`](Self::update)); nothing is published then.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::new();
    /// let (_, sealed) = headers.seal_with(|m| {
    ///     m.insert("x-outcome", "handler".parse().unwrap());
    /// })?;
    /// assert!(sealed.is_sealed());
    /// assert_eq!(sealed["x-outcome"], "handler");
    /// assert_eq!(sealed.version(), 1);
    /// # Ok::<(), shared_headers::Error>(())
    /// ```
    pub fn seal_with<R>(
        &self,
        f: impl FnOnce(&mut HeaderMap) -> R,
    ) -> Result<(R, Snapshot), Error> {
        self.write(true, false, |map| Ok((f(map), true)))
            // A seal always publishes, so the snapshot is always there; once sealed, the current
            // snapshot is the sealed one anyway.
            .map(|(result, snapshot)| (result, snapshot.unwrap_or_else(|| self.snapshot())))
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
        match Arc::try_unwrap(self.shared) {
            Ok(shared) => Snapshot::from_state(shared.current.into_inner()).into_header_map(),
            Err(shared) => SharedHeaders { shared }.snapshot().into_header_map(),
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
        Arc::ptr_eq(&this.shared, &other.shared)
    }

    // ---------------------------------------------------------------------------------------
    // The two write paths
    // ---------------------------------------------------------------------------------------

    /// The copy-on-write path: under the writer lock, clone the current map once, run `f` on the
    /// copy, and publish the copy as the next version if `f` succeeded and reported a change (or
    /// if sealing). Returns the published snapshot when sealing or when asked to `keep` it.
    fn write<R, E: From<Error>>(
        &self,
        seal: bool,
        keep: bool,
        f: impl FnOnce(&mut HeaderMap) -> Result<(R, bool), E>,
    ) -> Result<(R, Option<Snapshot>), E> {
        let _writer = self.shared.writer.lock();
        // A short borrow (`load`, not `load_full`) is enough: it is dropped before the store.
        let current = self.unsealed(seal)?;
        let version = current.version + 1;
        let mut map = current.map().clone();
        let policy = current.policy.clone();
        drop(current); // lets the previous version be freed by `store` if no reader holds it
        let (result, changed) = f(&mut map)?;
        if !changed && !seal {
            return Ok((result, None));
        }
        if let Some(policy) = &policy {
            policy.admit(&mut map)?;
        }
        let next = Arc::new(State {
            own: map,
            sealed_from: None,
            version,
            sealed: seal,
            policy,
        });
        let snapshot = (seal || keep).then(|| Snapshot::from_state(Arc::clone(&next)));
        self.shared.current.store(next);
        Ok((result, snapshot))
    }

    /// Publishes a map built outside the lock (replace, commit), optionally only if the current
    /// version is `expected`.
    fn publish(&self, expected: Option<u64>, mut map: HeaderMap) -> Result<Snapshot, Error> {
        let _writer = self.shared.writer.lock();
        let (found, policy) = {
            let current = self.unsealed(false)?;
            (current.version, current.policy.clone())
        };
        if let Some(expected) = expected {
            if expected != found {
                return Err(Error::Conflict { expected, found });
            }
        }
        if let Some(policy) = &policy {
            policy.admit(&mut map)?;
        }
        let next = Arc::new(State {
            own: map,
            sealed_from: None,
            version: found + 1,
            sealed: false,
            policy,
        });
        self.shared.current.store(Arc::clone(&next));
        Ok(Snapshot::from_state(next))
    }

    /// The current version, for a writer that holds the writer lock (so it is stable until the
    /// writer stores), or [`Error::Sealed`]. A refused write is counted; a refused seal is not.
    fn unsealed(&self, sealing: bool) -> Result<Loaded<State>, Error> {
        let current = self.shared.current.load();
        if current.sealed {
            if !sealing {
                self.shared.refused.fetch_add(1, Ordering::Relaxed);
            }
            return Err(Error::Sealed {
                version: current.version,
            });
        }
        Ok(current)
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
        Self::with_policy(map, None)
    }
}

impl fmt::Debug for SharedHeaders {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let current = self.shared.current.load();
        f.debug_struct("SharedHeaders")
            .field("version", &current.version)
            .field("sealed", &current.sealed)
            .field(
                "headers",
                &Redacted::with_policy(current.map(), current.policy.as_deref()),
            )
            .finish()
    }
}

/// A private, editable copy of the headers, taken by [`SharedHeaders::draft`].
///
/// It dereferences mutably to [`HeaderMap`] and holds no lock, so it can be edited across
/// `.await` points. [`SharedHeaders::commit`] publishes it only if the headers are still at
/// [`base_version`](Self::base_version). Its `Debug`, like the handle's, never prints the values
/// of secret headers.
///
/// # Examples
///
/// ```
/// # use shared_headers::SharedHeaders;
/// let headers = SharedHeaders::new();
/// let mut draft = headers.draft();
/// assert_eq!(draft.base_version(), 0);
/// draft.append("x-a", "1".parse()?);
/// let published = headers.commit(draft)?;
/// assert_eq!(published.version(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Draft {
    map: HeaderMap,
    base_version: u64,
    /// Only to redact `Debug` like the handle does; `commit` uses the handle's own policy.
    policy: Option<Arc<Policy>>,
    /// The handle the draft came from. A `Weak` keeps the address from being reused by another
    /// handle while the draft lives, so the identity check in `commit` is exact.
    origin: Weak<Shared>,
}

impl fmt::Debug for Draft {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Draft")
            .field("base_version", &self.base_version)
            .field(
                "headers",
                &Redacted::with_policy(&self.map, self.policy.as_deref()),
            )
            .finish()
    }
}

impl Draft {
    /// The version this draft was copied from.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::new();
    /// headers.insert("x-a", "1".parse()?)?;
    /// assert_eq!(headers.draft().base_version(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn base_version(&self) -> u64 {
        self.base_version
    }

    /// Gives up the draft and returns its map.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let map = SharedHeaders::new().draft().into_header_map();
    /// assert!(map.is_empty());
    /// ```
    pub fn into_header_map(self) -> HeaderMap {
        self.map
    }
}

impl Deref for Draft {
    type Target = HeaderMap;

    #[inline]
    fn deref(&self) -> &HeaderMap {
        &self.map
    }
}

impl DerefMut for Draft {
    #[inline]
    fn deref_mut(&mut self) -> &mut HeaderMap {
        &mut self.map
    }
}
