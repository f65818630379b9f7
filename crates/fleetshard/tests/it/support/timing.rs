//! The timings `fleetshard run` uses by default, read from the code that sets them (a test
//! that restated them went stale when the renew period changed from 1 s to 1.25 s), and
//! Argo CD mode's, derived from a test heartbeat as the code derives them.

use std::time::Duration;

use fleetshard_coord::argocd::{ArgoConfig, STALE_AFTER_HEARTBEATS};
use fleetshard_coord::lease::LeaseTiming;
use fleetshard_coord::runner::RunnerTiming;

fn ms(d: Duration) -> u64 {
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

/// Argo CD mode at `--heartbeat-ms heartbeat_ms`: how long an entry must be seen unchanged
/// before another replica may take it (3 heartbeats).
pub fn argocd_stale_after_ms(heartbeat_ms: u64) -> u64 {
    ms(Duration::from_millis(heartbeat_ms) * STALE_AFTER_HEARTBEATS)
}

/// Argo CD mode at `--heartbeat-ms heartbeat_ms`: the least a successor waits after a
/// release when it does not take the released entry over at once — the entry seen
/// unchanged for the stale-after period, or its clusters held back for the start delay
/// after its claim.
pub fn argocd_lease_wait_ms(heartbeat_ms: u64) -> u64 {
    let config = ArgoConfig {
        heartbeat: Duration::from_millis(heartbeat_ms),
        stale_after: Duration::from_millis(argocd_stale_after_ms(heartbeat_ms)),
        ..ArgoConfig::new("test")
    };
    ms(config.stale_after.min(config.start_delay()))
}
