//! The runner: the only I/O around a fenced-mode [`Replica`]. One task owns the replica
//! (no locks around it) and feeds it everything: listings of the root prefix (every
//! `poll`, or sooner when the store reports a change), its own renew timer (`tick`), the
//! outcomes of its writes (sent as separate tasks and reported back through a channel),
//! and the shutdown signal. It executes the replica's actions in order, reports ownership
//! changes on a channel and publishes a [`Status`] snapshot through a `watch`.
//!
//! Time is `tokio::time::Instant` since the runner started, as [`Mono`]: tests run it
//! under paused time.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use fleetshard_core::Cluster;
use futures::future::BoxFuture;
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, MissedTickBehavior};

use crate::fenced::{
    Action, CorruptRecord, FleetInput, Replica, ReplicaConfig, ShardCountError, Ticket,
};
use crate::lease::{Mono, TimingError};
pub use crate::ownership::{NoMetrics, Ownership, OwnershipChange, RunnerMetrics, StopHook};
use crate::ownership::{ReplicaStatus, ShardView};
use crate::select::{poll_opt, sleep_until_opt};
use crate::store::{Listing, Store, StoreError};

/// How often the runner lists and ticks, and how long it may spend releasing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunnerTiming {
    /// Listing interval when the store reports no change (200 ms).
    pub poll: Duration,
    /// Renew/deadline timer (250 ms): renews never wait for a listing.
    pub tick: Duration,
    /// Longest graceful release before giving up and returning (2 s).
    pub release_timeout: Duration,
}

impl Default for RunnerTiming {
    fn default() -> Self {
        RunnerTiming {
            poll: Duration::from_millis(200),
            tick: Duration::from_millis(250),
            release_timeout: Duration::from_secs(2),
        }
    }
}

/// Why a runner cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunnerError {
    /// The lease timing is unsafe.
    #[error(transparent)]
    Timing(#[from] TimingError),
    /// The shard count policy is unusable.
    #[error(transparent)]
    Shards(#[from] ShardCountError),
}

/// A snapshot of the runner for health checks, metrics and status pages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// The shard held with a valid lease.
    pub shard: Option<u32>,
    /// Whether this replica is the distributor.
    pub is_distributor: bool,
    /// Clusters started and not stopped.
    pub acting: Vec<String>,
    /// Assignment generation applied.
    pub generation: u64,
    /// Every shard has a live, unreleased record held by someone else: a spare on purpose.
    pub spare: bool,
    /// The last store error (not conflicts: those are the protocol working).
    pub last_store_error: Option<String>,
    /// Store errors so far.
    pub store_errors: u64,
    /// Clusters started so far (each one a handover to this replica).
    pub handovers: u64,
    /// Shards taken over from a holder whose lease expired (failovers performed).
    pub failovers: u64,
    /// The shard count of the applied generation.
    pub shard_count: u32,
    /// When the shard lease lapses unless renewed (`Replica::shard_valid_until`).
    pub lease_valid_until: Option<Instant>,
    /// Shutting down.
    pub stopping: bool,
    /// A listing has been stepped at least once.
    pub listed: bool,
    /// Fenced: the store was found replaced (what replaced it). Nothing is listed any
    /// more, writes are refused, the lease lapses at its deadline; only a restart ends it.
    pub store_replaced: Option<String>,
    /// Records of the last listing that could not be read: the store is degraded.
    pub corrupt: Vec<CorruptRecord>,
}

impl ReplicaStatus for Status {
    /// Ready: holding a shard with a valid lease, or a spare because every shard is held.
    /// Unreadable records do not change whether the replica can act (it acts on the last
    /// good values, and each unreadable record recovers by itself: see
    /// `docs/reliability.md`), but the reason names them: "…; degraded store: KEY: REASON".
    fn readiness(&self, now: Instant) -> Result<String, String> {
        if let Some(what) = &self.store_replaced {
            return Err(format!("fenced: store replaced ({what})"));
        }
        let degraded = |text: String| match self.corrupt.as_slice() {
            [] => text,
            corrupt => {
                let list: Vec<String> = corrupt.iter().map(ToString::to_string).collect();
                format!("{text}; degraded store: {}", list.join("; "))
            }
        };
        self.readiness_of_store(now).map(degraded).map_err(degraded)
    }

