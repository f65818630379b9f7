//! Scenarios with several runners over one store, under paused time (H = 10 s, S = 30 s).

use super::*;
use crate::argocd::upstream;

/// Shuts every node down and checks each release completed.
async fn shutdown_all(nodes: Vec<Node>) {
    for n in nodes {
        n.shutdown.send(true).unwrap();
        assert!(n.task.await.unwrap(), "{} released", n.name);
    }
}

/// Each cluster is acted on by the replica holding Argo CD's shard for it among `replicas`.
fn assert_covered(world: &World, nodes: &[&Node], replicas: u32) {
    let owners = owners(nodes);
    let expected = world.expected(replicas);
    assert_eq!(owners.len(), expected.len(), "{owners:?}");
    for (c, shard) in expected {
        let owner = nodes.iter().find(|n| n.name == owners[&c]).unwrap();
        assert_eq!(
            owner.status.borrow().shard.map(i64::from),
            Some(shard),
            "{c}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn replicas_claim_distinct_shards_and_start_after_the_delay() {
    let world = World::new(12, 3);
    let nodes: Vec<Node> = ["a", "b", "c"].iter().map(|n| world.spawn(n)).collect();
    sleep(Duration::from_secs(1)).await;
    let mut shards: Vec<u32> = nodes
        .iter()
        .map(|n| n.status.borrow().shard.unwrap())
        .collect();
    shards.sort();
    assert_eq!(shards, [0, 1, 2]);
    // A fresh map: nobody knows who acted before, so clusters wait S.
    assert!(owners(&nodes.iter().collect::<Vec<_>>()).is_empty());
    assert!(nodes.iter().all(|n| n.status.borrow().pending > 0));
    sleep(S - Duration::from_secs(2)).await;
    assert!(owners(&nodes.iter().collect::<Vec<_>>()).is_empty());
    sleep(Duration::from_secs(3)).await;
    assert_covered(&world, &nodes.iter().collect::<Vec<_>>(), 3);
    let now = Instant::now();
    for n in &nodes {
        let s = n.status.borrow().clone();
        assert!(s.readiness(now).is_ok(), "{s:?}");
    }

    // Our map, read by Argo CD: exact format, and upstream's own claim finds each replica
    // on its shard and changes nothing but its heartbeat.
    let raw = world.store.get(MAPPING_KEY).await.unwrap().unwrap().value;
    let text = String::from_utf8(raw).unwrap();
    assert!(
        text.starts_with("[{\"ShardNumber\":0,\"ControllerName\":\""),
        "{text}"
    );
    assert!(!text.contains(' ') && text.ends_with("Z\"}]"), "{text}");
    let list = decode(&text).unwrap();
    for n in &nodes {
        let held = i64::from(n.status.borrow().shard.unwrap());
        let now = list[0]
            .heartbeat_time
            .saturating_add(Duration::from_secs(1));
        let (shard, after) =
            upstream::get_or_update_shard_number_for_controller(&list, &n.name, 3, -1, now, S);
        assert_eq!(shard, held);
        assert_eq!(after.len(), 3);
        assert_eq!(after[held as usize].controller_name, n.name);
    }
    world.check_timeline();
    shutdown_all(nodes).await;
}

#[tokio::test(start_paused = true)]
async fn each_holder_writes_once_per_heartbeat_and_spares_not_at_all() {
    let world = World::new(6, 2);
    let nodes: Vec<Node> = ["a", "b", "c"].iter().map(|n| world.spawn(n)).collect();
    sleep(Duration::from_secs(5)).await;
    let before: Vec<u64> = nodes
        .iter()
        .map(|n| n.store.writes.load(Ordering::SeqCst))
        .collect();
    sleep(H * 10).await;
    for (n, b) in nodes.iter().zip(before) {
        let writes = n.store.writes.load(Ordering::SeqCst) - b;
        match n.status.borrow().shard {
            Some(_) => assert_eq!(writes, 10, "{}: {writes} writes in 10 heartbeats", n.name),
            None => assert_eq!(writes, 0, "spare {} wrote", n.name),
        }
    }
    shutdown_all(nodes).await;
}

#[tokio::test(start_paused = true)]
async fn a_stale_entry_is_taken_after_stale_after_and_a_live_one_never() {
    let world = World::new(8, 2);
    let a = world.spawn("a");
    let b = world.spawn("b");
    sleep(Duration::from_secs(1)).await;
    let c = world.spawn("c");
    // Live holders: the spare never takes over.
    for _ in 0..90 {
        sleep(Duration::from_secs(1)).await;
        assert_eq!(c.status.borrow().shard, None);
    }
    assert_eq!(c.status.borrow().claim, Some(ClaimStatus::Spare));
    assert!(c.status.borrow().readiness(Instant::now()).is_ok());
    let a_shard = a.status.borrow().shard.unwrap();
    let a_clusters = a.status.borrow().acting.clone();
    assert!(!a_clusters.is_empty());
    // A crash: no release.
    a.task.abort();
    let last_sent = a.store.last_write_sent.lock().unwrap().unwrap();
    let taken = loop {
        sleep(Duration::from_millis(100)).await;
        if c.status.borrow().shard.is_some() {
            break Instant::now();
        }
        assert!(Instant::now() < last_sent + S * 2, "never taken over");
    };
    assert_eq!(c.status.borrow().shard, Some(a_shard));
    let waited = taken - last_sent;
    assert!(
        waited > S && waited < S + Duration::from_secs(1),
        "{waited:?}"
    );
    // A stale takeover starts at once: a's validity ended long before.
    sleep(Duration::from_millis(500)).await;
    assert_eq!(c.status.borrow().acting, a_clusters);
    // a would have stopped at last_sent + V: the timeline, with a's spans ended there.
    world
        .timeline
        .lock()
        .unwrap()
        .extend(a_clusters.iter().map(|cl| {
            let stop = OwnershipChange {
                identity: "a".into(),
                change: Ownership::Stopped(cl.clone()),
                shard: Some(a_shard),
                generation: 2,
                lapsed_at: Some(last_sent + ArgoConfig::new("a").validity()),
                at: last_sent + ArgoConfig::new("a").validity(),
            };
            (taken, stop)
        }));
    world.check_timeline();
    shutdown_all(vec![b, c]).await;
}

#[tokio::test(start_paused = true)]
async fn scale_up_two_to_three_and_down_to_two() {
    let world = World::new(12, 2);
    let nodes: Vec<Node> = ["a", "b", "c"].iter().map(|n| world.spawn(n)).collect();
    let all: Vec<&Node> = nodes.iter().collect();
    sleep(S + Duration::from_secs(5)).await;
    assert_covered(&world, &all, 2);
    let spare = all
        .iter()
        .find(|n| n.status.borrow().shard.is_none())
        .unwrap();

    world.count.send(3).unwrap();
    sleep(Duration::from_secs(1)).await;
    assert_eq!(spare.status.borrow().shard, Some(2));
    assert_eq!(world.map().await.len(), 3);
    sleep(S + Duration::from_secs(1)).await;
    assert_covered(&world, &all, 3);

    world.count.send(2).unwrap();
    sleep(Duration::from_secs(1)).await;
    let map = world.map().await;
    assert_eq!(map.len(), 2, "{map:?}");
    // W11 avoided: the survivors keep their entries.
    assert!(map.iter().all(|e| !e.is_free()));
    assert_eq!(spare.status.borrow().shard, None);
    assert!(spare.status.borrow().acting.is_empty());
    sleep(S + Duration::from_secs(1)).await;
    assert_covered(&world, &all, 2);
    world.check_timeline();
    shutdown_all(nodes).await;
}

#[tokio::test(start_paused = true)]
async fn a_pinned_replica_waits_for_a_live_holder_then_takes_its_pin() {
    let world = World::new(8, 2);
    let pinned = |name: &str| ArgoConfig {
        pin: Some(1),
        ..World::cfg(name)
    };
    let x = world.spawn_with(pinned("x"), None);
    sleep(Duration::from_secs(1)).await;
    let y = world.spawn_with(pinned("y"), None);
    let z = world.spawn("z");
    sleep(S + Duration::from_secs(5)).await;
    assert_eq!(x.status.borrow().shard, Some(1));
    assert_eq!(z.status.borrow().shard, Some(0));
    let ys = y.status.borrow().clone();
    assert_eq!(ys.shard, None);
    assert_eq!(
        ys.claim,
        Some(ClaimStatus::WaitingForPinned {
            shard: 1,
            holder: "x".into()
        })
    );
    assert!(ys.readiness(Instant::now()).is_ok());
    let x_clusters = x.status.borrow().acting.clone();
    x.shutdown.send(true).unwrap();
    assert!(x.task.await.unwrap());
    sleep(Duration::from_millis(500)).await;
    // A graceful release y saw: taken and started at once.
    assert_eq!(y.status.borrow().shard, Some(1));
    assert_eq!(y.status.borrow().acting, x_clusters);
    world.check_timeline();
    shutdown_all(vec![y, z]).await;
}

#[tokio::test(start_paused = true)]
async fn graceful_release_frees_the_entry_for_an_immediate_takeover() {
    let world = World::new(10, 2);
    let nodes: Vec<Node> = ["a", "b", "c"].iter().map(|n| world.spawn(n)).collect();
    sleep(S + Duration::from_secs(5)).await;
    let mut nodes = nodes.into_iter();
    let a = nodes.next().unwrap();
    let rest: Vec<Node> = nodes.collect();
    let a_shard = a.status.borrow().shard.unwrap();
    let a_clusters = a.status.borrow().acting.clone();
    a.shutdown.send(true).unwrap();
    assert!(a.task.await.unwrap());
    assert!(a.status.borrow().acting.is_empty());
    sleep(Duration::from_millis(500)).await;
    let map = world.map().await;
    assert!(map.iter().all(|e| e.controller_name != "a"), "{map:?}");
    let taker = rest
        .iter()
        .find(|n| n.status.borrow().shard == Some(a_shard))
        .expect("the spare took the freed entry");
    assert_eq!(taker.status.borrow().acting, a_clusters);
    world.check_timeline();
    shutdown_all(rest).await;
}

/// A rolling update's surge pod: it joins a full map as a spare and reports ready only once
/// it has watched the map for the start delay; the old pod stopped then (as a Deployment
/// does once its surge pod is ready) has its clusters started by the surge pod at once.
/// Ready earlier, the stop would leave them unowned for up to the start delay.
#[tokio::test(start_paused = true)]
async fn a_surge_pod_is_ready_only_when_it_would_take_a_released_shard_over_at_once() {
    let world = World::new(10, 1);
    let old = world.spawn("old");
    sleep(S + Duration::from_secs(5)).await;
    let old_clusters = old.status.borrow().acting.clone();
    assert_eq!(old_clusters.len(), 10);
    let joined = Instant::now();
    let surge = world.spawn("surge");
    sleep(Duration::from_secs(1)).await;
    assert_eq!(surge.status.borrow().claim, Some(ClaimStatus::Spare));
    let early = surge.status.borrow().readiness(Instant::now()).unwrap_err();
    assert!(early.contains("watching the shard mapping"), "{early}");
    // Readiness polled as a kubelet would, every second.
    while surge.status.borrow().readiness(Instant::now()).is_err() {
        sleep(Duration::from_secs(1)).await;
    }
    let ready_after = joined.elapsed();
    assert!(
        ready_after >= S && ready_after <= S + Duration::from_secs(2),
        "ready {ready_after:?} after joining"
    );
    old.shutdown.send(true).unwrap();
    assert!(old.task.await.unwrap());
    let stopped = Instant::now();
    while surge.status.borrow().acting.len() < 10 {
        sleep(Duration::from_millis(100)).await;
        assert!(stopped.elapsed() < H, "the surge pod waited for a delay");
    }
    assert_eq!(surge.status.borrow().acting, old_clusters);
    world.check_timeline();
    shutdown_all(vec![surge]).await;
}

#[tokio::test(start_paused = true)]
async fn lost_write_replies_do_not_cost_the_shard() {
    let world = World::new(8, 2);
    let nodes: Vec<Node> = ["a", "b", "c"].iter().map(|n| world.spawn(n)).collect();
    sleep(S + Duration::from_secs(5)).await;
    let a = &nodes[0];
    let held = a.status.borrow().shard;
    let acting = a.status.borrow().acting.clone();
    assert!(held.is_some());
    a.store.lose_every_other_reply.store(true, Ordering::SeqCst);
    for _ in 0..120 {
        sleep(Duration::from_secs(1)).await;
        let s = a.status.borrow().clone();
        assert_eq!(s.shard, held);
        assert_eq!(s.acting, acting);
        assert!(s.readiness(Instant::now()).is_ok(), "{s:?}");
    }
    assert!(a.status.borrow().store_errors >= 10);
    world.check_timeline();
    shutdown_all(nodes).await;
}

#[tokio::test(start_paused = true)]
async fn a_replica_paused_past_stale_after_stops_before_anyone_starts_its_clusters() {
    let world = World::new(10, 2);
    let a = world.spawn("a");
    let (run_tx, running) = watch::channel(true);
    let p = world.spawn_with(World::cfg("p"), Some(running));
    sleep(Duration::from_secs(1)).await;
    let c = world.spawn("c");
    sleep(S + Duration::from_secs(10)).await;
    let p_shard = p.status.borrow().shard.unwrap();
    let p_clusters = p.status.borrow().acting.clone();
    assert!(!p_clusters.is_empty());
    run_tx.send(false).unwrap();
    sleep(S + Duration::from_secs(20)).await;
    // Taken over meanwhile.
    assert_eq!(c.status.borrow().shard, Some(p_shard));
    assert_eq!(c.status.borrow().acting, p_clusters);
    run_tx.send(true).unwrap();
    sleep(Duration::from_secs(2)).await;
    let events = world.timeline.lock().unwrap().clone();
    let p_stops: Vec<_> = events
        .iter()
        .filter(|(_, e)| e.identity == "p" && matches!(e.change, Ownership::Stopped(_)))
        .collect();
    assert_eq!(p_stops.len(), p_clusters.len());
    assert!(p_stops.iter().all(|(_, e)| e.lapsed_at.is_some()));
    // check_timeline dates p's stops at the lapse: c started after it.
    world.check_timeline();
    assert_eq!(p.status.borrow().shard, None);
    assert!(p.status.borrow().acting.is_empty());
    shutdown_all(vec![a, c, p]).await;
}

#[tokio::test(start_paused = true)]
async fn a_map_written_by_argo_cd_is_read_and_claimed() {
    let world = World::new(8, 2);
    // The example of argo-compat §5.3 (`docs/glossary.md`), byte for byte.
    let argo = r#"[{"ShardNumber":0,"ControllerName":"argocd-application-controller-7b9c8d6f5-x2kqp","HeartbeatTime":"2026-08-22T18:31:32Z"},{"ShardNumber":1,"ControllerName":"","HeartbeatTime":null}]"#;
    world
        .store
        .put(MAPPING_KEY, argo.as_bytes().to_vec(), Precondition::Absent)
        .await
        .unwrap();
    let r1 = world.spawn("r1");
    sleep(Duration::from_secs(1)).await;
    assert_eq!(r1.status.borrow().shard, Some(1));
    let started = Instant::now();
    let r2 = world.spawn("r2");
    sleep(H).await;
    let map = world.map().await;
    assert_eq!(
        map[0],
        decode(argo).unwrap()[0],
        "Argo CD's live-looking entry untouched"
    );
    assert_eq!(map[1].controller_name, "r1");
    // Argo CD's controller never heartbeats here: its entry goes stale S after r2 saw it.
    let taken = loop {
        sleep(Duration::from_millis(100)).await;
        if r2.status.borrow().shard.is_some() {
            break Instant::now();
        }
        assert!(Instant::now() < started + S * 2);
    };
    assert_eq!(r2.status.borrow().shard, Some(0));
    assert!(taken - started > S, "{:?}", taken - started);
    assert_eq!(world.map().await[0].controller_name, "r2");
    shutdown_all(vec![r1, r2]).await;
}

#[tokio::test(start_paused = true)]
async fn a_partitioned_holder_stops_before_the_spare_takes_over_and_returns_as_a_spare() {
    let world = World::new(10, 2);
    let a = world.spawn("a");
    let b = world.spawn("b");
    sleep(Duration::from_secs(1)).await;
    let c = world.spawn("c");
    sleep(S + Duration::from_secs(10)).await;
    let a_shard = a.status.borrow().shard.unwrap();
    let a_clusters = a.status.borrow().acting.clone();
    assert!(!a_clusters.is_empty());
    a.store.cut.store(true, Ordering::SeqCst);
    let last_sent = a.store.last_write_sent.lock().unwrap().unwrap();
    let mut a_stopped = None;
    let mut c_started = None;
    for _ in 0..600 {
        sleep(Duration::from_millis(100)).await;
        let now = Instant::now();
        if a_stopped.is_none() && a.status.borrow().acting.is_empty() {
            a_stopped = Some(now);
            assert!(a.status.borrow().readiness(now).is_err());
        }
        if c_started.is_none() && !c.status.borrow().acting.is_empty() {
            c_started = Some(now);
        }
    }
    let (a_stopped, c_started) = (a_stopped.unwrap(), c_started.unwrap());
    // a stops at its validity (2H after sending its last confirmed heartbeat), c takes over
    // once the entry was unchanged for 3H: H apart.
    let validity = ArgoConfig::new("a").validity();
    assert!(
        a_stopped >= last_sent + validity,
        "{:?}",
        a_stopped - last_sent
    );
    assert!(a_stopped <= last_sent + validity + Duration::from_millis(200));
    assert!(c_started > last_sent + S && c_started >= a_stopped + H - Duration::from_millis(200));
    assert_eq!(c.status.borrow().shard, Some(a_shard));
    assert_eq!(c.status.borrow().acting, a_clusters);
    // Healed: a finds its entry taken, holds nothing, and is a ready spare.
    a.store.cut.store(false, Ordering::SeqCst);
    sleep(H).await;
    let s = a.status.borrow().clone();
    assert_eq!(s.shard, None);
    assert_eq!(s.claim, Some(ClaimStatus::Spare));
    assert!(s.readiness(Instant::now()).is_ok(), "{s:?}");
    world.check_timeline();
    shutdown_all(vec![a, b, c]).await;
}

#[tokio::test(start_paused = true)]
async fn a_slow_store_still_gets_one_write_per_holder_per_heartbeat() {
    let world = World::new(8, 2);
    let nodes: Vec<Node> = ["a", "b", "c"].iter().map(|n| world.spawn(n)).collect();
    for n in &nodes {
        *n.store.delay.lock().unwrap() = Duration::from_secs(2);
    }
    sleep(S + Duration::from_secs(15)).await;
    let all: Vec<&Node> = nodes.iter().collect();
    assert_covered(&world, &all, 2);
    let before: Vec<u64> = nodes
        .iter()
        .map(|n| n.store.writes.load(Ordering::SeqCst))
        .collect();
    let acting: Vec<Vec<String>> = nodes
        .iter()
        .map(|n| n.status.borrow().acting.clone())
        .collect();
    for _ in 0..100 {
        sleep(Duration::from_secs(1)).await;
        for (n, a) in nodes.iter().zip(&acting) {
            assert_eq!(&n.status.borrow().acting, a, "{}", n.name);
        }
    }
    for (n, b) in nodes.iter().zip(before) {
        let writes = n.store.writes.load(Ordering::SeqCst) - b;
        let expected = if n.status.borrow().shard.is_some() {
            10
        } else {
            0
        };
        assert!(
            writes.abs_diff(expected) <= 1,
            "{}: {writes} writes",
            n.name
        );
    }
    world.check_timeline();
    // A release has 2 s, less than a write takes here.
    for n in &nodes {
        *n.store.delay.lock().unwrap() = Duration::ZERO;
    }
    shutdown_all(nodes).await;
}
