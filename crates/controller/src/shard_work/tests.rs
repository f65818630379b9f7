//! Start/stop semantics of the shard filter, alone and with the worker pools.

use std::time::Duration;

use fleetshard_core::{App, Cluster, Destination};
use tokio::time::{Instant, sleep, timeout};

use super::*;
use crate::RateLimiterConfig;
use crate::processor::{Operated, PoolConfig, Processors, ReconcileError, Reconciler};

pub(super) fn queue() -> WorkQueue<AppKey> {
    WorkQueue::new(RateLimiterConfig::default(), None).unwrap()
}

fn key(name: &str) -> AppKey {
    AppKey::new("ns", name)
}

fn named(id: &str, server: &str, name: &str) -> Cluster {
    Cluster {
        name: name.into(),
        ..Cluster::new(id, server)
    }
}

fn by_name(app: &str, cluster: &str) -> App {
    App {
        namespace: "ns".into(),
        name: app.into(),
        destination: Destination {
            name: Some(cluster.into()),
            ..Destination::default()
        },
        ..App::default()
    }
}

/// c1 has a (by server), b (by name); c2 has z; `lost` and `nowhere` resolve to nothing,
/// and are anchored on c0, which has no app of its own.
fn filter() -> Arc<ShardWork> {
    let f = ShardWork::new(queue(), queue(), WorkMetrics::default());
    let clusters = [
        named("c1", "https://one", "one"),
        named("c2", "https://two", "two"),
        named("c0", "https://zero", "zero"),
    ];
    let apps = [
        App::to_server("ns", "a", "https://one/"),
        by_name("b", "one"),
        App::to_server("ns", "z", "https://two"),
        App::to_server("ns", "lost", "https://gone"),
        App {
            namespace: "ns".into(),
            name: "nowhere".into(),
            ..App::default()
        },
    ];
    f.set_inventory(&clusters, &apps);
    f
}

pub(super) async fn drain(q: &WorkQueue<AppKey>) -> Vec<AppKey> {
    let mut got = Vec::new();
    while let Ok(Some(k)) = timeout(Duration::from_millis(1), q.get()).await {
        q.done(&k);
        got.push(k);
    }
    got.sort();
    got
}

#[tokio::test(start_paused = true)]
async fn starting_a_cluster_queues_its_apps_for_refresh() {
    let f = filter();
    assert_eq!(
        f.cluster_of(&key("b")).as_deref(),
        Some("c1"),
        "resolved by name"
    );
    assert!(f.refresh_queue().is_empty(), "nothing owned yet");
    f.start_cluster("c1");
    assert!(f.owns("c1"));
    assert_eq!(drain(f.refresh_queue()).await, [key("a"), key("b")]);
    f.start_cluster("c1"); // already owned: no new work
    assert!(f.refresh_queue().is_empty());
    assert_eq!(f.owned(), ["c1"]);
    assert_eq!(f.metrics().owned_clusters.get(), 1);
}

#[tokio::test(start_paused = true)]
async fn only_apps_of_owned_clusters_are_admitted() {
    let f = filter();
    f.start_cluster("c1");
    let Admission::Admitted(g) = f.admit(&key("a")) else {
        panic!("a is on an owned cluster");
    };
    assert_eq!(g.cluster(), "c1");
    assert_eq!(f.in_flight("c1"), 1);
    drop(g);
    assert_eq!(f.in_flight("c1"), 0);
    assert!(matches!(f.admit(&key("z")), Admission::NotOwned));
    assert!(matches!(f.admit(&key("unknown")), Admission::Unknown));
    assert_eq!(f.metrics().not_owned.get(), 1);
}

