//! Request ids: which incoming ids are taken, and how new ones are made.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use http::HeaderValue;

/// The longest incoming request id taken as it is (bytes); a longer one is replaced.
pub(crate) const MAX_REQUEST_ID_LEN: usize = 128;

/// Whether an incoming request id is taken as it is: 1 to [`MAX_REQUEST_ID_LEN`] bytes of
/// visible ASCII (`!` to `~`: no space, no control character, no obs-text).
#[inline]
pub(crate) fn is_valid_request_id(value: &[u8]) -> bool {
    !value.is_empty()
        && value.len() <= MAX_REQUEST_ID_LEN
        // A fold, not `all`: no early exit, so the loop vectorizes.
        && value
            .iter()
            .fold(true, |ok, &b| ok & (b.wrapping_sub(b'!') <= b'~' - b'!'))
}

/// The key of the ids: the standard library's SipHash-1-3 keyed with 128 bits from the OS
/// (`RandomState`), drawn once per process. Under Miri the OS is Miri's generator; nothing
/// here reads a clock or the process id.
fn key() -> &'static RandomState {
    static KEY: OnceLock<RandomState> = OnceLock::new();
    KEY.get_or_init(RandomState::new)
}

/// The id of counter `n` under `key`: two 64-bit outputs of the keyed hash, of `n` and of `n`
/// followed by a domain byte (distinct messages: SipHash hashes the length too). A keyed
/// PRF: without the key, no id says anything about another, nor which process made it.
fn id(key: &RandomState, n: u64) -> [u8; 32] {
    let mut hasher = key.build_hasher();
    hasher.write_u64(n);
    let first = hasher.finish();
    // `finish` leaves the state as it was: this goes on from the counter's.
    hasher.write_u8(1);
    let second = hasher.finish();
    let mut out = [0u8; 32];
    hex(first, &mut out[..16]);
    hex(second, &mut out[16..]);
    out
}

/// A new request id: 32 lowercase hex digits (128 bits, the size and alphabet of a W3C
/// trace id), the keyed hash ([`id`]) of a process-wide counter: one atomic add and two short
/// hashes, no lock, no system call. No part is shared between ids (no process prefix, no
/// time): without the process's key, neither the next id nor the process can be told from
/// ids seen. Distinct counters give distinct ids but for a 128-bit collision.
pub(crate) fn generate() -> HeaderValue {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    HeaderValue::from_bytes(&id(key(), n)).expect("hex digits are a valid header value")
}

fn hex(value: u64, out: &mut [u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (pair, byte) in out.chunks_exact_mut(2).zip(value.to_be_bytes()) {
        pair[0] = DIGITS[usize::from(byte >> 4)];
        pair[1] = DIGITS[usize::from(byte & 0xf)];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_lower_hex(id: &[u8]) -> bool {
        id.iter()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    }

    #[test]
    fn generated_ids_are_valid_and_distinct() {
        let a = generate();
        assert_eq!(a.len(), 32);
        assert!(is_valid_request_id(a.as_bytes()));
        assert!(is_lower_hex(a.as_bytes()));
        // Fewer under Miri (about a thousand times slower): the same property.
        let n = if cfg!(miri) { 100 } else { 10_000 };
        let many: std::collections::HashSet<_> = (0..n).map(|_| generate()).collect();
        assert_eq!(many.len(), n);
    }

    #[test]
    fn generated_ids_share_no_prefix_nor_any_position() {
        // Every hex position takes at least 8 of its 16 digits over the sample: no process
        // prefix, no timestamp, no slowly moving counter. By chance a position shows 7 or
        // fewer in at most C(16,7) * (7/16)^n: below 1e-30 for n = 100, the smallest here.
        let n = if cfg!(miri) { 100 } else { 1_000 };
        let ids: Vec<_> = (0..n).map(|_| generate()).collect();
        for position in 0..32 {
            let digits: std::collections::HashSet<u8> =
                ids.iter().map(|id| id.as_bytes()[position]).collect();
            assert!(digits.len() >= 8, "position {position}: {digits:?}");
        }
    }

    #[test]
    fn ids_are_a_keyed_function_of_the_counter() {
        let (one, two) = (RandomState::new(), RandomState::new());
        // The same key and counter: the same id (a function, so distinct counters are what
        // make ids distinct); another key: another id.
        assert_eq!(id(&one, 7), id(&one, 7));
        assert_ne!(id(&one, 7), id(&two, 7));
        assert!(is_lower_hex(&id(&one, 7)));
        // Consecutive counters give unrelated ids: about half of the 128 bits differ (the old
        // unkeyed finalizer of `n + key` let anyone step from one id to the next). Over n
        // pairs the mean is 64 with a standard deviation of 5.66 / sqrt(n): the bounds are
        // more than 20 of them away for n = 100.
        let n = if cfg!(miri) { 100 } else { 1_000 };
        let bits = |id: [u8; 32]| -> u128 {
            u128::from_str_radix(std::str::from_utf8(&id).unwrap(), 16).unwrap()
        };
        let total: u32 = (0..n)
            .map(|i| (bits(id(&one, i)) ^ bits(id(&one, i + 1))).count_ones())
            .sum();
        let mean = f64::from(total) / n as f64;
        assert!((52.0..76.0).contains(&mean), "{mean}");
        // The two halves are not equal nor related by the counter alone.
        let ids: std::collections::HashSet<_> = (0..n).map(|i| id(&one, i)).collect();
        assert_eq!(ids.len() as u64, n);
        assert!((0..n).all(|i| id(&one, i)[..16] != id(&one, i)[16..]));
    }

    #[test]
    fn which_ids_are_taken() {
        assert!(is_valid_request_id(b"abc-123_XYZ.~!"));
        assert!(!is_valid_request_id(b""));
        assert!(!is_valid_request_id(b"has space"));
        assert!(!is_valid_request_id(b"tab\there"));
        assert!(!is_valid_request_id(b"\x7f"));
        assert!(!is_valid_request_id("caf\u{e9}".as_bytes()));
        assert!(is_valid_request_id(&[b'a'; MAX_REQUEST_ID_LEN]));
        assert!(!is_valid_request_id(&[b'a'; MAX_REQUEST_ID_LEN + 1]));
    }
}
