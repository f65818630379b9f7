//! The refresh: desired state rendered and placed, live state read, the resources compared
//! and their health assessed, recorded as the app's status. Hooks are set apart: never
//! compared, never pruned, shown (when live) as Argo CD shows them (`hook: true`); objects
//! marked `Skip` are neither compared nor pruned.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use fleetshard_controller::{AppKey, ReconcileError};
use fleetshard_manifest::{RefreshRequest, RefusalKind};
use serde_json::Value;

use super::lifecycle::DELETION_ERROR;
use super::memo::{DeletionHooks, KeptOperation};
use super::problem::{COMPARISON_ERROR, Problem};
use super::report::AppReport;
use super::role::{Role, role};
use super::{
    AppTarget, ComparisonStatus, Condition, GitOpsReconciler, HealthInfo, Refreshed, ResourceEntry,
    StatusUpdate, SyncInfo, customize, guard, memo, orphans, place, render, sync_word,
};
use crate::apply::{DesiredObject, PruneTarget, handover_patch};
use crate::compare::{CompareOptions, ResourceKey, SyncStatus, Tracking, compare_app_normalized};
use crate::health::app_health;
use crate::live::KindInfo;
use crate::source::Refresh;

/// The condition an object of a kind argocd-cm's resource filter excludes shows (Argo CD's).
pub const EXCLUDED_RESOURCE_WARNING: &str = "ExcludedResourceWarning";

/// The condition a credential template matched beyond a path boundary shows
/// (fleetshard's own type; Argo CD shows any `…Warning` condition as a warning).
pub const REPO_CREDENTIALS_WARNING: &str = "RepoCredentialsWarning";

