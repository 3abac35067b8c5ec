//! `SharedHeadersLayer` over real sockets: a hyper 1 server on 127.0.0.1:0, hyper clients.
//!
//! Ordering that matters is made deterministic with channels ("write now that the client has
//! the response"), except in the race test, whose whole point is random timing and which only
//! asserts invariants that hold whatever the timing.
#![cfg(feature = "server")]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{HeaderMap, HeaderName, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use shared_headers::server::SharedHeadersLayer;
use shared_headers::{Builder, Committed, Error, Exchange, Limit, Outcome, SharedHeaders};
use tokio::sync::{mpsc, oneshot};
use tower::{Layer, ServiceBuilder, ServiceExt};

#[path = "support/server.rs"]
mod server;
use server::{Body, Sent, Svc, exchange_of, run, serve};

async fn connect(addr: SocketAddr) -> SendRequest<Empty<Bytes>> {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    sender
}

async fn get(sender: &mut SendRequest<Empty<Bytes>>, id: usize) -> (StatusCode, HeaderMap) {
    sender.ready().await.unwrap();
    let req = Request::get("/")
        .header("host", "localhost")
        .header("x-id", id)
        .body(Empty::new())
        .unwrap();
    let res = sender.send_request(req).await.unwrap();
    let (parts, body) = res.into_parts();
    body.collect().await.unwrap();
    (parts.status, parts.headers)
}

/// An outer "logging layer": records every committed record it sees on a response.
fn with_log<S>(log: Arc<Mutex<Vec<Committed>>>, service: S) -> Svc
where
    S: tower::Service<Request<Incoming>, Response = Response<Sent>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    ServiceBuilder::new()
        .map_response(move |res: Response<Sent>| {
            let committed = res.extensions().get::<Committed>().expect("no Committed");
            log.lock().unwrap().push(committed.clone());
            res
        })
        .service(service)
        .boxed_clone()
}

fn value(v: impl ToString) -> http::HeaderValue {
    v.to_string().parse().unwrap()
}

#[test]
fn handler_wins() {
    run(async {
        let log = Arc::default();
        let (tx, mut exchanges) = mpsc::unbounded_channel();
        let service = SharedHeadersLayer::new()
            .timeout(Duration::from_secs(10))
            .layer(tower::service_fn(move |req: Request<Incoming>| {
                let tx = tx.clone();
                async move {
                    let exchange = exchange_of(&req);
                    // Only the exchange is in the extensions: no bare handle that could collide
                    // with a `SharedHeaders` another layer stores there.
                    assert!(req.extensions().get::<SharedHeaders>().is_none());
                    let request = exchange.request();
                    assert_eq!(request.get("x-id").unwrap(), "1");
                    request.insert("x-user", value("ada")).unwrap();
                    // Ordinary middleware reading req.headers() sees the headers as received.
                    assert_eq!(req.headers()["x-id"], "1");
                    assert!(!req.headers().contains_key("x-user"));
                    exchange
                        .response()
                        .insert("x-cache", value("miss"))
                        .unwrap();
                    tx.send(exchange).unwrap();
                    Ok::<_, Infallible>(Response::new(Body::from("ok")))
                }
            }));
        let addr = serve(with_log(Arc::clone(&log), service), false).await;

        let (status, headers) = get(&mut connect(addr).await, 1).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers["x-cache"], "miss");

        let exchange = exchanges.recv().await.unwrap();
        let committed = exchange.committed().expect("not committed");
        assert_eq!(committed.outcome(), Outcome::Answered);
        assert_eq!(committed.request()["x-user"], "ada");
        assert_eq!(committed.request()["x-id"], "1");
        assert_eq!(*log.lock().unwrap(), [committed]);
    });
}

