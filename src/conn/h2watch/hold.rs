//! The hold-back rule: which `RST_STREAM(CANCEL)` the watch holds, what releases it, and the
//! budget of late frames that a held stream's answer may cost.
//!
//! It decides, at a frame boundary of the outgoing bytes, whether the frame there is a reset
//! to hold (a request sent whole, unanswered, quiet, with room under the server's stream
//! limit and the late budget) or a new stream's `HEADERS` the held resets must go before; it
//! marks held resets released when any frame of a stream arrives, drops them once their
//! stream is closed, and hands out the next released one to write. It relies on the
//! [`streams`](super::streams) table for what is known of each stream, and on
//! [`frames`](super::frames) for the frame headers. When a held reset is judged or released
//! by age is decided by `verdict`, which builds on this module.

use tokio::time::Instant;

use super::frames::{CANCEL, END_STREAM, HEADERS, Head, RST_LEN, RST_STREAM, head};
use super::streams::{Out, Streams};

/// At most this many `RST_STREAM` frames held at once.
pub(super) const MAX_HELD: usize = 8;

/// Frames of streams whose reset the watch held (held or released, until the server ends the
/// stream) a connection may receive, each counted as one of h2's 1,024 local error resets it
/// may cost: once this many came, it holds no more resets. The other half is the margin for
/// the frames still on their way on the streams held or released then, and for h2's own.
pub(super) const LATE_BUDGET: u16 = 512;

/// One held `RST_STREAM(CANCEL)`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Held {
    pub(super) stream: u32,
    /// When the stream opened.
    pub(super) opened: Instant,
    /// When its reset was held.
    pub(super) since: Instant,
    /// The server is alive: send it at the next frame boundary.
    pub(super) release: bool,
    /// Kept past `verdict::RELEASE_BY` to be judged (one at most).
    pub(super) witness: bool,
}

/// The held resets, and the stream table they are decided from.
#[derive(Debug)]
pub(super) struct Holds {
    pub(super) streams: Streams,
    pub(super) held: [Option<Held>; MAX_HELD],
    pub(super) count: u8,
    /// The watch held the stream's reset, and the stream is not yet closed from the server's
    /// side (its `END_STREAM` or `RST_STREAM` not yet read): its frames are counted late.
    was_held: u128,
    /// Frames of streams the watch held received ([`LATE_BUDGET`]).
    pub(super) late: u16,
}

impl Holds {
    /// Nothing held, no stream yet.
    pub(super) fn new() -> Self {
        Self {
            streams: Streams::new(),
            held: [None; MAX_HELD],
            count: 0,
            was_held: 0,
            late: 0,
        }
    }

    fn held_mut(&mut self, stream: u32) -> Option<&mut Option<Held>> {
        if self.count == 0 {
            return None;
        }
        self.held
            .iter_mut()
            .find(|h| matches!(h, Some(h) if h.stream == stream))
    }

    /// Drops the held reset of `stream`, if any.
    fn drop_held(&mut self, stream: u32) {
        if let Some(slot) = self.held_mut(stream) {
            *slot = None;
            self.count -= 1;
        }
    }

    /// Marks every held reset released: it goes out at the next frame boundary.
    #[inline]
    fn release_all(&mut self) {
        for held in self.held.iter_mut().flatten() {
            held.release = true;
        }
    }

    /// Whether the walk stops at `rest`: a frame to hold, or a new stream's `HEADERS` the held
    /// resets must precede.
    #[inline]
    pub(super) fn stops(&self, rest: &[u8]) -> bool {
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
        let streams = &self.streams;
        let stream = head(rest).stream;
        stream & 1 == 1
            && stream > streams.newest
            && (streams.lost || streams.open_n() + 1 > streams.limit)
    }

    /// `rest` starts with a reset the rule holds.
    #[inline]
    fn holdable(&self, rest: &[u8]) -> bool {
        let streams = &self.streams;
        if rest.len() < RST_LEN
            || usize::from(self.count) >= MAX_HELD
            || streams.lost
            || self.late >= LATE_BUDGET
        {
            return false;
        }
        let head = head(rest);
        if head.kind != RST_STREAM || head.len != 4 {
            return false;
        }
        let code = u32::from_be_bytes([rest[9], rest[10], rest[11], rest[12]]);
        let Some(bit) = streams.bit(head.stream) else {
            return false;
        };
        code == CANCEL
            && streams.sent_end & bit != 0
            && streams.answered & bit == 0
            && streams.quiet & bit != 0
            && streams.open & bit != 0
            && streams.open_n() <= streams.limit / 2
            && !streams.answered_open()
            && !self
                .held
                .iter()
                .any(|h| matches!(h, Some(h) if h.stream == head.stream))
    }

    /// An outgoing frame header.
    #[inline]
    pub(super) fn on_out(&mut self, head: Head) {
        match self.streams.on_out(head) {
            Out::Opened(bit) => self.was_held &= !bit,
            // h2 reset a held stream again (a late frame after it forgot the stream): the
            // held reset would be a second one.
            Out::Reset => self.drop_held(head.stream),
            Out::Other => {}
        }
    }

