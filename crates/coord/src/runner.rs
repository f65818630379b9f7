//! The runner: the only I/O around a fenced-mode [`Replica`]. One task owns the replica
//! (no locks around it) and feeds it everything: listings of the root prefix (every
//! `poll`, or sooner when the store reports a change), its own renew timer (`tick`), the
//! outcomes of its writes (sent as separate tasks and reported back through a channel),
//! and the shutdown signal. It executes the replica's actions in order, reports ownership
//! changes on a channel and publishes a [`Status`] snapshot through a `watch`.
//!
//! Nothing over the whole fleet runs on that task: the distributor's placement is handed
//! out by the replica ([`Action::Place`]) and computed by a [`Placer`] (tokio's blocking
//! pool), its result fed back like a write's outcome; the status's list of clusters is
//! rebuilt only when it changes; finished stops are taken in batches. So renewals, the
//! status behind `/readyz` and shutdown never wait for a placement.
//!
//! Time is `tokio::time::Instant` since the runner started, as [`Mono`]: tests run it
//! under paused time.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, MissedTickBehavior};

use crate::fenced::{
    Action, DropGuard, FleetInput, Placed, PlacementJob, Replica, ReplicaConfig, Ticket,
};
use crate::lease::Mono;
pub use crate::ownership::{
    NoMetrics, Ownership, OwnershipChange, PeerRenewal, RunnerMetrics, StopHook,
};
use crate::select::{poll_opt, sleep_until_opt};

mod inputs;
mod placer;
mod status;

use crate::store::{Listing, Store, StoreError};
pub use inputs::{RunnerError, RunnerFleet, RunnerTiming};
pub use placer::{BlockingPlacer, InlinePlacer, Placer};
pub use status::{HeldBackStatus, Status};

/// A stop that finished, on its way back to the owning task. A stop caused by a lapse
/// keeps the lapse time: the controller admits no work past the lease deadline (its
/// shard filter follows `Status::lease_valid_until`), so ownership ended then.
struct StopDone {
    cluster: String,
    lapsed_at: Option<Instant>,
}

/// A write's outcome on its way back to the owning task.
struct WriteDone {
    ticket: Ticket,
    /// Whether it was a delete.
    delete: bool,
    /// The new version of a put; `None` for a delete.
    result: Result<Option<u64>, StoreError>,
}

/// A placement's result on its way back to the owning task (`None`: it failed).
type PlaceDone = Option<Placed>;

/// Beyond the renew period and the polling interval, how long another holder's record may
/// stay unchanged before the metrics count it as not renewed (a write's time, a late timer).
const PEER_RENEW_MARGIN: Duration = Duration::from_millis(100);

/// Drives one [`Replica`] against a store.
pub struct Runner {
    store: Arc<dyn Store>,
    replica: Replica,
    cfg: ReplicaConfig,
    timing: RunnerTiming,
    /// The current fleet.
    fleet: watch::Receiver<RunnerFleet>,
    events: mpsc::UnboundedSender<OwnershipChange>,
    status: watch::Sender<Status>,
    start: Instant,
    acting: BTreeSet<String>,
    /// The shard last held, for stop events after a lapse (when `shard()` is already None).
    last_shard: Option<u32>,
    /// The shard count from outside (a Deployment's replicas), for `ShardCount::External`.
    external: Option<watch::Receiver<Option<u32>>>,
    /// Stops work on a cluster (none: there is no work, a stop is immediate).
    stop_hook: Option<Arc<dyn StopHook>>,
    stops_tx: mpsc::UnboundedSender<StopDone>,
    stops_rx: Option<mpsc::UnboundedReceiver<StopDone>>,
    /// Stops sent to the hook and not finished yet, per cluster.
    stops_in_flight: BTreeMap<String, usize>,
    metrics: Arc<dyn RunnerMetrics>,
    /// Computes placements off this task.
    placer: Arc<dyn Placer>,
    placed_tx: mpsc::UnboundedSender<PlaceDone>,
    placed_rx: Option<mpsc::UnboundedReceiver<PlaceDone>>,
    /// The fleet the last step saw (a placement it asks for is run on it).
    step_fleet: RunnerFleet,
    /// Moves whenever `acting` changes: the status's list is rebuilt only then.
    acting_epoch: u64,
    /// The epoch and lease validity the published list was built at.
    published_acting: Option<(u64, bool)>,
    stats: Status,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("store", &self.store.describe())
            .field("identity", &self.cfg.identity)
            .finish_non_exhaustive()
    }
}

