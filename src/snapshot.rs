//! The immutable, versioned view of the headers.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use http::HeaderMap;

use crate::policy::Policy;
use crate::redact::Redacted;
use crate::sync::{AtomicU64, Ordering};

/// One published map, with its version and its seal.
///
/// A seal publishes nothing new: it sets `sealed_as` on the current state, under the writer
/// lock, and never clears it. A reader loads the state, then reads `sealed_as` once, and the
/// [`Snapshot`] it makes keeps that reading: a snapshot taken before the seal keeps reporting
/// the unsealed version, whatever happens to the state later.
///
/// Why the pair is consistent: the map and `version` never change once published. If the
/// reader sees `sealed_as == 0`, the state was current and unsealed when it was loaded (a seal
/// is never undone). If it sees `v != 0`, the state is sealed, and a sealed state stays the
/// current one forever (no write follows a seal), so at the moment of that read the headers
/// were exactly this map at version `v`.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) map: HeaderMap,
    /// The version of this map while it is unsealed.
    pub(crate) version: u64,
    /// 0 while unsealed; the sealed version (`version + 1` for a seal of this state, `version`
    /// for a state published sealed by `seal_with`) once sealed. Set once, under the writer lock.
    pub(crate) sealed_as: AtomicU64,
    /// The handle's limits and secret names; `None` (no allocation) for an unconfigured handle.
    /// Every version of one handle shares the same `Arc`.
    pub(crate) policy: Option<Arc<Policy>>,
    /// `Some` only for [`State::empty`], the empty version 0 shared by many handles: it is never
    /// sealed in place (that would seal every handle sharing it); a seal publishes this twin
    /// instead, the same empty map already sealed as version 1.
    pub(crate) sealed_twin: Option<Arc<State>>,
}

// Request-scoped (`Locked`) handles keep one version per thread in a read cache (see
// `sync::ReadCache`): reads of a current cached version take no lock.
crate::sync::read_cache!(State);

impl State {
    pub(crate) fn new(
        map: HeaderMap,
        version: u64,
        sealed: bool,
        policy: Option<Arc<Policy>>,
    ) -> Self {
        State {
            map,
            version,
            sealed_as: AtomicU64::new(if sealed { version } else { 0 }),
            policy,
            sealed_twin: None,
        }
    }

    /// The empty, unsealed version 0 of a handle without a policy, without an allocation: one
    /// per thread, shared by every such handle made on that thread (so its reference count stays
    /// in that thread's cache), with its sealed twin (see [`State::sealed_twin`]). A fresh state
    /// under loom (whose objects cannot outlive one model execution) and on a thread whose
    /// thread-locals are being destroyed.
    pub(crate) fn empty() -> Arc<State> {
        #[cfg(not(shared_headers_loom))]
        {
            thread_local! {
                static EMPTY: Arc<State> = Arc::new(State {
                    // Sealed as version 1 (`version + 1`, as a seal in place would be).
                    sealed_twin: Some(Arc::new(State {
                        sealed_as: AtomicU64::new(1),
                        ..State::new(HeaderMap::new(), 0, false, None)
                    })),
                    ..State::new(HeaderMap::new(), 0, false, None)
                });
            }
            if let Ok(empty) = EMPTY.try_with(Arc::clone) {
                return empty;
            }
        }
        Arc::new(State::new(HeaderMap::new(), 0, false, None))
    }

    /// The seal as seen now: 0 while unsealed, else the sealed version.
    #[inline]
    pub(crate) fn seal(&self) -> u64 {
        // Acquire, paired with the seal's Release in `Writer::seal_as_is`: a reader that sees
        // this version sealed sees sealed every handle its sealer sealed before it.
        self.sealed_as.load(Ordering::Acquire)
    }

    /// The (version, sealed) of this state as seen now.
    #[inline]
    pub(crate) fn version_sealed(&self) -> (u64, bool) {
        match self.seal() {
            0 => (self.version, false),
            sealed => (sealed, true),
        }
    }

