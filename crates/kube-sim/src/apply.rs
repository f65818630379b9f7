//! PATCH (merge, strategic-as-merge, JSON patch), server-side apply, and the `scale`
//! subresource, all ending in [`ops::update_object`] so they share its preconditions,
//! status rule, generation and no-op behaviour.
//!
//! Server-side apply, simplified: the applied configuration is deep-merged into the object
//! (maps merge, lists are replaced); each Apply manager's field set is recorded in
//! `metadata.managedFields` (`operation: Apply`, `fieldsV1`); fields a manager applied
//! before and omits now are removed unless another Apply manager owns them; a field
//! owned by another Apply manager with a different value is a 409 conflict unless
//! `force=true`, which takes ownership. Fields set by non-apply writes are not tracked.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::meta::now_rfc3339;
use super::ops::{self, Sub, Written, key, stored_rv};
use super::patch::{
    APPLIED_METADATA, FieldPath, applied_fields, from_fields_v1, json_patch, merge_patch, overlaps,
    remove_at, to_fields_v1, value_at,
};
use super::registry::ResourceKind;
use super::status::ApiError;
use super::store::Store;

/// The patch flavours, from the request's Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json` (handled as a merge patch).
    Strategic,
    /// `application/json-patch+json`.
    Json,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

impl PatchType {
    /// The flavour for a Content-Type header value.
    pub fn from_content_type(ct: &str) -> Option<Self> {
        match ct.split(';').next().unwrap_or_default().trim() {
            "application/merge-patch+json" => Some(Self::Merge),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/json-patch+json" => Some(Self::Json),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Some(Self::Apply),
            _ => None,
        }
    }
}

/// Apply options from the query string.
#[derive(Debug, Clone, Default)]
pub struct ApplyOptions {
    /// `fieldManager` (required for apply).
    pub field_manager: Option<String>,
    /// `force`.
    pub force: bool,
}

/// Parses a patch body: JSON, or YAML for apply.
pub fn parse_body(pt: PatchType, body: &[u8]) -> Result<Value, ApiError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(v) => Ok(v),
        Err(e) if pt != PatchType::Apply => {
            Err(ApiError::bad_request(format!("error decoding patch: {e}")))
        }
        Err(_) => {
            let text = std::str::from_utf8(body)
                .map_err(|e| ApiError::bad_request(format!("apply body is not UTF-8: {e}")))?;
            serde_saphyr::from_str::<Value>(text)
                .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
        }
    }
}

/// PATCH of object `name` (main resource or `/status`).
#[allow(clippy::too_many_arguments)] // mirrors the request: object, body, subresource, options
pub fn patch(
    store: &mut Store,
    kind: &ResourceKind,
    ns: &str,
    name: &str,
    pt: PatchType,
    body: Value,
    sub: Sub,
    opts: &ApplyOptions,
) -> Result<Written, ApiError> {
    let existing = store.get(&key(kind, ns, name)).cloned();
    if pt == PatchType::Apply {
        return apply(store, kind, ns, name, existing, body, sub, opts);
    }
    let existing = existing.ok_or_else(|| ApiError::not_found(kind.group, kind.plural, name))?;
    let mut new = (*existing).clone();
    match pt {
        PatchType::Json => json_patch(&mut new, &body)?,
        _ => {
            if !body.is_object() {
                return Err(ApiError::bad_request(format!(
                    "merge patch for {} {name:?} must be a JSON object",
                    kind.kind
                )));
            }
            merge_patch(&mut new, &body);
        }
    }
    // The patched object's own resourceVersion is a precondition only when the patch set
    // one; otherwise the copy of the stored one passes.
    ops::update_object(store, kind, ns, name, &existing, new, sub)
}

fn managers(obj: &Value) -> Vec<Value> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn is_apply_entry(e: &Value) -> bool {
    e.get("operation").and_then(Value::as_str) == Some("Apply")
}

