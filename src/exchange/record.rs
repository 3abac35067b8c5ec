//! What a commit leaves behind: the [`Committed`] record, and
//! [`LateWrites`], the report of writes refused after the commit.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::{Method, StatusCode, Uri, Version};

use super::Outcome;
use crate::snapshot::Snapshot;

#[cfg(doc)]
use super::{CommitHooks, Exchange};

/// What the layer that made an exchange recorded of its request, fixed at the start: the
/// method, URI, version and peer, the deadline, and the refusal of the caller's budget. The
/// core keeps it; its public view is [`Committed`]'s accessors.
///
/// Its `Debug` never prints a secret of the URI: the crate's one rule ([`crate::redact`])
/// redacts its userinfo and the values of its credential path parameters (`;jsessionid=`),
/// and the values of its credential query parameters (with the names the layer's access log
/// adds to the rule): the URI prints as `url.path` and `url.query` do (a query the access log
/// omits as `?[redacted]`).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Line {
    pub(crate) method: Method,
    pub(crate) uri: Uri,
    pub(crate) version: Version,
    pub(crate) peer: Option<std::net::SocketAddr>,
    /// The request's deadline: the layer's own, or the caller's budget if it was earlier.
    pub(crate) deadline: Option<crate::deadline::Deadline>,
    /// Why the caller's budget header was refused, if it was (the layer's deadline applied).
    pub(crate) budget_error: Option<crate::deadline::BudgetError>,
    /// Whether the request is a gRPC call (`content-type: application/grpc...`): the layer's
    /// own answers are then in gRPC's words.
    pub(crate) grpc: bool,
    /// Whether the request is a Connect call, and which kind: the layer's own answers are
    /// then in Connect's words (`server/connect.rs`).
    pub(crate) connect: Option<ConnectCall>,
    /// The names the layer's printers add to the credential rule (its access log's
    /// `redact_query_params`), for every printer of this request's path; `None`: the rule
    /// alone.
    pub(crate) rule: Option<Arc<crate::redact::QueryRule>>,
    /// The request's `host` as received, kept only when its URI has no authority (an
    /// HTTP/1.1 origin-form target): with the URI, what every printer reads the server's
    /// address from (a clone of the received value: a reference count).
    pub(crate) host: Option<http::HeaderValue>,
    /// Whether `host` is secret for the layer (a secret name or a sensitive value): then no
    /// printer shows the server's address (the authority is its value by another name).
    pub(crate) host_secret: bool,
}

impl fmt::Debug for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestLine")
            .field("method", &self.method)
            .field(
                "uri",
                &UriShown {
                    uri: &self.uri,
                    rule: self.rule.as_deref(),
                },
            )
            .field("version", &self.version)
            .field("peer", &self.peer)
            .field("deadline", &self.deadline)
            .field("budget_error", &self.budget_error)
            .field("grpc", &self.grpc)
            .field("connect", &self.connect)
            .finish()
    }
}

/// A request's URI without its secrets (see [`Line`]), by the layer's rule.
struct UriShown<'a> {
    uri: &'a Uri,
    rule: Option<&'a crate::redact::QueryRule>,
}

impl fmt::Debug for UriShown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let uri = self.uri;
        if let Some(scheme) = uri.scheme_str() {
            write!(f, "{scheme}://")?;
        }
        if let Some(authority) = uri.authority() {
            match authority.as_str().rsplit_once('@') {
                Some((_, host)) => write!(f, "[redacted]@{host}")?,
                None => f.write_str(authority.as_str())?,
            }
        }
        let path = crate::redact::url::PathText {
            rule: crate::redact::QueryRule::or_default(self.rule),
            path: uri.path(),
        };
        fmt::Display::fmt(&path, f)?;
        match uri.query() {
            // A query the layer's access log omits: no printer shows it.
            Some(_) if matches!(self.rule, Some(crate::redact::QueryRule::Omitted { .. })) => {
                f.write_str("?[redacted]")
            }
            Some(query) => {
                let query = crate::redact::url::QueryShown {
                    rule: crate::redact::QueryRule::or_default(self.rule),
                    query,
                };
                write!(f, "?{query}")
            }
            None => Ok(()),
        }
    }
}

/// A Connect call (`server/connect.rs` tells them): unary, or streaming with the request's
/// `content-type` (`application/connect+<codec>`, which the answer repeats).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(not(feature = "server"), allow(dead_code))]
pub(crate) enum ConnectCall {
    Unary,
    Stream(http::HeaderValue),
}

