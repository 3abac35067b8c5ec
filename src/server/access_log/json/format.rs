//! One value of a line: the fields' visitor, JSON escaping, numbers and the timestamp,
//! without `fmt`.

use super::*;

/// Writes the event's fields as `,"key":value`.
pub(super) struct Fields<'a> {
    pub(super) line: &'a mut Vec<u8>,
    pub(super) escape_keys: bool,
}

impl Fields<'_> {
    #[inline]
    fn key(&mut self, field: &Field) {
        let name = field.name();
        self.line.reserve(name.len() + 4);
        self.line.extend_from_slice(b",\"");
        if self.escape_keys {
            escape_into(self.line, name);
        } else {
            self.line.extend_from_slice(name.as_bytes());
        }
        self.line.extend_from_slice(b"\":");
    }
}

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.key(field);
        self.line.push(b'"');
        escape_into(self.line, value);
        self.line.push(b'"');
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.key(field);
        self.line.push(b'"');
        // Written as it comes, then escaped in place in one pass (most values need nothing).
        // Never fails: the writer is a `Vec`; a `Debug` that fails leaves what it wrote.
        let start = self.line.len();
        let _ = write!(Bytes(self.line), "{value:?}");
        escape_tail(self.line, start);
        self.line.push(b'"');
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.key(field);
        write_u64(self.line, value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.key(field);
        if value < 0 {
            self.line.push(b'-');
        }
        write_u64(self.line, value.unsigned_abs());
    }

    // `fmt().json()` writes a 128-bit integer as a string (its visitor takes it as `Debug`):
    // the same here, so that a reader of either sees one type.
    fn record_u128(&mut self, field: &Field, value: u128) {
        self.key(field);
        self.line.push(b'"');
        let _ = write!(Bytes(self.line), "{value}");
        self.line.push(b'"');
    }

    fn record_i128(&mut self, field: &Field, value: i128) {
        self.key(field);
        self.line.push(b'"');
        let _ = write!(Bytes(self.line), "{value}");
        self.line.push(b'"');
    }

    // `fmt().json()` writes bytes as an array of numbers.
    fn record_bytes(&mut self, field: &Field, value: &[u8]) {
        self.key(field);
        self.line.push(b'[');
        for (i, &b) in value.iter().enumerate() {
            if i > 0 {
                self.line.push(b',');
            }
            write_u64(self.line, u64::from(b));
        }
        self.line.push(b']');
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.key(field);
        self.line
            .extend_from_slice(if value { b"true" } else { b"false" });
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.key(field);
        write_f64(self.line, value);
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.key(field);
        self.line.push(b'"');
        let start = self.line.len();
        let _ = write!(Bytes(self.line), "{value}");
        escape_tail(self.line, start);
        self.line.push(b'"');
    }
}

/// A `fmt::Write` appending to the line as it is (escaped afterwards by [`escape_tail`]).
pub(super) struct Bytes<'a>(pub(super) &'a mut Vec<u8>);

impl fmt::Write for Bytes<'_> {
    #[inline]
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// Whether `bytes` go into a JSON string as they are: no `"`, `\` or control character
/// (checked branch-free, many bytes at a time once vectorized).
///
/// Eight bytes at a time: a word has a byte below `0x20` when `(x - 0x20..) & !x` has a high
/// bit, a byte equal to `c` when `x ^ c..` has a zero byte (both exact for the question
/// "any?"); the tail byte by byte.
#[inline]
pub(super) fn is_plain(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = ONES * 0x80;
    let mut words = bytes.chunks_exact(8);
    let mut any = 0u64;
    for word in &mut words {
        let mut x = [0u8; 8];
        x.copy_from_slice(word);
        let x = u64::from_le_bytes(x);
        let quote = x ^ (ONES * u64::from(b'"'));
        let backslash = x ^ (ONES * u64::from(b'\\'));
        any |= (x.wrapping_sub(ONES * 0x20) & !x)
            | (quote.wrapping_sub(ONES) & !quote)
            | (backslash.wrapping_sub(ONES) & !backslash);
    }
    any & HIGH == 0
        && words.remainder().iter().fold(0u8, |any, &b| {
            any | u8::from(b < 0x20) | u8::from(b == b'"') | u8::from(b == b'\\')
        }) == 0
}

