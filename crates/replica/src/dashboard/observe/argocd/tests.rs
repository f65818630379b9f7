//! The argocd observer's steps under injected time: claims, a heartbeat going stale, a
//! takeover by another controller, and clusters nobody acts on.

use fleetshard_coord::argocd::{MAPPING_KEY, encode};

use super::super::{AppStatus, ClusterInfo};
use super::*;

/// 3H with H = 1 s.
const STALE: Duration = Duration::from_secs(3);
/// H, reads every second, and a margin.
const AT_RISK: Duration = Duration::from_millis(2100);
const REPLICAS: u32 = 2;

fn fleet() -> Vec<Cluster> {
    (0..6)
        .map(|i| Cluster::new(format!("c{i}"), format!("https://c{i}.example")))
        .collect()
}

fn clusters(fleet: &[Cluster]) -> Clusters {
    fleet
        .iter()
        .map(|c| {
            (
                c.id.clone(),
                ClusterInfo {
                    name: format!("name-{}", c.id),
                    server: c.server.clone(),
                    zone: None,
                    apps: vec![format!("argocd/app-{}", c.id)],
                },
            )
        })
        .collect()
}

/// Each fleet cluster's shard as Argo CD's controller computes it.
fn expected(fleet: &[Cluster]) -> BTreeMap<String, u32> {
    let a = ArgoControllerAssignment::compute(ArgoAlgorithm::Legacy, REPLICAS, fleet, &[]);
    fleet
        .iter()
        .zip(a.shards())
        .map(|(c, s)| (c.id.clone(), u32::try_from(*s).unwrap()))
        .collect()
}

fn held(n: i64, who: &str, beat: i64) -> ShardEntry {
    ShardEntry::held(n, who, WallTime::from_unix_seconds(1_800_000_000 + beat))
}

fn map(entries: &[ShardEntry], version: u64) -> StoreEntry {
    StoreEntry {
        key: MAPPING_KEY.into(),
        value: encode(entries).into_bytes(),
        version,
    }
}

struct Run {
    o: ArgoObserver,
    t0: Instant,
    clusters: Clusters,
    version: u64,
}

impl Run {
    fn new() -> Run {
        let t0 = Instant::now();
        let f = fleet();
        Run {
            o: ArgoObserver::new(STALE, AT_RISK, ArgoAlgorithm::Legacy, f.clone(), &[], t0),
            t0,
            clusters: clusters(&f),
            version: 0,
        }
    }

    fn step(&mut self, ms: u64, entries: &[ShardEntry]) -> Snapshot {
        self.version += 1;
        let m = map(entries, self.version);
        let at = self.t0 + Duration::from_millis(ms);
        let good = AppStatus {
            sync: "Synced".into(),
            health: "Healthy".into(),
            condition: None,
        };
        let statuses: AppStatuses = [("argocd/app-c0".to_owned(), good)].into();
        self.o.step(
            at,
            MAPPING_KEY,
            Some(&m),
            REPLICAS,
            &self.clusters,
            &statuses,
        )
    }
}

fn kinds(s: &Snapshot) -> Vec<&'static str> {
    s.timeline.iter().map(|e| e.kind).collect()
}

/// Two controllers claim and heartbeat: every cluster is owned by its shard's controller
/// (Argo CD's assignment), leases go from unknown to live.
#[test]
fn claimed_entries_own_their_shards_clusters() {
    let mut r = Run::new();
    let s = r.step(0, &[held(0, "r0", 0), held(1, "r1", 0)]);
    assert_eq!(s.shards[0].lease, Some(Lease::Unknown));
    assert_eq!(kinds(&s), ["claim", "claim"], "{:?}", s.timeline);
    let s = r.step(1000, &[held(0, "r0", 1), held(1, "r1", 1)]);
    assert_eq!(s.unowned, 0, "{:?}", s.clusters);
    assert_eq!(s.shard_count, REPLICAS);
    assert_eq!(
        s.shards.iter().map(|v| v.lease).collect::<Vec<_>>(),
        [Some(Lease::Live), Some(Lease::Live)]
    );
    let want = expected(&fleet());
    for c in &s.clusters {
        let shard = want[&c.id];
        assert_eq!(c.shard, Some(shard), "{c:?}");
        assert_eq!(c.owner.as_deref(), Some(["r0", "r1"][shard as usize]));
        assert_eq!(c.state, "acting");
    }
    for v in &s.shards {
        let n = want.values().filter(|s| **s == v.shard).count();
        assert_eq!((v.clusters, v.apps, v.load), (n, n, 2 * n));
    }
    assert_eq!((s.apps.total, s.apps.good), (6, 1));
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    assert_eq!(s.revision, 2);
}

