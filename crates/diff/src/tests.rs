//! Rules matched and applied as Argo CD's normalizer applies them.

use std::collections::BTreeMap;

use fleetshard_manifest::customizations::{
    CompareOptions, IgnoreDifference, IgnoreRules, ResourceOverride,
};
use serde_json::{Value, json};

use super::*;

fn deployment(replicas: i64, image: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "prod"},
           "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "web", "image": image}]}}}})
}

const WEB: ObjectRef<'static> = ObjectRef {
    group: "apps",
    kind: "Deployment",
    namespace: "prod",
    name: "web",
};

fn app_rule(group: &str, kind: &str, name: &str, rules: IgnoreRules) -> IgnoreDifference {
    IgnoreDifference {
        group: group.into(),
        kind: kind.into(),
        name: name.into(),
        namespace: String::new(),
        rules,
    }
}

fn pointers(p: &[&str]) -> IgnoreRules {
    IgnoreRules {
        json_pointers: p.iter().map(|s| (*s).to_owned()).collect(),
        ..IgnoreRules::default()
    }
}

#[test]
fn an_application_rule_matches_by_group_kind_name_and_namespace() {
    let n = Normalizer::new(
        &[app_rule(
            "apps",
            "Deployment",
            "web",
            pointers(&["/spec/replicas"]),
        )],
        &BTreeMap::new(),
        &CompareOptions::default(),
    )
    .unwrap();
    let (d, l) = n
        .normalize_pair(WEB, &deployment(1, "a"), &deployment(5, "a"))
        .unwrap();
    assert_eq!(d, l, "only replicas differed");
    let other = ObjectRef { name: "api", ..WEB };
    assert!(
        n.normalize_pair(other, &deployment(1, "a"), &deployment(5, "a"))
            .is_none()
    );
    let elsewhere = Normalizer::new(
        &[IgnoreDifference {
            namespace: "staging".into(),
            ..app_rule("apps", "Deployment", "", pointers(&["/spec/replicas"]))
        }],
        &BTreeMap::new(),
        &CompareOptions::default(),
    )
    .unwrap();
    assert!(!elsewhere.applies_to(WEB));
    // Globs on group and kind; an empty group is the core group only.
    let glob = Normalizer::new(
        &[app_rule("*", "Deploy*", "", pointers(&["/spec/replicas"]))],
        &BTreeMap::new(),
        &CompareOptions::default(),
    )
    .unwrap();
    assert!(glob.applies_to(WEB));
    let core = Normalizer::new(
        &[app_rule("", "Deployment", "", pointers(&["/x"]))],
        &BTreeMap::new(),
        &CompareOptions::default(),
    )
    .unwrap();
    assert!(!core.applies_to(WEB));
}

#[test]
fn argocd_cm_rules_match_by_group_and_kind_and_all() {
    let mut overrides = BTreeMap::new();
    overrides.insert(
        "apps/Deployment".to_owned(),
        ResourceOverride {
            ignore_differences: pointers(&["/spec/replicas"]),
            ..Default::default()
        },
    );
    overrides.insert(
        "*/*".to_owned(),
        ResourceOverride {
            ignore_differences: IgnoreRules {
                jq_path_expressions: vec![".spec.template.spec.containers[].image".into()],
                ..Default::default()
            },
            ..Default::default()
        },
    );
    overrides.insert(
        "ConfigMap".to_owned(),
        ResourceOverride {
            health_lua: "return nil".into(),
            ..Default::default()
        },
    );
    let n = Normalizer::new(&[], &overrides, &CompareOptions::default()).unwrap();
    let (d, l) = n
        .normalize_pair(WEB, &deployment(1, "a"), &deployment(5, "b"))
        .unwrap();
    assert_eq!(d, l);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0],
        json!({"name": "web"})
    );
    let cm = ObjectRef {
        group: "",
        kind: "ConfigMap",
        namespace: "prod",
        name: "c",
    };
    assert!(n.applies_to(cm), "`.all` applies to every kind");
}

#[test]
fn a_bad_jq_expression_is_an_error_naming_its_rule() {
    let rules = IgnoreRules {
        jq_path_expressions: vec![".spec[".into()],
        ..Default::default()
    };
    let e = Normalizer::new(
        &[app_rule("apps", "Deployment", "", rules)],
        &BTreeMap::new(),
        &CompareOptions::default(),
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("spec.ignoreDifferences[0]: jq path expression \".spec[\""),
        "{e}"
    );
}

#[test]
fn trusted_managers_fields_are_left_out_on_both_sides() {
    let managers = IgnoreRules {
        managed_fields_managers: vec!["kube-controller-manager".into()],
        ..Default::default()
    };
    let n = Normalizer::new(
        &[app_rule("apps", "Deployment", "", managers)],
        &BTreeMap::new(),
        &CompareOptions::default(),
    )
    .unwrap();
    assert_eq!(
        n.trusted_managers().collect::<Vec<_>>(),
        ["kube-controller-manager"]
    );
    let mut live = deployment(5, "a");
    live["metadata"]["managedFields"] = json!([
        {"manager": "kube-controller-manager", "operation": "Update", "subresource": "scale", "fieldsV1": {"f:spec": {"f:replicas": {}}}}
    ]);
    let (d, l) = n.normalize_pair(WEB, &deployment(1, "a"), &live).unwrap();
    assert_eq!(d["spec"].get("replicas"), None);
    assert_eq!(l["spec"].get("replicas"), None);
    // An image changed by hand is still a difference.
    let (d, l) = n.normalize_pair(WEB, &deployment(1, "b"), &live).unwrap();
    assert_ne!(d["spec"]["template"], l["spec"]["template"]);
}

