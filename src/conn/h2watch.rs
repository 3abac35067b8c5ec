//! HTTP/2 frame awareness for [`HealthIo`](super::HealthIo): telling a server that answers pings
//! but never a request from a server that is only slower than the caller's deadline.
//!
//! Up to the caller's deadline both put the same bytes on the wire. At the deadline the client
//! drops the response and h2 writes `RST_STREAM(CANCEL)`, after which the slow server's answer
//! can no longer come. So the connection's I/O holds that frame back ("hold-back") when all of
//! these hold:
//!
//! * the request was sent whole (`END_STREAM` written: a server may rightly wait for the rest of
//!   a body before it answers, so a reset mid-body proves nothing);
//! * the stream has had no response `HEADERS`, and no frame of any stream arrived from the
//!   server since the stream opened ("quiet"). Any frame of a stream (`HEADERS`, `DATA`,
//!   `WINDOW_UPDATE` of a server reading an upload, `RST_STREAM`, ...) settles that the server
//!   serves requests; connection-level frames (stream 0: `PING`, `SETTINGS`, `WINDOW_UPDATE`,
//!   `GOAWAY`) do not, as a server sends its first ones before it reads a request;
//! * no stream the server answered is still open (a server stream quiet between its events:
//!   the server shows it serves this connection, and quiet is normal there);
//! * fewer than [`MAX_HELD`] are held, and the streams the server counts as open (held ones
//!   included) are at most half its `SETTINGS_MAX_CONCURRENT_STREAMS` (100 until its `SETTINGS`
//!   come). They are counted exactly: open streams older than the 128 newest are kept on the
//!   side (8 of them; past that the count is unknown and nothing more is held). Before a new
//!   stream's `HEADERS` that would bring them to the limit, the held resets go out first, so
//!   a hold never makes the server refuse a stream;
//! * fewer than [`LATE_BUDGET`] late frames were counted on the connection: every frame of a
//!   stream whose reset was held (held or released, until the server ends or resets it), and
//!   of a client stream out of the table not known open.
//!
//! Meanwhile the incoming frame headers are watched (no byte is changed, so HPACK stays in sync):
//!
//! * a frame of any stream arrives: the server is alive; the held frames go out at
//!   the next frame boundary of the outgoing bytes outside a header block (never between a
//!   `HEADERS` and its `CONTINUATION`), or are dropped once their stream is closed both ways
//!   (the answer's `END_STREAM` after the request's), or once the server reset it;
//! * a held reset [`RELEASE_BY`] old goes out (h2 is about to forget its stream), but for one
//!   kept as the witness;
//! * a held stream is [`WINDOW`] old (counted from its opening, so a caller's deadline shorter
//!   or longer than the window changes nothing) and held for at least [`MIN_HELD`], and nothing
//!   arrived: the connection is dead ([`Cause::HealthCheck`](super::Cause)).
//!
//! [`next_due`](Watch::next_due) says when the next of these is due: the connection sets a
//! timer for it, so an idle connection is judged on time.
//!
//! A quiet stream nobody cancelled is never judged: a long poll looks the same.
//!
//! h2 (0.4) keeps a locally reset stream for 1 s (`reset_stream_duration`, at most 50 of them)
//! and ignores its late frames, returning their flow-control capacity to the connection; after
//! that it answers them with a stream error (`RST_STREAM(STREAM_CLOSED)`) that counts against
//! its `max_local_error_reset_streams` (1,024 per connection), past which it closes the
//! connection (`GOAWAY(ENHANCE_YOUR_CALM)`): hence the release at [`RELEASE_BY`] and the
//! [`LATE_BUDGET`]. h2's second starts when it resets the stream (when the watch holds the
//! frame), so on a link whose round trip exceeds 1 s less [`RELEASE_BY`] a released stream's
//! answer may come after h2 forgot it too: the budget counts every frame of every stream the
//! watch held.
//!
//! The state is owned by the connection's I/O (one task drives it): no atomics. The client
//! preface (`PRI * HTTP/2.0...`) on the first write switches it on; any other first write
//! (HTTP/1.1, TLS records) switches it off for good.

use std::time::Duration;

// tokio's clock, the one its timer (which wakes the connection for `next_due`) keeps: the same
// as the system's unless a test paused it.
use tokio::time::Instant;

/// The HTTP/2 client connection preface.
pub(super) const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// How old a held stream is, from its opening, when it is judged.
pub(super) const WINDOW: Duration = Duration::from_millis(1750);

/// How long a cancelled stream's `RST_STREAM` is held at least before it is judged.
pub(super) const MIN_HELD: Duration = Duration::from_millis(250);

/// At most this many `RST_STREAM` frames held at once.
pub(super) const MAX_HELD: usize = 8;

/// A held reset is released this long after it was held, except the one kept to be judged
/// (the "witness"): h2 forgets a stream it reset 1 s after the reset (`reset_stream_duration`,
/// counted from when the watch held the frame), and answers a frame of a forgotten stream with
/// a reset that counts against its `max_local_error_reset_streams` (1,024 per connection by
/// default). A released stream's answer costs one only if the server sent it before the reset
/// reached it (within this plus the uplink's delay) and it arrived after h2 forgot the stream
/// (1 s after the hold): on a link whose round trip is under 1 s less this, it cannot.
pub(super) const RELEASE_BY: Duration = Duration::from_millis(300);

/// Frames of streams whose reset the watch held (held or released, until the server ends the
/// stream) a connection may receive, each counted as one of h2's 1,024 local error resets it
/// may cost: once this many came, it holds no more resets. The other half is the margin for
/// the frames still on their way on the streams held or released then, and for h2's own.
pub(super) const LATE_BUDGET: u16 = 512;

/// Open streams that fell out of the 128-stream table tracked on the side; more, and the watch
/// no longer knows how many streams are open: it holds no more resets.
const FAR: usize = 8;

/// The read scratch: reads go through it so their frame headers can be seen.
pub(super) const SCRATCH: usize = 16 * 1024;

/// The length of an `RST_STREAM` frame, header included.
pub(super) const RST_LEN: usize = 13;

/// The server's `SETTINGS_MAX_CONCURRENT_STREAMS` assumed until its `SETTINGS` come (h2's).
const DEFAULT_LIMIT: u32 = 100;

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PUSH_PROMISE: u8 = 5;
const CONTINUATION: u8 = 9;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const CANCEL: u32 = 0x8;
const MAX_CONCURRENT_STREAMS: u16 = 0x3;

