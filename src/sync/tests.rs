//! Unit tests of the sequence count, the consistent read, the cached reader, the strategies and
//! the once-cell (the real primitives; the loom models test the stand-ins).

//! The sequence count and the reader's cache, seen from inside (single-threaded: the odd
//! phase of a swap in progress is set by hand; `tests/miri.rs` races real swaps).

use super::*;

#[derive(Clone)]
struct Cell(Arc<Published<u32>>);

impl Holder for Cell {
    type Item = u32;
    fn published(&self) -> &Published<u32> {
        &self.0
    }
}

fn cells() -> [Cell; 2] {
    [Strategy::LockFree, Strategy::Locked]
        .map(|strategy| Cell(Arc::new(Published::new(Arc::new(0), strategy))))
}

#[test]
fn each_swap_adds_two_to_the_count_and_returns_the_previous_value() {
    for cell in cells() {
        let published = &cell.0;
        assert_eq!(published.stores.load(Ordering::Relaxed), 0);
        assert_eq!(*published.swap(Arc::new(1)), 0);
        assert_eq!(published.stores.load(Ordering::Relaxed), 2);
        assert_eq!(*published.swap(Arc::new(2)), 1);
        assert_eq!(published.stores.load(Ordering::Relaxed), 4);
        assert_eq!((*published.load(), published.peek(|v| *v)), (2, 2));
        assert_eq!(*published.load_full(), 2);
    }
}

#[test]
fn a_consistent_read_keeps_an_even_count_and_refuses_an_odd_one() {
    for cell in cells() {
        let published = &cell.0;
        assert_eq!(consistent(published), (0, Arc::new(0)));
        published.swap(Arc::new(7));
        assert_eq!(consistent(published), (2, Arc::new(7)));
        // A swap in progress (odd count): the value is whole, its count unknown.
        published.stores.store(3, Ordering::Relaxed);
        assert_eq!(consistent(published), (u64::MAX, Arc::new(7)));
    }
}

#[test]
fn a_cached_reader_reloads_only_when_the_count_moved() {
    for cell in cells() {
        let mut cached = Cached::new(cell.clone());
        assert_eq!(cached.stores, 0);
        let first = Arc::clone(cached.load());
        assert!(
            Arc::ptr_eq(&first, cached.load()),
            "reloaded while unchanged"
        );
        cell.0.swap(Arc::new(1));
        assert_eq!(**cached.load(), 1);
        assert_eq!(cached.stores, 2);
        let clone = cached.clone();
        assert_eq!((clone.stores, *clone.value), (2, 1));
        // Filled during a swap: the next load loads again, and then caches the count.
        cell.0.stores.store(3, Ordering::Relaxed);
        let mut during = Cached::new(cell.clone());
        assert_eq!(during.stores, u64::MAX);
        cell.0.stores.store(4, Ordering::Relaxed);
        assert_eq!(**during.load(), 1);
        assert_eq!(during.stores, 4);
    }
}

#[test]
fn each_cell_reports_its_strategy_and_gives_its_value_back() {
    #[cfg(not(feature = "rwlock-backend"))]
    let lock_free = Strategy::LockFree;
    #[cfg(feature = "rwlock-backend")]
    let lock_free = Strategy::Locked;
    let [a, b] = cells();
    assert_eq!(a.0.strategy(), lock_free);
    assert_eq!(b.0.strategy(), Strategy::Locked);
    for cell in [a, b] {
        cell.0.swap(Arc::new(5));
        let published = Arc::into_inner(cell.0).unwrap();
        assert_eq!(*published.into_inner(), 5);
    }
}

#[test]
fn the_once_cell_keeps_the_first_value() {
    let cell = OnceCell::new();
    assert_eq!(cell.get(), None);
    assert_eq!(cell.get_ref(), None);
    assert!(cell.set(1));
    assert!(!cell.set(2));
    assert_eq!((cell.get(), cell.get_ref()), (Some(1), Some(&1)));
}

#[test]
fn debug_names_the_type_and_nothing_inside() {
    let [cell, _] = cells();
    assert_eq!(format!("{:?}", cell.0), "Published { .. }");
    assert_eq!(format!("{:?}", Cached::new(cell)), "Cached { .. }");
    assert_eq!(format!("{:?}", OnceCell::<u8>::new()), "OnceCell { .. }");
}

// ---------------------------------------------------------------------------------------------
// The per-thread read cache of `Locked` cells
// ---------------------------------------------------------------------------------------------

crate::sync::read_cache!(u32);

fn locked(value: u32) -> Published<u32> {
    Published::new(Arc::new(value), Strategy::Locked)
}

/// What this thread's slot holds: (id, count, value).
fn slot() -> Option<(u64, u64, u32)> {
    u32::read_cache().with(|slot| slot.borrow().as_ref().map(|c| (c.id, c.stores, *c.value)))
}

#[test]
#[allow(irrefutable_let_patterns)] // `rwlock-backend`: every cell is `Locked`
fn a_locked_read_fills_the_slot_and_a_swap_makes_the_next_read_reload() {
    let cell = locked(1);
    assert_eq!(cell.peek(|v| *v), 1);
    let super::Cell::Locked(inner) = &cell.cell else {
        unreachable!("a Locked cell")
    };
    let id = inner.key.get();
    assert_ne!(id, 0, "an id is given when the cell is first cached");
    assert_eq!(slot(), Some((id, 0, 1)));
    assert_eq!(cell.peek(|v| *v), 1, "a hit");
    cell.swap(Arc::new(2));
    assert_eq!(
        slot(),
        Some((id, 0, 1)),
        "the slot is not touched by the swap"
    );
    assert_eq!(cell.peek(|v| *v), 2, "the count moved: the read reloads");
    assert_eq!(slot(), Some((id, 2, 2)));
    assert_eq!(*cell.load_full(), 2);
    cell.swap(Arc::new(3));
    assert_eq!(*cell.load_full(), 3, "load_full reloads too");
    assert_eq!(slot(), Some((id, 4, 3)));
}

