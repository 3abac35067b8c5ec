//! Slow start's proof of capacity and its exit (HyStart's, on the answers' delays): an
//! answer near the floor at `load` in flight proves the handler takes that many at once, and
//! the limit grows to twice the most proven (at once to the demand, once the last such step
//! is proven whole); two delayed answers with more in flight, while
//! a queue of that many waits (or callers were refused at arrival for an overload), cut the
//! limit to the proof and settle it.
//!
//! It decides when slow start ends and where the limit lands ([`Limiter::slow_start`]);
//! what the cut does to the queue is [`overload`](super::overload)'s trim, which the caller
//! asks for. It relies on [`permits`](super::permits) for the limit and the queue's count,
//! and on the probe's state ([`probe`](super::probe)) under the probe's lock, taken with
//! `try_lock`: an answer that finds it held proves nothing and grows nothing.

use super::permits::Limiter;
use crate::sync::Ordering;

/// The delayed answers, each with more in flight than any answer on time, that end slow
/// start ([`Limiter::slow_start`]).
const SLOW_START_DELAYED: u32 = 2;

impl Limiter {
    /// Slow start's exit, from the answers' own delays (no window): an answer on time at
    /// `load` in flight says the handler takes that many at once; two delayed answers, each
    /// with more in flight than any answer on time, say it takes no more: the limit is cut to
    /// that many and settles (the probe follows). A queue in the handler delays every answer
    /// past its capacity, so the cut comes two answers after the queue, not a window's worth
    /// later; a route whose answers merely vary answers on time at every load, so it is
    /// never cut (as HyStart's delay increase ends TCP's slow start, on the in-flight count
    /// at which the delay appeared). Returns `None` when it cut, else the most permits slow
    /// start may grow to: twice the most in flight of an answer on time (TCP's slow start
    /// doubles its window a round trip: a limit grown past what any answer has shown the
    /// handler to take only queues inside it, unseen, until the delayed answers come back).
    pub(super) fn slow_start(
        &self,
        took: u64,
        floor: u64,
        tolerated: u64,
        load: usize,
    ) -> Option<usize> {
        let Some(mut probe) = self.probe.try_lock() else {
            return Some(0);
        };
        // A waiter's answer: every permit was taken.
        let load = load.min(self.limit());
        if took <= tolerated {
            // Proof of what the handler takes at once: an answer near the floor (a request
            // that arrived just before a worker freed waited a little inside the handler and
            // still answers within the tolerance: it proves nothing of its load).
            if load > probe.fast_load && took <= floor + floor / 16 + 1_000_000 {
                probe.fast_load = load;
                probe.delayed = 0;
            }
            let most = probe.fast_load.saturating_mul(2);
            if probe.fast_load >= probe.round {
                // The last step's every permit proven: the limit goes to the requests in
                // flight and waiting, up to twice the proof (TCP's slow start doubles its
                // window a round trip, and grows it by the data there is to send, not past
                // it: RFC 7661). A permit per binding answer alone grew a first guess of 4
                // to 6 in the first service time (its first answers ran with fewer in flight
                // and were not binding), and a handler of 32 workers met at 0.8x queued
                // callers behind it for three service times; a step taken on a partial proof
                // (a third request that waited a millisecond inside a handler of 2 answers
                // near the floor) let a 2x start queue inside the handler.
                let demand = (self.in_flight.load(Ordering::Relaxed)
                    + self.queued.load(Ordering::Relaxed))
                .min(most)
                .min(self.ceiling);
                if demand > self.limit() {
                    self.limit.store(demand << 8, Ordering::Relaxed);
                    probe.round = demand;
                }
            }
            return Some(most);
        }
        let most = probe.fast_load.saturating_mul(2);
        if probe.fast_load == 0 || load <= probe.fast_load {
            return Some(most);
        }
        probe.delayed += 1;
        let cut = probe.fast_load.clamp(1, self.ceiling);
        if probe.delayed < SLOW_START_DELAYED
            || (self.queued.load(Ordering::Relaxed) < cut && !probe.rushed)
        {
            // No queue of the new limit's worth waiting (a burst of random arrivals delays a
            // few answers and drains by itself): the limit stays a guess.
            return Some(most);
        }
        // One more than `cut` queued: no probe up for a few windows; and the answers of the
        // requests let in above `cut` are delayed still: no probe down for two windows.
        probe.up_wait = 4;
        probe.down_wait = 2;
        probe.restart(cut);
        self.settled.store(true, Ordering::Relaxed);
        if cut < self.limit() {
            self.limit.store(cut << 8, Ordering::Relaxed);
        }
        None
    }

    /// The limit a waiter's wait is predicted at: the limit, or during a probe up the limit
    /// held before it (the probe's extra permit tests the handler, it is no capacity yet:
    /// a request let in at it waits inside a handler that takes no more).
    pub fn serving(&self) -> usize {
        let limit = self.limit();
        match self.probe.try_lock().and_then(|probe| probe.from) {
            Some((held, _, probed, _)) if probed > held && probed == limit => held.max(1),
            _ => limit,
        }
    }

