//! Whether a response body that holds a permit still produces frames ([`Stalls`]): the words
//! the streaming bodies of one admission and the deadline thread share, so that a body that
//! has produced no frame for a while gives its permit back, exactly once, and allocates
//! nothing to be watched.
//!
//! One word per slot, a fixed array made with the admission (as many slots as its most
//! permits, at most [`MOST_SLOTS`]). A body takes a free slot at its first frame of data short
//! of its end ([`Stalls::claim`]), and counts each further frame in it ([`Stalls::framed`]);
//! the deadline thread looks at every held slot every so often ([`Stalls::look`]), and a slot
//! whose word did not change for the looks its body asked for (its body produced no frame
//! meanwhile: it waits on its reader, who stopped reading, or on its handler, which has no
//! event yet) is freed and its permit given back. Every change of a held word is a
//! compare-and-swap from the word its writer last saw: the body's frames, the body's drop
//! ([`Stalls::give_back`]) and the look's release, so of a drop and a look exactly one frees
//! the slot and gives the permit back. A freed slot's generation goes up, so a body whose slot
//! a look freed (and another body took) cannot touch it again.
//!
//! Whether the thread looks ([`Stalls::arm`], [`Stalls::keep_looking`]): one look in the
//! thread's queue at a time for the whole array, while a slot is held. One word counts the
//! held slots and says whether a look is queued: a claim counts itself and sets the flag (it
//! arms a look if the flag was clear), every freeing counts itself out, and a look stops
//! only by clearing the flag while the count is 0 (compare-and-swaps on the one word: a claim
//! and the last look's stop are ordered, so exactly one look stays queued for a held slot).

use crate::sync::{AtomicU64, AtomicUsize, Mutex, Ordering};

/// The most slots of an admission: bodies past it (a limit above it, all of them streaming at
/// once) are not watched (their permits come back at their drop).
pub const MOST_SLOTS: usize = 1024;

/// A slot is held by a body.
const HELD: u64 = 1;
/// The looks without a change that free a held slot, in bits 1-4.
const QUIET_SHIFT: u32 = 1;
const QUIET: u64 = 0b1111 << QUIET_SHIFT;
/// The body's frames since it took the slot, in bits 5-31 (wrapping).
const FRAME: u64 = 1 << 5;
const FRAMES: u64 = ((1 << 27) - 1) << 5;
/// The slot's generation, in bits 32-63: up by one each time it is freed.
const GENERATION: u64 = 1 << 32;

/// The slots of one admission's streaming bodies, and the thread's memory of them.
#[derive(Debug)]
pub struct Stalls {
    words: Box<[AtomicU64]>,
    /// Where the next claim starts looking (a hint: loads and stores).
    next: AtomicUsize,
    /// The held slots, times 2, plus 1 while a look is in the thread's queue.
    watched: AtomicU64,
    /// What the looks saw: per slot, its word at the last look and the looks since it last
    /// changed. Only the looks take it (one at a time: one entry in the thread's queue).
    seen: Mutex<Box<[Seen]>>,
}

/// A look's memory of a slot.
#[derive(Debug, Default, Clone, Copy)]
pub struct Seen {
    word: u64,
    quiet: u64,
}

/// A body's hold on its slot: the slot and the word it last wrote there.
#[derive(Debug)]
pub struct Claim {
    index: usize,
    word: u64,
}

/// The word of a slot once freed: no body, the next generation.
#[inline]
fn freed(word: u64) -> u64 {
    (word & !(GENERATION - 1)).wrapping_add(GENERATION)
}

impl Stalls {
    /// `slots` slots (at most [`MOST_SLOTS`]), all free.
    pub fn new(slots: usize) -> Stalls {
        let slots = slots.min(MOST_SLOTS);
        Stalls {
            words: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            next: AtomicUsize::new(0),
            watched: AtomicU64::new(0),
            seen: Mutex::new(vec![Seen::default(); slots].into_boxed_slice()),
        }
    }

    /// A body's first frame short of its end: it takes a free slot, to be freed (and its
    /// permit given back) after `quiet` looks (1 to 15) find no new frame. `None`: every slot
    /// is held (the body is not watched).
    pub fn claim(&self, quiet: u64) -> Option<Claim> {
        let slots = self.words.len();
        let start = self.next.load(Ordering::Relaxed);
        for step in 0..slots {
            let mut index = start + step;
            if index >= slots {
                index -= slots;
            }
            let old = self.words[index].load(Ordering::Relaxed);
            if old & HELD != 0 {
                continue;
            }
            let word = (old & !(GENERATION - 1)) | (quiet.clamp(1, 15) << QUIET_SHIFT) | HELD;
            if self.words[index]
                .compare_exchange(old, word, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
            {
                self.next.store(index + 1, Ordering::Relaxed);
                return Some(Claim { index, word });
            }
        }
        None
    }

    /// After a claim: counts the held slot; whether the caller must put a look in the
    /// thread's queue (none is there).
    pub fn arm(&self) -> bool {
        let old = self
            .watched
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |w| Some((w + 2) | 1))
            .unwrap_or_else(|w| w);
        old & 1 == 0
    }

    /// A slot freed (by the drop or a look): counted out.
    #[inline]
    fn freed_one(&self) {
        self.watched.fetch_sub(2, Ordering::AcqRel);
    }

