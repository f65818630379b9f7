//! Operations: a sync asked for by hand, the sync itself (apply, prune, record), and what
//! a new owner learns of the last one.
//!
//! A request that sets what fleetshard does not implement, or a request for an app whose
//! spec is refused, is not run: it is recorded as an operation in phase `Error` naming the
//! fields (which clears the request, as Argo CD ends an operation) and shown as a
//! `SyncError` condition until the next operation runs. `dryRun` sends every write with
//! `dryRun=All` (validated by the server, nothing persisted or pruned, the synced commit
//! not remembered); `resources` (selective sync) applies and prunes only the objects named.

use std::sync::Arc;

use fleetshard_controller::{AppKey, Operated, ReconcileError};
use fleetshard_manifest::project::WindowVerdict;
use fleetshard_manifest::{RefusalKind, SyncRequest, SyncResource};

use super::guard::selected;
use super::{
    AppTarget, GitOpsReconciler, Initiator, OperationRecord, OperationState, Refreshed, SinkError,
    StatusUpdate, SyncOperation, SyncOperationResource, SyncResult, SyncResultEntry,
};
use crate::apply::{self, ApplyError, DesiredObject, PruneTarget, ResultCode, SyncMode};
use crate::source::Refresh;

/// What one sync runs: an automated sync or a request.
#[derive(Debug, Clone, Default)]
pub(super) struct Request {
    revision: String,
    prune: bool,
    dry_run: bool,
    resources: Option<Vec<SyncResource>>,
    initiated_by: Initiator,
}

impl Request {
    /// An automated sync.
    pub(super) fn automated(prune: bool) -> Self {
        Request {
            prune,
            initiated_by: Initiator {
                username: String::new(),
                automated: true,
            },
            ..Request::default()
        }
    }

    fn manual(r: &SyncRequest) -> Self {
        Request {
            revision: r.revision.clone().unwrap_or_default(),
            prune: r.prune,
            dry_run: r.dry_run,
            resources: r.resources.clone(),
            initiated_by: Initiator {
                username: r.initiated_by.username.clone(),
                automated: r.initiated_by.automated,
            },
        }
    }

