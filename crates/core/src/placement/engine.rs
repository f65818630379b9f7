//! The balanced placement engine: targets, stay, place, shed, fill (see the module docs).

use rustc_hash::{FxHashMap, FxHashSet};

mod rebalance;

use super::rendezvous::{cluster_key, score, shard_salt};
use super::zones::{self, ZoneLayout, ZonePlan};
use super::{CrossZone, Placement, PlacementConfig, PlacementWarning, PreviousPlacement};
use crate::assignment::Assignment;
use crate::model::{Cluster, ShardSpec};

/// Computes balanced placements and keeps the last one, so that single-cluster changes can
/// be applied without recomputing the fleet ([`BalancedPlacer::add_cluster`]).
#[derive(Debug, Clone)]
pub struct BalancedPlacer {
    config: PlacementConfig,
    shards: Vec<ShardSpec>,
    salts: Vec<u64>,
    state: State,
}

/// One cluster move made by an incremental update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterMove {
    /// Cluster id.
    pub cluster: String,
    /// Shard before (`None`: the cluster is new).
    pub from: Option<u32>,
    /// Shard after (`None`: the cluster left).
    pub to: Option<u32>,
}

/// (cluster index, from, to)
type LoggedMove = (usize, Option<u32>, Option<u32>);

#[derive(Debug, Clone, Default)]
struct State {
    clusters: Vec<Cluster>,
    raw: Vec<u64>,
    keys: Vec<u64>,
    /// Effective load: the raw load, or 1 each when the whole fleet has no load (so that
    /// cluster counts are balanced instead).
    w: Vec<u64>,
    unit_loads: bool,
    managed: Vec<bool>,
    pin: Vec<Option<u32>>,
    shard_of: Vec<Option<u32>>,
    load: Vec<u64>,
    target: Vec<f64>,
    hi: Vec<f64>,
    lo: Vec<f64>,
    layout: Option<ZoneLayout>,
    zone_plan: Option<ZonePlan>,
    warnings: Vec<PlacementWarning>,
    index: FxHashMap<String, usize>,
    /// Moves recorded while applying an incremental update.
    log: Option<Vec<LoggedMove>>,
}

impl BalancedPlacer {
    /// A placer for `shards` (their count is the replica count; capacities of 0 count as 1).
    pub fn new(config: PlacementConfig, mut shards: Vec<ShardSpec>) -> Self {
        for s in &mut shards {
            s.capacity = s.capacity.max(1);
        }
        let salts = (0..shards.len() as u32).map(shard_salt).collect();
        BalancedPlacer {
            config,
            shards,
            salts,
            state: State::default(),
        }
    }

    /// Places the fleet from scratch, staying close to `previous`.
    pub fn place(
        &mut self,
        clusters: &[Cluster],
        loads: &[u64],
        previous: Option<&PreviousPlacement>,
    ) -> Placement {
        self.state = State::default();
        let st = &mut self.state;
        st.clusters = clusters.to_vec();
        st.raw = loads.to_vec();
        st.raw.resize(clusters.len(), 0);
        st.keys = clusters.iter().map(|c| cluster_key(&c.id)).collect();
        let replicas = self.shards.len() as u32;

        let mut seen = FxHashSet::with_capacity_and_hasher(clusters.len(), Default::default());
        for c in clusters {
            let fresh = seen.insert(c.id.as_str());
            if !fresh {
                st.warnings.push(PlacementWarning::DuplicateId {
                    cluster: c.id.clone(),
                });
            }
            st.managed.push(fresh && !c.skip_reconcile);
            st.pin.push(match c.shard {
                Some(p) if (0..i64::from(replicas)).contains(&p) => Some(p as u32),
                Some(p) if !c.skip_reconcile && fresh => {
                    st.warnings.push(PlacementWarning::PinOutOfRange {
                        cluster: c.id.clone(),
                        shard: p,
                        replicas,
                    });
                    None
                }
                _ => None,
            });
        }
        self.compute_weights_and_targets(previous.map(|p| &p.local_zones));
        let st = &mut self.state;
        st.shard_of = vec![None; clusters.len()];
        st.load = vec![0; self.shards.len()];
        if self.shards.is_empty() {
            let n = st.managed.iter().filter(|&&m| m).count();
            if n > 0 {
                st.warnings.push(PlacementWarning::NoShards { clusters: n });
            }
            return self.placement();
        }

        // Stay: pins, then previous shards that still exist and are still allowed.
        let mut unplaced = Vec::new();
        for (i, cluster) in clusters.iter().enumerate() {
            if !self.state.managed[i] {
                continue;
            }
            let kept = match self.state.pin[i] {
                Some(p) => Some(p),
                None => previous
                    .and_then(|p| p.assignment.get(&cluster.id))
                    .filter(|&s| s < replicas && self.tier(i, s).is_some()),
            };
            match kept {
                Some(s) => self.assign(i, Some(s)),
                None => unplaced.push(i),
            }
        }
        self.place_unplaced(unplaced);
        self.rebalance();
        self.finish_warnings();
        self.placement()
    }

