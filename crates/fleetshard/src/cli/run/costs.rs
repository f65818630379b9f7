//! `fleetshard run`'s measured-cost options (issue 30): how a cluster's cost is smoothed
//! and weighed, the headroom of the recommended replica count, and the distributor's
//! hysteresis when it places by measured costs.

use std::time::Duration;

use fleetshard_core::placement::hysteresis::Hysteresis;
use fleetshard_replica::costs::{CostSettings, MeterConfig};

/// `fleetshard run`'s cost options.
#[derive(Debug, Clone, clap::Args)]
pub struct CostArgs {
    /// As distributor placing by measured costs: a shard may exceed its target by this
    /// fraction before any cluster leaves it, and a move must pay for its takeover (0
    /// turns it off; the engine then keeps clusters in place within --tolerance alone).
    #[arg(
        long,
        value_name = "BAND",
        default_value_t = 0.10,
        env = "FLEETSHARD_HYSTERESIS"
    )]
    pub hysteresis: f64,
    /// The time constant of the moving average each cluster's measured cost is smoothed
    /// with, in seconds.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 300,
        value_parser = clap::value_parser!(u64).range(30..=86_400),
        env = "FLEETSHARD_COST_WINDOW"
    )]
    pub cost_window: u64,
    /// What one MiB of a cluster's live cache costs, in millicores: a cluster's cost is
    /// its reconcile CPU (millicores) plus its cache (MiB) times this. 0.25: a replica with
    /// 1 CPU and 4 GiB is as full by either.
    #[arg(
        long,
        value_name = "MILLICORES",
        default_value_t = 0.25,
        env = "FLEETSHARD_COST_MEMORY_WEIGHT"
    )]
    pub cost_memory_weight: f64,
    /// What one replica can carry, in millicores of measured cost: in a pod, its CPU
    /// request (the manifests set it with the downward API). Default: the CPUs this
    /// process may use, 1,000 each.
    #[arg(long, value_name = "MILLICORES", env = "FLEETSHARD_COST_CAPACITY")]
    pub cost_capacity: Option<u64>,
    /// The share of each replica's --cost-capacity kept free by
    /// `fleetshard_recommended_replicas`.
    #[arg(
        long,
        value_name = "FRACTION",
        default_value_t = 0.25,
        env = "FLEETSHARD_COST_HEADROOM"
    )]
    pub cost_headroom: f64,
    /// As distributor (fenced mode): split a cluster that costs more than a replica's
    /// share (beyond --tolerance) into slices of its applications, each slice owned by
    /// one replica; each application stays in its slice (a hash of its namespace and
    /// name), so one more slice moves about 1/k of them. Argo CD's protocol keeps whole
    /// clusters.
    #[arg(long, env = "FLEETSHARD_SPLIT_CLUSTERS")]
    pub split_clusters: bool,
}

impl CostArgs {
    /// The hysteresis the distributor applies to measured costs.
    pub fn hysteresis(&self) -> anyhow::Result<Option<Hysteresis>> {
        crate::cli::plan::hysteresis(Some(self.hysteresis), true)
    }

    /// The replica's cost settings (`cpus`: the CPUs this process may use, for the
    /// default capacity); a weight or headroom out of range is an error naming the flag.
    pub fn settings(&self, cpus: Option<usize>) -> anyhow::Result<CostSettings> {
        let w = self.cost_memory_weight;
        if !(w.is_finite() && (0.0..=1000.0).contains(&w)) {
            anyhow::bail!("--cost-memory-weight {w}: must be within 0..=1000 (millicores per MiB)");
        }
        let h = self.cost_headroom;
        if !(h.is_finite() && (0.0..0.95).contains(&h)) {
            anyhow::bail!(
                "--cost-headroom {h}: must be within 0..0.95 (0.25 keeps a quarter free)"
            );
        }
        Ok(CostSettings {
            meter: MeterConfig {
                window: Duration::from_secs(self.cost_window),
                memory_weight: w,
                ..MeterConfig::default()
            },
            headroom: h,
            replica_capacity: match self.cost_capacity {
                Some(0) => anyhow::bail!("--cost-capacity 0: a replica must carry something"),
                Some(m) => m as f64,
                None => cpus.unwrap_or(1).max(1) as f64 * 1000.0,
            },
            ..CostSettings::default()
        })
    }
}
