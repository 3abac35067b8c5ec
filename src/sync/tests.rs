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
