//! Every upstream vector of argo-compat §6.1–§6.4 and the derived vectors of §7 (both
//! described in `docs/glossary.md`).

use super::*;
use crate::model::{App, Cluster};

const ROOT: &str = "https://kubernetes.default.svc?";

/// Upstream's `createCluster(name, id)`.
fn cluster(id: &str) -> Cluster {
    Cluster {
        name: format!("cluster{id}"),
        ..Cluster::new(id, format!("{ROOT}{id}"))
    }
}

fn pinned(id: &str, shard: i64) -> Cluster {
    Cluster {
        shard: Some(shard),
        ..cluster(id)
    }
}

fn test_clusters() -> Vec<Cluster> {
    (1..=5).map(|i| cluster(&i.to_string())).collect()
}

/// Upstream's `createTestApps()`: destinations match no cluster.
fn test_apps() -> Vec<App> {
    [
        ("app1", "cluster1"),
        ("app2", "cluster1"),
        ("app3", "cluster2"),
        ("app4", "cluster2"),
        ("app5", "cluster3"),
    ]
    .iter()
    .map(|(n, s)| App::to_server("argocd", n, s))
    .collect()
}

fn function(alg: ArgoAlgorithm, replicas: u32, clusters: &[Cluster]) -> ArgoDistribution<'_> {
    ArgoDistribution::new(alg, replicas, clusters, &test_apps())
}

fn members(d: &ArgoDistribution<'_>, n: usize) -> Vec<ArgoShard> {
    (0..n).map(|i| d.shard(Probe::Member(i))).collect()
}

// === §6.1 legacy ===

#[test]
fn legacy_fnv_vectors() {
    assert_eq!(fnv1a32(b"1"), 0x340c_a71c);
    assert_eq!(fnv1a32(b"2"), 0x370c_abd5);
    assert_eq!(fnv1a32(b"3"), 0x360c_aa42);
    assert_eq!(fnv1a32(b"4"), 0x310c_a263);
}

#[test]
fn legacy_one_replica_and_empty_id() {
    let cs = test_clusters();
    let d = function(ArgoAlgorithm::Legacy, 1, &cs[..4]);
    assert_eq!(members(&d, 4), vec![0, 0, 0, 0]);
    let empty = Cluster::default();
    assert_eq!(d.shard(Probe::Stranger(&empty)), 0);
    let none = function(ArgoAlgorithm::Legacy, 0, &cs);
    assert_eq!(none.shard(Probe::Stranger(&empty)), -1);
    assert_eq!(none.shard(Probe::Nil), -1);
}

#[test]
fn legacy_with_fixed_shard() {
    let cs = test_clusters();
    let d = function(ArgoAlgorithm::Legacy, 5, &cs[..4]);
    assert_eq!(d.shard(Probe::Nil), 0);
    assert_eq!(members(&d, 4), vec![4, 1, 2, 2]);
    let list = [
        cs[0].clone(),
        cs[1].clone(),
        cs[1].clone(),
        cs[3].clone(),
        pinned("5", 4),
    ];
    let d = function(ArgoAlgorithm::Legacy, 5, &list);
    assert_eq!(d.shard(Probe::Member(4)), 4);
    assert_eq!(d.shard(Probe::Stranger(&pinned("4", 1))), 1);
}

#[test]
fn unknown_algorithm_falls_back_to_legacy() {
    let (alg, warning) = ArgoAlgorithm::from_setting("unknown");
    assert_eq!(alg, ArgoAlgorithm::Legacy);
    assert!(warning.is_some());
    assert_eq!(ArgoAlgorithm::from_setting("").0, ArgoAlgorithm::Legacy);
    assert!(
        ArgoAlgorithm::parse("Round-Robin").is_err(),
        "names are case-sensitive"
    );
    let cs = test_clusters();
    let d = function(alg, 2, &cs[..4]);
    assert_eq!(d.shard(Probe::Nil), 0);
    assert_eq!(members(&d, 4), vec![0, 1, 0, 1]);
}

// === §6.2 round-robin ===

