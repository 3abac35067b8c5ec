//! The default-headers layer: precedence, sensitivity, versions, and the typed overflow error.
#![cfg(feature = "client")]

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use http::header::{ACCEPT, AUTHORIZATION, USER_AGENT};
use http::{HeaderMap, HeaderValue, Request, Response};
use shared_headers::client::{DefaultHeadersError, DefaultHeadersLayer, DefaultsVersion, Merge};
use shared_headers::{Error, SharedHeaders};
use tower::{ServiceBuilder, ServiceExt};

/// An inner service that answers with the headers and extensions-recorded version it was given.
async fn echo(
    req: Request<()>,
) -> Result<Response<(HeaderMap, Option<DefaultsVersion>)>, Infallible> {
    let version = req.extensions().get::<DefaultsVersion>().copied();
    Ok(Response::new((req.headers().clone(), version)))
}

fn defaults() -> SharedHeaders {
    let defaults = SharedHeaders::new();
    defaults
        .update(|m| {
            let mut token = HeaderValue::from_static("Bearer default");
            token.set_sensitive(true);
            m.insert(AUTHORIZATION, token);
            m.insert(USER_AGENT, "sdk/1".parse().unwrap());
            m.append(ACCEPT, "application/json".parse().unwrap());
            m.append(ACCEPT, "text/plain".parse().unwrap());
        })
        .unwrap();
    defaults
}

async fn send(
    layer: DefaultHeadersLayer,
    request: Request<()>,
) -> (HeaderMap, Option<DefaultsVersion>, Option<u64>) {
    let response = ServiceBuilder::new()
        .layer(layer)
        .service_fn(echo)
        .oneshot(request)
        .await
        .unwrap();
    let from_response = DefaultsVersion::of(&response);
    let (headers, from_request) = response.into_body();
    (headers, from_request, from_response)
}

fn request_with(headers: &[(&'static str, &'static str)]) -> Request<()> {
    let mut request = Request::new(());
    for (name, value) in headers {
        request
            .headers_mut()
            .append(*name, HeaderValue::from_static(value));
    }
    request
}

#[tokio::test]
async fn an_empty_request_gets_every_default_with_its_version() {
    let defaults = defaults();
    let (headers, from_request, from_response) =
        send(DefaultHeadersLayer::new(defaults.clone()), Request::new(())).await;
    assert_eq!(headers, *defaults.snapshot());
    assert_eq!(from_request, Some(DefaultsVersion(1)));
    assert_eq!(from_response, Some(1));
    assert!(
        headers[AUTHORIZATION].is_sensitive(),
        "sensitive defaults stay sensitive"
    );
}

#[tokio::test]
async fn the_request_wins_by_default() {
    let request = request_with(&[("authorization", "Bearer mine"), ("x-own", "1")]);
    let (headers, _, _) = send(DefaultHeadersLayer::new(defaults()), request).await;
    assert_eq!(
        headers.get_all(AUTHORIZATION).iter().collect::<Vec<_>>(),
        ["Bearer mine"]
    );
    assert!(!headers[AUTHORIZATION].is_sensitive());
    assert_eq!(headers["x-own"], "1");
    // Names the request lacks come from the defaults, with all their values.
    assert_eq!(headers[USER_AGENT], "sdk/1");
    assert_eq!(
        headers.get_all(ACCEPT).iter().collect::<Vec<_>>(),
        ["application/json", "text/plain"]
    );
}

#[tokio::test]
async fn per_name_policies_override_and_append() {
    let layer = DefaultHeadersLayer::new(defaults())
        .merge(AUTHORIZATION, Merge::Override)
        .merge(ACCEPT, Merge::Append);
    let request = request_with(&[
        ("authorization", "Bearer mine"),
        ("accept", "image/png"),
        ("user-agent", "mine/2"),
    ]);
    let (headers, _, _) = send(layer, request).await;
    assert_eq!(
        headers.get_all(AUTHORIZATION).iter().collect::<Vec<_>>(),
        ["Bearer default"]
    );
    assert!(
        headers[AUTHORIZATION].is_sensitive(),
        "an overriding default stays sensitive"
    );
    assert_eq!(
        headers.get_all(ACCEPT).iter().collect::<Vec<_>>(),
        ["image/png", "application/json", "text/plain"]
    );
    assert_eq!(
        headers.get_all(USER_AGENT).iter().collect::<Vec<_>>(),
        ["mine/2"]
    );
}

/// A policy named by a `&'static str` applies to that header exactly like one named by a
/// `HeaderName` constant; the last policy given for a name wins, whichever way it was named.
#[tokio::test]
async fn policies_named_by_str_apply_like_header_name_constants() {
    let layer = DefaultHeadersLayer::new(defaults())
        .merge(AUTHORIZATION, Merge::KeepRequest)
        .merge("authorization", Merge::Override)
        .merge("accept", Merge::Append);
    assert_eq!(layer.merge_for(AUTHORIZATION), Merge::Override);
    assert_eq!(layer.merge_for("Accept"), Merge::Append);
    let request = request_with(&[("authorization", "Bearer mine"), ("accept", "image/png")]);
    let (headers, _, _) = send(layer, request).await;
    assert_eq!(
        headers.get_all(AUTHORIZATION).iter().collect::<Vec<_>>(),
        ["Bearer default"]
    );
    assert_eq!(
        headers.get_all(ACCEPT).iter().collect::<Vec<_>>(),
        ["image/png", "application/json", "text/plain"]
    );
}

