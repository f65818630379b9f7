//! The runner of Argo CD-compatible heartbeat mode: the only I/O around an
//! [`ArgoReplica`], over any [`Store`], keeping the mapping at
//! [`MAPPING_KEY`](crate::argocd::MAPPING_KEY) in Argo CD's exact format. Every decision
//! (claim rounds, validity, start delays, backoff, release) is the machine's; its module
//! docs ([`crate::argocd::machine`]) give the rules and why they are safe.
//!
//! One task owns the machine (no locks) and feeds it everything: reads of the map (when the
//! machine asks, and when the store reports a change), its timers (it sleeps until
//! [`ArgoReplica::next_wake`]), the outcomes of its writes (sent as separate tasks and
//! reported back through a channel), the replica count (a `watch`) and the shutdown signal.
//! It carries out the machine's actions in order, reports ownership changes on a channel
//! ([`OwnershipChange`], shared with the fenced runner) and publishes an [`ArgoStatus`]
//! snapshot through a `watch`.
//!
//! Time is `tokio::time::Instant` since the runner was built, as [`Mono`] (tests run under
//! paused time); the wall clock is injected ([`WallClock`]) and only written as
//! `HeartbeatTime`, never compared.

mod replica_status;

use std::collections::VecDeque;
use std::sync::Arc;

use fleetshard_core::{App, Cluster};
use futures::future::BoxFuture;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

pub use crate::argocd::ArgoConfig;
use crate::argocd::{Action, ArgoConfigError, ArgoReplica, ClaimStatus, Ticket, WallTime};
use crate::lease::Mono;
use crate::runner::{Ownership, OwnershipChange, StopHook};
use crate::select::{poll_opt, sleep_until_opt};
use crate::store::{Listing, Store, StoreError};

/// Reads the wall clock, for the `HeartbeatTime` written (never compared with anything). The
/// binary builds it from the system clock ([`WallTime::from_unix_duration`]); tests from
/// tokio's paused time.
pub type WallClock = Arc<dyn Fn() -> WallTime + Send + Sync>;

/// Why a runner cannot be built: its configuration is unusable.
pub type ArgoRunnerError = ArgoConfigError;

/// A snapshot of the runner for health checks, metrics and status pages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArgoStatus {
    /// The shard whose entry carries this identity (as last confirmed or read).
    pub shard: Option<u32>,
    /// The last claim round's answer.
    pub claim: Option<ClaimStatus>,
    /// Until when this replica may act on its shard unless a heartbeat is confirmed (may be
    /// in the past: the heartbeat is stale).
    pub valid_until: Option<Instant>,
    /// From when a shard released gracefully to this replica is started at once: before
    /// it, a replica without a shard is not ready (see [`ArgoStatus::readiness`]). `None`
    /// counts as long ago.
    pub fast_takeover_from: Option<Instant>,
    /// Clusters started and not stopped.
    pub acting: Vec<String>,
    /// Clusters gained and waiting for the start delay.
    pub pending: usize,
    /// The replica count in use.
    pub replicas: u32,
    /// The mapping could not be decoded (the error, naming the key); it is not overwritten.
    pub map_error: Option<String>,
    /// The last store error (conflicts excluded).
    pub last_store_error: Option<String>,
    /// Store errors so far.
    pub store_errors: u64,
    /// Clusters started so far.
    pub handovers: u64,
    /// Stale entries taken over (failovers performed).
    pub failovers: u64,
    /// Heartbeat (or claim) writes the store confirmed.
    pub writes: u64,
    /// Shutting down.
    pub stopping: bool,
    /// The mapping has been read at least once.
    pub listed: bool,
}

