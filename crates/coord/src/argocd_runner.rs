//! The runner of Argo CD-compatible heartbeat mode: the async driver of the pure claim
//! ([`crate::argocd::get_or_update_shard`]) over any [`Store`], keeping the mapping at
//! [`MAPPING_KEY`] in Argo CD's exact format.
//!
//! One task owns all state (no locks). It reads the mapping when the store reports a change
//! and at least every heartbeat `H`; on its own heartbeat timer (every `H`, never from a
//! probe: W14) it runs one claim round and writes the result with compare-and-swap on the
//! version read (`Absent` when the map does not exist: W19). Writes run as separate tasks
//! whose outcomes come back on a channel. Conflicts are retried after a capped, jittered,
//! exponential backoff (W17). A replica that holds nothing also claims as soon as a read
//! shows a free entry, and re-checks exactly when an entry it watches turns stale. Ownership
//! changes go out on a channel ([`OwnershipChange`], shared with the fenced runner), a
//! [`ArgoStatus`] snapshot through a `watch`.
//!
//! # Which clusters a replica acts on
//!
//! The replica count `r` comes from the caller (a `watch`; W10: a change redistributes at
//! once). Holding shard `s`, the replica acts on the clusters Argo CD's controller-level
//! distribution ([`ArgoControllerAssignment`], the configured algorithm) gives `s` among
//! `r` — and, while the map it last read has another length `m` (a replica with another
//! count wrote it), only on those that `m` gives `s` too. Stops never wait.
//!
//! # Safety without a barrier (what Argo CD's format allows)
//!
//! Argo CD's map has no fencing token and no acknowledgement, so "nobody else acts on a
//! cluster I start" can only rest on timing. With `S` = stale-after (3H):
//!
//! - **Holder validity.** A holder acts only until `V = S − H` (2H) after *sending* its last
//!   heartbeat write that the store confirmed (like [`crate::lease::HeldLease`]). Observers
//!   take an entry over only after seeing its content unchanged for more than `S` on their
//!   own monotonic clock ([`crate::argocd::ChangeObserver`]), and they cannot have seen the
//!   content before it was sent. So a crashed, partitioned or paused holder has stopped `H`
//!   before anyone may take over, as long as the two clocks' rates differ by less than
//!   `(S − V)/(S + V)` = 20 %. A paused process finds its deadline passed on waking and stops
//!   before anything else; its stop events carry `lapsed_at`.
//! - **Start delay.** A cluster this replica gains is started at once only on the two paths
//!   where the previous owner is known to have stopped: a *stale takeover* (by the argument
//!   above) and a *graceful release* this replica saw happen (the entry went from held to
//!   free: our runner frees its entry only after stopping its clusters) — and only if the
//!   count and the map's length have been stable for `D` on this replica's clock, so that
//!   the shard's clusters are the same set the previous holder had. Every other gain (a
//!   fresh or just-extended map, a count change, a regained entry after a lapse) waits
//!   `D = S`: any previous owner either re-read the map and stopped (it reads at least every
//!   `H`), or could not confirm a heartbeat since the change (a write confirmed after the
//!   change was based on a read that showed it) and so lapsed `V < D` after it.
//!
//! What this does not guarantee: clock *rates* off by more than 20 %; a previous owner that
//! is not this runner (an Argo CD controller sharing the map applies its own rules, W11/W12;
//! mixing is unsafe); replicas given different counts for longer than `D` (their maps
//! disagree, each acts only on clusters both counts give it, and gained clusters wait until
//! the counts agree, so liveness suffers, not safety); length changes that come and go
//! between two reads of one replica. `docs/argocd-compatibility.md` states the same.
//!
//! Time is `tokio::time::Instant` (tests run under paused time); the wall clock is injected
//! and only written as `HeartbeatTime`, never compared.

mod replica_status;
mod state;

use std::sync::Arc;
use std::time::Duration;

use fleetshard_core::argo::ArgoAlgorithm;
use fleetshard_core::{App, Cluster};
use futures::future::BoxFuture;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::argocd::{ClaimStatus, MAPPING_KEY, MAX_IDENTITY_LEN, WallTime};
use crate::runner::OwnershipChange;
use crate::select::{poll_opt, sleep_until_opt};
use crate::store::{Listing, Store, StoreError};

use self::state::State;