/// Appends `text` escaped for a JSON string (see [`escape_tail`]).
#[inline]
pub(super) fn escape_into(line: &mut Vec<u8>, text: &str) {
    let start = line.len();
    line.extend_from_slice(text.as_bytes());
    escape_tail(line, start);
}

/// The escape of one byte in a JSON string, and its length: `"` and `\` with a backslash,
/// the control characters as `\n`, `\r`, `\t` or `\u00XX`, any other byte as it is (UTF-8
/// included).
#[inline]
pub(super) fn escaped(b: u8) -> ([u8; 6], usize) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    match b {
        b'"' => ([b'\\', b'"', 0, 0, 0, 0], 2),
        b'\\' => ([b'\\', b'\\', 0, 0, 0, 0], 2),
        b'\n' => ([b'\\', b'n', 0, 0, 0, 0], 2),
        b'\r' => ([b'\\', b'r', 0, 0, 0, 0], 2),
        b'\t' => ([b'\\', b't', 0, 0, 0, 0], 2),
        0..0x20 => (
            [
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xf)],
            ],
            6,
        ),
        _ => ([b, 0, 0, 0, 0, 0], 1),
    }
}

/// Escapes in place what the line holds from `start` on (one pass when nothing needs it;
/// otherwise the line grows by the escapes' length and is rewritten from its end: no
/// allocation beyond the line's own growth).
#[inline]
pub(super) fn escape_tail(line: &mut Vec<u8>, start: usize) {
    if !is_plain(&line[start..]) {
        escape_slow(line, start);
    }
}

/// [`escape_tail`] for text that needs it (rare: the access line's values are printable
/// ASCII already, but for `"` and `\`).
#[cold]
#[inline(never)]
pub(super) fn escape_slow(line: &mut Vec<u8>, start: usize) {
    let extra: usize = line[start..].iter().map(|&b| escaped(b).1 - 1).sum();
    let mut read = line.len();
    line.resize(read + extra, 0);
    let mut write = line.len();
    while read > start {
        read -= 1;
        let (bytes, len) = escaped(line[read]);
        write -= len;
        line[write..write + len].copy_from_slice(&bytes[..len]);
    }
}

/// Two decimal digits of each number below 100.
pub(super) const DIGITS: &[u8; 200] = b"\
0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Appends `value` in decimal (two digits at a time, no `fmt`).
pub(super) fn write_u64(line: &mut Vec<u8>, mut value: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    while value >= 100 {
        let pair = (value % 100) as usize * 2;
        value /= 100;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&DIGITS[pair..pair + 2]);
    }
    if value >= 10 {
        let pair = value as usize * 2;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&DIGITS[pair..pair + 2]);
    } else {
        at -= 1;
        digits[at] = b'0' + value as u8;
    }
    line.extend_from_slice(&digits[at..]);
}

/// Appends `value` with `width` digits, zeros in front.
pub(super) fn write_padded(line: &mut Vec<u8>, value: u64, width: usize) {
    let mut digits = [b'0'; 20];
    let mut value = value;
    for at in (20 - width..20).rev() {
        digits[at] = b'0' + (value % 10) as u8;
        value /= 10;
    }
    line.extend_from_slice(&digits[20 - width..]);
}

/// Appends a float as a JSON number, as `fmt().json()` (serde_json) writes it: the shortest
/// text that reads back as the same value, with an exponent for the very small and very large
/// (`1e-12`, `1.7976931348623157e308`), `.0` on a whole number; `null` for NaN and the
/// infinities (JSON has none).
pub(super) fn write_f64(line: &mut Vec<u8>, value: f64) {
    if value.is_finite() {
        line.extend_from_slice(zmij::Buffer::new().format_finite(value).as_bytes());
    } else {
        line.extend_from_slice(b"null");
    }
}