#[test]
fn round_robin_zero_replicas() {
    let cs = test_clusters();
    let d = function(ArgoAlgorithm::RoundRobin, 0, &cs);
    assert_eq!(d.shard(Probe::Nil), -1);
    assert_eq!(members(&d, 5), vec![-1; 5]);
}

#[test]
fn round_robin_small_lists() {
    let cs = test_clusters();
    let d = function(ArgoAlgorithm::RoundRobin, 2, &cs[..4]);
    assert_eq!(d.shard(Probe::Nil), 0);
    assert_eq!(members(&d, 4), vec![0, 1, 0, 1]);

    let d = function(ArgoAlgorithm::RoundRobin, 4, &cs[..4]);
    assert_eq!(d.shard(Probe::Nil), 0);
    assert_eq!(members(&d, 4), vec![0, 1, 2, 3]);
    let mut with_pin = cs[..4].to_vec();
    with_pin.push(pinned("5", 1));
    let d = function(ArgoAlgorithm::RoundRobin, 4, &with_pin);
    assert_eq!(d.shard(Probe::Member(4)), 1);
    assert_eq!(d.shard(Probe::Stranger(&pinned("4", 1))), 1);

    for (replicas, expected) in [
        (1, vec![0, 0, 0, 0, 0]),
        (2, vec![0, 1, 0, 1, 0]),
        (3, vec![0, 1, 2, 0, 1]),
    ] {
        let d = function(ArgoAlgorithm::RoundRobin, replicas, &cs);
        assert_eq!(d.shard(Probe::Nil), 0);
        assert_eq!(members(&d, 5), expected, "replicas {replicas}");
    }

    let d = function(ArgoAlgorithm::RoundRobin, 2, &cs[..2]);
    assert_eq!(members(&d, 2), vec![0, 1]);

    let tens: Vec<Cluster> = [10, 20, 30, 40, 50, 60]
        .iter()
        .map(|i| cluster(&i.to_string()))
        .collect();
    let d = function(ArgoAlgorithm::RoundRobin, 3, &tens);
    assert_eq!(members(&d, 6), vec![0, 1, 2, 0, 1, 2]);
    assert_eq!(d.shard(Probe::Nil), 0);
}

#[test]
fn round_robin_ranks_bytewise_for_many_clusters() {
    let cs: Vec<Cluster> = (0..2048)
        .map(|i| Cluster {
            name: format!("cluster-{i}"),
            ..Cluster::new(i.to_string(), format!("{ROOT}{i}"))
        })
        .collect();
    let d = function(ArgoAlgorithm::RoundRobin, 2, &cs);
    let mut sorted: Vec<&Cluster> = cs.iter().collect();
    sorted.sort_by(|a, b| a.id.cmp(&b.id));
    for (rank, c) in sorted.iter().enumerate() {
        let i: usize = c.id.parse().unwrap();
        assert_eq!(d.shard(Probe::Member(i)), (rank % 2) as i64, "id {}", c.id);
    }
    // "10" sorts before "2": rank is bytewise, not numeric.
    assert_ne!(d.shard(Probe::Member(2)), d.shard(Probe::Member(3)));
}

#[test]
fn round_robin_cluster_added_and_removed() {
    let mut cs = test_clusters();
    let d = function(ArgoAlgorithm::RoundRobin, 2, &cs);
    assert_eq!(d.shard(Probe::Nil), 0);
    assert_eq!(members(&d, 5), vec![0, 1, 0, 1, 0]);
    let six = cluster("6");
    assert_eq!(d.shard(Probe::Stranger(&six)), -1);
    cs.push(six.clone());
    let d = function(ArgoAlgorithm::RoundRobin, 2, &cs);
    assert_eq!(d.shard(Probe::Member(5)), 1);
    cs.pop();
    let d = function(ArgoAlgorithm::RoundRobin, 2, &cs);
    assert_eq!(d.shard(Probe::Stranger(&six)), -1);
}

#[test]
fn round_robin_duplicate_ids_share_the_last_rank() {
    let cs = vec![
        cluster("1"),
        cluster("2"),
        Cluster::new("2", "https://other"),
        cluster("3"),
    ];
    let d = function(ArgoAlgorithm::RoundRobin, 3, &cs);
    // Sorted: 1, 2, 2, 3 → the two "2"s both get rank 2.
    assert_eq!(members(&d, 4), vec![0, 2, 2, 0]);
}

