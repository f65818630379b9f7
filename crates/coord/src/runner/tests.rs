//! The runner over `MemoryStore` under paused time: coverage, graceful handover, crash.

use std::collections::BTreeMap;

use fleetshard_core::Cluster;
use fleetshard_core::placement::PlacementConfig;

use super::*;
use crate::fenced::{CorruptRecord, ShardCount};
use crate::lease::LeaseTiming;
use crate::ownership::ReplicaStatus as _;
use crate::store::memory::MemoryStore;

struct Node {
    shutdown: watch::Sender<bool>,
    status: watch::Receiver<Status>,
    task: tokio::task::JoinHandle<bool>,
}

/// One replica's configuration: default timing, 500 ms grace, root `fs/`.
fn config(name: &str, shards: u32, zone: Option<&str>) -> ReplicaConfig {
    ReplicaConfig {
        identity: name.to_owned(),
        incarnation: 1,
        root: "fs/".into(),
        shards: ShardCount::Fixed(shards),
        timing: LeaseTiming::default(),
        grace: Duration::from_millis(500),
        placement: PlacementConfig::default(),
        hysteresis: None,
        split_clusters: false,
        zone: zone.map(str::to_owned),
        capacity: 1,
        shard_specs: Vec::new(),
    }
}

/// A runner over `store` placing `clusters` (load 1 each), events to `events`.
fn runner(
    store: &Arc<dyn Store>,
    cfg: ReplicaConfig,
    clusters: &[Cluster],
    events: &mpsc::UnboundedSender<OwnershipChange>,
) -> (Runner, watch::Receiver<Status>) {
    let loads = vec![1; clusters.len()];
    let (runner, status) = Runner::new(
        store.clone(),
        cfg,
        RunnerTiming::default(),
        RunnerFleet::fixed(clusters.to_vec(), loads),
        events.clone(),
    )
    .unwrap();
    // Paused time: placements inline, no blocking thread racing the paused clock.
    (runner.with_placer(Arc::new(InlinePlacer)), status)
}

/// A fleet of `n` clusters `c00`, `c01`, … (load 1 each) at `revision`.
fn fleet_of(n: usize, revision: u64) -> RunnerFleet {
    let clusters: Vec<Cluster> = (0..n)
        .map(|i| Cluster::new(format!("c{i:02}"), format!("https://c{i}")))
        .collect();
    RunnerFleet {
        loads: Arc::new(vec![1; clusters.len()]),
        inventory: crate::fenced::InventorySummary::of(&clusters, 0),
        clusters: Arc::new(clusters),
        revision,
        measured: false,
        apps: Arc::default(),
    }
}

/// Runs a runner as a task.
fn start((runner, status): (Runner, watch::Receiver<Status>)) -> Node {
    let (shutdown, rx) = watch::channel(false);
    let task = tokio::spawn(runner.run(rx));
    Node {
        shutdown,
        status,
        task,
    }
}

/// A replica of three shards, running.
fn spawn(
    store: &Arc<dyn Store>,
    name: &str,
    clusters: &[Cluster],
    events: &mpsc::UnboundedSender<OwnershipChange>,
) -> Node {
    start(runner(store, config(name, 3, None), clusters, events))
}

/// Replicas `a`, `b` and `c` of three shards over `store`, placing 12 clusters `c00`…;
/// their ownership events.
fn three_runners(store: &Arc<dyn Store>) -> (Vec<Node>, mpsc::UnboundedReceiver<OwnershipChange>) {
    let clusters: Vec<Cluster> = (0..12)
        .map(|i| Cluster::new(format!("c{i:02}"), format!("https://c{i}")))
        .collect();
    let (tx, rx) = mpsc::unbounded_channel();
    let nodes = ["a", "b", "c"]
        .iter()
        .map(|n| spawn(store, n, &clusters, &tx))
        .collect();
    (nodes, rx)
}

/// Who acts on what, from the status snapshots; panics on a cluster acted on twice.
fn owners(nodes: &[&Node]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for (i, n) in nodes.iter().enumerate() {
        for c in n.status.borrow().acting.iter() {
            assert!(out.insert(c.clone(), i).is_none(), "{c} acted on twice");
        }
    }
    out
}

