//! The access line's secret sweep over real sockets (HTTP/1.1 and HTTP/2 on 127.0.0.1:0): every
//! form a secret can take in a request or a response (query parameters named by the credential
//! rules in nested and encoded forms, userinfo and queries of URL-valued headers, headers made
//! secret by the log's settings or by the handle's, annotations under a secret name), sent
//! through every outcome (answered, timed out, panicked, rejected, failed, cancelled by a client
//! that hung up), with three settings: the defaults, and `user-agent`, `referer` and `host` made
//! secret by the response policy (secret for the whole layer) or by the request policy. Then: exactly one line per request, no captured
//! field of any event or span holds a planted secret, and every field of every access line is
//! printable ASCII (a control character or a non-ASCII character is percent-encoded).
//!
//! Planted secrets are long unique strings (`S3cr3t-<form>-<n>`) that no generated id can hold.
#![cfg(feature = "tracing")]

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use shared_headers::server::SharedHeadersLayer;
use shared_headers::server::access_log::AccessLog;
use shared_headers::{Builder, Exchange};
use tower::Layer;

#[path = "support/capture.rs"]
mod capture;
use capture::{capture, lock, wait_access_lines};

#[path = "support/sockets.rs"]
mod sockets;
use sockets::{BoxError, connect, serve};

/// What every planted secret starts with.
const MARK: &str = "S3cr3t-";

fn secret(form: &str, n: usize) -> String {
    format!("{MARK}{form}-{n}")
}

/// One request on a new connection (hung up after `hang_up` if given): its status.
async fn fetch(
    addr: SocketAddr,
    h2: bool,
    req: Request<Empty<Bytes>>,
    hang_up: Option<Duration>,
) -> Option<StatusCode> {
    let (mut client, conn) = connect(addr, h2).await;
    let status = match hang_up {
        Some(after) => {
            let _ = tokio::time::timeout(after, client.send(req)).await;
            None
        }
        None => match client.send(req).await {
            Ok(res) => {
                let status = res.status();
                let _ = res.into_body().collect().await;
                Some(status)
            }
            Err(_) => None,
        },
    };
    drop(client);
    conn.abort();
    status
}

/// The query: every credential form of the rules, and plain parameters that stay visible.
fn query(n: usize) -> String {
    [
        "page=2".to_owned(),
        format!("user[password]={}", secret("brackets", n)),
        format!("user%5Btoken%5D={}", secret("encoded-brackets", n)),
        format!("api_key[]={}", secret("array", n)),
        format!("credentials={}", secret("plural", n)),
        format!("authorization=Bearer%20{}", secret("bearer", n)),
        format!("auth_code={}", secret("auth-code", n)),
        format!("sort=asc;token={}", secret("semicolon", n)),
        format!("private+key={}", secret("plus", n)),
        format!("apiKey={}", secret("camel", n)),
        format!("X-Amz-Signature={}", secret("amz", n)),
        format!("Tenant_Ref={}", secret("user-list", n)),
        format!("filter[tenant_ref]={}", secret("user-list-nested", n)),
        "keyboard=qwerty".to_owned(),
    ]
    .join("&")
}

/// The path: non-ASCII and separators of lines (U+2028, U+2029, NEL) written raw.
fn path(kind: &str, tag: &str) -> String {
    format!("/{kind}/{tag}/caf\u{e9}\u{2028}\u{2029}\u{85}")
}

/// A request with a secret in every form a request can carry one. `hidden` is the setting that
/// makes `user-agent`, `referer` and the host secret: then they carry secrets too.
fn request(kind: &str, tag: &str, h2: bool, hidden: bool, n: usize) -> Request<Empty<Bytes>> {
    let host = if hidden {
        format!("{}.example", secret("host", n))
    } else {
        "api.example".to_owned()
    };
    let target = format!("{}?{}", path(kind, tag), query(n));
    let uri = if h2 {
        format!("http://{host}{target}")
    } else {
        target
    };
    let referer = format!(
        "https://admin:{}@app.example/p?user[password]={}&x=1#access_token={}",
        secret("referer-userinfo", n),
        secret("referer-query", n),
        secret("referer-fragment", n),
    );
    let user_agent = if hidden {
        format!("agent/{}", secret("user-agent", n))
    } else {
        "agent/1.0 caf\u{e9}\u{2028}".to_owned()
    };
    let mut builder = Request::get(uri)
        .header(
            "user-agent",
            HeaderValue::from_bytes(user_agent.as_bytes()).unwrap(),
        )
        .header("referer", referer)
        .header(
            "authorization",
            format!("Bearer {}", secret("authorization", n)),
        )
        .header("x-api-key", secret("x-api-key", n))
        .header("x-tenant-secret", secret("handle-policy", n))
        .header(
            "x-callback",
            format!("https://u:{}@cb.example/", secret("callback", n)),
        )
        .header(
            "x-note",
            HeaderValue::from_bytes("tab\there caf\u{e9} \u{2029}".as_bytes()).unwrap(),
        );
    if !h2 {
        builder = builder.header("host", host);
    }
    builder.body(Empty::new()).unwrap()
}