/// r0 stops heartbeating: after 3H unchanged its entry is expired and its clusters are
/// unowned (listed first); r1 takes the entry: a failover, then every cluster owned again.
#[test]
fn a_stale_entry_taken_by_another_controller_is_a_failover() {
    let mut r = Run::new();
    let want = expected(&fleet());
    let on0 = want.values().filter(|s| **s == 0).count();
    assert!(on0 > 0 && on0 < 6, "the fleet spreads over both shards");
    for i in 0..4 {
        r.step(
            i * 1000,
            &[held(0, "r0", i as i64), held(1, "r1", i as i64)],
        );
    }
    // r0's last heartbeat was at 3 s; r1 goes on. At 5.5 s r0 has missed two heartbeats
    // (H = 1 s): its clusters are at risk, acted on by nobody, though not yet 3H.
    let s = r.step(5500, &[held(0, "r0", 3), held(1, "r1", 5)]);
    assert_eq!(s.shards[0].lease, Some(Lease::NotRenewed));
    assert_eq!(s.unowned, on0, "{:?}", s.clusters);
    assert!(s.clusters[..on0].iter().all(|c| c.state == "not_renewed"));
    assert!(
        s.timeline
            .iter()
            .any(|e| e.kind == "not_renewed" && e.text.contains("r0"))
    );
    let s = r.step(6000, &[held(0, "r0", 3), held(1, "r1", 6)]);
    assert_eq!(s.shards[0].lease, Some(Lease::Expired));
    assert_eq!(s.shards[0].holder.as_deref(), Some("r0"));
    assert!((s.shards[0].lease_age_secs - 3.0).abs() < 1e-9);
    assert_eq!(s.unowned, on0, "{:?}", s.clusters);
    assert!(s.clusters[..on0].iter().all(|c| c.state == "unowned"));
    assert!(s.clusters[on0..].iter().all(|c| c.state == "acting"));
    let expired = s.timeline.iter().find(|e| e.kind == "expired").unwrap();
    assert!(expired.text.contains("r0") && expired.text.contains("shard 0"));
    // A spare, r2, takes the stale entry.
    let s = r.step(7000, &[held(0, "r2", 7), held(1, "r1", 7)]);
    assert_eq!(s.unowned, 0);
    assert_eq!(s.shards[0].lease, Some(Lease::Live));
    assert!(
        s.clusters
            .iter()
            .all(|c| c.owner.as_deref() == Some(["r2", "r1"][want[&c.id] as usize]))
    );
    let k = kinds(&s);
    let failover = k.iter().position(|k| *k == "failover").expect("a failover");
    let text = &s.timeline[failover].text;
    assert!(text.contains("r2") && text.contains("r0"), "{text}");
    assert!(k.iter().rposition(|k| *k == "owned").unwrap() > failover);
}

/// The taker acts on its own clock: it may take the entry before this observer saw it
/// unchanged for 3H. Unchanged for half of 3H or more when taken: still a failover.
#[test]
fn a_takeover_before_the_observers_own_expiry_is_a_failover() {
    let mut r = Run::new();
    r.step(0, &[held(0, "r0", 0), held(1, "r1", 0)]);
    r.step(1000, &[held(0, "r0", 1), held(1, "r1", 1)]);
    let s = r.step(3000, &[held(0, "r0", 1), held(1, "r1", 3)]);
    assert_eq!(s.shards[0].lease, Some(Lease::Live), "2 s < 3H");
    let s = r.step(3500, &[held(0, "r2", 3), held(1, "r1", 3)]);
    assert!(kinds(&s).contains(&"failover"), "{:?}", s.timeline);
}

