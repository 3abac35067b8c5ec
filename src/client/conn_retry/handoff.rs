//! The hand-off of a request body that cannot be replayed between the two sends of
//! `ConnRetry`: the first send's client may read it, or, if that client dropped it unread (the
//! request was never written), the resend takes it. Exactly one of them reads it, and a resend
//! that was promised the body gets it (loom: `loom-tests/tests/conn_retry.rs`).

use crate::sync::Mutex;

/// Where the body is.
pub enum Held<B> {
    /// Not read yet by the first send's client: it can be taken back.
    Unread(B),
    /// Handed to the resend (the first send's client never read it).
    Resent(B),
    /// Read by one of the two sends.
    Read,
}

/// The body both sends share: one lock, so "the first send reads it" and "the resend is
/// promised it" are one decision.
pub struct Handoff<B> {
    held: Mutex<Held<B>>,
}

impl<B> Handoff<B> {
    /// The first send's body, unread.
    pub fn new(body: B) -> Self {
        Self {
            held: Mutex::new(Held::Unread(body)),
        }
    }

    /// Takes the body for the first send (`resend == false`) or the resend, if it is that
    /// send's to read (the first send's while unread, the resend's once handed over); `None`
    /// otherwise (the other send has it).
    pub fn take(&self, resend: bool) -> Option<B> {
        let mut held = self.held.lock();
        let mine = matches!(
            (&*held, resend),
            (Held::Unread(_), false) | (Held::Resent(_), true)
        );
        if !mine {
            return None;
        }
        match std::mem::replace(&mut *held, Held::Read) {
            Held::Unread(body) | Held::Resent(body) => Some(body),
            Held::Read => None,
        }
    }

    /// Looks at the body a send would take, under the lock.
    pub fn peek<R>(&self, resend: bool, f: impl FnOnce(Option<&B>) -> R) -> R {
        match (&*self.held.lock(), resend) {
            (Held::Unread(body), false) | (Held::Resent(body), true) => f(Some(body)),
            _ => f(None),
        }
    }

    /// Hands the body to the resend if the first send never read it; `false` if it did (the
    /// request cannot be sent again).
    pub fn reserve(&self) -> bool {
        let mut held = self.held.lock();
        match std::mem::replace(&mut *held, Held::Read) {
            Held::Unread(body) => {
                *held = Held::Resent(body);
                true
            }
            other => {
                *held = other;
                false
            }
        }
    }

    /// The negative control of the loom model: [`reserve`](Self::reserve) split in two steps
    /// (the check, then the hand-over under a second lock), so the first send can take the
    /// body in between and the resend, promised it, finds nothing.
    #[cfg(shared_headers_loom)]
    pub fn reserve_in_two_steps(&self) -> bool {
        if !matches!(*self.held.lock(), Held::Unread(_)) {
            return false;
        }
        let mut held = self.held.lock();
        if let Held::Unread(body) = std::mem::replace(&mut *held, Held::Read) {
            *held = Held::Resent(body);
        }
        true
    }
}
