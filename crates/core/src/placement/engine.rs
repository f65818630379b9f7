//! The balanced placement engine: the public [`BalancedPlacer`], full and incremental
//! placement, and the report. The steps live in `engine/`: `state.rs` (targets),
//! `decide.rs` (stay and place), `rebalance.rs` (shed and fill), `exact.rs` (a small
//! fleet's exact fit).

mod decide;
#[cfg(test)]
mod equivalence;
mod exact;
mod order;
mod rebalance;
#[cfg(test)]
mod reference;
mod state;

use rustc_hash::FxHashMap;

use self::state::State;
use super::rendezvous::shard_salt;
use super::zones::ZonePlan;
use super::{CrossZone, Placement, PlacementConfig, PlacementWarning, PreviousPlacement};
use crate::assignment::Assignment;
use crate::model::{Cluster, ShardSpec, ZONE_LABEL};

/// Computes balanced placements and keeps the last one, so that single-cluster changes can
/// be applied without recomputing the fleet ([`BalancedPlacer::add_cluster`]).
#[derive(Debug, Clone)]
pub struct BalancedPlacer {
    config: PlacementConfig,
    shards: Vec<ShardSpec>,
    salts: Vec<u64>,
    /// Shards that exist but have no live holder: they get no clusters, and keep their
    /// number (and so every cluster's preferences) for when they come back.
    vacant: Vec<bool>,
    state: State,
    /// Tests: rebalance with the first, scanning implementation (`engine/reference.rs`).
    #[cfg(test)]
    reference: bool,
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

impl BalancedPlacer {
    /// A placer for `shards` (their count is the replica count; capacities of 0 count as 1).
    pub fn new(config: PlacementConfig, mut shards: Vec<ShardSpec>) -> Self {
        for s in &mut shards {
            s.capacity = s.capacity.max(1);
        }
        let salts = (0..shards.len() as u32).map(shard_salt).collect();
        let vacant = vec![false; shards.len()];
        BalancedPlacer {
            config,
            shards,
            salts,
            vacant,
            state: State::default(),
            #[cfg(test)]
            reference: false,
        }
    }

    /// Marks shards as vacant (no live holder): placement gives them nothing and moves
    /// what they held to the others, as if they did not exist, but shard numbers and
    /// preferences stay, so the clusters that return when a shard is held again are
    /// mostly those it had. Numbers out of range are ignored.
    pub fn with_vacant(mut self, vacant: impl IntoIterator<Item = u32>) -> Self {
        for s in vacant {
            if let Some(v) = self.vacant.get_mut(s as usize) {
                *v = true;
            }
        }
        self
    }

    /// Whether shard `s` can take clusters.
    fn usable(&self, s: usize) -> bool {
        !self.vacant[s]
    }

    /// Places the fleet from scratch, staying close to `previous`.
    pub fn place(
        &mut self,
        clusters: &[Cluster],
        loads: &[u64],
        previous: Option<&PreviousPlacement>,
    ) -> Placement {
        self.state = State::new(clusters, loads, self.shards.len() as u32);
        self.compute_weights_and_targets(previous.map(|p| &p.local_zones));
        if !(0..self.shards.len()).any(|s| self.usable(s)) {
            let n = self.state.managed.iter().filter(|&&m| m).count();
            if n > 0 {
                self.state
                    .warnings
                    .push(PlacementWarning::NoShards { clusters: n });
            }
            return self.placement();
        }
        let unplaced = self.stay(previous);
        self.place_unplaced(unplaced);
        self.rebalance();
        self.finish_warnings();
        self.placement()
    }

