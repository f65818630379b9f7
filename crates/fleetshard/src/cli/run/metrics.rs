//! The `/metrics` registry, shared by both protocols: each renders from a protocol-neutral
//! [`View`] of its status taken at scrape time.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::http::View;

/// The metrics, refreshed from a status view at every scrape.
pub struct Metrics {
    registry: Registry,
    shard: Gauge,
    distributor: Gauge,
    generation: Gauge,
    acting: Gauge,
    lease_remaining: Gauge<f64, std::sync::atomic::AtomicU64>,
    store_errors: Counter,
    handovers: Counter,
}

impl Metrics {
    /// An empty registry with every metric registered.
    pub fn new() -> Self {
        let mut m = Metrics {
            registry: Registry::with_prefix("fleetshard"),
            shard: Gauge::default(),
            distributor: Gauge::default(),
            generation: Gauge::default(),
            acting: Gauge::default(),
            lease_remaining: Gauge::default(),
            store_errors: Counter::default(),
            handovers: Counter::default(),
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
        m
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
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
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
            ..View::default()
        };
        let text = m.render(&v);
        assert!(text.contains("fleetshard_shard 2"), "{text}");
        assert!(text.contains("fleetshard_store_errors_total 3"), "{text}");
        assert!(m.render(&v).contains("fleetshard_handovers_total 4"));
    }
}
