//! The conformance matrix of the server layer's end of a request, over real sockets: each cell
//! is one request (a body kind, an outcome, a protocol) to its own hyper server on 127.0.0.1:0
//! behind `SharedHeadersLayer::new().timeout(..).tracing_access_log().otel_metrics(..)` (the
//! SDK's in-memory exporter, one meter provider per cell), and asserts:
//!
//! * exactly one access line and exactly one `http.server.request.duration` point;
//! * the status of the line and of the point is the status the client received (none when no
//!   answer left the layer: a client that hung up before the head, and an outer timeout, whose
//!   504 is tower-http's, made outside the layer);
//! * `http.response.body.size` is the bytes the client read (a client that hung up mid-body
//!   read at most what the line says, and less than the whole body);
//! * `error.type` only on a real failure (never on a complete 1xx-4xx answer; a complete body
//!   is never `body_dropped`), and the same in the point as in the line;
//! * the duration ends when the answer left: at least the handler's known delay (its pauses
//!   before the head and between the chunks), at most 5 times the client's own view plus
//!   250 ms; a streamed body's line is not there before the client let its last frame go (a
//!   gate the client opens), and is there within 3 s after the client saw the end, without
//!   closing the connection.
//!
//! The axes:
//!
//! * body kinds ([`Kind`]): full, empty, streamed chunked (no length), streamed with a
//!   `content-length`, tower-http's `ServeFile` over a real temporary file, `HEAD`, 204, 304,
//!   `CONNECT` 2xx, a 101 upgrade, gRPC trailers-only, gRPC with a trailers frame, a long
//!   SSE-style stream;
//! * protocols: HTTP/1.1 and HTTP/2 (h2c, prior knowledge); `CONNECT` and 101 are HTTP/1.1 only
//!   (HTTP/2 has no 101, and its `CONNECT` is a different mechanism);
//! * outcomes ([`Outcome`]): answered, a handler's 5xx, the layer's timeout, a panic in the
//!   handler's future, a panic in the inner service's `call`, a client hang-up (before the
//!   head for a full body, mid-body for a stream), an outer tower-http timeout.
//!
//! Every body kind is run answered on each protocol it applies to; every other outcome with a
//! full body and a streamed one (a client hang-up also with the SSE stream). A new kind or
//! outcome joins by adding a variant and its arms. The cells run concurrently, each with its
//! own server, meter provider and host name (`c<n>.conformance.test`), by which its lines are
//! told apart. At the end a table of every cell and its result is printed, and the test fails
//! if any cell failed.
#![cfg(all(feature = "tracing", feature = "opentelemetry"))]

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use shared_headers::server::SharedHeadersLayer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{Notify, oneshot};
use tower::{Layer, Service, ServiceBuilder, ServiceExt};

#[path = "support/capture.rs"]
mod capture;
#[path = "support/otel_memory.rs"]
mod otel_memory;
#[path = "support/script_body.rs"]
mod script_body;

use capture::{Fields, capture, lock};
use otel_memory::Metrics;
use script_body::{Script, Step};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Body = UnsyncBoxBody<Bytes, BoxError>;

/// The handler's pause before its head, in every cell that answers: a known delay the
/// duration must cover.
const PRE: Duration = Duration::from_millis(30);
/// The layer's timeout in the timed-out cells (the others: [`LONG`]).
const LAYER_TIMEOUT: Duration = Duration::from_millis(200);
/// The outer tower-http timeout.
const OUTER_TIMEOUT: Duration = Duration::from_millis(200);
/// A handler that never answers in time.
const SLOW: Duration = Duration::from_secs(2);
/// The layer's timeout where it is not under test.
const LONG: Duration = Duration::from_secs(5);
/// A client that hangs up before the head does so this long after the handler started.
const HANG_AFTER: Duration = Duration::from_millis(150);
/// The chunks a client reads before it hangs up mid-body.
const HANG_AFTER_CHUNKS: u64 = 3;
/// The chunks a failing stream sends before its error.
const BODY_ERROR_AFTER_CHUNKS: usize = 3;
/// The size of the file `ServeFile` sends (several of its 64 KiB reads).
const FILE_LEN: usize = 200_000;
/// How long a line may take after the client saw the end.
const LINE_WAIT: Duration = Duration::from_secs(3);
/// Every cell ends within this, or fails.
const CELL_LIMIT: Duration = Duration::from_secs(15);

// ---- the axes ----

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Proto {
    H1,
    H2,
}

impl Proto {
    fn name(self) -> &'static str {
        match self {
            Proto::H1 => "http/1.1",
            Proto::H2 => "h2c",
        }
    }
}

