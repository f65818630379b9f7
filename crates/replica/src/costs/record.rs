//! The costs record: what one replica measured for each cluster it owns, stored beside the
//! fleet's root (`fleetshard-costs/<identity>` for root `fleetshard/`) so that no replica
//! lists or wakes on it with the coordination records, and merged by whoever places or
//! shows the fleet (the distributor, `status`, a new owner seeding its figures).
//!
//! Not a lease: it carries no timing and nobody acts on its age. A cluster's figure is
//! trusted once it has been measured for [`MIN_MEASURED_SECONDS`]; of two records naming one
//! cluster (its old owner's not rewritten yet, or a dead replica's), the one measured
//! longer wins — a new owner carries the figure on from where the last one left it.

use std::collections::BTreeMap;

use fleetshard_core::placement::slices::UnitId;

use serde::{Deserialize, Serialize};

/// How long a cluster must have been measured before its figure places it (two samples
/// at the default period, a few minutes of smoothing).
pub const MIN_MEASURED_SECONDS: u64 = 120;

/// The prefix of every costs record of the fleet at `root` (beside it, not under it).
pub fn costs_prefix(root: &str) -> String {
    let (first, rest) = root.split_once('/').unwrap_or((root, ""));
    format!("{first}-costs/{rest}")
}

/// The key of `identity`'s costs record.
pub fn costs_key(root: &str, identity: &str) -> String {
    format!("{}{identity}", costs_prefix(root))
}

/// One replica's record. Unknown fields are kept out of the way (read, ignored), so a
/// later release may add figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CostRecord {
    /// The replica's identity.
    pub holder: String,
    /// Its incarnation (hex, as in its lease records).
    pub incarnation: String,
    /// Each cluster it owns, by id.
    pub clusters: BTreeMap<String, ClusterCost>,
}

/// One cluster's smoothed figures (an exponentially weighted moving average over
/// `run --cost-window`, 5 minutes by default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterCost {
    /// The cost placement uses, in millicore-equivalents: `cpu_millicores` plus
    /// `cache_mib` × the memory weight (`run --cost-memory-weight`).
    pub cost: f64,
    /// Reconcile CPU time per second, in thousandths of a CPU.
    pub cpu_millicores: f64,
    /// The cluster's live caches, in MiB (an estimate from the objects' JSON sizes).
    pub cache_mib: f64,
    /// Objects in its live caches at the last sample.
    pub cache_objects: u64,
    /// Watch events per minute.
    pub events_per_minute: f64,
    /// API requests made for its apps per minute.
    pub requests_per_minute: f64,
    /// Sync operations per hour.
    pub syncs_per_hour: f64,
    /// How long the figure has been measured, across owners.
    pub measured_seconds: u64,
}

impl ClusterCost {
    /// This figure times `f` (a part of it), its measured time kept.
    fn scaled(&self, f: f64) -> ClusterCost {
        ClusterCost {
            cost: self.cost * f,
            cpu_millicores: self.cpu_millicores * f,
            cache_mib: self.cache_mib * f,
            cache_objects: (self.cache_objects as f64 * f).round() as u64,
            events_per_minute: self.events_per_minute * f,
            requests_per_minute: self.requests_per_minute * f,
            syncs_per_hour: self.syncs_per_hour * f,
            measured_seconds: self.measured_seconds,
        }
    }

    /// The figures of two parts of one cluster together; measured as long as the shorter.
    fn plus(&self, o: &ClusterCost) -> ClusterCost {
        ClusterCost {
            cost: self.cost + o.cost,
            cpu_millicores: self.cpu_millicores + o.cpu_millicores,
            cache_mib: self.cache_mib + o.cache_mib,
            cache_objects: self.cache_objects + o.cache_objects,
            events_per_minute: self.events_per_minute + o.events_per_minute,
            requests_per_minute: self.requests_per_minute + o.requests_per_minute,
            syncs_per_hour: self.syncs_per_hour + o.syncs_per_hour,
            measured_seconds: self.measured_seconds.min(o.measured_seconds),
        }
    }

    /// Whether the figure has been measured long enough to place by.
    pub fn is_trusted(&self) -> bool {
        self.measured_seconds >= MIN_MEASURED_SECONDS && self.cost.is_finite() && self.cost >= 0.0
    }
}

