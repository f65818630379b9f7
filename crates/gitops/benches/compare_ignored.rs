//! Measures comparisons per second of an application of Deployments (desired from Git
//! against live objects with the API server's additions, as `compare_bench` in the tests
//! builds them), without ignoreDifferences and with each kind of rule matching every
//! object: a JSON pointer (`/spec/replicas`, the HPA recipe), a jq path expression (each
//! container's image), a trusted field manager (the HPA's `kube-controller-manager`
//! through `scale`), and an argocd-cm `.all` rule that matches no field.
//!
//! Run: `cargo bench -p fleetshard-gitops --bench compare_ignored -- [DEPLOYMENTS]`
//! (1,000 unless told).

#![allow(
    clippy::disallowed_types,
    reason = "a measurement harness reads the wall clock"
)]

use std::collections::BTreeMap;
use std::time::Instant;

use fleetshard_diff::Normalizer;
use fleetshard_gitops::compare::{
    CompareOptions, SyncStatus, TRACKING_ANNOTATION, compare_app_normalized,
};
use fleetshard_manifest::customizations::{
    CompareOptions as ArgoCompareOptions, IgnoreDifference, IgnoreRules, ResourceOverride,
};
use serde_json::{Value, json};

fn pair(i: usize) -> (Value, Value) {
    let name = format!("svc-{i}");
    let desired = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "prod", "labels": {"app": name}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}}, "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "app", "image": format!("registry.example.com/{name}:1.0.{i}"),
                "ports": [{"containerPort": 8080, "name": "http"}],
                "env": (0..10).map(|e| json!({"name": format!("VAR_{e}"), "value": format!("{e}")})).collect::<Vec<_>>(),
                "resources": {"limits": {"cpu": 1, "memory": "512Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}}}]}}}
    });
    let mut live = desired.clone();
    live["metadata"]["uid"] = json!(format!("uid-{i}"));
    live["metadata"]["resourceVersion"] = json!("1000");
    live["metadata"]["generation"] = json!(1);
    live["metadata"]["annotations"] =
        json!({TRACKING_ANNOTATION: format!("shop:apps/Deployment:prod/{name}")});
    live["metadata"]["managedFields"] = json!([
        {"manager": "fleetshard", "operation": "Apply", "fieldsV1": {"f:spec": {"f:template": {}}}},
        {"manager": "kube-controller-manager", "operation": "Update", "subresource": "scale",
         "fieldsV1": {"f:spec": {"f:replicas": {}}}}
    ]);
    live["spec"]["replicas"] = json!(5);
    live["spec"]["revisionHistoryLimit"] = json!(10);
    live["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] =
        json!("1000m");
    live["status"] = json!({"observedGeneration": 1, "replicas": 5, "updatedReplicas": 5, "availableReplicas": 5});
    (desired, live)
}

fn rule(rules: IgnoreRules) -> Vec<IgnoreDifference> {
    vec![IgnoreDifference {
        group: "apps".into(),
        kind: "Deployment".into(),
        rules,
        ..IgnoreDifference::default()
    }]
}

fn main() {
    let n: usize = std::env::args()
        .filter(|a| a != "--bench")
        .nth(1)
        .map(|a| a.parse().expect("DEPLOYMENTS is a number"))
        .unwrap_or(1000);
    let (desired, live): (Vec<Value>, Vec<Value>) = (0..n).map(pair).unzip();
    let opts = CompareOptions::new("shop").with_destination_namespace("prod");
    let none = BTreeMap::new();
    let compare = ArgoCompareOptions::default();
    let all_override: BTreeMap<String, ResourceOverride> = [(
        "*/*".to_owned(),
        ResourceOverride {
            ignore_differences: IgnoreRules {
                json_pointers: vec!["/spec/paused".into()],
                ..Default::default()
            },
            ..Default::default()
        },
    )]
    .into();
    let cases: Vec<(&str, Normalizer, SyncStatus)> = vec![
        (
            "without ignoreDifferences",
            Normalizer::default(),
            SyncStatus::OutOfSync,
        ),
        (
            "jsonPointers /spec/replicas",
            Normalizer::new(
                &rule(IgnoreRules {
                    json_pointers: vec!["/spec/replicas".into()],
                    ..Default::default()
                }),
                &none,
                &compare,
            )
            .unwrap(),
            SyncStatus::Synced,
        ),
        (
            "jqPathExpressions .spec.template.spec.containers[].image (+ /spec/replicas)",
            Normalizer::new(
                &rule(IgnoreRules {
                    json_pointers: vec!["/spec/replicas".into()],
                    jq_path_expressions: vec![".spec.template.spec.containers[].image".into()],
                    ..Default::default()
                }),
                &none,
                &compare,
            )
            .unwrap(),
            SyncStatus::Synced,
        ),
        (
            "managedFieldsManagers kube-controller-manager",
            Normalizer::new(
                &rule(IgnoreRules {
                    managed_fields_managers: vec!["kube-controller-manager".into()],
                    ..Default::default()
                }),
                &none,
                &compare,
            )
            .unwrap(),
            SyncStatus::Synced,
        ),
        (
            "argocd-cm .all jsonPointers /spec/paused (matches no field)",
            Normalizer::new(&[], &all_override, &compare).unwrap(),
            SyncStatus::OutOfSync,
        ),
    ];
    println!("{n} Deployments per comparison of the app");
    for (name, normalizer, expected) in &cases {
        let runs = 5;
        let start = Instant::now();
        for _ in 0..runs {
            let result = compare_app_normalized(&desired, &live, &opts, normalizer).unwrap();
            assert_eq!(result.status, *expected, "{name}");
        }
        let per = start.elapsed().as_secs_f64() / f64::from(runs);
        println!(
            "{name}: {:.0} resource comparisons/s ({:.1} µs/resource)",
            n as f64 / per,
            per * 1e6 / n as f64
        );
    }
}
