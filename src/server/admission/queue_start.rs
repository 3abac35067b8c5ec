//! The time a request spent before the layer saw it, from a queue-start header written by a
//! proxy or load balancer (`x-request-start`): Heroku's milliseconds, nginx's `t=` seconds
//! with a fraction, and microseconds, told apart by magnitude as New Relic does.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The longest wait a header may claim; more is taken as a clock error (no time spent).
const MAX_SPENT: Duration = Duration::from_secs(3600);

/// The time spent since `value` (a Unix time, optionally after `t=`), at `now`. `None` for a
/// malformed value, a time in the future (clock skew) or more than an hour ago.
pub(crate) fn spent(value: &[u8], now: SystemTime) -> Option<Duration> {
    let value = value.strip_prefix(b"t=").unwrap_or(value);
    let text = std::str::from_utf8(value).ok()?.trim();
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty()
        || whole.len() > 19
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !fraction.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let whole: u64 = whole.parse().ok()?;
    // Seconds below 1e11 (until the year 5138), milliseconds below 1e14, else microseconds.
    let start = if whole < 100_000_000_000 {
        let mut nanos = 0u64;
        let mut scale = 100_000_000u64;
        for digit in fraction.bytes().take(9) {
            nanos += u64::from(digit - b'0') * scale;
            scale /= 10;
        }
        Duration::new(whole, u32::try_from(nanos).ok()?)
    } else if whole < 100_000_000_000_000 {
        Duration::from_millis(whole)
    } else {
        Duration::from_micros(whole)
    };
    let now = now.duration_since(UNIX_EPOCH).ok()?;
    let spent = now.checked_sub(start)?;
    (spent <= MAX_SPENT).then_some(spent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_by_magnitude() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let ms = Duration::from_millis;
        assert_eq!(spent(b"t=1699999999.750", now), Some(ms(250)));
        assert_eq!(spent(b"1699999999750", now), Some(ms(250)));
        assert_eq!(spent(b"t=1699999999750000", now), Some(ms(250)));
        assert_eq!(spent(b"1700000001000", now), None); // in the future
        assert_eq!(spent(b"1600000000000", now), None); // absurd: days ago
        for bad in [
            &b""[..],
            b"t=",
            b"abc",
            b"-5",
            b"1.2.3",
            b"t=17e9",
            b"99999999999999999999",
        ] {
            assert_eq!(spent(bad, now), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
