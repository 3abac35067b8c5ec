//! Building a handle with limits and a list of secret headers.

use std::sync::Arc;

use http::{HeaderMap, HeaderName};

use crate::error::Error;
use crate::policy::Policy;
use crate::shared::SharedHeaders;
use crate::sync::Strategy;

/// Configures a [`SharedHeaders`] handle: size limits against hostile input and runaway
/// handlers, and which headers are secret. Made by [`SharedHeaders::builder`].
///
/// * [`max_entries`](Self::max_entries) and [`max_bytes`](Self::max_bytes): every write (insert,
///   append, update, replace, commit, seal) that would take the headers past a limit is refused
///   as a whole with [`Error::LimitExceeded`], and nothing is published.
/// * [`sensitive`](Self::sensitive): names whose values are never printed by `Debug` or
///   [`Snapshot::redacted`](crate::Snapshot::redacted), in addition to the
///   [`ALWAYS_SECRET`](Self::ALWAYS_SECRET) names, which are always redacted.
/// * Every value of `authorization`, `proxy-authorization`, `cookie`, `set-cookie` and the
///   `sensitive` names is flagged with
///   [`HeaderValue::set_sensitive(true)`](http::HeaderValue::set_sensitive) as it is written,
///   on every handle, so that HTTP/2's HPACK never indexes it and header-logging middleware
///   sees it as sensitive.
///
/// A handle built with no option is exactly a [`SharedHeaders::new`] handle: it pays nothing.
///
/// # Examples
///
/// ```
/// use http::HeaderName;
/// use shared_headers::{Error, Limit, SharedHeaders};
///
/// let headers = SharedHeaders::builder()
///     .max_entries(64)
///     .max_bytes(8 * 1024)
///     .sensitive([HeaderName::from_static("x-session")])
///     .build();
///
/// headers.insert("x-session", "s3cr3t".parse()?)?;
/// assert!(headers.get("x-session").unwrap().is_sensitive());
/// assert!(!format!("{headers:?}").contains("s3cr3t"));
///
/// let huge = "a".repeat(9 * 1024).parse()?;
/// let err = headers.insert("x-huge", huge).unwrap_err();
/// assert!(matches!(err, Error::LimitExceeded { limit: Limit::Bytes, .. }));
/// assert_eq!(headers.version(), 1); // nothing published
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default)]
#[must_use = "a builder does nothing until `build` or `build_from` is called"]
pub struct Builder {
    policy: Policy,
    publication: Publication,
}

/// How a handle publishes its versions: the choice between reads that never wait and writes
/// and drops that cost the same whatever the number of threads. Set with
/// [`Builder::publication`]; the semantics (consistency, ordering, seal, every error) are the
/// same for both, and the same tests and loom models run against both.
///
/// | | reads (`get`, `snapshot`, ...) | a write's publication, and the drop of the handle |
/// |---|---|---|
/// | [`LockFree`](Self::LockFree) (default) | never wait, never block a writer (arc-swap) | O(threads that ever read any lock-free handle): arc-swap walks one node per such thread |
/// | [`Locked`](Self::Locked) | while the reading thread's cached version is current: one atomic load and a thread-local lookup, no lock, no shared write (two threads reading one handle do not slow each other down); a thread's first read of each version: a read lock held for one reference-count increment, waiting at most for a writer's pointer swap | O(1): a write lock held for one pointer swap |
///
/// The difference is not small on a server with many threads: arc-swap's request pattern
/// (new, one load, two stores, drop) takes 759 ns with one live thread that had loaded,
/// 1.31 µs with 8, 6.50 µs with 64 and 22.77 µs with 256 (`threads/arc_swap/{1,8,64,256}`,
/// `cargo bench --features full --bench threads`; hardware and method:
/// [`docs::performance`](crate::docs::performance#which-handle-publishes-how-and-why)); the
/// same bench measures this crate's pattern for both strategies (`threads/raw`,
/// `threads/raw_locked`).
///
/// * **Long-lived handles read by many threads and rarely written** (client default headers,
///   configuration): `LockFree`. [`SharedHeaders::new`], `From<HeaderMap>` and the builder's
///   default use it.
/// * **Request-scoped handles**, made, written a few times, sealed and dropped per request:
///   `Locked`. The server layer's request and response handles use it.
///
/// **What a `Locked` handle's reads keep alive**: each thread caches one version, the one it
/// last read of the `Locked` handle it last read, and keeps it alive until it reads a newer
/// version or another `Locked` handle, drops that handle, or exits: at most one version per
/// thread, never served for another handle (a handle's identity in the cache is an id of its
/// own, never its address).
///
/// With the `rwlock-backend` feature every handle is `Locked`.
///
/// # Examples
///
/// ```
/// use shared_headers::{Publication, SharedHeaders};
///
/// // One request's response headers: written a few times, sealed, dropped.
/// let response = SharedHeaders::builder().publication(Publication::Locked).build();
/// response.insert("x-cache", "miss".parse()?)?;
/// let sealed = response.seal()?;
/// assert_eq!((sealed.version(), sealed.is_sealed()), (2, true));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Publication {
    /// Lock-free reads; publication and drop O(threads). The default.
    #[default]
    LockFree,
    /// Reads from a per-thread cache while it is current, else under a read lock held for one
    /// reference-count increment; publication and drop O(1).
    Locked,
}