impl Runner {
    /// A runner for one replica over `store`, placing the latest `fleet` when elected
    /// distributor (a change is stepped at once; [`RunnerFleet::fixed`] for one that does
    /// not change). Ownership changes go to `events` (a closed receiver is ignored: the
    /// runner keeps working). Returns the runner and its status receiver.
    pub fn new(
        store: Arc<dyn Store>,
        cfg: ReplicaConfig,
        timing: RunnerTiming,
        fleet: watch::Receiver<RunnerFleet>,
        events: mpsc::UnboundedSender<OwnershipChange>,
    ) -> Result<(Runner, watch::Receiver<Status>), RunnerError> {
        cfg.timing.validate()?;
        cfg.shards.validate()?;
        let (status, rx) = watch::channel(Status::default());
        let (stops_tx, stops_rx) = mpsc::unbounded_channel();
        let (placed_tx, placed_rx) = mpsc::unbounded_channel();
        let runner = Runner {
            store,
            replica: Replica::new(cfg.clone()).place_off_step(),
            cfg,
            timing,
            fleet,
            events,
            status,
            start: Instant::now(),
            acting: BTreeSet::new(),
            last_shard: None,
            external: None,
            stop_hook: None,
            stops_tx,
            stops_rx: Some(stops_rx),
            stops_in_flight: BTreeMap::new(),
            metrics: Arc::new(NoMetrics),
            placer: Arc::new(BlockingPlacer),
            placed_tx,
            placed_rx: Some(placed_rx),
            step_fleet: RunnerFleet::default(),
            acting_epoch: 0,
            published_acting: None,
            stats: Status::default(),
        };
        Ok((runner, rx))
    }

    /// Takes the shard count from `count` (for `ShardCount::External`): the distributor
    /// reads its latest value at every step.
    pub fn with_external_shards(mut self, count: watch::Receiver<Option<u32>>) -> Self {
        self.external = Some(count);
        self
    }

    /// Reports store latencies to `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<dyn RunnerMetrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Computes placements with `placer` (default: [`BlockingPlacer`]).
    pub fn with_placer(mut self, placer: Arc<dyn Placer>) -> Self {
        self.placer = placer;
        self
    }

    /// Guards against a fleet that shrinks at once with `guard` (default:
    /// [`DropGuard::default`]).
    pub fn with_drop_guard(mut self, guard: DropGuard) -> Self {
        self.replica = Replica::new(self.cfg.clone())
            .place_off_step()
            .with_drop_guard(guard);
        self
    }

    /// Stops clusters through `hook` and waits for it before acknowledging a handover.
    pub fn with_stop_hook(mut self, hook: Arc<dyn StopHook>) -> Self {
        self.stop_hook = Some(hook);
        self
    }

    fn now(&self) -> Mono {
        Mono(self.start.elapsed())
    }

