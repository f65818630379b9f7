use std::collections::BTreeMap;

use super::*;

fn cm(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn the_yaml_map_and_split_keys_merge_as_in_argo_cd() {
    let c = ResourceCustomizations::from_argocd_cm(&cm(&[
        (
            "resource.customizations",
            "\"*.aws.crossplane.io/*\":\n  health.lua: |\n    return {status = 'Healthy'}\napps/Deployment:\n  ignoreDifferences: |\n    jsonPointers:\n    - /spec/replicas\n",
        ),
        ("resource.customizations.health.cert-manager.io_Certificate", "return nil"),
        ("resource.customizations.useOpenLibs.cert-manager.io_Certificate", "true"),
        ("resource.customizations.ignoreDifferences.all", "managedFieldsManagers:\n- kube-controller-manager\n"),
        ("resource.customizations.ignoreDifferences.admissionregistration.k8s.io_MutatingWebhookConfiguration", "jqPathExpressions:\n- '.webhooks[]?.clientConfig.caBundle'\n"),
        ("resource.customizations.ignoreResourceUpdates.ConfigMap", "jsonPointers:\n- /data/leader\n"),
        ("resource.customizations.knownTypeFields.argoproj.io_Rollout", "- field: spec.template.spec\n  type: core/v1/PodSpec\n"),
        ("kustomize.buildOptions", "unrelated"),
    ]))
    .unwrap();
    let keys: Vec<&str> = c.overrides.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "*.aws.crossplane.io/*",
            "*/*",
            "ConfigMap",
            "admissionregistration.k8s.io/MutatingWebhookConfiguration",
            "apps/Deployment",
            "argoproj.io/Rollout",
            "cert-manager.io/Certificate"
        ]
    );
    let cert = &c.overrides["cert-manager.io/Certificate"];
    assert_eq!(
        (cert.health_lua.as_str(), cert.use_open_libs),
        ("return nil", true)
    );
    assert!(
        c.overrides["*.aws.crossplane.io/*"]
            .health_lua
            .contains("Healthy")
    );
    // The map's `ignoreDifferences` is YAML text in a string, as Argo CD writes it.
    assert_eq!(
        c.overrides["*/*"]
            .ignore_differences
            .managed_fields_managers,
        ["kube-controller-manager"]
    );
    assert_eq!(
        c.overrides["ConfigMap"]
            .ignore_resource_updates
            .json_pointers,
        ["/data/leader"]
    );
    assert_eq!(
        c.overrides["argoproj.io/Rollout"].known_type_fields[0].type_name,
        "core/v1/PodSpec"
    );
    assert_eq!(c.compare, CompareOptions::default());
    assert!(c.ignore_resource_updates_enabled);
}

#[test]
fn compare_options_and_errors_name_the_key() {
    let c = ResourceCustomizations::from_argocd_cm(&cm(&[
        ("resource.compareoptions", "ignoreAggregatedRoles: true\nignoreResourceStatusField: off\nignoreDifferencesOnResourceUpdates: false\n"),
        ("resource.ignoreResourceUpdatesEnabled", "false"),
    ]))
    .unwrap();
    assert!(c.compare.ignore_aggregated_roles);
    assert_eq!(c.compare.ignore_resource_status_field, IgnoreStatus::None);
    assert!(!c.compare.ignore_differences_on_resource_updates);
    assert!(!c.ignore_resource_updates_enabled);
    for (key, value, fragment) in [
        (
            "resource.customizations.useOpenLibs.a_B",
            "yes",
            "not a boolean",
        ),
        (
            "resource.customizations.colour.a_B",
            "x",
            "\"colour\" is not supported",
        ),
        (
            "resource.customizations.health.a_b_c",
            "x",
            "<group>_<kind>",
        ),
        (
            "resource.customizations.ignoreDifferences.a_B",
            "jsonPointers: [",
            "",
        ),
        ("resource.customizations", "- not a map", ""),
    ] {
        let e = ResourceCustomizations::from_argocd_cm(&cm(&[(key, value)])).unwrap_err();
        assert_eq!(e.key, key);
        assert!(e.to_string().contains(fragment), "{e}");
    }
}

#[test]
fn application_ignore_differences_entries() {
    let entry: IgnoreDifference = serde_json::from_value(serde_json::json!({
        "group": "apps", "kind": "Deployment", "name": "web",
        "jsonPointers": ["/spec/replicas"], "managedFieldsManagers": ["kube-controller-manager"]
    }))
    .unwrap();
    assert_eq!(entry.rules.json_pointers, ["/spec/replicas"]);
    assert_eq!(entry.name, "web");
    assert!(entry.namespace.is_empty() && !entry.rules.is_empty());
}
