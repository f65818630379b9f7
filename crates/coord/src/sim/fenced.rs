//! Fenced lease mode in the simulation: replicas run [`Replica`], polling the root every
//! `poll_ms` and ticking every 250 ms as the runner does, over the shared world.
//!
//! Checked at every event: **G1**, no cluster is acted on by two replicas at one instant
//! (an overlap can only begin when a cluster is started, which is an event). Measured:
//! **G2**, how long each cluster goes without an acting owner after a failure (bounded in
//! `tests.rs`). With slices both are judged per application, and G1 per unit too
//! (`fenced/apps.rs`).

use std::time::Duration;

use fleetshard_core::Cluster;
use fleetshard_core::placement::PlacementConfig;

use super::Rng;
use super::world::{
    Checker, Clock, Fault, FaultPlan, Latency, Life, Outcome, Queue, SimStore, tracing,
};
use crate::fenced::{
    Action, DesiredShards, FleetInput, InventorySummary, MAX_LEASE_RECORD_BYTES, Replica,
    ReplicaConfig, ShardCount, Ticket, assignment_key, desired_shards_key, distributor_key, encode,
    presence_key, shard_key,
};
use crate::lease::LeaseTiming;
use crate::store::{Listing, Precondition, StoreError};

/// The runner's renew timer.
const TICK_MS: u64 = 250;

/// Store latency: 1–20 ms, 2 % of calls 0.2–0.8 s, each way.
const LATENCY: Latency = Latency {
    normal: (1, 20),
    spike_chance: 0.02,
    spike: (200, 800),
};

struct Node {
    replica: Replica,
    life: Life,
    /// The fleet as this replica's inventory has it (churn reaches each one at its own
    /// moment): clusters, loads, revision.
    fleet: Vec<Cluster>,
    loads: Vec<u64>,
    fleet_rev: u64,
}

enum Ev {
    Poll(usize),
    Tick(usize),
    Deliver(usize, u64, Option<Listing>, u64),
    /// A write (`Some` value) or a delete (`None`) reaches the store.
    Arrive(usize, u64, Ticket, String, Option<Vec<u8>>, Precondition),
    Reply(usize, u64, Ticket, Result<u64, StoreError>),
    /// A delete's outcome reaches its replica.
    Deleted(usize, u64, Ticket, Result<(), StoreError>),
    Fault(usize, Fault),
    /// An operator runs `fleetshard scale N`.
    Scale(u32),
    /// The work on a cluster finished stopping.
    Stopped(usize, u64, String),
    /// A record overwritten with something no replica can read (the version bumped).
    Corrupt(Record),
    /// The store replaced by an empty one (a restore, a new cluster): every record gone,
    /// its revision continuing.
    ReplaceStore,
    /// A cluster joins or leaves the fleet.
    Churn,
    /// The measured costs change.
    Costs,
    /// A replica's inventory catches up with fleet revision `rev`.
    Fleet(usize, u64, u64),
}

/// Which record a corruption hits.
#[derive(Debug, Clone, Copy)]
enum Record {
    Shard(u32),
    Distributor,
    Presence(usize),
    Assignment,
    DesiredShards,
}