impl ArgoStatus {
    /// Ready (`Ok`) or not, with the reason. Ready: holding a shard whose heartbeat is
    /// confirmed within its validity, or holding none *because* every shard is held by a live
    /// replica (a spare, or a pinned replica whose shard a live replica holds): in a
    /// Deployment such a pod is the rolling update's surge pod and must become ready for the
    /// update to proceed, and no shard is unowned (unlike upstream's "ready with −1", W15).
    /// Such a pod is ready only once it would start a shard released to it at once
    /// ([`ArgoStatus::fast_takeover_from`]: the map watched for the start delay, 3
    /// heartbeats): before, the old pod the update stops next would leave its clusters
    /// unowned for that delay.
    pub fn readiness(&self, now: Instant) -> Result<String, String> {
        if self.stopping {
            return Err("stopping".into());
        }
        if !self.listed {
            return Err(match &self.last_store_error {
                Some(e) => format!("shard mapping not read yet; last store error: {e}"),
                None => "shard mapping not read yet".into(),
            });
        }
        if self.replicas == 0 {
            return Err("0 replicas: there is no shard to hold".into());
        }
        if let Some(n) = self.shard {
            return match self.valid_until {
                Some(until) if until > now => Ok(format!("holding shard {n}")),
                _ => Err(format!(
                    "shard {n}: heartbeat not confirmed within its validity"
                )),
            };
        }
        if let Some(e) = &self.map_error {
            return Err(format!("no shard held; {e}"));
        }
        let watching = self.fast_takeover_from.filter(|from| *from > now);
        if let (Some(from), Some(ClaimStatus::Spare | ClaimStatus::WaitingForPinned { .. })) =
            (watching, &self.claim)
        {
            return Err(format!(
                "no shard held; watching the shard mapping {:.1} s more before a shard \
                 released to this replica can be started at once",
                from.saturating_duration_since(now).as_secs_f64()
            ));
        }
        match &self.claim {
            Some(ClaimStatus::Spare) => Ok("spare: every shard is held by a live replica".into()),
            Some(ClaimStatus::WaitingForPinned { shard, holder }) => Ok(format!(
                "pinned to shard {shard}, held by live replica {holder:?}: waiting"
            )),
            Some(ClaimStatus::PinOutOfRange { pin, replicas }) => Err(format!(
                "pinned to shard {pin}, outside 0..{replicas}: holding nothing"
            )),
            _ => Err(match &self.last_store_error {
                Some(e) => format!("no shard held; last store error: {e}"),
                None => "no shard held yet (claiming)".into(),
            }),
        }
    }
}

/// A write's outcome on its way back to the owning task.
struct WriteDone {
    ticket: Ticket,
    result: Result<u64, StoreError>,
}

/// A stop the hook finished, on its way back to the owning task.
struct StopDone {
    cluster: String,
    shard: Option<u32>,
    lapsed_at: Option<Instant>,
}

/// Drives one replica of heartbeat mode against a store.
pub struct ArgoRunner {
    store: Arc<dyn Store>,
    machine: ArgoReplica,
    replicas: watch::Receiver<u32>,
    wall: WallClock,
    events: mpsc::UnboundedSender<OwnershipChange>,
    status: watch::Sender<ArgoStatus>,
    /// The origin of this runner's [`Mono`] readings.
    start: Instant,
    /// When the runner should read the map (once a read under way has returned).
    next_read: Option<Instant>,
    /// The shard last logged as held.
    logged_shard: Option<u32>,
    /// Stops work on a cluster (none: the event is the stop, carried out by its reader).
    stop_hook: Option<Arc<dyn StopHook>>,
    stops_tx: mpsc::UnboundedSender<StopDone>,
    stops_rx: Option<mpsc::UnboundedReceiver<StopDone>>,
}

impl std::fmt::Debug for ArgoRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgoRunner")
            .field("store", &self.store.describe())
            .field("identity", &self.machine.config().identity)
            .finish_non_exhaustive()
    }
}

