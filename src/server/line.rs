//! The request line of a request the layer served ([`RequestLine`]): its method, URI, version,
//! peer, and the refusal of its caller's budget, read from the commit's record.

use std::fmt;
use std::net::SocketAddr;

use http::{Method, Uri, Version};

use crate::deadline::BudgetError;
use crate::exchange::{Committed, Line, LinePrinter};

/// The request line of a request the server layer served: what the layer saw of the request
/// when its service was called. A view of the commit's record ([`Committed`]); an exchange
/// made without the layer ([`Exchange::new`](crate::Exchange::new)) has none.
///
/// # Examples
///
/// ```
/// use shared_headers::server::{RequestLine, SharedHeadersLayer};
///
/// let layer = SharedHeadersLayer::new().on_commit(|event| {
///     if let Some(line) = RequestLine::of(event.committed()) {
///         println!("{} {} {:?}", line.method(), line.uri(), line.version());
///     }
/// });
/// # drop(layer);
/// ```
///
/// Its `Debug` (and the record's, which prints it) never prints a secret of the URI: its
/// userinfo is `[redacted]@`, its query is `?[redacted]` whole (a `Debug` does not know which
/// access log's rules apply), and with feature `tracing` the values of its credential path
/// parameters (`;jsessionid=`) are redacted by the access line's rule
/// ([`AccessLog::CREDENTIAL_PARAMS`](super::access_log::AccessLog::CREDENTIAL_PARAMS)).
#[derive(Clone, Copy)]
pub struct RequestLine<'a> {
    line: &'a Line,
}

/// How the layer's lines are printed without the access line's rule (feature `tracing`
/// off): the whole query redacted. With it, the access log gives its own printer
/// (`access_log::LINE_PRINTER`, through [`debug_line`]): this floor names nothing above it.
#[cfg_attr(feature = "tracing", allow(dead_code))]
pub(super) const PRINTER: LinePrinter = LinePrinter(|line, f| {
    debug_line(line, f, |f, path, query| {
        f.write_str(path)?;
        match query {
            Some(_) => f.write_str("?[redacted]"),
            None => Ok(()),
        }
    })
});

/// Writes a request's path and query (after `?`) without their secrets.
pub(super) type WritePathAndQuery = fn(&mut fmt::Formatter<'_>, &str, Option<&str>) -> fmt::Result;

impl fmt::Debug for RequestLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (self.line.printer.0)(self.line, f)
    }
}

/// A request line's `Debug`, its path and query written by `path_and_query`.
pub(super) fn debug_line(
    line: &Line,
    f: &mut fmt::Formatter<'_>,
    path_and_query: WritePathAndQuery,
) -> fmt::Result {
    f.debug_struct("RequestLine")
        .field("method", &line.method)
        .field("uri", &UriShown(&line.uri, path_and_query))
        .field("version", &line.version)
        .field("peer", &line.peer)
        .field("deadline", &line.deadline)
        .field("budget_error", &line.budget_error)
        .field("grpc", &line.grpc)
        .field("connect", &line.connect)
        .finish()
}

/// A request's URI without its secrets (see [`RequestLine`]).
struct UriShown<'a>(&'a Uri, WritePathAndQuery);

impl fmt::Debug for UriShown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let uri = self.0;
        if let Some(scheme) = uri.scheme_str() {
            write!(f, "{scheme}://")?;
        }
        if let Some(authority) = uri.authority() {
            match authority.as_str().rsplit_once('@') {
                Some((_, host)) => write!(f, "[redacted]@{host}")?,
                None => f.write_str(authority.as_str())?,
            }
        }
        (self.1)(f, uri.path(), uri.query())
    }
}

impl<'a> RequestLine<'a> {
    /// The request line of the request `committed` records, if the server layer served it.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::{Exchange, Outcome, SharedHeaders};
    /// use shared_headers::server::RequestLine;
    ///
    /// let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    /// let committed = exchange.commit(Outcome::Answered)?;
    /// assert!(RequestLine::of(&committed).is_none()); // not served by the layer
    /// # Ok::<(), shared_headers::AlreadyCommitted>(())
    /// ```
    #[inline]
    pub fn of(committed: &'a Committed) -> Option<Self> {
        committed.line().map(|line| RequestLine { line })
    }