/// Knobs of one simulated run.
#[derive(Clone)]
pub(super) struct SimConfig {
    pub nodes: usize,
    pub shards: u32,
    pub clusters: usize,
    pub run_ms: u64,
    pub warmup_ms: u64,
    pub poll_ms: u64,
    /// The replicas start (first poll) at random within this many ms of each other.
    pub start_spread_ms: u64,
    pub timing: LeaseTiming,
    pub grace: Duration,
    /// Clock-rate error bound, as a fraction.
    pub drift: f64,
    pub faults: bool,
    /// Stops after a handover take up to 1.5 s (work in flight draining).
    pub slow_stops: bool,
    /// The shard count policy (default: `Fixed(shards)`).
    pub count: Option<ShardCount>,
    /// `fleetshard scale N` at these times (ms).
    pub scale: Vec<(u64, u32)>,
    /// Half the failures are replaced by a corrupt record of any kind (garbage, a newer
    /// schema, oversized) or the store replaced by an empty one.
    pub corruption: bool,
    /// Some failures are a store outage for every replica at once.
    pub outages: bool,
    /// Half the failures come with one or two more on other replicas at once.
    pub concurrent: bool,
    /// Clusters join and leave the fleet every 3–8 s; each replica's inventory sees a
    /// change 0–2 s after it happened.
    pub churn: bool,
    /// A SIGTERM's stops drain for 0–3 s (stop hooks slower than the runner's 2 s release
    /// bound): the runner gives up, the process drains on until its work ends or its lease
    /// deadline, and exits.
    pub long_drains: bool,
    /// The first this many replicas publish no inventory record until they restart: to the
    /// others they look like an older release's, so the distributor keeps its separate
    /// lease renewed, and binds it to its shard once they have all restarted (a rolling
    /// update).
    pub unannounced: usize,
    /// Loads are measured costs that change every 2–6 s (each ×(1 ± 30 %), one cluster
    /// at times ×5 or ÷5), placed with the distributor's hysteresis.
    pub costs: bool,
    /// Applications, a hub with a third of them, clusters split into slices, the hub's load
    /// moved at cost changes so that it is split, re-split and joined; G1 and G2 judged per
    /// application and G1 per unit too (`fenced/apps.rs`).
    pub slices: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            nodes: 4,
            shards: 3,
            clusters: 24,
            run_ms: 60_000,
            warmup_ms: 10_000,
            poll_ms: 200,
            start_spread_ms: 200,
            timing: LeaseTiming::default(),
            grace: Duration::from_millis(500),
            drift: 0.01,
            faults: true,
            // FLEETSHARD_SIM_SLOW_STOPS=0 measures the protocol alone (stops are instant).
            slow_stops: std::env::var("FLEETSHARD_SIM_SLOW_STOPS").as_deref() != Ok("0"),
            count: None,
            scale: Vec::new(),
            corruption: false,
            outages: false,
            concurrent: false,
            churn: false,
            long_drains: false,
            unannounced: 0,
            costs: false,
            slices: false,
        }
    }
}

pub(super) struct Sim {
    cfg: SimConfig,
    rng: Rng,
    pub(super) t: u64,
    queue: Queue<Ev>,
    pub(super) store: SimStore,
    nodes: Vec<Node>,
    /// Every cluster that is ever in the fleet (the first `cfg.clusters` at the start).
    pool: Vec<Cluster>,
    pool_loads: Vec<u64>,
    /// Each fleet revision's members (indexes into `pool`); the last is the truth.
    fleets: Vec<Vec<usize>>,
    /// The pool's loads at each fleet revision a cost change made (later ones: `pool_loads`).
    loads_at: Vec<Vec<u64>>,
    pub(super) checker: Checker,
    /// Since when no replica has held the distributor role (after warm-up).
    no_distributor_since: Option<u64>,
    /// When the store was last replaced by an empty one.
    replaced_at: Option<u64>,
    /// Whether the stored distributor record is bound to a shard (`None`: none stored yet).
    role_bound: Option<bool>,
    /// With slices: the applications, and who acts on which.
    apps: Option<apps::AppFleet>,
}

