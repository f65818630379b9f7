//! One cluster (or slice of one) in `status`'s fenced report, and why it has an owner or
//! not.

use serde::Serialize;

/// One cluster in the report.
#[derive(Debug, Serialize)]
pub(in crate::cli::status) struct ClusterRow {
    pub id: String,
    /// From the fleet given with `--fleet`/`--clusters` (`None`: not given, or not in it).
    pub name: Option<String>,
    pub server: Option<String>,
    pub shard: u32,
    /// The replica acting on it now; `None` unless `state` is `acting`.
    pub owner: Option<String>,
    /// Why it has an owner or not.
    pub state: ClusterState,
    /// The shard it returns to when that shard is held again (it is displaced from a
    /// vacant shard); absent when it is home.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub home: Option<u32>,
    /// Its measured cost, and for how long it was measured (`None`: not yet).
    pub cost: Option<f64>,
    pub cost_measured_secs: Option<u64>,
    /// For a slice of a split cluster (`id` is `cluster#slice-N-of-K`): its cluster, `N`
    /// and `K`. Each slice has its own owner.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slice: Option<SliceOf>,
}

/// Which slice of which cluster a row is.
#[derive(Debug, Serialize)]
pub(in crate::cli::status) struct SliceOf {
    pub cluster: String,
    pub slice: u32,
    pub of: u32,
}

/// Whether a cluster's shard holder acts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(in crate::cli::status) enum ClusterState {
    /// Its shard's holder is live and every live holder acknowledged the generation.
    Acting,
    /// The generation is being handed over: some live holder has not acknowledged it,
    /// so a cluster it moved may not have started yet.
    Handover,
    /// Its shard's holder stopped renewing (dead): nobody acts on it.
    HolderExpired,
    /// Its shard's holder missed a renewal (it may be dead; its lease has not run out):
    /// at risk, and not shown as acting.
    NotRenewed,
    /// Its shard was given up or was never held.
    Vacant,
    /// Its shard's lease was not judged (`--observe` shorter than the lease duration).
    NotJudged,
}

impl ClusterState {
    /// How the table says it.
    pub(in crate::cli::status) fn text(self) -> &'static str {
        match self {
            ClusterState::Acting => "acting",
            ClusterState::Handover => "handover",
            ClusterState::HolderExpired => "holder expired",
            ClusterState::NotRenewed => "holder not renewing",
            ClusterState::Vacant => "vacant",
            ClusterState::NotJudged => "not judged",
        }
    }
}
