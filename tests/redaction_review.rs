//! A hostile review of the access line's redaction and escaping: each test shows one way a
//! secret (or a forged field) still reaches the line, and FAILS on the code it was written
//! against. Secrets are long unique strings (`R2-secret-<what>`) no generated value can hold.
//! The in-process tests call the layer's service directly (no socket) and read the `request
//! completed` line of their own path from the shared capture. Each test now asserts the
//! behaviour the fix gives.
#![cfg(feature = "tracing")]

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{HeaderName, HeaderValue, Request, Response};
use http_body_util::BodyExt;
use shared_headers::server::access_log::AccessLog;
use shared_headers::server::{HeaderSelection, SharedHeadersLayer};
use shared_headers::{Builder, Exchange};
use tower::{Layer, ServiceExt};

#[path = "support/capture.rs"]
mod capture;

mod support;
use capture::{Fields, capture, lock};

/// What every planted secret starts with.
const MARK: &str = "R2-secret-";

type Respond = Arc<dyn Fn(&Exchange) -> Response<String> + Send + Sync>;

/// Calls a layer with `log` (and `layer`'s own settings) for `req`, collects the body, and
/// gives the `request completed` line of `req`'s path (waits at most 5 s for it).
async fn line_of(layer: SharedHeadersLayer, req: Request<()>, respond: Respond) -> Fields {
    capture();
    // Up to a path parameter (`;jsessionid=…`), which the line may redact.
    let path = req.uri().path().split(';').next().unwrap_or("").to_owned();
    let service = layer.layer(tower::service_fn(move |req: Request<()>| {
        let respond = respond.clone();
        async move {
            let exchange = req.extensions().get::<Exchange>().unwrap().clone();
            Ok::<_, Infallible>(respond(&exchange))
        }
    }));
    let res = service.oneshot(req).await.unwrap();
    res.into_body().collect().await.unwrap();
    let start = Instant::now();
    loop {
        let found = lock(&capture().events)
            .iter()
            .find(|e| {
                e.get("message").is_some_and(|m| m == "request completed")
                    && e.get("url.path").is_some_and(|p| p.starts_with(&path))
            })
            .cloned();
        if let Some(line) = found {
            return line;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "no line for {path}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn ok() -> Respond {
    Arc::new(|_| Response::new(String::new()))
}

/// The fields of `line` that hold a planted secret.
fn leaks(line: &Fields) -> Vec<(String, String)> {
    line.iter()
        .filter(|(_, v)| v.contains(MARK))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn assert_no_leak(line: &Fields) {
    let leaks = leaks(line);
    assert!(leaks.is_empty(), "secrets in the line: {leaks:#?}");
}

// ---- URLs in headers ----

/// A URL-valued header (`referer`) or a URL inside another header with one non-UTF-8 byte
/// (obs-text, which HTTP/1.1 and `HeaderValue` accept) skips the URL redaction entirely:
/// `Value`/`write_embedded_urls` fall back to plain escaping when `from_utf8` fails, so the
/// userinfo and a credential query parameter print as sent.
/// Observed: `referer: https://admin:R2-secret-...@app.example/caf%E9?token=R2-secret-...`.
/// Expected: `https://[redacted]@app.example/caf%E9?token=[redacted]`.
#[tokio::test]
async fn non_utf8_byte_disables_url_redaction_in_header_lists() {
    let referer =
        format!("https://admin:{MARK}userinfo-1@app.example/caf\u{e9}?token={MARK}token-1");
    // Latin-1 `é`: one byte 0xE9, not UTF-8.
    let latin1 = |s: &str| -> Vec<u8> {
        s.chars()
            .map(|c| u8::try_from(u32::from(c)).unwrap())
            .collect()
    };
    let callback = format!("see https://u:{MARK}userinfo-2@cb.example/\u{e9}?sig={MARK}sig-2");
    let req = Request::get("/r2/non-utf8")
        .header(
            "referer",
            HeaderValue::from_bytes(&latin1(&referer)).unwrap(),
        )
        .header(
            "x-callback",
            HeaderValue::from_bytes(&latin1(&callback)).unwrap(),
        )
        .body(())
        .unwrap();
    let layer = SharedHeadersLayer::new().access_log(AccessLog::new().request_headers(
        HeaderSelection::only([
            HeaderName::from_static("referer"),
            HeaderName::from_static("x-callback"),
        ]),
    ));
    let line = line_of(layer, req, ok()).await;
    assert_no_leak(&line);
}

/// An embedded URL ends at `'` (`write_embedded_urls` stops a URL at a quote), but `'` is a
/// legal sub-delimiter in userinfo and in a query value: the rest of the password, or of a
/// token, prints as plain text after the cut.
/// Observed: `x-upstream: https://admin:pa'R2-secret-...@db.example/` printed whole (the
/// cut URL `https://admin:pa` has no `@`), and `?token=[redacted]'R2-secret-...`.
/// Expected: both redacted.
#[tokio::test]
async fn apostrophe_ends_an_embedded_url_early_and_leaks_its_tail() {
    let req = Request::get("/r2/apostrophe")
        .header(
            "x-upstream",
            format!("https://admin:pa'{MARK}userinfo@db.example/"),
        )
        .header(
            "x-callback",
            format!("https://cb.example/?token=ab'{MARK}token"),
        )
        .body(())
        .unwrap();
    let layer = SharedHeadersLayer::new().access_log(AccessLog::new().request_headers(
        HeaderSelection::only([
            HeaderName::from_static("x-upstream"),
            HeaderName::from_static("x-callback"),
        ]),
    ));
    let line = line_of(layer, req, ok()).await;
    assert_no_leak(&line);
}

/// Two URLs joined by a comma without a space (a list header of the application's): the
/// embedded URL runs to the next space, so the second URL is inside the first one's path or
/// query, and only the first `://` is looked at. The module docs promise each absolute URL
/// in another header is printed with its userinfo and query credentials redacted.
/// Observed: `x-mirrors: https://a.example/,https://u:R2-secret-...@b.example/` and
/// `https://a.example/?q=1,https://b.example/?token=R2-secret-...` printed as sent.
#[tokio::test]
async fn second_url_after_a_comma_keeps_its_userinfo_and_token() {
    let req = Request::get("/r2/comma-urls")
        .header(
            "x-mirrors",
            format!("https://a.example/,https://u:{MARK}userinfo@b.example/"),
        )
        .header(
            "x-links",
            format!("https://a.example/?q=1,https://b.example/?token={MARK}token"),
        )
        .body(())
        .unwrap();
    let layer = SharedHeadersLayer::new().access_log(AccessLog::new().request_headers(
        HeaderSelection::only([
            HeaderName::from_static("x-mirrors"),
            HeaderName::from_static("x-links"),
        ]),
    ));
    let line = line_of(layer, req, ok()).await;
    assert_no_leak(&line);
}

/// A `location` the application sets with leading whitespace (a `HeaderValue` may start with
/// a space or tab) before a scheme-relative URL: `Url` only sees userinfo after `://` or at a
/// leading `//`, so ` //user:pass@host/` keeps its password.
/// Observed: `location:  //deploy:R2-secret-...@cdn.example/` in the response list.
/// Expected: `[redacted]@`.
#[tokio::test]
async fn scheme_relative_location_after_whitespace_keeps_userinfo() {
    let req = Request::get("/r2/ws-location").body(()).unwrap();
    let respond: Respond = Arc::new(|_| {
        let mut res = Response::new(String::new());
        res.headers_mut().insert(
            "location",
            HeaderValue::from_str(&format!(" //deploy:{MARK}userinfo@cdn.example/")).unwrap(),
        );
        res
    });
    let layer = SharedHeadersLayer::new().access_log(
        AccessLog::new()
            .response_headers(HeaderSelection::only([HeaderName::from_static("location")])),
    );
    let line = line_of(layer, req, respond).await;
    assert_no_leak(&line);
}

/// A special-scheme URL without its slashes (`https:user:pass@host/`, or with backslashes
/// `https:\\user:pass@host/`) is the URL `https://user:pass@host/` to every WHATWG parser
/// (browsers, `url` crate), but `Url` looks for `://` only: the userinfo prints.
/// Observed: `referer` field `https:ops:R2-secret-...@app.example/`.
#[tokio::test]
async fn special_scheme_url_without_slashes_keeps_userinfo() {
    let req = Request::get("/r2/no-slashes")
        .header(
            "referer",
            format!("https:ops:{MARK}userinfo-1@app.example/"),
        )
        .header(
            "content-location",
            format!("https:\\\\ops:{MARK}userinfo-2@app.example/"),
        )
        .body(())
        .unwrap();
    let layer = SharedHeadersLayer::new().access_log(AccessLog::new().request_headers(
        HeaderSelection::only([HeaderName::from_static("content-location")]),
    ));
    let line = line_of(layer, req, ok()).await;
    assert_no_leak(&line);
}

// ---- escaping / forged fields ----

/// The module docs: "other text is a string, which a text formatter quotes and escapes" and
/// "a line is never ... extended by what it reports, whatever the formatter". The header
/// lists (and the annotations) are recorded with `display`, which `tracing-subscriber`'s
/// text formatter writes unquoted, and a header value's spaces and `=` are kept: a client's
/// `x-note: a http.request.method=DELETE` adds that
/// field to the text line.
/// Observed: `... shared_headers.request_headers=x-note: a http.request.method=DELETE`, two
/// `http.request.method=` keys (the real `GET` and the forged `DELETE`). Expected: one.
#[test]
fn header_list_value_forges_fields_in_a_text_formatter() {
    capture();
    let buf = support::Lines::default();
    let writer = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let req = Request::get("/r2/forge")
                .header("x-note", "a http.request.method=DELETE")
                .body(())
                .unwrap();
            let layer = SharedHeadersLayer::new().access_log(
                AccessLog::new()
                    .request_headers(HeaderSelection::only([HeaderName::from_static("x-note")])),
            );
            let service = layer.layer(tower::service_fn(|_req: Request<()>| async {
                Ok::<_, Infallible>(Response::new(String::new()))
            }));
            let res = service.oneshot(req).await.unwrap();
            res.into_body().collect().await.unwrap();
        });
    });
    let text = String::from_utf8(lock(&buf.0).clone()).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("request completed") && l.contains("/r2/forge"))
        .unwrap_or_else(|| panic!("no line in {text:?}"));
    // The fields outside quoted strings: a quoted value is one field's, whatever it holds.
    let mut unquoted = String::new();
    let (mut quoted, mut escaped) = (false, false);
    for c in line.chars() {
        match (quoted, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (_, false, '"') => quoted = !quoted,
            (false, _, c) => unquoted.push(c),
            _ => {}
        }
    }
    assert_eq!(
        unquoted.matches("http.request.method=").count(),
        1,
        "a header value added a field: {line}"
    );
    assert!(
        line.contains("shared_headers.request_headers=\"x-note: a http.request.method=DELETE\""),
        "{line}"
    );
}

