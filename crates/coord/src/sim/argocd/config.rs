//! The knobs of one simulated run of heartbeat mode.

use std::time::Duration;

use super::super::world::Latency;

/// Knobs of one simulated run.
#[derive(Debug, Clone)]
pub(crate) struct SimConfig {
    pub(crate) nodes: usize,
    /// The replica count at the start.
    pub(crate) replicas: u32,
    pub(crate) clusters: usize,
    pub(crate) run_ms: u64,
    /// Windows that begin earlier are not measured (the first starts wait S).
    pub(crate) warmup_ms: u64,
    /// H; S is 3H.
    pub(crate) heartbeat: Duration,
    /// Every clock's rate is within this fraction of real time.
    pub(crate) drift: f64,
    /// The rates of the first replicas, drawn otherwise (to place clocks at the extremes).
    pub(crate) rates: Vec<f64>,
    pub(crate) faults: bool,
    /// The chance that a store call (read, write or watch notification) fails.
    pub(crate) store_errors: f64,
    pub(crate) latency: Latency,
    /// Stops take up to 1.5 s (work in flight draining) while the holder is valid.
    pub(crate) slow_stops: bool,
    /// The replica count changes at these times (ms); each replica learns it within 1 s.
    pub(crate) scale: Vec<(u64, u32)>,
    /// Some failures are a store outage for every replica at once.
    pub(crate) outages: bool,
    /// Half the failures come with one or two more on other replicas at once.
    pub(crate) concurrent: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        let h = Duration::from_secs(10);
        SimConfig {
            nodes: 4,
            replicas: 3,
            clusters: 12,
            run_ms: 400_000,
            warmup_ms: 50_000,
            heartbeat: h,
            drift: 0.01,
            rates: Vec::new(),
            faults: true,
            store_errors: 0.02,
            latency: Latency {
                normal: (1, 30),
                spike_chance: 0.02,
                spike: (200, 1_500),
            },
            slow_stops: std::env::var("FLEETSHARD_SIM_SLOW_STOPS").as_deref() != Ok("0"),
            scale: Vec::new(),
            outages: false,
            concurrent: false,
        }
    }
}

impl SimConfig {
    /// S.
    pub(crate) fn stale_after(&self) -> Duration {
        self.heartbeat * 3
    }

    /// The largest clock-rate error of any replica.
    pub(crate) fn max_drift(&self) -> f64 {
        self.rates
            .iter()
            .map(|r| (r - 1.0).abs())
            .fold(self.drift, f64::max)
    }
}