/// The body kinds: one row each. A new kind: a variant, its name, its protocols, its
/// response ([`Kind::respond`]) and what the client reads of it ([`Kind::client_bytes`]).
///
/// The streams (chunked, `content-length`, exact size hint, SSE) know their end only at the
/// poll after their last frame, as a stream or channel body does (`is_end_stream` stays
/// false). The answers without a body by their method or status (`HEAD`, 204, 304, `CONNECT`
/// 2xx, 101) carry the handler's usual body over HTTP/1.1, not at its end, as a framework
/// leaves it for the server to drop unsent; over HTTP/2 they carry an empty body (`HEAD`: with
/// the GET's `content-length`), because hyper's HTTP/2 server sends whatever body it is given,
/// even to `HEAD`, where the client's h2 takes the DATA frames for a protocol error.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Full,
    Empty,
    Chunked,
    Sized,
    SizeHint,
    ServeFile,
    Head,
    NoContent,
    NotModified,
    Connect,
    Upgrade,
    GrpcTrailersOnly,
    GrpcTrailers,
    Sse,
}

impl Kind {
    const ALL: [Kind; 14] = [
        Kind::Full,
        Kind::Empty,
        Kind::Chunked,
        Kind::Sized,
        Kind::SizeHint,
        Kind::ServeFile,
        Kind::Head,
        Kind::NoContent,
        Kind::NotModified,
        Kind::Connect,
        Kind::Upgrade,
        Kind::GrpcTrailersOnly,
        Kind::GrpcTrailers,
        Kind::Sse,
    ];

