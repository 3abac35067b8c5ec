//! Version-aware, single-flight, async refresh of the default headers.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use http::HeaderMap;
use tokio::sync::watch;

use super::single_flight::{Lead, PublishError, Rendezvous, Role, SingleFlight};
use crate::error::Error;
use crate::shared::SharedHeaders;

/// Refreshes the default headers (typically an auth token and its companions) once per failed
/// version, however many requests failed with it.
///
/// Share one `Refresher` (it is a cheap `Clone`) between every task that sends requests through
/// a [`DefaultHeaders`](crate::client::DefaultHeaders) service on the same [`SharedHeaders`].
/// When a response says the credentials are stale (a `401`), call
/// [`refresh_if_current`](Self::refresh_if_current) with the response's
/// [`DefaultsVersion`](crate::client::DefaultsVersion), then retry the request.
///
/// The rule lives in a private, runtime-free gate that the loom models check; this type adds the
/// async waiting (a `tokio::sync::watch` channel per attempt, runtime-agnostic).
///
/// # Examples
///
/// ```
/// use http::HeaderMap;
/// use shared_headers::SharedHeaders;
/// use shared_headers::client::{Refreshed, Refresher};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let defaults = SharedHeaders::new();
/// defaults.insert("authorization", "Bearer old".parse()?)?;
/// let refresher = Refresher::<std::io::Error>::new(defaults.clone());
///
/// // Two requests failed with version 1; both ask; only one refresh runs.
/// let fetch = || async {
///     let mut new = HeaderMap::new();
///     new.insert("authorization", "Bearer new".parse().unwrap());
///     Ok(new)
/// };
/// let (a, b) = tokio::join!(
///     refresher.refresh_if_current(1, fetch),
///     refresher.refresh_if_current(1, fetch),
/// );
/// assert_eq!(a?.version(), 2);
/// assert_eq!(b?.version(), 2);
/// assert_eq!(refresher.performed(), 1);
/// assert_eq!(defaults.get("authorization").unwrap(), "Bearer new");
///
/// // A late caller with the old version returns at once.
/// assert_eq!(refresher.refresh_if_current(1, fetch).await?, Refreshed::Stale { version: 2 });
/// # Ok(())
/// # }
/// ```
pub struct Refresher<E> {
    inner: Arc<Inner<E>>,
}

struct Inner<E> {
    flight: SingleFlight<Attempt<E>>,
    performed: AtomicU64,
    failed: AtomicU64,
}

impl<E> Clone for Refresher<E> {
    fn clone(&self) -> Self {
        Refresher {
            inner: Arc::clone(&self.inner),
        }
    }
}

/// What the followers of one attempt wait for.
enum Outcome<E> {
    Published(u64),
    Failed(RefreshError<E>),
    Abandoned,
}

impl<E> Clone for Outcome<E> {
    fn clone(&self) -> Self {
        match self {
            Outcome::Published(v) => Outcome::Published(*v),
            Outcome::Failed(e) => Outcome::Failed(e.clone()),
            Outcome::Abandoned => Outcome::Abandoned,
        }
    }
}

/// One attempt's rendezvous: `None` while the leader runs, then its outcome.
struct Attempt<E>(watch::Sender<Option<Outcome<E>>>);

impl<E> Default for Attempt<E> {
    fn default() -> Self {
        Attempt(watch::Sender::new(None))
    }
}

impl<E> Rendezvous for Attempt<E> {
    fn abandon(&self) {
        self.0.send_replace(Some(Outcome::Abandoned));
    }
}

impl<E> Attempt<E> {
    fn settle(&self, outcome: Outcome<E>) {
        // `send_replace` stores the value even when nobody is subscribed yet: a follower that
        // subscribes later still sees it.
        self.0.send_replace(Some(outcome));
    }
}

