//! Comparison with what `ignoreDifferences` and compare options leave out: the normalizer
//! applied to both sides, `IgnoreExtraneous` objects not counted in the app's status, and
//! argocd-cm's `knownTypeFields` compared as their core types.

use std::collections::BTreeMap;

use fleetshard_diff::Normalizer;
use fleetshard_gitops::compare::{
    CompareOptions, SyncStatus, TRACKING_ANNOTATION, compare_app, compare_app_normalized,
};
use fleetshard_manifest::customizations::{
    CompareOptions as ArgoCompareOptions, IgnoreDifference, IgnoreRules, ResourceCustomizations,
};
use serde_json::{Value, json};

fn webhook(ca: &str) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
           "metadata": {"name": "inject"},
           "webhooks": [{"name": "inject.example.com", "clientConfig": {"caBundle": ca, "service": {"name": "s", "namespace": "n"}}}]})
}

#[test]
fn an_injected_ca_bundle_is_left_out_by_a_jq_expression() {
    let opts = CompareOptions::new("app");
    let desired = [webhook("")];
    let live = [webhook("LS0tLS1CRUdJTi...")];
    let plain = compare_app(&desired, &live, &opts).unwrap();
    let normalizer = Normalizer::new(
        &[IgnoreDifference {
            group: "admissionregistration.k8s.io".into(),
            kind: "MutatingWebhookConfiguration".into(),
            rules: IgnoreRules {
                jq_path_expressions: vec![".webhooks[]?.clientConfig.caBundle".into()],
                ..Default::default()
            },
            ..Default::default()
        }],
        &BTreeMap::new(),
        &ArgoCompareOptions::default(),
    )
    .unwrap();
    let ignored = compare_app_normalized(&desired, &live, &opts, &normalizer).unwrap();
    assert_eq!(
        plain.status,
        SyncStatus::OutOfSync,
        "the webhook's injector fights Git"
    );
    assert_eq!(ignored.status, SyncStatus::Synced);
    // Only the named field is left out: another change still shows.
    let mut other = webhook("");
    other["webhooks"][0]["clientConfig"]["service"]["name"] = json!("t");
    let changed = compare_app_normalized(&[other], &live, &opts, &normalizer).unwrap();
    assert_eq!(changed.status, SyncStatus::OutOfSync);
}

#[test]
fn an_extraneous_object_with_ignore_extraneous_does_not_make_the_app_out_of_sync() {
    let opts = CompareOptions::new("app");
    let extra = |annotations: Value| {
        let mut a = annotations;
        a[TRACKING_ANNOTATION] = json!("app:/ConfigMap:ns/left");
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "left", "namespace": "ns", "annotations": a}})
    };
    let plain = compare_app::<Value>(&[], &[extra(json!({}))], &opts).unwrap();
    assert_eq!(plain.status, SyncStatus::OutOfSync);
    let ignored = compare_app::<Value>(
        &[],
        &[extra(
            json!({"argocd.argoproj.io/compare-options": "IgnoreExtraneous"}),
        )],
        &opts,
    )
    .unwrap();
    assert_eq!(ignored.status, SyncStatus::Synced);
    let r = &ignored.resources[0];
    assert!(r.requires_pruning && r.extraneous_ignored);
    assert_eq!(
        r.status,
        SyncStatus::OutOfSync,
        "the resource itself is still OutOfSync"
    );
}

/// A custom resource whose controller writes quantities canonically: equal amounts
/// compare equal where argocd-cm's `knownTypeFields` declares the field a quantity or a
/// type holding quantities (a custom resource's fields are plain JSON otherwise); under a
/// pod template's `resources` they compare as amounts with or without a declaration.
#[test]
fn known_type_fields_compare_a_custom_resources_quantities_as_amounts() {
    let task = |storage: &str, cpu: &str| {
        json!({"apiVersion": "example.io/v1", "kind": "CronTask",
               "metadata": {"name": "nightly", "namespace": "jobs"},
               "spec": {"storage": storage, "compute": {"limits": {"cpu": cpu}},
                        "jobTemplate": {"spec": {"template": {"spec": {"containers": [
                            {"name": "run", "image": "run:1",
                             "resources": {"limits": {"cpu": cpu}}}]}}}}}})
    };
    let status = |types: &str, desired: Value, live: Value| {
        let mut argocd_cm = BTreeMap::new();
        if !types.is_empty() {
            argocd_cm.insert(
                "resource.customizations.knownTypeFields.example.io_CronTask".to_owned(),
                types.to_owned(),
            );
        }
        let custom = ResourceCustomizations::from_argocd_cm(&argocd_cm).unwrap();
        let normalizer = Normalizer::new(&[], &custom.overrides, &custom.compare).unwrap();
        let opts = CompareOptions::new("app");
        compare_app_normalized(&[desired], &[live], &opts, &normalizer)
            .unwrap()
            .status
    };
    let storage = "- field: spec.storage\n  type: core/Quantity\n";
    let compute = "- field: spec.compute\n  type: core/v1/ResourceRequirements\n";
    // spec.storage: 1Gi in Git, 1024Mi live.
    let (git, live) = (task("1Gi", "1"), task("1024Mi", "1"));
    assert_eq!(status("", git.clone(), live.clone()), SyncStatus::OutOfSync);
    assert_eq!(
        status(compute, git.clone(), live.clone()),
        SyncStatus::OutOfSync
    );
    assert_eq!(status(storage, git, live), SyncStatus::Synced);
    // cpu: 1 in Git, 1000m live (spec.compute and the pod template's resources).
    let (git, live) = (task("1Gi", "1"), task("1Gi", "1000m"));
    assert_eq!(status("", git.clone(), live.clone()), SyncStatus::OutOfSync);
    assert_eq!(
        status(storage, git.clone(), live.clone()),
        SyncStatus::OutOfSync
    );
    assert_eq!(
        status(compute, git.clone(), live.clone()),
        SyncStatus::Synced
    );
    let mut only_pod = live.clone();
    only_pod["spec"]["compute"]["limits"]["cpu"] = json!("1");
    assert_eq!(status("", git, only_pod), SyncStatus::Synced);
}
