//! `deploy/helm/fleetshard`: the chart rendered and linted by Helm itself (its Go SDK,
//! through `scripts/helm-template`; scripts/test installs it and names it in
//! `FLEETSHARD_HELM_SDK`). What it renders with its defaults is the `argocd` overlay, and
//! with `protocol: fenced` the `fenced` one, object for object (Helm's own labels and the
//! order of environment variables aside), so every check of the overlays (the replica run
//! under their RBAC among them) holds for the chart too; plus the in-cluster destination's
//! ClusterRoles, least privilege, checked here rule by rule.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use super::{deploy_dir, rendered};
use crate::deploy_manifests::kustomize::id;

const NAMESPACE: &str = "argocd";

/// Helm's render of the chart with `values`: `Ok(objects)`, or `Err(Helm's message)`.
/// `None` when Helm's SDK is not installed and the run is not scripts/test's.
fn helm(values: Value) -> Option<Result<Vec<Value>, String>> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/helm-template");
    let chart = deploy_dir().join("helm/fleetshard");
    let out = Command::new("python3")
        .arg(script)
        .arg(&chart)
        .args(["fleetshard", NAMESPACE, &values.to_string()])
        .output()
        .expect("python3 runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    match out.status.code() {
        Some(0) => {}
        Some(2) if std::env::var_os("FLEETSHARD_HELM_SDK").is_none() => {
            eprintln!("Helm's SDK is not installed (scripts/test installs it): {stderr}");
            return None;
        }
        _ => return Some(Err(stderr)),
    }
    let answer: Value = serde_json::from_slice(&out.stdout).expect("helm-template's JSON");
    let lint: Vec<&Value> = answer["lint"]
        .as_array()
        .unwrap()
        .iter()
        // 1 is info ("icon is recommended"); 2 warning, 3 error.
        .filter(|m| m["severity"].as_i64().unwrap_or(3) >= 2)
        .collect();
    assert!(lint.is_empty(), "helm lint --strict: {lint:#?}");
    let options = serde_saphyr::options! { strict_booleans: true };
    let docs: Vec<Value> =
        serde_saphyr::from_multiple_with_options(answer["manifest"].as_str().unwrap(), options)
            .expect("Helm's output is YAML");
    Some(Ok(docs.into_iter().filter(|d| !d.is_null()).collect()))
}

/// The render with `values`, which must succeed (`None`: no Helm here).
fn render(values: Value) -> Option<Vec<Value>> {
    helm(values).map(|r| r.unwrap_or_else(|e| panic!("the chart does not render: {e}")))
}

const HELM_LABELS: &[&str] = &[
    "app.kubernetes.io/instance",
    "app.kubernetes.io/managed-by",
    "helm.sh/chart",
];

/// An object as the overlays' would read: without Helm's labels, env sorted by name.
fn comparable(mut o: Value) -> Value {
    if let Some(labels) = o["metadata"]["labels"].as_object_mut() {
        labels.retain(|k, _| !HELM_LABELS.contains(&k.as_str()));
    }
    if let Some(env) = o
        .pointer_mut("/spec/template/spec/containers/0/env")
        .and_then(Value::as_array_mut)
    {
        env.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    }
    o
}

fn in_cluster_rbac(o: &Value) -> bool {
    o["metadata"]["name"]
        .as_str()
        .is_some_and(|n| n.starts_with("fleetshard-in-cluster-"))
}

fn sorted(objects: impl IntoIterator<Item = Value>) -> Vec<Value> {
    let mut v: Vec<Value> = objects.into_iter().map(comparable).collect();
    v.sort_by_key(|o| format!("{}/{}", o["metadata"]["namespace"], id(o)));
    v
}

#[test]
fn the_charts_defaults_render_the_overlays_objects() {
    for (protocol, overlay) in [("argocd", "argocd"), ("fenced", "fenced")] {
        let Some(chart) = render(json!({"protocol": protocol})) else {
            return;
        };
        for o in &chart {
            let labels = &o["metadata"]["labels"];
            assert_eq!(labels["app.kubernetes.io/managed-by"], "Helm", "{}", id(o));
            assert_eq!(
                labels["app.kubernetes.io/instance"],
                "fleetshard",
                "{}",
                id(o)
            );
        }
        let chart = sorted(chart.into_iter().filter(|o| !in_cluster_rbac(o)));
        let kustomized = sorted(rendered(overlay));
        let ids = |v: &[Value]| v.iter().map(id).collect::<Vec<_>>();
        assert_eq!(ids(&chart), ids(&kustomized), "{protocol}");
        for (a, b) in chart.iter().zip(&kustomized) {
            assert_eq!(
                a,
                b,
                "{protocol}: {} differs from the {overlay} overlay's",
                id(a)
            );
        }
    }
}

/// The rules of the ClusterRole `name`, as (verbs, apiGroups, resources) per rule.
fn cluster_role_rules(
    objects: &[Value],
    name: &str,
) -> Vec<(Vec<String>, Vec<String>, Vec<String>)> {
    let role = objects
        .iter()
        .find(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no ClusterRole {name}"));
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_owned())
            .collect()
    };
    role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                strings(&r["verbs"]),
                strings(&r["apiGroups"]),
                strings(&r["resources"]),
            )
        })
        .collect()
}

fn bindings_of<'a>(objects: &'a [Value], role: &str) -> Vec<&'a Value> {
    objects
        .iter()
        .filter(|o| {
            (o["kind"] == "RoleBinding" || o["kind"] == "ClusterRoleBinding")
                && o["roleRef"]["kind"] == "ClusterRole"
                && o["roleRef"]["name"] == role
        })
        .collect()
}

