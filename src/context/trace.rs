//! One hop of a W3C trace: this service's span id under the caller's trace, the
//! `traceparent` the calls made for the request send, and the generator of new trace and
//! span ids.
//!
//! With [`Propagation::trace_hop`](super::Propagation::trace_hop), the request's context
//! reads a valid `traceparent` (its trace id, the caller's span id, the flags) and gives this
//! hop a new span id; the calls made in its scope send `traceparent` with the same trace id,
//! this hop's span id as their parent, and the flags (sampled, and W3C level 2's random
//! trace id), with `tracestate` and `baggage` as they came. With no valid `traceparent`, the
//! hop starts a trace: a new random 128-bit trace id (all of it random, so the right-most
//! seven bytes are, as level 2 asks), flags `03` (sampled, random).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use http::{HeaderName, HeaderValue};

use super::RequestContext;

/// `traceparent` flags: sampled.
pub(crate) const SAMPLED: u8 = 0x01;
/// `traceparent` flags: the trace id is random (W3C Trace Context level 2).
pub(crate) const RANDOM: u8 = 0x02;

/// The trace as it came in a valid `traceparent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Incoming {
    pub(crate) trace_id: [u8; 16],
    pub(crate) parent_id: [u8; 8],
    pub(crate) flags: u8,
}

/// What a span made for this hop says it is (the server's OpenTelemetry span): the hop takes
/// its ids instead of new ones, and keeps the span until the request ends.
pub(crate) struct Started {
    pub(crate) trace_id: [u8; 16],
    pub(crate) span_id: [u8; 8],
    pub(crate) flags: u8,
    pub(crate) span: Box<dyn std::any::Any + Send>,
}

/// Makes the span of a hop from the trace that came (`None`: a new trace); `None` back: the
/// hop makes its own ids.
pub(crate) type StartSpan<'a> = &'a dyn Fn(Option<&Incoming>) -> Option<Started>;

/// This hop of the trace: kept in the request's context.
pub(crate) struct Hop {
    /// The `traceparent` the calls made for the request send: `00-{trace}-{span}-{flags}`.
    traceparent: HeaderValue,
    /// The caller's span id (hex), when a valid `traceparent` came.
    parent: Option<[u8; 16]>,
    flags: u8,
    /// The span a [`StartSpan`] made, until the end of the request takes it.
    span: Option<std::sync::Mutex<Option<Box<dyn std::any::Any + Send>>>>,
}

impl Hop {
    fn text(&self) -> &str {
        // Made of hex digits and dashes here: always a `str`.
        self.traceparent.to_str().unwrap_or("")
    }
}

const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");

/// The key of the ids: SipHash-1-3 keyed with 128 bits from the OS (`RandomState`), drawn
/// once per process.
fn key() -> &'static RandomState {
    static KEY: OnceLock<RandomState> = OnceLock::new();
    KEY.get_or_init(RandomState::new)
}

/// 64 bits nobody can predict: the keyed hash of a process-wide counter (one atomic add, one
/// short hash; no lock, no system call). Without the key, no output says anything about
/// another.
fn draw() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut hasher = key().build_hasher();
    hasher.write_u64(n);
    hasher.finish()
}

/// A new span id: 8 random bytes, never all zero (W3C).
pub(crate) fn new_span_id() -> [u8; 8] {
    loop {
        let id = draw();
        if id != 0 {
            return id.to_be_bytes();
        }
    }
}

/// A new trace id: 16 random bytes, never all zero (W3C).
pub(crate) fn new_trace_id() -> [u8; 16] {
    loop {
        let id = (u128::from(draw()) << 64) | u128::from(draw());
        if id != 0 {
            return id.to_be_bytes();
        }
    }
}

fn hex_into(bytes: &[u8], out: &mut [u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (pair, byte) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = DIGITS[usize::from(byte >> 4)];
        pair[1] = DIGITS[usize::from(byte & 0xf)];
    }
}

fn unhex<const N: usize>(text: &[u8]) -> Option<[u8; N]> {
    if text.len() != 2 * N {
        return None;
    }
    let digit = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; N];
    for (byte, pair) in out.iter_mut().zip(text.chunks_exact(2)) {
        *byte = (digit(pair[0])? << 4) | digit(pair[1])?;
    }
    Some(out)
}

