//! Fields a field manager owns, read from `metadata.managedFields` (`FieldsV1`: `f:<field>`,
//! `k:<merge key JSON>` for an element of a keyed list, `v:<value>` for a set element, `.`
//! for the node itself), removed from an object.

use serde_json::Value;

/// Removes from `value` every field that an entry of `managed_fields` (a live object's
/// `metadata.managedFields`) gives to one of `managers`, whatever its operation or
/// subresource (an HPA's `spec.replicas` is its manager's through the `scale` subresource).
/// A field owned by one of them is removed as a leaf: a map or list it descends into stays,
/// less the owned fields, and a map named as a leaf stays whole (its fields are compared
/// one by one, as Argo CD removes only the leaves that differ).
pub(crate) fn remove_owned(value: &mut Value, managed_fields: &Value, managers: &[String]) {
    for entry in managed_fields.as_array().into_iter().flatten() {
        let trusted = entry
            .get("manager")
            .and_then(Value::as_str)
            .is_some_and(|m| managers.iter().any(|t| t == m));
        if let (true, Some(fields)) = (trusted, entry.get("fieldsV1")) {
            remove_fields(value, fields);
        }
    }
}

/// Whether a `FieldsV1` node names only itself (`{}` or `{".": {}}`): a leaf of the set.
fn is_leaf(node: &Value) -> bool {
    node.as_object().is_none_or(|m| m.keys().all(|k| k == "."))
}

fn remove_fields(value: &mut Value, node: &Value) {
    let Some(entries) = node.as_object() else {
        return;
    };
    for (entry, child) in entries {
        if let Some(field) = entry.strip_prefix("f:") {
            let Some(map) = value.as_object_mut() else {
                continue;
            };
            if is_leaf(child) {
                // A map is compared field by field (Argo CD removes only differing leaves):
                // owning a map as a whole leaves its fields compared.
                if !map.get(field).is_some_and(Value::is_object) {
                    map.remove(field);
                }
            } else if let Some(inner) = map.get_mut(field) {
                remove_fields(inner, child);
            }
        } else if let Some(key) = entry.strip_prefix("k:") {
            let (Ok(Value::Object(key)), Some(items)) =
                (serde_json::from_str::<Value>(key), value.as_array_mut())
            else {
                continue;
            };
            let matches = |e: &Value| key.iter().all(|(k, v)| e.get(k) == Some(v));
            if is_leaf(child) {
                items.retain(|e| !matches(e));
            } else if let Some(element) = items.iter_mut().find(|e| matches(e)) {
                remove_fields(element, child);
            }
        } else if let Some(set_value) = entry.strip_prefix("v:")
            && let (Ok(v), Some(items)) = (
                serde_json::from_str::<Value>(set_value),
                value.as_array_mut(),
            )
        {
            items.retain(|e| *e != v);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::remove_owned;

    #[test]
    fn removes_the_trusted_managers_fields_only() {
        let managed = json!([
            {"manager": "kube-controller-manager", "operation": "Update", "subresource": "scale",
             "fieldsV1": {"f:spec": {"f:replicas": {}}}},
            {"manager": "fleetshard", "operation": "Apply",
             "fieldsV1": {"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
                 "k:{\"name\":\"web\"}": {".": {}, "f:image": {}}}}}}}},
            {"manager": "injector", "operation": "Update",
             "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": {
                 "k:{\"name\":\"sidecar\"}": {".": {}}, "k:{\"name\":\"web\"}": {"f:env": {}}}}}},
                          "f:metadata": {"f:finalizers": {"v:\"injected\"": {}}}}}
        ]);
        let obj = json!({"metadata": {"finalizers": ["keep", "injected"]},
            "spec": {"replicas": 7, "template": {"spec": {"containers": [
                {"name": "web", "image": "a", "env": [{"name": "X"}]}, {"name": "sidecar", "image": "s"}]}}}});
        let mut hpa = obj.clone();
        remove_owned(&mut hpa, &managed, &["kube-controller-manager".into()]);
        assert_eq!(hpa["spec"].get("replicas"), None);
        assert_eq!(hpa["spec"]["template"], obj["spec"]["template"]);
        let mut injected = obj.clone();
        remove_owned(&mut injected, &managed, &["injector".into()]);
        assert_eq!(injected["metadata"]["finalizers"], json!(["keep"]));
        assert_eq!(
            injected["spec"]["template"]["spec"]["containers"],
            json!([{"name": "web", "image": "a"}])
        );
        assert_eq!(injected["spec"]["replicas"], 7);
        // A map owned as a leaf (`f:spec: {}`) is not removed whole.
        let whole = json!([{"manager": "m", "fieldsV1": {"f:spec": {}}}]);
        let mut kept = obj.clone();
        remove_owned(&mut kept, &whole, &["m".into()]);
        assert_eq!(kept, obj);
    }
}
