//! The stream table: what the watch knows of each client stream from the frame headers both
//! ways, and how many streams the server counts as open.
//!
//! It decides which streams are open, answered, ended each way and still "quiet" (no frame of
//! any stream arrived since they opened), and reads the server's
//! `SETTINGS_MAX_CONCURRENT_STREAMS`. Per-stream bits cover the 128 newest client streams;
//! open streams older than those are kept on the side ([`FAR`] of them; past that the count
//! of open streams is no longer known). It relies on [`frames`](super::frames) for the frame
//! headers, and on h2 opening client streams in increasing odd order.

use tokio::time::Instant;

use super::frames::{
    ACK, DATA, END_STREAM, HEADERS, Head, MAX_CONCURRENT_STREAMS, RST_STREAM, SETTINGS,
};

/// Open streams that fell out of the 128-stream table tracked on the side; more, and the watch
/// no longer knows how many streams are open: it holds no more resets.
const FAR: usize = 8;

/// The server's `SETTINGS_MAX_CONCURRENT_STREAMS` assumed until its `SETTINGS` come (h2's).
const DEFAULT_LIMIT: u32 = 100;

/// An open stream that fell out of the table: what is known of it.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Far {
    pub(super) stream: u32,
    sent_end: bool,
    recv_end: bool,
    answered: bool,
}

/// What the watch knows of the streams. Per-stream bits are for the 128 newest client streams.
#[derive(Debug)]
pub(super) struct Streams {
    /// The newest stream the client opened.
    pub(super) newest: u32,
    /// Response `HEADERS` seen.
    pub(super) answered: u128,
    /// The client sent `END_STREAM`.
    pub(super) sent_end: u128,
    /// The server sent `END_STREAM`.
    recv_end: u128,
    /// Open as the server counts them: opened, not closed both ways nor reset (a held reset
    /// not yet written leaves it open).
    pub(super) open: u128,
    /// No frame of a stream arrived since it opened.
    pub(super) quiet: u128,
    /// When each opened, by bit.
    pub(super) opened: [Instant; 128],
    /// The server's `SETTINGS_MAX_CONCURRENT_STREAMS`.
    pub(super) limit: u32,
    /// The incoming frame is a `SETTINGS` (not an ack) being read: its current entry.
    in_settings: bool,
    setting: [u8; 6],
    setting_have: u8,
    /// Open streams older than the table's, as the server counts them.
    pub(super) far: [Far; FAR],
    pub(super) far_n: u8,
    /// More open streams fell out of the table than `far` keeps: the count of open streams is
    /// no longer known.
    pub(super) lost: bool,
}

/// What an outgoing frame did to the table, for the held resets.
pub(super) enum Out {
    /// Nothing they care about.
    Other,
    /// A new stream opened, on this bit.
    Opened(u128),
    /// The client reset the stream.
    Reset,
}

impl Streams {
    /// No stream yet, the default limit.
    pub(super) fn new() -> Self {
        Self {
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
            far: [Far::default(); FAR],
            far_n: 0,
            lost: false,
        }
    }

    /// The bit of client stream `stream`, if it is among the 128 newest opened.
    #[inline]
    pub(super) fn bit(&self, stream: u32) -> Option<u128> {
        (stream & 1 == 1 && stream <= self.newest && self.newest - stream < 256)
            .then(|| 1u128 << ((stream >> 1) & 127))
    }

    /// When client stream `stream` opened (by its bit's slot).
    #[inline]
    pub(super) fn opened_at(&self, stream: u32) -> Instant {
        self.opened[((stream >> 1) & 127) as usize]
    }

    /// The streams the server counts as open (held ones included), exactly unless `lost`.
    #[inline]
    pub(super) fn open_n(&self) -> u32 {
        self.open.count_ones() + u32::from(self.far_n)
    }

    /// A stream the server answered is still open (a server stream between its events).
    #[inline]
    pub(super) fn answered_open(&self) -> bool {
        self.answered & self.open != 0
            || self.far[..usize::from(self.far_n)]
                .iter()
                .any(|f| f.answered)
    }

    /// Client stream `stream` is no longer open: its reset was written.
    #[inline]
    pub(super) fn reset(&mut self, stream: u32) {
        if let Some(bit) = self.bit(stream) {
            self.open &= !bit;
        } else if self.far_n > 0 {
            self.far_event(stream, false, false, false, true);
        }
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

    /// An outgoing frame header.
    #[inline]
    pub(super) fn on_out(&mut self, head: Head) -> Out {
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
                self.open |= bit;
                self.quiet |= bit;
                self.opened[index] = Instant::now();
                if end {
                    self.sent_end |= bit;
                } else {
                    self.sent_end &= !bit;
                }
                Out::Opened(bit)
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
                Out::Other
            }
            RST_STREAM => {
                self.reset(head.stream);
                Out::Reset
            }
            _ => Out::Other,
        }
    }

    /// An incoming frame header of the connection (stream 0: `PING`, `SETTINGS`,
    /// `WINDOW_UPDATE`, `GOAWAY`): it says the connection is read, not that requests are
    /// served (a server sends its first ones before it reads any request). A `SETTINGS` (not
    /// an ack) has its entries read.
    #[inline]
    pub(super) fn on_conn_frame(&mut self, head: Head) {
        self.in_settings = head.kind == SETTINGS && head.flags & ACK == 0;
        if self.in_settings {
            self.setting_have = 0;
        }
    }

    /// An incoming frame header of a stream. Returns whether it closed its stream on the
    /// server's side for good: closed both ways (in the table), or reset.
    #[inline]
    pub(super) fn on_stream_frame(&mut self, head: Head) -> bool {
        self.in_settings = false;
        // Any frame of a stream: the server is alive.
        self.quiet = 0;
        match head.kind {
            HEADERS | DATA => {
                let Some(bit) = self.bit(head.stream) else {
                    if self.far_n > 0 {
                        let end = head.flags & END_STREAM != 0;
                        self.far_event(head.stream, false, end, head.kind == HEADERS, false);
                    }
                    return false;
                };
                if head.kind == HEADERS {
                    self.answered |= bit;
                }
                if head.flags & END_STREAM != 0 {
                    self.recv_end |= bit;
                    if self.sent_end & bit != 0 {
                        // Closed both ways: a reset now would be a frame on a closed stream.
                        self.open &= !bit;
                        return true;
                    }
                }
                false
            }
            RST_STREAM => {
                self.reset(head.stream);
                true
            }
            _ => false,
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
    pub(super) fn on_in_payload(&mut self, bytes: &[u8]) {
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

#[cfg(test)]
mod tests {
    use super::super::Watch;
    use super::super::frames::{DATA, END_STREAM, HEADERS, SETTINGS};
    use super::super::tests::{frame, rst, write_all};

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
        assert_eq!(watch.holds.streams.far_n, 1);
        assert_eq!(watch.holds.streams.open_n(), 2, "streams 1 and 257");
        // Stream 1 ends both ways: no longer counted.
        write_all(&mut watch, &frame(DATA, END_STREAM, 1, b""), 64);
        watch.received(&frame(HEADERS, END_STREAM | 0x4, 1, b"x"));
        assert_eq!(watch.holds.streams.open_n(), 1);
        // More open streams leave the table than it keeps: no more holds.
        for stream in (259..=259 + 2 * 136).step_by(2) {
            write_all(
                &mut watch,
                &frame(HEADERS, END_STREAM | 0x4, stream, b"a"),
                64,
            );
        }
        assert!(watch.holds.streams.lost);
        assert_eq!(write_all(&mut watch, &rst(531), 64), 0);
    }
}
