//! The client room's errors print each message once: every wrapper says only its own words in
//! `Display` and returns the inner error from `source()` ("Display or source, never both"), so
//! a report that walks the chain (anyhow's `{:#}`, `eyre`, `tracing`'s error fields) shows the
//! service's message once, and the service's error can be found in the chain by its type.
#![cfg(feature = "client")]

use std::error::Error as StdError;
use std::io;

use http::{HeaderMap, Request, Response};
use shared_headers::SharedHeaders;
use shared_headers::client::{
    DefaultHeadersError, DefaultHeadersLayer, PropagateError, PropagateLayer, RefreshRetryError,
    RefreshRetryLayer, Refresher,
};
use tower::{ServiceBuilder, ServiceExt};

/// The chain as anyhow's `{:#}` prints it: every message from the top down, joined by ": ".
fn chain(error: &(dyn StdError + 'static)) -> String {
    messages(error).join(": ")
}

/// Each message of the chain, by walking `source()`.
fn messages(error: &(dyn StdError + 'static)) -> Vec<String> {
    let mut messages = Vec::new();
    let mut next = Some(error);
    while let Some(error) = next {
        messages.push(error.to_string());
        next = error.source();
    }
    messages
}

/// The full client stack over a service that fails, as the module docs recommend it.
type Stacked = RefreshRetryError<PropagateError<DefaultHeadersError<io::Error>>, io::Error>;

async fn full_stack_error() -> Stacked {
    let defaults = SharedHeaders::new();
    let refresher = Refresher::<io::Error>::new(defaults.clone());
    let client = ServiceBuilder::new()
        .layer(RefreshRetryLayer::new(refresher, || async {
            Ok(HeaderMap::new())
        }))
        .layer(PropagateLayer::new(
            shared_headers::deadline::BudgetHeader::grpc_timeout(),
        ))
        .layer(DefaultHeadersLayer::new(defaults))
        .service_fn(|_: Request<()>| async {
            Err::<Response<()>, _>(io::Error::other("upstream down"))
        });
    client.oneshot(Request::new(())).await.unwrap_err()
}

#[tokio::test]
async fn the_full_stack_prints_the_service_error_once() {
    let error = full_stack_error().await;
    let printed = chain(&error);
    println!("{printed}");
    assert_eq!(printed.matches("upstream down").count(), 1, "{printed}");
    // Every message of the chain appears once.
    let messages = messages(&error);
    assert_eq!(messages.len(), 4, "{messages:?}");
    for (i, message) in messages.iter().enumerate() {
        assert!(
            messages
                .iter()
                .skip(i + 1)
                .all(|later| !later.contains(message.as_str())),
            "{message:?} printed twice in {printed:?}"
        );
    }
}

#[tokio::test]
async fn the_service_error_is_reachable_by_layer_and_by_type() {
    let error = full_stack_error().await;
    let by_layer = error
        .service_error()
        .and_then(PropagateError::service_error)
        .and_then(DefaultHeadersError::service_error);
    assert_eq!(
        by_layer.map(ToString::to_string).as_deref(),
        Some("upstream down")
    );

    let mut next: Option<&(dyn StdError + 'static)> = Some(&error);
    let mut by_type = None;
    while let Some(e) = next {
        by_type = by_type.or(e.downcast_ref::<io::Error>());
        next = e.source();
    }
    assert_eq!(
        by_type.map(ToString::to_string).as_deref(),
        Some("upstream down")
    );

    let owned = error
        .into_service_error()
        .and_then(PropagateError::into_service_error)
        .and_then(DefaultHeadersError::into_service_error);
    assert_eq!(owned.map(|e| e.kind()), Some(io::ErrorKind::Other));
}

#[tokio::test]
async fn a_failed_refresh_prints_its_cause_once() {
    let defaults = SharedHeaders::new();
    defaults
        .insert("authorization", "Bearer old".parse().unwrap())
        .unwrap();
    let refresher = Refresher::<io::Error>::new(defaults.clone());
    let client = ServiceBuilder::new()
        .layer(RefreshRetryLayer::new(refresher, || async {
            Err(io::Error::other("auth server down"))
        }))
        .layer(DefaultHeadersLayer::new(defaults))
        .service_fn(|_: Request<()>| async {
            let mut refused = Response::new(());
            *refused.status_mut() = http::StatusCode::UNAUTHORIZED;
            Ok::<_, io::Error>(refused)
        });
    let error = client.oneshot(Request::new(())).await.unwrap_err();
    let printed = chain(&error);
    println!("{printed}");
    assert_eq!(
        printed,
        "the credential was refused and the refresh failed: the refresh function failed: \
         auth server down"
    );
}
