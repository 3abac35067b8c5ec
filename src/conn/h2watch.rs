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
//! * fewer than [`MAX_HELD`](hold::MAX_HELD) are held, and the streams the server counts as open (held ones
//!   included) are at most half its `SETTINGS_MAX_CONCURRENT_STREAMS` (100 until its `SETTINGS`
//!   come). They are counted exactly: open streams older than the 128 newest are kept on the
//!   side (8 of them; past that the count is unknown and nothing more is held). Before a new
//!   stream's `HEADERS` that would bring them to the limit, the held resets go out first, so
//!   a hold never makes the server refuse a stream;
//! * fewer than [`LATE_BUDGET`](hold::LATE_BUDGET) late frames were counted on the connection: every frame of a
//!   stream whose reset was held (held or released, until the server ends or resets it), and
//!   of a client stream out of the table not known open.
//!
//! Meanwhile the incoming frame headers are watched (no byte is changed, so HPACK stays in sync):
//!
//! * a frame of any stream arrives: the server is alive; the held frames go out at
//!   the next frame boundary of the outgoing bytes outside a header block (never between a
//!   `HEADERS` and its `CONTINUATION`), or are dropped once their stream is closed both ways
//!   (the answer's `END_STREAM` after the request's), or once the server reset it;
//! * a held reset [`RELEASE_BY`](verdict::RELEASE_BY) old goes out (h2 is about to forget its stream), but for one
//!   kept as the witness;
//! * a held stream is [`WINDOW`](verdict::WINDOW) old (counted from its opening, so a caller's deadline shorter
//!   or longer than the window changes nothing) and held for at least [`MIN_HELD`](verdict::MIN_HELD), and nothing
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
//! connection (`GOAWAY(ENHANCE_YOUR_CALM)`): hence the release at [`RELEASE_BY`](verdict::RELEASE_BY) and the
//! [`LATE_BUDGET`](hold::LATE_BUDGET). h2's second starts when it resets the stream (when the watch holds the
//! frame), so on a link whose round trip exceeds 1 s less [`RELEASE_BY`](verdict::RELEASE_BY) a released stream's
//! answer may come after h2 forgot it too: the budget counts every frame of every stream the
//! watch held.
//!
//! The state is owned by the connection's I/O (one task drives it): no atomics. The client
//! preface (`PRI * HTTP/2.0...`) on the first write switches it on; any other first write
//! (HTTP/1.1, TLS records) switches it off for good.
//!
//! The parts, each importing only those after it: this module's [`Watch`] (what the
//! connection's I/O calls: the outgoing write plan, the bytes read) → [`verdict`] (when a held
//! stream is judged or released by age) → [`hold`] (which resets are held, what releases
//! them, the late budget) → [`streams`] (the stream table, the exact open-stream count) →
//! [`frames`] (frame headers and boundaries).

mod frames;
mod hold;
mod streams;
mod verdict;

#[cfg(test)]
mod tests;

// tokio's clock, the one its timer (which wakes the connection for `next_due`) keeps: the same
// as the system's unless a test paused it.
use tokio::time::Instant;

pub(super) use self::frames::{Framer, PREFACE, RST_LEN};
use self::frames::{gather, rst_cancel};
use self::hold::Holds;

/// The read scratch: reads go through it so their frame headers can be seen.
pub(super) const SCRATCH: usize = 16 * 1024;

/// The watch of one HTTP/2 connection's frames.
pub(super) struct Watch {
    out: Framer,
    inc: Framer,
    holds: Holds,
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
            holds: Holds::new(),
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
        let at = out.walk(buf, &mut self.holds, Holds::stops, Holds::on_out, |_, _| {});
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
            let stop = |holds: &Holds, rest: &[u8]| {
                if rest.len() >= RST_LEN || later.is_empty() {
                    holds.stops(rest)
                } else {
                    let (whole, n) = gather(rest, later);
                    holds.stops(&whole[..n])
                }
            };
            if let Some(at) = out.walk(buf, &mut self.holds, stop, Holds::on_out, |_, _| {}) {
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
            &mut self.holds,
            |_, _| false,
            Holds::on_out,
            |_, _| {},
        );
    }

    /// `bytes` were read.
    #[cfg(test)]
    fn received(&mut self, bytes: &[u8]) {
        self.inc.walk(
            bytes,
            &mut self.holds,
            |_, _| false,
            Holds::on_in,
            |holds, bytes| holds.streams.on_in_payload(bytes),
        );
    }

    /// The first `n` bytes of the scratch were read.
    #[inline]
    pub(super) fn received_scratch(&mut self, n: usize) {
        self.inc.walk(
            &self.scratch[..n],
            &mut self.holds,
            |_, _| false,
            Holds::on_in,
            |holds, bytes| holds.streams.on_in_payload(bytes),
        );
    }

    /// Whether nothing is held or being written: no verdict to take, nothing to send.
    #[inline]
    pub(super) fn quiet(&self) -> bool {
        self.holds.count == 0 && self.injected == RST_LEN
    }

    /// The walk stopped at `rest` (its first bytes, whole). Holds the `RST_STREAM` there
    /// (true: it counts as written), or releases the held resets, to go before the new
    /// stream's `HEADERS` there (false: write them, then plan again).
    pub(super) fn at_stop(&mut self, rest: &[u8]) -> bool {
        self.holds.at_stop(rest)
    }

    /// Whether the verdict is death (see [`Holds::dead`]); releases held resets by age.
    pub(super) fn dead(&mut self) -> bool {
        self.holds.dead()
    }

    /// Whether every stream open on the connection (as the watch saw them written) is one whose
    /// reset is held: a verdict now fails no request that was written.
    pub(super) fn none_live(&self) -> bool {
        self.holds.none_live()
    }

    /// When [`dead`](Self::dead) has something to do next: a verdict or a release due.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.holds.next_due()
    }

    /// The rest of the `RST_STREAM` to write before anything else, if one is due now (only at
    /// a frame boundary of the outgoing bytes, outside a header block).
    pub(super) fn due(&mut self) -> Option<&[u8]> {
        if self.injected == RST_LEN {
            if self.holds.count == 0 || !self.out.at_boundary() {
                return None;
            }
            let stream = self.holds.take_released()?;
            self.inject = rst_cancel(stream);
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
            .field("holds", &self.holds)
            .finish_non_exhaustive()
    }
}
