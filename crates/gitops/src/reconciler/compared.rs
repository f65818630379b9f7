//! `status.sync.comparedTo`: what a refresh compared the cluster against — the source (or
//! a multi-source app's sources), the destination and `ignoreDifferences`, each as the
//! Application spells it, with Argo CD's JSON names — and the merge patch that replaces
//! the recorded one.

use serde_json::{Map, Value, json};

use super::AppTarget;

/// Argo CD's `ApplicationSource` fields, and those of its option objects: what a merge
/// patch sets to null when the new source leaves them out (a merge patch merges objects,
/// so a field removed from the spec would otherwise stay in `comparedTo`).
const SOURCE_FIELDS: [(&str, &[&str]); 5] = [
    (
        "",
        &[
            "repoURL",
            "path",
            "targetRevision",
            "helm",
            "kustomize",
            "directory",
            "plugin",
            "chart",
            "ref",
            "name",
        ],
    ),
    (
        "helm",
        &[
            "valueFiles",
            "parameters",
            "releaseName",
            "values",
            "fileParameters",
            "version",
            "passCredentials",
            "ignoreMissingValueFiles",
            "skipCrds",
            "valuesObject",
            "namespace",
            "kubeVersion",
            "apiVersions",
            "skipTests",
            "skipSchemaValidation",
        ],
    ),
    (
        "kustomize",
        &[
            "namePrefix",
            "nameSuffix",
            "images",
            "commonLabels",
            "version",
            "commonAnnotations",
            "forceCommonLabels",
            "forceCommonAnnotations",
            "namespace",
            "commonAnnotationsEnvsubst",
            "replicas",
            "patches",
            "components",
            "ignoreMissingComponents",
            "labelWithoutSelector",
            "kubeVersion",
            "apiVersions",
            "labelIncludeTemplates",
        ],
    ),
    ("directory", &["recurse", "jsonnet", "exclude", "include"]),
    ("plugin", &["name", "env", "parameters"]),
];

/// The fields of `comparedTo` and of its destination.
const COMPARED_FIELDS: [&str; 4] = ["source", "sources", "destination", "ignoreDifferences"];
const DESTINATION_FIELDS: [&str; 3] = ["server", "namespace", "name"];

/// The `comparedTo` of a refresh of `target`: `source` for a single-source app, `sources`
/// for a multi-source one, the destination as written, and `ignoreDifferences` when set.
pub(super) fn compared_to(target: &AppTarget) -> Value {
    let mut compared = Map::new();
    let raw = |s: &fleetshard_manifest::AppSource| {
        if s.raw.is_object() {
            s.raw.clone()
        } else {
            json!({"repoURL": s.repo_url})
        }
    };
    if target.spec.sources.is_empty() {
        compared.insert("source".to_owned(), raw(&target.spec.source));
    } else {
        let sources = target.spec.sources.iter().map(raw).collect();
        compared.insert("sources".to_owned(), Value::Array(sources));
    }
    let d = &target.app.destination;
    let mut destination = Map::new();
    for (field, value) in [
        ("server", &d.server),
        ("namespace", &d.namespace),
        ("name", &d.name),
    ] {
        if let Some(v) = value.as_deref().filter(|v| !v.is_empty()) {
            destination.insert(field.to_owned(), Value::String(v.to_owned()));
        }
    }
    compared.insert("destination".to_owned(), Value::Object(destination));
    if !target.spec.ignore_differences.is_empty() {
        compared.insert(
            "ignoreDifferences".to_owned(),
            serde_json::to_value(&target.spec.ignore_differences).unwrap_or(Value::Null),
        );
    }
    Value::Object(compared)
}

