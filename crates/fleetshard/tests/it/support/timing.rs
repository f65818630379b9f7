//! The timings `fleetshard run` uses by default, read from the code that sets them (a test
//! that restated them went stale when the renew period changed from 1 s to 1.25 s).

use fleetshard_coord::lease::LeaseTiming;
use fleetshard_coord::runner::RunnerTiming;

fn ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// How long observers wait after a lease record last changed before taking it over.
pub fn lease_ms() -> u64 {
    ms(LeaseTiming::default().duration)
}

/// How often a holder renews.
pub fn renew_ms() -> u64 {
    ms(LeaseTiming::default().renew_every)
}

/// How long after its last confirmed renew a holder keeps acting.
pub fn deadline_ms() -> u64 {
    ms(LeaseTiming::default().renew_deadline)
}

/// The runner's renew timer.
pub fn tick_ms() -> u64 {
    ms(RunnerTiming::default().tick)
}

/// The earliest a crashed holder's clusters can have a new owner, from the crash: its
/// lease was renewed at most a renew period plus a tick before.
pub fn earliest_takeover_ms() -> u64 {
    lease_ms() - renew_ms() - tick_ms()
}