// ---- secrecy ----

/// A name the request handle's `Builder::sensitive` made secret is redacted in the request
/// list, but not in the annotations: the annotations' handle is built with no policy and
/// `HeaderList` asks `is_secret` with that handle. The module docs say a name the handle's
/// Builder made secret is never printed, "not in the header lists and the annotations".
/// Observed: `shared_headers.annotations = "x-tenant-secret: R2-secret-..."`.
#[tokio::test]
async fn annotation_under_a_builder_sensitive_name_is_printed() {
    let req = Request::get("/r2/annotation")
        .header("x-tenant-secret", format!("{MARK}request"))
        .body(())
        .unwrap();
    let respond: Respond = Arc::new(|exchange| {
        let _ = exchange.annotations().insert(
            "x-tenant-secret",
            format!("{MARK}annotation").parse().unwrap(),
        );
        Response::new(String::new())
    });
    let layer = SharedHeadersLayer::new()
        .request_policy(Builder::new().sensitive([HeaderName::from_static("x-tenant-secret")]))
        .access_log(
            AccessLog::new()
                .request_headers(HeaderSelection::all())
                .response_headers(HeaderSelection::all()),
        );
    let line = line_of(layer, req, respond).await;
    assert_no_leak(&line);
}

/// Java servlet containers rewrite URLs with the session id as a path parameter
/// (`/app/cart;jsessionid=...`): `url.path` prints it as sent. The query rules never look at
/// the path, so a session id (one of OWASP's never-log items) reaches every line, the
/// committed line and the late-writes line included.
#[tokio::test]
async fn jsessionid_path_parameter_is_printed() {
    let req = Request::get(format!("/r2/jsession;jsessionid={MARK}session"))
        .body(())
        .unwrap();
    let layer = SharedHeadersLayer::new().access_log(AccessLog::new());
    let line = line_of(layer, req, ok()).await;
    assert_no_leak(&line);
}

