//! Argo CD-compatible heartbeat mode in the simulation: replicas run [`ArgoReplica`] as
//! [`crate::argocd_runner`] drives it — a tick at the machine's own wake time, a read when it
//! asks and whenever the store notifies a change (the runner's `wait_for_change`, re-armed
//! after each read), writes with compare-and-swap, stops reported when their work has
//! drained — over the shared world: store latency and spikes, store errors on reads, writes
//! and watches, lost replies, crashes and restarts under the same identity, pauses (longer
//! than 3H too), partitions, graceful shutdowns, clock-rate drift, wall clocks hours apart,
//! and replica-count changes that reach each replica at a different moment.
//!
//! Checked at every change of who acts: no cluster has two acting owners (a replica acts on
//! a cluster while it has started it and its validity lasts on its own clock; work still
//! draining counts while valid; derived from the starts and stops executed, and checked
//! against the machine's own view), with no exclusion: a replica that missed a map length
//! that came and went between two of its reads is recorded (from the store's history) and
//! must not overlap either. Measured: every window in which a cluster has no acting owner
//! (bounded in `tests.rs`).

use std::collections::VecDeque;
use std::time::Duration;

use fleetshard_core::Cluster;

pub(super) use self::config::SimConfig;
use super::Rng;
use super::world::{Checker, Clock, Fault, FaultPlan, Life, Outcome, Queue, SimStore, tracing};
use crate::argocd::{Action, ArgoConfig, ArgoReplica, MAPPING_KEY, Ticket};
use crate::lease::Mono;
use crate::store::{Listing, Precondition, StoreError};

struct Node {
    machine: ArgoReplica,
    life: Life,
    /// A read is under way; `read_again`: another was asked for meanwhile.
    reading: bool,
    read_again: bool,
    /// The store revision a change notification waits beyond, while one is armed.
    watch: Option<u64>,
    /// When the wake event that counts fires.
    wake_at: Option<u64>,
    /// The newest map version the machine has seen (read, or its own write confirmed).
    seen: Option<u64>,
    /// The validity end a `Lapse` event is scheduled for.
    lapse_at: Option<Mono>,
}

enum Ev {
    Wake(usize, u64),
    /// A read reaches the store.
    ReadAt(usize, u64),
    Deliver(usize, u64, Result<Listing, StoreError>),
    Arrive(usize, u64, Ticket, Vec<u8>, Precondition),
    Reply(usize, u64, Ticket, Result<u64, StoreError>),
    Changed(usize, u64),
    WatchFailed(usize, u64),
    Stopped(usize, u64, String),
    /// A replica learns the replica count.
    Count(usize, u64, u32),
    Fault(usize, Fault),
    Scale(u32),
    /// A replica's validity ends (on its own clock) now: what it acts on changes without
    /// any input, so the checker looks.
    Lapse,
}

impl Ev {
    /// The replica whose process handles this event (deferred while it is paused).
    fn node(&self) -> Option<usize> {
        match self {
            Ev::Wake(n, _)
            | Ev::Deliver(n, ..)
            | Ev::Reply(n, ..)
            | Ev::Changed(n, _)
            | Ev::WatchFailed(n, _)
            | Ev::Stopped(n, ..)
            | Ev::Count(n, ..) => Some(*n),
            _ => None,
        }
    }
}

pub(super) struct Sim {
    cfg: SimConfig,
    rng: Rng,
    pub(super) t: u64,
    queue: Queue<Ev>,
    store: SimStore,
    nodes: Vec<Node>,
    clusters: Vec<Cluster>,
    count: u32,
    pub(super) checker: Checker,
    /// Events handled (for the measurements).
    pub(super) events: u64,
    /// Who acts on what may have changed since the last check.
    dirty: bool,
    /// Every version of the map written: (version, number of entries).
    lengths: Vec<(u64, usize)>,
    /// When a replica (its identity) read the map at one length after a version of another
    /// length that it never saw (a length change that came and went between two of its
    /// reads: outside the guarantee, see the machine's module docs).
    pub(super) come_and_go: Vec<(u64, String)>,
}