    /// Another frame of the body: `false` if a look freed its slot (its permit was given
    /// back: the body is no longer watched).
    #[inline]
    pub fn framed(&self, claim: &mut Claim) -> bool {
        let word = (claim.word & !FRAMES) | (claim.word.wrapping_add(FRAME) & FRAMES);
        let done = self.words[claim.index]
            .compare_exchange(claim.word, word, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok();
        claim.word = word;
        done
    }

    /// The body's drop: frees its slot; `true` if no look freed it first (the drop gives
    /// the permit back).
    #[inline]
    pub fn give_back(&self, claim: Claim) -> bool {
        let freed_now = self.words[claim.index]
            .compare_exchange(
                claim.word,
                freed(claim.word),
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_ok();
        if freed_now {
            self.freed_one();
        }
        freed_now
    }

    /// The thread's look at every held slot: a slot unchanged for the looks its body asked
    /// for is freed and `release` called (its permit given back). Returns whether a slot is
    /// still held.
    pub fn look(&self, release: &mut dyn FnMut()) -> bool {
        self.look_with(release, false)
    }

    /// [`Stalls::look`], the release a load and a store in the negative control.
    fn look_with(&self, release: &mut dyn FnMut(), broken: bool) -> bool {
        let mut seen = self.seen.lock();
        let mut held = false;
        for (slot, seen) in self.words.iter().zip(seen.iter_mut()) {
            let word = slot.load(Ordering::Relaxed);
            if word & HELD == 0 {
                continue;
            }
            if word != seen.word {
                *seen = Seen { word, quiet: 0 };
                held = true;
                continue;
            }
            seen.quiet += 1;
            if seen.quiet < (word & QUIET) >> QUIET_SHIFT {
                held = true;
                continue;
            }
            let freed_now = if broken {
                #[cfg(shared_headers_loom)]
                slot.store(freed(word), Ordering::Relaxed);
                true
            } else {
                slot.compare_exchange(word, freed(word), Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            };
            if freed_now {
                self.freed_one();
                release();
            } else {
                held = true;
            }
        }
        held
    }

    /// After a look: whether the thread looks again (a slot is held); if not, the look
    /// stops (the flag cleared while no slot is held: the next claim arms a look).
    pub fn keep_looking(&self) -> bool {
        self.watched
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |w| {
                (w >> 1 == 0).then_some(w & !1)
            })
            .is_err()
    }

    /// The negative control of the loom model of the arming: the look stops on what its
    /// scan saw (`held`), the flag cleared whatever the count (a claim counted meanwhile,
    /// which found the flag set, is never looked at).
    #[cfg(shared_headers_loom)]
    pub fn keep_looking_broken(&self, held: bool) -> bool {
        if !held {
            self.watched.fetch_and(!1, Ordering::AcqRel);
        }
        held
    }

    /// Marks a look as in the thread's queue (the loom models start from it).
    #[cfg(shared_headers_loom)]
    pub fn armed_already(&self) {
        self.watched.fetch_or(1, Ordering::AcqRel);
    }

    /// The negative control of the loom model: [`Stalls::look`] whose release is a load and
    /// a store.
    #[cfg(shared_headers_loom)]
    pub fn look_broken(&self, release: &mut dyn FnMut()) -> bool {
        self.look_with(release, true)
    }
}

#[cfg(all(test, not(shared_headers_loom)))]
mod tests {
    use super::*;

    fn looks(stalls: &Stalls, n: usize) -> (usize, bool) {
        let mut released = 0;
        let mut held = false;
        for _ in 0..n {
            held = stalls.look(&mut || released += 1);
        }
        (released, held)
    }

    #[test]
    fn a_slot_unchanged_for_its_looks_is_freed_once() {
        let stalls = Stalls::new(2);
        let claim = stalls.claim(2).unwrap();
        assert!(stalls.arm());
        let other = stalls.claim(2).unwrap();
        assert!(!stalls.arm(), "armed once");
        assert!(stalls.give_back(other));
        // The first look sees the word, two more without a change free it.
        assert_eq!(looks(&stalls, 2), (0, true));
        assert_eq!(looks(&stalls, 1), (1, false));
        assert!(!stalls.give_back(claim), "the look gave the permit back");
        assert!(!stalls.keep_looking(), "no slot held: the looks stop");
        let claim = stalls.claim(2).unwrap();
        assert!(stalls.arm(), "the next claim arms");
        assert!(stalls.keep_looking());
        assert!(stalls.give_back(claim));
        assert!(!stalls.keep_looking());
    }

    #[test]
    fn a_frame_since_the_last_look_or_the_drop_keeps_it() {
        let stalls = Stalls::new(1);
        let mut claim = stalls.claim(1).unwrap();
        assert!(stalls.claim(1).is_none(), "one slot");
        assert_eq!(looks(&stalls, 1), (0, true));
        assert!(stalls.framed(&mut claim));
        assert_eq!(looks(&stalls, 1), (0, true));
        assert!(stalls.give_back(claim), "the drop gives the permit back");
        assert_eq!(looks(&stalls, 3), (0, false));
    }

    #[test]
    fn a_body_whose_slot_was_freed_cannot_touch_the_next_holder() {
        let stalls = Stalls::new(1);
        let mut first = stalls.claim(1).unwrap();
        assert_eq!(looks(&stalls, 2), (1, false));
        let second = stalls.claim(1).unwrap();
        assert!(!stalls.framed(&mut first), "freed by the look");
        assert!(!stalls.give_back(first));
        assert!(stalls.give_back(second));
    }
}