#[tokio::test(start_paused = true)]
async fn unresolved_apps_are_listed_and_processed_by_the_anchors_owner_alone() {
    let f = filter();
    let listed: Vec<String> = f.unresolved().iter().map(|u| u.app.to_string()).collect();
    assert_eq!(listed, ["ns/lost", "ns/nowhere"]);
    assert_eq!(
        f.unresolved()[0].destination.server.as_deref(),
        Some("https://gone")
    );
    assert_eq!(f.metrics().unresolved_apps.get(), 2);
    assert_eq!(f.cluster_of(&key("lost")), None, "it deploys nowhere");
    // c1 and c2 are not the anchor (c0 has the smallest id): their owner processes none
    // of them.
    f.start_cluster("c1");
    f.start_cluster("c2");
    assert_eq!(
        drain(f.refresh_queue()).await,
        [key("a"), key("b"), key("z")]
    );
    assert!(matches!(f.admit(&key("lost")), Admission::NotOwned));
    // The anchor's owner is given them, and holds the anchor while it works on one: the
    // anchor's stop waits for it.
    f.start_cluster("c0");
    assert_eq!(
        drain(f.refresh_queue()).await,
        [key("lost"), key("nowhere")]
    );
    let Admission::Admitted(g) = f.admit(&key("nowhere")) else {
        panic!("the anchor is owned");
    };
    assert_eq!(g.cluster(), "c0");
    let stop = {
        let f = f.clone();
        tokio::spawn(async move { f.stop_cluster("c0").await })
    };
    sleep(Duration::from_secs(1)).await;
    assert!(
        !stop.is_finished(),
        "the anchor's stop waits for the unresolved app"
    );
    drop(g);
    stop.await.unwrap();
    assert!(matches!(f.admit(&key("lost")), Admission::NotOwned));
}

