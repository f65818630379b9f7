//! The audit log at fleet scale, replayed: every acquire has its release. One replica over
//! `memory://` acquires 50,000 clusters and is shut down; three replicas share 50,000
//! clusters (one, then three: the 1→3 handover), then leave one by one.

use std::collections::HashMap;
use std::time::Duration;

use fleetshard_coord::fenced::ShardCount;
use fleetshard_core::Cluster;
use tokio::time::Instant;

use crate::{
    ControllerSettings, FencedSettings, FleetSource, ProtocolSettings, ReconcilerKind, Replica,
    ReplicaHandle, ReplicaSettings, StoreUrl,
};

const CLUSTERS: usize = 50_000;

fn settings(identity: &str, shards: u32, audit: std::path::PathBuf) -> ReplicaSettings {
    let clusters: Vec<Cluster> = (0..CLUSTERS)
        .map(|i| Cluster::new(format!("c{i:05}"), format!("https://c{i}.example")))
        .collect();
    ReplicaSettings {
        identity: identity.to_owned(),
        incarnation: 1,
        store: StoreUrl::Memory,
        root: "fleetshard/".to_owned(),
        listen: "127.0.0.1:0".parse().unwrap(),
        dashboard: false,
        zone: None,
        capacity: 1,
        audit_log: Some(audit),
        allow_empty_fleet: false,
        fleet: FleetSource::Fixed(crate::inventory::one_app_each(clusters)),
        controller: ControllerSettings {
            reconciler: ReconcilerKind::None,
            ..ControllerSettings::default()
        },
        protocol: ProtocolSettings::Fenced(FencedSettings {
            shards: ShardCount::Fixed(shards),
            ..FencedSettings::default()
        }),
    }
}

/// Real time on two workers, as `fleetshard run`: the release races real deadlines (a
/// lease lapsing during shutdown used to lose every release). The durations are printed
/// for `docs/reliability.md`, not asserted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acquire_has_its_release_after_a_graceful_exit_at_fifty_thousand_clusters() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r0.audit");
    let begun = Instant::now();
    let store = StoreUrl::Memory.open().unwrap();
    let replica = Replica::build_on(settings("r0", 1, path.clone()), store)
        .await
        .unwrap()
        .spawn()
        .unwrap();
    let mut last = 0;
    loop {
        let acting = replica.view().acting;
        if acting == CLUSTERS {
            break;
        }
        assert!(
            begun.elapsed() < Duration::from_secs(300) || acting > last,
            "acting on {acting} of {CLUSTERS}"
        );
        last = acting;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let owned_after = begun.elapsed();
    let stopping = Instant::now();
    // Whether the release record was written in time is timing (a loaded machine, a debug
    // build); the log must be complete either way.
    let released = replica.shutdown().await.unwrap();
    eprintln!(
        "{CLUSTERS} clusters: owned after {owned_after:?}, shut down in {:?} (released: {released})",
        stopping.elapsed()
    );

    assert_eq!(replay(&path), CLUSTERS);
}

/// Replays an audit log: every cluster alternates acquire and release, starting with an
/// acquire and ending released. Returns the number of acquires.
fn replay(path: &std::path::Path) -> usize {
    let log = std::fs::read_to_string(path).unwrap();
    let mut held: HashMap<String, i32> = HashMap::with_capacity(CLUSTERS);
    let (mut acquires, mut releases) = (0, 0);
    for line in log.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let c = v["cluster"].as_str().unwrap().to_owned();
        let n = held.entry(c).or_default();
        match v["event"].as_str() {
            Some("acquire") => {
                assert_eq!(*n, 0, "acquired twice: {line}");
                acquires += 1;
                *n += 1;
            }
            Some("release") => {
                assert_eq!(*n, 1, "released without an acquire: {line}");
                releases += 1;
                *n -= 1;
            }
            other => panic!("unknown event {other:?}"),
        }
    }
    assert_eq!(acquires, releases, "{}", path.display());
    acquires
}