/// Reads the wall clock, for the `HeartbeatTime` written (never compared with anything).
pub type WallClock = Arc<dyn Fn() -> WallTime + Send + Sync>;

/// What one replica is and how it times its heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgoConfig {
    /// Written as `ControllerName`: unique among live replicas, ideally stable across
    /// restarts (W29).
    pub identity: String,
    /// `ARGOCD_CONTROLLER_SHARD` (`None` for Argo's −1).
    pub pin: Option<i64>,
    /// The heartbeat period H (`Settings::heartbeat`).
    pub heartbeat: Duration,
    /// How long an entry must be seen unchanged before it may be taken (`Settings::
    /// stale_after`, 3H).
    pub stale_after: Duration,
    /// Argo CD's distribution algorithm for the clusters of a shard.
    pub algorithm: ArgoAlgorithm,
    /// The store key of the mapping ([`MAPPING_KEY`]).
    pub key: String,
    /// Longest graceful release before giving up (2 s).
    pub release_timeout: Duration,
    /// Seed of the conflict-backoff jitter (different per replica, e.g. random).
    pub jitter_seed: u64,
}

impl ArgoConfig {
    /// A configuration with Argo CD's defaults: H = 10 s, stale after 3H, legacy, the
    /// standard key, unpinned.
    pub fn new(identity: impl Into<String>) -> Self {
        ArgoConfig {
            identity: identity.into(),
            pin: None,
            heartbeat: Duration::from_secs(10),
            stale_after: Duration::from_secs(30),
            algorithm: ArgoAlgorithm::Legacy,
            key: MAPPING_KEY.to_owned(),
            release_timeout: Duration::from_secs(2),
            jitter_seed: 1,
        }
    }

    /// How long a holder acts after sending its last confirmed heartbeat: `S − H`.
    pub fn validity(&self) -> Duration {
        self.stale_after.saturating_sub(self.heartbeat)
    }

    /// How long a cluster gained without a known stop of its previous owner waits: `S`.
    pub fn start_delay(&self) -> Duration {
        self.stale_after
    }

    fn validate(&self) -> Result<(), ArgoRunnerError> {
        if self.identity.is_empty() || self.identity.len() > MAX_IDENTITY_LEN {
            return Err(ArgoRunnerError::Identity(self.identity.len()));
        }
        if self.heartbeat.is_zero() || self.stale_after <= self.heartbeat * 2 {
            return Err(ArgoRunnerError::Timing {
                heartbeat: self.heartbeat,
                stale_after: self.stale_after,
            });
        }
        Ok(())
    }
}

/// Why a runner cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgoRunnerError {
    /// The identity is empty (that means "free" in the map) or too long.
    #[error("the controller identity must be 1 to {MAX_IDENTITY_LEN} bytes long, not {0}")]
    Identity(usize),
    /// The holder could not renew inside its validity (`S − H` must exceed `H`).
    #[error(
        "heartbeat {heartbeat:?} with stale-after {stale_after:?}: stale-after must exceed two heartbeats"
    )]
    Timing {
        /// H.
        heartbeat: Duration,
        /// S.
        stale_after: Duration,
    },
}

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
    result: Result<u64, StoreError>,
}

/// Drives one replica of heartbeat mode against a store.
pub struct ArgoRunner {
    store: Arc<dyn Store>,
    state: State,
    replicas: watch::Receiver<u32>,
    status: watch::Sender<ArgoStatus>,
}