/// The trace in a `traceparent` that passed the propagation's check (any version: its first
/// 55 bytes are version 00's fields).
pub(crate) fn parse(value: &[u8]) -> Option<Incoming> {
    if value.len() < 55 {
        return None;
    }
    Some(Incoming {
        trace_id: unhex(&value[3..35])?,
        parent_id: unhex(&value[36..52])?,
        flags: unhex::<1>(&value[53..55])?[0],
    })
    .filter(|incoming| incoming.trace_id != [0; 16] && incoming.parent_id != [0; 8])
}

/// `00-{trace}-{span}-{flags}`.
pub(crate) fn traceparent(trace_id: &[u8; 16], span_id: &[u8; 8], flags: u8) -> HeaderValue {
    let mut text = *b"00-00000000000000000000000000000000-0000000000000000-00";
    hex_into(trace_id, &mut text[3..35]);
    hex_into(span_id, &mut text[36..52]);
    hex_into(&[flags], &mut text[53..55]);
    HeaderValue::from_bytes(&text).expect("hex digits and dashes are a valid header value")
}

/// Makes this hop from the captured values: reads their `traceparent` (valid, as it passed
/// its check), gives the hop a span id (`start`'s span's, else a new one), and puts the
/// hop's `traceparent` in the first place of `captured` (the order of the propagation).
pub(crate) fn hop(captured: &mut Vec<(HeaderName, HeaderValue)>, start: Option<StartSpan>) -> Hop {
    let at = captured.iter().position(|(name, _)| *name == TRACEPARENT);
    let incoming = at.and_then(|at| parse(captured[at].1.as_bytes()));
    if at.is_some() && incoming.is_none() {
        // Checked as valid, yet not read: cannot happen; the hop starts a trace then.
        captured.retain(|(name, _)| *name != TRACEPARENT && name.as_str() != "tracestate");
    }
    let started = start.and_then(|start| start(incoming.as_ref()));
    let (trace_id, span_id, flags, span) = match (started, &incoming) {
        (Some(started), _) => (
            started.trace_id,
            started.span_id,
            started.flags,
            Some(started.span),
        ),
        // Version 00's flags only: sampled, random (W3C: other bits are not passed on).
        (None, Some(incoming)) => (
            incoming.trace_id,
            new_span_id(),
            incoming.flags & (SAMPLED | RANDOM),
            None,
        ),
        (None, None) => (new_trace_id(), new_span_id(), SAMPLED | RANDOM, None),
    };
    let value = traceparent(&trace_id, &span_id, flags);
    match captured.iter_mut().find(|(name, _)| *name == TRACEPARENT) {
        Some((_, sent)) => *sent = value.clone(),
        None => captured.insert(0, (TRACEPARENT, value.clone())),
    }
    let parent = incoming.map(|incoming| {
        let mut hex = [0u8; 16];
        hex_into(&incoming.parent_id, &mut hex);
        hex
    });
    Hop {
        traceparent: value,
        parent,
        flags,
        span: span.map(|span| std::sync::Mutex::new(Some(span))),
    }
}

