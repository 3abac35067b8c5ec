//! Regression tests for defects that the rest of the suite could not see (issue 10, lists 5 and
//! 6): each test fails on the mutant or the old code named in its comment.

use std::sync::{Arc, Barrier};
use std::thread;

use http::HeaderValue;
use shared_headers::{Error, Exchange, Outcome, SharedHeaders};

fn v(s: &'static str) -> HeaderValue {
    HeaderValue::from_static(s)
}

/// A commit over a handle that other code sealed first records that handle's sealed snapshot,
/// never an unsealed (or emptied) one, and seals the other handle.
#[test]
fn commit_over_a_handle_sealed_by_other_code_records_its_sealed_snapshot() {
    let request = SharedHeaders::new();
    request.insert("x-a", v("1")).unwrap();
    let sealed_first = request.seal().unwrap();
    let response = SharedHeaders::new();
    response.insert("x-b", v("2")).unwrap();
    let exchange = Exchange::new(request.clone(), response.clone());
    let committed = exchange.commit(Outcome::Answered).unwrap();
    assert_eq!(*committed.request(), sealed_first);
    assert_eq!(committed.request()["x-a"], "1");
    assert!(committed.response().is_sealed());
    assert_eq!(committed.response()["x-b"], "2");
    assert_eq!(response.snapshot(), *committed.response());
    // Sealing inside the commit is not a refused write.
    assert_eq!(exchange.refused_writes(), 0);
}

/// Removing the `Exchange` commit lock (or its check of the record under it) lets two racing
/// commits both return `Ok`, or return a record that differs from the handles' final sealed
/// state. An ordinary release-mode test: many exchanges, three committers and a writer each.
#[test]
fn racing_commits_have_one_winner_whose_record_is_the_final_sealed_state() {
    const ROUNDS: usize = 400;
    const COMMITTERS: usize = 3;
    for round in 0..ROUNDS {
        let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
        let start = Arc::new(Barrier::new(COMMITTERS + 1));
        let committers: Vec<_> = (0..COMMITTERS)
            .map(|i| {
                let (exchange, start) = (exchange.clone(), Arc::clone(&start));
                thread::spawn(move || {
                    start.wait();
                    let outcome = [Outcome::Answered, Outcome::TimedOut, Outcome::Cancelled][i];
                    exchange.commit(outcome)
                })
            })
            .collect();
        let writer = {
            let exchange = exchange.clone();
            let start = Arc::clone(&start);
            thread::spawn(move || {
                start.wait();
                let mut accepted = Vec::new();
                for n in 0..8u8 {
                    let name = format!("x-{n}");
                    let target = if n % 2 == 0 {
                        exchange.request()
                    } else {
                        exchange.response()
                    };
                    match target.insert(
                        http::HeaderName::try_from(name.as_str()).unwrap(),
                        HeaderValue::from(u16::from(n)),
                    ) {
                        Ok(_) => accepted.push((n % 2 == 0, name)),
                        Err(Error::Sealed { .. }) => {}
                        Err(other) => panic!("unexpected {other:?}"),
                    }
                }
                accepted
            })
        };
        let results: Vec<_> = committers.into_iter().map(|t| t.join().unwrap()).collect();
        let accepted = writer.join().unwrap();
        let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(
            winners.len(),
            1,
            "round {round}: {} commits won",
            winners.len()
        );
        let record = winners[0].clone();
        for lost in results.iter().filter_map(|r| r.as_ref().err()) {
            assert_eq!(
                *lost.winner(),
                record,
                "round {round}: a loser saw another winner"
            );
        }
        assert_eq!(exchange.committed().unwrap(), record);
        assert_eq!(
            exchange.request().snapshot(),
            *record.request(),
            "round {round}"
        );
        assert_eq!(
            exchange.response().snapshot(),
            *record.response(),
            "round {round}"
        );
        for (is_request, name) in accepted {
            let side = if is_request {
                record.request()
            } else {
                record.response()
            };
            assert!(
                side.contains_key(name.as_str()),
                "round {round}: accepted {name} lost"
            );
        }
    }
}