#[test]
fn deadline_wins() {
    run(async {
        let log = Arc::default();
        let (tx, mut exchanges) = mpsc::unbounded_channel();
        let service = SharedHeadersLayer::new()
            .timeout(Duration::from_millis(50))
            .timeout_status(StatusCode::GATEWAY_TIMEOUT)
            .layer(tower::service_fn(move |req: Request<Incoming>| {
                let tx = tx.clone();
                async move {
                    let exchange = exchange_of(&req);
                    exchange.response().insert("x-early", value("1")).unwrap();
                    tx.send(exchange).unwrap();
                    std::future::pending::<()>().await; // the handler never answers
                    Ok::<_, Infallible>(Response::new(Body::from("never")))
                }
            }));
        let addr = serve(with_log(Arc::clone(&log), service), false).await;

        let (status, headers) = get(&mut connect(addr).await, 7).await;
        assert_eq!(status, StatusCode::GATEWAY_TIMEOUT);
        // Written before the deadline: committed and sent, even on a timeout.
        assert_eq!(headers["x-early"], "1");

        let exchange = exchanges.recv().await.unwrap();
        let committed = exchange.committed().unwrap();
        assert_eq!(committed.outcome(), Outcome::TimedOut);
        assert_eq!(committed.response()["x-early"], "1");
        assert_eq!(*log.lock().unwrap(), [committed]);
    });
}

#[test]
fn spawned_task_writing_after_commit_gets_sealed_and_is_counted() {
    run(async {
        let (tx, mut results) = mpsc::unbounded_channel();
        let (go_tx, go_rx) = oneshot::channel::<()>();
        let go_rx = Arc::new(Mutex::new(Some(go_rx)));
        let service =
            SharedHeadersLayer::new().layer(tower::service_fn(move |req: Request<Incoming>| {
                let (tx, go_rx) = (tx.clone(), go_rx.lock().unwrap().take().unwrap());
                async move {
                    let exchange = exchange_of(&req);
                    tokio::spawn(async move {
                        go_rx.await.unwrap(); // the client already has the response
                        let request = exchange.request().insert("x-late", value("1"));
                        let response = exchange.response().append("x-late", value("1"));
                        tx.send((exchange, request, response)).unwrap();
                    });
                    Ok::<_, Infallible>(Response::new(Body::from("ok")))
                }
            }));
        let addr = serve(service.boxed_clone(), false).await;

        let (status, headers) = get(&mut connect(addr).await, 1).await;
        assert_eq!(status, StatusCode::OK);
        assert!(!headers.contains_key("x-late"));
        go_tx.send(()).unwrap();

        let (exchange, request, response) = results.recv().await.unwrap();
        let committed = exchange.committed().unwrap();
        let sealed = |v| Err(Error::Sealed { version: v });
        assert_eq!(request, sealed(committed.request().version()));
        assert_eq!(
            response.map(|_| None),
            sealed(committed.response().version())
        );
        assert_eq!(exchange.request().refused_writes(), 1);
        assert_eq!(exchange.response().refused_writes(), 1);
        assert_eq!(exchange.refused_writes(), 2);
        // Refused writes publish nothing.
        assert_eq!(exchange.request().snapshot(), *committed.request());
    });
}

#[test]
fn outer_timeout_layer_cancelling_the_future_still_seals() {
    run(async {
        let (tx, mut exchanges) = mpsc::unbounded_channel();
        let inner =
            SharedHeadersLayer::new().layer(tower::service_fn(move |req: Request<Incoming>| {
                let tx = tx.clone();
                async move {
                    let exchange = exchange_of(&req);
                    exchange
                        .request()
                        .insert("x-stage", value("started"))
                        .unwrap();
                    tx.send(exchange).unwrap();
                    std::future::pending::<()>().await;
                    Ok::<_, Infallible>(Response::new(Body::from("never")))
                }
            }));
        let service = ServiceBuilder::new()
            .layer(tower_http::timeout::TimeoutLayer::with_status_code(
                StatusCode::REQUEST_TIMEOUT,
                Duration::from_millis(50),
            ))
            .service(inner);
        let addr = serve(service.boxed_clone(), false).await;

        let (status, _) = get(&mut connect(addr).await, 1).await;
        assert_eq!(status, StatusCode::REQUEST_TIMEOUT);

        let exchange = exchanges.recv().await.unwrap();
        // The outer layer answered, then hyper dropped the future: our guard committed.
        let committed = exchange.committed().expect("dropped future did not commit");
        assert_eq!(committed.outcome(), Outcome::Cancelled);
        assert_eq!(committed.request()["x-stage"], "started");
        let late = exchange.request().insert("x-stage", value("finished"));
        assert!(matches!(late, Err(Error::Sealed { .. })));
        assert_eq!(exchange.refused_writes(), 1);
    });
}

