//! Refresh-and-retry over loopback, for the tower layer (hyper-util's client) and for the
//! reqwest middleware: the same API server and the same scenarios for both.
//!
//! The API server accepts only the token of its current generation (`401` otherwise) and
//! checks that the token and its companion header `x-token-gen` come from the same generation
//! (a torn set gets `400` and is counted). The auth server hands out the current generation
//! and counts its calls; it can be told to fail.
#![cfg(feature = "client")]

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body_util::Empty;
use hyper::body::{Bytes, Incoming};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use shared_headers::SharedHeaders;
use shared_headers::client::{
    DefaultHeadersLayer, DefaultsVersion, Merge, RefreshError, RefreshRetryError,
    RefreshRetryLayer, Refresher,
};
use tokio::time::timeout;
use tower::{Layer, ServiceExt};

const LIMIT: Duration = Duration::from_secs(30);
const COMPANION: &str = "x-token-gen";
const LOOPS: usize = 64;
const ROTATIONS: u64 = 8;
/// Long enough for a refused request to be refreshed and sent again before the next rotation
/// (in a debug build on a loaded 2-core machine that takes up to about 70 ms).
const ROTATE_EVERY: Duration = Duration::from_millis(150);
const CALLERS: usize = 16;
/// A logical request refused this many times in a row (each time refreshed and sent again)
/// fails the test: far more than timing can explain, short of a request starved for good.
const MAX_ATTEMPTS: usize = 16;

/// The scenarios are timing-sensitive (rotations against round trips): run one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[derive(Default)]
struct Api {
    /// The generation the API accepts now.
    accepted: AtomicU64,
    requests: AtomicUsize,
    unauthorized: AtomicUsize,
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

fn check(api: &Api, headers: &HeaderMap) -> StatusCode {
    api.requests.fetch_add(1, Ordering::SeqCst);
    let token = headers.get(AUTHORIZATION).and_then(|v| {
        v.to_str()
            .ok()?
            .strip_prefix("Bearer tok-")?
            .parse::<u64>()
            .ok()
    });
    let companion = headers
        .get(COMPANION)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    match (token, companion) {
        (Some(t), Some(c)) if t == c => {
            if t == api.accepted.load(Ordering::SeqCst) {
                StatusCode::OK
            } else {
                api.unauthorized.fetch_add(1, Ordering::SeqCst);
                StatusCode::UNAUTHORIZED
            }
        }
        _ => {
            api.torn.fetch_add(1, Ordering::SeqCst);
            StatusCode::BAD_REQUEST
        }
    }
}

async fn serve(api: Arc<Api>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let api = Arc::clone(&api);
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let mut response = Response::new(Empty::<Bytes>::new());
                *response.status_mut() = check(&api, req.headers());
                std::future::ready(Ok::<_, Infallible>(response))
            });
            let conn = hyper::server::conn::http1::Builder::new();
            tokio::spawn(conn.serve_connection(TokioIo::new(stream), service));
        }
    });
    addr
}

/// The auth server: counts its calls, optionally waits until the clients have classified `gate`
/// responses as refused in all (a client calls the refresher right after, in the same poll, so
/// every refused caller is then waiting for this refresh), takes a moment, then issues the
/// current generation or fails.
struct Auth {
    api: Arc<Api>,
    /// Responses the clients' `refused_when` classified as refused.
    refused: Arc<AtomicUsize>,
    calls: AtomicUsize,
    down: AtomicBool,
    gate: AtomicUsize,
}

impl Auth {
    async fn issue(&self) -> Result<HeaderMap, io::Error> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let gate = self.gate.load(Ordering::SeqCst);
        while self.refused.load(Ordering::SeqCst) < gate {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // The auth server takes a while.
        tokio::time::sleep(Duration::from_millis(20)).await;
        if self.down.load(Ordering::SeqCst) {
            return Err(io::Error::other("auth server down"));
        }
        Ok(credentials(self.api.accepted.load(Ordering::SeqCst)))
    }
}

