//! Slices in the simulation (`SimConfig::slices`): the fleet has applications, a hub
//! cluster holding about a third of them, and the distributor splits costly clusters
//! (`ReplicaConfig::split_clusters`). Every cost change (`Ev::Costs`) may move the hub's
//! load to another phase — worth less than a share, or about 1.6, 2.6 or 3.6 shares — so
//! that during a run it is split, re-split into another count and joined whole again,
//! while the failures hit the replicas owning its slices.
//!
//! Checked at every event, replacing the per-cluster checks: **one acting owner per
//! application** — each replica's acting units expanded to the applications they hold (a
//! whole cluster all of its own, a slice those `UnitId::holds` gives it) — and one per
//! unit (a whole cluster or a slice, by unit id). G2 is measured per application: a unit id
//! lives only as long as its cluster's slice count, so only an application's windows span
//! a re-split (its old slice stopped, its new one not yet started).

use std::collections::{BTreeMap, HashMap};

use fleetshard_core::App;
use fleetshard_core::placement::slices::UnitId;

use super::*;
use crate::fenced::AssignmentDoc;
use crate::sim::world::Slicing;

/// The hub's index in the pool.
const HUB: usize = 0;

/// The fleet's applications, and what each replica acts on expanded to them.
pub(super) struct AppFleet {
    /// Every application of every cluster of the pool (the absent clusters' resolve to
    /// nothing).
    apps: Vec<App>,
    /// Per pool cluster, its applications (indexes into `apps`).
    by_cluster: Vec<Vec<usize>>,
    /// Pool cluster id → its index.
    cluster_index: HashMap<String, usize>,
    /// Unit ids met so far → index into `units`.
    unit_index: HashMap<String, usize>,
    /// Per unit met: its id and the applications it holds.
    units: Vec<(String, Vec<usize>)>,
    /// This check's (unit, replica) pairs.
    acting: Vec<(usize, usize)>,
    /// The checks so far, and per application (check, replica, unit) of the last unit it
    /// was found acted on through.
    checks: u64,
    last: Vec<(u64, usize, usize)>,
    /// This check's (replica, unit, other unit, application): one replica acting on an
    /// application through two units at once.
    twice: Vec<(usize, usize, usize, usize)>,
    /// The hub's phase: how many shares its load is worth, in tenths (0: its app count).
    phase: u64,
    /// The last committed generation's slice count of each cluster (1: whole).
    committed: Option<BTreeMap<String, u32>>,
}

impl AppFleet {
    /// Every application, as `FleetInput::apps` takes them.
    pub(super) fn all(&self) -> &[App] {
        &self.apps
    }

    /// Replica `node` acts on `unit`: it acts on every application the unit holds.
    pub(super) fn add(&mut self, checker: &mut Checker, node: usize, unit: &str) {
        let u = match self.unit_index.get(unit) {
            Some(&u) => u,
            None => self.learn(unit),
        };
        self.acting.push((u, node));
        for &app in &self.units[u].1 {
            checker.add_at(node, app);
            let last = &mut self.last[app];
            if last.0 == self.checks && last.1 == node && last.2 != u {
                self.twice.push((node, last.2.min(u), last.2.max(u), app));
            }
            *last = (self.checks, node, u);
        }
    }

    /// Indexes a unit id not met before, with the applications it holds.
    fn learn(&mut self, unit: &str) -> usize {
        let id = UnitId::parse(unit);
        let held = match self.cluster_index.get(id.cluster) {
            Some(&c) => self.by_cluster[c]
                .iter()
                .copied()
                .filter(|&a| id.holds(&self.apps[a].namespace, &self.apps[a].name))
                .collect(),
            None => Vec::new(),
        };
        self.units.push((unit.to_owned(), held));
        self.unit_index
            .insert(unit.to_owned(), self.units.len() - 1);
        self.units.len() - 1
    }

    /// Ends the check at `t`: a unit acted on by two replicas is an overlap (not recorded
    /// when `fenced`: see `Sim::fenced_by_replacement`), and so is an application one
    /// replica acts on through two units (a slice started while another unit of its
    /// cluster still stops there: the stop would end, or undo, the new unit's work), which
    /// the per-application check cannot see, as one replica is one owner.
    pub(super) fn end(
        &mut self,
        t: u64,
        fenced: bool,
        out: &mut Outcome,
        name: impl Fn(usize) -> String,
    ) {
        let mut acting = std::mem::take(&mut self.acting);
        acting.sort_unstable();
        acting.dedup();
        for pair in acting.chunk_by(|a, b| a.0 == b.0) {
            if pair.len() > 1 && !fenced {
                let who = pair.iter().map(|&(_, n)| name(n)).collect();
                out.unit_overlaps
                    .push((t, self.units[pair[0].0].0.clone(), who));
            }
        }
        acting.clear();
        self.acting = acting;
        self.twice.sort_unstable();
        self.twice.dedup_by_key(|&mut (node, a, b, _)| (node, a, b));
        for (node, a, b, app) in self.twice.drain(..) {
            out.disagreements.push(format!(
                "t={t}: {} acts on {} through both {} and {} (a unit started while another \
                 of its cluster still stops there)",
                name(node),
                self.apps[app].name,
                self.units[a].0,
                self.units[b].0
            ));
        }
        self.checks += 1;
    }

