//! What the observers of both protocols show the same way once they know each cluster's
//! shard and owner: each cluster with its apps' sync and health (unowned clusters first),
//! the app totals and problems, and each shard's load.

use std::collections::BTreeMap;

use fleetshard_core::placement::slices::UnitId;

use super::{
    APP_PROBLEMS_LEN, AppProblem, AppStatuses, AppTotals, ClusterInfo, ClusterView, Clusters,
    Lease, unknown,
};

/// The clusters' part of a [`super::Snapshot`].
pub(super) struct ClusterViews {
    /// Those nobody acts on first, then by name and id.
    pub views: Vec<ClusterView>,
    pub totals: AppTotals,
    pub problems: Vec<AppProblem>,
    pub unowned: usize,
}

/// The holder acting on shard `n`: one whose lease is live, or not watched long enough to
/// tell.
pub(super) fn acting(holders: &BTreeMap<u32, (String, Lease)>, n: u32) -> Option<String> {
    holders
        .get(&n)
        .filter(|(_, l)| matches!(l, Lease::Live | Lease::Unknown))
        .map(|(h, _)| h.clone())
}

/// Whether shard `n`'s holder missed a renewal (its clusters are at risk, acted on by
/// nobody).
pub(super) fn not_renewed(holders: &BTreeMap<u32, (String, Lease)>, n: u32) -> bool {
    holders
        .get(&n)
        .is_some_and(|(_, l)| *l == Lease::NotRenewed)
}

/// Every cluster the inventory knows or `assigned` names (by id, with its shard), with
/// the owner and state `ownership` gives it (from its id and shard) and its apps'
/// statuses.
pub(super) fn cluster_views(
    clusters: &Clusters,
    assigned: &BTreeMap<String, u32>,
    statuses: &AppStatuses,
    ownership: impl Fn(&str, Option<u32>) -> (Option<String>, &'static str),
) -> ClusterViews {
    let mut totals = AppTotals::default();
    let mut problems = Vec::new();
    let mut views: Vec<ClusterView> = Vec::new();
    let mut ids: Vec<&String> = clusters.keys().chain(assigned.keys()).collect();
    ids.sort();
    ids.dedup();
    // A split cluster is shown as its slices, each with its own owner and apps.
    let split: std::collections::HashSet<&str> = assigned
        .keys()
        .map(|id| UnitId::parse(id))
        .filter(|u| u.slice.is_some())
        .map(|u| u.cluster)
        .collect();
    for id in ids {
        if split.contains(id.as_str()) && !assigned.contains_key(id) {
            continue;
        }
        let unit = UnitId::parse(id);
        let info = match (unit.slice, clusters.get(unit.cluster)) {
            (Some(_), Some(whole)) => ClusterInfo {
                apps: (whole.apps.iter())
                    .filter(|a| {
                        let (ns, name) = a.split_once('/').unwrap_or(("", a));
                        unit.holds(ns, name)
                    })
                    .cloned()
                    .collect(),
                ..whole.clone()
            },
            _ => clusters.get(id).cloned().unwrap_or_else(|| unknown(id)),
        };
        let shard = assigned.get(id).copied();
        let (owner, state) = ownership(id, shard);
        let mut v = ClusterView {
            id: id.clone(),
            name: info.name.clone(),
            server: info.server.clone(),
            zone: info.zone.clone(),
            shard,
            owner,
            state,
            apps: info.apps.len(),
            synced: 0,
            healthy: 0,
            errors: 0,
            cost: None,
        };
        for app in &info.apps {
            totals.total += 1;
            let s = statuses.get(app);
            let synced = s.is_some_and(|s| s.sync == "Synced");
            let healthy = s.is_some_and(|s| s.health == "Healthy");
            let error = s.is_some_and(|s| s.condition.is_some());
            totals.recorded += usize::from(s.is_some());
            v.synced += usize::from(synced);
            v.healthy += usize::from(healthy);
            v.errors += usize::from(error);
            if !(synced && healthy) && problems.len() < APP_PROBLEMS_LEN {
                problems.push(AppProblem {
                    app: app.clone(),
                    cluster: info.name.clone(),
                    sync: s.map_or_else(|| "-".into(), |s| s.sync.clone()),
                    health: s.map_or_else(|| "-".into(), |s| s.health.clone()),
                    condition: s.and_then(|s| s.condition.clone()),
                });
            }
        }
        totals.synced += v.synced;
        totals.healthy += v.healthy;
        totals.errors += v.errors;
        views.push(v);
    }
    totals.good = statuses
        .iter()
        .filter(|(_, s)| s.sync == "Synced" && s.health == "Healthy")
        .count()
        .min(totals.total);
    // Nobody acting: unowned, or its holder missed a renewal (as `status` counts them).
    let unowned = views.iter().filter(|v| v.owner.is_none()).count();
    views.sort_by(|a, b| {
        (a.owner.is_some(), &a.name, &a.id).cmp(&(b.owner.is_some(), &b.name, &b.id))
    });
    ClusterViews {
        views,
        totals,
        problems,
        unowned,
    }
}

/// How many clusters `assigned` gives shard `n`, and how many apps they have.
pub(super) fn shard_load(
    n: u32,
    assigned: &BTreeMap<String, u32>,
    clusters: &Clusters,
) -> (usize, usize) {
    let mine: Vec<&String> = assigned
        .iter()
        .filter(|(_, s)| **s == n)
        .map(|(id, _)| id)
        .collect();
    let apps: usize = mine
        .iter()
        .map(|id| clusters.get(*id).map_or(0, |c| c.apps.len()))
        .sum();
    (mine.len(), apps)
}

/// Sets each cluster's measured cost from `costs` (the replicas' merged records) and each
/// shard's sum of its clusters' costs.
pub(crate) fn add_costs(snapshot: &mut super::Snapshot, costs: &BTreeMap<String, f64>) {
    // Each shard's sum, in one pass over the clusters.
    let mut by_shard: BTreeMap<u32, f64> = BTreeMap::new();
    for c in &mut snapshot.clusters {
        c.cost = costs.get(&c.id).copied();
        if let (Some(cost), Some(shard)) = (c.cost, c.shard) {
            *by_shard.entry(shard).or_default() += cost;
        }
    }
    for s in &mut snapshot.shards {
        s.cost = by_shard.get(&s.shard).copied();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A split cluster is shown as its slices, each with its own shard, owner and apps;
    /// the cluster itself is not shown unowned.
    #[test]
    fn a_split_cluster_shows_as_its_slices() {
        let apps: Vec<String> = (0..20).map(|i| format!("argocd/app-{i}")).collect();
        let clusters = Clusters::from([(
            "hub".to_owned(),
            ClusterInfo {
                name: "hub-name".into(),
                server: "https://hub".into(),
                zone: None,
                apps: apps.clone(),
            },
        )]);
        let assigned = BTreeMap::from([
            ("hub#slice-0-of-2".to_owned(), 0),
            ("hub#slice-1-of-2".to_owned(), 1),
        ]);
        let views = cluster_views(&clusters, &assigned, &AppStatuses::new(), |_, shard| {
            (shard.map(|s| format!("r{s}")), "acting")
        });
        assert_eq!(views.unowned, 0);
        let ids: Vec<&str> = views.views.iter().map(|v| v.id.as_str()).collect();
        assert_eq!(ids, ["hub#slice-0-of-2", "hub#slice-1-of-2"]);
        assert!(
            views
                .views
                .iter()
                .all(|v| v.name == "hub-name" && v.apps > 0)
        );
        assert_eq!(
            views.views.iter().map(|v| v.apps).sum::<usize>(),
            apps.len()
        );
    }
}