    fn name(self) -> &'static str {
        match self {
            Kind::Full => "full",
            Kind::Empty => "empty",
            Kind::Chunked => "stream-chunked",
            Kind::Sized => "stream-content-length",
            Kind::SizeHint => "stream-exact-size-hint",
            Kind::ServeFile => "serve-file",
            Kind::Head => "head",
            Kind::NoContent => "204",
            Kind::NotModified => "304",
            Kind::Connect => "connect-2xx",
            Kind::Upgrade => "101-upgrade",
            Kind::GrpcTrailersOnly => "grpc-trailers-only",
            Kind::GrpcTrailers => "grpc-trailers",
            Kind::Sse => "sse-stream",
        }
    }

    /// `CONNECT` 2xx and 101 are HTTP/1.1's.
    fn protocols(self) -> &'static [Proto] {
        match self {
            Kind::Connect | Kind::Upgrade => &[Proto::H1],
            _ => &[Proto::H1, Proto::H2],
        }
    }

    fn method(self) -> Method {
        match self {
            Kind::Head => Method::HEAD,
            Kind::Connect => Method::CONNECT,
            _ => Method::GET,
        }
    }

    /// The status of an answered request.
    fn status(self) -> StatusCode {
        match self {
            Kind::NoContent => StatusCode::NO_CONTENT,
            Kind::NotModified => StatusCode::NOT_MODIFIED,
            Kind::Upgrade => StatusCode::SWITCHING_PROTOCOLS,
            _ => StatusCode::OK,
        }
    }

    /// The script of a streamed kind; `long` for a client that hangs up mid-body (100 chunks
    /// 20 ms apart, no gate: the client is gone long before its end). A gate (the client
    /// opens it) stands before the last frame.
    fn script(self, long: bool, gate: Option<oneshot::Receiver<()>>) -> Option<Vec<Step>> {
        fn chunks(
            n: usize,
            pause: u64,
            text: &dyn Fn(usize) -> String,
            mut gate: Option<oneshot::Receiver<()>>,
        ) -> Vec<Step> {
            let mut steps = Vec::new();
            for i in 0..n {
                if i > 0 {
                    steps.push(Step::Sleep(Duration::from_millis(pause)));
                }
                if i == n - 1 {
                    if let Some(gate) = gate.take() {
                        steps.push(Step::Gate(gate));
                    }
                }
                steps.push(Step::Data(Bytes::from(text(i))));
            }
            steps
        }
        let chunk = |i: usize| format!("chunk-{i:03}\n");
        if long {
            return Some(chunks(100, 20, &chunk, None));
        }
        match self {
            Kind::Chunked | Kind::Sized | Kind::SizeHint => Some(chunks(8, 15, &chunk, gate)),
            Kind::Sse => Some(chunks(40, 10, &|i| format!("data: {i:03}\n\n"), gate)),
            Kind::GrpcTrailers => {
                let mut trailers = HeaderMap::new();
                trailers.insert("grpc-status", HeaderValue::from_static("0"));
                let mut steps = vec![
                    Step::Data(Bytes::from_static(b"\0\0\0\0\x05hello")),
                    Step::Sleep(Duration::from_millis(20)),
                ];
                if let Some(gate) = gate {
                    steps.push(Step::Gate(gate));
                }
                steps.push(Step::Trailers(trailers));
                Some(steps)
            }
            _ => None,
        }
    }

    /// A streamed kind: its line must wait for the body's end, which a gate holds.
    fn streamed(self) -> bool {
        self.script(false, None).is_some()
    }

    /// The pauses of the body (a known delay the duration covers).
    fn pauses(self) -> Duration {
        self.script(false, None)
            .map_or(Duration::ZERO, |steps| Script::pauses(&steps))
    }

    /// The body bytes the client reads of an answered request.
    fn client_bytes(self) -> u64 {
        match self {
            Kind::Full => 11,
            Kind::ServeFile => FILE_LEN as u64,
            _ => self
                .script(false, None)
                .map_or(0, |steps| Script::data_len(&steps)),
        }
    }

    /// The answer of the handler (after its pause).
    async fn respond(self, mut req: Request<Incoming>, cell: &Shared) -> Response<Body> {
        let gate = lock(&cell.gate).take();
        let long = cell.outcome == Outcome::HangUp;
        let mut steps = self.script(long, gate);
        // The length a sized stream declares: the whole script's, even when it fails early.
        let declared = steps.as_deref().map_or(0, Script::data_len);
        if let (Outcome::BodyError, Some(steps)) = (cell.outcome, &mut steps) {
            // The stream fails after its first chunks.
            let mut data = 0;
            let cut = steps
                .iter()
                .position(|step| {
                    data += usize::from(matches!(step, Step::Data(_)));
                    data == BODY_ERROR_AFTER_CHUNKS
                })
                .unwrap();
            steps.truncate(cut + 1);
            steps.push(Step::Error);
        }
        // The body of an answer that has none (see [`Kind`]).
        let unsent = || match cell.proto {
            Proto::H1 => boxed(Full::from("hello world")),
            Proto::H2 => boxed(Empty::new()),
        };
        let mut res = match self {
            Kind::Full => Response::new(boxed(Full::from("hello world"))),
            Kind::Empty => Response::new(boxed(Empty::new())),
            Kind::Chunked | Kind::Sse => {
                let steps = steps.unwrap();
                Response::new(boxed(Script::new(steps, false, false)))
            }
            Kind::GrpcTrailers => {
                let steps = steps.unwrap();
                Response::new(boxed(Script::new(steps, false, true)))
            }
            Kind::Sized => {
                let mut res = Response::new(boxed(Script::new(steps.unwrap(), false, false)));
                res.headers_mut().insert("content-length", declared.into());
                res
            }
            Kind::SizeHint => {
                let steps = steps.unwrap();
                Response::new(boxed(Script::new(steps, true, false)))
            }
            Kind::Head => {
                let mut res = Response::new(unsent());
                res.headers_mut().insert("content-length", 11.into());
                res
            }
            Kind::ServeFile => {
                let res = tower_http::services::ServeFile::new(&cell.file)
                    .oneshot(req)
                    .await
                    .unwrap();
                res.map(|body| body.map_err(BoxError::from).boxed_unsync())
            }
            Kind::NoContent | Kind::NotModified => Response::new(unsent()),
            Kind::GrpcTrailersOnly => Response::new(boxed(Empty::new())),
            Kind::Connect | Kind::Upgrade => {
                // The tunnel: the server writes `tunnel` once it is up.
                let upgrade = hyper::upgrade::on(&mut req);
                tokio::spawn(async move {
                    if let Ok(io) = upgrade.await {
                        let mut io = TokioIo::new(io);
                        let _ = io.write_all(b"tunnel").await;
                        let _ = io.flush().await;
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                });
                Response::new(unsent())
            }
        };
        *res.status_mut() = self.status();
        let headers = res.headers_mut();
        match self {
            Kind::NotModified => {
                headers.insert("etag", HeaderValue::from_static("\"v1\""));
            }
            Kind::Upgrade => {
                headers.insert("connection", HeaderValue::from_static("upgrade"));
                headers.insert("upgrade", HeaderValue::from_static("conformance"));
            }
            Kind::GrpcTrailersOnly => {
                headers.insert("content-type", HeaderValue::from_static("application/grpc"));
                headers.insert("grpc-status", HeaderValue::from_static("5"));
                headers.insert("grpc-message", HeaderValue::from_static("not%20found"));
            }
            Kind::GrpcTrailers => {
                headers.insert("content-type", HeaderValue::from_static("application/grpc"));
            }
            Kind::Sse => {
                headers.insert(
                    "content-type",
                    HeaderValue::from_static("text/event-stream"),
                );
            }
            _ => {}
        }
        res
    }
}