    /// The request's method, as received.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::{RequestLine, SharedHeadersLayer};
    /// let layer = SharedHeadersLayer::new().on_response_end(|end| {
    ///     println!("{:?}", RequestLine::of(end.committed()).map(|line| line.method().clone()));
    /// });
    /// # drop(layer);
    /// ```
    #[inline]
    pub fn method(&self) -> &'a Method {
        &self.line.method
    }

    /// The request's URI, as received.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::{RequestLine, SharedHeadersLayer};
    /// let layer = SharedHeadersLayer::new().on_response_end(|end| {
    ///     println!("{:?}", RequestLine::of(end.committed()).map(|line| line.uri().path().to_owned()));
    /// });
    /// # drop(layer);
    /// ```
    #[inline]
    pub fn uri(&self) -> &'a Uri {
        &self.line.uri
    }

    /// The request's HTTP version.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::{RequestLine, SharedHeadersLayer};
    /// let layer = SharedHeadersLayer::new().on_response_end(|end| {
    ///     println!("{:?}", RequestLine::of(end.committed()).map(|line| line.version()));
    /// });
    /// # drop(layer);
    /// ```
    #[inline]
    pub fn version(&self) -> Version {
        self.line.version
    }

    /// The peer's address, where the layer was told where to find it
    /// ([`SharedHeadersLayer::peer_address`](super::SharedHeadersLayer::peer_address));
    /// `None` otherwise.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::{RequestLine, SharedHeadersLayer};
    /// let layer = SharedHeadersLayer::new().on_response_end(|end| {
    ///     println!("{:?}", RequestLine::of(end.committed()).and_then(|line| line.peer_address()));
    /// });
    /// # drop(layer);
    /// ```
    #[inline]
    pub fn peer_address(&self) -> Option<SocketAddr> {
        self.line.peer
    }

    /// Why the caller's budget header was refused (malformed or absurd: the layer's own
    /// deadline applied instead), if it was.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::{RequestLine, SharedHeadersLayer};
    /// let layer = SharedHeadersLayer::new().on_response_end(|end| {
    ///     if let Some(error) = RequestLine::of(end.committed()).and_then(|line| line.budget_error()) {
    ///         eprintln!("refused budget: {error}");
    ///     }
    /// });
    /// # drop(layer);
    /// ```
    #[inline]
    pub fn budget_error(&self) -> Option<BudgetError> {
        self.line.budget_error
    }

    /// Whether the layer served the request as a gRPC call (`content-type: application/grpc`).
    #[inline]
    pub(crate) fn is_grpc(&self) -> bool {
        self.line.grpc
    }
}

/// The request line's parts read straight from a record, for the server room's own code (the
/// access line, the metrics, the response future): `None` for an exchange the layer did not
/// make.
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) trait LineOf {
    /// The request line, if the layer served the request.
    fn request_line(&self) -> Option<RequestLine<'_>>;

    fn method(&self) -> Option<&Method> {
        self.request_line().map(|line| line.method())
    }

    fn uri(&self) -> Option<&Uri> {
        self.request_line().map(|line| line.uri())
    }

    fn version(&self) -> Option<Version> {
        self.request_line().map(|line| line.version())
    }

    fn peer_address(&self) -> Option<SocketAddr> {
        self.request_line().and_then(|line| line.peer_address())
    }

    fn budget_error(&self) -> Option<BudgetError> {
        self.request_line().and_then(|line| line.budget_error())
    }

    fn is_grpc(&self) -> bool {
        self.request_line().is_some_and(|line| line.is_grpc())
    }
}

impl LineOf for Committed {
    #[inline]
    fn request_line(&self) -> Option<RequestLine<'_>> {
        RequestLine::of(self)
    }
}

impl LineOf for crate::exchange::Exchange {
    #[inline]
    fn request_line(&self) -> Option<RequestLine<'_>> {
        self.line().map(|line| RequestLine { line })
    }
}