    /// Adds one cluster (or replaces one with the same id) to the last placement and
    /// returns the clusters that moved, the new one included. Equivalent to a full
    /// [`BalancedPlacer::place`] with the current placement as previous, but O(shards)
    /// when nothing needs rebalancing and zones are not in use.
    pub fn add_cluster(&mut self, cluster: &Cluster, load: u64) -> Vec<ClusterMove> {
        self.ensure_index();
        if let Some(&i) = self.state.index.get(&cluster.id)
            && self.state.managed[i]
        {
            let mut moves = self.remove_cluster(&cluster.id);
            moves.extend(self.add_cluster(cluster, load));
            return moves;
        }
        let needs_full = self.state.layout.is_some()
            || !matches!(self.state.zone_plan, Some(ZonePlan::Unused))
            || cluster.zone().is_some()
            || (self.state.unit_loads && load > 0)
            || cluster
                .shard
                .is_some_and(|p| !(0..self.shards.len() as i64).contains(&p));
        if needs_full {
            let mut clusters = self.live_clusters();
            let mut loads = self.live_loads();
            clusters.push(cluster.clone());
            loads.push(load);
            return self.replace_all(&clusters, &loads);
        }
        let st = &mut self.state;
        let i = st.clusters.len();
        st.clusters.push(cluster.clone());
        st.raw.push(load);
        st.keys.push(cluster_key(&cluster.id));
        st.w.push(if st.unit_loads { 1 } else { load });
        st.managed.push(!cluster.skip_reconcile);
        st.pin.push(cluster.shard.map(|p| p as u32));
        st.shard_of.push(None);
        st.index.insert(cluster.id.clone(), i);
        st.log = Some(Vec::new());
        if !cluster.skip_reconcile {
            self.agnostic_targets();
            match self.state.pin[i] {
                Some(p) => self.assign(i, Some(p)),
                None => self.place_unplaced(vec![i]),
            }
            self.rebalance();
        }
        self.take_log()
    }

    /// Removes a cluster from the last placement and returns the clusters that moved
    /// (the removed one with `to: None`).
    pub fn remove_cluster(&mut self, id: &str) -> Vec<ClusterMove> {
        self.ensure_index();
        let Some(&i) = self.state.index.get(id) else {
            return Vec::new();
        };
        if self.state.layout.is_some() || self.state.unit_loads {
            let keep: Vec<usize> = (0..self.state.clusters.len())
                .filter(|&j| j != i && self.state.managed[j])
                .collect();
            let clusters: Vec<Cluster> = keep
                .iter()
                .map(|&j| self.state.clusters[j].clone())
                .collect();
            let loads: Vec<u64> = keep.iter().map(|&j| self.state.raw[j]).collect();
            return self.replace_all(&clusters, &loads);
        }
        self.state.log = Some(Vec::new());
        self.assign(i, None);
        self.state.managed[i] = false;
        self.state.index.remove(id);
        self.agnostic_targets();
        self.rebalance();
        self.take_log()
    }

    /// The current placement, by cluster id.
    pub fn assignment(&self) -> Assignment {
        let st = &self.state;
        (0..st.clusters.len())
            .filter_map(|i| st.shard_of[i].map(|s| (st.clusters[i].id.clone(), s)))
            .collect()
    }

    // === state set-up ===

    fn compute_weights_and_targets(
        &mut self,
        previous_local: Option<&std::collections::BTreeSet<String>>,
    ) {
        let st = &mut self.state;
        let total: u64 = (0..st.raw.len())
            .filter(|&i| st.managed[i])
            .map(|i| st.raw[i])
            .sum();
        st.unit_loads = total == 0;
        st.w = if st.unit_loads {
            vec![1; st.raw.len()]
        } else {
            st.raw.clone()
        };
        match zones::plan(
            &st.clusters,
            &st.managed,
            &st.w,
            &self.shards,
            &self.config.zones,
            previous_local,
        ) {
            Ok(layout) => {
                st.zone_plan = Some(ZonePlan::Aware(layout.reports.clone()));
                st.target = layout.targets.clone();
                st.layout = Some(layout);
                self.bounds_from_targets();
            }
            Err(plan) => {
                st.zone_plan = Some(plan);
                st.layout = None;
                self.agnostic_targets();
            }
        }
    }