/// The outcomes: one row each. A new outcome: a variant, its name, its kinds, what the
/// handler does ([`Shared::handle`]), what the client does ([`run_cell`]) and what the line
/// says ([`expect`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Outcome {
    Answered,
    Handler5xx,
    TimedOut,
    PanicInFuture,
    PanicInCall,
    HangUp,
    OuterTimeout,
    BodyError,
}

impl Outcome {
    const ALL: [Outcome; 8] = [
        Outcome::Answered,
        Outcome::Handler5xx,
        Outcome::TimedOut,
        Outcome::PanicInFuture,
        Outcome::PanicInCall,
        Outcome::HangUp,
        Outcome::OuterTimeout,
        Outcome::BodyError,
    ];

    fn name(self) -> &'static str {
        match self {
            Outcome::Answered => "answered",
            Outcome::Handler5xx => "handler-5xx",
            Outcome::TimedOut => "layer-timeout",
            Outcome::PanicInFuture => "panic-in-future",
            Outcome::PanicInCall => "panic-in-call",
            Outcome::HangUp => "client-hang-up",
            Outcome::OuterTimeout => "outer-timeout",
            Outcome::BodyError => "body-error",
        }
    }

    fn kinds(self) -> &'static [Kind] {
        match self {
            Outcome::Answered => &Kind::ALL,
            Outcome::HangUp => &[Kind::Full, Kind::Chunked, Kind::Sse],
            // A full body cannot fail mid-way.
            Outcome::BodyError => &[Kind::Chunked, Kind::Sized],
            _ => &[Kind::Full, Kind::Chunked],
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Cell {
    id: usize,
    kind: Kind,
    outcome: Outcome,
    proto: Proto,
}

impl Cell {
    fn host(&self) -> String {
        format!("c{}.conformance.test", self.id)
    }

    fn path(&self) -> String {
        format!("/c{}/{}/{}", self.id, self.kind.name(), self.outcome.name())
    }

    fn label(&self) -> String {
        format!(
            "{:<8} {:<22} {:<16}",
            self.proto.name(),
            self.kind.name(),
            self.outcome.name()
        )
    }
}

fn cells() -> Vec<Cell> {
    let mut cells = Vec::new();
    for outcome in Outcome::ALL {
        for &kind in outcome.kinds() {
            for &proto in kind.protocols() {
                cells.push(Cell {
                    id: cells.len(),
                    kind,
                    outcome,
                    proto,
                });
            }
        }
    }
    cells
}

// ---- what each cell expects ----

/// What a cell's client and line should show.
struct Expect {
    /// The status the client receives (`None`: no answer).
    client_status: Option<u16>,
    /// Whether the answer left through the layer (its line has the client's status).
    through_layer: bool,
    outcome: &'static str,
    error: Option<String>,
    /// `rpc.grpc.status_code` (over HTTP/1.1 too: the request asks for trailers; the trailers
    /// frame's only when the head announces it, which this cell's does not).
    grpc: Option<&'static str>,
    /// The body bytes the client reads to the end (`None`: it does not read to the end).
    client_bytes: Option<u64>,
    /// The least duration: the handler's known delay.
    min: Duration,
}

fn expect(cell: &Cell) -> Expect {
    let kind = cell.kind;
    let streamed_hang_up = cell.outcome == Outcome::HangUp && kind.streamed();
    let answered = |status: u16, error: Option<&str>| Expect {
        client_status: Some(status),
        through_layer: true,
        outcome: "answered",
        error: error.map(str::to_owned),
        grpc: None,
        client_bytes: Some(kind.client_bytes()),
        min: PRE + kind.pauses(),
    };
    match cell.outcome {
        Outcome::Answered => Expect {
            grpc: match (cell.proto, kind) {
                (_, Kind::GrpcTrailersOnly) => Some("5"),
                (Proto::H2, Kind::GrpcTrailers) => Some("0"),
                _ => None,
            },
            ..answered(kind.status().as_u16(), None)
        },
        Outcome::Handler5xx => answered(500, Some("500")),
        Outcome::TimedOut => Expect {
            outcome: "timed_out",
            client_bytes: None,
            min: LAYER_TIMEOUT,
            ..answered(503, Some("timeout"))
        },
        Outcome::PanicInFuture | Outcome::PanicInCall => Expect {
            outcome: "panicked",
            client_bytes: None,
            min: if cell.outcome == Outcome::PanicInFuture {
                PRE
            } else {
                Duration::ZERO
            },
            ..answered(500, Some("panic"))
        },
        Outcome::BodyError => Expect {
            client_bytes: None,
            min: PRE + Duration::from_millis(15 * (BODY_ERROR_AFTER_CHUNKS as u64 - 1)),
            ..answered(200, Some("body_error"))
        },
        Outcome::HangUp if streamed_hang_up => Expect {
            client_bytes: None,
            // The chunks the client read were made after the pauses before them.
            min: PRE + Duration::from_millis(20 * (HANG_AFTER_CHUNKS - 1)),
            ..answered(200, Some("body_dropped"))
        },
        Outcome::HangUp => Expect {
            client_status: None,
            through_layer: false,
            outcome: "cancelled",
            error: Some("cancelled".into()),
            grpc: None,
            client_bytes: None,
            min: HANG_AFTER,
        },
        Outcome::OuterTimeout => Expect {
            client_status: Some(504),
            through_layer: false,
            outcome: "cancelled",
            error: Some("cancelled".into()),
            grpc: None,
            client_bytes: None,
            // The outer timer starts just before the layer's call.
            min: OUTER_TIMEOUT - Duration::from_millis(50),
        },
    }
}

// ---- the server ----

fn boxed<B>(body: B) -> Body
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    body.map_err(Into::into).boxed_unsync()
}

