//! The `/metrics` registry, shared by both protocols: each renders from a protocol-neutral
//! [`View`] of its status taken at scrape time.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use fleetshard_coord::ownership::{PeerRenewal, RunnerMetrics};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use fleetshard_controller::inventory::{Problem, Severity};

use crate::http::View;

/// Latency buckets (seconds): 1 ms to 10 s; a renew slower than 3 s lapses the lease.
const LATENCY_BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// Labels of a store call.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreCall {
    /// `list` or a write's purpose (`renew_shard`, `commit`, ...).
    op: String,
    /// `ok` or `error` (a compare-and-swap conflict is `ok`: the store answered).
    outcome: String,
}

/// Labels of an inventory problem count.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProblemLabels {
    /// `warning` or `error`.
    severity: String,
}

/// The inventory's problems now, by severity (duplicate cluster ids or servers, objects
/// that do not parse, ...): `fleetshard_inventory_problems{severity}`.
#[derive(Clone, Default)]
pub struct ProblemGauges(Family<ProblemLabels, Gauge>);

impl ProblemGauges {
    /// Sets the counts from `problems`.
    pub fn set(&self, problems: &[Problem]) {
        for (severity, name) in [(Severity::Warning, "warning"), (Severity::Error, "error")] {
            let n = problems.iter().filter(|p| p.severity == severity).count();
            let labels = ProblemLabels {
                severity: name.to_owned(),
            };
            self.0
                .get_or_create(&labels)
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }
}

/// The store-latency metrics, fed by the runner as calls finish, and the other holders'
/// leases as its last listing showed them.
#[derive(Clone)]
pub struct StoreLatency {
    calls: Family<StoreCall, Histogram>,
    renew: Histogram,
    peers: Arc<Mutex<PeersSeen>>,
}

/// The other holders' leases and how long one may stay unchanged while renewed on time.
#[derive(Default)]
struct PeersSeen {
    leases: Vec<PeerRenewal>,
    at_risk_after: Duration,
}

impl PeersSeen {
    /// Shards whose record has been unchanged longer than a holder renewing on time leaves
    /// it, at `now`, and their clusters.
    fn not_renewed(&self, now: tokio::time::Instant) -> (u64, u64) {
        PeerRenewal::not_renewed(&self.leases, self.at_risk_after, now)
    }
}

impl RunnerMetrics for StoreLatency {
    fn store_call(&self, op: &'static str, took: Duration, ok: bool) {
        let labels = StoreCall {
            op: op.to_owned(),
            outcome: if ok { "ok" } else { "error" }.to_owned(),
        };
        self.calls
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        if op == "renew_shard" && ok {
            self.renew.observe(took.as_secs_f64());
        }
    }

