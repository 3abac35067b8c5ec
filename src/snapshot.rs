//! The immutable, versioned view of the headers.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use http::HeaderMap;

use crate::policy::Policy;
use crate::redact::Redacted;

/// One published version: the map, its version and its sealed flag, always read together.
#[derive(Debug)]
pub(crate) struct State {
    /// The map of this version, unless `sealed_from` holds it (then empty: no allocation).
    pub(crate) own: HeaderMap,
    /// A seal publishes a new version without copying the map: the sealed version points to the
    /// version it sealed and reads that version's map. Never nested: only an unsealed version
    /// can be sealed, and it is never itself a sealed one.
    pub(crate) sealed_from: Option<Arc<State>>,
    pub(crate) version: u64,
    pub(crate) sealed: bool,
    /// The handle's limits and secret names; `None` (no allocation) for an unconfigured handle.
    /// Every version of one handle shares the same `Arc`.
    pub(crate) policy: Option<Arc<Policy>>,
}

impl State {
    /// The headers of this version.
    #[inline]
    pub(crate) fn map(&self) -> &HeaderMap {
        match &self.sealed_from {
            None => &self.own,
            Some(base) => &base.own,
        }
    }

    /// The headers of this version, moved out without copying when nobody else holds them.
    pub(crate) fn into_map(this: Arc<State>) -> HeaderMap {
        match Arc::try_unwrap(this) {
            Ok(State {
                own,
                sealed_from: None,
                ..
            }) => own,
            Ok(State {
                sealed_from: Some(base),
                ..
            }) => State::into_map(base),
            Err(shared) => shared.map().clone(),
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
}

impl Snapshot {
    pub(crate) fn from_state(state: Arc<State>) -> Self {
        Snapshot { state }
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
        self.state.version
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
        self.state.sealed
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
    /// `authorization`, `proxy-authorization`, `cookie` and `set-cookie`, and the values of the
    /// names given to [`Builder::sensitive`](crate::Builder::sensitive) for this handle. See
    /// [`Redacted`] for the format. `Debug` of a snapshot applies the same rules.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::builder().sensitive(["x-api-key"]).build();
    /// headers.insert("x-api-key", "s3cr3t".parse()?)?;
    /// headers.insert("x-request-id", "42".parse()?)?;
    /// let snap = headers.snapshot();
    /// let line = snap.redacted().to_string();
    /// assert_eq!(line, "x-api-key: [redacted], x-request-id: 42");
    /// assert!(!format!("{snap:?}").contains("s3cr3t"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn redacted(&self) -> Redacted<'_> {
        Redacted::with_policy(self.state.map(), self.state.policy.as_deref())
    }

    /// Whether two snapshots are the very same published version (pointer equality).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{SharedHeaders, Snapshot};
    /// let headers = SharedHeaders::new();
    /// let (a, b) = (headers.snapshot(), headers.snapshot());
    /// assert!(Snapshot::ptr_eq(&a, &b));
    /// ```
    #[inline]
    pub fn ptr_eq(this: &Snapshot, other: &Snapshot) -> bool {
        Arc::ptr_eq(&this.state, &other.state)
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
            .field("version", &self.state.version)
            .field("sealed", &self.state.sealed)
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