impl Sim {
    pub(super) fn new(cfg: SimConfig, seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        // With churn, a third more clusters come and go.
        let pool_size = cfg.clusters + if cfg.churn { cfg.clusters / 3 + 1 } else { 0 };
        let pool: Vec<Cluster> = (0..pool_size)
            .map(|i| Cluster::new(format!("c{i:03}"), format!("https://c{i}")))
            .collect();
        let pool_loads: Vec<u64> = (0..cfg.clusters).map(|_| rng.between(1, 10)).collect();
        let mut sim = Sim {
            cfg: cfg.clone(),
            rng,
            t: 0,
            queue: Queue::new(),
            store: SimStore::default(),
            nodes: Vec::new(),
            pool,
            pool_loads,
            fleets: vec![(0..cfg.clusters).collect()],
            loads_at: Vec::new(),
            checker: Checker::new(cfg.warmup_ms, 0, &[]),
            no_distributor_since: None,
            replaced_at: None,
            role_bound: None,
            apps: None,
        };
        // Loads of the clusters that may join, drawn after the others' (so that a
        // configuration without churn replays as before).
        for _ in cfg.clusters..pool_size {
            let load = sim.rng.between(1, 10);
            sim.pool_loads.push(load);
        }
        sim.checker = Checker::new(cfg.warmup_ms, 0, &sim.pool).with_loads(&sim.pool_loads);
        for c in &sim.pool[cfg.clusters..] {
            sim.checker.set_present(&c.id, false);
        }
        if cfg.slices {
            sim.cut_into_apps();
        }
        sim.checker.out.writes = vec![0; cfg.nodes];
        for i in 0..cfg.nodes {
            let node = sim.fresh_node(format!("replica-{i}"), 1);
            sim.nodes.push(node);
            let first = sim.rng.below(cfg.start_spread_ms.max(1));
            sim.queue.at(first, Ev::Poll(i));
            sim.queue.at(first + 1, Ev::Tick(i));
        }
        if cfg.faults {
            // One failure at a time, spaced so each can be recovered from: crash (and
            // restart), shutdown (and restart), pause beyond the lease, or a partition.
            let plan = FaultPlan {
                from: cfg.warmup_ms,
                until: cfg.run_ms,
                len: (500, 9_000),
                gap: (7_000, 10_000),
                tail: 8_000,
                outages: cfg.outages,
                concurrent: cfg.concurrent,
            };
            let faults = plan.draw(&mut sim.rng, cfg.nodes);
            sim.checker.out.faults = FaultPlan::count(&faults);
            if cfg.outages || cfg.concurrent {
                // With failures at once, a window is bounded from the last failure to
                // begin or end (a restart, the end of a pause, a partition or an outage):
                // until then, nobody may have been able to take over.
                for &(t, _, f) in &faults {
                    sim.checker.out.disruptions.push(t);
                    sim.checker.out.disruptions.extend(f.ends());
                }
            }
            let mut replaced = vec![false; cfg.nodes];
            for (t, n, f) in faults {
                if cfg.corruption && f != Fault::Restart && sim.rng.chance(0.5) {
                    // This failure becomes a corruption (and the restart of a crash or a
                    // shutdown is dropped).
                    replaced[n] = matches!(f, Fault::Crash | Fault::Shutdown);
                    let ev = sim.draw_corruption();
                    sim.queue.at(t, ev);
                } else if f == Fault::Restart && std::mem::take(&mut replaced[n]) {
                } else {
                    sim.queue.at(t, Ev::Fault(n, f));
                }
            }
        }
        for &(t, n) in &cfg.scale {
            sim.queue.at(t, Ev::Scale(n));
        }
        let mut t = cfg.warmup_ms;
        while (cfg.costs || cfg.slices) && t + 8_000 < cfg.run_ms {
            t += sim.rng.between(2_000, 6_000);
            sim.queue.at(t, Ev::Costs);
        }
        if cfg.churn {
            let mut t = cfg.warmup_ms;
            loop {
                t += sim.rng.between(3_000, 8_000);
                if t + 8_000 >= cfg.run_ms {
                    break;
                }
                sim.queue.at(t, Ev::Churn);
            }
        }
        sim
    }

    /// One cluster joins or leaves (never below two thirds of the starting fleet).
    fn churn(&mut self) {
        let mut members = self.fleets.last().cloned().unwrap_or_default();
        let absent: Vec<usize> = (0..self.pool.len())
            .filter(|i| !members.contains(i))
            .collect();
        let remove = absent.is_empty()
            || (members.len() > self.cfg.clusters * 2 / 3 && self.rng.chance(0.5));
        if remove {
            let at = self.rng.below(members.len() as u64) as usize;
            let gone = members.remove(at);
            self.set_cluster_present(gone, false);
        } else {
            let joins = absent[self.rng.below(absent.len() as u64) as usize];
            members.push(joins);
            members.sort_unstable();
            self.set_cluster_present(joins, true);
        }
        if tracing() {
            eprintln!("{:>6} fleet now {members:?}", self.t);
        }
        self.fleets.push(members);
        self.checker.out.disruptions.push(self.t);
        self.announce_fleet();
    }

