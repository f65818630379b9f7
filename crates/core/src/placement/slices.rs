//! Slices: a cluster too costly for one shard is split into `k` placement units, each
//! holding a stable part of its applications, so that balanced placement can spread it.
//!
//! Which application goes to which slice is rendezvous hashing of the application's
//! identity (`namespace/name`) over the slice indices: a pure function of the identity
//! and `k`, the same in every process. Going from `k` to `k + 1` slices moves only the
//! applications the new slice wins, about `1 / (k + 1)` of them; the others keep theirs.

use rustc_hash::FxHashMap;

use super::rendezvous::{mix64, stable_hash};
use crate::model::{App, Cluster, for_each_resolved_app};

/// A slice's salt: a different constant from the shards' so that an application's slice
/// and a cluster's shard preferences are unrelated.
fn slice_salt(slice: u32) -> u64 {
    mix64(u64::from(slice).wrapping_add(0x6a09_e667_f3bc_c909))
}

/// The slice (in `0..slices`) of the application `namespace/name` when its cluster is
/// split into `slices`; 0 when `slices` is 0 or 1.
pub fn slice_of_app(namespace: &str, name: &str, slices: u32) -> u32 {
    if slices <= 1 {
        return 0;
    }
    slice_of_identity(&format!("{namespace}/{name}"), slices)
}

/// [`slice_of_app`] of the identity `namespace/name` already joined (a controller's
/// queue key).
pub fn slice_of_identity(identity: &str, slices: u32) -> u32 {
    if slices <= 1 {
        return 0;
    }
    let key = stable_hash(identity);
    (0..slices)
        .max_by_key(|&i| (mix64(key ^ slice_salt(i)), std::cmp::Reverse(i)))
        .unwrap_or(0)
}

/// Applications per slice: for cluster `i` split into `slices[i]` slices (0 or 1: one),
/// how many of its applications each slice holds. Every resolved application counts in
/// exactly one slice of its cluster.
pub fn apps_per_slice(clusters: &[Cluster], apps: &[App], slices: &[u32]) -> Vec<Vec<u64>> {
    let mut out: Vec<Vec<u64>> = slices.iter().map(|&k| vec![0; k.max(1) as usize]).collect();
    for_each_resolved_app(clusters, apps, |i, a| {
        if let (Some(row), Some(&k)) = (out.get_mut(i), slices.get(i)) {
            row[slice_of_app(&a.namespace, &a.name, k) as usize] += 1;
        }
    });
    out
}

/// The fewest slices a cluster of `cost` is split into so that each slice's even part
/// fits `share` (what one shard should carry), when the cost exceeds `share × factor`;
/// 1 (not split) otherwise. At most `max_slices` (the shards, or the cluster's apps), at
/// least 1. Non-finite or non-positive inputs give 1.
pub fn slice_count(cost: f64, share: f64, factor: f64, max_slices: u32) -> u32 {
    let valid = cost.is_finite() && share.is_finite() && share > 0.0 && factor.is_finite();
    if !valid || cost <= share * factor || max_slices <= 1 {
        return 1;
    }
    let k = (cost / share).ceil();
    if k >= f64::from(max_slices) {
        max_slices
    } else {
        (k as u32).max(1)
    }
}

/// The placement-unit id of slice `slice` of cluster `cluster` split into `slices`:
/// `cluster#slice-N-of-K`. A cluster Secret's uid never holds `#`, so unit ids never
/// collide with cluster ids. The count is part of the id: a cluster split again into
/// another count has units of other ids, so no owner of an old slice can mistake it for a
/// new one (each new slice waits for every old one to be let go, `fenced` mode's
/// handover barrier by cluster).
pub fn slice_unit_id(cluster: &str, slice: u32, slices: u32) -> String {
    format!("{cluster}#slice-{slice}-of-{slices}")
}

/// A placement unit's id taken apart: the cluster it is (part of), and for a slice, its
/// index and the cluster's slice count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnitId<'a> {
    /// The cluster's id.
    pub cluster: &'a str,
    /// `(slice, slices)` for a slice; `None` for a whole cluster.
    pub slice: Option<(u32, u32)>,
}