impl Sim {
    pub(super) fn new(cfg: SimConfig, seed: u64) -> Self {
        let clusters: Vec<Cluster> = (0..cfg.clusters)
            .map(|i| Cluster::new(format!("c{i:02}"), format!("https://c{i}.example")))
            .collect();
        // A window that begins within a release's 2 s (stops drain first) follows it.
        let checker = Checker::new(cfg.warmup_ms, 2_000, &clusters);
        let mut sim = Sim {
            rng: Rng::new(seed),
            t: 0,
            queue: Queue::new(),
            store: SimStore::default(),
            nodes: Vec::new(),
            clusters,
            count: cfg.replicas,
            checker,
            events: 0,
            dirty: false,
            lengths: Vec::new(),
            come_and_go: Vec::new(),
            cfg,
        };
        for i in 0..sim.cfg.nodes {
            let node = sim.fresh_node(i, format!("replica-{i}"), 1);
            sim.nodes.push(node);
            let first = sim.rng.below(1_000);
            sim.schedule_wake(i, first);
        }
        if sim.cfg.faults {
            // One failure at a time: each ends, and is recovered from, before the next.
            let (h, s) = (ms(sim.cfg.heartbeat), ms(sim.cfg.stale_after()));
            let plan = FaultPlan {
                from: sim.cfg.warmup_ms,
                until: sim.cfg.run_ms,
                len: (500, 5 * h),
                gap: (s + 2 * h, s + 5 * h),
                // Longer than the coverage bound: a window that never closes is caught.
                tail: 2 * s + 5 * h,
                outages: sim.cfg.outages,
                concurrent: sim.cfg.concurrent,
            };
            let faults = plan.draw(&mut sim.rng, sim.cfg.nodes);
            sim.checker.out.faults = FaultPlan::count(&faults);
            for (t, n, f) in faults {
                if f != Fault::Restart || sim.cfg.concurrent {
                    sim.checker.out.disruptions.push(t);
                }
                if sim.cfg.outages || sim.cfg.concurrent {
                    // Failures at once: bounded from the last one to begin or end.
                    sim.checker.out.disruptions.extend(f.ends());
                }
                sim.queue.at(t, Ev::Fault(n, f));
            }
        }
        for &(t, n) in &sim.cfg.scale.clone() {
            sim.checker.out.disruptions.push(t);
            sim.queue.at(t, Ev::Scale(n));
        }
        sim
    }

    fn fresh_node(&mut self, index: usize, identity: String, incarnation: u64) -> Node {
        let mut clock = Clock::drawn(&mut self.rng, self.cfg.drift);
        if let Some(&rate) = self.cfg.rates.get(index) {
            clock.rate = rate;
        }
        // Wall clocks up to an hour apart: they are only written, never compared (G6).
        clock.wall_offset_s = self.rng.below(7_200) as i64 - 3_600;
        let cfg = ArgoConfig {
            heartbeat: self.cfg.heartbeat,
            stale_after: self.cfg.stale_after(),
            jitter_seed: self.rng.next(),
            ..ArgoConfig::new(identity.clone())
        };
        let machine = ArgoReplica::new(
            cfg,
            self.clusters.clone(),
            &[],
            self.count,
            clock.local(self.t),
        );
        Node {
            machine,
            life: Life::new(identity, incarnation, clock),
            reading: false,
            read_again: false,
            watch: None,
            wake_at: None,
            lapse_at: None,
            seen: None,
        }
    }

    fn latency(&mut self) -> u64 {
        self.cfg.latency.draw(&mut self.rng)
    }

    /// Processes events up to `until` (ms).
    pub(super) fn advance(&mut self, until: u64) {
        while let Some((t, ev)) = self.queue.pop(until) {
            self.t = t;
            self.events += 1;
            self.handle(ev);
            for node in &mut self.nodes {
                if node
                    .life
                    .exit_by
                    .is_some_and(|by| t >= by || node.machine.is_released())
                {
                    node.life.alive = false;
                    node.life.exit_by = None;
                    self.dirty = true;
                }
            }
            // Acting sets change only with a start, a stop, a drain ending, a validity
            // ending (an event of its own) or a process ending: look then.
            if std::mem::take(&mut self.dirty) {
                self.check();
            }
        }
        self.t = self.t.max(until.min(self.cfg.run_ms));
    }

    /// Whether node `n` is alive in incarnation `inc`.
    fn current(&self, n: usize, inc: u64) -> bool {
        self.nodes[n].life.alive && self.nodes[n].life.incarnation == inc
    }