    /// Targets proportional to capacity, water-filled: a cluster heavier than the level it
    /// would get can only be isolated on a shard of its own, so such clusters are taken out
    /// (with one average shard each) and the level is computed over the rest. Without this,
    /// one hot cluster would leave every other shard "below target" and nothing would ever
    /// count as a donor.
    fn agnostic_targets(&mut self) {
        let st = &mut self.state;
        let n = self.shards.len();
        let total: u64 = (0..st.w.len())
            .filter(|&i| st.managed[i])
            .map(|i| st.w[i])
            .sum();
        let capacity: f64 = self.shards.iter().map(|s| f64::from(s.capacity)).sum();
        let slot = if n > 0 { capacity / n as f64 } else { 1.0 };
        let mut hot = 0usize;
        let mut level = total as f64 / capacity;
        while hot + 1 < n {
            let (k, hot_load) = (0..st.w.len())
                .filter(|&i| st.managed[i] && st.w[i] as f64 > level * slot)
                .fold((0usize, 0u64), |(k, h), i| (k + 1, h + st.w[i]));
            if k == hot || k + 1 > n {
                break;
            }
            hot = k;
            level = (total - hot_load) as f64 / (capacity - hot as f64 * slot);
        }
        st.target = self
            .shards
            .iter()
            .map(|s| level * f64::from(s.capacity))
            .collect();
        self.bounds_from_targets();
    }

    fn bounds_from_targets(&mut self) {
        let eps = self.config.tolerance.max(0.0);
        let st = &mut self.state;
        st.hi = st.target.iter().map(|t| t * (1.0 + eps)).collect();
        st.lo = st.target.iter().map(|t| t * (1.0 - eps).max(0.0)).collect();
    }

    fn ensure_index(&mut self) {
        let st = &mut self.state;
        if st.index.is_empty() && !st.clusters.is_empty() {
            st.index = (0..st.clusters.len())
                .filter(|&i| st.managed[i])
                .map(|i| (st.clusters[i].id.clone(), i))
                .collect();
        }
    }

    fn live_clusters(&self) -> Vec<Cluster> {
        let st = &self.state;
        (0..st.clusters.len())
            .filter(|&i| st.managed[i] || st.clusters[i].skip_reconcile)
            .map(|i| st.clusters[i].clone())
            .collect()
    }

    fn live_loads(&self) -> Vec<u64> {
        let st = &self.state;
        (0..st.clusters.len())
            .filter(|&i| st.managed[i] || st.clusters[i].skip_reconcile)
            .map(|i| st.raw[i])
            .collect()
    }

    /// Full recomputation with the current placement as previous; returns the moves.
    fn replace_all(&mut self, clusters: &[Cluster], loads: &[u64]) -> Vec<ClusterMove> {
        let before = self.assignment();
        let previous = PreviousPlacement {
            assignment: before.clone(),
            local_zones: match &self.state.zone_plan {
                Some(ZonePlan::Aware(z)) => z
                    .iter()
                    .filter(|z| z.local)
                    .map(|z| z.zone.clone())
                    .collect(),
                _ => Default::default(),
            },
        };
        self.place(clusters, loads, Some(&previous));
        let after = self.assignment();
        let mut moves: Vec<ClusterMove> = after
            .iter()
            .filter(|(id, s)| before.get(id) != Some(*s))
            .map(|(id, s)| ClusterMove {
                cluster: id.to_owned(),
                from: before.get(id),
                to: Some(s),
            })
            .collect();
        moves.extend(
            before
                .iter()
                .filter(|(id, _)| after.get(id).is_none())
                .map(|(id, s)| ClusterMove {
                    cluster: id.to_owned(),
                    from: Some(s),
                    to: None,
                }),
        );
        moves
    }

    fn take_log(&mut self) -> Vec<ClusterMove> {
        let st = &mut self.state;
        let log = st.log.take().unwrap_or_default();
        // Collapse several moves of one cluster into first-from → last-to.
        let mut order: Vec<usize> = Vec::new();
        let mut net: FxHashMap<usize, (Option<u32>, Option<u32>)> = FxHashMap::default();
        for (i, from, to) in log {
            net.entry(i).and_modify(|e| e.1 = to).or_insert_with(|| {
                order.push(i);
                (from, to)
            });
        }
        order
            .into_iter()
            .filter_map(|i| {
                let (from, to) = net[&i];
                (from != to).then(|| ClusterMove {
                    cluster: st.clusters[i].id.clone(),
                    from,
                    to,
                })
            })
            .collect()
    }

    // === the decision steps ===

