//! The events Argo CD's application controller records, with its messages word for word
//! (its `controller/appcontroller.go`): each a pure function of what the reconciler
//! recorded.

use super::{
    AppEvent, EventType, OPERATION_COMPLETED, OPERATION_STARTED, RESOURCE_UPDATED, STATUS_REFRESHED,
};
use crate::reconciler::OperationState;

/// `Updated sync status: FROM -> TO` (`Normal`, `ResourceUpdated`); `from` is empty for an
/// app never compared before, as Argo CD writes it.
pub fn sync_status_changed(from: &str, to: &str) -> AppEvent {
    AppEvent {
        kind: EventType::Normal,
        reason: RESOURCE_UPDATED,
        message: format!("Updated sync status: {from} -> {to}"),
    }
}

/// `Updated health status: FROM -> TO`, with ` (MESSAGE)` when the new health says why
/// (`Normal`, `ResourceUpdated`).
pub fn health_status_changed(from: &str, to: &str, health_message: &str) -> AppEvent {
    let mut message = format!("Updated health status: {from} -> {to}");
    if !health_message.is_empty() {
        message = format!("{message} ({health_message})");
    }
    AppEvent {
        kind: EventType::Normal,
        reason: RESOURCE_UPDATED,
        message,
    }
}

/// `Initiated automated sync to 'REVISIONS'` (`Normal`, `OperationStarted`): the
/// revisions the automated sync goes to, a multi-source app's joined with `, `.
pub fn automated_sync_started(revisions: &[&str]) -> AppEvent {
    AppEvent {
        kind: EventType::Normal,
        reason: OPERATION_STARTED,
        message: format!("Initiated automated sync to '{}'", revisions.join(", ")),
    }
}

/// The end of an operation (`OperationCompleted`): `Sync operation` (`Partial sync
/// operation` when it synced chosen resources), `to REVISION` once a sync result was
/// recorded, then `succeeded` (`Normal`) or `failed: MESSAGE` (`Warning`; also a request
/// refused, phase `Error`).
pub fn operation_completed(state: &OperationState) -> AppEvent {
    let mut words = vec![if state.operation.sync.resources.is_empty() {
        "Sync operation"
    } else {
        "Partial sync operation"
    }];
    if let Some(result) = &state.sync_result {
        words.push("to");
        words.push(&result.revision);
    }
    let kind = if state.phase == "Succeeded" {
        words.push("succeeded");
        EventType::Normal
    } else {
        words.push("failed:");
        words.push(&state.message);
        EventType::Warning
    };
    AppEvent {
        kind,
        reason: OPERATION_COMPLETED,
        message: words.join(" "),
    }
}

/// `Unable to delete application resources: ERROR` (`Warning`, `StatusRefreshed`): the
/// deletion of an Application's resources failed.
pub fn deletion_failed(error: &str) -> AppEvent {
    AppEvent {
        kind: EventType::Warning,
        reason: STATUS_REFRESHED,
        message: format!("Unable to delete application resources: {error}"),
    }
}
