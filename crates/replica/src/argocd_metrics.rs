//! Argo CD's application-controller metrics (`argocd_app_*`, `argocd_cluster_*`, and the
//! work queues' `workqueue_*` under Argo CD's queue names), with Argo CD's names, types,
//! label sets and buckets, read from the GitOps reconciler and the queues at each scrape:
//! only the apps and clusters this replica owns now, so a sum across replicas counts each
//! once and an app's or a cluster's series vanish here when it moves away. Encoded without
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

mod clusters;
mod queues;

pub(crate) use queues::ArgoCdQueues;

/// Reads the reconciler's owned apps and clusters at each scrape.
pub(crate) struct ArgoCdCollector {
    /// The reconciler whose owned apps and clusters are shown.
    pub(crate) reconciler: Arc<GitOpsReconciler>,
    /// The Application labels `argocd_app_labels` shows (`--metrics-application-labels`;
    /// none: the metric is not exported).
    pub(crate) app_labels: Vec<String>,
    /// The condition types `argocd_app_condition` counts (`--metrics-application-conditions`;
    /// none: the metric is not exported).
    pub(crate) app_conditions: Vec<String>,
}

/// The Prometheus label that shows the Application label `key` on `argocd_app_labels`:
/// `label_` and the key, each character other than an ASCII letter, digit or `_` made `_`
/// (Argo CD's `NormalizeLabels`).
pub(crate) fn app_label_name(key: &str) -> String {
    let sanitised: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("label_{sanitised}")
}

/// Refuses Application label keys that would show as one Prometheus label (`a.b` and
/// `a-b` both are `label_a_b`), naming them: a metric cannot carry a label twice.
pub(crate) fn check_app_label_keys(keys: &[String]) -> Result<(), String> {
    let mut seen: BTreeMap<String, &str> = BTreeMap::new();
    for key in keys {
        if let Some(earlier) = seen.insert(app_label_name(key), key) {
            return Err(format!(
                "the application labels {earlier:?} and {key:?} would both be the metric \
                 label {}; give one of them",
                app_label_name(key)
            ));
        }
    }
    Ok(())
}

impl std::fmt::Debug for ArgoCdCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ArgoCdCollector")
    }
}

type Labels<'a> = Vec<(&'a str, &'a str)>;

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
        let apps = self.reconciler.app_reports();
        encode_app_info(&mut encoder, &apps)?;
        if !self.app_conditions.is_empty() {
            encode_app_conditions(&mut encoder, &apps, &self.app_conditions)?;
        }
        encode_app_orphaned(&mut encoder, &apps)?;
        encode_reconcile(&mut encoder, &apps)?;
        encode_syncs(&mut encoder, &apps)?;
        encode_requests(&mut encoder, &apps)?;
        if !self.app_labels.is_empty() {
            encode_app_labels(&mut encoder, &apps, &self.app_labels)?;
        }
        clusters::encode(&mut encoder, &self.reconciler)
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

/// `argocd_app_condition`: each app's conditions of the `types` asked for, counted by type.
fn encode_app_conditions(
    e: &mut DescriptorEncoder<'_>,
    apps: &[AppReport],
    types: &[String],
) -> Result<(), std::fmt::Error> {
    let mut family = e.encode_descriptor(
        "argocd_app_condition",
        "Report application conditions.",
        None,
        MetricType::Gauge,
    )?;
    for r in apps {
        for (condition, count) in r.conditions.iter().filter(|(c, _)| types.contains(c)) {
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

/// `argocd_app_labels{namespace,name,project,label_<key>…}`: 1 per app, each chosen
/// label's value (empty when the app has no such label).
fn encode_app_labels(
    e: &mut DescriptorEncoder<'_>,
    apps: &[AppReport],
    keys: &[String],
) -> Result<(), std::fmt::Error> {
    let names: Vec<String> = keys.iter().map(|k| app_label_name(k)).collect();
    let mut family = e.encode_descriptor(
        "argocd_app_labels",
        "Argo Application labels converted to Prometheus labels",
        None,
        MetricType::Gauge,
    )?;
    for r in apps {
        let mut labels = app_labels(r);
        for (name, key) in names.iter().zip(keys) {
            labels.push((name.as_str(), r.labels.get(key).map_or("", String::as_str)));
        }
        ConstGauge::new(1i64).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

/// `argocd_app_k8s_request_total`: every Kubernetes API request made for an app (its
/// syncs, its deletion, its server-side diff's dry runs), by response and resource.
fn encode_requests(
    e: &mut DescriptorEncoder<'_>,
    apps: &[AppReport],
) -> Result<(), std::fmt::Error> {
    let mut family = e.encode_descriptor(
        "argocd_app_k8s_request",
        "Number of kubernetes requests executed during application reconciliation.",
        None,
        MetricType::Counter,
    )?;
    for r in apps {
        for (l, n) in &r.activity.requests {
            let code = l.response_code.to_string();
            let mut labels = app_labels(r);
            labels.extend([
                ("server", &*l.server),
                ("response_code", code.as_str()),
                ("verb", l.verb),
                ("resource_kind", l.resource_kind.as_str()),
                ("resource_namespace", l.resource_namespace.as_str()),
                ("dry_run", if l.dry_run { "true" } else { "false" }),
            ]);
            ConstCounter::new(*n).encode(family.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
