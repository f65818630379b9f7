//! Slices of a split cluster (`slicing.rs`): the distributor commits a costly cluster as
//! the slices of one count, spread over shards; re-splitting or joining it is not a drop;
//! and a slice starts only once every unit of its cluster that left a shard was let go —
//! by another holder (its acknowledgement) or by this replica (its own stop ended).

use fleetshard_core::App;

use super::*;

const SHARDS: u32 = 3;

/// Replica `a` distributing over three shards (held by `a`, `r1`, `r2`), splitting
/// clusters; `hub` has `hub_apps` apps and `c1`..`c3` 100 each, loads = app counts.
fn split_fleet(hub_apps: usize, guard: DropGuard) -> Bench {
    let mut b = Bench::new("a", SHARDS, 0);
    b.r = Replica::new(ReplicaConfig {
        split_clusters: true,
        ..config("a", SHARDS)
    })
    .with_drop_guard(guard);
    b.clusters = ["hub", "c1", "c2", "c3"]
        .iter()
        .map(|id| Cluster::new(*id, format!("https://{id}")))
        .collect();
    set_hub(&mut b, hub_apps);
    for n in 1..SHARDS {
        b.put(&shard_key(ROOT, n), shard_record(&format!("r{n}"), 0));
    }
    b
}

fn set_hub(b: &mut Bench, hub_apps: usize) {
    let mut apps = Vec::new();
    for (id, n) in [("hub", hub_apps), ("c1", 100), ("c2", 100), ("c3", 100)] {
        for i in 0..n {
            apps.push(App::to_server(
                "argocd",
                &format!("{id}-{i}"),
                &format!("https://{id}"),
            ));
        }
    }
    b.apps = apps;
    b.loads = vec![hub_apps as u64, 100, 100, 100];
    b.fleet_revision += 1;
}

fn units_of<'a>(doc: &'a AssignmentDoc, cluster: &str) -> Vec<(&'a str, u32)> {
    doc.clusters
        .iter()
        .filter(|(id, _)| fleetshard_core::placement::slices::UnitId::parse(id).cluster == cluster)
        .map(|(id, &s)| (id.as_str(), s))
        .collect()
}

/// A hub with 600 of 900 apps is cut into slices of one count on distinct shards, every
/// shard within the bound; the drop guard (at 0 %) sees no drop; when the hub shrinks it
/// is joined again, and that is no drop either.
#[test]
fn a_costly_cluster_is_committed_as_slices_and_joined_again_without_a_drop() {
    let guard = DropGuard {
        max_drop_percent: 0,
        ..DropGuard::default()
    };
    let mut b = split_fleet(600, guard);
    b.settle(ms(0));
    let doc = b.doc();
    let hub = units_of(&doc, "hub");
    assert!(hub.len() >= 2, "{hub:?}");
    let k = hub.len();
    for (n, (id, _)) in hub.iter().enumerate() {
        assert_eq!(*id, format!("hub#slice-{n}-of-{k}"));
    }
    let mut shards: Vec<u32> = hub.iter().map(|&(_, s)| s).collect();
    shards.dedup();
    assert_eq!(shards.len(), k, "slices apart: {hub:?}");
    let mut load = [0u64; SHARDS as usize];
    let parts =
        fleetshard_core::placement::slices::apps_per_slice(&b.clusters[..1], &b.apps, &[k as u32]);
    for (n, &(_, s)) in hub.iter().enumerate() {
        load[s as usize] += parts[0][n];
    }
    for c in ["c1", "c2", "c3"] {
        load[doc.clusters[c] as usize] += 100;
    }
    assert!(load.iter().all(|&l| l as f64 <= 300.0 * 1.1), "{load:?}");
    assert_eq!(b.r.held_back(), None);
    // The hub shrinks to 100 apps: whole again, committed although the guard allows 0 %.
    set_hub(&mut b, 100);
    b.settle(ms(100));
    let doc = b.doc();
    assert_eq!(units_of(&doc, "hub").len(), 1);
    assert!(doc.clusters.contains_key("hub"));
    assert_eq!(b.r.held_back(), None);
}

/// Splitting off makes one unit per cluster, as before.
#[test]
fn without_splitting_every_cluster_is_one_unit() {
    let mut b = split_fleet(600, DropGuard::default());
    b.r = Replica::new(config("a", SHARDS));
    b.settle(ms(0));
    assert_eq!(b.doc().clusters.len(), 4);
    assert!(b.doc().clusters.contains_key("hub"));
}

/// `x` (shard 0) owned the hub whole; the next generation splits it, slice 1 to `a`'s
/// shard 1: it starts only once `x` acknowledged that generation (it had stopped the
/// hub), although no unit of that id ever left a shard.
#[test]
fn a_new_slice_waits_for_the_holder_of_its_cluster_whole() {
    let mut b = Bench::new("a", SHARDS, 0);
    b.put(&shard_key(ROOT, 0), shard_record("x", 1));
    b.put(&shard_key(ROOT, 2), shard_record("y", 1));
    someone_distributes(&mut b, 0);
    commit(&mut b, 1, &[("hub", 0), ("c1", 1), ("c2", 2)]);
    b.settle(ms(0));
    assert_eq!(b.r.acting(ms(0)).collect::<Vec<_>>(), ["c1"]);
    commit(
        &mut b,
        2,
        &[
            ("hub#slice-0-of-2", 0),
            ("hub#slice-1-of-2", 1),
            ("c1", 1),
            ("c2", 2),
        ],
    );
    b.put(&shard_key(ROOT, 2), shard_record("y", 2));
    let a = b.step(ms(100));
    assert!(started(&a).is_empty(), "x may still act on the hub: {a:?}");
    b.run(a);
    b.put(&shard_key(ROOT, 0), shard_record("x", 2));
    let a = b.step(ms(200));
    assert_eq!(started(&a), ["hub#slice-1-of-2"]);
}

/// `a` owned the hub whole; the next generation gives it slice 1 of 2: the slice starts
/// only once `a`'s own stop of the whole hub ended.
#[test]
fn a_new_slice_waits_for_this_replicas_own_stop_of_its_cluster() {
    let mut b = Bench::new("a", SHARDS, 0);
    b.put(&shard_key(ROOT, 0), shard_record("x", 1));
    b.put(&shard_key(ROOT, 2), shard_record("y", 1));
    someone_distributes(&mut b, 0);
    commit(&mut b, 1, &[("hub", 1), ("c0", 0), ("c2", 2)]);
    b.settle(ms(0));
    assert_eq!(b.r.acting(ms(0)).collect::<Vec<_>>(), ["hub"]);
    commit(
        &mut b,
        2,
        &[
            ("hub#slice-0-of-2", 0),
            ("hub#slice-1-of-2", 1),
            ("c0", 0),
            ("c2", 2),
        ],
    );
    b.put(&shard_key(ROOT, 0), shard_record("x", 2));
    b.put(&shard_key(ROOT, 2), shard_record("y", 2));
    let a = b.step(ms(100));
    assert!(
        a.iter().any(|a| matches!(a, Action::Stop(c) if c == "hub")),
        "{a:?}"
    );
    assert!(started(&a).is_empty(), "{a:?}");
    let a = b.step(ms(150));
    assert!(
        started(&a).is_empty(),
        "the hub's stop has not ended: {a:?}"
    );
    b.r.on_stopped("hub");
    let a = b.step(ms(200));
    assert_eq!(started(&a), ["hub#slice-1-of-2"]);
}
