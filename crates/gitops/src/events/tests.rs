use std::collections::BTreeMap;

use super::message::*;
use super::*;
use crate::reconciler::{OperationState, SyncOperationResource, SyncResult};

#[test]
fn the_flag_reads_as_argo_cds() {
    assert_eq!(EnabledEvents::from_list(&["all"]), EnabledEvents::All);
    assert_eq!(
        EnabledEvents::from_list(&["OperationStarted", "none", "all"]),
        EnabledEvents::None
    );
    let some = EnabledEvents::from_list(&["OperationStarted", " ResourceUpdated"]);
    assert!(some.enables("ResourceUpdated") && some.enables("OperationStarted"));
    assert!(!some.enables("OperationCompleted"));
    assert!(!EnabledEvents::from_list::<&str>(&[]).enables("OperationStarted"));
}

#[test]
fn event_labels_are_the_included_keys_less_the_excluded() {
    let cm = BTreeMap::from([
        (
            "resource.includeEventLabelKeys".to_owned(),
            "team, env*".to_owned(),
        ),
        (
            "resource.excludeEventLabelKeys".to_owned(),
            "environment".to_owned(),
        ),
    ]);
    let keys = EventLabelKeys::from_argocd_cm(&cm);
    let labels = BTreeMap::from([
        ("team".to_owned(), "a".to_owned()),
        ("env".to_owned(), "prod".to_owned()),
        ("environment".to_owned(), "prod".to_owned()),
        ("other".to_owned(), "x".to_owned()),
    ]);
    let selected: Vec<String> = keys.select(&labels).into_keys().collect();
    assert_eq!(selected, ["env", "team"]);
    assert!(
        EventLabelKeys::default().select(&labels).is_empty(),
        "none by default"
    );
}

#[test]
fn the_messages_are_argo_cds() {
    let e = sync_status_changed("", "OutOfSync");
    assert_eq!(
        (e.kind, e.reason, e.message.as_str()),
        (
            EventType::Normal,
            "ResourceUpdated",
            "Updated sync status:  -> OutOfSync"
        )
    );
    assert_eq!(
        health_status_changed("Progressing", "Healthy", "").message,
        "Updated health status: Progressing -> Healthy"
    );
    assert_eq!(
        health_status_changed("Healthy", "Degraded", "pod crashed").message,
        "Updated health status: Healthy -> Degraded (pod crashed)"
    );
    let started = automated_sync_started(&["abc", "def"]);
    assert_eq!(
        (started.reason, started.message.as_str()),
        ("OperationStarted", "Initiated automated sync to 'abc, def'")
    );
    let mut state: OperationState = serde_json::from_value(serde_json::json!({
        "phase": "Succeeded", "message": "successfully synced", "startedAt": "t1",
        "finishedAt": "t2", "syncResult": {"revision": "abc"},
    }))
    .unwrap();
    let done = operation_completed(&state);
    assert_eq!(
        (done.kind, done.reason, done.message.as_str()),
        (
            EventType::Normal,
            "OperationCompleted",
            "Sync operation to abc succeeded"
        )
    );
    state.phase = "Failed".into();
    state.message = "one or more objects failed to apply".into();
    state.operation.sync.resources = vec![SyncOperationResource::default()];
    let failed = operation_completed(&state);
    assert_eq!(
        (failed.kind, failed.message.as_str()),
        (
            EventType::Warning,
            "Partial sync operation to abc failed: one or more objects failed to apply"
        )
    );
    state.sync_result = None::<SyncResult>;
    state.phase = "Error".into();
    state.operation.sync.resources.clear();
    state.message = "sync refused".into();
    assert_eq!(
        operation_completed(&state).message,
        "Sync operation failed: sync refused"
    );
    assert_eq!(
        deletion_failed("boom").message,
        "Unable to delete application resources: boom"
    );
}
