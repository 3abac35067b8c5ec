//! The timer that wakes an HTTP/2 connection when its watch has a verdict or a release due, so
//! that an idle connection is judged on time too.
//!
//! It decides whether a timer can be had (a current tokio runtime with timers; without one,
//! the watch acts at the connection's next read or write) and arms, resets and polls it. It
//! relies on tokio's timer only, made once per connection at its first hold.

use std::future::Future;
use std::pin::Pin;
use std::task::Context;

/// The timer that wakes an HTTP/2 connection when its watch has a verdict or a release due,
/// so that an idle connection is judged on time too.
pub(super) enum Wake {
    /// Never needed yet.
    Unarmed,
    /// Made at the first hold (one allocation per connection), reset since.
    Armed(Pin<Box<tokio::time::Sleep>>),
    /// No tokio runtime with timers: the watch acts at the connection's next read or write.
    Off,
}

/// Arms `wake` for `at` and polls it: whether `at` has come.
#[cold]
pub(super) fn poll_wake(wake: &mut Wake, at: tokio::time::Instant, cx: &mut Context<'_>) -> bool {
    if matches!(wake, Wake::Unarmed) {
        if tokio::runtime::Handle::try_current().is_err() {
            *wake = Wake::Off;
            return false;
        }
        *wake = match std::panic::catch_unwind(|| Box::pin(tokio::time::sleep_until(at))) {
            Ok(sleep) => Wake::Armed(sleep),
            Err(_) => Wake::Off,
        };
    }
    let Wake::Armed(sleep) = wake else {
        return false;
    };
    // A runtime built without `enable_time` panics here: the timer is off then.
    let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if sleep.deadline() != at {
            sleep.as_mut().reset(at);
        }
        sleep.as_mut().poll(cx).is_ready()
    }));
    polled.unwrap_or_else(|_| {
        *wake = Wake::Off;
        false
    })
}