/// The exchange's refused-write count is the sum over its three handles (request, response,
/// annotations): `+` turned into `-` or `*` in `Exchange::refused_writes` changes it.
#[test]
fn exchange_refused_writes_sum_the_request_the_response_and_the_annotations() {
    let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    let notes = exchange.annotations();
    exchange.commit(Outcome::Answered).unwrap();
    assert!(exchange.request().insert("x-late", v("1")).is_err());
    for _ in 0..2 {
        assert!(exchange.response().insert("x-late", v("1")).is_err());
    }
    for _ in 0..3 {
        assert!(notes.insert("x-late", v("1")).is_err());
    }
    assert_eq!(exchange.refused_writes(), 6);
}

/// The late-writes report counts the writes refused after the commit on all three handles, and
/// none refused before: `+` turned into `-` or `*` in the exchange's drop changes the count.
#[test]
fn the_late_writes_report_counts_every_handle_after_the_commit() {
    use shared_headers::CommitHooks;
    use std::sync::Mutex;

    let reports = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&reports);
    let hooks = CommitHooks::new().on_late_writes(move |late| {
        seen.lock().unwrap().push(late.refused_writes());
    });
    let request = SharedHeaders::new();
    // Refused before the commit (sealed by other code): not a late write.
    let sealed_early = SharedHeaders::new();
    sealed_early.seal().unwrap();
    assert!(sealed_early.insert("x-early", v("1")).is_err());
    let exchange = Exchange::with_hooks(request, sealed_early, &hooks);
    let notes = exchange.annotations();
    exchange.commit(Outcome::Answered).unwrap();
    for _ in 0..2 {
        assert!(exchange.request().insert("x-late", v("1")).is_err());
    }
    for _ in 0..3 {
        assert!(exchange.response().insert("x-late", v("1")).is_err());
    }
    assert!(notes.insert("x-late", v("1")).is_err());
    drop(notes);
    assert!(
        reports.lock().unwrap().is_empty(),
        "reported before the last clone dropped"
    );
    drop(exchange);
    assert_eq!(*reports.lock().unwrap(), [6]);
}

/// Empty handles without a policy share one empty version per thread (no allocation). Sealing
/// one must seal only that handle: every other empty handle, made on the same thread or another,
/// stays unsealed and writable, and a snapshot taken before the seal stays unsealed at version 0.
#[test]
fn sealing_one_new_handle_leaves_every_other_new_handle_unsealed() {
    let (a, b) = (SharedHeaders::new(), SharedHeaders::new());
    let before = a.snapshot();
    let elsewhere = thread::spawn(SharedHeaders::new).join().unwrap();
    let sealed = a.seal().unwrap();
    assert!(sealed.is_sealed());
    assert_eq!((sealed.version(), sealed.len()), (1, 0));
    assert!(a.is_sealed());
    assert_eq!(a.insert("x-a", v("1")), Err(Error::Sealed { version: 1 }));
    assert!(!before.is_sealed(), "a snapshot taken before the seal");
    assert_eq!(before.version(), 0);
    for other in [&b, &elsewhere, &SharedHeaders::new()] {
        assert!(!other.is_sealed());
        assert_eq!(other.version(), 0);
        assert!(!other.snapshot().is_sealed());
        other.insert("x-b", v("2")).unwrap();
        assert_eq!(other.version(), 1);
        assert_eq!(other.seal().unwrap().version(), 2);
    }
    // A handle sealed on another thread than the one it was made on.
    let c = SharedHeaders::new();
    let c2 = c.clone();
    let sealed = thread::spawn(move || c2.seal().unwrap()).join().unwrap();
    assert_eq!(sealed.version(), 1);
    assert!(!SharedHeaders::new().is_sealed());
}

/// An exchange with a late-writes hook dropped without a commit reports nothing (and does not
/// look for a record that was never made).
#[test]
fn an_uncommitted_exchange_with_a_late_writes_hook_reports_nothing() {
    let reports = Arc::new(std::sync::Mutex::new(0));
    let count = reports.clone();
    let hooks = shared_headers::CommitHooks::new().on_late_writes(move |_| {
        *count.lock().unwrap() += 1;
    });
    let exchange = Exchange::with_hooks(SharedHeaders::new(), SharedHeaders::new(), &hooks);
    exchange.response().insert("x-a", v("1")).unwrap();
    let clone = exchange.clone();
    drop(exchange);
    drop(clone);
    assert_eq!(*reports.lock().unwrap(), 0);
}