    /// The headers of this version.
    #[inline]
    pub(crate) fn map(&self) -> &HeaderMap {
        &self.map
    }

    /// The headers of this version, moved out without copying when nobody else holds them.
    pub(crate) fn into_map(this: Arc<State>) -> HeaderMap {
        match Arc::try_unwrap(this) {
            Ok(state) => state.map,
            Err(shared) => shared.map.clone(),
        }
    }
}

/// An owned, immutable, consistent view of the headers at one version.
///
/// A `Snapshot` is what a reader keeps: it never changes, no matter what writers do afterwards,
/// and it holds no lock and no arc-swap guard, so it may be held across `.await`, sent to another
/// thread, stored in a log record or in `http::Extensions`. Cloning it is one reference-count
/// increment.
///
/// It dereferences to [`HeaderMap`], so every read method of `HeaderMap` works on it.
///
/// Keeping a snapshot keeps its version's map alive; the map is freed when the last snapshot of
/// that version is dropped.
///
/// `Debug` never prints the values of secret headers (see [`redacted`](Self::redacted)).
///
/// # Examples
///
/// ```
/// use http::header::{ACCEPT, HOST};
/// use shared_headers::SharedHeaders;
///
/// let headers = SharedHeaders::new();
/// headers.insert(HOST, "example.com".parse()?)?;
/// let before = headers.snapshot();
/// headers.insert(ACCEPT, "*/*".parse()?)?;
///
/// // The snapshot is frozen at the version it was taken.
/// assert_eq!(before.version(), 1);
/// assert_eq!(before.len(), 1);
/// assert!(!before.contains_key(ACCEPT));
/// assert_eq!(headers.snapshot().len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Snapshot {
    pub(crate) state: Arc<State>,
    /// The state's seal as read when this snapshot was taken: 0 unsealed, else the sealed
    /// version. Never re-read, so the snapshot never changes.
    seal: u64,
}

impl Snapshot {
    /// The snapshot of `state` as it is now (reads its seal once).
    #[inline]
    pub(crate) fn from_state(state: Arc<State>) -> Self {
        let seal = state.seal();
        Snapshot { state, seal }
    }