    /// Whether cluster `i` may go to shard `s`: `Some(0)` at home, `Some(1)` elsewhere
    /// (only clusters of a spilling zone), `None` not at all.
    fn tier(&self, i: usize, s: u32) -> Option<u8> {
        let Some(layout) = &self.state.layout else {
            return Some(0);
        };
        let cz = layout.cluster_zone[i];
        if cz == layout.shard_zone[s as usize] {
            Some(0)
        } else if layout.local[cz] {
            None
        } else {
            Some(1)
        }
    }

    /// The shard cluster `i` should go to: the one it prefers most among those it may use,
    /// taking first those that stay below target, then below the bound (home zone before
    /// other zones each time). `strict` refuses a shard that would exceed its bound;
    /// otherwise the least-full shard is the last resort.
    fn choose(&self, i: usize, exclude: Option<u32>, strict: bool) -> Option<u32> {
        let st = &self.state;
        let w = st.w[i] as f64;
        let key = st.keys[i];
        // Best (score, shard) per (phase, tier): below target / below bound × home / away.
        let mut best: [Option<(u64, u32)>; 4] = [None; 4];
        let mut least: Option<(f64, u64, u32)> = None;
        for s in 0..self.shards.len() as u32 {
            if Some(s) == exclude {
                continue;
            }
            let Some(tier) = self.tier(i, s) else {
                continue;
            };
            let su = s as usize;
            let sc = score(key, self.salts[su]);
            let after = st.load[su] as f64 + w;
            let mut offer = |slot: usize| {
                if best[slot].is_none_or(|(b, _)| sc > b) {
                    best[slot] = Some((sc, s));
                }
            };
            if after <= st.target[su] {
                offer(usize::from(tier));
            }
            if after <= st.hi[su] {
                offer(2 + usize::from(tier));
            }
            let fill = if st.hi[su] > 0.0 {
                after / st.hi[su]
            } else {
                f64::INFINITY
            };
            if least.is_none_or(|(f, b, _)| fill < f || (fill == f && sc > b)) {
                least = Some((fill, sc, s));
            }
        }
        best.iter().flatten().next().map(|&(_, s)| s).or(if strict {
            None
        } else {
            least.map(|(_, _, s)| s)
        })
    }

    fn assign(&mut self, i: usize, to: Option<u32>) {
        let st = &mut self.state;
        let from = st.shard_of[i];
        if from == to {
            return;
        }
        if let Some(f) = from {
            st.load[f as usize] -= st.w[i];
        }
        if let Some(t) = to {
            st.load[t as usize] += st.w[i];
        }
        st.shard_of[i] = to;
        if let Some(log) = &mut st.log {
            log.push((i, from, to));
        }
    }

    /// Places clusters without a shard, heaviest first (ties by id, so input order does not
    /// matter).
    fn place_unplaced(&mut self, mut unplaced: Vec<usize>) {
        let st = &self.state;
        unplaced.sort_by(|&a, &b| {
            st.w[b]
                .cmp(&st.w[a])
                .then_with(|| st.clusters[a].id.cmp(&st.clusters[b].id))
        });
        for i in unplaced {
            let s = self.choose(i, None, false);
            self.assign(i, s);
        }
    }

    fn finish_warnings(&mut self) {
        let st = &mut self.state;
        let mut isolated = vec![false; st.load.len()];
        for i in 0..st.clusters.len() {
            let Some(s) = st.shard_of[i] else { continue };
            let bound = st.hi[s as usize];
            if !st.unit_loads && st.w[i] as f64 > bound {
                isolated[s as usize] = true;
                st.warnings.push(PlacementWarning::HotCluster {
                    cluster: st.clusters[i].id.clone(),
                    load: st.w[i],
                    bound,
                });
            }
        }
        for (s, &isolated) in isolated.iter().enumerate() {
            if st.load[s] as f64 > st.hi[s] && !isolated {
                st.warnings.push(PlacementWarning::ShardOverBound {
                    shard: s as u32,
                    load: st.load[s],
                    bound: st.hi[s],
                });
            }
        }
    }

    fn placement(&self) -> Placement {
        let st = &self.state;
        let mut cross = CrossZone::default();
        for (i, c) in st.clusters.iter().enumerate() {
            let (Some(s), Some(cz)) = (st.shard_of[i], c.zone()) else {
                continue;
            };
            let Some(sz) = self.shards[s as usize].zone.as_deref() else {
                continue;
            };
            cross.zoned_load += st.raw[i];
            if sz != cz {
                cross.clusters += 1;
                cross.load += st.raw[i];
            }
        }
        Placement {
            shards: st.shard_of.clone(),
            targets: st.target.clone(),
            zones: st.zone_plan.clone().unwrap_or(ZonePlan::Unused),
            cross_zone: cross,
            warnings: st.warnings.clone(),
        }
    }
}