    fn lease_deadline(&self) -> Option<Instant> {
        self.lease_valid_until
    }

    fn shard_view(&self) -> ShardView {
        ShardView {
            shard: self.shard,
            is_distributor: self.is_distributor,
            generation: self.generation,
            acting: self.acting.len(),
            store_errors: self.store_errors,
            handovers: self.handovers,
            failovers: self.failovers,
            shard_count: self.shard_count,
            corrupt_records: self.corrupt.len() as u64,
        }
    }
}

impl Status {
    /// Readiness, the unreadable records aside.
    fn readiness_of_store(&self, now: Instant) -> Result<String, String> {
        if self.stopping {
            return Err("stopping".into());
        }
        match (self.shard, self.lease_valid_until) {
            (Some(n), Some(until)) if until > now => Ok(format!("holding shard {n}")),
            (Some(n), _) => Err(format!("shard {n}: lease not renewed in time")),
            (None, _) if self.spare => Ok("spare: every shard is held".into()),
            (None, _) if !self.listed => Err("store not read yet".into()),
            (None, _) => match &self.last_store_error {
                Some(e) => Err(format!("no shard held; last store error: {e}")),
                None => Err("no shard held yet (claiming)".into()),
            },
        }
    }
}

/// A stop that finished, on its way back to the owning task. A stop caused by a lapse
/// keeps the lapse time: the controller admits no work past the lease deadline (its
/// shard filter follows `Status::lease_valid_until`), so ownership ended then.
struct StopDone {
    cluster: String,
    lapsed_at: Option<Instant>,
}

/// The fleet the distributor places, as the inventory last published it.
#[derive(Debug, Clone, Default)]
pub struct RunnerFleet {
    /// Clusters.
    pub clusters: Arc<Vec<Cluster>>,
    /// Their loads, in the same order.
    pub loads: Arc<Vec<u64>>,
    /// Moves whenever the clusters or loads change (the inventory's revision).
    pub revision: u64,
}

impl RunnerFleet {
    /// A fleet that never changes: `clusters` with their `loads` (same order).
    pub fn fixed(clusters: Vec<Cluster>, loads: Vec<u64>) -> watch::Receiver<RunnerFleet> {
        watch::channel(RunnerFleet {
            clusters: Arc::new(clusters),
            loads: Arc::new(loads),
            revision: 0,
        })
        .1
    }
}