    fn handle(&mut self, ev: Ev) {
        if let Some(n) = ev.node() {
            // Events for a paused process wait until it resumes.
            let until = self.nodes[n].life.paused_until;
            if self.t < until {
                if let Ev::Wake(..) = ev {
                    self.nodes[n].wake_at = Some(until);
                }
                self.queue.at(until, ev);
                return;
            }
        }
        match ev {
            Ev::Wake(n, inc) => {
                if !self.current(n, inc) || self.nodes[n].wake_at != Some(self.t) {
                    return;
                }
                self.nodes[n].wake_at = None;
                let now = self.nodes[n].life.local(self.t);
                let actions = self.nodes[n].machine.tick(now);
                self.execute(n, actions);
            }
            Ev::ReadAt(n, inc) => {
                let listing = self.store.listing();
                let lat = self.latency();
                self.queue
                    .at(self.t + lat, Ev::Deliver(n, inc, Ok(listing)));
            }
            Ev::Deliver(n, inc, read) => {
                if !self.current(n, inc) {
                    return;
                }
                let node = &mut self.nodes[n];
                node.reading = false;
                let again = std::mem::take(&mut node.read_again);
                if let Ok(l) = &read
                    && node.watch.is_none()
                {
                    if self.store.revision > l.revision {
                        let lat = self.latency();
                        self.queue.at(self.t + lat, Ev::Changed(n, inc));
                    } else {
                        self.nodes[n].watch = Some(l.revision);
                    }
                }
                if let Ok(l) = &read
                    && let Some(e) = l.entries.iter().find(|e| e.key == MAPPING_KEY)
                {
                    self.seen(n, e.version);
                }
                let node = &mut self.nodes[n];
                let (now, wall) = (node.life.local(self.t), node.life.clock.wall(self.t));
                let actions = node.machine.step(now, wall, read);
                self.execute(n, actions);
                if again {
                    self.read(n);
                }
            }
            Ev::Arrive(n, inc, ticket, value, pre) => {
                let reply = if self.rng.chance(self.cfg.store_errors) {
                    Err(StoreError::Unavailable("injected".into()))
                } else {
                    let len = crate::argocd::decode(&String::from_utf8_lossy(&value))
                        .map_or(0, |l| l.len());
                    let result = self.store.write(MAPPING_KEY, value, pre);
                    if let Ok(v) = result {
                        self.lengths.push((v, len));
                    }
                    if tracing() {
                        let who = &self.nodes[n].life.identity;
                        eprintln!("{:>7} {who} arrived: {result:?}", self.t);
                    }
                    if result.is_ok() {
                        self.notify();
                    }
                    // Sometimes the write applies but the reply is lost.
                    if self.rng.chance(0.01) {
                        Err(StoreError::Unavailable("reply lost".into()))
                    } else {
                        result
                    }
                };
                let lat = self.latency();
                self.queue
                    .at(self.t + lat, Ev::Reply(n, inc, ticket, reply));
            }
            Ev::Reply(n, inc, ticket, result) => {
                if self.current(n, inc) {
                    if let Ok(v) = result {
                        self.seen(n, v);
                    }
                    let now = self.nodes[n].life.local(self.t);
                    let actions = self.nodes[n].machine.on_write(ticket, result, now);
                    self.execute(n, actions);
                }
            }
            Ev::Changed(n, inc) => {
                if self.current(n, inc) {
                    self.read(n);
                }
            }
            Ev::WatchFailed(n, inc) => {
                if self.current(n, inc) {
                    let now = self.nodes[n].life.local(self.t);
                    let e = StoreError::Unavailable("watch failed".into());
                    let actions = self.nodes[n].machine.on_store_error(&e, now);
                    self.execute(n, actions);
                }
            }
            Ev::Stopped(n, inc, cluster) => {
                if self.current(n, inc) {
                    self.dirty = true;
                    self.nodes[n].life.draining.remove(&cluster);
                    let now = self.nodes[n].life.local(self.t);
                    let actions = self.nodes[n].machine.on_stopped(&cluster, now);
                    self.execute(n, actions);
                }
            }
            Ev::Count(n, inc, count) => {
                if self.current(n, inc) {
                    let now = self.nodes[n].life.local(self.t);
                    let actions = self.nodes[n].machine.on_replicas(count, now);
                    self.execute(n, actions);
                }
            }
            Ev::Lapse => self.dirty = true,
            Ev::Fault(n, fault) => self.fault(n, fault),
            Ev::Scale(count) => {
                self.count = count;
                for n in 0..self.nodes.len() {
                    let (inc, delay) = (self.nodes[n].life.incarnation, self.rng.below(1_000));
                    self.queue.at(self.t + delay, Ev::Count(n, inc, count));
                }
            }
        }
    }

