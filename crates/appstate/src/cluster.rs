//! The cluster info document (`cluster|info|<server>`), as Argo CD's cluster info updater
//! makes it from what its cache knows of the cluster.

use crate::documents::{ClusterCacheInfo, ClusterInfo, ConnectionState};

/// What the replica knows of one cluster it owns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterFacts {
    /// `None`: the cache has not completed a list yet (`Unknown`); `Some(Ok)`: it has, and
    /// the cluster answers (`Successful`); `Some(Err(message))`: it does not (`Failed`).
    pub reached: Option<Result<(), String>>,
    /// `MAJOR.MINOR` of its API server.
    pub server_version: String,
    /// `group/version` of every kind it serves that the replica knows of, and
    /// `group/version/Kind`.
    pub api_versions: Vec<String>,
    /// Objects cached.
    pub resources_count: i64,
    /// Kinds watched.
    pub apis_count: i64,
    /// When the cache was last complete (RFC 3339).
    pub last_cache_sync: Option<String>,
    /// Apps whose destination is this cluster.
    pub applications_count: i64,
    /// Now (RFC 3339): `connectionState.attemptedAt`.
    pub now: String,
}

/// The document for `facts`: the cache figures only when the cluster is reached, the
/// failure's message when it is not, and Argo CD's message for a cluster without apps.
pub fn cluster_info(facts: &ClusterFacts) -> ClusterInfo {
    let mut api_versions = facts.api_versions.clone();
    api_versions.sort();
    api_versions.dedup();
    let mut info = ClusterInfo {
        connection_state: ConnectionState {
            status: String::new(),
            message: String::new(),
            attempted_at: Some(facts.now.clone()),
        },
        server_version: facts.server_version.clone(),
        cache_info: ClusterCacheInfo::default(),
        applications_count: facts.applications_count,
        api_versions,
    };
    match &facts.reached {
        None => {
            info.connection_state.status = "Unknown".to_owned();
            if facts.applications_count == 0 {
                info.connection_state.message =
                    "Cluster has no applications and is not being monitored.".to_owned();
            }
        }
        Some(Ok(())) => {
            info.connection_state.status = "Successful".to_owned();
            info.cache_info = ClusterCacheInfo {
                resources_count: facts.resources_count,
                apis_count: facts.apis_count,
                last_cache_sync_time: facts.last_cache_sync.clone(),
            };
        }
        Some(Err(message)) => {
            info.connection_state.status = "Failed".to_owned();
            info.connection_state.message.clone_from(message);
        }
    }
    info
}
