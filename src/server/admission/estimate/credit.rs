//! The rejection credit of a slot (the cap): a sliding window of two halves in one word,
//! earned by each request and spent by each refusal.

use super::{CREDIT_UNIT, Slot};
use crate::sync::Ordering;

#[cfg(doc)]
use super::HALF_WINDOW_SECS;

/// The credit word: the credit of the current half in the top 24 bits (an earn that
/// overflows it carries out of the word, into nothing), the half-window's number (mod 2^16)
/// in the next 16, the previous half's credit in the low 24.
pub(super) const CUR_SHIFT: u32 = 40;
pub(super) const EPOCH_SHIFT: u32 = 24;
pub(super) const FIELD: u64 = (1 << 24) - 1;

impl Slot {
    /// One request's credit toward rejections: `gain` units into the current half (the one
    /// of the last rotation: no clock read here; see [`Slot::spend`]). One `fetch_add`.
    #[inline]
    pub fn earn(&self, gain: u64) {
        self.credit.fetch_add(gain << CUR_SHIFT, Ordering::Relaxed);
    }

    /// Spends one rejection's credit in half-window `epoch` (the rejection's clock reading,
    /// in [`HALF_WINDOW_SECS`]), `own` of it the rejected request's own (earned after); `false` (nothing spent) when the cap is reached. First the
    /// window rotates to `epoch`: one half on, the current half's credit becomes the
    /// previous one's; two or more, all credit has expired. So a rejection spends only
    /// credit earned at most two halves (10 s) ago, as Finagle's 10 s window; the earns since
    /// the last rotation count toward the half rotated from (rotation is lazy: the admitted
    /// path reads no clock), which can only expire credit early, never late. The credit is
    /// taken from the previous half first.
    pub fn spend(&self, epoch: u64, own: u64) -> bool {
        let epoch = epoch & 0xffff;
        let mut word = self.credit.load(Ordering::Relaxed);
        loop {
            let was = (word >> EPOCH_SHIFT) & 0xffff;
            let (mut cur, mut prev) = ((word >> CUR_SHIFT) & FIELD, word & FIELD);
            let ahead = epoch.wrapping_sub(was) & 0xffff;
            // One half behind (a racing rejection read the clock before another rotated): as
            // the window's. (A slot left alone for a multiple of 2^16 halves, 91 hours, looks
            // current: its credit, bounded, is not expired then.)
            let at = if ahead == 0xffff { was } else { epoch };
            match ahead {
                0 | 0xffff => {}
                1 => (cur, prev) = (0, cur),
                _ => (cur, prev) = (0, 0),
            }
            // The request's own credit counts (it is earned just after).
            let cost = CREDIT_UNIT.saturating_sub(own);
            let spent = cur + prev >= cost;
            if spent {
                let from_prev = prev.min(cost);
                prev -= from_prev;
                cur -= cost - from_prev;
            }
            let next = cur << CUR_SHIFT | at << EPOCH_SHIFT | prev;
            if next == word {
                return spent;
            }
            match self.credit.compare_exchange_weak(
                word,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return spent,
                Err(now) => word = now,
            }
        }
    }
}

impl Slot {
    /// The negative control of the credit's model (loom only): [`Slot::spend`] as a load and
    /// a store, which two racing refusals can both pass with one unit of credit.
    #[cfg(shared_headers_loom)]
    pub fn spend_broken(&self, own: u64) -> bool {
        let word = self.credit.load(Ordering::Relaxed);
        let (cur, prev) = ((word >> CUR_SHIFT) & FIELD, word & FIELD);
        let cost = CREDIT_UNIT.saturating_sub(own);
        if cur + prev < cost {
            return false;
        }
        let from_prev = prev.min(cost);
        let next = (cur - (cost - from_prev)) << CUR_SHIFT
            | (word & (0xffff << EPOCH_SHIFT))
            | (prev - from_prev);
        self.credit.store(next, Ordering::Relaxed);
        true
    }
}