    fn peer_leases(&self, leases: &[PeerRenewal], at_risk_after: Duration) {
        let mut seen = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
        seen.leases.clear();
        seen.leases.extend_from_slice(leases);
        seen.at_risk_after = at_risk_after;
    }
}

/// The metrics, refreshed from a status view at every scrape.
pub struct Metrics {
    registry: Registry,
    /// Argo CD's metrics, under Argo CD's names (no prefix).
    argocd: Registry,
    shard: Gauge,
    distributor: Gauge,
    generation: Gauge,
    acting: Gauge,
    lease_remaining: Gauge<f64, std::sync::atomic::AtomicU64>,
    store_errors: Counter,
    handovers: Counter,
    failovers: Counter,
    shard_count: Gauge,
    store_replaced: Gauge,
    corrupt_records: Gauge,
    inventory_disagreement: Gauge,
    held_back: Gauge,
    shards_not_renewed: Gauge,
    clusters_not_renewed: Gauge,
    latency: StoreLatency,
    problems: ProblemGauges,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// An empty registry with every metric registered.
    pub fn new() -> Self {
        let mut m = Metrics {
            registry: Registry::with_prefix("fleetshard"),
            argocd: Registry::default(),
            shard: Gauge::default(),
            distributor: Gauge::default(),
            generation: Gauge::default(),
            acting: Gauge::default(),
            lease_remaining: Gauge::default(),
            store_errors: Counter::default(),
            handovers: Counter::default(),
            failovers: Counter::default(),
            shard_count: Gauge::default(),
            store_replaced: Gauge::default(),
            corrupt_records: Gauge::default(),
            inventory_disagreement: Gauge::default(),
            held_back: Gauge::default(),
            shards_not_renewed: Gauge::default(),
            clusters_not_renewed: Gauge::default(),
            latency: StoreLatency {
                calls: Family::new_with_constructor(latency_histogram),
                renew: latency_histogram(),
                peers: Arc::default(),
            },
            problems: ProblemGauges::default(),
        };
        let r = &mut m.registry;
        r.register("shard", "Shard held (-1: none)", m.shard.clone());
        r.register(
            "is_distributor",
            "1 while this replica is the distributor",
            m.distributor.clone(),
        );
        r.register(
            "generation",
            "Assignment generation applied",
            m.generation.clone(),
        );
        r.register(
            "clusters_acting",
            "Clusters this replica reconciles",
            m.acting.clone(),
        );
        r.register(
            "lease_valid_seconds",
            "Seconds until the shard lease lapses unless renewed",
            m.lease_remaining.clone(),
        );
        r.register(
            "store_errors",
            "Store operations that failed (conflicts excluded)",
            m.store_errors.clone(),
        );
        r.register(
            "handovers",
            "Clusters started by this replica",
            m.handovers.clone(),
        );
        r.register(
            "failovers",
            "Shards taken over from a holder that stopped renewing",
            m.failovers.clone(),
        );
        r.register(
            "shard_count",
            "Shards in force (the applied generation's count)",
            m.shard_count.clone(),
        );
        r.register(
            "store_replaced",
            "1 once the store was found replaced (another store behind its URL): this replica \
             uses it no more, its clusters stopped at its lease deadline, until it is restarted",
            m.store_replaced.clone(),
        );
        r.register(
            "corrupt_records",
            "Records of the fleet the store holds that this replica cannot read (fenced mode)",
            m.corrupt_records.clone(),
        );
        r.register(
            "inventory_disagreement",
            "Other live replicas whose published inventory digest differs from this one's \
             (fenced mode): they do not see the same fleet",
            m.inventory_disagreement.clone(),
        );
        r.register(
            "fleet_drop_held_back",
            "Clusters the distributor keeps assigned although its inventory dropped them (a \
             drop beyond the drop guard's share, until it has held for the grace)",
            m.held_back.clone(),
        );
        r.register(
            "shards_not_renewed",
            "Other holders' shards whose lease record this replica saw unchanged for longer \
             than a renew period and its polling interval (fenced mode): the holder missed a \
             renewal and may be dead; nobody acts on their clusters until it renews or they move",
            m.shards_not_renewed.clone(),
        );
        r.register(
            "clusters_not_renewed",
            "Clusters of those shards: at risk, acted on by nobody (fenced mode)",
            m.clusters_not_renewed.clone(),
        );
        r.register(
            "store_call_seconds",
            "Store call latency by operation and outcome",
            m.latency.calls.clone(),
        );
        r.register(
            "inventory_problems",
            "Problems of the inventory now (duplicate cluster ids or servers, unreadable objects), by severity",
            m.problems.0.clone(),
        );
        r.register(
            "lease_renew_seconds",
            "Time from sending a shard lease renew to its confirmation",
            m.latency.renew.clone(),
        );
        m
    }

    /// The registry, for metrics of other parts (the controller's queues).
    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// The registry of Argo CD's metrics, encoded beside this one without a prefix.
    pub fn argocd_registry_mut(&mut self) -> &mut Registry {
        &mut self.argocd
    }

    /// The inventory problem counts (shares this registry's metric).
    pub fn inventory_problems(&self) -> ProblemGauges {
        self.problems.clone()
    }

    /// The sink the runner reports store latencies to (shares this registry's metrics).
    pub fn store_latency(&self) -> StoreLatency {
        self.latency.clone()
    }