#[test]
fn tower_timeout_error_path_also_seals() {
    // tower's own TimeoutLayer answers with an error instead of a response; in process.
    run(async {
        let (tx, mut exchanges) = mpsc::unbounded_channel();
        let service = ServiceBuilder::new()
            .timeout(Duration::from_millis(20))
            .layer(SharedHeadersLayer::new())
            .service_fn(move |req: Request<()>| {
                tx.send(exchange_of(&req)).unwrap();
                async move {
                    std::future::pending::<()>().await;
                    Ok::<_, Infallible>(Response::new(String::new()))
                }
            });
        let err = service.oneshot(Request::new(())).await.unwrap_err();
        assert!(err.is::<tower::timeout::error::Elapsed>());
        let exchange = exchanges.recv().await.unwrap();
        assert_eq!(exchange.committed().unwrap().outcome(), Outcome::Cancelled);
    });
}

/// Regression: the response future dropped the handler's future before its commit guard
/// committed `Cancelled`, so a write from the handler's drop glue was accepted after the outer
/// timeout had answered, and then showed up in the committed headers.
#[test]
fn handler_drop_glue_writing_after_cancellation_is_refused() {
    struct WriteOnDrop {
        exchange: Exchange,
        tx: mpsc::UnboundedSender<Result<Option<http::HeaderValue>, Error>>,
    }
    impl Drop for WriteOnDrop {
        fn drop(&mut self) {
            let write = self.exchange.response().insert("x-dropped", value("1"));
            self.tx.send(write).unwrap();
        }
    }

    run(async {
        let (tx, mut writes) = mpsc::unbounded_channel();
        let (exchange_tx, mut exchanges) = mpsc::unbounded_channel();
        let service = SharedHeadersLayer::new().layer(tower::service_fn(move |req: Request<()>| {
            let exchange = exchange_of(&req);
            exchange_tx.send(exchange.clone()).unwrap();
            let guard = WriteOnDrop {
                exchange,
                tx: tx.clone(),
            };
            async move {
                let _guard = guard;
                std::future::pending::<()>().await;
                Ok::<_, Infallible>(Response::new(String::new()))
            }
        }));
        // The outer timeout drops the response future: guard, then the handler's future.
        let cancelled =
            tokio::time::timeout(Duration::from_millis(20), service.oneshot(Request::new(())))
                .await;
        assert!(cancelled.is_err(), "the handler never answers");

        let write = writes.recv().await.unwrap();
        let exchange = exchanges.recv().await.unwrap();
        let committed = exchange.committed().expect("dropped future did not commit");
        assert_eq!(committed.outcome(), Outcome::Cancelled);
        assert_eq!(
            write,
            Err(Error::Sealed {
                version: committed.response().version()
            })
        );
        assert!(!committed.response().contains_key("x-dropped"));
        assert_eq!(exchange.refused_writes(), 1);
    });
}

