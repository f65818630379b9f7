//! The resource tree of an app, built as Argo CD's controller builds it: a node per
//! managed resource (a `Missing` one where the object does not exist), then every cached
//! object that descends from a live one by owner references (ReplicaSets, Pods,
//! EndpointSlices…), each with its parents, details, health and creation time; and the
//! Kubernetes nodes that run the app's Pods (`hosts`). Nodes are sorted by
//! `group/kind/namespace/name` as Argo CD normalizes them. The orphaned nodes (when the
//! app's project asks) are made by [`orphaned_nodes`]: the orphaned top-level objects and
//! their descendants, sorted as Argo CD sorts them (by its `ResourceRef` text).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use serde_json::Value;

use crate::documents::{
    ApplicationTree, HealthStatus, HostInfo, HostResourceInfo, ResourceNode, ResourceRef,
};
use crate::node_info::{details, pod_requests};
use crate::quantity::milli_value;

/// One resource of the app as the reconciler compared it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ManagedResource {
    /// API group.
    pub group: String,
    /// API version (of the desired object, else the live one).
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Namespace (empty for cluster-scoped objects).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The desired object (`None`: to be pruned, or a live hook).
    pub target: Option<Value>,
    /// The live object (`None`: missing).
    pub live: Option<Arc<Value>>,
    /// The live object as compared, normalized (`None`: the live object itself).
    pub normalized_live: Option<Value>,
    /// The live object as a sync would leave it (`None`: the desired fields merged over
    /// the live object).
    pub predicted_live: Option<Value>,
    /// The comparison found a difference.
    pub modified: bool,
    /// A hook.
    pub hook: bool,
}

/// What the tree is built from.
pub struct TreeInput<'a> {
    /// The app's resources.
    pub managed: &'a [ManagedResource],
    /// The objects cached of the app's cluster: where children, Pods' neighbours and
    /// Kubernetes nodes are looked for.
    pub objects: &'a [Arc<Value>],
    /// The health of an object, where one is assessed.
    pub health: &'a dyn Fn(&Value) -> Option<HealthStatus>,
    /// The orphaned nodes ([`orphaned_nodes`]; empty unless the project asks).
    pub orphaned: &'a [ResourceNode],
}

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn group_version(api_version: &str) -> (&str, &str) {
    api_version.rsplit_once('/').unwrap_or(("", api_version))
}

/// (group, kind, namespace, name) of an object.
type Key = (String, String, String, String);

fn key_of(v: &Value) -> Key {
    (
        group_version(text(v, "/apiVersion")).0.to_owned(),
        text(v, "/kind").to_owned(),
        text(v, "/metadata/namespace").to_owned(),
        text(v, "/metadata/name").to_owned(),
    )
}

/// The tree of one app (unsharded; see [`crate::encode::tree_shards`]).
pub fn resource_tree(input: &TreeInput<'_>) -> ApplicationTree {
    let known: HashSet<Key> = input
        .objects
        .iter()
        .map(|o| key_of(o))
        .chain(
            input
                .managed
                .iter()
                .filter_map(|m| m.live.as_deref().map(key_of)),
        )
        .collect();
    let children = children_by_owner(input.objects);
    let mut nodes = Vec::new();
    let mut queue: VecDeque<&Value> = VecDeque::new();
    for m in input.managed {
        match m.live.as_deref() {
            Some(live) => queue.push_back(live),
            None => nodes.push(ResourceNode {
                resource: ResourceRef {
                    group: m.group.clone(),
                    version: m
                        .target
                        .as_ref()
                        .map(|t| group_version(text(t, "/apiVersion")).1.to_owned())
                        .unwrap_or_else(|| m.version.clone()),
                    kind: m.kind.clone(),
                    namespace: m.namespace.clone(),
                    name: m.name.clone(),
                    uid: String::new(),
                },
                health: Some(HealthStatus {
                    status: "Missing".to_owned(),
                    message: String::new(),
                }),
                ..ResourceNode::default()
            }),
        }
    }
    descend(queue, &children, &mut |obj| {
        nodes.push(node_of(obj, &known, input.health));
        true
    });
    nodes.sort_by_cached_key(|n| n.resource.full_name());
    let hosts = hosts(&nodes, input.objects);
    ApplicationTree {
        nodes,
        orphaned_nodes: input.orphaned.to_vec(),
        hosts,
        shards_count: 0,
    }
}

