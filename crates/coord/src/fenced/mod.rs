//! Fenced lease mode: each shard is a lease renewed by its holder and judged by observers
//! on their own clocks; one elected distributor commits numbered assignment generations;
//! a cluster moves only after its previous owner has acknowledged the generation or its
//! lease has expired. The protocol is written down in `ARCHITECTURE.md` ("Fenced lease
//! mode"); this module is that protocol as a pure state machine ([`Replica`]), driven by a
//! runner (or by the deterministic simulation, `crate::sim`, in tests).

mod inventory;
mod records;
mod replica;
mod role;
mod snapshot;

pub use inventory::{
    HeldBackRecord, InventoryRecord, InventorySummary, PROTOCOL, digest_text, inventory_digest,
    inventory_key,
};
pub use records::{
    AssignmentDoc, CorruptRecord, DesiredShards, DistributorRecord, MAX_LEASE_RECORD_BYTES,
    PresenceRecord, ShardRecord, assignment_key, decode, decode_lease, desired_shards_key,
    distributor_key, encode, incarnation_text, is_lease_key, presence_key, shard_key,
};
pub use replica::{
    Action, DropGuard, FleetInput, HeldBack, MAX_CAPACITY, MAX_CAPACITY_RATIO, MAX_SHARDS,
    PRESENCE_GRACE, PeerLease, Placed, PlacementJob, Replica, ReplicaConfig, ShardCount,
    ShardCountError, Ticket, WritePurpose,
};
pub use role::{RoleLease, ShardSeen, role_lease};
pub use snapshot::{FencedSnapshot, RecordKey, decode_desired};
