//! The engine's working state and step 1: effective loads, targets and bounds.

use std::collections::BTreeSet;

use rustc_hash::{FxHashMap, FxHashSet};

use super::BalancedPlacer;
use super::order::MemberIndex;
use crate::model::Cluster;
use crate::model::ShardSpec;
use crate::placement::PlacementWarning;
use crate::placement::rendezvous::stable_hash;
use crate::placement::zones::{self, ZoneFallback, ZoneLayout, ZonePlan};

/// (cluster index, from, to)
pub(super) type LoggedMove = (usize, Option<u32>, Option<u32>);

/// Everything about one placement, as parallel vectors indexed by cluster (input order,
/// then clusters added incrementally) and by shard. Only what the steps need is kept: not
/// the whole `Cluster`, whose copy would cost more than the placement.
#[derive(Debug, Clone, Default)]
pub(super) struct State {
    pub ids: Vec<String>,
    pub zones: Vec<Option<String>>,
    pub raw_pin: Vec<Option<i64>>,
    pub skip: Vec<bool>,
    pub raw: Vec<u64>,
    pub keys: Vec<u64>,
    /// Effective load: the raw load, or 1 each when the whole fleet has no load (so that
    /// cluster counts are balanced instead).
    pub w: Vec<u64>,
    pub unit_loads: bool,
    /// Takes part in placement (not skip-reconcile, not a duplicate, not removed).
    pub managed: Vec<bool>,
    /// A valid pin.
    pub pin: Vec<Option<u32>>,
    pub shard_of: Vec<Option<u32>>,
    /// The vacant shard a cluster was displaced from, while it is away.
    pub home: Vec<Option<u32>>,
    pub load: Vec<u64>,
    pub target: Vec<f64>,
    pub hi: Vec<f64>,
    pub lo: Vec<f64>,
    pub layout: Option<ZoneLayout>,
    pub zone_plan: Option<ZonePlan>,
    pub warnings: Vec<PlacementWarning>,
    /// Managed clusters by rendezvous key. Distinct ids may share a key (2⁻⁶⁴ per pair);
    /// [`State::lookup`] then falls back to a scan, so correctness never rests on it.
    pub index: FxHashMap<u64, usize>,
    /// Moves recorded while applying an incremental update.
    pub log: Option<Vec<LoggedMove>>,
    /// While shedding: the movable clusters of the shards it works on, in order.
    pub members: Option<MemberIndex>,
}

impl State {
    pub fn new(clusters: &[Cluster], loads: &[u64], replicas: u32) -> Self {
        let n = clusters.len();
        let mut st = State {
            ids: Vec::with_capacity(n),
            zones: Vec::with_capacity(n),
            raw_pin: Vec::with_capacity(n),
            skip: Vec::with_capacity(n),
            raw: Vec::with_capacity(n),
            keys: Vec::with_capacity(n),
            managed: Vec::with_capacity(n),
            pin: Vec::with_capacity(n),
            shard_of: vec![None; n],
            home: vec![None; n],
            load: vec![0; replicas as usize],
            index: FxHashMap::with_capacity_and_hasher(n, Default::default()),
            ..State::default()
        };
        let mut seen = FxHashSet::with_capacity_and_hasher(n, Default::default());
        for (i, c) in clusters.iter().enumerate() {
            let fresh = seen.insert(c.id.as_str());
            if !fresh {
                st.warnings.push(PlacementWarning::DuplicateId {
                    cluster: c.id.clone(),
                });
            }
            let managed = fresh && !c.skip_reconcile;
            st.pin.push(match c.shard {
                Some(p) if (0..i64::from(replicas)).contains(&p) => Some(p as u32),
                Some(p) if managed => {
                    st.warnings.push(PlacementWarning::PinOutOfRange {
                        cluster: c.id.clone(),
                        shard: p,
                        replicas,
                    });
                    None
                }
                _ => None,
            });
            let key = stable_hash(&c.id);
            if managed {
                st.index.entry(key).or_insert(i);
            }
            st.ids.push(c.id.clone());
            st.zones.push(c.zone().map(str::to_owned));
            st.raw_pin.push(c.shard);
            st.skip.push(c.skip_reconcile);
            st.raw.push(loads.get(i).copied().unwrap_or(0));
            st.keys.push(key);
            st.managed.push(managed);
        }
        st
    }

    /// Appends one cluster (incremental add; the caller has checked the pin and zone).
    pub fn push(&mut self, c: &Cluster, load: u64) -> usize {
        let i = self.ids.len();
        let key = stable_hash(&c.id);
        let managed = !c.skip_reconcile;
        if managed {
            self.index.entry(key).or_insert(i);
        }
        self.ids.push(c.id.clone());
        self.zones.push(c.zone().map(str::to_owned));
        self.raw_pin.push(c.shard);
        self.skip.push(c.skip_reconcile);
        self.raw.push(load);
        self.keys.push(key);
        self.w.push(if self.unit_loads { 1 } else { load });
        self.managed.push(managed);
        self.pin.push(c.shard.map(|p| p as u32));
        self.shard_of.push(None);
        self.home.push(None);
        i
    }

    /// Drops a managed cluster (incremental remove); its slot stays, unmanaged.
    pub fn forget(&mut self, i: usize) {
        self.managed[i] = false;
        self.skip[i] = false;
        if self.index.get(&self.keys[i]) == Some(&i) {
            self.index.remove(&self.keys[i]);
        }
    }