/// The objects among `objects` that name an owner, by the owner's uid.
fn children_by_owner(objects: &[Arc<Value>]) -> HashMap<&str, Vec<&Value>> {
    let mut children: HashMap<&str, Vec<&Value>> = HashMap::new();
    for o in objects {
        for owner in o
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(uid) = owner.get("uid").and_then(Value::as_str) {
                children.entry(uid).or_default().push(o);
            }
        }
    }
    children
}

/// Visits `queue`'s objects and their descendants by owner references, each once; an
/// object `visit` answers false for is not descended into.
fn descend<'v>(
    mut queue: VecDeque<&'v Value>,
    children: &HashMap<&str, Vec<&'v Value>>,
    visit: &mut dyn FnMut(&'v Value) -> bool,
) {
    let mut seen: HashSet<Key> = HashSet::new();
    while let Some(obj) = queue.pop_front() {
        if !seen.insert(key_of(obj)) || !visit(obj) {
            continue;
        }
        let uid = text(obj, "/metadata/uid");
        if !uid.is_empty() {
            queue.extend(children.get(uid).into_iter().flatten().copied());
        }
    }
}

/// The orphaned nodes of an app, as Argo CD makes them: each of `roots` (the orphaned
/// top-level objects) and their descendants among `objects` (the namespace's), except
/// those `keep` refuses (another app's), which are not descended into either; sorted by
/// Argo CD's `ResourceRef` text (group, version, kind, namespace, name, uid). Argo CD
/// counts these nodes in its `OrphanedResourceWarning` and its metric.
pub fn orphaned_nodes(
    roots: &[Arc<Value>],
    objects: &[Arc<Value>],
    keep: &dyn Fn(&Value) -> bool,
    health: &dyn Fn(&Value) -> Option<HealthStatus>,
) -> Vec<ResourceNode> {
    let known: HashSet<Key> = objects.iter().map(|o| key_of(o)).collect();
    let children = children_by_owner(objects);
    let mut nodes = Vec::new();
    let queue = roots.iter().map(|r| r.as_ref()).collect();
    descend(queue, &children, &mut |obj| {
        if !keep(obj) {
            return false;
        }
        nodes.push(node_of(obj, &known, health));
        true
    });
    nodes.sort_by_cached_key(|n| {
        let r = &n.resource;
        format!(
            "&ResourceRef{{Group:{},Version:{},Kind:{},Namespace:{},Name:{},UID:{},}}",
            r.group, r.version, r.kind, r.namespace, r.name, r.uid
        )
    });
    nodes
}

/// A node as Argo CD's `asResourceNode` makes it.
fn node_of(
    obj: &Value,
    known: &HashSet<Key>,
    health: &dyn Fn(&Value) -> Option<HealthStatus>,
) -> ResourceNode {
    let (group, version) = group_version(text(obj, "/apiVersion"));
    let namespace = text(obj, "/metadata/namespace");
    let parent_refs = obj
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|o| {
            let (g, v) = group_version(text(o, "/apiVersion"));
            let kind = text(o, "/kind");
            let name = text(o, "/name");
            // A parent found in the child's namespace is namespaced; else cluster-scoped.
            let in_namespace = known.contains(&(
                g.to_owned(),
                kind.to_owned(),
                namespace.to_owned(),
                name.to_owned(),
            ));
            ResourceRef {
                group: g.to_owned(),
                version: v.to_owned(),
                kind: kind.to_owned(),
                namespace: if in_namespace {
                    namespace.to_owned()
                } else {
                    String::new()
                },
                name: name.to_owned(),
                uid: text(o, "/uid").to_owned(),
            }
        })
        .collect();
    let d = details(obj);
    ResourceNode {
        resource: ResourceRef {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: text(obj, "/kind").to_owned(),
            namespace: namespace.to_owned(),
            name: text(obj, "/metadata/name").to_owned(),
            uid: text(obj, "/metadata/uid").to_owned(),
        },
        parent_refs,
        info: d.info,
        networking_info: d.networking,
        resource_version: text(obj, "/metadata/resourceVersion").to_owned(),
        images: d.images,
        health: health(obj),
        created_at: obj
            .pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str)
            .map(str::to_owned),
    }
}

