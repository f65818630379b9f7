//! What every simulated protocol shares: the event queue, the store, each replica's clocks
//! and life (crashes, pauses, partitions), store latency, the fault schedule, and the
//! checker of overlaps and coverage windows.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::time::Duration;

use fleetshard_core::Cluster;

use super::Rng;
use crate::argocd::WallTime;
use crate::lease::Mono;
use crate::store::{Entry, Listing, Precondition, StoreError};

/// Events ordered by time, then by the order they were scheduled.
pub(crate) struct Queue<E> {
    seq: u64,
    heap: BinaryHeap<Reverse<(u64, u64, usize)>>,
    events: Vec<Option<E>>,
}

impl<E> Queue<E> {
    pub(crate) fn new() -> Self {
        Queue {
            seq: 0,
            heap: BinaryHeap::new(),
            events: Vec::new(),
        }
    }

    /// Schedules `ev` at `t` (ms).
    pub(crate) fn at(&mut self, t: u64, ev: E) {
        self.seq += 1;
        self.events.push(Some(ev));
        self.heap
            .push(Reverse((t, self.seq, self.events.len() - 1)));
    }

    /// The next event at or before `until`, with its time.
    pub(crate) fn pop(&mut self, until: u64) -> Option<(u64, E)> {
        loop {
            let Reverse((t, _, id)) = *self.heap.peek()?;
            if t > until {
                return None;
            }
            self.heap.pop();
            if let Some(ev) = self.events[id].take() {
                return Some((t, ev));
            }
        }
    }
}

/// A store with compare-and-swap and store-wide revisions (versions never reused).
#[derive(Default)]
pub(crate) struct SimStore {
    pub(crate) revision: u64,
    pub(crate) entries: BTreeMap<String, (Vec<u8>, u64)>,
}

impl SimStore {
    pub(crate) fn listing(&self) -> Listing {
        let entries = self
            .entries
            .iter()
            .map(|(k, (v, ver))| Entry {
                key: k.clone(),
                value: v.clone(),
                version: *ver,
            })
            .collect();
        Listing {
            entries,
            revision: self.revision,
        }
    }

    pub(crate) fn write(
        &mut self,
        key: &str,
        value: Vec<u8>,
        pre: Precondition,
    ) -> Result<u64, StoreError> {
        if !pre.admits(self.entries.get(key).map(|e| e.1)) {
            return Err(StoreError::Conflict {
                key: key.to_owned(),
            });
        }
        self.revision += 1;
        self.entries.insert(key.to_owned(), (value, self.revision));
        Ok(self.revision)
    }

    /// Deletes `key` if `pre` holds (a delete is a store revision, as in etcd).
    pub(crate) fn delete(&mut self, key: &str, pre: Precondition) -> Result<(), StoreError> {
        let current = self.entries.get(key).map(|e| e.1);
        if !pre.admits(current) {
            return Err(StoreError::Conflict {
                key: key.to_owned(),
            });
        }
        if current.is_some() {
            self.revision += 1;
            self.entries.remove(key);
        }
        Ok(())
    }
}

/// One replica's clocks. Monotonic: `offset + rate × real` ms; the wall clock: a date plus
/// its own offset (hours of skew) plus the same rate, only ever written, never compared.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    pub(crate) offset_ms: f64,
    pub(crate) rate: f64,
    pub(crate) wall_offset_s: i64,
}

impl Clock {
    /// A clock whose rate is within `drift` of real time (drawn from `rng`).
    pub(crate) fn drawn(rng: &mut Rng, drift: f64) -> Clock {
        let rate = 1.0 + (2.0 * rng.unit() - 1.0) * drift;
        Clock {
            offset_ms: rng.below(1_000_000) as f64,
            rate,
            wall_offset_s: 0,
        }
    }

    /// The local monotonic reading at real time `t` (ms).
    pub(crate) fn local(&self, t: u64) -> Mono {
        Mono(Duration::from_secs_f64(
            (self.offset_ms + self.rate * t as f64) / 1000.0,
        ))
    }

    /// The first real time (ms) at which the local clock reads at least `local`.
    pub(crate) fn real(&self, local: Mono) -> u64 {
        let ms = (local.0.as_secs_f64() * 1000.0 - self.offset_ms) / self.rate;
        let mut t = ms.max(0.0).ceil() as u64;
        while self.local(t) < local {
            t += 1;
        }
        t
    }

