//! Taking over an object another applier managed, so that a field removed from Git is
//! removed live (Argo CD's client-side-apply → server-side-apply migration idea).
//!
//! Server-side apply removes a field only when the applying manager owned it and omits it
//! now. An object last applied by `kubectl apply` (client-side: the manager
//! `kubectl-client-side-apply` and the `kubectl.kubernetes.io/last-applied-configuration`
//! annotation) or by Argo CD's own server-side apply (manager `argocd-controller`) is owned
//! by them, so fleetshard's apply alone would leave every field Git dropped. Before the
//! first apply, the fields those managers own (their `managedFields` entries, plus the
//! fields of the last-applied configuration, which a server that tracks no `Update`
//! managers still shows) are handed to fleetshard's `Apply` entry and their entries and the
//! annotation removed, in one merge patch guarded by the object's `resourceVersion`. The
//! apply that follows then owns exactly what the old appliers owned and removes what Git no
//! longer has.
//!
//! Limit: a last-applied configuration gives whole lists, not their elements, so an
//! element of a keyed list removed from Git is handed over only through a manager entry.

use serde_json::{Map, Value, json};

use crate::compare::{FIELD_MANAGER, LAST_APPLIED};

/// The managers whose fields fleetshard takes over: kubectl's client-side apply and Argo
/// CD's server-side apply.
pub const LEGACY_MANAGERS: [&str; 2] = ["kubectl-client-side-apply", "argocd-controller"];

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
    for e in entries.iter().filter(|e| is_legacy(e) || is_ours(e)) {
        merge(&mut fields, e.get("fieldsV1").unwrap_or(&Value::Null));
    }
    if let Some(Ok(applied)) = last_applied.map(serde_json::from_str::<Value>) {
        merge(&mut fields, &fields_of_applied(&applied));
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
}
