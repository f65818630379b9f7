//! An Application being deleted (`metadata.deletionTimestamp`), as Argo CD's controller
//! finalizes it (`finalizeApplicationDeletion`), one step per operation:
//!
//! 1. With `resources-finalizer.argocd.argoproj.io` (or its `/foreground`, `/background`
//!    forms): the live objects the app tracks are deleted highest sync wave first, a wave
//!    at a time once the previous is gone ([`fleetshard_sync::deletion`]), then the
//!    finalizer is removed. Only objects the project permits are deleted; nothing is
//!    deleted, and the finalizer stays, until a refresh of this owner has read the app's
//!    live state (so an unreadable source never leaves objects behind unseen).
//! 2. With `post-delete-finalizer.argocd.argoproj.io`: the app's PostDelete hooks are
//!    created and waited for; a failed one is deleted and the step retried; once all
//!    succeeded the finalizer goes. With its `/cleanup` form the hooks are then deleted by
//!    their policy (no policy: deleted).
//!
//! Every delete goes through the lease check and the write deadline, like the sync's.

use std::collections::HashSet;

use fleetshard_controller::{AppKey, Operated, ReconcileError};
use fleetshard_sync::deletion::{
    self, CascadeStep, POST_DELETE_CLEANUP_FINALIZER, POST_DELETE_FINALIZER,
};
use fleetshard_sync::{DeletePolicy, HealthStatus, Live, ObjectKey, SyncOptions};
use serde_json::Value;

use super::step::{live_object, resource_key};
use super::{AppTarget, GitOpsReconciler};
use crate::apply::{self, WriteHow, WriteResult};
use crate::live::ClusterConn;
use crate::source::Refresh;

/// How long a deletion waits before looking again.
const DELETION_POLL: std::time::Duration = std::time::Duration::from_secs(2);

fn lapsed() -> ReconcileError {
    ReconcileError::RetryLater("the shard lease lapsed during a deletion".into())
}

