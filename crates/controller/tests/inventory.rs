//! The published inventory: when the revision moves, and feeding the shard filter.

use std::time::Duration;

use fleetshard_controller::inventory::{Inventory, Problem, follow_inventory};
use fleetshard_controller::shard_filter::FilterMetrics;
use fleetshard_controller::{AppKey, RateLimiterConfig, ShardFilter, WorkQueue};
use fleetshard_core::{App, Cluster};

fn fleet(servers: &[&str]) -> (Vec<Cluster>, Vec<App>) {
    let clusters = servers
        .iter()
        .map(|s| Cluster::new(format!("id-{s}"), format!("https://{s}")))
        .collect();
    let apps = servers
        .iter()
        .map(|s| App::to_server("argocd", &format!("app-{s}"), &format!("https://{s}")))
        .collect();
    (clusters, apps)
}

#[tokio::test]
async fn revision_moves_only_with_content() {
    let inventory = Inventory::new();
    let mut rx = inventory.subscribe();
    assert_eq!(inventory.snapshot().revision, 0);
    assert!(!inventory.snapshot().ready);

    let (c, a) = fleet(&["a", "b"]);
    assert!(inventory.publish(c.clone(), a.clone(), vec![], true));
    assert!(rx.has_changed().expect("alive"));
    let snap = rx.borrow_and_update().clone();
    assert_eq!(
        (snap.revision, snap.ready, snap.clusters.len()),
        (1, true, 2)
    );

    // The same content again: nothing moves, nobody is woken.
    assert!(!inventory.publish(c.clone(), a.clone(), vec![], true));
    assert!(!rx.has_changed().expect("alive"));

    // A problem alone wakes subscribers but keeps the revision.
    let problem = Problem::error("f.yaml", "Secret argocd/x", Some("data.server"), "missing");
    assert!(!inventory.publish(c.clone(), a.clone(), vec![problem.clone()], true));
    assert!(rx.has_changed().expect("alive"));
    let snap = rx.borrow_and_update().clone();
    assert_eq!(snap.revision, 1);
    assert_eq!(*snap.problems, vec![problem]);
    assert_eq!(
        snap.problems[0].message,
        "f.yaml: Secret argocd/x: data.server: missing"
    );

    // One app changes: the revision moves by one.
    let mut a2 = a.clone();
    a2[0].destination.server = Some("https://b".into());
    assert!(inventory.publish(c, a2, vec![], true));
    assert_eq!(inventory.snapshot().revision, 2);
}

#[tokio::test(start_paused = true)]
async fn follow_inventory_feeds_the_shard_filter() {
    let queue = || WorkQueue::<AppKey>::new(RateLimiterConfig::default(), None).expect("queue");
    let filter = ShardFilter::new(queue(), queue(), FilterMetrics::default());
    let (c, a) = fleet(&["a", "b"]);
    filter.start_cluster("id-a");
    let inventory = Inventory::new();
    let task = tokio::spawn(follow_inventory(filter.clone(), inventory.subscribe()));

    inventory.publish(c.clone(), a.clone(), vec![], true);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while filter.cluster_of(&AppKey::new("argocd", "app-a")).is_none() {
        assert!(tokio::time::Instant::now() < deadline, "filter never fed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        filter
            .cluster_of(&AppKey::new("argocd", "app-b"))
            .as_deref(),
        Some("id-b")
    );
    // The app of the owned cluster was queued for refresh.
    assert_eq!(filter.refresh_queue().len(), 1);

    // app-b moves onto the owned cluster: queued too.
    let mut a2 = a.clone();
    a2[1].destination.server = Some("https://a".into());
    inventory.publish(c, a2, vec![], true);
    while filter
        .cluster_of(&AppKey::new("argocd", "app-b"))
        .as_deref()
        != Some("id-a")
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "filter never updated"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(filter.refresh_queue().len(), 2);

    // Dropping the inventory ends the follower.
    drop(inventory);
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("follower ends")
        .expect("no panic");
}