// === §6.3 consistent hashing ===

fn f_clusters(n: usize) -> Vec<Cluster> {
    (0..n)
        .map(|i| {
            let id = format!("{i:06}");
            Cluster {
                name: format!("cluster-{id}"),
                ..Cluster::new(id.clone(), format!("{ROOT}{id}"))
            }
        })
        .collect()
}

#[test]
fn consistent_hashing_add_and_remove() {
    let cs = f_clusters(133);
    let d3 = function(ArgoAlgorithm::ConsistentHashing, 3, &cs);
    assert_eq!(d3.shard(Probe::Nil), 0);
    let s3 = members(&d3, 133);
    let mut counts = [0; 3];
    for &s in &s3 {
        counts[s as usize] += 1;
    }
    for c in counts {
        assert!(
            (c as f64 - 133.0 / 3.0).abs() <= 0.1 * 133.0 / 3.0,
            "{counts:?}"
        );
    }
    let mut sorted = counts;
    sorted.sort();
    assert_eq!(sorted, [43, 45, 45]);

    let d2 = function(ArgoAlgorithm::ConsistentHashing, 2, &cs);
    for (i, (&a, b)) in s3.iter().zip(members(&d2, 133)).enumerate() {
        if a != 2 {
            assert_eq!(a, b, "cluster {i} moved although its shard survived");
        }
    }

    let copy = cs[132].clone();
    let d = function(ArgoAlgorithm::ConsistentHashing, 3, &cs[..132]);
    assert_eq!(d.shard(Probe::Stranger(&copy)), -1);
    // Membership is by identity: even a copy of a listed cluster is a stranger.
    let d = function(ArgoAlgorithm::ConsistentHashing, 3, &cs);
    assert_eq!(d.shard(Probe::Stranger(&copy)), -1);
}

#[test]
fn consistent_hashing_zero_replicas_and_fixed_shard() {
    let cs = test_clusters();
    assert_eq!(
        function(ArgoAlgorithm::ConsistentHashing, 0, &cs).shard(Probe::Nil),
        -1
    );
    let d = function(ArgoAlgorithm::ConsistentHashing, 5, &cs);
    assert_eq!(d.shard(Probe::Stranger(&pinned("1", 1))), 1);
}

#[test]
fn app_distribution_counts_raw_servers_by_app_name() {
    let mut apps = test_apps();
    let counts = argo_app_counts(&apps);
    assert_eq!(counts.len(), 3);
    assert_eq!(
        (counts["cluster1"], counts["cluster2"], counts["cluster3"]),
        (2, 2, 1)
    );
    apps[0].destination.server = Some("cluster2".into());
    apps.remove(2);
    apps.push(App::to_server("argocd", "app6", "cluster4"));
    let counts = argo_app_counts(&apps);
    assert_eq!(
        (
            counts["cluster1"],
            counts["cluster2"],
            counts["cluster3"],
            counts["cluster4"]
        ),
        (1, 2, 1, 1)
    );
    // Same name in another namespace overwrites (W4).
    apps.push(App::to_server("other", "app6", "cluster1"));
    let counts = argo_app_counts(&apps);
    assert_eq!((counts["cluster1"], counts.get("cluster4")), (2, None));
}

// === §6.4 ClusterSharding (controller level) ===

fn controller(alg: ArgoAlgorithm, replicas: u32, clusters: &[Cluster]) -> Vec<ArgoShard> {
    ArgoControllerAssignment::compute(alg, replicas, clusters, &[])
        .shards()
        .to_vec()
}