/// Waits until the replicas act on `CLUSTERS` in all, each on some.
async fn until_covered(replicas: &[&ReplicaHandle]) {
    let begun = Instant::now();
    loop {
        let acting: Vec<usize> = replicas.iter().map(|r| r.view().acting).collect();
        if acting.iter().sum::<usize>() == CLUSTERS && acting.iter().all(|&n| n > 0) {
            return;
        }
        assert!(
            begun.elapsed() < Duration::from_secs(300),
            "acting on {acting:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_hand_fifty_thousand_clusters_over_and_log_every_release() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(format!("{name}.audit"));
    let store = StoreUrl::Memory.open().unwrap();
    let begun = Instant::now();
    let start = |name: &'static str| {
        let (store, path) = (store.clone(), path(name));
        async move {
            Replica::build_on(settings(name, 3, path), store)
                .await
                .unwrap()
                .spawn()
                .unwrap()
        }
    };
    let r0 = start("r0").await;
    until_covered(&[&r0]).await;
    let alone = begun.elapsed();
    let (r1, r2) = (start("r1").await, start("r2").await);
    until_covered(&[&r0, &r1, &r2]).await;
    eprintln!(
        "{CLUSTERS} clusters: one replica owned all after {alone:?}, three after {:?}",
        begun.elapsed()
    );
    // Leaving one by one: the others take the clusters over each time.
    let mut rest = vec![r0, r1, r2];
    while !rest.is_empty() {
        let leaving = rest.remove(0);
        let stopping = Instant::now();
        let released = leaving.shutdown().await.unwrap();
        eprintln!(
            "shut down in {:?} (released: {released})",
            stopping.elapsed()
        );
        if !rest.is_empty() {
            until_covered(&rest.iter().collect::<Vec<_>>()).await;
        }
    }
    let acquires: usize = ["r0", "r1", "r2"].iter().map(|n| replay(&path(n))).sum();
    assert!(acquires >= 2 * CLUSTERS, "{acquires}: the clusters moved");
}

/// An event is dated when it happened, not when the audit loop reads it: an acquire that
/// waited in the channel behind a busy loop must not be dated after the lapse that ended
/// it (a replay refuses a release before its acquire).
#[tokio::test(start_paused = true)]
async fn events_are_dated_when_they_happened_not_when_read() {
    use fleetshard_coord::ownership::{Ownership, OwnershipChange};

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let file = crate::audit::open(Some(&path)).unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let acquired = Instant::now();
    let change = |change, lapsed_at: Option<Instant>, at| OwnershipChange {
        identity: "r1".into(),
        change,
        shard: Some(0),
        generation: 1,
        lapsed_at,
        at,
    };
    tx.send(change(Ownership::Started("c1".into()), None, acquired))
        .unwrap();
    tokio::time::advance(Duration::from_secs(2)).await;
    let lapsed = Instant::now();
    tokio::time::advance(Duration::from_secs(3)).await;
    // Read only now, 5 s after the acquire and 3 s after the lapse.
    tx.send(change(
        Ownership::Stopped("c1".into()),
        Some(lapsed),
        lapsed,
    ))
    .unwrap();
    drop(tx);
    crate::audit::audit_loop(rx, file, "r1".into())
        .await
        .unwrap();
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ts = |i: usize| lines[i]["ts_ms"].as_u64().unwrap();
    assert_eq!(lines[0]["event"], "acquire");
    assert_eq!(lines[1]["reason"], "lapsed");
    let gap = ts(1)
        .checked_sub(ts(0))
        .expect("the acquire is dated before the lapse");
    // 2 s apart in (paused) time, plus the real time between the two lines' writing, which
    // a loaded machine may stretch: no upper bound tighter than that is honest.
    assert!(
        (1_999..3_000).contains(&gap),
        "the lapse 2 s after: {gap} ms"
    );
}