    /// The measured costs change (with slices, the hub's load may move): a new fleet
    /// revision with the same members. Not a disruption: whatever it moves is bounded
    /// from when it stopped.
    fn recost(&mut self) {
        while self.loads_at.len() < self.fleets.len() {
            self.loads_at.push(self.pool_loads.clone());
        }
        if self.cfg.costs {
            let shift = self.rng.below(self.pool_loads.len() as u64) as usize;
            let factor = if self.rng.chance(0.5) { 500 } else { 20 };
            for (i, load) in self.pool_loads.iter_mut().enumerate() {
                let wobble = (70 + self.rng.below(61)) * if i == shift { factor } else { 100 };
                *load = (*load * wobble / 10_000).clamp(1, 1_000);
            }
        }
        self.move_hub();
        self.loads_at.push(self.pool_loads.clone());
        self.fleets
            .push(self.fleets.last().cloned().unwrap_or_default());
        self.announce_fleet();
    }

    /// The newest fleet revision reaches each replica's inventory 0–2 s from now.
    fn announce_fleet(&mut self) {
        let rev = self.fleets.len() as u64 - 1;
        for n in 0..self.nodes.len() {
            let inc = self.nodes[n].life.incarnation;
            let after = self.rng.between(0, 2_000);
            self.queue.at(self.t + after, Ev::Fleet(n, inc, rev));
        }
    }

    /// Fleet revision `rev`: its clusters and loads.
    fn fleet(&self, rev: u64) -> (Vec<Cluster>, Vec<u64>) {
        let members = &self.fleets[rev as usize];
        let loads = self.loads_at.get(rev as usize).unwrap_or(&self.pool_loads);
        (
            members.iter().map(|&i| self.pool[i].clone()).collect(),
            members.iter().map(|&i| loads[i]).collect(),
        )
    }

    fn fresh_node(&mut self, identity: String, incarnation: u64) -> Node {
        let cfg = ReplicaConfig {
            identity: identity.clone(),
            incarnation,
            root: "fs/".into(),
            shards: self.cfg.count.unwrap_or(ShardCount::Fixed(self.cfg.shards)),
            timing: self.cfg.timing,
            grace: self.cfg.grace,
            placement: PlacementConfig::default(),
            hysteresis: (self.cfg.costs || self.cfg.slices).then(Default::default),
            split_clusters: self.cfg.slices,
            zone: None,
            // Mixed sizes: placement follows capacities, the protocol holds regardless.
            capacity: 1 + (incarnation % 4) as u32,
            shard_specs: Vec::new(),
        };
        let clock = Clock::drawn(&mut self.rng, self.cfg.drift);
        let fleet_rev = self.fleets.len() as u64 - 1;
        let (fleet, loads) = self.fleet(fleet_rev);
        let mut replica = Replica::new(cfg);
        let index: usize = identity
            .strip_prefix("replica-")
            .and_then(|i| i.parse().ok())
            .unwrap_or(usize::MAX);
        // A restart runs the newer release (a rolling update).
        if index >= self.cfg.unannounced || incarnation > 1 {
            replica.set_inventory(InventorySummary::of(&fleet, 0));
        }
        Node {
            replica,
            life: Life::new(identity, incarnation, clock),
            fleet,
            loads,
            fleet_rev,
        }
    }

    fn latency(&mut self) -> u64 {
        LATENCY.draw(&mut self.rng)
    }

    pub(super) fn run(mut self) -> Outcome {
        self.advance();
        let end = self.t;
        let open = self.no_distributor_since.map(|since| (since, end));
        let mut out = self.checker.finish(end);
        out.distributor_gaps.extend(open);
        out
    }

    /// Processes events up to the end of the run.
    pub(super) fn advance(&mut self) {
        while let Some((t, ev)) = self.queue.pop(self.cfg.run_ms) {
            self.t = t;
            self.handle(ev);
            for node in &mut self.nodes {
                let life = &mut node.life;
                if life
                    .exit_by
                    .is_some_and(|by| t >= by || node.replica.is_released())
                {
                    // The runner is done (released, or its 2 s ran out); the controller
                    // drains what is still stopping, until its lease deadline at most.
                    life.exit_by = None;
                    life.runner_stopped = true;
                }
                if life.runner_stopped && (life.draining.is_empty() || !life.gate_open(t)) {
                    life.alive = false;
                    life.runner_stopped = false;
                }
            }
            self.check();
        }
    }

