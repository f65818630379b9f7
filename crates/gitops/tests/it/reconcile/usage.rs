//! What a started cluster costs the reconciler (`GitOpsReconciler::cluster_usage`): its
//! caches, watch events, the requests made for its apps and the syncs run on them, since
//! this replica acquired it.

use std::time::Duration;

use super::support::*;
use fleetshard_controller::{ClusterUsage, Operated, Reconciler};
use fleetshard_manifest::AutoSync;
use fleetshard_testsupport::git::config_map;
use serde_json::json;

const AUTO: Option<AutoSync> = Some(AutoSync {
    prune: false,
    self_heal: false,
    allow_empty: false,
});

/// Cluster `c1`'s usage; it must be the one started cluster.
fn usage(e: &SyncEnv) -> ClusterUsage {
    let all = e.r.cluster_usage();
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0].0, "c1");
    all[0].1
}

/// Waits until `c1`'s usage satisfies `check`.
async fn usage_until(
    e: &SyncEnv,
    what: &str,
    check: impl Fn(&ClusterUsage) -> bool,
) -> ClusterUsage {
    eventually(Duration::from_secs(10), what, || async {
        let u = usage(e);
        check(&u).then_some(u)
    })
    .await
}

#[tokio::test]
async fn a_synced_cluster_shows_its_cache_watch_events_requests_and_sync() {
    let e = sync_env(
        &[
            ("app/cm.yaml", config_map("settings", "v1")),
            ("app/web.yaml", deployment("web", "nginx:1.27")),
        ],
        AUTO,
    )
    .await;
    assert!(e.r.cluster_usage().is_empty(), "nothing started yet");
    e.fake.reset_request_counts();
    e.r.refresh(&key("a")).await.unwrap();
    assert_eq!(e.r.operate(&key("a")).await.unwrap(), Operated::Finished);
    let writes = e.fake.write_count();
    assert!(writes >= 2, "both objects applied: {writes}");

    let u = usage(&e);
    assert_eq!(
        u.reconcile_cpu,
        Duration::ZERO,
        "the controller measures it"
    );
    assert_eq!(u.cache_objects, 2, "{u:?}");
    assert!(u.cache_bytes > 1_000, "{u:?}");
    assert!(u.api_requests >= writes, "{u:?}, {writes} writes");
    assert_eq!(u.sync_operations, 1, "{u:?}");

    // A change on the cluster comes as a watch event, and the cache's bytes follow the
    // object's size: up as it grows, down as it goes.
    let before = u;
    e.fake
        .modify("v1", "ConfigMap", "default", "settings", |cm| {
            cm["data"]["big"] = json!("x".repeat(20_000));
        })
        .unwrap();
    let grown = usage_until(&e, "the change seen", |u| {
        u.watch_events > before.watch_events && u.cache_bytes >= before.cache_bytes + 20_000
    })
    .await;
    e.fake
        .delete("v1", "ConfigMap", "default", "settings")
        .unwrap();
    let shrunk = usage_until(&e, "the deletion seen", |u| u.cache_objects == 1).await;
    assert!(shrunk.watch_events > grown.watch_events);
    assert!(
        shrunk.cache_bytes < before.cache_bytes && shrunk.cache_bytes + 20_000 < grown.cache_bytes,
        "{shrunk:?} after {before:?} and {grown:?}"
    );

    // Counted since this replica acquired the cluster: a new acquisition starts again.
    e.r.stop_cluster("c1");
    assert!(e.r.cluster_usage().is_empty());
    e.r.refresh(&key("a")).await.unwrap();
    let again = usage(&e);
    assert_eq!(
        (again.api_requests, again.sync_operations),
        (0, 0),
        "{again:?}"
    );
    assert_eq!(again.cache_objects, 1, "{again:?}");
}