/// How [`Refresher::refresh_if_current`] ended, with the version of the defaults that is current
/// for the caller now (retry the request with it).
///
/// # Examples
///
/// ```
/// # use shared_headers::client::Refreshed;
/// let outcome = Refreshed::Joined { version: 4 };
/// assert_eq!(outcome.version(), 4);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refreshed {
    /// This caller ran the refresh and published `version`.
    Performed {
        /// The version published.
        version: u64,
    },
    /// Another caller was refreshing the same version; this one waited and saw it publish.
    Joined {
        /// The version the other caller published.
        version: u64,
    },
    /// The failed version was no longer current: nothing ran, nothing was waited for.
    Stale {
        /// The version current when the call was made.
        version: u64,
    },
}

impl Refreshed {
    /// The version of the defaults to retry with.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::client::Refreshed;
    /// assert_eq!(Refreshed::Performed { version: 2 }.version(), 2);
    /// assert_eq!(Refreshed::Stale { version: 9 }.version(), 9);
    /// ```
    #[inline]
    pub fn version(&self) -> u64 {
        match *self {
            Refreshed::Performed { version }
            | Refreshed::Joined { version }
            | Refreshed::Stale { version } => version,
        }
    }
}

/// Why a refresh failed. Every caller that waited for the failed attempt gets a clone.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use shared_headers::client::RefreshError;
///
/// let err = RefreshError::Refresh(Arc::new(std::io::Error::other("auth server down")));
/// let seen_by_a_waiter = err.clone();
/// assert_eq!(seen_by_a_waiter.to_string(), "the refresh function failed");
/// let cause = std::error::Error::source(&seen_by_a_waiter).unwrap();
/// assert_eq!(cause.to_string(), "auth server down");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum RefreshError<E> {
    /// The refresh function returned this error (shared by every waiter).
    Refresh(Arc<E>),
    /// The refreshed headers could not be published: the defaults are sealed
    /// ([`Error::Sealed`]), the result would not fit in a `HeaderMap`
    /// ([`Error::MaxSizeReached`]), or it would be over a limit set with
    /// [`SharedHeaders::builder`] ([`Error::LimitExceeded`]).
    Publish(Error),
}

impl<E> Clone for RefreshError<E> {
    fn clone(&self) -> Self {
        match self {
            RefreshError::Refresh(e) => RefreshError::Refresh(Arc::clone(e)),
            RefreshError::Publish(e) => RefreshError::Publish(e.clone()),
        }
    }
}

impl<E> RefreshError<E> {
    /// The refresh function's error; `None` when publishing failed.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use shared_headers::client::RefreshError;
    /// let err = RefreshError::Refresh(Arc::new("auth server down"));
    /// assert_eq!(err.refresh_error(), Some(&"auth server down"));
    /// ```
    pub fn refresh_error(&self) -> Option<&E> {
        match self {
            RefreshError::Refresh(e) => Some(e),
            RefreshError::Publish(_) => None,
        }
    }

    /// Why the refreshed headers were not published; `None` when the refresh function failed.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::Error;
    /// # use shared_headers::client::RefreshError;
    /// let err = RefreshError::<()>::Publish(Error::Sealed { version: 3 });
    /// assert_eq!(err.publish_error(), Some(&Error::Sealed { version: 3 }));
    /// ```
    pub fn publish_error(&self) -> Option<&Error> {
        match self {
            RefreshError::Publish(e) => Some(e),
            RefreshError::Refresh(_) => None,
        }
    }
}

/// Only the refresher's words: the cause is the [`source`](std::error::Error::source).
impl<E> fmt::Display for RefreshError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RefreshError::Refresh(_) => "the refresh function failed",
            RefreshError::Publish(_) => "the refreshed default headers were not published",
        })
    }
}

impl<E: std::error::Error + 'static> std::error::Error for RefreshError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RefreshError::Refresh(e) => Some(&**e),
            RefreshError::Publish(e) => Some(e),
        }
    }
}

impl<E> Refresher<E> {
    /// A refresher publishing to `defaults`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// # use shared_headers::client::Refresher;
    /// let defaults = SharedHeaders::new();
    /// let refresher = Refresher::<std::io::Error>::new(defaults.clone());
    /// assert!(SharedHeaders::ptr_eq(refresher.defaults(), &defaults));
    /// ```
    pub fn new(defaults: SharedHeaders) -> Self {
        Refresher {
            inner: Arc::new(Inner {
                flight: SingleFlight::new(defaults),
                performed: AtomicU64::new(0),
                failed: AtomicU64::new(0),
            }),
        }
    }

