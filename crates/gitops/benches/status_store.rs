//! Write rate of local mode's app statuses (`StoreStatusSink`) into SQLite or etcd, and the
//! cost of reading them all back (`read_statuses`, what `fleetshard apps` does).
//!
//! `cargo bench -p fleetshard-gitops --bench status_store -- [APPS] [RESOURCES] [WRITERS]
//! [sqlite|etcd]` (defaults 2000 10 20 sqlite; etcd starts a local etcd): APPS statuses of
//! RESOURCES resources each, written by WRITERS concurrent writers (20: Argo CD's status
//! processors; a takeover has one per refresh worker and cluster warm-up) in three passes —
//! first writes (each reads the record, then creates it), unchanged refreshes (only
//! `reconciledAt` moved: skipped in memory), changed refreshes (one resource's sync status
//! flips: a compare-and-swap each).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use fleetshard_controller::AppKey;
use fleetshard_coord::store::Store;
use fleetshard_gitops::reconciler::{
    ComparisonStatus, DEFAULT_HEARTBEAT, HealthInfo, ResourceEntry, StatusSink, StatusUpdate,
    StoreStatusSink, SyncInfo, read_statuses,
};
use fleetshard_store_etcd::{EtcdOptions, EtcdStore};
use fleetshard_store_sqlite::SqliteStore;
use fleetshard_testsupport::etcd::EtcdServer;
use tokio::time::Instant;

const ROOT: &str = "fleetshard/";

fn status(resources: usize, at: &str, flipped: bool) -> ComparisonStatus {
    let entry = |i: usize| ResourceEntry {
        group: "apps".into(),
        version: "v1".into(),
        kind: "Deployment".into(),
        namespace: "default".into(),
        name: format!("web-{i}"),
        status: if flipped && i == 0 {
            "OutOfSync"
        } else {
            "Synced"
        }
        .into(),
        health: HealthInfo {
            status: "Healthy".into(),
            message: String::new(),
            last_transition_time: None,
        },
        requires_pruning: false,
        hook: false,
        sync_wave: 0,
    };
    ComparisonStatus {
        sync: SyncInfo {
            status: if flipped { "OutOfSync" } else { "Synced" }.into(),
            revision: Some("0123456789abcdef0123456789abcdef01234567".into()),
            revisions: Vec::new(),
            compared_to: None,
            compared_before: None,
        },
        health: HealthInfo {
            status: "Healthy".into(),
            message: String::new(),
            last_transition_time: None,
        },
        resources: (0..resources).map(entry).collect(),
        source_type: None,
        source_types: Vec::new(),
        summary: None,
        controller_namespace: String::new(),
        refresh_done: false,
        reconciled_at: at.into(),
        conditions: Vec::new(),
    }
}

/// Writes every app's status with `writers` concurrent tasks; returns writes per second.
async fn pass(
    sink: &Arc<StoreStatusSink>,
    apps: &Arc<Vec<AppKey>>,
    writers: usize,
    update: StatusUpdate,
) -> f64 {
    let next = Arc::new(AtomicUsize::new(0));
    let update = Arc::new(update);
    let start = Instant::now();
    let tasks: Vec<_> = (0..writers)
        .map(|_| {
            let (sink, apps, next, update) =
                (sink.clone(), apps.clone(), next.clone(), update.clone());
            tokio::spawn(async move {
                while let Some(app) = apps.get(next.fetch_add(1, Ordering::Relaxed)) {
                    sink.write(app, &update).await.expect("status written");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("writer");
    }
    apps.len() as f64 / start.elapsed().as_secs_f64()
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args()
        .filter(|a| a != "--bench")
        .skip(1)
        .collect();
    let arg =
        |i: usize, default: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let (n, resources, writers) = (arg(0, 2000), arg(1, 10), arg(2, 20));
    let backend = args.get(3).map_or("sqlite", String::as_str);
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut etcd = None;
    let store: Arc<dyn Store> = match backend {
        "etcd" => {
            let server = etcd.insert(EtcdServer::start().expect("a local etcd"));
            let options = EtcdOptions {
                key_prefix: server.key_prefix().to_owned(),
                ..EtcdOptions::default()
            };
            Arc::new(EtcdStore::from_url_with(&server.url(), options).expect("etcd store"))
        }
        _ => Arc::new(SqliteStore::open(dir.path().join("s.db")).expect("db")),
    };
    let sink = Arc::new(StoreStatusSink::new(store.clone(), ROOT, DEFAULT_HEARTBEAT));
    let apps: Arc<Vec<AppKey>> = Arc::new(
        (0..n)
            .map(|i| AppKey::new("argocd", &format!("app-{i}")))
            .collect(),
    );
    let record_bytes = serde_json::to_vec(&status(resources, "2026-11-21T10:00:00Z", false))
        .map_or(0, |v| v.len());
    println!(
        "{backend}: apps={n} resources/app={resources} (~{record_bytes} bytes per status) \
         writers={writers}"
    );
    let comparison =
        |at: &str, flipped| StatusUpdate::Comparison(Box::new(status(resources, at, flipped)));
    let first = pass(
        &sink,
        &apps,
        writers,
        comparison("2026-11-21T10:00:00Z", false),
    )
    .await;
    println!("  first writes (read, then create): {first:.0}/s");
    let unchanged = pass(
        &sink,
        &apps,
        writers,
        comparison("2026-11-21T10:03:00Z", false),
    )
    .await;
    println!("  unchanged refreshes (skipped in memory): {unchanged:.0}/s");
    let changed = pass(
        &sink,
        &apps,
        writers,
        comparison("2026-11-21T10:06:00Z", true),
    )
    .await;
    println!("  changed refreshes (compare-and-swap): {changed:.0}/s");
    let start = Instant::now();
    let all = read_statuses(store.as_ref(), ROOT).await.expect("listing");
    let took = start.elapsed();
    assert_eq!(all.len(), n, "every status is there");
    assert!(all.iter().all(|e| e.status.is_ok()), "every record decodes");
    println!(
        "  read_statuses of {n} records: {:.0} ms",
        took.as_secs_f64() * 1e3
    );
    drop(etcd);
}