// ---- query names (no network) ----

/// The session-id parameters that servers actually put in URLs are not credentials by the
/// token rule: PHP's `PHPSESSID` (session.use_trans_sid), Java's `jsessionid`, ColdFusion's
/// `CFID`, the common `sessid`. Each is one token that is neither `session`/`sessionid`/
/// `sid` nor ends in a listed word.
/// Observed: `PHPSESSID=R2-secret-...&jsessionid=R2-secret-...&...` printed as sent.
#[test]
fn server_session_id_params_are_printed() {
    let log = AccessLog::new();
    for name in ["PHPSESSID", "jsessionid", "sessid", "CFID"] {
        let query = format!("{name}={MARK}{name}");
        let shown = log.query_for_log(&query).to_string();
        assert!(!shown.contains(MARK), "{name}: {shown}");
    }
}

/// `apikey` is a credential word and `api_key`, `access_key`, `secret_key`, `private_key`
/// are listed in `CREDENTIAL_PARAMS`, but the same words written as one token
/// (`accesskey`, `secretkey`, `privatekey`, `SECRETKEY`) are not: `key` is only a
/// credential as a token of its own.
#[test]
fn concatenated_key_names_are_printed() {
    let log = AccessLog::new();
    for name in [
        "accesskey",
        "secretkey",
        "privatekey",
        "SECRETKEY",
        "clientkey",
    ] {
        let query = format!("{name}={MARK}{name}");
        let shown = log.query_for_log(&query).to_string();
        assert!(!shown.contains(MARK), "{name}: {shown}");
    }
}

