//! The stall watch of a body that holds a permit ([`Watch`]): from the body's first frame
//! short of its end, the deadline thread looks at it every so often (the route's no-load
//! duration, between [`STALL_MIN`] and [`STALL_MAX`]), and a body that returned a frame and
//! was not polled again since the last look (its server stopped polling it: its client does
//! not read) gives its permit back then, once ([`Stall`]). A body read to its end in one
//! frame, or dropped before a frame, is never watched: nothing is allocated or armed. A body
//! found `Pending` and not polled since (its handler producing it: a stream idle between
//! events) is looked at half as often each time, down to once per [`STALL_MAX`].

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::BodyPermit;
use crate::exchange::contain;
use crate::server::admission::Shared;
use crate::server::admission::estimate;
use crate::server::admission::stall::{Look, Stall};
use crate::server::timer::{Watched, timer};

/// The least time between two looks at a body: a body waits on its reader this long at
/// least (between one and two of these) before its permit goes back.
const STALL_MIN: Duration = Duration::from_millis(20);
/// The most time between two looks at a body (a route whose no-load duration is longer, or
/// a body idle in `Pending`).
const STALL_MAX: Duration = Duration::from_secs(1);

/// The timer's word for a body: the body's word at the last look in the low bits, and above
/// [`IDLE_SHIFT`] how many looks in a row found it `Pending` and not polled since.
const IDLE_SHIFT: u32 = 58;

/// A body's stall word and what its release needs.
pub(super) struct Watch {
    stall: Stall,
    shared: Arc<Shared>,
    /// The time between two looks.
    every: Duration,
}

impl Watch {
    /// Claims the permit's release (the body's drop): `true` if no look gave it back first.
    #[inline]
    pub(super) fn claim(&self) -> bool {
        self.stall.claim()
    }
}

impl Watched for Watch {
    fn look(&self, seen: u64) -> Option<(Instant, u64)> {
        let (idle, seen) = (seen >> IDLE_SHIFT, seen & ((1 << IDLE_SHIFT) - 1));
        match self.stall.look(seen) {
            Look::Stalled => {
                // The body has waited on its reader since the last look: its permit goes
                // back now (no lesson: the route learned its time to head at the answer).
                contain(|| self.shared.release());
                None
            }
            Look::Done => None,
            Look::Again(polls) => {
                // Unchanged (and so `Pending`): its handler is still producing it; the next
                // look waits twice as long, up to `STALL_MAX`.
                let idle = if polls == seen { (idle + 1).min(6) } else { 0 };
                let wait = (self.every * (1 << idle)).min(STALL_MAX.max(self.every));
                Some((Instant::now() + wait, polls | idle << IDLE_SHIFT))
            }
        }
    }
}

impl BodyPermit {
    /// A poll of the body returned a frame of data short of its end (`ready`), or
    /// `Pending` (its handler is still producing it: it keeps its permit).
    #[inline]
    pub(crate) fn polled(&mut self, ready: bool) {
        match &self.watch {
            Some(watch) => {
                watch.stall.polled(ready);
            }
            None if ready => self.start_watch(),
            None => {}
        }
    }

    /// The body's first frame short of its end: the watch starts, its first look a while
    /// from now (out of line: a body read to its end in one frame never comes here).
    #[cold]
    #[inline(never)]
    fn start_watch(&mut self) {
        let (_, floor) = estimate::floor(&self.shared.table, self.route);
        let every = Duration::from_nanos(floor).clamp(STALL_MIN, STALL_MAX);
        let watch = Arc::new(Watch {
            stall: Stall::new(),
            shared: self.shared.clone(),
            every,
        });
        let seen = watch.stall.polled(true);
        let watched: Weak<dyn Watched> = Arc::downgrade(&watch) as Weak<dyn Watched>;
        // Without the thread (it could not be started) the permit goes back at the drop.
        timer().watch(Instant::now() + every, watched, seen);
        self.watch = Some(watch);
    }
}