impl std::fmt::Debug for ArgoRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgoRunner")
            .field("store", &self.store.describe())
            .field("identity", &self.state.cfg.identity)
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
        let runner = ArgoRunner {
            store,
            state: State::new(cfg, clusters, apps, count, wall, events),
            replicas,
            status,
        };
        Ok((runner, rx))
    }

    /// Runs until `shutdown` turns true (or its sender is dropped); then stops every
    /// cluster, frees its entry with compare-and-swap (retrying conflicts until
    /// `release_timeout`) and returns whether the entry was freed (or not held).
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) -> bool {
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<WriteDone>();
        let key = self.state.cfg.key.clone();
        let mut heartbeat = tokio::time::interval(self.state.cfg.heartbeat);
        heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut next_read = Some(Instant::now());
        let mut reading: Option<BoxFuture<'static, Result<Listing, StoreError>>> = None;
        let mut change: Option<BoxFuture<'static, Result<u64, StoreError>>> = None;
        // A closed count channel keeps the last count (and must not be polled again).
        let mut count_open = true;
        if *shutdown.borrow() {
            return true;
        }
        loop {
            let wake = self.state.next_wake();
            tokio::select! {
                biased;
                r = shutdown.changed() => {
                    if r.is_err() || *shutdown.borrow() {
                        break;
                    }
                }
                // Deadlines and delayed starts first: a process that was paused stops
                // before it looks at anything it read before the pause.
                _ = sleep_until_opt(wake) => self.state.on_wake(),
                Some(done) = done_rx.recv() => {
                    self.state.on_write(done.result);
                }
                r = self.replicas.changed(), if count_open => {
                    match r {
                        Ok(()) => {
                            let n = *self.replicas.borrow_and_update();
                            self.state.on_replicas(n);
                        }
                        Err(_) => count_open = false,
                    }
                }
                _ = heartbeat.tick() => {
                    self.state.heartbeat_due = true;
                    next_read = Some(Instant::now());
                }
                r = poll_opt(&mut reading) => {
                    reading = None;
                    if let Ok(l) = &r
                        && change.is_none()
                    {
                        let (store, k, since) = (self.store.clone(), key.clone(), l.revision);
                        change = Some(Box::pin(async move { store.wait_for_change(&k, since).await }));
                    }
                    self.state.on_read(r);
                }
                r = poll_opt(&mut change) => {
                    change = None;
                    match r {
                        Ok(_) => next_read = Some(Instant::now()),
                        Err(e) => self.state.store_error(&e),
                    }
                }
                _ = sleep_until_opt(next_read), if reading.is_none() => {
                    next_read = None;
                    let (store, k) = (self.store.clone(), key.clone());
                    reading = Some(Box::pin(async move { store.list(&k).await }));
                }
            }
            if let Some(at) = self.state.take_read_request() {
                next_read = Some(next_read.map_or(at, |n| n.min(at)));
            }
            // Stops first: a write that gives an entry up must not be seen before our
            // clusters are stopped.
            self.state.recompute();
            if let Some(write) = self.state.take_write() {
                let store = self.store.clone();
                let done = done_tx.clone();
                let identity = self.state.cfg.identity.clone();
                let key = key.clone();
                tokio::spawn(async move {
                    let sent = Instant::now();
                    let result = store.put(&key, write.value, write.pre).await;
                    tracing::debug!(%identity, %key, ?result, took = ?sent.elapsed(), "write");
                    // The runner may have returned; nobody needs the outcome then.
                    let _ = done.send(WriteDone { result });
                });
            }
            self.publish();
        }
        self.state.stats.stopping = true;
        self.state.stop_all();
        self.publish();
        let freed =
            tokio::time::timeout(self.state.cfg.release_timeout, self.release(&mut done_rx))
                .await
                .unwrap_or(false);
        self.publish();
        tracing::info!(identity = %self.state.cfg.identity, freed, "argocd runner stopped");
        freed
    }

    /// Frees this replica's entry: waits for a write in flight, then CAS-writes the map
    /// with the entry free, re-reading after a conflict, until it is free or not ours.
    async fn release(&mut self, done_rx: &mut mpsc::UnboundedReceiver<WriteDone>) -> bool {
        if self.state.write_in_flight()
            && let Some(done) = done_rx.recv().await
        {
            self.state.on_write(done.result);
            self.state.stop_all();
        }
        let key = self.state.cfg.key.clone();
        loop {
            let Some(write) = self.state.release_write() else {
                return true;
            };
            match self.store.put(&key, write.value, write.pre).await {
                Ok(_) => {
                    tracing::info!(identity = %self.state.cfg.identity, "entry freed");
                    self.state.released();
                    return true;
                }
                Err(e) => {
                    if !matches!(e, StoreError::Conflict { .. }) {
                        self.state.store_error(&e);
                        tokio::time::sleep(self.state.backoff()).await;
                    }
                    let r = self.store.list(&key).await;
                    self.state.on_read(r);
                    self.state.stop_all();
                }
            }
        }
    }

    fn publish(&mut self) {
        let snapshot = self.state.snapshot();
        self.status.send_if_modified(|s| {
            let changed = *s != snapshot;
            *s = snapshot;
            changed
        });
    }
}

#[cfg(test)]
mod tests;
