//! The clock of the held resets: when a held stream is judged and the connection found dead,
//! when a held reset is released by age (h2 is about to forget its stream) and which one is
//! kept as the witness, and when the next of these is due.
//!
//! It decides from the held resets' times alone (no frame is read here): a held stream
//! [`WINDOW`] old from its opening and held [`MIN_HELD`], with no frame of any stream arrived
//! meanwhile (arrival releases every hold, so a held reset still unreleased proves the
//! silence), is the verdict. It relies on [`hold`](super::hold) for the held resets and the
//! late budget, and on the [`streams`](super::streams) table for which streams are open.

use std::time::Duration;

use tokio::time::Instant;

use super::hold::{Held, Holds, LATE_BUDGET, MAX_HELD};

/// How old a held stream is, from its opening, when it is judged.
pub(super) const WINDOW: Duration = Duration::from_millis(1750);

/// How long a cancelled stream's `RST_STREAM` is held at least before it is judged.
pub(super) const MIN_HELD: Duration = Duration::from_millis(250);

/// A held reset is released this long after it was held, except the one kept to be judged
/// (the "witness"): h2 forgets a stream it reset 1 s after the reset (`reset_stream_duration`,
/// counted from when the watch held the frame), and answers a frame of a forgotten stream with
/// a reset that counts against its `max_local_error_reset_streams` (1,024 per connection by
/// default). A released stream's answer costs one only if the server sent it before the reset
/// reached it (within this plus the uplink's delay) and it arrived after h2 forgot the stream
/// (1 s after the hold): on a link whose round trip is under 1 s less this, it cannot.
pub(super) const RELEASE_BY: Duration = Duration::from_millis(300);

impl Held {
    /// When it is judged: [`WINDOW`] from its opening, [`MIN_HELD`] from its hold.
    pub(super) fn verdict_at(&self) -> Instant {
        (self.opened + WINDOW).max(self.since + MIN_HELD)
    }
}

impl Holds {
    /// Whether the verdict is death: a held stream [`WINDOW`] old, held [`MIN_HELD`], while
    /// no frame of a stream arrived since it opened. Held resets [`RELEASE_BY`] old are
    /// released meanwhile, but for one kept as the witness while [`LATE_BUDGET`] lasts.
    pub(super) fn dead(&mut self) -> bool {
        if self.count == 0 {
            return false;
        }
        let now = Instant::now();
        let mut witness = false;
        let mut due = false;
        for held in self.held.iter().flatten().filter(|h| !h.release) {
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
            let keep = if witness || self.late >= LATE_BUDGET {
                None
            } else {
                (0..MAX_HELD)
                    .filter_map(|i| self.held[i].filter(overdue).map(|h| (h.verdict_at(), i)))
                    .min()
                    .map(|(_, i)| i)
            };
            for (i, slot) in self.held.iter_mut().enumerate() {
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
        let held = self
            .held
            .iter()
            .flatten()
            .filter_map(|h| streams.bit(h.stream))
            .fold(0u128, |acc, bit| acc | bit);
        streams.open & !held == 0
    }

    /// When [`dead`](Self::dead) has something to do next: a verdict or a release due.
    pub(super) fn next_due(&self) -> Option<Instant> {
        if self.count == 0 {
            return None;
        }
        self.held
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
}

#[cfg(test)]
mod tests {
    use tokio::time::Instant;

    use super::super::Watch;
    use super::super::frames::{ACK, DATA, END_STREAM, HEADERS, SETTINGS};
    use super::super::tests::{frame, rst, write_all};
    use super::{MIN_HELD, RELEASE_BY, WINDOW};

    #[test]
    fn the_verdict_needs_silence_on_every_stream() {
        let mut watch = Watch::new();
        let mut out = frame(HEADERS, END_STREAM | 0x4, 1, b"a");
        out.extend(frame(HEADERS, END_STREAM | 0x4, 3, b"a"));
        out.extend(rst(1));
        out.extend(rst(3));
        assert_eq!(write_all(&mut watch, &out, 5), 2);
        let long_ago = Instant::now() - WINDOW;
        for held in watch.holds.held.iter_mut().flatten() {
            held.since = long_ago;
        }
        assert!(!watch.dead(), "not yet {WINDOW:?} old");
        for held in watch.holds.held.iter_mut().flatten() {
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
        let held = watch.holds.held[0].as_mut().unwrap();
        held.opened = long_ago;
        assert!(!watch.dead(), "held for less than {MIN_HELD:?}");
        let held = watch.holds.held[0].as_mut().unwrap();
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
        let held = watch.holds.held[0].as_mut().unwrap();
        // Cancelled now, opened long ago (a long deadline): judged once held `MIN_HELD`.
        held.opened = Instant::now() - WINDOW;
        assert!(!watch.dead());
        watch.holds.held[0].as_mut().unwrap().since = Instant::now() - MIN_HELD;
        assert!(watch.dead());
        // Held long (a short deadline) but opened less than `WINDOW` ago: not yet.
        let held = watch.holds.held[0].as_mut().unwrap();
        held.opened = Instant::now() - WINDOW / 2;
        held.since = Instant::now() - WINDOW / 2;
        assert!(!watch.dead());
        // A stream's `WINDOW_UPDATE` (a server reading an upload): alive, released.
        watch.received(&frame(8, 0, 9, &[0, 1, 0, 0]));
        watch.holds.held[0].as_mut().unwrap().opened = Instant::now() - WINDOW;
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
        for held in watch.holds.held.iter_mut().flatten() {
            held.since = now - RELEASE_BY;
            held.opened = now - RELEASE_BY;
        }
        assert!(!watch.dead());
        let held: Vec<_> = watch.holds.held.iter().flatten().copied().collect();
        assert_eq!(held.iter().filter(|h| h.witness).count(), 1);
        assert_eq!(held.iter().filter(|h| h.release).count(), 2);
        // The witness is judged at its verdict time.
        let witness = held.iter().find(|h| h.witness).unwrap();
        assert_eq!(watch.next_due(), Some(witness.verdict_at()));
        for held in watch.holds.held.iter_mut().flatten() {
            held.opened = now - WINDOW;
        }
        assert!(watch.dead());
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
}