    /// The defaults this refresher publishes to.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// # use shared_headers::client::Refresher;
    /// let refresher = Refresher::<()>::new(SharedHeaders::new());
    /// assert_eq!(refresher.defaults().version(), 0);
    /// ```
    pub fn defaults(&self) -> &SharedHeaders {
        self.inner.flight.headers()
    }

    /// Refreshes that ran and published.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// # use shared_headers::client::Refresher;
    /// assert_eq!(Refresher::<()>::new(SharedHeaders::new()).performed(), 0);
    /// ```
    pub fn performed(&self) -> u64 {
        self.inner.performed.load(Ordering::Relaxed)
    }

    /// Refreshes that ran and failed (the function's error, or publishing).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::SharedHeaders;
    /// # use shared_headers::client::Refresher;
    /// assert_eq!(Refresher::<()>::new(SharedHeaders::new()).failed(), 0);
    /// ```
    pub fn failed(&self) -> u64 {
        self.inner.failed.load(Ordering::Relaxed)
    }

    /// Runs `refresh` if, and only if, `failed_version` is still the current version of the
    /// defaults and no other refresh is running; otherwise waits for the running one, or returns
    /// at once if the version is already stale.
    ///
    /// * **Leader**: `refresh` runs; its `HeaderMap` is published as **one** write in which every
    ///   name it contains replaces that name's values in the defaults (so a token and its expiry
    ///   change together; other defaults are kept). Returns [`Refreshed::Performed`].
    /// * **Follower** (same failed version, a refresh running): `refresh` is not called; waits
    ///   and returns [`Refreshed::Joined`] with the version the leader published, or the leader's
    ///   error.
    /// * **Stale** (`failed_version` is not current): returns [`Refreshed::Stale`] at once.
    ///
    /// A failed refresh does not poison anything: the next call whose version is still current
    /// runs its own refresh. If the leader's future is dropped before it finishes (its task was
    /// cancelled, or `refresh` panicked), the waiting followers wake and one of them takes over
    /// with its own `refresh`. `refresh` is called at most once per call.
    ///
    /// Publishing is one write under the defaults' writer lock (one copy of the map, no retry
    /// loop): writes to the defaults through other paths meanwhile are kept, never lost.
    ///
    /// # Errors
    ///
    /// [`RefreshError::Refresh`] with the refresh function's error, for the leader and every
    /// follower of the failed attempt; [`RefreshError::Publish`] if the new headers could not be
    /// published ([`Error::Sealed`], [`Error::MaxSizeReached`], [`Error::LimitExceeded`]), for
    /// the leader and every follower too.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future is safe at any point: a dropped leader hands over to a follower, a
    /// dropped follower leaves nothing behind.
    ///
    /// The refresh runs **inside the leader's future**: cancelling the leader cancels the refresh
    /// in progress, and the follower that takes over starts a new one from the beginning. If
    /// every caller gives up sooner than a refresh takes (a request timeout shorter than the auth
    /// server's answer), each one in turn starts a refresh and drops it, and none finishes. To
    /// let a refresh outlive its caller, run the call in a task of its own (a `Refresher` is a
    /// cheap, `'static` clone) and await the task's handle: cancelling the caller then drops only
    /// the handle, the refresh completes and publishes, and later callers are
    /// [`Refreshed::Stale`] or [`Refreshed::Joined`]. See the second example.
    ///
    /// # Examples
    ///
    /// A failed refresh is reported, then the next attempt runs:
    ///
    /// ```
    /// # use http::HeaderMap;
    /// # use shared_headers::SharedHeaders;
    /// # use shared_headers::client::{Refreshed, Refresher, RefreshError};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let refresher = Refresher::new(SharedHeaders::new());
    /// let down = refresher
    ///     .refresh_if_current(0, || async { Err::<HeaderMap, _>("auth server down") })
    ///     .await;
    /// assert!(matches!(down, Err(RefreshError::Refresh(e)) if *e == "auth server down"));
    ///
    /// let up = refresher
    ///     .refresh_if_current(0, || async {
    ///         let mut new = HeaderMap::new();
    ///         new.insert("authorization", "Bearer t1".parse().unwrap());
    ///         Ok(new)
    ///     })
    ///     .await;
    /// assert_eq!(up.unwrap(), Refreshed::Performed { version: 1 });
    /// assert_eq!((refresher.performed(), refresher.failed()), (1, 1));
    /// # }
    /// ```
    ///
    /// A refresh that survives its caller's timeout, because it runs in its own task:
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use http::HeaderMap;
    /// # use shared_headers::SharedHeaders;
    /// # use shared_headers::client::{Refreshed, Refresher};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let refresher = Refresher::<std::io::Error>::new(SharedHeaders::new());
    /// let slow_auth_server = || async {
    ///     tokio::time::sleep(Duration::from_millis(50)).await;
    ///     let mut new = HeaderMap::new();
    ///     new.insert("authorization", "Bearer t1".parse().unwrap());
    ///     Ok(new)
    /// };
    /// let detached = tokio::spawn({
    ///     let refresher = refresher.clone();
    ///     async move { refresher.refresh_if_current(0, slow_auth_server).await }
    /// });
    /// // The caller gives up after 1 ms; the refresh goes on without it.
    /// let gave_up = tokio::time::timeout(Duration::from_millis(1), detached).await;
    /// assert!(gave_up.is_err());
    ///
    /// // A second caller with the same failed version joins it instead of starting over.
    /// let second = refresher.refresh_if_current(0, slow_auth_server).await.unwrap();
    /// assert_eq!(second, Refreshed::Joined { version: 1 });
    /// assert_eq!(refresher.performed(), 1);
    /// # }
    /// ```
    pub async fn refresh_if_current<F, Fut>(
        &self,
        failed_version: u64,
        refresh: F,
    ) -> Result<Refreshed, RefreshError<E>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<HeaderMap, E>>,
    {
        let lead = loop {
            match self.inner.flight.begin(failed_version) {
                Role::Stale { current } => return Ok(Refreshed::Stale { version: current }),
                Role::Leader(lead) => break lead,
                Role::Follower(attempt) => {
                    let mut outcome = attempt.0.subscribe();
                    // Keep no reference to the attempt while waiting: the leader owns it.
                    drop(attempt);
                    let seen = match outcome.wait_for(Option::is_some).await {
                        Ok(value) => value.clone(),
                        Err(_closed) => None,
                    };
                    match seen {
                        Some(Outcome::Published(version)) => {
                            return Ok(Refreshed::Joined { version });
                        }
                        Some(Outcome::Failed(error)) => return Err(error),
                        // The leader went away: decide again (perhaps lead this time).
                        Some(Outcome::Abandoned) | None => continue,
                    }
                }
            }
        };
        self.lead(lead, refresh).await
    }

