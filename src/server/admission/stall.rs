//! Whether a response body that holds a permit waits on its reader ([`Stall`]): the words a
//! streaming body and the deadline thread share, so that a body whose client stopped reading
//! gives its permit back, exactly once, while one that is still being produced keeps it.
//!
//! The body writes [`Stall::polled`] after each poll that returned a frame of data short of
//! its end (it now waits for its server to poll it again) or `Pending` (its handler is still
//! producing it); the deadline thread looks every so often ([`Stall::look`]): a body that
//! returned a frame and was not polled since its last look has waited on its reader that
//! long (a server stops polling a body while its peer does not read: HTTP/2's flow-control
//! window, HTTP/1's socket buffer), and its permit is given back. Whoever claims the
//! release first ([`Stall::claim`]: the look, or the body's drop) gives the permit back; the
//! other gives nothing.

use crate::sync::{AtomicBool, AtomicU64, Ordering};

/// A watched body's polls (written by its poller only) and whether its permit was given back.
#[derive(Debug)]
pub struct Stall {
    /// The polls that returned a frame or `Pending`, times 2, plus 1 when the last of them
    /// returned a frame (the body waits on its reader).
    polls: AtomicU64,
    /// Whether the permit was given back (by a look or by the drop): set once.
    released: AtomicBool,
}

/// What a look at a watched body found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Look {
    /// It has waited on its reader since the last look, and this look claimed the release:
    /// give the permit back.
    Stalled,
    /// It was polled since the last look (or is being produced): look again later, against
    /// this word.
    Again(u64),
    /// Its permit was given back already (its drop, or a look before).
    Done,
}

impl Default for Stall {
    fn default() -> Self {
        Self::new()
    }
}

impl Stall {
    /// A body not polled yet, its permit held.
    pub fn new() -> Stall {
        Stall {
            polls: AtomicU64::new(0),
            released: AtomicBool::new(false),
        }
    }

    /// A poll of the body returned a frame of data short of its end (`ready`), or `Pending`.
    /// Called by the body's poller only (one writer: a load and a store).
    #[inline]
    pub fn polled(&self, ready: bool) -> u64 {
        let polls = (self.polls.load(Ordering::Relaxed) | 1) + 1 + u64::from(ready);
        self.polls.store(polls, Ordering::Relaxed);
        polls
    }

    /// The deadline thread's look, `seen` the word at its last look: a body whose last poll
    /// returned a frame and that was not polled since has waited on its reader since then.
    pub fn look(&self, seen: u64) -> Look {
        if self.released.load(Ordering::Relaxed) {
            return Look::Done;
        }
        let polls = self.polls.load(Ordering::Relaxed);
        if polls != seen || polls & 1 == 0 {
            return Look::Again(polls);
        }
        if self.claim() {
            Look::Stalled
        } else {
            Look::Done
        }
    }

    /// Claims the permit's release: `true` for the first caller only (a swap: a look and the
    /// body's drop may race).
    #[inline]
    pub fn claim(&self) -> bool {
        !self.released.swap(true, Ordering::AcqRel)
    }

    /// The negative control of the loom model: [`Stall::look`] with the claim as a load and
    /// a store.
    #[cfg(shared_headers_loom)]
    pub fn look_broken(&self, seen: u64) -> Look {
        if self.released.load(Ordering::Relaxed) {
            return Look::Done;
        }
        let polls = self.polls.load(Ordering::Relaxed);
        if polls != seen || polls & 1 == 0 {
            return Look::Again(polls);
        }
        if self.claim_broken() {
            Look::Stalled
        } else {
            Look::Done
        }
    }

    /// The negative control of the loom model: the claim as a load and a store.
    #[cfg(shared_headers_loom)]
    pub fn claim_broken(&self) -> bool {
        if self.released.load(Ordering::Acquire) {
            return false;
        }
        self.released.store(true, Ordering::Release);
        true
    }
}

#[cfg(all(test, not(shared_headers_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_frame_not_polled_since_the_last_look_is_a_stall() {
        let stall = Stall::new();
        let seen = stall.polled(true);
        assert_eq!(seen & 1, 1);
        assert_eq!(stall.look(seen), Look::Stalled);
        assert!(!stall.claim(), "the look claimed the release");
        assert_eq!(stall.look(seen), Look::Done);
    }

    #[test]
    fn a_poll_since_or_a_pending_body_is_no_stall() {
        let stall = Stall::new();
        let seen = stall.polled(true);
        let again = stall.polled(true);
        assert_eq!(stall.look(seen), Look::Again(again));
        let pending = stall.polled(false);
        assert_eq!(pending & 1, 0);
        assert_eq!(stall.look(again), Look::Again(pending));
        assert_eq!(stall.look(pending), Look::Again(pending));
        assert!(stall.claim(), "the drop claims the release");
        assert_eq!(stall.look(pending), Look::Done);
    }
}