    /// The wall clock at real time `t`.
    pub(crate) fn wall(&self, t: u64) -> WallTime {
        let base = WallTime::from_unix_seconds(1_795_000_000 + self.wall_offset_s);
        base.saturating_add(Duration::from_secs_f64(self.rate * t as f64 / 1000.0))
    }
}

/// What the harness knows of one replica's process.
pub(crate) struct Life {
    pub(crate) identity: String,
    /// New at every restart: events of an earlier incarnation are dropped.
    pub(crate) incarnation: u64,
    pub(crate) alive: bool,
    pub(crate) paused_until: u64,
    pub(crate) partitioned_until: u64,
    /// Stopping gracefully: exits once released, or at this time.
    pub(crate) exit_by: Option<u64>,
    /// Clusters whose work is still stopping (items in flight): they count as acting.
    pub(crate) draining: BTreeSet<String>,
    /// Clusters whose work the driver started (an executed `Start`) and has not stopped
    /// (an executed `Stop`): with `draining`, what this process acts on while its gate is
    /// open. Derived from the actions executed, never read from the machine.
    pub(crate) started: BTreeSet<String>,
    /// The lease deadline (local clock) as the runner last published it after a step: the
    /// controller's gate closes there, and no work of this process runs past it.
    pub(crate) gate_until: Option<Mono>,
    /// SIGTERM: the runner gave up (released, or its 2 s ran out) and handles nothing
    /// more; the process exits once its draining work has ended or its gate closed.
    pub(crate) runner_stopped: bool,
    pub(crate) clock: Clock,
}

impl Life {
    pub(crate) fn new(identity: String, incarnation: u64, clock: Clock) -> Life {
        Life {
            identity,
            incarnation,
            alive: true,
            paused_until: 0,
            partitioned_until: 0,
            exit_by: None,
            draining: BTreeSet::new(),
            started: BTreeSet::new(),
            gate_until: None,
            runner_stopped: false,
            clock,
        }
    }

    pub(crate) fn local(&self, t: u64) -> Mono {
        self.clock.local(t)
    }

    /// Whether the work gate is open at real time `t`: the process is alive and its
    /// published lease deadline is ahead on its own clock.
    pub(crate) fn gate_open(&self, t: u64) -> bool {
        self.alive && self.gate_until.is_some_and(|until| self.local(t) < until)
    }

    /// How the machine's own view of what it acts on at real time `t` (`machine`) differs
    /// from what the executed starts and stops say, if it does.
    pub(crate) fn disagreement<'a>(
        &self,
        t: u64,
        machine: impl Iterator<Item = &'a str>,
    ) -> Option<String> {
        let executed: Vec<&str> = if self.gate_open(t) {
            self.started.iter().map(String::as_str).collect()
        } else {
            Vec::new()
        };
        let mut machine: Vec<&str> = machine.collect();
        machine.sort_unstable();
        (machine != executed).then(|| {
            format!(
                "{} at {t}: the machine acts on {machine:?}, the executed actions on {executed:?}",
                self.identity
            )
        })
    }

    /// What this process acts on at real time `t`, from the starts and stops it executed:
    /// started or still draining, while its gate is open.
    pub(crate) fn acting(&self, t: u64) -> impl Iterator<Item = &String> {
        let open = self.gate_open(t);
        self.started
            .iter()
            .chain(&self.draining)
            .filter(move |_| open)
    }
}

/// Store latency: mostly `normal`, sometimes (`spike_chance`) a `spike`, each way.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Latency {
    pub(crate) normal: (u64, u64),
    pub(crate) spike_chance: f64,
    pub(crate) spike: (u64, u64),
}

impl Latency {
    pub(crate) fn draw(&self, rng: &mut Rng) -> u64 {
        if rng.chance(self.spike_chance) {
            rng.between(self.spike.0, self.spike.1)
        } else {
            rng.between(self.normal.0, self.normal.1)
        }
    }

    /// The slowest one-way delay.
    pub(crate) fn max(&self) -> u64 {
        self.normal.1.max(self.spike.1)
    }
}

/// A failure of one replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// `kill -9`.
    Crash,
    /// SIGTERM: a graceful shutdown.
    Shutdown,
    /// A new process (a new incarnation) under the same identity.
    Restart,
    /// SIGSTOP until then (ms).
    Pause(u64),
    /// Cut off from the store until then (ms).
    Partition(u64),
    /// Every replica cut off from the store until then (ms): a store outage.
    Outage(u64),
}