#[allow(clippy::too_many_arguments)] // mirrors the request: object, body, subresource, options
fn apply(
    store: &mut Store,
    kind: &ResourceKind,
    ns: &str,
    name: &str,
    existing: Option<Arc<Value>>,
    applied: Value,
    sub: Sub,
    opts: &ApplyOptions,
) -> Result<Written, ApiError> {
    let manager = opts
        .field_manager
        .clone()
        .filter(|m| !m.is_empty())
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "PATCH of {} {name:?}: fieldManager is required for apply patches",
                kind.kind
            ))
        })?;
    if !applied.is_object() {
        return Err(ApiError::bad_request(format!(
            "apply patch for {} {name:?} must be an object",
            kind.kind
        )));
    }
    for field in ["apiVersion", "kind"] {
        if applied.get(field).and_then(Value::as_str).is_none() {
            return Err(ApiError::bad_request(format!(
                "apply patch for {} {name:?}: {field} must be set",
                kind.kind
            )));
        }
    }
    if let Some(n) = applied.pointer("/metadata/name").and_then(Value::as_str)
        && n != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        )));
    }
    let mut mine = applied_fields(&applied);
    let is_status = |p: &FieldPath| p.first().map(String::as_str) == Some("status");
    if sub == Sub::Status {
        mine.retain(is_status);
    } else if kind.status {
        // The main resource ignores status, so an apply to it owns no status field.
        mine.retain(|p| !is_status(p));
    }
    let entry = |fields: &BTreeSet<FieldPath>| {
        json!({
            "manager": manager,
            "operation": "Apply",
            "apiVersion": kind.api_version(),
            "time": now_rfc3339(),
            "fieldsType": "FieldsV1",
            "fieldsV1": to_fields_v1(fields),
        })
    };
    let Some(existing) = existing else {
        if sub == Sub::Status {
            return Err(ApiError::not_found(kind.group, kind.plural, name));
        }
        let mut obj = applied.clone();
        if let Some(rv) = applied
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            && !rv.is_empty()
        {
            return Err(ApiError::conflict(kind.group, kind.plural, name));
        }
        obj["metadata"]["name"] = json!(name);
        obj["metadata"]["managedFields"] = json!([entry(&mine)]);
        return ops::create(store, kind, ns, obj);
    };

    let mut entries = managers(&existing);
    let mine_before: BTreeSet<FieldPath> = entries
        .iter()
        .find(|e| is_apply_entry(e) && e["manager"] == manager.as_str())
        .map(|e| from_fields_v1(&e["fieldsV1"]))
        .unwrap_or_default();
    let mut conflicts = Vec::new();
    for e in entries
        .iter_mut()
        .filter(|e| is_apply_entry(e) && e["manager"] != manager.as_str())
    {
        let mut theirs = from_fields_v1(&e["fieldsV1"]);
        let clash: Vec<FieldPath> = theirs
            .iter()
            .filter(|t| {
                mine.iter()
                    .any(|m| overlaps(m, t) && value_at(&existing, m) != value_at(&applied, m))
            })
            .cloned()
            .collect();
        if clash.is_empty() {
            continue;
        }
        if opts.force {
            theirs.retain(|t| !clash.contains(t));
            e["fieldsV1"] = to_fields_v1(&theirs);
        } else {
            let who = e["manager"].as_str().unwrap_or_default().to_string();
            conflicts.extend(
                clash
                    .iter()
                    .map(|p| format!("conflict with {who:?}: .{}", p.join("."))),
            );
        }
    }
    if !conflicts.is_empty() {
        return Err(ApiError::conflict_with(
            kind.group,
            kind.plural,
            name,
            &format!(
                "Apply failed with {} conflict(s): {}",
                conflicts.len(),
                conflicts.join(", ")
            ),
        ));
    }
    let others: BTreeSet<FieldPath> = entries
        .iter()
        .filter(|e| is_apply_entry(e) && e["manager"] != manager.as_str())
        .flat_map(|e| from_fields_v1(&e["fieldsV1"]))
        .collect();
    let mut obj = (*existing).clone();
    for dropped in mine_before.difference(&mine) {
        if !others.iter().any(|o| overlaps(o, dropped)) {
            remove_at(&mut obj, dropped);
        }
    }
    let mut merged_in = applied.clone();
    if let Some(Value::Object(meta)) = merged_in.get_mut("metadata") {
        // Identity and server-owned metadata are not merged; resourceVersion and uid stay
        // as preconditions below.
        meta.retain(|k, _| APPLIED_METADATA.contains(&k.as_str()));
    }
    merge_patch(&mut obj, &merged_in);
    for f in ["resourceVersion", "uid"] {
        if let Some(v) = applied.pointer(&format!("/metadata/{f}")) {
            obj["metadata"][f] = v.clone();
        }
    }
    if mine != mine_before || !entries.iter().any(|e| e["manager"] == manager.as_str()) {
        entries.retain(|e| !(is_apply_entry(e) && e["manager"] == manager.as_str()));
        entries.push(entry(&mine));
    }
    entries.retain(|e| !e["fieldsV1"].as_object().is_some_and(Map::is_empty));
    obj["metadata"]["managedFields"] = Value::Array(entries);
    ops::update_object(store, kind, ns, name, &existing, obj, sub)
}

/// The `autoscaling/v1` Scale view of an object with `spec.replicas`.
pub fn scale_of(obj: &Value) -> Value {
    let selector = obj
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    let meta = &obj["metadata"];
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"],
            "creationTimestamp": meta["creationTimestamp"],
        },
        "spec": {"replicas": obj.pointer("/spec/replicas").cloned().unwrap_or(json!(1))},
        "status": {
            "replicas": obj.pointer("/status/replicas").cloned().unwrap_or(json!(0)),
            "selector": selector,
        },
    })
}

/// PUT or PATCH of `/scale`: the new Scale's `spec.replicas` becomes the object's, with the
/// Scale's resourceVersion as the precondition.
pub fn write_scale(
    store: &mut Store,
    kind: &ResourceKind,
    ns: &str,
    name: &str,
    change: impl FnOnce(&mut Value) -> Result<(), ApiError>,
) -> Result<Value, ApiError> {
    let existing = store
        .get(&key(kind, ns, name))
        .cloned()
        .ok_or_else(|| ApiError::not_found(kind.group, kind.plural, name))?;
    let mut scale = scale_of(&existing);
    change(&mut scale)?;
    let replicas = scale
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .filter(|r| *r >= 0)
        .ok_or_else(|| {
            ApiError::invalid(
                "autoscaling",
                "Scale",
                name,
                "spec.replicas",
                "Invalid value: must be a non-negative integer",
            )
        })?;
    let mut obj = (*existing).clone();
    obj["spec"]["replicas"] = json!(replicas);
    match scale
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
    {
        Some(rv) => obj["metadata"]["resourceVersion"] = json!(rv),
        None => obj["metadata"]["resourceVersion"] = json!(stored_rv(&existing).to_string()),
    }
    let (stored, _) = ops::update_object(store, kind, ns, name, &existing, obj, Sub::Main)?;
    Ok(scale_of(&stored))
}
