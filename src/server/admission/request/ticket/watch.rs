//! The stall watch of the bodies that hold a permit: a body takes a slot of its admission's
//! [`Stalls`] at its first frame of data short of its end (no allocation: the slots are made
//! with the admission), and the deadline thread looks at the admission's held slots every
//! [`LOOK`] while one is held (one entry in its queue for the whole admission, armed by the
//! body that finds none there). A body that has produced no frame for its quiet time (four of
//! its route's no-load durations, between [`QUIET_MIN`] and [`QUIET_MAX`]) gives its permit
//! back then, once: it waits on its reader (who stopped reading) or on its handler (a stream
//! with no event yet), and does no work admission can see. A body read to its end in one
//! frame, or dropped before a frame, takes no slot.

use std::sync::Weak;
use std::time::{Duration, Instant};

use super::BodyPermit;
use crate::exchange::contain;
use crate::server::admission::Shared;
use crate::server::admission::estimate;
use crate::server::admission::stall::Claim;
use crate::server::timer::{Watched, timer};

/// The time between two looks at an admission's held slots.
const LOOK: Duration = Duration::from_millis(25);
/// The least time without a frame that gives a permit back: well above the gap between two
/// frames of a reader that keeps up slowly (tens of ms).
const QUIET_MIN: Duration = Duration::from_millis(300);
/// The most time without a frame that gives a permit back (a slow route's): a stream that
/// waits long between its events does not keep its permit for its life.
const QUIET_MAX: Duration = Duration::from_millis(500);

/// Where a body's permit stands with the watch.
pub(super) enum Watch {
    /// No frame short of its end yet: not watched.
    Idle,
    /// Watched: its slot.
    Held(Claim),
    /// Every slot was held: not watched, its permit back at its drop.
    Unwatched,
    /// A look gave its permit back.
    Returned,
}

impl Watched for Shared {
    fn look(&self, _seen: u64) -> Option<(Instant, u64)> {
        // No lesson: the route learned its time to head at the answer; a body that stopped
        // producing frames says nothing of the handler's work.
        self.stalls.look(&mut || contain(|| self.release()));
        self.stalls
            .keep_looking()
            .then(|| (Instant::now() + LOOK, 0))
    }
}

impl BodyPermit {
    /// The body returned a frame of data short of its end.
    #[inline]
    pub(crate) fn framed(&mut self) {
        match &mut self.watch {
            Watch::Held(claim) => {
                if !self.shared.stalls.framed(claim) {
                    self.watch = Watch::Returned;
                }
            }
            Watch::Idle => self.start_watch(),
            Watch::Unwatched | Watch::Returned => {}
        }
    }

    /// Gives the permit back at the body's drop, unless a look did.
    #[inline]
    pub(super) fn give_back(&mut self) {
        let release = match std::mem::replace(&mut self.watch, Watch::Returned) {
            Watch::Held(claim) => self.shared.stalls.give_back(claim),
            Watch::Returned => false,
            Watch::Idle | Watch::Unwatched => true,
        };
        if release {
            self.shared.release();
        }
    }

    /// The body's first frame short of its end: it takes a slot, and arms the looks if none
    /// is armed (out of line: a body read to its end in one frame never comes here).
    #[cold]
    #[inline(never)]
    fn start_watch(&mut self) {
        let (_, floor) = estimate::floor(&self.shared.table, self.route);
        let quiet = Duration::from_nanos(floor.saturating_mul(4)).clamp(QUIET_MIN, QUIET_MAX);
        let looks = (quiet.as_nanos() / LOOK.as_nanos()) as u64;
        let Some(claim) = self.shared.stalls.claim(looks) else {
            self.watch = Watch::Unwatched;
            return;
        };
        self.watch = Watch::Held(claim);
        if self.shared.stalls.arm() {
            let watched: Weak<dyn Watched> = std::sync::Arc::downgrade(&self.shared) as _;
            // Without the thread (it could not be started) the permit goes back at the drop.
            timer().watch(Instant::now() + LOOK, watched, 0);
        }
    }
}