impl Fault {
    /// When the failure ends (ms), for those that last: a pause, a partition, an outage.
    pub(crate) fn ends(self) -> Option<u64> {
        match self {
            Fault::Pause(until) | Fault::Partition(until) | Fault::Outage(until) => Some(until),
            Fault::Crash | Fault::Shutdown | Fault::Restart => None,
        }
    }
}

/// How failures are spread over a run: one at a time, each `len` long, `gap` apart, none
/// ending later than `tail` before the end.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FaultPlan {
    pub(crate) from: u64,
    pub(crate) until: u64,
    pub(crate) len: (u64, u64),
    pub(crate) gap: (u64, u64),
    pub(crate) tail: u64,
    /// Some failures are a store outage for every replica at once.
    pub(crate) outages: bool,
    /// Half the failures come with one or two more on other replicas, starting within 2 s.
    pub(crate) concurrent: bool,
}

impl FaultPlan {
    /// The failures, as (time, replica, fault): a crash or a shutdown is followed by a
    /// restart `len` later. With `concurrent`, a failure may come with others at once.
    pub(crate) fn draw(&self, rng: &mut Rng, nodes: usize) -> Vec<(u64, usize, Fault)> {
        let mut out = Vec::new();
        let mut t = self.from;
        loop {
            let n = rng.below(nodes as u64) as usize;
            let len = rng.between(self.len.0, self.len.1);
            // Every failure ends with time to recover before the run does.
            if t + len + self.tail >= self.until {
                break;
            }
            let mut end = t + len;
            self.one(rng, &mut out, t, n, len);
            if self.concurrent && nodes > 1 && rng.chance(0.5) {
                // One or two more, on other replicas, beginning within 2 s.
                for _ in 0..rng.between(1, 2.min(nodes as u64 - 1)) {
                    let other = (n + 1 + rng.below(nodes as u64 - 1) as usize) % nodes;
                    let at = t + rng.between(0, 2_000);
                    let len = rng.between(self.len.0, self.len.1);
                    if at + len + self.tail >= self.until
                        || out.iter().any(|&(s, m, _)| m == other && s >= t)
                    {
                        continue;
                    }
                    self.one(rng, &mut out, at, other, len);
                    end = end.max(at + len);
                }
            }
            t = end + rng.between(self.gap.0, self.gap.1);
        }
        out.sort_by_key(|&(t, _, _)| t);
        out
    }

    /// One failure of replica `n` at `t`, lasting `len`.
    fn one(&self, rng: &mut Rng, out: &mut Vec<(u64, usize, Fault)>, t: u64, n: usize, len: u64) {
        match rng.below(if self.outages { 5 } else { 4 }) {
            0 => {
                out.push((t, n, Fault::Crash));
                out.push((t + len, n, Fault::Restart));
            }
            3 => {
                out.push((t, n, Fault::Shutdown));
                out.push((t + len, n, Fault::Restart));
            }
            1 => out.push((t, n, Fault::Pause(t + len))),
            4 => out.push((t, n, Fault::Outage(t + len))),
            _ => out.push((t, n, Fault::Partition(t + len))),
        }
    }

    /// How many failures `events` holds (restarts are part of theirs).
    pub(crate) fn count(events: &[(u64, usize, Fault)]) -> usize {
        events
            .iter()
            .filter(|(_, _, f)| *f != Fault::Restart)
            .count()
    }
}