#[test]
fn request_over_the_limits_is_rejected_without_calling_the_handler() {
    run(async {
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let handler = {
            let calls = Arc::clone(&calls);
            tower::service_fn(move |_: Request<()>| {
                calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                async { Ok::<_, Infallible>(Response::new(String::from("handled"))) }
            })
        };
        let limits = Builder::new()
            .max_entries(2)
            .sensitive([http::HeaderName::from_static("x-api-key")]);
        let default_status = SharedHeadersLayer::new()
            .request_policy(limits.clone())
            .layer(handler.clone());
        let custom_status = SharedHeadersLayer::new()
            .request_policy(limits)
            .rejection_status(StatusCode::BAD_REQUEST)
            .layer(handler);
        let request = |n: usize| {
            let mut req = Request::new(());
            for i in 0..n {
                req.headers_mut()
                    .insert(HeaderName::try_from(format!("x-{i}")).unwrap(), value(i));
            }
            req.headers_mut().insert("x-api-key", value("s3cr3t"));
            req
        };

        // 1 + 1 headers: within the limit, handled.
        let res = default_status.clone().oneshot(request(1)).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);

        // 2 + 1 headers: rejected, the handler is not called.
        for (service, status) in [
            (default_status, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE),
            (custom_status, StatusCode::BAD_REQUEST),
        ] {
            let res = service.oneshot(request(2)).await.unwrap();
            assert_eq!(res.status(), status);
            assert_eq!(http_body::Body::size_hint(res.body()).exact(), Some(0)); // own answer: empty
            let committed = res.extensions().get::<Committed>().unwrap();
            assert_eq!(committed.outcome(), Outcome::Rejected);
            assert!(committed.request().is_sealed() && committed.response().is_sealed());
            // The log gets the headers as received, with the secret name redacted.
            assert_eq!(committed.request().len(), 3);
            assert_eq!(committed.request()["x-api-key"], "s3cr3t");
            assert!(!format!("{committed:?}").contains("s3cr3t"));
            // One extension per message: the record, not the exchange.
            assert!(res.extensions().get::<Exchange>().is_none());
        }
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    });
}

#[test]
fn builders_set_the_limits_and_secrets_of_every_request() {
    run(async {
        let service = SharedHeadersLayer::new()
            .request_policy(Builder::new().max_entries(3))
            .response_policy(
                Builder::new()
                    .max_bytes(32)
                    .sensitive([http::HeaderName::from_static("x-session")]),
            )
            .layer(tower::service_fn(|req: Request<()>| async move {
                let exchange = exchange_of(&req);
                let request = exchange.request();
                request.insert("x-user", value("ada")).unwrap(); // 3 of 3
                assert_eq!(
                    request.append("x-more", value("1")),
                    Err(Error::LimitExceeded {
                        limit: Limit::Entries,
                        max: 3,
                        attempted: 4
                    })
                );
                let response = exchange.response();
                response.insert("x-session", value("s3cr3t")).unwrap(); // 9 + 6 bytes
                let over = response.insert("x-huge", value("a".repeat(32)));
                assert!(matches!(
                    over,
                    Err(Error::LimitExceeded {
                        limit: Limit::Bytes,
                        ..
                    })
                ));
                Ok::<_, Infallible>(Response::new(String::new()))
            }));
        let mut req = Request::new(());
        req.headers_mut().insert("x-a", value(1));
        req.headers_mut().insert("x-b", value(2));
        let res = service.oneshot(req).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(res.headers()["x-session"], "s3cr3t");
        assert!(!res.headers().contains_key("x-huge"));
        let committed = res.extensions().get::<Committed>().unwrap();
        assert_eq!(committed.outcome(), Outcome::Answered);
        assert_eq!(committed.request()["x-user"], "ada");
        assert!(!format!("{committed:?}").contains("s3cr3t"));
        // The request handle kept the limit: 2 received + 1 written.
        assert_eq!(committed.request().len(), 3);
    });
}

