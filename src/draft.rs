//! A private, editable copy of the headers, published by [`SharedHeaders::commit`] only if
//! nobody wrote in between.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Weak};

use http::HeaderMap;

use crate::policy::Policy;
use crate::redact::Redacted;
use crate::shared::{Host, Owner, Shared, SharedHeaders};

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
    pub(crate) map: HeaderMap,
    pub(crate) base_version: u64,
    /// Only to redact `Debug` like the handle does; `commit` uses the handle's own policy.
    pub(crate) policy: Option<Arc<Policy>>,
    /// The handle the draft came from: the address of its `Shared`, and a `Weak` to the
    /// allocation that holds it, which keeps the address from being reused by another handle
    /// while the draft lives, so the identity check in `commit` is exact.
    pub(crate) origin: Origin,
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

// A draft is a private map and a version; its origin's `Weak` is never upgraded (it only keeps
// an address from being reused), so nothing shared is reachable through it.
impl std::panic::UnwindSafe for Draft {}
impl std::panic::RefUnwindSafe for Draft {}

/// Which handle a draft came from (see [`Draft::origin`]).
#[derive(Clone)]
pub(crate) struct Origin {
    /// The address of the handle's `Shared`.
    address: usize,
    /// Keeps the allocation holding that `Shared` from being freed, so the address is not
    /// reused while the draft lives.
    _keep: Keep,
}

#[derive(Clone)]
#[allow(dead_code)] // held for what it keeps allocated, never read
enum Keep {
    Alone(Weak<Shared>),
    Hosted(Weak<dyn Host>),
}

impl Origin {
    /// The origin of a draft taken from `handle`.
    pub(crate) fn of(handle: &SharedHeaders) -> Origin {
        let keep = match handle.owner() {
            Owner::Alone(shared) => Keep::Alone(Arc::downgrade(shared)),
            Owner::Hosted(host, side) => match host.external(*side) {
                // A host made over existing handles: the origin is that handle.
                Some(external) => return Origin::of(external),
                None => Keep::Hosted(Arc::downgrade(host)),
            },
        };
        Origin {
            address: std::ptr::from_ref(handle.shared()).addr(),
            _keep: keep,
        }
    }

    /// Whether the draft came from the handle whose shared part is `shared`.
    #[inline]
    pub(crate) fn is(&self, shared: &Shared) -> bool {
        self.address == std::ptr::from_ref(shared).addr()
    }
}