    /// Slow start's proof of the handler's capacity: the most requests in flight (at its
    /// permit) of an answer on time so far (0: none yet, or the probe's lock is held).
    pub fn proven(&self) -> usize {
        self.probe.try_lock().map_or(0, |probe| probe.fast_load)
    }

    /// A caller was refused at arrival in slow start for an overload at the proven
    /// capacity: the queue it did not join counts for slow start's exit.
    pub fn rushed(&self) {
        if let Some(mut probe) = self.probe.try_lock() {
            probe.rushed = true;
        }
    }
}

#[cfg(all(test, not(shared_headers_loom)))]
mod tests {
    use super::super::waiter::{Verdict, WAITING, Waiter};
    use super::*;

    fn grant(_: &Waiter) -> Verdict {
        Verdict::Grant
    }

    /// Slow start's growth in the first service time: four answers on time (at 1 to 4 in
    /// flight: the first guess of 4 proven whole) with 12 callers waiting take the limit to
    /// twice the proof, 8 (the demand, 16, capped there); with 1 waiting, to 6 (a permit per
    /// binding answer, the demand 5 below it); with nobody waiting (the control: no demand
    /// past the limit), to 6 too, as the tree before the demand rule took it with 12
    /// waiting; and with the guess proven in part, to 5.
    #[test]
    fn slow_start_grows_to_the_demand_up_to_twice_the_proof() {
        const MS: u64 = 1_000_000;
        let grown = |waiting: u64, answers: usize| {
            let limiter = Limiter::starting_at(1024, 4);
            for _ in 0..4 {
                assert!(limiter.try_acquire());
            }
            let _waiters: Vec<_> = (0..waiting)
                .map(|k| limiter.enqueue(k, None, 0, false, &grant))
                .collect();
            for load in 1..=answers {
                assert!(!limiter.adapt(20 * MS, 20 * MS, 20 * MS, load));
            }
            (limiter.limit(), limiter.settled())
        };
        assert_eq!(grown(12, 4), (8, false));
        assert_eq!(grown(1, 4), (6, false));
        assert_eq!(grown(0, 4), (6, false));
        // The guess proven in part (on time at 1 to 3 in flight, as a handler of 2 whose
        // third request waited a millisecond inside it): no step to the demand.
        assert_eq!(grown(12, 3), (5, false));
    }

    #[test]
    fn slow_start_ends_at_the_in_flight_count_where_answers_were_delayed() {
        const MS: u64 = 1_000_000;
        // A handler that takes 2: on time at 1 and 2 in flight, delayed at 3 and 4, with a
        // queue of 2 waiting: cut to 2, settled.
        let limiter = Limiter::starting_at(1024, 4);
        for _ in 0..4 {
            assert!(limiter.try_acquire());
        }
        let waiters: Vec<_> = (0..2)
            .map(|k| limiter.enqueue(k, None, 0, false, &grant))
            .collect();
        assert!(!limiter.adapt(20 * MS, 20 * MS, 20 * MS, 1));
        assert!(!limiter.adapt(20 * MS, 20 * MS, 20 * MS, 2));
        assert!(
            !limiter.adapt(40 * MS, 20 * MS, 20 * MS, 3),
            "one delayed answer"
        );
        assert!(limiter.adapt(40 * MS, 20 * MS, 20 * MS, 4));
        assert_eq!((limiter.limit(), limiter.settled()), (2, true));
        assert_eq!(waiters[0].state(), WAITING);
        // Answers that merely vary: one on time at 4 in flight, then slow ones at 3 and 4:
        // no cut (the window's rule judges them).
        let limiter = Limiter::starting_at(1024, 4);
        for _ in 0..4 {
            assert!(limiter.try_acquire());
        }
        let _waiters: Vec<_> = (0..4)
            .map(|k| limiter.enqueue(k, None, 0, false, &grant))
            .collect();
        assert!(!limiter.adapt(2 * MS, 2 * MS, 2 * MS, 4));
        assert!(!limiter.adapt(60 * MS, 2 * MS, 2 * MS, 3));
        assert!(!limiter.adapt(60 * MS, 2 * MS, 2 * MS, 4));
        // (The answer on time at 4 in flight grew the limit to twice that: slow start
        // goes on.)
        assert_eq!((limiter.limit(), limiter.settled()), (8, false));
        // Delayed answers with nobody waiting (a burst below the capacity): no cut.
        let limiter = Limiter::starting_at(1024, 4);
        assert!(!limiter.adapt(20 * MS, 20 * MS, 20 * MS, 2));
        assert!(!limiter.adapt(40 * MS, 20 * MS, 20 * MS, 3));
        assert!(!limiter.adapt(40 * MS, 20 * MS, 20 * MS, 4));
        assert!(!limiter.settled());
    }
}