    /// Runs the refresh as the leader. If this future is dropped, `lead` is dropped with it and
    /// the attempt is abandoned (followers wake and one takes over).
    async fn lead<F, Fut>(
        &self,
        lead: Lead<'_, Attempt<E>>,
        refresh: F,
    ) -> Result<Refreshed, RefreshError<E>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<HeaderMap, E>>,
    {
        let error = match refresh().await {
            Ok(new) => match lead.publish(&new) {
                Ok((snapshot, attempt)) => {
                    let version = snapshot.version();
                    self.inner.performed.fetch_add(1, Ordering::Relaxed);
                    attempt.settle(Outcome::Published(version));
                    return Ok(Refreshed::Performed { version });
                }
                Err(PublishError { error, attempt }) => {
                    let error = RefreshError::Publish(error);
                    attempt.settle(Outcome::Failed(error.clone()));
                    error
                }
            },
            Err(error) => {
                let error = RefreshError::Refresh(Arc::new(error));
                lead.fail().settle(Outcome::Failed(error.clone()));
                error
            }
        };
        self.inner.failed.fetch_add(1, Ordering::Relaxed);
        Err(error)
    }
}

impl<E> fmt::Debug for Refresher<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Refresher")
            .field("flight", &self.inner.flight)
            .field("performed", &self.performed())
            .field("failed", &self.failed())
            .finish()
    }
}
