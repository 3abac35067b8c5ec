//! Size limits, secrets in logs, what a held snapshot costs, and the dependency's soundness record.
//!
//! # Limits
//!
//! A handle can refuse to grow past a size, set once when it is built:
//!
//! ```
//! use http::HeaderName;
//! use shared_headers::{Error, Limit, SharedHeaders};
//!
//! let headers = SharedHeaders::builder()
//!     .max_entries(100)          // values, counting each value of a repeated name
//!     .max_bytes(16 * 1024)      // names + values, a name counted once per value
//!     .sensitive([HeaderName::from_static("x-session")]) // more secret names (see below)
//!     .build();                  // or .build_from(map)?, which checks the map too
//!
//! let huge = "a".repeat(20_000).parse()?;
//! let err = headers.insert("x-huge", huge).unwrap_err();
//! assert!(matches!(err, Error::LimitExceeded { limit: Limit::Bytes, max: 16384, .. }));
//! assert_eq!(headers.version(), 0); // nothing was published
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Every write (`insert`, `append`, `update`, `replace`, `commit`, `seal_with`) that would take
//! the headers past a limit is refused as a whole with
//! `Error::LimitExceeded { limit: Limit::Entries | Limit::Bytes, max, attempted }`, naming the
//! limit and the size the write would have reached; nothing is published and the version does not
//! move. The entry check is O(1); the byte check sums the new map, O(n) like the copy every write
//! makes, and runs only on handles that set `max_bytes`. A handle without limits pays nothing: it
//! is two allocations and its writes skip every check.
//!
//! Without limits, `HeaderMap`'s own capacity still answers with
//! [`Error::MaxSizeReached`](crate::Error::MaxSizeReached), never a panic (24,576 distinct names,
//! the point where its 32,768-slot index cannot grow; many values of one name can go further).
//! The one way to panic is your own `update`/`seal_with` closure calling `HeaderMap::insert` or
//! `append` (not `try_insert`/`try_append`) on a full map: the panic is the closure's, it reaches
//! the caller, nothing is published and the handle stays usable.
//!
//! The server layer applies limits per request: `SharedHeadersLayer::request_policy(Builder)` and
//! `response_policy(Builder)`. A request already over the request limits is answered with the
//! layer's `rejection_status` (431 by default) without calling the handler
//! (`Outcome::Rejected`).
//!
//! # Secrets stay out of logs
//!
//! `Debug` of [`SharedHeaders`](crate::SharedHeaders), [`Snapshot`](crate::Snapshot) and
//! [`Draft`](crate::Draft), and [`Snapshot::redacted`](crate::Snapshot::redacted) (a `Display`
//! and `Debug` helper for log lines) never print a secret value. They print the name and
//! `[redacted]`, not even the length:
//!
//! ```
//! use shared_headers::SharedHeaders;
//!
//! let headers = SharedHeaders::builder()
//!     .sensitive([http::HeaderName::from_static("x-session")])
//!     .build();
//! headers.insert("host", "example.com".parse()?)?;
//! headers.insert("authorization", "Bearer abc".parse()?)?;
//! headers.insert("x-session", "k-123".parse()?)?;
//!
//! assert_eq!(
//!     headers.snapshot().redacted().to_string(),
//!     "host: example.com, authorization: [redacted], x-session: [redacted]",
//! );
//! assert!(!format!("{headers:?}").contains("k-123"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A value is secret when it is flagged with `HeaderValue::set_sensitive(true)`, when its name is
//! one of [`Builder::ALWAYS_SECRET`](crate::Builder::ALWAYS_SECRET) (`authorization`, `cookie`,
//! `x-api-key`, ...) or carries a credential token by the rule those names are cases of (the rule
//! that judges a query parameter's name: `x-vault-token`, `x-client-secret`, `x-goog-api-key`),
//! or when its name was given to
//! [`Builder::sensitive`](crate::Builder::sensitive) for that handle (every snapshot of the
//! handle knows the list; in the server layer, either policy's names are secret for the whole
//! layer: both handles, the access line, the propagation). Every printer of the crate asks
//! this one question, and prints every URL by one rule too (its userinfo and its query's
//! credentials redacted; a credential path parameter such as `;jsessionid=` redacted in the
//! access line, both OpenTelemetry spans and the record's `Debug`). [`Redacted::new`](crate::Redacted::new) applies the default rules
//! to any `HeaderMap`. A value that contains a comma or is not visible ASCII is printed quoted and
//! escaped, so a value cannot pass for further entries of a log line.
//!
//! **Where each secret ends up** (`tests/record_views.rs`, one request over HTTP/1.1 and one
//! over HTTP/2, every printer on):
//!
//! | Sent | Printed as |
//! |---|---|
//! | 20 credential-looking headers under `HeaderSelection::all()` (`x-vault-token`, `private-token`, `x-goog-api-key`, `x-client-secret`, `x-authorization`, `ocp-apim-subscription-key`...) | `x-vault-token: [redacted]` in the line's headers |
//! | `/a;jsessionid=S` | `/a;jsessionid=[redacted]` in the line's and the server span's `url.path`, the client span's `url.full`, the record's `Debug` and [`ResponseEnd::url_path`](crate::server::ResponseEnd::url_path) |
//! | `redirect=https://u:P@evil.example/?token=T`, raw and percent-encoded | `redirect=https://[redacted]@evil.example/?token=[redacted]` (encoded: `https%3A%2F%2F[redacted]%40...%3Ftoken%3D[redacted]`) in `url.query` and [`ResponseEnd::url_query`](crate::server::ResponseEnd::url_query) |
//! | `filter={"password":"P"}`, `f2={"api_key":"K"}` (encoded and not) | each key's value `[redacted]` |
//! | `client_assertion`, `assertion`, `SAMLResponse`, `ticket`, `hmac` | `name=[redacted]` |
//! | `referer: https://u:P@r.example/?access_token=T`; answered `location: https://u:P@x.example/?token=T` | userinfo and token `[redacted]` |
//!
//! No byte of any output holds one: the captured `tracing` events and span fields, the
//! exported server and client spans, the metric points' attributes, the `Debug` of the record
//! and of the commit, and, with the server in a child process, its stdout (text lines) and
//! stderr (JSON lines).
//!
//! **Flagged on every way out.** Every value of `authorization`, `proxy-authorization`,
//! `cookie`, `set-cookie` and the `Builder::sensitive` names is also flagged
//! `set_sensitive(true)` as it is admitted, on every handle and every write path (and in the map
//! a handle starts from), so it carries the flag wherever it leaves the crate: `get`, a
//! snapshot's map, the server layer's merge into the response, the client layer's merge into a
//! request. HTTP/2's HPACK then never indexes it, and header-logging middleware such as
//! tower-http's `DefaultOnResponse::include_headers(true)` sees it as sensitive.
//!
//! # What a held snapshot costs, and what bounds it
//!
//! A [`Snapshot`](crate::Snapshot) keeps its version alive: the map's index and entries (an
//! `insert` on 8 headers allocates 896 bytes for its new version, `cargo bench --features full
//! --bench alloc`; value bytes are shared between versions, not copied) stay allocated until
//! the last snapshot of that version is dropped, and are freed right then. Writers never wait for
//! readers, so the memory in use is the current version plus one per distinct version some reader
//! still holds. What bounds it is how long your code holds snapshots (hold them for a request, not
//! forever) and, per version, the limits above. One more holder: a thread that read a
//! [`Locked`](crate::Publication::Locked) handle (the server layer's request and response
//! handles) caches that version, and keeps it alive until it reads another `Locked` handle or a
//! newer version, drops the handle, or exits; at most one version per thread, and never served
//! for another handle. The long stress test checks that memory returns
//! to its starting level after every round (see [`testing`](super::testing#stress)).
//!
//! **On HTTP/1, a held snapshot keeps hyper's read buffer alive.** A held snapshot (or exchange,
//! or `Committed` record) of a request's headers keeps hyper's whole read buffer for that request
//! alive, not only the header bytes: hyper's parsed header values share its `Bytes` buffer, and
//! the handle takes them without copying. On HTTP/2 the HPACK decoder copies values out, so only
//! the header bytes stay. What bounds it is the same: how long you hold
//! snapshots, and the request limits (hyper's `max_buf_size` and header count, and the layer's
//! `request_policy` limits), which cap the buffer per request.
//!
//! A `Committed` record, or a clone of one of the layer's request or response handles, also
//! keeps that exchange's own allocation (its two handles' shared parts and the record) until it
//! is dropped; not the response future's task: the exchange lets go of
//! the task's waker when its last `Exchange` is dropped.
//!
//! # The dependency's soundness record
//!
//! On the default backend every read is an `ArcSwap::load` and every publish an
//! `ArcSwap::store`, so the crate relies on arc-swap for memory safety: a `load` returns a value
//! that was `store`d into that same instance and is still alive. arc-swap's record:
//!
//! * **1.9.0** promoted certain atomic orderings to `SeqCst`: their original proofs were based on
//!   a wrong reading of the standard (arc-swap #198, #200).
//! * **1.9.4** fixed a use-after-free when strong and weak pointers to the same allocation are
//!   stored in different instances (#214).
//! * **1.9.5** fixed `load` returning a value stored into a *different* instance after the
//!   address of a freed one was reused (#210). The server layer creates and frees handles per
//!   request, exactly that pattern; the worst case would be a logger reading another request's
//!   headers.
//!
//! The crate therefore requires `arc-swap = "1.9.5"` in its `Cargo.toml` (a lock file does not
//! reach users, so the requirement is what excludes the affected versions).
//! `tests/handle_churn.rs` runs the #210 pattern (handles created, tagged, loaded and freed on
//! several threads) as a guard; it is not a reproducer (it also passed against 1.9.4). loom
//! cannot see inside arc-swap, so the loom models check this crate's protocol on a stand-in that
//! gives exactly what arc-swap documents (see
//! [`testing`](super::testing#what-loom-proves-and-what-it-does-not)); arc-swap runs under
//! Miri, small (`scripts/miri`, see [`testing`](super::testing#miri)): a check of a few
//! schedules, not a proof. Its own correctness is trusted, not proved.
//!
//! For users who prefer not to rely on it, the **`rwlock-backend`** feature publishes versions
//! through a `parking_lot::RwLock<Arc<State>>` instead: every handle then reads as a
//! [`Locked`](crate::Publication::Locked) one (a per-thread cache, and on a thread's first read of
//! each version a short read lock that can wait for a writer's pointer swap), and the semantics
//! and the test suite are the same. The
//! feature stops the crate from calling arc-swap; arc-swap is still compiled and linked, since
//! the dependency is not optional.
