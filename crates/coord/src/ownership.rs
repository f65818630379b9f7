//! What both coordination protocols tell the rest of a replica, whatever the protocol:
//! ownership changes ([`OwnershipChange`]), the hook their runners stop clusters through
//! ([`StopHook`]), where they report store latencies ([`RunnerMetrics`]), and their status
//! as the replica sees it ([`ReplicaStatus`]: readiness, lease deadline, shard view).
//!
//! The replica assembly depends on this module only; which protocol runs is decided once,
//! where the coordination runner is started.

use std::time::Duration;

use futures::future::BoxFuture;
use tokio::time::Instant;

/// One ownership change, in the order the replica decided it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    /// Start reconciling this cluster.
    Started(String),
    /// Stop reconciling this cluster (already stopped by the time this is read).
    Stopped(String),
}

/// An ownership change with the context a log line needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnershipChange {
    /// The replica's identity (several runners may share one channel).
    pub identity: String,
    /// What changed.
    pub change: Ownership,
    /// The shard held when it changed (for a stop after a lapse: the shard last held).
    pub shard: Option<u32>,
    /// The assignment generation applied at that moment.
    pub generation: u64,
    /// For a stop caused by the shard lease lapsing: when the lease lapsed, which is when
    /// ownership ended (work is gated on the lease), although the runner may only notice
    /// later — a process paused past its deadline reports the stop on resuming. `None`:
    /// the change happened when it was reported.
    pub lapsed_at: Option<Instant>,
    /// When the change happened: `lapsed_at` for a stop after a lapse, else when the runner
    /// reported it. Consumers (the audit log) date the change by it, not by when they
    /// read it: a channel's delay must not date an acquire after a later lapse.
    pub at: Instant,
}

/// What stops the work on a cluster: the controller's shard filter, which waits for the
/// cluster's items in flight. Until the returned future resolves the replica acknowledges
/// nothing that would let another replica start the cluster (the handover barrier, G1).
pub trait StopHook: Send + Sync + 'static {
    /// Stops `cluster`; resolves once nothing runs on it any more.
    fn stop(&self, cluster: String) -> BoxFuture<'static, ()>;
}

/// Where the runner reports what it measures (the CLI feeds Prometheus histograms). Every
/// method has a no-op default.
pub trait RunnerMetrics: Send + Sync + 'static {
    /// A store call finished: `op` is `list` or a write's purpose (`renew_shard`, ...).
    fn store_call(&self, op: &'static str, took: Duration, ok: bool) {
        let _ = (op, took, ok);
    }

    /// The other holders' shard leases as a listing showed them (fenced mode), and how
    /// long a record may stay unchanged while its holder renews on time (the renew period,
    /// this replica's polling interval and a margin): a record unchanged for longer missed
    /// a renewal, and nobody acts on its clusters until it renews or they move.
    fn peer_leases(&self, leases: &[PeerRenewal], at_risk_after: Duration) {
        let _ = (leases, at_risk_after);
    }
}

/// Another holder's shard lease as a listing showed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerRenewal {
    /// The shard.
    pub shard: u32,
    /// When this replica first saw the record's current version.
    pub changed_at: Instant,
    /// Clusters the assignment in force gives the shard.
    pub clusters: u64,
}

impl PeerRenewal {
    /// Of `leases`, the shards whose record has been unchanged for `at_risk_after` or
    /// longer at `now` (their holders missed a renewal), and those shards' clusters.
    pub fn not_renewed(
        leases: &[PeerRenewal],
        at_risk_after: Duration,
        now: Instant,
    ) -> (u64, u64) {
        leases
            .iter()
            .filter(|p| now.saturating_duration_since(p.changed_at) >= at_risk_after)
            .fold((0, 0), |(shards, clusters), p| {
                (shards + 1, clusters + p.clusters)
            })
    }
}

/// Logs a write's outcome (debug level) the one way both runners do: the version written or
/// the error as text, never Rust's `Debug` form of the result.
pub(crate) fn log_write(
    identity: &str,
    key: &str,
    result: &Result<u64, crate::store::StoreError>,
    took: Duration,
) {
    let took_ms = took.as_secs_f64() * 1e3;
    match result {
        Ok(version) => tracing::debug!(identity, key, version, took_ms, "write"),
        Err(e) => tracing::debug!(identity, key, error = %e, took_ms, "write failed"),
    }
}

/// Measures nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoMetrics;

impl RunnerMetrics for NoMetrics {}

/// A protocol-neutral view of a replica's coordination state, for `/metrics` and status
/// pages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardView {
    /// The shard held.
    pub shard: Option<u32>,
    /// Whether this replica is the distributor (fenced mode; false otherwise).
    pub is_distributor: bool,
    /// The generation applied (fenced: the assignment's; Argo CD mode: the replica count
    /// the distribution was computed with).
    pub generation: u64,
    /// How many clusters this replica acts on.
    pub acting: usize,
    /// Store operations that failed (conflicts excluded).
    pub store_errors: u64,
    /// Clusters started by this replica.
    pub handovers: u64,
    /// Shards taken over from a holder that had stopped renewing.
    pub failovers: u64,
    /// The shard count in force (fenced: the applied generation's; Argo CD: replicas).
    pub shard_count: u32,
    /// Records of the last listing that could not be read (fenced mode; 0 otherwise).
    pub corrupt_records: u64,
    /// Other live replicas whose published inventory digest differs from this one's
    /// (fenced mode; 0 otherwise).
    pub inventory_disagreement: u64,
    /// Clusters the distributor keeps assigned although its inventory dropped them, until
    /// the smaller inventory has held for the drop guard's grace (fenced mode; 0
    /// otherwise).
    pub held_back_clusters: u64,
}

/// What a coordination runner publishes (through a `watch`), seen by the replica: the
/// one interface both protocols' statuses offer.
pub trait ReplicaStatus: Clone + Send + Sync + 'static {
    /// Ready (`Ok`) or not (`Err`), with the reason `/readyz` prints, at `now`.
    fn readiness(&self, now: Instant) -> Result<String, String>;
    /// Until when this replica may act on its clusters (nothing is admitted past it);
    /// `None`: no hold on a shard.
    fn lease_deadline(&self) -> Option<Instant>;
    /// The counters and identifiers a status page shows.
    fn shard_view(&self) -> ShardView;
}
