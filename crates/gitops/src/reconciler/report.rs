//! What each app this replica owns looks like to Argo CD's application metrics, read at
//! a scrape ([`GitOpsReconciler::app_reports`]): the last refresh's sync and health
//! status and condition types, and counts of its refreshes and syncs since this owner
//! took it. Kept in the app's memo, so it goes when the app's cluster stops here (the
//! series vanish from this replica when the app moves away).

use std::collections::BTreeMap;
use std::time::Duration;

use fleetshard_controller::AppKey;
use fleetshard_core::App;
use fleetshard_manifest::AppSpec;

use super::{AppTarget, ComparisonStatus, GitOpsReconciler, UnresolvedTarget};
use crate::live::{AppConn, ClusterConn, RequestLabels};

/// Argo CD's `argocd_app_reconcile` buckets (seconds).
pub const RECONCILE_BUCKETS: [f64; 7] = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0];

/// One owned app, as Argo CD's `argocd_app_*` metrics label and count it.
#[derive(Debug, Clone, PartialEq)]
pub struct AppReport {
    /// The Application.
    pub key: AppKey,
    /// `spec.project`.
    pub project: String,
    /// `spec.syncPolicy.automated` is set.
    pub auto_sync: bool,
    /// The (first) source's repository URL, normalized as Argo CD's `NormalizeGitURL`.
    pub repo: String,
    /// The destination cluster's API server URL.
    pub dest_server: String,
    /// `spec.destination.namespace`.
    pub dest_namespace: String,
    /// The last refresh's `sync.status`.
    pub sync_status: String,
    /// The last refresh's `health.status`.
    pub health_status: String,
    /// `delete` while the Application is deleted, `sync` while an operation is asked for
    /// or runs, else empty (Argo CD's `operation` label).
    pub operation: &'static str,
    /// The last refresh's condition types, each with how many conditions have it.
    pub conditions: BTreeMap<String, u64>,
    /// The Application's labels.
    pub labels: BTreeMap<String, String>,
    /// How many orphaned resources the last refresh that looked found (0 when the
    /// project does not ask), as Argo CD's `argocd_app_orphaned_resources_count`.
    pub orphaned_resources: usize,
    /// Counts since this owner took the app.
    pub activity: AppActivity,
}

/// Refreshes and syncs of an app since this owner took it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AppActivity {
    /// Refresh durations: count per [`RECONCILE_BUCKETS`] bucket (not cumulative; the
    /// last entry counts those above the last bound).
    pub reconcile_buckets: [u64; 8],
    /// Refresh durations' sum, seconds.
    pub reconcile_seconds: f64,
    /// Operations ended, by (phase, dry run).
    pub syncs: BTreeMap<(String, bool), u64>,
    /// Ended operations' durations (`finishedAt - startedAt`), seconds.
    pub sync_seconds: f64,
    /// Kubernetes API requests made for the app (syncs, deletion, server-side diff dry
    /// runs), by label set.
    pub requests: BTreeMap<RequestLabels, u64>,
}

impl AppActivity {
    /// Counts a refresh that took `took`.
    pub(super) fn refreshed(&mut self, took: Duration) {
        let s = took.as_secs_f64();
        let i = RECONCILE_BUCKETS
            .iter()
            .position(|bound| s <= *bound)
            .unwrap_or(RECONCILE_BUCKETS.len());
        self.reconcile_buckets[i] += 1;
        self.reconcile_seconds += s;
    }

    /// Counts an operation that ended in `phase` after `seconds`.
    pub(super) fn synced(&mut self, phase: &str, dry_run: bool, seconds: f64) {
        *self.syncs.entry((phase.to_owned(), dry_run)).or_default() += 1;
        self.sync_seconds += seconds.max(0.0);
    }
}

impl AppReport {
    /// The report of `target` after a refresh that found `status`.
    pub(super) fn of(target: &AppTarget, status: &ComparisonStatus, in_operation: bool) -> Self {
        Self::of_app(
            &target.app,
            &target.spec,
            &target.cluster.server,
            status,
            in_operation,
        )
    }

    /// The report of an app whose destination resolves to no cluster (`dest_server` as
    /// its spec writes it, empty for a destination by name), after a refresh that found
    /// `status`.
    pub(super) fn of_unresolved(target: &UnresolvedTarget, status: &ComparisonStatus) -> Self {
        let server = target.app.destination.server.as_deref().unwrap_or_default();
        Self::of_app(&target.app, &target.spec, server, status, false)
    }

    fn of_app(
        app: &App,
        spec: &AppSpec,
        dest_server: &str,
        status: &ComparisonStatus,
        in_operation: bool,
    ) -> Self {
        let mut conditions = BTreeMap::new();
        for c in &status.conditions {
            *conditions.entry(c.kind.clone()).or_default() += 1;
        }
        let operation = if spec.lifecycle.deleting {
            "delete"
        } else if in_operation || spec.sync_request.is_some() {
            "sync"
        } else {
            ""
        };
        AppReport {
            key: AppKey::new(&app.namespace, &app.name),
            project: app.project.clone(),
            auto_sync: spec.auto_sync.is_some(),
            repo: crate::source::normalize(&spec.source.repo_url),
            dest_server: dest_server.to_owned(),
            dest_namespace: app.destination.namespace.clone().unwrap_or_default(),
            sync_status: status.sync.status.clone(),
            health_status: status.health.status.clone(),
            operation,
            conditions,
            labels: spec.labels.clone(),
            orphaned_resources: 0,
            activity: AppActivity::default(),
        }
    }
}

/// Seconds from `started` to `finished` (RFC 3339); 0 when either does not read.
pub(super) fn seconds_between(started: &str, finished: &str) -> f64 {
    let (Ok(a), Ok(b)) = (
        started.parse::<jiff::Timestamp>(),
        finished.parse::<jiff::Timestamp>(),
    ) else {
        return 0.0;
    };
    b.duration_since(a).as_secs_f64()
}

impl GitOpsReconciler {
    /// Every app this replica owns and has refreshed, sorted by key.
    pub fn app_reports(&self) -> Vec<AppReport> {
        let memos = self.memos();
        let mut reports: Vec<AppReport> = memos
            .values()
            .filter_map(|m| {
                let mut r = m.report.as_deref()?.clone();
                r.activity = m.activity.clone();
                r.activity.requests = m.requests.counts();
                Some(r)
            })
            .collect();
        reports.sort_by(|a, b| a.key.cmp(&b.key));
        reports
    }

    /// `conn` as `key`'s requests reach it: each counted for the app (Argo CD's
    /// `argocd_app_k8s_request_total`); `dry_run`: its operation is a dry run.
    pub(super) fn app_conn<'a>(
        &self,
        key: &AppKey,
        conn: &'a ClusterConn,
        dry_run: bool,
    ) -> AppConn<'a> {
        let requests = self
            .memos()
            .entry(key.clone())
            .or_default()
            .requests
            .clone();
        AppConn::new(conn, requests, dry_run)
    }
}