#[test]
fn respect_carries_the_live_values_of_ignored_fields_into_the_desired_object() {
    let n = Normalizer::new(
        &[app_rule(
            "apps",
            "Deployment",
            "",
            pointers(&["/spec/replicas"]),
        )],
        &BTreeMap::new(),
        &CompareOptions::default(),
    )
    .unwrap();
    let applied = n.respect(WEB, &deployment(1, "b"), &deployment(5, "a"));
    assert_eq!(
        applied,
        deployment(5, "b"),
        "replicas as live, the image from Git"
    );
    // A live object without the field leaves the desired value.
    let mut live = deployment(5, "a");
    live["spec"].as_object_mut().unwrap().remove("replicas");
    assert_eq!(
        n.respect(WEB, &deployment(1, "b"), &live),
        deployment(1, "b")
    );
    // Managers: only what the desired object sets is carried.
    let managers = IgnoreRules {
        managed_fields_managers: vec!["kube-controller-manager".into()],
        ..Default::default()
    };
    let m = Normalizer::new(
        &[app_rule("apps", "Deployment", "", managers)],
        &BTreeMap::new(),
        &CompareOptions::default(),
    )
    .unwrap();
    let mut live = deployment(5, "a");
    live["metadata"]["annotations"] = json!({"deployment.kubernetes.io/revision": "3"});
    live["metadata"]["managedFields"] = json!([
        {"manager": "kube-controller-manager", "operation": "Update", "subresource": "scale", "fieldsV1": {"f:spec": {"f:replicas": {}}}},
        {"manager": "kube-controller-manager", "operation": "Update",
         "fieldsV1": {"f:metadata": {"f:annotations": {"f:deployment.kubernetes.io/revision": {}}}}}
    ]);
    let applied = m.respect(WEB, &deployment(1, "b"), &live);
    assert_eq!(applied["spec"]["replicas"], 5);
    assert_eq!(
        applied["metadata"].get("annotations"),
        None,
        "not set by Git: not carried"
    );
}

#[test]
fn aggregated_cluster_roles_compare_without_their_rules() {
    let opts = CompareOptions {
        ignore_aggregated_roles: true,
        ..CompareOptions::default()
    };
    let n = Normalizer::new(&[], &BTreeMap::new(), &opts).unwrap();
    let role = ObjectRef {
        group: "rbac.authorization.k8s.io",
        kind: "ClusterRole",
        namespace: "",
        name: "agg",
    };
    let desired = json!({"aggregationRule": {"clusterRoleSelectors": [{}]}, "rules": []});
    let live =
        json!({"aggregationRule": {"clusterRoleSelectors": [{}]}, "rules": [{"verbs": ["get"]}]});
    let (d, l) = n.normalize_pair(role, &desired, &live).unwrap();
    assert_eq!(d, l);
    let plain = json!({"rules": [{"verbs": ["get"]}]});
    let (d, _) = n.normalize_pair(role, &plain, &plain).unwrap();
    assert_eq!(
        d, plain,
        "a role without an aggregation rule keeps its rules"
    );
    assert!(
        Normalizer::new(&[], &BTreeMap::new(), &CompareOptions::default())
            .unwrap()
            .is_empty()
    );
}

#[test]
fn resource_updates_ignore_their_own_paths_the_diffing_ones_by_option_and_metadata_churn() {
    let mut overrides = BTreeMap::new();
    overrides.insert(
        "apps/Deployment".to_owned(),
        ResourceOverride {
            ignore_resource_updates: pointers(&["/status"]),
            ignore_differences: IgnoreRules {
                json_pointers: vec!["/spec/replicas".into()],
                managed_fields_managers: vec!["kube-controller-manager".into()],
                ..IgnoreRules::default()
            },
            ..ResourceOverride::default()
        },
    );
    let with_metadata = |replicas: i64, rv: &str, ready: i64| {
        let mut d = deployment(replicas, "a");
        d["metadata"]["resourceVersion"] = json!(rv);
        d["metadata"]["generation"] = json!(replicas);
        d["metadata"]["managedFields"] = json!([{"manager": rv, "fieldsV1": {}}]);
        d["status"] = json!({"readyReplicas": ready});
        d
    };
    let before = with_metadata(1, "1", 1);
    let churned = with_metadata(3, "2", 3);
    let by_default =
        Normalizer::for_resource_updates(&overrides, &CompareOptions::default()).unwrap();
    assert_eq!(
        by_default.normalized(WEB, &before),
        by_default.normalized(WEB, &churned),
        "status, replicas (ignoreDifferences) and metadata churn are all left out"
    );
    let own_only = Normalizer::for_resource_updates(
        &overrides,
        &CompareOptions {
            ignore_differences_on_resource_updates: false,
            ..CompareOptions::default()
        },
    )
    .unwrap();
    assert_ne!(
        own_only.normalized(WEB, &before),
        own_only.normalized(WEB, &churned),
        "without ignoreDifferencesOnResourceUpdates, replicas counts"
    );
    // Metadata churn alone is left out of every kind, the core group's included.
    let cm = |rv: &str| json!({"kind": "ConfigMap", "metadata": {"name": "c", "resourceVersion": rv}, "data": {"k": "v"}});
    let core = ObjectRef {
        group: "",
        kind: "ConfigMap",
        namespace: "",
        name: "c",
    };
    assert_eq!(
        own_only.normalized(core, &cm("1")),
        own_only.normalized(core, &cm("2"))
    );
    let mut changed = cm("2");
    changed["data"]["k"] = json!("w");
    assert_ne!(
        own_only.normalized(core, &cm("1")),
        own_only.normalized(core, &changed)
    );
}
