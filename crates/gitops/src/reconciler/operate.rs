//! Which operation runs: one in progress (resumed from the recorded `operationState`), a
//! sync asked for by hand (`operation.sync`, once per request), or an automated sync by
//! Argo CD's rules; and what a new owner learns of the last one.
//!
//! A request that sets what fleetshard does not implement, or a request for an app whose
//! spec is refused, is not run: it is recorded as an operation in phase `Error` naming the
//! fields (which clears the request, as Argo CD ends an operation) and shown as a
//! `SyncError` condition until the next operation runs.
//!
//! An automated sync starts when the last refresh found the app OutOfSync (not only to
//! prune when `prune` is off) and, as Argo CD's `autoSync` decides, the revision and
//! source were not synced before — a success of the same is left alone without
//! `selfHeal` (a self-heal then syncs the resources that drifted, backing off); a failure
//! of the same is not synced again (its retries are over: a `SyncError` says so) — and
//! no sync window blocks it. It runs with the app's sync options and retry policy (5
//! retries when it sets none).

use fleetshard_controller::{AppKey, Operated, ReconcileError};
use fleetshard_manifest::project::WindowVerdict;
use fleetshard_manifest::{RefusalKind, RetryPolicy, SyncRequest};
use serde_json::{Value, json};

use super::memo::KeptOperation;
use super::{
    AppTarget, BackoffRecord, GitOpsReconciler, Initiator, OperationRecord, OperationState,
    RetryRecord, SinkError, StatusUpdate, SyncOperation, SyncOperationResource,
};
use crate::compare::SyncStatus;

/// `operation.retry` as recorded.
fn retry_record(p: &RetryPolicy) -> RetryRecord {
    let backoff = BackoffRecord {
        duration: p.duration.clone(),
        factor: p.factor,
        max_duration: p.max_duration.clone(),
    };
    RetryRecord {
        limit: p.limit,
        backoff: (backoff != BackoffRecord::default()).then_some(backoff),
        refresh: p.refresh,
    }
}

/// `operationState.operation` of a sync asked for by hand.
pub(super) fn requested(r: &SyncRequest) -> OperationRecord {
    let strategy = match (r.strategy.apply, r.strategy.force) {
        (false, false) => None,
        (apply, force) => {
            let how = if force {
                json!({"force": true})
            } else {
                json!({})
            };
            Some(if apply {
                json!({"apply": how})
            } else {
                json!({"hook": how})
            })
        }
    };
    OperationRecord {
        sync: SyncOperation {
            revision: r.revision.clone().unwrap_or_default(),
            prune: r.prune,
            dry_run: r.dry_run,
            resources: r
                .resources
                .iter()
                .flatten()
                .map(|s| SyncOperationResource {
                    group: s.group.clone(),
                    kind: s.kind.clone(),
                    name: s.name.clone(),
                    namespace: s.namespace.clone(),
                })
                .collect(),
            sync_options: r.sync_options.clone(),
            sync_strategy: strategy,
            source: r
                .source
                .as_ref()
                .map(|s| s.raw.clone())
                .filter(Value::is_object),
        },
        initiated_by: Initiator {
            username: r.initiated_by.username.clone(),
            automated: r.initiated_by.automated,
        },
        retry: r.retry.as_ref().map(retry_record),
    }
}

impl GitOpsReconciler {
    pub(super) async fn do_operate(&self, key: &AppKey) -> Result<Operated, ReconcileError> {
        let Some(target) = self.inventory.target(key) else {
            return match self.inventory.unresolved(key) {
                Some(unresolved) => self.operate_unresolved(key, &unresolved).await,
                None => Ok(Operated::Idle),
            };
        };
        if target.spec.lifecycle.skip_reconcile {
            return Ok(Operated::Idle);
        }
        self.record_unrecorded(key).await?;
        if target.spec.lifecycle.deleting {
            let deleted = self.finalize_deletion(key, &target).await;
            if let Err(e) = &deleted
                && self.lease.lease_valid()
            {
                // Argo CD's warning of a deletion that failed (a lapsed lease is no
                // failure of the deletion, and its event could not be written anyway).
                self.emit(key, crate::events::message::deletion_failed(&e.to_string()));
            }
            self.note_deletion_outcome(key, &deleted).await;
            return deleted;
        }
        if let Some(state) = self.recorded_operation(key, &target).await?
            && state.in_progress()
        {
            return self.run_operation(key, &target, state).await;
        }
        if let Some(done) = self.manual_sync(key, &target).await? {
            return Ok(done);
        }
        self.auto_sync(key, &target).await
    }