async fn handler(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, BoxError> {
    let exchange = req.extensions().get::<Exchange>().unwrap().clone();
    // A number no secret of the request shares: the handler's own forms.
    let _ = exchange
        .annotations()
        .insert("x-api-key", secret("annotation", 0).parse().unwrap());
    let _ = exchange.annotations().insert(
        "x-user",
        HeaderValue::from_bytes("ad\u{e9}".as_bytes()).unwrap(),
    );
    let kind = req.uri().path().split('/').nth(1).unwrap_or("").to_owned();
    match kind.as_str() {
        "slow" | "hang" => tokio::time::sleep(Duration::from_secs(5)).await,
        "panic" => panic!("handler bug"),
        "fail" => return Err("the service failed".into()),
        _ => {}
    }
    let mut res = Response::new(Full::from("hello"));
    res.headers_mut().insert(
        "location",
        format!(
            "https://bob:{}@app.example/cb?code={}&state=1",
            secret("location-userinfo", 0),
            secret("location-code", 0)
        )
        .parse()
        .unwrap(),
    );
    res.headers_mut().insert(
        "content-location",
        format!("/cb?access_token={}", secret("content-location", 0))
            .parse()
            .unwrap(),
    );
    Ok(res)
}

/// Who makes `user-agent`, `referer` and the host secret, if anyone.
#[derive(Clone, Copy, PartialEq)]
enum Hidden {
    No,
    /// `Builder::sensitive` on the response handle: secret for the whole layer.
    ByLog,
    /// `Builder::sensitive` on the request handle.
    ByHandle,
}

fn layer(hidden: Hidden) -> SharedHeadersLayer {
    let log = AccessLog::new()
        .request_headers(shared_headers::server::HeaderSelection::all())
        .response_headers(shared_headers::server::HeaderSelection::all())
        .redact_query_params(["tenant_ref"]);
    let mut secret_names = vec!["x-tenant-secret"];
    let mut response_secrets = vec![];
    match hidden {
        Hidden::No => {}
        Hidden::ByLog => response_secrets.extend(["user-agent", "referer", "host"]),
        Hidden::ByHandle => secret_names.extend(["user-agent", "referer", "host"]),
    }
    let names = |list: Vec<&'static str>| list.into_iter().map(http::HeaderName::from_static);
    SharedHeadersLayer::new()
        .timeout(Duration::from_millis(300))
        .request_policy(
            Builder::new()
                .max_entries(24)
                .sensitive(names(secret_names)),
        )
        .response_policy(Builder::new().sensitive(names(response_secrets)))
        .access_log(log)
}

#[test]
fn no_planted_secret_and_no_raw_control_or_non_ascii_in_any_field() {
    capture();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(60), sweep())
            .await
            .expect("the sweep took over 60 s");
    });
}