/// Replays the event stream: a start is allowed only when nobody holds the cluster.
fn replay(
    events: &mut mpsc::UnboundedReceiver<OwnershipChange>,
    holder: &mut BTreeMap<String, String>,
) {
    while let Ok(e) = events.try_recv() {
        match e.change {
            Ownership::Started(c) => {
                if let Some(h) = holder.insert(c.clone(), e.identity.clone()) {
                    panic!("{} started {c} while {h} had it", e.identity);
                }
            }
            Ownership::Stopped(c) => {
                assert_eq!(holder.remove(&c).as_deref(), Some(e.identity.as_str()));
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn three_runners_cover_every_cluster_once_and_hand_over_on_shutdown() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let (nodes, mut rx) = three_runners(&store);
    tokio::time::sleep(Duration::from_secs(10)).await;
    let all: Vec<&Node> = nodes.iter().collect();
    assert_eq!(owners(&all).len(), 12);
    for n in &nodes {
        let s = n.status.borrow().clone();
        assert!(s.shard.is_some() && s.lease_valid_until.is_some(), "{s:?}");
        assert!(!s.spare);
    }
    let mut holder = BTreeMap::new();
    replay(&mut rx, &mut holder);
    assert_eq!(holder.len(), 12);

    // Graceful shutdown of the first: its clusters move within about a second.
    let mut nodes = nodes.into_iter();
    let first = nodes.next().unwrap();
    let rest: Vec<Node> = nodes.collect();
    first.shutdown.send(true).unwrap();
    assert!(first.task.await.unwrap(), "release completed");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let live: Vec<&Node> = rest.iter().collect();
    let now = owners(&live);
    assert_eq!(now.len(), 12, "{now:?}");
    // Continue the replay from where it was: same rule across the handover.
    replay(&mut rx, &mut holder);
    assert_eq!(holder.len(), 12);
    assert!(holder.values().all(|h| h != "a"));
    for n in rest {
        n.shutdown.send(true).unwrap();
        assert!(n.task.await.unwrap());
    }
}

#[tokio::test(start_paused = true)]
async fn a_crashed_runner_is_replaced_after_its_lease_without_overlap() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let (nodes, _rx) = three_runners(&store);
    tokio::time::sleep(Duration::from_secs(10)).await;
    let before = owners(&nodes.iter().collect::<Vec<_>>());
    assert_eq!(before.len(), 12);
    // A crash: the task is gone, its records stay until its lease expires.
    nodes[0].task.abort();
    let live: Vec<&Node> = nodes[1..].iter().collect();
    let mut covered_after = None;
    for step in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        // owners() panics if two live runners act on one cluster.
        if covered_after.is_none() && owners(&live).len() == 12 {
            covered_after = Some(step * 100 + 100);
        }
    }
    let ms = covered_after.expect("the crashed runner's clusters got new owners");
    // Not before its lease could have expired (4 s minus one renew period).
    assert!(ms >= 3_000, "{ms}");
}

/// Polls `fut` only while `running` is true: a process under SIGSTOP.
async fn pausable<F: std::future::Future>(fut: F, mut running: watch::Receiver<bool>) -> F::Output {
    futures::pin_mut!(fut);
    loop {
        if *running.borrow_and_update() {
            // A pause takes effect before the future is polled again (an unbiased select
            // could poll it once more after the pause, at random).
            tokio::select! {
                biased;
                _ = running.changed() => {}
                out = &mut fut => return out,
            }
        } else {
            let _ = running.changed().await;
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_runner_paused_past_its_lease_dates_its_stops_at_the_lapse() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let clusters: Vec<Cluster> = (0..12)
        .map(|i| Cluster::new(format!("c{i:02}"), format!("https://c{i}")))
        .collect();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let others: Vec<Node> = ["a", "b"]
        .iter()
        .map(|n| spawn(&store, n, &clusters, &tx))
        .collect();
    // The third replica runs under a pause switch.
    let (runner, _status) = runner(&store, config("p", 3, None), &clusters, &tx);
    let (run_tx, running) = watch::channel(true);
    let (_shutdown, shutdown_rx) = watch::channel(false);
    let paused = tokio::spawn(pausable(runner.run(shutdown_rx), running));
    // Every event stamped when sent (paused time does not move while tasks can run).
    let (stamped_tx, mut stamped) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(e) = rx.recv().await {
            let _ = stamped_tx.send((Instant::now(), e));
        }
    });
    tokio::time::sleep(Duration::from_secs(10)).await;
    run_tx.send(false).unwrap();
    let paused_at = Instant::now();
    // Twice the lease: the others take its clusters over meanwhile.
    tokio::time::sleep(Duration::from_secs(8)).await;
    run_tx.send(true).unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;

    let mut events = Vec::new();
    while let Ok(e) = stamped.try_recv() {
        events.push(e);
    }
    let mut p_stops = 0;
    for (at, e) in &events {
        // Before the pause p may stop clusters a start-up generation moved (the third
        // replica's shard claimed after the first commit): those are no lapse.
        if e.identity == "p" && matches!(e.change, Ownership::Stopped(_)) && *at >= paused_at {
            p_stops += 1;
            let lapsed = e.lapsed_at.expect("a stop after a pause is a lapse");
            assert!(lapsed > paused_at && lapsed < *at, "{lapsed:?} {at:?}");
            // Nobody else started the cluster between p's start of it and the lapse.
            let Ownership::Stopped(c) = &e.change else {
                unreachable!()
            };
            let p_started = events
                .iter()
                .filter(|(t, e2)| {
                    e2.identity == "p" && e2.change == Ownership::Started(c.clone()) && t <= at
                })
                .map(|(t, _)| *t)
                .max()
                .expect("p started what it stopped");
            for (at2, e2) in &events {
                if e2.identity != "p"
                    && e2.change == Ownership::Started(c.clone())
                    && *at2 >= p_started
                {
                    assert!(
                        *at2 >= lapsed,
                        "{c} started by {} before p lapsed: {e2:?} {e:?}",
                        e2.identity
                    );
                }
            }
        } else {
            assert!(e.lapsed_at.is_none(), "{e:?}");
        }
    }
    assert!(
        p_stops > 0,
        "the paused replica held clusters and stopped them"
    );
    drop(others);
    paused.abort();
}

/// A controller whose stops take a while (items in flight finishing).
struct SlowStops(Duration);

impl StopHook for SlowStops {
    fn stop(&self, _cluster: String) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(self.0))
    }
}

