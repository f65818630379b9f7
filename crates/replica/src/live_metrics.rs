//! Metrics of the GitOps reconciler's live state, read at each scrape: each owned
//! cluster's cache age (`fleetshard_cluster_cache_age_seconds{cluster}`, seconds since the
//! oldest of its kinds' last complete list; absent before every kind's first list), so a
//! cache whose lists keep failing shows on a dashboard before any app says so; and what
//! became of the Kubernetes Events on Applications
//! (`fleetshard_app_events_total{outcome}`).

use std::sync::Arc;

use fleetshard_gitops::events::AppEvents;
use fleetshard_gitops::reconciler::GitOpsReconciler;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Reads the reconciler's cluster connections at each scrape.
pub(crate) struct LiveStateCollector(pub(crate) Arc<GitOpsReconciler>);

impl std::fmt::Debug for LiveStateCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LiveStateCollector")
    }
}

impl Collector for LiveStateCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let ages = self.0.clusters().cache_ages();
        let gauge = ConstGauge::new(0.0);
        let mut family = encoder.encode_descriptor(
            "cluster_cache_age_seconds",
            "Seconds since the oldest of a cluster's cached kinds was last listed in full \
             (a new list every --cluster-cache-relist)",
            None,
            gauge.metric_type(),
        )?;
        for (cluster, age) in ages {
            let Some(age) = age else { continue };
            let labels = [("cluster", cluster.as_str())];
            ConstGauge::new(age.as_secs_f64()).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// Reads the events' counts at each scrape.
pub(crate) struct AppEventsCollector(pub(crate) Arc<AppEvents>);

impl std::fmt::Debug for AppEventsCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AppEventsCollector")
    }
}

impl Collector for AppEventsCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let c = self.0.counts();
        let counter = ConstCounter::new(0u64);
        let mut family = encoder.encode_descriptor(
            "app_events",
            "Kubernetes Events on Applications by outcome: created, aggregated (a count \
             bump of an identical event), or dropped (queue_full, rate_limited, refused by \
             the API server, not_owner: the cluster stopped or the lease lapsed first)",
            None,
            counter.metric_type(),
        )?;
        for (outcome, n) in [
            ("created", c.created),
            ("aggregated", c.aggregated),
            ("queue_full", c.dropped_queue_full),
            ("rate_limited", c.dropped_rate_limited),
            ("refused", c.refused),
            ("not_owner", c.dropped_not_owner),
        ] {
            ConstCounter::new(n).encode(family.encode_family(&[("outcome", outcome)])?)?;
        }
        Ok(())
    }
}
