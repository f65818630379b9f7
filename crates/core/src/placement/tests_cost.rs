//! Load that matches cost: a cluster's load is a base plus its apps, so app-less clusters
//! spread over the shards instead of staying where they were.

use super::*;
use crate::model::{App, Cluster, ShardSpec};

/// 3,000 clusters, nine in ten without apps (as in the fleet of issue 10), the rest with
/// 1–40 apps; and their apps.
fn fleet() -> (Vec<Cluster>, Vec<App>) {
    let clusters: Vec<Cluster> = (0..3_000)
        .map(|i| Cluster::new(format!("id-{i:05}"), format!("https://c{i}.example")))
        .collect();
    let mut apps = Vec::new();
    for (i, c) in clusters.iter().enumerate().filter(|(i, _)| i % 10 == 0) {
        for k in 0..1 + (i * 7) % 40 {
            apps.push(App::to_server("argocd", &format!("app-{i}-{k}"), &c.server));
        }
    }
    (clusters, apps)
}

/// Clusters per shard after scaling from 1 replica to 3, sticky as `run` is (from the
/// previous assignment), with loads from `config`.
fn one_to_three(config: &PlacementConfig) -> Vec<usize> {
    let (clusters, apps) = fleet();
    let loads = config.loads(&clusters, &apps);
    let one = place(&clusters, &loads, &[ShardSpec::default()], None, config);
    let three = vec![ShardSpec::default(); 3];
    let p = place(
        &clusters,
        &loads,
        &three,
        Some(&one.as_previous(&clusters)),
        config,
    );
    let mut counts = vec![0; 3];
    for s in p.shards.iter().flatten() {
        counts[*s as usize] += 1;
    }
    counts
}

#[test]
fn app_less_clusters_spread_when_replicas_are_added() {
    // Apps only (the old load): app-less clusters weigh nothing, so nothing moves them off
    // the first shard (issue 10 saw 9,721 / 236 / 43 clusters on 3 replicas).
    let apps_only = PlacementConfig {
        cluster_base_load: 0,
        ..PlacementConfig::default()
    };
    let old = one_to_three(&apps_only);
    assert!(old[0] >= 2_700, "{old:?}");
    // With the default base, app-less clusters count, and every shard holds a good share.
    let counts = one_to_three(&PlacementConfig::default());
    assert!(
        counts.iter().all(|&n| (650..=1_700).contains(&n)),
        "{counts:?}"
    );
}

#[test]
fn loads_are_base_plus_apps_unless_a_weight_is_set() {
    let mut clusters = vec![
        Cluster::new("a", "https://a.example"),
        Cluster::new("b", "https://b.example"),
        Cluster::new("c", "https://c.example"),
    ];
    clusters[2].weight = Some(7);
    let apps = vec![
        App::to_server("argocd", "x", "https://a.example"),
        App::to_server("argocd", "y", "https://a.example"),
        App::to_server("argocd", "z", "https://c.example"),
    ];
    let config = PlacementConfig {
        cluster_base_load: 5,
        ..PlacementConfig::default()
    };
    assert_eq!(config.loads(&clusters, &apps), vec![7, 5, 7]);
    let none = PlacementConfig {
        cluster_base_load: 0,
        ..PlacementConfig::default()
    };
    assert_eq!(
        none.loads(&clusters, &apps),
        crate::model::loads(&clusters, &apps)
    );
}

/// Fewer clusters than shards: every cluster is heavier than an even share, and the
/// warning names that share's bound, never the 0 left over for the other shards (two
/// clusters over three replicas used to print "exceeds its shard's bound (0.0)").
#[test]
fn a_hot_clusters_bound_is_its_even_share_when_nothing_else_is_left() {
    let clusters: Vec<Cluster> = (0..2)
        .map(|i| Cluster::new(format!("id-{i}"), format!("https://c{i}.example")))
        .collect();
    let specs = vec![ShardSpec::default(); 3];
    let p = place(
        &clusters,
        &[5, 6],
        &specs,
        None,
        &PlacementConfig::default(),
    );
    let bounds: Vec<f64> = p
        .warnings
        .iter()
        .filter_map(|w| match w {
            PlacementWarning::HotCluster { bound, .. } => Some(*bound),
            _ => None,
        })
        .collect();
    assert_eq!(bounds.len(), 2, "{:?}", p.warnings);
    // 11 over 3 shards, with the 10 % tolerance.
    for b in bounds {
        assert!((b - 11.0 / 3.0 * 1.1).abs() < 1e-9, "{b}");
    }
}
