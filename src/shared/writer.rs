//! A write in progress and its publishing steps: `publish`, `store` and `seal_as_is`, under the
//! writer lock, with the admission of the new map (its limits, and its secret values flagged).

use std::sync::Arc;

use http::{HeaderMap, HeaderName, HeaderValue};

use super::{Shared, WriterSlot};
use crate::error::Error;
use crate::policy::Policy;
use crate::snapshot::{Snapshot, State};
use crate::sync::Ordering;
use crate::writer_lock::WriterGuard;

/// Below this many values, `HeaderMap::entry` cannot fail. `entry` panics only if making room
/// for one more entry would grow the index table past `HeaderMap`'s limit of 32,768 slots; a
/// map of fewer than 1,024 values grows it at most to 2,048 (when full), or to 8,192 (when its
/// hashes collide and it doubles early, at 5 slots per entry), whatever its capacity was.
/// At and above it, `insert` and `append` take the fallible `try_insert`/`try_append` path.
pub(super) const ENTRY_SAFE_LEN: usize = 1024;

/// Below this many values, `insert` and `append` rescan instead of using `HeaderMap::entry`:
/// rescanning a map that small costs less than `entry`'s extra work for a new name
/// (`scripts/callgrind-per-op raw_locked insert_shared:4`: the request-scoped pattern's two
/// inserts into an empty map are 180 instructions cheaper by rescanning, a replacing insert on
/// 4 headers 120 instructions cheaper through `entry`).
pub(super) const SCAN_BELOW: usize = 4;

/// `value`, flagged sensitive if `name` is secret under `policy` (see
/// [`mark_secrets`](crate::policy::mark_secrets)).
#[inline]
pub(super) fn flagged(
    name: &HeaderName,
    mut value: HeaderValue,
    policy: Option<&Policy>,
) -> HeaderValue {
    if !value.is_sensitive() && crate::policy::is_sensitive_name(name, policy) {
        value.set_sensitive(true);
    }
    value
}

/// What the publishing step checks of a new map: everything (`Rescan`: flag every secret
/// value, after a closure or a whole map that may have added any), or only the limits
/// (`Flagged`: the write flagged the one value it added, and the rest of the map is a published
/// version's, flagged when it was published).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Scan {
    Rescan,
    Flagged,
}

/// Whether a write refused because the headers are sealed counts in
/// [`SharedHeaders::refused_writes`]: every write does (a late `seal_with` included); a plain
/// second [`SharedHeaders::seal`] is not a write and does not.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    Counted,
    Uncounted,
}

/// A write in progress. It holds the writer lock, whose value is the current (unsealed)
/// version, so that version stays current until one of the publishing steps replaces it.
pub(super) struct Writer<'a> {
    pub(super) shared: &'a Shared,
    pub(super) current: WriterGuard<'a, WriterSlot>,
}

impl Writer<'_> {
    /// The version this write replaces.
    #[inline]
    pub(super) fn base(&self) -> &State {
        &self.current.current
    }

    /// Publishes `map` as the next version (sealed or not), if the handle's policy admits it,
    /// and returns its snapshot.
    pub(super) fn publish(self, map: HeaderMap, sealed: bool) -> Result<Snapshot, Error> {
        self.store_then(map, sealed, Scan::Rescan, |next| {
            Snapshot::from_state(Arc::clone(next))
        })
    }

    /// Publishes `map` as the next version, if the handle's policy admits it.
    #[inline]
    pub(super) fn store(self, map: HeaderMap, sealed: bool, scan: Scan) -> Result<(), Error> {
        self.store_then(map, sealed, scan, |_| ())
    }

    /// Seals the current version in place: no copy, no allocation, no store. Readers that load
    /// it from now on see it sealed at `version + 1`; snapshots taken before keep what they read.
    pub(super) fn seal_as_is(self) -> Snapshot {
        if let Some(twin) = &self.current.current.sealed_twin {
            // The shared empty version is never sealed in place: publish its sealed twin.
            let twin = Arc::clone(twin);
            let Writer {
                shared,
                current: mut slot,
            } = self;
            let replaced = shared.current.swap(Arc::clone(&twin));
            let writers = std::mem::replace(&mut slot.current, Arc::clone(&twin));
            drop(slot);
            drop((replaced, writers));
            return Snapshot::from_state(twin);
        }
        let base = Arc::clone(&self.current.current);
        // Release, paired with `State::seal`'s Acquire: a later seal implies every earlier one.
        // The seal publishes no data of its own (the map was published with its version, and
        // writers read the seal under the writer lock this thread holds), but a thread that
        // seals two handles in order (`Exchange::commit`: the request, then the response) must
        // not let a reader that sees the second seal miss the first. Nothing else orders them
        // for a reader that learns of the seal only by polling `is_sealed`: with this store (or
        // the load) `Relaxed`, loom's `a_later_seal_implies_every_earlier_one` (the reader
        // spawned) reaches "response sealed, request not" and fails.
        base.sealed_as.store(base.version + 1, Ordering::Release);
        drop(self);
        Snapshot::from_state(base)
    }

    /// Publishes `map` as the next version, if the handle's policy admits it, and returns what
    /// `then` makes of it, still under the writer lock.
    #[inline]
    pub(super) fn store_then<R>(
        self,
        mut map: HeaderMap,
        sealed: bool,
        scan: Scan,
        then: impl FnOnce(&Arc<State>) -> R,
    ) -> Result<R, Error> {
        let Writer {
            shared,
            current: mut slot,
        } = self;
        let base = &slot.current;
        match scan {
            Scan::Rescan => crate::policy::admit(base.policy.as_deref(), &mut map)?,
            Scan::Flagged => crate::policy::check_limits(base.policy.as_deref(), &map)?,
        }
        let (version, policy) = (base.version + 1, base.policy.clone());
        // Reuse the allocation of a version replaced earlier, if there is one (emptied when it
        // was replaced: its map was freed then).
        let next = match slot.spare.take() {
            Some(mut shell) => match Arc::get_mut(&mut shell) {
                Some(spare) => {
                    let empty = std::mem::replace(&mut spare.map, map);
                    // `HeaderMap::new()` (what the shell holds) "will not allocate", so there is
                    // nothing to free: skip its destructor.
                    std::mem::forget(empty);
                    spare.version = version;
                    spare
                        .sealed_as
                        .store(if sealed { version } else { 0 }, Ordering::Relaxed);
                    spare.policy = policy;
                    shell
                }
                None => Arc::new(State::new(map, version, sealed, policy)),
            },
            None => Arc::new(State::new(map, version, sealed, policy)),
        };
        let result = then(&next);
        let mut replaced = shared.current.swap(Arc::clone(&next));
        drop(std::mem::replace(&mut slot.current, next)); // the writer's reference to it
        // Nobody else holds the replaced version (no reader, no snapshot): keep its allocation
        // for the next write, and free its map now (below, unlocked), as without the reuse.
        // Never a shared empty version (`State::empty`): once its thread's locals are gone, this
        // handle may hold its last reference, and reusing it would carry its sealed twin into a
        // later version (whose seal would then publish the twin: an empty map, a lower version).
        let freed = Arc::get_mut(&mut replaced)
            .filter(|dead| dead.sealed_twin.is_none())
            .map(|dead| {
                dead.policy = None;
                std::mem::take(&mut dead.map)
            });
        let shared_with_others = if freed.is_some() {
            slot.spare = Some(replaced);
            None
        } else {
            Some(replaced)
        };
        drop(slot); // unlock before freeing the previous version
        drop(freed);
        drop(shared_with_others);
        Ok(result)
    }
}
