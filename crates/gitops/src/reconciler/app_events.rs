//! Where the reconciler's Kubernetes Events come from (`crate::events` writes them): at
//! the status writes Argo CD's controller emits them at, once the write succeeded under
//! the lease gate — the sync and health transitions of a comparison recorded, the start of
//! an automated sync and the end of any operation — and at a deletion that failed. A new
//! owner's first refresh reads the statuses recorded on the Application (with the
//! operation it reads anyway), so a move or a restart is no transition, and a new app's
//! first comparison is one from nothing, as Argo CD writes it.

use fleetshard_controller::AppKey;

use super::memo::KeptOperation;
use super::{GitOpsReconciler, OperationState, RecordedStatuses, StatusUpdate};
use crate::events::{AppEvent, EventLabelKeys, message};

impl GitOpsReconciler {
    /// On this owner's first refresh of `key` (events on): the statuses and the operation
    /// recorded on the Application. A failed read leaves them unknown: no transition
    /// event for that refresh; the operation is read again by the operation.
    pub(super) async fn learn_recorded(&self, key: &AppKey) {
        if self.events.is_none() {
            return;
        }
        let known = self.memos().get(key).is_some_and(|m| m.recorded.is_some());
        if known {
            return;
        }
        let Ok(recorded) = self.sink.recorded(key).await else {
            return;
        };
        let mut memos = self.memos();
        let m = memos.entry(key.clone()).or_default();
        if m.recorded.is_none() {
            m.recorded = recorded.statuses;
        }
        // The operation may have read (and written) it meanwhile: what it knows wins.
        if !m.op_read {
            m.op = recorded.operation.as_ref().map(KeptOperation::new);
            m.op_read = true;
        }
    }

    /// The events of `update`, written: `op_before` is the operation recorded before it.
    pub(super) fn status_events(
        &self,
        key: &AppKey,
        update: &StatusUpdate,
        op_before: Option<OperationState>,
    ) {
        let events = match update {
            StatusUpdate::Comparison(c) => {
                let now = RecordedStatuses {
                    sync: c.sync.status.clone(),
                    health: c.health.status.clone(),
                };
                let before = self
                    .memos()
                    .get_mut(key)
                    .and_then(|m| m.recorded.replace(now.clone()));
                let Some(before) = before else { return };
                let mut events = Vec::new();
                if before.sync != now.sync {
                    events.push(message::sync_status_changed(&before.sync, &now.sync));
                }
                if before.health != now.health {
                    events.push(message::health_status_changed(
                        &before.health,
                        &now.health,
                        &c.health.message,
                    ));
                }
                events
            }
            StatusUpdate::Operation(state) => operation_events(state, op_before.as_ref()),
            StatusUpdate::History(_) => Vec::new(),
        };
        for event in events {
            self.emit(key, event);
        }
    }

    /// Queues `event` about `key` (events on, the app known to the inventory).
    pub(super) fn emit(&self, key: &AppKey, event: AppEvent) {
        let Some(events) = &self.events else { return };
        let Some(target) = self.inventory.target(key) else {
            return;
        };
        let labels = EventLabelKeys::from_argocd_cm(&target.argocd_cm);
        events.emit(key, &target.cluster.id, event, labels);
    }
}

/// An operation's events: its start when it is an automated sync not recorded before
/// (Argo CD's controller starts only those; the API server records a manual one), its end
/// when it was not recorded ended before.
fn operation_events(state: &OperationState, before: Option<&OperationState>) -> Vec<AppEvent> {
    let new = before.is_none_or(|b| b.finished_at.is_some() || b.started_at != state.started_at);
    // This very end, written again (an end whose first write failed is not recorded).
    let ended_before = state.finished_at.is_some()
        && before.is_some_and(|b| b.finished_at.is_some() && b.started_at == state.started_at);
    let mut events = Vec::new();
    // An operation whose first step ended it is first recorded ended: started too.
    if new && !ended_before && state.operation.initiated_by.automated {
        let revisions: Vec<&str> = state.operation.sync.revision.split(',').collect();
        events.push(message::automated_sync_started(&revisions));
    }
    if state.finished_at.is_some() && !ended_before {
        events.push(message::operation_completed(state));
    }
    events
}

#[cfg(test)]
mod tests {
    use super::operation_events;
    use crate::reconciler::{Initiator, OperationRecord, OperationState, SyncOperation};

    fn state(started: &str, finished: Option<&str>, automated: bool) -> OperationState {
        OperationState {
            operation: OperationRecord {
                sync: SyncOperation {
                    revision: "abc".into(),
                    ..SyncOperation::default()
                },
                initiated_by: Initiator {
                    username: String::new(),
                    automated,
                },
                retry: None,
            },
            phase: if finished.is_some() {
                "Succeeded".into()
            } else {
                "Running".into()
            },
            message: String::new(),
            started_at: started.into(),
            finished_at: finished.map(str::to_owned),
            sync_result: None,
            retry_count: 0,
        }
    }

    #[test]
    fn an_automated_sync_starts_once_and_any_operation_ends_once() {
        let running = state("t1", None, true);
        let reasons = |s: &OperationState, b: Option<&OperationState>| -> Vec<&str> {
            operation_events(s, b).iter().map(|e| e.reason).collect()
        };
        assert_eq!(reasons(&running, None), ["OperationStarted"]);
        assert!(reasons(&running, Some(&running)).is_empty(), "a step");
        let done = state("t1", Some("t2"), true);
        assert_eq!(reasons(&done, Some(&running)), ["OperationCompleted"]);
        assert_eq!(
            reasons(&done, None),
            ["OperationStarted", "OperationCompleted"],
            "ended by its first step"
        );
        assert!(reasons(&done, Some(&done)).is_empty(), "written again");
        // A new sync in the same second as the last one's end is still new.
        assert_eq!(
            reasons(&state("t1", None, true), Some(&done)),
            ["OperationStarted"]
        );
        // A manual sync's start is the API server's event.
        assert!(reasons(&state("t3", None, false), Some(&done)).is_empty());
        assert_eq!(
            reasons(&state("t3", Some("t4"), false), None),
            ["OperationCompleted"]
        );
    }
}