/// A graceful release frees the entry (keeping the heartbeat); another controller that
/// takes it then is a handover, not a failover.
#[test]
fn a_released_entry_taken_again_is_a_handover() {
    let mut r = Run::new();
    r.step(0, &[held(0, "r0", 0), held(1, "r1", 0)]);
    r.step(1000, &[held(0, "r0", 1), held(1, "r1", 1)]);
    let mut freed = ShardEntry::free(0);
    freed.heartbeat_time = held(0, "r0", 1).heartbeat_time;
    let s = r.step(1500, &[freed, held(1, "r1", 1)]);
    assert_eq!(s.shards[0].holder, None);
    assert_eq!(s.shards[0].lease, Some(Lease::Released));
    assert!(s.unowned > 0);
    assert!(
        s.timeline
            .iter()
            .any(|e| e.kind == "handover" && e.text.contains("r0 released shard 0"))
    );
    let s = r.step(2000, &[held(0, "r2", 2), held(1, "r1", 2)]);
    assert_eq!(s.unowned, 0);
    assert!(!kinds(&s).contains(&"failover"), "{:?}", s.timeline);
    let last = s
        .timeline
        .iter()
        .rev()
        .find(|e| e.kind == "handover")
        .unwrap();
    assert!(last.text.contains("r2") && last.text.contains("released by r0"));
}

/// Nobody acts on: a free entry's clusters, clusters the map's length places elsewhere
/// than the count, a cluster added after the start, and every cluster when the map is
/// absent or cannot be read.
#[test]
fn unowned_clusters_are_shown_and_explained() {
    let mut r = Run::new();
    let want = expected(&fleet());
    let on1 = want.values().filter(|s| **s == 1).count();
    let s = r.step(0, &[held(0, "r0", 0), ShardEntry::free(1)]);
    assert_eq!(s.unowned, on1);
    assert_eq!(s.shards[1].lease, None, "never held: vacant");
    assert!(s.clusters[..on1].iter().all(|c| c.shard == Some(1)));

    // A map of 3 entries for 2 replicas: only clusters both counts give one shard.
    let s = r.step(500, &[held(0, "r0", 0), held(1, "r1", 0), held(2, "r2", 0)]);
    let three = ArgoControllerAssignment::compute(ArgoAlgorithm::Legacy, 3, &fleet(), &[]);
    let agree = fleet()
        .iter()
        .zip(three.shards())
        .filter(|(c, s)| i64::from(want[&c.id]) == **s)
        .count();
    assert_eq!(s.unowned, 6 - agree);
    assert_eq!(s.shards.len(), 3);
    assert!(s.warnings.iter().any(|w| w.contains("3 entries for 2")));

    // A cluster the inventory gained since the start has no shard.
    r.clusters.insert(
        "new".into(),
        ClusterInfo {
            name: "a-new-one".into(),
            ..ClusterInfo::default()
        },
    );
    let s = r.step(1000, &[held(0, "r0", 1), held(1, "r1", 1)]);
    assert_eq!(s.unowned, 1);
    assert_eq!(
        (s.clusters[0].id.as_str(), s.clusters[0].shard),
        ("new", None)
    );
    assert!(s.warnings.iter().any(|w| w.contains("after a restart")));

    // Absent, then unreadable.
    let s = r.o.step(
        r.t0 + Duration::from_secs(2),
        MAPPING_KEY,
        None,
        REPLICAS,
        &r.clusters,
        &AppStatuses::new(),
    );
    assert_eq!(s.unowned, 7);
    let bad = StoreEntry {
        key: MAPPING_KEY.into(),
        value: b"{not a list".to_vec(),
        version: 9,
    };
    let s = r.o.step(
        r.t0 + Duration::from_secs(3),
        MAPPING_KEY,
        Some(&bad),
        REPLICAS,
        &r.clusters,
        &AppStatuses::new(),
    );
    assert_eq!(s.unowned, 7);
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains(MAPPING_KEY) && w.contains("cannot decode")),
        "{:?}",
        s.warnings
    );
}
