//! An Application being deleted (`metadata.deletionTimestamp`), as Argo CD's controller
//! finalizes it (`finalizeApplicationDeletion`), one step per operation:
//!
//! 0. With `pre-delete-finalizer.argocd.argoproj.io`: the app's PreDelete hooks run first,
//!    as the PostDelete hooks below; nothing else is deleted until they all succeeded.
//! 1. With `resources-finalizer.argocd.argoproj.io` (or its `/foreground`, `/background`
//!    forms): the live objects the app tracks are deleted highest sync wave first, a wave
//!    at a time once the previous is gone ([`fleetshard_sync::deletion`]), then the
//!    finalizer is removed. Only objects the project permits are deleted; nothing is
//!    deleted, and the finalizer stays, until a refresh of this owner has read the app's
//!    live state (so an unreadable source never leaves objects behind unseen).
//! 2. With `post-delete-finalizer.argocd.argoproj.io`: the app's PostDelete hooks are
//!    created and waited for; a failed one is deleted and the step retried; once all
//!    succeeded the finalizer goes.
//! 3. With the `/cleanup` forms of the PreDelete and PostDelete finalizers, the hooks are
//!    deleted by their policy (no policy: deleted), PreDelete's first.
//!
//! Every delete goes through the lease check and the write deadline, like the sync's.

use std::collections::HashSet;

use fleetshard_controller::{AppKey, Operated, ReconcileError};
use fleetshard_sync::deletion::{
    self, CascadeStep, POST_DELETE_CLEANUP_FINALIZER, POST_DELETE_FINALIZER,
    PRE_DELETE_CLEANUP_FINALIZER, PRE_DELETE_FINALIZER,
};
use fleetshard_sync::{DeletePolicy, DeletionHook, HealthStatus, Live, ObjectKey, SyncOptions};
use serde_json::Value;

use super::memo::{DeletionHooks, Refreshed};
use super::step::{live_object, resource_key};
use super::{AppTarget, GitOpsReconciler};
use crate::apply::{self, WriteHow, WriteResult};
use crate::live::AppConn;
use crate::source::Refresh;

/// The condition a failed step of an Application's deletion shows (Argo CD's), cleared
/// by the next step that succeeds.
pub const DELETION_ERROR: &str = "DeletionError";

/// How long a deletion waits before looking again.
const DELETION_POLL: std::time::Duration = std::time::Duration::from_secs(2);

fn lapsed() -> ReconcileError {
    ReconcileError::RetryLater("the shard lease lapsed during a deletion".into())
}

impl GitOpsReconciler {
    /// Keeps the outcome of a deletion step for the app's `DeletionError` condition: the
    /// failure's message (not a lapsed lease: no failure of the deletion), or none once a
    /// step succeeds. When that changes, the app is refreshed at once so that its status
    /// shows it, as Argo CD writes the condition when the step ends (a refresh that fails
    /// leaves it to the next one; the deletion's own outcome stands).
    pub(super) async fn note_deletion_outcome(
        &self,
        key: &AppKey,
        outcome: &Result<Operated, ReconcileError>,
    ) {
        let error = match outcome {
            Ok(_) => None,
            Err(_) if !self.lease.lease_valid() => return,
            Err(ReconcileError::RetryLater(why)) => Some(why.clone()),
            Err(ReconcileError::RetryAfter { reason, .. }) => Some(reason.clone()),
            Err(e) => Some(e.to_string()),
        };
        let changed = {
            let mut memos = self.memos();
            let m = memos.entry(key.clone()).or_default();
            let changed = m.deletion_error != error;
            m.deletion_error = error;
            changed
        };
        if changed && let Err(e) = self.do_refresh(key).await {
            tracing::debug!(app = %key, "the refresh after a deletion step: {e}");
        }
    }