    /// Injects a failure of replica `n` now.
    pub(super) fn fault(&mut self, n: usize, fault: Fault) {
        if tracing() {
            eprintln!("{:>7} {} {fault:?}", self.t, self.nodes[n].life.identity);
        }
        self.dirty = true;
        match fault {
            Fault::Crash => self.nodes[n].life.alive = false,
            Fault::Shutdown => {
                // SIGTERM: stop, release once stopped, exit when released (2 s at most).
                let life = &self.nodes[n].life;
                if life.alive && self.t >= life.paused_until {
                    let now = life.local(self.t);
                    let actions = self.nodes[n].machine.shutdown(now);
                    self.checker.out.graceful.push(self.t);
                    self.nodes[n].life.exit_by = Some(self.t + 2_000);
                    self.execute(n, actions);
                } else {
                    self.nodes[n].life.alive = false;
                }
            }
            Fault::Restart => {
                let identity = self.nodes[n].life.identity.clone();
                let inc = self.nodes[n].life.incarnation + 1;
                self.nodes[n] = self.fresh_node(n, identity, inc);
                self.schedule_wake(n, self.t);
            }
            Fault::Pause(until) => self.nodes[n].life.paused_until = until,
            Fault::Partition(until) => self.partition(n, until),
            Fault::Outage(until) => {
                for m in 0..self.nodes.len() {
                    let until = until.max(self.nodes[m].life.partitioned_until);
                    self.partition(m, until);
                }
            }
        }
    }

    /// Cuts replica `n` off from the store until `until`: its watch fails.
    fn partition(&mut self, n: usize, until: u64) {
        self.nodes[n].life.partitioned_until = until;
        if self.nodes[n].watch.take().is_some() {
            let inc = self.nodes[n].life.incarnation;
            self.queue.at(self.t + 1_000, Ev::WatchFailed(n, inc));
        }
    }

    /// Replica `n` sees map version `v`: records a length change it missed.
    fn seen(&mut self, n: usize, v: u64) {
        let len = |v: u64| {
            let at = self.lengths.partition_point(|(w, _)| *w < v);
            self.lengths
                .get(at)
                .filter(|(w, _)| *w == v)
                .map(|(_, l)| *l)
        };
        if let Some(p) = self.nodes[n].seen.filter(|p| *p < v) {
            let from = self.lengths.partition_point(|(w, _)| *w <= p);
            let to = self.lengths.partition_point(|(w, _)| *w < v);
            let missed = self.lengths[from..to.max(from)]
                .iter()
                .any(|(_, l)| Some(*l) != len(v));
            if len(p) == len(v) && missed {
                let who = self.nodes[n].life.identity.clone();
                self.come_and_go.push((self.t, who));
            }
        }
        let node = &mut self.nodes[n];
        node.seen = node.seen.max(Some(v));
    }

    /// Starts a read, or asks for another once the one under way returns.
    fn read(&mut self, n: usize) {
        let node = &mut self.nodes[n];
        if node.reading {
            node.read_again = true;
            return;
        }
        node.reading = true;
        let inc = node.life.incarnation;
        if self.t < node.life.partitioned_until {
            let err = Err(StoreError::Unavailable("partitioned".into()));
            self.queue.at(self.t + 1_000, Ev::Deliver(n, inc, err));
        } else if self.rng.chance(self.cfg.store_errors) {
            let lat = self.latency();
            let err = Err(StoreError::Unavailable("injected".into()));
            self.queue.at(self.t + lat, Ev::Deliver(n, inc, err));
        } else {
            let lat = self.latency();
            self.queue.at(self.t + lat, Ev::ReadAt(n, inc));
        }
    }

    /// The map changed: every armed watch fires (after a delay), or fails.
    fn notify(&mut self) {
        for n in 0..self.nodes.len() {
            let node = &self.nodes[n];
            if !node.life.alive || node.watch.is_none_or(|since| since >= self.store.revision) {
                continue;
            }
            self.nodes[n].watch = None;
            let inc = self.nodes[n].life.incarnation;
            let lat = self.latency();
            let cut = self.t < self.nodes[n].life.partitioned_until;
            if cut || self.rng.chance(self.cfg.store_errors) {
                self.queue.at(self.t + lat, Ev::WatchFailed(n, inc));
            } else {
                self.queue.at(self.t + lat, Ev::Changed(n, inc));
            }
        }
    }