/// The response carries only the final `Committed` record; writes refused after it are
/// reported by `on_late_writes`, once, after the task that made them let go of the exchange.
#[test]
fn late_writes_are_reported_after_the_last_task_let_go() {
    run(async {
        let (go_tx, go_rx) = oneshot::channel::<()>();
        let (done_tx, done_rx) = oneshot::channel();
        let (report_tx, report_rx) = std::sync::mpsc::channel();
        let slots = Arc::new(Mutex::new(Some((go_rx, done_tx))));
        let layer = SharedHeadersLayer::new().on_late_writes(move |late| {
            report_tx
                .send((late.committed().outcome(), late.refused_writes()))
                .unwrap();
        });
        let service = layer.layer(tower::service_fn(move |req: Request<()>| {
            let (go_rx, done_tx) = slots.lock().unwrap().take().unwrap();
            let exchange = exchange_of(&req);
            tokio::spawn(async move {
                go_rx.await.unwrap();
                let late = exchange.response().insert("x-late", value("1"));
                let again = exchange.annotations().insert("x-late", value("1"));
                done_tx.send((late, again)).unwrap();
                // `exchange`, the last clone, drops here: the report follows.
            });
            async { Ok::<_, Infallible>(Response::new(String::new())) }
        }));
        let res = service.oneshot(Request::new(())).await.unwrap();
        let committed = res.extensions().get::<Committed>().unwrap().clone();
        assert_eq!(committed.outcome(), Outcome::Answered);
        assert!(
            res.extensions().get::<Exchange>().is_none(),
            "one extension"
        );
        assert!(
            report_rx.try_recv().is_err(),
            "no report while the task runs"
        );

        go_tx.send(()).unwrap();
        let (late, again) = done_rx.await.unwrap();
        assert!(matches!(late, Err(Error::Sealed { .. })));
        assert!(matches!(again, Err(Error::Sealed { .. })));
        let report = tokio::task::spawn_blocking(move || {
            let first = report_rx.recv_timeout(Duration::from_secs(10));
            let second = report_rx.recv_timeout(Duration::from_millis(100));
            (first, second)
        })
        .await
        .unwrap();
        assert_eq!(report.0, Ok((Outcome::Answered, 2)));
        assert!(report.1.is_err(), "reported once");
    });
}

#[test]
fn inner_error_commits_as_failed_and_passes_through() {
    run(async {
        let (tx, mut exchanges) = mpsc::unbounded_channel();
        let service = SharedHeadersLayer::new()
            .timeout(Duration::from_secs(10))
            .layer(tower::service_fn(move |req: Request<()>| {
                tx.send(exchange_of(&req)).unwrap();
                async move { Err::<Response<String>, _>("backend down") }
            }));
        let err = service.oneshot(Request::new(())).await.unwrap_err();
        assert_eq!(err, "backend down");
        let exchange = exchanges.recv().await.unwrap();
        assert_eq!(exchange.committed().unwrap().outcome(), Outcome::Failed);
        assert!(exchange.response().insert("x-late", value("1")).is_err());
    });
}

#[test]
fn response_headers_written_before_the_commit_appear_and_after_do_not() {
    run(async {
        let (go_tx, go_rx) = oneshot::channel::<()>();
        let (done_tx, done_rx) = oneshot::channel();
        let slots = Arc::new(Mutex::new(Some((go_rx, done_tx))));
        let service =
            SharedHeadersLayer::new().layer(tower::service_fn(move |req: Request<Incoming>| {
                let (go_rx, done_tx) = slots.lock().unwrap().take().unwrap();
                async move {
                    let exchange = exchange_of(&req);
                    let before = {
                        let exchange = exchange.clone();
                        tokio::spawn(async move {
                            exchange.response().append("x-task", value("before"))
                        })
                    };
                    tokio::spawn(async move {
                        go_rx.await.unwrap();
                        let after = exchange.response().append("x-task", value("after"));
                        done_tx.send(after).unwrap();
                    });
                    before.await.unwrap().unwrap();
                    let mut res = Response::new(Body::from("ok"));
                    res.headers_mut().insert("x-task", value("from-handler"));
                    Ok::<_, Infallible>(res)
                }
            }));
        let addr = serve(service.boxed_clone(), false).await;

        let (_, headers) = get(&mut connect(addr).await, 1).await;
        go_tx.send(()).unwrap();
        let after = done_rx.await.unwrap();
        assert!(matches!(after, Err(Error::Sealed { .. })));
        // The committed value replaced the handler's own, and the late one is absent.
        let sent: Vec<_> = headers.get_all("x-task").iter().collect();
        assert_eq!(sent, ["before"]);
    });
}

