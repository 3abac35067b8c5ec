//! Request bodies that can be sent twice, for [`RefreshRetry`](crate::client::RefreshRetry).

use std::borrow::Cow;

use http::Request;
use http_body_util::{Either, Empty, Full};

/// A request body that [`RefreshRetry`](crate::client::RefreshRetry) can send a second time.
///
/// [`try_replay`](Self::try_replay) returns a copy of the body as it was before the first send,
/// or `None` if the body cannot be replayed (a stream read from a socket or a file): such a
/// request is sent once and its response, `401` or not, is returned as it is.
///
/// Implemented for the bodies that hold their bytes: [`Full`], [`Empty`], `()`, [`String`],
/// `Vec<u8>`, `&'static str`, `&'static [u8]` and `Cow<'static, str>`, and for
/// [`Either`] of two replayable bodies (replayable when the side in use is). Boxed bodies
/// ([`BoxBody`](http_body_util::combinators::BoxBody)) and `hyper::body::Incoming` are streams
/// and have no implementation, so a service taking them cannot be wrapped.
///
/// **To make a body replayable**, send its bytes in a [`Full<Bytes>`](Full) (cloning one is a
/// reference-count increment), or use `Either<Full<Bytes>, YourStream>` when only some requests
/// stream, with `impl ReplayBody for YourStream` returning `None`. For a type of your own that
/// holds its bytes, return a clone:
///
/// ```
/// use shared_headers::client::ReplayBody;
///
/// #[derive(Clone)]
/// struct JsonBody(bytes::Bytes);
///
/// impl ReplayBody for JsonBody {
///     fn try_replay(&self) -> Option<Self> {
///         Some(self.clone())
///     }
/// }
///
/// /// A stream read from elsewhere: sent once, never retried.
/// struct Upload;
///
/// impl ReplayBody for Upload {
///     fn try_replay(&self) -> Option<Self> {
///         None
///     }
/// }
///
/// assert!(JsonBody(bytes::Bytes::from_static(b"{}")).try_replay().is_some());
/// assert!(Upload.try_replay().is_none());
/// ```
pub trait ReplayBody: Sized {
    /// A copy of this body to send again, or `None` if it cannot be sent again.
    ///
    /// # Examples
    ///
    /// ```
    /// use http_body_util::Full;
    /// use shared_headers::client::ReplayBody;
    ///
    /// let body = Full::new(bytes::Bytes::from_static(b"hello"));
    /// assert!(body.try_replay().is_some());
    /// assert_eq!(String::from("x").try_replay().as_deref(), Some("x"));
    /// ```
    fn try_replay(&self) -> Option<Self>;
}

impl<D: Clone> ReplayBody for Full<D> {
    fn try_replay(&self) -> Option<Self> {
        Some(self.clone())
    }
}

impl<D> ReplayBody for Empty<D> {
    fn try_replay(&self) -> Option<Self> {
        Some(*self)
    }
}

impl<L: ReplayBody, R: ReplayBody> ReplayBody for Either<L, R> {
    fn try_replay(&self) -> Option<Self> {
        match self {
            Either::Left(left) => left.try_replay().map(Either::Left),
            Either::Right(right) => right.try_replay().map(Either::Right),
        }
    }
}

macro_rules! replay_by_clone {
    ($($body:ty),* $(,)?) => {$(
        impl ReplayBody for $body {
            fn try_replay(&self) -> Option<Self> {
                Some(self.clone())
            }
        }
    )*};
}

replay_by_clone!(
    (),
    String,
    Vec<u8>,
    &'static str,
    &'static [u8],
    Cow<'static, str>,
);

/// tonic's body: an empty one (a `GET` through a `Channel`, a request with no message) is
/// replayed as empty; any other is a stream, sent once (feature `tonic`).
#[cfg(feature = "tonic")]
impl ReplayBody for tonic::body::Body {
    fn try_replay(&self) -> Option<Self> {
        http_body::Body::is_end_stream(self).then(tonic::body::Body::empty)
    }
}

/// A copy of `request` to send again: method, URI, version, headers, extensions and a replayed
/// body; `None` if the body cannot be replayed. (`http::Request` is not `Clone`.)
pub(crate) fn replay<B: ReplayBody>(request: &Request<B>) -> Option<Request<B>> {
    let mut again = Request::new(request.body().try_replay()?);
    *again.method_mut() = request.method().clone();
    *again.uri_mut() = request.uri().clone();
    *again.version_mut() = request.version();
    // An empty map or set is left as `Request::new` made it (no clone of the empty tables).
    if !request.headers().is_empty() {
        *again.headers_mut() = request.headers().clone();
    }
    if !request.extensions().is_empty() {
        *again.extensions_mut() = request.extensions().clone();
    }
    Some(again)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_copies_every_part_of_the_request() {
        let mut request = Request::post("http://example.com/a?b")
            .version(http::Version::HTTP_2)
            .header("x-a", "1")
            .body(String::from("body"))
            .unwrap();
        request.extensions_mut().insert(7u32);
        let again = replay(&request).unwrap();
        assert_eq!(again.method(), http::Method::POST);
        assert_eq!(again.uri(), "http://example.com/a?b");
        assert_eq!(again.version(), http::Version::HTTP_2);
        assert_eq!(again.headers()["x-a"], "1");
        assert_eq!(again.extensions().get::<u32>(), Some(&7));
        assert_eq!(again.body(), "body");
    }

    struct Stream;
    impl ReplayBody for Stream {
        fn try_replay(&self) -> Option<Self> {
            None
        }
    }

    #[test]
    fn a_stream_is_not_replayed_even_inside_either() {
        assert!(replay(&Request::new(Stream)).is_none());
        let left: Either<Full<&'static [u8]>, Stream> = Either::Left(Full::new(b"x"));
        assert!(left.try_replay().is_some());
        let right: Either<Full<&'static [u8]>, Stream> = Either::Right(Stream);
        assert!(right.try_replay().is_none());
    }
}
