//! An operation in progress, step by step, as Argo CD's controller runs it
//! (`processRequestedAppOperation`): a retry that waits its backoff, the sync timeout, a
//! termination, then one step of the sync engine at the operation's revision
//! (`step.rs`), its state persisted as `operationState`; at the end Argo CD's retries of a
//! failed operation, and a successful sync's entry in `status.history`.
//!
//! Times are this replica's monotonic clock ([`super::memo::OpClock`]): the sync timeout counts
//! from when this owner first stepped the operation, a retry waits its backoff from when
//! this owner saw the failure (a new owner waits the whole backoff), the wave delay from
//! the wave's writes — never a recorded wall-clock time of another replica.

use std::time::Duration;

use fleetshard_controller::{AppKey, Operated, ReconcileError};
use fleetshard_manifest::AppSource;
use fleetshard_sync::retry::RetryStrategy;
use fleetshard_sync::{
    ManagedMetadata, NamespaceCreation, Next, OperationPhase, Selected, Settings, Sync, SyncOptions,
};
use serde_json::Value;
use tokio::time::Instant;

use super::history::{RevisionHistory, appended};
use super::step::{self, LeaseLapsed, StepInput};
use super::{
    AppTarget, GitOpsReconciler, OperationState, Refreshed, StatusUpdate, SyncResult, place,
};
use crate::apply;
use crate::compare::ResourceKey;
use crate::source::Refresh;

/// How one step ended.
enum StepEnd {
    /// It wrote and did not wait: step again at once (with what it wrote in the inputs).
    Again,
    /// Wait this long for the next step (a change of the app's objects comes sooner).
    Wait(Duration),
    /// The operation ended so.
    Finished(OperationPhase, String),
}

/// The attempt an operation's hooks carry: its start and retry count.
fn attempt(state: &OperationState) -> String {
    format!("{}#{}", state.started_at, state.retry_count)
}

fn seconds(rfc3339: &str) -> Option<i64> {
    rfc3339
        .parse::<jiff::Timestamp>()
        .ok()
        .map(jiff::Timestamp::as_second)
}

/// The retry strategy an operation records (`None`: no retries).
fn retry_strategy(state: &OperationState) -> Option<RetryStrategy> {
    let r = state.operation.retry.as_ref()?;
    let b = r.backoff.clone().unwrap_or_default();
    Some(RetryStrategy {
        limit: r.limit,
        duration: b.duration,
        factor: b.factor,
        max_duration: b.max_duration,
        refresh: r.refresh,
    })
}

impl GitOpsReconciler {
    /// Runs the operation `state` (new, or recorded in progress) as far as it goes now.
    pub(super) async fn run_operation(
        &self,
        key: &AppKey,
        target: &AppTarget,
        mut state: OperationState,
    ) -> Result<Operated, ReconcileError> {
        let now = Instant::now();
        let seen = {
            let mut memos = self.memos();
            let m = memos.entry(key.clone()).or_default();
            if m.op_clock.attempt != attempt(&state) {
                m.op_clock = super::memo::OpClock {
                    attempt: attempt(&state),
                    seen: Some(now),
                    not_before: None,
                };
            }
            if let Some(at) = m.op_clock.not_before.filter(|at| *at > now)
                && state.phase != "Terminating"
                && !target.spec.lifecycle.terminating
            {
                return Ok(Operated::Wait(at - now));
            }
            m.op_clock.seen.unwrap_or(now)
        };
        let mut cause = "";
        if target.spec.lifecycle.terminating {
            state.phase = "Terminating".to_owned();
        }
        for _ in 0..4 {
            if state.phase == "Terminating" {
                return self.terminate_operation(key, target, state, cause).await;
            }
            if state.finished_at.is_some() {
                // A failed attempt waits its retry (a new owner waits the whole backoff).
                let wait = self.retry_wait(key, &state);
                if let Some(wait) = wait {
                    return Ok(Operated::Wait(wait));
                }
                let mut extra = "";
                if retry_strategy(&state).is_some_and(|r| r.refresh) {
                    extra = " with latest revisions";
                    state.operation.sync.revision.clear();
                }
                state.message =
                    format!("Retrying operation{extra}. Attempt #{}", state.retry_count);
                state.finished_at = None;
                state.sync_result = None;
                self.persist(key, &state).await?;
                continue;
            }
            if let Some(limit) = self.config.sync_timeout
                && Instant::now().saturating_duration_since(seen) >= limit
            {
                state.phase = "Terminating".to_owned();
                state.message = "operation is terminating due to timeout".to_owned();
                cause = "controller sync timeout";
                self.persist(key, &state).await?;
                continue;
            }
            match self.step_operation(key, target, &mut state, false).await? {
                StepEnd::Again => continue,
                StepEnd::Wait(d) => return Ok(Operated::Wait(d)),
                StepEnd::Finished(phase, message) => {
                    return self
                        .finish_operation(key, target, state, phase, message, "")
                        .await;
                }
            }
        }
        Ok(Operated::Wait(Duration::ZERO))
    }