/// A handle made on a thread that has exited can hold the last reference to that thread's
/// shared empty version. Its first write must not recycle that version (with its sealed twin)
/// as the allocation of a later version: the seal of that later version would publish the
/// twin, an empty map at version 1, and lose every write.
#[test]
fn a_handle_from_an_exited_thread_seals_what_was_written() {
    let h = thread::spawn(SharedHeaders::new).join().unwrap();
    for round in 0..3u64 {
        let h = if round == 0 {
            h.clone()
        } else {
            thread::spawn(SharedHeaders::new).join().unwrap()
        };
        h.insert("x-a", v("1")).unwrap();
        h.insert("x-b", v("2")).unwrap();
        h.insert("x-c", v("3")).unwrap();
        let sealed = h.seal().unwrap();
        assert_eq!((sealed.len(), sealed.version()), (3, 4), "round {round}");
        assert_eq!(h.snapshot().len(), 3);
    }
    // Through the exchange's commit too (the annotations handle of an exchange first
    // annotated on a short-lived thread).
    let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    let annotations = {
        let exchange = exchange.clone();
        thread::spawn(move || exchange.annotations())
            .join()
            .unwrap()
    };
    annotations.insert("x-user", v("ada")).unwrap();
    annotations.insert("x-route", v("/a")).unwrap();
    let committed = exchange.commit(Outcome::Answered).unwrap();
    assert_eq!(committed.annotations().unwrap().len(), 2);
}

#[cfg(feature = "server")]
mod server {
    use std::convert::Infallible;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::task::{Context, Poll, Waker};

    use http::{Request, Response};
    use shared_headers::server::SharedHeadersLayer;
    use tower::{Layer, Service};

    /// An inner service that is not ready until `open` is set.
    #[derive(Clone)]
    struct Gate {
        open: Arc<AtomicBool>,
    }

    impl Service<Request<()>> for Gate {
        type Response = Response<()>;
        type Error = Infallible;
        type Future = std::future::Ready<Result<Response<()>, Infallible>>;

        fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            if self.open.load(Ordering::SeqCst) {
                Poll::Ready(Ok(()))
            } else {
                Poll::Pending
            }
        }

