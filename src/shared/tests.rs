//! Which publication each kind of handle gets: request-scoped handles (the server layer's
//! request and response, an exchange's annotations) are `Locked`, whose store and drop cost the
//! same whatever the number of threads; a plain handle is `LockFree`. The `threads` bench's
//! `layer_timeout`, `layer_timeout_write` and `layer_timeout_annotate` rows stay flat in threads
//! because of the first half.

use crate::sync::Strategy;
use crate::{Exchange, SharedHeaders};

fn strategy(headers: &SharedHeaders) -> Strategy {
    headers.shared().current.strategy()
}

/// What a handle made with the default publication actually uses (every cell is `Locked` with
/// the `rwlock-backend` feature).
fn default_strategy() -> Strategy {
    if cfg!(feature = "rwlock-backend") {
        Strategy::Locked
    } else {
        Strategy::LockFree
    }
}

#[test]
fn annotations_are_locked_whatever_the_handles_given() {
    // Handles made by the user keep the publication they were made with.
    let exchange = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    assert_eq!(strategy(exchange.request()), default_strategy());
    assert_eq!(strategy(&SharedHeaders::new()), default_strategy());
    // The annotations are made by the exchange, request-scoped: `Locked`, at the first call
    // and at every later one.
    assert_eq!(strategy(&exchange.annotations()), Strategy::Locked);
    assert_eq!(strategy(&exchange.annotations()), Strategy::Locked);
    // Also when first made after the commit (sealed and empty).
    let late = Exchange::new(SharedHeaders::new(), SharedHeaders::new());
    let _committed = late.commit(crate::Outcome::Answered).unwrap();
    assert_eq!(strategy(&late.annotations()), Strategy::Locked);
}

/// The three handles a request through the server layer sees, from its handler.
#[cfg(feature = "server")]
#[test]
fn the_layers_three_handles_are_locked() {
    use std::convert::Infallible;
    use std::sync::{Arc, Mutex};

    use http::{Request, Response};
    use tower::{Layer, ServiceExt, service_fn};

    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    let service = crate::server::SharedHeadersLayer::new()
        .timeout(std::time::Duration::from_secs(30))
        .layer(service_fn(move |req: Request<()>| {
            let record = Arc::clone(&record);
            async move {
                let exchange = req.extensions().get::<Exchange>().unwrap();
                record.lock().unwrap().extend([
                    strategy(exchange.request()),
                    strategy(exchange.response()),
                    strategy(&exchange.annotations()),
                ]);
                Ok::<_, Infallible>(Response::new(()))
            }
        }));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    runtime.block_on(service.oneshot(Request::new(()))).unwrap();
    assert_eq!(*seen.lock().unwrap(), [Strategy::Locked; 3]);
}