/// Argo CD's in-cluster destination is applied with the pod's service account: reading
/// every kind, writing with create/patch/update/delete, and nothing that changes RBAC
/// beyond what the account holds (no `*`, escalate, bind, impersonate,
/// deletecollection) unless `inCluster.manageRbac` asks.
#[test]
fn the_in_cluster_destination_gets_least_privilege() {
    let Some(objects) = render(json!({})) else {
        return;
    };
    let read = cluster_role_rules(&objects, "fleetshard-in-cluster-read");
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].0, ["get", "list", "watch"]);
    let apply = cluster_role_rules(&objects, "fleetshard-in-cluster-apply");
    assert_eq!(apply.len(), 1, "{apply:?}");
    assert_eq!(apply[0].0, ["create", "patch", "update", "delete"]);
    for role in ["fleetshard-in-cluster-read", "fleetshard-in-cluster-apply"] {
        let bindings = bindings_of(&objects, role);
        assert_eq!(bindings.len(), 1, "{role}");
        assert_eq!(bindings[0]["kind"], "ClusterRoleBinding");
        assert_eq!(
            bindings[0]["subjects"],
            json!([{"kind": "ServiceAccount", "name": "fleetshard", "namespace": NAMESPACE}])
        );
    }

    let Some(objects) = render(json!({"inCluster": {"manageRbac": true}})) else {
        return;
    };
    let apply = cluster_role_rules(&objects, "fleetshard-in-cluster-apply");
    assert_eq!(apply.len(), 2);
    assert_eq!(apply[1].0, ["escalate", "bind"]);
    assert_eq!(apply[1].1, ["rbac.authorization.k8s.io"]);
    assert_eq!(apply[1].2, ["roles", "clusterroles"]);
}

/// Writes bound to listed namespaces only: a RoleBinding in each, no cluster-wide grant,
/// and Argo CD's own namespace refused with a message naming the value.
#[test]
fn in_cluster_writes_can_be_limited_to_namespaces_and_never_argo_cds() {
    let Some(objects) = render(json!({"inCluster": {"namespaces": ["team-a", "team-b"]}})) else {
        return;
    };
    let bindings = bindings_of(&objects, "fleetshard-in-cluster-apply");
    let places: Vec<(&str, &str)> = bindings
        .iter()
        .map(|b| {
            (
                b["kind"].as_str().unwrap(),
                b["metadata"]["namespace"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    assert_eq!(
        places,
        [("RoleBinding", "team-a"), ("RoleBinding", "team-b")]
    );
    // Reading stays cluster-wide: the live caches watch every namespace.
    assert_eq!(bindings_of(&objects, "fleetshard-in-cluster-read").len(), 1);

    let err = helm(json!({"inCluster": {"namespaces": ["team-a", NAMESPACE]}}))
        .unwrap()
        .unwrap_err();
    assert!(
        err.contains("inCluster.namespaces") && err.contains("argocd"),
        "{err}"
    );

    let Some(objects) = render(json!({"createClusterRoles": false})) else {
        return;
    };
    assert!(!objects.iter().any(in_cluster_rbac));
}

/// Keys of the argo-cd chart's `controller` section that mean the same here do the same;
/// a key with no fleetshard meaning is refused by the schema, naming it, rather than
/// silently ignored; values the replicas would refuse are refused at install.
#[test]
fn argo_cd_chart_values_mean_the_same_and_unknown_ones_are_refused() {
    let values = json!({"controller": {
        "replicas": 5,
        "image": {"repository": "registry.example/fleetshard", "tag": "v1"},
        "extraArgs": ["--dashboard"],
        "env": [{"name": "EXTRA", "value": "1"}],
        "nodeSelector": {"pool": "system"},
        "priorityClassName": "high",
        "heartbeatTime": 20,
        "shardingAlgorithm": "consistent-hashing",
    }});
    let Some(objects) = render(values) else {
        return;
    };
    let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
    let pod = &deployment["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!(deployment["spec"]["replicas"], 5);
    assert_eq!(c["image"], "registry.example/fleetshard:v1");
    assert_eq!(
        c["args"],
        json!(["run", "--listen", "0.0.0.0:8080", "--dashboard"])
    );
    assert_eq!(pod["nodeSelector"], json!({"pool": "system"}));
    assert_eq!(pod["priorityClassName"], "high");
    let env = |name: &str| {
        c["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .map(|e| e["value"].clone())
    };
    assert_eq!(env("EXTRA"), Some(json!("1")));
    assert_eq!(env("ARGOCD_CONTROLLER_HEARTBEAT_TIME"), Some(json!("20")));
    assert_eq!(
        env("ARGOCD_CONTROLLER_SHARDING_ALGORITHM"),
        Some(json!("consistent-hashing"))
    );

    // An HPA owns the count: no spec.replicas for `kubectl apply` to reset.
    let Some(objects) = render(json!({"controller": {"replicas": null}})) else {
        return;
    };
    let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
    assert!(deployment["spec"].get("replicas").is_none());

    for (values, names) in [
        (
            json!({"controller": {"statefulsetAnnotations": {}}}),
            "statefulsetAnnotations",
        ),
        (json!({"controller": {"heartbeatTime": 5}}), "heartbeatTime"),
        (json!({"protocol": "raft"}), "protocol"),
        (
            json!({"protocol": "fenced", "store": {"namespace": NAMESPACE}}),
            "store.namespace",
        ),
    ] {
        let err = helm(values.clone()).unwrap().unwrap_err();
        assert!(err.contains(names), "{values}: {err}");
    }
}