    /// One step of the deletion of the app (see the module documentation).
    pub(super) async fn finalize_deletion(
        &self,
        key: &AppKey,
        target: &AppTarget,
    ) -> Result<Operated, ReconcileError> {
        let finalizers = &target.spec.lifecycle.finalizers;
        let has = |f: &str| finalizers.iter().any(|x| x == f);
        let cascade = finalizers.iter().find(|f| deletion::is_cascade(f));
        let hooks_to_run = [
            PRE_DELETE_FINALIZER,
            PRE_DELETE_CLEANUP_FINALIZER,
            POST_DELETE_FINALIZER,
            POST_DELETE_CLEANUP_FINALIZER,
        ];
        if cascade.is_none() && !hooks_to_run.iter().any(|f| has(f)) {
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
        let cluster = self
            .clusters
            .start(&target.cluster)
            .await
            .map_err(|e| ReconcileError::RetryLater(e.to_string()))?;
        let conn = self.app_conn(key, &cluster, false);
        let live: Vec<(Live, String)> = refreshed
            .live
            .iter()
            .filter_map(|v| {
                let api = v.get("apiVersion").and_then(Value::as_str)?.to_owned();
                Some((live_object(v, &app_name, &refreshed)?, api))
            })
            .filter(|(l, _)| self.check_resource(target, &resource_key(&l.key)).is_ok())
            .collect();
        if has(PRE_DELETE_FINALIZER) {
            let ran = self
                .run_deletion_hooks(DeletionHook::PreDelete, &refreshed, &live, &conn, &app_name)
                .await?;
            if let Some(wait) = ran {
                return Ok(wait);
            }
            self.change_finalizers(key, &[], &[PRE_DELETE_FINALIZER.to_owned()])
                .await?;
            return Ok(Operated::Finished);
        }
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
        if has(POST_DELETE_FINALIZER) {
            let ran = self
                .run_deletion_hooks(
                    DeletionHook::PostDelete,
                    &refreshed,
                    &live,
                    &conn,
                    &app_name,
                )
                .await?;
            if let Some(wait) = ran {
                return Ok(wait);
            }
            self.change_finalizers(key, &[], &[POST_DELETE_FINALIZER.to_owned()])
                .await?;
            return Ok(Operated::Finished);
        }
        // `/cleanup`: the hooks deleted by their policy, PreDelete's then PostDelete's, and
        // each finalizer goes once its hooks are gone.
        for (kind, finalizer) in [
            (DeletionHook::PreDelete, PRE_DELETE_CLEANUP_FINALIZER),
            (DeletionHook::PostDelete, POST_DELETE_CLEANUP_FINALIZER),
        ] {
            if !has(finalizer) {
                continue;
            }
            if self.clean_up_deletion_hooks(kind, &live, &conn).await? {
                return Ok(Operated::Wait(DELETION_POLL));
            }
            self.change_finalizers(key, &[], &[finalizer.to_owned()])
                .await?;
            return Ok(Operated::Finished);
        }
        Ok(Operated::Finished)
    }

    /// Runs the app's hooks of deletion phase `kind` as Argo CD's `executeHooks`: creates
    /// those rendered but not live, then waits until every live one is healthy; a failed one
    /// is deleted (to be created again, possibly fixed, at the next step) and the step
    /// fails. `None` once all succeeded, else what to do now.
    async fn run_deletion_hooks(
        &self,
        kind: DeletionHook,
        refreshed: &Refreshed,
        live: &[(Live, String)],
        conn: &AppConn<'_>,
        app_name: &str,
    ) -> Result<Option<Operated>, ReconcileError> {
        let hooks = deletion_hooks(live, kind);
        let running: HashSet<&ObjectKey> = hooks.iter().map(|(l, _)| &l.key).collect();
        let suffix = match kind {
            DeletionHook::PreDelete => "pre-delete",
            DeletionHook::PostDelete => "post-delete",
        };
        let mut created = false;
        for d in refreshed.deletion_hooks.of(kind) {
            let mut name = d.key.name.clone();
            if name.is_empty() {
                let prefix = d
                    .object
                    .pointer("/metadata/generateName")
                    .and_then(Value::as_str)
                    .unwrap_or("hook-");
                name = format!("{prefix}{suffix}");
            }
            let k = ObjectKey::new(&d.key.group, &d.key.kind, &d.key.namespace, &name);
            if running.contains(&k) {
                continue;
            }
            let how = WriteHow {
                validate: true,
                ..WriteHow::default()
            };
            let tracking = (&refreshed.tracking, app_name);
            match apply::apply_object(conn, tracking, d, &name, &how, self.lease.as_ref()).await {
                WriteResult::LeaseLapsed => return Err(lapsed()),
                WriteResult::Failed(why) => {
                    return Err(ReconcileError::RetryLater(format!(
                        "{kind:?} hook {k}: {why}"
                    )));
                }
                WriteResult::Done(_) | WriteResult::Gone => created = true,
            }
        }
        if created {
            return Ok(Some(Operated::Wait(DELETION_POLL)));
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
            for (l, api) in &failed {
                self.delete_hook(conn, l, api).await?;
            }
            let names: Vec<String> = failed.iter().map(|(l, _)| l.key.to_string()).collect();
            return Err(ReconcileError::RetryLater(format!(
                "{kind:?} hook(s) failed: {}",
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
        Ok(progressing.then_some(Operated::Wait(DELETION_POLL)))
    }

    /// Deletes the live hooks of deletion phase `kind` by their policy, as Argo CD's
    /// `cleanupHooks` (no policy: deleted; `HookSucceeded`/`HookFailed` by the worst health
    /// of them all). Whether any is still to go.
    async fn clean_up_deletion_hooks(
        &self,
        kind: DeletionHook,
        live: &[(Live, String)],
        conn: &AppConn<'_>,
    ) -> Result<bool, ReconcileError> {
        let hooks = deletion_hooks(live, kind);
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
                self.delete_hook(conn, l, api).await?;
            }
        }
        Ok(pending)
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
        conn: &AppConn<'_>,
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

    /// As Argo CD's refresh: an app with PreDelete (PostDelete) hooks gets the PreDelete
    /// (PostDelete) finalizers, so its deletion runs them; one without loses them.
    pub(super) async fn align_deletion_hook_finalizers(
        &self,
        key: &AppKey,
        target: &AppTarget,
        hooks: &DeletionHooks,
    ) -> Result<(), ReconcileError> {
        let l = &target.spec.lifecycle;
        if l.deleting {
            return Ok(());
        }
        let (mut add, mut remove) = (Vec::new(), Vec::new());
        for (has_hooks, wanted) in [
            (
                !hooks.pre.is_empty(),
                [PRE_DELETE_FINALIZER, PRE_DELETE_CLEANUP_FINALIZER],
            ),
            (
                !hooks.post.is_empty(),
                [POST_DELETE_FINALIZER, POST_DELETE_CLEANUP_FINALIZER],
            ),
        ] {
            let present = wanted
                .iter()
                .filter(|f| l.finalizers.iter().any(|x| x == *f));
            match (has_hooks, present.count()) {
                (true, n) if n < wanted.len() => add.extend(wanted.map(str::to_owned)),
                (false, n) if n > 0 => remove.extend(wanted.map(str::to_owned)),
                _ => {}
            }
        }
        if add.is_empty() && remove.is_empty() {
            return Ok(());
        }
        self.change_finalizers(key, &add, &remove).await
    }
}

/// The live hooks of deletion phase `kind` among the app's objects.
fn deletion_hooks(live: &[(Live, String)], kind: DeletionHook) -> Vec<&(Live, String)> {
    live.iter()
        .filter(|(l, _)| fleetshard_sync::is_deletion_hook(&l.annotations, kind))
        .collect()
}
