//! Fenced lease mode in the simulation: replicas run [`Replica`], polling the root every
//! `poll_ms` and ticking every 250 ms as the runner does, over the shared world.
//!
//! Checked at every event: **G1**, no cluster is acted on by two replicas at one instant
//! (an overlap can only begin when a cluster is started, which is an event). Measured:
//! **G2**, how long each cluster goes without an acting owner after a failure (bounded in
//! `tests.rs`).

use std::time::Duration;

use fleetshard_core::Cluster;
use fleetshard_core::placement::PlacementConfig;

use super::Rng;
use super::world::{
    Checker, Clock, Fault, FaultPlan, Latency, Life, Outcome, Queue, SimStore, tracing,
};
use crate::fenced::{
    Action, DesiredShards, FleetInput, MAX_LEASE_RECORD_BYTES, Replica, ReplicaConfig, ShardCount,
    Ticket, assignment_key, desired_shards_key, distributor_key, encode, presence_key, shard_key,
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
}

enum Ev {
    Poll(usize),
    Tick(usize),
    Deliver(usize, u64, Option<Listing>),
    Arrive(usize, u64, Ticket, String, Vec<u8>, Precondition),
    Reply(usize, u64, Ticket, Result<u64, StoreError>),
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
            timing: LeaseTiming::default(),
            grace: Duration::from_millis(500),
            drift: 0.01,
            faults: true,
            // FLEETSHARD_SIM_SLOW_STOPS=0 measures the protocol alone (stops are instant).
            slow_stops: std::env::var("FLEETSHARD_SIM_SLOW_STOPS").as_deref() != Ok("0"),
            count: None,
            scale: Vec::new(),
            corruption: false,
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
    clusters: Vec<Cluster>,
    loads: Vec<u64>,
    pub(super) checker: Checker,
}

impl Sim {
    pub(super) fn new(cfg: SimConfig, seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let clusters: Vec<Cluster> = (0..cfg.clusters)
            .map(|i| Cluster::new(format!("c{i:03}"), format!("https://c{i}")))
            .collect();
        let loads = (0..cfg.clusters).map(|_| rng.between(1, 10)).collect();
        let mut sim = Sim {
            cfg: cfg.clone(),
            rng,
            t: 0,
            queue: Queue::new(),
            store: SimStore::default(),
            nodes: Vec::new(),
            clusters,
            loads,
            checker: Checker::new(cfg.warmup_ms, 0, &[]),
        };
        sim.checker = Checker::new(cfg.warmup_ms, 0, &sim.clusters);
        for i in 0..cfg.nodes {
            let node = sim.fresh_node(format!("replica-{i}"), 1);
            sim.nodes.push(node);
            let first = sim.rng.below(cfg.poll_ms);
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
            };
            let faults = plan.draw(&mut sim.rng, cfg.nodes);
            sim.checker.out.faults = FaultPlan::count(&faults);
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
        sim
    }

    fn draw_corruption(&mut self) -> Ev {
        match self.rng.below(6) {
            0 => Ev::Corrupt(Record::Shard(
                self.rng.below(u64::from(self.cfg.shards)) as u32
            )),
            1 => Ev::Corrupt(Record::Distributor),
            2 => Ev::Corrupt(Record::Presence(
                self.rng.below(self.cfg.nodes as u64) as usize
            )),
            3 => Ev::Corrupt(Record::Assignment),
            4 => Ev::Corrupt(Record::DesiredShards),
            _ => Ev::ReplaceStore,
        }
    }

    /// Overwrites `record` with garbage, a newer schema's record or an oversized one.
    fn corrupt(&mut self, record: Record) {
        let key = match record {
            Record::Shard(n) => shard_key("fs/", n),
            Record::Distributor => distributor_key("fs/"),
            Record::Presence(n) => presence_key("fs/", &self.nodes[n].life.identity),
            Record::Assignment => assignment_key("fs/"),
            Record::DesiredShards => desired_shards_key("fs/"),
        };
        let value = match self.rng.below(3) {
            0 => b"\x00\xffnot a record".to_vec(),
            // A newer release's record: a field this one does not know.
            1 => self.store.entries.get(&key).map_or_else(
                || br#"{"epoch":1}"#.to_vec(),
                |(v, _)| {
                    let mut v = v.clone();
                    if v.last() == Some(&b'}') {
                        v.pop();
                        v.extend_from_slice(br#","epoch":1}"#);
                    }
                    v
                },
            ),
            _ => vec![b' '; MAX_LEASE_RECORD_BYTES + 1],
        };
        if tracing() {
            eprintln!("{:>6} corrupt {key}", self.t);
        }
        let _ = self.store.write(&key, value, Precondition::Any);
        self.checker.out.disruptions.push(self.t);
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
            zone: None,
        };
        let clock = Clock::drawn(&mut self.rng, self.cfg.drift);
        Node {
            replica: Replica::new(cfg),
            life: Life::new(identity, incarnation, clock),
        }
    }

    fn latency(&mut self) -> u64 {
        LATENCY.draw(&mut self.rng)
    }

    pub(super) fn run(mut self) -> Outcome {
        self.advance();
        let end = self.t;
        self.checker.finish(end)
    }

