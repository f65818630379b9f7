//! Argo CD's app-state cache as a sink beside the status sink: after each refresh of an
//! app this replica owns, its resource tree and managed resources; after each refresh
//! and each warm-up of a cluster it owns, that cluster's info — through
//! [`fleetshard_appstate::AppStateCache`], whose writer never blocks or fails the
//! refresh. Only owned apps and clusters are refreshed here, so a replica writes only
//! theirs, and a new owner rewrites them with its first refreshes after a move.
//!
//! While the cache is on, each owned cluster also watches the kinds Argo CD's tree shows
//! as children (ReplicaSets, Pods, EndpointSlices) and its Nodes (the tree's hosts),
//! started without waiting: the first tree after an acquisition may lack children the
//! next one shows.

use std::collections::HashMap;
use std::sync::Arc;

use fleetshard_appstate::{
    AppShown, ClusterFacts, HealthStatus, ManagedResource, sensitive_annotations,
};
use fleetshard_controller::AppKey;
use serde_json::Value;

use super::memo::Refreshed;
use super::orphans::node_health;
use super::{AppTarget, GitOpsReconciler};
use crate::compare::{ResourceKey, SyncStatus};
use crate::live::{ClusterConn, TREE_KINDS};

impl GitOpsReconciler {
    /// Writes the app's tree and managed resources from its refresh, and its cluster's
    /// info; answers the tree's summary (`status.summary`). Does nothing without an
    /// app-state cache (no tree is built: the summary is `None`).
    pub(super) async fn write_app_state(
        &self,
        key: &AppKey,
        target: &AppTarget,
        refreshed: &Refreshed,
    ) -> Option<Value> {
        let cache = self.app_state.as_ref()?;
        // The connection the refresh just used (started again only as a refresh would).
        let conn = self.clusters.start(&target.cluster).await.ok()?;
        watch_tree_kinds(&conn).await;
        let managed = managed_of(refreshed, &self.predictions_of(key));
        let objects = conn.tree_objects();
        let health = |v: &Value| -> Option<HealthStatus> { node_health(&refreshed.settings, v) };
        let app = self.instance_name(key);
        let orphaned = refreshed.orphans.as_deref().unwrap_or_default();
        let written = cache.write_app(
            &app,
            &managed,
            &objects,
            &health,
            &AppShown {
                links: &target.spec.links,
                sensitive_annotations: &sensitive_annotations(&target.argocd_cm),
            },
            orphaned,
        );
        let summary = match written {
            Ok(summary) => serde_json::to_value(summary).ok(),
            Err(e) => {
                tracing::warn!(app = %key, "app-state cache: {e}");
                None
            }
        };
        self.write_cluster_info(&conn, &target.cluster.server, Ok(()))
            .await;
        summary
    }

    /// Writes the info of a cluster this replica owns (of a split cluster, the owner of
    /// its slice 0 alone: `units.rs`): `reached` says whether its last contact succeeded
    /// (the message of the failure otherwise).
    pub(super) async fn write_cluster_info(
        &self,
        conn: &ClusterConn,
        server: &str,
        reached: Result<(), String>,
    ) {
        let Some(cache) = &self.app_state else {
            return;
        };
        if !self.units.writes_cluster_info(conn.cluster_id()) {
            return;
        }
        let now = self.clock.now_rfc3339();
        let versions = match &reached {
            Ok(()) => conn.served_versions().await.ok(),
            Err(_) => None,
        };
        let age = conn.cache_age();
        let reached = match (reached, age) {
            (Err(e), _) => Some(Err(e)),
            (Ok(()), Some(_)) => Some(Ok(())),
            (Ok(()), None) => None,
        };
        let facts = ClusterFacts {
            reached,
            server_version: versions
                .as_ref()
                .map(|v| server_version(&v.git_version))
                .unwrap_or_default(),
            api_versions: versions
                .as_ref()
                .map(|v| v.api_versions.clone())
                .unwrap_or_default(),
            resources_count: conn.cached_objects() as i64,
            apis_count: conn.watched_kinds() as i64,
            last_cache_sync: age.and_then(|age| before(&now, age)),
            applications_count: self.inventory.apps_of_cluster(conn.cluster_id()).len() as i64,
            now,
        };
        if let Err(e) = cache.write_cluster(server, &facts) {
            tracing::warn!(cluster = %server, "app-state cache: {e}");
        }
    }