type RefreshFuture = Pin<Box<dyn Future<Output = Result<HeaderMap, io::Error>> + Send>>;

/// The default test (`401`), counting in `auth.refused`.
fn classify(auth: &Arc<Auth>) -> impl Fn(StatusCode, &HeaderMap) -> bool + Send + Sync + 'static {
    let refused = Arc::clone(&auth.refused);
    move |status, _| {
        let refused_now = status == StatusCode::UNAUTHORIZED;
        refused.fetch_add(usize::from(refused_now), Ordering::SeqCst);
        refused_now
    }
}

fn refresh_with(auth: &Arc<Auth>) -> impl Fn() -> RefreshFuture + Send + Sync + 'static {
    let auth = Arc::clone(auth);
    move || {
        let auth = Arc::clone(&auth);
        Box::pin(async move { auth.issue().await })
    }
}

/// What one logical request through a client ended with.
#[derive(Debug, PartialEq)]
enum Sent {
    Status(StatusCode),
    RefreshFailed,
}

type Sender = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Sent> + Send>> + Send + Sync>;

/// Builds a client on `defaults` that refreshes through `refresher` from `auth`.
type MakeClient = fn(SocketAddr, &SharedHeaders, Refresher<io::Error>, &Arc<Auth>) -> Sender;

fn tower_client(
    addr: SocketAddr,
    defaults: &SharedHeaders,
    refresher: Refresher<io::Error>,
    auth: &Arc<Auth>,
) -> Sender {
    let http = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let client = RefreshRetryLayer::new(refresher, refresh_with(auth))
        .refused_when(classify(auth))
        .layer(
            DefaultHeadersLayer::new(defaults.clone())
                .merge(AUTHORIZATION, Merge::Override)
                .layer(http),
        );
    let uri = format!("http://{addr}/");
    Arc::new(move || {
        let request = Request::get(&uri).body(Empty::new()).unwrap();
        let client = client.clone();
        Box::pin(async move {
            match timeout(LIMIT, client.oneshot(request)).await.unwrap() {
                Ok(response) => {
                    assert!(DefaultsVersion::of(&response).is_some());
                    Sent::Status(response.status())
                }
                Err(RefreshRetryError::Refresh(RefreshError::Refresh(e))) => {
                    assert_eq!(e.to_string(), "auth server down");
                    Sent::RefreshFailed
                }
                Err(other) => panic!("unexpected error: {other}"),
            }
        })
    })
}

#[cfg(feature = "reqwest")]
fn reqwest_client(
    addr: SocketAddr,
    defaults: &SharedHeaders,
    refresher: Refresher<io::Error>,
    auth: &Arc<Auth>,
) -> Sender {
    use shared_headers::client::reqwest::{DefaultHeadersMiddleware, version_of};
    let layer = DefaultHeadersLayer::new(defaults.clone()).merge(AUTHORIZATION, Merge::Override);
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let client = reqwest_middleware::ClientBuilder::new(http)
        .with(
            DefaultHeadersMiddleware::new(layer, refresher, refresh_with(auth))
                .refused_when(classify(auth)),
        )
        .build();
    let uri = format!("http://{addr}/");
    Arc::new(move || {
        let request = client.get(&uri);
        Box::pin(async move {
            match timeout(LIMIT, request.send()).await.unwrap() {
                Ok(response) => {
                    assert!(version_of(&response).is_some());
                    Sent::Status(response.status())
                }
                Err(reqwest_middleware::Error::Middleware(e)) => {
                    let refresh = e.downcast_ref::<RefreshError<io::Error>>();
                    assert!(
                        matches!(refresh, Some(RefreshError::Refresh(e)) if e.to_string() == "auth server down"),
                        "unexpected error: {e}"
                    );
                    Sent::RefreshFailed
                }
                Err(other) => panic!("unexpected error: {other}"),
            }
        })
    })
}

