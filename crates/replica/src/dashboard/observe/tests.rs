//! The observer's steps: leases judged by versions, and the timeline.

use fleetshard_coord::fenced::{
    AssignmentDoc, DistributorRecord, ShardRecord, assignment_key, distributor_key, encode,
    shard_key,
};
use fleetshard_coord::store::Entry;

use super::*;

const ROOT: &str = "fs/";
const LEASE: Duration = Duration::from_secs(4);
/// A renew period of 1.25 s, reads every 500 ms, and a margin.
const AT_RISK: Duration = Duration::from_millis(1850);

fn shard(n: u32, holder: &str, version: u64) -> Entry {
    let r = ShardRecord {
        holder: holder.into(),
        incarnation: 1,
        beat: version,
        acked: 2,
        released: false,
        zone: Some("z".into()),
        capacity: Some(2),
    };
    Entry {
        key: shard_key(ROOT, n),
        value: encode(&r),
        version,
    }
}

fn assignment(generation: u64, clusters: &[(&str, u32)]) -> Entry {
    let d = AssignmentDoc {
        generation,
        shards: 2,
        clusters: clusters.iter().map(|(c, s)| ((*c).into(), *s)).collect(),
        homes: BTreeMap::new(),
    };
    Entry {
        key: assignment_key(ROOT),
        value: encode(&d),
        version: generation,
    }
}

fn listing(entries: Vec<Entry>) -> Listing {
    Listing {
        entries,
        revision: 1,
    }
}

fn clusters() -> Clusters {
    ["a", "b"]
        .iter()
        .map(|id| {
            (
                (*id).to_owned(),
                ClusterInfo {
                    name: format!("cluster-{id}"),
                    server: format!("https://{id}"),
                    zone: None,
                    apps: vec![format!("argocd/app-{id}")],
                },
            )
        })
        .collect()
}

#[test]
fn a_holder_that_stops_renewing_shows_expired_then_a_failover_then_owned() {
    let t0 = Instant::now();
    let mut o = Observer::new(LEASE, AT_RISK, t0);
    let statuses: AppStatuses = [(
        "argocd/app-a".to_owned(),
        AppStatus {
            sync: "Synced".into(),
            health: "Healthy".into(),
            condition: None,
        },
    )]
    .into_iter()
    .collect();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    // r0 holds shard 0 (cluster a), r1 shard 1 (cluster b); both renew.
    let mut v1 = 1;
    for ms in (0..3000).step_by(500) {
        v1 += 1;
        let l = listing(vec![
            assignment(2, &[("a", 0), ("b", 1)]),
            shard(0, "r0", v1),
            shard(1, "r1", v1),
        ]);
        let s = o.step(at(ms), ROOT, &l, &clusters(), &statuses);
        assert_eq!(s.unowned, 0);
    }
    // r0 stops renewing; r1 goes on.
    let frozen = v1;
    let mut last = None;
    for ms in (3000..8000).step_by(500) {
        v1 += 1;
        let l = listing(vec![
            assignment(2, &[("a", 0), ("b", 1)]),
            shard(0, "r0", frozen),
            shard(1, "r1", v1),
        ]);
        let s = o.step(at(ms), ROOT, &l, &clusters(), &statuses);
        // First seen frozen at 2.5 s: by 4.5 s (2 s > 1.85 s) it missed a renewal.
        if ms == 4500 {
            assert_eq!(s.shards[0].lease, Some(Lease::NotRenewed));
            assert_eq!(s.clusters[0].state, "not_renewed", "{:?}", s.clusters);
            assert_eq!(s.clusters[0].owner, None);
            assert_eq!(s.unowned, 1);
        }
        last = Some(s);
    }
    let s = last.unwrap();
    assert_eq!(s.unowned, 1, "{:?}", s.clusters);
    assert_eq!(s.clusters[0].name, "cluster-a", "unowned first");
    assert_eq!(s.clusters[0].state, "unowned");
    assert_eq!(s.shards[0].lease, Some(Lease::Expired));
    assert!(
        s.timeline
            .iter()
            .any(|e| e.kind == "expired" && e.text.contains("r0"))
    );
    // The distributor moves a to shard 1.
    let l = listing(vec![
        assignment(3, &[("a", 1), ("b", 1)]),
        shard(0, "r0", frozen),
        {
            let mut e = shard(1, "r1", v1 + 1);
            e.value = encode(&ShardRecord {
                holder: "r1".into(),
                incarnation: 1,
                beat: 0,
                acked: 3,
                released: false,
                zone: None,
                capacity: None,
            });
            e
        },
    ]);
    let s = o.step(at(8000), ROOT, &l, &clusters(), &statuses);
    assert_eq!(s.unowned, 0);
    assert!(s.clusters.iter().all(|c| c.owner.as_deref() == Some("r1")));
    let kinds: Vec<&str> = s.timeline.iter().map(|e| e.kind).collect();
    let failover = kinds
        .iter()
        .position(|k| *k == "failover")
        .expect("a failover");
    let owned = kinds
        .iter()
        .rposition(|k| *k == "owned")
        .expect("owned again");
    assert!(owned > failover, "{kinds:?}");
    assert!(kinds.contains(&"not_renewed"), "{kinds:?}");
    // The picture: shard 0 held by r0, at risk, expired, then (still r0's record) with
    // no clusters; a shaded stretch of one unowned cluster, then none.
    let lane0: Vec<(&str, usize)> = s.picture.lanes[0]
        .segments
        .iter()
        .map(|g| (g.state, g.clusters))
        .collect();
    assert_eq!(
        lane0,
        [
            ("unknown", 1),
            ("live", 1),
            ("not_renewed", 1),
            ("expired", 1),
            ("expired", 0)
        ]
    );
    let unowned: Vec<usize> = s.picture.unowned.iter().map(|g| g.clusters).collect();
    assert_eq!(unowned, [0, 1, 0]);
    assert_eq!(s.shards[1].clusters, 2);
    assert_eq!(s.shards[1].load, 4);
    assert_eq!((s.apps.total, s.apps.good), (2, 1));
    assert_eq!(s.app_problems.len(), 1);
    assert_eq!(s.app_problems[0].sync, "-");
}