impl RequestContext {
    /// The trace id of this hop (32 lowercase hex digits): the caller's, or a new one when no
    /// valid `traceparent` came. `None` unless the propagation makes a hop
    /// ([`Propagation::trace_hop`](super::Propagation::trace_hop)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::Propagation;
    /// let mut incoming = http::HeaderMap::new();
    /// incoming.insert("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".parse()?);
    /// let (context, _) = Propagation::new().trace_hop().capture(&incoming);
    /// assert_eq!(context.unwrap().trace_id(), Some("4bf92f3577b34da6a3ce929d0e0e4736"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn trace_id(&self) -> Option<&str> {
        self.inner.hop.as_ref().map(|hop| &hop.text()[3..35])
    }

    /// This hop's span id (16 lowercase hex digits): new for each request, the parent of the
    /// calls made in its scope. `None` unless the propagation makes a hop.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::Propagation;
    /// let mut incoming = http::HeaderMap::new();
    /// incoming.insert("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".parse()?);
    /// let (context, _) = Propagation::new().trace_hop().capture(&incoming);
    /// let context = context.unwrap();
    /// assert_ne!(context.span_id(), Some("00f067aa0ba902b7")); // a new one
    /// assert_eq!(context.parent_span_id(), Some("00f067aa0ba902b7")); // the caller's
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn span_id(&self) -> Option<&str> {
        self.inner.hop.as_ref().map(|hop| &hop.text()[36..52])
    }

    /// The caller's span id, when a valid `traceparent` came (`None` for a new trace).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::Propagation;
    /// let (context, _) = Propagation::new().trace_hop().capture(&http::HeaderMap::new());
    /// let context = context.unwrap();
    /// assert_eq!(context.parent_span_id(), None); // a new trace
    /// assert_eq!(context.trace_id().unwrap().len(), 32);
    /// ```
    pub fn parent_span_id(&self) -> Option<&str> {
        let hex = self.inner.hop.as_ref()?.parent.as_ref()?;
        std::str::from_utf8(hex).ok()
    }

    /// Whether the trace is sampled (`traceparent`'s flag: the caller's, or set for a new
    /// trace). `None` unless the propagation makes a hop.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::context::Propagation;
    /// let mut incoming = http::HeaderMap::new();
    /// incoming.insert("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00".parse()?);
    /// let (context, _) = Propagation::new().trace_hop().capture(&incoming);
    /// assert_eq!(context.unwrap().sampled(), Some(false));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sampled(&self) -> Option<bool> {
        Some(self.inner.hop.as_ref()?.flags & SAMPLED != 0)
    }

    /// The `traceparent` captured as it came, when the propagation makes no hop (it is
    /// forwarded as it came): checked valid by the propagation.
    #[cfg_attr(
        not(any(
            all(feature = "client", feature = "opentelemetry"),
            feature = "tracing"
        )),
        allow(dead_code)
    )]
    pub(crate) fn incoming_traceparent(&self) -> Option<&HeaderValue> {
        if self.inner.hop.is_some() {
            return None;
        }
        let (_, value) = self
            .inner
            .headers
            .iter()
            .find(|(name, _)| *name == TRACEPARENT)?;
        Some(value)
    }

    /// The caller's trace as it came in [`incoming_traceparent`](Self::incoming_traceparent).
    #[cfg_attr(
        not(all(feature = "client", feature = "opentelemetry")),
        allow(dead_code)
    )]
    pub(crate) fn incoming_trace(&self) -> Option<Incoming> {
        parse(self.incoming_traceparent()?.as_bytes())
    }

    /// The trace id (32 lowercase hex digits) the request is part of: the hop's
    /// ([`trace_id`](Self::trace_id)), else the caller's, in a valid `traceparent` forwarded
    /// as it came.
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(crate) fn known_trace_id(&self) -> Option<&str> {
        if let Some(trace_id) = self.trace_id() {
            return Some(trace_id);
        }
        let value = self.incoming_traceparent()?;
        parse(value.as_bytes())?;
        value.to_str().ok()?.get(3..35)
    }

    /// The hop's ids as bytes: trace id, span id, flags.
    #[cfg_attr(
        not(all(feature = "client", feature = "opentelemetry")),
        allow(dead_code)
    )]
    pub(crate) fn hop_ids(&self) -> Option<([u8; 16], [u8; 8], u8)> {
        let hop = self.inner.hop.as_ref()?;
        let text = hop.text().as_bytes();
        Some((unhex(&text[3..35])?, unhex(&text[36..52])?, hop.flags))
    }

    /// Takes the span a [`StartSpan`] made for this hop (once: `None` after).
    #[cfg_attr(not(feature = "opentelemetry"), allow(dead_code))]
    pub(crate) fn take_span(&self) -> Option<Box<dyn std::any::Any + Send>> {
        let slot = self.inner.hop.as_ref()?.span.as_ref()?;
        match slot.lock() {
            Ok(mut span) => span.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_distinct_nonzero_and_spread() {
        let traces: std::collections::HashSet<_> = (0..1000).map(|_| new_trace_id()).collect();
        assert_eq!(traces.len(), 1000);
        let spans: std::collections::HashSet<_> = (0..1000).map(|_| new_span_id()).collect();
        assert_eq!(spans.len(), 1000);
        // The right-most seven bytes of trace ids are random (W3C level 2): every byte
        // position takes many values over the sample (by chance fewer than 200 of 256 in
        // 1,000 draws: below 1e-30).
        for position in 9..16 {
            let values: std::collections::HashSet<u8> =
                traces.iter().map(|id| id[position]).collect();
            assert!(values.len() >= 200, "byte {position}: {}", values.len());
        }
    }

    #[test]
    fn traceparent_round_trips() {
        let (trace, span) = (new_trace_id(), new_span_id());
        let value = traceparent(&trace, &span, 1);
        let incoming = parse(value.as_bytes()).unwrap();
        assert_eq!(incoming.trace_id, trace);
        assert_eq!(incoming.parent_id, span);
        assert_eq!(incoming.flags, 1);
        assert!(parse(b"00-00000000000000000000000000000000-00f067aa0ba902b7-01").is_none());
        assert!(parse(b"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01").is_none());
    }
}
