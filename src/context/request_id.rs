//! Request ids: which incoming ids are taken, and how new ones are made.

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

/// The process's two keys: the first 16 hex digits of every id, and the key of the counter's
/// mix. Drawn once from the standard library's random hasher keys (from the OS), hashed with
/// the process id and the time.
fn keys() -> (u64, u64) {
    static KEYS: OnceLock<(u64, u64)> = OnceLock::new();
    *KEYS.get_or_init(|| {
        let draw = |salt: u64| {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u64(salt);
            hasher.write_u32(std::process::id());
            // Not under Miri, whose isolation has no wall clock: there the OS-seeded keys
            // (Miri's deterministic generator) are all of it.
            #[cfg(not(miri))]
            if let Ok(now) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
                hasher.write_u128(now.as_nanos());
            }
            hasher.finish()
        };
        (draw(1), draw(2))
    })
}

/// A bijection of `u64` (splitmix64's finalizer): distinct counters give distinct outputs.
#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A new request id: 32 lowercase hex digits (128 bits, the size and alphabet of a W3C
/// trace id). The first 64 bits are the process's random key; the last 64 are a keyed
/// bijection of a process-wide counter, so ids never repeat within a process (for 2^64 ids)
/// and differ across processes and restarts unless two processes draw the same 64-bit key.
pub(crate) fn generate() -> HeaderValue {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let (prefix, key) = keys();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let tail = mix(n.wrapping_add(key));
    let mut out = [0u8; 32];
    hex(prefix, &mut out[..16]);
    hex(tail, &mut out[16..]);
    HeaderValue::from_bytes(&out).expect("hex digits are a valid header value")
}

fn hex(mut value: u64, out: &mut [u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for slot in out.iter_mut().rev() {
        *slot = DIGITS[(value & 0xf) as usize];
        value >>= 4;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_are_valid_distinct_and_share_the_process_key() {
        let a = generate();
        let b = generate();
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert!(is_valid_request_id(a.as_bytes()));
        assert!(
            a.as_bytes()
                .iter()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert_eq!(a.as_bytes()[..16], b.as_bytes()[..16]);
        // Fewer under Miri (about a thousand times slower): the same property.
        let n = if cfg!(miri) { 100 } else { 10_000 };
        let many: std::collections::HashSet<_> = (0..n).map(|_| generate()).collect();
        assert_eq!(many.len(), n);
    }

    #[test]
    fn mix_is_a_bijection_on_a_sample() {
        let n: u64 = if cfg!(miri) { 1_000 } else { 100_000 };
        let outs: std::collections::HashSet<u64> = (0..n).map(mix).collect();
        assert_eq!(outs.len() as u64, n);
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