struct Setup {
    api: Arc<Api>,
    auth: Arc<Auth>,
    refresher: Refresher<io::Error>,
    send: Sender,
}

/// The API accepts `accepted`; the client starts with `held`.
async fn setup(make: MakeClient, accepted: u64, held: u64) -> Setup {
    let api = Arc::new(Api::default());
    api.accepted.store(accepted, Ordering::SeqCst);
    let addr = serve(Arc::clone(&api)).await;
    let auth = Arc::new(Auth {
        api: Arc::clone(&api),
        refused: Arc::new(AtomicUsize::new(0)),
        calls: AtomicUsize::new(0),
        down: AtomicBool::new(false),
        gate: AtomicUsize::new(0),
    });
    let defaults = SharedHeaders::from(credentials(held));
    let refresher = Refresher::new(defaults.clone());
    let send = make(addr, &defaults, refresher.clone(), &auth);
    Setup {
        api,
        auth,
        refresher,
        send,
    }
}

/// 64 loops send requests while the API rotates its token `ROTATIONS` times. Every logical
/// request must succeed (a retried request can be refused again if a rotation lands between the
/// refresh and the retry: the loop sends it again, up to `MAX_ATTEMPTS` times), no torn set may reach
/// the server, and the auth server must be called at most once per rotation. (Each refresh
/// fetches a generation newer than the one before it, so there are at most `ROTATIONS`.)
async fn rotation_scenario(make: MakeClient) {
    let _serial = SERIAL.lock().await;
    let Setup {
        api,
        auth,
        refresher,
        send,
    } = setup(make, 1, 1).await;
    let done = Arc::new(AtomicBool::new(false));
    let rotator = {
        let (api, done) = (Arc::clone(&api), Arc::clone(&done));
        tokio::spawn(async move {
            for _ in 0..ROTATIONS {
                tokio::time::sleep(ROTATE_EVERY).await;
                api.accepted.fetch_add(1, Ordering::SeqCst);
            }
            tokio::time::sleep(ROTATE_EVERY).await;
            done.store(true, Ordering::SeqCst);
        })
    };
    let loops: Vec<_> = (0..LOOPS)
        .map(|_| {
            let (send, done) = (Arc::clone(&send), Arc::clone(&done));
            tokio::spawn(async move {
                let (mut ok, mut refused_after_retry) = (0usize, 0usize);
                while !done.load(Ordering::SeqCst) {
                    let mut attempts = 0;
                    loop {
                        attempts += 1;
                        match send().await {
                            Sent::Status(StatusCode::OK) => break,
                            Sent::Status(StatusCode::UNAUTHORIZED) if attempts < MAX_ATTEMPTS => {
                                refused_after_retry += 1;
                            }
                            other => panic!("request failed after {attempts} attempts: {other:?}"),
                        }
                    }
                    ok += 1;
                }
                (ok, refused_after_retry)
            })
        })
        .collect();
    timeout(LIMIT, rotator).await.unwrap().unwrap();
    let (mut ok, mut refused_after_retry) = (0, 0);
    for task in loops {
        let (o, r) = timeout(LIMIT, task).await.unwrap().unwrap();
        assert!(o > 0, "every loop completed requests");
        ok += o;
        refused_after_retry += r;
    }
    let calls = auth.calls.load(Ordering::SeqCst) as u64;
    let unauthorized = api.unauthorized.load(Ordering::SeqCst);
    eprintln!(
        "{ok} requests ok, {unauthorized} 401s, {refused_after_retry} refused after the retry, \
         {calls} auth calls for {ROTATIONS} rotations"
    );
    assert_eq!(api.torn.load(Ordering::SeqCst), 0, "a torn set was sent");
    assert!(
        unauthorized > LOOPS,
        "rotations refused requests in flight: {unauthorized}"
    );
    assert!(
        (1..=ROTATIONS).contains(&calls),
        "{calls} auth calls for {ROTATIONS} rotations"
    );
    assert_eq!(refresher.performed(), calls);
    assert_eq!(refresher.failed(), 0);
}

