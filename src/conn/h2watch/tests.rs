//! The watch as the connection's I/O drives it (what `HealthIo` does with each write and
//! read), and the helpers the parts' tests share: frames built by hand, and writes through
//! [`Watch::plan`] and [`Watch::sent`] as `HealthIo::poll_write` makes them.

use super::Watch;
use super::frames::{CANCEL, CONTINUATION, DATA, END_STREAM, HEADERS, RST_LEN, RST_STREAM};

/// A frame: its header, then `payload`.
pub(super) fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = len.to_be_bytes()[1..].to_vec();
    out.extend([kind, flags]);
    out.extend(stream.to_be_bytes());
    out.extend(payload);
    out
}

/// The `RST_STREAM(CANCEL)` h2 writes for `stream`.
pub(super) fn rst(stream: u32) -> Vec<u8> {
    frame(RST_STREAM, 0, stream, &CANCEL.to_be_bytes())
}

/// What `HealthIo::poll_write` does with `bytes`, the inner write taking `max` at most:
/// the bytes consumed, and whether a frame was held.
pub(super) fn write(watch: &mut Watch, bytes: &[u8], max: usize) -> (usize, bool) {
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
pub(super) fn write_all(watch: &mut Watch, mut bytes: &[u8], max: usize) -> usize {
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