    /// Processes events up to the end of the run.
    pub(super) fn advance(&mut self) {
        while let Some((t, ev)) = self.queue.pop(self.cfg.run_ms) {
            self.t = t;
            self.handle(ev);
            for node in &mut self.nodes {
                if node
                    .life
                    .exit_by
                    .is_some_and(|by| t >= by || node.replica.is_released())
                {
                    node.life.alive = false;
                    node.life.exit_by = None;
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

    /// Whether node `n` is alive in incarnation `inc`.
    fn current(&self, n: usize, inc: u64) -> bool {
        self.nodes[n].life.alive && self.nodes[n].life.incarnation == inc
    }

    fn handle(&mut self, ev: Ev) {
        let ev = match ev {
            Ev::Poll(n)
            | Ev::Tick(n)
            | Ev::Deliver(n, ..)
            | Ev::Reply(n, ..)
            | Ev::Stopped(n, ..) => match self.deferred(n, ev) {
                Some(ev) => ev,
                None => return,
            },
            other => other,
        };
        match ev {
            Ev::Poll(n) => {
                if !self.nodes[n].life.alive {
                    return;
                }
                let inc = self.nodes[n].life.incarnation;
                let lat = self.latency();
                let view =
                    (self.t >= self.nodes[n].life.partitioned_until).then(|| self.store.listing());
                let wait = if view.is_some() { lat } else { 300 };
                self.queue.at(self.t + wait, Ev::Deliver(n, inc, view));
                self.queue.at(self.t + self.cfg.poll_ms, Ev::Poll(n));
            }
            Ev::Tick(n) => {
                if !self.nodes[n].life.alive {
                    return;
                }
                let inc = self.nodes[n].life.incarnation;
                let now = self.nodes[n].life.local(self.t);
                let actions = self.nodes[n].replica.tick(now);
                self.send(n, inc, actions);
                self.queue.at(self.t + TICK_MS, Ev::Tick(n));
            }
            Ev::Deliver(n, inc, view) => {
                if !self.current(n, inc) {
                    return;
                }
                let now = self.nodes[n].life.local(self.t);
                let fleet = FleetInput {
                    clusters: &self.clusters,
                    loads: &self.loads,
                    revision: 0,
                    external_shards: None,
                };
                let actions = self.nodes[n].replica.step(now, view.as_ref(), fleet);
                if self.t >= self.cfg.warmup_ms {
                    self.checker.out.handovers += actions
                        .iter()
                        .filter(|a| matches!(a, Action::Start(_)))
                        .count();
                }
                self.send(n, inc, actions);
            }
            Ev::Arrive(n, inc, ticket, key, value, pre) => {
                let result = self.store.write(&key, value, pre);
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
                }
            }
            Ev::Stopped(n, inc, cluster) => {
                if self.current(n, inc) {
                    self.nodes[n].life.draining.remove(&cluster);
                    self.nodes[n].replica.on_stopped(&cluster);
                    let now = self.nodes[n].life.local(self.t);
                    let actions = self.nodes[n].replica.tick(now);
                    self.send(n, inc, actions);
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
            }
            Ev::Scale(shards) => {
                let value = encode(&DesiredShards { shards });
                let key = desired_shards_key("fs/");
                let _ = self.store.write(&key, value, Precondition::Any);
            }
        }
    }

    fn fault(&mut self, n: usize, fault: Fault) {
        if tracing() {
            eprintln!("{:>6} {} {fault:?}", self.t, self.nodes[n].life.identity);
        }
        match fault {
            Fault::Crash => self.nodes[n].life.alive = false,
            Fault::Shutdown => {
                // SIGTERM: release, keep stepping until released (2 s at most), then exit.
                let life = &self.nodes[n].life;
                if life.alive && self.t >= life.paused_until {
                    let inc = life.incarnation;
                    let actions = self.nodes[n].replica.release();
                    self.send(n, inc, actions);
                    self.checker.out.graceful.push(self.t);
                    self.nodes[n].life.exit_by = Some(self.t + 2_000);
                } else {
                    self.nodes[n].life.alive = false;
                }
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
        let now = self.nodes[n].life.local(self.t);
        if self.nodes[n].replica.shard(now).is_none() {
            // No lease: whatever was still draining is cancelled now.
            for c in std::mem::take(&mut self.nodes[n].life.draining) {
                self.nodes[n].replica.on_stopped(&c);
            }
        }
        for a in actions {
            if let Action::Stop(c) = &a {
                // Work in flight drains for a while after a handover (0–1.5 s), but is
                // cancelled at once when the lease lapses or is lost (the controller's
                // contract: nothing runs past the deadline).
                let now = self.nodes[n].life.local(self.t);
                if self.nodes[n].replica.shard(now).is_some() && self.cfg.slow_stops {
                    let took = self.rng.between(0, 1_500);
                    self.nodes[n].life.draining.insert(c.clone());
                    self.queue.at(self.t + took, Ev::Stopped(n, inc, c.clone()));
                } else {
                    self.nodes[n].replica.on_stopped(c);
                }
            }
            if let Action::Write {
                ticket,
                key,
                value,
                pre,
                ..
            } = a
            {
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

    /// G1 at this instant, and coverage bookkeeping for G2.
    fn check(&mut self) {
        self.checker.begin();
        for (i, node) in self.nodes.iter().enumerate() {
            if !node.life.alive {
                continue;
            }
            let now = node.life.local(self.t);
            for c in node.replica.acting(now) {
                self.checker.add(i, c);
            }
            // Work still draining counts while the lease is valid: the controller's
            // contract is that work in flight checks the lease and ends at its deadline (a
            // paused process resumes past it and stops). A cluster given back while it
            // still drains counts once for its node.
            if node.replica.shard(now).is_some() {
                for c in &node.life.draining {
                    self.checker.add(i, c);
                }
            }
        }
        let nodes = &self.nodes;
        self.checker.end(self.t, |i| nodes[i].life.identity.clone());
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

#[cfg(test)]
mod tests;