#[tokio::test(start_paused = true)]
async fn a_handover_waits_for_the_previous_owner_to_finish_stopping() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let clusters: Vec<Cluster> = (0..12)
        .map(|i| Cluster::new(format!("c{i:02}"), format!("https://c{i}")))
        .collect();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let slow = |name: &str| {
        let (r, status) = runner(&store, config(name, 3, None), &clusters, &tx);
        let r = r.with_stop_hook(Arc::new(SlowStops(Duration::from_millis(1_500))));
        start((r, status))
    };
    // Two replicas for three shards: the vacant shard's clusters are displaced to them.
    let a = slow("a");
    let b = slow("b");
    tokio::time::sleep(Duration::from_secs(8)).await;
    let mut holder = BTreeMap::new();
    replay(&mut rx, &mut holder);
    assert_eq!(holder.len(), 12);
    // A third claims the vacant shard: its clusters come back from a and b, whose stops
    // take 1.5 s. replay() panics if c starts one before its previous owner stopped it.
    let c = slow("c");
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        replay(&mut rx, &mut holder);
    }
    let on_c = holder.values().filter(|h| h.as_str() == "c").count();
    assert!(on_c > 0, "c got its clusters back: {holder:?}");
    assert_eq!(holder.len(), 12);
    // A graceful stop waits for the slow stops too, and still releases.
    c.shutdown.send(true).unwrap();
    assert!(c.task.await.unwrap(), "released after its stops finished");
    replay(&mut rx, &mut holder);
    assert!(holder.values().all(|h| h.as_str() != "c"));
    drop((a, b));
}