    /// The version of this snapshot: 0 for a new handle, plus one for every published change.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::new();
    /// assert_eq!(headers.snapshot().version(), 0);
    /// headers.append("x-a", "1".parse()?)?;
    /// assert_eq!(headers.snapshot().version(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn version(&self) -> u64 {
        match self.seal {
            0 => self.state.version,
            sealed => sealed,
        }
    }

    /// Whether this snapshot is the sealed (final) one.
    ///
    /// A sealed snapshot is exactly what was committed: no later write can change the headers.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::new();
    /// assert!(!headers.snapshot().is_sealed());
    /// let sealed = headers.seal()?;
    /// assert!(sealed.is_sealed());
    /// # Ok::<(), shared_headers::Error>(())
    /// ```
    #[inline]
    pub fn is_sealed(&self) -> bool {
        self.seal != 0
    }

    /// The underlying map (the same as dereferencing).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let snapshot = SharedHeaders::new().snapshot();
    /// assert!(snapshot.header_map().is_empty());
    /// ```
    #[inline]
    pub fn header_map(&self) -> &http::HeaderMap {
        self.state.map()
    }

    /// Turns the snapshot into an owned map, without cloning when this is the last reference to
    /// its version.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::new();
    /// headers.insert("x-a", "1".parse()?)?;
    /// let map = headers.snapshot().into_header_map();
    /// assert_eq!(map["x-a"], "1");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn into_header_map(self) -> HeaderMap {
        State::into_map(self.state)
    }

    /// The headers formatted for logs, without the values of secret headers.
    ///
    /// Secret values are shown as `[redacted]`: values flagged with
    /// [`HeaderValue::set_sensitive(true)`](http::HeaderValue::set_sensitive), the values of
    /// the [`Builder::ALWAYS_SECRET`](crate::Builder::ALWAYS_SECRET) names, and the values of
    /// the names given to [`Builder::sensitive`](crate::Builder::sensitive) for this handle. See
    /// [`Redacted`] for the format. `Debug` of a snapshot applies the same rules.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::builder()
    ///     .sensitive([http::HeaderName::from_static("x-session")])
    ///     .build();
    /// headers.insert("x-session", "s3cr3t".parse()?)?;
    /// headers.insert("x-request-id", "42".parse()?)?;
    /// let snap = headers.snapshot();
    /// let line = snap.redacted().to_string();
    /// assert_eq!(line, "x-session: [redacted], x-request-id: 42");
    /// assert!(!format!("{snap:?}").contains("s3cr3t"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn redacted(&self) -> Redacted<'_> {
        Redacted::with_policy(self.state.map(), self.state.policy.as_deref())
    }

    /// `map` formatted with this snapshot's secret names (the headers a response handle's
    /// policy hides, applied to the response as sent).
    pub(crate) fn redact_with_policy<'a>(&'a self, map: &'a HeaderMap) -> Redacted<'a> {
        Redacted::with_policy(map, self.state.policy.as_deref())
    }

    /// Whether values of `name` are secret under this snapshot's handle's rules, whatever the
    /// value (an always-secret name, or one of its policy's).
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(crate) fn is_secret_name(&self, name: &http::HeaderName) -> bool {
        crate::policy::is_secret_name(name, self.state.policy.as_deref())
    }

    /// Whether two snapshots are the very same published version: the same map (pointer
    /// equality), the same version and seal state.
    ///
    /// Handles that start empty without a policy share one empty version 0 per thread (and its
    /// sealed version 1), so snapshots of two such handles taken before their first write are
    /// `ptr_eq`, as their content, version and seal are equal.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{SharedHeaders, Snapshot};
    /// let headers = SharedHeaders::new();
    /// let (a, b) = (headers.snapshot(), headers.snapshot());
    /// assert!(Snapshot::ptr_eq(&a, &b));
    ///
    /// // A seal is another version.
    /// let sealed = headers.seal()?;
    /// assert!(!Snapshot::ptr_eq(&a, &sealed));
    /// assert!(Snapshot::ptr_eq(&sealed, &headers.snapshot()));
    /// # Ok::<(), shared_headers::Error>(())
    /// ```
    #[inline]
    pub fn ptr_eq(this: &Snapshot, other: &Snapshot) -> bool {
        Arc::ptr_eq(&this.state, &other.state) && this.seal == other.seal
    }
}

impl Deref for Snapshot {
    type Target = HeaderMap;

    #[inline]
    fn deref(&self) -> &HeaderMap {
        self.state.map()
    }
}

impl<'a> IntoIterator for &'a Snapshot {
    type Item = (&'a http::HeaderName, &'a http::HeaderValue);
    type IntoIter = http::header::Iter<'a, http::HeaderValue>;

    /// Iterates like `&HeaderMap`: every value, with its name, in the map's order.
    fn into_iter(self) -> Self::IntoIter {
        self.state.map().iter()
    }
}

impl AsRef<HeaderMap> for Snapshot {
    #[inline]
    fn as_ref(&self) -> &HeaderMap {
        self.state.map()
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("version", &self.version())
            .field("sealed", &self.is_sealed())
            .field("headers", &self.redacted())
            .finish()
    }
}

impl PartialEq for Snapshot {
    /// Two snapshots are equal when they have the same version, seal state and headers.
    fn eq(&self, other: &Snapshot) -> bool {
        Snapshot::ptr_eq(self, other)
            || (self.version() == other.version()
                && self.is_sealed() == other.is_sealed()
                && self.state.map() == other.state.map())
    }
}

impl Eq for Snapshot {}
