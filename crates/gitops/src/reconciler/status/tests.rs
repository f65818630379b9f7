//! The status patches against what Argo CD's Application CRD requires.
use super::*;

#[test]
fn a_finished_operation_clears_the_request_and_a_running_one_does_not() {
    let mut op = OperationState {
        operation: OperationRecord::default(),
        phase: "Running".into(),
        message: "sync".into(),
        started_at: "2026-11-21T10:00:00Z".into(),
        finished_at: None,
        sync_result: None,
        retry_count: 0,
    };
    let running = StatusUpdate::Operation(Box::new(op.clone())).merge_patch();
    assert!(running.get("operation").is_none(), "{running}");
    assert_eq!(running["status"]["operationState"]["phase"], "Running");
    // It replaces the previous operation's state: what it leaves out is removed.
    let state = running["status"]["operationState"].as_object().unwrap();
    assert_eq!(state.get("finishedAt"), Some(&Value::Null), "{running}");
    assert_eq!(state.get("syncResult"), Some(&Value::Null), "{running}");
    assert_eq!(
        running["status"]["operationState"]["operation"]["sync"]
            .as_object()
            .and_then(|s| s.get("resources")),
        Some(&Value::Null),
        "{running}"
    );
    op.phase = "Succeeded".into();
    op.finished_at = Some("2026-11-21T10:00:01Z".into());
    let done = StatusUpdate::Operation(Box::new(op)).merge_patch();
    assert_eq!(done["operation"], Value::Null, "{done}");
    assert!(done.as_object().unwrap().contains_key("operation"));
}

/// What Argo CD's Application CRD requires of a written operation: `operationState`
/// with `operation` (the request, `initiatedBy` included), `phase` and `startedAt`, and
/// every `syncResult.resources[]` entry with `group, kind, name, namespace, version` —
/// `namespace` empty, not absent, for a cluster-scoped object.
#[test]
fn a_written_operation_has_what_argo_cds_crd_requires() {
    let op = OperationState {
        operation: OperationRecord {
            sync: SyncOperation {
                prune: true,
                ..SyncOperation::default()
            },
            initiated_by: Initiator {
                username: String::new(),
                automated: true,
            },
            retry: None,
        },
        phase: "Succeeded".into(),
        message: "ok".into(),
        started_at: "2026-11-21T10:00:00Z".into(),
        finished_at: Some("2026-11-21T10:00:01Z".into()),
        sync_result: Some(SyncResult {
            revision: "abc".into(),
            revisions: Vec::new(),
            source: Some(json!({"repoURL": "https://git.example/apps", "path": "team"})),
            sources: Vec::new(),
            resources: vec![SyncResultEntry {
                group: String::new(),
                version: "v1".into(),
                kind: "Namespace".into(),
                namespace: String::new(),
                name: "team".into(),
                status: "Synced".into(),
                message: "applied".into(),
                hook_type: String::new(),
                hook_phase: String::new(),
                sync_phase: String::new(),
            }],
            managed_namespace_metadata: None,
        }),
        retry_count: 0,
    };
    // What the patch records on an Application with no operation yet: its nulls
    // (removals of what an earlier operation may have left) remove nothing.
    let patch = without_nulls(StatusUpdate::Operation(Box::new(op)).merge_patch());
    let state = &patch["status"]["operationState"];
    for field in ["operation", "phase", "startedAt"] {
        assert!(state.get(field).is_some(), "{field} missing: {state}");
    }
    assert_eq!(
        state["operation"]["initiatedBy"],
        json!({"automated": true})
    );
    assert_eq!(state["operation"]["sync"], json!({"prune": true}));
    let entry = &state["syncResult"]["resources"][0];
    for field in ["group", "kind", "name", "namespace", "version"] {
        assert!(entry.get(field).is_some(), "{field} missing: {entry}");
    }
    assert_eq!(entry["namespace"], "");
    // A record written before `operation` existed still reads.
    let old: OperationState = serde_json::from_value(json!({
        "phase": "Succeeded", "message": "", "startedAt": "t"
    }))
    .unwrap();
    assert_eq!(old.operation, OperationRecord::default());
}

/// A merge patch applied to an empty object: null members removed, recursively.
fn without_nulls(v: Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, without_nulls(v)))
                .collect(),
        ),
        other => other,
    }
}

