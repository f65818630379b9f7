use serde_json::json;

use super::*;

fn err(source: Value) -> String {
    application_source("spec.source", &source)
        .unwrap_err()
        .to_string()
}

#[test]
fn unknown_fields_are_refused_by_path() {
    for (source, path) in [
        (json!({"repoURL": "r", "helmm": {}}), "spec.source.helmm"),
        (
            json!({"repoURL": "r", "helm": {"valueFile": []}}),
            "spec.source.helm.valueFile",
        ),
        (
            json!({"repoURL": "r", "helm": {"parameters": [{"name": "a", "forcestring": true}]}}),
            "spec.source.helm.parameters[0].forcestring",
        ),
        (
            json!({"repoURL": "r", "kustomize": {"patches": [{"target": {"kinds": "x"}}]}}),
            "spec.source.kustomize.patches[0].target.kinds",
        ),
        (
            json!({"repoURL": "r", "directory": {"jsonnet": {"extVars": [{"name": "a", "codes": true}]}}}),
            "spec.source.directory.jsonnet.extVars[0].codes",
        ),
        (
            json!({"repoURL": "r", "plugin": {"parameters": [{"name": "a", "list": []}]}}),
            "spec.source.plugin.parameters[0].list",
        ),
        (
            json!({"repoURL": "r", "kustomize": {"replicas": [{"name": "a", "count": 1, "x": 1}]}}),
            "spec.source.kustomize.replicas[0].x",
        ),
    ] {
        let e = err(source);
        assert!(e.starts_with(&format!("{path}: unknown field")), "{e}");
    }
}

#[test]
fn wrong_types_are_refused_by_path() {
    for (source, want) in [
        (
            json!("x"),
            "spec.source: expected an object, found a string",
        ),
        (
            json!({"repoURL": 1}),
            "spec.source.repoURL: expected a string, found a number",
        ),
        (
            json!({"repoURL": "r", "helm": {"skipCrds": "true"}}),
            "spec.source.helm.skipCrds: expected a boolean, found a string",
        ),
        (
            json!({"repoURL": "r", "helm": {"valuesObject": "a: 1"}}),
            "spec.source.helm.valuesObject: expected an object, found a string",
        ),
        (
            json!({"repoURL": "r", "kustomize": {"images": ["a", 2]}}),
            "spec.source.kustomize.images[1]: expected a string, found a number",
        ),
        (
            json!({"repoURL": "r", "kustomize": {"commonLabels": {"a": true}}}),
            "spec.source.kustomize.commonLabels.a: expected a string, found a boolean",
        ),
        (
            json!({"repoURL": "r", "kustomize": {"replicas": [{"name": "a", "count": 3000000000u64}]}}),
            "spec.source.kustomize.replicas[0].count: 3000000000 is not a 32-bit integer",
        ),
        (
            json!({"repoURL": "r", "kustomize": {"replicas": [{"name": "a", "count": 1.5}]}}),
            "spec.source.kustomize.replicas[0].count: 1.5 is not a 32-bit integer",
        ),
    ] {
        assert_eq!(err(source), want);
    }
}

#[test]
fn null_is_absent_and_absent_sub_objects_stay_absent() {
    let s = application_source(
        "spec.source",
        &json!({"repoURL": "r", "path": null, "helm": {"valuesObject": null}}),
    )
    .unwrap();
    assert_eq!(s.path, "");
    let helm = s.helm.unwrap();
    assert!(helm.values_object.is_none());
    assert!(s.kustomize.is_none() && s.directory.is_none() && s.plugin.is_none());
}

#[test]
fn values_object_is_raw_json() {
    let s = application_source(
        "spec.source",
        &json!({"repoURL": "r", "helm": {"valuesObject": {"b": [1, {"c": null}], "a": "x"}}}),
    )
    .unwrap();
    let raw = s.helm.unwrap().values_object.unwrap().raw;
    let back: Value = serde_json::from_slice(&raw).unwrap();
    assert_eq!(back, json!({"b": [1, {"c": null}], "a": "x"}));
}