    /// Adds one cluster (or replaces one with the same id) to the last placement and
    /// returns the clusters that moved, the new one included. Gives exactly what a full
    /// [`BalancedPlacer::place`] with the current placement as previous gives, in
    /// O(clusters) simple scans when zones are not in use (no hashing, no sorting).
    pub fn add_cluster(&mut self, cluster: &Cluster, load: u64) -> Vec<ClusterMove> {
        if self.state.lookup(&cluster.id).is_some() {
            let mut moves = self.remove_cluster(&cluster.id);
            moves.extend(self.add_cluster(cluster, load));
            return moves;
        }
        let replicas = self.shards.len() as i64;
        let needs_full = !matches!(self.state.zone_plan, Some(ZonePlan::Unused))
            || cluster.zone().is_some()
            || (self.state.unit_loads && load > 0)
            || !(0..self.shards.len()).any(|s| self.usable(s))
            || cluster
                .shard
                .is_some_and(|p| !(0..replicas).contains(&p) || !self.usable(p as usize));
        if needs_full {
            let (mut clusters, mut loads) = self.live();
            clusters.push(cluster.clone());
            loads.push(load);
            return self.replace_all(&clusters, &loads);
        }
        let i = self.state.push(cluster, load);
        self.state.log = Some(Vec::new());
        if self.state.managed[i] {
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
        let Some(i) = self.state.lookup(id) else {
            return Vec::new();
        };
        if self.state.layout.is_some() || self.state.unit_loads {
            let (clusters, loads) = self.live();
            let keep: Vec<usize> = (0..clusters.len())
                .filter(|&k| clusters[k].id != id)
                .collect();
            let clusters: Vec<Cluster> = keep.iter().map(|&k| clusters[k].clone()).collect();
            let loads: Vec<u64> = keep.iter().map(|&k| loads[k]).collect();
            return self.replace_all(&clusters, &loads);
        }
        self.state.log = Some(Vec::new());
        self.assign(i, None);
        self.state.forget(i);
        self.agnostic_targets();
        self.rebalance();
        self.take_log()
    }

    /// Displaced clusters of the current placement and their home shards, by cluster id.
    fn homes(&self) -> Assignment {
        let st = &self.state;
        (0..st.ids.len())
            .filter_map(|i| st.home[i].map(|h| (st.ids[i].clone(), h)))
            .collect()
    }

    /// The current placement, by cluster id.
    pub fn assignment(&self) -> Assignment {
        let st = &self.state;
        (0..st.ids.len())
            .filter_map(|i| st.shard_of[i].map(|s| (st.ids[i].clone(), s)))
            .collect()
    }

    /// The clusters of the last placement that are still in it (managed or skipped), as
    /// model values, with their raw loads.
    fn live(&self) -> (Vec<Cluster>, Vec<u64>) {
        let st = &self.state;
        (0..st.ids.len())
            .filter(|&i| st.managed[i] || st.skip[i])
            .map(|i| {
                let mut c = Cluster {
                    id: st.ids[i].clone(),
                    shard: st.raw_pin[i],
                    skip_reconcile: st.skip[i],
                    ..Cluster::default()
                };
                if let Some(z) = &st.zones[i] {
                    c.labels.insert(ZONE_LABEL.to_owned(), z.clone());
                }
                (c, st.raw[i])
            })
            .unzip()
    }

    /// Full recomputation with the current placement as previous; returns the moves.
    fn replace_all(&mut self, clusters: &[Cluster], loads: &[u64]) -> Vec<ClusterMove> {
        let before = self.assignment();
        let previous = PreviousPlacement {
            assignment: before.clone(),
            local_zones: self.state.local_zones(),
            homes: self.homes(),
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
                    cluster: st.ids[i].clone(),
                    from,
                    to,
                })
            })
            .collect()
    }

    fn finish_warnings(&mut self) {
        // A cluster is reported hot against the larger of its shard's bound and its
        // shard's bound under an even spread of the whole load: the shard's own bound is
        // the share of what the hot clusters leave, 0 when they are all there is (two
        // clusters over three replicas), which no warning should print.
        let capacity: f64 = (0..self.shards.len())
            .filter(|&s| self.usable(s))
            .map(|s| f64::from(self.shards[s].capacity))
            .sum();
        let eps = self.config.tolerance.max(0.0);
        let st = &mut self.state;
        let total: u64 = (0..st.w.len())
            .filter(|&i| st.managed[i])
            .map(|i| st.w[i])
            .sum();
        let even_bound = |s: usize| {
            if capacity > 0.0 {
                total as f64 / capacity * f64::from(self.shards[s].capacity) * (1.0 + eps)
            } else {
                0.0
            }
        };
        let mut isolated = vec![false; st.load.len()];
        for i in 0..st.ids.len() {
            let Some(s) = st.shard_of[i] else { continue };
            let bound = st.hi[s as usize].max(even_bound(s as usize));
            if !st.unit_loads && st.w[i] as f64 > bound {
                isolated[s as usize] = true;
                st.warnings.push(PlacementWarning::HotCluster {
                    cluster: st.ids[i].clone(),
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
        for i in 0..st.ids.len() {
            let (Some(s), Some(cz)) = (st.shard_of[i], st.zones[i].as_deref()) else {
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
            homes: st.home.clone(),
            cross_zone: cross,
            warnings: st.warnings.clone(),
        }
    }
}
