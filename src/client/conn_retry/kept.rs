//! The copy of a request kept for a resend: its head (the headers inline when few) and its
//! body, if it can be replayed.

use http::{Extensions, HeaderMap, HeaderName, HeaderValue, Method, Request, Uri, Version};

use super::Slot;
use crate::client::replay::ReplayBody;

/// How many header values a kept head holds without a header map (a map's copy is two
/// allocations, its index and its entries; these are moved into one when a resend is built).
pub(super) const FEW: usize = 2;

/// The headers a kept head holds: none, up to [`FEW`] values inline, or a copy of the map.
pub(super) enum Headers {
    None,
    Few([Option<(HeaderName, HeaderValue)>; FEW]),
    Map(HeaderMap),
}

impl Headers {
    /// A copy of `headers`: a reference count per name and value (an allocation for one whose
    /// bytes were copied in, on its first copy, as `Bytes` does), and a map only past [`FEW`].
    #[inline]
    pub(super) fn of(headers: &HeaderMap) -> Self {
        if headers.is_empty() {
            Headers::None
        } else {
            Headers::copy(headers)
        }
    }

    /// The copy of a non-empty map, out of the way of a request without headers.
    #[inline(never)]
    pub(super) fn copy(headers: &HeaderMap) -> Self {
        if headers.len() > FEW {
            return Headers::Map(headers.clone());
        }
        let mut few: [Option<(HeaderName, HeaderValue)>; FEW] = Default::default();
        for (at, (name, value)) in few.iter_mut().zip(headers) {
            *at = Some((name.clone(), value.clone()));
        }
        Headers::Few(few)
    }

    /// The map (built from the inline values the first time: a resend's rare path).
    pub(super) fn map(&mut self) -> &mut HeaderMap {
        if !matches!(self, Headers::Map(_)) {
            let mut map = HeaderMap::new();
            if let Headers::Few(few) = self {
                for (name, value) in few.iter_mut().filter_map(Option::take) {
                    map.append(name, value);
                }
            }
            *self = Headers::Map(map);
        }
        match self {
            Headers::Map(map) => map,
            _ => unreachable!("just made a map"),
        }
    }

    /// A copy of the map (`None`: no headers).
    pub(super) fn to_map(&self) -> Option<HeaderMap> {
        match self {
            Headers::None => None,
            Headers::Map(map) => Some(map.clone()),
            Headers::Few(few) => {
                let mut map = HeaderMap::new();
                for (name, value) in few.iter().flatten() {
                    map.append(name.clone(), value.clone());
                }
                Some(map)
            }
        }
    }

    /// The map, given up.
    pub(super) fn into_map(mut self) -> Option<HeaderMap> {
        match self {
            Headers::None => None,
            _ => Some(std::mem::take(self.map())),
        }
    }
}

/// The body a kept head resends with: a replay of the first send's, or (a tonic message
/// stream) the one taken back, built only when a resend needs it.
pub(super) struct KeptBody<B>(pub(super) Option<B>);

impl<B: 'static> KeptBody<B> {
    /// The body for the last send.
    #[cfg_attr(not(feature = "tonic"), allow(clippy::unnecessary_wraps))]
    pub(super) fn take_or(self, slot: Option<&Slot>) -> Option<B> {
        #[cfg(feature = "tonic")]
        if self.0.is_none() {
            return super::take_back::resend_body(slot?);
        }
        #[cfg(not(feature = "tonic"))]
        let _ = slot;
        self.0
    }
}

/// The request kept for a resend: its head and its body's replay.
pub(super) struct Kept<B> {
    pub(super) method: Method,
    pub(super) uri: Uri,
    pub(super) version: Version,
    pub(super) headers: Headers,
    pub(super) extensions: Extensions,
    pub(super) body: KeptBody<B>,
}

impl<B> Kept<B> {
    /// A copy of `request`'s head, with `body`.
    #[inline]
    pub(super) fn head(request: &Request<B>, body: Option<B>) -> Self {
        Kept {
            method: request.method().clone(),
            uri: request.uri().clone(),
            version: request.version(),
            headers: Headers::of(request.headers()),
            extensions: if request.extensions().is_empty() {
                Extensions::new()
            } else {
                request.extensions().clone()
            },
            body: KeptBody(body),
        }
    }

    /// The headers, to rewrite the budget in.
    pub(super) fn headers_mut(&mut self) -> &mut HeaderMap {
        self.headers.map()
    }

    /// The request with `body`, the copy given up (the last send).
    pub(super) fn into_request<C>(self, body: C) -> Request<C> {
        let mut request = Request::new(body);
        *request.method_mut() = self.method;
        *request.uri_mut() = self.uri;
        *request.version_mut() = self.version;
        if let Some(headers) = self.headers.into_map() {
            *request.headers_mut() = headers;
        }
        *request.extensions_mut() = self.extensions;
        request
    }
}

impl<B: ReplayBody> Kept<B> {
    /// A copy of `request`, if its body can be replayed.
    #[inline]
    pub(super) fn of(request: &Request<B>) -> Option<Self> {
        let body = request.body().try_replay()?;
        Some(Kept::head(request, Some(body)))
    }

    /// A request from the copy, the copy kept (`None`: the body cannot be replayed again).
    pub(super) fn request(&self) -> Option<Request<B>> {
        let mut request = Request::new(self.body.0.as_ref()?.try_replay()?);
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = self.uri.clone();
        *request.version_mut() = self.version;
        if let Some(headers) = self.headers.to_map() {
            *request.headers_mut() = headers;
        }
        *request.extensions_mut() = self.extensions.clone();
        Some(request)
    }
}