    /// Carries out one replica's actions, as the runner does, then arms its wake-up.
    fn execute(&mut self, n: usize, actions: Vec<Action>) {
        let inc = self.nodes[n].life.incarnation;
        let mut queue = VecDeque::from(actions);
        let now = self.nodes[n].life.local(self.t);
        self.publish(n);
        if !self.nodes[n].life.gate_open(self.t) {
            // No validity: whatever was still draining is cancelled now.
            for c in std::mem::take(&mut self.nodes[n].life.draining) {
                queue.extend(self.nodes[n].machine.on_stopped(&c, now));
            }
        }
        while let Some(action) = queue.pop_front() {
            if tracing() {
                eprintln!("{:>7} {} {action:?}", self.t, self.nodes[n].life.identity);
            }
            if matches!(action, Action::Start { .. } | Action::Stop { .. }) {
                self.dirty = true;
            }
            match action {
                Action::Stop { cluster, .. } => {
                    // Work in flight drains for a while (0–1.5 s) while the holder is valid;
                    // without validity it is cancelled at once.
                    let node = &mut self.nodes[n];
                    node.life.started.remove(&cluster);
                    if self.cfg.slow_stops && node.life.gate_open(self.t) {
                        node.life.draining.insert(cluster.clone());
                        let took = self.rng.between(0, 1_500);
                        self.queue.at(self.t + took, Ev::Stopped(n, inc, cluster));
                    } else {
                        queue.extend(node.machine.on_stopped(&cluster, now));
                    }
                }
                Action::Start { cluster, .. } => {
                    self.nodes[n].life.started.insert(cluster);
                    if self.t >= self.cfg.warmup_ms {
                        self.checker.out.handovers += 1;
                    }
                }
                Action::Read => self.read(n),
                Action::Write {
                    ticket, value, pre, ..
                } => {
                    if self.t < self.nodes[n].life.partitioned_until {
                        let err = Err(StoreError::Unavailable("partitioned".into()));
                        self.queue
                            .at(self.t + 1_000, Ev::Reply(n, inc, ticket, err));
                    } else {
                        let lat = self.latency();
                        self.queue
                            .at(self.t + lat, Ev::Arrive(n, inc, ticket, value, pre));
                    }
                }
            }
        }
        self.publish(n);
        if let Some(wake) = self.nodes[n].machine.next_wake() {
            let at = self.nodes[n].life.clock.real(wake).max(self.t);
            self.schedule_wake(n, at);
        }
        let until = self.nodes[n].machine.valid_until();
        if until.is_some() && until != self.nodes[n].lapse_at {
            self.nodes[n].lapse_at = until;
            if let Some(u) = until {
                let at = self.nodes[n].life.clock.real(u).max(self.t);
                self.queue.at(at, Ev::Lapse);
            }
        }
    }

    /// Arms replica `n`'s wake-up at `at`, unless one fires no later.
    fn schedule_wake(&mut self, n: usize, at: u64) {
        let node = &mut self.nodes[n];
        if node.wake_at.is_some_and(|w| w <= at && w >= self.t) {
            return;
        }
        node.wake_at = Some(at);
        let inc = node.life.incarnation;
        self.queue.at(at, Ev::Wake(n, inc));
    }

    /// What the runner publishes after each step: the end of its validity, which the
    /// controller's gate follows.
    fn publish(&mut self, n: usize) {
        let node = &mut self.nodes[n];
        node.life.gate_until = node.machine.valid_until();
    }

    /// At this instant: no cluster acted on by two replicas (who acts comes from the starts
    /// and stops executed and the validity published; the machine's own view must agree);
    /// coverage windows.
    fn check(&mut self) {
        self.checker.begin();
        for (i, node) in self.nodes.iter().enumerate() {
            for c in node.life.acting(self.t) {
                self.checker.add(i, c);
            }
            if !node.life.alive {
                continue;
            }
            let now = node.life.local(self.t);
            if let Some(d) = node.life.disagreement(self.t, node.machine.acting(now)) {
                self.checker.out.disagreements.push(d);
            }
        }
        let nodes = &self.nodes;
        self.checker.end(self.t, |i| nodes[i].life.identity.clone());
    }

    /// The live replica holding `shard` with its validity lasting, if any.
    pub(super) fn holder_of(&self, shard: u32) -> Option<usize> {
        self.nodes.iter().position(|n| {
            n.life.alive
                && n.machine.shard() == Some(shard)
                && n.machine.is_valid(n.life.local(self.t))
        })
    }

    /// Each live replica's shard, as it sees itself.
    pub(super) fn shards(&self) -> Vec<Option<u32>> {
        self.nodes
            .iter()
            .filter(|n| n.life.alive)
            .map(|n| n.machine.shard())
            .collect()
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// What one run showed.
pub(super) struct Run {
    pub(super) out: Outcome,
    /// Events handled.
    pub(super) events: u64,
    /// See [`Sim::come_and_go`].
    pub(super) come_and_go: Vec<(u64, String)>,
}

/// Runs one seed.
pub(super) fn simulate(cfg: SimConfig, seed: u64) -> Run {
    let mut sim = Sim::new(cfg, seed);
    sim.advance(sim.cfg.run_ms);
    let (end, events) = (sim.t, sim.events);
    Run {
        out: sim.checker.finish(end),
        events,
        come_and_go: sim.come_and_go,
    }
}

mod config;
#[cfg(test)]
mod tests;