    /// How long a failed attempt still waits for its retry; `None`: retry now.
    fn retry_wait(&self, key: &AppKey, state: &OperationState) -> Option<Duration> {
        let now = Instant::now();
        let delay = retry_strategy(state)
            .and_then(|r| r.delay(state.retry_count.saturating_sub(1)).ok())
            .unwrap_or_default();
        let mut memos = self.memos();
        let m = memos.entry(key.clone()).or_default();
        let at = *m.op_clock.not_before.get_or_insert(now + delay);
        (at > now).then(|| at - now).or_else(|| {
            m.op_clock.not_before = None;
            None
        })
    }

    /// Writes `state` as the app's `operationState` and remembers it.
    pub(super) async fn persist(
        &self,
        key: &AppKey,
        state: &OperationState,
    ) -> Result<(), ReconcileError> {
        // `record` remembers it once written.
        self.record(key, StatusUpdate::Operation(Box::new(state.clone())))
            .await
    }

    /// The app as the operation syncs it: its recorded source and revision(s).
    fn target_at(target: &AppTarget, state: &OperationState) -> AppTarget {
        let mut at = target.clone();
        let result = state.sync_result.as_ref();
        if let Some(source) = result
            .and_then(|r| r.source.clone())
            .or_else(|| state.operation.sync.source.clone())
            .filter(|_| target.spec.sources.is_empty())
            .and_then(|raw| AppSource::from_raw(&raw))
        {
            at.spec.source = source;
        }
        match result {
            Some(r) if !r.revisions.is_empty() => {
                for (s, rev) in at.spec.sources.iter_mut().zip(&r.revisions) {
                    s.target_revision.clone_from(rev);
                }
            }
            Some(r) if !r.revision.is_empty() => {
                at.spec.source.target_revision.clone_from(&r.revision);
            }
            _ if target.spec.sources.is_empty() && !state.operation.sync.revision.is_empty() => {
                at.spec
                    .source
                    .target_revision
                    .clone_from(&state.operation.sync.revision);
            }
            _ => {}
        }
        at
    }

    /// The engine's settings for one step of `state`.
    async fn settings(
        &self,
        target: &AppTarget,
        state: &OperationState,
        refreshed: &Refreshed,
        conn: &crate::live::ClusterConn,
    ) -> Result<Settings, String> {
        let op = &state.operation.sync;
        let options = SyncOptions(op.sync_options.clone());
        let namespace = place::destination_namespace(target);
        let namespace_creation = if options.has("CreateNamespace=true") {
            // Creating it is a write too: never outside the project.
            let ns_key = ResourceKey::new("", "Namespace", "", &namespace);
            self.check_resource(target, &ns_key)
                .map_err(|p| p.message)?;
            let key = AppKey::new(&target.app.namespace, &target.app.name);
            let at = self.app_conn(&key, conn, op.dry_run);
            let live = apply::get_namespace(&at, &namespace)
                .await
                .map_err(|e| format!("reading namespace {namespace}: {e}"))?;
            Some(NamespaceCreation {
                managed: target
                    .spec
                    .policy
                    .managed_namespace_metadata
                    .as_ref()
                    .map(|m| ManagedMetadata {
                        labels: m.labels.clone(),
                        annotations: m.annotations.clone(),
                    }),
                live: live.and_then(|v| step::live_object(&v, "", refreshed)),
            })
        } else {
            None
        };
        let strategy = op.sync_strategy.as_ref();
        let force = |how: &str| {
            strategy
                .and_then(|s| s.pointer(&format!("/{how}/force")))
                .and_then(Value::as_bool)
                .unwrap_or(false)
        };
        let apply_strategy = strategy.is_some_and(|s| s.get("apply").is_some());
        let approved = target
            .spec
            .lifecycle
            .deletion_approved
            .as_deref()
            .and_then(seconds);
        Ok(Settings {
            namespace,
            revision: refreshed.commit.clone(),
            started_at_unix: seconds(&state.started_at).unwrap_or_default(),
            attempt: attempt(state),
            prune: op.prune,
            dry_run: op.dry_run,
            force: force("apply") || force("hook"),
            skip_hooks: apply_strategy || !op.resources.is_empty(),
            selection: (!op.resources.is_empty()).then(|| {
                op.resources
                    .iter()
                    .map(|r| Selected {
                        group: r.group.clone(),
                        kind: r.kind.clone(),
                        namespace: r.namespace.clone(),
                        name: r.name.clone(),
                    })
                    .collect()
            }),
            prune_confirmed: approved
                .zip(seconds(&state.started_at))
                .is_some_and(|(a, s)| a >= s),
            options,
            namespace_creation,
        })
    }