impl ArgoRunner {
    /// A runner for one replica over `store`, acting on its share of `clusters` (apps weigh
    /// them for consistent hashing). The replica count comes from `replicas`; `wall` gives
    /// the `HeartbeatTime` to write. Returns the runner and its status receiver.
    pub fn new(
        store: Arc<dyn Store>,
        cfg: ArgoConfig,
        clusters: Vec<Cluster>,
        apps: &[App],
        replicas: watch::Receiver<u32>,
        wall: WallClock,
        events: mpsc::UnboundedSender<OwnershipChange>,
    ) -> Result<(ArgoRunner, watch::Receiver<ArgoStatus>), ArgoRunnerError> {
        cfg.validate()?;
        let (status, rx) = watch::channel(ArgoStatus::default());
        let count = *replicas.borrow();
        let (stops_tx, stops_rx) = mpsc::unbounded_channel();
        let runner = ArgoRunner {
            store,
            machine: ArgoReplica::new(cfg, clusters, apps, count, Mono::default()),
            replicas,
            wall,
            events,
            status,
            start: Instant::now(),
            next_read: None,
            logged_shard: None,
            stop_hook: None,
            stops_tx,
            stops_rx: Some(stops_rx),
        };
        Ok((runner, rx))
    }

    /// Stops clusters through `hook` and tells the machine a cluster stopped only once the
    /// hook resolved (its work in flight has ended): the entry is freed, and a stop is
    /// reported, only after the work ended — the stop barrier fenced mode has.
    pub fn with_stop_hook(mut self, hook: Arc<dyn StopHook>) -> Self {
        self.stop_hook = Some(hook);
        self
    }

    fn now(&self) -> Mono {
        Mono(self.start.elapsed())
    }

    fn instant(&self, at: Mono) -> Instant {
        self.start + at.0
    }

    fn identity(&self) -> &str {
        &self.machine.config().identity
    }

