//! The web dashboard: who owns what, live. A replica serves it read-only on its HTTP
//! listener (`/dashboard`) when asked to (`ReplicaSettings::dashboard`, `run --dashboard`;
//! it has no authentication), whichever protocol it runs; `fleetshard up` serves it with
//! controls. `observe.rs` is the pure step machine of fenced mode (leases judged by
//! watching versions move, the timeline derived from successive store snapshots),
//! `observe/argocd.rs` that of Argo CD's heartbeat protocol (the shard map's entries judged
//! by watching their content change, clusters placed with Argo CD's algorithm), both
//! building the clusters' view with `observe/views.rs`; `serve.rs` the driver task and the
//! routes; the page, its script and style are embedded in the binary (`assets/`, no CDN).
//! Nothing here reads credentials: clusters are shown by name, server and zone only.

mod observe;
mod serve;

pub use observe::{
    APP_PROBLEMS_LEN, AppProblem, AppStatus, AppStatuses, AppTotals, ArgoObserver, ClusterInfo,
    ClusterView, Clusters, Event, Lease, Observer, ShardView, Snapshot, TIMELINE_LEN,
};
pub use serve::{
    Action, ArgoSource, Controls, Dashboard, ProcessView, Published, Source, TOKEN_HEADER,
};

use fleetshard_controller::inventory::InventorySnapshot;
use fleetshard_core::model::{DestinationIndex, ZONE_LABEL};

/// The clusters of an inventory snapshot with their apps (resolved as the controller
/// resolves destinations): names, servers and zones, never credentials.
pub fn clusters_of(inventory: &InventorySnapshot) -> Clusters {
    let index = DestinationIndex::new(&inventory.clusters);
    let mut apps: Vec<Vec<String>> = vec![Vec::new(); inventory.clusters.len()];
    for app in inventory.apps.iter() {
        if let Some(i) = index.resolve(&app.destination) {
            apps[i].push(format!("{}/{}", app.namespace, app.name));
        }
    }
    inventory
        .clusters
        .iter()
        .zip(apps)
        .map(|(c, apps)| {
            (
                c.id.clone(),
                ClusterInfo {
                    name: c.name.clone(),
                    server: c.server.clone(),
                    zone: c.labels.get(ZONE_LABEL).cloned(),
                    apps,
                },
            )
        })
        .collect()
}
