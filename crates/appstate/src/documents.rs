//! The documents Argo CD's API server reads from the app-state cache, with the JSON names
//! of Argo CD's `v1alpha1` types (`ApplicationTree`, `ResourceNode`, `ResourceDiff`,
//! `ClusterInfo`) and their `omitempty` rules: an empty string, list, map or zero is left
//! out where Argo CD leaves it out, and kept where it keeps it (`applicationsCount`,
//! `connectionState.status`, `message` and `attemptedAt`).

use std::collections::BTreeMap;

use serde::Serialize;

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// A reference to an object (Argo CD's `ResourceRef`).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ResourceRef {
    /// API group (empty for the core group).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// API version, without the group.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// Kind.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Namespace (empty for cluster-scoped objects).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// `metadata.uid`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

impl ResourceRef {
    /// Argo CD's sort key of nodes and diffs: `group/kind/namespace/name`.
    pub fn full_name(&self) -> String {
        format!(
            "{}/{}/{}/{}",
            self.group, self.kind, self.namespace, self.name
        )
    }
}

/// A resource's health (Argo CD's `HealthStatus`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HealthStatus {
    /// `Healthy`, `Progressing`, `Degraded`, `Suspended`, `Missing` or `Unknown`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// Why.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// A line of a node's details (Argo CD's `InfoItem`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InfoItem {
    /// Title.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Content.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub value: String,
}

/// A load balancer's address (Kubernetes' `LoadBalancerIngress`, the fields Argo CD
/// fills).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoadBalancerIngress {
    /// An IP address.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub ip: String,
    /// A DNS name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub hostname: String,
}

/// How a node takes part in the network (Argo CD's `ResourceNetworkingInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkingInfo {
    /// The labels a Service selects.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub target_labels: BTreeMap<String, String>,
    /// The objects an Ingress routes to.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub target_refs: Vec<ResourceRef>,
    /// A Pod's labels.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Load balancer addresses.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ingress: Vec<LoadBalancerIngress>,
    /// Links shown on the node (`link.argocd.argoproj.io/*` annotations, Ingress hosts).
    #[serde(rename = "externalURLs", skip_serializing_if = "Vec::is_empty")]
    pub external_urls: Vec<String>,
}

/// A node of the resource tree (Argo CD's `ResourceNode`; the reference is inlined).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceNode {
    /// Which object.
    #[serde(flatten)]
    pub resource: ResourceRef,
    /// Its owners (`metadata.ownerReferences`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parent_refs: Vec<ResourceRef>,
    /// Details shown on the node.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub info: Vec<InfoItem>,
    /// Networking details.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub networking_info: Option<NetworkingInfo>,
    /// `metadata.resourceVersion`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// A Pod's container images.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<String>,
    /// Its health, where one is assessed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health: Option<HealthStatus>,
    /// `metadata.creationTimestamp`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
}

/// A Kubernetes node's share used by the app (Argo CD's `HostResourceInfo`), in
/// thousandths of the unit (milli-CPU, milli-bytes), as Argo CD counts them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HostResourceInfo {
    /// `cpu`, `memory` or `storage`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource_name: String,
    /// Requested by the app's Pods on the node.
    #[serde(skip_serializing_if = "is_zero")]
    pub requested_by_app: i64,
    /// Requested by the other Pods on the node.
    #[serde(skip_serializing_if = "is_zero")]
    pub requested_by_neighbors: i64,
    /// The node's capacity.
    #[serde(skip_serializing_if = "is_zero")]
    pub capacity: i64,
}

/// A Kubernetes node that runs Pods of the app (Argo CD's `HostInfo`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HostInfo {
    /// The node's name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// CPU, memory and storage use.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resources_info: Vec<HostResourceInfo>,
    /// The node's `status.nodeInfo`, as Kubernetes reports it.
    pub system_info: serde_json::Value,
    /// The node's labels Argo CD is configured to show (none by default).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// The resource tree of an app, or one shard of it (Argo CD's `ApplicationTree`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationTree {
    /// The app's objects and their descendants by owner reference.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<ResourceNode>,
    /// Objects of the destination namespace no app manages (when the project asks).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub orphaned_nodes: Vec<ResourceNode>,
    /// The Kubernetes nodes running the app's Pods.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<HostInfo>,
    /// On the first shard of a sharded tree: how many shards there are.
    #[serde(skip_serializing_if = "is_zero")]
    pub shards_count: i64,
}