/// The record of a commit: what a log line needs.
///
/// Who won ([`outcome`](Self::outcome)), the sealed request, response and annotation headers,
/// the request's method and URI, the status the committer knew, and the time from the creation
/// of the exchange (the call of the layer's service) to the commit.
///
/// [`SharedHeadersLayer`](crate::server::SharedHeadersLayer) passes it to its
/// [`on_commit`](crate::server::SharedHeadersLayer::on_commit) hook for every request, and puts
/// it in the response's extensions when there is a response. It holds the shared headers that
/// were committed: the request handle's, the response handle's and the annotations' sealed
/// snapshots; not the headers the inner service set on its own response (those are in the
/// response's headers).
///
/// It is a view of the record the exchange keeps once: cloning it is one reference count, and
/// keeping it keeps the exchange's memory (its sealed snapshots and the handles' shared parts)
/// alive, but not its tasks and not its late-writes report, which runs when the last
/// [`Exchange`] is dropped.
///
/// # Examples
///
/// ```
/// # use shared_headers::{Exchange, Outcome, SharedHeaders};
/// let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
/// exchange.request().insert("x-user", "ada".parse()?)?;
/// exchange.annotations().insert("x-route", "/users/{id}".parse()?)?;
/// let committed = exchange.commit(Outcome::Answered)?;
/// assert_eq!(committed.outcome(), Outcome::Answered);
/// assert_eq!(committed.request()["x-user"], "ada");
/// assert_eq!(committed.annotations().unwrap()["x-route"], "/users/{id}");
/// assert!(committed.response().is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Committed {
    // A view of the exchange's record, which lives in the exchange's allocation: cloning a
    // `Committed` is one reference count, and it keeps that allocation (not the exchange's
    // tasks, nor its late-writes report) alive.
    pub(super) inner: Arc<super::Inner>,
}

/// What a commit records, kept once in the exchange ([`Committed`] is a view of it).
#[derive(Debug)]
pub(crate) struct Record {
    pub(super) outcome: Outcome,
    pub(super) status: Option<StatusCode>,
    pub(super) time_to_commit: Duration,
    pub(super) request: Snapshot,
    pub(super) response: Snapshot,
    pub(super) annotations: Option<Snapshot>,
    /// Writes refused before the commit: the late-writes report counts the others.
    pub(super) refused_at_commit: u64,
}

impl Committed {
    /// Everything a log line can see (not the internal count), for equality.
    fn key(&self) -> impl PartialEq + '_ {
        let record = self.record();
        (
            record.outcome,
            record.status,
            record.time_to_commit,
            &record.request,
            &record.response,
            &record.annotations,
            &self.inner.line,
        )
    }
}

impl PartialEq for Committed {
    /// The same commit, or two records with the same content.
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner) || self.key() == other.key()
    }
}

impl Eq for Committed {}

// Only the record is reachable through a `Committed`, and it never changes once set (the
// exchange's locks and waker inside the same allocation are not reachable from it): a panic
// cannot leave it half-changed, as it could not when the record was a plain value.
impl std::panic::UnwindSafe for Committed {}
impl std::panic::RefUnwindSafe for Committed {}

impl fmt::Debug for Committed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let record = self.record();
        // The headers by the same rule as the URI (the layer's access log's names): a
        // `referer` or a `location` prints as the line prints it.
        let rule = self
            .inner
            .line
            .as_ref()
            .and_then(|line| line.rule.as_deref());
        f.debug_struct("Committed")
            .field("outcome", &record.outcome)
            .field("status", &record.status)
            .field("time_to_commit", &record.time_to_commit)
            .field("request", &SnapshotShown(&record.request, rule))
            .field("response", &SnapshotShown(&record.response, rule))
            .field("annotations", &record.annotations)
            .field("line", &self.inner.line)
            .finish()
    }
}

/// A snapshot as its own `Debug` prints it, its headers' URLs by a layer's rule.
struct SnapshotShown<'a>(&'a Snapshot, Option<&'a crate::redact::QueryRule>);

impl fmt::Debug for SnapshotShown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let SnapshotShown(snapshot, rule) = *self;
        f.debug_struct("Snapshot")
            .field("version", &snapshot.version())
            .field("sealed", &snapshot.is_sealed())
            .field("headers", &snapshot.redacted().with_rule(rule))
            .finish()
    }
}

impl Committed {
    #[inline]
    fn record(&self) -> &Record {
        self.inner.record()
    }

