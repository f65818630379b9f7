//! Which fields of a live object *we* set earlier, so that a field removed from the desired
//! manifest is seen as a difference rather than as a server-populated extra.
//!
//! Two records are read, as Argo CD does:
//! - `metadata.managedFields`: the entries of our server-side-apply field manager
//!   (operation `Apply`, not the `status` subresource), in the `FieldsV1` format
//!   (`f:<field>`, `k:<merge key JSON>` for keyed list elements, `v:<value>` for set
//!   elements, `.` for the node itself);
//! - the `kubectl.kubernetes.io/last-applied-configuration` annotation (client-side
//!   `kubectl apply`'s three-way-merge record).
//!
//! A live field absent from the desired object is a difference iff either record says it
//! was applied. Anything else there (defaults, fields of other managers, status) is not
//! ours and is left alone.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// The annotation `kubectl apply` writes with the configuration it applied.
pub(crate) const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// A parsed `FieldsV1` tree: the fields, keyed list elements and set elements it lists.
#[derive(Debug, Default)]
pub(crate) struct FieldSet {
    fields: BTreeMap<String, FieldSet>,
    keyed: Vec<(Map<String, Value>, FieldSet)>,
    values: Vec<Value>,
}

impl FieldSet {
    /// Parses a `FieldsV1` JSON object; unknown or malformed entries are skipped (a record
    /// we cannot read only makes the comparison less strict, never wrong about set fields).
    fn parse(node: &Value) -> FieldSet {
        let mut set = FieldSet::default();
        set.merge(node);
        set
    }

    fn merge(&mut self, node: &Value) {
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

    /// The entry for the keyed list element whose merge-key fields all equal `element`'s.
    fn keyed_for(&self, element: &Value) -> Option<&FieldSet> {
        self.keyed
            .iter()
            .find(|(key, _)| key.iter().all(|(k, v)| element.get(k) == Some(v)))
            .map(|(_, set)| set)
    }
}

/// Our records for a live object: its managed fields and its last-applied configuration.
#[derive(Debug, Default)]
pub(crate) struct Records {
    managed: Option<FieldSet>,
    applied: Option<Value>,
}

impl Records {
    /// Reads the records of `live` for `field_manager`.
    pub(crate) fn of(live: &Value, field_manager: &str) -> Records {
        let meta = live.get("metadata");
        let mut managed: Option<FieldSet> = None;
        for entry in meta
            .and_then(|m| m.get("managedFields"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let ours = entry.get("manager").and_then(Value::as_str) == Some(field_manager)
                && entry.get("operation").and_then(Value::as_str) == Some("Apply")
                && entry
                    .get("subresource")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .is_empty();
            if let (true, Some(fields)) = (ours, entry.get("fieldsV1")) {
                managed.get_or_insert_with(FieldSet::default).merge(fields);
            }
        }
        let applied = meta
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get(LAST_APPLIED))
            .and_then(Value::as_str)
            .and_then(|text| serde_json::from_str::<Value>(text).ok())
            .filter(Value::is_object);
        Records { managed, applied }
    }

    /// The cursor at the object's root.
    pub(crate) fn root(&self) -> Owned<'_> {
        Owned {
            managed: self.managed.as_ref(),
            applied: self.applied.as_ref(),
        }
    }
}

/// A cursor into the records, moved along with the comparison; empty where the records
/// say nothing.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Owned<'a> {
    managed: Option<&'a FieldSet>,
    applied: Option<&'a Value>,
}

impl<'a> Owned<'a> {
    /// The cursor at map field `name`.
    pub(crate) fn field(self, name: &str) -> Owned<'a> {
        Owned {
            managed: self.managed.and_then(|m| m.fields.get(name)),
            applied: self.applied.and_then(|a| a.get(name)),
        }
    }

    /// Whether map field `name` was applied by us.
    pub(crate) fn owns_field(self, name: &str) -> bool {
        self.managed.is_some_and(|m| m.fields.contains_key(name))
            || self
                .applied
                .and_then(|a| a.get(name))
                .is_some_and(|v| !v.is_null())
    }

    /// The cursor at the keyed list element `live_element` (matched on `key` in the
    /// last-applied list, on every merge-key field in the managed fields).
    pub(crate) fn element(self, key: &str, live_element: &Value) -> Owned<'a> {
        Owned {
            managed: self.managed.and_then(|m| m.keyed_for(live_element)),
            applied: self.applied_element(key, live_element),
        }
    }

    /// Whether the keyed list element `live_element` was applied by us.
    pub(crate) fn owns_element(self, key: &str, live_element: &Value) -> bool {
        self.managed
            .is_some_and(|m| m.keyed_for(live_element).is_some())
            || self.applied_element(key, live_element).is_some()
    }

    /// Whether the set element `value` (a `finalizers` entry) was applied by us.
    pub(crate) fn owns_value(self, value: &Value) -> bool {
        self.managed.is_some_and(|m| m.values.contains(value))
            || self
                .applied
                .and_then(Value::as_array)
                .is_some_and(|a| a.contains(value))
    }

    /// The cursor at position `index` of a list compared element by element (only the
    /// last-applied record can say anything inside such a list).
    pub(crate) fn index(self, index: usize) -> Owned<'a> {
        Owned {
            managed: None,
            applied: self.applied.and_then(|a| a.get(index)),
        }
    }

    fn applied_element(self, key: &str, live_element: &Value) -> Option<&'a Value> {
        let wanted = live_element.get(key)?;
        self.applied?
            .as_array()?
            .iter()
            .find(|e| e.get(key) == Some(wanted))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_only_our_apply_entries() {
        let live = json!({"metadata": {"managedFields": [
            {"manager": "fleetshard", "operation": "Apply", "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}}}},
            {"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:metadata": {"f:labels": {"f:team": {}}}}},
            {"manager": "fleetshard", "operation": "Apply", "subresource": "status", "fieldsV1": {"f:status": {}}}
        ]}});
        let records = Records::of(&live, "fleetshard");
        let labels = records.root().field("metadata").field("labels");
        assert!(labels.owns_field("app"));
        assert!(!labels.owns_field("team"));
        assert!(!records.root().owns_field("status"));
    }

    #[test]
    fn keyed_elements_match_on_every_key_field() {
        let fields = json!({"f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:name": {}}}});
        let set = FieldSet::parse(&fields);
        let cursor = Owned {
            managed: Some(&set),
            applied: None,
        }
        .field("ports");
        assert!(cursor.owns_element(
            "containerPort",
            &json!({"containerPort": 80, "protocol": "TCP"})
        ));
        assert!(!cursor.owns_element(
            "containerPort",
            &json!({"containerPort": 80, "protocol": "UDP"})
        ));
        let port = cursor.element(
            "containerPort",
            &json!({"containerPort": 80, "protocol": "TCP"}),
        );
        assert!(port.owns_field("name"));
    }

    #[test]
    fn last_applied_annotation_counts() {
        let applied = json!({"metadata": {"labels": {"app": "web"}}}).to_string();
        let live = json!({"metadata": {"annotations": {LAST_APPLIED: applied}}});
        let records = Records::of(&live, "fleetshard");
        assert!(
            records
                .root()
                .field("metadata")
                .field("labels")
                .owns_field("app")
        );
        assert!(
            !records
                .root()
                .field("metadata")
                .field("labels")
                .owns_field("tier")
        );
    }
}