    /// The refresh at the operation's revision, and the step's inputs from it.
    async fn step_input(
        &self,
        key: &AppKey,
        target: &AppTarget,
        state: &mut OperationState,
    ) -> Result<
        Result<(StepInput, std::sync::Arc<crate::live::ClusterConn>), (OperationPhase, String)>,
        ReconcileError,
    > {
        let at = Self::target_at(target, state);
        // The first step resolves the revision afresh, as Argo CD's sync compares with
        // `noRevisionCache` (a commit pushed since the last refresh is what a "Sync" asked
        // for); later steps run at the revision it recorded.
        let refresh = if state.sync_result.is_none() {
            Refresh::Resolve
        } else {
            Refresh::Normal
        };
        let refreshed = match self.compare(key, &at, refresh).await {
            Ok((refreshed, _)) => refreshed,
            Err(p) => return Ok(Err((OperationPhase::Error, p.message))),
        };
        if state.sync_result.is_none() {
            let multi = !refreshed.revisions.is_empty();
            let raw = |s: &AppSource| s.raw.is_object().then(|| s.raw.clone());
            state.sync_result = Some(SyncResult {
                revision: if multi {
                    String::new()
                } else {
                    refreshed.commit.clone()
                },
                revisions: refreshed.revisions.clone(),
                source: if multi { None } else { raw(&at.spec.source) },
                sources: if multi {
                    at.spec.sources.iter().filter_map(raw).collect()
                } else {
                    Vec::new()
                },
                resources: Vec::new(),
                managed_namespace_metadata: target
                    .spec
                    .policy
                    .managed_namespace_metadata
                    .as_ref()
                    .map(|m| serde_json::json!({"labels": m.labels, "annotations": m.annotations})),
            });
        }
        let conn = self
            .clusters
            .start(&target.cluster)
            .await
            .map_err(|e| ReconcileError::RetryLater(e.to_string()))?;
        let settings = match self.settings(target, state, &refreshed, &conn).await {
            Ok(s) => s,
            Err(why) => return Ok(Err((OperationPhase::Error, why))),
        };
        if settings.options.has("FailOnSharedResource=true") && !refreshed.shared.is_empty() {
            return Ok(Err((
                OperationPhase::Failed,
                format!("Shared resource found: {}", refreshed.shared.join("; ")),
            )));
        }
        let app_name = self.instance_name(key);
        Ok(Ok((
            step::build_input(&refreshed, &app_name, settings),
            conn,
        )))
    }

    /// One step of the operation (or, with `terminate`, its termination).
    async fn step_operation(
        &self,
        key: &AppKey,
        target: &AppTarget,
        state: &mut OperationState,
        terminate: bool,
    ) -> Result<StepEnd, ReconcileError> {
        let (step, conn) = match self.step_input(key, target, state).await? {
            Ok(found) => found,
            Err((phase, why)) => return Ok(StepEnd::Finished(phase, why)),
        };
        let app_name = self.instance_name(key);
        let record = step::record_of(
            &state
                .sync_result
                .as_ref()
                .map(|r| r.resources.clone())
                .unwrap_or_default(),
        );
        let mut sync = if terminate {
            Sync::terminate(&step.input, record)
        } else {
            Sync::new(&step.input, record, false)
        };
        let conn = self.app_conn(key, &conn, step.input.settings.dry_run);
        let mut wrote = false;
        loop {
            let next = sync.advance();
            if let Some(r) = state.sync_result.as_mut() {
                r.resources = step::entries_of(sync.record());
            }
            match next {
                Next::Persist => self.persist(key, state).await?,
                Next::Write(writes) => {
                    let outcomes = match self.execute(&conn, &app_name, &step, &writes).await {
                        Ok(outcomes) => outcomes,
                        // Nothing more may be written, the status included.
                        Err(LeaseLapsed) => {
                            return Err(ReconcileError::RetryLater(
                                "the shard lease lapsed during a sync".into(),
                            ));
                        }
                    };
                    wrote |= !step.input.settings.dry_run;
                    sync.written(outcomes);
                }
                Next::Running {
                    message,
                    wave_delay,
                } => {
                    state.message = message;
                    self.persist(key, state).await?;
                    if wave_delay {
                        let delay = self.config.wave_delay;
                        if let Some(m) = self.memos().get_mut(key) {
                            m.op_clock.not_before = Some(Instant::now() + delay);
                        }
                        return Ok(StepEnd::Wait(delay));
                    }
                    if wrote {
                        return Ok(StepEnd::Again);
                    }
                    return Ok(StepEnd::Wait(self.config.operation_poll));
                }
                Next::Finished { phase, message } => {
                    return Ok(StepEnd::Finished(phase, message));
                }
            }
        }
    }

