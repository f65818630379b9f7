//! The tree builder and the managed resources against Argo CD's documented shapes.

use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::managed::{HIDDEN, managed_resources};

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop", "uid": "d-1", "resourceVersion": "7",
                     "creationTimestamp": "2026-11-01T10:00:00Z",
                     "annotations": {"deployment.kubernetes.io/revision": "3",
                                     "link.argocd.argoproj.io/docs": "Docs|https://docs.example/web",
                                     "link.argocd.argoproj.io/evil": "javascript:alert(1)"}},
        "spec": {"replicas": 1}
    })
}

fn replica_set() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web-5d9", "namespace": "shop", "uid": "rs-1",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "d-1"}]}
    })
}

fn pod() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-5d9-x", "namespace": "shop", "uid": "p-1", "labels": {"app": "web"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d9", "uid": "rs-1"}]},
        "spec": {"nodeName": "node-a",
                 "initContainers": [{"name": "init", "image": "busybox:1"}],
                 "containers": [{"name": "web", "image": "nginx:1.27",
                                 "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}}]},
        "status": {"phase": "Running",
                   "containerStatuses": [{"name": "web", "ready": true, "restartCount": 2,
                                          "state": {"running": {}}}]}
    })
}

fn node() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "node-a", "uid": "n-1"},
        "status": {"capacity": {"cpu": "4", "memory": "8Gi"}, "nodeInfo": {"kubeletVersion": "v1.31.0"}}
    })
}

fn unrelated_pod() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "other", "namespace": "shop", "uid": "p-9"},
        "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "x",
                 "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Running"}
    })
}

fn managed(live: Option<Value>, target: Option<Value>, kind: &str, name: &str) -> ManagedResource {
    ManagedResource {
        group: if kind == "Deployment" { "apps" } else { "" }.to_owned(),
        version: "v1".to_owned(),
        kind: kind.to_owned(),
        namespace: "shop".to_owned(),
        name: name.to_owned(),
        target,
        live: live.map(Arc::new),
        ..ManagedResource::default()
    }
}

fn healthy(_: &Value) -> Option<HealthStatus> {
    Some(HealthStatus {
        status: "Healthy".to_owned(),
        message: String::new(),
    })
}

fn tree_of(managed: &[ManagedResource], objects: Vec<Value>) -> Value {
    let objects: Vec<Arc<Value>> = objects.into_iter().map(Arc::new).collect();
    let tree = resource_tree(&TreeInput {
        managed,
        objects: &objects,
        health: &healthy,
        orphaned: &[],
    });
    serde_json::to_value(tree).unwrap()
}

fn node_named<'a>(tree: &'a Value, kind: &str) -> &'a Value {
    tree["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} node in {tree:#}"))
}