/// A cell's state, shared by its handler and its client.
struct Shared {
    kind: Kind,
    outcome: Outcome,
    proto: Proto,
    file: PathBuf,
    /// The handler started.
    started: Notify,
    /// The gate before a streamed body's last frame (the client holds the sender).
    gate: Mutex<Option<oneshot::Receiver<()>>>,
}

impl Shared {
    async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        self.started.notify_one();
        let pause = match self.outcome {
            Outcome::TimedOut | Outcome::OuterTimeout => SLOW,
            Outcome::HangUp if !self.kind.streamed() => SLOW,
            _ => PRE,
        };
        tokio::time::sleep(pause).await;
        if self.outcome == Outcome::PanicInFuture {
            panic!("handler bug");
        }
        let mut res = self.kind.respond(req, &self).await;
        if self.outcome == Outcome::Handler5xx {
            *res.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
        }
        res
    }
}

/// The inner service: the cell's handler; it panics in `call` itself for
/// [`Outcome::PanicInCall`].
#[derive(Clone)]
struct App(Arc<Shared>);

impl Service<Request<Incoming>> for App {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Incoming>) -> Self::Future {
        if self.0.outcome == Outcome::PanicInCall {
            panic!("handler bug");
        }
        let shared = Arc::clone(&self.0);
        Box::pin(async move { Ok(shared.handle(req).await) })
    }
}

/// Serves `service` on 127.0.0.1:0 over HTTP/1.1 (with upgrades) or HTTP/2 (prior
/// knowledge); the accept loop ends when the handle is aborted.
async fn serve<S, B>(service: S, proto: Proto) -> (SocketAddr, tokio::task::JoinHandle<()>)
where
    S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + Sync + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accept = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let service = TowerToHyperService::new(service.clone());
            let io = TokioIo::new(stream);
            match proto {
                Proto::H1 => {
                    tokio::spawn(
                        hyper::server::conn::http1::Builder::new()
                            .serve_connection(io, service)
                            .with_upgrades(),
                    );
                }
                Proto::H2 => {
                    tokio::spawn(
                        hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                            .serve_connection(io, service),
                    );
                }
            }
        }
    });
    (addr, accept)
}

// ---- the client ----

enum Sender {
    H1(hyper::client::conn::http1::SendRequest<Empty<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Empty<Bytes>>),
}

impl Sender {
    async fn send(&mut self, req: Request<Empty<Bytes>>) -> hyper::Result<Response<Incoming>> {
        match self {
            Sender::H1(sender) => {
                sender.ready().await?;
                sender.send_request(req).await
            }
            Sender::H2(sender) => {
                sender.ready().await?;
                sender.send_request(req).await
            }
        }
    }
}

