//! Header merge: how headers written through a handle land on a message that already has
//! headers of its own. Used by the server room (committed response headers onto the response)
//! and the client room (refreshed defaults into the defaults handle).

use http::HeaderMap;

use crate::error::Error;

/// Replaces, in `map`, every name of `new` by all of `new`'s values for it (Go's
/// `timeoutWriter` semantics); other names of `map` are kept. On error `map` may be partly
/// changed: callers run it inside a write (which publishes nothing then) or accept a partial
/// merge (`merge_lenient`).
pub(crate) fn merge_replacing(map: &mut HeaderMap, new: &HeaderMap) -> Result<(), Error> {
    if map.is_empty() {
        // Nothing to replace: the merge is `new` itself, which fits (it is a map already). One
        // clone of its two tables instead of a removal and an append (two hashes) per value
        // (`callgrind-per-op layer_timeout_write`: 10,031 -> 9,927 instructions).
        map.clone_from(new);
        return Ok(());
    }
    for name in new.keys() {
        map.remove(name);
    }
    for (name, value) in new {
        map.try_append(name.clone(), value.clone())?;
    }
    Ok(())
}

/// [`merge_replacing`] that stops quietly if `into` is full rather than failing: for a message
/// that is already committed, whose sealed record still holds every merged header.
#[cfg(feature = "server")]
pub(crate) fn merge_lenient(into: &mut HeaderMap, from: &HeaderMap) {
    if !from.is_empty() {
        let _full = merge_replacing(into, from);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_replaces_names_and_keeps_multiple_values() {
        let mut into = HeaderMap::new();
        into.insert("x-a", "inner".parse().unwrap());
        into.insert("x-keep", "inner".parse().unwrap());
        let mut from = HeaderMap::new();
        from.append("x-a", "1".parse().unwrap());
        from.append("x-a", "2".parse().unwrap());
        from.insert("x-b", "3".parse().unwrap());
        merge_replacing(&mut into, &from).unwrap();
        assert_eq!(into.get_all("x-a").iter().collect::<Vec<_>>(), ["1", "2"]);
        assert_eq!(into["x-b"], "3");
        assert_eq!(into["x-keep"], "inner");
        assert_eq!(into.len(), 4);
    }

    #[test]
    fn merge_into_an_empty_map_is_every_value_appended_in_order() {
        let mut from = HeaderMap::new();
        from.append("x-a", "1".parse().unwrap());
        from.append("x-a", "2".parse().unwrap());
        from.insert("x-b", "3".parse().unwrap());
        let mut secret: http::HeaderValue = "s".parse().unwrap();
        secret.set_sensitive(true);
        from.insert("authorization", secret);
        // The oracle: each value appended to an empty map, in `from`'s order.
        let mut appended = HeaderMap::new();
        for (name, value) in &from {
            appended.append(name.clone(), value.clone());
        }
        let mut into = HeaderMap::new();
        merge_replacing(&mut into, &from).unwrap();
        assert_eq!(into, appended);
        assert_eq!(into.get_all("x-a").iter().collect::<Vec<_>>(), ["1", "2"]);
        assert!(into["authorization"].is_sensitive());
    }

    #[cfg(feature = "server")]
    #[test]
    fn lenient_merge_replaces_like_the_strict_one() {
        let mut from = HeaderMap::new();
        from.append("x-a", "1".parse().unwrap());
        from.append("x-a", "2".parse().unwrap());
        let mut empty = HeaderMap::new();
        merge_lenient(&mut empty, &from);
        assert_eq!(empty, from);
        let mut into = HeaderMap::new();
        into.insert("x-a", "inner".parse().unwrap());
        into.insert("x-keep", "inner".parse().unwrap());
        merge_lenient(&mut into, &from);
        assert_eq!(into.get_all("x-a").iter().collect::<Vec<_>>(), ["1", "2"]);
        assert_eq!(into["x-keep"], "inner");
        assert_eq!(into.len(), 3);
    }
}
