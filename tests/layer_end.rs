//! The end of the response (`SharedHeadersLayer::on_response_end`): exactly one call per
//! request, with how it ended, the bytes of body taken and the time to the end; in process for
//! each ending, and over a real HTTP/1.1 socket for a body sent to its end.
#![cfg(feature = "server")]

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Bytes, Frame};
use shared_headers::Outcome;
use shared_headers::server::{Ending, ResponseEnd, SharedHeadersLayer};
use tower::{Layer, ServiceExt};

type Ends = Arc<Mutex<Vec<ResponseEnd>>>;

fn run<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async { tokio::time::timeout(Duration::from_secs(20), f).await })
        .expect("test timed out")
}

fn layer(ends: &Ends) -> SharedHeadersLayer {
    let ends = Arc::clone(ends);
    SharedHeadersLayer::new()
        .timeout(Duration::from_millis(100))
        .on_response_end(move |end| ends.lock().unwrap().push(end.clone()))
}

#[test]
fn a_body_sent_to_its_end_reports_completed_with_its_bytes() {
    run(async {
        let ends = Ends::default();
        let service = layer(&ends).layer(tower::service_fn(|_req: Request<()>| async {
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"hello world"))))
        }));
        let res = service.oneshot(Request::new(())).await.unwrap();
        assert!(
            ends.lock().unwrap().is_empty(),
            "not before the body is sent"
        );
        let body = res.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, "hello world");
        let ends = ends.lock().unwrap();
        assert_eq!(ends.len(), 1);
        assert_eq!(ends[0].ending(), Ending::Completed);
        assert_eq!(ends[0].bytes_sent(), 11);
        assert_eq!(ends[0].status_sent(), Some(StatusCode::OK));
        assert_eq!(ends[0].committed().outcome(), Outcome::Answered);
        assert!(ends[0].duration() >= ends[0].committed().time_to_commit());
    });
}

/// A body of frames given in advance; an `Err` item is a body error.
#[derive(Default)]
struct Frames(VecDeque<Result<Bytes, std::io::Error>>);

impl Frames {
    fn new(items: impl IntoIterator<Item = Result<&'static str, &'static str>>) -> Self {
        Frames(
            items
                .into_iter()
                .map(|item| {
                    item.map(|s| Bytes::from_static(s.as_bytes()))
                        .map_err(std::io::Error::other)
                })
                .collect(),
        )
    }
}

impl Body for Frames {
    type Data = Bytes;
    type Error = std::io::Error;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        Poll::Ready(self.0.pop_front().map(|item| item.map(Frame::data)))
    }
    fn is_end_stream(&self) -> bool {
        self.0.is_empty()
    }
}

fn frames_service(
    ends: &Ends,
    items: Vec<Result<&'static str, &'static str>>,
) -> impl tower::Service<
    Request<()>,
    Response = Response<shared_headers::server::ResponseBody<Frames>>,
    Error = Infallible,
    Future = impl Send,
> + Clone {
    layer(ends).layer(tower::service_fn(move |_req: Request<()>| {
        let items = items.clone();
        async move { Ok::<_, Infallible>(Response::new(Frames::new(items))) }
    }))
}

