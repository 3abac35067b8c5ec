//! The hash of a route: its method and its route template (axum's `MatchedPath`, else the
//! path) in one 64-bit word, the key of the table of slots.
//!
//! It decides which words a route has: odd, and never 0 less its low bit (a slot's marks
//! for warming and empty, [`Slot`](super::slot::Slot)'s route word). It relies on nothing but the
//! bytes: no allocation, no table of methods.

/// The hash of a route: the method and the route (axum's `MatchedPath`, else the path).
/// FNV-style over 8-byte words: a few instructions per 8 bytes, the last ones in one
/// word, no allocation. Low bits 0b11: see
/// [`Slot`](super::slot::Slot)'s route word.
#[inline]
pub fn route_hash(method: &[u8], route: &[u8]) -> u64 {
    route_hash_coded(method_code(method), route)
}

/// [`route_hash`] of a request's method: GET's and POST's starts as constants, compared
/// with no jump table (the admitted path's most common methods), the others out of line;
/// the same hash.
#[inline(always)]
pub fn method_route_hash(method: &http::Method, route: &[u8]) -> u64 {
    let start = if *method == http::Method::GET {
        const { start(method_code(b"GET")) }
    } else if *method == http::Method::POST {
        const { start(method_code(b"POST")) }
    } else {
        other_start(method)
    };
    route_hash_from(start, route)
}

/// [`start`] of a method other than GET and POST (out of line: `Method::as_str`'s jump
/// table off the common path).
#[cold]
#[inline(never)]
fn other_start(method: &http::Method) -> u64 {
    start(method_code(method.as_str().as_bytes()))
}

/// The method by its length, first, second and last bytes: no loop, and every standard
/// method apart (GET, PUT, POST, HEAD, PATCH, TRACE, DELETE, OPTIONS, CONNECT).
#[inline]
const fn method_code(method: &[u8]) -> u64 {
    let n = method.len();
    let first = if n > 0 { method[0] as u64 } else { 0 };
    let second = if n > 1 { method[1] as u64 } else { 0 };
    let last = if n > 0 { method[n - 1] as u64 } else { 0 };
    n as u64 | first << 8 | second << 16 | last << 24
}

const K: u64 = 0x517c_c1b7_2722_0a95;

/// The hash's state before the route's bytes, from the method's code ([`method_code`]).
#[inline(always)]
const fn start(code: u64) -> u64 {
    (0xcbf2_9ce4_8422_2325 ^ code).wrapping_mul(K)
}

/// [`route_hash`] from the method's code ([`method_code`]).
#[inline(always)]
fn route_hash_coded(code: u64, route: &[u8]) -> u64 {
    route_hash_from(start(code), route)
}

/// [`route_hash`] from the method's [`start`].
#[inline(always)]
fn route_hash_from(mut h: u64, route: &[u8]) -> u64 {
    let n = route.len();
    // The last bytes in one word, with no loop over them and no copy of a variable length
    // (a call): 1 to 3, the first, middle and last byte; 4 to 7, the first 4 and the last
    // 4; past 7, whole words, then the last 8 bytes (over the word before) when 8 does not
    // divide the length. The length is mixed in.
    let tail = if n < 4 {
        if n == 0 {
            0
        } else {
            u64::from(route[0]) | u64::from(route[n / 2]) << 8 | u64::from(route[n - 1]) << 16
        }
    } else if n < 8 {
        word4(&route[..4]) | word4(&route[n - 4..]) << 32
    } else {
        let mut chunks = route.chunks_exact(8);
        for chunk in &mut chunks {
            h = (h.rotate_left(5) ^ word8(chunk)).wrapping_mul(K);
        }
        if chunks.remainder().is_empty() {
            0
        } else {
            word8(&route[n - 8..])
        }
    };
    h = ((h ^ n as u64).rotate_left(5) ^ tail).wrapping_mul(K);
    // Odd (its warming mark, less the low bit, differs), and never 0 even less its low bit
    // (the empty slot's mark).
    h | 0b11
}

/// 8 bytes as a little-endian word.
#[inline(always)]
fn word8(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[..8]);
    u64::from_le_bytes(word)
}

/// 4 bytes as a little-endian word.
#[inline(always)]
fn word4(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[..4]);
    u64::from(u32::from_le_bytes(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_of_every_length_hash_apart() {
        // Every length from 0 to 40 (each way the last bytes are read), and routes that
        // differ in one byte only, anywhere.
        let mut seen = std::collections::HashSet::new();
        for len in 0..=40usize {
            let base: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            for at in 0..=len {
                let mut route = base.clone();
                if at < len {
                    route[at] = b'/';
                }
                seen.insert(route);
            }
        }
        let hashes: std::collections::HashSet<u64> =
            seen.iter().map(|route| route_hash(b"GET", route)).collect();
        assert_eq!(hashes.len(), seen.len());
        assert!(hashes.iter().all(|h| h & 0b11 == 0b11));
    }

    #[test]
    fn a_method_hashes_alike_by_its_fast_path_and_its_bytes() {
        use super::method_route_hash;
        let methods = [
            "GET", "POST", "PUT", "HEAD", "PATCH", "TRACE", "DELETE", "OPTIONS", "CONNECT",
            "PURGE", "X",
        ];
        for method in methods {
            let parsed = http::Method::from_bytes(method.as_bytes()).unwrap();
            for path in [
                &b"/"[..],
                b"",
                b"/users/{id}",
                b"/a/very/long/route/with/segments",
            ] {
                assert_eq!(
                    method_route_hash(&parsed, path),
                    route_hash(method.as_bytes(), path),
                    "{method} {path:?}"
                );
            }
        }
    }
}