#[tokio::test(start_paused = true)]
async fn replicas_with_zones_get_their_zones_clusters() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let clusters: Vec<Cluster> = (0..12)
        .map(|i| {
            let mut c = Cluster::new(format!("c{i:02}"), format!("https://c{i}"));
            let zone = if i % 2 == 0 { "zone-a" } else { "zone-b" };
            c.labels
                .insert(fleetshard_core::model::ZONE_LABEL.into(), zone.into());
            c
        })
        .collect();
    let (tx, _rx) = mpsc::unbounded_channel();
    let zoned =
        |name: &str, zone: &str| start(runner(&store, config(name, 2, Some(zone)), &clusters, &tx));
    let a = zoned("a", "zone-a");
    let b = zoned("b", "zone-b");
    tokio::time::sleep(Duration::from_secs(10)).await;
    let owners = owners(&[&a, &b]);
    assert_eq!(owners.len(), 12);
    for (c, who) in owners {
        let i: usize = c[1..].parse().unwrap();
        assert_eq!(who, i % 2, "{c} is in zone {} and owned by {who}", i % 2);
    }
    drop((a.shutdown, b.shutdown));
}

/// Pods of different sizes: each shard's share follows its holder's advertised capacity.
#[tokio::test(start_paused = true)]
async fn replicas_get_shares_in_proportion_to_their_capacities() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let clusters: Vec<Cluster> = (0..40)
        .map(|i| Cluster::new(format!("c{i:02}"), format!("https://c{i}")))
        .collect();
    let (tx, _rx) = mpsc::unbounded_channel();
    let sized = |name: &str, capacity: u32| {
        let cfg = ReplicaConfig {
            capacity,
            ..config(name, 2, None)
        };
        start(runner(&store, cfg, &clusters, &tx))
    };
    let (small, large) = (sized("small", 1), sized("large", 3));
    tokio::time::sleep(Duration::from_secs(10)).await;
    let owners = owners(&[&small, &large]);
    assert_eq!(owners.len(), 40);
    let held_by_small = owners.values().filter(|&&who| who == 0).count();
    // Targets 10 and 30 (1:3), each within the 10% tolerance.
    assert!((9..=11).contains(&held_by_small), "{held_by_small} of 40");
    drop((small.shutdown, large.shutdown));
}