#[test]
fn an_aborted_body_a_body_dropped_early_and_an_unsent_request_are_told_apart() {
    run(async {
        // Aborted: the second frame is an error.
        let ends = Ends::default();
        let service = frames_service(&ends, vec![Ok("abc"), Err("disk gone"), Ok("hi")]);
        let res = service.oneshot(Request::new(())).await.unwrap();
        let mut body = res.into_body();
        assert_eq!(
            body.frame().await.unwrap().unwrap().into_data().unwrap(),
            "abc"
        );
        assert!(body.frame().await.unwrap().is_err());
        drop(body);
        let got: Vec<_> = ends
            .lock()
            .unwrap()
            .iter()
            .map(|e| (e.ending(), e.bytes_sent()))
            .collect();
        assert_eq!(
            got,
            [(Ending::Aborted, 3)],
            "once, at the error, not again at the drop"
        );

        // Dropped: the server stopped after the first frame (the client went away).
        let ends = Ends::default();
        let service = frames_service(&ends, vec![Ok("abc"), Ok("defg"), Ok("hi")]);
        let res = service.oneshot(Request::new(())).await.unwrap();
        let mut body = res.into_body();
        body.frame().await.unwrap().unwrap();
        drop(body);
        let got: Vec<_> = ends
            .lock()
            .unwrap()
            .iter()
            .map(|e| (e.ending(), e.bytes_sent()))
            .collect();
        assert_eq!(got, [(Ending::Dropped, 3)]);

        // Completed: every frame taken, the end seen through `is_end_stream` after the last.
        let ends = Ends::default();
        let service = frames_service(&ends, vec![Ok("abc"), Ok("defg"), Ok("hi")]);
        let res = service.oneshot(Request::new(())).await.unwrap();
        let body = res.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, "abcdefghi");
        let got: Vec<_> = ends
            .lock()
            .unwrap()
            .iter()
            .map(|e| (e.ending(), e.bytes_sent()))
            .collect();
        assert_eq!(got, [(Ending::Completed, 9)]);

        // An empty body that a server never polls (its `is_end_stream` is true at once) is
        // complete when dropped, not dropped early.
        let ends = Ends::default();
        let service = frames_service(&ends, vec![]);
        let res = service.oneshot(Request::new(())).await.unwrap();
        let body = res.into_body();
        assert!(body.is_end_stream());
        drop(body);
        let got: Vec<_> = ends
            .lock()
            .unwrap()
            .iter()
            .map(|e| (e.ending(), e.bytes_sent()))
            .collect();
        assert_eq!(got, [(Ending::Completed, 0)]);

        // Unsent: the future is dropped before the answer (an outer timeout).
        let ends = Ends::default();
        let slow = layer(&ends).layer(tower::service_fn(|_req: Request<()>| async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok::<_, Infallible>(Response::new(Frames::default()))
        }));
        let cancelled =
            tokio::time::timeout(Duration::from_millis(5), slow.oneshot(Request::new(()))).await;
        assert!(cancelled.is_err());
        let ends = ends.lock().unwrap();
        assert_eq!(ends.len(), 1);
        assert_eq!(
            (ends[0].ending(), ends[0].status_sent()),
            (Ending::Unsent, None)
        );
        assert_eq!(ends[0].committed().outcome(), Outcome::Cancelled);
    });
}

/// Over a real HTTP/1.1 connection: the timeout answer's empty body and a handler's body each
/// end once, completed, with the bytes the client read.
#[test]
fn over_a_socket_each_response_ends_once() {
    use hyper_util::rt::TokioIo;
    use hyper_util::service::TowerToHyperService;
    run(async {
        let ends = Ends::default();
        let service = layer(&ends).layer(tower::service_fn(
            |req: Request<hyper::body::Incoming>| async move {
                if req.uri().path() == "/slow" {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"0123456789"))))
            },
        ));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let service = TowerToHyperService::new(service.clone());
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service),
                );
            }
        });
        for (path, status, len) in [
            ("/", StatusCode::OK, 10),
            ("/slow", StatusCode::SERVICE_UNAVAILABLE, 0),
        ] {
            let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .unwrap();
            tokio::spawn(conn);
            let req = Request::get(path)
                .header("host", "localhost")
                .body(http_body_util::Empty::<Bytes>::new())
                .unwrap();
            let res = sender.send_request(req).await.unwrap();
            assert_eq!(res.status(), status);
            let body = res.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(body.len(), len);
        }
        // The server's side of the last response ends right after the client read it.
        for _ in 0..200 {
            if ends.lock().unwrap().len() >= 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let ends = ends.lock().unwrap();
        let got: Vec<_> = ends
            .iter()
            .map(|e| {
                (
                    e.committed().outcome(),
                    e.status_sent(),
                    e.ending(),
                    e.bytes_sent(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (
                    Outcome::Answered,
                    Some(StatusCode::OK),
                    Ending::Completed,
                    10
                ),
                (
                    Outcome::TimedOut,
                    Some(StatusCode::SERVICE_UNAVAILABLE),
                    Ending::Completed,
                    0
                ),
            ]
        );
    });
}