    /// Runs until `shutdown` turns true (or its sender is dropped); then stops every
    /// cluster, frees its entry with compare-and-swap (retrying conflicts until
    /// `release_timeout`) and returns whether the entry was freed (or not held).
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) -> bool {
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<WriteDone>();
        let mut stops_rx = self
            .stops_rx
            .take()
            .unwrap_or_else(|| mpsc::unbounded_channel().1);
        let key = self.machine.config().key.clone();
        let mut reading: Option<BoxFuture<'static, Result<Listing, StoreError>>> = None;
        let mut change: Option<BoxFuture<'static, Result<u64, StoreError>>> = None;
        // A closed count channel keeps the last count (and must not be polled again).
        let mut count_open = true;
        if *shutdown.borrow() {
            return true;
        }
        loop {
            let wake = self.machine.next_wake().map(|m| self.instant(m));
            let actions = tokio::select! {
                biased;
                r = shutdown.changed() => {
                    if r.is_err() || *shutdown.borrow() {
                        break;
                    }
                    Vec::new()
                }
                // Timers first (deadlines, delayed starts, the heartbeat): a process that was
                // paused stops before it looks at anything it read before the pause.
                _ = sleep_until_opt(wake) => self.machine.tick(self.now()),
                Some(done) = done_rx.recv() => self.write_done(done),
                Some(stop) = stops_rx.recv() => self.stop_done(stop),
                r = self.replicas.changed(), if count_open => {
                    match r {
                        Ok(()) => {
                            let n = *self.replicas.borrow_and_update();
                            tracing::info!(identity = %self.identity(), from = self.machine.replicas(), to = n, "replica count changed");
                            self.machine.on_replicas(n, self.now())
                        }
                        Err(_) => {
                            count_open = false;
                            Vec::new()
                        }
                    }
                }
                r = poll_opt(&mut reading) => {
                    reading = None;
                    if let Ok(l) = &r
                        && change.is_none()
                    {
                        let (store, k, since) = (self.store.clone(), key.clone(), l.revision);
                        change = Some(Box::pin(async move { store.wait_for_change(&k, since).await }));
                    }
                    self.read_done(r)
                }
                r = poll_opt(&mut change) => {
                    change = None;
                    match r {
                        Ok(_) => {
                            self.next_read = Some(Instant::now());
                            Vec::new()
                        }
                        Err(e) => {
                            tracing::warn!(identity = %self.identity(), "{e}");
                            self.machine.on_store_error(&e, self.now())
                        }
                    }
                }
                _ = sleep_until_opt(self.next_read), if reading.is_none() => {
                    self.next_read = None;
                    let (store, k) = (self.store.clone(), key.clone());
                    reading = Some(Box::pin(async move { store.list(&k).await }));
                    Vec::new()
                }
            };
            self.execute(actions, &done_tx);
            self.publish();
        }
        let actions = self.machine.shutdown(self.now());
        self.execute(actions, &done_tx);
        self.publish();
        let release_timeout = self.machine.config().release_timeout;
        let freed = tokio::time::timeout(
            release_timeout,
            self.release(&mut done_rx, &done_tx, &mut stops_rx),
        )
        .await
        .unwrap_or(false);
        // Stops still running (the release gave up waiting for them): wait as long again,
        // then report them anyway — the process is leaving, and the controller's shutdown
        // that follows drains what is left. Every start gets its stop in the audit log.
        let drain_by = tokio::time::Instant::now() + release_timeout;
        while !self.machine.all_stopped() {
            tokio::select! {
                Some(stop) = stops_rx.recv() => {
                    let _ = self.stop_done(stop);
                }
                _ = tokio::time::sleep_until(drain_by) => break,
            }
        }
        let left: Vec<String> = self.machine.draining().cloned().collect();
        for cluster in left {
            tracing::warn!(identity = %self.identity(), %cluster, "stopped: its work did not end within the release timeout; the controller's shutdown drains it");
            let shard = self.machine.shard();
            self.report(Ownership::Stopped(cluster.clone()), shard, None);
            let _ = self.machine.on_stopped(&cluster, self.now());
        }
        self.publish();
        tracing::info!(identity = %self.identity(), freed, "argocd runner stopped");
        freed
    }

    /// Feeds the machine until it has freed its entry (or holds none): the outcome of a
    /// write in flight, re-reads after a conflict, retries after the backoff.
    async fn release(
        &mut self,
        done_rx: &mut mpsc::UnboundedReceiver<WriteDone>,
        done_tx: &mpsc::UnboundedSender<WriteDone>,
        stops_rx: &mut mpsc::UnboundedReceiver<StopDone>,
    ) -> bool {
        let key = self.machine.config().key.clone();
        while !self.machine.is_released() {
            let wake = self.machine.next_wake().map(|m| self.instant(m));
            let actions = tokio::select! {
                biased;
                Some(done) = done_rx.recv() => self.write_done(done),
                Some(stop) = stops_rx.recv() => self.stop_done(stop),
                _ = sleep_until_opt(wake) => self.machine.tick(self.now()),
                _ = sleep_until_opt(self.next_read) => {
                    self.next_read = None;
                    let r = self.store.list(&key).await;
                    self.read_done(r)
                }
            };
            self.execute(actions, done_tx);
            self.publish();
        }
        tracing::info!(identity = %self.identity(), "released: entry freed (or none held)");
        true
    }

    fn read_done(&mut self, r: Result<Listing, StoreError>) -> Vec<Action> {
        if let Err(e) = &r {
            tracing::warn!(identity = %self.identity(), "{e}");
        }
        self.machine.step(self.now(), (self.wall)(), r)
    }

    /// A stop the hook finished: reported, then the machine is told.
    fn stop_done(&mut self, stop: StopDone) -> Vec<Action> {
        tracing::info!(identity = %self.identity(), cluster = %stop.cluster, lapsed = stop.lapsed_at.is_some(), "stopped");
        self.report(
            Ownership::Stopped(stop.cluster.clone()),
            stop.shard,
            stop.lapsed_at,
        );
        self.machine.on_stopped(&stop.cluster, self.now())
    }

    fn write_done(&mut self, done: WriteDone) -> Vec<Action> {
        if let Err(e) = &done.result
            && !matches!(e, StoreError::Conflict { .. })
        {
            tracing::warn!(identity = %self.identity(), "{e}");
        }
        self.machine.on_write(done.ticket, done.result, self.now())
    }

    /// Carries the actions out in order: a stop goes through the stop hook (reported once
    /// the work ended) or, without one, is reported at once; starts are reported at once;
    /// writes run as tasks reporting back on `done`.
    fn execute(&mut self, actions: Vec<Action>, done: &mpsc::UnboundedSender<WriteDone>) {
        let mut queue = VecDeque::from(actions);
        while let Some(action) = queue.pop_front() {
            match action {
                Action::Stop {
                    cluster,
                    shard,
                    lapsed_at,
                } => {
                    let lapsed_at = lapsed_at.map(|m| self.instant(m));
                    let stop = StopDone {
                        cluster,
                        shard,
                        lapsed_at,
                    };
                    match &self.stop_hook {
                        // The barrier: the machine hears of the stop once the work ended.
                        Some(hook) => {
                            let (stopping, tx) =
                                (hook.stop(stop.cluster.clone()), self.stops_tx.clone());
                            tokio::spawn(async move {
                                stopping.await;
                                let _ = tx.send(stop);
                            });
                        }
                        // No hook: the event is the stop, carried out by its reader.
                        None => queue.extend(self.stop_done(stop)),
                    }
                }
                Action::Start { cluster, shard } => {
                    tracing::info!(identity = %self.identity(), %cluster, "started");
                    self.report(Ownership::Started(cluster), Some(shard), None);
                }
                Action::Read => {
                    let now = Instant::now();
                    self.next_read = Some(self.next_read.map_or(now, |n| n.min(now)));
                }
                Action::Write {
                    ticket,
                    key,
                    value,
                    pre,
                } => {
                    let store = self.store.clone();
                    let done = done.clone();
                    let identity = self.identity().to_owned();
                    tokio::spawn(async move {
                        let sent = Instant::now();
                        let result = store.put(&key, value, pre).await;
                        crate::ownership::log_write(&identity, &key, &result, sent.elapsed());
                        // The runner may have returned; nobody needs the outcome then.
                        let _ = done.send(WriteDone { ticket, result });
                    });
                }
            }
        }
        for w in self.machine.take_warnings() {
            tracing::warn!(identity = %self.identity(), "{w}");
        }
        if self.machine.shard() != self.logged_shard {
            self.logged_shard = self.machine.shard();
            tracing::info!(identity = %self.identity(), shard = self.logged_shard, pending = self.machine.pending(), "shard held");
        }
    }

    fn report(&self, change: Ownership, shard: Option<u32>, lapsed_at: Option<Instant>) {
        let _ = self.events.send(OwnershipChange {
            identity: self.identity().to_owned(),
            change,
            shard,
            generation: u64::from(self.machine.replicas()),
            lapsed_at,
            at: lapsed_at.unwrap_or_else(Instant::now),
        });
    }

    fn publish(&mut self) {
        let m = &self.machine;
        let snapshot = ArgoStatus {
            shard: m.shard(),
            claim: m.claim_status().cloned(),
            valid_until: m.valid_until().map(|u| self.start + u.0),
            fast_takeover_from: Some(self.start + m.fast_takeover_from().0),
            acting: m.started().map(str::to_owned).collect(),
            pending: m.pending(),
            replicas: m.replicas(),
            map_error: m.map_error().map(str::to_owned),
            last_store_error: m.last_store_error().map(str::to_owned),
            store_errors: m.store_errors(),
            handovers: m.handovers(),
            failovers: m.failovers(),
            writes: m.writes(),
            stopping: m.is_stopping(),
            listed: m.listed(),
        };
        let identity = self.identity();
        self.status.send_if_modified(|s| {
            if snapshot.failovers > s.failovers {
                tracing::warn!(
                    identity,
                    shard = snapshot.shard.unwrap_or_default(),
                    failovers = snapshot.failovers,
                    "failover: took over the entry of a holder whose heartbeat went stale"
                );
            }
            let changed = *s != snapshot;
            *s = snapshot;
            changed
        });
    }
}

#[cfg(test)]
mod tests;
