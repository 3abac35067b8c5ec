//! hyper's `Read` and `Write` for [`HealthIo`]: every operation fails once the health is dead,
//! records the inner connection's errors in it, and parks where a death wakes the task; over
//! HTTP/2 the bytes go through the frame watch.
//!
//! It decides, before each HTTP/2 operation, the verdict (a held stream unanswered while
//! nothing moved marks the connection dead), writes a released `RST_STREAM` before any other
//! byte, and cuts a write where the watch stops (a reset to hold, or a new stream's
//! `HEADERS` the held resets must go before). It relies on [`Watch`] for what the frames
//! mean, on the [`wake`](super::wake) timer for an idle connection, and on
//! [`HealthIo`]'s parts for the rest.

use std::io;
use std::ops::ControlFlow;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use hyper::rt::{Read, ReadBufCursor, Write};

use super::wake::{Wake, poll_wake};
use super::{Died, HealthIo, Mode, Parker, died, pending, record};
use crate::conn::h2watch::{Framer, RST_LEN, SCRATCH, Watch};
use crate::conn::health::ConnHealth;
use crate::conn::status::Cause;
use crate::error::NotWritten;

/// The HTTP/2 verdict before an operation: a held stream unanswered while nothing moved marks
/// the connection dead (see `h2watch`).
#[inline]
fn verdict(watch: &mut Watch, health: &ConnHealth) -> io::Result<()> {
    if !watch.quiet() && watch.dead() {
        health.mark_dead(Cause::HealthCheck);
        let err = died(health.cause().unwrap_or(Cause::HealthCheck));
        if watch.none_live() {
            // Every stream open on the connection is one its caller cancelled: the requests
            // this error fails (those h2 took but the watch never saw written) were not
            // written, and the error says so (`ConnRetryLayer` sends them again).
            return Err(io::Error::new(
                err.kind(),
                NotWritten(Died(Cause::HealthCheck)),
            ));
        }
        return Err(err);
    }
    Ok(())
}

/// Something is held: sets the timer to wake the connection when its verdict or release is
/// due, taking them if due already (hyper's connection task flushes after a pending read and
/// after its writes: a release goes out then).
#[cold]
fn arm(
    watch: &mut Watch,
    wake: &mut Wake,
    health: &ConnHealth,
    cx: &mut Context<'_>,
) -> io::Result<()> {
    let mut rounds = 0;
    while let Some(at) = watch.next_due() {
        if !poll_wake(wake, at, cx) {
            break;
        }
        verdict(watch, health)?;
        rounds += 1;
        if rounds == 3 {
            // The timer came a hair before the clock: look again soon.
            cx.waker().wake_by_ref();
            break;
        }
    }
    Ok(())
}

/// Writes a released `RST_STREAM`, if one is due, before any other byte. Called only when
/// the watch is not quiet.
#[inline(never)]
fn push_due<T: Write + Unpin>(
    inner: &mut T,
    watch: &mut Watch,
    health: &ConnHealth,
    parked: &mut Parker,
    cx: &mut Context<'_>,
) -> Poll<io::Result<()>> {
    while let Some(rest) = watch.due() {
        match Pin::new(&mut *inner).poll_write(cx, rest) {
            Poll::Ready(Ok(0)) => {
                return Poll::Ready(Err(record(health, io::ErrorKind::WriteZero.into())));
            }
            Poll::Ready(Ok(n)) => watch.injected(n),
            Poll::Ready(Err(err)) => return Poll::Ready(Err(record(health, err))),
            Poll::Pending => return pending(parked, health, cx),
        }
    }
    Poll::Ready(Ok(()))
}

/// Where a write stops (a frame to stop at, not first; `None`: it goes whole), and where the
/// outgoing frames stand after it ([`Watch::plan`]).
type Plan = (Option<usize>, Framer);

/// The start of an HTTP/2 write (`poll_write`'s and `poll_write_vectored`'s): the verdict, the
/// released resets written before any other byte, then the watch's plan of `bufs`. `Break`:
/// the write's answer already (a dead connection, a pending or failed release, or the reset
/// the bytes start with held: it counts as written, [`RST_LEN`] bytes); else the plan.
#[inline(always)]
fn plan_write<T: Write + Unpin>(
    inner: &mut T,
    watch: &mut Watch,
    health: &ConnHealth,
    parked: &mut Parker,
    wake: &mut Wake,
    cx: &mut Context<'_>,
    bufs: &[io::IoSlice<'_>],
) -> ControlFlow<Poll<io::Result<usize>>, Plan> {
    if let Err(err) = verdict(watch, health) {
        return ControlFlow::Break(Poll::Ready(Err(err)));
    }
    loop {
        if !watch.quiet() {
            match push_due(inner, watch, health, parked, cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(err)) => return ControlFlow::Break(Poll::Ready(Err(err))),
                Poll::Pending => return ControlFlow::Break(Poll::Pending),
            }
        }
        let (at, after) = watch.plan_vectored(bufs);
        if at != Some(0) {
            return ControlFlow::Continue((at, after));
        }
        let (whole, n) = Watch::head_of(bufs);
        if watch.at_stop(&whole[..n]) {
            let held = arm(watch, wake, health, cx).map(|()| RST_LEN);
            return ControlFlow::Break(Poll::Ready(held));
        }
        // The held resets were released to go first: write them.
    }
}

/// The inner connection's answer to a write: its error recorded in `health`, `Pending`
/// parked where a death wakes the task.
#[inline(always)]
fn wrote(
    polled: Poll<io::Result<usize>>,
    health: &ConnHealth,
    parked: &mut Parker,
    cx: &Context<'_>,
) -> Poll<io::Result<usize>> {
    match polled {
        Poll::Ready(Ok(n)) => Poll::Ready(Ok(n)),
        Poll::Ready(Err(err)) => Poll::Ready(Err(record(health, err))),
        Poll::Pending => pending(parked, health, cx),
    }
}

