//! The rejection credit of a slot (the cap): a sliding window of two halves in one word,
//! earned by each request and spent by each refusal.
//!
//! It decides whether a refusal may be spent (the cap: a fifth of a route's requests of the
//! last 10 s, at the default ratio), one compare-and-swap loop so that two racing refusals
//! never both spend the last unit, and earns by one `fetch_add`. It relies on the slot's
//! credit word only, and on its caller for the half-window's number (the admitted path
//! reads no clock).

use super::slot::Slot;
use crate::sync::Ordering;

/// One credit unit per request is `ratio * CREDIT_UNIT`; a rejection costs `CREDIT_UNIT`.
pub const CREDIT_UNIT: u64 = 100;

/// The cap's window: two halves of this many seconds (Finagle's `DeadlineFilter`: 10 s).
pub const HALF_WINDOW_SECS: u64 = 5;

/// The credit word: the credit of the current half in the top 24 bits (an earn that
/// overflows it carries out of the word, into nothing), the half-window's number (mod 2^16)
/// in the next 16, the previous half's credit in the low 24.
const CUR_SHIFT: u32 = 40;
const EPOCH_SHIFT: u32 = 24;
const FIELD: u64 = (1 << 24) - 1;

impl Slot {
    /// One request's credit toward rejections: `gain` units into the current half (the one
    /// of the last rotation: no clock read here; see [`Slot::spend`]). One `fetch_add`.
    #[inline]
    pub fn earn(&self, gain: u64) {
        self.credit.fetch_add(gain << CUR_SHIFT, Ordering::Relaxed);
    }

    /// Spends one rejection's credit in half-window `epoch` (the rejection's clock reading,
    /// in [`HALF_WINDOW_SECS`]), `own` of it the rejected request's own (earned after);
    /// `false` (nothing spent) when the cap is reached. First the window rotates to `epoch`:
    /// one half on, the current half's credit becomes the previous one's; two or more, all
    /// credit has expired. So a rejection spends only credit earned at most two halves (10 s)
    /// ago, as Finagle's 10 s window; the earns since the last rotation count toward the half
    /// rotated from (rotation is lazy: the admitted path reads no clock), which can only
    /// expire credit early, never late. The credit is taken from the previous half first.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_credit() {
        let slot = Slot::default();
        assert!(!slot.spend(0, 0));
        for _ in 0..5 {
            slot.earn(CREDIT_UNIT / 5);
        }
        assert!(slot.spend(0, 0));
        assert!(!slot.spend(0, 0));
    }

    #[test]
    fn the_cap_is_a_fifth_of_the_requests_of_a_ten_second_window() {
        let slot = Slot::default();
        let fifth = CREDIT_UNIT / 5;
        let earn = |n: usize| (0..n).for_each(|_| slot.earn(fifth));
        // Half-window 0: ten requests, two rejections.
        earn(10);
        assert_eq!(
            (slot.spend(0, 0), slot.spend(0, 0), slot.spend(0, 0)),
            (true, true, false)
        );
        // Half-window 1: five more requests (counted toward the half rotated from), one more.
        earn(5);
        assert_eq!((slot.spend(1, 0), slot.spend(1, 0)), (true, false));
        // A clock reading behind the window's (a racing rejection): as now, no rotation.
        earn(5);
        assert_eq!((slot.spend(0, 0), slot.spend(1, 0)), (true, false));
        // Credit of a window 10 s and more ago has expired: ten requests, then a gap.
        earn(10);
        assert!(!slot.spend(3, 0), "credit from two halves ago expired");
        earn(5);
        assert_eq!((slot.spend(3, 0), slot.spend(3, 0)), (true, false));
        // One half on, the current half's credit is the previous one's, still usable.
        earn(10);
        assert_eq!(
            (slot.spend(4, 0), slot.spend(4, 0), slot.spend(4, 0)),
            (true, true, false)
        );
        // The half-window number wraps (16 bits): still one half on.
        let slot = Slot::default();
        assert!(!slot.spend(0xfffe, 0));
        let earn = |n: usize| (0..n).for_each(|_| slot.earn(fifth));
        earn(5);
        assert!(slot.spend(0xffff, 0));
        earn(5);
        assert!(slot.spend(0x1_0000, 0), "0xffff -> 0x10000 is one half on");
        earn(5);
        assert!(!slot.spend(0x1_0002, 0), "two halves on: expired");
    }

    #[test]
    fn a_half_that_overflows_never_carries_into_the_epoch() {
        let slot = Slot::default();
        assert!(!slot.spend(7, 0));
        for _ in 0..=(FIELD / CREDIT_UNIT) {
            slot.earn(CREDIT_UNIT);
        }
        let word = slot.credit.load(Ordering::Relaxed);
        assert_eq!(((word >> EPOCH_SHIFT) & 0xffff, word & FIELD), (7, 0));
        assert!((word >> CUR_SHIFT) < CREDIT_UNIT, "wrapped to less");
    }
}
