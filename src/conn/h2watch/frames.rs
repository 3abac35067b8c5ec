//! The HTTP/2 wire as the watch sees it: frame headers, and where frames begin and end in one
//! direction's bytes across partial reads and writes.
//!
//! It decides nothing about streams: it finds frame boundaries (and whether a header block is
//! open, so nothing is slipped between a `HEADERS` and its `CONTINUATION`) and hands each frame
//! header and run of payload bytes to its caller. It relies only on RFC 9113's framing: a
//! 9-byte header (24-bit length, type, flags, 31-bit stream) before each payload.

/// The HTTP/2 client connection preface.
pub(in crate::conn) const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The length of an `RST_STREAM` frame, header included.
pub(in crate::conn) const RST_LEN: usize = 13;

pub(super) const DATA: u8 = 0;
pub(super) const HEADERS: u8 = 1;
pub(super) const RST_STREAM: u8 = 3;
pub(super) const SETTINGS: u8 = 4;
const PUSH_PROMISE: u8 = 5;
pub(super) const CONTINUATION: u8 = 9;
pub(super) const END_STREAM: u8 = 0x1;
pub(super) const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
pub(super) const CANCEL: u32 = 0x8;
pub(super) const MAX_CONCURRENT_STREAMS: u16 = 0x3;

/// A frame header.
#[derive(Clone, Copy, Debug)]
pub(super) struct Head {
    pub(super) len: u32,
    pub(super) kind: u8,
    pub(super) flags: u8,
    pub(super) stream: u32,
}

/// The frame header at the start of `bytes` (9 bytes at least).
#[inline(always)]
pub(super) fn head(bytes: &[u8]) -> Head {
    let bytes: &[u8; 9] = bytes[..9].try_into().expect("a frame header is 9 bytes");
    Head {
        len: u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]),
        kind: bytes[3],
        flags: bytes[4],
        stream: u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]) & 0x7fff_ffff,
    }
}

/// The `RST_STREAM(CANCEL)` frame of `stream`.
#[inline]
pub(super) fn rst_cancel(stream: u32) -> [u8; RST_LEN] {
    let mut out = [0; RST_LEN];
    out[..3].copy_from_slice(&[0, 0, 4]);
    out[3] = RST_STREAM;
    out[4] = 0;
    out[5..9].copy_from_slice(&stream.to_be_bytes());
    out[9..].copy_from_slice(&CANCEL.to_be_bytes());
    out
}

/// Frame boundaries over one direction's bytes, across partial reads and writes.
#[derive(Clone, Copy, Debug, Default)]
pub(in crate::conn) struct Framer {
    hdr: [u8; 9],
    have: u8,
    left: u32,
    /// Inside a header block: a `HEADERS` or `PUSH_PROMISE` without `END_HEADERS` was walked,
    /// and not yet the `CONTINUATION` that ends it.
    block: bool,
}

impl Framer {
    /// At a frame boundary where another frame may go: not inside a header block.
    pub(super) fn at_boundary(&self) -> bool {
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
    pub(super) fn walk<S>(
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

/// The first `RST_LEN` bytes (or fewer, if there are fewer) of `rest` then `later`.
pub(super) fn gather(rest: &[u8], later: &[std::io::IoSlice<'_>]) -> ([u8; RST_LEN], usize) {
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

#[cfg(test)]
mod tests {
    use super::super::tests::frame;
    use super::*;

    #[test]
    fn frames_and_header_blocks_are_found_across_any_split() {
        let mut bytes = frame(HEADERS, 0, 1, b"abc");
        let block = bytes.len();
        bytes.extend(frame(CONTINUATION, END_HEADERS, 1, b"d"));
        bytes.extend(frame(DATA, END_STREAM, 1, &[7; 20]));
        bytes.extend(rst_cancel(3));
        let expected = [
            (HEADERS, 0, 1, 3),
            (CONTINUATION, END_HEADERS, 1, 1),
            (DATA, END_STREAM, 1, 20),
            (RST_STREAM, 0, 3, 4),
        ];
        for step in 1..=bytes.len() {
            let mut framer = Framer::default();
            let mut seen = Vec::new();
            for chunk in bytes.chunks(step) {
                let note =
                    |seen: &mut Vec<_>, h: Head| seen.push((h.kind, h.flags, h.stream, h.len));
                assert_eq!(
                    framer.walk(chunk, &mut seen, |_, _| false, note, |_, _| {}),
                    None
                );
            }
            assert_eq!(seen, expected, "chunks of {step}");
            assert!(framer.at_boundary(), "chunks of {step}");
        }
        // Inside the header block, between `HEADERS` and its `CONTINUATION`: no boundary.
        let mut framer = Framer::default();
        framer.walk(&bytes[..block], &mut (), |_, _| false, |_, _| {}, |_, _| {});
        assert!(!framer.at_boundary());
        // A stop ends the walk at a frame boundary: its offset.
        let mut framer = Framer::default();
        let at = framer.walk(
            &bytes,
            &mut (),
            |_, rest| rest.get(3) == Some(&RST_STREAM),
            |_, _| {},
            |_, _| {},
        );
        assert_eq!(at, Some(bytes.len() - RST_LEN));
    }
}
