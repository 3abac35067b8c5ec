//! Recipes for the calls a service makes: client default headers with a single-flight refresh,
//! a retry on a refused credential, reqwest, deadline propagation, and a connection pool that
//! never hands out a dead connection. The client recipes need the `client` feature, the pool
//! the `conn` feature. Server recipes: [`patterns`](super::patterns).
//!
//! # Client: default headers and a refresh once per failed version
//!
//! An HTTP client's default headers (an auth token, its expiry, a user agent) are the most common
//! `Arc<RwLock<HeaderMap>>` in Rust code. Every request takes the read lock, a refresh takes the
//! write lock and stalls them, token and expiry are often written in two steps, and when the
//! token expires every in-flight request gets a `401` and starts its own refresh: a stampede
//! against the auth server. The `client` feature has two pieces:
//!
//! * `client::DefaultHeadersLayer`, a tower layer for any client (hyper-util's legacy `Client`,
//!   a `tower::service_fn`, a retry/timeout stack). For each request it reads the current
//!   defaults once, without a lock and all from one version, merges them into the request (the
//!   request's own headers win unless a per-name `Merge::Override` / `Merge::Append` says
//!   otherwise; sensitive values stay sensitive), and records the `DefaultsVersion` it used in
//!   the request's and the response's extensions, so the code that sees a `401` knows which token
//!   was refused.
//! * `client::Refresher`: `refresh_if_current(failed_version, refresh)` runs `refresh` only if
//!   `failed_version` is still current. Concurrent callers with the same version wait for that
//!   one refresh and see the new version; a caller whose version is already stale returns at
//!   once; a failed refresh is reported to every waiter (as `Arc<E>`) and does not poison the
//!   next attempt; a cancelled leader hands over to a waiter. The new token and its companion
//!   headers are published as one write.
//!
//! Here the client is a `tower::service_fn` standing in for an API that accepts only
//! `Bearer fresh` (the `client` module docs have the same program over hyper-util's client and a
//! socket):
//!
//! ```
//! # #[cfg(feature = "client")]
//! # mod recipe {
//! use std::convert::Infallible;
//!
//! use http::header::AUTHORIZATION;
//! use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
//! use shared_headers::SharedHeaders;
//! use shared_headers::client::{DefaultHeadersLayer, DefaultsVersion, Merge, Refreshed, Refresher};
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # pub async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let defaults = SharedHeaders::new();
//! defaults.insert(AUTHORIZATION, HeaderValue::from_static("Bearer expired"))?;
//! let refresher = Refresher::<Infallible>::new(defaults.clone());
//!
//! let client = ServiceBuilder::new()
//!     .layer(DefaultHeadersLayer::new(defaults.clone()).merge(AUTHORIZATION, Merge::Override))
//!     .service_fn(|req: Request<()>| async move {
//!         let fresh = req.headers().get(AUTHORIZATION).is_some_and(|v| v == "Bearer fresh");
//!         let mut res = Response::new(());
//!         *res.status_mut() = if fresh { StatusCode::OK } else { StatusCode::UNAUTHORIZED };
//!         Ok::<_, Infallible>(res)
//!     });
//!
//! let res = client.clone().oneshot(Request::new(())).await?;
//! assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
//! let failed = DefaultsVersion::of(&res).unwrap(); // the version whose token was refused
//!
//! let refresh = || async {
//!     let mut new = HeaderMap::new(); // ask the auth server here
//!     new.insert(AUTHORIZATION, HeaderValue::from_static("Bearer fresh"));
//!     Ok(new)
//! };
//! let done = refresher.refresh_if_current(failed, refresh).await?;
//! assert_eq!(done, Refreshed::Performed { version: 2 });
//! // A second caller that saw the same 401 runs nothing: that version is stale now.
//! let again = refresher.refresh_if_current(failed, refresh).await?;
//! assert_eq!(again, Refreshed::Stale { version: 2 });
//!
//! let res = client.oneshot(Request::new(())).await?;
//! assert_eq!(res.status(), StatusCode::OK);
//! assert_eq!(DefaultsVersion::of(&res), Some(2));
//! # Ok(())
//! # }
//! # }
//! # fn main() {
//! #     #[cfg(feature = "client")]
//! #     recipe::main().unwrap();
//! # }
//! ```
//!
//! **A refresh that outlives its caller.** The refresh runs inside the leader's call: if that
//! call is cancelled, a waiting caller starts the refresh again. When request timeouts may be
//! shorter than the auth server's answer, run the call in a task of its own (`tokio::spawn` the
//! `refresh_if_current(..)` future: `Refresher` is `Clone`, so the task owns a clone).
//!
//! # Client: retry once on a refused credential
//!
//! Put `client::RefreshRetryLayer` *outside* `client::DefaultHeadersLayer`: on a response it
//! classifies as "credential refused" (a `401` by default), it runs the `Refresher` for the
//! version of the defaults that request carried and sends the request once more, which then
//! picks up the new defaults. Concurrent refusals of one version cause one refresh; a failed
//! refresh is returned (`RefreshRetryError::Refresh`), never retried in a loop; a request whose body
//! cannot be replayed (`client::ReplayBody`) is not retried. Credential headers need
//! `Merge::Override`, or a request that carries its own stale token would send it again. The
//! runnable example is in the `client` module docs, and why this is a layer rather than a
//! `tower::retry::Policy` is in `RefreshRetryLayer`'s docs.
//!
//! # Client: reqwest
//!
//! With the `reqwest` feature, `client::reqwest::DefaultHeadersMiddleware` does the same for a
//! `reqwest_middleware::ClientWithMiddleware`: the same merge policy and sensitivity as
//! `DefaultHeadersLayer`, the version used recorded in the response's extensions
//! (`client::reqwest::version_of`), and one refresh-and-retry through the same `Refresher`. The
//! `client::reqwest` module docs hold a compiled recipe over loopback.
//!
//! # Deadline propagation
//!
//! A request's deadline, the caller's budget headers, and outgoing calls that inherit what is
//! left of it (with the request's id and trace headers: `client::PropagateLayer`, one layer
//! for all of it), with the three-service demo: [`docs::deadlines`](super::deadlines).
//!
//! # Connection pool: never hand out a dead connection
//!
//! Go's HTTP/2 client kept reusing a connection whose writes had all started failing
//! ([golang/go#39750](https://github.com/golang/go/issues/39750)): the writer saw the error, but
//! the pool only listened to the reader, which sat blocked on an idle socket.
//! [`conn`](crate::conn) gives each connection one `ConnHealth` shared by its reader, writers,
//! health checker and pool: the state (open, draining, dead) and the in-flight count live in one
//! atomic word, so `try_acquire` either counts a lease or refuses it; `mark_dead(cause)` works
//! from any thread and keeps the first cause; the pool hears of it at once (`on_close`) and drops
//! the connection, busy or not; `classify(&io::Error)` says what an error means.
//!
//! ```
//! # #[cfg(feature = "conn")]
//! # fn main() -> Result<(), shared_headers::conn::AcquireError> {
//! use std::io;
//! use shared_headers::conn::{ConnHealth, Health};
//!
//! let health = ConnHealth::with_max_concurrent(100);
//! health.on_close(|status| println!("evict: {status:?}")).ok(); // the pool hears of it
//! let lease = health.try_acquire()?; // a request in flight
//!
//! let err = io::Error::from(io::ErrorKind::BrokenPipe); // the writer's next write fails
//! assert_eq!(lease.health().observe(&err), Health::Dead); // evicted, although still in use
//! assert!(health.try_acquire().is_err()); // never leased again
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "conn"))]
//! # fn main() {}
//! ```
//!
//! On Linux loopback (`cargo test --features conn --test conn_sockets -- --nocapture`), after a peer's FIN the
//! next write still succeeds; only the write after it fails (`EPIPE`), and a server that closes
//! right after reading a request is visible only to the reader. So the reader of an idle
//! connection must record the death too, not only the writers.
//!
//! # Dead connections in hyper-util's `Client` and tonic's `Channel`
//!
//! Features: `hyper-util` for [`conn::HealthConnector`](crate::conn::HealthConnector),
//! `client` for the retry layer, and `tonic` too when the client is a tonic `Channel` (the
//! retry replays tonic's body type only with it). Your own dependencies: `tower` (for
//! `ServiceBuilder`) and, for tonic, `tonic` with its `channel` feature.
//!
//! [`conn::HealthConnector`](crate::conn::HealthConnector) wraps
//! the client's connector: each connection carries a `ConnHealth` (in every response's
//! extensions with `health_in_responses`), records its I/O errors in it, and once it is dead
//! (whoever marked it) fails
//! its reads and writes and wakes its task, so the client closes it and never writes to it
//! again. A connection that goes silent sends no error: the HTTP/2 ping finds it, with a
//! request in flight and nothing read for `PING_AFTER` (300 ms), no answer within
//! `PING_TIMEOUT` (300 ms). `HealthConnector::client_builder` sets the ping and the tokio
//! timer (hyper-util panics at the first connection without a timer when a ping is set); a
//! slow but live server answers the ping and keeps its connection.
//! [`client::ConnRetryLayer`](crate::client::ConnRetryLayer), right above the client, sends an
//! idempotent request (`GET`, `HEAD`, `PUT`, `DELETE`, `OPTIONS`, `TRACE`, with a replayable
//! body) once more on a fresh connection when its connection failed under it, within its
//! deadline (under `PropagateLayer`, with the budget left then); a `POST` written to the dying
//! connection is not sent again, and its error says the connection died with it in flight. A
//! request never written (its connection could not be opened, a closing one refused it, or the
//! hold-back's verdict below failed the connection while every stream it had written was one
//! its caller cancelled) is sent again whatever its method.
//!
//! Dependencies beside this crate (features `hyper-util`, `client`, and `tonic` for the
//! second half): `hyper`, `hyper-util` (`client-legacy`, `http2`, `tokio`), `http`,
//! `http-body-util`, `tower` (`util`, for `ServiceExt`), and `tonic` (`channel`).
//!
//! ```
//! # #[cfg(all(feature = "hyper-util", feature = "client", feature = "tonic"))]
//! # fn main() {
//! use std::time::Duration;
//! use http_body_util::Empty;
//! use hyper::body::Bytes;
//! use hyper_util::client::legacy::connect::HttpConnector;
//! use hyper_util::rt::TokioExecutor;
//! use shared_headers::client::{ConnRetryLayer, PropagateLayer};
//! use shared_headers::conn::HealthConnector;
//! use shared_headers::context::RequestScope;
//! use shared_headers::deadline::{BudgetHeader, Deadline, DeadlineSource};
//! use tower::{ServiceBuilder, ServiceExt as _};
//!
//! // hyper-util, HTTP/2 over `http://` (h2c, prior knowledge). Without `http2_only` an
//! // `http://` client speaks HTTP/1.1 only: its I/O errors are still watched, but the ping and
//! // the hold-back are HTTP/2's. Over `https://`, the TLS connector's ALPN picks.
//! let client = ServiceBuilder::new()
//!     .layer(PropagateLayer::new(BudgetHeader::grpc_timeout())) // the deadline, outside
//!     .layer(ConnRetryLayer::new())
//!     .service(
//!         HealthConnector::client_builder(TokioExecutor::new())
//!             .http2_only(true)
//!             .build::<_, Empty<Bytes>>(HealthConnector::new(HttpConnector::new())),
//!     );
//! // A request with a 1 s deadline (not sent here: no server). The deadline bounds the
//! // resend too, and travels to the server as `grpc-timeout`.
//! let deadline = Deadline::after(Duration::from_secs(1), DeadlineSource::Explicit).unwrap();
//! let request = http::Request::get("http://127.0.0.1:8080/").body(Empty::new()).unwrap();
//! let get = RequestScope::new().deadline(deadline).scope(client.oneshot(request));
//!
//! // tonic (crate feature `tonic` too): the same ping on the `Endpoint`, the connector to
//! // `connect_with_connector` (or `connect_with_connector_lazy`, as here, inside a runtime).
//! # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
//! # let _guard = rt.enter();
//! let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:50051")
//!     .http2_keep_alive_interval(HealthConnector::PING_AFTER)
//!     .keep_alive_timeout(HealthConnector::PING_TIMEOUT)
//!     .keep_alive_while_idle(false)
//!     .connect_with_connector_lazy(HealthConnector::new(HttpConnector::new()));
//! let channel = ServiceBuilder::new().layer(ConnRetryLayer::new()).service(channel);
//! // A call through it (not sent here): wait for readiness first, as a tonic client does
//! // (`oneshot` does both; a bare `call` without `ready` panics in tonic's buffer).
//! let call = channel.oneshot(http::Request::new(tonic::body::Body::empty()));
//! # drop((get, call));
//! # }
//! # #[cfg(not(all(feature = "hyper-util", feature = "client", feature = "tonic")))]
//! # fn main() {}
//! ```
//!
//! **Measured** (`cargo run --release --features full --example pool -- --requests 100`; the
//! harness is `examples/pool/fault.rs`, `tests/conn_clients.rs` asserts the crate's rows on 10
//! requests): loopback through an in-process fault proxy, 2 warm-up requests, then the fault on
//! the connections open at that instant (a fresh connection works), then one `GET` every
//! 100 ms for 10 s, 1 s deadline each; hyper 1.12, hyper-util 0.1.21, h2 0.4.20, tonic 0.14.5,
//! reqwest 0.13.5 (h2c with prior knowledge); all rows in one run. A cell: requests failed of 100; for the silent faults, in brackets,
//! how many of them were sent after the first failure had been returned, and when the client
//! closed the faulted connection (after the fault, seen by the proxy).
//!
//! | client, setup | black hole | write stall | RST idle | FIN idle | FIN at request | RST at request | GOAWAY | GOAWAY with error, then FIN |
//! |---|---|---|---|---|---|---|---|---|
//! | hyper-util HTTP/2, defaults | **100** (89; never closed) | **100** (89; never) | 0 | 0 | 1 | 1 | 0 | 0 |
//! | hyper-util HTTP/2, ping 1 s / 1 s / while idle | 20 (9; 2.00 s) | 20 (9; 2.00 s) | 0 | 0 | 1 | 1 | 0 | 0 |
//! | hyper-util HTTP/2, `HealthConnector` + `ConnRetryLayer` | **0** (0.60 s) | **0** (0.60 s) | 0 | 0 | **0** | **0** | 0 | 0 |
//! | tonic `Channel`, defaults | **100** (89; never) | **100** (89; never) | 0 | 0 | 1 | 1 | 0 | 0 |
//! | tonic `Channel`, ping 1 s / 1 s / while idle | 20 (9; 2.01 s) | 20 (9; 2.01 s) | 0 | 0 | 1 | 1 | 0 | 0 |
//! | tonic `Channel`, `HealthConnector` + `ConnRetryLayer` | **0** (0.60 s) | **0** (0.60 s) | 0 | 0 | **0** | **0** | 0 | 0 |
//! | reqwest HTTP/2, defaults | **100** (89; never) | **100** (89; never) | 0 | 0 | 1 | 1 | 0 | 0 |
//! | reqwest HTTP/2, ping 1 s / 1 s / while idle | 20 (9; 2.00 s) | 20 (9; 2.00 s) | 0 | 0 | 1 | 1 | 0 | 0 |
//! | reqwest HTTP/2, ping 300 ms / 300 ms (the crate's constants, no hook) | 6 (0; 0.60 s) | 6 (0; 0.60 s) | 0 | 0 | 1 | 1 | 0 | 0 |
//! | hyper-util HTTP/1.1, defaults (with or without the ping setting) | 1 (1.05 s) | 1 (1.05 s) | 0 | 0 | 1 | 1 | 0 | 0 |
//! | hyper-util HTTP/1.1, `HealthConnector` + `ConnRetryLayer` | 1 (1.05 s) | 1 (1.05 s) | 0 | 0 | **0** | **0** | 0 | 0 |
//!
//! * **Silent connections (HTTP/2).** The defaults never notice: every request goes to the
//!   dead connection and times out. A 1 s ping finds it at 2 s, after 20 requests were lost.
//!   With the crate, the ping finds it at 0.6 s, the requests in flight on it fail then, before
//!   their deadline, and each is sent again on a fresh connection: none fails. After an idle
//!   period, the first request's ping goes at once (nothing was read for longer than
//!   `PING_AFTER`): after 1.5 s idle, the connection was closed 0.31 s after the next request
//!   (`tests/conn_clients.rs`), none failed.
//! * **HTTP/1.1** has no ping. The one request written to a silent connection waits for its
//!   deadline (1 failure, the connection closed when it is dropped at 1.05 s); the other
//!   requests never meet it (an HTTP/1.1 connection with an answer outstanding is not reused).
//!   This is a floor, not a setting: nothing in HTTP/1.1 tells a silent peer from a slow one
//!   while a request waits, and a retry after a shorter timeout would churn a slow server's
//!   connections (the slow-server row below). What it costs is one request per connection
//!   pooled when the fault starts: over 10 requests 100 ms apart after 2 warm-up requests,
//!   1 or 2 of 10 failed in repeated runs (1 or 2 connections pooled), each at its 1 s
//!   deadline, and none after (`h1_black_hole_fails_no_get` in `tests/issue44_review.rs`, kept
//!   ignored as this floor's record). Over HTTP/2 the same fault costs nothing.
//! * **FIN or RST as a request arrives**: the request was written and its answer will not
//!   come; the defaults fail it, the crate sends the `GET` again (a `POST` fails with
//!   `ConnRetryError::NotIdempotent`: "the connection died with the request in flight").
//!   A limit: when the same fault closes many pooled HTTP/1.1 connections at once, the resend
//!   can land on another of them and fail too (`ConnRetryError::Retried`; 1 run in about 10
//!   with 8 pooled connections, `many_pooled_h1_connections_reset_or_closed_idle_cost_nothing`
//!   in `tests/issue44_review.rs`, kept ignored as its record).
//!   RST and FIN on an idle connection and GOAWAY cost nothing with any client: hyper sees
//!   them before the next request.
//! * **A server slower than the deadline** (1.5 s answers, 1 s deadlines, 100 requests): every
//!   request times out with every setup, and every setup keeps **one** connection: the crate's
//!   ping is answered, and a timeout alone never closes a connection.
//! * **A server that answers pings but never a request** (HTTP/2): the rows below. Up to the
//!   deadline it puts the same bytes on the wire as the slow server; at the deadline h2 resets
//!   the stream (`RST_STREAM(CANCEL)`), after which the slow server's answer could not come
//!   either. So `HealthIo` tells them apart by holding that reset back ("hold-back"): it reads
//!   the HTTP/2 frame headers going both ways (switched on by the client preface on the first
//!   write; HTTP/1.1 and TLS records pass untouched, one branch per read and write). The rule:
//!
//!   - **What is held**: a client `RST_STREAM(CANCEL)` of a request sent whole (its
//!     `END_STREAM` written: a request cancelled mid-body, an upload or a client stream, is
//!     reset at once, as the server may rightly be waiting for the rest), with no response
//!     `HEADERS` yet and no frame of any stream read since the stream opened, while no other
//!     stream the server answered is still open (a server stream between its events: the
//!     server shows it serves this connection, and quiet is normal there). At most 8 per
//!     connection, and only while the streams the server counts as open (held ones included,
//!     counted exactly: open streams older than the newest 128 are tracked on the side, 8 of
//!     them; past that the watch holds nothing more on that connection) are at most half its
//!     `SETTINGS_MAX_CONCURRENT_STREAMS` (read from its `SETTINGS`; 100 until they come).
//!     Before a new stream's `HEADERS` that would bring them to the limit, the held resets go
//!     out first: a hold never makes the server refuse a stream.
//!   - **How long**: h2 forgets a stream it reset 1 s after the reset, and answers a late frame
//!     of a forgotten stream with a reset that counts against its
//!     `max_local_error_reset_streams` (1,024 per connection by default; past it, h2 closes the
//!     connection with `GOAWAY(ENHANCE_YOUR_CALM)` and every request in flight fails). So a
//!     held reset is released 0.3 s after it was held (with a timer; without one, at the
//!     connection's next read or write after that), but one per connection, the witness, kept
//!     until its verdict. h2 starts its 1 s when it resets the stream, that is when the watch
//!     holds the frame. A released stream's answer costs one of h2's resets only if the
//!     server sent it before the reset reached it and it arrived more than 1 s after the
//!     hold: on a link whose round trip is under 0.7 s it cannot, and the witness's answer is
//!     the only one that may (four cancels at once to a server answering 0.7 s after them,
//!     over a 0.4 s downlink, cost one, `tests/s7_44_review3.rs`). On a slower link each
//!     released stream's late answer may cost one too, and without a timer a release waits
//!     for the next read or write. The budget counts them: every frame the server sends on a stream whose reset the watch held, held or
//!     released, until the server ends or resets that stream (and every frame of a client
//!     stream older than the 128 newest that is not known open), counts as one of h2's
//!     1,024, whether h2 still remembered the stream or not; once 512 were counted the
//!     connection holds no more. What can come after that is the frames still on their way on
//!     the at most 8 held streams and those released and not yet ended: each ends within a
//!     round trip of its reset reaching the server, and the other 512 are left for them and
//!     for h2's own. That is a bound by the budget's margin, not a hard one: a server that
//!     ignored resets and kept sending on those streams could still spend the rest.
//!     hyper-util's legacy builder cannot set h2's `reset_stream_duration`, and tonic's
//!     `Endpoint` sets neither it nor the cap.
//!   - **What counts as life**: any frame of a stream from the server (`HEADERS`, `DATA`, a
//!     `WINDOW_UPDATE` of a server reading an upload, `RST_STREAM`, ...). Connection-level
//!     frames (stream 0: `PING` answers, `SETTINGS`, the connection's `WINDOW_UPDATE`,
//!     `GOAWAY`) do not: a server's stack sends them before it reads any request. On life,
//!     every held reset goes out at the next frame boundary of the outgoing bytes outside a
//!     header block (never between a `HEADERS` and its `CONTINUATION`), or is dropped if the
//!     answer closed its stream both ways, and the connection stays.
//!   - **The verdict**: a held stream **1.75 s old** (from its opening, not from the cancel)
//!     and held at least 0.25 s, with no life since it opened: the connection is marked dead
//!     (`Cause::HealthCheck`) and closed; its requests in flight fail, and those
//!     `ConnRetryLayer` may send again are sent on a fresh connection: idempotent and
//!     unanswered ones, and any request never written. A request h2 took but whose `HEADERS`
//!     had not reached the socket when the verdict came is reported never written when every
//!     stream the connection had written was one its caller cancelled (the error's message
//!     says "none of its open requests was written": h2 passes on only an I/O error's kind
//!     and message, so the words are what `ConnRetryLayer` finds); when another written
//!     stream was still open, the verdict cannot tell the requests apart, and a `POST` fails
//!     as one that may have been processed. The verdict is taken on time even on an idle connection: while a
//!     reset is held, the connection sets a tokio timer (made at its first hold, one
//!     allocation per connection) that wakes it when a verdict or a release is due, so the
//!     dead connection is closed before the next request and hyper-util's pool does not hand
//!     it out (without a current tokio runtime, or with one built without timers, whose panic
//!     is caught and printed by the panic hook once per connection, the verdict and the
//!     releases wait for the connection's next read or write; under `panic = "abort"` that
//!     panic is not caught and aborts the process at the first hold, so such a build needs a
//!     runtime with timers, as `HealthConnector::client_builder`'s ping does anyway). The
//!     watch's times are read on tokio's clock, the one its timer keeps (the system's, unless
//!     a test paused tokio's clock: then both stand still together). Counting from the opening makes the verdict
//!     independent of the caller's deadline: a never-answering server is left at the later of
//!     the deadline (+0.25 s) and 1.75 s, and a server that answers within 1.75 s keeps its
//!     connection whatever the deadline.
//!
//!   No byte is changed (HPACK stays in sync). h2 0.4 ignores late frames of a stream it reset
//!   for 1 s (up to 50 streams), returning their flow-control capacity to the connection
//!   (three late 1 MiB answers leave a 2 MiB connection window whole,
//!   `tests/issue44_review.rs`); after that it answers them with a stream error that counts
//!   against its `max_local_error_reset_streams`, counted by the budget above.
//!
//!   | client, setup | failed of 100 (sent after the first failure returned) | faulted connection closed at | connections |
//!   |---|---:|---:|---:|
//!   | hyper-util HTTP/2, defaults | **100** (89) | never | 1 |
//!   | hyper-util HTTP/2, ping 1 s / 1 s / while idle | **100** (89) | never | 1 |
//!   | hyper-util HTTP/2, `HealthConnector` + `ConnRetryLayer` | **8** (0) | **1.80 s** | 2 |
//!   | tonic `Channel`, defaults | **100** (89) | never | 1 |
//!   | tonic `Channel`, ping 1 s / 1 s / while idle | **100** (89) | never | 1 |
//!   | tonic `Channel`, `HealthConnector` + `ConnRetryLayer` | **8** (0) | **1.80 s** | 2 |
//!   | reqwest HTTP/2, defaults | **100** (89) | never | 1 |
//!   | reqwest HTTP/2, ping 1 s / 1 s / while idle | **100** (89) | never | 1 |
//!   | reqwest HTTP/2, ping 300 ms / 300 ms | **100** (89) | never | 1 |
//!
//!   (`cargo run --release --features full --example pool`, 100 requests a row, 1 s
//!   deadlines; these rows and the matrix above from one run on this tree, in which every
//!   setup also kept its one connection to the slow server and the crate's rows held with the
//!   timer at most 10 ms late; the proxy passes only the client's connection-level frames, PING, SETTINGS
//!   and the connection's WINDOW_UPDATE, so the server's stack answers pings and never sees a
//!   request.) The crate's failures are the floor of the deadline: the requests whose 1 s
//!   deadline ends before the first held stream is 1.75 s old time out (a server that answers
//!   in 1.5 s must be given that long); the ones sent after are answered on a fresh
//!   connection. Sequential requests (one at a time, 1 s deadline each) leave a
//!   never-answering server's connection within 2 s, and a server answering in 0.5 s with
//!   0.3 s deadlines keeps its one connection, with hyper-util and tonic
//!   (`tests/issue44_review.rs`; the issue's 1.5 s / 1 s shape, 0.25 s from the verdict, is
//!   the pool example's slow-server row above, judged only when its timer kept time).
//!
//!   Limits: **a quiet stream nobody cancelled is never judged** (a long poll looks the same),
//!   so with long deadlines a never-answering server is found only at the first deadline:
//!   with 3 s deadlines, requests keep going to it for 3.25 s (the next connection opened at
//!   3.31 s in one run, one request every 100 ms). When the verdict kills a connection, the
//!   streams on it that the server already answered (a download, a server stream) end with
//!   it, and no retry can replay them; a server stream still open keeps any reset from being
//!   held, so a connection carrying one (a gRPC watch) is never judged: a server that keeps
//!   such a stream but stops answering new requests is not found by the hold-back. A server
//!   that answers a request more than 1.75 s after it opened, with no frame of any stream read
//!   meanwhile, is taken for dead: one reconnection each time that happens (under steady
//!   traffic to a server that always answers that late, a reconnection about every 2 s), and
//!   its requests in flight fail or are sent again as above. At most 8 resets are held at
//!   once per connection (beyond that they go out at once, unjudged), none when the server
//!   allows fewer than 2 streams, none once life was seen since the stream opened (the
//!   verdict is already known), none after 512 frames of held streams counted on the connection, and
//!   none once more than 8 open streams fell out of the 128 newest the watch keeps. The hold-back needs the connection's plaintext: with `HealthConnector`
//!   wrapped around a TLS connector (hyper-rustls's `HttpsConnector`: its connection decrypts
//!   inside, so `HealthIo` above it reads and writes HTTP/2; from the layering, not tested
//!   here) it works; with TLS above it (a TLS connector wrapping `HealthConnector`, or tonic's
//!   own TLS, `Endpoint::tls_config`, which runs over the connector's connection) it sees TLS
//!   records and stays off, and such a server keeps its connection. The cost: reads go
//!   through a 16 KiB buffer in the connection (one allocation per HTTP/2 connection, a copy
//!   of the bytes read), and a clock read per stream opened, measured below.
//! * **gRPC over tonic**: the tonic rows send `GET`s through the `Channel`. A gRPC call is a
//!   `POST` with a message body: once written, `ConnRetryLayer` does not send it again
//!   (whether a method is idempotent is the service's to say), and its error says the
//!   connection died with it in flight; the silent connection is still closed at 0.6 s, so the
//!   calls after it go on a fresh one. A call **never written** (its connection could not be
//!   opened, or a closing connection refused it) is sent again, its message body taken back
//!   from the client that dropped it unread (`tests/issue44_review.rs`).
//! * **Concurrent requests at the fault**: ten `GET`s sent 1 ms apart as the connection is
//!   reset or closed under the first are all answered, over HTTP/1.1 and HTTP/2
//!   (`tests/conn_clients.rs`).
//!
//! **Cost** on a healthy connection (`LOW=200 HIGH=1200 scripts/callgrind-per-op
//! conn_hyper_stock conn_hyper_ping conn_hyper_health conn_hyper_crate`, three interleaved
//! rounds in one session, medians of the instructions and of each round's difference from the
//! row above: a real h2c `GET` over loopback through hyper-util's client on a
//! current-thread runtime, its body read; allocations from `benches/alloc.rs --run`, the same
//! variants):
//!
//! | setup | instructions per request | added | allocations per request |
//! |---|---:|---:|---:|
//! | hyper-util's defaults | 59,144 | | 16 |
//! | + the ping and timer of `client_builder` | 60,644 | +1,500 (hyper's keep-alive bookkeeping) | 16 |
//! | + `HealthConnector` (with the HTTP/2 frame watch) | 61,762 | +1,091 | 16 |
//! | + `ConnRetryLayer` (a `GET` without headers) | 62,207 | +453 | 16 |
//!
//! No task per request; one allocation per HTTP/2 connection (the watch, its 16 KiB read
//! buffer, its timer at the first hold), none per request. **`HealthConnector` does not stay
//! within 300 instructions**, and `ConnRetryLayer` does not either; a request with headers pays
//! allocations for their copy (below).
//!
//! The watch's cost against the tree before it (`LOW=200 HIGH=1200 ROUNDS=5
//! scripts/callgrind-ab A B conn_hyper_stock conn_hyper_health_noping conn_hyper_crate_noping`,
//! `benches/alloc.rs` built on the tree before the frame watch (A) and on this one (B), five
//! interleaved rounds in one session, no ping so that no timer runs; the script prints the
//! medians and ranges):
//!
//! | build | over the stock client, per request: median (range of 5 rounds) |
//! |---|---:|
//! | `HealthConnector`, before the frame watch (A) | +681 (+415 to +847) |
//! | `HealthConnector`, with it (B) | **+1,398** (+1,240 to +1,491) |
//! | `HealthConnector` + `ConnRetryLayer` (a `GET` without headers), A | +1,346 (+986 to +1,474) |
//! | the same, B | +2,201 (+2,118 to +2,231) |
//!
//! The same `HealthConnector` build to build, round by round: +485 (+346 to +637). Trimmed
//! while it was built: a task parking again with the waker it parked last (hyper's connection task, every
//! time) keeps its own copy of that waker and takes no lock (loom:
//! `a_cached_park_is_woken_by_death`), and the check is inlined into the I/O calls; a write of
//! one buffer is planned without the walk across buffers; each frame header is decoded with one
//! bounds check. No allocation per request (one per HTTP/2 connection: the watch and its
//! 16 KiB read buffer). Where the rest goes (`callgrind_annotate` of `conn_hyper_stock` and
//! `conn_hyper_health_noping`, one run of 1,200 requests each, the difference of each
//! function's exclusive count, per request, on the build before the second and third reviews'
//! fixes, when the same script gave +625: the exact stream count, the verdict's timer armed
//! at each flush and the late-frame budget added the rest, about 770, not traced yet): about 310 in `HealthIo`'s reads (four read polls
//! a request, three of them finding the socket empty: the health word, the watch's quiet check
//! and the read buffer's set-up each time, then the one read with bytes copied through the
//! buffer and its frame headers walked) and 40 in their `memcpy`; about 120 planning the
//! writes' frames and 115 noting frames both ways (per-stream bits); about 70 in the vectored
//! writes' and 65 in the flushes' checks (the health word and the watch's quiet check, three
//! flushes a request); 24 noting a written buffer; 18 in `Instant::now` and 10 in
//! `clock_gettime` for the clock read per stream opened;
//! h2's own functions compile differently around the wrapper (their sum moves by about -100).
//! That is the floor of a safe watch: hyper offers no safe way to look at the bytes it reads
//! in place (`ReadBufCursor` writes only), so each read is copied once and goes through a
//! wrapper call hyper's stock path inlines; each frame header is read both ways; the hold-back
//! rule needs the clock when a stream opens (its window counts from there). **300 instructions
//! are not reached.** HTTP/1.1 and TLS below `HealthIo` pay one branch per operation (not
//! measured separately).
//!
//! `ConnRetryLayer`'s own cost, measured without the ping (`conn_hyper_health_noping`,
//! `conn_hyper_crate_noping`, and the same with two request headers built from strings,
//! `conn_hyper_{health,crate}_noping_headers`, in `benches/alloc.rs`: no timer runs, but the
//! count still moves by up to 200 from run to run, with the socket's timing under callgrind):
//! six interleaved rounds, LOW/HIGH 200/1200, in one session, of the layer as it is and as it
//! was before its kept head held two header values inline (the map copied):
//!
//! | layer, request | added per request: median (range of 6 rounds) | allocations added |
//! |---|---:|---:|
//! | now, a `GET` without headers | **+496** (+432 to +610) | 0 |
//! | now, a `GET` with two headers from strings | **+2,128** (+2,017 to +2,195) | 4 |
//! | the map copied, without headers | +254 (+92 to +342) | 0 |
//! | the map copied, two headers from strings | +2,241 (+2,078 to +2,363) | 6 |
//!
//! over 59,439 instructions per request without the layer (66,111 with the two headers). The
//! inline values save two allocations and about 110 instructions on a request with one or two
//! headers, and cost about 240 on a request without headers (not traced further; the kept
//! head is 48 bytes larger). Of the +2,128, about 800 are the four allocations and their frees
//! (`malloc`, `_int_malloc`, `_int_free` in `callgrind_annotate` of both variants, one run): each header name or value whose bytes were copied in (`HeaderValue::from_str`, a
//! custom name from a string) is shared on its first copy (`Bytes`), which allocates; one made
//! with `from_static` costs none. That is the floor: hyper-util's `Client` gives a request back
//! only to its own internal resend, so a layer above it must keep its own copy of the head.
//! Allocations added per request shape, exactly (`tests/s6_44_review.rs`): 0 without headers
//! or with static ones; 4 for two headers from strings; 4 for a gRPC call with `content-type`
//! and `te` from strings (2 for the message body's hand-off, its slot and its wrapper); 5 for a
//! call as tonic's generated clients make it (static headers, and the `GrpcMethod` extension,
//! whose copy is three). 300 instructions and no allocation are not reached.
//! Where the layer's instructions go on a `GET` without headers (`callgrind_annotate` of
//! `conn_hyper_health_noping` and `conn_hyper_crate_noping`, one run of 1,200 requests each,
//! the difference of each function's exclusive count, per request): about 300 in `memcpy`,
//! moving the request and the layer's future (its `call` about 90, the runtime's and
//! `Oneshot`'s polls about 65 each, keeping the head and polling the layer's future about 30
//! each); about 200 in the layer's `call` and `poll`; about 90 dropping the kept head; about 60
//! keeping it and 55 cloning (the head's parts, the client for the resend); about 40 in
//! `Bytes` reference counts.
//!
//! The resend goes through a clone of the client made when the layer wrapped it, shared by the
//! layer's clones. hyper-util's `Client` and tonic's `Channel` lose nothing by it: their
//! clones share their pool and connection, so the resend uses the connection the caller's
//! handle opened after the spare was cloned (`tests/conn_clients.rs`); reqwest's `Client` is
//! one shared reference inside. A
//! clone of the caller's handle per request, measured beside it (`conn_hyper_*_noping`, six
//! interleaved rounds in one session, against the layer with four header values inline):
//! **+1,197** (+861 to +1,539) against **+669** (+463 to +759), a median of 499 more per
//! request; it is not done.
//!
//! Mind a gRPC server's ping policy: grpc-go sends GOAWAY (`too_many_pings`) to a client that
//! pings more often than its enforcement's `MinTime` (5 minutes by default) while the server
//! sends nothing; a call waiting 1 s for such a server is pinged three times. Raise
//! `PING_AFTER` on the `Endpoint` for such servers, or allow the pings on the server
//! (`keepalive.EnforcementPolicy`).
//!
//! # reqwest: what its own settings give, and the hook it lacks
//!
//! reqwest is hyper-util's legacy client inside, and its settings give the same rows as
//! hyper-util's (the reqwest rows of the table above, measured in the same run, reqwest
//! 0.13.5 with its `http2` feature, `http2_prior_knowledge()`): with the defaults a silent
//! connection is never closed and every request sent to it times out (100 of 100); with
//! `http2_keep_alive_interval(1 s)`, `http2_keep_alive_timeout(1 s)` and
//! `http2_keep_alive_while_idle(true)` it is closed at 2.00 s and 20 requests are lost, 9 of
//! them sent after the first failure had been returned; with the crate's constants
//! (`http2_keep_alive_interval(HealthConnector::PING_AFTER)`,
//! `http2_keep_alive_timeout(HealthConnector::PING_TIMEOUT)`, not while idle) it is closed at
//! 0.60 s and the 6 requests in flight on it fail, none after. reqwest sets the tokio timer
//! itself, so these settings never panic. A FIN or RST as a request arrives costs the request
//! (1 of 100) with every setting: nothing sends it again.
//!
//! What the last row lacks against the crate's (0 failed) is the hook. reqwest's
//! `ClientBuilder::connector_layer` takes a layer whose service must return reqwest's own
//! connection type, which lives in a private module (`reqwest::connect::sealed::Conn`): no
//! `HealthIo` can be put under it, no `Connected::poison` reached, and nothing of reqwest's
//! marks a connection dead on the caller's evidence (seanmonstar/reqwest#2955). The retry half
//! is a `reqwest-middleware` middleware's to do (an idempotent request sent again on a
//! connection error); it is not measured here. (This crate builds reqwest without
//! HTTP/2; the rows come from the example's dev-dependency with the `http2` feature.)
