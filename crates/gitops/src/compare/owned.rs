//! Which fields of a live object *we* set earlier, so that a field removed from the desired
//! manifest is seen as a difference rather than as a server-populated extra.
//!
//! Two records are read, as Argo CD does:
//! - `metadata.managedFields`: the entries of our server-side-apply field manager
//!   (operation `Apply`, not the `status` subresource), read by `fleetshard_diff::FieldSet`;
//! - the `kubectl.kubernetes.io/last-applied-configuration` annotation (client-side
//!   `kubectl apply`'s three-way-merge record).
//!
//! A live field absent from the desired object is a difference iff either record says it
//! was applied. Anything else there (defaults, fields of other managers, status) is not
//! ours and is left alone.

use fleetshard_diff::FieldSet;
use serde_json::Value;

/// The annotation `kubectl apply` writes with the configuration it applied.
pub(crate) const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

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
        let managed = meta
            .and_then(|m| m.get("managedFields"))
            .and_then(|fields| {
                FieldSet::of_entries(fields, |entry| {
                    entry.manager == field_manager
                        && entry.operation == "Apply"
                        && entry.subresource.is_empty()
                })
            });
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
            managed: self.managed.and_then(|m| m.field(name)),
            applied: self.applied.and_then(|a| a.get(name)),
        }
    }

    /// Whether map field `name` was applied by us.
    pub(crate) fn owns_field(self, name: &str) -> bool {
        self.managed.is_some_and(|m| m.field(name).is_some())
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
        self.managed.is_some_and(|m| m.has_value(value))
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