        fn call(&mut self, _req: Request<()>) -> Self::Future {
            std::future::ready(Ok(Response::new(())))
        }
    }

    /// The layer's `poll_ready` replaced by "always ready" would ignore the inner service's
    /// backpressure: it must be pending while the inner service is, and ready once it is.
    #[test]
    fn the_layer_passes_on_the_inner_services_backpressure() {
        let open = Arc::new(AtomicBool::new(false));
        let mut service = SharedHeadersLayer::new().layer(Gate { open: open.clone() });
        let mut cx = Context::from_waker(Waker::noop());
        assert!(
            service.poll_ready(&mut cx).is_pending(),
            "ready while the inner is not"
        );
        open.store(true, Ordering::SeqCst);
        assert!(matches!(service.poll_ready(&mut cx), Poll::Ready(Ok(()))));
    }
    /// A deadline answers even when the inner future never completes and is never woken by
    /// anything else: the layer's timer thread commits and wakes the response future.
    /// (`Exchange::register_waker` or `wake` made a no-op leaves this response hanging.)
    #[test]
    fn the_deadline_answers_a_handler_that_never_finishes() {
        use std::time::Duration;
        use tower::ServiceExt;

        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let service = SharedHeadersLayer::new()
                .timeout(Duration::from_millis(50))
                .layer(tower::service_fn(|_req: Request<()>| async {
                    std::future::pending::<Result<Response<String>, Infallible>>().await
                }));
            // In a task of its own: only the exchange's wake can poll it again (a timeout around
            // the future itself would poll it when the timeout's own timer fires).
            let task = tokio::spawn(service.oneshot(Request::new(())));
            let res = tokio::time::timeout(Duration::from_secs(10), task)
                .await
                .expect("the timeout response never came: the response future was not woken")
                .unwrap()
                .unwrap();
            assert_eq!(res.status(), http::StatusCode::SERVICE_UNAVAILABLE);
        });
    }

    /// The request and response handles of a layer's exchange share one allocation: a draft
    /// must still commit only into the handle it came from (and its clones), never into the
    /// other handle of the same exchange or of another exchange.
    #[test]
    fn drafts_of_the_layers_handles_commit_only_into_their_own_handle() {
        use shared_headers::{Error, Exchange};
        use tower::ServiceExt;

        let kept = Arc::new(std::sync::Mutex::new(Vec::new()));
        let keep = kept.clone();
        let service = SharedHeadersLayer::new().layer(tower::service_fn(move |req: Request<()>| {
            let exchange = req.extensions().get::<Exchange>().unwrap().clone();
            keep.lock().unwrap().push(exchange.clone());
            let mut draft = exchange.response().draft();
            draft.insert("x-a", "1".parse().unwrap());
            let foreign = exchange.request().commit(draft.clone());
            assert_eq!(foreign, Err(Error::ForeignDraft));
            let clone = exchange.response().clone();
            assert_eq!(clone.commit(draft).unwrap().version(), 1);
            let request_draft = exchange.request().draft();
            assert_eq!(
                exchange.request().commit(request_draft).unwrap().version(),
                1
            );
            async { Ok::<_, Infallible>(Response::new(String::new())) }
        }));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        for _ in 0..2 {
            let res = runtime
                .block_on(service.clone().oneshot(Request::new(())))
                .unwrap();
            assert_eq!(res.headers()["x-a"], "1");
        }
        let kept = kept.lock().unwrap();
        let other = kept[1].response().draft();
        assert_eq!(kept[0].response().commit(other), Err(Error::ForeignDraft));
    }

    /// A request whose deadline passed before its first poll is answered with the timeout and
    /// its handler never runs (the timer thread committed; the response future looks first).
    #[test]
    fn a_handler_whose_deadline_passed_before_its_first_poll_never_runs() {
        use std::future::Future;
        use std::time::Duration;

        let ran = Arc::new(AtomicBool::new(false));
        let flag = ran.clone();
        let mut service = SharedHeadersLayer::new()
            .timeout(Duration::from_millis(20))
            .layer(tower::service_fn(move |_req: Request<()>| {
                let flag = flag.clone();
                // The handler's body: runs only when its future is polled.
                async move {
                    flag.store(true, Ordering::SeqCst);
                    Ok::<_, Infallible>(Response::new(String::new()))
                }
            }));
        let mut future = std::pin::pin!(service.call(Request::new(())));
        std::thread::sleep(Duration::from_millis(300));
        let mut cx = Context::from_waker(Waker::noop());
        let Poll::Ready(Ok(res)) = future.as_mut().poll(&mut cx) else {
            panic!("the timed-out request is answered at its first poll");
        };
        assert_eq!(res.status(), http::StatusCode::SERVICE_UNAVAILABLE);
        let committed = res.extensions().get::<shared_headers::Committed>().unwrap();
        assert_eq!(committed.outcome(), shared_headers::Outcome::TimedOut);
        assert!(
            !ran.load(Ordering::SeqCst),
            "the handler ran after its deadline"
        );
    }

    /// The timer thread's commit holds an `Exchange` of its own for a moment (upgraded from its
    /// weak entry): the count of clones must count it, or the drops around it reach zero while a
    /// task still holds the exchange, and that task's late write is never reported.
    #[test]
    fn a_task_outliving_a_timer_commit_has_its_late_write_reported() {
        use std::sync::mpsc;
        use std::time::Duration;
        use tower::ServiceExt;

        let (reports_tx, reports) = mpsc::channel();
        let (go_tx, go) = mpsc::channel::<()>();
        let go = Arc::new(std::sync::Mutex::new(go));
        let (task_tx, task) = mpsc::channel();
        let service = SharedHeadersLayer::new()
            .timeout(Duration::from_millis(20))
            .on_late_writes(move |late| {
                let _ = reports_tx.send(late.refused_writes());
            })
            .layer(tower::service_fn(move |req: Request<()>| {
                let exchange = req
                    .extensions()
                    .get::<shared_headers::Exchange>()
                    .unwrap()
                    .clone();
                let go = go.clone();
                task_tx
                    .send(std::thread::spawn(move || {
                        go.lock().unwrap().recv().unwrap();
                        assert!(
                            exchange
                                .response()
                                .insert("x-late", "1".parse().unwrap())
                                .is_err()
                        );
                    }))
                    .unwrap();
                // Block the serving task past the deadline: the timer thread commits.
                std::thread::sleep(Duration::from_millis(200));
                async { Ok::<_, Infallible>(Response::new(String::new())) }
            }));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let res = runtime.block_on(service.oneshot(Request::new(()))).unwrap();
        assert_eq!(res.status(), http::StatusCode::SERVICE_UNAVAILABLE);
        drop(res);
        assert!(
            reports.recv_timeout(Duration::from_millis(100)).is_err(),
            "reported while the task still held the exchange"
        );
        go_tx.send(()).unwrap();
        task.recv().unwrap().join().unwrap();
        assert_eq!(reports.recv_timeout(Duration::from_secs(10)), Ok(1));
    }

    /// A finished response future's task must not stay alive through the waker the exchange
    /// holds for its deadline, while anything else keeps the exchange: a kept record, a handle,
    /// or a spawned task's `Exchange` clone. The handler is pending once, so the future
    /// registers its waker.
    #[test]
    fn a_finished_response_future_does_not_keep_its_task_waker() {
        use std::future::Future;
        use std::time::Duration;

        struct Task;
        impl std::task::Wake for Task {
            fn wake(self: Arc<Self>) {}
        }
        let task = Arc::new(Task);
        let waker = Waker::from(task.clone());
        let mut cx = Context::from_waker(&waker);
        let kept = Arc::new(std::sync::Mutex::new(None));
        let keep = kept.clone();
        let mut service = SharedHeadersLayer::new()
            .timeout(Duration::from_secs(30))
            .layer(tower::service_fn(move |req: Request<()>| {
                // A spawned task's clone of the exchange, alive after the response.
                *keep.lock().unwrap() = req.extensions().get::<shared_headers::Exchange>().cloned();
                let mut pending_once = true;
                std::future::poll_fn(move |cx| {
                    if std::mem::take(&mut pending_once) {
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                    Poll::Ready(Ok::<_, Infallible>(Response::new(String::new())))
                })
            }));
        let mut future = std::pin::pin!(service.call(Request::new(())));
        assert!(future.as_mut().poll(&mut cx).is_pending());
        let Poll::Ready(Ok(res)) = future.as_mut().poll(&mut cx) else {
            panic!("the handler is ready at its second poll");
        };
        let record = res
            .extensions()
            .get::<shared_headers::Committed>()
            .unwrap()
            .clone();
        let handle = record.response().clone();
        drop(res);
        drop(waker);
        assert!(
            kept.lock().unwrap().is_some(),
            "the task's exchange is still alive"
        );
        assert_eq!(
            Arc::strong_count(&task),
            1,
            "the exchange still holds the finished future's waker"
        );
        drop((record, handle));
    }

    /// A handler that blocks past its deadline and then fails: the timer thread committed the
    /// timeout first, so the answer is the timeout's (as the record says), not the late error.
    #[test]
    fn an_error_after_the_deadline_commit_is_answered_with_the_timeout() {
        use std::time::Duration;
        use tower::ServiceExt;

        let service = SharedHeadersLayer::new()
            .timeout(Duration::from_millis(20))
            .layer(tower::service_fn(|_req: Request<()>| async {
                std::thread::sleep(Duration::from_millis(200));
                Err::<Response<String>, _>(std::io::Error::other("failed late"))
            }));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let res = runtime
            .block_on(service.oneshot(Request::new(())))
            .expect("answered with the timeout, not the late error");
        assert_eq!(res.status(), http::StatusCode::SERVICE_UNAVAILABLE);
        let committed = res.extensions().get::<shared_headers::Committed>().unwrap();
        assert_eq!(committed.outcome(), shared_headers::Outcome::TimedOut);
    }

    /// The layer's handles live inside the exchange's allocation, so a task holding only a
    /// handle keeps that allocation alive. The late-writes report must still run when the last
    /// `Exchange` is dropped (as documented), not wait for the last handle: here a task holding
    /// an `Exchange` writes late and ends, and the report must come while another task still
    /// holds a response handle. That handle's later write is refused, and reported by nobody.
    #[test]
    fn the_late_writes_report_runs_at_the_last_exchange_not_the_last_handle() {
        use std::sync::mpsc;
        use std::time::Duration;
        use tower::ServiceExt;

        let (reports_tx, reports) = mpsc::channel();
        let (release_tx, release) = mpsc::channel::<()>();
        let release = Arc::new(std::sync::Mutex::new(release));
        let (handle_task_tx, handle_task) = mpsc::channel();
        let layer = SharedHeadersLayer::new().on_late_writes(move |late| {
            let _ = reports_tx.send(late.refused_writes());
        });
        let service = layer.layer(tower::service_fn(move |req: Request<()>| {
            let exchange = req.extensions().get::<shared_headers::Exchange>().unwrap();
            // A task holding an `Exchange`: writes once after the commit, then ends.
            let task = exchange.clone();
            std::thread::spawn(move || {
                while !task.is_committed() {
                    std::thread::sleep(Duration::from_millis(1));
                }
                assert!(
                    task.response()
                        .insert("x-late", "1".parse().unwrap())
                        .is_err()
                );
            });
            // A task holding only the response handle, until released.
            let handle = exchange.response().clone();
            let release = release.clone();
            handle_task_tx
                .send(std::thread::spawn(move || {
                    release.lock().unwrap().recv().unwrap();
                    assert!(handle.insert("x-later", "2".parse().unwrap()).is_err());
                }))
                .unwrap();
            async { Ok::<_, Infallible>(Response::new(String::new())) }
        }));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let res = runtime.block_on(service.oneshot(Request::new(()))).unwrap();
        assert_eq!(res.status(), http::StatusCode::OK);
        drop(res);
        let refused = reports
            .recv_timeout(Duration::from_secs(10))
            .expect("no report while a task still held a handle: it waited for the last handle");
        assert_eq!(refused, 1);
        release_tx.send(()).unwrap();
        handle_task.recv().unwrap().join().unwrap();
        assert!(
            reports.recv_timeout(Duration::from_millis(100)).is_err(),
            "a second report"
        );
    }
}

