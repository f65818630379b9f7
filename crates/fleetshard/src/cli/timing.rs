//! Wall-clock timing for the report's `timings` field.

use fleetshard_plan::Stopwatch;

/// Runs `f` and returns its result with the milliseconds it took.
///
/// This measures the CLI for the operator's benefit (`timings` in `plan` output); no
/// decision depends on it, which is why reading `std::time::Instant` is allowed here and
/// nowhere in the logic crates.
#[allow(clippy::disallowed_types)]
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let start = std::time::Instant::now();
    let out = f();
    (out, start.elapsed().as_secs_f64() * 1000.0)
}

/// A [`Stopwatch`] on the wall clock, through [`timed`], that also moves a progress bar
/// one step per timed operation.
#[derive(Debug)]
pub struct ProgressStopwatch<'a>(pub &'a super::progress::Progress);

impl Stopwatch for ProgressStopwatch<'_> {
    fn time<T>(&mut self, f: impl FnOnce() -> T) -> (T, f64) {
        let out = timed(f);
        self.0.inc();
        out
    }
}
