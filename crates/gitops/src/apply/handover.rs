//! Taking over an object another applier managed, so that a field removed from Git is
//! removed live — and only such a field (Argo CD's client-side-apply → server-side-apply
//! migration idea, with `kubectl apply`'s three-way merge as the rule).
//!
//! Server-side apply removes a field only when the applying manager owned it and omits it
//! now. Before the first apply, what the earlier appliers would have removed is handed to
//! fleetshard's `Apply` entry (one merge patch guarded by the object's `resourceVersion`),
//! and the annotation and their entries removed:
//! - of client-side `kubectl apply`, the fields of its
//!   `kubectl.kubernetes.io/last-applied-configuration` annotation: those are the fields
//!   its three-way merge deletes when the next manifest drops them. The manager
//!   `kubectl-client-side-apply`'s entry only refines them (an element of a keyed list
//!   rather than the whole list); a field it owns that the annotation does not list (set
//!   by a patch, or before an apply that no longer names it) is not handed over, so a
//!   manifest that does not set it leaves it as `kubectl apply` would;
//! - of Argo CD's own server-side apply (manager `argocd-controller`), its whole entry, as
//!   Argo CD's next apply would own it.
//!
//! Limit: from the annotation alone (no manager entry), an element of a keyed list is
//! handed over as the whole list.

use serde_json::{Map, Value, json};

use crate::compare::{FIELD_MANAGER, LAST_APPLIED};

/// The managers whose fields fleetshard takes over: kubectl's client-side apply (within
/// its last-applied configuration) and Argo CD's server-side apply.
pub const LEGACY_MANAGERS: [&str; 2] = [KUBECTL_CLIENT_SIDE_APPLY, ARGOCD_CONTROLLER];

/// The manager of client-side `kubectl apply`.
const KUBECTL_CLIENT_SIDE_APPLY: &str = "kubectl-client-side-apply";

/// The manager of Argo CD's server-side apply.
const ARGOCD_CONTROLLER: &str = "argocd-controller";