/// A costs record that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: not a costs record: {reason}")]
pub struct BadCostRecord {
    /// Its key.
    pub key: String,
    /// Why.
    pub reason: String,
}

/// Every cluster's figure from the records `entries` (key, value) hold: per cluster, the
/// one measured longest (equal: the higher cost, so the merge is independent of order).
/// An unreadable record is named and skipped; the others still count.
pub fn merge<'a>(
    entries: impl IntoIterator<Item = (&'a str, &'a [u8])>,
) -> (BTreeMap<String, ClusterCost>, Vec<BadCostRecord>) {
    let mut merged: BTreeMap<String, ClusterCost> = BTreeMap::new();
    let mut bad = Vec::new();
    for (key, value) in entries {
        let record: CostRecord = match serde_json::from_slice(value) {
            Ok(r) => r,
            Err(e) => {
                bad.push(BadCostRecord {
                    key: key.to_owned(),
                    reason: e.to_string(),
                });
                continue;
            }
        };
        for (id, cost) in record.clusters {
            if !(cost.cost.is_finite() && cost.cost >= 0.0) {
                continue;
            }
            let better = merged.get(&id).is_none_or(|old| {
                (cost.measured_seconds, cost.cost) > (old.measured_seconds, old.cost)
            });
            if better {
                merged.insert(id, cost);
            }
        }
    }
    (merged, bad)
}

/// Which records are still written: a record whose version this reader has seen
/// unchanged for `stale_after` (on its own clock, never a time another replica wrote) is
/// a replica's that is gone or no longer measures (`--reconciler none`), and is left out.
/// A record first seen counts as just changed.
#[derive(Debug, Clone, Default)]
pub struct Freshness {
    seen: BTreeMap<String, (u64, std::time::Duration)>,
}

impl Freshness {
    /// Keeps the entries of `listing` (key, value, version) still written at `now`.
    pub fn fresh<'a>(
        &mut self,
        now: std::time::Duration,
        stale_after: std::time::Duration,
        listing: impl IntoIterator<Item = (&'a str, &'a [u8], u64)>,
    ) -> Vec<(&'a str, &'a [u8])> {
        let mut kept = Vec::new();
        let mut seen = BTreeMap::new();
        for (key, value, version) in listing {
            let since = match self.seen.get(key) {
                Some(&(v, since)) if v == version => since,
                _ => now,
            };
            seen.insert(key.to_owned(), (version, since));
            if now.saturating_sub(since) < stale_after {
                kept.push((key, value));
            }
        }
        self.seen = seen;
        kept
    }
}

/// [`merge`] over a listing of [`costs_prefix`]: what a one-shot reader (`status`, the
/// dashboard) shows, every record counted (staleness needs watching: [`Freshness`]).
pub fn merge_listing(
    listing: &fleetshard_coord::store::Listing,
) -> (BTreeMap<String, ClusterCost>, Vec<BadCostRecord>) {
    merge(
        listing
            .entries
            .iter()
            .map(|e| (e.key.as_str(), e.value.as_slice())),
    )
}

/// What a unit newly measured here starts from: its own published figure; for a unit
/// first seen under a new slice count, its part of its cluster's figure (the whole
/// cluster's, or a complete set of its slices' under another count), measured time kept.
/// Without it a cluster just split or joined would be unmeasured for two minutes and
/// placed by its estimate meanwhile, which may undo the split.
pub fn seed_of(unit: &str, seeds: &BTreeMap<String, ClusterCost>) -> Option<ClusterCost> {
    if let Some(&c) = seeds.get(unit) {
        return Some(c);
    }
    let id = UnitId::parse(unit);
    let part = id.slice.map_or(1.0, |(_, k)| 1.0 / f64::from(k));
    let whole = seeds.get(id.cluster).copied().or_else(|| {
        let slices = seeds
            .range(format!("{}#slice-", id.cluster)..)
            .take_while(|(other, _)| UnitId::parse(other).cluster == id.cluster);
        sliced_clusters(slices).remove(id.cluster)
    })?;
    Some(whole.scaled(part))
}

