//! One step of an operation, as the reconciler drives the sync engine
//! ([`fleetshard_sync`]): its inputs made from a refresh at the operation's revision
//! (desired objects digested into [`Manifest`]s, live objects into [`Live`] with their
//! health), its writes made one by one through `apply.rs` (the lease checked before each),
//! and its record carried in `operationState.syncResult.resources`.

use std::collections::HashMap;

use fleetshard_sync::{
    Action, Health, HealthStatus, Live, Manifest, ObjectKey, OperationPhase, Outcome, Record,
    ResultCode, ResultEntry, SyncInput, SyncPhase, Write,
};
use serde_json::Value;

use super::{GitOpsReconciler, Refreshed, SyncResultEntry, guard, place};
use crate::apply::{self, DesiredObject, WriteHow, WriteResult};
use crate::compare::{ResourceKey, SyncStatus, Tracking};
use crate::live::AppConn;

/// A step's inputs, and the desired objects its manifests stand for (same order).
pub(super) struct StepInput {
    pub(super) input: SyncInput,
    pub(super) objects: Vec<DesiredObject>,
    /// Each live object's `apiVersion` (what a delete is sent as).
    pub(super) api_versions: HashMap<ObjectKey, String>,
    /// How what is written is stamped as the app's.
    pub(super) tracking: Tracking,
}

fn object_key(k: &ResourceKey) -> ObjectKey {
    ObjectKey::new(&k.group, &k.kind, &k.namespace, &k.name)
}

/// The reconciler's key of an object the engine names.
pub(super) fn resource_key(k: &ObjectKey) -> ResourceKey {
    ResourceKey::new(&k.group, &k.kind, &k.namespace, &k.name)
}

/// The engine's inputs from `refreshed` (the refresh at the operation's revision), with
/// `settings`.
pub(super) fn build_input(
    refreshed: &Refreshed,
    app_name: &str,
    settings: fleetshard_sync::Settings,
) -> StepInput {
    let differing: HashMap<&ResourceKey, bool> = refreshed
        .comparison
        .resources
        .iter()
        .map(|r| (&r.key, r.status == SyncStatus::OutOfSync))
        .collect();
    let objects: Vec<DesiredObject> = refreshed
        .desired
        .iter()
        .chain(&refreshed.hooks)
        .cloned()
        .collect();
    let manifests = objects
        .iter()
        .map(|d| Manifest {
            key: object_key(&d.key),
            version: d.kind.resource.version.clone(),
            generate_name: d
                .object
                .pointer("/metadata/generateName")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            annotations: guard::annotation_map(&d.object),
            defines: (d.key.group == "apiextensions.k8s.io"
                && d.key.kind == "CustomResourceDefinition")
                .then(|| place::crd_kind(&d.object))
                .flatten()
                .map(|k| (k.resource.group, k.resource.kind)),
            kind_served: !refreshed.unserved.contains(&d.key),
            out_of_sync: differing.get(&d.key).copied(),
        })
        .collect();
    let mut api_versions = HashMap::new();
    let live = refreshed
        .live
        .iter()
        .filter_map(|v| {
            let l = live_object(v, app_name, refreshed)?;
            let api = v
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or_default();
            api_versions.insert(l.key.clone(), api.to_owned());
            Some(l)
        })
        .collect();
    StepInput {
        input: SyncInput {
            manifests,
            live,
            settings,
        },
        objects,
        api_versions,
        tracking: refreshed.tracking.clone(),
    }
}

/// The engine's view of a live object: its annotations, health (`None`: no rule for its
/// kind; argocd-cm's customizations as `read` found them), whether it is being deleted and
/// tracked by `app_name` (as argocd-cm's tracking method says).
pub(super) fn live_object(v: &Value, app_name: &str, read: &Refreshed) -> Option<Live> {
    let key = ResourceKey::of(v).ok()?;
    let api = v
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let h = read.settings.health.assess(Some(v));
    let status = match h.status {
        crate::health::HealthStatus::Healthy => HealthStatus::Healthy,
        crate::health::HealthStatus::Suspended => HealthStatus::Suspended,
        crate::health::HealthStatus::Progressing => HealthStatus::Progressing,
        crate::health::HealthStatus::Missing => HealthStatus::Missing,
        crate::health::HealthStatus::Degraded => HealthStatus::Degraded,
        crate::health::HealthStatus::Unknown => HealthStatus::Unknown,
    };
    Some(Live {
        key: object_key(&key),
        version: api.rsplit_once('/').map_or(api, |(_, v)| v).to_owned(),
        annotations: guard::annotation_map(v),
        deleting: v
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|t| !t.is_null()),
        health: h.checked.then(|| Health::new(status, &h.message)),
        tracked: read.tracking.is_tracked_by(v, app_name),
    })
}