#[tokio::test(start_paused = true)]
async fn a_new_inventory_is_placed_without_a_restart() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let (fleet_tx, fleet_rx) = watch::channel(fleet_of(6, 1));
    let (tx, _rx) = mpsc::unbounded_channel();
    let nodes: Vec<Node> = ["a", "b"]
        .iter()
        .map(|name| {
            let cfg = config(name, 2, None);
            let (runner, status) = Runner::new(
                store.clone(),
                cfg,
                RunnerTiming::default(),
                fleet_rx.clone(),
                tx.clone(),
            )
            .unwrap();
            start((runner.with_placer(Arc::new(InlinePlacer)), status))
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(owners(&nodes.iter().collect::<Vec<_>>()).len(), 6);
    // Four more clusters, two fewer: the next generation follows.
    let mut next = fleet_of(10, 2);
    Arc::make_mut(&mut next.clusters).drain(0..2);
    Arc::make_mut(&mut next.loads).drain(0..2);
    fleet_tx.send(next).unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let owned = owners(&nodes.iter().collect::<Vec<_>>());
    let ids: Vec<&str> = owned.keys().map(String::as_str).collect();
    assert_eq!(
        ids,
        ["c02", "c03", "c04", "c05", "c06", "c07", "c08", "c09"]
    );
}

/// An operator empties the fleet file, then halves it, under a running distributor: no
/// cluster is unassigned until the smaller inventory has held for the drop guard's grace,
/// and the distributor says so meanwhile (status, metrics view).
#[tokio::test(start_paused = true)]
async fn an_emptied_or_halved_fleet_unassigns_nothing_until_the_grace_has_passed() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let guard = DropGuard {
        max_drop_percent: 50,
        grace: Duration::from_secs(12),
        allow_empty: false,
    };
    let (fleet_tx, fleet_rx) = watch::channel(fleet_of(8, 1));
    let (tx, _rx) = mpsc::unbounded_channel();
    let nodes: Vec<Node> = ["a", "b"]
        .iter()
        .map(|name| {
            let (runner, status) = Runner::new(
                store.clone(),
                config(name, 2, None),
                RunnerTiming::default(),
                fleet_rx.clone(),
                tx.clone(),
            )
            .unwrap();
            let runner = runner.with_drop_guard(guard);
            start((runner.with_placer(Arc::new(InlinePlacer)), status))
        })
        .collect();
    let all = || nodes.iter().collect::<Vec<_>>();
    let held_back = || {
        nodes
            .iter()
            .find_map(|n| n.status.borrow().held_back)
            .map(|h| (h.previous, h.dropped))
    };
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(owners(&all()).len(), 8);
    assert_eq!(held_back(), None);
    // Emptied: nothing moves for the grace.
    fleet_tx.send(fleet_of(0, 2)).unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        owners(&all()).len(),
        8,
        "an empty inventory unassigned clusters"
    );
    assert_eq!(held_back(), Some((8, 8)));
    // An empty inventory is never committed without `allow_empty`, however long it lasts.
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(owners(&all()).len(), 8, "an empty inventory was committed");
    assert_eq!(held_back(), Some((8, 8)));
    let ready = nodes
        .iter()
        .find(|n| n.status.borrow().held_back.is_some())
        .map(|n| n.status.borrow().readiness(tokio::time::Instant::now()))
        .unwrap()
        .unwrap();
    assert!(
        ready.contains("degraded inventory: it drops 8 of the 8 committed clusters"),
        "{ready}"
    );
    // Back to half of it: a new view (3 of 8 kept), a new grace.
    fleet_tx.send(fleet_of(3, 3)).unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        owners(&all()).len(),
        8,
        "a halved inventory unassigned clusters"
    );
    assert_eq!(held_back(), Some((8, 5)));
    // The halved view has held for its grace: committed, and nothing held back.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let owned = owners(&all());
    assert_eq!(owned.keys().collect::<Vec<_>>(), ["c00", "c01", "c02"]);
    assert_eq!(held_back(), None);
    for n in nodes {
        n.shutdown.send(true).unwrap();
        assert!(n.task.await.unwrap());
    }
}

#[tokio::test(start_paused = true)]
async fn every_start_is_reported_stopped_when_the_lease_lapses_during_shutdown() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let clusters: Vec<Cluster> = (0..2_000)
        .map(|i| Cluster::new(format!("c{i:04}"), format!("https://c{i}")))
        .collect();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (r, _status) = runner(&store, config("p", 1, None), &clusters, &tx);
    let r = r.with_stop_hook(Arc::new(SlowStops(Duration::from_millis(300))));
    let (run_tx, running) = watch::channel(true);
    let (shutdown, shutdown_rx) = watch::channel(false);
    let task = tokio::spawn(pausable(r.run(shutdown_rx), running));
    tokio::time::sleep(Duration::from_secs(10)).await;
    let mut holder = BTreeMap::new();
    replay(&mut rx, &mut holder);
    assert_eq!(holder.len(), 2_000);
    // Frozen (a long step, SIGSTOP) past its lease; SIGTERM arrives meanwhile. On resuming
    // it releases, finds its lease lapsed (nothing left to release), and must still wait
    // for the stops it has started before it returns.
    run_tx.send(false).unwrap();
    shutdown.send(true).unwrap();
    tokio::time::sleep(Duration::from_secs(8)).await;
    run_tx.send(true).unwrap();
    task.await.unwrap();
    let mut events = Vec::new();
    while let Ok(e) = rx.try_recv() {
        events.push(e);
    }
    // Ownership ended at the lapse, and the stops say so.
    assert!(
        events.iter().all(|e| e.lapsed_at.is_some()),
        "{:?}",
        events[0]
    );
    for e in events {
        tx.send(e).unwrap();
    }
    replay(&mut rx, &mut holder);
    assert!(holder.is_empty(), "{} starts without a stop", holder.len());
}

/// A placer whose placements take `took` (a large fleet on a slow machine), counting runs.
struct SlowPlacer {
    took: Duration,
    runs: Arc<std::sync::atomic::AtomicUsize>,
}