    /// The operation last recorded: from memory, read from the sink once per owner, and
    /// again when the Application says it is being terminated.
    async fn recorded_operation(
        &self,
        key: &AppKey,
        target: &AppTarget,
    ) -> Result<Option<OperationState>, ReconcileError> {
        let (known, read) = {
            let mut memos = self.memos();
            let m = memos.entry(key.clone()).or_default();
            m.cluster.clone_from(&target.cluster.id);
            m.unresolved = false;
            (m.op.as_ref().and_then(KeptOperation::state), m.op_read)
        };
        let asked_to_stop = target.spec.lifecycle.terminating
            && known.as_ref().is_none_or(|o| o.phase != "Terminating");
        if read && !asked_to_stop {
            return Ok(known);
        }
        let recorded = match self.sink.last_operation(key).await {
            Ok(op) => op,
            Err(SinkError::NotFound(_)) => None,
            // Not knowing could run again what ran, or miss an operation in progress: wait.
            Err(e) => return Err(ReconcileError::RetryLater(e.to_string())),
        };
        let mut memos = self.memos();
        let m = memos.entry(key.clone()).or_default();
        m.op = recorded.as_ref().map(KeptOperation::new);
        m.op_read = true;
        Ok(recorded)
    }

    /// Starts the sync asked for by hand (`operation.sync`), once per request: whatever
    /// the sync policy, to the requested revision (and source) or the target one. `None`:
    /// no request pending.
    async fn manual_sync(
        &self,
        key: &AppKey,
        target: &AppTarget,
    ) -> Result<Option<Operated>, ReconcileError> {
        let request = target.spec.sync_request.clone();
        let pending = {
            let mut memos = self.memos();
            let m = memos.entry(key.clone()).or_default();
            if request.is_none() {
                // Cleared (by our own status write, or by hand): the next request runs.
                m.request_done = None;
            }
            request.filter(|r| m.request_done.as_deref() != Some(r))
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
        let state = self.new_operation(requested(&request));
        let (started_at, operation) = (state.started_at.clone(), state.operation.clone());
        let ran = self.run_operation(key, target, state).await;
        // Done once it ran or its state was recorded (a new owner resumes it from there);
        // a request that failed before anything was recorded (a lapsed lease, a store that
        // did not answer) stays pending and is run again.
        let mut memos = self.memos();
        if let Some(m) = memos.get_mut(key)
            && (ran.is_ok()
                || m.op
                    .as_ref()
                    .and_then(KeptOperation::state)
                    .is_some_and(|o| o.started_at == started_at && o.operation == operation))
        {
            m.request_done = Some(Box::new(request));
        }
        ran.map(Some)
    }

    /// A new operation of `operation`, running from now.
    pub(super) fn new_operation(&self, operation: OperationRecord) -> OperationState {
        OperationState {
            operation,
            phase: "Running".to_owned(),
            message: String::new(),
            started_at: self.clock.now_rfc3339(),
            finished_at: None,
            sync_result: None,
            retry_count: 0,
        }
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
            phase: "Error".to_owned(),
            message: message.clone(),
            finished_at: Some(now),
            ..self.new_operation(requested(request))
        };
        self.record(key, StatusUpdate::Operation(Box::new(state)))
            .await?;
        if let Some(m) = self.memos().get_mut(key) {
            m.request_done = Some(Box::new(request.clone()));
            m.sync_error = Some(message);
        }
        Ok(())
    }

