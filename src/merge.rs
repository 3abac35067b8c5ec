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
    if from.is_empty() {
        return;
    }
    if into.is_empty() {
        // Nothing to replace: the merge is `from` itself, which fits (it is a map already).
        // One clone of its two tables instead of a removal and an append (two hashes) per
        // value (`callgrind-per-op layer_timeout_write`: 10,031 -> 9,927 instructions).
        into.clone_from(from);
        return;
    }
    let _full = merge_replacing(into, from);
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

    #[cfg(feature = "server")]
    #[test]
    fn lenient_merge_into_an_empty_map_is_the_merge() {
        let mut from = HeaderMap::new();
        from.append("x-a", "1".parse().unwrap());
        from.append("x-a", "2".parse().unwrap());
        from.insert("x-b", "3".parse().unwrap());
        let mut replaced = HeaderMap::new();
        merge_replacing(&mut replaced, &from).unwrap();
        let mut lenient = HeaderMap::new();
        merge_lenient(&mut lenient, &from);
        assert_eq!(lenient, replaced);
        assert_eq!(
            lenient.get_all("x-a").iter().collect::<Vec<_>>(),
            ["1", "2"]
        );
        // And into a non-empty map, the replacing merge.
        let mut into = HeaderMap::new();
        into.insert("x-a", "inner".parse().unwrap());
        into.insert("x-keep", "inner".parse().unwrap());
        merge_lenient(&mut into, &from);
        assert_eq!(into.get_all("x-a").iter().collect::<Vec<_>>(), ["1", "2"]);
        assert_eq!(into["x-keep"], "inner");
        assert_eq!(into.len(), 4);
    }
}
