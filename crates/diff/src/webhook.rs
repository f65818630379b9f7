//! Server-side diff: what mutating admission webhooks added to a predicted live object
//! (the answer of a server-side apply dry run) taken out again, as Argo CD takes it out
//! unless an Application says `IncludeMutationWebhook=true`.
//!
//! Argo CD's rule, by `managedFields` ownership: of the predicted object, the fields the
//! applier's own manager owns keep their predicted value; every other field the predicted
//! object has takes its live value (absent when the live object does not have it); and a
//! field the live object has that the predicted object does not stays removed. Webhooks'
//! changes are owned by no manager, or by another one, so they revert to what is live.
//!
//! Without a schema, lists are matched the way `managedFields` name their elements: by the
//! merge keys their `k:` entries give where the applier owns elements, by value for `v:`
//! set elements; a list the applier owns whole (a leaf) keeps its predicted value, and a
//! list it does not own at all takes its live value. Argo CD knows each list's keys from
//! the cluster's OpenAPI schema; fleetshard's live caches keep no schema.

use serde_json::{Map, Value};

use crate::managed::{FieldSet, ManagedEntry};

/// Why a predicted object could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PredictionError {
    /// The predicted object has no `metadata.managedFields` (a server that does not track
    /// field ownership cannot tell a webhook's fields from the applier's).
    #[error("the predicted object has no managedFields")]
    NoManagedFields,
    /// No `managedFields` entry of the applier's manager.
    #[error("no managed fields found for manager {0:?} in the predicted object")]
    NoManagerEntry(String),
}

/// `predicted` (a server-side apply dry run of the desired object by field manager
/// `manager`) with the changes of mutating admission webhooks reverted to `live`.
pub fn remove_webhook_mutations(
    predicted: &Value,
    live: &Value,
    manager: &str,
) -> Result<Value, PredictionError> {
    let managed = predicted
        .pointer("/metadata/managedFields")
        .filter(|m| m.as_array().is_some_and(|a| !a.is_empty()))
        .ok_or(PredictionError::NoManagedFields)?;
    let owned = FieldSet::of_entries(managed, |e: &ManagedEntry<'_>| e.manager == manager)
        .filter(|set| !set.is_leaf())
        .ok_or_else(|| PredictionError::NoManagerEntry(manager.to_owned()))?;
    let mut out = owned_merge(&owned, predicted, Some(live));
    // The predicted object's own records stay as the dry run gave them.
    if let (Some(meta), Some(mf)) = (
        out.get_mut("metadata").and_then(Value::as_object_mut),
        predicted.pointer("/metadata/managedFields"),
    ) {
        meta.insert("managedFields".into(), mf.clone());
    }
    Ok(out)
}

/// The value at a node the applier owns part of: its owned children predicted, the others
/// live (when present on both sides).
fn owned_merge(owned: &FieldSet, predicted: &Value, live: Option<&Value>) -> Value {
    match predicted {
        Value::Object(p) => {
            let l = live.and_then(Value::as_object);
            let mut out = Map::new();
            for (name, pv) in p {
                let lv = l.and_then(|l| l.get(name));
                let value = match owned.field(name) {
                    Some(child) if child.is_leaf() => Some(pv.clone()),
                    Some(child) => Some(owned_merge(child, pv, lv)),
                    None => lv.map(|lv| unowned(pv, lv)),
                };
                if let Some(value) = value {
                    out.insert(name.clone(), value);
                }
            }
            Value::Object(out)
        }
        Value::Array(p) => {
            let l = live.and_then(Value::as_array);
            let items = p.iter().filter_map(|pe| {
                if let Some(child) = owned.keyed_for(pe) {
                    let le = l.and_then(|l| l.iter().find(|le| same_key(owned, pe, le)));
                    return Some(if child.is_leaf() {
                        pe.clone()
                    } else {
                        owned_merge(child, pe, le)
                    });
                }
                if owned.has_value(pe) {
                    return Some(pe.clone());
                }
                // Not the applier's: kept as live has it, if live has it.
                l.and_then(|l| l.iter().find(|le| *le == pe || same_key(owned, pe, le)))
                    .cloned()
            });
            Value::Array(items.collect())
        }
        other => other.clone(),
    }
}

/// Whether `a` and `b` are the same element of a keyed list: equal on every merge-key
/// field the applier's records use for the list's elements.
fn same_key(owned: &FieldSet, a: &Value, b: &Value) -> bool {
    owned.key_fields().is_some_and(|fields| {
        fields
            .iter()
            .all(|f| a.get(*f).is_some() && a.get(*f) == b.get(*f))
    })
}

/// A node no field of which the applier owns: the live value, less what the prediction
/// removed from maps.
fn unowned(predicted: &Value, live: &Value) -> Value {
    match (predicted, live) {
        (Value::Object(p), Value::Object(l)) => Value::Object(
            l.iter()
                .filter_map(|(k, lv)| p.get(k).map(|pv| (k.clone(), unowned(pv, lv))))
                .collect(),
        ),
        _ => live.clone(),
    }
}

#[cfg(test)]
mod tests;