/// The race at the deadline: handlers finishing just before or just after it, tasks writing
/// just before or just after the commit. Whatever the timing, for every request:
/// exactly one commit, logged once; the log equals what was committed and what was sent; every
/// write that returned `Ok` is in the committed headers and every refused one is not.
#[test]
fn race_at_the_deadline() {
    const REQUESTS: usize = 300;
    const CONNECTIONS: usize = 6;
    const TASKS: usize = 3;
    run(async {
        let log: Arc<Mutex<Vec<Committed>>> = Arc::default();
        let (tx, mut writes) = mpsc::unbounded_channel();
        // Tasks the handlers spawned: a request whose deadline fired before its future was first
        // polled never runs its handler (the commit is at the wall clock), so it spawns none.
        let spawned = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = Arc::clone(&spawned);
        let service = SharedHeadersLayer::new()
            .timeout(Duration::from_millis(4))
            .layer(tower::service_fn(move |req: Request<Incoming>| {
                let tx = tx.clone();
                let spawned = Arc::clone(&counted);
                async move {
                    let exchange = exchange_of(&req);
                    let id: u64 = req.headers()["x-id"].to_str().unwrap().parse().unwrap();
                    for task in 0..TASKS as u64 {
                        let (exchange, tx) = (exchange.clone(), tx.clone());
                        spawned.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        tokio::spawn(async move {
                            let delay = (id * 3_119 + task * 1_301) % 8_000;
                            tokio::time::sleep(Duration::from_micros(delay)).await;
                            let name = HeaderName::try_from(format!("x-task-{task}")).unwrap();
                            let request = exchange.request().insert(name.clone(), value(id));
                            let response = exchange.response().insert(name.clone(), value(id));
                            tx.send((id, name, request.is_ok(), response.is_ok(), exchange))
                                .unwrap();
                        });
                    }
                    let delay = (id * 2_731) % 8_000;
                    tokio::time::sleep(Duration::from_micros(delay)).await;
                    Ok::<_, Infallible>(Response::new(Body::from("ok")))
                }
            }));
        let addr = serve(with_log(Arc::clone(&log), service), false).await;

        let mut clients = tokio::task::JoinSet::new();
        for c in 0..CONNECTIONS {
            clients.spawn(async move {
                let mut sender = connect(addr).await;
                let mut seen = Vec::new();
                for id in (c..REQUESTS).step_by(CONNECTIONS) {
                    seen.push((id, get(&mut sender, id).await));
                }
                seen
            });
        }
        let mut sent = vec![None; REQUESTS];
        while let Some(seen) = clients.join_next().await {
            for (id, response) in seen.unwrap() {
                sent[id] = Some(response);
            }
        }

        // Exactly one log line (one commit) per request.
        let log = std::mem::take(&mut *log.lock().unwrap());
        assert_eq!(log.len(), REQUESTS);
        let mut logged = vec![None; REQUESTS];
        for committed in log {
            let id: usize = committed.request()["x-id"]
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
            assert!(
                logged[id].replace(committed).is_none(),
                "two commits for {id}"
            );
        }
        let (mut answered, mut timed_out) = (0, 0);
        for (id, (status, headers)) in sent.into_iter().map(Option::unwrap).enumerate() {
            let committed = logged[id].as_ref().unwrap();
            match committed.outcome() {
                Outcome::Answered => (answered += 1, assert_eq!(status, 200)),
                Outcome::TimedOut => (timed_out += 1, assert_eq!(status, 503)),
                other => panic!("unexpected outcome {other}"),
            };
            // The log equals what was sent.
            for task in 0..TASKS {
                let name = format!("x-task-{task}");
                assert_eq!(headers.get(&name), committed.response().get(&name));
            }
        }
        // Every write either made it into the commit or was refused, never lost.
        // Every request has been answered: no handler starts any more.
        let spawned = spawned.load(std::sync::atomic::Ordering::SeqCst);
        assert!(spawned <= REQUESTS * TASKS && spawned % TASKS == 0);
        for _ in 0..spawned {
            let (id, name, request_ok, response_ok, exchange) = writes.recv().await.unwrap();
            let committed = logged[id as usize].as_ref().unwrap();
            assert_eq!(exchange.committed().as_ref(), Some(committed));
            assert_eq!(request_ok, committed.request().contains_key(&name));
            assert_eq!(response_ok, committed.response().contains_key(&name));
        }
        eprintln!("race: {answered} answered, {timed_out} timed out");
        // Handler delays spread over 0..8 ms around a 4 ms deadline: both sides must win some.
        assert!(
            answered > 0 && timed_out > 0,
            "{answered} answered, {timed_out} timed out"
        );
    });
}