#[test]
fn children_follow_owner_references_with_parent_refs() {
    let m = [managed(
        Some(deployment()),
        Some(deployment()),
        "Deployment",
        "web",
    )];
    let tree = tree_of(
        &m,
        vec![deployment(), replica_set(), pod(), unrelated_pod(), node()],
    );
    let kinds: Vec<&str> = tree["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["kind"].as_str().unwrap())
        .collect();
    // Sorted by group/kind/namespace/name: "/Pod…" before "apps/Deployment…".
    assert_eq!(kinds, ["Pod", "Deployment", "ReplicaSet"]);
    let rs = node_named(&tree, "ReplicaSet");
    assert_eq!(
        rs["parentRefs"],
        json!([{"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "shop",
                "name": "web", "uid": "d-1"}])
    );
    let d = node_named(&tree, "Deployment");
    assert_eq!(d["uid"], "d-1");
    assert_eq!(d["resourceVersion"], "7");
    assert_eq!(d["createdAt"], "2026-11-01T10:00:00Z");
    assert_eq!(d["health"], json!({"status": "Healthy"}));
    assert_eq!(d["info"], json!([{"name": "Revision", "value": "Rev:3"}]));
    assert_eq!(
        d["networkingInfo"]["externalURLs"],
        json!(["Docs|https://docs.example/web"])
    );
    assert!(d.get("parentRefs").is_none());
}

#[test]
fn pods_show_images_info_and_hosts() {
    let m = [managed(
        Some(deployment()),
        Some(deployment()),
        "Deployment",
        "web",
    )];
    let tree = tree_of(&m, vec![replica_set(), pod(), unrelated_pod(), node()]);
    let p = node_named(&tree, "Pod");
    assert_eq!(p["images"], json!(["busybox:1", "nginx:1.27"]));
    assert_eq!(
        p["info"],
        json!([
            {"name": "Status Reason", "value": "Running"},
            {"name": "Node", "value": "node-a"},
            {"name": "Containers", "value": "1/1"},
            {"name": "Restart Count", "value": "2"},
            {"name": "cpu", "value": "250"},
            {"name": "memory", "value": (64i64 * 1024 * 1024 * 1000).to_string()},
        ])
    );
    assert_eq!(p["networkingInfo"], json!({"labels": {"app": "web"}}));
    let hosts = tree["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 1);
    assert_eq!(hosts[0]["name"], "node-a");
    assert_eq!(hosts[0]["systemInfo"], json!({"kubeletVersion": "v1.31.0"}));
    assert_eq!(
        hosts[0]["resourcesInfo"][0],
        json!({"resourceName": "cpu", "requestedByApp": 250, "requestedByNeighbors": 1000,
               "capacity": 4000})
    );
}

#[test]
fn a_missing_resource_is_a_missing_node() {
    let m = [managed(None, Some(deployment()), "Deployment", "web")];
    let tree = tree_of(&m, vec![replica_set()]);
    assert_eq!(
        tree["nodes"],
        json!([{"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "shop",
                "name": "web", "health": {"status": "Missing"}}])
    );
}

#[test]
fn services_and_ingresses_show_their_networking() {
    let svc = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "shop", "uid": "s-1"},
        "spec": {"type": "LoadBalancer", "selector": {"app": "web"}},
        "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.9"}]}}});
    let ing = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "web", "namespace": "shop", "uid": "i-1"},
        "spec": {"tls": [{"hosts": ["shop.example"], "secretName": "tls"}],
                 "rules": [{"host": "shop.example", "http": {"paths": [
                     {"path": "/app", "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}});
    let m = [
        managed(Some(svc.clone()), Some(svc), "Service", "web"),
        managed(Some(ing.clone()), Some(ing), "Ingress", "web"),
    ];
    let tree = tree_of(&m, vec![]);
    let s = node_named(&tree, "Service");
    assert_eq!(
        s["networkingInfo"],
        json!({"targetLabels": {"app": "web"}, "ingress": [{"ip": "10.0.0.9"}]})
    );
    let i = node_named(&tree, "Ingress");
    assert_eq!(
        i["networkingInfo"],
        json!({"targetRefs": [{"kind": "Service", "namespace": "shop", "name": "web"}],
               "externalURLs": ["https://shop.example/app"]})
    );
}

fn secret(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": "creds", "namespace": "shop", "resourceVersion": "4"},
           "data": data})
}

#[test]
fn secret_values_are_hidden_and_told_apart() {
    let mut target = secret(json!({"user": "YWRtaW4=", "password": "bmV3"}));
    target["stringData"] = json!({"token": "t0ken"});
    let live = secret(json!({"user": "YWRtaW4=", "password": "b2xk"}));
    let m = ManagedResource {
        modified: true,
        ..managed(Some(live), Some(target), "Secret", "creds")
    };
    let diffs = managed_resources(&[m], &[]);
    let d = &diffs[0];
    let data = |s: &str| serde_json::from_str::<Value>(s).unwrap()["data"].clone();
    let more = format!("{HIDDEN}++++");
    assert_eq!(
        data(&d.target_state),
        json!({"user": HIDDEN, "password": HIDDEN, "token": HIDDEN})
    );
    // Same value, same mask; a different value of the same key, a longer one.
    assert_eq!(
        data(&d.live_state),
        json!({"user": HIDDEN, "password": more})
    );
    for state in [
        &d.target_state,
        &d.live_state,
        &d.normalized_live_state,
        &d.predicted_live_state,
    ] {
        for secret in ["YWRtaW4=", "bmV3", "b2xk", "t0ken", "dDBrZW4="] {
            assert!(!state.contains(secret), "{secret} shown in {state}");
        }
    }
    assert!(d.modified);
    assert_eq!(d.resource_version, "4");
}

/// argocd-cm's `resource.sensitive.mask.annotations`: those annotations of a Secret are
/// hidden as its data is, in its last-applied copy too; naming the last-applied
/// annotation hides it whole. Other annotations, and other kinds, are shown.
#[test]
fn sensitive_annotations_of_a_secret_are_hidden() {
    let cm = std::collections::BTreeMap::from([(
        crate::managed::SENSITIVE_ANNOTATIONS_KEY.to_owned(),
        "vault.example/token, owner".to_owned(),
    )]);
    let sensitive = crate::managed::sensitive_annotations(&cm);
    assert_eq!(sensitive, ["vault.example/token", "owner"]);
    let annotated = |token: &str| {
        let mut s = secret(json!({"user": "YWRtaW4="}));
        s["metadata"]["annotations"] = json!({"vault.example/token": token, "owner": "team-a",
            "note": "shown"});
        let applied = s.clone();
        s["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] =
            json!(applied.to_string());
        s
    };
    let m = managed(
        Some(annotated("s3cr3t")),
        Some(annotated("n3w")),
        "Secret",
        "creds",
    );
    let diffs = managed_resources(std::slice::from_ref(&m), &sensitive);
    let d = &diffs[0];
    let live: Value = serde_json::from_str(&d.live_state).unwrap();
    let target: Value = serde_json::from_str(&d.target_state).unwrap();
    assert_eq!(
        target["metadata"]["annotations"]["vault.example/token"],
        HIDDEN
    );
    assert_eq!(
        live["metadata"]["annotations"]["vault.example/token"],
        format!("{HIDDEN}++++"),
        "a different value, told apart"
    );
    assert_eq!(live["metadata"]["annotations"]["owner"], HIDDEN);
    assert_eq!(live["metadata"]["annotations"]["note"], "shown");
    for state in [&d.target_state, &d.live_state, &d.predicted_live_state] {
        for secret in ["s3cr3t", "n3w", "team-a"] {
            assert!(!state.contains(secret), "{secret} shown in {state}");
        }
    }
    let whole = ["kubectl.kubernetes.io/last-applied-configuration".to_owned()];
    let d = &managed_resources(&[m], &whole)[0];
    let live: Value = serde_json::from_str(&d.live_state).unwrap();
    assert_eq!(
        live["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
        HIDDEN
    );
    assert_eq!(
        live["metadata"]["annotations"]["vault.example/token"],
        "s3cr3t"
    );
}

#[test]
fn managed_resources_are_sorted_with_null_sides() {
    let prune = managed(Some(pod()), None, "Pod", "web-5d9-x");
    let missing = managed(None, Some(deployment()), "Deployment", "web");
    let diffs = managed_resources(&[missing, prune], &[]);
    assert_eq!(diffs[0].kind, "Pod");
    assert_eq!(diffs[0].target_state, "null");
    assert_eq!(diffs[0].predicted_live_state, "null");
    assert!(!diffs[0].modified);
    assert_eq!(diffs[1].kind, "Deployment");
    assert_eq!(diffs[1].live_state, "null");
    assert_eq!(diffs[1].normalized_live_state, "null");
    assert!(diffs[1].modified);
    let json = serde_json::to_value(&diffs[1]).unwrap();
    assert!(json.get("hook").is_none() && json.get("diff").is_none());
}

/// `status.summary` as Argo CD sums the tree up: Pods' images (a Deployment's template is
/// not a source), every node's external URLs (an Ingress's, a link annotation's) and the
/// app's own links, each sorted once.
#[test]
fn the_summary_collects_images_and_urls_of_every_node() {
    let ing = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "web", "namespace": "shop", "uid": "i-1"},
        "spec": {"rules": [{"host": "shop.example", "http": {"paths": [
            {"path": "/", "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}});
    let child = json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": "child", "namespace": "argocd", "uid": "a-1"}});
    let m = [
        managed(Some(deployment()), Some(deployment()), "Deployment", "web"),
        managed(Some(ing.clone()), Some(ing), "Ingress", "web"),
    ];
    let objects: Vec<Arc<Value>> = [replica_set(), pod(), unrelated_pod()]
        .into_iter()
        .map(Arc::new)
        .collect();
    let tree = resource_tree(&TreeInput {
        managed: &m,
        objects: &objects,
        health: &healthy,
        orphaned: &[],
    });
    let links = ["https://grafana.example/d/web".to_owned()];
    let summary = serde_json::to_value(tree.summary(&links)).unwrap();
    assert_eq!(
        summary,
        json!({"externalURLs": ["Docs|https://docs.example/web", "http://shop.example/",
                               "https://grafana.example/d/web"],
               "images": ["busybox:1", "nginx:1.27"], "isAppOfApps": false})
    );
    let apps = [ManagedResource {
        group: "argoproj.io".to_owned(),
        namespace: "argocd".to_owned(),
        ..managed(Some(child.clone()), Some(child), "Application", "child")
    }];
    let tree = resource_tree(&TreeInput {
        managed: &apps,
        objects: &[],
        health: &healthy,
        orphaned: &[],
    });
    let summary = serde_json::to_value(tree.summary(&[])).unwrap();
    assert_eq!(
        summary,
        json!({"externalURLs": [], "images": [], "isAppOfApps": true})
    );
}

#[test]
fn orphaned_nodes_are_the_roots_and_their_descendants_sorted_as_argo_cd() {
    let objects: Vec<Arc<Value>> = [deployment(), replica_set(), pod(), unrelated_pod()]
        .into_iter()
        .map(Arc::new)
        .collect();
    let roots = vec![objects[0].clone(), objects[3].clone()];
    let all = |_: &Value| true;
    let nodes = orphaned_nodes(&roots, &objects, &all, &healthy);
    let names: Vec<String> = nodes
        .iter()
        .map(|n| format!("{}/{}", n.resource.kind, n.resource.name))
        .collect();
    // Core group first, then apps; within a group by version, then kind, then name.
    assert_eq!(
        names,
        [
            "Pod/other",
            "Pod/web-5d9-x",
            "Deployment/web",
            "ReplicaSet/web-5d9"
        ]
    );
    let pod_node = nodes
        .iter()
        .find(|n| n.resource.name == "web-5d9-x")
        .unwrap();
    assert_eq!(pod_node.parent_refs[0].kind, "ReplicaSet");
    assert_eq!(pod_node.parent_refs[0].namespace, "shop");
    // A node refused (another app's) is left out with its descendants.
    let not_replica_sets = |v: &Value| v["kind"] != "ReplicaSet";
    let nodes = orphaned_nodes(&roots, &objects, &not_replica_sets, &healthy);
    assert_eq!(nodes.len(), 2);
}
