//! The in-flight limit: permits taken without a lock while nobody waits; waiters kept in
//! deadline order (earliest first) and handed each released permit, the doomed among them
//! shed (within the cap) or served after a waiter behind them that can still finish in time;
//! a limit that follows the handler's capacity from its answers (slow start and its exit on
//! the answers' delays, then a probe on throughput); and the measures by which a queue is
//! told a burst (it drains) from an overload (it stands).
//!
//! The parts, each relying only on those after it: [`adapt`] (what an answer tells the
//! limit: the lesson, the delay rule, slow start's growth, the settled limit's windows) →
//! [`slow_start`] (slow start's proof of capacity and its exit) → [`permits`] (the
//! [`Limiter`] itself: the permits, the queue's protocol, dispatch); beside them,
//! [`overload`] (the work offered at the queue, its standing, the trim after slow start's
//! cut) → [`permits`]. [`permits`] holds the state the others keep: [`probe`] (the settled
//! limit's windows and slow start's exit, under the probe's lock, and the tolerance every
//! rule judges an answer by), [`queue`] (what the queue's lock guards) → [`waiter`] (one
//! queued request). `adapt`, `slow_start` and `overload` add methods to [`Limiter`]; the
//! state files import nothing above them. This module holds no code: its `pub use` lines
//! are the paths the rest of admission (and the loom models) name.

mod adapt;
mod overload;
mod permits;
mod probe;
mod queue;
mod slow_start;
mod waiter;

pub use self::adapt::Lesson;
pub use self::overload::{BURST_LOAD, GENEROUS};
pub use self::permits::Limiter;
pub use self::probe::tolerated;
pub use self::waiter::{EXPIRED, GRANTED, SHED, Verdict, WAITING, Waiter};

// Named by the loom models only.
#[cfg(shared_headers_loom)]
pub use self::waiter::GONE;
