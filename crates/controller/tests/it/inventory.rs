//! The published inventory: when the revision moves, and feeding the shard filter.

use std::time::Duration;

use fleetshard_controller::inventory::{Inventory, InventoryContent, Problem, follow_inventory};
use fleetshard_controller::shard_work::WorkMetrics;
use fleetshard_controller::{AppKey, RateLimiterConfig, ShardWork, WorkQueue};
use fleetshard_core::{App, Cluster};
use fleetshard_manifest::{AppSource, AppSpec, SyncRequest};

fn content(clusters: Vec<Cluster>, apps: Vec<App>) -> InventoryContent {
    InventoryContent {
        clusters,
        apps,
        ..InventoryContent::default()
    }
}

/// A spec at `revision` of the one repository.
fn spec_at(revision: &str) -> AppSpec {
    AppSpec {
        source: AppSource {
            repo_url: "https://git.example/apps".into(),
            target_revision: revision.into(),
            path: "app".into(),
            directory: Default::default(),
            raw: Default::default(),
        },
        ..AppSpec::default()
    }
}

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
    assert!(inventory.publish(content(c.clone(), a.clone()), vec![], true));
    assert!(rx.has_changed().expect("alive"));
    let snap = rx.borrow_and_update().clone();
    assert_eq!(
        (snap.revision, snap.ready, snap.clusters.len()),
        (1, true, 2)
    );

    // The same content again: nothing moves, nobody is woken.
    assert!(!inventory.publish(content(c.clone(), a.clone()), vec![], true));
    assert!(!rx.has_changed().expect("alive"));

    // A problem alone wakes subscribers but keeps the revision.
    let problem = Problem::error("f.yaml", "Secret argocd/x", Some("data.server"), "missing");
    assert!(!inventory.publish(content(c.clone(), a.clone()), vec![problem.clone()], true));
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
    assert!(inventory.publish(content(c.clone(), a2.clone()), vec![], true));
    assert_eq!(inventory.snapshot().revision, 2);

    // An app's GitOps spec is content too, though the app itself is the same.
    let mut with_spec = content(c.clone(), a2.clone());
    let key = AppKey::new("argocd", "app-a");
    with_spec.specs.insert(key.clone(), spec_at("v1").into());
    assert!(inventory.publish(with_spec.clone(), vec![], true));
    assert_eq!(inventory.snapshot().revision, 3);
    assert_eq!(inventory.snapshot().spec(&key), spec_at("v1"));
    assert!(!inventory.publish(with_spec, vec![], true), "same spec");
    assert_eq!(inventory.snapshot().revision, 3);

    // New credentials for a cluster are content too: the reconciler must reconnect.
    let mut with_token = content(c, a2);
    with_token.credentials.insert(
        "id-a".into(),
        fleetshard_manifest::ClusterCredentials {
            bearer_token: Some("t".into()),
            ..Default::default()
        },
    );
    assert!(inventory.publish(with_token, vec![], true));
    assert_eq!(inventory.snapshot().revision, 4);
}