#[test]
fn a_distributor_bound_to_its_shard_is_shown_while_that_shard_is_renewed() {
    let t0 = Instant::now();
    let mut o = Observer::new(LEASE, AT_RISK, t0);
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    // r0's role record never changes: its shard 0's renewals carry it.
    let role = Entry {
        key: distributor_key(ROOT),
        value: encode(&DistributorRecord {
            holder: "r0".into(),
            incarnation: 1,
            beat: 1,
            released: false,
            shard: Some(0),
        }),
        version: 1,
    };
    let mut v = 1;
    let mut step = |ms: u64, renewed: bool| {
        v += u64::from(renewed);
        let l = listing(vec![role.clone(), shard(0, "r0", v)]);
        o.step(at(ms), ROOT, &l, &clusters(), &AppStatuses::new())
    };
    for ms in (0..10_000).step_by(500) {
        let s = step(ms, true);
        assert_eq!(s.distributor.as_deref(), Some("r0"), "at {ms} ms");
    }
    // r0 stops renewing its shard: the role goes with its lease.
    let mut last = None;
    for ms in (10_000..15_000).step_by(500) {
        last = Some(step(ms, false));
    }
    assert_eq!(last.unwrap().distributor, None);
}

#[test]
fn measured_costs_show_on_each_cluster_and_sum_on_each_shard() {
    let t0 = Instant::now();
    let mut o = Observer::new(LEASE, AT_RISK, t0);
    let l = listing(vec![
        assignment(2, &[("a", 0), ("b", 1)]),
        shard(0, "r0", 1),
        shard(1, "r1", 1),
    ]);
    let mut s = o.step(t0, ROOT, &l, &clusters(), &AppStatuses::new());
    let costs: BTreeMap<String, f64> = [("a".to_owned(), 40.5)].into_iter().collect();
    add_costs(&mut s, &costs);
    let of = |id: &str| s.clusters.iter().find(|c| c.id == id).unwrap().cost;
    assert_eq!((of("a"), of("b")), (Some(40.5), None));
    let shard_cost: Vec<Option<f64>> = s.shards.iter().map(|v| v.cost).collect();
    assert_eq!(shard_cost, [Some(40.5), None], "b is not measured yet");
    let json = serde_json::to_value(&s.clusters[0]).unwrap();
    assert!(json.get("cost").is_some(), "{json}");
}
