//! Secrets stay out of logs: `Debug` of the handle and of snapshots, and `redacted()`, never
//! print the value of a secret header, whichever way it became secret; they do show that the
//! header is there, but not how long its value is. Every value of a secret name is flagged
//! `set_sensitive(true)` on every write path and every way out, so that HPACK does not index it.

use http::header::{AUTHORIZATION, COOKIE, HOST, PROXY_AUTHORIZATION, SET_COOKIE};
use http::{HeaderMap, HeaderName, HeaderValue};
use shared_headers::{Redacted, SharedHeaders};

const SECRET: &str = "hunter2-secret-value";

/// Every printed form of the handle's current version.
fn printed(h: &SharedHeaders) -> [String; 4] {
    let snap = h.snapshot();
    [
        format!("{h:?}"),
        format!("{snap:?}"),
        snap.redacted().to_string(),
        format!("{:?}", snap.redacted()),
    ]
}

fn assert_hidden(h: &SharedHeaders, name: &str) {
    for out in printed(h) {
        assert!(!out.contains(SECRET), "secret printed: {out}");
        assert!(out.contains(name), "name missing: {out}");
        assert!(out.contains("[redacted]"), "marker missing: {out}");
        // Not even the length is disclosed.
        assert!(
            !out.contains(&SECRET.len().to_string()),
            "length printed: {out}"
        );
    }
}

#[test]
fn default_names_are_redacted() {
    for name in [AUTHORIZATION, PROXY_AUTHORIZATION, COOKIE, SET_COOKIE] {
        let h = SharedHeaders::new();
        h.insert(&name, SECRET.parse().unwrap()).unwrap();
        h.insert(HOST, "example.com".parse().unwrap()).unwrap();
        assert_hidden(&h, name.as_str());
        // Ordinary headers are still printed in full.
        for out in printed(&h) {
            assert!(out.contains("example.com"), "{out}");
        }
    }
}

#[test]
fn every_value_of_a_repeated_secret_is_redacted() {
    let h = SharedHeaders::new();
    h.append(SET_COOKIE, SECRET.parse().unwrap()).unwrap();
    h.append(SET_COOKIE, SECRET.parse().unwrap()).unwrap();
    assert_hidden(&h, "set-cookie");
    assert_eq!(
        h.snapshot()
            .redacted()
            .to_string()
            .matches("[redacted]")
            .count(),
        2
    );
}

#[test]
fn flagged_values_are_redacted_under_any_name() {
    let h = SharedHeaders::new();
    let mut v = HeaderValue::from_static(SECRET);
    v.set_sensitive(true);
    h.insert("x-anything", v).unwrap();
    assert_hidden(&h, "x-anything");
}

#[test]
fn configured_names_are_redacted_and_known_to_every_snapshot() {
    let h = SharedHeaders::builder()
        .sensitive([http::HeaderName::from_static("x-tenant-key")])
        .sensitive([HeaderName::from_static("x-session")])
        .build();
    h.insert("x-tenant-key", SECRET.parse().unwrap()).unwrap();
    assert_hidden(&h, "x-tenant-key");
    // Every write path keeps the policy with the versions it publishes.
    let mut map = HeaderMap::new();
    map.insert("x-session", SECRET.parse().unwrap());
    h.replace(map).unwrap();
    assert_hidden(&h, "x-session");
    let mut draft = h.draft();
    draft.insert("x-tenant-key", SECRET.parse().unwrap());
    h.commit(draft).unwrap();
    assert_hidden(&h, "x-tenant-key");
    let (_, sealed) = h.seal_with(|_| ()).unwrap();
    assert!(!format!("{sealed:?}").contains(SECRET));
    // Another handle without the list prints it: the list is per handle.
    let plain = SharedHeaders::new();
    plain
        .insert("x-tenant-key", SECRET.parse().unwrap())
        .unwrap();
    assert!(format!("{plain:?}").contains(SECRET));
    // The always-secret names need no list.
    let plain = SharedHeaders::new();
    plain.insert("x-api-key", SECRET.parse().unwrap()).unwrap();
    assert_hidden(&plain, "x-api-key");
}