#[cfg(feature = "client")]
mod client {
    use super::*;
    use shared_headers::client::{DefaultHeadersLayer, Merge};
    use tower::{Layer, ServiceExt};

    /// The defaults' merge decides once per *name* and then appends all its values: deciding per
    /// value would keep only the first value under `KeepRequest` (the name is in the request
    /// after it) and only the last under `Override` (each value removes the previous ones).
    #[test]
    fn every_value_of_a_multi_valued_default_is_merged_once_per_name() {
        let defaults = SharedHeaders::new();
        defaults.append("x-multi", v("1")).unwrap();
        defaults.append("x-multi", v("2")).unwrap();
        defaults.append("x-multi", v("3")).unwrap();
        defaults.insert("x-single", v("s")).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        for merge in [Merge::KeepRequest, Merge::Override, Merge::Append] {
            let layer = DefaultHeadersLayer::new(defaults.clone()).default_merge(merge);
            let service = layer.layer(tower::service_fn(|req: http::Request<()>| async move {
                Ok::<_, std::convert::Infallible>(http::Response::new(req.headers().clone()))
            }));
            let mut request = http::Request::new(());
            // A non-empty request, so the merge runs per name (not the whole-map fast path).
            request.headers_mut().insert("x-own", v("own"));
            let sent = rt.block_on(service.oneshot(request)).unwrap().into_body();
            let multi: Vec<_> = sent.get_all("x-multi").iter().collect();
            assert_eq!(multi, ["1", "2", "3"], "{merge:?}");
            assert_eq!(sent["x-single"], "s", "{merge:?}");
            assert_eq!(sent["x-own"], "own", "{merge:?}");
        }
    }
}