/// The merge patch that hands the legacy appliers' fields of `live` to fleetshard, or
/// `None` when there is nothing to hand over. It carries the object's `resourceVersion`,
/// which the API server checks as a precondition.
pub(crate) fn handover_patch(live: &Value) -> Option<Value> {
    let entries: Vec<Value> = live
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let main = |e: &Value| {
        e.get("subresource")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
    };
    let manager = |e: &Value| {
        e.get("manager")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let is_legacy = |e: &Value| main(e) && LEGACY_MANAGERS.contains(&manager(e).as_str());
    let is_ours = |e: &Value| {
        main(e)
            && manager(e) == FIELD_MANAGER
            && e.get("operation").and_then(Value::as_str) == Some("Apply")
    };
    let last_applied = live
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .and_then(Value::as_str);
    if last_applied.is_none() && !entries.iter().any(is_legacy) {
        return None;
    }
    let mut fields = Value::Object(Map::new());
    let kubectl = |e: &&Value| is_legacy(e) && manager(e) == KUBECTL_CLIENT_SIDE_APPLY;
    for e in entries
        .iter()
        .filter(|e| (is_legacy(e) && !kubectl(e)) || is_ours(e))
    {
        merge(&mut fields, e.get("fieldsV1").unwrap_or(&Value::Null));
    }
    if let Some(Ok(applied)) = last_applied.map(serde_json::from_str::<Value>) {
        let applied = fields_of_applied(&applied);
        let mut kubectl_fields = Value::Object(Map::new());
        for e in entries.iter().filter(kubectl) {
            merge(
                &mut kubectl_fields,
                e.get("fieldsV1").unwrap_or(&Value::Null),
            );
        }
        merge(&mut fields, &within(&applied, &kubectl_fields));
    }
    let api_version = live.get("apiVersion").cloned().unwrap_or(Value::Null);
    let mut kept: Vec<Value> = entries
        .iter()
        .filter(|e| !is_legacy(e) && !is_ours(e))
        .cloned()
        .collect();
    kept.push(json!({
        "manager": FIELD_MANAGER,
        "operation": "Apply",
        "apiVersion": api_version,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }));
    let rv = live
        .pointer("/metadata/resourceVersion")
        .cloned()
        .unwrap_or(Value::Null);
    let mut meta = json!({"resourceVersion": rv, "managedFields": kept});
    if last_applied.is_some() {
        meta["annotations"] = json!({ LAST_APPLIED: null });
    }
    Some(json!({ "metadata": meta }))
}

/// Deep union of two `FieldsV1` trees.
fn merge(into: &mut Value, from: &Value) {
    let (Value::Object(a), Value::Object(b)) = (into, from) else {
        return;
    };
    for (k, v) in b {
        merge(a.entry(k.clone()).or_insert_with(|| json!({})), v);
    }
}

/// The fields of `applied` (a last-applied configuration's tree), each refined by
/// `owned` (the `kubectl-client-side-apply` entry) where `applied` owns a field whole and
/// `owned` names its parts (the elements of a keyed list); nothing of `owned` outside
/// `applied`.
fn within(applied: &Value, owned: &Value) -> Value {
    let Value::Object(a) = applied else {
        return applied.clone();
    };
    if a.is_empty() {
        // Owned whole by the annotation: the entry's detail, if it has some.
        return match owned {
            Value::Object(o) if !o.is_empty() => owned.clone(),
            _ => applied.clone(),
        };
    }
    let empty = Value::Object(Map::new());
    Value::Object(
        a.iter()
            .map(|(k, v)| (k.clone(), within(v, owned.get(k).unwrap_or(&empty))))
            .collect(),
    )
}

/// The `FieldsV1` of a last-applied configuration: every field it sets (maps walked, lists
/// and scalars owned whole); of `metadata` only labels and annotations, no `status`.
fn fields_of_applied(applied: &Value) -> Value {
    fn walk(v: &Value) -> Value {
        match v {
            Value::Object(m) if !m.is_empty() => {
                Value::Object(m.iter().map(|(k, x)| (format!("f:{k}"), walk(x))).collect())
            }
            _ => json!({}),
        }
    }
    let mut out = Map::new();
    let Some(map) = applied.as_object() else {
        return Value::Object(out);
    };
    for (k, v) in map {
        match k.as_str() {
            "apiVersion" | "kind" | "status" => {}
            "metadata" => {
                let mut meta = Map::new();
                for sub in ["labels", "annotations"] {
                    if let Some(x) = v.get(sub) {
                        meta.insert(format!("f:{sub}"), walk(x));
                    }
                }
                if !meta.is_empty() {
                    out.insert("f:metadata".into(), Value::Object(meta));
                }
            }
            _ => {
                out.insert(format!("f:{k}"), walk(v));
            }
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_to_hand_over_without_a_legacy_applier() {
        let live = json!({"metadata": {"resourceVersion": "3", "managedFields": [
            {"manager": "fleetshard", "operation": "Apply", "fieldsV1": {"f:data": {}}},
            {"manager": "kube-controller-manager", "operation": "Update", "fieldsV1": {"f:x": {}}},
        ]}});
        assert_eq!(handover_patch(&live), None);
    }

    #[test]
    fn legacy_fields_and_the_last_applied_configuration_become_ours() {
        let applied = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "s", "labels": {"a": "1", "b": "2"}},
            "data": {"x": "1"}});
        let live = json!({"apiVersion": "v1", "metadata": {
        "resourceVersion": "7",
        "annotations": {LAST_APPLIED: applied.to_string()},
        "managedFields": [
            {"manager": "argocd-controller", "operation": "Apply",
             "fieldsV1": {"f:data": {"f:y": {}}}},
            {"manager": "fleetshard", "operation": "Apply", "fieldsV1": {"f:data": {"f:z": {}}}},
            {"manager": "argocd-controller", "operation": "Update", "subresource": "status",
             "fieldsV1": {"f:status": {}}},
        ]}});
        let patch = handover_patch(&live).unwrap();
        let meta = &patch["metadata"];
        assert_eq!(meta["resourceVersion"], "7");
        let entries = meta["managedFields"].as_array().unwrap();
        assert_eq!(
            entries.len(),
            2,
            "the status entry stays; one entry of ours"
        );
        let ours = &entries[1];
        assert_eq!(ours["manager"], "fleetshard");
        assert_eq!(
            ours["fieldsV1"],
            json!({"f:data": {"f:x": {}, "f:y": {}, "f:z": {}},
                   "f:metadata": {"f:labels": {"f:a": {}, "f:b": {}}}})
        );
        assert_eq!(meta["annotations"], json!({LAST_APPLIED: null}));
    }

    /// kubectl's manager entry refines the last-applied configuration (a list's elements)
    /// but hands over nothing the configuration does not name.
    #[test]
    fn kubectls_fields_outside_its_last_applied_configuration_stay_its_own() {
        let applied = json!({"metadata": {"labels": {"a": "1"}},
            "spec": {"ports": [{"port": 80}]}});
        let live = json!({"metadata": {
            "resourceVersion": "2",
            "annotations": {LAST_APPLIED: applied.to_string()},
            "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update",
                "fieldsV1": {"f:metadata": {"f:labels": {"f:a": {}, "f:b": {}}},
                    "f:spec": {"f:ports": {"k:{\"port\":80}": {"f:port": {}}},
                        "f:other": {}}}}]}});
        let patch = handover_patch(&live).unwrap();
        let entries = patch["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(entries.len(), 1, "kubectl's entry goes: {entries:?}");
        assert_eq!(
            entries[0]["fieldsV1"],
            json!({"f:metadata": {"f:labels": {"f:a": {}}},
                "f:spec": {"f:ports": {"k:{\"port\":80}": {"f:port": {}}}}})
        );
    }
}