#[test]
fn mark_sensitive_flags_values_on_every_write_path() {
    let h = SharedHeaders::builder()
        .sensitive([http::HeaderName::from_static("x-api-key")])
        .build();
    h.insert(AUTHORIZATION, SECRET.parse().unwrap()).unwrap();
    h.append(COOKIE, SECRET.parse().unwrap()).unwrap();
    h.update(|m| m.append("x-api-key", SECRET.parse().unwrap()))
        .unwrap();
    assert!(h.get(AUTHORIZATION).unwrap().is_sensitive());
    assert!(h.get(COOKIE).unwrap().is_sensitive());
    assert!(h.get("x-api-key").unwrap().is_sensitive());

    let mut map = HeaderMap::new();
    map.append(SET_COOKIE, "a=1".parse().unwrap());
    map.append(SET_COOKIE, "b=2".parse().unwrap());
    map.insert(HOST, "example.com".parse().unwrap());
    let snap = h.replace(map.clone()).unwrap();
    assert!(
        snap.get_all(SET_COOKIE)
            .iter()
            .all(HeaderValue::is_sensitive)
    );
    assert!(
        !snap[HOST].is_sensitive(),
        "ordinary headers stay indexable"
    );

    let mut draft = h.draft();
    draft.insert(PROXY_AUTHORIZATION, SECRET.parse().unwrap());
    let snap = h.commit(draft).unwrap();
    assert!(snap[PROXY_AUTHORIZATION].is_sensitive());

    // build_from marks the initial map too.
    let h = SharedHeaders::builder().build_from(map).unwrap();
    assert!(h.get_all(SET_COOKIE).iter().all(HeaderValue::is_sensitive));
}

#[test]
fn drafts_are_redacted_too() {
    let h = SharedHeaders::builder()
        .sensitive([http::HeaderName::from_static("x-api-key")])
        .build();
    let mut draft = h.draft();
    draft.insert("x-api-key", SECRET.parse().unwrap());
    draft.insert(AUTHORIZATION, SECRET.parse().unwrap());
    let out = format!("{draft:?}");
    assert!(!out.contains(SECRET), "{out}");
    assert!(
        out.contains("x-api-key") && out.contains("authorization"),
        "{out}"
    );
}

#[test]
fn redacted_formats() {
    let mut map = HeaderMap::new();
    map.insert(HOST, "example.com".parse().unwrap());
    map.insert(AUTHORIZATION, "Bearer abc".parse().unwrap());
    map.insert("x-bin", HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap());
    map.insert("x-empty", HeaderValue::from_static(""));
    assert_eq!(
        Redacted::new(&map).to_string(),
        r#"host: example.com, authorization: [redacted], x-bin: "caf\xc3\xa9", x-empty: "#
    );
    assert_eq!(
        format!("{:?}", Redacted::new(&map)),
        r#"{"host": "example.com", "authorization": [redacted], "x-bin": "caf\xc3\xa9", "x-empty": ""}"#
    );
    assert_eq!(Redacted::new(&HeaderMap::new()).to_string(), "");
}

#[test]
fn debug_shows_version_and_seal_state() {
    let h = SharedHeaders::new();
    h.insert(COOKIE, SECRET.parse().unwrap()).unwrap();
    h.seal().unwrap();
    let out = format!("{h:?}");
    assert!(
        out.starts_with("SharedHeaders { version: 2, sealed: true, headers: {"),
        "{out}"
    );
    let out = format!("{:?}", h.snapshot());
    assert!(
        out.starts_with("Snapshot { version: 2, sealed: true, headers: {"),
        "{out}"
    );
}

#[test]
fn a_value_cannot_forge_another_entry_in_a_log_line() {
    let h = SharedHeaders::new();
    h.insert(
        "x-note",
        HeaderValue::from_static("a, authorization: Bearer forged"),
    )
    .unwrap();
    h.insert("accept", HeaderValue::from_static("text/html, */*"))
        .unwrap();
    h.insert(HOST, HeaderValue::from_static("example.com"))
        .unwrap();
    let line = h.snapshot().redacted().to_string();
    assert_eq!(
        line,
        r#"x-note: "a, authorization: Bearer forged", accept: "text/html, */*", host: example.com"#
    );
    // Splitting the line at the separator outside quotes finds exactly the three real entries.
    let mut entries = 0;
    let mut quoted = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted && line[i..].starts_with(", ") => entries += 1,
            _ => {}
        }
    }
    assert_eq!(entries + 1, 3, "{line}");
}

// ---------------------------------------------------------------------------------------------
// Secrets are flagged on every way out, on every handle, with or without a policy
// ---------------------------------------------------------------------------------------------

/// Whether every value of `name` in `map` is flagged, and there is at least one.
fn all_flagged(map: &HeaderMap, name: &str) -> bool {
    let values = map.get_all(name);
    values.iter().count() > 0 && values.iter().all(HeaderValue::is_sensitive)
}