    /// Events for a paused node wait until it resumes.
    fn deferred(&mut self, node: usize, ev: Ev) -> Option<Ev> {
        let until = self.nodes[node].life.paused_until;
        if self.t < until {
            self.queue.at(until, ev);
            None
        } else {
            Some(ev)
        }
    }

    /// Whether node `n`'s runner runs in incarnation `inc`.
    fn current(&self, n: usize, inc: u64) -> bool {
        let life = &self.nodes[n].life;
        life.alive && !life.runner_stopped && life.incarnation == inc
    }

    fn handle(&mut self, ev: Ev) {
        let ev = match ev {
            Ev::Poll(n)
            | Ev::Tick(n)
            | Ev::Deliver(n, ..)
            | Ev::Reply(n, ..)
            | Ev::Deleted(n, ..)
            | Ev::Stopped(n, ..) => match self.deferred(n, ev) {
                Some(ev) => ev,
                None => return,
            },
            other => other,
        };
        match ev {
            Ev::Poll(n) => {
                if !self.nodes[n].life.alive || self.nodes[n].life.runner_stopped {
                    return;
                }
                let inc = self.nodes[n].life.incarnation;
                let lat = self.latency();
                let view =
                    (self.t >= self.nodes[n].life.partitioned_until).then(|| self.store.listing());
                let wait = if view.is_some() { lat } else { 300 };
                self.queue
                    .at(self.t + wait, Ev::Deliver(n, inc, view, self.t));
                self.queue.at(self.t + self.cfg.poll_ms, Ev::Poll(n));
            }
            Ev::Tick(n) => {
                if !self.nodes[n].life.alive || self.nodes[n].life.runner_stopped {
                    return;
                }
                let inc = self.nodes[n].life.incarnation;
                let now = self.nodes[n].life.local(self.t);
                let actions = self.nodes[n].replica.tick(now);
                self.send(n, inc, actions);
                self.queue.at(self.t + TICK_MS, Ev::Tick(n));
            }
            Ev::Deliver(n, inc, view, asked) => {
                if !self.current(n, inc) {
                    return;
                }
                let now = self.nodes[n].life.local(self.t);
                let asked = self.nodes[n].life.local(asked);
                let node = &mut self.nodes[n];
                let fleet = FleetInput {
                    clusters: &node.fleet,
                    loads: &node.loads,
                    apps: self.apps.as_ref().map_or(&[][..], apps::AppFleet::all),
                    revision: node.fleet_rev,
                    external_shards: None,
                    measured: self.cfg.costs,
                };
                let actions = node.replica.step_listed(now, asked, view.as_ref(), fleet);
                if self.t >= self.cfg.warmup_ms {
                    self.checker.out.handovers += actions
                        .iter()
                        .filter(|a| matches!(a, Action::Start(_)))
                        .count();
                }
                self.send(n, inc, actions);
            }
            Ev::Arrive(n, inc, ticket, key, None, pre) => {
                let result = self.store.delete(&key, pre);
                self.count_write(n, result.is_ok());
                if tracing() {
                    eprintln!(
                        "{:>6} {} deleted {key}: {result:?}",
                        self.t, self.nodes[n].life.identity
                    );
                }
                let lat = self.latency();
                self.queue
                    .at(self.t + lat, Ev::Deleted(n, inc, ticket, result));
            }
            Ev::Deleted(n, inc, ticket, result) => {
                if self.current(n, inc) {
                    self.nodes[n].replica.on_delete(ticket, result);
                }
            }
            Ev::Arrive(n, inc, ticket, key, Some(value), pre) => {
                let bound = value.windows(7).any(|w| w == b"\"shard\"");
                let result = self.store.write(&key, value, pre);
                self.count_write(n, result.is_ok());
                if result.is_ok() {
                    self.count_cut(&key);
                }
                if result.is_ok() && key == distributor_key("fs/") {
                    let switches = &mut self.checker.out.role_switches;
                    match (self.role_bound.replace(bound), bound) {
                        (Some(false), true) => switches.0 += 1,
                        (Some(true), false) => switches.1 += 1,
                        _ => {}
                    }
                }
                if tracing() {
                    eprintln!(
                        "{:>6} {} arrived {key}: {result:?}",
                        self.t, self.nodes[n].life.identity
                    );
                }
                // Sometimes the write applies but the reply is lost.
                let reply = if self.rng.chance(0.01) {
                    Err(StoreError::Unavailable("reply lost".into()))
                } else {
                    result
                };
                let lat = self.latency();
                self.queue
                    .at(self.t + lat, Ev::Reply(n, inc, ticket, reply));
            }
            Ev::Reply(n, inc, ticket, result) => {
                if self.current(n, inc) {
                    self.nodes[n].replica.on_write(ticket, result);
                    self.publish(n);
                }
            }
            Ev::Stopped(n, inc, cluster) => {
                let life = &mut self.nodes[n].life;
                if life.alive && life.incarnation == inc {
                    life.draining.remove(&cluster);
                }
                if self.current(n, inc) {
                    self.nodes[n].replica.on_stopped(&cluster);
                    let now = self.nodes[n].life.local(self.t);
                    let actions = self.nodes[n].replica.tick(now);
                    self.send(n, inc, actions);
                }
            }
            Ev::Churn => self.churn(),
            Ev::Costs => self.recost(),
            Ev::Fleet(n, inc, rev) => {
                let node = &self.nodes[n];
                if node.life.incarnation == inc && rev > node.fleet_rev {
                    let (fleet, loads) = self.fleet(rev);
                    let node = &mut self.nodes[n];
                    (node.fleet, node.loads, node.fleet_rev) = (fleet, loads, rev);
                }
            }
            Ev::Fault(n, fault) => self.fault(n, fault),
            Ev::Corrupt(record) => self.corrupt(record),
            Ev::ReplaceStore => {
                if tracing() {
                    eprintln!("{:>6} store replaced", self.t);
                }
                self.store.entries.clear();
                self.checker.out.disruptions.push(self.t);
                self.replaced_at = Some(self.t);
            }
            Ev::Scale(shards) => {
                let value = encode(&DesiredShards { shards });
                let key = desired_shards_key("fs/");
                let _ = self.store.write(&key, value, Precondition::Any);
            }
        }
    }