/// A frame header.
#[derive(Clone, Copy, Debug)]
struct Head {
    len: u32,
    kind: u8,
    flags: u8,
    stream: u32,
}

#[inline(always)]
fn head(bytes: &[u8]) -> Head {
    let bytes: &[u8; 9] = bytes[..9].try_into().expect("a frame header is 9 bytes");
    Head {
        len: u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]),
        kind: bytes[3],
        flags: bytes[4],
        stream: u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]) & 0x7fff_ffff,
    }
}

/// Frame boundaries over one direction's bytes, across partial reads and writes.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Framer {
    hdr: [u8; 9],
    have: u8,
    left: u32,
    /// Inside a header block: a `HEADERS` or `PUSH_PROMISE` without `END_HEADERS` was walked,
    /// and not yet the `CONTINUATION` that ends it.
    block: bool,
}

impl Framer {
    /// At a frame boundary where another frame may go: not inside a header block.
    fn at_boundary(&self) -> bool {
        self.have == 0 && self.left == 0 && !self.block
    }

    #[inline]
    fn enter(&mut self, head: Head) {
        self.left = head.len;
        if matches!(head.kind, HEADERS | PUSH_PROMISE | CONTINUATION) {
            self.block = head.flags & END_HEADERS == 0;
        }
    }

    /// Walks `bytes`. At each frame boundary with bytes left, `stop(state, rest)` may end the
    /// walk there (returns its offset); each completed frame header goes to `on_head`, each
    /// run of payload bytes to `on_payload`.
    #[inline]
    fn walk<S>(
        &mut self,
        bytes: &[u8],
        state: &mut S,
        stop: impl Fn(&S, &[u8]) -> bool,
        on_head: impl Fn(&mut S, Head),
        on_payload: impl Fn(&mut S, &[u8]),
    ) -> Option<usize> {
        let mut i = 0;
        while i < bytes.len() {
            if self.left > 0 {
                let skip = (self.left as usize).min(bytes.len() - i);
                on_payload(state, &bytes[i..i + skip]);
                i += skip;
                self.left -= skip as u32;
                continue;
            }
            let have = usize::from(self.have);
            if have == 0 {
                let rest = &bytes[i..];
                if stop(state, rest) {
                    return Some(i);
                }
                if rest.len() >= 9 {
                    let head = head(rest);
                    i += 9;
                    self.enter(head);
                    on_head(state, head);
                    continue;
                }
            }
            let take = (9 - have).min(bytes.len() - i);
            self.hdr[have..have + take].copy_from_slice(&bytes[i..i + take]);
            self.have += take as u8;
            i += take;
            if self.have == 9 {
                self.have = 0;
                let head = head(&self.hdr);
                self.enter(head);
                on_head(state, head);
            }
        }
        None
    }
}

/// One held `RST_STREAM(CANCEL)`.
#[derive(Clone, Copy, Debug)]
struct Held {
    stream: u32,
    /// When the stream opened.
    opened: Instant,
    /// When its reset was held.
    since: Instant,
    /// The server is alive: send it at the next frame boundary.
    release: bool,
    /// Kept past [`RELEASE_BY`] to be judged (one at most).
    witness: bool,
}

impl Held {
    /// When it is judged: [`WINDOW`] from its opening, [`MIN_HELD`] from its hold.
    fn verdict_at(&self) -> Instant {
        (self.opened + WINDOW).max(self.since + MIN_HELD)
    }
}

/// An open stream that fell out of the table: what is known of it.
#[derive(Clone, Copy, Debug, Default)]
struct Far {
    stream: u32,
    sent_end: bool,
    recv_end: bool,
    answered: bool,
}

/// What the watch knows of the streams. Per-stream bits are for the 128 newest client streams.
#[derive(Debug)]
struct Streams {
    /// The newest stream the client opened.
    newest: u32,
    /// Response `HEADERS` seen.
    answered: u128,
    /// The client sent `END_STREAM`.
    sent_end: u128,
    /// The server sent `END_STREAM`.
    recv_end: u128,
    /// Open as the server counts them: opened, not closed both ways nor reset (a held reset
    /// not yet written leaves it open).
    open: u128,
    /// No frame of a stream arrived since it opened.
    quiet: u128,
    /// When each opened, by bit.
    opened: [Instant; 128],
    /// The server's `SETTINGS_MAX_CONCURRENT_STREAMS`.
    limit: u32,
    /// The incoming frame is a `SETTINGS` (not an ack) being read: its current entry.
    in_settings: bool,
    setting: [u8; 6],
    setting_have: u8,
    held: [Option<Held>; MAX_HELD],
    count: u8,
    /// Open streams older than the table's, as the server counts them.
    far: [Far; FAR],
    far_n: u8,
    /// More open streams fell out of the table than `far` keeps: the count of open streams is
    /// no longer known.
    lost: bool,
    /// The watch held the stream's reset, and the stream is not yet closed from the server's
    /// side (its `END_STREAM` or `RST_STREAM` not yet read): its frames are counted late.
    was_held: u128,
    /// Frames of streams the watch held received ([`LATE_BUDGET`]).
    late: u16,
}

impl Streams {
    /// The bit of client stream `stream`, if it is among the 128 newest opened.
    #[inline]
    fn bit(&self, stream: u32) -> Option<u128> {
        (stream & 1 == 1 && stream <= self.newest && self.newest - stream < 256)
            .then(|| 1u128 << ((stream >> 1) & 127))
    }

    fn held_mut(&mut self, stream: u32) -> Option<&mut Option<Held>> {
        if self.count == 0 {
            return None;
        }
        self.held
            .iter_mut()
            .find(|h| matches!(h, Some(h) if h.stream == stream))
    }

    /// The streams the server counts as open (held ones included), exactly unless `lost`.
    #[inline]
    fn open_n(&self) -> u32 {
        self.open.count_ones() + u32::from(self.far_n)
    }

    /// A stream the server answered is still open (a server stream between its events).
    #[inline]
    fn answered_open(&self) -> bool {
        self.answered & self.open != 0
            || self.far[..usize::from(self.far_n)]
                .iter()
                .any(|f| f.answered)
    }