/// A digit glued to a credential word makes one token that neither is nor ends in the word:
/// Django's sign-up form fields `password1`/`password2`, `pwd2`, `token2`, `apiKey2`,
/// `api_key2` all print their values.
#[test]
fn digit_suffixed_credential_names_are_printed() {
    let log = AccessLog::new();
    for name in [
        "password1",
        "password2",
        "pwd2",
        "token2",
        "apiKey2",
        "api_key2",
    ] {
        let query = format!("{name}={MARK}{name}");
        let shown = log.query_for_log(&query).to_string();
        assert!(!shown.contains(MARK), "{name}: {shown}");
    }
}

/// `omit_query` "leaves the query out of every line", but a later `redact_query_params`
/// silently turns the query back on (it rebuilds `Query::Shown`): the order of two builder
/// calls decides whether the whole query is logged.
/// Observed: `a=R2-secret-...`. Expected: nothing.
#[test]
fn redact_query_params_after_omit_query_prints_the_query_again() {
    let log = AccessLog::new().omit_query().redact_query_params(["email"]);
    let query = format!("a={MARK}query");
    assert_eq!(log.query_for_log(&query).to_string(), "");
}

/// With `omit_query`, the referer still prints a dangling `?`: `Url` writes the `?` before
/// asking `QueryShown`, which writes nothing. The docs say the referer's query is left out.
/// Observed: `https://app.example/p?`. Expected: `https://app.example/p`.
#[tokio::test]
async fn omit_query_leaves_a_dangling_question_mark_in_the_referer() {
    let req = Request::get("/r2/omit-referer")
        .header("referer", "https://app.example/p?x=1")
        .body(())
        .unwrap();
    let layer = SharedHeadersLayer::new().access_log(AccessLog::new().omit_query());
    let line = line_of(layer, req, ok()).await;
    assert_eq!(
        line.get("http.request.header.referer").map(String::as_str),
        Some("https://app.example/p")
    );
}

/// `server.address` drops a `host` header's userinfo ("userinfo (never logged)", in
/// `split_authority`), but the same header in a header list prints it: `host` is not
/// treated as an authority there. Hyper accepts `Host: user:pass@h.example`.
/// Observed: `shared_headers.request_headers = "host: ops:R2-secret-...@h.example"` beside
/// `server.address = "h.example"`.
#[tokio::test]
async fn host_header_userinfo_printed_in_header_list() {
    let req = Request::get("/r2/host-userinfo")
        .header("host", format!("ops:{MARK}host@h.example"))
        .body(())
        .unwrap();
    let layer = SharedHeadersLayer::new().access_log(
        AccessLog::new().request_headers(HeaderSelection::only([HeaderName::from_static("host")])),
    );
    let line = line_of(layer, req, ok()).await;
    assert_no_leak(&line);
}
