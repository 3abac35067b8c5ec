//! Unit tests of the request context and the request scope.

use std::future::Future;
use std::task::{Context, Poll};

use super::*;
use crate::deadline::Deadline;

fn ctx() -> RequestContext {
    Propagation::new()
        .request_id()
        .capture(&HeaderMap::new())
        .0
        .unwrap()
}

fn in_ms(ms: u64) -> Deadline {
    Deadline::after(
        std::time::Duration::from_millis(ms),
        crate::deadline::DeadlineSource::Explicit,
    )
    .unwrap()
}

fn both(deadline: Deadline, context: &RequestContext) -> RequestScope {
    RequestScope::new()
        .deadline(deadline)
        .context(context.clone())
}

fn in_scope() -> RequestScope {
    RequestScope::current()
}

#[test]
fn enter_nests_replaces_both_and_restores_on_panic() {
    let (outer, inner) = (ctx(), ctx());
    let (early, late) = (in_ms(1000), in_ms(5000));
    both(early, &outer).enter(|| {
        assert_eq!(in_scope(), both(early, &outer));
        both(late, &inner).enter(|| assert_eq!(in_scope(), both(late, &inner)));
        // What a scope does not hold is not in scope.
        RequestScope::new()
            .deadline(late)
            .enter(|| assert_eq!(in_scope(), RequestScope::new().deadline(late)));
        RequestScope::current()
            .deadline(late)
            .enter(|| assert_eq!(in_scope(), both(late, &outer)));
        assert_eq!(in_scope(), both(early, &outer));
        let r = std::panic::catch_unwind(|| both(late, &inner).enter(|| panic!("boom")));
        assert!(r.is_err());
        assert_eq!(in_scope(), both(early, &outer));
    });
    assert_eq!(in_scope(), RequestScope::new());
}

#[test]
fn with_current_borrows_the_one_in_scope_and_puts_it_back_on_panic() {
    let c = ctx();
    assert!(RequestContext::with_current(|seen| seen.is_none()));
    RequestScope::new().context(c.clone()).enter(|| {
        let counts = Arc::strong_count(&c.inner);
        RequestContext::with_current(|seen| {
            assert_eq!(seen, Some(&c));
            // Borrowed: no reference count taken.
            assert_eq!(Arc::strong_count(&c.inner), counts);
        });
        let r = std::panic::catch_unwind(|| {
            RequestContext::with_current(|_| panic!("boom"));
        });
        assert!(r.is_err());
        assert_eq!(RequestContext::current().as_ref(), Some(&c));
    });
    assert!(RequestContext::current().is_none());
}

#[test]
fn scope_sets_only_during_polls_and_carry_hides_an_outer_scope() {
    let c = ctx();
    let d = in_ms(1000);
    let mut seen = Vec::new();
    let mut fut = std::pin::pin!(both(d, &c).scope(std::future::poll_fn(|_| {
        seen.push(in_scope());
        if seen.len() < 2 {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })));
    let mut cx = Context::from_waker(std::task::Waker::noop());
    assert!(fut.as_mut().poll(&mut cx).is_pending());
    assert_eq!(in_scope(), RequestScope::new(), "restored between polls");
    assert!(fut.as_mut().poll(&mut cx).is_ready());
    assert_eq!(seen, vec![both(d, &c), both(d, &c)]);

    let none = std::pin::pin!(carry(async { in_scope() }));
    let mut none = none;
    let seen = both(d, &c).enter(|| none.as_mut().poll(&mut cx));
    assert_eq!(seen, Poll::Ready(RequestScope::new()));

    let kept = both(d, &c).enter(|| carry(async { in_scope() }));
    let mut kept = std::pin::pin!(kept);
    assert_eq!(kept.as_mut().poll(&mut cx), Poll::Ready(both(d, &c)));
}

#[test]
fn apply_keeps_the_outgoing_value() {
    let mut incoming = HeaderMap::new();
    incoming.insert("x-request-id", "edge".parse().unwrap());
    incoming.insert(
        "traceparent",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
            .parse()
            .unwrap(),
    );
    let c = Propagation::new()
        .request_id()
        .w3c()
        .capture(&incoming)
        .0
        .unwrap();
    let mut out = HeaderMap::new();
    out.insert("x-request-id", "own".parse().unwrap());
    c.apply_to(&mut out);
    assert_eq!(out["x-request-id"], "own");
    assert_eq!(out["traceparent"], incoming["traceparent"]);
    assert_eq!(out.len(), 2);
}