// Here, not in `shared.rs`: the handle names nothing of the builder built on it.
impl SharedHeaders {
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
}

impl Builder {
    /// The names whose values are always secret, whatever the settings: never printed by any
    /// printer of the crate (`Debug`, [`Redacted`](crate::Redacted), the server's access line,
    /// the OpenTelemetry spans) and never propagated to another service. The first four are
    /// also flagged sensitive ([`HeaderValue::set_sensitive`](http::HeaderValue::set_sensitive))
    /// on every write. Add your own with [`sensitive`](Self::sensitive).
    ///
    /// The list names the common cases of a rule: a header's name is secret when the rule that
    /// judges a query parameter's name marks it (its tokens between `-`: `token`, `secret`,
    /// `password`, `session`, `signature`, `key` after `api`, `private`, `access`...; see
    /// [`access_log`](crate::server::access_log#safe-by-default) with feature `tracing`), so
    /// `x-vault-token`, `private-token`, `x-goog-api-key` and `x-client-secret` are secret too.
    /// CORS's `access-control-*` names are not.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Builder, SharedHeaders};
    /// assert!(Builder::ALWAYS_SECRET.contains(&"x-api-key"));
    /// let headers = SharedHeaders::new();
    /// headers.insert("x-api-key", "s3cr3t".parse()?)?;
    /// headers.insert("x-vault-token", "hvs.s3cr3t".parse()?)?;
    /// assert_eq!(
    ///     headers.snapshot().redacted().to_string(),
    ///     "x-api-key: [redacted], x-vault-token: [redacted]"
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub const ALWAYS_SECRET: &'static [&'static str] = crate::policy::CREDENTIAL_HEADERS;

    /// A builder with no limits and the default sensitive headers: the same as
    /// [`SharedHeaders::builder`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::Builder;
    /// let headers = Builder::new().build();
    /// assert!(headers.is_empty());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Refuses writes that would make the headers hold more than `max` values
    /// ([`HeaderMap::len`]: each value of a repeated name counts).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Error, Limit, SharedHeaders};
    /// let headers = SharedHeaders::builder().max_entries(2).build();
    /// headers.append("x-a", "1".parse()?)?;
    /// headers.append("x-a", "2".parse()?)?;
    /// assert_eq!(
    ///     headers.append("x-a", "3".parse()?),
    ///     Err(Error::LimitExceeded { limit: Limit::Entries, max: 2, attempted: 3 })
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_entries(mut self, max: usize) -> Self {
        self.policy.max_entries = Some(max);
        self
    }

    /// Refuses writes that would make the names and values total more than `max` bytes (a name
    /// counts once per value, as on the wire).
    ///
    /// # Complexity
    ///
    /// With this limit set, every write sums the lengths of the new map's values: O(number of
    /// values), the same order as the copy every write makes anyway. Handles without it skip the
    /// sum.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Error, Limit, SharedHeaders};
    /// let headers = SharedHeaders::builder().max_bytes(10).build();
    /// headers.insert("x-a", "1234567".parse()?)?; // 3 + 7 = 10 bytes: allowed
    /// assert_eq!(
    ///     headers.append("x-b", "1".parse()?),
    ///     Err(Error::LimitExceeded { limit: Limit::Bytes, max: 10, attempted: 14 })
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_bytes(mut self, max: usize) -> Self {
        self.policy.max_bytes = Some(max);
        self
    }

    /// Adds names whose values are secret: never printed by `Debug` of the handle or its
    /// snapshots, nor by [`Snapshot::redacted`](crate::Snapshot::redacted), and flagged
    /// sensitive as they are written. The [`ALWAYS_SECRET`](Self::ALWAYS_SECRET) names always
    /// stay. Calling it again adds to the list; every name given is kept.
    ///
    /// Takes [`HeaderName`]s, checked when they were made: parse a run-time string with
    /// `str::parse` first (its error is yours to handle), or use `HeaderName::from_static` for
    /// a literal.
    ///
    /// In the server layer, a name made secret here is secret for the whole layer: in the
    /// request and response handles, in every field of the access line, and it is never
    /// propagated ([`SharedHeadersLayer::request_policy`](crate::server::SharedHeadersLayer::request_policy)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// use http::HeaderName;
    /// let from_config: HeaderName = "x-session".parse()?;
    /// let headers = SharedHeaders::builder()
    ///     .sensitive([HeaderName::from_static("x-tenant-key")])
    ///     .sensitive([from_config])
    ///     .build();
    /// headers.insert("x-tenant-key", "k".parse()?)?;
    /// headers.insert("x-session", "s".parse()?)?;
    /// let shown = headers.snapshot().redacted().to_string();
    /// assert_eq!(shown, "x-tenant-key: [redacted], x-session: [redacted]");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sensitive(mut self, names: impl IntoIterator<Item = HeaderName>) -> Self {
        for name in names {
            self.policy.add_secret(name);
        }
        self
    }

    /// How the handle publishes its versions: [`Publication::LockFree`] (the default) for
    /// long-lived handles read by many threads, [`Publication::Locked`] for request-scoped ones.
    /// See [`Publication`] for the costs of each.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Publication, SharedHeaders};
    /// let headers = SharedHeaders::builder().publication(Publication::Locked).build();
    /// headers.insert("x-a", "1".parse()?)?;
    /// assert_eq!(headers.get("x-a").unwrap(), "1");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn publication(mut self, publication: Publication) -> Self {
        self.publication = publication;
        self
    }

    fn strategy(&self) -> Strategy {
        match self.publication {
            Publication::LockFree => Strategy::LockFree,
            Publication::Locked => Strategy::Locked,
        }
    }

    /// Builds a handle to an empty, unsealed map at version 0.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// let headers = SharedHeaders::builder().max_entries(8).build();
    /// assert_eq!(headers.version(), 0);
    /// ```
    pub fn build(self) -> SharedHeaders {
        let strategy = self.strategy();
        SharedHeaders::with_policy(HeaderMap::new(), self.into_policy(), strategy)
    }

    /// Builds a handle to `map` as version 0, unsealed, without copying it.
    ///
    /// # Errors
    ///
    /// [`Error::LimitExceeded`] if `map` is already over a limit.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Error, Limit, SharedHeaders};
    /// use http::HeaderMap;
    /// let mut map = HeaderMap::new();
    /// map.insert("x-a", "1".parse()?);
    /// map.insert("x-b", "2".parse()?);
    /// let headers = SharedHeaders::builder().max_entries(2).build_from(map.clone())?;
    /// assert_eq!(headers.len(), 2);
    /// assert!(SharedHeaders::builder().max_entries(1).build_from(map).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn build_from(self, mut map: HeaderMap) -> Result<SharedHeaders, Error> {
        let strategy = self.strategy();
        let policy = self.into_policy();
        crate::policy::admit(policy.as_deref(), &mut map)?;
        Ok(SharedHeaders::with_policy(map, policy, strategy))
    }

    /// The policy this builder describes, `None` for the defaults. Middleware that builds a
    /// handle per request (the server room) builds it once and shares it with every handle.
    pub(crate) fn into_policy(self) -> Option<Arc<Policy>> {
        (!self.policy.is_default()).then(|| Arc::new(self.policy))
    }
}