impl<T: Read + Unpin> Read for HealthIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.health.is_dead() {
            return Poll::Ready(Err(this.died()));
        }
        let Mode::H2(watch) = &mut this.mode else {
            return match Pin::new(&mut this.inner).poll_read(cx, buf) {
                Poll::Ready(Ok(())) => Poll::Ready(Ok(())),
                Poll::Ready(Err(err)) => Poll::Ready(Err(this.record(err))),
                Poll::Pending => this.pending(cx),
            };
        };
        // HTTP/2: read through the scratch to see the frame headers, then hand the bytes on.
        verdict(watch, &this.health)?;
        let n = buf.remaining().min(SCRATCH);
        let mut read = hyper::rt::ReadBuf::new(&mut watch.scratch[..n]);
        match Pin::new(&mut this.inner).poll_read(cx, read.unfilled()) {
            Poll::Ready(Ok(())) => {
                let filled = read.filled().len();
                buf.put_slice(&watch.scratch[..filled]);
                watch.received_scratch(filled);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(err)) => Poll::Ready(Err(record(&this.health, err))),
            Poll::Pending => {
                if !watch.quiet() {
                    arm(watch, &mut this.wake, &this.health, cx)?;
                }
                pending(&mut this.parked, &this.health, cx)
            }
        }
    }
}

impl<T: Write + Unpin> Write for HealthIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.health.is_dead() {
            return Poll::Ready(Err(this.died()));
        }
        let Mode::H2(watch) = &mut this.mode else {
            return match Pin::new(&mut this.inner).poll_write(cx, buf) {
                Poll::Ready(Ok(n)) => {
                    if matches!(this.mode, Mode::Unknown(_)) {
                        this.mode.written(&buf[..n.min(buf.len())]);
                    }
                    Poll::Ready(Ok(n))
                }
                Poll::Ready(Err(err)) => Poll::Ready(Err(this.record(err))),
                Poll::Pending => this.pending(cx),
            };
        };
        let (inner, health) = (&mut this.inner, &this.health);
        let (parked, wake) = (&mut this.parked, &mut this.wake);
        let bufs = &[io::IoSlice::new(buf)];
        let (at, after) = match plan_write(inner, watch, health, parked, wake, cx, bufs) {
            ControlFlow::Continue(plan) => plan,
            ControlFlow::Break(done) => return done,
        };
        let planned = at.map_or(buf, |at| &buf[..at]);
        let polled = Pin::new(inner).poll_write(cx, planned);
        let n = ready!(wrote(polled, health, parked, cx))?;
        watch.sent(planned, n, after);
        Poll::Ready(Ok(n))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.health.is_dead() {
            return Poll::Ready(Err(this.died()));
        }
        let Mode::H2(watch) = &mut this.mode else {
            return match Pin::new(&mut this.inner).poll_write_vectored(cx, bufs) {
                Poll::Ready(Ok(n)) => {
                    let mut left = n;
                    for buf in bufs {
                        if left == 0 {
                            break;
                        }
                        let take = left.min(buf.len());
                        match &mut this.mode {
                            Mode::Off => break,
                            Mode::Unknown(_) => this.mode.written(&buf[..take]),
                            // The preface ended in an earlier buffer: note what follows it.
                            Mode::H2(watch) => watch.sent_first(&buf[..take]),
                        }
                        left -= take;
                    }
                    Poll::Ready(Ok(n))
                }
                Poll::Ready(Err(err)) => Poll::Ready(Err(this.record(err))),
                Poll::Pending => this.pending(cx),
            };
        };
        let (inner, health) = (&mut this.inner, &this.health);
        let (parked, wake) = (&mut this.parked, &mut this.wake);
        let (at, after) = match plan_write(inner, watch, health, parked, wake, cx, bufs) {
            ControlFlow::Continue(plan) => plan,
            ControlFlow::Break(done) => return done,
        };
        let Some(at) = at else {
            let polled = Pin::new(inner).poll_write_vectored(cx, bufs);
            let n = ready!(wrote(polled, health, parked, cx))?;
            watch.sent_vectored(bufs, n, after);
            return Poll::Ready(Ok(n));
        };
        // A frame to stop at, not first: write what comes before it in the first buffer that
        // is not empty.
        let first: &[u8] = bufs.iter().find(|b| !b.is_empty()).map_or(&[], |b| b);
        let part = &first[..at.min(first.len())];
        let polled = Pin::new(inner).poll_write(cx, part);
        let n = ready!(wrote(polled, health, parked, cx))?;
        if at <= first.len() {
            watch.sent(part, n, after);
        } else {
            // The walk went past this buffer: step over what was written.
            watch.step(&part[..n.min(part.len())]);
        }
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.health.is_dead() {
            return Poll::Ready(Err(this.died()));
        }
        if let Mode::H2(watch) = &mut this.mode {
            verdict(watch, &this.health)?;
            if !watch.quiet() {
                ready!(push_due(
                    &mut this.inner,
                    watch,
                    &this.health,
                    &mut this.parked,
                    cx
                ))?;
                // A reset held by the writes this flush ends: wake when it is due.
                arm(watch, &mut this.wake, &this.health, cx)?;
            }
        }
        match Pin::new(&mut this.inner).poll_flush(cx) {
            Poll::Ready(Ok(())) => Poll::Ready(Ok(())),
            Poll::Ready(Err(err)) => Poll::Ready(Err(this.record(err))),
            Poll::Pending => this.pending(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Closing goes through even on a dead connection.
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