/// What an Application's `status.summary` shows of its tree (Argo CD's
/// `ApplicationSummary`): the lists are always written, so that a merge patch replaces
/// them (an empty list clears the recorded one).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationSummary {
    /// The nodes' external URLs and the app's own `link.argocd.argoproj.io/*` links,
    /// sorted, without repeats.
    #[serde(rename = "externalURLs")]
    pub external_urls: Vec<String>,
    /// The nodes' container images (a Pod's), sorted, without repeats.
    pub images: Vec<String>,
    /// Whether a node is an Argo CD Application (an app of apps).
    pub is_app_of_apps: bool,
}

impl ApplicationTree {
    /// The app's summary, as Argo CD's controller sums its tree up: every node's external
    /// URLs and images, and `app_links`, the values of the Application's own
    /// `link.argocd.argoproj.io/*` annotations.
    pub fn summary(&self, app_links: &[String]) -> ApplicationSummary {
        let mut urls = std::collections::BTreeSet::new();
        let mut images = std::collections::BTreeSet::new();
        let mut is_app_of_apps = false;
        for node in &self.nodes {
            if let Some(n) = &node.networking_info {
                urls.extend(n.external_urls.iter().cloned());
            }
            images.extend(node.images.iter().cloned());
            is_app_of_apps |=
                node.resource.group == "argoproj.io" && node.resource.kind == "Application";
        }
        urls.extend(app_links.iter().cloned());
        ApplicationSummary {
            external_urls: urls.into_iter().collect(),
            images: images.into_iter().collect(),
            is_app_of_apps,
        }
    }
}

/// A managed resource's states for the diff view (Argo CD's `ResourceDiff`). The states
/// are JSON documents in strings; `"null"` where the side does not exist.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDiff {
    /// API group.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// Kind.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Namespace.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The desired object.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub target_state: String,
    /// The live object.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub live_state: String,
    /// Deprecated by Argo CD and never written by its controller.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub diff: String,
    /// A hook.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub hook: bool,
    /// The live object as compared (normalized).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub normalized_live_state: String,
    /// The live object as a sync would leave it.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub predicted_live_state: String,
    /// The live object's `metadata.resourceVersion`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// The live object differs from the desired one (or one side is missing).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub modified: bool,
}

/// Whether the controller reaches a cluster (Argo CD's `ConnectionState`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ConnectionState {
    /// `Successful`, `Failed` or `Unknown`.
    pub status: String,
    /// Why it failed.
    pub message: String,
    /// When this was assessed (RFC 3339).
    #[serde(rename = "attemptedAt")]
    pub attempted_at: Option<String>,
}

/// What the controller's cache holds of a cluster (Argo CD's `ClusterCacheInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterCacheInfo {
    /// Objects cached.
    #[serde(skip_serializing_if = "is_zero")]
    pub resources_count: i64,
    /// Kinds watched.
    #[serde(rename = "apisCount", skip_serializing_if = "is_zero")]
    pub apis_count: i64,
    /// When the cache was last complete (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_cache_sync_time: Option<String>,
}

/// A cluster as the API server's cluster list shows it (Argo CD's `ClusterInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterInfo {
    /// Whether it is reached.
    pub connection_state: ConnectionState,
    /// `MAJOR.MINOR` of its API server.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub server_version: String,
    /// The cache's contents.
    pub cache_info: ClusterCacheInfo,
    /// How many apps deploy to it.
    pub applications_count: i64,
    /// `group/version` and `group/version/Kind` of what it serves, sorted.
    #[serde(rename = "apiVersions", skip_serializing_if = "Vec::is_empty")]
    pub api_versions: Vec<String>,
}