/// What one run showed.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// Violations of "one acting owner per cluster": (time, cluster, replicas acting).
    pub(crate) overlaps: Vec<(u64, String, Vec<String>)>,
    /// Every window (ms) in which a cluster had no acting owner, after warm-up.
    pub(crate) uncovered: Vec<u64>,
    /// The same windows as (from, to), with those still open at the end (to = the end).
    pub(crate) spans: Vec<(u64, u64)>,
    /// When failures began and counts changed (ms): a window is bounded from the last one.
    pub(crate) disruptions: Vec<u64>,
    /// Failures injected.
    pub(crate) faults: usize,
    /// When graceful shutdowns happened.
    pub(crate) graceful: Vec<u64>,
    /// Windows that began at a graceful shutdown (ms).
    pub(crate) graceful_windows: Vec<u64>,
    /// Windows still open when the run ended (ms so far).
    pub(crate) open_at_end: Vec<u64>,
    /// Clusters started after warm-up (handovers: each is a cluster changing hands).
    pub(crate) handovers: usize,
    /// Instants where a machine's own view of what it acts on differed from what the
    /// driver executed (starts and stops) within its published deadline.
    pub(crate) disagreements: Vec<String>,
    /// Instants where two replicas held the distributor role at once: (time, replicas).
    pub(crate) distributor_overlaps: Vec<(u64, Vec<String>)>,
    /// Windows (from, to) without a distributor after warm-up, those still open at the
    /// end included (to = the end).
    pub(crate) distributor_gaps: Vec<(u64, u64)>,
    /// Writes (and deletes) each replica made that the store applied, after warm-up.
    pub(crate) writes: Vec<u64>,
    /// Times the stored distributor record changed form: (separate → bound, bound →
    /// separate).
    pub(crate) role_switches: (u64, u64),
    /// Before warm-up (a new fleet starting): the largest part of the fleet's load (per
    /// mille, of the clusters present) one replica acted on at any instant.
    pub(crate) cold_peak_permille: u64,
    /// When every cluster first had an acting owner.
    pub(crate) first_covered: Option<u64>,
    /// With slices (`fenced/apps.rs`, where `overlaps` and the windows are per application):
    /// violations of "one acting owner per unit" (a whole cluster or a slice), as
    /// `overlaps`.
    pub(crate) unit_overlaps: Vec<(u64, String, Vec<String>)>,
    /// With slices: how the committed generations cut the clusters.
    pub(crate) slicing: Slicing,
}

/// How committed generations changed the cut of clusters into slices, counted from one
/// committed generation to the next, cluster by cluster.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slicing {
    /// A cluster committed whole, then as slices.
    pub(crate) splits: u64,
    /// A cluster committed as slices of one count, then of another.
    pub(crate) resplits: u64,
    /// A cluster committed as slices, then whole.
    pub(crate) joins: u64,
    /// Failures (crash, SIGTERM, pause, partition, or an outage) that hit a replica acting
    /// on a slice at that moment.
    pub(crate) on_slice_owners: u64,
    /// The largest number of slices a cluster was committed as.
    pub(crate) most_slices: u32,
}

impl Outcome {
    /// The longest time any cluster went without an acting owner counted from the later
    /// of its window's start and the last disruption before the window ended (a window that
    /// a second failure or a count change prolonged is measured from that).
    pub(crate) fn longest_since_disruption(&self) -> u64 {
        self.longest_after_disruption(&self.spans)
    }

    /// The longest of `spans` counted from the later of its start and the last disruption
    /// before it ended.
    pub(crate) fn longest_after_disruption(&self, spans: &[(u64, u64)]) -> u64 {
        spans
            .iter()
            .map(|&(from, to)| {
                let last = self
                    .disruptions
                    .iter()
                    .filter(|&&d| d <= to)
                    .max()
                    .copied()
                    .unwrap_or(0);
                to - from.max(last)
            })
            .max()
            .unwrap_or(0)
    }
}

/// Checks, at every event, that no cluster has two acting owners, and measures how long
/// each cluster goes without one. Allocates nothing per check once warm.
pub(crate) struct Checker {
    warmup: u64,
    /// A window that begins this long after a graceful shutdown is counted as its window
    /// too (0: only at the same instant).
    graceful_slack: u64,
    /// The clusters' ids, sorted, with their index in `owners`.
    ids: Vec<(String, usize)>,
    /// Per cluster, the replicas acting on it at the last check.
    owners: Vec<Vec<usize>>,
    /// Per cluster, since when it has had no acting owner.
    uncovered_since: Vec<Option<u64>>,
    /// Per cluster, whether it is in the fleet now (coverage is measured only then).
    present: Vec<bool>,
    /// Per cluster, its load (1 each unless [`Checker::with_loads`]).
    loads: Vec<u64>,
    pub(crate) out: Outcome,
}

impl Checker {
    pub(crate) fn new(warmup: u64, graceful_slack: u64, clusters: &[Cluster]) -> Checker {
        Checker::of_ids(
            warmup,
            graceful_slack,
            clusters.iter().map(|c| c.id.clone()),
        )
    }

    /// A checker of whatever `ids` name (clusters, or applications: `fenced/apps.rs`), each
    /// addressed by its id or by its index in `ids` ([`Checker::add_at`]).
    pub(crate) fn of_ids(
        warmup: u64,
        graceful_slack: u64,
        ids: impl IntoIterator<Item = String>,
    ) -> Checker {
        let mut ids: Vec<(String, usize)> =
            ids.into_iter().enumerate().map(|(i, id)| (id, i)).collect();
        let n = ids.len();
        ids.sort();
        Checker {
            warmup,
            graceful_slack,
            ids,
            owners: vec![Vec::new(); n],
            uncovered_since: vec![None; n],
            present: vec![true; n],
            loads: Vec::new(),
            out: Outcome::default(),
        }
    }