/// Each cluster held in slices among `figures` (unit id → figure), as the sum of one
/// complete set of its slices: all `K` of one count present (of several counts, the one
/// measured longest). Whole clusters' figures are not read.
fn sliced_clusters<'a>(
    figures: impl Iterator<Item = (&'a String, &'a ClusterCost)>,
) -> BTreeMap<&'a str, ClusterCost> {
    // cluster → count → (slices seen, their sum).
    let mut sets: BTreeMap<&str, BTreeMap<u32, (u32, ClusterCost)>> = BTreeMap::new();
    for (id, c) in figures {
        if let UnitId {
            cluster,
            slice: Some((_, k)),
        } = UnitId::parse(id)
        {
            let set = sets.entry(cluster).or_default();
            match set.get_mut(&k) {
                Some((seen, sum)) => {
                    *seen += 1;
                    *sum = sum.plus(c);
                }
                None => {
                    set.insert(k, (1, *c));
                }
            }
        }
    }
    sets.into_iter()
        .filter_map(|(cluster, counts)| {
            let (_, (_, sum)) = counts
                .into_iter()
                .filter(|&(k, (seen, _))| seen == k)
                .max_by_key(|&(k, (_, sum))| (sum.measured_seconds, k))?;
            Some((cluster, sum))
        })
        .collect()
}

