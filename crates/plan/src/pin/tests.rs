use fleetshard_core::argo::{ArgoAlgorithm, in_cluster_entry};
use fleetshard_core::model::Destination;
use fleetshard_core::{App, Cluster, ShardSpec};

use super::*;

fn entry(i: usize, current: CurrentShard) -> PinEntry {
    let mut cluster = Cluster::new(format!("uid-{i}"), format!("https://c{i}.example"));
    cluster.name = format!("c{i}");
    PinEntry {
        cluster,
        secret: Some(format!("argocd/cluster-c{i}")),
        current,
        manual: false,
    }
}

/// `i` apps on cluster `i` (mod 7), so loads differ.
fn apps(clusters: usize) -> Vec<App> {
    (0..clusters)
        .flat_map(|c| {
            (0..c % 7).map(move |a| App {
                namespace: "argocd".to_owned(),
                name: format!("app-{c}-{a}"),
                destination: Destination {
                    server: Some(format!("https://c{c}.example")),
                    ..Destination::default()
                },
                ..App::default()
            })
        })
        .collect()
}

fn options(replicas: u32) -> PinOptions {
    PinOptions {
        replicas,
        shards: vec![ShardSpec::default(); replicas as usize],
        config: PlacementConfig::default(),
        argo: ArgoAlgorithm::Legacy,
        local_zones: BTreeSet::new(),
    }
}

/// The entries with the plan's writes applied.
fn written(entries: &[PinEntry], plan: &PinPlan) -> Vec<PinEntry> {
    entries
        .iter()
        .zip(&plan.rows)
        .map(|(e, r)| match r.action {
            PinAction::Write(s) => PinEntry {
                current: CurrentShard::Shard(i64::from(s)),
                ..e.clone()
            },
            _ => e.clone(),
        })
        .collect()
}

fn assert_within_bound(plan: &PinPlan) {
    for s in &plan.shards {
        assert!(
            (s.load_after as f64) <= s.target * (1.0 + plan.tolerance) + 1e-9,
            "shard {} carries {} over its bound (target {})",
            s.shard,
            s.load_after,
            s.target
        );
    }
}

#[test]
fn unpinned_secrets_get_balanced_pins_and_a_second_plan_writes_nothing() {
    let entries: Vec<_> = (0..30).map(|i| entry(i, CurrentShard::Unset)).collect();
    let apps = apps(30);
    let plan = plan_pins(&entries, &apps, &options(3));
    assert_eq!(plan.writes().count(), 30);
    assert_within_bound(&plan);
    let total: u64 = plan.shards.iter().map(|s| s.load_after).sum();
    assert_eq!(
        total,
        plan.shards.iter().map(|s| s.load_before).sum::<u64>()
    );
    // Every row runs where its pin says.
    for r in &plan.rows {
        if let PinAction::Write(s) = r.action {
            assert_eq!(r.after, i64::from(s));
        }
    }
    let again = plan_pins(&written(&entries, &plan), &apps, &options(3));
    assert_eq!(again.writes().count(), 0, "{:?}", again.rows);
    assert!(again.rows.iter().all(|r| r.action == PinAction::Keep));
}

#[test]
fn new_clusters_move_only_themselves_and_a_few() {
    let entries: Vec<_> = (0..30).map(|i| entry(i, CurrentShard::Unset)).collect();
    let plan = plan_pins(&entries, &apps(33), &options(3));
    let mut grown = written(&entries, &plan);
    grown.extend((30..33).map(|i| entry(i, CurrentShard::Unset)));
    let plan = plan_pins(&grown, &apps(33), &options(3));
    let moved_old = plan
        .writes()
        .filter(|(s, _)| {
            let i: usize = s.trim_start_matches("argocd/cluster-c").parse().unwrap();
            i < 30
        })
        .count();
    assert_eq!(
        plan.writes().count() - moved_old,
        3,
        "every new cluster is pinned"
    );
    assert!(
        moved_old <= 3,
        "{moved_old} old clusters moved for 3 new ones"
    );
    assert_within_bound(&plan);
}