/// A write's outcome on its way back to the owning task.
struct WriteDone {
    ticket: Ticket,
    result: Result<u64, StoreError>,
}

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
    metrics: Arc<dyn RunnerMetrics>,
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
        let runner = Runner {
            store,
            replica: Replica::new(cfg.clone()),
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
            metrics: Arc::new(NoMetrics),
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
    /// returns whether the release completed.
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) -> bool {
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<WriteDone>();
        let prefix = self.cfg.root.clone();
        let mut tick = tokio::time::interval(self.timing.tick);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut next_poll = Instant::now();
        let mut listing: Option<BoxFuture<'static, Result<Listing, StoreError>>> = None;
        let mut change: Option<BoxFuture<'static, Result<u64, StoreError>>> = None;
        let mut release_by: Option<Instant> = None;
        let mut newest_write = 0u64;
        let mut stops_rx = self
            .stops_rx
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
            tokio::select! {
                biased;
                r = shutdown.changed(), if release_by.is_none() => {
                    if r.is_err() || *shutdown.borrow() {
                        tracing::info!(identity = %self.cfg.identity, "releasing");
                        release_by = Some(Instant::now() + self.timing.release_timeout);
                        self.stats.stopping = true;
                        let actions = self.replica.release();
                        self.execute(actions, &done_tx);
                        next_poll = Instant::now();
                    }
                }
                Some(done) = done_rx.recv() => {
                    // A confirmed write is a protocol step (a claim, a commit, an ack):
                    // list again at once so the next step does not wait for the poll.
                    if let Ok(v) = done.result {
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
                    self.replica.on_stopped(&stop.cluster);
                    tracing::info!(identity = %self.cfg.identity, cluster = %stop.cluster, "stopped");
                    self.report(Ownership::Stopped(stop.cluster), stop.lapsed_at);
                    // The acknowledgement or release it held back goes out now.
                    let actions = self.replica.tick(self.now());
                    self.execute(actions, &done_tx);
                }
                _ = tick.tick() => {
                    let actions = self.replica.tick(self.now());
                    self.execute(actions, &done_tx);
                }
                _ = sleep_until_opt(deadline) => {
                    // Our own deadline: stop at once rather than up to a tick late.
                    let actions = self.replica.tick(self.now());
                    self.execute(actions, &done_tx);
                }
                r = poll_opt(&mut listing) => {
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
                    self.step(view.as_ref(), &done_tx);
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
                        r
                    }));
                    // Until this listing returns; then a fresh wait from its revision.
                    next_poll = Instant::now() + self.timing.poll;
                }
            }
            self.publish();
        }
        let released = self.replica.is_released();
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

    fn step(&mut self, view: Option<&Listing>, done: &mpsc::UnboundedSender<WriteDone>) {
        let now = self.now();
        if view.is_some() {
            self.stats.listed = true;
        }
        let current = self.fleet.borrow().clone();
        let fleet = FleetInput {
            clusters: &current.clusters,
            loads: &current.loads,
            revision: current.revision,
            external_shards: self.external.as_ref().and_then(|rx| *rx.borrow()),
        };
        let actions = self.replica.step(now, view, fleet);
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

    fn on_write(&mut self, done: WriteDone) {
        match &done.result {
            Ok(_) | Err(StoreError::Conflict { .. }) => {}
            Err(e) => self.store_error(e),
        }
        self.replica.on_write(done.ticket, done.result);
    }

    fn store_error(&mut self, e: &StoreError) {
        self.stats.store_errors += 1;
        self.stats.last_store_error = Some(e.to_string());
        // A replaced store is final (the store guard refuses it from now on): said once.
        if let StoreError::Replaced { what } = e {
            if self.stats.store_replaced.is_none() {
                tracing::error!(identity = %self.cfg.identity, "fenced: store replaced ({what}); no more listings, the lease lapses at its deadline");
                self.stats.store_replaced = Some(what.clone());
            }
            return;
        }
        tracing::warn!(identity = %self.cfg.identity, "{e}");
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
                    match &self.stop_hook {
                        None => {
                            self.replica.on_stopped(&c);
                            tracing::info!(identity = %self.cfg.identity, cluster = %c, lapsed = lapsed_at.is_some(), "stopped");
                            self.report(Ownership::Stopped(c), lapsed_at);
                        }
                        Some(hook) => {
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
                        tracing::info!(identity = %self.cfg.identity, cluster = %c, "started");
                        self.stats.handovers += 1;
                        self.report(Ownership::Started(c), None);
                    }
                }
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
                        tracing::debug!(%identity, %key, ?result, ?took, "write");
                        // The runner may have returned; nobody needs the outcome then.
                        let _ = done.send(WriteDone { ticket, result });
                    });
                }
            }
        }
    }

    fn report(&self, change: Ownership, lapsed_at: Option<Instant>) {
        let _ = self.events.send(OwnershipChange {
            identity: self.cfg.identity.clone(),
            change,
            shard: self.last_shard,
            generation: self.replica.applied_generation(),
            lapsed_at,
        });
    }

    fn publish(&mut self) {
        let now = self.now();
        let shard = self.replica.shard(now);
        self.stats.shard = shard;
        self.stats.is_distributor = self.replica.is_distributor(now);
        self.stats.acting = self.replica.acting(now).map(str::to_owned).collect();
        self.stats.generation = self.replica.applied_generation();
        self.stats.lease_valid_until = self
            .replica
            .shard_valid_until(now)
            .map(|m| self.start + m.0);
        self.stats.spare = self.replica.is_spare();
        self.stats.failovers = self.replica.takeovers();
        self.stats.shard_count = self.replica.shard_count();
        self.stats.corrupt = self.replica.corrupt_records().to_vec();
        let snapshot = self.stats.clone();
        self.status.send_if_modified(|s| {
            let changed = *s != snapshot;
            *s = snapshot;
            changed
        });
    }
}

#[cfg(test)]
mod tests;
