//! What the distributor places: the inventory's clusters, their loads and applications,
//! and what the runner knows of the world.

use fleetshard_core::{App, Cluster};

/// The inventory the distributor places, and what the runner knows of the world.
#[derive(Debug, Clone, Copy)]
pub struct FleetInput<'a> {
    /// Clusters.
    pub clusters: &'a [Cluster],
    /// Their loads.
    pub loads: &'a [u64],
    /// The applications: which slice of a split cluster holds each (`slicing.rs`).
    pub apps: &'a [App],
    /// Changes whenever `clusters` or `loads` change, so the distributor can skip
    /// recomputing a placement it has already found unchanged.
    pub revision: u64,
    /// The shard count from outside, for [`ShardCount::External`].
    pub external_shards: Option<u32>,
    /// `loads` are measured costs: the configured hysteresis applies.
    pub measured: bool,
}
