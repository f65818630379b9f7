//! Smoothing: each owned cluster's cumulative usage, sampled at times passed in, turned
//! into rates and averaged exponentially (time constant `window`: a sample `dt` after the
//! last moves the figure by `1 − e^(−dt/window)` of the way to the new rate). Pure: no
//! clock, no I/O.
//!
//! A cluster met for the first time starts from `seed`, the figure its previous owner
//! published (measured time carried on), else from its first rate. Its counters are this
//! replica's since it acquired the cluster: CPU time that went backwards (the cluster was
//! stopped and taken again) re-bases without a rate.

use std::collections::BTreeMap;
use std::time::Duration;

use fleetshard_controller::ClusterUsage;

use super::record::ClusterCost;

const MIB: f64 = 1024.0 * 1024.0;

/// The smoothing's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeterConfig {
    /// The averaging time constant (5 minutes).
    pub window: Duration,
    /// Millicore-equivalents one MiB of cache costs (0.25: a replica with 1 CPU and
    /// 4 GiB of memory is as full by either).
    pub memory_weight: f64,
    /// How long after a cluster is met its samples only re-base (60 s): its takeover —
    /// lists, cold first refreshes — is a one-off, not what it costs to keep, and
    /// counting it would make a cluster look costlier wherever it just moved to.
    pub settle: Duration,
}

impl Default for MeterConfig {
    fn default() -> Self {
        MeterConfig {
            window: Duration::from_secs(300),
            memory_weight: 0.25,
            settle: Duration::from_secs(60),
        }
    }
}

#[derive(Debug, Clone)]
struct Tracked {
    last: ClusterUsage,
    at: Duration,
    /// Samples before this only re-base ([`MeterConfig::settle`]).
    settled_at: Duration,
    /// The figure; `None` until the first rate (or a seed).
    figure: Option<ClusterCost>,
    measured: Duration,
}

/// The clusters' figures, sample after sample.
#[derive(Debug, Clone, Default)]
pub struct CostMeter {
    config: MeterConfig,
    clusters: BTreeMap<String, Tracked>,
}

impl CostMeter {
    /// A meter with nothing measured yet.
    pub fn new(config: MeterConfig) -> Self {
        CostMeter {
            config,
            clusters: BTreeMap::new(),
        }
    }

    /// Takes a sample at `now` (this process's monotonic time) of every owned cluster's
    /// usage; clusters not in `usage` are forgotten. `seeds` are the published figures a
    /// newly met cluster starts from.
    pub fn sample(
        &mut self,
        now: Duration,
        usage: &BTreeMap<String, ClusterUsage>,
        seeds: &BTreeMap<String, ClusterCost>,
    ) {
        self.clusters.retain(|id, _| usage.contains_key(id));
        for (id, u) in usage {
            let Some(t) = self.clusters.get_mut(id) else {
                let seed = super::record::seed_of(id, seeds);
                self.clusters.insert(
                    id.clone(),
                    Tracked {
                        last: *u,
                        at: now,
                        settled_at: now + self.config.settle,
                        figure: seed,
                        measured: Duration::from_secs(seed.map_or(0, |s| s.measured_seconds)),
                    },
                );
                continue;
            };
            let dt = now.saturating_sub(t.at);
            if dt.is_zero() {
                continue;
            }
            let last = std::mem::replace(&mut t.last, *u);
            t.at = now;
            if now < t.settled_at {
                continue;
            }
            let Some(rate) = rates(&last, u, dt, self.config.memory_weight) else {
                continue;
            };
            t.measured += dt;
            let alpha = 1.0 - (-dt.as_secs_f64() / self.config.window.as_secs_f64()).exp();
            let blend = |old: f64, new: f64| old + alpha * (new - old);
            let figure = match t.figure {
                None => rate,
                Some(old) => {
                    let cpu = blend(old.cpu_millicores, rate.cpu_millicores);
                    let cache = blend(old.cache_mib, rate.cache_mib);
                    ClusterCost {
                        cost: cpu + cache * self.config.memory_weight,
                        cpu_millicores: cpu,
                        cache_mib: cache,
                        cache_objects: rate.cache_objects,
                        events_per_minute: blend(old.events_per_minute, rate.events_per_minute),
                        requests_per_minute: blend(
                            old.requests_per_minute,
                            rate.requests_per_minute,
                        ),
                        syncs_per_hour: blend(old.syncs_per_hour, rate.syncs_per_hour),
                        measured_seconds: 0,
                    }
                }
            };
            t.figure = Some(ClusterCost {
                measured_seconds: t.measured.as_secs(),
                ..figure
            });
        }
    }

    /// Each owned cluster's figure so far (clusters without one yet are left out).
    pub fn figures(&self) -> BTreeMap<String, ClusterCost> {
        self.clusters
            .iter()
            .filter_map(|(id, t)| t.figure.map(|f| (id.clone(), f)))
            .collect()
    }
}

