//! The layer and the refresher against a real loopback server, through hyper-util's client.
//!
//! The server checks that the token and its companion header come from the same version (a torn
//! set gets `400`), and, when asked to, that the token is the one it currently accepts (else
//! `401`).
#![cfg(feature = "client")]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body_util::Empty;
use hyper::body::{Bytes, Incoming};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use shared_headers::SharedHeaders;
use shared_headers::client::{
    DefaultHeaders, DefaultHeadersLayer, DefaultsVersion, Merge, Refreshed, Refresher,
};
use tokio::time::timeout;
use tower::{Layer, ServiceExt};

const LIMIT: Duration = Duration::from_secs(20);
const COMPANION: &str = "x-token-gen";

struct Api {
    /// The generation the server accepts when `strict`.
    accepted: AtomicU64,
    strict: AtomicBool,
    torn: AtomicUsize,
}

/// `Bearer tok-{g}` plus `x-token-gen: {g}`, published together.
fn credentials(generation: u64) -> HeaderMap {
    let mut map = HeaderMap::new();
    let mut token = HeaderValue::from_str(&format!("Bearer tok-{generation}")).unwrap();
    token.set_sensitive(true);
    map.insert(AUTHORIZATION, token);
    map.insert(COMPANION, generation.into());
    map
}

fn generations(headers: &HeaderMap) -> (Option<u64>, Option<u64>) {
    let token = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok()?.strip_prefix("Bearer tok-")?.parse().ok());
    let companion = headers
        .get(COMPANION)
        .and_then(|v| v.to_str().ok()?.parse().ok());
    (token, companion)
}

async fn serve(api: Arc<Api>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let api = Arc::clone(&api);
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let api = Arc::clone(&api);
                async move {
                    let mut response = Response::new(Empty::<Bytes>::new());
                    let status = match generations(req.headers()) {
                        (Some(token), Some(companion)) if token == companion => {
                            response.headers_mut().insert("x-seen-gen", token.into());
                            if api.strict.load(Ordering::SeqCst)
                                && token != api.accepted.load(Ordering::SeqCst)
                            {
                                StatusCode::UNAUTHORIZED
                            } else {
                                StatusCode::OK
                            }
                        }
                        _ => {
                            api.torn.fetch_add(1, Ordering::SeqCst);
                            StatusCode::BAD_REQUEST
                        }
                    };
                    *response.status_mut() = status;
                    Ok::<_, Infallible>(response)
                }
            });
            let conn = hyper::server::conn::http1::Builder::new();
            tokio::spawn(conn.serve_connection(TokioIo::new(stream), service));
        }
    });
    addr
}

type Stack = DefaultHeaders<Client<HttpConnector, Empty<Bytes>>>;

fn client(defaults: &SharedHeaders) -> Stack {
    DefaultHeadersLayer::new(defaults.clone())
        .merge(AUTHORIZATION, Merge::Override)
        .layer(Client::builder(TokioExecutor::new()).build_http())
}