/// The engine's record from `syncResult.resources`.
pub(super) fn record_of(entries: &[SyncResultEntry]) -> Record {
    let results = entries
        .iter()
        .map(|e| ResultEntry {
            key: ObjectKey::new(&e.group, &e.kind, &e.namespace, &e.name),
            version: e.version.clone(),
            status: ResultCode::parse(&e.status),
            hook_type: fleetshard_sync::HookType::parse(&e.hook_type),
            hook_phase: OperationPhase::parse(&e.hook_phase),
            // Entries recorded before phases were (one-step syncs) ran in Sync.
            sync_phase: SyncPhase::parse(&e.sync_phase).unwrap_or(SyncPhase::Sync),
            message: e.message.clone(),
        })
        .collect();
    Record { results }
}

/// `syncResult.resources` from the engine's record.
pub(super) fn entries_of(record: &Record) -> Vec<SyncResultEntry> {
    record
        .results
        .iter()
        .map(|r| SyncResultEntry {
            group: r.key.group.clone(),
            version: r.version.clone(),
            kind: r.key.kind.clone(),
            namespace: r.key.namespace.clone(),
            name: r.key.name.clone(),
            status: r
                .status
                .map(ResultCode::as_str)
                .unwrap_or_default()
                .to_owned(),
            message: r.message.clone(),
            hook_type: r
                .hook_type
                .map(|t| t.as_str())
                .unwrap_or_default()
                .to_owned(),
            hook_phase: r
                .hook_phase
                .map(OperationPhase::as_str)
                .unwrap_or_default()
                .to_owned(),
            sync_phase: r.sync_phase.as_str().to_owned(),
        })
        .collect()
}

/// The writes ran out of lease: nothing more may be written.
pub(super) struct LeaseLapsed;

impl GitOpsReconciler {
    /// Makes `writes` in order; each outcome as the engine takes it.
    pub(super) async fn execute(
        &self,
        conn: &AppConn<'_>,
        app_name: &str,
        step: &StepInput,
        writes: &[Write],
    ) -> Result<Vec<Outcome>, LeaseLapsed> {
        let lease = self.lease.as_ref();
        let mut outcomes = Vec::with_capacity(writes.len());
        for w in writes {
            let result = match &w.action {
                Action::Apply {
                    manifest,
                    dry_run,
                    replace,
                    force,
                    validate,
                    hook_attempt,
                } => {
                    let how = WriteHow {
                        dry_run: *dry_run,
                        replace: *replace,
                        force: *force,
                        validate: *validate,
                        hook_attempt: hook_attempt.clone(),
                    };
                    let d = &step.objects[*manifest];
                    let stamp = (&step.tracking, app_name);
                    apply::apply_object(conn, stamp, d, &w.key.name, &how, lease).await
                }
                Action::ApplyNamespace {
                    dry_run,
                    labels,
                    annotations,
                } => {
                    apply::apply_namespace(conn, &w.key.name, labels, annotations, *dry_run, lease)
                        .await
                }
                Action::Delete { propagation } => {
                    let api = step.api_versions.get(&w.key).cloned().unwrap_or_else(|| {
                        step.objects
                            .iter()
                            .find(|d| d.key.group == w.key.group && d.key.kind == w.key.kind)
                            .map(|d| d.kind.resource.api_version.clone())
                            .unwrap_or_else(|| "v1".to_owned())
                    });
                    let key = resource_key(&w.key);
                    let dry = step.input.settings.dry_run;
                    apply::delete_object(conn, &key, &api, propagation.as_str(), dry, lease).await
                }
            };
            outcomes.push(match result {
                WriteResult::Done(m) => Outcome::Done(m),
                WriteResult::Gone => Outcome::Gone,
                WriteResult::Failed(m) => Outcome::Failed(m),
                WriteResult::LeaseLapsed => return Err(LeaseLapsed),
            });
        }
        Ok(outcomes)
    }
}