/// The rates between two samples `dt` apart; `None` when the CPU time went backwards (the
/// cluster was stopped and taken again: every counter restarted). The other counters may
/// go down on their own (an app deleted or moved away takes its requests and syncs with
/// it; a restarted watch counts again from zero): that sample counts none of them.
fn rates(
    before: &ClusterUsage,
    after: &ClusterUsage,
    dt: Duration,
    memory_weight: f64,
) -> Option<ClusterCost> {
    let secs = dt.as_secs_f64();
    let delta = |a: u64, b: u64| b.saturating_sub(a) as f64 / secs;
    let cpu = after.reconcile_cpu.checked_sub(before.reconcile_cpu)?;
    let cpu_millicores = cpu.as_secs_f64() * 1000.0 / secs;
    let cache_mib = after.cache_bytes as f64 / MIB;
    Some(ClusterCost {
        cost: cpu_millicores + cache_mib * memory_weight,
        cpu_millicores,
        cache_mib,
        cache_objects: after.cache_objects,
        events_per_minute: delta(before.watch_events, after.watch_events) * 60.0,
        requests_per_minute: delta(before.api_requests, after.api_requests) * 60.0,
        syncs_per_hour: delta(before.sync_operations, after.sync_operations) * 3600.0,
        measured_seconds: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(cpu_ms: u64, cache_mib: u64, events: u64) -> ClusterUsage {
        ClusterUsage {
            reconcile_cpu: Duration::from_millis(cpu_ms),
            cache_objects: cache_mib * 100,
            cache_bytes: cache_mib * 1024 * 1024,
            watch_events: events,
            api_requests: 0,
            sync_operations: 0,
        }
    }

    fn one(id: &str, u: ClusterUsage) -> BTreeMap<String, ClusterUsage> {
        [(id.to_owned(), u)].into_iter().collect()
    }

    fn unsettled() -> MeterConfig {
        MeterConfig {
            settle: Duration::ZERO,
            ..MeterConfig::default()
        }
    }

    #[test]
    fn a_clusters_first_minute_is_not_measured() {
        let mut m = CostMeter::new(MeterConfig::default());
        let none = BTreeMap::new();
        let s = Duration::from_secs;
        // A takeover burns 10 s of CPU in the first 30 s; then 100 ms a second.
        m.sample(s(0), &one("c", usage(0, 0, 0)), &none);
        m.sample(s(30), &one("c", usage(10_000, 0, 0)), &none);
        assert!(m.figures().is_empty(), "still settling");
        m.sample(s(60), &one("c", usage(13_000, 0, 0)), &none);
        m.sample(s(90), &one("c", usage(16_000, 0, 0)), &none);
        let f = m.figures()["c"];
        assert!(
            (f.cpu_millicores - 100.0).abs() < 1e-9,
            "the takeover left out: {f:?}"
        );
        assert_eq!(f.measured_seconds, 60, "30 s to 90 s");
    }

    #[test]
    fn a_steady_rate_is_the_figure_and_a_change_is_smoothed() {
        let mut m = CostMeter::new(unsettled());
        let none = BTreeMap::new();
        let s = Duration::from_secs;
        // 100 ms of CPU per second = 100 millicores; 40 MiB at 0.25 = 10.
        m.sample(s(0), &one("c", usage(0, 40, 0)), &none);
        assert!(m.figures().is_empty(), "no rate from one sample");
        m.sample(s(30), &one("c", usage(3_000, 40, 60)), &none);
        let f = m.figures()["c"];
        assert!((f.cpu_millicores - 100.0).abs() < 1e-9, "{f:?}");
        assert!((f.cost - 110.0).abs() < 1e-9, "{f:?}");
        assert!((f.events_per_minute - 120.0).abs() < 1e-9, "{f:?}");
        assert_eq!(f.measured_seconds, 30);
        // The rate jumps to 1,000 millicores: after one 30 s sample the figure has moved
        // 1 − e^(−0.1) ≈ 9.5 % of the way, not all of it.
        m.sample(s(60), &one("c", usage(33_000, 40, 60)), &none);
        let f = m.figures()["c"];
        let expected = 100.0 + (1.0 - (-0.1f64).exp()) * 900.0;
        assert!((f.cpu_millicores - expected).abs() < 1e-6, "{f:?}");
        // After five windows it is within 1 % of it.
        let mut cpu = 33_000;
        for i in 3..=52 {
            cpu += 30_000;
            m.sample(s(30 * i), &one("c", usage(cpu, 40, 60)), &none);
        }
        let f = m.figures()["c"];
        assert!((f.cpu_millicores - 1000.0).abs() < 10.0, "{f:?}");
    }

    #[test]
    fn a_new_owner_carries_the_published_figure_on_and_a_restart_rebases() {
        let mut m = CostMeter::new(unsettled());
        let s = Duration::from_secs;
        let seed = ClusterCost {
            cost: 500.0,
            cpu_millicores: 500.0,
            measured_seconds: 600,
            ..ClusterCost::default()
        };
        let seeds = [("c".to_owned(), seed)].into_iter().collect();
        m.sample(s(0), &one("c", usage(0, 0, 0)), &seeds);
        assert_eq!(m.figures()["c"], seed, "the seed stands until a rate comes");
        m.sample(s(30), &one("c", usage(15_000, 0, 0)), &seeds);
        let f = m.figures()["c"];
        assert!((f.cpu_millicores - 500.0).abs() < 1e-9, "{f:?}");
        assert_eq!(f.measured_seconds, 630);
        // The counters went back (stopped and taken again): no rate, measured time kept.
        m.sample(s(60), &one("c", usage(10, 0, 0)), &seeds);
        assert_eq!(m.figures()["c"].measured_seconds, 630);
        // An app deleted takes its requests with it: the sample still counts its CPU.
        let mut fewer = usage(10 + 3_000, 0, 0);
        fewer.api_requests = 0;
        let mut more = usage(10, 0, 0);
        more.api_requests = 5;
        m.sample(s(61), &one("c", more), &seeds);
        m.sample(s(91), &one("c", fewer), &seeds);
        let f = m.figures()["c"];
        assert_eq!(f.measured_seconds, 661, "{f:?}");
        assert!(
            f.cpu_millicores > 0.0 && f.requests_per_minute >= 0.0,
            "{f:?}"
        );
        // Gone from the usage: forgotten.
        m.sample(s(120), &BTreeMap::new(), &seeds);
        assert!(m.figures().is_empty());
    }
}