impl GitOpsReconciler {
    /// Reads desired and live state and compares them.
    pub(super) async fn compare(
        &self,
        key: &AppKey,
        target: &AppTarget,
        refresh: Refresh,
    ) -> Result<(Refreshed, ComparisonStatus), Problem> {
        self.check_refusals(key, target)?;
        // Before anything is read: a repository the project does not permit is not fetched.
        self.check_project(target)?;
        let dest_ns = place::destination_namespace(target);
        let app_name = self.instance_name(key);
        let render::RenderedApp {
            rendered,
            sources: per_source,
            warnings: credential_warnings,
        } = self
            .render_source(target, &dest_ns, &app_name, refresh)
            .await?;
        let manifests = &rendered.manifests;
        let revision = Some(manifests.commit.clone());
        let with_rev = |mut p: Problem| {
            p.revision.clone_from(&revision);
            p
        };
        // How this Argo CD instance tracks objects (argocd-cm, followed live).
        let tracking = Tracking::from_argocd_cm(&target.argocd_cm);
        self.clusters.set_instance_label_key(&tracking.label_key);
        let comparison_error =
            |message: String| with_rev(Problem::permanent(COMPARISON_ERROR, message));
        let settings = self
            .customizations
            .settings(&target.argocd_cm)
            .map_err(comparison_error)?;
        let normalizer = settings
            .normalizer(&target.spec.ignore_differences)
            .map_err(comparison_error)?;
        let conn = self
            .clusters
            .start(&target.cluster)
            .await
            .map_err(|e| with_rev(e.into()))?;
        conn.check_reachable()
            .await
            .map_err(|e| with_rev(e.into()))?;
        // Whether this is the cluster fleetshard runs in, settled before any resource is
        // checked against the project (its control plane is guarded).
        conn.recognise_control_plane().await;
        let defined = place::defined_kinds(&manifests.objects);
        // Each object placed, with its role; the kinds served, to watch.
        let mut placed = Vec::with_capacity(manifests.objects.len());
        let mut kinds: Vec<KindInfo> = Vec::new();
        let resource_filter = &settings.customizations.resource_filter;
        conn.set_resource_filter(Arc::new(resource_filter.clone()));
        // Objects of kinds argocd-cm excludes on this cluster: left out of the app, each
        // named in an ExcludedResourceWarning condition, as Argo CD does.
        let mut excluded = Vec::new();
        for m in &manifests.objects {
            let role = role(&m.object);
            if role == Role::Ignored {
                continue;
            }
            let text = |field: &str| m.object.get(field).and_then(Value::as_str);
            let group = text("apiVersion")
                .and_then(|v| v.split_once('/'))
                .map_or("", |(group, _)| group);
            let kind = text("kind").unwrap_or_default();
            if resource_filter.is_excluded(group, kind, &target.cluster.server) {
                let name = m.object.pointer("/metadata/name").and_then(Value::as_str);
                // Argo CD's message (its `group/Kind name`).
                excluded.push(format!(
                    "Resource {group}/{kind} {} is excluded in the settings",
                    name.unwrap_or_default()
                ));
                continue;
            }
            let mut p = self
                .place(&conn, target, m, &dest_ns, &defined)
                .await
                .map_err(&with_rev)?;
            // Stamped as Argo CD stamps them (its repo-server already did for its renders):
            // compared and applied so (a hook named by the sync is stamped again then).
            tracking.stamp(&mut p.object, &app_name, &p.key);
            if p.served && !kinds.contains(&p.kind) {
                kinds.push(p.kind.clone());
            }
            placed.push((role, p));
        }
        let repeated = place::keep_last(&mut placed, |(_, p)| &p.key);
        conn.keep_managers(normalizer.trusted_managers());
        conn.set_update_filter(settings.update_filter.clone());
        let objects = placed.iter().map(|(_, p)| p);
        self.reach(&conn, &target.cluster.id, &dest_ns, &kinds, objects);
        conn.watch_kinds(&kinds)
            .await
            .map_err(|e| with_rev(e.into()))?;
        let keys: HashSet<ResourceKey> = placed
            .iter()
            .filter(|(_, p)| !p.key.name.is_empty())
            .map(|(_, p)| p.key.clone())
            .collect();
        let live = conn.live_objects(&app_name, &keys, &tracking);
        let live_by_key: HashMap<ResourceKey, &Value> = live
            .iter()
            .filter_map(|v| ResourceKey::of(v).ok().map(|k| (k, v.as_ref())))
            .collect();
        let is_live_hook = |v: &Value| fleetshard_sync::is_hook(&guard::annotation_map(v));
        // Compared: resources and skipped objects (whose live objects are thereby not
        // pruned); never hooks, desired or live.
        let compared: Vec<&Value> = placed
            .iter()
            .filter(|(r, _)| matches!(r, Role::Resource | Role::Skip))
            .map(|(_, p)| &p.object)
            .collect();
        let mut compared_values: Vec<Value> = compared.into_iter().cloned().collect();
        if self.compares_server_side(target) {
            // Server-side diff: each live resource compared with what the cluster predicts.
            let resources = placed
                .iter()
                .filter(|(r, p)| *r == Role::Resource && p.served && !p.key.name.is_empty())
                .filter_map(|(_, p)| {
                    let live = live_by_key.get(&p.key)?;
                    Some((&p.key, &p.kind, &p.object, *live))
                })
                .collect();
            let mut predicted = self
                .predicted_live(key, &conn, target, refresh, resources)
                .await
                .map_err(comparison_error)?;
            for value in &mut compared_values {
                if let Some(p) = ResourceKey::of(value)
                    .ok()
                    .and_then(|k| predicted.remove(&k))
                {
                    *value = p;
                }
            }
        } else {
            self.forget_predictions(key);
        }
        let live_resources: Vec<Arc<Value>> =
            live.iter().filter(|v| !is_live_hook(v)).cloned().collect();
        let opts = CompareOptions::new(&app_name)
            .with_destination_namespace(&dest_ns)
            .with_tracking(tracking.clone());
        let mut comparison =
            compare_app_normalized(&compared_values, &live_resources, &opts, &normalizer)
                .map_err(|e| comparison_error(format!("comparing {key}: {e}")))?;
        let skipped: HashSet<&ResourceKey> = placed
            .iter()
            .filter(|(r, _)| *r == Role::Skip)
            .map(|(_, p)| &p.key)
            .collect();
        comparison.resources.retain(|r| !skipped.contains(&r.key));
        comparison.status = if comparison
            .resources
            .iter()
            .all(|r| r.status == SyncStatus::Synced || r.extraneous_ignored)
        {
            SyncStatus::Synced
        } else {
            SyncStatus::OutOfSync
        };
        let desired_version: HashMap<&ResourceKey, &str> = placed
            .iter()
            .map(|(_, p)| (&p.key, p.kind.resource.version.as_str()))
            .collect();
        let wave_of: HashMap<&ResourceKey, i64> = placed
            .iter()
            .map(|(_, p)| {
                (
                    &p.key,
                    fleetshard_sync::wave(&guard::annotation_map(&p.object)),
                )
            })
            .collect();
        let mut healths = Vec::with_capacity(comparison.resources.len());
        let mut resources = Vec::with_capacity(comparison.resources.len());
        let mut prune = Vec::new();
        let mut shared = Vec::new();
        for r in &comparison.resources {
            let live = live_by_key.get(&r.key).copied();
            let (health, counted) = customize::resource_health(&settings.health, &r.key, live);
            let live_api = live
                .and_then(|v| v.get("apiVersion"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            let version = desired_version
                .get(&r.key)
                .copied()
                .unwrap_or_else(|| live_api.rsplit_once('/').map_or(live_api, |(_, v)| v));
            if r.requires_pruning {
                // Pruning is a write too: never outside the project.
                self.check_resource(target, &r.key).map_err(&with_rev)?;
                prune.push(PruneTarget {
                    key: r.key.clone(),
                    api_version: live_api.to_owned(),
                    keep: live.and_then(guard::keep_reason),
                });
            } else if let Some(owner) = live
                .and_then(|l| tracking.app_of(l))
                .filter(|owner| *owner != app_name)
            {
                shared.push(format!(
                    "{}/{} {} is part of applications {app_name} and {owner}",
                    r.key.kind, r.key.namespace, r.key.name
                ));
            }
            let sync_wave = live
                .filter(|_| r.requires_pruning)
                .map(|l| fleetshard_sync::wave(&guard::annotation_map(l)))
                .or_else(|| wave_of.get(&r.key).copied())
                .unwrap_or(0);
            resources.push(ResourceEntry {
                group: r.key.group.clone(),
                version: version.to_owned(),
                kind: r.key.kind.clone(),
                namespace: r.key.namespace.clone(),
                name: r.key.name.clone(),
                status: sync_word(r.status).to_owned(),
                health: HealthInfo::of(&health),
                requires_pruning: r.requires_pruning,
                hook: false,
                sync_wave,
            });
            healths.push(counted);
        }
        // Live hooks, shown as Argo CD shows them: no status, never counted as OutOfSync.
        for l in live
            .iter()
            .filter(|v| is_live_hook(v) && tracking.is_tracked_by(v, &app_name))
        {
            let Ok(k) = ResourceKey::of(l) else { continue };
            let api = l
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let (health, _) = customize::resource_health(&settings.health, &k, Some(l));
            resources.push(ResourceEntry {
                group: k.group.clone(),
                version: api.rsplit_once('/').map_or(api, |(_, v)| v).to_owned(),
                kind: k.kind.clone(),
                namespace: k.namespace.clone(),
                name: k.name.clone(),
                status: String::new(),
                health: HealthInfo::of(&health),
                requires_pruning: false,
                hook: true,
                sync_wave: fleetshard_sync::wave(&guard::annotation_map(l)),
            });
        }
        let orphans = {
            let app = orphans::AppObjects {
                app_name: &app_name,
                desired: placed.iter().map(|(_, p)| &p.key).collect(),
                live: &live,
                tracking: &tracking,
                settings: &settings,
            };
            self.orphans(key, target, &conn, &app)
                .await
                .map_err(|e| with_rev(e.into()))?
        };
        let mut conditions = Vec::new();
        let now = self.clock.now_rfc3339();
        let resources_desired = placed.iter().any(|(r, _)| *r == Role::Resource);
        if let Some(auto) = target.spec.auto_sync
            && !resources_desired
            && !auto.allow_empty
            && !prune.is_empty()
        {
            conditions.push(Condition {
                kind: "SyncError".to_owned(),
                message: format!(
                    "automated sync refused: {} renders no objects and would prune every \
                     resource of the app; set spec.syncPolicy.automated.allowEmpty to allow it",
                    target.spec.source.path
                ),
                last_transition_time: now.clone(),
            });
        }
        if !shared.is_empty() {
            conditions.push(Condition {
                kind: "SharedResourceWarning".to_owned(),
                message: shared.join("; "),
                last_transition_time: now.clone(),
            });
        }
        let warnings = (excluded.into_iter().map(|m| (EXCLUDED_RESOURCE_WARNING, m))).chain(
            repeated
                .into_iter()
                .map(|m| (place::REPEATED_RESOURCE_WARNING, m)),
        );
        for (kind, message) in warnings {
            conditions.push(Condition {
                kind: kind.to_owned(),
                message,
                last_transition_time: now.clone(),
            });
        }
        conditions.extend(orphans::orphans_condition(target, orphans.as_deref(), &now));
        if !credential_warnings.is_empty() {
            conditions.push(Condition {
                kind: REPO_CREDENTIALS_WARNING.to_owned(),
                message: credential_warnings.join("; "),
                last_transition_time: now.clone(),
            });
        }
        let status = ComparisonStatus {
            sync: SyncInfo {
                status: sync_word(comparison.status).to_owned(),
                // A multi-source app's revisions are listed one per source.
                revision: revision.filter(|_| per_source.is_empty()),
                revisions: per_source.iter().map(|(r, _)| r.clone()).collect(),
                compared_to: None,
                compared_before: None,
            },
            health: HealthInfo {
                status: app_health(&healths).to_string(),
                message: String::new(),
                last_transition_time: None,
            },
            resources,
            reconciled_at: now,
            conditions,
            source_type: per_source
                .is_empty()
                .then(|| rendered.source_type.as_str().to_owned()),
            source_types: per_source
                .iter()
                .map(|(_, t)| t.as_str().to_owned())
                .collect(),
            summary: None,
            controller_namespace: String::new(),
            refresh_done: false,
        };
        let unserved = placed
            .iter()
            .filter(|(_, p)| !p.served)
            .map(|(_, p)| p.key.clone())
            .collect();
        let (mut desired, mut hooks) = (Vec::new(), Vec::new());
        let mut deletion_hooks = DeletionHooks::default();
        let respect = target.spec.respects_ignore_differences();
        for (role, p) in placed {
            let live = live_by_key.get(&p.key).copied();
            let object = DesiredObject {
                handover: live.and_then(handover_patch),
                object: match live {
                    // RespectIgnoreDifferences: the ignored fields are synced as they are live.
                    Some(live) if respect && role == Role::Resource => {
                        normalizer.respect(p.key.object_ref(), &p.object, live)
                    }
                    _ => p.object,
                },
                key: p.key,
                kind: p.kind,
            };
            match role {
                Role::Resource | Role::Skip => desired.push(object),
                Role::Hook => hooks.push(object),
                Role::Deletion { pre, post } => {
                    if pre {
                        deletion_hooks.pre.push(object.clone());
                    }
                    if post {
                        deletion_hooks.post.push(object);
                    }
                }
                Role::Ignored => {}
            }
        }
        let refreshed = Refreshed {
            commit: manifests.commit.clone(),
            revisions: per_source.iter().map(|(r, _)| r.clone()).collect(),
            cluster: target.cluster.id.clone(),
            desired,
            hooks,
            unserved,
            prune,
            comparison,
            live,
            shared,
            deletion_hooks,
            tracking,
            settings,
            orphans,
        };
        Ok((refreshed, status))
    }

    pub(super) async fn do_refresh(&self, key: &AppKey) -> Result<(), ReconcileError> {
        let began = tokio::time::Instant::now();
        let Some(target) = self.inventory.target(key) else {
            if let Some(unresolved) = self.inventory.unresolved(key) {
                return self.refresh_unresolved(key, &unresolved).await;
            }
            self.memos().remove(key);
            // A deleted app looks for orphans nowhere.
            self.clusters.stop_looking(&self.instance_name(key), None);
            return Ok(());
        };
        if target.spec.lifecycle.skip_reconcile {
            // Argo CD does not process the app at all while it says so.
            return Ok(());
        }
        self.record_unrecorded(key).await?;
        self.learn_recorded(key).await;
        // As Argo CD: a refresh annotation, or the first comparison after the source
        // changed, resolves the revision again; a hard one renders again too.
        // Kept as its compact text: a `Value` costs several times as much, for every app.
        let source_now: Box<str> = serde_json::json!([
            target.spec.source.raw,
            target
                .spec
                .sources
                .iter()
                .map(|s| &s.raw)
                .collect::<Vec<_>>()
        ])
        .to_string()
        .into();
        // A hard refresh asked for by the annotation is served once per request: the status
        // write removes the annotation (Kubernetes), but a fleet file keeps it, and a watch
        // may still show it on the next refresh. `timeout.hard.reconciliation` asks for
        // one when the last is that old. This owner's first comparison of the app resolves
        // from data fetched since it took the cluster over (`owned_since`).
        let refresh = {
            let now = tokio::time::Instant::now();
            let mut memos = self.memos();
            let m = memos.entry(key.clone()).or_default();
            let asked = target.spec.refresh.filter(|_| !m.hard_refresh_served);
            m.hard_refresh_served = target.spec.refresh.is_some();
            let first = m.compared_source.is_none();
            let changed = m
                .compared_source
                .as_ref()
                .is_some_and(|before| *before != source_now);
            m.compared_source = Some(source_now);
            let due = self.config.hard_refresh.is_some_and(|every| {
                m.hard_at
                    .is_none_or(|at| now.saturating_duration_since(at) >= every)
            });
            if due && m.hard_at.is_none() {
                // The first refresh of an owner starts the count (no hard refresh storm
                // on a start or a move).
                m.hard_at = Some(now);
            }
            if asked == Some(RefreshRequest::Hard) || (due && m.hard_at != Some(now)) {
                m.hard_at = Some(now);
                Refresh::Hard
            } else if asked.is_some() || changed {
                Refresh::Resolve
            } else if first {
                Refresh::ResolvedSince(self.owned_since(&self.unit_of(key, &target.cluster.id)))
            } else {
                Refresh::Normal
            }
        };
        let (last, mut status, problem) = match self.compare(key, &target, refresh).await {
            Ok((refreshed, status)) => {
                self.align_deletion_hook_finalizers(key, &target, &refreshed.deletion_hooks)
                    .await?;
                let mut status = status;
                status.summary = self.write_app_state(key, &target, &refreshed).await;
                (
                    Some(Arc::new(memo::LastRefresh::of(refreshed))),
                    status,
                    None,
                )
            }
            Err(problem) => {
                self.write_failed_cluster(&target, &problem.message).await;
                (
                    None,
                    problem.status(self.clock.now_rfc3339()),
                    Some(problem),
                )
            }
        };
        let (sync_error, deletion_error) = {
            let mut memos = self.memos();
            let m = memos.entry(key.clone()).or_default();
            m.cluster.clone_from(&target.cluster.id);
            m.unresolved = false;
            m.last = last;
            status.health.last_transition_time = memo::health_transition(
                &mut m.health_since,
                &status.health.status,
                &status.reconciled_at,
            );
            (m.sync_error.clone(), m.deletion_error.clone())
        };
        status.refresh_done = target.spec.refresh.is_some();
        // What was compared, and the controller's namespace, whatever the outcome (as
        // Argo CD records them).
        let compared = super::compared::compared_to(&target);
        status.sync.compared_before = self
            .memos()
            .get(key)
            .and_then(|m| m.compared_written.as_deref().map(serde_json::from_str))
            .and_then(Result::ok);
        status.sync.compared_to = Some(compared.clone());
        status
            .controller_namespace
            .clone_from(&self.config.control_plane_namespace);
        let kept = [
            (RefusalKind::Sync.condition_type(), sync_error),
            (DELETION_ERROR, deletion_error),
        ];
        for (kind, message) in kept {
            if let Some(message) = message {
                status.conditions.push(Condition {
                    kind: kind.to_owned(),
                    message,
                    last_transition_time: status.reconciled_at.clone(),
                });
            }
        }
        if let Some(m) = self.memos().get_mut(key) {
            let in_operation = m.op.as_ref().is_some_and(KeptOperation::in_progress);
            // A failed refresh keeps the count of the last one that looked.
            let orphaned = match &m.last {
                Some(last) => last.orphans.unwrap_or(0),
                None => m.report.as_ref().map_or(0, |r| r.orphaned_resources),
            };
            let mut report = AppReport::of(&target, &status, in_operation);
            report.orphaned_resources = orphaned;
            m.report = Some(Box::new(report));
            m.activity.refreshed(began.elapsed());
        }
        self.record(key, StatusUpdate::Comparison(Box::new(status)))
            .await?;
        if let Some(m) = self.memos().get_mut(key) {
            m.compared_written = Some(compared.to_string().into());
        }
        self.acquisitions
            .compared(&self.unit_of(key, &target.cluster.id), key);
        match problem {
            Some(Problem {
                retry_after: Some(after),
                message,
                ..
            }) => Err(ReconcileError::RetryAfter {
                reason: message,
                after,
            }),
            _ => Ok(()),
        }
    }
}