#[test]
fn manual_pins_are_left_alone_and_counted() {
    let mut entries: Vec<_> = (0..12).map(|i| entry(i, CurrentShard::Unset)).collect();
    for e in entries.iter_mut().take(3) {
        e.manual = true;
        e.current = CurrentShard::Shard(0);
    }
    let plan = plan_pins(&entries, &[], &options(3));
    assert!(plan.rows[..3].iter().all(|r| r.action == PinAction::Manual));
    assert!(plan.writes().all(|(s, _)| !s.ends_with("-c0")));
    // 12 clusters of equal load: 4 per shard, the 3 manual ones included on shard 0.
    let counts: Vec<usize> = plan.shards.iter().map(|s| s.clusters_after).collect();
    assert_eq!(counts, vec![4, 4, 4]);
    assert_eq!(plan.writes().filter(|&(_, s)| s == 0).count(), 1);
}

#[test]
fn bad_shards_are_reported_by_name_and_reassigned() {
    let mut entries: Vec<_> = (0..6).map(|i| entry(i, CurrentShard::Shard(1))).collect();
    entries[0].current = CurrentShard::parse(Some("two"));
    entries[1].current = CurrentShard::parse(Some("7"));
    entries[2].current = CurrentShard::parse(Some("-1"));
    let plan = plan_pins(&entries, &[], &options(3));
    for (i, what) in [
        (0, "\"two\" is not an integer"),
        (1, "7 is outside 0..3"),
        (2, "-1 is outside 0..3"),
    ] {
        let secret = format!("Secret argocd/cluster-c{i}: data.shard: ");
        assert!(
            plan.notes
                .iter()
                .any(|n| n.starts_with(&secret) && n.contains(what)),
            "{:?}",
            plan.notes
        );
        assert!(
            matches!(plan.rows[i].action, PinAction::Write(_)),
            "{:?}",
            plan.rows[i]
        );
    }
    // Argo CD runs shard 7 on shard 0 and -1 on none, today.
    assert_eq!((plan.rows[1].before, plan.rows[2].before), (0, -1));
    assert_eq!(
        plan.shards
            .iter()
            .map(|s| s.clusters_after)
            .collect::<Vec<_>>(),
        vec![2, 2, 2]
    );
}

#[test]
fn the_built_in_in_cluster_entry_is_counted_where_argo_runs_it_and_never_written() {
    let mut entries: Vec<_> = (0..5).map(|i| entry(i, CurrentShard::Unset)).collect();
    entries.push(PinEntry {
        cluster: in_cluster_entry(),
        secret: None,
        current: CurrentShard::Unset,
        manual: false,
    });
    let plan = plan_pins(&entries, &[], &options(3));
    let row = plan.rows.last().unwrap();
    assert_eq!(row.action, PinAction::BuiltIn);
    // Legacy: the id "" runs on shard 0.
    assert_eq!((row.before, row.after), (0, 0));
    assert_eq!(plan.writes().count(), 5);
    assert_eq!(
        plan.shards
            .iter()
            .map(|s| s.clusters_after)
            .collect::<Vec<_>>(),
        vec![2, 2, 2]
    );
    assert!(
        plan.notes.iter().any(|n| n.contains("cannot be pinned")),
        "{:?}",
        plan.notes
    );
    let text = render_pin_text(&plan, true);
    assert!(text.contains("dry run: nothing written"), "{text}");
    assert!(
        text.contains("Argo CD's built-in entry, no Secret"),
        "{text}"
    );
}

#[test]
fn skip_reconcile_and_manual_negative_pins_are_left_alone_and_not_counted() {
    let mut entries: Vec<_> = (0..4).map(|i| entry(i, CurrentShard::Unset)).collect();
    entries[0].cluster.skip_reconcile = true;
    entries[1].manual = true;
    entries[1].current = CurrentShard::Shard(-1);
    let plan = plan_pins(&entries, &[], &options(2));
    assert!(matches!(plan.rows[0].action, PinAction::Untouched(_)));
    assert!(matches!(plan.rows[1].action, PinAction::Untouched(_)));
    assert_eq!(plan.writes().count(), 2);
    assert_eq!(
        plan.shards.iter().map(|s| s.clusters_after).sum::<usize>(),
        2
    );
}