impl GitOpsReconciler {
    /// One step of the deletion of the app (see the module documentation).
    pub(super) async fn finalize_deletion(
        &self,
        key: &AppKey,
        target: &AppTarget,
    ) -> Result<Operated, ReconcileError> {
        let finalizers = &target.spec.lifecycle.finalizers;
        let has = |f: &str| finalizers.iter().any(|x| x == f);
        let cascade = finalizers.iter().find(|f| deletion::is_cascade(f));
        if cascade.is_none() && !has(POST_DELETE_FINALIZER) && !has(POST_DELETE_CLEANUP_FINALIZER) {
            // Another controller's finalizers, or none: nothing of ours to do.
            return Ok(Operated::Idle);
        }
        // The app's live state as this owner reads it now (and the PostDelete hooks).
        let refreshed = match self.compare(key, target, Refresh::Normal).await {
            Ok((refreshed, _)) => refreshed,
            Err(p) => {
                return Err(ReconcileError::RetryLater(format!(
                    "deleting {key}: its state cannot be read, nothing is deleted yet: {}",
                    p.message
                )));
            }
        };
        let app_name = self.instance_name(key);
        let conn = self
            .clusters
            .start(&target.cluster)
            .await
            .map_err(|e| ReconcileError::RetryLater(e.to_string()))?;
        let live: Vec<(Live, String)> = refreshed
            .live
            .iter()
            .filter_map(|v| {
                let api = v.get("apiVersion").and_then(Value::as_str)?.to_owned();
                Some((live_object(v, &app_name, &refreshed)?, api))
            })
            .filter(|(l, _)| self.check_resource(target, &resource_key(&l.key)).is_ok())
            .collect();
        if let Some(finalizer) = cascade {
            let objects: Vec<Live> = live.iter().map(|(l, _)| l.clone()).collect();
            let options = SyncOptions(target.spec.policy.sync_options.clone());
            let confirmed = self.deletion_confirmed(target);
            let self_key = ObjectKey::new(
                "argoproj.io",
                "Application",
                &target.app.namespace,
                &target.app.name,
            );
            match deletion::cascade(&objects, &options, finalizer, confirmed, Some(&self_key)) {
                CascadeStep::Wait(why) => {
                    tracing::info!(app = %key, %why, "deletion waits");
                    return Ok(Operated::Wait(DELETION_POLL));
                }
                CascadeStep::Delete { keys, propagation } => {
                    for k in &keys {
                        let api = live
                            .iter()
                            .find(|(l, _)| l.key == *k)
                            .map_or("v1", |(_, a)| a.as_str());
                        let r = apply::delete_object(
                            &conn,
                            &resource_key(k),
                            api,
                            propagation.as_str(),
                            false,
                            self.lease.as_ref(),
                        )
                        .await;
                        match r {
                            WriteResult::LeaseLapsed => return Err(lapsed()),
                            WriteResult::Failed(why) => {
                                return Err(ReconcileError::RetryLater(format!(
                                    "deleting {k}: {why}"
                                )));
                            }
                            WriteResult::Done(_) | WriteResult::Gone => {}
                        }
                    }
                    return Ok(Operated::Wait(DELETION_POLL));
                }
                CascadeStep::Done => {
                    let remove: Vec<String> = finalizers
                        .iter()
                        .filter(|f| deletion::is_cascade(f))
                        .cloned()
                        .collect();
                    self.change_finalizers(key, &[], &remove).await?;
                    return Ok(Operated::Finished);
                }
            }
        }
        let hooks: Vec<&(Live, String)> = live
            .iter()
            .filter(|(l, _)| {
                fleetshard_sync::is_deletion_hook(
                    &l.annotations,
                    fleetshard_sync::DeletionHook::PostDelete,
                )
            })
            .collect();
        if has(POST_DELETE_FINALIZER) {
            // Create the PostDelete hooks not live yet, then wait for them all.
            let running: HashSet<&ObjectKey> = hooks.iter().map(|(l, _)| &l.key).collect();
            let mut created = false;
            for d in &refreshed.post_delete {
                let mut name = d.key.name.clone();
                if name.is_empty() {
                    let prefix = d
                        .object
                        .pointer("/metadata/generateName")
                        .and_then(Value::as_str)
                        .unwrap_or("hook-");
                    name = format!("{prefix}post-delete");
                }
                let k = ObjectKey::new(&d.key.group, &d.key.kind, &d.key.namespace, &name);
                if running.contains(&k) {
                    continue;
                }
                let how = WriteHow {
                    validate: true,
                    ..WriteHow::default()
                };
                match apply::apply_object(
                    &conn,
                    (&refreshed.tracking, &app_name),
                    d,
                    &name,
                    &how,
                    self.lease.as_ref(),
                )
                .await
                {
                    WriteResult::LeaseLapsed => return Err(lapsed()),
                    WriteResult::Failed(why) => {
                        return Err(ReconcileError::RetryLater(format!(
                            "PostDelete hook {k}: {why}"
                        )));
                    }
                    WriteResult::Done(_) | WriteResult::Gone => created = true,
                }
            }
            if created {
                return Ok(Operated::Wait(DELETION_POLL));
            }
            let failed: Vec<&&(Live, String)> = hooks
                .iter()
                .filter(|(l, _)| {
                    l.health
                        .as_ref()
                        .is_some_and(|h| h.status == HealthStatus::Degraded)
                })
                .collect();
            if !failed.is_empty() {
                // Deleted, to be created again (possibly fixed) at the next step.
                for (l, api) in &failed {
                    self.delete_hook(&conn, l, api).await?;
                }
                let names: Vec<String> = failed.iter().map(|(l, _)| l.key.to_string()).collect();
                return Err(ReconcileError::RetryLater(format!(
                    "PostDelete hook(s) failed: {}",
                    names.join(", ")
                )));
            }
            let progressing = hooks.iter().any(|(l, _)| {
                l.health.as_ref().is_some_and(|h| {
                    matches!(
                        h.status,
                        HealthStatus::Progressing | HealthStatus::Suspended
                    )
                })
            });
            if progressing {
                return Ok(Operated::Wait(DELETION_POLL));
            }
            self.change_finalizers(key, &[], &[POST_DELETE_FINALIZER.to_owned()])
                .await?;
            return Ok(Operated::Finished);
        }
        // `/cleanup`: the hooks deleted by their policy, then the finalizer goes.
        let worst = hooks
            .iter()
            .filter_map(|(l, _)| l.health.as_ref().map(|h| h.status))
            .max()
            .unwrap_or(HealthStatus::Healthy);
        let mut pending = false;
        for (l, api) in &hooks {
            let policies = fleetshard_sync::delete_policies(&l.annotations);
            let explicit =
                fleetshard_sync::csv(&l.annotations, fleetshard_sync::HOOK_DELETE_POLICY).len()
                    + fleetshard_sync::csv(
                        &l.annotations,
                        fleetshard_sync::HELM_HOOK_DELETE_POLICY,
                    )
                    .len();
            let delete = explicit == 0
                || (policies.contains(&DeletePolicy::HookFailed)
                    && worst == HealthStatus::Degraded)
                || (policies.contains(&DeletePolicy::HookSucceeded)
                    && worst == HealthStatus::Healthy);
            if !delete {
                continue;
            }
            pending = true;
            if !l.deleting {
                self.delete_hook(&conn, l, api).await?;
            }
        }
        if pending {
            return Ok(Operated::Wait(DELETION_POLL));
        }
        self.change_finalizers(key, &[], &[POST_DELETE_CLEANUP_FINALIZER.to_owned()])
            .await?;
        Ok(Operated::Finished)
    }

