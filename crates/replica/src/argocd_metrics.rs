//! Argo CD's application-controller metrics (`argocd_app_*`, `argocd_cluster_*`), with
//! Argo CD's names, types, label sets and buckets, read from the GitOps reconciler at each
//! scrape: only the apps and clusters this replica owns now, so a sum across replicas
//! counts each once and an app's series vanish here when it moves away. Encoded without
//! the `fleetshard_` prefix ([`crate::metrics::Metrics`] keeps them in a registry of their
//! own).

use std::collections::BTreeMap;
use std::sync::Arc;

use fleetshard_gitops::reconciler::{AppReport, GitOpsReconciler, RECONCILE_BUCKETS};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Reads the reconciler's owned apps and clusters at each scrape.
pub(crate) struct ArgoCdCollector(pub(crate) Arc<GitOpsReconciler>);

impl std::fmt::Debug for ArgoCdCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ArgoCdCollector")
    }
}

type Labels<'a> = Vec<(&'static str, &'a str)>;

fn app_labels(r: &AppReport) -> Labels<'_> {
    let (namespace, name) = r.key.parts();
    vec![
        ("namespace", namespace),
        ("name", name),
        ("project", r.project.as_str()),
    ]
}

impl Collector for ArgoCdCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let apps = self.0.app_reports();
        encode_app_info(&mut encoder, &apps)?;
        encode_app_conditions(&mut encoder, &apps)?;
        encode_app_orphaned(&mut encoder, &apps)?;
        encode_reconcile(&mut encoder, &apps)?;
        encode_syncs(&mut encoder, &apps)?;
        encode_clusters(&mut encoder, &self.0)
    }
}

fn encode_app_info(
    e: &mut DescriptorEncoder<'_>,
    apps: &[AppReport],
) -> Result<(), std::fmt::Error> {
    let mut family = e.encode_descriptor(
        "argocd_app_info",
        "Information about application.",
        None,
        MetricType::Gauge,
    )?;
    for r in apps {
        let mut labels = app_labels(r);
        labels.extend([
            (
                "autosync_enabled",
                if r.auto_sync { "true" } else { "false" },
            ),
            ("repo", r.repo.as_str()),
            ("dest_server", r.dest_server.as_str()),
            ("dest_namespace", r.dest_namespace.as_str()),
            ("sync_status", r.sync_status.as_str()),
            ("health_status", r.health_status.as_str()),
            ("operation", r.operation),
        ]);
        ConstGauge::new(1i64).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

fn encode_app_conditions(
    e: &mut DescriptorEncoder<'_>,
    apps: &[AppReport],
) -> Result<(), std::fmt::Error> {
    let mut family = e.encode_descriptor(
        "argocd_app_condition",
        "Report application conditions.",
        None,
        MetricType::Gauge,
    )?;
    for r in apps {
        for (condition, count) in &r.conditions {
            let mut labels = app_labels(r);
            labels.push(("condition", condition.as_str()));
            let count = i64::try_from(*count).unwrap_or(i64::MAX);
            ConstGauge::new(count).encode(family.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

/// `argocd_app_orphaned_resources_count`: every owned app's orphaned resources, 0 when
/// its project does not look for them (Argo CD sets it for every app it refreshes).
fn encode_app_orphaned(
    e: &mut DescriptorEncoder<'_>,
    apps: &[AppReport],
) -> Result<(), std::fmt::Error> {
    let mut family = e.encode_descriptor(
        "argocd_app_orphaned_resources_count",
        "Number of orphaned resources per application",
        None,
        MetricType::Gauge,
    )?;
    for r in apps {
        let count = i64::try_from(r.orphaned_resources).unwrap_or(i64::MAX);
        ConstGauge::new(count).encode(family.encode_family(&app_labels(r))?)?;
    }
    Ok(())
}

/// `argocd_app_reconcile{namespace,dest_server}`: the apps' refreshes summed per label
/// set (apps move with their cluster, so a label set goes away whole).
fn encode_reconcile(
    e: &mut DescriptorEncoder<'_>,
    apps: &[AppReport],
) -> Result<(), std::fmt::Error> {
    let mut sums: BTreeMap<(&str, &str), ([u64; 8], f64)> = BTreeMap::new();
    for r in apps {
        let (namespace, _) = r.key.parts();
        let entry = sums
            .entry((namespace, r.dest_server.as_str()))
            .or_insert(([0; 8], 0.0));
        for (sum, n) in entry.0.iter_mut().zip(r.activity.reconcile_buckets) {
            *sum += n;
        }
        entry.1 += r.activity.reconcile_seconds;
    }
    let mut family = e.encode_descriptor(
        "argocd_app_reconcile",
        "Application reconciliation performance in seconds.",
        None,
        MetricType::Histogram,
    )?;
    for ((namespace, dest_server), (counts, seconds)) in sums {
        let bounds = RECONCILE_BUCKETS.iter().copied().chain([f64::MAX]);
        let buckets: Vec<(f64, u64)> = bounds.zip(counts).collect();
        let labels = [("namespace", namespace), ("dest_server", dest_server)];
        family
            .encode_family(&labels)?
            .encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                seconds,
                counts.iter().sum(),
                &buckets,
                None,
            )?;
    }
    Ok(())
}

fn encode_syncs(e: &mut DescriptorEncoder<'_>, apps: &[AppReport]) -> Result<(), std::fmt::Error> {
    {
        let mut family = e.encode_descriptor(
            "argocd_app_sync",
            "Number of application syncs.",
            None,
            MetricType::Counter,
        )?;
        for r in apps {
            for ((phase, dry_run), n) in &r.activity.syncs {
                let mut labels = app_labels(r);
                labels.extend([
                    ("dest_server", r.dest_server.as_str()),
                    ("phase", phase.as_str()),
                    ("dry_run", if *dry_run { "true" } else { "false" }),
                ]);
                ConstCounter::new(*n).encode(family.encode_family(&labels)?)?;
            }
        }
    }
    let mut family = e.encode_descriptor(
        "argocd_app_sync_duration_seconds",
        "Application sync performance in seconds total.",
        None,
        MetricType::Counter,
    )?;
    for r in apps.iter().filter(|r| !r.activity.syncs.is_empty()) {
        let mut labels = app_labels(r);
        labels.push(("dest_server", r.dest_server.as_str()));
        ConstCounter::new(r.activity.sync_seconds).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

/// A cluster gauge's value from a cluster's cache facts.
type ClusterGauge = fn(&fleetshard_gitops::live::ClusterCacheFacts) -> i64;

/// The started clusters' caches: `argocd_cluster_api_resource_objects`,
/// `argocd_cluster_api_resources` and `argocd_cluster_cache_age_seconds` (-1 before every
/// kind was listed, as Argo CD shows a cache never synced), each `{server}`.
fn encode_clusters(
    e: &mut DescriptorEncoder<'_>,
    reconciler: &GitOpsReconciler,
) -> Result<(), std::fmt::Error> {
    let facts = reconciler.clusters().cache_facts();
    let gauges: [(&str, &str, ClusterGauge); 3] = [
        (
            "argocd_cluster_api_resource_objects",
            "Number of k8s resource objects in the cache.",
            |f| i64::try_from(f.objects).unwrap_or(i64::MAX),
        ),
        (
            "argocd_cluster_api_resources",
            "Number of monitored kubernetes API resources.",
            |f| i64::try_from(f.kinds).unwrap_or(i64::MAX),
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
    Ok(())
}

#[cfg(test)]
mod tests;
