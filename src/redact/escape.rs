//! The one rule of printed text: printable ASCII as it is, every other byte percent-encoded
//! (the ground floor of the line's printers: `format.rs` and `url.rs` both write through it).
#![cfg_attr(not(feature = "tracing"), allow(dead_code))]

use std::fmt;

/// Whether `bytes` print as they are in a quoted field: printable ASCII, a space to `~`
/// (checked branch-free, a word at a time once vectorized).
#[inline]
pub(crate) fn is_plain_text(bytes: &[u8]) -> bool {
    !bytes
        .iter()
        .fold(false, |any, &b| any | (b.wrapping_sub(0x20) > 0x5e))
}

/// Whether `bytes` print as they are in an unquoted field (a URL and its parts): printable
/// ASCII without a space, `"` or `\`.
#[inline]
pub(crate) fn is_plain_url(bytes: &[u8]) -> bool {
    !bytes.iter().fold(false, |any, &b| {
        any | (b.wrapping_sub(0x21) > 0x5d) | (b == b'"') | (b == b'\\')
    })
}

/// Writes `bytes` with each byte outside printable ASCII (a control character, DEL, a byte of
/// a non-ASCII character) as `%XX`, and in a URL (`url`) a space, `"` and `\` too.
pub(crate) fn write_escaped(f: &mut dyn fmt::Write, bytes: &[u8], url: bool) -> fmt::Result {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut start = 0;
    for (at, &b) in bytes.iter().enumerate() {
        let escape = b.wrapping_sub(0x20) > 0x5e || (url && matches!(b, b' ' | b'"' | b'\\'));
        if escape {
            // Printable ASCII up to here: always UTF-8.
            f.write_str(std::str::from_utf8(&bytes[start..at]).unwrap_or_default())?;
            let hex = [b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]];
            f.write_str(std::str::from_utf8(&hex).unwrap_or_default())?;
            start = at + 1;
        }
    }
    f.write_str(std::str::from_utf8(&bytes[start..]).unwrap_or_default())
}

/// Text already UTF-8 for a quoted field: as it is when it is printable ASCII (borrowed: the
/// common case costs one pass), else with the other bytes percent-encoded.
pub(crate) fn text_str(text: &str) -> std::borrow::Cow<'_, str> {
    if is_plain_text(text.as_bytes()) {
        std::borrow::Cow::Borrowed(text)
    } else {
        let mut escaped = String::with_capacity(text.len() + 16);
        let _ = write_escaped(&mut escaped, text.as_bytes(), false);
        std::borrow::Cow::Owned(escaped)
    }
}