    /// After a failed refresh: the cluster's info says so when its connection failed.
    pub(super) async fn write_failed_cluster(&self, target: &AppTarget, message: &str) {
        if self.app_state.is_none() {
            return;
        }
        if let Ok(conn) = self.clusters.start(&target.cluster).await
            && conn.check_reachable().await.is_err()
        {
            self.write_cluster_info(&conn, &target.cluster.server, Err(message.to_owned()))
                .await;
        }
    }
}

/// Starts the watches of [`TREE_KINDS`] the cluster serves (not waiting for their lists).
async fn watch_tree_kinds(conn: &ClusterConn) {
    for (api_version, kind) in TREE_KINDS {
        if let Ok(info) = conn.kind_info(api_version, kind).await {
            conn.start_watch(&info);
        }
    }
}

/// The server's `gitVersion` as Argo CD's cluster info shows it: normalised as
/// gitops-engine does (`v1.29.3-gke.100` → `v1.29.3`), or as the server said it when it
/// does not read.
fn server_version(git_version: &str) -> String {
    fleetshard_reposerver::normalize_kube_version(git_version)
        .unwrap_or_else(|_| git_version.to_owned())
}

/// `now` minus `age`, RFC 3339 (seconds).
fn before(now: &str, age: std::time::Duration) -> Option<String> {
    let now: jiff::Timestamp = now.parse().ok()?;
    let span = jiff::SignedDuration::try_from(age).ok()?;
    let at = now.checked_sub(span).ok()?;
    Some(at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
}

/// The app's resources as compared: desired and live objects, hooks included, and the
/// live objects a server-side comparison predicted (`predicted`, by resource).
fn managed_of(r: &Refreshed, predicted: &HashMap<ResourceKey, Arc<Value>>) -> Vec<ManagedResource> {
    let desired: HashMap<&ResourceKey, &Value> =
        r.desired.iter().map(|d| (&d.key, &d.object)).collect();
    let live: HashMap<ResourceKey, &Arc<Value>> = r
        .live
        .iter()
        .filter_map(|v| ResourceKey::of(v).ok().map(|k| (k, v)))
        .collect();
    let version_of = |v: Option<&Value>| {
        v.and_then(|v| v.get("apiVersion"))
            .and_then(Value::as_str)
            .map(|a| a.rsplit_once('/').map_or(a, |(_, v)| v).to_owned())
            .unwrap_or_default()
    };
    let mut out: Vec<ManagedResource> = r
        .comparison
        .resources
        .iter()
        .map(|c| {
            let target = desired.get(&c.key).map(|v| (*v).clone());
            let live = live.get(&c.key).map(|v| crate::live::as_served(v));
            ManagedResource {
                group: c.key.group.clone(),
                version: version_of(target.as_ref().or(live.as_deref())),
                kind: c.key.kind.clone(),
                namespace: c.key.namespace.clone(),
                name: c.key.name.clone(),
                target,
                live,
                normalized_live: None,
                predicted_live: predicted.get(&c.key).map(|v| (**v).clone()),
                modified: c.status == SyncStatus::OutOfSync,
                hook: false,
            }
        })
        .collect();
    let compared: std::collections::HashSet<&ResourceKey> =
        r.comparison.resources.iter().map(|c| &c.key).collect();
    for hook in &r.hooks {
        if compared.contains(&hook.key) {
            continue;
        }
        if let Some(l) = live.get(&hook.key) {
            out.push(ManagedResource {
                group: hook.key.group.clone(),
                version: version_of(Some(l)),
                kind: hook.key.kind.clone(),
                namespace: hook.key.namespace.clone(),
                name: hook.key.name.clone(),
                target: Some(hook.object.clone()),
                live: Some(crate::live::as_served(l)),
                hook: true,
                ..ManagedResource::default()
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{before, server_version};

    #[test]
    fn server_version_and_sync_time_as_argo_cd_shows_them() {
        assert_eq!(server_version("v1.31.2"), "v1.31.2");
        assert_eq!(server_version("v1.29.0-eks-1"), "v1.29.0");
        assert_eq!(
            before("2026-11-30T10:00:00Z", std::time::Duration::from_secs(90)).as_deref(),
            Some("2026-11-30T09:58:30Z")
        );
    }
}