impl Placer for SlowPlacer {
    fn place(
        &self,
        job: crate::fenced::PlacementJob,
        fleet: RunnerFleet,
    ) -> BoxFuture<'static, Option<crate::fenced::Placed>> {
        self.runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let took = self.took;
        Box::pin(async move {
            tokio::time::sleep(took).await;
            Some(job.run(&fleet.clusters, &fleet.loads, &fleet.apps))
        })
    }
}

/// The renew counter of the lease record at `key` (a shard's or a presence record).
async fn beat(store: &Arc<dyn Store>, key: &str) -> Option<u64> {
    let entry = store.get(key).await.ok()??;
    let record: serde_json::Value = serde_json::from_slice(&entry.value).ok()?;
    record["beat"].as_u64()
}

#[tokio::test(start_paused = true)]
async fn renewals_and_readiness_stay_on_time_while_a_placement_takes_ten_seconds() {
    use crate::ownership::ReplicaStatus;
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let clusters: Vec<Cluster> = (0..12)
        .map(|i| Cluster::new(format!("c{i:02}"), format!("https://c{i}")))
        .collect();
    let (tx, _rx) = mpsc::unbounded_channel();
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let placer = SlowPlacer {
        took: Duration::from_secs(10),
        runs: runs.clone(),
    };
    let (r, status) = runner(&store, config("a", 1, None), &clusters, &tx);
    let node = start((r.with_placer(Arc::new(placer)), status));
    // Claimed its shard and the distributor role; the first placement is under way.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(node.status.borrow().placing, "{:?}", node.status.borrow());
    let renew_every = LeaseTiming::default().renew_every;
    let (mut last_beat, mut changed_at) = (beat(&store, "fs/shards/0").await, Instant::now());
    let mut renewals = 0;
    // The first placement takes until 11 s; after its commit the distributor places once
    // more (from the committed document, to find nothing changed), until 21 s.
    for _ in 0..(22 * 20) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = Instant::now();
        // The renew timer kept running: the record changes at least every renew period
        // (plus one tick), and the lease, readiness and the distributor role never lapse.
        let b = beat(&store, "fs/shards/0").await;
        if b != last_beat {
            (last_beat, changed_at) = (b, now);
            renewals += 1;
        }
        assert!(
            now - changed_at <= renew_every + RunnerTiming::default().tick,
            "no renewal for {:?} while placing",
            now - changed_at
        );
        let s = node.status.borrow().clone();
        assert_eq!(s.readiness(now), Ok("holding shard 0".to_owned()));
        assert!(s.is_distributor_at(now), "{s:?}");
        assert!(s.shard_view().is_distributor);
    }
    assert!(renewals >= 15, "{renewals} renewals in 22 s");
    // The first placement was committed and every cluster started; the second found
    // nothing to change.
    assert_eq!(owners(&[&node]).len(), 12);
    let s = node.status.borrow().clone();
    assert!(!s.placing && s.generation == 1, "{s:?}");
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 2);
    node.shutdown.send(true).unwrap();
    assert!(node.task.await.unwrap());
}

#[tokio::test(start_paused = true)]
async fn a_placement_for_an_inventory_that_changed_meanwhile_is_dropped_and_redone() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let (fleet_tx, fleet_rx) = watch::channel(fleet_of(4, 1));
    let (tx, _rx) = mpsc::unbounded_channel();
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let placer = SlowPlacer {
        took: Duration::from_secs(3),
        runs: runs.clone(),
    };
    let runner = Runner::new(
        store.clone(),
        config("a", 1, None),
        RunnerTiming::default(),
        fleet_rx,
        tx,
    )
    .unwrap();
    let node = start((runner.0.with_placer(Arc::new(placer)), runner.1));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(node.status.borrow().placing);
    // Mid-placement, the inventory grows: the first result is for revision 1 only.
    fleet_tx.send(fleet_of(6, 2)).unwrap();
    tokio::time::sleep(Duration::from_secs(12)).await;
    let owned = owners(&[&node]);
    assert_eq!(owned.len(), 6, "{owned:?}");
    // Revision 1's result was dropped, revision 2 placed and committed, then placed once
    // more from the committed document (nothing changed).
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 3);
    // Generation 1 is the second placement's: the first was never committed.
    assert_eq!(node.status.borrow().generation, 1);
    node.shutdown.send(true).unwrap();
    assert!(node.task.await.unwrap());
}

