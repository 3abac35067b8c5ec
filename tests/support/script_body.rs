//! A response body played from a script (tests/conformance.rs): data frames, pauses, a gate
//! the client opens, a trailers frame, an error. Its size hint is exact only when asked for (a stream
//! whose length is known, as a file's), so the same script is sent chunked or with a
//! `content-length`; and it says it is at its end (`is_end_stream`) after its last frame
//! only when asked for: a stream or channel body knows its end only at its next poll.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::oneshot;

/// One step of a [`Script`].
pub enum Step {
    /// A data frame.
    Data(Bytes),
    /// A pause before the next step.
    Sleep(Duration),
    /// Waits until the other side sends (or drops its sender).
    Gate(oneshot::Receiver<()>),
    /// A trailers frame.
    Trailers(HeaderMap),
    /// The body fails.
    Error,
    /// The body panics with this message.
    Panic(&'static str),
}

/// A body that plays its [`Step`]s in order and ends after the last.
pub struct Script {
    steps: VecDeque<Step>,
    sleeping: Option<Pin<Box<tokio::time::Sleep>>>,
    exact: bool,
    eos: bool,
}

impl Script {
    /// The body of `steps`; with `exact`, its size hint is the exact number of data bytes left;
    /// with `eos`, `is_end_stream` is true once every step was played (else never: the end is
    /// known when a poll gives `None`).
    pub fn new(steps: impl IntoIterator<Item = Step>, exact: bool, eos: bool) -> Self {
        Script {
            steps: steps.into_iter().collect(),
            sleeping: None,
            exact,
            eos,
        }
    }

    /// The data bytes of the script.
    pub fn data_len(steps: &[Step]) -> u64 {
        steps
            .iter()
            .map(|step| match step {
                Step::Data(data) => data.len() as u64,
                _ => 0,
            })
            .sum()
    }

    /// The sum of the script's pauses.
    pub fn pauses(steps: &[Step]) -> Duration {
        steps
            .iter()
            .map(|step| match step {
                Step::Sleep(pause) => *pause,
                _ => Duration::ZERO,
            })
            .sum()
    }
}

impl Body for Script {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = &mut *self;
        loop {
            match this.steps.front_mut() {
                None => return Poll::Ready(None),
                Some(Step::Sleep(pause)) => {
                    let pause = *pause;
                    let sleep = this
                        .sleeping
                        .get_or_insert_with(|| Box::pin(tokio::time::sleep(pause)));
                    std::task::ready!(sleep.as_mut().poll(cx));
                    this.sleeping = None;
                    this.steps.pop_front();
                }
                Some(Step::Gate(gate)) => {
                    // Opened, or its sender gone: go on either way.
                    let _ = std::task::ready!(Pin::new(gate).poll(cx));
                    this.steps.pop_front();
                }
                Some(Step::Data(_)) => {
                    let Some(Step::Data(data)) = this.steps.pop_front() else {
                        unreachable!()
                    };
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Some(Step::Error) => {
                    this.steps.pop_front();
                    return Poll::Ready(Some(Err(std::io::Error::other("the stream failed"))));
                }
                Some(Step::Panic(message)) => {
                    let message = *message;
                    this.steps.pop_front();
                    panic!("{message}");
                }
                Some(Step::Trailers(_)) => {
                    let Some(Step::Trailers(trailers)) = this.steps.pop_front() else {
                        unreachable!()
                    };
                    return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.eos && self.steps.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        if self.exact {
            let left: u64 = self
                .steps
                .iter()
                .map(|step| match step {
                    Step::Data(data) => data.len() as u64,
                    _ => 0,
                })
                .sum();
            SizeHint::with_exact(left)
        } else {
            SizeHint::default()
        }
    }
}
