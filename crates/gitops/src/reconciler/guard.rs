//! What stops a sync before it writes: per-object annotations fleetshard does not
//! implement (refused, naming the object and the annotation, from the allow-list in
//! [`fleetshard_manifest::implemented`]), the annotations that protect a
//! live object from pruning.

use fleetshard_manifest::implemented::{
    APP_SYNC_OPTIONS, CONTROLLED_PREFIXES, OBJECT_ANNOTATIONS, OBJECT_COMPARE_OPTIONS,
};
use serde_json::Value;

use crate::compare::COMPARE_OPTIONS_ANNOTATION;

/// Argo CD's per-object sync options annotation.
pub(crate) const SYNC_OPTIONS: &str = "argocd.argoproj.io/sync-options";
/// Helm's annotation that keeps an object when its release is removed.
pub(crate) const RESOURCE_POLICY: &str = "helm.sh/resource-policy";

fn annotations(object: &Value) -> impl Iterator<Item = (&String, &str)> {
    object
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| (k, v.as_str().unwrap_or_default()))
}

/// The object's annotations as strings (the sync engine's view; a value that is no
/// string reads as empty).
pub(crate) fn annotation_map(object: &Value) -> fleetshard_sync::Annotations {
    annotations(object)
        .map(|(k, v)| (k.clone(), v.to_owned()))
        .collect()
}

/// Argo CD's sync options of an annotation value: comma-separated, trimmed.
fn options(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim).filter(|o| !o.is_empty())
}

/// Why the manifest `object` (shown as `what`) cannot be synced by fleetshard: an
/// annotation under Argo CD's or Helm's prefix, or a sync option, it does not implement.
pub(crate) fn object_refusal(object: &Value, what: &str) -> Option<String> {
    for (key, value) in annotations(object) {
        if !CONTROLLED_PREFIXES.iter().any(|p| key.starts_with(p)) {
            continue;
        }
        if !OBJECT_ANNOTATIONS.contains(&key.as_str()) {
            return Some(format!(
                "{what}: annotation {key} is not implemented by fleetshard; nothing is synced"
            ));
        }
        if key == RESOURCE_POLICY && value != "keep" {
            return Some(format!(
                "{what}: annotation {key}: {value:?} is not implemented by fleetshard (only \
                 \"keep\"); nothing is synced"
            ));
        }
        if key == COMPARE_OPTIONS_ANNOTATION
            && let Some(bad) = options(value).find(|o| !OBJECT_COMPARE_OPTIONS.contains(o))
        {
            return Some(format!(
                "{what}: annotation {key}: compare option {bad:?} is not implemented by \
                 fleetshard; nothing is synced"
            ));
        }
        if key == SYNC_OPTIONS
            && let Some(bad) = options(value).find(|o| !APP_SYNC_OPTIONS.contains(o))
        {
            return Some(format!(
                "{what}: annotation {key}: sync option {bad:?} is not implemented by \
                 fleetshard; nothing is synced"
            ));
        }
    }
    None
}

/// Why the live object must never be pruned (`None`: it may be): `Prune=false` or
/// `Delete=false` in its sync options, or Helm's `resource-policy: keep`.
pub(crate) fn keep_reason(live: &Value) -> Option<String> {
    for (key, value) in annotations(live) {
        if key == SYNC_OPTIONS
            && let Some(o) = options(value).find(|o| *o == "Prune=false" || *o == "Delete=false")
        {
            return Some(format!("ignored: {SYNC_OPTIONS}: {o}"));
        }
        if key == RESOURCE_POLICY && value.trim() == "keep" {
            return Some(format!("ignored: {RESOURCE_POLICY}: keep"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn with(annotations: Value) -> Value {
        json!({"metadata": {"name": "x", "annotations": annotations}})
    }

    #[test]
    fn unimplemented_annotations_are_refused_by_default() {
        for ok in [
            json!({"argocd.argoproj.io/sync-options": "Prune=false,ServerSideApply=true"}),
            json!({"helm.sh/resource-policy": "keep"}),
            json!({"example.com/anything": "x"}),
            json!({"argocd.argoproj.io/compare-options": "IgnoreExtraneous, ServerSideDiff=false"}),
            // Read on the Application only, ignored on a manifest (as Argo CD ignores them).
            json!({"argocd.argoproj.io/compare-options": "ServerSideDiff=true"}),
            json!({"argocd.argoproj.io/compare-options": "IncludeMutationWebhook=true"}),
            json!({"argocd.argoproj.io/ignore-healthcheck": "true"}),
        ] {
            assert_eq!(object_refusal(&with(ok.clone()), "o"), None, "{ok}");
        }
        for ok in [
            json!({"argocd.argoproj.io/sync-wave": "1"}),
            json!({"argocd.argoproj.io/hook": "PreSync", "argocd.argoproj.io/hook-delete-policy": "HookSucceeded"}),
            json!({"helm.sh/hook": "pre-install", "helm.sh/hook-weight": "-5"}),
            json!({"argocd.argoproj.io/sync-options": "Replace=true,Prune=confirm"}),
            json!({"argocd.argoproj.io/hook": "PreDelete"}),
            json!({"helm.sh/hook": "pre-delete"}),
        ] {
            assert_eq!(object_refusal(&with(ok.clone()), "o"), None, "{ok}");
        }
        for bad in [
            json!({"argocd.argoproj.io/sync-options": "ClientSideApplyMigration=false"}),
            json!({"argocd.argoproj.io/some-future-annotation": "x"}),
            json!({"argocd.argoproj.io/compare-options": "ServerSideDiff=maybe"}),
        ] {
            let why = object_refusal(&with(bad.clone()), "ConfigMap default/x").unwrap();
            assert!(why.starts_with("ConfigMap default/x: annotation "), "{why}");
        }
    }

    #[test]
    fn protected_objects_say_why() {
        let keep = |a: Value| keep_reason(&with(a));
        assert!(keep(json!({SYNC_OPTIONS: "Prune=false"})).is_some());
        assert!(keep(json!({SYNC_OPTIONS: "ServerSideApply=true, Delete=false"})).is_some());
        assert!(keep(json!({RESOURCE_POLICY: "keep"})).is_some());
        assert_eq!(keep(json!({SYNC_OPTIONS: "Prune=true"})), None);
        assert_eq!(keep_reason(&json!({"metadata": {}})), None);
    }
}
