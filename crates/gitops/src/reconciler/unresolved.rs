//! Apps whose destination resolves to no cluster ([`UnresolvedTarget`]): a cluster Secret
//! deleted, a destination misspelt. One replica processes them, the owner of the
//! inventory's anchor (`fleetshard_controller::ShardWork`), and does what Argo CD's
//! controller does for an app whose cluster it cannot find:
//!
//! - a refresh records sync and health `Unknown` with one `InvalidSpecError` naming the
//!   destination (Argo CD's `refreshAppConditions`), and, with the app-state cache, an
//!   empty resource tree and no managed resources;
//! - an operation in progress, or a sync asked for, ends in `Error`, "Failed to get
//!   destination cluster: …" (its `SyncAppState`), and no automated sync starts;
//! - a deletion removes Argo CD's finalizers (the cascade and the PreDelete and PostDelete
//!   ones) and deletes nothing: there is no cluster to delete from (its
//!   `finalizeApplicationDeletion`), so the Application goes.
//!
//! What it knows of the app is read from the sink at each step (such apps are few, and
//! the anchor may change hands between steps); its memo only carries what events, the
//! health transition time and Argo CD's app metrics need (`argocd_app_info` with sync and
//! health `Unknown`), and goes when any cluster of this replica stops.

use fleetshard_controller::{AppKey, Operated, ReconcileError};
use fleetshard_manifest::RefusalKind;
use fleetshard_sync::deletion::{
    POST_DELETE_CLEANUP_FINALIZER, POST_DELETE_FINALIZER, PRE_DELETE_CLEANUP_FINALIZER,
    PRE_DELETE_FINALIZER, is_cascade,
};

use super::inventory::UnresolvedTarget;
use super::operate::requested;
use super::problem::Problem;
use super::{AppReport, GitOpsReconciler, OperationState, StatusUpdate, memo};
use crate::reconciler::status::SinkError;

impl GitOpsReconciler {
    /// Records Argo CD's status of an app whose destination resolves to no cluster.
    pub(super) async fn refresh_unresolved(
        &self,
        key: &AppKey,
        target: &UnresolvedTarget,
    ) -> Result<(), ReconcileError> {
        if target.spec.lifecycle.skip_reconcile {
            return Ok(());
        }
        self.record_unrecorded(key).await?;
        self.learn_recorded(key).await;
        let mut status =
            Problem::permanent(RefusalKind::InvalidSpec.condition_type(), &target.reason)
                .status(self.clock.now_rfc3339());
        {
            let mut memos = self.memos();
            let m = memos.entry(key.clone()).or_default();
            m.unresolved = true;
            m.last = None;
            status.health.last_transition_time = memo::health_transition(
                &mut m.health_since,
                &status.health.status,
                &status.reconciled_at,
            );
            m.report = Some(Box::new(AppReport::of_unresolved(target, &status)));
        }
        status.refresh_done = target.spec.refresh.is_some();
        status
            .controller_namespace
            .clone_from(&self.config.control_plane_namespace);
        if let Some(cache) = &self.app_state
            && let Err(e) = cache.write_app(
                &self.instance_name(key),
                &[],
                &[],
                &|_| None,
                &fleetshard_appstate::AppShown {
                    links: &target.spec.links,
                    sensitive_annotations: &[],
                },
                &[],
            )
        {
            tracing::warn!(app = %key, "app-state cache: {e}");
        }
        self.record(key, StatusUpdate::Comparison(Box::new(status)))
            .await
    }

    /// Ends what an app whose destination resolves to no cluster asks for: its deletion,
    /// an operation in progress, a sync asked for (see the module documentation).
    pub(super) async fn operate_unresolved(
        &self,
        key: &AppKey,
        target: &UnresolvedTarget,
    ) -> Result<Operated, ReconcileError> {
        if target.spec.lifecycle.skip_reconcile {
            return Ok(Operated::Idle);
        }
        self.record_unrecorded(key).await?;
        if target.spec.lifecycle.deleting {
            let ours: Vec<String> = target
                .spec
                .lifecycle
                .finalizers
                .iter()
                .filter(|f| {
                    is_cascade(f)
                        || [
                            PRE_DELETE_FINALIZER,
                            PRE_DELETE_CLEANUP_FINALIZER,
                            POST_DELETE_FINALIZER,
                            POST_DELETE_CLEANUP_FINALIZER,
                        ]
                        .contains(&f.as_str())
                })
                .cloned()
                .collect();
            if ours.is_empty() {
                return Ok(Operated::Idle);
            }
            self.change_finalizers(key, &[], &ours).await?;
            tracing::info!(
                app = %key,
                reason = %target.reason,
                "deleted without deleting resources: its destination is no cluster"
            );
            return Ok(Operated::Finished);
        }
        let failed = format!("Failed to get destination cluster: {}", target.reason);
        let recorded = match self.sink.last_operation(key).await {
            Ok(op) => op,
            Err(SinkError::NotFound(_)) => None,
            Err(e) => return Err(ReconcileError::RetryLater(e.to_string())),
        };
        // A request is ended once (a fleet file keeps it after its operation is recorded).
        let request = target.spec.sync_request.as_ref().filter(|r| {
            self.memos()
                .get(key)
                .is_none_or(|m| m.request_done.as_deref() != Some(*r))
        });
        let now = self.clock.now_rfc3339();
        let ended = match (recorded, request) {
            (Some(op), _) if op.in_progress() => OperationState {
                phase: "Error".to_owned(),
                message: failed,
                finished_at: Some(now),
                ..op
            },
            (_, Some(request)) => OperationState {
                phase: "Error".to_owned(),
                message: failed,
                finished_at: Some(now),
                ..self.new_operation(requested(request))
            },
            _ => return Ok(Operated::Idle),
        };
        self.record(key, StatusUpdate::Operation(Box::new(ended)))
            .await?;
        let mut memos = self.memos();
        let m = memos.entry(key.clone()).or_default();
        m.unresolved = true;
        m.request_done = target.spec.sync_request.clone().map(Box::new);
        Ok(Operated::Finished)
    }
}