impl<'a> UnitId<'a> {
    /// Parses `id`: `cluster#slice-N-of-K` with `N < K` and `K >= 2` is a slice; anything
    /// else (every cluster id) is a whole cluster.
    pub fn parse(id: &'a str) -> Self {
        let whole = UnitId {
            cluster: id,
            slice: None,
        };
        // Most ids are whole clusters: one byte scan spares them the substring search
        // (every coordination step parses each unit it holds).
        if !id.as_bytes().contains(&b'#') {
            return whole;
        }
        let Some((cluster, rest)) = id.rsplit_once("#slice-") else {
            return whole;
        };
        let Some((n, k)) = rest.split_once("-of-") else {
            return whole;
        };
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        match (digits(n) && digits(k), n.parse::<u32>(), k.parse::<u32>()) {
            (true, Ok(n), Ok(k)) if n < k && k >= 2 && !cluster.is_empty() => UnitId {
                cluster,
                slice: Some((n, k)),
            },
            _ => whole,
        }
    }

    /// Whether the application `namespace/name` of this unit's cluster belongs to it: a
    /// whole cluster holds all of them, a slice those [`slice_of_app`] gives it.
    pub fn holds(&self, namespace: &str, name: &str) -> bool {
        match self.slice {
            None => true,
            Some((n, k)) => slice_of_app(namespace, name, k) == n,
        }
    }
}

/// The unit of the application `namespace/name` of `cluster` when the cluster is split
/// into `slices` (0 or 1: whole, the cluster's own id).
pub fn unit_of_app(cluster: &str, namespace: &str, name: &str, slices: u32) -> String {
    if slices <= 1 {
        cluster.to_owned()
    } else {
        slice_unit_id(cluster, slice_of_app(namespace, name, slices), slices)
    }
}

/// The slice count a cluster keeps when its cost moves inside the band: `previous` when
/// it is among the counts `cost × (1 ± band)` calls for (and possible within
/// `max_slices`), else [`slice_count`]'s. A count changes only when the cost left the
/// band around it, since a new count stops and restarts every slice of the cluster.
pub fn kept_slice_count(
    cost: f64,
    share: f64,
    factor: f64,
    max_slices: u32,
    previous: u32,
    band: f64,
) -> u32 {
    let fresh = slice_count(cost, share, factor, max_slices);
    let band = if band.is_finite() { band.max(0.0) } else { 0.0 };
    let low = slice_count(cost * (1.0 - band).max(0.0), share, factor, max_slices);
    let high = slice_count(cost * (1.0 + band), share, factor, max_slices);
    let previous = previous.max(1);
    if previous != fresh && (low..=high).contains(&previous) && previous <= max_slices.max(1) {
        previous
    } else {
        fresh
    }
}

/// The slice count of each cluster in a committed assignment (`unit ids → shard`): the
/// `K` of its `cluster#slice-N-of-K` units; absent for a cluster placed whole.
pub fn committed_slices<'a>(units: impl IntoIterator<Item = &'a str>) -> FxHashMap<&'a str, u32> {
    let mut out = FxHashMap::default();
    for id in units {
        if let UnitId {
            cluster,
            slice: Some((_, k)),
        } = UnitId::parse(id)
        {
            out.insert(cluster, k);
        }
    }
    out
}

/// Where each unit of a previous assignment was, found also for units it does not name:
/// a slice under a new count starts where the same slice index was (or where its cluster
/// was whole), and a cluster placed whole again starts where its slice 0 was. Placement
/// then keeps most of a re-split cluster's apps where they were.
#[derive(Debug, Default)]
pub struct UnitHomes<'a> {
    exact: FxHashMap<&'a str, u32>,
    /// `(cluster, slice index)` → shard; a whole cluster is its own slice 0.
    by_index: FxHashMap<(&'a str, u32), u32>,
}

