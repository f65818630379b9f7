//! Argo CD's cluster metrics (`controller/metrics/clustercollector.go` and the cluster
//! cache's event counter) from the started clusters' caches and connections: each cluster
//! this replica owns and has connected to, labelled `server` as Argo CD does.

use fleetshard_gitops::live::ClusterCacheFacts;
use fleetshard_gitops::reconciler::GitOpsReconciler;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// A cluster gauge's value from a cluster's cache facts.
type ClusterGauge = fn(&ClusterCacheFacts) -> i64;

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// `argocd_cluster_info{server,k8s_version,name}`,
/// `argocd_cluster_api_resource_objects`, `argocd_cluster_api_resources`,
/// `argocd_cluster_cache_age_seconds` (-1 before every kind was listed, as Argo CD shows
/// a cache never synced), `argocd_cluster_connection_status{server,k8s_version}` and
/// `argocd_cluster_events_total{server,group,kind}`.
pub(super) fn encode(
    e: &mut DescriptorEncoder<'_>,
    reconciler: &GitOpsReconciler,
) -> Result<(), std::fmt::Error> {
    let facts = reconciler.clusters().cache_facts();
    let names = reconciler.cluster_names();
    {
        let mut family = e.encode_descriptor(
            "argocd_cluster_info",
            "Information about cluster.",
            None,
            MetricType::Gauge,
        )?;
        for f in &facts {
            let name = names.get(&f.id).map_or("", String::as_str);
            let labels = [
                ("server", f.server.as_str()),
                ("k8s_version", f.k8s_version.as_str()),
                ("name", name),
            ];
            ConstGauge::new(1i64).encode(family.encode_family(&labels)?)?;
        }
    }
    let gauges: [(&str, &str, ClusterGauge); 3] = [
        (
            "argocd_cluster_api_resource_objects",
            "Number of k8s resource objects in the cache.",
            |f| count(f.objects),
        ),
        (
            "argocd_cluster_api_resources",
            "Number of monitored kubernetes API resources.",
            |f| count(f.kinds),
        ),
        (
            "argocd_cluster_cache_age_seconds",
            "Cluster cache age in seconds.",
            |f| {
                f.age
                    .map_or(-1, |a| i64::try_from(a.as_secs()).unwrap_or(i64::MAX))
            },
        ),
    ];
    for (name, help, value) in gauges {
        let mut family = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for f in &facts {
            let labels = [("server", f.server.as_str())];
            ConstGauge::new(value(f)).encode(family.encode_family(&labels)?)?;
        }
    }
    {
        let mut family = e.encode_descriptor(
            "argocd_cluster_connection_status",
            "The k8s cluster current connection status.",
            None,
            MetricType::Gauge,
        )?;
        for f in &facts {
            let labels = [
                ("server", f.server.as_str()),
                ("k8s_version", f.k8s_version.as_str()),
            ];
            ConstGauge::new(i64::from(f.connected)).encode(family.encode_family(&labels)?)?;
        }
    }
    let mut family = e.encode_descriptor(
        "argocd_cluster_events",
        "Number of processes k8s resource events.",
        None,
        MetricType::Counter,
    )?;
    for f in &facts {
        for ((group, kind), n) in &f.events {
            let labels = [
                ("server", f.server.as_str()),
                ("group", group.as_str()),
                ("kind", kind.as_str()),
            ];
            ConstCounter::new(*n).encode(family.encode_family(&labels)?)?;
        }
    }
    Ok(())
}