/// Appends the current time, RFC 3339 in UTC with microseconds: `2026-05-04T12:00:00.123456Z`.
/// The text up to the second is kept per thread and made again once a second.
pub(super) fn timestamp(line: &mut Vec<u8>) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs();
    SECOND.with(|kept| {
        let mut kept = kept.borrow_mut();
        if kept.0 != secs {
            *kept = (secs, civil(secs));
        }
        line.extend_from_slice(&kept.1);
    });
    line.push(b'.');
    write_padded(line, u64::from(now.subsec_micros()), 6);
    line.push(b'Z');
}

/// `YYYY-MM-DDTHH:MM:SS` of a Unix time (the days to a civil date by Howard Hinnant's
/// algorithm).
pub(super) fn civil(secs: u64) -> [u8; 19] {
    let days = (secs / 86_400) as i64;
    let of_day = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let mut out = *b"0000-00-00T00:00:00";
    for (at, width, value) in [
        (0, 4, year.clamp(0, 9999) as u64),
        (5, 2, month as u64),
        (8, 2, day as u64),
        (11, 2, of_day / 3_600),
        (14, 2, of_day / 60 % 60),
        (17, 2, of_day % 60),
    ] {
        let mut value = value;
        for digit in out[at..at + width].iter_mut().rev() {
            *digit = b'0' + (value % 10) as u8;
            value /= 10;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(f: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut line = Vec::new();
        f(&mut line);
        String::from_utf8(line).unwrap()
    }

    #[test]
    fn numbers() {
        for n in [0, 9, 10, 99, 100, 12_345, u64::MAX] {
            assert_eq!(text(|l| write_u64(l, n)), n.to_string());
        }
        assert_eq!(text(|l| write_f64(l, f64::NAN)), "null");
        assert_eq!(text(|l| write_f64(l, f64::NEG_INFINITY)), "null");
        // As serde_json writes them, and read back exactly.
        for d in [1u64, 999, 1_000_001, 3_000_000_007, 86_400_123_456_789] {
            let secs = Duration::from_nanos(d).as_secs_f64();
            let printed = text(|l| write_f64(l, secs));
            assert_eq!(printed, serde_json::to_string(&secs).unwrap());
            assert_eq!(printed.parse::<f64>().unwrap(), secs, "{d}");
        }
        for x in [
            0.0,
            -0.0,
            2.0,
            1.5,
            -0.25,
            1e-12,
            0.1 + 0.2,
            1e16,
            1e300,
            f64::MAX,
            f64::MIN_POSITIVE,
            5e-324,
        ] {
            assert_eq!(
                text(|l| write_f64(l, x)),
                serde_json::to_string(&x).unwrap(),
                "{x}"
            );
        }
    }

    #[test]
    fn dates() {
        assert_eq!(&civil(0), b"1970-01-01T00:00:00");
        assert_eq!(&civil(951_782_400), b"2000-02-29T00:00:00");
        assert_eq!(&civil(1_780_000_000), b"2026-05-28T20:26:40");
    }

    #[test]
    fn escapes() {
        assert_eq!(
            text(|l| escape_into(l, "a\"b\\c\n\u{1}é")),
            "a\\\"b\\\\c\\n\\u0001é"
        );
        assert!(is_plain(b"http.request.method"));
        assert!(!is_plain(b"a\"b"));
        // Each byte at each place of a text with whole words and a tail, against the rule.
        for b in 0..=255u8 {
            for at in 0..19 {
                let mut text = *b"Mozilla/5.0 (X11) x";
                text[at] = b;
                let plain = !(b < 0x20 || b == b'"' || b == b'\\');
                assert_eq!(is_plain(&text), plain, "{b} at {at}");
            }
        }
        for b in 0..=255u8 {
            let mut line = vec![b'x', b];
            escape_tail(&mut line, 1);
            let quoted = format!("\"{}\"", String::from_utf8_lossy(&line[1..]));
            if b < 0x80 {
                let parsed: String = serde_json::from_str(&quoted).unwrap();
                assert_eq!(parsed.as_bytes(), [b], "{b}");
            }
        }
    }
}
