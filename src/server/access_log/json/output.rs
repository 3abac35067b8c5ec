//! The writing thread: takes the lines in batches and writes them whole.

use std::io;

use super::*;

/// The writing thread: once lines came, lets more come for [`LINGER`] (less when the batch
/// passes [`WAKE_AT`], a flush waits or the layer is dropped), takes the buffer whole (a spare
/// one in its place), writes it and flushes; until the layer is dropped and nothing is left.
pub(super) fn write_lines<W: io::Write>(shared: &Shared, mut output: W) {
    let mut spare = Vec::with_capacity(shared.capacity.min(KEPT_BATCH));
    // A failed write left a line without its end.
    let mut cut = false;
    loop {
        let mut state = shared.lock();
        let mut until = Instant::now() + LINGER;
        loop {
            let now = Instant::now();
            if state.buffer.is_empty() {
                if state.closed {
                    drop(state);
                    let _ =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| output.flush()));
                    return;
                }
                state.idle = true;
                state = match shared.lines.wait(state) {
                    Ok(state) => state,
                    Err(poisoned) => poisoned.into_inner(),
                };
                state.idle = false;
                until = Instant::now() + LINGER;
                continue;
            }
            if state.closed || state.flushing > 0 || state.buffer.len() >= WAKE_AT || now >= until {
                break;
            }
            state = match shared.lines.wait_timeout(state, until - now) {
                Ok((state, _)) => state,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        std::mem::swap(&mut state.buffer, &mut spare);
        let lines = std::mem::take(&mut state.pending);
        drop(state);
        // The output is the user's: a panic in it loses these lines, not the thread.
        let mut at = 0;
        let written = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if cut {
                // The last batch failed inside a line: end it, so that no line is glued to it.
                output.write_all(b"\n")?;
                cut = false;
            }
            write_from(&mut output, &spare, &mut at)?;
            output.flush()
        }));
        let mut failed = None;
        if !matches!(written, Ok(Ok(()))) {
            // The lines written whole before the failure are not lost.
            let whole = (spare[..at].iter().filter(|&&b| b == b'\n').count() as u64).min(lines);
            shared.dropped.fetch_add(lines - whole, Ordering::Relaxed);
            cut = cut || (at > 0 && spare[at - 1] != b'\n');
            if whole < lines {
                failed = Some(whole);
            }
        }
        spare.clear();
        if spare.capacity() > shared.capacity.max(KEPT_LINE) {
            spare = Vec::new();
        }
        let mut state = shared.lock();
        if let Some(whole) = failed {
            let (first, last) = (state.done + whole, state.done + lines);
            state.failed = Some(match state.failed {
                Some((earlier, _)) => (earlier, last),
                None => (first, last),
            });
        }
        state.done += lines;
        let waiting = state.flushing > 0;
        drop(state);
        if waiting {
            shared.written.notify_all();
        }
    }
}

/// Writes `bytes[*at..]` to `output`, `*at` the bytes written so far (as `write_all`, which
/// does not tell how far it got when it fails).
pub(super) fn write_from<W: io::Write>(
    output: &mut W,
    bytes: &[u8],
    at: &mut usize,
) -> io::Result<()> {
    while *at < bytes.len() {
        match output.write(&bytes[*at..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => *at += n,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}