const HOST_RESOURCES: [&str; 3] = ["cpu", "memory", "storage"];

fn is_pod(v: &Value) -> bool {
    text(v, "/apiVersion") == "v1" && text(v, "/kind") == "Pod"
}

/// The Kubernetes nodes that run the app's Pods, with the app's and the neighbours'
/// requests and the node's capacity (nodes not cached are left out, as Argo CD does).
fn hosts(nodes: &[ResourceNode], objects: &[Arc<Value>]) -> Vec<HostInfo> {
    let app_pods: HashSet<(&str, &str)> = nodes
        .iter()
        .filter(|n| n.resource.group.is_empty() && n.resource.kind == "Pod")
        .map(|n| (n.resource.namespace.as_str(), n.resource.name.as_str()))
        .collect();
    let k8s_nodes: HashMap<&str, &Value> = objects
        .iter()
        .filter(|o| text(o, "/apiVersion") == "v1" && text(o, "/kind") == "Node")
        .map(|o| (text(o, "/metadata/name"), o.as_ref()))
        .collect();
    let mut by_node: BTreeMap<&str, (Vec<&Value>, Vec<&Value>)> = BTreeMap::new();
    for pod in objects.iter().filter(|o| is_pod(o)) {
        let node = text(pod, "/spec/nodeName");
        if node.is_empty() {
            continue;
        }
        let mine = app_pods.contains(&(
            text(pod, "/metadata/namespace"),
            text(pod, "/metadata/name"),
        ));
        let entry = by_node.entry(node).or_default();
        if mine {
            entry.0.push(pod);
        } else {
            entry.1.push(pod);
        }
    }
    let mut hosts = Vec::new();
    for (name, (mine, neighbours)) in by_node {
        let Some(node) = k8s_nodes.get(name).filter(|_| !mine.is_empty()) else {
            continue;
        };
        let mut resources: BTreeMap<&str, HostResourceInfo> = BTreeMap::new();
        for r in HOST_RESOURCES {
            let capacity = node
                .pointer(&format!("/status/capacity/{r}"))
                .and_then(Value::as_str)
                .map_or(0, milli_value);
            resources.insert(
                r,
                HostResourceInfo {
                    resource_name: r.to_owned(),
                    requested_by_app: 0,
                    requested_by_neighbors: 0,
                    capacity,
                },
            );
        }
        let add = |pods: &[&Value], resources: &mut BTreeMap<&str, HostResourceInfo>, app: bool| {
            for pod in pods {
                let phase = text(pod, "/status/phase");
                if !app && (phase == "Succeeded" || phase == "Failed") {
                    continue;
                }
                for (r, v) in pod_requests(pod) {
                    if let Some(info) = resources.get_mut(r.as_str()) {
                        if app {
                            info.requested_by_app += v;
                        } else {
                            info.requested_by_neighbors += v;
                        }
                    }
                }
            }
        };
        add(&mine, &mut resources, true);
        add(&neighbours, &mut resources, false);
        hosts.push(HostInfo {
            name: name.to_owned(),
            resources_info: resources.into_values().filter(|r| r.capacity > 0).collect(),
            system_info: node
                .pointer("/status/nodeInfo")
                .cloned()
                .unwrap_or_else(|| Value::Object(Default::default())),
            labels: BTreeMap::new(),
        });
    }
    hosts
}

#[cfg(test)]
#[path = "tree_tests.rs"]
mod tests;