    /// Sets the metrics from `v` and encodes them (OpenMetrics text).
    pub fn render(&self, v: &View) -> String {
        self.shard.set(v.shard.map_or(-1, i64::from));
        self.distributor.set(i64::from(v.is_distributor));
        self.generation.set(v.generation as i64);
        self.acting.set(v.acting as i64);
        self.lease_remaining.set(v.lease_valid_secs);
        // Counters only go up: add what the snapshot has beyond what they show.
        self.store_errors
            .inc_by(v.store_errors.saturating_sub(self.store_errors.get()));
        self.handovers
            .inc_by(v.handovers.saturating_sub(self.handovers.get()));
        self.failovers
            .inc_by(v.failovers.saturating_sub(self.failovers.get()));
        self.shard_count.set(i64::from(v.shard_count));
        self.store_replaced
            .set(i64::from(v.store_replaced.is_some()));
        self.corrupt_records.set(v.corrupt_records as i64);
        self.inventory_disagreement
            .set(i64::try_from(v.inventory_disagreement).unwrap_or(i64::MAX));
        self.held_back
            .set(i64::try_from(v.held_back_clusters).unwrap_or(i64::MAX));
        let (shards, clusters) = self
            .latency
            .peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .not_renewed(tokio::time::Instant::now());
        self.shards_not_renewed
            .set(i64::try_from(shards).unwrap_or(i64::MAX));
        self.clusters_not_renewed
            .set(i64::try_from(clusters).unwrap_or(i64::MAX));
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode_registry(&mut out, &self.registry)
            .and_then(|()| {
                prometheus_client::encoding::text::encode_registry(&mut out, &self.argocd)
            })
            .and_then(|()| prometheus_client::encoding::text::encode_eof(&mut out));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_render() {
        let m = Metrics::new();
        let v = View {
            shard: Some(2),
            store_errors: 3,
            handovers: 4,
            corrupt_records: 2,
            inventory_disagreement: 1,
            held_back_clusters: 6,
            ..View::default()
        };
        let text = m.render(&v);
        assert!(
            text.contains("fleetshard_inventory_disagreement 1"),
            "{text}"
        );
        assert!(text.contains("fleetshard_fleet_drop_held_back 6"), "{text}");
        assert!(text.contains("fleetshard_corrupt_records 2"), "{text}");
        assert!(text.contains("fleetshard_shard 2"), "{text}");
        assert!(text.contains("fleetshard_store_errors_total 3"), "{text}");
        assert!(text.contains("fleetshard_store_replaced 0"), "{text}");
        let fenced = View {
            store_replaced: Some("gone".into()),
            ..v.clone()
        };
        assert!(m.render(&fenced).contains("fleetshard_store_replaced 1"));
        assert!(m.render(&v).contains("fleetshard_handovers_total 4"));
        let sink = m.store_latency();
        sink.store_call("renew_shard", Duration::from_millis(7), true);
        sink.store_call("list", Duration::from_millis(2), false);
        let text = m.render(&v);
        assert!(
            text.contains("fleetshard_lease_renew_seconds_count 1"),
            "{text}"
        );
        assert!(
            text.contains(r#"fleetshard_store_call_seconds_count{op="list",outcome="error"} 1"#),
            "{text}"
        );
    }

    /// A holder whose record stayed unchanged beyond a renew period and the polling
    /// interval is counted, with its clusters, from the scrape that finds it so; one that
    /// renewed is not; the count falls back when it renews again.
    #[tokio::test(start_paused = true)]
    async fn a_holder_that_missed_a_renewal_is_counted_with_its_clusters() {
        let m = Metrics::new();
        let sink = m.store_latency();
        let at_risk = Duration::from_millis(1550);
        let t0 = tokio::time::Instant::now();
        let peer = |shard, clusters, changed_at| PeerRenewal {
            shard,
            changed_at,
            clusters,
        };
        sink.peer_leases(&[peer(0, 4, t0), peer(1, 3, t0)], at_risk);
        let text = m.render(&View::default());
        assert!(text.contains("fleetshard_shards_not_renewed 0"), "{text}");
        tokio::time::advance(Duration::from_millis(1600)).await;
        // Shard 1 renewed meanwhile; shard 0 did not.
        let now = tokio::time::Instant::now();
        sink.peer_leases(&[peer(0, 4, t0), peer(1, 3, now)], at_risk);
        let text = m.render(&View::default());
        assert!(text.contains("fleetshard_shards_not_renewed 1"), "{text}");
        assert!(text.contains("fleetshard_clusters_not_renewed 4"), "{text}");
        sink.peer_leases(&[peer(0, 4, now), peer(1, 3, now)], at_risk);
        let text = m.render(&View::default());
        assert!(text.contains("fleetshard_clusters_not_renewed 0"), "{text}");
    }
}
