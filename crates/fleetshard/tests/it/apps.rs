//! `fleetshard apps`: statuses written by the local-mode sink into a SQLite store, read back
//! by the binary as a table and as JSON, with filters and an unreadable record.

use std::path::Path;
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

use crate::support::replicas::fleetshard;
use fleetshard_controller::AppKey;
use fleetshard_coord::store::{Precondition, Store};
use fleetshard_gitops::reconciler::{
    ComparisonStatus, Condition, HealthInfo, OperationState, StatusSink, StatusUpdate,
    StoreStatusSink, SyncInfo, status_key,
};
use fleetshard_store_sqlite::SqliteStore;
use serde_json::{Value, json};

const ROOT: &str = "fleetshard/";

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn comparison(sync: &str, health: &str, message: Option<&str>) -> ComparisonStatus {
    ComparisonStatus {
        sync: SyncInfo {
            status: sync.to_owned(),
            revision: Some("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b".to_owned()),
            revisions: Vec::new(),
            compared_to: None,
            compared_before: None,
        },
        health: HealthInfo {
            status: health.to_owned(),
            message: String::new(),
            last_transition_time: None,
        },
        resources: Vec::new(),
        source_type: None,
        source_types: Vec::new(),
        summary: None,
        controller_namespace: String::new(),
        refresh_done: false,
        reconciled_at: "2026-11-21T10:00:00Z".to_owned(),
        conditions: message
            .map(|m| Condition {
                kind: "ComparisonError".to_owned(),
                message: m.to_owned(),
                last_transition_time: "2026-11-21T09:59:00Z".to_owned(),
            })
            .into_iter()
            .collect(),
    }
}

/// Three apps written by the sink, and one record that is not a status.
fn populate(db: &Path) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(db).unwrap());
        let sink = StoreStatusSink::new(store.clone(), ROOT, Duration::from_secs(600));
        let write = |ns: &'static str, name: &'static str, update: StatusUpdate| {
            let sink = &sink;
            async move { sink.write(&AppKey::new(ns, name), &update).await.unwrap() }
        };
        write(
            "team-a",
            "guestbook",
            StatusUpdate::Comparison(Box::new(comparison("Synced", "Healthy", None))),
        )
        .await;
        write(
            "team-a",
            "guestbook",
            StatusUpdate::Operation(Box::new(OperationState {
                operation: Default::default(),
                phase: "Succeeded".to_owned(),
                message: "successfully synced".to_owned(),
                started_at: "2026-11-21T09:58:00Z".to_owned(),
                finished_at: Some("2026-11-21T09:58:01Z".to_owned()),
                sync_result: None,
                retry_count: 0,
            })),
        )
        .await;
        let long = format!("manifests/deploy.yaml: document 2: {}", "x".repeat(200));
        write(
            "team-b",
            "api",
            StatusUpdate::Comparison(Box::new(comparison("Unknown", "Degraded", Some(&long)))),
        )
        .await;
        write(
            "team-b",
            "web",
            StatusUpdate::Comparison(Box::new(comparison("OutOfSync", "Progressing", None))),
        )
        .await;
        let bad = status_key(ROOT, &AppKey::new("team-c", "broken"));
        store
            .put(
                &bad,
                br#"{"comparison":{"sync":{"status":true}}}"#.to_vec(),
                Precondition::Absent,
            )
            .await
            .unwrap();
        bad
    })
}

