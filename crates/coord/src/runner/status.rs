//! What the runner publishes: [`Status`], a snapshot for health checks, metrics and status
//! pages. Everything that stops being true by itself — a lease lapsing — is published as
//! a deadline and judged when the snapshot is read, so a snapshot the runner has not
//! refreshed (a starved task) never claims a shard or the distributor role it no longer
//! holds.

use std::sync::Arc;

use tokio::time::Instant;

use super::PEER_RENEW_MARGIN;
use crate::fenced::CorruptRecord;
use crate::ownership::{PeerRenewal, ReplicaStatus, ShardView};
use crate::store::StoreError;

/// A snapshot of the runner for health checks, metrics and status pages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// The shard held with a valid lease when the snapshot was taken (see
    /// [`Status::lease_valid_until`]: readiness and the shard view judge it at read time).
    pub shard: Option<u32>,
    /// Whether this replica was the distributor when the snapshot was taken (see
    /// [`Status::distributor_valid_until`]).
    pub is_distributor: bool,
    /// When the distributor lease lapses unless renewed (`None`: not the distributor).
    pub distributor_valid_until: Option<Instant>,
    /// Clusters started and not stopped (shared: rebuilt only when it changes).
    pub acting: Arc<Vec<String>>,
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
    /// A placement is being computed (off the runner's task).
    pub placing: bool,
    /// Fenced: the store was found replaced (what replaced it). Nothing is listed any
    /// more, writes are refused, the lease lapses at its deadline; only a restart ends it.
    pub store_replaced: Option<String>,
    /// Records of the last listing that could not be read: the store is degraded.
    pub corrupt: Vec<CorruptRecord>,
    /// Other live replicas whose published inventory digest differs from this one's.
    pub inventory_disagreement: u64,
    /// As distributor: a drop of clusters held back by the drop guard.
    pub held_back: Option<HeldBackStatus>,
}

/// A drop of clusters the distributor holds back (`Replica::held_back`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldBackStatus {
    /// The committed generation's clusters.
    pub previous: u64,
    /// How many of them the inventory dropped (kept assigned meanwhile).
    pub dropped: u64,
    /// When the smaller inventory may be committed, if it holds until then.
    pub until: Instant,
}

impl Status {
    /// Whether this replica is the distributor at `now`: it was at the snapshot, and its
    /// lease has not lapsed since.
    pub fn is_distributor_at(&self, now: Instant) -> bool {
        self.is_distributor && self.distributor_valid_until.is_some_and(|t| t > now)
    }

    /// The shard held at `now`: held at the snapshot, and its lease not lapsed since.
    pub fn shard_at(&self, now: Instant) -> Option<u32> {
        self.shard
            .filter(|_| self.lease_valid_until.is_some_and(|t| t > now))
    }
}

impl Status {
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

impl ReplicaStatus for Status {
    /// Ready: holding a shard with a valid lease, or a spare because every shard is held;
    /// never once the store was found replaced. Unreadable records do not change whether
    /// the replica can act (it acts on the last good values, and each unreadable record
    /// recovers by itself: see `docs/reliability.md`), but the reason names them:
    /// "…; degraded store: KEY: REASON"; a drop the distributor holds back is named too
    /// ("…; degraded inventory: …").
    fn readiness(&self, now: Instant) -> Result<String, String> {
        if let Some(what) = &self.store_replaced {
            return Err(format!("fenced: store replaced ({what})"));
        }
        let degraded = |text: String| {
            let text = match self.held_back {
                Some(h) => format!(
                    "{text}; degraded inventory: it drops {} of the {} committed clusters \
                     (kept assigned)",
                    h.dropped, h.previous
                ),
                None => text,
            };
            match self.corrupt.as_slice() {
                [] => text,
                corrupt => {
                    let list: Vec<String> = corrupt.iter().map(ToString::to_string).collect();
                    format!("{text}; degraded store: {}", list.join("; "))
                }
            }
        };
        self.readiness_of_store(now).map(degraded).map_err(degraded)
    }

    fn lease_deadline(&self) -> Option<Instant> {
        self.lease_valid_until
    }

    /// The view as of now: a lease that lapsed since the snapshot (the runner could not
    /// publish) no longer counts, so two replicas never both show `is_distributor`.
    fn shard_view(&self) -> ShardView {
        let now = Instant::now();
        let shard = self.shard_at(now);
        ShardView {
            shard,
            is_distributor: self.is_distributor_at(now),
            generation: self.generation,
            acting: if shard.is_some() {
                self.acting.len()
            } else {
                0
            },
            store_errors: self.store_errors,
            handovers: self.handovers,
            failovers: self.failovers,
            shard_count: self.shard_count,
            corrupt_records: self.corrupt.len() as u64,
            inventory_disagreement: self.inventory_disagreement,
            held_back_clusters: self.held_back.map_or(0, |h| h.dropped),
        }
    }
}

impl super::Runner {
    /// Publishes the runner's snapshot ([`Status`]) when it changed.
    pub(super) fn publish(&mut self) {
        let now = self.now();
        let shard = self.replica.shard(now);
        self.stats.shard = shard;
        self.stats.is_distributor = self.replica.is_distributor(now);
        self.stats.distributor_valid_until = self
            .replica
            .distributor_valid_until(now)
            .map(|m| self.start + m.0);
        self.stats.placing = self.replica.is_placing();
        // The list of clusters only when it changed: at fleet scale it is tens of
        // thousands of strings, and this runs after every event.
        let acting_key = (self.acting_epoch, shard.is_some());
        if self.published_acting != Some(acting_key) {
            self.published_acting = Some(acting_key);
            self.stats.acting = Arc::new(self.replica.acting(now).map(str::to_owned).collect());
        }
        self.stats.generation = self.replica.applied_generation();
        self.stats.lease_valid_until = self
            .replica
            .shard_valid_until(now)
            .map(|m| self.start + m.0);
        self.stats.spare = self.replica.is_spare();
        let failovers = self.replica.takeovers();
        if failovers > self.stats.failovers {
            tracing::warn!(
                identity = %self.cfg.identity,
                failovers,
                "failover: took over from a holder whose lease expired"
            );
        }
        self.stats.failovers = failovers;
        self.stats.shard_count = self.replica.shard_count();
        self.stats.corrupt = self.replica.corrupt_records().to_vec();
        self.stats.inventory_disagreement = self.replica.inventory_disagreement();
        self.stats.held_back = self.replica.held_back().map(|h| HeldBackStatus {
            previous: h.previous,
            dropped: h.dropped,
            until: self.start + h.until.0,
        });
        let snapshot = self.stats.clone();
        self.status.send_if_modified(|s| {
            let changed = *s != snapshot;
            *s = snapshot;
            changed
        });
    }

    /// Tells the metrics how the other holders' leases looked in the listing just stepped.
    pub(super) fn report_peers(&self) {
        let leases: Vec<PeerRenewal> = self
            .replica
            .peer_leases()
            .iter()
            .map(|p| PeerRenewal {
                shard: p.shard,
                changed_at: self.start + p.changed.0,
                clusters: p.clusters,
            })
            .collect();
        let at_risk_after = self.cfg.timing.renew_every + self.timing.poll + PEER_RENEW_MARGIN;
        self.metrics.peer_leases(&leases, at_risk_after);
    }

    /// Counts a failed store call; a replaced store is said once.
    pub(super) fn store_error(&mut self, e: &StoreError) {
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
}