/// Seeded bug this catches: a slot keyed by the count alone (or by the cell's address) serves
/// one cell's value for another cell at the same count.
#[test]
fn cells_at_the_same_count_never_share_a_cached_value() {
    for _ in 0..8 {
        let a = locked(1);
        assert_eq!(a.peek(|v| *v), 1);
        drop(a); // the next cell may well reuse its address
        let b = locked(2);
        let c = locked(3);
        assert_eq!(b.peek(|v| *v), 2);
        assert_eq!(c.peek(|v| *v), 3);
        assert_eq!(*b.load_full(), 2);
        assert_eq!(c.peek(|v| *v), 3);
    }
}

/// Seeded bug this catches: caching a value loaded while a swap was in progress (odd count),
/// or whose count moved while it was loaded, under that count.
#[test]
fn a_read_that_overlaps_a_swap_is_not_cached() {
    let cell = locked(1);
    cell.stores.store(3, Ordering::Relaxed); // a swap in progress
    assert_eq!(cell.peek(|v| *v), 1);
    assert_eq!(*cell.load_full(), 1);
    assert_eq!(
        slot().map(|(_, stores, _)| stores),
        None,
        "cached at an odd count"
    );
}

/// Seeded bug this catches: a drop that leaves the cell's value in the dropping thread's slot
/// (it would keep the version alive until this thread's next `Locked` read).
#[test]
fn dropping_a_cell_clears_this_threads_slot_if_it_holds_the_cell() {
    let (a, b) = (locked(1), locked(2));
    a.peek(|v| *v);
    assert!(slot().is_some());
    drop(b); // another cell: the slot stays
    assert!(slot().is_some());
    let value = a.load_full();
    drop(a);
    assert_eq!(slot(), None);
    assert_eq!(
        Arc::strong_count(&value),
        1,
        "the slot released the version"
    );
    // A cell taken apart clears it too.
    let c = locked(4);
    c.peek(|v| *v);
    let value = c.into_inner();
    assert_eq!(slot(), None);
    assert_eq!(Arc::strong_count(&value), 1);
}

/// Seeded bug this catches: a panicking `borrow`/`borrow_mut` of the slot (a nested read
/// during a hit, or a read from a destructor run while the slot is replaced).
#[test]
fn reads_nested_in_a_read_and_a_panicking_reader_leave_the_slot_usable() {
    let (a, b) = (locked(1), locked(2));
    a.peek(|v| *v);
    // Inside a hit on `a` (the slot is borrowed): a hit on `a` again, a miss on `b` (read
    // under the lock, not cached: the slot is busy) and a nested `load_full`.
    let seen = a.peek(|outer| {
        let inner = a.peek(|v| *v);
        let other = b.peek(|v| *v);
        (*outer, inner, other, *b.load_full())
    });
    assert_eq!(seen, (1, 1, 2, 2));
    assert_eq!(
        slot().map(|(_, _, v)| v),
        Some(1),
        "the nested miss did not replace it"
    );
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        a.peek(|v| {
            if *v == 1 {
                panic!("a reader's panic");
            }
        });
    }));
    assert!(caught.is_err());
    assert_eq!(b.peek(|v| *v), 2, "the slot is usable after the panic");
    assert_eq!(slot().map(|(_, _, v)| v), Some(2));
}

#[test]
#[allow(irrefutable_let_patterns)] // `rwlock-backend`: every cell is `Locked`
fn ids_are_unique_across_threads() {
    let ids = |n| {
        (0..n)
            .map(|_| {
                let cell = locked(0);
                let super::Cell::Locked(inner) = &cell.cell else {
                    unreachable!("a Locked cell")
                };
                inner.key.get_or_give()
            })
            .collect::<Vec<_>>()
    };
    let mut all: Vec<u64> = std::thread::scope(|s| {
        let other = s.spawn(|| ids(1100)); // past one block of ids each
        let mut mine = ids(1100);
        mine.extend(other.join().unwrap());
        mine
    });
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 2200);
    assert!(!all.contains(&0));
}

/// Seeded bug this catches: a reader that frees the replaced version it held the last reference
/// to (mid-read, and a whole map under a busy writer) instead of handing it back to the writer.
#[test]
fn a_reader_holding_the_last_reference_hands_the_version_back_to_the_next_swap() {
    let cell = locked(1);
    assert_eq!(cell.peek(|v| *v), 1); // this thread's cache holds version 1
    let second = Arc::new(2); // the writer's own reference, as the writer lock's slot
    drop(cell.swap(Arc::clone(&second))); // version 1: now only in the cache
    assert_eq!(cell.peek(|v| *v), 2, "a miss: caches 2, hands 1 back");
    let back = cell.swap(Arc::new(3));
    assert_eq!(*back, 1, "the swap returns the handed-back version");
    assert_eq!(
        Arc::strong_count(&back),
        1,
        "for the writer to free or reuse"
    );
    assert_eq!(
        Arc::strong_count(&second),
        2,
        "the writer's and the cache's"
    );
    assert_eq!(cell.peek(|v| *v), 3);
}