#[test]
fn apps_lists_statuses_as_a_table_and_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let bad_key = populate(&db);
    let url = format!("sqlite://{}", db.display());

    let table = ok(fleetshard()
        .args(["apps", "--store", &url])
        .output()
        .unwrap());
    let lines: Vec<&str> = table.lines().collect();
    let find = |app: &str| {
        *lines
            .iter()
            .find(|l| l.starts_with(app))
            .unwrap_or_else(|| panic!("no row for {app}:\n{table}"))
    };
    let header = find("APP");
    for col in [
        "SYNC",
        "REVISION",
        "HEALTH",
        "OPERATION",
        "RECONCILED",
        "MESSAGE",
    ] {
        assert!(header.contains(col), "{header}");
    }
    let guestbook: Vec<&str> = find("team-a/guestbook").split_whitespace().collect();
    assert_eq!(
        guestbook,
        [
            "team-a/guestbook",
            "Synced",
            "9f86d08",
            "Healthy",
            "Succeeded",
            "2026-11-21T10:00:00Z",
            "-"
        ]
    );
    let api = find("team-b/api");
    assert!(
        api.contains("manifests/deploy.yaml: document 2: xxx"),
        "{api}"
    );
    assert!(api.ends_with('…'), "the message is not cut: {api}");
    assert!(api.chars().count() < 200, "{api}");
    let broken = find("team-c/broken");
    assert!(broken.contains(&bad_key), "{broken}");
    assert!(broken.contains("comparison.sync.status"), "{broken}");
    assert!(
        table.contains("4 apps: 1 Synced, 1 OutOfSync, 1 Unknown; 1 unreadable"),
        "{table}"
    );

    let json: Value = serde_json::from_str(&ok(fleetshard()
        .args(["apps", "--store", &url, "--output", "json"])
        .output()
        .unwrap()))
    .unwrap();
    assert_eq!(json["prefix"], "fleetshard-status/apps/");
    let apps = json["apps"].as_array().unwrap();
    let names: Vec<&str> = apps.iter().map(|a| a["app"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "team-a/guestbook",
            "team-b/api",
            "team-b/web",
            "team-c/broken"
        ]
    );
    assert_eq!(apps[0]["record"]["comparison"]["sync"]["status"], "Synced");
    // The contract: each app's sync and health status and its conditions (type, message).
    assert_eq!(
        (&apps[0]["sync"], &apps[0]["health"], &apps[0]["conditions"]),
        (&json!("Synced"), &json!("Healthy"), &json!([]))
    );
    assert_eq!(apps[1]["sync"], "Unknown");
    assert_eq!(apps[1]["conditions"][0]["type"], "ComparisonError");
    assert!(
        apps[1]["conditions"][0]["message"]
            .as_str()
            .unwrap()
            .starts_with("manifests/deploy.yaml: document 2: "),
        "{}",
        apps[1]
    );
    assert_eq!(apps[0]["record"]["operation"]["phase"], "Succeeded");
    assert_eq!(apps[0].get("error"), None);
    // The unreadable record: as stored, with what is wrong.
    assert_eq!(apps[3]["record"]["comparison"]["sync"]["status"], true);
    let err = apps[3]["error"].as_str().unwrap();
    assert!(
        err.contains(&bad_key) && err.contains("comparison.sync.status"),
        "{err}"
    );
}

#[test]
fn apps_filters_by_sync_and_health_and_keeps_unreadable_records() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    populate(&db);
    let url = format!("sqlite://{}", db.display());
    let names = |extra: &[&str]| -> Vec<String> {
        let out = ok(fleetshard()
            .args(["apps", "--store", &url, "--output", "json"])
            .args(extra)
            .output()
            .unwrap());
        let v: Value = serde_json::from_str(&out).unwrap();
        v["apps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["app"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        names(&["--sync", "outofsync"]),
        ["team-b/web", "team-c/broken"]
    );
    assert_eq!(
        names(&["--health", "Degraded"]),
        ["team-b/api", "team-c/broken"]
    );
    assert_eq!(
        names(&["--sync", "Synced", "--health", "Degraded"]),
        ["team-c/broken"]
    );

    let out = fleetshard()
        .args(["apps", "--store", &url, "--sync", "Fine"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Fine") && err.contains("OutOfSync"), "{err}");
}

#[test]
fn apps_of_an_empty_store_is_an_empty_list() {
    let dir = tempfile::tempdir().unwrap();
    drop(SqliteStore::open(dir.path().join("e.db")).unwrap());
    let url = format!("sqlite://{}", dir.path().join("e.db").display());
    let table = ok(fleetshard()
        .args(["apps", "--store", &url])
        .output()
        .unwrap());
    assert!(table.contains("0 apps"), "{table}");
}
