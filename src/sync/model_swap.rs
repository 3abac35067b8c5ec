//! Under loom and shuttle, the `LockFree` cell's stand-in for `arc_swap::ArcSwap` (see
//! [`ModelSwap`]): a part of [`sync`](super), built on its model primitives.

use std::sync::Arc;

use super::model;

/// Under loom, the `LockFree` strategy's stand-in for `arc_swap::ArcSwap`: it gives only what
/// arc-swap 1.9.5 documents, so that the sequence count's own orderings are what a model checks.
///
/// arc-swap's `docs` module, "Atomic orderings": "Each operation on the `ArcSwapAny` with
/// `DefaultStrategy` type callable concurrently (eg. `load`, but not `into_inner`) contains at
/// least one `SeqCst` atomic read-write operation, therefore even operations on different
/// instances have a defined global order of operations." Nothing more is promised about which
/// word that operation touches (in 1.9.5 a `load` reads the pointer with `SeqCst` loads and does
/// its read-write on a debt slot, not on the pointer). The stand-in is one loom word holding the
/// index of the current value: `swap` is a `SeqCst` swap of it (a read-write), `load` a `SeqCst`
/// load of it, which is no stronger than the documented guarantee (a load that does not read
/// the swap's value, or a swap ordered after it, gets no happens-before from it, and loom may
/// give a load an older value while nothing orders it after the swap). The values themselves
/// sit in a `std::sync::Mutex<Vec<_>>` used only as storage, as the once-cell stand-in's value
/// (loom runs its threads one at a time and does not model `std`'s locks, so it adds nothing
/// loom could credit; it is never held across a loom operation). Values are kept until the cell
/// is dropped, so a stale index always finds its value; no model here counts version drops.
pub(super) struct ModelSwap<T> {
    current: model::sync::atomic::AtomicUsize,
    values: std::sync::Mutex<Vec<Arc<T>>>,
}

impl<T> ModelSwap<T> {
    pub(super) fn new(value: Arc<T>) -> Self {
        ModelSwap {
            current: model::sync::atomic::AtomicUsize::new(0),
            values: std::sync::Mutex::new(vec![value]),
        }
    }

    fn value(&self, index: usize) -> Arc<T> {
        let values = self
            .values
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(&values[index])
    }

    pub(super) fn load_full(&self) -> Arc<T> {
        self.value(self.current.load(model::sync::atomic::Ordering::SeqCst))
    }

    pub(super) fn swap(&self, value: Arc<T>) -> Arc<T> {
        let index = {
            let mut values = self
                .values
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            values.push(value);
            values.len() - 1
        };
        let old = self
            .current
            .swap(index, model::sync::atomic::Ordering::SeqCst);
        self.value(old)
    }

    pub(super) fn into_inner(self) -> Arc<T> {
        let index = self.current.load(model::sync::atomic::Ordering::Relaxed);
        self.value(index)
    }
}