    /// Runs until `shutdown` turns true (or its sender is dropped), then releases the shard
    /// and the distributor role, stepping until released or `release_timeout`, and
    /// returns whether the release completed. Every cluster started is reported stopped
    /// before it returns.
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) -> bool {
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<WriteDone>();
        let prefix = self.cfg.root.clone();
        let mut tick = tokio::time::interval(self.timing.tick);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut next_poll = Instant::now();
        let mut listing: Option<BoxFuture<'static, (Result<Listing, StoreError>, Instant)>> = None;
        let mut change: Option<BoxFuture<'static, Result<u64, StoreError>>> = None;
        let mut release_by: Option<Instant> = None;
        let mut newest_write = 0u64;
        let mut woke_for: Option<Mono> = None;
        let mut stops_rx = self
            .stops_rx
            .take()
            .unwrap_or_else(|| mpsc::unbounded_channel().1);
        let mut placed_rx = self
            .placed_rx
            .take()
            .unwrap_or_else(|| mpsc::unbounded_channel().1);
        // Its own receiver: the select below borrows it while the branches use `self`.
        let mut fleet_rx = self.fleet.clone();
        let mut fleet_open = true;
        if *shutdown.borrow() {
            return true;
        }
        loop {
            if let Some(by) = release_by
                && (self.replica.is_released() || Instant::now() >= by)
            {
                break;
            }
            let deadline = self
                .replica
                .shard_valid_until(self.now())
                .map(|m| self.start + m.0);
            // Each due time is woken for once: a renewal held back (a claim in flight) is
            // left to the timer, not spun on.
            let renewal = self.replica.next_renewal().filter(|r| Some(r.0) > woke_for);
            tokio::select! {
                biased;
                r = shutdown.changed(), if release_by.is_none() => {
                    if r.is_err() || *shutdown.borrow() {
                        tracing::info!(identity = %self.cfg.identity, "releasing");
                        release_by = Some(Instant::now() + self.timing.release_timeout);
                        self.stats.stopping = true;
                        // A lease that lapsed while this task could not run (a pause)
                        // ended ownership then: its stops are dated at the lapse.
                        let actions = self.replica.tick(self.now());
                        self.execute(actions, &done_tx);
                        let actions = self.replica.release();
                        self.execute(actions, &done_tx);
                        next_poll = Instant::now();
                    }
                }
                Some(done) = done_rx.recv() => {
                    // A confirmed write is a protocol step (a claim, a commit, an ack):
                    // list again at once so the next step does not wait for the poll.
                    if let Ok(Some(v)) = done.result {
                        newest_write = newest_write.max(v);
                        next_poll = Instant::now();
                    }
                    self.on_write(done);
                }
                r = fleet_rx.changed(), if fleet_open => {
                    // A new inventory: list and step now (the distributor places it).
                    match r {
                        Ok(()) => next_poll = Instant::now(),
                        Err(_) => fleet_open = false,
                    }
                }
                Some(stop) = stops_rx.recv() => {
                    // A handover of thousands of clusters finishes thousands of stops at
                    // once: take every one that is done, then tick once.
                    self.stopped(stop);
                    while let Ok(stop) = stops_rx.try_recv() {
                        self.stopped(stop);
                    }
                    // The acknowledgement or release it held back goes out now.
                    let actions = self.replica.tick(self.now());
                    self.execute(actions, &done_tx);
                }
                Some(placed) = placed_rx.recv() => {
                    let actions = match placed {
                        Some(placed) => {
                            if let Some(spread) = placed.spread() {
                                tracing::info!(%spread, "placed a vacant shard's clusters");
                            }
                            self.replica.on_placed(self.now(), placed)
                        }
                        None => {
                            self.replica.on_placement_failed();
                            Vec::new()
                        }
                    };
                    self.execute(actions, &done_tx);
                    // A result for inputs that changed meanwhile was dropped: step now.
                    next_poll = Instant::now();
                }
                _ = tick.tick() => {
                    let actions = self.replica.tick(self.now());
                    self.execute(actions, &done_tx);
                }
                _ = sleep_until_opt(renewal.map(|(m, _)| self.start + m.0)) => {
                    // A renewal due: on time, not up to a tick or a poll late. A presence
                    // record is renewed at a listing's step: list now.
                    woke_for = renewal.map(|r| r.0);
                    let actions = self.replica.tick(self.now());
                    self.execute(actions, &done_tx);
                    if renewal.is_some_and(|(_, presence)| presence) {
                        next_poll = Instant::now();
                    }
                }
                _ = sleep_until_opt(deadline) => {
                    // Our own deadline: stop at once rather than up to a tick late.
                    let actions = self.replica.tick(self.now());
                    self.execute(actions, &done_tx);
                }
                (r, asked) = poll_opt(&mut listing) => {
                    listing = None;
                    // A listing older than our newest write is ignored by the replica:
                    // fetch a fresh one now.
                    let stale = r.as_ref().is_ok_and(|v| v.revision < newest_write);
                    next_poll = Instant::now() + if stale { Duration::ZERO } else { self.timing.poll };
                    let view = match r {
                        Ok(v) => Some(v),
                        Err(e) => { self.store_error(&e); None }
                    };
                    if let Some(v) = &view {
                        let (store, p, since) = (self.store.clone(), prefix.clone(), v.revision);
                        change = Some(Box::pin(async move { store.wait_for_change(&p, since).await }));
                    }
                    let asked = Mono(asked.saturating_duration_since(self.start));
                    self.step(view.as_ref(), asked, &done_tx);
                }
                r = poll_opt(&mut change) => {
                    change = None;
                    match r {
                        Ok(_) => next_poll = Instant::now(),
                        Err(e) => self.store_error(&e),
                    }
                }
                _ = tokio::time::sleep_until(next_poll), if listing.is_none() && self.stats.store_replaced.is_none() => {
                    let (store, p) = (self.store.clone(), prefix.clone());
                    let metrics = self.metrics.clone();
                    listing = Some(Box::pin(async move {
                        let sent = Instant::now();
                        let r = store.list(&p).await;
                        metrics.store_call("list", sent.elapsed(), r.is_ok());
                        (r, sent)
                    }));
                    // Until this listing returns; then a fresh wait from its revision.
                    next_poll = Instant::now() + self.timing.poll;
                }
            }
            self.publish();
        }
        let released = self.replica.is_released();
        // Stops still running (the release gave up waiting for them): wait as long again,
        // then report them anyway — the process is leaving, and the controller's shutdown
        // that follows drains what is left. Every start gets its stop in the audit log.
        let drain_by = Instant::now() + self.timing.release_timeout;
        while !self.stops_in_flight.is_empty() {
            tokio::select! {
                Some(stop) = stops_rx.recv() => self.stopped(stop),
                _ = tokio::time::sleep_until(drain_by) => break,
            }
        }
        for (c, n) in std::mem::take(&mut self.stops_in_flight) {
            tracing::warn!(identity = %self.cfg.identity, cluster = %c, "still stopping at exit");
            for _ in 0..n {
                self.report(Ownership::Stopped(c.clone()), None);
            }
        }
        // Whatever happened, nothing runs after we return.
        for c in std::mem::take(&mut self.acting) {
            if let Some(hook) = &self.stop_hook {
                hook.stop(c.clone()).await;
            }
            self.report(Ownership::Stopped(c), None);
        }
        self.stats.stopping = true;
        self.publish();
        tracing::info!(identity = %self.cfg.identity, released, "runner stopped");
        released
    }

    /// One step of the machine on `view`, a listing asked for at `asked`.
    fn step(
        &mut self,
        view: Option<&Listing>,
        asked: Mono,
        done: &mpsc::UnboundedSender<WriteDone>,
    ) {
        let now = self.now();
        if view.is_some() {
            self.stats.listed = true;
        }
        let current = self.fleet.borrow().clone();
        self.step_fleet = current.clone();
        self.replica.set_inventory(current.inventory);
        let fleet = FleetInput {
            clusters: &current.clusters,
            loads: &current.loads,
            apps: &current.apps,
            revision: current.revision,
            measured: current.measured,
            external_shards: self.external.as_ref().and_then(|rx| *rx.borrow()),
        };
        let actions = self.replica.step_listed(now, asked, view, fleet);
        if view.is_some() {
            self.report_peers();
        }
        tracing::debug!(
            identity = %self.cfg.identity,
            revision = view.map(|v| v.revision),
            actions = actions.len(),
            "step"
        );
        self.execute(actions, done);
        for w in self.replica.take_warnings() {
            tracing::warn!(identity = %self.cfg.identity, "{w}");
        }
    }

    /// A stop the hook finished: the replica may acknowledge, and it is reported.
    fn stopped(&mut self, stop: StopDone) {
        if let Some(n) = self.stops_in_flight.get_mut(&stop.cluster) {
            *n -= 1;
            if *n == 0 {
                self.stops_in_flight.remove(&stop.cluster);
            }
        }
        self.replica.on_stopped(&stop.cluster);
        tracing::info!(identity = %self.cfg.identity, cluster = %stop.cluster, "stopped");
        self.report(Ownership::Stopped(stop.cluster), stop.lapsed_at);
    }

    fn on_write(&mut self, done: WriteDone) {
        match &done.result {
            Ok(_) | Err(StoreError::Conflict { .. }) => {}
            Err(e) => self.store_error(e),
        }
        match done.result {
            Ok(None) => self.replica.on_delete(done.ticket, Ok(())),
            Ok(Some(v)) => self.replica.on_write(done.ticket, Ok(v)),
            Err(e) if done.delete => self.replica.on_delete(done.ticket, Err(e)),
            Err(e) => self.replica.on_write(done.ticket, Err(e)),
        }
    }

    /// Stops and starts now, in order; writes as tasks reporting back on `done`.
    fn execute(&mut self, actions: Vec<Action>, done: &mpsc::UnboundedSender<WriteDone>) {
        let now = self.now();
        if let Some(s) = self.replica.shard(now) {
            self.last_shard = Some(s);
        }
        // Stops because the lease lapsed are dated at the lapse; any other (a new
        // generation, a release, a lost claim) ended now.
        let lapsed_at = self.replica.take_lapse().map(|m| self.start + m.0);
        for a in actions {
            match a {
                Action::Stop(c) => {
                    if !self.acting.remove(&c) {
                        self.replica.on_stopped(&c);
                        continue;
                    }
                    self.acting_epoch += 1;
                    match &self.stop_hook {
                        None => {
                            self.replica.on_stopped(&c);
                            tracing::info!(identity = %self.cfg.identity, cluster = %c, lapsed = lapsed_at.is_some(), "stopped");
                            self.report(Ownership::Stopped(c), lapsed_at);
                        }
                        Some(hook) => {
                            *self.stops_in_flight.entry(c.clone()).or_default() += 1;
                            let (stopping, tx) = (hook.stop(c.clone()), self.stops_tx.clone());
                            tokio::spawn(async move {
                                stopping.await;
                                let _ = tx.send(StopDone {
                                    cluster: c,
                                    lapsed_at,
                                });
                            });
                        }
                    }
                }
                Action::Start(c) => {
                    if self.acting.insert(c.clone()) {
                        self.acting_epoch += 1;
                        tracing::info!(identity = %self.cfg.identity, cluster = %c, "started");
                        self.stats.handovers += 1;
                        self.report(Ownership::Started(c), None);
                    }
                }
                Action::Place(job) => self.place(*job),
                Action::Write {
                    ticket,
                    purpose,
                    key,
                    value,
                    pre,
                } => {
                    let store = self.store.clone();
                    let done = done.clone();
                    let identity = self.cfg.identity.clone();
                    let metrics = self.metrics.clone();
                    tokio::spawn(async move {
                        let sent = Instant::now();
                        let result = store.put(&key, value, pre).await;
                        let took = sent.elapsed();
                        // A conflict is an answer: the store worked.
                        let ok = !matches!(
                            result,
                            Err(StoreError::Unavailable(_) | StoreError::Backend(_))
                        );
                        metrics.store_call(purpose.as_str(), took, ok);
                        crate::ownership::log_write(&identity, &key, &result, took);
                        // The runner may have returned; nobody needs the outcome then.
                        let _ = done.send(WriteDone {
                            ticket,
                            delete: false,
                            result: result.map(Some),
                        });
                    });
                }
                Action::Delete {
                    ticket,
                    purpose,
                    key,
                    pre,
                } => {
                    let (store, done) = (self.store.clone(), done.clone());
                    let metrics = self.metrics.clone();
                    tracing::info!(identity = %self.cfg.identity, %key, purpose = purpose.as_str(), "fenced: deleting a record");
                    tokio::spawn(async move {
                        let sent = Instant::now();
                        let result = store.delete(&key, pre).await;
                        let ok = !matches!(
                            result,
                            Err(StoreError::Unavailable(_) | StoreError::Backend(_))
                        );
                        metrics.store_call(purpose.as_str(), sent.elapsed(), ok);
                        let result = result.map(|()| None);
                        let _ = done.send(WriteDone {
                            ticket,
                            delete: true,
                            result,
                        });
                    });
                }
            }
        }
    }

    /// Computes a placement off this task; its result comes back on `placed_tx`.
    fn place(&self, job: PlacementJob) {
        let fleet = self.step_fleet.clone();
        debug_assert_eq!(fleet.revision, job.fleet_revision());
        tracing::debug!(
            identity = %self.cfg.identity,
            fleet_revision = job.fleet_revision(),
            "placing"
        );
        let (placing, tx) = (self.placer.place(job, fleet), self.placed_tx.clone());
        tokio::spawn(async move {
            // The runner may have returned; nobody needs the result then.
            let _ = tx.send(placing.await);
        });
    }

    fn report(&self, change: Ownership, lapsed_at: Option<Instant>) {
        let _ = self.events.send(OwnershipChange {
            identity: self.cfg.identity.clone(),
            change,
            shard: self.last_shard,
            generation: self.replica.applied_generation(),
            lapsed_at,
            at: lapsed_at.unwrap_or_else(Instant::now),
        });
    }
}

#[cfg(test)]
mod tests;