    /// An incoming frame header.
    #[inline]
    pub(super) fn on_in(&mut self, head: Head) {
        if head.stream == 0 {
            self.streams.on_conn_frame(head);
            return;
        }
        // Any frame of a stream: the server is alive.
        if self.was_held != 0 || self.streams.newest > 255 {
            self.count_late(head);
        }
        if self.count > 0 {
            self.release_all();
            if self.streams.on_stream_frame(head) {
                // Closed both ways or reset: a reset now would be a frame on a closed stream.
                self.drop_held(head.stream);
            }
        } else {
            // Nothing held: nothing to drop.
            self.streams.on_stream_frame(head);
        }
    }

    /// A frame of a stream arrived: counted against [`LATE_BUDGET`] if it is of a stream the
    /// watch held (held or released, until the server closes it: h2 may have forgotten it and
    /// answer the frame with a reset of its own), or of a client stream out of the table that
    /// is not known open (it may be such a stream too).
    #[cold]
    fn count_late(&mut self, head: Head) {
        let streams = &self.streams;
        let late = match streams.bit(head.stream) {
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
                    && head.stream <= streams.newest
                    && !streams.far[..usize::from(streams.far_n)]
                        .iter()
                        .any(|f| f.stream == head.stream)
            }
        };
        if late {
            self.late = self.late.saturating_add(1);
        }
    }

    /// The walk stopped at `rest` (its first bytes, whole). Holds the `RST_STREAM` there
    /// (true: it counts as written), or releases the held resets, to go before the new
    /// stream's `HEADERS` there (false: write them, then plan again).
    pub(super) fn at_stop(&mut self, rest: &[u8]) -> bool {
        if self.holdable(rest) {
            let stream = head(rest).stream;
            let opened = self.streams.opened_at(stream);
            if let Some(slot) = self.held.iter_mut().find(|h| h.is_none()) {
                *slot = Some(Held {
                    stream,
                    opened,
                    since: Instant::now(),
                    release: false,
                    witness: false,
                });
                self.count += 1;
                if let Some(bit) = self.streams.bit(stream) {
                    self.was_held |= bit;
                }
                return true;
            }
        }
        self.release_all();
        false
    }

    /// Takes a released reset to write now: its stream, no longer open once written.
    pub(super) fn take_released(&mut self) -> Option<u32> {
        let slot = self
            .held
            .iter_mut()
            .find(|h| matches!(h, Some(h) if h.release))?;
        let stream = slot.take().map_or(0, |h| h.stream);
        self.count -= 1;
        self.streams.reset(stream);
        Some(stream)
    }
}

#[cfg(test)]
mod tests {
    use super::super::Watch;
    use super::super::frames::{DATA, END_STREAM, HEADERS, RST_LEN, RST_STREAM, SETTINGS};
    use super::super::tests::{frame, rst, write_all};
    use super::{LATE_BUDGET, MAX_HELD};

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
    fn holds_stay_under_the_servers_stream_limit() {
        let mut watch = Watch::new();
        // SETTINGS_MAX_CONCURRENT_STREAMS 1, split across reads.
        let settings = frame(SETTINGS, 0, 0, &[0, 4, 0, 1, 0, 0, 0, 3, 0, 0, 0, 1]);
        for chunk in settings.chunks(5) {
            watch.received(chunk);
        }
        assert_eq!(watch.holds.streams.limit, 1);
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
    fn answers_to_held_streams_spend_a_budget() {
        let mut watch = Watch::new();
        watch.holds.late = LATE_BUDGET - 1;
        write_all(&mut watch, &frame(HEADERS, END_STREAM | 0x4, 1, b"a"), 64);
        assert_eq!(write_all(&mut watch, &rst(1), 64), 1);
        watch.received(&frame(HEADERS, END_STREAM | 0x4, 1, b"x"));
        assert_eq!(watch.holds.late, LATE_BUDGET);
        write_all(&mut watch, &frame(HEADERS, END_STREAM | 0x4, 3, b"a"), 64);
        assert_eq!(write_all(&mut watch, &rst(3), 64), 0, "spent");
    }

    #[test]
    fn every_late_frame_of_a_held_stream_counts_released_or_not() {
        let mut watch = Watch::new();
        write_all(&mut watch, &frame(HEADERS, END_STREAM | 0x4, 1, b"a"), 64);
        assert_eq!(write_all(&mut watch, &rst(1), 64), 1);
        // The server is alive: the reset is released and written.
        watch.received(&frame(HEADERS, END_STREAM | 0x4, 3, b"x"));
        assert_eq!(watch.holds.late, 0, "not a held stream");
        assert!(watch.due().is_some());
        watch.injected(RST_LEN);
        assert_eq!(watch.holds.count, 0);
        // Its answer, released: each frame counts, until the server's `END_STREAM`.
        watch.received(&frame(HEADERS, 0x4, 1, b"x"));
        watch.received(&frame(DATA, 0, 1, b"xx"));
        watch.received(&frame(DATA, END_STREAM, 1, b"xx"));
        assert_eq!(watch.holds.late, 3);
        watch.received(&frame(DATA, END_STREAM, 1, b"xx"));
        assert_eq!(watch.holds.late, 3, "closed: no longer counted");
    }
}
