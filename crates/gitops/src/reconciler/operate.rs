//! Operations: a sync asked for by hand, the sync itself (apply, prune, record), and what
//! a new owner learns of the last one.

use std::sync::Arc;

use fleetshard_controller::{AppKey, Operated, ReconcileError};

use super::{
    AppTarget, GitOpsReconciler, OperationState, Refreshed, SinkError, StatusUpdate, SyncResult,
    SyncResultEntry,
};
use crate::apply::{self, ApplyError, ResultCode};

impl GitOpsReconciler {
    /// Runs the sync asked for by hand (`operation.sync`), once per request: whatever
    /// the sync policy, to the requested revision or the target one. `None`: no request
    /// pending.
    pub(super) async fn manual_sync(
        &self,
        key: &AppKey,
        target: &AppTarget,
    ) -> Result<Option<Operated>, ReconcileError> {
        let request = target.spec.sync_request.clone();
        let (pending, last) = {
            let mut memos = self.memos();
            let m = memos.entry(key.clone()).or_default();
            m.cluster.clone_from(&target.cluster.id);
            if request.is_none() {
                // Cleared (by our own status write, or by hand): the next request runs.
                m.request_done = None;
            }
            (
                request.filter(|r| m.request_done.as_ref() != Some(r)),
                m.last.clone(),
            )
        };
        let Some(request) = pending else {
            return Ok(None);
        };
        let last = match (&request.revision, last) {
            (None, Some(last)) => last,
            (Some(rev), Some(last)) if *rev == last.commit => last,
            // Another revision (a rollback), or no refresh yet: compare at that revision.
            (revision, _) => {
                let mut at = target.clone();
                if let Some(rev) = revision {
                    at.spec.source.target_revision.clone_from(rev);
                }
                match self.compare(key, &at).await {
                    Ok((refreshed, _)) => Arc::new(refreshed),
                    Err(p) => return Err(ReconcileError::RetryLater(p.message)),
                }
            }
        };
        let message = format!("sync to {} (requested)", last.commit);
        // Ran (succeeded or failed, as operationState records): done, as Argo CD runs an
        // operation once. Not run (a lapsed lease, an unreachable store): retried.
        let _outcome = self
            .sync(key, target, &last, request.prune, message)
            .await?;
        if let Some(m) = self.memos().get_mut(key) {
            m.request_done = Some(request);
        }
        Ok(Some(Operated::Finished))
    }

    /// Applies `last`'s desired objects (and prunes with `prune`), recording the
    /// operation's progress and result: `Ok(Err(why))` when it ran and some object
    /// failed, `Err` when it could not run or be recorded (a lapsed lease, say).
    pub(super) async fn sync(
        &self,
        key: &AppKey,
        target: &AppTarget,
        last: &Refreshed,
        prune: bool,
        message: String,
    ) -> Result<Result<(), String>, ReconcileError> {
        let conn = self
            .clusters
            .start(&target.cluster)
            .await
            .map_err(|e| ReconcileError::RetryLater(e.to_string()))?;
        let started_at = self.clock.now_rfc3339();
        let running = OperationState {
            phase: "Running".to_owned(),
            message,
            started_at: started_at.clone(),
            finished_at: None,
            sync_result: None,
        };
        self.record(key, StatusUpdate::Operation(running)).await?;
        let app_name = self.instance_name(key);
        let results = match apply::sync(
            &conn,
            &app_name,
            &last.desired,
            &last.prune,
            prune,
            self.lease.as_ref(),
        )
        .await
        {
            Ok(results) => results,
            // Nothing more may be written, the status included.
            Err(e @ ApplyError::LeaseLapsed { .. }) => {
                return Err(ReconcileError::RetryLater(e.to_string()));
            }
        };
        let failed: Vec<String> = results
            .iter()
            .filter(|r| r.status == ResultCode::SyncFailed)
            .map(|r| {
                format!(
                    "{}/{} {}: {}",
                    r.key.kind, r.key.namespace, r.key.name, r.message
                )
            })
            .collect();
        let (phase, message) = if failed.is_empty() {
            (
                "Succeeded",
                "successfully synced (all tasks run)".to_owned(),
            )
        } else {
            (
                "Failed",
                format!("one or more objects failed to apply: {}", failed.join("; ")),
            )
        };
        let done = OperationState {
            phase: phase.to_owned(),
            message: message.clone(),
            started_at,
            finished_at: Some(self.clock.now_rfc3339()),
            sync_result: Some(SyncResult {
                revision: last.commit.clone(),
                resources: results.iter().map(result_entry).collect(),
            }),
        };
        self.record(key, StatusUpdate::Operation(done)).await?;
        if !failed.is_empty() {
            return Ok(Err(message));
        }
        if let Some(m) = self.memos().get_mut(key) {
            m.synced = Some(last.commit.clone());
        }
        Ok(Ok(()))
    }

    /// The commit the last recorded operation synced successfully, if any.
    pub(super) async fn recorded_sync(
        &self,
        key: &AppKey,
    ) -> Result<Option<String>, ReconcileError> {
        match self.sink.last_operation(key).await {
            Ok(op) => Ok(op
                .filter(|o| o.phase == "Succeeded")
                .and_then(|o| o.sync_result)
                .map(|r| r.revision)),
            Err(SinkError::NotFound(_)) => Ok(None),
            // Not knowing could sync drift that `selfHeal: false` leaves alone: wait.
            Err(e) => Err(ReconcileError::RetryLater(e.to_string())),
        }
    }
}

fn result_entry(r: &apply::ResourceResult) -> SyncResultEntry {
    SyncResultEntry {
        group: r.key.group.clone(),
        version: r.version.clone(),
        kind: r.key.kind.clone(),
        namespace: r.key.namespace.clone(),
        name: r.key.name.clone(),
        status: format!("{:?}", r.status),
        message: r.message.clone(),
    }
}
