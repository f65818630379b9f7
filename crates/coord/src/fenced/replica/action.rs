//! What a step asks its runner to do ([`Action`]), and what each write is for.

use super::PlacementJob;
#[cfg(doc)]
use super::Replica;
use crate::store::Precondition;

/// What a write is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WritePurpose {
    /// Taking a free shard (a takeover when its last holder's lease expired).
    ClaimShard,
    /// Renewing the held shard (and acknowledging generations).
    RenewShard,
    /// Giving the shard up.
    ReleaseShard,
    /// Taking, renewing or giving up the distributor lease.
    Distributor,
    /// The presence record of a replica without a shard.
    Presence,
    /// Committing an assignment generation.
    Commit,
    /// This replica's inventory record (its digest, problems, a drop held back).
    Inventory,
    /// Deleting the presence record of a replica gone for
    /// [`PRESENCE_GRACE`](super::PRESENCE_GRACE).
    ForgetPresence,
    /// Deleting the record of a shard beyond the committed count whose holder let it go
    /// or is gone (`forget.rs`).
    ForgetShard,
}

impl WritePurpose {
    /// A short label (`claim_shard`, `renew_shard`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            WritePurpose::ClaimShard => "claim_shard",
            WritePurpose::RenewShard => "renew_shard",
            WritePurpose::ReleaseShard => "release_shard",
            WritePurpose::Distributor => "distributor",
            WritePurpose::Presence => "presence",
            WritePurpose::Commit => "commit",
            WritePurpose::Inventory => "inventory",
            WritePurpose::ForgetPresence => "forget_presence",
            WritePurpose::ForgetShard => "forget_shard",
        }
    }
}

/// Identifies a write whose outcome [`Replica::on_write`] must be told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticket(pub u64);

/// What the runner must do, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Stop reconciling this cluster now (before any later action), and report with
    /// [`Replica::on_stopped`] once nothing runs on it any more: until then no write of
    /// this replica tells others it has let the cluster go (acknowledgement, release).
    Stop(String),
    /// Write a record; report the outcome with the ticket.
    Write {
        /// For [`Replica::on_write`].
        ticket: Ticket,
        /// What the write is for (metrics, logs).
        purpose: WritePurpose,
        /// Key.
        key: String,
        /// Value.
        value: Vec<u8>,
        /// Compare-and-swap condition.
        pre: Precondition,
    },
    /// Delete a record; report the outcome with [`Replica::on_delete`].
    Delete {
        /// For [`Replica::on_delete`].
        ticket: Ticket,
        /// What the delete is for (metrics, logs).
        purpose: WritePurpose,
        /// Key.
        key: String,
        /// Compare-and-swap condition (the version judged).
        pre: Precondition,
    },
    /// Start reconciling this cluster.
    Start(String),
    /// Compute the distributor's placement — whole-fleet work — where it holds up nothing
    /// else ([`PlacementJob::run`], e.g. on a blocking thread), and give the result to
    /// [`Replica::on_placed`] (or report [`Replica::on_placement_failed`]). Only from a
    /// replica built with [`Replica::place_off_step`].
    Place(Box<PlacementJob>),
}