async fn connect(addr: SocketAddr, proto: Proto) -> (Sender, tokio::task::JoinHandle<()>) {
    let io = TokioIo::new(tokio::net::TcpStream::connect(addr).await.unwrap());
    match proto {
        Proto::H1 => {
            let (sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
            let conn = tokio::spawn(async move { drop(conn.with_upgrades().await) });
            (Sender::H1(sender), conn)
        }
        Proto::H2 => {
            let (sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                .await
                .unwrap();
            (
                Sender::H2(sender),
                tokio::spawn(async move { drop(conn.await) }),
            )
        }
    }
}

fn request(cell: &Cell) -> Request<Empty<Bytes>> {
    let host = cell.host();
    let uri = match (cell.proto, cell.kind) {
        (_, Kind::Connect) => format!("{host}:443"),
        (Proto::H1, _) => cell.path(),
        (Proto::H2, _) => format!("http://{host}{}", cell.path()),
    };
    let mut req = Request::builder().method(cell.kind.method()).uri(uri);
    if cell.proto == Proto::H1 {
        let host = if cell.kind == Kind::Connect {
            format!("{host}:443")
        } else {
            host
        };
        req = req.header("host", host);
    }
    match cell.kind {
        Kind::Upgrade => {
            req = req
                .header("connection", "upgrade")
                .header("upgrade", "conformance");
        }
        Kind::GrpcTrailersOnly | Kind::GrpcTrailers => {
            req = req
                .header("content-type", "application/grpc")
                .header("te", "trailers");
        }
        _ => {}
    }
    req.body(Empty::new()).unwrap()
}

/// What the client saw.
#[derive(Debug, Default)]
struct Seen {
    status: Option<u16>,
    bytes: u64,
    /// The client read the body to its end (or the tunnel's first bytes).
    complete: bool,
    /// The client's view, from before the request to the end (or the hang-up).
    elapsed: Duration,
}

// ---- the lines ----

/// The access lines of `cell` (by its host, or its path if the line has no host).
fn lines(cell: &Cell) -> Vec<Fields> {
    let host = cell.host();
    let path = cell.path();
    lock(&capture().events)
        .iter()
        .filter(|e| {
            e.get("message").is_some_and(|m| m == "request completed")
                && (e.get("server.address").is_some_and(|a| *a == host)
                    || e.get("url.path").is_some_and(|p| *p == path))
        })
        .cloned()
        .collect()
}

async fn wait_lines(cell: &Cell, limit: Duration) -> Vec<Fields> {
    let start = Instant::now();
    loop {
        let found = lines(cell);
        if !found.is_empty() || start.elapsed() > limit {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

// ---- one cell ----

/// Runs `cell`: its failures, each a reason (empty: the cell passed).
async fn run_cell(cell: Cell, file: PathBuf) -> Vec<String> {
    let mut fails = Vec::new();
    let want = expect(&cell);
    let metrics = Metrics::new();
    let (gate_tx, gate_rx) = oneshot::channel();
    let shared = Arc::new(Shared {
        kind: cell.kind,
        outcome: cell.outcome,
        proto: cell.proto,
        file,
        started: Notify::new(),
        gate: Mutex::new(Some(gate_rx)),
    });
    let timeout = if cell.outcome == Outcome::TimedOut {
        LAYER_TIMEOUT
    } else {
        LONG
    };
    let layer = SharedHeadersLayer::new()
        .timeout(timeout)
        .tracing_access_log()
        .otel_metrics(&metrics.meter());
    let app = App(Arc::clone(&shared));
    let (addr, accept) = if cell.outcome == Outcome::OuterTimeout {
        let service = ServiceBuilder::new()
            .layer(tower_http::timeout::TimeoutLayer::with_status_code(
                StatusCode::GATEWAY_TIMEOUT,
                OUTER_TIMEOUT,
            ))
            .layer(layer)
            .service(app);
        serve(service, cell.proto).await
    } else {
        serve(layer.layer(app), cell.proto).await
    };

    let (mut sender, conn) = connect(addr, cell.proto).await;
    let mut seen = Seen::default();
    let started = Instant::now();
    let gated =
        cell.kind.streamed() && matches!(cell.outcome, Outcome::Answered | Outcome::Handler5xx);
    let mut gate_tx = Some(gate_tx);
    let send = sender.send(request(&cell));
    if cell.outcome == Outcome::HangUp && !cell.kind.streamed() {
        // Hangs up while the handler sleeps, before any head.
        let hang = async {
            let _ = tokio::time::timeout(LONG, shared.started.notified()).await;
            tokio::time::sleep(HANG_AFTER).await;
        };
        tokio::select! {
            res = send => fails.push(format!("client: an answer before the hang-up: {res:?}")),
            () = hang => {}
        }
        seen.elapsed = started.elapsed();
        drop(sender);
        conn.abort();
    } else {
        match tokio::time::timeout(LONG, send).await {
            Err(_) => fails.push("client: no head within 5 s".into()),
            Ok(Err(error)) => fails.push(format!("client: no answer ({error})")),
            Ok(Ok(res)) => {
                seen.status = Some(res.status().as_u16());
                if matches!(cell.kind, Kind::Connect | Kind::Upgrade)
                    && cell.outcome == Outcome::Answered
                {
                    let tunnel = async {
                        let io = hyper::upgrade::on(res).await.map_err(|e| e.to_string())?;
                        let mut io = TokioIo::new(io);
                        let mut buf = [0u8; 6];
                        io.read_exact(&mut buf).await.map_err(|e| e.to_string())?;
                        Ok::<_, String>(buf)
                    };
                    match tokio::time::timeout(LONG, tunnel).await {
                        Ok(Ok(buf)) if &buf == b"tunnel" => seen.complete = true,
                        other => fails.push(format!("client: no tunnel: {other:?}")),
                    }
                    seen.elapsed = started.elapsed();
                } else {
                    let mut body = res.into_body();
                    let mut chunks = 0;
                    loop {
                        let frame = match tokio::time::timeout(LONG, body.frame()).await {
                            Err(_) => {
                                fails.push("client: the body stalled for 5 s".into());
                                break;
                            }
                            Ok(None) => {
                                seen.complete = true;
                                break;
                            }
                            Ok(Some(Err(error))) => {
                                if cell.outcome != Outcome::BodyError {
                                    fails.push(format!("client: the body failed ({error})"));
                                }
                                break;
                            }
                            Ok(Some(Ok(frame))) => frame,
                        };
                        if let Some(data) = frame.data_ref() {
                            seen.bytes += data.len() as u64;
                            chunks += 1;
                        }
                        if cell.outcome == Outcome::HangUp && chunks >= HANG_AFTER_CHUNKS {
                            break;
                        }
                        if gated && gate_tx.is_some() && frame.is_data() {
                            // Before the last frame can leave: no line and no point yet.
                            if !lines(&cell).is_empty() {
                                fails.push("line: emitted before the body ended".into());
                            }
                            if metrics.read().count() != 0 {
                                fails.push("metric: recorded before the body ended".into());
                            }
                            let _ = gate_tx.take().map(|gate| gate.send(()));
                        }
                    }
                    seen.elapsed = started.elapsed();
                    if cell.outcome == Outcome::HangUp {
                        drop(body);
                        drop(sender);
                        conn.abort();
                    }
                }
            }
        }
    }
    drop(gate_tx);

    // The checks of the client's side: the cell did what it meant to.
    if seen.status != want.client_status {
        fails.push(format!(
            "client: status {:?}, expected {:?}",
            seen.status, want.client_status
        ));
    }
    if cell.outcome == Outcome::BodyError && seen.complete {
        fails.push("client: a clean end of a body that failed".into());
    }
    if let Some(bytes) = want.client_bytes {
        if seen.bytes != bytes || !seen.complete {
            fails.push(format!(
                "client: read {} bytes (complete: {}), expected {bytes}",
                seen.bytes, seen.complete
            ));
        }
    }

    // Exactly one line: within LINE_WAIT with the connection open, and still one after it
    // closed.
    let first = wait_lines(&cell, LINE_WAIT).await;
    conn.abort();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let found = lines(&cell);
    if first.is_empty() && !found.is_empty() {
        fails.push("line: only once the connection closed".into());
    }
    let read = metrics.wait(1, LINE_WAIT).await;
    // A second count of the request would show by now.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let read = if read.count() >= 1 {
        metrics.read()
    } else {
        read
    };
    metrics.shutdown();
    accept.abort();

    let upper = seen.elapsed * 5 + Duration::from_millis(250);
    let line_status = if want.through_layer {
        seen.status
    } else {
        None
    };
    let status_text = line_status.map(|s| s.to_string());
    if found.len() != 1 {
        fails.push(format!("line: {} lines, expected 1", found.len()));
    }
    let mut line_duration = None;
    if let Some(line) = found.first() {
        let get = |name: &str| line.get(name).map(String::as_str);
        if get("shared_headers.outcome") != Some(want.outcome) {
            fails.push(format!(
                "line: outcome {:?}, expected {:?}",
                get("shared_headers.outcome"),
                want.outcome
            ));
        }
        if get("http.response.status_code") != status_text.as_deref() {
            fails.push(format!(
                "line: status {:?}, client got {:?}",
                get("http.response.status_code"),
                seen.status
            ));
        }
        if get("error.type") != want.error.as_deref() {
            fails.push(format!(
                "line: error.type {:?}, expected {:?}",
                get("error.type"),
                want.error
            ));
        }
        if let Some(grpc) = want.grpc {
            if get("rpc.grpc.status_code") != Some(grpc) {
                fails.push(format!(
                    "line: rpc.grpc.status_code {:?}, expected {grpc}",
                    get("rpc.grpc.status_code")
                ));
            }
        }
        let size = get("http.response.body.size").and_then(|s| s.parse::<u64>().ok());
        match (line_status, size) {
            (None, None) => {}
            (None, Some(size)) => fails.push(format!("line: body.size {size} without a status")),
            (Some(_), None) => fails.push("line: no body.size".into()),
            (Some(_), Some(size))
                if matches!(cell.outcome, Outcome::HangUp | Outcome::BodyError) =>
            {
                // The client read at most what the server took, and the server took less
                // than the whole body (the failing stream: exactly its chunks before the
                // error).
                let long = cell.outcome == Outcome::HangUp;
                let total = Script::data_len(&cell.kind.script(long, None).unwrap());
                let exact = cell.outcome == Outcome::BodyError
                    && size != 10 * BODY_ERROR_AFTER_CHUNKS as u64;
                if size < seen.bytes || size >= total || exact {
                    fails.push(format!(
                        "line: body.size {size}, client read {} of {total}",
                        seen.bytes
                    ));
                }
            }
            (Some(_), Some(size)) => {
                if size != seen.bytes {
                    fails.push(format!(
                        "line: body.size {size}, client read {}",
                        seen.bytes
                    ));
                }
            }
        }
        match get("http.server.request.duration").and_then(|d| d.parse::<f64>().ok()) {
            None => fails.push("line: no duration".into()),
            Some(duration) => {
                line_duration = Some(duration);
                if duration < want.min.as_secs_f64() {
                    fails.push(format!(
                        "line: duration {duration:.3} s, under the known delay {:?}",
                        want.min
                    ));
                }
                if duration > upper.as_secs_f64() {
                    fails.push(format!(
                        "line: duration {duration:.3} s, over 5x the client's {:?}",
                        seen.elapsed
                    ));
                }
            }
        }
    }

    // Exactly one point, agreeing with the line.
    if read.points.len() != 1 || read.count() != 1 {
        fails.push(format!(
            "metric: {} points counting {}, expected 1",
            read.points.len(),
            read.count()
        ));
    }
    if let Some((attrs, _, sum)) = read.points.first() {
        let get = |name: &str| attrs.get(name).map(String::as_str);
        if get("http.response.status_code") != status_text.as_deref() {
            fails.push(format!(
                "metric: status {:?}, client got {:?}",
                get("http.response.status_code"),
                seen.status
            ));
        }
        if get("error.type") != want.error.as_deref() {
            fails.push(format!(
                "metric: error.type {:?}, expected {:?}",
                get("error.type"),
                want.error
            ));
        }
        if *sum < want.min.as_secs_f64() || *sum > upper.as_secs_f64() {
            fails.push(format!(
                "metric: duration {sum:.3} s, outside [{:?}, {upper:?}]",
                want.min
            ));
        }
        if let Some(line) = line_duration {
            if (line - sum).abs() > 1e-3 {
                fails.push(format!("metric: duration {sum} s, the line's {line} s"));
            }
        }
    }
    for (attrs, value) in &read.active {
        if *value != 0 {
            fails.push(format!("metric: active requests {value} for {attrs:?}"));
        }
    }
    fails
}

#[test]
fn every_cell_of_the_matrix() {
    capture();
    let file = std::env::temp_dir().join(format!(
        "shared-headers-conformance-{}.bin",
        std::process::id()
    ));
    let content: Vec<u8> = (0..FILE_LEN).map(|i| (i % 251) as u8).collect();
    std::fs::write(&file, content).unwrap();

    let cells = cells();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let results: Vec<Vec<String>> = runtime.block_on(async {
        let handles: Vec<_> = cells
            .iter()
            .map(|&cell| {
                let file = file.clone();
                tokio::spawn(tokio::time::timeout(CELL_LIMIT, run_cell(cell, file)))
            })
            .collect();
        let mut results = Vec::new();
        for handle in handles {
            results.push(match handle.await {
                Ok(Ok(fails)) => fails,
                Ok(Err(_)) => vec![format!("the cell did not end within {CELL_LIMIT:?}")],
                Err(error) => vec![format!("the cell's test code failed: {error}")],
            });
        }
        results
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    let _ = std::fs::remove_file(&file);

    let mut table = String::from("\nconformance matrix\n");
    let mut failed = 0;
    for (cell, fails) in cells.iter().zip(&results) {
        if fails.is_empty() {
            table.push_str(&format!("  {} pass\n", cell.label()));
        } else {
            failed += 1;
            table.push_str(&format!("  {} FAIL: {}\n", cell.label(), fails.join("; ")));
        }
    }
    table.push_str(&format!(
        "{} cells, {} passed, {failed} failed\n",
        cells.len(),
        cells.len() - failed
    ));
    println!("{table}");
    assert_eq!(failed, 0, "{table}");
}
