//! What admission does with one request: at arrival (the estimate against the budget, the
//! cap, a permit or a place in the queue), in the queue (the judge of each freed permit), and
//! at its answer (the route learns, the permit goes back): the [`Ticket`] its future keeps.
//!
//! The parts, each relying only on those after it: [`arrive`] (the layer's two calls: the
//! time a queue-start header says was spent, the route's need against the budget, a permit
//! taken) → [`queue`] (no permit free: a place in the queue, or a refusal at once) →
//! [`ticket`] (what the response future keeps, and what the answer does: the route learns,
//! the limit follows, the permit goes back) → [`judge`] (a request that cannot finish in
//! time: refused within the cap or let run as a probe, at arrival and at each freed
//! permit). This module holds no code: its `pub(crate) use` lines are the paths the rest of
//! the server names.

mod arrive;
mod judge;
mod queue;
mod ticket;

pub(crate) use self::judge::Refusal;
pub(crate) use self::ticket::{Admit, BodyPermit, Ticket};