async fn get(client: &Stack, addr: SocketAddr) -> Response<Incoming> {
    let request = Request::get(format!("http://{addr}/"))
        .body(Empty::new())
        .unwrap();
    timeout(LIMIT, client.clone().oneshot(request))
        .await
        .unwrap()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rotation_during_requests_never_sends_a_torn_header_set() {
    const ROTATIONS: u64 = 150;
    const LOOPS: usize = 8;
    let api = Arc::new(Api {
        accepted: AtomicU64::new(0),
        strict: AtomicBool::new(false),
        torn: AtomicUsize::new(0),
    });
    let addr = serve(Arc::clone(&api)).await;
    // Version 0 carries generation 0; the writer is the only writer, so generation == version.
    let defaults = SharedHeaders::from(credentials(0));
    let client = client(&defaults);

    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (defaults, done) = (defaults.clone(), done.clone());
        tokio::spawn(async move {
            for generation in 1..=ROTATIONS {
                let new = credentials(generation);
                defaults.update(|m| m.extend(new)).unwrap();
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    let loops: Vec<_> = (0..LOOPS)
        .map(|_| {
            let (client, done) = (client.clone(), done.clone());
            tokio::spawn(async move {
                let mut versions = Vec::new();
                while !done.load(Ordering::SeqCst) {
                    let response = get(&client, addr).await;
                    assert_eq!(response.status(), StatusCode::OK, "torn header set sent");
                    let sent = DefaultsVersion::of(&response).expect("version in the response");
                    let seen: u64 = response.headers()["x-seen-gen"]
                        .to_str()
                        .unwrap()
                        .parse()
                        .unwrap();
                    assert_eq!(seen, sent, "the recorded version is the one the server saw");
                    versions.push(sent);
                }
                versions
            })
        })
        .collect();
    timeout(LIMIT, writer).await.unwrap().unwrap();
    let mut seen = Vec::new();
    for task in loops {
        seen.extend(timeout(LIMIT, task).await.unwrap().unwrap());
    }
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(api.torn.load(Ordering::SeqCst), 0);
    assert!(
        seen.len() > 2,
        "requests were in flight across rotations: {seen:?}"
    );
    assert_eq!(defaults.version(), ROTATIONS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_401s_on_one_version_cause_exactly_one_refresh() {
    const CALLERS: usize = 32;
    // The server rotated to generation 2; the client still has generation 1.
    let api = Arc::new(Api {
        accepted: AtomicU64::new(2),
        strict: AtomicBool::new(true),
        torn: AtomicUsize::new(0),
    });
    let addr = serve(Arc::clone(&api)).await;
    let defaults = SharedHeaders::new();
    defaults.update(|m| m.extend(credentials(1))).unwrap();
    let client = client(&defaults);
    let refresher = Refresher::<String>::new(defaults.clone());
    let issued = Arc::new(AtomicUsize::new(0));
    let unauthorized = Arc::new(AtomicUsize::new(0));
    let barrier = Arc::new(tokio::sync::Barrier::new(CALLERS));

    let tasks: Vec<_> = (0..CALLERS)
        .map(|_| {
            let (client, refresher) = (client.clone(), refresher.clone());
            let (issued, unauthorized, barrier) =
                (issued.clone(), unauthorized.clone(), barrier.clone());
            let api = Arc::clone(&api);
            tokio::spawn(async move {
                barrier.wait().await;
                let mut response = get(&client, addr).await;
                let mut outcome = None;
                if response.status() == StatusCode::UNAUTHORIZED {
                    unauthorized.fetch_add(1, Ordering::SeqCst);
                    let failed = DefaultsVersion::of(&response).unwrap();
                    assert_eq!(failed, 1);
                    let refreshed = refresher
                        .refresh_if_current(failed, || async move {
                            issued.fetch_add(1, Ordering::SeqCst);
                            // The auth server takes a while.
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            Ok(credentials(api.accepted.load(Ordering::SeqCst)))
                        })
                        .await
                        .unwrap();
                    assert!(
                        refreshed.version() > failed,
                        "every caller sees the new version"
                    );
                    outcome = Some(refreshed);
                    response = get(&client, addr).await;
                }
                assert_eq!(response.status(), StatusCode::OK);
                outcome
            })
        })
        .collect();
    let mut performed = 0;
    for task in tasks {
        let outcome = timeout(LIMIT, task).await.unwrap().unwrap();
        performed += usize::from(matches!(outcome, Some(Refreshed::Performed { .. })));
    }
    assert!(
        unauthorized.load(Ordering::SeqCst) > 1,
        "several 401s happened"
    );
    assert_eq!(
        issued.load(Ordering::SeqCst),
        1,
        "exactly one refresh for version 1"
    );
    assert_eq!(performed, 1);
    assert_eq!(refresher.performed(), 1);
    assert_eq!(api.torn.load(Ordering::SeqCst), 0);
}
