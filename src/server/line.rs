//! The request line of a request the layer served ([`RequestLine`]): its method, URI, version,
//! peer, and the refusal of its caller's budget, read from the commit's record.

use std::fmt;
use std::net::SocketAddr;

use http::{Method, Uri, Version};

use std::borrow::Cow;

use http::HeaderValue;

use crate::deadline::BudgetError;
use crate::exchange::{Committed, Line};

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
/// names a log adds to the rule), and the values of its credential path parameters
/// (`;jsessionid=`) are redacted by the crate's one rule, the one every printer asks.
#[derive(Clone, Copy)]
pub struct RequestLine<'a> {
    line: &'a Line,
}

impl fmt::Debug for RequestLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.line, f)
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

/// The server's host and port as every printer shows them (the access line, the server span):
/// the URI's authority (HTTP/2's `:authority`, an absolute-form target), else the `host`
/// header; neither when `host` is secret (`host_secret`: the authority is the host header's
/// value by another name). The host escaped as request text is (printable ASCII, the rest
/// percent-encoded), without userinfo; the port only when it is not `scheme`'s default
/// (OpenTelemetry's rule).
#[cfg_attr(
    not(any(feature = "tracing", feature = "opentelemetry")),
    allow(dead_code)
)]
pub(crate) fn server_address<'a>(
    uri: &'a Uri,
    host: Option<&'a HeaderValue>,
    host_secret: bool,
    scheme: &str,
) -> Option<(Cow<'a, str>, Option<u16>)> {
    if host_secret {
        return None;
    }
    let authority = match uri.authority() {
        Some(authority) => authority.as_str(),
        None => std::str::from_utf8(host?.as_bytes()).ok()?,
    };
    let (host, port) = split_authority(authority)?;
    let default = match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    };
    Some((
        crate::redact::escape::text_str(host),
        port.filter(|p| Some(*p) != default),
    ))
}

pub(crate) use crate::semconv::split_authority;
