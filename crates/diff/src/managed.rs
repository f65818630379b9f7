//! The one reader of `metadata.managedFields`: a parsed `FieldsV1` tree ([`FieldSet`]:
//! `f:<field>`, `k:<merge key JSON>` for an element of a keyed list, `v:<value>` for a set
//! element, `.` for the node itself), the entries of a live object chosen by manager
//! ([`FieldSet::of_entries`]), and the removal of the fields a set names from an object.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// A parsed `FieldsV1` tree: the fields, keyed list elements and set elements it lists.
/// Unknown or malformed entries are skipped (a record that cannot be read names fewer
/// fields, never other ones).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct FieldSet {
    fields: BTreeMap<String, FieldSet>,
    keyed: Vec<(Map<String, Value>, FieldSet)>,
    values: Vec<Value>,
}

impl FieldSet {
    /// Parses one `FieldsV1` JSON object.
    pub fn parse(node: &Value) -> FieldSet {
        let mut set = FieldSet::default();
        set.merge(node);
        set
    }

    /// The union of the `fieldsV1` of the entries of `managed_fields` (a live object's
    /// `metadata.managedFields`) that `chosen` accepts; `None` when it accepts none.
    pub fn of_entries(
        managed_fields: &Value,
        mut chosen: impl FnMut(&ManagedEntry<'_>) -> bool,
    ) -> Option<FieldSet> {
        let mut union: Option<FieldSet> = None;
        for entry in ManagedEntry::all(managed_fields) {
            if let (true, Some(fields)) = (chosen(&entry), entry.fields) {
                union
                    .get_or_insert_with(FieldSet::default)
                    .merge(&fields_tree(fields));
            }
        }
        union
    }

    /// Adds the entries of one more `FieldsV1` JSON object.
    pub fn merge(&mut self, node: &Value) {
        let Some(map) = node.as_object() else { return };
        for (entry, child) in map {
            if let Some(field) = entry.strip_prefix("f:") {
                self.fields
                    .entry(field.to_owned())
                    .or_default()
                    .merge(child);
            } else if let Some(key) = entry.strip_prefix("k:") {
                if let Ok(Value::Object(key)) = serde_json::from_str::<Value>(key) {
                    match self.keyed.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, existing)) => existing.merge(child),
                        None => self.keyed.push((key, FieldSet::parse(child))),
                    }
                }
            } else if let Some(value) = entry.strip_prefix("v:")
                && let Ok(value) = serde_json::from_str::<Value>(value)
            {
                self.values.push(value);
            }
        }
    }

    /// The set under map field `name`, if it lists that field.
    pub fn field(&self, name: &str) -> Option<&FieldSet> {
        self.fields.get(name)
    }

    /// The set for the keyed list element whose merge-key fields all equal `element`'s.
    pub fn keyed_for(&self, element: &Value) -> Option<&FieldSet> {
        self.keyed
            .iter()
            .find(|(key, _)| key_matches(key, element))
            .map(|(_, set)| set)
    }

    /// The merge-key fields of the list whose keyed elements the set names (those of the
    /// first element named), if it names any.
    pub fn key_fields(&self) -> Option<Vec<&str>> {
        self.keyed
            .first()
            .map(|(key, _)| key.keys().map(String::as_str).collect())
    }

    /// Whether the set element `value` (a `finalizers` entry) is listed.
    pub fn has_value(&self, value: &Value) -> bool {
        self.values.contains(value)
    }

    /// Whether the set names only its node itself (`{}` or `{".": {}}`): a leaf.
    pub fn is_leaf(&self) -> bool {
        self.fields.is_empty() && self.keyed.is_empty() && self.values.is_empty()
    }

    /// Removes from `value` the fields the set names, each as a leaf: a map or list the set
    /// descends into stays, less those fields, and a map named as a leaf stays whole (its
    /// fields are compared one by one, as Argo CD removes only the leaves that differ). A
    /// keyed element named as a leaf is removed (every element with that key); one the set
    /// descends into loses the fields named under it.
    pub fn remove_from(&self, value: &mut Value) {
        if let Some(map) = value.as_object_mut() {
            for (field, child) in &self.fields {
                if child.is_leaf() {
                    if !map.get(field).is_some_and(Value::is_object) {
                        map.remove(field);
                    }
                } else if let Some(inner) = map.get_mut(field) {
                    child.remove_from(inner);
                }
            }
        } else if let Some(items) = value.as_array_mut() {
            for (key, child) in &self.keyed {
                if child.is_leaf() {
                    items.retain(|e| !key_matches(key, e));
                } else if let Some(element) = items.iter_mut().find(|e| key_matches(key, e)) {
                    child.remove_from(element);
                }
            }
            items.retain(|e| !self.values.contains(e));
        }
    }
}

/// An entry's `fieldsV1`: the JSON object, or its JSON text (how a replica's live caches
/// keep it, compactly), parsed; text that does not parse names no field.
fn fields_tree(fields: &Value) -> std::borrow::Cow<'_, Value> {
    match fields {
        Value::String(text) => {
            std::borrow::Cow::Owned(serde_json::from_str(text).unwrap_or(Value::Null))
        }
        _ => std::borrow::Cow::Borrowed(fields),
    }
}

fn key_matches(key: &Map<String, Value>, element: &Value) -> bool {
    key.iter().all(|(k, v)| element.get(k) == Some(v))
}

/// One entry of `metadata.managedFields`, as read for choosing it.
#[derive(Debug, Clone, Copy)]
pub struct ManagedEntry<'a> {
    /// `manager` (empty when absent).
    pub manager: &'a str,
    /// `operation` (`Apply`, `Update`; empty when absent).
    pub operation: &'a str,
    /// `subresource` (empty for the object itself).
    pub subresource: &'a str,
    fields: Option<&'a Value>,
}

impl<'a> ManagedEntry<'a> {
    fn all(managed_fields: &'a Value) -> impl Iterator<Item = ManagedEntry<'a>> {
        let text = |entry: &'a Value, key: &str| entry.get(key).and_then(Value::as_str);
        managed_fields
            .as_array()
            .into_iter()
            .flatten()
            .map(move |entry| ManagedEntry {
                manager: text(entry, "manager").unwrap_or(""),
                operation: text(entry, "operation").unwrap_or(""),
                subresource: text(entry, "subresource").unwrap_or(""),
                fields: entry.get("fieldsV1"),
            })
    }
}

/// Removes from `value` every field that an entry of `managed_fields` (a live object's
/// `metadata.managedFields`) gives to one of `managers`, whatever its operation or
/// subresource (an HPA's `spec.replicas` is its manager's through the `scale` subresource),
/// each entry in turn as [`FieldSet::remove_from`] removes them.
pub(crate) fn remove_owned(value: &mut Value, managed_fields: &Value, managers: &[String]) {
    for entry in ManagedEntry::all(managed_fields) {
        if let (true, Some(fields)) = (managers.iter().any(|m| m == entry.manager), entry.fields) {
            FieldSet::parse(&fields_tree(fields)).remove_from(value);
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
        // The same entries with their fields as JSON text (a live cache's compact form).
        let mut as_text = managed.clone();
        for e in as_text.as_array_mut().unwrap() {
            e["fieldsV1"] = json!(e["fieldsV1"].to_string());
        }
        let mut hpa_text = obj.clone();
        remove_owned(&mut hpa_text, &as_text, &["kube-controller-manager".into()]);
        assert_eq!(hpa_text, hpa);
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