#[test]
fn secrets_are_flagged_through_get_and_snapshots_on_a_plain_handle() {
    let h = SharedHeaders::new();
    h.insert(AUTHORIZATION, SECRET.parse().unwrap()).unwrap();
    h.append(SET_COOKIE, "a=1".parse().unwrap()).unwrap();
    h.append(SET_COOKIE, "b=2".parse().unwrap()).unwrap();
    h.insert(HOST, "example.com".parse().unwrap()).unwrap();
    assert!(h.get(AUTHORIZATION).unwrap().is_sensitive(), "get");
    assert!(
        h.get_all(SET_COOKIE).iter().all(HeaderValue::is_sensitive),
        "get_all"
    );
    let snap = h.snapshot();
    assert!(all_flagged(&snap, "authorization"), "snapshot map");
    assert!(
        all_flagged(&snap, "set-cookie"),
        "snapshot map, every value"
    );
    assert!(!snap[HOST].is_sensitive(), "a plain header is not flagged");
    assert!(!h.get(HOST).unwrap().is_sensitive());
    h.read(|m| assert!(all_flagged(m, "authorization"), "read"));
    // The sealed snapshot (what the server layer merges) too.
    let sealed = h.seal().unwrap();
    assert!(all_flagged(&sealed, "authorization") && !sealed[HOST].is_sensitive());
}

#[test]
fn the_initial_map_of_a_handle_is_flagged() {
    let mut map = HeaderMap::new();
    map.insert(COOKIE, SECRET.parse().unwrap());
    map.insert("x-api-key", SECRET.parse().unwrap());
    map.insert(HOST, "example.com".parse().unwrap());
    let plain = SharedHeaders::from(map.clone());
    assert!(plain.get(COOKIE).unwrap().is_sensitive());
    assert!(
        !plain.get("x-api-key").unwrap().is_sensitive(),
        "not secret for this handle"
    );
    let built = SharedHeaders::builder()
        .sensitive([http::HeaderName::from_static("x-api-key")])
        .build_from(map)
        .unwrap();
    assert!(built.get(COOKIE).unwrap().is_sensitive());
    assert!(built.get("x-api-key").unwrap().is_sensitive());
    assert!(!built.get(HOST).unwrap().is_sensitive());
}

#[test]
fn builder_sensitive_names_are_flagged_without_mark_sensitive() {
    let h = SharedHeaders::builder()
        .sensitive([http::HeaderName::from_static("x-session")])
        .build();
    h.insert("x-session", SECRET.parse().unwrap()).unwrap();
    h.insert("x-plain", "1".parse().unwrap()).unwrap();
    assert!(h.get("x-session").unwrap().is_sensitive());
    assert!(!h.get("x-plain").unwrap().is_sensitive());
    // The same name on another handle is not secret there.
    let other = SharedHeaders::new();
    other.insert("x-session", "1".parse().unwrap()).unwrap();
    assert!(!other.get("x-session").unwrap().is_sensitive());
}

#[cfg(feature = "server")]
#[test]
fn secrets_merged_into_a_response_by_the_server_layer_are_flagged() {
    use http::{Request, Response};
    use shared_headers::server::SharedHeadersLayer;
    use shared_headers::{Builder, Committed, Exchange};
    use tower::{Layer, ServiceExt};

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let res = rt.block_on(async {
        let service = SharedHeadersLayer::new()
            .response_policy(Builder::new().sensitive([http::HeaderName::from_static("x-session")]))
            .layer(tower::service_fn(|req: Request<()>| async move {
                let exchange = req.extensions().get::<Exchange>().unwrap().clone();
                let response = exchange.response();
                response
                    .insert("x-session", SECRET.parse().unwrap())
                    .unwrap();
                response
                    .append(SET_COOKIE, "id=1".parse().unwrap())
                    .unwrap();
                response
                    .append(SET_COOKIE, "id=2".parse().unwrap())
                    .unwrap();
                response.insert("x-plain", "1".parse().unwrap()).unwrap();
                Ok::<_, std::convert::Infallible>(Response::new(()))
            }));
        service.oneshot(Request::new(())).await.unwrap()
    });
    let headers = res.headers();
    assert!(all_flagged(headers, "x-session"), "{headers:?}");
    assert!(all_flagged(headers, "set-cookie"), "{headers:?}");
    assert!(
        !headers["x-plain"].is_sensitive(),
        "a plain header is not flagged"
    );
    let committed = res.extensions().get::<Committed>().unwrap();
    assert!(all_flagged(committed.response(), "x-session"));
}