#[test]
fn readiness_reasons() {
    use crate::ownership::ReplicaStatus;
    let now = Instant::now();
    let mut s = Status::default();
    assert!(s.readiness(now).is_err());
    s.listed = true;
    s.spare = true;
    assert!(s.readiness(now).is_ok());
    s.spare = false;
    s.shard = Some(1);
    s.lease_valid_until = Some(now + Duration::from_secs(1));
    assert!(s.readiness(now).is_ok());
    let later = s.readiness(now + Duration::from_secs(2));
    assert!(later.unwrap_err().contains("lease"));
    assert_eq!(s.lease_deadline(), s.lease_valid_until);
    assert_eq!(s.shard_view().shard, Some(1));
}

/// A memory store that another one can replace under its handles (as a SQLite file
/// deleted and re-created): from `replace` on, its identity check says so and its
/// operations reach the new, empty store.
#[derive(Default)]
struct Replaceable {
    first: MemoryStore,
    second: MemoryStore,
    replaced: std::sync::atomic::AtomicBool,
}

impl Replaceable {
    fn now(&self) -> &MemoryStore {
        if self.replaced.load(std::sync::atomic::Ordering::SeqCst) {
            &self.second
        } else {
            &self.first
        }
    }
}

impl Store for Replaceable {
    fn get<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<crate::store::Entry>, StoreError>> {
        self.now().get(key)
    }
    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Listing, StoreError>> {
        self.now().list(prefix)
    }
    fn put<'a>(
        &'a self,
        key: &'a str,
        value: Vec<u8>,
        pre: crate::store::Precondition,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        self.now().put(key, value, pre)
    }
    fn delete<'a>(
        &'a self,
        key: &'a str,
        pre: crate::store::Precondition,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.now().delete(key, pre)
    }
    fn wait_for_change<'a>(
        &'a self,
        prefix: &'a str,
        since: u64,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        self.now().wait_for_change(prefix, since)
    }
    fn describe(&self) -> String {
        "replaceable://".into()
    }
    fn check_identity(&self) -> BoxFuture<'_, Result<crate::store::StoreIdentity, StoreError>> {
        let r = if self.replaced.load(std::sync::atomic::Ordering::SeqCst) {
            Err(StoreError::Replaced {
                what: "another store".into(),
            })
        } else {
            Ok(crate::store::StoreIdentity::Recorded("the first".into()))
        };
        futures::FutureExt::boxed(futures::future::ready(r))
    }
}

#[tokio::test(start_paused = true)]
async fn runners_on_a_replaced_store_fence_themselves_and_stop_at_their_deadline() {
    let backend = Arc::new(Replaceable::default());
    let store: Arc<dyn Store> = Arc::new(crate::store::guard::GuardedStore::new(
        backend.clone(),
        Duration::ZERO,
    ));
    let clusters: Vec<Cluster> = (0..6)
        .map(|i| Cluster::new(format!("c{i}"), format!("https://c{i}")))
        .collect();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let nodes: Vec<Node> = ["a", "b"]
        .iter()
        .map(|n| spawn(&store, n, &clusters, &tx))
        .collect();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let all: Vec<&Node> = nodes.iter().collect();
    assert_eq!(owners(&all).len(), 6);
    let mut holder = BTreeMap::new();
    replay(&mut rx, &mut holder);

    backend
        .replaced
        .store(true, std::sync::atomic::Ordering::SeqCst);
    // Within a tick both know, and say why.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for n in &nodes {
        let s = n.status.borrow().clone();
        assert_eq!(s.store_replaced.as_deref(), Some("another store"), "{s:?}");
        let why = s.readiness(Instant::now()).unwrap_err();
        assert_eq!(why, "fenced: store replaced (another store)");
    }
    // Nothing was written to the new store, and every cluster stops by the renew deadline.
    assert!(backend.second.list("").await.unwrap().entries.is_empty());
    tokio::time::sleep(LeaseTiming::default().renew_deadline).await;
    for n in &nodes {
        let s = n.status.borrow().clone();
        assert!(s.acting.is_empty() && s.shard.is_none(), "{s:?}");
    }
    replay(&mut rx, &mut holder);
    assert!(holder.is_empty(), "{holder:?}");
    // And they stay fenced, touching nothing.
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(backend.second.list("").await.unwrap().entries.is_empty());
    for n in nodes {
        assert!(n.status.borrow().store_replaced.is_some());
        assert!(n.status.borrow().acting.is_empty());
        n.shutdown.send(true).unwrap();
        // It holds nothing any more: nothing to release.
        n.task.await.unwrap();
    }
}