#[tokio::test(start_paused = true)]
async fn a_new_anchor_takes_the_unresolved_apps_and_none_without_clusters() {
    let f = filter();
    f.start_cluster("a0");
    let apps = [App::to_server("ns", "lost", "https://gone")];
    // A cluster with a smaller id becomes the anchor: its owner is given the app.
    f.set_inventory(
        &[
            named("c0", "https://zero", "zero"),
            named("a0", "https://first", "first"),
        ],
        &apps,
    );
    assert_eq!(drain(f.refresh_queue()).await, [key("lost")]);
    let Admission::Admitted(g) = f.admit(&key("lost")) else {
        panic!("a0 is the anchor");
    };
    assert_eq!(g.cluster(), "a0");
    drop(g);
    // No cluster at all: no anchor, and nobody processes it.
    f.set_inventory(&[], &apps);
    assert!(matches!(f.admit(&key("lost")), Admission::Unresolved));
    assert_eq!(f.metrics().unresolved_dropped.get(), 1);
    assert_eq!(f.unresolved().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn stopping_drops_queued_items_and_waits_for_items_in_flight() {
    let f = filter();
    f.start_cluster("c1");
    f.start_cluster("c2");
    // One of c1's apps is in flight; the other is queued for refresh, and for operation
    // (one now, one later).
    let (first, second) = match f.refresh_queue().get().await.unwrap() {
        k if k == key("z") => panic!("z was queued last"),
        k if k == key("a") => (k, key("b")),
        k => (k, key("a")),
    };
    let Admission::Admitted(guard) = f.admit(&first) else {
        panic!("owned");
    };
    f.operation_queue().add(second.clone());
    f.operation_queue()
        .add_after(first.clone(), Duration::from_secs(1));
    let stop = tokio::spawn({
        let f = f.clone();
        async move {
            f.stop_cluster("c1").await;
            Instant::now()
        }
    });
    sleep(Duration::from_secs(3)).await;
    assert!(!stop.is_finished(), "an item of c1 is still in flight");
    assert!(!f.owns("c1"));
    assert!(
        matches!(f.admit(&second), Admission::NotOwned),
        "nothing new is admitted"
    );
    // The in-flight item hands off, then finishes.
    f.operation_queue().add(first.clone());
    f.refresh_queue().done(&first);
    let t = Instant::now();
    drop(guard);
    assert_eq!(
        stop.await.unwrap(),
        t,
        "returns as soon as the last item is done"
    );
    assert_eq!(
        drain(f.refresh_queue()).await,
        [key("z")],
        "c2's app stays queued"
    );
    assert_eq!(
        drain(f.operation_queue()).await,
        [],
        "c1's items, the handoff included, are gone"
    );
    assert_eq!(f.operation_queue().waiting(), 0);
}

#[tokio::test(start_paused = true)]
async fn stopping_an_idle_or_unknown_cluster_returns_at_once() {
    let f = filter();
    f.start_cluster("c1");
    let t = Instant::now();
    f.stop_cluster("c1").await;
    f.stop_cluster("never-owned").await;
    assert_eq!(Instant::now(), t);
    assert!(f.refresh_queue().is_empty());
    assert_eq!(f.metrics().owned_clusters.get(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_app_moving_to_an_owned_cluster_is_queued() {
    let f = filter();
    f.start_cluster("c1");
    drain(f.refresh_queue()).await;
    let clusters = [
        named("c1", "https://one", "one"),
        named("c2", "https://two", "two"),
    ];
    let apps = [
        App::to_server("ns", "a", "https://one"),
        App::to_server("ns", "z", "https://one"), // moved from c2
        App::to_server("ns", "lost", "https://two"), // now resolves
    ];
    f.set_inventory(&clusters, &apps);
    assert_eq!(drain(f.refresh_queue()).await, [key("z")]);
    assert!(f.unresolved().is_empty());
    assert!(
        matches!(f.admit(&key("b")), Admission::Unknown),
        "b was deleted"
    );
}

/// Refreshes take 10 s; operations would be logged.
#[derive(Default)]
struct Slow {
    operated: std::sync::Mutex<Vec<AppKey>>,
}

impl Reconciler for Slow {
    async fn refresh(&self, _app: &AppKey) -> Result<(), ReconcileError> {
        sleep(Duration::from_secs(10)).await;
        Ok(())
    }

    async fn operate(&self, app: &AppKey) -> Result<Operated, ReconcileError> {
        self.operated.lock().unwrap().push(app.clone());
        Ok(Operated::Idle)
    }
}

#[tokio::test(start_paused = true)]
async fn a_handover_waits_for_the_workers_and_nothing_runs_after_it() {
    let f = filter();
    let rec = Arc::new(Slow::default());
    let p = Processors::start(PoolConfig::default(), f.clone(), rec.clone()).unwrap();
    f.start_cluster("c1");
    sleep(Duration::from_secs(2)).await;
    assert_eq!(f.in_flight("c1"), 2, "a and b are being refreshed");
    let t = Instant::now();
    f.stop_cluster("c1").await;
    assert_eq!(
        Instant::now() - t,
        Duration::from_secs(8),
        "the stop waited for both refreshes"
    );
    assert_eq!(f.in_flight("c1"), 0);
    sleep(Duration::from_secs(30)).await;
    assert!(
        rec.operated.lock().unwrap().is_empty(),
        "the refreshes' handoffs were dropped, not operated"
    );
    p.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn the_index_shares_the_inventorys_keys() {
    let f = ShardWork::new(queue(), queue(), WorkMetrics::default());
    let clusters = [named("c1", "https://one", "one")];
    let apps = [
        App::to_server("ns", "a", "https://one"),
        App::to_server("ns", "b", "https://one"),
    ];
    let shared = key("a");
    let keys = BTreeMap::from([(shared.clone(), ())]);
    f.set_inventory_sharing(&clusters, &apps, &keys);
    f.start_cluster("c1");
    let queued = drain(f.refresh_queue()).await;
    assert_eq!(queued, [key("a"), key("b")]);
    assert!(
        Arc::ptr_eq(&queued[0].0, &shared.0),
        "a's key is the inventory's"
    );
}

/// The runner announces a start and reports the lease deadline on two channels: a worker
/// can get a just-started cluster's app while the gate is still closed. The dropped app
/// is queued again the moment the gate opens (its cluster still owned), on the queue it
/// came from, instead of waiting for the next resync; one whose cluster is not owned then
/// is forgotten.
#[tokio::test(start_paused = true)]
async fn an_app_dropped_before_the_lease_reached_the_gate_is_queued_when_it_opens() {
    let f = filter();
    f.set_lease_deadline(None);
    f.start_cluster("c1");
    let q = f.refresh_queue();
    for _ in 0..2 {
        let app = q.get().await.unwrap();
        assert!(matches!(f.admit(&app), Admission::LeaseLapsed), "{app:?}");
        f.hold_for_lease(QueueKind::Refresh, app.clone());
        q.forget(&app);
        q.done(&app);
    }
    f.hold_for_lease(QueueKind::Operation, key("a"));
    f.hold_for_lease(QueueKind::Refresh, key("z"));
    assert!(q.is_empty() && f.operation_queue().is_empty());

    f.set_lease_deadline(Some(Instant::now() + Duration::from_secs(10)));
    assert_eq!(drain(q).await, [key("a"), key("b")]);
    assert_eq!(drain(f.operation_queue()).await, [key("a")]);
    // Held once: a later deadline queues nothing more.
    f.set_lease_deadline(Some(Instant::now() + Duration::from_secs(20)));
    assert!(q.is_empty());
    // With the gate open, an item held is queued at once.
    f.hold_for_lease(QueueKind::Refresh, key("b"));
    assert_eq!(drain(q).await, [key("b")]);
}