async fn sweep() {
    let kinds = ["ok", "slow", "panic", "rejected", "fail", "hang"];
    let mut n = 0;
    for setting in [Hidden::No, Hidden::ByLog, Hidden::ByHandle] {
        for h2 in [false, true] {
            let tag = format!(
                "{}{}",
                if h2 { "h2" } else { "h1" },
                match setting {
                    Hidden::No => "",
                    Hidden::ByLog => "-hidden-log",
                    Hidden::ByHandle => "-hidden-handle",
                }
            );
            let hidden = setting != Hidden::No;
            let service = layer(setting).layer(tower::service_fn(handler));
            let addr = serve(service, h2).await;
            for kind in kinds {
                n += 1;
                let mut req = request(kind, &tag, h2, hidden, n);
                if kind == "rejected" {
                    for i in 0..30 {
                        req.headers_mut().insert(
                            http::HeaderName::try_from(format!("x-extra-{i}")).unwrap(),
                            HeaderValue::from_static("filler"),
                        );
                    }
                }
                let hang_up = (kind == "hang").then_some(Duration::from_millis(50));
                let status = fetch(addr, h2, req, hang_up).await;
                let expected = match kind {
                    "ok" => Some(StatusCode::OK),
                    "slow" => Some(StatusCode::SERVICE_UNAVAILABLE),
                    "panic" => Some(StatusCode::INTERNAL_SERVER_ERROR),
                    "rejected" => Some(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE),
                    _ => status,
                };
                assert_eq!(status, expected, "{tag} {kind}");
            }
            for kind in kinds {
                let prefix = format!("/{kind}/{tag}/");
                let found = wait_access_lines(
                    |e| e.get("url.path").is_some_and(|p| p.starts_with(&prefix)),
                    1,
                )
                .await;
                assert_eq!(found.len(), 1, "{tag} {kind}: {found:#?}");
                let line = &found[0];
                // Where the secrets were, the redaction shows.
                assert_eq!(
                    line["url.path"],
                    format!("{prefix}caf%C3%A9%E2%80%A8%E2%80%A9%C2%85"),
                    "{line:#?}"
                );
                let query = &line["url.query"];
                for shown in [
                    "page=2&",
                    "user[password]=[redacted]",
                    "user%5Btoken%5D=[redacted]",
                    "api_key[]=[redacted]",
                    "credentials=[redacted]",
                    "authorization=[redacted]",
                    "auth_code=[redacted]",
                    "sort=asc;token=[redacted]",
                    "private+key=[redacted]",
                    "apiKey=[redacted]",
                    "Tenant_Ref=[redacted]",
                    "filter[tenant_ref]=[redacted]",
                    "&keyboard=qwerty",
                ] {
                    assert!(query.contains(shown), "{shown} in {query}");
                }
                if hidden {
                    for name in [
                        "user_agent.original",
                        "http.request.header.referer",
                        "server.address",
                    ] {
                        assert!(
                            !line.contains_key(name),
                            "{name} in {tag} {kind}: {line:#?}"
                        );
                    }
                } else {
                    assert_eq!(line["user_agent.original"], "agent/1.0 caf%C3%A9%E2%80%A8");
                    assert_eq!(
                        line["http.request.header.referer"],
                        "https://[redacted]@app.example/p?user[password]=[redacted]&x=1"
                    );
                    assert_eq!(line["server.address"], "api.example");
                }
                if kind == "rejected" {
                    continue;
                }
                let request = &line["shared_headers.request_headers"];
                assert!(
                    request.contains("x-callback: https://[redacted]@cb.example/"),
                    "{request}"
                );
                assert!(
                    request.contains("x-note: tab%09here caf%C3%A9 %E2%80%A9"),
                    "{request}"
                );
                if kind == "ok" {
                    let sent = &line["shared_headers.response_headers"];
                    assert!(
                        sent.contains(
                            "location: https://[redacted]@app.example/cb?code=[redacted]&state=1"
                        ),
                        "{sent}"
                    );
                    assert!(
                        sent.contains("content-location: /cb?access_token=[redacted]"),
                        "{sent}"
                    );
                    let annotations = &line["shared_headers.annotations"];
                    assert!(
                        annotations.contains("x-api-key: [redacted]"),
                        "{annotations}"
                    );
                    assert!(annotations.contains("x-user: ad%C3%A9"), "{annotations}");
                }
            }
        }
    }

    // The sweep: no event or span field holds a planted secret; every access line's field is
    // printable ASCII.
    let events = lock(&capture().events).clone();
    let spans = lock(&capture().spans).clone();
    assert!(events.len() >= 4 * kinds.len(), "{}", events.len());
    for fields in events.iter().chain(spans.iter()) {
        for (name, value) in fields {
            assert!(!value.contains(MARK), "a secret in {name}: {fields:#?}");
        }
    }
    for fields in &events {
        if fields
            .get("target")
            .is_some_and(|t| t == "shared_headers::access")
        {
            for (name, value) in fields {
                assert!(
                    value.bytes().all(|b| (0x20..=0x7e).contains(&b)),
                    "raw control or non-ASCII in {name}: {value:?}"
                );
            }
        }
    }
}