#[cfg(feature = "client")]
#[test]
fn secrets_merged_into_a_request_by_the_client_layer_are_flagged() {
    use http::{Request, Response};
    use shared_headers::client::DefaultHeadersLayer;
    use tower::{Layer, ServiceExt};

    let defaults = SharedHeaders::builder()
        .sensitive([http::HeaderName::from_static("x-api-key")])
        .build();
    defaults
        .insert(AUTHORIZATION, SECRET.parse().unwrap())
        .unwrap();
    defaults
        .insert("x-api-key", SECRET.parse().unwrap())
        .unwrap();
    defaults
        .insert("x-client", "demo".parse().unwrap())
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for request_has_headers in [false, true] {
        let service = DefaultHeadersLayer::new(defaults.clone()).layer(tower::service_fn(
            |req: Request<()>| async move {
                Ok::<_, std::convert::Infallible>(Response::new(req.headers().clone()))
            },
        ));
        let mut request = Request::new(());
        if request_has_headers {
            request
                .headers_mut()
                .insert(HOST, "example.com".parse().unwrap());
        }
        let sent = rt.block_on(service.oneshot(request)).unwrap().into_body();
        assert!(all_flagged(&sent, "authorization"), "{sent:?}");
        assert!(all_flagged(&sent, "x-api-key"), "{sent:?}");
        assert!(
            !sent["x-client"].is_sensitive(),
            "a plain header is not flagged"
        );
    }
}

/// `insert` and `append` flag the one value they add instead of rescanning the map, from 4 to
/// 1,023 values; below and above they take the general path, which rescans. Both paths must
/// flag a secret value (a default name, a policy name, a replaced and an appended one) and leave
/// an ordinary one indexable.
#[test]
fn insert_and_append_flag_the_value_they_add_on_both_paths() {
    for filler in [0usize, 10, 1_024, 1_500] {
        let mut map = HeaderMap::new();
        for i in 0..filler {
            map.append(
                http::HeaderName::try_from(format!("x-filler-{i}")).unwrap(),
                HeaderValue::from_static("f"),
            );
        }
        let h = SharedHeaders::builder()
            .sensitive([http::HeaderName::from_static("x-api-key")])
            .build_from(map)
            .unwrap();
        h.insert(AUTHORIZATION, SECRET.parse().unwrap()).unwrap();
        h.insert(AUTHORIZATION, SECRET.parse().unwrap()).unwrap(); // replaces
        h.insert("x-api-key", SECRET.parse().unwrap()).unwrap();
        h.append("x-api-key", SECRET.parse().unwrap()).unwrap(); // a second value
        h.append(COOKIE, SECRET.parse().unwrap()).unwrap();
        h.insert(HOST, "example.com".parse().unwrap()).unwrap();
        h.append("x-plain", "p".parse().unwrap()).unwrap();
        let snap = h.snapshot();
        assert_eq!(snap.len(), filler + 6, "filler {filler}");
        assert!(snap[AUTHORIZATION].is_sensitive(), "filler {filler}");
        assert!(snap.get_all("x-api-key").iter().count() == 2);
        assert!(
            snap.get_all("x-api-key")
                .iter()
                .all(HeaderValue::is_sensitive),
            "filler {filler}"
        );
        assert!(snap[COOKIE].is_sensitive(), "filler {filler}");
        assert!(!snap[HOST].is_sensitive(), "filler {filler}");
        assert!(!snap["x-plain"].is_sensitive(), "filler {filler}");
        assert!(!format!("{snap:?}").contains(SECRET), "filler {filler}");
    }
}

/// The access log's query redaction by the token rule: nested (Rails, PHP, `qs`), encoded,
/// plural, camelCase and `;`-separated names; the user's own names, whole or between brackets;
/// plain parameters untouched; non-ASCII percent-encoded.
#[cfg(feature = "tracing")]
#[test]
fn access_log_query_names_are_redacted_by_their_tokens() {
    use shared_headers::server::access_log::AccessLog;
    let log = AccessLog::new().redact_query_params(["tenant_ref"]);
    for (query, shown) in [
        ("user[password]=p1", "user[password]=[redacted]"),
        ("user%5Btoken%5D=p2", "user%5Btoken%5D=[redacted]"),
        (
            "api_key[]=p3&api_key[]=p4",
            "api_key[]=[redacted]&api_key[]=[redacted]",
        ),
        ("credentials=p5", "credentials=[redacted]"),
        ("authorization=Bearer%20p6", "authorization=[redacted]"),
        ("auth_code=p7", "auth_code=[redacted]"),
        ("a=1;token=p8", "a=1;token=[redacted]"),
        ("private+key=p9", "private+key=[redacted]"),
        ("accessToken=p10", "accessToken=[redacted]"),
        ("filter[Tenant_Ref]=p11", "filter[Tenant_Ref]=[redacted]"),
        (
            "page=2&sort=asc&q=rust&keyboard=us&country_code=fr",
            "page=2&sort=asc&q=rust&keyboard=us&country_code=fr",
        ),
        ("q=caf\u{e9}\u{2028}", "q=caf%C3%A9%E2%80%A8"),
    ] {
        assert_eq!(log.query_for_log(query).to_string(), shown, "{query}");
    }
    assert_eq!(log.omit_query().query_for_log("token=p").to_string(), "");
}
