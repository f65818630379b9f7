//! What a cached live object keeps: everything the comparison, health, prune guards and
//! the handover of legacy appliers' fields read, and nothing else of `managedFields`.
//!
//! Of `metadata.managedFields` the comparison reads only the entries of fleetshard's own
//! field manager (operation `Apply`, main resource: `compare/owned.rs`); the handover
//! (`apply/handover.rs`) reads every entry, but only of an object that has an entry of a
//! legacy applier (`kubectl-client-side-apply`, `argocd-controller`) or the
//! `last-applied-configuration` annotation — it rewrites the whole list then, so such an
//! object is kept whole. Every other object keeps only fleetshard's `Apply` entries: the
//! entries of controllers, kubelets and `kubectl create` (often larger than the object's
//! own fields, e.g. a Deployment's status) are dropped — except those of the managers an
//! application's `ignoreDifferences` trusts (`managedFieldsManagers`, [`KeptManagers`]),
//! whose entries the comparison reads. No other field of the object is touched.
//!
//! Each entry kept has its `fieldsV1` kept as its compact JSON text, not as a tree: a tree
//! of `serde_json` maps costs a B-tree leaf (632 bytes) per map, so the few nested maps of
//! one entry took about 40 % of a small cached object. `fleetshard_diff`'s readers of
//! `managedFields` take either form; [`as_served`] gives the object back as served. An
//! object kept whole for a handover keeps its entries as trees (the handover rewrites
//! them).

use serde_json::Value;

use crate::apply::LEGACY_MANAGERS;
use crate::compare::{FIELD_MANAGER, LAST_APPLIED};

/// The field managers whose `managedFields` entries a cluster's caches keep beside
/// fleetshard's own (shared by the caches and their watch tasks).
pub(crate) type KeptManagers = std::sync::Arc<std::sync::Mutex<std::sync::Arc<Vec<String>>>>;

/// Drops from `obj` what no reader of the cache needs (see the module's documentation),
/// keeping the entries of the managers in `kept`.
pub(crate) fn slim(obj: &mut Value, kept: &[String]) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let last_applied = meta
        .get("annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .is_some();
    let Some(Value::Array(entries)) = meta.get_mut("managedFields") else {
        return;
    };
    let field = |e: &Value, f: &str| e.get(f).and_then(Value::as_str).map(str::to_owned);
    let main = |e: &Value| field(e, "subresource").is_none_or(|s| s.is_empty());
    let legacy = entries.iter().any(|e| {
        main(e) && field(e, "manager").is_some_and(|m| LEGACY_MANAGERS.contains(&m.as_str()))
    });
    if last_applied || legacy {
        return;
    }
    entries.retain(|e| {
        let manager = field(e, "manager");
        (main(e)
            && manager.as_deref() == Some(FIELD_MANAGER)
            && field(e, "operation").as_deref() == Some("Apply"))
            || manager.is_some_and(|m| kept.contains(&m))
    });
    if entries.is_empty() {
        meta.remove("managedFields");
        return;
    }
    for entry in entries.iter_mut() {
        if let Some(fields) = entry.get_mut("fieldsV1")
            && fields.is_object()
        {
            *fields = Value::String(fields.to_string());
        }
    }
}