    /// A frame of `stream`, out of the table: what it says of a far stream.
    #[cold]
    fn far_event(
        &mut self,
        stream: u32,
        sent_end: bool,
        recv_end: bool,
        answered: bool,
        reset: bool,
    ) {
        let n = usize::from(self.far_n);
        let Some(i) = self.far[..n].iter().position(|f| f.stream == stream) else {
            return;
        };
        let far = &mut self.far[i];
        far.sent_end |= sent_end;
        far.recv_end |= recv_end;
        far.answered |= answered;
        if reset || (far.sent_end && far.recv_end) {
            self.far[i] = self.far[n - 1];
            self.far_n -= 1;
        }
    }

    /// Drops the held reset of `stream`, if any.
    fn drop_held(&mut self, stream: u32) {
        if let Some(slot) = self.held_mut(stream) {
            *slot = None;
            self.count -= 1;
        }
    }

    /// Whether the walk stops at `rest`: a frame to hold, or a new stream's `HEADERS` the held
    /// resets must precede.
    #[inline]
    fn stops(&self, rest: &[u8]) -> bool {
        match rest.get(3) {
            Some(&RST_STREAM) => self.holdable(rest),
            Some(&HEADERS) => self.must_release(rest),
            _ => false,
        }
    }

    /// `rest` starts with a new stream's `HEADERS` while resets are held and the streams open
    /// on the server would reach its limit with it.
    #[inline]
    fn must_release(&self, rest: &[u8]) -> bool {
        if self.count == 0 || rest.len() < 9 {
            return false;
        }
        let stream = head(rest).stream;
        stream & 1 == 1 && stream > self.newest && (self.lost || self.open_n() + 1 > self.limit)
    }

    #[inline]
    fn holdable(&self, rest: &[u8]) -> bool {
        if rest.len() < RST_LEN
            || usize::from(self.count) >= MAX_HELD
            || self.lost
            || self.late >= LATE_BUDGET
        {
            return false;
        }
        let head = head(rest);
        if head.kind != RST_STREAM || head.len != 4 {
            return false;
        }
        let code = u32::from_be_bytes([rest[9], rest[10], rest[11], rest[12]]);
        let Some(bit) = self.bit(head.stream) else {
            return false;
        };
        code == CANCEL
            && self.sent_end & bit != 0
            && self.answered & bit == 0
            && self.quiet & bit != 0
            && self.open & bit != 0
            && self.open_n() <= self.limit / 2
            && !self.answered_open()
            && !self
                .held
                .iter()
                .any(|h| matches!(h, Some(h) if h.stream == head.stream))
    }

    #[inline]
    fn on_out(&mut self, head: Head) {
        let end = head.flags & END_STREAM != 0;
        match head.kind {
            HEADERS if head.stream & 1 == 1 && head.stream > self.newest => {
                self.newest = head.stream;
                let index = ((head.stream >> 1) & 127) as usize;
                let bit = 1u128 << index;
                if self.open & bit != 0 {
                    self.evict(head.stream.wrapping_sub(256), bit);
                }
                self.answered &= !bit;
                self.recv_end &= !bit;
                self.was_held &= !bit;
                self.open |= bit;
                self.quiet |= bit;
                self.opened[index] = Instant::now();
                if end {
                    self.sent_end |= bit;
                } else {
                    self.sent_end &= !bit;
                }
            }
            HEADERS | DATA if end => {
                if let Some(bit) = self.bit(head.stream) {
                    self.sent_end |= bit;
                    if self.recv_end & bit != 0 {
                        self.open &= !bit;
                    }
                } else if self.far_n > 0 {
                    self.far_event(head.stream, true, false, false, false);
                }
            }
            RST_STREAM => {
                if let Some(bit) = self.bit(head.stream) {
                    self.open &= !bit;
                } else if self.far_n > 0 {
                    self.far_event(head.stream, false, false, false, true);
                }
                // h2 reset a held stream again (a late frame after it forgot the stream): the
                // held reset would be a second one.
                self.drop_held(head.stream);
            }
            _ => {}
        }
    }

    #[inline]
    fn on_in(&mut self, head: Head) {
        self.in_settings = false;
        if head.stream == 0 {
            // A connection-level frame (`PING`, `SETTINGS`, `WINDOW_UPDATE`, `GOAWAY`): it
            // says the connection is read, not that requests are served (a server sends its
            // first ones before it reads any request).
            if head.kind == SETTINGS && head.flags & ACK == 0 {
                self.in_settings = true;
                self.setting_have = 0;
            }
            return;
        }
        // Any frame of a stream: the server is alive.
        self.quiet = 0;
        if self.was_held != 0 || self.newest > 255 {
            self.count_late(head);
        }
        if self.count > 0 {
            for held in self.held.iter_mut().flatten() {
                held.release = true;
            }
        }
        match head.kind {
            HEADERS | DATA => {
                let Some(bit) = self.bit(head.stream) else {
                    if self.far_n > 0 {
                        let end = head.flags & END_STREAM != 0;
                        self.far_event(head.stream, false, end, head.kind == HEADERS, false);
                    }
                    return;
                };
                if head.kind == HEADERS {
                    self.answered |= bit;
                }
                if head.flags & END_STREAM != 0 {
                    self.recv_end |= bit;
                    if self.sent_end & bit != 0 {
                        // Closed both ways: a reset now would be a frame on a closed stream.
                        self.open &= !bit;
                        self.drop_held(head.stream);
                    }
                }
            }
            RST_STREAM => {
                if let Some(bit) = self.bit(head.stream) {
                    self.open &= !bit;
                } else if self.far_n > 0 {
                    self.far_event(head.stream, false, false, false, true);
                }
                self.drop_held(head.stream);
            }
            _ => {}
        }
    }

    /// A frame of a stream arrived: counted against [`LATE_BUDGET`] if it is of a stream the
    /// watch held (held or released, until the server closes it: h2 may have forgotten it and
    /// answer the frame with a reset of its own), or of a client stream out of the table that
    /// is not known open (it may be such a stream too).
    #[cold]
    fn count_late(&mut self, head: Head) {
        let late = match self.bit(head.stream) {
            Some(bit) => {
                let late = self.was_held & bit != 0;
                if late && (head.kind == RST_STREAM || head.flags & END_STREAM != 0) {
                    // Closed from the server's side: no more frames of it.
                    self.was_held &= !bit;
                }
                late
            }
            None => {
                head.stream & 1 == 1
                    && head.stream <= self.newest
                    && !self.far[..usize::from(self.far_n)]
                        .iter()
                        .any(|f| f.stream == head.stream)
            }
        };
        if late {
            self.late = self.late.saturating_add(1);
        }
    }

