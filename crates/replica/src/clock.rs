//! The system's wall clock: the one place a replica reads it. What it reads is only
//! written — Argo CD's `HeartbeatTime`, status timestamps, the audit log's `ts_ms` — and
//! never compared with another machine's clock for a decision (G6).

use std::time::Duration;

use fleetshard_coord::argocd::WallTime;
use fleetshard_gitops::reconciler::Clock;

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl SystemClock {
    /// Time since the Unix epoch now (zero if the clock is set before 1970).
    #[allow(clippy::disallowed_types)] // Written only, never compared (module docs).
    pub fn since_epoch() -> Duration {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
    }

    /// Now, as Argo CD writes times.
    pub fn now() -> WallTime {
        WallTime::from_unix_duration(Self::since_epoch())
    }
}

impl Clock for SystemClock {
    fn now_rfc3339(&self) -> String {
        Self::now().to_rfc3339()
    }

    fn now_unix_nanos(&self) -> i128 {
        i128::try_from(Self::since_epoch().as_nanos()).unwrap_or(i128::MAX)
    }
}