/// A cached object as the API server served it (less what [`slim`] dropped): each
/// `managedFields` entry's `fieldsV1` as the tree it was, for readers outside this crate's
/// comparison (Argo CD's app-state cache shows live objects). The same `Arc` when no entry
/// was kept as text.
pub(crate) fn as_served(obj: &std::sync::Arc<Value>) -> std::sync::Arc<Value> {
    let entries = || {
        obj.pointer("/metadata/managedFields")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
    };
    if !entries().any(|e| e.get("fieldsV1").is_some_and(Value::is_string)) {
        return std::sync::Arc::clone(obj);
    }
    let mut out = Value::clone(obj);
    let entries = out
        .get_mut("metadata")
        .and_then(|m| m.get_mut("managedFields"))
        .and_then(Value::as_array_mut);
    for entry in entries.into_iter().flatten() {
        if let Some(fields) = entry.get_mut("fieldsV1")
            && let Some(text) = fields.as_str()
            && let Ok(tree) = serde_json::from_str::<Value>(text)
        {
            *fields = tree;
        }
    }
    std::sync::Arc::new(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::apply::handover_patch;
    use crate::compare::{CompareOptions, compare_app};

    fn entry(manager: &str, operation: &str, sub: &str, fields: Value) -> Value {
        let mut e = json!({"manager": manager, "operation": operation,
            "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": fields});
        if !sub.is_empty() {
            e["subresource"] = json!(sub);
        }
        e
    }

    fn cm(name: &str, data: Value, managed: Vec<Value>, annotations: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": "7",
                "annotations": annotations, "managedFields": managed},
            "data": data})
    }

    /// Live objects with every combination of records the readers look at.
    fn cases() -> Vec<(Value, Value)> {
        let tracking = |name: &str| json!({crate::compare::TRACKING_ANNOTATION: format!("app:/ConfigMap:ns/{name}")});
        let ours = |f: Value| entry(FIELD_MANAGER, "Apply", "", f);
        let data = json!({"f:data": {"f:a": {}, "f:b": {}}});
        let desired = |name: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "ns"}, "data": {"a": "1"}})
        };
        vec![
            // Ours plus a controller's, a status entry of ours and `kubectl create`'s.
            (
                cm(
                    "plain",
                    json!({"a": "1", "b": "2"}),
                    vec![
                        ours(data.clone()),
                        entry(
                            "kube-controller-manager",
                            "Update",
                            "",
                            json!({"f:data": {"f:c": {}}}),
                        ),
                        entry(FIELD_MANAGER, "Apply", "status", json!({"f:status": {}})),
                        entry("kubectl-create", "Update", "", json!({"f:data": {}})),
                    ],
                    tracking("plain"),
                ),
                desired("plain"),
            ),
            // A legacy applier's entry: the handover rewrites the whole list.
            (
                cm(
                    "legacy",
                    json!({"a": "1", "b": "2"}),
                    vec![
                        entry("argocd-controller", "Apply", "", data.clone()),
                        entry("kube-controller-manager", "Update", "", json!({"f:x": {}})),
                    ],
                    tracking("legacy"),
                ),
                desired("legacy"),
            ),
            // kubectl's client-side apply record.
            (
                cm(
                    "applied",
                    json!({"a": "1", "b": "2"}),
                    vec![entry("helm", "Update", "", json!({"f:data": {}}))],
                    json!({LAST_APPLIED: r#"{"data":{"a":"1","b":"2"}}"#}),
                ),
                desired("applied"),
            ),
            // Nobody's fields we know: an object some app names but never applied.
            (
                cm(
                    "foreign",
                    json!({"a": "1", "b": "2"}),
                    vec![entry("kubectl-create", "Update", "", data.clone())],
                    json!({}),
                ),
                desired("foreign"),
            ),
        ]
    }

    #[test]
    fn slimming_changes_no_comparison_and_no_handover() {
        let opts = CompareOptions::new("app");
        for (live, desired) in cases() {
            let mut slimmed = live.clone();
            slim(&mut slimmed, &[]);
            let whole = compare_app(std::slice::from_ref(&desired), &[&live], &opts).unwrap();
            let slim = compare_app(std::slice::from_ref(&desired), &[&slimmed], &opts).unwrap();
            assert_eq!(whole, slim, "{}", live["metadata"]["name"]);
            assert_eq!(handover_patch(&live), handover_patch(&slimmed));
        }
    }

    #[test]
    fn only_our_apply_entries_are_kept_when_no_handover_needs_the_rest() {
        let managers = |v: &Value| -> Vec<String> {
            v.pointer("/metadata/managedFields")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|e| {
                    format!(
                        "{}/{}",
                        e["manager"].as_str().unwrap(),
                        e["subresource"].as_str().unwrap_or("")
                    )
                })
                .collect()
        };
        let kept: Vec<Vec<String>> = cases()
            .into_iter()
            .map(|(mut live, _)| {
                slim(&mut live, &[]);
                managers(&live)
            })
            .collect();
        assert_eq!(kept[0], ["fleetshard/"]);
        assert_eq!(kept[1], ["argocd-controller/", "kube-controller-manager/"]);
        assert_eq!(kept[2], ["helm/"]);
        assert!(kept[3].is_empty());
        // Nothing but managedFields changes.
        let (mut live, _) = cases().remove(0);
        let mut before = live.clone();
        slim(&mut live, &[]);
        before["metadata"]["managedFields"] = live["metadata"]["managedFields"].clone();
        assert_eq!(before, live);
        // Its kept entries' fields are kept as text, and given back as trees.
        let (whole, _) = cases().remove(0);
        let text = live.pointer("/metadata/managedFields/0/fieldsV1").unwrap();
        assert!(text.is_string(), "{text}");
        let served = as_served(&std::sync::Arc::new(live.clone()));
        assert_eq!(
            served.pointer("/metadata/managedFields/0"),
            whole.pointer("/metadata/managedFields/0")
        );
        // An object kept whole keeps its trees.
        let (mut legacy, _) = cases().remove(1);
        let before = legacy.clone();
        slim(&mut legacy, &[]);
        assert_eq!(legacy, before);
        // A trusted manager's entries stay, whatever their operation or subresource.
        let (mut live, _) = cases().remove(0);
        slim(&mut live, &["kube-controller-manager".to_owned()]);
        assert_eq!(managers(&live), ["fleetshard/", "kube-controller-manager/"]);
    }
}