/// `CALLERS` requests refused on one version while the auth server is down: one refresh runs,
/// its failure reaches every one of them, and no retry is sent. Then the auth server is back:
/// the next requests refresh once more (nothing was poisoned) and all succeed.
async fn failing_auth_scenario(make: MakeClient) {
    let _serial = SERIAL.lock().await;
    let Setup {
        api,
        auth,
        refresher,
        send,
    } = setup(make, 2, 1).await;
    auth.down.store(true, Ordering::SeqCst);
    auth.gate.store(CALLERS, Ordering::SeqCst);
    let round = || async {
        let barrier = Arc::new(tokio::sync::Barrier::new(CALLERS));
        let tasks: Vec<_> = (0..CALLERS)
            .map(|_| {
                let (send, barrier) = (Arc::clone(&send), Arc::clone(&barrier));
                tokio::spawn(async move {
                    barrier.wait().await;
                    send().await
                })
            })
            .collect();
        let mut outcomes = Vec::new();
        for task in tasks {
            outcomes.push(timeout(LIMIT, task).await.unwrap().unwrap());
        }
        outcomes
    };

    let failed = round().await;
    assert!(
        failed.iter().all(|o| *o == Sent::RefreshFailed),
        "the failure reached every caller: {failed:?}"
    );
    assert_eq!(auth.calls.load(Ordering::SeqCst), 1, "one refresh for all");
    assert_eq!(
        api.requests.load(Ordering::SeqCst),
        CALLERS,
        "no retry was sent after the failed refresh"
    );
    assert_eq!((refresher.performed(), refresher.failed()), (0, 1));

    auth.down.store(false, Ordering::SeqCst);
    auth.gate.store(2 * CALLERS, Ordering::SeqCst);
    let recovered = timeout(LIMIT, round())
        .await
        .expect("the next attempt stalled");
    assert!(
        recovered.iter().all(|o| *o == Sent::Status(StatusCode::OK)),
        "{recovered:?}"
    );
    assert_eq!(auth.calls.load(Ordering::SeqCst), 2);
    assert_eq!((refresher.performed(), refresher.failed()), (1, 1));
    assert_eq!(api.torn.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tower_64_loops_across_rotations_refresh_at_most_once_per_rotation() {
    rotation_scenario(tower_client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tower_failed_refresh_reaches_every_caller_and_the_next_attempt_works() {
    failing_auth_scenario(tower_client).await;
}

#[cfg(feature = "reqwest")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reqwest_64_loops_across_rotations_refresh_at_most_once_per_rotation() {
    rotation_scenario(reqwest_client).await;
}

#[cfg(feature = "reqwest")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reqwest_failed_refresh_reaches_every_caller_and_the_next_attempt_works() {
    failing_auth_scenario(reqwest_client).await;
}

// ---------------------------------------------------------------------------------------------
// When the layer does not retry: no network, a service that refuses every token but `fresh`.
// ---------------------------------------------------------------------------------------------

mod edges {
    use std::convert::Infallible;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use http::header::AUTHORIZATION;
    use http::{HeaderMap, Request, Response, StatusCode};
    use shared_headers::SharedHeaders;
    use shared_headers::client::{
        DefaultHeadersLayer, DefaultsVersion, Merge, RefreshRetryLayer, Refresher, ReplayBody,
    };
    use tower::{ServiceBuilder, ServiceExt};

    /// A body that cannot be sent twice.
    struct Stream;

    impl ReplayBody for Stream {
        fn try_replay(&self) -> Option<Self> {
            None
        }
    }

    /// The API (counting requests: it answers `Bearer fresh` with 200, anything else with `refused`),
    /// the defaults (starting with `Bearer stale`), and a refresh (counting calls) to `Bearer fresh`.
    struct Rig {
        sent: Arc<AtomicUsize>,
        refreshes: Arc<AtomicUsize>,
        defaults: SharedHeaders,
        refresher: Refresher<Infallible>,
    }

    fn rig() -> Rig {
        let defaults = SharedHeaders::new();
        defaults
            .insert(AUTHORIZATION, "Bearer stale".parse().unwrap())
            .unwrap();
        Rig {
            sent: Arc::default(),
            refreshes: Arc::default(),
            refresher: Refresher::new(defaults.clone()),
            defaults,
        }
    }

    impl Rig {
        fn api<B: Send + 'static>(
            &self,
            refused: StatusCode,
        ) -> impl tower::Service<
            Request<B>,
            Response = Response<()>,
            Error = Infallible,
            Future = impl Send,
        > + Clone {
            let sent = Arc::clone(&self.sent);
            tower::service_fn(move |req: Request<B>| {
                sent.fetch_add(1, Ordering::SeqCst);
                let mut response = Response::new(());
                if req.headers()[AUTHORIZATION] != "Bearer fresh" {
                    *response.status_mut() = refused;
                }
                std::future::ready(Ok::<_, Infallible>(response))
            })
        }

        fn layer(
            &self,
        ) -> RefreshRetryLayer<
            impl Fn() -> std::future::Ready<Result<HeaderMap, Infallible>> + Send + Sync + 'static,
            Infallible,
        > {
            let refreshes = Arc::clone(&self.refreshes);
            RefreshRetryLayer::new(self.refresher.clone(), move || {
                refreshes.fetch_add(1, Ordering::SeqCst);
                let mut new = HeaderMap::new();
                new.insert(AUTHORIZATION, "Bearer fresh".parse().unwrap());
                std::future::ready(Ok(new))
            })
        }

        fn defaults_layer(&self) -> DefaultHeadersLayer {
            DefaultHeadersLayer::new(self.defaults.clone()).merge(AUTHORIZATION, Merge::Override)
        }

        fn counts(&self) -> (usize, usize) {
            (
                self.sent.load(Ordering::SeqCst),
                self.refreshes.load(Ordering::SeqCst),
            )
        }
    }

    #[tokio::test]
    async fn a_refused_request_is_refreshed_and_sent_once_more_with_the_new_defaults() {
        let rig = rig();
        let client = ServiceBuilder::new()
            .layer(rig.layer())
            .layer(rig.defaults_layer())
            .service(rig.api(StatusCode::UNAUTHORIZED));
        let response = client.oneshot(Request::new(())).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(DefaultsVersion::of(&response), Some(2));
        assert_eq!(rig.counts(), (2, 1));
    }

    #[tokio::test]
    async fn a_body_that_cannot_be_replayed_is_sent_once_and_its_401_returned() {
        let rig = rig();
        let client = ServiceBuilder::new()
            .layer(rig.layer())
            .layer(rig.defaults_layer())
            .service(rig.api(StatusCode::UNAUTHORIZED));
        let response = client.oneshot(Request::new(Stream)).await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(rig.counts(), (1, 0));
    }

    #[tokio::test]
    async fn defaults_applied_outside_the_retry_layer_disable_the_retry() {
        let rig = rig();
        // Misordered: a retry here would resend the refused token.
        let client = ServiceBuilder::new()
            .layer(rig.defaults_layer())
            .layer(rig.layer())
            .service(rig.api(StatusCode::UNAUTHORIZED));
        let response = client.oneshot(Request::new(())).await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(rig.counts(), (1, 0));
    }

    #[tokio::test]
    async fn a_second_refusal_is_returned_not_retried_again() {
        let rig = rig();
        // The refresh "works" but a request carrying its own token keeps it (KeepRequest).
        let client = ServiceBuilder::new()
            .layer(rig.layer())
            .layer(DefaultHeadersLayer::new(rig.defaults.clone()))
            .service(rig.api(StatusCode::UNAUTHORIZED));
        let request = Request::builder()
            .header(AUTHORIZATION, "Bearer own")
            .body(())
            .unwrap();
        let response = client.oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(DefaultsVersion::of(&response), Some(2));
        assert_eq!(rig.counts(), (2, 1));
    }

    #[tokio::test]
    async fn the_classifier_decides_what_is_refused() {
        let rig = rig();
        // This API says 403; by default that is not a refused credential.
        let default = ServiceBuilder::new()
            .layer(rig.layer())
            .layer(rig.defaults_layer())
            .service(rig.api(StatusCode::FORBIDDEN));
        let response = default.oneshot(Request::new(())).await.unwrap();
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
        assert_eq!(rig.counts(), (1, 0));

        let told = ServiceBuilder::new()
            .layer(
                rig.layer()
                    .refused_when(|status, _| status == StatusCode::FORBIDDEN),
            )
            .layer(rig.defaults_layer())
            .service(rig.api(StatusCode::FORBIDDEN));
        let response = told.oneshot(Request::new(())).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(rig.counts(), (3, 1));
    }
}

/// What a middleware after ours sees: the merged headers (policy and sensitivity as
/// `DefaultHeadersLayer`'s) and the version, in the middleware extensions. No network: the
/// inspecting middleware answers itself.
#[cfg(feature = "reqwest")]
#[tokio::test]
async fn reqwest_middleware_merges_like_the_layer_and_records_the_version() {
    use http::header::{ACCEPT, USER_AGENT};
    use shared_headers::client::reqwest::{DefaultHeadersMiddleware, version_of};
    use std::sync::Mutex;

    type Seen = Vec<(HeaderMap, Option<DefaultsVersion>)>;
    struct Inspect(Arc<Mutex<Seen>>);

    #[async_trait::async_trait]
    impl reqwest_middleware::Middleware for Inspect {
        async fn handle(
            &self,
            req: reqwest::Request,
            extensions: &mut http::Extensions,
            _next: reqwest_middleware::Next<'_>,
        ) -> reqwest_middleware::Result<reqwest::Response> {
            let seen = (req.headers().clone(), extensions.get().copied());
            self.0.lock().unwrap().push(seen);
            Ok(reqwest::Response::from(Response::new("")))
        }
    }

    let defaults = SharedHeaders::from(credentials(7));
    defaults
        .insert(USER_AGENT, HeaderValue::from_static("sdk/1"))
        .unwrap();
    defaults
        .insert(ACCEPT, HeaderValue::from_static("application/json"))
        .unwrap();
    let layer = DefaultHeadersLayer::new(defaults.clone())
        .merge(AUTHORIZATION, Merge::Override)
        .merge(ACCEPT, Merge::Append);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let refresher = Refresher::<io::Error>::new(defaults.clone());
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(DefaultHeadersMiddleware::new(layer, refresher, || async {
            Ok(HeaderMap::new())
        }))
        .with(Inspect(Arc::clone(&seen)))
        .build();
    let response = client
        .get("http://127.0.0.1:9/")
        .bearer_auth("own") // replaced: Override
        .header(USER_AGENT, "mine/2") // kept: KeepRequest
        .header(ACCEPT, "text/plain") // both: Append
        .send()
        .await
        .unwrap();
    let version = defaults.version();
    assert_eq!(version_of(&response), Some(version));
    let seen = seen.lock().unwrap();
    let (headers, recorded) = &seen[0];
    assert_eq!(*recorded, Some(DefaultsVersion(version)));
    assert_eq!(headers[AUTHORIZATION], "Bearer tok-7");
    assert!(headers[AUTHORIZATION].is_sensitive(), "sensitivity kept");
    assert_eq!(headers[COMPANION], "7");
    assert_eq!(headers[USER_AGENT], "mine/2");
    let accept: Vec<_> = headers.get_all(ACCEPT).iter().collect();
    assert_eq!(accept, ["text/plain", "application/json"]);
}
