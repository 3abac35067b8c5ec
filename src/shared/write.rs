//! The write path. Every write takes the writer lock and checks the seal (`Writer`, in
//! `writer.rs`), builds the next map, and publishes it as one new version in one of the
//! writer's named steps: `publish`, `store`, or `seal_as_is` (no copy).

use std::sync::Arc;

use http::header::{AsHeaderName, Entry, IntoHeaderName, MaxSizeReached, OccupiedEntry};
use http::{HeaderMap, HeaderValue};

use super::SharedHeaders;
use super::writer::{ENTRY_SAFE_LEN, Refusal, SCAN_BELOW, Scan, Writer, flagged};
use crate::draft::Draft;
use crate::error::Error;
use crate::snapshot::Snapshot;
use crate::sync::Ordering;
use crate::writer_lock::WriteOp;

impl SharedHeaders {
    /// Inserts `value` for `key`, replacing all previous values, like [`HeaderMap::insert`].
    /// Returns the first previous value.
    ///
    /// # Errors
    ///
    /// [`Error::Sealed`] after [`seal`](Self::seal); [`Error::MaxSizeReached`] if the map is full;
    /// [`Error::LimitExceeded`] if the result would be over a [`Builder`](crate::Builder) limit. Nothing is
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
        self.add_one(
            WriteOp::Insert,
            key,
            value,
            |mut entry, value| Some(entry.insert(value)),
            None,
            |map, key, value| map.try_insert(key, value),
        )
    }

    /// Appends `value` to the values of `key`, like [`HeaderMap::append`]. Returns `true` if
    /// `key` already had a value (and `false` if this is its first), as `HeaderMap::append`
    /// does.
    ///
    /// # Errors
    ///
    /// [`Error::Sealed`] after [`seal`](Self::seal); [`Error::MaxSizeReached`] if the map is full;
    /// [`Error::LimitExceeded`] if the result would be over a [`Builder`](crate::Builder) limit. Nothing is
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
        self.add_one(
            WriteOp::Append,
            key,
            value,
            |mut entry, value| {
                entry.append(value);
                true
            },
            false,
            |map, key, value| map.try_append(key, value),
        )
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
        let writer = self.writer(WriteOp::Remove, Refusal::Counted)?;
        let mut map = writer.base().map().clone();
        let removed = map.remove(key);
        if removed.is_some() {
            writer.store(map, false, Scan::Rescan)?;
        }
        Ok(removed)
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
    /// [`Error::LimitExceeded`] if the map `f` leaves is over a [`Builder`](crate::Builder) limit; `f` ran, but
    /// its changes are discarded (it returned a value nobody receives).
    ///
    /// # Panics
    ///
    /// If `f` panics, for example by calling [`HeaderMap::insert`] on a map at `HeaderMap`'s
    /// capacity: the panic is the closure's own and propagates to the caller, nothing is
    /// published, and the handle stays usable. Use `try_insert`/`try_append` in `f` to get
    /// [`http::header::MaxSizeReached`] instead.
    ///
    /// A write to the same headers from inside `f` (through this handle or a clone of it:
    /// `insert`, `update`, `seal`, [`Exchange::commit`](crate::Exchange::commit), a refresh's
    /// publish, ...) panics with a message naming both writes, instead of deadlocking on the
    /// writer lock that `f` runs under; the panic unwinds through `f`, nothing is published, and
    /// the handle stays usable. Make the change on `f`'s own `&mut HeaderMap`, use a
    /// [`Draft`], or do the write after `update` returns. Reading (for example
    /// [`SharedHeaders::get`]) inside `f` is fine and sees the version before this write, and so
    /// is writing to *other* headers.
    ///
    /// # Deadlocks
    ///
    /// Nesting writes to **two** handles in opposite orders on two threads
    /// (`a.update(|_| b.insert(..))` on one, `b.update(|_| a.insert(..))` on the other) can
    /// deadlock, like any two locks taken in opposite orders: it is not detected. Nest writes to
    /// several handles in one fixed order, or do not nest them.
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
        self.apply_quiet(WriteOp::Update, |map| Ok::<_, Error>(f(map)))
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
    /// [`Error::LimitExceeded`] if the result is over a [`Builder`](crate::Builder) limit.
    ///
    /// # Panics
    ///
    /// If `f` panics, or writes to the same headers (see [`update`](Self::update)).
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
        self.apply_quiet(WriteOp::TryUpdate, f)
    }

    /// Replaces the whole map with `map` and returns the new snapshot.
    ///
    /// # Errors
    ///
    /// [`Error::Sealed`] after [`seal`](Self::seal); [`Error::LimitExceeded`] if `map` is over a
    /// [`Builder`](crate::Builder) limit. Nothing is published on error.
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
        self.writer(WriteOp::Replace, Refusal::Counted)?
            .publish(map, false)
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
        let current = self.shared().current.load();
        Draft {
            map: current.map().clone(),
            base_version: current.version_sealed().0,
            policy: current.policy.clone(),
            origin: crate::draft::Origin::of(self),
        }
    }

    /// Publishes `draft` if the headers are still at the draft's base version.
    ///
    /// # Errors
    ///
    /// [`Error::Conflict`] if another write was published after the draft was taken (take a new
    /// draft and apply the change again); [`Error::ForeignDraft`] if the draft was taken from
    /// another handle (not a clone of this one); [`Error::Sealed`] after [`seal`](Self::seal);
    /// [`Error::LimitExceeded`] if the draft is over a [`Builder`](crate::Builder) limit. Nothing is published on
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
        if !draft.origin.is(self.shared()) {
            return Err(Error::ForeignDraft);
        }
        let writer = self.writer(WriteOp::Commit, Refusal::Counted)?;
        let found = writer.base().version;
        if draft.base_version != found {
            return Err(Error::Conflict {
                expected: draft.base_version,
                found,
            });
        }
        writer.publish(draft.map, false)
    }

    /// Seals the headers as they are now and returns the sealed snapshot.
    ///
    /// Exactly one of any number of concurrent `seal` calls succeeds. From then on the headers
    /// never change: every write returns [`Error::Sealed`] and every read sees the sealed
    /// snapshot. Sealing makes one new version (the version grows by one) without copying the
    /// map or allocating: the sealed version is the current map, marked sealed in place.
    /// Snapshots taken before the seal keep their version and stay unsealed.
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
        Ok(self.writer(WriteOp::Seal, Refusal::Uncounted)?.seal_as_is())
    }

    /// Applies final changes and seals, as one atomic write.
    ///
    /// Like [`update`](Self::update) followed by [`seal`](Self::seal), except that no other write
    /// and no other seal can come in between, and only one version is published.
    ///
    /// # Errors
    ///
    /// [`Error::Sealed`] if the headers were already sealed; `f` does not run then.
    /// [`Error::LimitExceeded`] if the map `f` leaves is over a [`Builder`](crate::Builder) limit: nothing is
    /// published and the headers stay unsealed.
    ///
    /// # Panics
    ///
    /// If `f` panics (see [`update`](Self::update)); nothing is published then. If `f` writes to
    /// the same headers (a re-entrant write would deadlock; see [`update`](Self::update)).
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
        let writer = self.writer(WriteOp::SealWith, Refusal::Counted)?;
        let mut map = writer.base().map().clone();
        let result = f(&mut map);
        Ok((result, writer.publish(map, true)?))
    }

    /// Seals the headers, or returns their sealed snapshot if other code sealed them first: a
    /// host's commit of its handles. Infallible by construction (no limit is
    /// checked again, no error exists to fall back from), so the commit can never record an
    /// unsealed snapshot. A refusal is not counted: it is not a write.
    pub(crate) fn seal_or_sealed(&self) -> Snapshot {
        let current = self.shared().writer.lock(WriteOp::ExchangeCommit);
        if current.current.seal() != 0 {
            return Snapshot::from_state(Arc::clone(&current.current));
        }
        Writer {
            shared: self.shared(),
            current,
        }
        .seal_as_is()
    }

    /// The copy-on-write step of every batch: under the writer lock, copy the current map once,
    /// run `f` on the copy, and publish the copy as the next version if `f` succeeded. Returns
    /// `f`'s result and the published snapshot.
    #[cfg_attr(not(feature = "client"), allow(dead_code))] // the client room's refresh
    pub(crate) fn apply<R, E: From<Error>>(
        &self,
        op: WriteOp,
        f: impl FnOnce(&mut HeaderMap) -> Result<R, E>,
    ) -> Result<(R, Snapshot), E> {
        let writer = self.writer(op, Refusal::Counted)?;
        let mut map = writer.base().map().clone();
        let result = f(&mut map)?;
        Ok((result, writer.publish(map, false)?))
    }

    /// [`apply`](Self::apply) for writes that return no snapshot (`insert`, `append`,
    /// `update`, `try_update`): no reference count is taken for one.
    #[inline]
    fn apply_quiet<R, E: From<Error>>(
        &self,
        op: WriteOp,
        f: impl FnOnce(&mut HeaderMap) -> Result<R, E>,
    ) -> Result<R, E> {
        let writer = self.writer(op, Refusal::Counted)?;
        let mut map = writer.base().map().clone();
        let result = f(&mut map)?;
        writer.store(map, false, Scan::Rescan)?;
        Ok(result)
    }

    /// The write of `insert` and `append`: one value for one name. From [`SCAN_BELOW`] to
    /// [`ENTRY_SAFE_LEN`] values it goes through `HeaderMap::entry`, flags the one value it adds
    /// (every other value was flagged when its version was published) and publishes without
    /// rescanning: `occupied` adds it to an existing name, a new name gets it as its first value
    /// and answers `vacant`. Otherwise it calls `general` (the fallible `try_insert`/`try_append`)
    /// and the publishing step rescans the map.
    #[inline]
    fn add_one<K: IntoHeaderName, R>(
        &self,
        op: WriteOp,
        key: K,
        value: HeaderValue,
        occupied: impl FnOnce(OccupiedEntry<'_, HeaderValue>, HeaderValue) -> R,
        vacant: R,
        general: impl FnOnce(&mut HeaderMap, K, HeaderValue) -> Result<R, MaxSizeReached>,
    ) -> Result<R, Error> {
        let writer = self.writer(op, Refusal::Counted)?;
        let mut map = writer.base().map().clone();
        let policy = writer.base().policy.as_deref();
        let (answer, scan) = if (SCAN_BELOW..ENTRY_SAFE_LEN).contains(&map.len()) {
            let answer = match map.entry(key) {
                Entry::Occupied(entry) => {
                    let value = flagged(entry.key(), value, policy);
                    occupied(entry, value)
                }
                Entry::Vacant(entry) => {
                    let value = flagged(entry.key(), value, policy);
                    entry.insert(value);
                    vacant
                }
            };
            (answer, Scan::Flagged)
        } else {
            (general(&mut map, key, value)?, Scan::Rescan)
        };
        writer.store(map, false, scan)?;
        Ok(answer)
    }

    /// The first step of every write: take the writer lock and check the seal.
    ///
    /// Panics if this thread already holds the writer lock (`op` called from inside a write's
    /// closure): that would deadlock.
    #[inline]
    fn writer(&self, op: WriteOp, refusal: Refusal) -> Result<Writer<'_>, Error> {
        let shared = self.shared();
        let current = shared.writer.lock(op);
        let sealed = current.current.seal();
        if sealed != 0 {
            if refusal == Refusal::Counted {
                shared.refused.fetch_add(1, Ordering::Relaxed);
            }
            return Err(Error::Sealed { version: sealed });
        }
        Ok(Writer { shared, current })
    }
}