    /// Whether the app's deletion was approved (`deletion-approved` not before its
    /// `deletionTimestamp`, as Argo CD's `IsDeletionConfirmed`).
    fn deletion_confirmed(&self, target: &AppTarget) -> bool {
        let l = &target.spec.lifecycle;
        let at = |s: &Option<String>| s.as_deref().and_then(|s| s.parse::<jiff::Timestamp>().ok());
        match (at(&l.deletion_approved), at(&l.deleted_at)) {
            (Some(approved), Some(deleted)) => approved >= deleted,
            (Some(_), None) => true,
            _ => false,
        }
    }

    /// Deletes the live hook `l` (its `apiVersion` `api`) in the background; a lapsed lease
    /// ends the step.
    async fn delete_hook(
        &self,
        conn: &ClusterConn,
        l: &Live,
        api: &str,
    ) -> Result<(), ReconcileError> {
        let key = resource_key(&l.key);
        let lease = self.lease.as_ref();
        match apply::delete_object(conn, &key, api, "Background", false, lease).await {
            WriteResult::LeaseLapsed => Err(lapsed()),
            _ => Ok(()),
        }
    }

    /// Adds and removes the Application's finalizers (lease checked).
    pub(super) async fn change_finalizers(
        &self,
        key: &AppKey,
        add: &[String],
        remove: &[String],
    ) -> Result<(), ReconcileError> {
        if !self.lease.lease_valid() {
            return Err(lapsed());
        }
        match self.sink.change_finalizers(key, add, remove).await {
            Ok(()) | Err(super::SinkError::NotFound(_)) => Ok(()),
            Err(e) => Err(ReconcileError::RetryLater(e.to_string())),
        }
    }

    /// As Argo CD's refresh: an app with PostDelete hooks gets the PostDelete finalizers
    /// (so its deletion runs them), one without loses them.
    pub(super) async fn align_post_delete_finalizers(
        &self,
        key: &AppKey,
        target: &AppTarget,
        has_hooks: bool,
    ) -> Result<(), ReconcileError> {
        let l = &target.spec.lifecycle;
        if l.deleting {
            return Ok(());
        }
        let wanted = [
            POST_DELETE_FINALIZER.to_owned(),
            POST_DELETE_CLEANUP_FINALIZER.to_owned(),
        ];
        let present = wanted.iter().filter(|f| l.finalizers.contains(f)).count();
        match (has_hooks, present) {
            (true, n) if n < wanted.len() => self.change_finalizers(key, &wanted, &[]).await,
            (false, n) if n > 0 => self.change_finalizers(key, &[], &wanted).await,
            _ => Ok(()),
        }
    }
}