    /// `operationState.operation` for it.
    fn record(&self) -> OperationRecord {
        OperationRecord {
            sync: SyncOperation {
                revision: self.revision.clone(),
                prune: self.prune,
                dry_run: self.dry_run,
                resources: self
                    .resources
                    .iter()
                    .flatten()
                    .map(|r| SyncOperationResource {
                        group: r.group.clone(),
                        kind: r.kind.clone(),
                        name: r.name.clone(),
                        namespace: r.namespace.clone(),
                    })
                    .collect(),
            },
            initiated_by: self.initiated_by.clone(),
        }
    }
}

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
        let refused: Vec<String> = self
            .refusals(target, RefusalKind::InvalidSpec)
            .chain(self.refusals(target, RefusalKind::Sync))
            .map(ToString::to_string)
            .collect();
        if !refused.is_empty() {
            self.refuse(key, &request, &refused).await?;
            return Ok(Some(Operated::Finished));
        }
        if let WindowVerdict::Blocked(why) = self.window_verdict(target, true) {
            // The request stays pending (as Argo CD keeps the operation running) and is
            // tried again at the next refresh; the status shows why.
            tracing::info!(app = %key, %why, "requested sync not run");
            if let Some(m) = self.memos().get_mut(key) {
                m.sync_error = Some(why);
            }
            return Ok(Some(Operated::Idle));
        }
        let last = match (&request.revision, last) {
            (None, Some(last)) => last,
            (Some(rev), Some(last)) if *rev == last.commit => last,
            // Another revision (a rollback), or no refresh yet: compare at that revision.
            (revision, _) => {
                let mut at = target.clone();
                if let Some(rev) = revision {
                    at.spec.source.target_revision.clone_from(rev);
                }
                match self.compare(key, &at, Refresh::Normal).await {
                    Ok((refreshed, _)) => Arc::new(refreshed),
                    // The request stays pending: tried again, not in a loop.
                    Err(p) => {
                        return Err(ReconcileError::RetryAfter {
                            reason: p.message,
                            after: p.retry_after.unwrap_or(super::problem::CLUSTER_RETRY),
                        });
                    }
                }
            }
        };
        let how = if request.dry_run {
            "dry run of a sync"
        } else {
            "sync"
        };
        let message = format!("{how} to {} (requested)", last.commit);
        // Ran (succeeded or failed, as operationState records): done, as Argo CD runs an
        // operation once. Not run (a lapsed lease, an unreachable store): retried.
        let _outcome = self
            .sync(key, target, &last, &Request::manual(&request), message)
            .await?;
        if let Some(m) = self.memos().get_mut(key) {
            m.request_done = Some(request);
        }
        Ok(Some(Operated::Finished))
    }

    /// Records `request` as refused (phase `Error`, naming the `refused` fields; this
    /// clears it) and remembers the `SyncError` condition the next refresh shows.
    async fn refuse(
        &self,
        key: &AppKey,
        request: &SyncRequest,
        refused: &[String],
    ) -> Result<(), ReconcileError> {
        let message = format!(
            "sync refused, nothing applied or pruned: {}",
            refused.join("; ")
        );
        let now = self.clock.now_rfc3339();
        let state = OperationState {
            operation: Request::manual(request).record(),
            phase: "Error".to_owned(),
            message: message.clone(),
            started_at: now.clone(),
            finished_at: Some(now),
            sync_result: None,
        };
        self.record(key, StatusUpdate::Operation(state)).await?;
        if let Some(m) = self.memos().get_mut(key) {
            m.request_done = Some(request.clone());
            m.sync_error = Some(message);
        }
        Ok(())
    }

    /// Applies `last`'s desired objects (and prunes with `request.prune`; only the objects
    /// `request.resources` names, when it does; validated only with `request.dry_run`),
    /// recording the operation's progress and result: `Ok(Err(why))` when it ran and
    /// some object failed, `Err` when it could not run or be recorded (a lapsed lease).
    pub(super) async fn sync(
        &self,
        key: &AppKey,
        target: &AppTarget,
        last: &Refreshed,
        request: &Request,
        message: String,
    ) -> Result<Result<(), String>, ReconcileError> {
        let conn = self
            .clusters
            .start(&target.cluster)
            .await
            .map_err(|e| ReconcileError::RetryLater(e.to_string()))?;
        let started_at = self.clock.now_rfc3339();
        let operation = request.record();
        let running = OperationState {
            operation: operation.clone(),
            phase: "Running".to_owned(),
            message,
            started_at: started_at.clone(),
            finished_at: None,
            sync_result: None,
        };
        self.record(key, StatusUpdate::Operation(running)).await?;
        let only = request.resources.as_deref();
        let desired: Vec<DesiredObject> = last
            .desired
            .iter()
            .filter(|d| selected(only, &d.key))
            .cloned()
            .collect();
        let to_prune: Vec<PruneTarget> = last
            .prune
            .iter()
            .filter(|p| selected(only, &p.key))
            .cloned()
            .collect();
        let mode = SyncMode {
            prune: request.prune,
            dry_run: request.dry_run,
        };
        let results = match apply::sync(&conn, &desired, &to_prune, mode, self.lease.as_ref()).await
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
        let (phase, message) = if failed.is_empty() && request.dry_run {
            (
                "Succeeded",
                "dry run succeeded: the server validated every object; nothing was applied or \
                 pruned"
                    .to_owned(),
            )
        } else if failed.is_empty() {
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
            operation,
            phase: phase.to_owned(),
            message: message.clone(),
            started_at,
            finished_at: Some(self.clock.now_rfc3339()),
            sync_result: Some(sync_result(target, last, &results)),
        };
        // The sync ran: whether or not its end is recorded now, it is not run again (a
        // record that failed is written first by the app's next refresh or operation).
        if let Err(e) = self.record(key, StatusUpdate::Operation(done)).await {
            tracing::warn!(app = %key, error = %e, "the end of an operation is not recorded yet; written again at the app's next refresh");
        }
        if let Some(m) = self.memos().get_mut(key) {
            m.sync_error = None;
            // A dry run or a selective sync does not make the commit synced.
            if failed.is_empty() && !request.dry_run && request.resources.is_none() {
                m.synced = Some(last.commit.clone());
            }
        }
        if !failed.is_empty() {
            return Ok(Err(message));
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
                .filter(|o| {
                    o.phase == "Succeeded"
                        && !o.operation.sync.dry_run
                        && o.operation.sync.resources.is_empty()
                })
                .and_then(|o| o.sync_result)
                .map(|r| r.synced_commit())),
            Err(SinkError::NotFound(_)) => Ok(None),
            // Not knowing could sync drift that `selfHeal: false` leaves alone: wait.
            Err(e) => Err(ReconcileError::RetryLater(e.to_string())),
        }
    }
}

/// `syncResult` of a sync of `last`: the revision (or a multi-source app's revisions) and
/// the source(s) synced, as Argo CD records them, and each resource's outcome.
fn sync_result(
    target: &AppTarget,
    last: &Refreshed,
    results: &[apply::ResourceResult],
) -> SyncResult {
    let as_recorded = |s: &fleetshard_manifest::AppSource| s.raw.is_object().then(|| s.raw.clone());
    let multi = !last.revisions.is_empty();
    SyncResult {
        revision: if multi {
            String::new()
        } else {
            last.commit.clone()
        },
        revisions: last.revisions.clone(),
        source: if multi {
            None
        } else {
            as_recorded(&target.spec.source)
        },
        sources: if multi {
            target.spec.sources.iter().filter_map(as_recorded).collect()
        } else {
            Vec::new()
        },
        resources: results.iter().map(result_entry).collect(),
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