    /// `Terminating`: running hooks deleted, the operation failed (never retried).
    async fn terminate_operation(
        &self,
        key: &AppKey,
        target: &AppTarget,
        mut state: OperationState,
        cause: &str,
    ) -> Result<Operated, ReconcileError> {
        state.phase = "Terminating".to_owned();
        let (phase, message) = match self.step_operation(key, target, &mut state, true).await? {
            StepEnd::Finished(phase, message) => (phase, message),
            _ => (OperationPhase::Failed, "Operation terminated".to_owned()),
        };
        self.finish_operation(key, target, state, phase, message, cause)
            .await
    }

    /// The end of an attempt: a failure retried by the operation's strategy, or the
    /// operation finished (a successful whole sync added to `status.history`).
    async fn finish_operation(
        &self,
        key: &AppKey,
        target: &AppTarget,
        mut state: OperationState,
        mut phase: OperationPhase,
        mut message: String,
        cause: &str,
    ) -> Result<Operated, ReconcileError> {
        let terminating = state.phase == "Terminating";
        let failed = matches!(phase, OperationPhase::Failed | OperationPhase::Error);
        if failed
            && !terminating
            && let Some(retry) = retry_strategy(&state).filter(|r| r.allows(state.retry_count))
        {
            match retry.delay(state.retry_count) {
                Ok(delay) => {
                    state.phase = "Running".to_owned();
                    state.finished_at = Some(self.clock.now_rfc3339());
                    state.retry_count += 1;
                    state.message = format!(
                        "{message}. Retrying attempt #{} in {delay:?}.",
                        state.retry_count
                    );
                    self.persist(key, &state).await?;
                    if let Some(m) = self.memos().get_mut(key) {
                        m.op_clock.not_before = Some(Instant::now() + delay);
                    }
                    return Ok(Operated::Wait(delay));
                }
                Err(e) => {
                    phase = OperationPhase::Error;
                    message = format!("{message} (failed to retry: {e})");
                }
            }
        }
        if terminating && !cause.is_empty() {
            message = format!("{message}, triggered by {cause}");
        }
        if state.retry_count > 0 {
            message = format!("{message} (retried {} times).", state.retry_count);
        }
        if phase == OperationPhase::Succeeded && state.operation.sync.dry_run {
            message = "dry run succeeded: the server validated every object; nothing was \
                       applied or pruned"
                .to_owned();
        }
        state.phase = phase.as_str().to_owned();
        state.message = message;
        let finished_at = self.clock.now_rfc3339();
        state.finished_at = Some(finished_at.clone());
        self.persist(key, &state).await?;
        if let Some(m) = self.memos().get_mut(key) {
            let took = super::report::seconds_between(&state.started_at, &finished_at);
            m.activity
                .synced(&state.phase, state.operation.sync.dry_run, took);
        }
        let op = &state.operation.sync;
        if phase == OperationPhase::Succeeded
            && !op.dry_run
            && op.resources.is_empty()
            && let Some(result) = &state.sync_result
        {
            let history = self
                .sink
                .history(key)
                .await
                .map_err(|e| ReconcileError::RetryLater(e.to_string()))?;
            let entry = RevisionHistory {
                id: 0,
                revision: result.revision.clone(),
                deployed_at: finished_at,
                deploy_started_at: Some(state.started_at.clone()),
                source: result.source.clone(),
                sources: result.sources.clone(),
                revisions: result.revisions.clone(),
                initiated_by: state.operation.initiated_by.clone(),
            };
            let limit = target.spec.lifecycle.revision_history_limit;
            self.record(key, StatusUpdate::History(appended(history, entry, limit)))
                .await?;
        }
        if let Some(m) = self.memos().get_mut(key) {
            m.sync_error = None;
            m.op_clock = super::memo::OpClock::default();
        }
        Ok(Operated::Finished)
    }
}