/// `compared` as a merge patch that replaces the recorded `comparedTo`: every field of
/// Argo CD's types it leaves out (to two levels in a source) is set to null, and, when the
/// recorded one is known (`before`), every key of it that `compared` lacks, at any depth
/// (inside a source's free-form maps: `helm.valuesObject`, `kustomize.commonLabels`, …).
pub(super) fn replacing(compared: &Value, before: Option<&Value>) -> Value {
    let mut v = compared.clone();
    if let Some(before) = before {
        null_removed(&mut v, before);
    }
    null_absent(&mut v, &COMPARED_FIELDS);
    null_absent(&mut v["destination"], &DESTINATION_FIELDS);
    if v["source"].is_object() {
        for (option, fields) in SOURCE_FIELDS {
            let at = if option.is_empty() {
                &mut v["source"]
            } else {
                &mut v["source"][option]
            };
            if at.is_object() {
                null_absent(at, fields);
            }
        }
    }
    v
}

/// Sets to null, in `now`, every key of `before` that `now` lacks, recursing where both
/// hold an object (a merge patch merges objects and replaces everything else).
fn null_removed(now: &mut Value, before: &Value) {
    let (Some(now), Some(before)) = (now.as_object_mut(), before.as_object()) else {
        return;
    };
    for (key, was) in before {
        match now.get_mut(key) {
            Some(is) => null_removed(is, was),
            None => {
                now.insert(key.clone(), Value::Null);
            }
        }
    }
}

fn null_absent(v: &mut Value, keys: &[&str]) {
    if let Some(map) = v.as_object_mut() {
        for key in keys {
            map.entry(*key).or_insert(Value::Null);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::replacing;

    /// A field removed from the spec is removed from `comparedTo` by the merge patch, at
    /// the top of the source and in its option objects; lists are replaced whole anyway.
    #[test]
    fn the_patch_removes_what_the_spec_no_longer_sets() {
        let compared = json!({
            "source": {"repoURL": "https://git.example/a", "path": "a",
                       "helm": {"releaseName": "r"}},
            "destination": {"server": "https://k"},
        });
        let patch = replacing(&compared, None);
        assert_eq!(patch["source"]["targetRevision"], json!(null));
        assert_eq!(patch["source"]["kustomize"], json!(null));
        assert_eq!(patch["source"]["helm"]["values"], json!(null));
        assert_eq!(patch["source"]["helm"]["releaseName"], "r");
        assert_eq!(patch["sources"], json!(null));
        assert_eq!(patch["ignoreDifferences"], json!(null));
        assert_eq!(patch["destination"]["name"], json!(null));
        assert_eq!(patch["destination"]["server"], "https://k");
        let mut recorded = json!({"source": {"repoURL": "https://git.example/a", "path": "b",
            "targetRevision": "v1", "helm": {"releaseName": "r", "values": "x: 1"}},
            "destination": {"name": "prod", "namespace": "n"},
            "ignoreDifferences": [{"kind": "Deployment"}]});
        fleetshard_testsupport::kube_api::merge_patch(&mut recorded, &patch);
        assert_eq!(recorded, compared);
    }

    /// Keys removed inside a source's free-form maps are removed too when the recorded
    /// `comparedTo` is known.
    #[test]
    fn keys_removed_at_any_depth_go_when_the_recorded_one_is_known() {
        let before = json!({"source": {"repoURL": "r", "helm": {"valuesObject":
            {"a": {"x": 1, "y": 2}, "b": [1]}}, "kustomize": {"commonLabels": {"team": "t"}}}});
        let compared = json!({"source": {"repoURL": "r", "helm": {"valuesObject":
            {"a": {"x": 1}}}, "kustomize": {"commonLabels": {}}}});
        let mut recorded = before.clone();
        fleetshard_testsupport::kube_api::merge_patch(&mut recorded, &replacing(&compared, None));
        assert_ne!(recorded, compared, "without it, the map's old keys stay");
        let mut recorded = before.clone();
        let patch = replacing(&compared, Some(&before));
        fleetshard_testsupport::kube_api::merge_patch(&mut recorded, &patch);
        assert_eq!(recorded, compared);
    }
}