/// A multi-source sync records `revisions` and `sources` with an empty `revision` (the CRD
/// requires the field), as Argo CD does; a later single-source sync removes both lists.
#[test]
fn a_multi_source_sync_records_its_revisions_and_a_single_source_one_removes_them() {
    let state = |result: SyncResult| OperationState {
        operation: OperationRecord::default(),
        phase: "Succeeded".into(),
        message: "ok".into(),
        started_at: "2026-11-21T10:00:00Z".into(),
        finished_at: Some("2026-11-21T10:00:01Z".into()),
        sync_result: Some(result),
        retry_count: 0,
    };
    let multi = SyncResult {
        revision: String::new(),
        revisions: vec!["abc".into(), "1.2.7".into()],
        source: None,
        sources: vec![json!({"repoURL": "https://git.example/values", "ref": "values"})],
        resources: Vec::new(),
        managed_namespace_metadata: None,
    };
    assert_eq!(multi.synced_commit(), "abc,1.2.7");
    let patch = StatusUpdate::Operation(Box::new(state(multi))).merge_patch();
    let written = &patch["status"]["operationState"]["syncResult"];
    assert_eq!(written["revision"], "", "{written}");
    assert_eq!(written["revisions"], json!(["abc", "1.2.7"]));
    assert_eq!(written["sources"][0]["ref"], "values");
    assert_eq!(written["source"], Value::Null, "removed");

    let single = SyncResult {
        revision: "def".into(),
        revisions: Vec::new(),
        source: Some(json!({"repoURL": "https://git.example/apps"})),
        sources: Vec::new(),
        resources: Vec::new(),
        managed_namespace_metadata: None,
    };
    assert_eq!(single.synced_commit(), "def");
    let patch = StatusUpdate::Operation(Box::new(state(single))).merge_patch();
    let written = &patch["status"]["operationState"]["syncResult"];
    let map = written.as_object().unwrap();
    assert_eq!(map["revisions"], Value::Null, "{written}");
    assert_eq!(map["sources"], Value::Null, "{written}");
    assert_eq!(written["source"]["repoURL"], "https://git.example/apps");
}

#[test]
fn health_transition_time_is_kept_or_set_and_resources_without_health_write_none() {
    let comparison = |health: &str, at: &str, since: Option<&str>| ComparisonStatus {
        sync: SyncInfo {
            status: "Synced".into(),
            revision: None,
            revisions: Vec::new(),
            compared_to: None,
            compared_before: None,
        },
        health: HealthInfo {
            status: health.into(),
            message: String::new(),
            last_transition_time: since.map(str::to_owned),
        },
        resources: vec![ResourceEntry {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: "ns".into(),
            name: "c".into(),
            status: "Synced".into(),
            health: HealthInfo::default(),
            requires_pruning: false,
            hook: false,
            sync_wave: 0,
        }],
        reconciled_at: at.into(),
        conditions: Vec::new(),
        source_type: None,
        source_types: Vec::new(),
        summary: None,
        controller_namespace: String::new(),
        refresh_done: false,
    };
    let old = comparison("Progressing", "t1", Some("t0"));
    let mut same = comparison("Progressing", "t2", None);
    keep_health_transition(&mut same, Some(&old));
    assert_eq!(same.health.last_transition_time.as_deref(), Some("t0"));
    let mut changed = comparison("Healthy", "t2", None);
    keep_health_transition(&mut changed, Some(&old));
    assert_eq!(changed.health.last_transition_time.as_deref(), Some("t2"));
    let mut first = comparison("Healthy", "t3", None);
    keep_health_transition(&mut first, None);
    assert_eq!(first.health.last_transition_time.as_deref(), Some("t3"));
    // Known by the reconciler: left as given; in the patch, a resource without health has none.
    let mut given = comparison("Healthy", "t4", Some("t3"));
    keep_health_transition(&mut given, Some(&old));
    assert_eq!(given.health.last_transition_time.as_deref(), Some("t3"));
    let patch = StatusUpdate::Comparison(Box::new(given)).merge_patch();
    assert_eq!(patch["status"]["health"]["lastTransitionTime"], "t3");
    assert!(
        patch["status"]["resources"][0].get("health").is_none(),
        "{patch}"
    );
}