    /// The managed cluster with this id.
    pub fn lookup(&self, id: &str) -> Option<usize> {
        let i = *self.index.get(&stable_hash(id))?;
        if self.ids[i] == id {
            return Some(i);
        }
        // Two ids share a key: find it the slow way.
        (0..self.ids.len()).find(|&j| self.managed[j] && self.ids[j] == id)
    }

    /// Whether cluster `i` may be moved by rebalancing: managed, not pinned, with load.
    pub fn movable(&self, i: usize) -> bool {
        self.managed[i] && self.pin[i].is_none() && self.w[i] > 0
    }

    /// Zones that kept their clusters local.
    pub fn local_zones(&self) -> BTreeSet<String> {
        match &self.zone_plan {
            Some(ZonePlan::Aware(z)) => z
                .iter()
                .filter(|z| z.local)
                .map(|z| z.zone.clone())
                .collect(),
            _ => BTreeSet::new(),
        }
    }
}

impl BalancedPlacer {
    pub(super) fn compute_weights_and_targets(
        &mut self,
        previous_local: Option<&BTreeSet<String>>,
    ) {
        // Zones are planned over the usable shards only; `usable[k]` is the k-th of them.
        let usable: Vec<usize> = (0..self.shards.len()).filter(|&s| self.usable(s)).collect();
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
        let mut index_of = vec![None; self.shards.len()];
        for (k, &s) in usable.iter().enumerate() {
            index_of[s] = Some(k);
        }
        let specs: Vec<ShardSpec> = usable.iter().map(|&s| self.shards[s].clone()).collect();
        let pins: Vec<Option<u32>> = st
            .pin
            .iter()
            .map(|p| p.and_then(|p| index_of[p as usize]).map(|k| k as u32))
            .collect();
        let input = zones::ZoneInput {
            ids: &st.ids,
            zones: &st.zones,
            managed: &st.managed,
            pins: &pins,
            loads: &st.w,
        };
        let planned =
            zones::plan(&input, &specs, &self.config.zones, previous_local).map(|mut layout| {
                layout.shard_zone = index_of
                    .iter()
                    .map(|k| k.map_or(usize::MAX, |k| layout.shard_zone[k]))
                    .collect();
                layout.targets = index_of
                    .iter()
                    .map(|k| k.map_or(0.0, |k| layout.targets[k]))
                    .collect();
                layout
            });
        let planned = planned.map_err(|plan| match plan {
            ZonePlan::Fallback(ZoneFallback::ShardWithoutZone { shard }) => {
                ZonePlan::Fallback(ZoneFallback::ShardWithoutZone {
                    shard: usable[shard as usize] as u32,
                })
            }
            other => other,
        });
        match planned {
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
    ///
    /// With `hot` clusters of total load `H` taken out, the level per unit of capacity is
    /// `(T − H) / (C − hot × C/n)`, and a cluster is hot when heavier than the level times
    /// an average shard's capacity `C/n`, that is when `w × (n − hot) > T − H`: integers,
    /// compared exactly. Each round's hot clusters are heavier than the level, so taking
    /// them out lowers it and the hot set only grows: at most `n` rounds. (The comparison
    /// used to be in floating point, where a cluster exactly at the level could be hot in
    /// one round and not in the next, and the loop then alternated forever with some mixed
    /// capacities; the rounds now also stop as soon as the set would not grow.)
    pub(super) fn agnostic_targets(&mut self) {
        let usable: Vec<bool> = (0..self.shards.len()).map(|s| self.usable(s)).collect();
        let st = &mut self.state;
        let n = usable.iter().filter(|&&u| u).count();
        let total: u64 = (0..st.w.len())
            .filter(|&i| st.managed[i])
            .map(|i| st.w[i])
            .sum();
        let capacity: f64 = self
            .shards
            .iter()
            .zip(&usable)
            .filter(|(_, u)| **u)
            .map(|(s, _)| f64::from(s.capacity))
            .sum();
        let (mut hot, mut hot_load) = (0usize, 0u64);
        while hot + 1 < n {
            let (rest, slots) = (u128::from(total - hot_load), (n - hot) as u128);
            let (k, load) = (0..st.w.len())
                .filter(|&i| st.managed[i] && u128::from(st.w[i]) * slots > rest)
                .fold((0usize, 0u64), |(k, h), i| (k + 1, h + st.w[i]));
            if k <= hot || k + 1 > n {
                break;
            }
            (hot, hot_load) = (k, load);
        }
        let slot = if n > 0 { capacity / n as f64 } else { 1.0 };
        let level = (total - hot_load) as f64 / (capacity - hot as f64 * slot);
        st.target = self
            .shards
            .iter()
            .zip(&usable)
            .map(|(s, &u)| {
                if u {
                    level * f64::from(s.capacity)
                } else {
                    0.0
                }
            })
            .collect();
        self.bounds_from_targets();
    }

    fn bounds_from_targets(&mut self) {
        let eps = self.config.tolerance.max(0.0);
        let st = &mut self.state;
        st.hi = st.target.iter().map(|t| t * (1.0 + eps)).collect();
        st.lo = st.target.iter().map(|t| t * (1.0 - eps).max(0.0)).collect();
    }
}