#[test]
fn controller_add_update_and_rename() {
    let a = Cluster::new("2", "https://127.0.0.1:6443");
    let b = Cluster::new("1", "https://kubernetes.default.svc");
    assert_eq!(
        controller(ArgoAlgorithm::Legacy, 2, &[a.clone(), b.clone()]),
        vec![1, 0]
    );

    let updated = Cluster::new("4", "https://kubernetes.default.svc");
    let after =
        ArgoControllerAssignment::compute(ArgoAlgorithm::Legacy, 2, &[a.clone(), updated], &[]);
    assert_eq!(after.shard_of_server("https://kubernetes.default.svc"), 1);

    let renamed = Cluster::new("1", "https://server2");
    let after = ArgoControllerAssignment::compute(ArgoAlgorithm::Legacy, 2, &[a, renamed], &[]);
    assert_eq!(after.shard_of_server("https://server2"), 0);
    // An unknown server counts as shard 0 (W22).
    assert_eq!(after.shard_of_server("https://unknown"), 0);
}

#[test]
fn controller_round_robin_redistributes_on_add() {
    let a = Cluster::new("1", "https://127.0.0.1:6443");
    let b = Cluster::new("3", "https://kubernetes.default.svc");
    assert_eq!(
        controller(ArgoAlgorithm::RoundRobin, 2, &[a.clone(), b.clone()]),
        vec![0, 1]
    );
    let c = Cluster::new("2", "https://1.1.1.1");
    assert_eq!(
        controller(ArgoAlgorithm::RoundRobin, 2, &[a, b, c]),
        vec![0, 0, 1]
    );
}

#[test]
fn controller_is_managed_and_skip_reconcile() {
    let one = Cluster::new("1", "https://kubernetes.default.svc");
    let two = Cluster::new("2", "https://127.0.0.1:6443");
    let list = [one.clone(), two.clone()];
    let a = ArgoControllerAssignment::compute(ArgoAlgorithm::Legacy, 2, &list, &[]);
    assert!(a.is_managed(&one, 0) && !a.is_managed(&two, 0));
    assert!(!a.is_managed(&one, 1) && a.is_managed(&two, 1));

    let mut c = Cluster::new("", "https://cluster1");
    let single =
        ArgoControllerAssignment::compute(ArgoAlgorithm::Legacy, 1, std::slice::from_ref(&c), &[]);
    assert!(single.is_managed(&c, 0));
    c.skip_reconcile = true;
    assert!(!single.is_managed(&c, 0));
}

#[test]
fn controller_pins_collapse_at_or_above_replicas() {
    let list = [cluster("2"), pinned("1", 1), pinned("3", 999)];
    assert_eq!(controller(ArgoAlgorithm::Legacy, 2, &list), vec![1, 1, 0]);
    assert_eq!(list[2].shard, Some(999), "input is not modified");
    // A negative pin passes every test, even with one replica or none.
    for replicas in [0, 1, 2] {
        assert_eq!(
            controller(ArgoAlgorithm::Legacy, replicas, &[pinned("1", -3)]),
            vec![-3]
        );
    }
    // replicas 0 and 1: no function, everything on 0.
    assert_eq!(
        controller(ArgoAlgorithm::RoundRobin, 0, &test_clusters()),
        vec![0; 5]
    );
    assert_eq!(
        controller(ArgoAlgorithm::ConsistentHashing, 1, &test_clusters()),
        vec![0; 5]
    );
}

#[test]
fn controller_duplicate_server_later_wins() {
    let first = pinned("1", 1);
    let second = Cluster {
        id: "9".into(),
        ..pinned("1", 0)
    };
    let a = ArgoControllerAssignment::compute(ArgoAlgorithm::Legacy, 2, &[first, second], &[]);
    assert_eq!(a.shards(), &[0, 0]);
    assert_eq!(a.superseded(), &[0]);
}

#[test]
fn has_sharding_updates_vectors() {
    let base = Cluster {
        shard: Some(1),
        ..Cluster::new("1", "https://a")
    };
    let with = |f: fn(&mut Cluster)| {
        let mut c = base.clone();
        f(&mut c);
        c
    };
    assert!(!has_sharding_updates(Some(&base), Some(&base.clone())));
    assert!(has_sharding_updates(
        Some(&base),
        Some(&with(|c| c.shard = Some(2)))
    ));
    assert!(!has_sharding_updates(None, Some(&base)));
    assert!(!has_sharding_updates(Some(&base), None));
    assert!(!has_sharding_updates(None, None));
    let unpinned = with(|c| c.shard = None);
    assert!(!has_sharding_updates(
        Some(&unpinned),
        Some(&unpinned.clone())
    ));
    assert!(has_sharding_updates(
        Some(&unpinned),
        Some(&with(|c| c.shard = Some(2)))
    ));
    assert!(has_sharding_updates(
        Some(&with(|c| c.shard = Some(2))),
        Some(&unpinned)
    ));
    assert!(has_sharding_updates(
        Some(&base),
        Some(&with(|c| c.id = "2".into()))
    ));
    assert!(has_sharding_updates(
        Some(&base),
        Some(&with(|c| c.server = "https://b".into()))
    ));
}

