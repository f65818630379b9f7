//! Orphaned resources, when the app's AppProject sets `orphanedResources` (Argo CD's
//! `getResourceTree`): the top-level objects (no owner reference) of the app's
//! destination namespace that are not the app's, whose kind the project's namespaced
//! resource lists permit, not ignored (`ignore` entries and the objects every namespace
//! holds, `OrphanedResources::ignores`), and not tracked by an application that exists;
//! then their descendants (ReplicaSets, Pods…) under the same rules. They are the tree's
//! `orphanedNodes`, counted in an `OrphanedResourceWarning` condition when the project
//! sets `warn: true`, and in `argocd_app_orphaned_resources_count`. A project without
//! the setting costs nothing: its apps' namespaces are not looked in.

use std::collections::HashSet;
use std::sync::Arc;

use fleetshard_appstate::{HealthStatus, ResourceNode, orphaned_nodes};
use fleetshard_controller::AppKey;
use fleetshard_manifest::project::ResourceRef;
use serde_json::Value;

use super::customize::{self, Settings};
use super::{AppTarget, Condition, GitOpsReconciler, HealthInfo};
use crate::compare::{ResourceKey, Tracking};
use crate::live::{ClusterConn, LiveError};

/// The condition an app with orphaned resources shows when its project warns (Argo CD's).
pub const ORPHANED_RESOURCE_WARNING: &str = "OrphanedResourceWarning";

/// What the app's own resources are, for [`GitOpsReconciler::orphans`].
pub(super) struct AppObjects<'a> {
    /// The app's instance name.
    pub(super) app_name: &'a str,
    /// The keys of the app's desired objects, hooks included.
    pub(super) desired: HashSet<&'a ResourceKey>,
    /// The live objects the app compared or tracks.
    pub(super) live: &'a [Arc<Value>],
    /// How objects are tracked.
    pub(super) tracking: &'a Tracking,
    /// argocd-cm's settings (health checks).
    pub(super) settings: &'a Settings,
}

impl GitOpsReconciler {
    /// The app's orphaned nodes, sorted as Argo CD sorts them: `None` when its project
    /// does not ask (its namespace is then not looked in, or no longer).
    pub(super) async fn orphans(
        &self,
        key: &AppKey,
        target: &AppTarget,
        conn: &ClusterConn,
        app: &AppObjects<'_>,
    ) -> Result<Option<Vec<ResourceNode>>, LiveError> {
        let asked = target
            .project
            .as_deref()
            .and_then(|p| Some((p, p.orphaned_resources.as_ref()?)));
        // Its other clusters (an app moved) are not looked in for it any more.
        self.clusters
            .stop_looking(app.app_name, Some(conn.cluster_id()));
        let Some((project, settings)) = asked else {
            conn.stop_looking(app.app_name);
            return Ok(None);
        };
        // An app without a destination namespace has none (Argo CD looks at namespace "",
        // where only cluster-scoped objects are, and counts none of them).
        let namespace = target.app.destination.namespace.as_deref().unwrap_or("");
        if namespace.is_empty() {
            conn.stop_looking(app.app_name);
            return Ok(Some(Vec::new()));
        }
        let found = conn.namespace_objects(app.app_name, namespace).await?;
        if !found.unlisted.is_empty() {
            tracing::warn!(
                app = %key,
                kinds = %found.unlisted.join("; "),
                "orphaned resources: kinds left out, their first list has not completed"
            );
        }
        let mine: HashSet<ResourceKey> = app
            .live
            .iter()
            .filter_map(|v| ResourceKey::of(v).ok())
            .chain(app.desired.iter().map(|k| (*k).clone()))
            .collect();
        let permitted = |v: &Value| {
            ResourceKey::of(v).is_ok_and(|k| {
                project.permits_namespaced_kind(&ResourceRef {
                    group: &k.group,
                    kind: &k.kind,
                    namespace: &k.namespace,
                    name: &k.name,
                })
            })
        };
        let is_root = |v: &Value| {
            let top_level = v.pointer("/metadata/ownerReferences").is_none_or(is_empty);
            let candidate = ResourceKey::of(v).is_ok_and(|k| {
                !mine.contains(&k) && !settings.ignores(&k.group, &k.kind, &k.namespace, &k.name)
            });
            top_level && candidate && permitted(v)
        };
        let roots: Vec<Arc<Value>> = found
            .objects
            .iter()
            .filter(|v| is_root(v.as_ref()))
            .cloned()
            .collect();
        let keep = |v: &Value| permitted(v) && !self.tracked_by_another_app(app.tracking, v);
        let health = |v: &Value| node_health(app.settings, v);
        Ok(Some(orphaned_nodes(&roots, &found.objects, &keep, &health)))
    }

    /// Whether `obj` is tracked by an application that exists (any shard's).
    fn tracked_by_another_app(&self, tracking: &Tracking, obj: &Value) -> bool {
        tracking.app_of(obj).is_some_and(|instance| {
            self.config
                .apps_of_instance(instance)
                .iter()
                .any(|k| self.inventory.target(k).is_some())
        })
    }
}

fn is_empty(refs: &Value) -> bool {
    refs.as_array().is_none_or(Vec::is_empty)
}

/// The health a tree node shows for `obj` (none where no check assesses it).
pub(super) fn node_health(settings: &Settings, obj: &Value) -> Option<HealthStatus> {
    let k = ResourceKey::of(obj).ok()?;
    let (shown, _) = customize::resource_health(&settings.health, &k, Some(obj));
    let info = HealthInfo::of(&shown);
    (!info.status.is_empty()).then_some(HealthStatus {
        status: info.status,
        message: info.message,
    })
}

/// The app's `OrphanedResourceWarning`, when it has orphans and its project warns.
pub(super) fn orphans_condition(
    target: &AppTarget,
    orphans: Option<&[ResourceNode]>,
    now: &str,
) -> Option<Condition> {
    let warns = target
        .project
        .as_deref()
        .and_then(|p| p.orphaned_resources.as_ref())
        .is_some_and(|o| o.warns());
    let count = orphans.map_or(0, <[ResourceNode]>::len);
    (warns && count > 0).then(|| Condition {
        kind: ORPHANED_RESOURCE_WARNING.to_owned(),
        message: format!("Application has {count} orphaned resources"),
        last_transition_time: now.to_owned(),
    })
}