    /// Stream `stream`, still open, leaves the table (its bit, `bit`, goes to a new stream).
    #[cold]
    fn evict(&mut self, stream: u32, bit: u128) {
        if usize::from(self.far_n) == FAR {
            self.lost = true;
            return;
        }
        self.far[usize::from(self.far_n)] = Far {
            stream,
            sent_end: self.sent_end & bit != 0,
            recv_end: self.recv_end & bit != 0,
            answered: self.answered & bit != 0,
        };
        self.far_n += 1;
    }

    /// Payload bytes of an incoming frame: a `SETTINGS` frame's entries are read.
    #[inline]
    fn on_in_payload(&mut self, bytes: &[u8]) {
        if !self.in_settings {
            return;
        }
        for &byte in bytes {
            self.setting[usize::from(self.setting_have)] = byte;
            self.setting_have += 1;
            if self.setting_have == 6 {
                self.setting_have = 0;
                let [a, b, c, d, e, f] = self.setting;
                if u16::from_be_bytes([a, b]) == MAX_CONCURRENT_STREAMS {
                    self.limit = u32::from_be_bytes([c, d, e, f]);
                }
            }
        }
    }
}

/// The first `RST_LEN` bytes (or fewer, if there are fewer) of `rest` then `later`.
fn gather(rest: &[u8], later: &[std::io::IoSlice<'_>]) -> ([u8; RST_LEN], usize) {
    let mut out = [0; RST_LEN];
    let mut n = rest.len().min(RST_LEN);
    out[..n].copy_from_slice(&rest[..n]);
    for buf in later {
        if n == RST_LEN {
            break;
        }
        let take = buf.len().min(RST_LEN - n);
        out[n..n + take].copy_from_slice(&buf[..take]);
        n += take;
    }
    (out, n)
}

/// The watch of one HTTP/2 connection's frames.
pub(super) struct Watch {
    out: Framer,
    inc: Framer,
    streams: Streams,
    /// A released `RST_STREAM` being written, and how much of it is written.
    inject: [u8; RST_LEN],
    injected: usize,
    pub(super) scratch: [u8; SCRATCH],
}

impl Watch {
    /// A watch whose outgoing bytes start right after the preface.
    pub(super) fn new() -> Box<Self> {
        Box::new(Self {
            out: Framer::default(),
            inc: Framer::default(),
            streams: Streams {
                newest: 0,
                answered: 0,
                sent_end: 0,
                recv_end: 0,
                open: 0,
                quiet: 0,
                opened: [Instant::now(); 128],
                limit: DEFAULT_LIMIT,
                in_settings: false,
                setting: [0; 6],
                setting_have: 0,
                held: [None; MAX_HELD],
                count: 0,
                far: [Far::default(); FAR],
                far_n: 0,
                lost: false,
                was_held: 0,
                late: 0,
            },
            inject: [0; RST_LEN],
            injected: RST_LEN,
            scratch: [0; SCRATCH],
        })
    }

    /// Walks the next outgoing bytes, `buf`, to the first frame to stop at (its offset: see
    /// [`at_stop`](Self::at_stop)), or to the end, noting the frames passed. Returns the
    /// offset, and where the outgoing frames stand after it for [`sent`](Self::sent).
    #[inline]
    pub(super) fn plan(&mut self, buf: &[u8]) -> (Option<usize>, Framer) {
        let mut out = self.out;
        let at = out.walk(
            buf,
            &mut self.streams,
            Streams::stops,
            Streams::on_out,
            |_, _| {},
        );
        (at, out)
    }

    /// Like [`plan`](Self::plan), over several buffers in order: the offset counted from the
    /// start of the first. A frame split across buffers is seen whole.
    pub(super) fn plan_vectored(
        &mut self,
        bufs: &[std::io::IoSlice<'_>],
    ) -> (Option<usize>, Framer) {
        // The common case, one buffer: no frame can be split across buffers.
        if let [buf] = bufs {
            return self.plan(buf);
        }
        let mut out = self.out;
        let mut offset = 0;
        for (j, buf) in bufs.iter().enumerate() {
            let later = &bufs[j + 1..];
            let stop = |streams: &Streams, rest: &[u8]| {
                if rest.len() >= RST_LEN || later.is_empty() {
                    streams.stops(rest)
                } else {
                    let (whole, n) = gather(rest, later);
                    streams.stops(&whole[..n])
                }
            };
            if let Some(at) = out.walk(buf, &mut self.streams, stop, Streams::on_out, |_, _| {}) {
                return (Some(offset + at), out);
            }
            offset += buf.len();
        }
        (None, out)
    }

    /// The first bytes of the buffers, whole across them, for [`at_stop`](Self::at_stop).
    pub(super) fn head_of(bufs: &[std::io::IoSlice<'_>]) -> ([u8; RST_LEN], usize) {
        gather(&[], bufs)
    }

    /// `written` bytes of those [`plan`](Self::plan) walked (`planned` of them, leaving the
    /// frames at `after`) were written. The frames already noted are not noted again (noting
    /// is idempotent, so a partial write's rest noted twice is harmless).
    #[inline]
    pub(super) fn sent(&mut self, planned: &[u8], written: usize, after: Framer) {
        if written >= planned.len() {
            self.out = after;
        } else {
            self.step(&planned[..written]);
        }
    }

    /// `bytes` were written, already noted by a walk that went further: step over them.
    pub(super) fn step(&mut self, bytes: &[u8]) {
        self.out
            .walk(bytes, &mut (), |_, _| false, |_, _| {}, |_, _| {});
    }

    /// `written` bytes of the buffers [`plan_vectored`](Self::plan_vectored) walked to the end.
    pub(super) fn sent_vectored(
        &mut self,
        bufs: &[std::io::IoSlice<'_>],
        written: usize,
        after: Framer,
    ) {
        if let [buf] = bufs {
            return self.sent(buf, written, after);
        }
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        if written >= total {
            self.out = after;
            return;
        }
        let mut left = written;
        for buf in bufs {
            if left == 0 {
                break;
            }
            let take = left.min(buf.len());
            self.step(&buf[..take]);
            left -= take;
        }
    }

    /// `bytes` were written before the watch could stop anything (the preface's write).
    pub(super) fn sent_first(&mut self, bytes: &[u8]) {
        self.out.walk(
            bytes,
            &mut self.streams,
            |_, _| false,
            Streams::on_out,
            |_, _| {},
        );
    }

    /// `bytes` were read.
    #[cfg(test)]
    fn received(&mut self, bytes: &[u8]) {
        self.inc.walk(
            bytes,
            &mut self.streams,
            |_, _| false,
            Streams::on_in,
            Streams::on_in_payload,
        );
    }

    /// The first `n` bytes of the scratch were read.
    #[inline]
    pub(super) fn received_scratch(&mut self, n: usize) {
        self.inc.walk(
            &self.scratch[..n],
            &mut self.streams,
            |_, _| false,
            Streams::on_in,
            Streams::on_in_payload,
        );
    }

    /// Whether nothing is held or being written: no verdict to take, nothing to send.
    #[inline]
    pub(super) fn quiet(&self) -> bool {
        self.streams.count == 0 && self.injected == RST_LEN
    }

    /// The walk stopped at `rest` (its first bytes, whole). Holds the `RST_STREAM` there
    /// (true: it counts as written), or releases the held resets, to go before the new
    /// stream's `HEADERS` there (false: write them, then plan again).
    pub(super) fn at_stop(&mut self, rest: &[u8]) -> bool {
        let streams = &mut self.streams;
        if streams.holdable(rest) {
            let stream = head(rest).stream;
            let opened = streams.opened[((stream >> 1) & 127) as usize];
            if let Some(slot) = streams.held.iter_mut().find(|h| h.is_none()) {
                *slot = Some(Held {
                    stream,
                    opened,
                    since: Instant::now(),
                    release: false,
                    witness: false,
                });
                streams.count += 1;
                if let Some(bit) = streams.bit(stream) {
                    streams.was_held |= bit;
                }
                return true;
            }
        }
        for held in streams.held.iter_mut().flatten() {
            held.release = true;
        }
        false
    }

    /// Whether the verdict is death: a held stream [`WINDOW`] old, held [`MIN_HELD`], while
    /// no frame of a stream arrived since it opened. Held resets [`RELEASE_BY`] old are
    /// released meanwhile, but for one kept as the witness while [`LATE_BUDGET`] lasts.
    pub(super) fn dead(&mut self) -> bool {
        if self.streams.count == 0 {
            return false;
        }
        let now = Instant::now();
        let mut witness = false;
        let mut due = false;
        for held in self.streams.held.iter().flatten().filter(|h| !h.release) {
            if now >= held.verdict_at() {
                return true;
            }
            witness |= held.witness;
            due |= now.saturating_duration_since(held.since) >= RELEASE_BY;
        }
        if due {
            let overdue = |h: &Held| {
                !h.release && !h.witness && now.saturating_duration_since(h.since) >= RELEASE_BY
            };
            // The witness: the overdue one judged first, if none is kept yet.
            let keep = if witness || self.streams.late >= LATE_BUDGET {
                None
            } else {
                (0..MAX_HELD)
                    .filter_map(|i| {
                        self.streams.held[i]
                            .filter(overdue)
                            .map(|h| (h.verdict_at(), i))
                    })
                    .min()
                    .map(|(_, i)| i)
            };
            for (i, slot) in self.streams.held.iter_mut().enumerate() {
                if let Some(held) = slot.as_mut().filter(|h| overdue(h)) {
                    if keep == Some(i) {
                        held.witness = true;
                    } else {
                        held.release = true;
                    }
                }
            }
        }
        false
    }

    /// Whether every stream open on the connection (as the watch saw them written) is one whose
    /// reset is held, that is whose caller cancelled it: a verdict now fails no request that
    /// was written.
    pub(super) fn none_live(&self) -> bool {
        let streams = &self.streams;
        if streams.lost || streams.far_n > 0 {
            return false;
        }
        let held = streams
            .held
            .iter()
            .flatten()
            .filter_map(|h| streams.bit(h.stream))
            .fold(0u128, |acc, bit| acc | bit);
        streams.open & !held == 0
    }

    /// When [`dead`](Self::dead) has something to do next: a verdict or a release due.
    pub(super) fn next_due(&self) -> Option<Instant> {
        if self.streams.count == 0 {
            return None;
        }
        self.streams
            .held
            .iter()
            .flatten()
            .filter(|h| !h.release)
            .map(|h| {
                if h.witness {
                    h.verdict_at()
                } else {
                    h.verdict_at().min(h.since + RELEASE_BY)
                }
            })
            .min()
    }

    /// The rest of the `RST_STREAM` to write before anything else, if one is due now (only at
    /// a frame boundary of the outgoing bytes, outside a header block).
    pub(super) fn due(&mut self) -> Option<&[u8]> {
        if self.injected == RST_LEN {
            if self.streams.count == 0 || !self.out.at_boundary() {
                return None;
            }
            let slot = self
                .streams
                .held
                .iter_mut()
                .find(|h| matches!(h, Some(h) if h.release))?;
            let stream = slot.take().map_or(0, |h| h.stream);
            self.streams.count -= 1;
            if let Some(bit) = self.streams.bit(stream) {
                self.streams.open &= !bit;
            } else if self.streams.far_n > 0 {
                self.streams.far_event(stream, false, false, false, true);
            }
            self.inject[..3].copy_from_slice(&[0, 0, 4]);
            self.inject[3] = RST_STREAM;
            self.inject[4] = 0;
            self.inject[5..9].copy_from_slice(&stream.to_be_bytes());
            self.inject[9..].copy_from_slice(&CANCEL.to_be_bytes());
            self.injected = 0;
        }
        Some(&self.inject[self.injected..])
    }

    /// `n` bytes of [`due`](Self::due)'s were written.
    pub(super) fn injected(&mut self, n: usize) {
        self.injected = (self.injected + n).min(RST_LEN);
    }
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("streams", &self.streams)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len() as u32;
        let mut out = len.to_be_bytes()[1..].to_vec();
        out.extend([kind, flags]);
        out.extend(stream.to_be_bytes());
        out.extend(payload);
        out
    }

    fn rst(stream: u32) -> Vec<u8> {
        frame(RST_STREAM, 0, stream, &CANCEL.to_be_bytes())
    }

    /// What `HealthIo::poll_write` does with `bytes`, the inner write taking `max` at most:
    /// the bytes consumed, and whether a frame was held.
    fn write(watch: &mut Watch, bytes: &[u8], max: usize) -> (usize, bool) {
        let (at, after) = watch.plan(bytes);
        let planned = match at {
            Some(0) => {
                assert!(watch.at_stop(bytes), "a stop to hold");
                return (RST_LEN, true);
            }
            Some(at) => &bytes[..at],
            None => bytes,
        };
        let n = planned.len().min(max);
        watch.sent(planned, n, after);
        (n, false)
    }

    /// Writes all of `bytes`, `max` at a time; the frames held.
    fn write_all(watch: &mut Watch, mut bytes: &[u8], max: usize) -> usize {
        let mut held = 0;
        while !bytes.is_empty() {
            let (n, h) = write(watch, bytes, max);
            held += usize::from(h);
            bytes = &bytes[n..];
        }
        held
    }

    #[test]
    fn an_unanswered_cancel_is_held_and_an_answer_releases_it() {
        let mut watch = Watch::new();
        let open = frame(HEADERS, END_STREAM | 0x4, 1, b"abc");
        // Written one byte at a time: boundaries survive partial writes.
        assert_eq!(write_all(&mut watch, &open, 1), 0);
        let mut out = frame(4, 0, 0, &[]);
        out.extend(rst(1));
        assert_eq!(write(&mut watch, &out, usize::MAX), (9, false));
        assert_eq!(write(&mut watch, &out[9..], usize::MAX), (RST_LEN, true));
        assert!(!watch.dead());
        assert_eq!(watch.due(), None);
        // The answer, split across reads: the stream is closed both ways, nothing to send.
        let answer = frame(HEADERS, END_STREAM | 0x4, 1, b"xy");
        watch.received(&answer[..4]);
        watch.received(&answer[4..]);
        assert_eq!(watch.due(), None);
        assert!(watch.quiet());
    }

    #[test]
    fn an_answer_to_an_open_request_releases_the_reset_at_a_boundary() {
        let mut watch = Watch::new();
        // A request cancelled before its body ended: the server may be waiting for the rest,
        // the reset goes out at once.
        let mut out = frame(HEADERS, 0x4, 1, b"abc");
        out.extend(frame(DATA, 0, 1, b"body"));
        out.extend(rst(1));
        assert_eq!(write_all(&mut watch, &out, usize::MAX), 0);
        // A request sent whole (its body's last frame ends it), then its reset, in one write.
        let mut out = frame(HEADERS, 0x4, 3, b"abc");
        out.extend(frame(DATA, END_STREAM, 3, b"body"));
        out.extend(rst(3));
        assert_eq!(write_all(&mut watch, &out, usize::MAX), 1);
        // The answer's head, the stream not ended: alive, the reset is to be sent.
        watch.received(&frame(HEADERS, 0x4, 3, b"x"));
        // Mid-frame outgoing: nothing injected.
        let data = frame(DATA, 0, 5, b"0123");
        write_all(&mut watch, &data[..5], usize::MAX);
        assert_eq!(watch.due(), None);
        write_all(&mut watch, &data[5..], usize::MAX);
        let reset = rst(3);
        assert_eq!(watch.due(), Some(&reset[..]));
        watch.injected(5);
        assert_eq!(watch.due(), Some(&reset[5..]));
        watch.injected(8);
        assert_eq!(watch.due(), None);
        assert!(watch.quiet());
        // A held reset, then h2's own STREAM_CLOSED for it: the held one is dropped.
        write_all(&mut watch, &frame(HEADERS, END_STREAM | 0x4, 7, b"a"), 64);
        assert_eq!(write_all(&mut watch, &rst(7), 64), 1);
        let closed = frame(RST_STREAM, 0, 7, &5u32.to_be_bytes());
        assert_eq!(write_all(&mut watch, &closed, 64), 0);
        assert!(watch.quiet());
    }

    #[test]
    fn answered_streams_other_codes_and_a_full_table_are_not_held() {
        let mut watch = Watch::new();
        write_all(&mut watch, &frame(HEADERS, END_STREAM | 0x4, 1, b"a"), 7);
        watch.received(&frame(HEADERS, 0x4, 1, b"x"));
        for stream in (3..=21).step_by(2) {
            write_all(
                &mut watch,
                &frame(HEADERS, END_STREAM | 0x4, stream, b"a"),
                7,
            );
        }
        assert_eq!(write_all(&mut watch, &rst(1), usize::MAX), 0, "answered");
        let refused = frame(RST_STREAM, 0, 3, &7u32.to_be_bytes());
        assert_eq!(write_all(&mut watch, &refused, usize::MAX), 0, "not CANCEL");
        assert_eq!(
            write_all(&mut watch, &rst(23), usize::MAX),
            0,
            "never opened"
        );
        let mut resets = Vec::new();
        for stream in (5..=21).step_by(2) {
            resets.extend(rst(stream));
        }
        assert_eq!(
            write_all(&mut watch, &resets, usize::MAX),
            MAX_HELD,
            "the table is full"
        );
    }

    #[test]
    fn the_verdict_needs_silence_on_every_stream() {
        let mut watch = Watch::new();
        let mut out = frame(HEADERS, END_STREAM | 0x4, 1, b"a");
        out.extend(frame(HEADERS, END_STREAM | 0x4, 3, b"a"));
        out.extend(rst(1));
        out.extend(rst(3));
        assert_eq!(write_all(&mut watch, &out, 5), 2);
        let long_ago = Instant::now() - WINDOW;
        for held in watch.streams.held.iter_mut().flatten() {
            held.since = long_ago;
        }
        assert!(!watch.dead(), "not yet {WINDOW:?} old");
        for held in watch.streams.held.iter_mut().flatten() {
            held.opened = long_ago;
        }
        assert!(watch.dead(), "nothing moved");
        // Another stream's answer: alive; both released.
        watch.received(&frame(DATA, 0, 5, b"zz"));
        assert!(!watch.dead());
        assert!(watch.due().is_some());
        // A ping ack is no progress.
        let mut watch = Watch::new();
        write_all(&mut watch, &frame(HEADERS, END_STREAM | 0x4, 1, b"a"), 64);
        write_all(&mut watch, &rst(1), 64);
        watch.received(&frame(6, 1, 0, &[0; 8]));
        watch.received(&frame(SETTINGS, ACK, 0, &[]));
        let held = watch.streams.held[0].as_mut().unwrap();
        held.opened = long_ago;
        assert!(!watch.dead(), "held for less than {MIN_HELD:?}");
        let held = watch.streams.held[0].as_mut().unwrap();
        held.since = long_ago;
        assert!(watch.dead());
    }
    #[test]
    fn the_verdict_counts_from_the_streams_opening_and_stream_frames_are_life() {
        let mut watch = Watch::new();
        write_all(&mut watch, &frame(HEADERS, END_STREAM | 0x4, 1, b"a"), 64);
        // Connection-level frames are no life: the stream stays quiet.
        watch.received(&frame(8, 0, 0, &[0, 1, 0, 0]));
        watch.received(&frame(SETTINGS, 0, 0, &[]));
        assert_eq!(write_all(&mut watch, &rst(1), 64), 1);
        let held = watch.streams.held[0].as_mut().unwrap();
        // Cancelled now, opened long ago (a long deadline): judged once held `MIN_HELD`.
        held.opened = Instant::now() - WINDOW;
        assert!(!watch.dead());
        watch.streams.held[0].as_mut().unwrap().since = Instant::now() - MIN_HELD;
        assert!(watch.dead());
        // Held long (a short deadline) but opened less than `WINDOW` ago: not yet.
        let held = watch.streams.held[0].as_mut().unwrap();
        held.opened = Instant::now() - WINDOW / 2;
        held.since = Instant::now() - WINDOW / 2;
        assert!(!watch.dead());
        // A stream's `WINDOW_UPDATE` (a server reading an upload): alive, released.
        watch.received(&frame(8, 0, 9, &[0, 1, 0, 0]));
        watch.streams.held[0].as_mut().unwrap().opened = Instant::now() - WINDOW;
        assert!(!watch.dead());
        assert_eq!(watch.due(), Some(&rst(1)[..]));
        // A stream opened after life is quiet again, one opened before is not.
        write_all(&mut watch, &frame(HEADERS, END_STREAM | 0x4, 3, b"a"), 64);
        write_all(&mut watch, &frame(HEADERS, END_STREAM | 0x4, 5, b"a"), 64);
        watch.received(&frame(DATA, 0, 3, b"x"));
        write_all(&mut watch, &frame(HEADERS, END_STREAM | 0x4, 7, b"a"), 64);
        assert_eq!(write_all(&mut watch, &rst(5), 64), 0, "not quiet");
        assert_eq!(write_all(&mut watch, &rst(7), 64), 1, "quiet");
    }

    #[test]
    fn holds_stay_under_the_servers_stream_limit() {
        let mut watch = Watch::new();
        // SETTINGS_MAX_CONCURRENT_STREAMS 1, split across reads.
        let settings = frame(SETTINGS, 0, 0, &[0, 4, 0, 1, 0, 0, 0, 3, 0, 0, 0, 1]);
        for chunk in settings.chunks(5) {
            watch.received(chunk);
        }
        assert_eq!(watch.streams.limit, 1);
        write_all(&mut watch, &frame(HEADERS, END_STREAM | 0x4, 1, b"a"), 64);
        assert_eq!(write_all(&mut watch, &rst(1), 64), 0, "limit 1: never held");
        // Limit 4: held while the open streams are at most 2.
        watch.received(&frame(SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 4]));
        write_all(&mut watch, &frame(HEADERS, END_STREAM | 0x4, 3, b"a"), 64);
        write_all(&mut watch, &frame(HEADERS, END_STREAM | 0x4, 5, b"a"), 64);
        write_all(&mut watch, &frame(HEADERS, END_STREAM | 0x4, 7, b"a"), 64);
        assert_eq!(write_all(&mut watch, &rst(3), 64), 0, "3 open of 4");
        assert_eq!(write_all(&mut watch, &rst(5), 64), 1, "2 open of 4");
        // Streams 5 (held) and 7 open; h2 opens 9, 11 and 13: the held reset goes before 13,
        // the fifth the server would count.
        let mut out = frame(HEADERS, END_STREAM | 0x4, 9, b"a");
        out.extend(frame(HEADERS, END_STREAM | 0x4, 11, b"a"));
        let half = out.len();
        out.extend(frame(HEADERS, END_STREAM | 0x4, 13, b"a"));
        let (at, after) = watch.plan(&out);
        assert_eq!(at, Some(half), "stops before stream 13");
        watch.sent(&out[..half], half, after);
        assert!(!watch.at_stop(&out[half..]), "released, not held");
        assert_eq!(watch.due(), Some(&rst(5)[..]));
        watch.injected(RST_LEN);
        assert_eq!(watch.plan(&out[half..]).0, None);
    }

    #[test]
    fn a_released_reset_waits_for_the_end_of_a_header_block() {
        let mut watch = Watch::new();
        write_all(&mut watch, &frame(HEADERS, END_STREAM | 0x4, 1, b"a"), 64);
        assert_eq!(write_all(&mut watch, &rst(1), 64), 1);
        // A header block split: HEADERS without END_HEADERS, one byte at a time.
        write_all(&mut watch, &frame(HEADERS, END_STREAM, 3, b"abc"), 1);
        watch.received(&frame(HEADERS, 0x4, 1, b"x"));
        assert_eq!(watch.due(), None, "inside the header block");
        write_all(&mut watch, &frame(CONTINUATION, 0, 3, b"d"), 3);
        assert_eq!(watch.due(), None, "still inside");
        let end = frame(CONTINUATION, 0x4, 3, b"e");
        write_all(&mut watch, &end[..9], 64);
        assert_eq!(
            watch.due(),
            None,
            "the last CONTINUATION's payload is to come"
        );
        write_all(&mut watch, &end[9..], 64);
        assert_eq!(watch.due(), Some(&rst(1)[..]));
    }

    #[test]
    fn an_answered_open_stream_keeps_resets_from_being_held() {
        let mut watch = Watch::new();
        // A server stream, answered, still open.
        write_all(&mut watch, &frame(HEADERS, END_STREAM | 0x4, 1, b"a"), 64);
        watch.received(&frame(HEADERS, 0x4, 1, b"x"));
        write_all(&mut watch, &frame(HEADERS, END_STREAM | 0x4, 3, b"a"), 64);
        assert_eq!(
            write_all(&mut watch, &rst(3), 64),
            0,
            "answered stream 1 open"
        );
        // It ends: holds again.
        watch.received(&frame(DATA, END_STREAM, 1, b""));
        write_all(&mut watch, &frame(HEADERS, END_STREAM | 0x4, 5, b"a"), 64);
        assert_eq!(write_all(&mut watch, &rst(5), 64), 1);
    }

    #[test]
    fn held_resets_go_out_before_h2_forgets_them_but_one_witness() {
        let mut watch = Watch::new();
        let mut out = Vec::new();
        for stream in [1, 3, 5] {
            out.extend(frame(HEADERS, END_STREAM | 0x4, stream, b"a"));
        }
        for stream in [1, 3, 5] {
            out.extend(rst(stream));
        }
        assert_eq!(write_all(&mut watch, &out, 64), 3);
        let now = Instant::now();
        assert!(watch.next_due().unwrap() <= now + RELEASE_BY);
        // Held `RELEASE_BY`, opened just before: one witness stays, the others go.
        for held in watch.streams.held.iter_mut().flatten() {
            held.since = now - RELEASE_BY;
            held.opened = now - RELEASE_BY;
        }
        assert!(!watch.dead());
        let held: Vec<_> = watch.streams.held.iter().flatten().copied().collect();
        assert_eq!(held.iter().filter(|h| h.witness).count(), 1);
        assert_eq!(held.iter().filter(|h| h.release).count(), 2);
        // The witness is judged at its verdict time.
        let witness = held.iter().find(|h| h.witness).unwrap();
        assert_eq!(watch.next_due(), Some(witness.verdict_at()));
        for held in watch.streams.held.iter_mut().flatten() {
            held.opened = now - WINDOW;
        }
        assert!(watch.dead());
    }

    #[test]
    fn answers_to_held_streams_spend_a_budget() {
        let mut watch = Watch::new();
        watch.streams.late = LATE_BUDGET - 1;
        write_all(&mut watch, &frame(HEADERS, END_STREAM | 0x4, 1, b"a"), 64);
        assert_eq!(write_all(&mut watch, &rst(1), 64), 1);
        watch.received(&frame(HEADERS, END_STREAM | 0x4, 1, b"x"));
        assert_eq!(watch.streams.late, LATE_BUDGET);
        write_all(&mut watch, &frame(HEADERS, END_STREAM | 0x4, 3, b"a"), 64);
        assert_eq!(write_all(&mut watch, &rst(3), 64), 0, "spent");
    }

    #[test]
    fn a_verdict_fails_no_written_request_only_while_every_open_stream_is_held() {
        let mut watch = Watch::new();
        write_all(&mut watch, &frame(HEADERS, END_STREAM | 0x4, 1, b"a"), 64);
        assert!(!watch.none_live(), "stream 1 written, live");
        assert_eq!(write_all(&mut watch, &rst(1), 64), 1);
        assert!(watch.none_live(), "only the cancelled stream is open");
        // Another request written: a verdict now may fail it after the server read it.
        write_all(&mut watch, &frame(HEADERS, END_STREAM | 0x4, 3, b"a"), 64);
        assert!(!watch.none_live());
    }

    #[test]
    fn every_late_frame_of_a_held_stream_counts_released_or_not() {
        let mut watch = Watch::new();
        write_all(&mut watch, &frame(HEADERS, END_STREAM | 0x4, 1, b"a"), 64);
        assert_eq!(write_all(&mut watch, &rst(1), 64), 1);
        // The server is alive: the reset is released and written.
        watch.received(&frame(HEADERS, END_STREAM | 0x4, 3, b"x"));
        assert_eq!(watch.streams.late, 0, "not a held stream");
        assert!(watch.due().is_some());
        watch.injected(RST_LEN);
        assert_eq!(watch.streams.count, 0);
        // Its answer, released: each frame counts, until the server's `END_STREAM`.
        watch.received(&frame(HEADERS, 0x4, 1, b"x"));
        watch.received(&frame(DATA, 0, 1, b"xx"));
        watch.received(&frame(DATA, END_STREAM, 1, b"xx"));
        assert_eq!(watch.streams.late, 3);
        watch.received(&frame(DATA, END_STREAM, 1, b"xx"));
        assert_eq!(watch.streams.late, 3, "closed: no longer counted");
    }

    #[test]
    fn open_streams_that_leave_the_table_are_still_counted() {
        let mut watch = Watch::new();
        watch.received(&frame(SETTINGS, 0, 0, &[0, 3, 0, 0, 1, 0]));
        // Stream 1 stays open while 128 more open and close.
        write_all(&mut watch, &frame(HEADERS, 0x4, 1, b"a"), 64);
        for stream in (3..=257).step_by(2) {
            write_all(
                &mut watch,
                &frame(HEADERS, END_STREAM | 0x4, stream, b"a"),
                64,
            );
            if stream < 257 {
                watch.received(&frame(HEADERS, END_STREAM | 0x4, stream, b"x"));
            }
        }
        assert_eq!(watch.streams.far_n, 1);
        assert_eq!(watch.streams.open_n(), 2, "streams 1 and 257");
        // Stream 1 ends both ways: no longer counted.
        write_all(&mut watch, &frame(DATA, END_STREAM, 1, b""), 64);
        watch.received(&frame(HEADERS, END_STREAM | 0x4, 1, b"x"));
        assert_eq!(watch.streams.open_n(), 1);
        // More open streams leave the table than it keeps: no more holds.
        for stream in (259..=259 + 2 * 136).step_by(2) {
            write_all(
                &mut watch,
                &frame(HEADERS, END_STREAM | 0x4, stream, b"a"),
                64,
            );
        }
        assert!(watch.streams.lost);
        assert_eq!(write_all(&mut watch, &rst(531), 64), 0);
    }
}
