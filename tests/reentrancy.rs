//! Re-entrant writes: a write to the same headers from inside a write's closure would wait for
//! the writer lock its own thread holds. It must panic instead, with a message that names the
//! write and the fix, and leave the handle usable. Reads inside a write, and writes to other
//! headers, must keep working.
//!
//! Every case runs on its own thread with a time limit, so that a regression (the detection
//! removed) fails the test with "deadlocked" instead of hanging the suite.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use http::{HeaderMap, HeaderValue};
use shared_headers::{Error, Exchange, Outcome, SharedHeaders};

fn v(s: &'static str) -> HeaderValue {
    HeaderValue::from_static(s)
}

/// Runs `f` on a thread; fails if it does not finish within 10 s (a deadlock).
fn bounded<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(catch_unwind(AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(Ok(r)) => r,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => panic!("deadlocked: a re-entrant write waited for its own writer lock"),
    }
}

/// The panic message of `f`, which must panic.
fn panic_message(f: impl FnOnce()) -> String {
    let payload = catch_unwind(AssertUnwindSafe(f)).expect_err("the re-entrant write must panic");
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap()
}

type Inner = (&'static str, fn(&SharedHeaders));

/// Every write method, as called from inside a closure on `h` (or a clone of it).
fn inner_writes() -> Vec<Inner> {
    vec![
        ("SharedHeaders::insert", |h| drop(h.insert("x-in", v("1")))),
        ("SharedHeaders::append", |h| drop(h.append("x-in", v("1")))),
        ("SharedHeaders::remove", |h| drop(h.remove("x-a"))),
        ("SharedHeaders::update", |h| drop(h.update(|_| ()))),
        ("SharedHeaders::try_update", |h| {
            drop(h.try_update(|_| Ok::<_, Error>(())))
        }),
        ("SharedHeaders::replace", |h| {
            drop(h.replace(HeaderMap::new()))
        }),
        ("SharedHeaders::commit", |h| {
            let draft = h.draft();
            drop(h.commit(draft));
        }),
        ("SharedHeaders::seal", |h| drop(h.seal())),
        ("SharedHeaders::seal_with", |h| drop(h.seal_with(|_| ()))),
        ("Exchange::commit", |h| {
            let exchange = Exchange::new(SharedHeaders::new(), h.clone());
            drop(exchange.commit(Outcome::Answered));
        }),
    ]
}

type Outer = (&'static str, fn(&SharedHeaders, &dyn Fn(&SharedHeaders)));

fn outer_writes() -> Vec<Outer> {
    vec![
        ("SharedHeaders::update", |h, inner| {
            let _ = h.update(|m| {
                m.insert("x-outer", v("1"));
                inner(h);
            });
        }),
        ("SharedHeaders::try_update", |h, inner| {
            let _ = h.try_update(|m| {
                m.insert("x-outer", v("1"));
                inner(h);
                Ok::<_, Error>(())
            });
        }),
        ("SharedHeaders::seal_with", |h, inner| {
            let _ = h.seal_with(|m| {
                m.insert("x-outer", v("1"));
                inner(h);
            });
        }),
    ]
}

#[test]
fn every_reentrant_write_panics_naming_both_writes_and_the_fix() {
    bounded(|| {
        for (outer_name, outer) in outer_writes() {
            for (inner_name, inner) in inner_writes() {
                let headers = SharedHeaders::new();
                headers.insert("x-a", v("0")).unwrap();
                let clone = headers.clone();
                let message = panic_message(|| outer(&headers, &|_| inner(&clone)));
                let case = format!("{outer_name} > {inner_name}: {message}");
                assert!(message.contains(inner_name), "{case}");
                assert!(message.contains(&format!("inside {outer_name}")), "{case}");
                assert!(message.contains("use a Draft"), "{case}");
                assert!(message.contains("after the closure returns"), "{case}");
                // Nothing of the outer write was published, and the handle is fully usable.
                assert_eq!(headers.version(), 1, "{case}");
                assert!(!headers.is_sealed(), "{case}");
                assert!(headers.get("x-outer").is_none(), "{case}");
                headers.insert("x-after", v("1")).unwrap();
                headers.update(|m| m.insert("x-after-2", v("1"))).unwrap();
                assert_eq!(headers.version(), 3, "{case}");
                assert_eq!(headers.seal().unwrap().len(), 3, "{case}");
            }
        }
    });
}

#[test]
fn a_commit_inside_a_write_panics_and_the_exchange_stays_uncommitted() {
    bounded(|| {
        let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
        let message = panic_message(|| {
            let _ = exchange.request().update(|_| {
                let _ = exchange.commit(Outcome::TimedOut);
            });
        });
        assert!(
            message.starts_with("Exchange::commit called from inside SharedHeaders::update"),
            "{message}"
        );
        assert!(!exchange.is_committed());
        exchange.response().insert("x-a", v("1")).unwrap();
        let committed = exchange.commit(Outcome::Answered).unwrap();
        assert_eq!(committed.response()["x-a"], "1");
    });
}

/// A commit inside a write closure on any of the exchange's three handles (the request, the
/// response, the annotations) panics before taking anything: nothing is sealed, the exchange
/// stays uncommitted and every handle writable, and a later commit records those writes.
/// (With the checks only on the request, a commit inside the response's `update` sealed the
/// request first; with them on the request and response only, a commit inside the
/// annotations' `update` sealed both and then panicked at the annotations' seal, leaving an
/// uncommitted exchange whose writes were refused.)
#[test]
fn a_commit_inside_a_write_on_any_handle_leaves_the_exchange_whole() {
    type Pick = fn(&Exchange) -> SharedHeaders;
    let picks: [(&str, Pick); 3] = [
        ("request", |e| e.request().clone()),
        ("response", |e| e.response().clone()),
        ("annotations", |e| e.annotations()),
    ];
    bounded(move || {
        for (name, pick) in picks {
            let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
            let _ = exchange.annotations();
            let message = panic_message(|| {
                let _ = pick(&exchange).update(|m| {
                    m.insert("x-inside", v("1"));
                    let _ = exchange.commit(Outcome::TimedOut);
                });
            });
            assert!(
                message.starts_with("Exchange::commit called from inside SharedHeaders::update"),
                "{name}: {message}"
            );
            assert!(!exchange.is_committed(), "{name}");
            for handle in [
                exchange.request(),
                exchange.response(),
                &exchange.annotations(),
            ] {
                assert!(!handle.is_sealed(), "{name}: a handle was sealed");
                assert!(handle.get("x-inside").is_none(), "{name}");
                handle.insert("x-after", v("1")).unwrap();
            }
            assert_eq!(exchange.refused_writes(), 0, "{name}");
            let committed = exchange.commit(Outcome::Answered).unwrap();
            assert_eq!(committed.outcome(), Outcome::Answered, "{name}");
            assert_eq!(committed.request()["x-after"], "1", "{name}");
            assert_eq!(committed.response()["x-after"], "1", "{name}");
            assert_eq!(committed.annotations().unwrap()["x-after"], "1", "{name}");
        }
    });
}

#[test]
fn reads_inside_a_write_and_writes_to_other_headers_still_work() {
    bounded(|| {
        let headers = SharedHeaders::new();
        let other = SharedHeaders::new();
        headers.insert("x-a", v("1")).unwrap();
        let (_, sealed) = headers
            .seal_with(|m| {
                // Reads see the version before this write.
                assert_eq!(headers.get("x-a").unwrap(), "1");
                assert_eq!(headers.snapshot().version(), 1);
                assert!(headers.read(|m| m.contains_key("x-a")));
                // Writes to other headers are fine, including a nested write on those.
                other
                    .update(|o| {
                        o.insert("x-b", v("2"));
                        assert!(headers.contains_key("x-a"));
                    })
                    .unwrap();
                other.insert("x-c", v("3")).unwrap();
                m.insert("x-d", v("4"));
            })
            .unwrap();
        assert_eq!(sealed.len(), 2);
        assert_eq!(other.len(), 2);
    });
}

#[test]
fn another_thread_writing_during_a_write_waits_instead_of_panicking() {
    bounded(|| {
        let headers = SharedHeaders::new();
        let mut writer = None;
        headers
            .update(|m| {
                m.insert("x-a", v("1"));
                let other = headers.clone();
                // Not re-entrant: another thread, which waits for the lock and then writes.
                writer = Some(thread::spawn(move || {
                    other.insert("x-b", v("2")).map(|_| ())
                }));
                thread::sleep(Duration::from_millis(20));
            })
            .unwrap();
        writer.unwrap().join().unwrap().unwrap();
        assert_eq!(headers.len(), 2);
        assert_eq!(headers.version(), 2);
    });
}