#[tokio::test]
async fn the_default_policy_can_be_changed() {
    let layer = DefaultHeadersLayer::new(defaults())
        .default_merge(Merge::Override)
        .merge(USER_AGENT, Merge::KeepRequest);
    let request = request_with(&[("authorization", "Bearer mine"), ("user-agent", "mine/2")]);
    let (headers, _, _) = send(layer, request).await;
    assert_eq!(headers[AUTHORIZATION], "Bearer default");
    assert_eq!(headers[USER_AGENT], "mine/2");
}

#[tokio::test]
async fn each_request_uses_the_version_current_when_it_is_called() {
    let defaults = defaults();
    let layer = DefaultHeadersLayer::new(defaults.clone());
    let (_, before, _) = send(layer.clone(), Request::new(())).await;
    defaults
        .insert(AUTHORIZATION, "Bearer rotated".parse().unwrap())
        .unwrap();
    let (headers, after, after_response) = send(layer, Request::new(())).await;
    assert_eq!(before, Some(DefaultsVersion(1)));
    assert_eq!(after, Some(DefaultsVersion(2)));
    assert_eq!(after_response, Some(2));
    assert_eq!(headers[AUTHORIZATION], "Bearer rotated");
}

/// One service, many requests: each sees the version current when it is called, through the
/// service's cached reader too (a rotation between two calls of the same service, a clone made
/// before a rotation, a rotation from another thread).
#[tokio::test]
async fn one_service_sees_every_rotation_between_its_requests() {
    async fn call<S>(service: &mut S) -> (HeaderValue, Option<DefaultsVersion>)
    where
        S: tower::Service<
                Request<()>,
                Response = Response<(HeaderMap, Option<DefaultsVersion>)>,
                Error: std::fmt::Debug,
            >,
    {
        let response = service
            .ready()
            .await
            .unwrap()
            .call(Request::new(()))
            .await
            .unwrap();
        let (headers, version) = response.into_body();
        (headers[AUTHORIZATION].clone(), version)
    }
    let defaults = defaults();
    let mut service = ServiceBuilder::new()
        .layer(DefaultHeadersLayer::new(defaults.clone()))
        .service_fn(echo);
    assert_eq!(
        call(&mut service).await,
        ("Bearer default".parse().unwrap(), Some(DefaultsVersion(1)))
    );
    let mut clone = service.clone();
    defaults
        .insert(AUTHORIZATION, "Bearer rotated".parse().unwrap())
        .unwrap();
    let rotated = ("Bearer rotated".parse().unwrap(), Some(DefaultsVersion(2)));
    assert_eq!(call(&mut service).await, rotated);
    assert_eq!(call(&mut clone).await, rotated);
    let writer = defaults.clone();
    std::thread::spawn(move || {
        writer
            .insert(AUTHORIZATION, "Bearer third".parse().unwrap())
            .unwrap()
    })
    .join()
    .unwrap();
    let third = ("Bearer third".parse().unwrap(), Some(DefaultsVersion(3)));
    assert_eq!(call(&mut service).await, third);
    assert_eq!(call(&mut clone).await, third);
    assert_eq!(call(&mut service).await, third); // nothing changed: the cached version
}

#[tokio::test]
async fn a_request_that_would_overflow_gets_a_typed_error_and_is_not_sent() {
    // Fill a request's map to the brim.
    let mut request = Request::new(());
    for i in 0.. {
        let name: http::HeaderName = format!("x-{i}").parse().unwrap();
        if request
            .headers_mut()
            .try_insert(name, HeaderValue::from_static("v"))
            .is_err()
        {
            break;
        }
    }
    let defaults = SharedHeaders::new();
    defaults.insert("x-default", "d".parse().unwrap()).unwrap();

    let called = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&called);
    let service = ServiceBuilder::new()
        .layer(DefaultHeadersLayer::new(defaults))
        .service_fn(move |_req: Request<()>| {
            seen.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, Infallible>(Response::new(())) }
        });
    let result = service.oneshot(request).await;
    assert!(matches!(
        result,
        Err(DefaultHeadersError::Defaults(Error::MaxSizeReached))
    ));
    assert_eq!(
        called.load(Ordering::SeqCst),
        0,
        "the inner service must not be called"
    );
}

#[tokio::test]
async fn inner_errors_pass_through_typed() {
    let service = ServiceBuilder::new()
        .layer(DefaultHeadersLayer::new(SharedHeaders::new()))
        .service_fn(|_req: Request<()>| async {
            Err::<Response<()>, _>(std::io::Error::other("boom"))
        });
    match service.oneshot(Request::new(())).await {
        Err(DefaultHeadersError::Service(e)) => assert_eq!(e.to_string(), "boom"),
        other => panic!("expected the inner error, got {other:?}"),
    }
}
