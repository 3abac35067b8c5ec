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
//! use shared_headers::conn::{ConnHealth, Health, Pool};
//!
//! let pool: Pool<&str, &str> = Pool::new();
//! let conn = pool.insert("example.com:443", "conn #1", ConnHealth::with_max_concurrent(100))?;
//!
//! let err = io::Error::from(io::ErrorKind::BrokenPipe); // the writer's next write fails
//! assert_eq!(conn.health().observe(&err), Health::Dead);
//! assert!(pool.checkout(&"example.com:443").is_none()); // evicted, although still in use
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