    /// A generation was committed (`doc`): how it cut each cluster, against the last one.
    fn committed(&mut self, doc: &AssignmentDoc, slicing: &mut Slicing) {
        let mut counts = BTreeMap::new();
        for unit in doc.clusters.keys() {
            let id = UnitId::parse(unit);
            let k = id.slice.map_or(1, |(_, k)| k);
            counts.insert(id.cluster.to_owned(), k);
            slicing.most_slices = slicing.most_slices.max(k);
        }
        for (cluster, &was) in self.committed.iter().flatten() {
            match (was, counts.get(cluster).copied()) {
                (1, Some(k)) if k > 1 => slicing.splits += 1,
                (was, Some(1)) if was > 1 => slicing.joins += 1,
                (was, Some(k)) if was > 1 && k > 1 && k != was => slicing.resplits += 1,
                _ => {}
            }
        }
        self.committed = Some(counts);
    }
}

impl Sim {
    /// With `SimConfig::slices`: the pool's applications (the hub about 35 % of the starting
    /// fleet's, the others 8–30 each), loads their counts, and the checker per application.
    pub(super) fn cut_into_apps(&mut self) {
        let counts: Vec<u64> = (0..self.pool.len())
            .map(|i| if i == HUB { 0 } else { self.rng.between(8, 30) })
            .collect();
        let others: u64 = counts[..self.cfg.clusters].iter().sum();
        let mut fleet = AppFleet {
            apps: Vec::new(),
            by_cluster: vec![Vec::new(); self.pool.len()],
            cluster_index: HashMap::new(),
            unit_index: HashMap::new(),
            units: Vec::new(),
            acting: Vec::new(),
            checks: 0,
            last: Vec::new(),
            twice: Vec::new(),
            phase: 0,
            committed: None,
        };
        for (i, c) in self.pool.iter().enumerate() {
            let n = if i == HUB {
                others * 35 / 65
            } else {
                counts[i]
            };
            for a in 0..n {
                fleet.by_cluster[i].push(fleet.apps.len());
                let name = format!("{}-{a:03}", c.id);
                fleet.apps.push(App::to_server("argocd", &name, &c.server));
            }
            fleet.cluster_index.insert(c.id.clone(), i);
            self.pool_loads[i] = n;
        }
        fleet.last = vec![(u64::MAX, 0, 0); fleet.apps.len()];
        let ids = fleet
            .apps
            .iter()
            .map(|a| format!("{}/{}", a.namespace, a.name));
        self.checker = Checker::of_ids(self.cfg.warmup_ms, 0, ids);
        for (i, apps) in fleet.by_cluster.iter().enumerate() {
            if i >= self.cfg.clusters {
                for &a in apps {
                    self.checker.set_present_at(a, false);
                }
            }
        }
        self.apps = Some(fleet);
    }

    /// A cluster (pool index) joins or leaves the fleet: for the checker, the cluster or,
    /// with slices, each of its applications.
    pub(super) fn set_cluster_present(&mut self, cluster: usize, present: bool) {
        match &self.apps {
            None => self.checker.set_present(&self.pool[cluster].id, present),
            Some(apps) => {
                for &a in &apps.by_cluster[cluster] {
                    self.checker.set_present_at(a, present);
                }
            }
        }
    }

    /// With slices, at a cost change: more often than not the hub's load moves to another
    /// phase (worth 0.6, 1.6, 2.6 or 3.6 shares of an even split over the shards, as many
    /// as there are shards), ±5 %, against the other present clusters' loads.
    pub(super) fn move_hub(&mut self) {
        let Some(apps) = &mut self.apps else {
            return;
        };
        let shards = u64::from(self.cfg.shards.max(2));
        if apps.phase == 0 || self.rng.chance(0.6) {
            let phases: Vec<u64> = [6, 16, 26, 36]
                .into_iter()
                .filter(|&p| p < shards * 10 && p != apps.phase)
                .collect();
            apps.phase = phases[self.rng.below(phases.len() as u64) as usize];
        }
        let members = self.fleets.last().map_or(&[][..], Vec::as_slice);
        let others: u64 = members
            .iter()
            .filter(|&&i| i != HUB)
            .map(|&i| self.pool_loads[i])
            .sum();
        // Worth `phase` tenths of a share of (hub + others) / shards.
        let load = apps.phase * others / (shards * 10 - apps.phase);
        self.pool_loads[HUB] = (load * (95 + self.rng.below(11)) / 100).max(1);
        if tracing() {
            eprintln!(
                "{:>6} hub load {} ({} ‰ shares)",
                self.t,
                self.pool_loads[HUB],
                apps.phase * 100
            );
        }
    }

    /// A write reached the store: with slices, a committed generation is counted by how it
    /// cuts the clusters.
    pub(super) fn count_cut(&mut self, key: &str) {
        let Some(apps) = &mut self.apps else {
            return;
        };
        if key != assignment_key("fs/") {
            return;
        }
        let doc = self.store.entries.get(key);
        if let Some(doc) = doc.and_then(|(v, _)| serde_json::from_slice::<AssignmentDoc>(v).ok()) {
            apps.committed(&doc, &mut self.checker.out.slicing);
        }
    }

    /// With slices, a failure of replica `n`: counted when it hits a replica acting on a
    /// slice (an outage: any replica).
    pub(super) fn count_fault_on_slices(&mut self, n: usize, fault: Fault) {
        if self.apps.is_none() || fault == Fault::Restart {
            return;
        }
        let hit = |node: &Node| {
            node.life
                .acting(self.t)
                .any(|u| UnitId::parse(u).slice.is_some())
        };
        let on_slices = match fault {
            Fault::Outage(_) => self.nodes.iter().any(hit),
            _ => hit(&self.nodes[n]),
        };
        if on_slices {
            self.checker.out.slicing.on_slice_owners += 1;
        }
    }
}