/// The costs placement uses, by cluster: the trusted figures, once they add up to more
/// than `floor` (and to more than nothing). Below it the fleet costs too little for its
/// figures to be more than noise — a refresh more or less in a sample — and the
/// estimates, which do not wobble, place it; placing by zeros would count clusters
/// instead of weighing them.
///
/// A cluster held in slices (`cluster#slice-N-of-K`) costs the sum of its slices, when
/// all `K` of one count are trusted (of several counts, the one measured longest); else
/// its whole figure if trusted. Each slice's owner keeps the cluster's caches, so a split
/// cluster costs more than it did whole: that is what splitting costs.
pub fn placement_costs(
    merged: &BTreeMap<String, ClusterCost>,
    floor: f64,
) -> BTreeMap<String, f64> {
    let trusted = || merged.iter().filter(|(_, c)| c.is_trusted());
    let mut costs: BTreeMap<String, f64> = trusted()
        .filter(|(id, _)| UnitId::parse(id).slice.is_none())
        .map(|(id, c)| (id.clone(), c.cost))
        .collect();
    for (cluster, sum) in sliced_clusters(trusted()) {
        costs.insert(cluster.to_owned(), sum.cost);
    }
    let total: f64 = costs.values().sum();
    if total > 0.0 && total >= floor {
        costs
    } else {
        BTreeMap::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(holder: &str, clusters: &[(&str, f64, u64)]) -> Vec<u8> {
        serde_json::to_vec(&CostRecord {
            holder: holder.into(),
            incarnation: "1".into(),
            clusters: clusters
                .iter()
                .map(|&(id, cost, measured_seconds)| {
                    let c = ClusterCost {
                        cost,
                        measured_seconds,
                        ..ClusterCost::default()
                    };
                    (id.to_owned(), c)
                })
                .collect(),
        })
        .unwrap()
    }

    #[test]
    fn a_record_left_unchanged_goes_stale_on_the_readers_clock() {
        let mut f = Freshness::default();
        let s = std::time::Duration::from_secs;
        let stale = s(300);
        let keys =
            |kept: Vec<(&str, &[u8])>| kept.iter().map(|(k, _)| k.to_string()).collect::<Vec<_>>();
        assert_eq!(
            keys(f.fresh(s(0), stale, [("a", &b""[..], 1), ("b", &b""[..], 1)])),
            ["a", "b"]
        );
        // a is rewritten every minute; b never again.
        assert_eq!(
            keys(f.fresh(s(240), stale, [("a", &b""[..], 5), ("b", &b""[..], 1)])),
            ["a", "b"]
        );
        assert_eq!(
            keys(f.fresh(s(300), stale, [("a", &b""[..], 6), ("b", &b""[..], 1)])),
            ["a"]
        );
        // b written again: fresh at once.
        assert_eq!(
            keys(f.fresh(s(330), stale, [("a", &b""[..], 6), ("b", &b""[..], 2)])),
            ["a", "b"]
        );
    }

    #[test]
    fn keys_sit_beside_the_root() {
        assert_eq!(costs_prefix("fleetshard/"), "fleetshard-costs/");
        assert_eq!(costs_key("fleetshard/", "pod-a"), "fleetshard-costs/pod-a");
        assert_eq!(costs_key("a/b/", "p"), "a-costs/b/p");
        assert!(!costs_key("fleetshard/", "p").starts_with("fleetshard/"));
    }

    #[test]
    fn the_longest_measured_figure_wins_and_a_bad_record_is_named() {
        let old = record("old", &[("c1", 10.0, 600), ("c2", 5.0, 600)]);
        let new = record("new", &[("c1", 12.0, 660), ("c3", 1.0, 30)]);
        let garbage = b"{not json".to_vec();
        let entries = [
            ("k/old", old.as_slice()),
            ("k/garbage", garbage.as_slice()),
            ("k/new", new.as_slice()),
        ];
        let (merged, bad) = merge(entries);
        assert_eq!(merged["c1"].cost, 12.0);
        assert_eq!(merged["c2"].cost, 5.0);
        assert_eq!(bad.len(), 1);
        assert!(
            bad[0]
                .to_string()
                .starts_with("k/garbage: not a costs record")
        );
        // Order does not matter.
        let (reversed, _) = merge(entries.into_iter().rev());
        assert_eq!(merged, reversed);
        // c3 is too new to place by.
        let placed = placement_costs(&merged, 0.0);
        assert_eq!(placed.keys().collect::<Vec<_>>(), ["c1", "c2"]);
        // 17 in all: below a floor of 20 they place nothing.
        assert!(placement_costs(&merged, 20.0).is_empty());
        // Figures that are all zero place nothing.
        let zeros = record("z", &[("c1", 0.0, 600), ("c2", 0.0, 600)]);
        let (zero, _) = merge([("k/z", zeros.as_slice())]);
        assert!(placement_costs(&zero, 0.0).is_empty());
    }

    #[test]
    fn a_cluster_in_slices_costs_their_sum_once_all_of_one_count_are_trusted() {
        let figure = |cost: f64, measured_seconds: u64| ClusterCost {
            cost,
            measured_seconds,
            ..ClusterCost::default()
        };
        let mut merged = BTreeMap::from([
            ("hub#slice-0-of-2".to_owned(), figure(30.0, 600)),
            ("c1".to_owned(), figure(10.0, 600)),
        ]);
        // One slice of two: the hub is not measured yet.
        assert_eq!(
            placement_costs(&merged, 0.0),
            BTreeMap::from([("c1".to_owned(), 10.0)])
        );
        merged.insert("hub#slice-1-of-2".into(), figure(20.0, 300));
        merged.insert("hub".into(), figure(35.0, 900));
        let costs = placement_costs(&merged, 0.0);
        assert_eq!(
            costs.get("hub"),
            Some(&50.0),
            "the slices, not the stale whole"
        );
        assert_eq!(costs.len(), 2);
        // An untrusted slice does not complete the set: the whole figure stands.
        merged.insert("hub#slice-1-of-2".into(), figure(20.0, 30));
        assert_eq!(placement_costs(&merged, 0.0).get("hub"), Some(&35.0));
    }

    #[test]
    fn a_new_slice_starts_from_its_part_of_its_cluster() {
        let figure = |cost: f64, measured_seconds: u64| ClusterCost {
            cost,
            measured_seconds,
            ..ClusterCost::default()
        };
        let seeds = BTreeMap::from([
            ("hub".to_owned(), figure(90.0, 600)),
            ("c1#slice-0-of-2".to_owned(), figure(30.0, 300)),
            ("c1#slice-1-of-2".to_owned(), figure(10.0, 400)),
        ]);
        assert_eq!(seed_of("hub", &seeds), Some(figure(90.0, 600)));
        assert_eq!(seed_of("hub#slice-2-of-3", &seeds), Some(figure(30.0, 600)));
        assert_eq!(
            seed_of("c1", &seeds),
            Some(figure(40.0, 300)),
            "joined: the sum"
        );
        assert_eq!(seed_of("c1#slice-0-of-4", &seeds), Some(figure(10.0, 300)));
        assert_eq!(seed_of("c2", &seeds), None);
        let partial = BTreeMap::from([("c1#slice-0-of-2".to_owned(), figure(30.0, 300))]);
        assert_eq!(
            seed_of("c1", &partial),
            None,
            "an incomplete set seeds nothing"
        );
    }
}