    /// A cluster joins (`true`) or leaves the fleet: a cluster not in the fleet needs no
    /// owner (one still acting on it counts for G1 all the same).
    pub(crate) fn set_present(&mut self, cluster: &str, present: bool) {
        if let Ok(at) = self
            .ids
            .binary_search_by(|(id, _)| id.as_str().cmp(cluster))
        {
            self.set_present_at(self.ids[at].1, present);
        }
    }

    /// [`Checker::set_present`] of the `i`-th id given to the checker.
    pub(crate) fn set_present_at(&mut self, i: usize, present: bool) {
        self.present[i] = present;
        if !present {
            self.uncovered_since[i] = None;
        }
    }

    /// Starts a check: nobody acts on anything yet.
    pub(crate) fn begin(&mut self) {
        for o in &mut self.owners {
            o.clear();
        }
    }

    /// The clusters' loads, in the order they were given to [`Checker::new`].
    pub(crate) fn with_loads(mut self, loads: &[u64]) -> Checker {
        self.loads = loads.to_vec();
        self
    }

    /// Replica `node` acts on `cluster` (a pair may be added twice).
    pub(crate) fn add(&mut self, node: usize, cluster: &str) {
        let Ok(at) = self
            .ids
            .binary_search_by(|(id, _)| id.as_str().cmp(cluster))
        else {
            return;
        };
        self.add_at(node, self.ids[at].1);
    }

    /// Replica `node` acts on the `i`-th id given to the checker (a pair may be added twice).
    pub(crate) fn add_at(&mut self, node: usize, i: usize) {
        let owners = &mut self.owners[i];
        if !owners.contains(&node) {
            owners.push(node);
        }
    }

    /// Ends the check at `t`: records overlaps (naming the replicas with `name`) and opens
    /// or closes coverage windows.
    pub(crate) fn end(&mut self, t: u64, name: impl Fn(usize) -> String) {
        for (id, i) in &self.ids {
            let owners = &self.owners[*i];
            if owners.len() > 1 {
                let who = owners.iter().map(|&n| name(n)).collect();
                self.out.overlaps.push((t, id.clone(), who));
            }
            if !self.present[*i] {
                continue;
            }
            match (owners.is_empty(), self.uncovered_since[*i]) {
                (false, Some(since)) => {
                    self.uncovered_since[*i] = None;
                    if since >= self.warmup {
                        self.out.uncovered.push(t - since);
                        self.out.spans.push((since, t));
                        let slack = self.graceful_slack;
                        if self
                            .out
                            .graceful
                            .iter()
                            .any(|&g| g <= since && since <= g + slack)
                        {
                            self.out.graceful_windows.push(t - since);
                        }
                    }
                }
                (true, None) => self.uncovered_since[*i] = Some(t),
                _ => {}
            }
        }
        if self.out.first_covered.is_none() && self.all_covered() {
            self.out.first_covered = Some(t);
        }
        if t < self.warmup {
            let (mut acting, mut total) = (BTreeMap::<usize, u64>::new(), 0);
            for (i, owners) in self.owners.iter().enumerate() {
                let load = self.loads.get(i).copied().unwrap_or(1);
                total += if self.present[i] { load } else { 0 };
                for &node in owners {
                    *acting.entry(node).or_default() += load;
                }
            }
            let peak = acting.values().copied().max().unwrap_or(0);
            let permille = peak * 1_000 / total.max(1);
            self.out.cold_peak_permille = self.out.cold_peak_permille.max(permille);
        }
    }

    /// Whether every cluster had an acting owner at the last check.
    pub(crate) fn all_covered(&self) -> bool {
        self.uncovered_since.iter().all(Option::is_none)
    }

    /// The run ended at `end`: windows still open.
    pub(crate) fn finish(mut self, end: u64) -> Outcome {
        let open: Vec<u64> = self
            .ids
            .iter()
            .filter_map(|(_, i)| self.uncovered_since[*i])
            .collect();
        self.out.open_at_end = open.iter().map(|since| end - since).collect();
        self.out
            .spans
            .extend(open.iter().map(|&since| (since, end)));
        self.out
    }
}

/// `FLEETSHARD_SIM_TRACE` is set: print every event.
pub(crate) fn tracing() -> bool {
    std::env::var_os("FLEETSHARD_SIM_TRACE").is_some()
}