// === §7 derived consistent-hashing vectors with app load ===

/// Fleet F(n) with `apps(i)` apps on cluster i.
fn fleet_f(n: usize, apps: impl Fn(usize) -> usize) -> (Vec<Cluster>, Vec<App>) {
    let clusters = f_clusters(n);
    let mut list = Vec::new();
    for (i, c) in clusters.iter().enumerate() {
        for k in 0..apps(i) {
            list.push(App::to_server("argocd", &format!("app-{i}-{k}"), &c.server));
        }
    }
    (clusters, list)
}

fn digits(shards: &[ArgoShard]) -> String {
    shards.iter().map(|s| s.to_string()).collect()
}

#[test]
fn consistent_hashing_with_load_f133() {
    let (clusters, apps) = fleet_f(133, |i| (i * 7) % 11);
    let expected = [
        (
            2,
            "0011000110011010110001001111010001011000111000111101101001010110101011111111110111111010001010100110000011111000110001001111011100110",
        ),
        (
            3,
            "0200211012201210220201002121010201011000221002122101102022010220121021111111210122112210001212220112000011211000212002201212011100112",
        ),
        (
            5,
            "0402330314201243320303032121310201044400241042121303304421410423324021111113310132112433441212220132030444214004442402403243031330113",
        ),
    ];
    for (replicas, want) in expected {
        let got = ArgoControllerAssignment::compute(
            ArgoAlgorithm::ConsistentHashing,
            replicas,
            &clusters,
            &apps,
        );
        assert_eq!(digits(got.shards()), want, "r={replicas}");
    }
}

#[test]
fn explicit_shards_interact_with_ch_and_rr_e10() {
    let (mut clusters, apps) = fleet_f(10, |i| 3 * i);
    clusters[4].shard = Some(2);
    clusters[7].shard = Some(9);
    let fn_level = |replicas| {
        let d = ArgoDistribution::new(ArgoAlgorithm::ConsistentHashing, replicas, &clusters, &apps);
        digits(&members(&d, 10))
    };
    let ctl = |alg, replicas| {
        digits(ArgoControllerAssignment::compute(alg, replicas, &clusters, &apps).shards())
    };
    assert_eq!(ctl(ArgoAlgorithm::ConsistentHashing, 3), "0202220012");
    assert_eq!(fn_level(3), "0202220112");
    assert_eq!(ctl(ArgoAlgorithm::ConsistentHashing, 4), "0203201012");
    assert_eq!(fn_level(4), "0203201312");
    assert_eq!(ctl(ArgoAlgorithm::RoundRobin, 3), "0120220020");
    assert_eq!(ctl(ArgoAlgorithm::RoundRobin, 4), "0123212001");
}

#[test]
fn prepared_inputs_give_the_same_answer() {
    let (clusters, apps) = fleet_f(133, |i| (i * 7) % 11);
    let mut prepared = ArgoPrepared::new(&apps);
    for alg in ArgoAlgorithm::ALL {
        for replicas in [0, 1, 2, 5, 12] {
            let a =
                ArgoControllerAssignment::compute_prepared(alg, replicas, &clusters, &mut prepared);
            let b = ArgoControllerAssignment::compute(alg, replicas, &clusters, &apps);
            assert_eq!(a, b, "{alg:?} r={replicas}");
        }
    }
    assert_eq!(prepared.app_count(&clusters[3].server), 10);
    assert_eq!(prepared.ring(5).points_per_shard(), vec![1000; 5]);
}