    fn fault(&mut self, n: usize, fault: Fault) {
        self.count_fault_on_slices(n, fault);
        if tracing() {
            eprintln!("{:>6} {} {fault:?}", self.t, self.nodes[n].life.identity);
        }
        match fault {
            Fault::Crash => self.nodes[n].life.alive = false,
            Fault::Shutdown => {
                // SIGTERM: release, keep stepping until released (2 s at most), then exit.
                let life = &self.nodes[n].life;
                if life.alive && !life.runner_stopped && self.t >= life.paused_until {
                    let inc = life.incarnation;
                    // Stopping from here on: the gate admits nothing new, and work in
                    // flight keeps the deadline it was given.
                    self.nodes[n].life.exit_by = Some(self.t + 2_000);
                    let actions = self.nodes[n].replica.release();
                    self.send(n, inc, actions);
                    self.checker.out.graceful.push(self.t);
                } else {
                    self.nodes[n].life.alive = false;
                }
            }
            Fault::Restart if self.nodes[n].life.alive => {
                // The old process is still draining (a SIGTERM): a pod under the same
                // name starts once it has exited.
                self.queue.at(self.t + 100, Ev::Fault(n, Fault::Restart));
            }
            Fault::Restart => {
                let identity = self.nodes[n].life.identity.clone();
                let inc = self.nodes[n].life.incarnation + 1;
                self.nodes[n] = self.fresh_node(identity, inc);
                self.queue.at(self.t + 1, Ev::Poll(n));
                self.queue.at(self.t + 2, Ev::Tick(n));
            }
            Fault::Pause(until) => self.nodes[n].life.paused_until = until,
            Fault::Partition(until) => self.nodes[n].life.partitioned_until = until,
            Fault::Outage(until) => {
                for node in &mut self.nodes {
                    node.life.partitioned_until = node.life.partitioned_until.max(until);
                }
            }
        }
    }