#[tokio::test(start_paused = true)]
async fn follow_inventory_feeds_the_shard_filter() {
    let queue = || WorkQueue::<AppKey>::new(RateLimiterConfig::default(), None).expect("queue");
    let filter = ShardWork::new(queue(), queue(), WorkMetrics::default());
    let (c, a) = fleet(&["a", "b"]);
    filter.start_cluster("id-a");
    let inventory = Inventory::new();
    let task = tokio::spawn(follow_inventory(filter.clone(), inventory.subscribe()));

    inventory.publish(content(c.clone(), a.clone()), vec![], true);
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
    inventory.publish(content(c, a2), vec![], true);
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

/// Waits (paused time) until the refresh queue holds `n` items.
async fn queued(filter: &ShardWork, n: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while filter.refresh_queue().len() != n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "refresh queue holds {}, expected {n}",
            filter.refresh_queue().len()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Takes every queued refresh, marking each done.
async fn drain(filter: &ShardWork) -> Vec<AppKey> {
    let mut taken = Vec::new();
    while !filter.refresh_queue().is_empty() {
        let key = filter.refresh_queue().get().await.expect("queue open");
        filter.refresh_queue().done(&key);
        taken.push(key);
    }
    taken.sort();
    taken
}

#[tokio::test(start_paused = true)]
async fn changed_definitions_and_credentials_are_refreshed_on_the_owner() {
    let queue = || WorkQueue::<AppKey>::new(RateLimiterConfig::default(), None).expect("queue");
    let filter = ShardWork::new(queue(), queue(), WorkMetrics::default());
    let (c, mut a) = fleet(&["a", "b"]);
    a.push(App::to_server("argocd", "app-a2", "https://a"));
    a.sort_by(|x, y| (&x.namespace, &x.name).cmp(&(&y.namespace, &y.name)));
    filter.start_cluster("id-a");
    let inventory = Inventory::new();
    let _task = tokio::spawn(follow_inventory(filter.clone(), inventory.subscribe()));
    inventory.publish(content(c.clone(), a.clone()), vec![], true);
    queued(&filter, 2).await;
    drain(&filter).await;

    // A new target revision for app-a (owned) and app-b (not owned) — a change of their
    // GitOps specs, not of the apps: only app-a is queued.
    let mut at_v2 = content(c.clone(), a.clone());
    for name in ["app-a", "app-b"] {
        at_v2
            .specs
            .insert(AppKey::new("argocd", name), spec_at("v2").into());
    }
    inventory.publish(at_v2.clone(), vec![], true);
    queued(&filter, 1).await;
    assert_eq!(drain(&filter).await, [AppKey::new("argocd", "app-a")]);

    // A sync asked for by hand on app-a2 (owned): queued.
    let mut requested = at_v2.clone();
    let a2_key = AppKey::new("argocd", "app-a2");
    requested.specs.insert(
        a2_key.clone(),
        AppSpec {
            sync_request: Some(SyncRequest::default()),
            ..spec_at("v2")
        }
        .into(),
    );
    inventory.publish(requested, vec![], true);
    queued(&filter, 1).await;
    assert_eq!(drain(&filter).await, std::slice::from_ref(&a2_key));

    // Its spec gone (the app stays, with the default spec): queued again.
    inventory.publish(at_v2.clone(), vec![], true);
    queued(&filter, 1).await;
    assert_eq!(drain(&filter).await, [a2_key]);

    // New credentials for cluster a: both of its apps are queued, b's app is not.
    let mut with_token = at_v2;
    with_token.credentials.insert(
        "id-a".into(),
        fleetshard_manifest::ClusterCredentials {
            bearer_token: Some("t".into()),
            ..Default::default()
        },
    );
    inventory.publish(with_token.clone(), vec![], true);
    queued(&filter, 2).await;
    assert_eq!(
        drain(&filter).await,
        [
            AppKey::new("argocd", "app-a"),
            AppKey::new("argocd", "app-a2")
        ]
    );

    // A change of argocd-cm (a health script, an ignoreDifferences rule) queues every
    // owned app.
    let mut customized = with_token.clone();
    customized.argocd_cm.insert(
        "resource.customizations.health.cert-manager.io_Certificate".into(),
        "return nil".into(),
    );
    inventory.publish(customized, vec![], true);
    queued(&filter, 2).await;
    assert_eq!(
        drain(&filter).await,
        [
            AppKey::new("argocd", "app-a"),
            AppKey::new("argocd", "app-a2")
        ]
    );

    // The periodic resync queues every owned app.
    assert_eq!(filter.resync(Duration::ZERO), 2);
    assert_eq!(filter.refresh_queue().len(), 2);
    drain(&filter).await;

    // With a jitter, each app arrives after its own fixed delay within it.
    let started = tokio::time::Instant::now();
    assert_eq!(filter.resync(Duration::from_secs(60)), 2);
    assert_eq!(filter.refresh_queue().len(), 0, "none at once");
    let mut arrivals = Vec::new();
    for _ in 0..2 {
        let key = filter.refresh_queue().get().await.expect("queue open");
        arrivals.push(started.elapsed());
        filter.refresh_queue().done(&key);
    }
    assert!(
        arrivals.iter().all(|d| *d < Duration::from_secs(60)),
        "{arrivals:?}"
    );
    assert_ne!(
        arrivals[0], arrivals[1],
        "spread, not together: {arrivals:?}"
    );
}

#[test]
fn every_source_is_checked_for_duplicate_cluster_ids_and_servers() {
    let inventory = Inventory::new();
    let clusters = vec![
        Cluster::new("a", "https://a"),
        Cluster::new("a", "https://a2"),
        Cluster::new("b", "https://a"),
        Cluster::new("c", "https://c"),
    ];
    inventory.publish(content(clusters, vec![]), vec![], true);
    let snap = inventory.snapshot();
    let found: Vec<(&str, Option<&str>)> = snap
        .problems
        .iter()
        .map(|p| (p.object.as_str(), p.field.as_deref()))
        .collect();
    assert_eq!(
        found,
        [("cluster a", Some("id")), ("cluster b", Some("server"))],
        "{:?}",
        snap.problems
    );
    assert!(
        snap.problems[0].message.contains("#0 and #1"),
        "{}",
        snap.problems[0]
    );
    assert!(
        snap.problems[1].message.contains("cluster a"),
        "{}",
        snap.problems[1]
    );
    // A fleet without duplicates has no such problem.
    inventory.publish(
        content(vec![Cluster::new("c", "https://c")], vec![]),
        vec![],
        true,
    );
    assert!(inventory.snapshot().problems.is_empty());
}