    /// Argo CD's automated sync (see the module documentation).
    async fn auto_sync(
        &self,
        key: &AppKey,
        target: &AppTarget,
    ) -> Result<Operated, ReconcileError> {
        let Some(auto) = target.spec.auto_sync else {
            return Ok(Operated::Idle);
        };
        let (last, recorded) = {
            let memos = self.memos();
            let Some(m) = memos.get(key) else {
                return Ok(Operated::Idle);
            };
            let Some(last) = m.last.clone() else {
                return Ok(Operated::Idle);
            };
            (last, m.op.as_ref().and_then(KeptOperation::state))
        };
        // Never prune to an empty render unless allowed (refused with a SyncError
        // condition by the refresh); a protected object to prune is nothing to do.
        if last.renders_nothing && !auto.allow_empty {
            return Ok(Operated::Idle);
        }
        let to_do = last.comparison.resources.iter().any(|r| {
            r.status == SyncStatus::OutOfSync
                && !r.extraneous_ignored
                && (!r.requires_pruning || (auto.prune && !last.protected.contains(&r.key)))
        });
        if !to_do || last.cluster != target.cluster.id {
            return Ok(Operated::Idle);
        }
        let source = target
            .spec
            .source
            .raw
            .is_object()
            .then(|| target.spec.source.raw.clone());
        let attempted = recorded.as_ref().and_then(|o| {
            let r = o.sync_result.as_ref()?;
            let same_source = target.spec.sources.is_empty() && r.source == source;
            (r.synced_commit() == last.commit && same_source).then_some(o)
        });
        let mut resources = Vec::new();
        let now = tokio::time::Instant::now();
        if let Some(o) = attempted {
            if o.phase != "Succeeded" {
                // Its retries are over: the same revision is not synced again (Argo CD).
                let message = format!("Failed last sync attempt to {}: {}", last.commit, o.message);
                if let Some(m) = self.memos().get_mut(key) {
                    m.sync_error = Some(message);
                }
                return Ok(Operated::Idle);
            }
            if !auto.self_heal {
                return Ok(Operated::Idle);
            }
            let policy = self.config.self_heal_backoff;
            let wait = self
                .memos()
                .get_mut(key)
                .and_then(|m| m.heals.wait(&last.commit, now, &policy));
            if let Some(wait) = wait {
                return Ok(Operated::Wait(wait));
            }
            // A self-heal syncs the resources that drifted (Argo CD: a selective sync).
            resources = last
                .comparison
                .resources
                .iter()
                .filter(|r| r.status != SyncStatus::Synced)
                .map(|r| SyncOperationResource {
                    group: r.key.group.clone(),
                    kind: r.key.kind.clone(),
                    name: r.key.name.clone(),
                    namespace: String::new(),
                })
                .collect();
        }
        if let WindowVerdict::Blocked(why) = self.window_verdict(target, false) {
            // Tried again at the next refresh (events, the periodic resync).
            tracing::info!(app = %key, %why, "automated sync not run");
            return Ok(Operated::Idle);
        }
        if attempted.is_some()
            && let Some(m) = self.memos().get_mut(key)
        {
            m.heals.healed(&last.commit, now);
        }
        let retry = target.spec.policy.retry.clone().unwrap_or(RetryPolicy {
            limit: fleetshard_sync::retry::AUTOMATED_LIMIT,
            ..RetryPolicy::default()
        });
        let operation = OperationRecord {
            sync: SyncOperation {
                revision: last.commit.clone(),
                prune: auto.prune,
                resources,
                sync_options: target.spec.policy.sync_options.clone(),
                source,
                ..SyncOperation::default()
            },
            initiated_by: Initiator {
                username: String::new(),
                automated: true,
            },
            retry: Some(retry_record(&retry)),
        };
        let state = self.new_operation(operation);
        self.run_operation(key, target, state).await
    }
}