#[test]
fn readiness_names_unreadable_records() {
    use crate::ownership::ReplicaStatus;
    let now = Instant::now();
    let mut s = Status {
        listed: true,
        shard: Some(0),
        lease_valid_until: Some(now + Duration::from_secs(1)),
        corrupt: vec![CorruptRecord {
            key: "f/assignment".into(),
            reason: "expected value at line 1 column 1".into(),
        }],
        ..Status::default()
    };
    let ready = s
        .readiness(now)
        .expect("a holder still acts on the last good values");
    assert_eq!(
        ready,
        "holding shard 0; degraded store: f/assignment: not a valid record: expected value at line 1 column 1"
    );
    assert_eq!(s.shard_view().corrupt_records, 1);
    s.shard = None;
    s.lease_valid_until = None;
    let not_ready = s.readiness(now).unwrap_err();
    assert!(
        not_ready.contains("degraded store: f/assignment"),
        "{not_ready}"
    );
}

/// What the metrics are told of the other holders' leases ([`RunnerMetrics::peer_leases`]).
#[derive(Default)]
struct PeersSeen(std::sync::Mutex<(Vec<PeerRenewal>, Duration)>);

impl RunnerMetrics for PeersSeen {
    fn peer_leases(&self, leases: &[PeerRenewal], at_risk_after: Duration) {
        *self.0.lock().unwrap() = (leases.to_vec(), at_risk_after);
    }
}

impl PeersSeen {
    /// Clusters of the shards whose record stayed unchanged past the bound, at `now`.
    fn not_renewed(&self, now: Instant) -> u64 {
        let (leases, bound) = &*self.0.lock().unwrap();
        PeerRenewal::not_renewed(leases, *bound, now).1
    }
}

/// A survivor's metrics count a crashed holder's clusters as not renewed from its first
/// missed renewal (within the bound and one poll), long before its lease expires, and
/// never while every holder renews.
#[tokio::test(start_paused = true)]
async fn a_crashed_holders_clusters_are_reported_not_renewed_before_its_lease_expires() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let clusters: Vec<Cluster> = (0..12)
        .map(|i| Cluster::new(format!("c{i:02}"), format!("https://c{i}")))
        .collect();
    let (tx, _rx) = mpsc::unbounded_channel();
    let seen = Arc::new(PeersSeen::default());
    let a = spawn(&store, "a", &clusters, &tx);
    let (r, status) = runner(&store, config("b", 3, None), &clusters, &tx);
    let b = start((r.with_metrics(seen.clone()), status));
    let c = spawn(&store, "c", &clusters, &tx);
    tokio::time::sleep(Duration::from_secs(10)).await;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(seen.not_renewed(Instant::now()), 0, "every holder renews");
    }
    let on_a = a.status.borrow().acting.len() as u64;
    assert!(on_a > 0);
    a.task.abort();
    let crashed = Instant::now();
    let bound = seen.0.lock().unwrap().1;
    let mut at_risk_after = None;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = Instant::now();
        if at_risk_after.is_none() && seen.not_renewed(now) == on_a {
            at_risk_after = Some(now - crashed);
        }
    }
    let after = at_risk_after.expect("a's clusters reported not renewed");
    let poll = RunnerTiming::default().poll;
    assert!(after <= bound + poll, "{after:?} > {bound:?} + {poll:?}");
    assert!(after < LeaseTiming::default().duration, "{after:?}");
    // Moved to the survivors: nothing is at risk any more.
    assert_eq!(owners(&[&b, &c]).len(), 12);
    assert_eq!(seen.not_renewed(Instant::now()), 0);
}

mod renewals;