    /// When the exchange was made (for the server layer: the call of its service).
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    #[inline]
    pub(crate) fn started(&self) -> std::time::Instant {
        self.inner.started
    }

    /// Who committed.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Exchange, Outcome, SharedHeaders};
    /// let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    /// assert_eq!(exchange.commit(Outcome::Cancelled)?.outcome(), Outcome::Cancelled);
    /// # Ok::<(), shared_headers::AlreadyCommitted>(())
    /// ```
    #[inline]
    pub fn outcome(&self) -> Outcome {
        self.record().outcome
    }

    /// The sealed request headers.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Exchange, Outcome, SharedHeaders};
    /// let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    /// let committed = exchange.commit(Outcome::Answered)?;
    /// assert_eq!(*committed.request(), exchange.request().snapshot());
    /// # Ok::<(), shared_headers::AlreadyCommitted>(())
    /// ```
    #[inline]
    pub fn request(&self) -> &Snapshot {
        &self.record().request
    }

    /// The sealed response headers.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Exchange, Outcome, SharedHeaders};
    /// let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    /// exchange.response().insert("x-cache", "hit".parse()?)?;
    /// let committed = exchange.commit(Outcome::Answered)?;
    /// assert_eq!(committed.response()["x-cache"], "hit");
    /// assert!(committed.response().is_sealed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn response(&self) -> &Snapshot {
        &self.record().response
    }

    /// The sealed annotations: log metadata written through [`Exchange::annotations`], never
    /// sent; `None` if the exchange was never annotated.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Exchange, Outcome, SharedHeaders};
    /// let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    /// exchange.annotations().insert("x-cache-status", "miss".parse()?)?;
    /// let committed = exchange.commit(Outcome::Answered)?;
    /// assert_eq!(committed.annotations().unwrap()["x-cache-status"], "miss");
    ///
    /// let plain = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    /// assert!(plain.commit(Outcome::Answered)?.annotations().is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn annotations(&self) -> Option<&Snapshot> {
        self.record().annotations.as_ref()
    }

    /// The status the committer knew: the inner response's status ([`Outcome::Answered`]),
    /// the timeout status ([`Outcome::TimedOut`]) or the rejection status
    /// ([`Outcome::Rejected`]) when the server layer committed; `None` for
    /// [`Outcome::Failed`] and [`Outcome::Cancelled`] (no response left the layer; an outer
    /// layer may still have answered, e.g. tower-http's `TimeoutLayer` with its own status),
    /// and for a plain [`Exchange::commit`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Exchange, Outcome, SharedHeaders};
    /// let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    /// assert_eq!(exchange.commit(Outcome::Answered)?.committed_status(), None);
    /// # Ok::<(), shared_headers::AlreadyCommitted>(())
    /// ```
    #[inline]
    pub fn committed_status(&self) -> Option<StatusCode> {
        self.record().status
    }

    /// The time from the creation of the exchange (for the server layer: the call of its
    /// service) to the commit.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Exchange, Outcome, SharedHeaders};
    /// let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    /// std::thread::sleep(std::time::Duration::from_millis(2));
    /// let committed = exchange.commit(Outcome::Answered)?;
    /// assert!(committed.time_to_commit() >= std::time::Duration::from_millis(2));
    /// # Ok::<(), shared_headers::AlreadyCommitted>(())
    /// ```
    #[inline]
    pub fn time_to_commit(&self) -> std::time::Duration {
        self.record().time_to_commit
    }

    /// The request's deadline, set by the server layer: its own
    /// ([`timeout`](crate::server::SharedHeadersLayer::timeout), source
    /// [`DeadlineSource::Server`](crate::deadline::DeadlineSource::Server)) or the caller's budget when
    /// that was earlier ([`caller_budget`](crate::server::SharedHeadersLayer::caller_budget),
    /// source [`DeadlineSource::Caller`](crate::deadline::DeadlineSource::Caller)); `None` without
    /// either. The budget given is `deadline.instant() - start`, the budget used is
    /// [`time_to_commit`](Self::time_to_commit).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Exchange, Outcome, SharedHeaders};
    /// let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    /// assert!(exchange.commit(Outcome::Answered)?.deadline().is_none());
    /// # Ok::<(), shared_headers::AlreadyCommitted>(())
    /// ```
    #[inline]
    pub fn deadline(&self) -> Option<crate::deadline::Deadline> {
        self.inner.line.as_ref().and_then(|line| line.deadline)
    }

    /// The budget the request was given: from the call of the layer's service to its
    /// [`deadline`](Self::deadline).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Exchange, Outcome, SharedHeaders};
    /// let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    /// assert!(exchange.commit(Outcome::Answered)?.budget().is_none());
    /// # Ok::<(), shared_headers::AlreadyCommitted>(())
    /// ```
    #[inline]
    pub fn budget(&self) -> Option<Duration> {
        self.deadline().map(|deadline| {
            deadline
                .instant()
                .saturating_duration_since(self.inner.started)
        })
    }

    /// The request's method, as received; `None` for an exchange the server layer did not
    /// make ([`Exchange::new`]). OpenTelemetry's normalized method is
    /// [`ResponseEnd::otel_method`](crate::server::ResponseEnd::otel_method).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Exchange, Outcome, SharedHeaders};
    /// let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    /// assert!(exchange.commit(Outcome::Answered)?.method().is_none()); // not the layer's
    /// # Ok::<(), shared_headers::AlreadyCommitted>(())
    /// ```
    #[inline]
    pub fn method(&self) -> Option<&Method> {
        self.line().map(|line| &line.method)
    }

    /// The request's URI, as received: **with its secrets** (userinfo, query, path
    /// parameters); the printers' redacted forms are
    /// [`ResponseEnd::url_path`](crate::server::ResponseEnd::url_path) and
    /// [`ResponseEnd::url_query`](crate::server::ResponseEnd::url_query). `None` for an
    /// exchange the server layer did not make.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::CommitHooks;
    /// let hooks = CommitHooks::new().on_commit(|event| {
    ///     println!("{:?}", event.committed().uri().map(|uri| uri.path().to_owned()));
    /// });
    /// # drop(hooks);
    /// ```
    #[inline]
    pub fn uri(&self) -> Option<&Uri> {
        self.line().map(|line| &line.uri)
    }

    /// The request's HTTP version (`network.protocol.version`); `None` for an exchange the
    /// server layer did not make.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::CommitHooks;
    /// let hooks = CommitHooks::new().on_commit(|event| println!("{:?}", event.committed().version()));
    /// # drop(hooks);
    /// ```
    #[inline]
    pub fn version(&self) -> Option<Version> {
        self.line().map(|line| line.version)
    }

    /// The client's address and port (`client.address`, `client.port`), where the layer was
    /// told where to find it
    /// ([`SharedHeadersLayer::peer_address`](crate::server::SharedHeadersLayer::peer_address));
    /// `None` otherwise.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::CommitHooks;
    /// let hooks =
    ///     CommitHooks::new().on_commit(|event| println!("{:?}", event.committed().peer_address()));
    /// # drop(hooks);
    /// ```
    #[inline]
    pub fn peer_address(&self) -> Option<std::net::SocketAddr> {
        self.line().and_then(|line| line.peer)
    }

    /// Why the caller's budget header was refused (malformed or absurd: the layer's own
    /// deadline applied instead), if it was.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::CommitHooks;
    /// let hooks = CommitHooks::new().on_commit(|event| {
    ///     if let Some(error) = event.committed().budget_error() {
    ///         eprintln!("refused budget: {error}");
    ///     }
    /// });
    /// # drop(hooks);
    /// ```
    #[inline]
    pub fn budget_error(&self) -> Option<crate::deadline::BudgetError> {
        self.line().and_then(|line| line.budget_error)
    }

    /// What the layer that made the exchange recorded of its request (its public view is
    /// the accessors above); `None` for an [`Exchange::new`].
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    #[inline]
    pub(crate) fn line(&self) -> Option<&Line> {
        self.inner.line.as_ref()
    }

    /// The request's context (its id and the headers it propagates), when the server layer
    /// propagates any ([`SharedHeadersLayer::propagate`](crate::server::SharedHeadersLayer::propagate)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Exchange, Outcome, SharedHeaders};
    /// let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    /// assert!(exchange.commit(Outcome::Answered)?.context().is_none());
    /// # Ok::<(), shared_headers::AlreadyCommitted>(())
    /// ```
    #[inline]
    pub fn context(&self) -> Option<&crate::context::RequestContext> {
        self.inner.context.as_ref()
    }

    /// The request id (taken from the request when valid, else generated), when the server
    /// layer has one configured.
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(crate) fn request_id(&self) -> Option<&str> {
        self.context()?.request_id()
    }
}

mod late_writes;
pub use late_writes::LateWrites;