    /// What the runner publishes after each step: its lease deadline, which the
    /// controller's gate follows. While stopping (SIGTERM) the machine no longer counts
    /// the shard as its own, but work in flight still runs until the last published
    /// deadline (its requests carry it): that one is kept.
    fn publish(&mut self, n: usize) {
        let node = &mut self.nodes[n];
        let now = node.life.local(self.t);
        if node.life.exit_by.is_none() && !node.life.runner_stopped {
            node.life.gate_until = node.replica.shard_valid_until(now);
        }
    }

    /// Sends a step's writes (starts and stops took effect inside the replica).
    fn send(&mut self, n: usize, inc: u64, actions: Vec<Action>) {
        if tracing() {
            for a in &actions {
                match a {
                    Action::Write {
                        key, value, pre, ..
                    } => eprintln!(
                        "{:>6} {} write {key} {pre:?} {}",
                        self.t,
                        self.nodes[n].life.identity,
                        String::from_utf8_lossy(&value[..value.len().min(160)])
                    ),
                    other => eprintln!("{:>6} {} {other:?}", self.t, self.nodes[n].life.identity),
                }
            }
        }
        self.publish(n);
        if !self.nodes[n].life.gate_open(self.t) {
            // The gate closed (the lease lapsed or was lost): whatever was still draining
            // is cancelled now.
            for c in std::mem::take(&mut self.nodes[n].life.draining) {
                self.nodes[n].replica.on_stopped(&c);
            }
        }
        for a in actions {
            if let Action::Start(c) = &a {
                // A start while the cluster's own stop still drains would be undone by that
                // stop when it ends (the runner's stop hook runs off the step).
                if self.nodes[n].life.draining.contains(c) {
                    let who = &self.nodes[n].life.identity;
                    self.checker.out.disagreements.push(format!(
                        "t={}: {who} started {c} while its stop was still draining",
                        self.t
                    ));
                }
                self.nodes[n].life.started.insert(c.clone());
            }
            if let Action::Stop(c) = &a {
                self.nodes[n].life.started.remove(c);
                // Work in flight drains for a while after a handover (0–1.5 s; after a
                // SIGTERM with long drains 0–3 s), but is cancelled at once when the
                // lease lapses or is lost (the controller's contract: nothing runs past
                // the deadline).
                if self.nodes[n].life.gate_open(self.t) && self.cfg.slow_stops {
                    let most = if self.cfg.long_drains && self.nodes[n].life.exit_by.is_some() {
                        3_000
                    } else {
                        1_500
                    };
                    let took = self.rng.between(0, most);
                    self.nodes[n].life.draining.insert(c.clone());
                    self.queue.at(self.t + took, Ev::Stopped(n, inc, c.clone()));
                } else {
                    self.nodes[n].replica.on_stopped(c);
                }
            }
            let write = match a {
                Action::Write {
                    ticket,
                    key,
                    value,
                    pre,
                    ..
                } => Some((ticket, key, Some(value), pre)),
                Action::Delete {
                    ticket, key, pre, ..
                } => Some((ticket, key, None, pre)),
                _ => None,
            };
            if let Some((ticket, key, value, pre)) = write {
                if self.t < self.nodes[n].life.partitioned_until {
                    let err = Err(StoreError::Unavailable("partitioned".into()));
                    self.queue
                        .at(self.t + 1_000, Ev::Reply(n, inc, ticket, err));
                } else {
                    let lat = self.latency();
                    self.queue
                        .at(self.t + lat, Ev::Arrive(n, inc, ticket, key, value, pre));
                }
            }
        }
    }

    /// G1 at this instant, and coverage bookkeeping for G2. Who acts comes from the starts
    /// and stops the driver executed and the deadline the runner published (`Life::acting`);
    /// the machine's own view must agree with it.
    fn check(&mut self) {
        self.checker.begin();
        for (i, node) in self.nodes.iter().enumerate() {
            for c in node.life.acting(self.t) {
                match self.apps.as_mut() {
                    Some(apps) => apps.add(&mut self.checker, i, c),
                    None => self.checker.add(i, c),
                }
            }
            if node.life.alive && !node.life.runner_stopped {
                let now = node.life.local(self.t);
                let machine = node.replica.acting(now);
                if let Some(d) = node.life.disagreement(self.t, machine) {
                    self.checker.out.disagreements.push(d);
                }
            }
        }
        let (nodes, fenced) = (&self.nodes, self.fenced_by_replacement());
        let before = self.checker.out.overlaps.len();
        self.checker.end(self.t, |i| nodes[i].life.identity.clone());
        if let Some(apps) = self.apps.as_mut() {
            let name = |i: usize| nodes[i].life.identity.clone();
            apps.end(self.t, fenced, &mut self.checker.out, name);
        }
        if fenced {
            // See `fenced_by_replacement`: not a protocol's overlap.
            self.checker.out.overlaps.truncate(before);
        }
        self.check_distributor();
    }

