//! [`ArgoStatus`] as the replica sees any protocol's status ([`ReplicaStatus`]).

use tokio::time::Instant;

use super::ArgoStatus;
use crate::ownership::{ReplicaStatus, ShardView};

impl ReplicaStatus for ArgoStatus {
    fn readiness(&self, now: Instant) -> Result<String, String> {
        ArgoStatus::readiness(self, now)
    }

    /// Nothing is admitted past the time the entry is known to be ours (2H after the last
    /// confirmed heartbeat).
    fn lease_deadline(&self) -> Option<Instant> {
        self.valid_until
    }

    /// `generation` is the replica count the distribution was computed with (it is a
    /// function of it), so audit lines of different replicas compare.
    fn shard_view(&self) -> ShardView {
        ShardView {
            shard: self.shard,
            is_distributor: false,
            generation: u64::from(self.replicas),
            acting: self.acting.len(),
            store_errors: self.store_errors,
            handovers: self.handovers,
            failovers: self.failovers,
            shard_count: self.replicas,
            corrupt_records: 0,
            inventory_disagreement: 0,
            held_back_clusters: 0,
        }
    }
}
