//! The hash of a route: its method and its route template (axum's `MatchedPath`, else the
//! path) in one 64-bit word, the key of the table of slots.
//!
//! It decides which words a route has: odd, and never 0 less its low bit (a slot's marks
//! for warming and empty, [`Slot`](super::slot::Slot)'s route word). It relies on nothing but the
//! bytes: no allocation, no table of methods.

/// The hash of a route: the method and the route (axum's `MatchedPath`, else the path).
/// FNV-style over 8-byte words: a few instructions per 8 bytes, no allocation. Low bits 0b11: see
/// [`Slot`](super::slot::Slot)'s route word.
#[inline]
pub fn route_hash(method: &[u8], route: &[u8]) -> u64 {
    route_hash_coded(method_code(method), route)
}

/// [`route_hash`] of a request's method: GET's and POST's codes without `Method::as_str`'s
/// jump table (the admitted path's most common methods), the same hash.
#[inline]
pub fn method_route_hash(method: &http::Method, route: &[u8]) -> u64 {
    let code = if *method == http::Method::GET {
        const { method_code(b"GET") }
    } else if *method == http::Method::POST {
        const { method_code(b"POST") }
    } else {
        method_code(method.as_str().as_bytes())
    };
    route_hash_coded(code, route)
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

/// [`route_hash`] from the method's code ([`method_code`]).
#[inline]
fn route_hash_coded(code: u64, route: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h: u64 = (0xcbf2_9ce4_8422_2325 ^ code).wrapping_mul(K);
    let mut chunks = route.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
    }
    // The tail byte by byte (at most 7): a copy of a variable length would be a call.
    let rest = chunks.remainder();
    let word = rest
        .iter()
        .fold(rest.len() as u64, |w, &b| (w << 8) | u64::from(b));
    h = (h.rotate_left(5) ^ word).wrapping_mul(K);
    // Odd (its warming mark, less the low bit, differs), and never 0 even less its low bit
    // (the empty slot's mark).
    h | 0b11
}

#[cfg(test)]
mod tests {
    use super::*;

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