    /// Within a renew deadline of the store's replacement by an empty one: every record is
    /// absent, and a replica that has not listed the new store yet still acts on its lease
    /// in the old one while another, having listed, claims in the new. A real runner fences
    /// itself at the replacement — it sees the store's identity change, stops for good, and
    /// a fresh replica claims only a lease duration later (`store/guard.rs`; with processes
    /// in `crates/fleetshard/tests/it/store_identity.rs`) — which the simulated replicas do
    /// not model: neither G1 nor the one-distributor rule is judged then.
    fn fenced_by_replacement(&self) -> bool {
        let deadline = self.cfg.timing.renew_deadline.as_millis() as u64;
        self.replaced_at.is_some_and(|at| self.t <= at + deadline)
    }

    /// At most one replica holds the distributor role at any instant (each judged on its
    /// own clock, as its machine acts on it), and the time without one is measured. Not
    /// checked within a renew deadline of the store's replacement
    /// ([`Sim::fenced_by_replacement`]).
    fn check_distributor(&mut self) {
        let fenced = self.fenced_by_replacement();
        let holders: Vec<String> = self
            .nodes
            .iter()
            .filter(|n| n.life.alive && !n.life.runner_stopped)
            .filter(|n| n.replica.is_distributor(n.life.local(self.t)))
            .map(|n| n.life.identity.clone())
            .collect();
        if holders.len() > 1 {
            if !fenced {
                self.checker
                    .out
                    .distributor_overlaps
                    .push((self.t, holders));
            }
        } else if holders.is_empty() {
            if self.t >= self.cfg.warmup_ms {
                self.no_distributor_since.get_or_insert(self.t);
            }
        } else if let Some(since) = self.no_distributor_since.take() {
            self.checker.out.distributor_gaps.push((since, self.t));
        }
    }

    /// Counts a write (or delete) the store applied, after warm-up.
    fn count_write(&mut self, n: usize, applied: bool) {
        if applied && self.t >= self.cfg.warmup_ms {
            self.checker.out.writes[n] += 1;
        }
    }

    /// The last committed generation and who holds which shard, at the end of a run.
    pub(super) fn final_state(&self) -> (crate::fenced::AssignmentDoc, Vec<Option<String>>) {
        let doc: crate::fenced::AssignmentDoc = self
            .store
            .entries
            .get("fs/assignment")
            .map(|(v, _)| serde_json::from_slice(v).expect("a valid document"))
            .expect("a generation was committed");
        let holders = (0..doc.shards)
            .map(|n| {
                self.nodes
                    .iter()
                    .filter(|node| node.life.alive)
                    .find(|node| node.replica.shard(node.life.local(self.t)) == Some(n))
                    .map(|node| node.life.identity.clone())
            })
            .collect();
        (doc, holders)
    }

    /// The replicas alive at the end: (identity, shard, valid until, spare), as each sees
    /// itself on its own clock.
    pub(super) fn holders(&self) -> Vec<(Option<u32>, Option<Duration>, bool)> {
        self.nodes
            .iter()
            .filter(|n| n.life.alive)
            .map(|node| {
                let now = node.life.local(self.t);
                let until = node.replica.shard_valid_until(now);
                (
                    node.replica.shard(now),
                    until.map(|u| u.since(now)).filter(|_| until > Some(now)),
                    node.replica.is_spare(),
                )
            })
            .collect()
    }
}

/// Runs one seed.
pub(super) fn simulate(cfg: SimConfig, seed: u64) -> Outcome {
    Sim::new(cfg, seed).run()
}

mod apps;
mod corrupt;
#[cfg(test)]
mod tests;