impl<'a> UnitHomes<'a> {
    /// Indexes `previous` (unit id → shard).
    pub fn new(previous: impl IntoIterator<Item = (&'a str, u32)>) -> Self {
        let mut out = UnitHomes::default();
        for (id, shard) in previous {
            out.exact.insert(id, shard);
            let unit = UnitId::parse(id);
            let index = unit.slice.map_or(0, |(n, _)| n);
            out.by_index.entry((unit.cluster, index)).or_insert(shard);
        }
        out
    }

    /// The previous shard of unit `id` (see the type's documentation).
    pub fn get(&self, id: &str) -> Option<u32> {
        if let Some(&s) = self.exact.get(id) {
            return Some(s);
        }
        let unit = UnitId::parse(id);
        let index = unit.slice.map_or(0, |(n, _)| n);
        self.by_index
            .get(&(unit.cluster, index))
            .or_else(|| self.exact.get(unit.cluster))
            .copied()
    }
}

/// Moves slices of one cluster that share a shard to a shard holding none of that
/// cluster's slices, where one can take the slice within its `bounds` (lightest such
/// shard first); slices that cannot move stay. `groups[u]` is the cluster unit `u` is a
/// slice of (`None`: not a slice); `shards[u]` its shard, updated in place (one out of
/// range stays). Zones are not considered. Returns how many slices moved.
pub fn separate_slices(
    shards: &mut [Option<u32>],
    groups: &[Option<usize>],
    loads: &[u64],
    bounds: &[f64],
) -> usize {
    let mut load = vec![0u64; bounds.len()];
    for (s, &w) in shards.iter().zip(loads) {
        if let Some(s) = s.filter(|&s| (s as usize) < load.len()) {
            load[s as usize] += w;
        }
    }
    let mut moved = 0;
    let mut order: Vec<usize> = (0..shards.len()).filter(|&u| groups[u].is_some()).collect();
    order.sort_by_key(|&u| (groups[u], u));
    for (n, &u) in order.iter().enumerate() {
        let Some(s) = shards[u].filter(|&s| (s as usize) < load.len()) else {
            continue;
        };
        let group = groups[u];
        let siblings = order.iter().filter(|&&v| groups[v] == group);
        let shared = order[..n]
            .iter()
            .any(|&v| groups[v] == group && shards[v] == Some(s));
        if !shared {
            continue;
        }
        let used: Vec<u32> = siblings.filter_map(|&v| shards[v]).collect();
        let dest = (0..bounds.len() as u32)
            .filter(|d| !used.contains(d))
            .filter(|&d| (load[d as usize] + loads[u]) as f64 <= bounds[d as usize])
            .min_by_key(|&d| (load[d as usize], d));
        if let Some(d) = dest {
            load[s as usize] -= loads[u];
            load[d as usize] += loads[u];
            shards[u] = Some(d);
            moved += 1;
        }
    }
    moved
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn apps(n: usize) -> Vec<(String, String)> {
        (0..n)
            .map(|i| (format!("ns-{}", i % 7), format!("app-{i}")))
            .collect()
    }

    #[test]
    fn slice_count_is_the_fewest_that_fit() {
        assert_eq!(slice_count(100.0, 100.0, 1.1, 10), 1);
        assert_eq!(slice_count(110.0, 100.0, 1.1, 10), 1);
        assert_eq!(slice_count(111.0, 100.0, 1.1, 10), 2);
        assert_eq!(slice_count(301.0, 100.0, 1.1, 10), 4);
        assert_eq!(slice_count(301.0, 100.0, 1.1, 3), 3);
        assert_eq!(slice_count(f64::NAN, 100.0, 1.1, 3), 1);
        assert_eq!(slice_count(500.0, 0.0, 1.1, 3), 1);
    }

    #[test]
    fn slices_are_spread_and_stable() {
        let a = apps(3_000);
        let mut counts = [0usize; 4];
        for (ns, name) in &a {
            counts[slice_of_app(ns, name, 4) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (600..=900).contains(&c)),
            "{counts:?}"
        );
        // Pinned: changing these values reassigns apps between slices.
        assert_eq!(slice_of_app("argocd", "guestbook", 1), 0);
        assert_eq!(
            slice_of_app("argocd", "guestbook", 4),
            slice_of_app("argocd", "guestbook", 4)
        );
    }

    #[test]
    fn co_located_slices_are_separated_within_bounds() {
        // Two slices of cluster 0 on shard 0, another unit on shard 1, shard 2 empty.
        let mut shards = vec![Some(0), Some(0), Some(1)];
        let groups = vec![Some(0), Some(0), None];
        let moved = separate_slices(&mut shards, &groups, &[50, 50, 60], &[110.0; 3]);
        assert_eq!(moved, 1);
        assert_eq!(shards, vec![Some(0), Some(2), Some(1)]);
        // No room anywhere: they stay together.
        let mut shards = vec![Some(0), Some(0), Some(1)];
        let moved = separate_slices(&mut shards, &groups, &[50, 50, 100], &[100.0, 100.0]);
        assert_eq!(moved, 0);
    }

    #[test]
    fn unit_ids_parse_back_and_nothing_else_is_a_slice() {
        let id = slice_unit_id("c-1", 2, 3);
        assert_eq!(id, "c-1#slice-2-of-3");
        assert_eq!(
            UnitId::parse(&id),
            UnitId {
                cluster: "c-1",
                slice: Some((2, 3))
            }
        );
        for whole in [
            "c-1",
            "c#slice-3-of-3",
            "c#slice-0-of-1",
            "c#slice--of-2",
            "c#slice-1-of-+2",
            "#slice-0-of-2",
            "c#slice-1",
            "c#slice-0-of-99999999999",
        ] {
            assert_eq!(UnitId::parse(whole).slice, None, "{whole}");
            assert_eq!(UnitId::parse(whole).cluster, whole);
        }
        // Every app of a split cluster is held by exactly one of its slices.
        for (ns, name) in apps(200) {
            let holders = (0..3)
                .filter(|&n| UnitId::parse(&slice_unit_id("c", n, 3)).holds(&ns, &name))
                .count();
            assert_eq!(holders, 1);
            assert!(UnitId::parse("c").holds(&ns, &name));
            let unit = unit_of_app("c", &ns, &name, 3);
            assert!(UnitId::parse(&unit).holds(&ns, &name));
        }
        assert_eq!(unit_of_app("c", "ns", "a", 1), "c");
    }

    #[test]
    fn a_slice_count_changes_only_when_the_cost_leaves_the_band() {
        // Share 100, factor 1.1: 1 slice up to 110, 2 up to 220, 3 up to 330.
        let kept = |cost: f64, previous: u32| kept_slice_count(cost, 100.0, 1.1, 8, previous, 0.1);
        assert_eq!(kept(115.0, 1), 1, "inside the band above 110");
        assert_eq!(kept(125.0, 1), 2, "out of it");
        assert_eq!(kept(105.0, 2), 2, "inside the band below 110");
        assert_eq!(kept(95.0, 2), 1);
        assert_eq!(kept(205.0, 3), 3);
        assert_eq!(kept(150.0, 3), 2);
        assert_eq!(kept(250.0, 9), 3, "beyond the most slices possible");
        assert_eq!(kept(250.0, 0), 3);
        assert_eq!(kept_slice_count(115.0, 100.0, 1.1, 8, 1, f64::NAN), 2);
    }

    #[test]
    fn units_start_where_their_slice_or_cluster_was() {
        let previous = [("a", 0), ("b#slice-0-of-2", 1), ("b#slice-1-of-2", 2)];
        let homes = UnitHomes::new(previous.iter().map(|&(id, s)| (id, s)));
        assert_eq!(homes.get("a"), Some(0));
        assert_eq!(homes.get("a#slice-1-of-2"), Some(0), "was whole");
        assert_eq!(homes.get("b#slice-1-of-3"), Some(2), "same index");
        assert_eq!(homes.get("b#slice-2-of-3"), None, "a new index");
        assert_eq!(homes.get("b"), Some(1), "its slice 0");
        assert_eq!(homes.get("c"), None);
        let counts = committed_slices(previous.iter().map(|&(id, _)| id));
        assert_eq!(counts.get("b"), Some(&2));
        assert_eq!(counts.get("a"), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn one_more_slice_moves_about_its_share(n in 200usize..2_000, k in 1u32..12) {
            let a = apps(n);
            let mut moved = 0usize;
            for (ns, name) in &a {
                let before = slice_of_app(ns, name, k);
                let after = slice_of_app(ns, name, k + 1);
                // Exactly one slice, in range.
                prop_assert!(before < k.max(1));
                prop_assert!(after < k + 1);
                // An app that moves, moves to the new slice only.
                if before != after {
                    prop_assert_eq!(after, k);
                    moved += 1;
                }
            }
            // About 1/(k+1) of the apps move: within 5 standard deviations of a binomial.
            let p = 1.0 / f64::from(k + 1);
            let mean = n as f64 * p;
            let sd = (n as f64 * p * (1.0 - p)).sqrt();
            prop_assert!((moved as f64 - mean).abs() <= 5.0 * sd + 1.0,
                "{moved} of {n} moved going {k} -> {}; expected about {mean:.0}", k + 1);
        }
    }
}
