//! CustomResourceDefinitions: writing one makes its custom resource servable, as on a real
//! server. There the CRD controller does it a moment after the write; here it is done
//! within the write, so a client may use the kind as soon as its CRD write returns.
//!
//! What is faithful: a CRD's name must be `<plural>.<group>`, its group a domain with a
//! dot, its scope `Namespaced` or `Cluster`, and exactly one of its versions the storage
//! version (422 Invalid otherwise); every served version is served under
//! `/apis/<group>/<version>/` and listed by discovery (plain and aggregated), with the
//! `status` and `scale` subresources the version declares; custom resources answer DELETE
//! with the deleted object; the CRD's status gets `acceptedNames`, `storedVersions` and the
//! conditions `NamesAccepted` and `Established` as a write of its own (a new
//! resourceVersion and a MODIFIED event, as the real controller writes it); deleting a CRD
//! deletes its custom resources (DELETED events).
//!
//! What is simplified: a served version's `openAPIV3Schema` prunes and validates its
//! custom resources (the `schema` module) but nothing is defaulted; no conversion between versions (an object reads back with the apiVersion it was
//! written with); no name conflicts between CRDs; the scale subresource maps
//! `spec.replicas` whatever the CRD's `specReplicasPath`; a resource the server serves built
//! in (Argo CD's Application) keeps its built-in definition (its CRD's schema still
//! applies). The names of custom resources
//! are interned for the life of the process ([`ResourceKind`] holds `&'static str`), so
//! memory grows with the number of distinct names ever served, not with writes.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::meta::now_rfc3339;
use super::registry::{Registry, ResourceKind};
use super::status::ApiError;
use super::store::{ObjKey, ResId, Store};

/// The resource of CustomResourceDefinitions.
pub const CRD_RES: ResId = ("apiextensions.k8s.io", "customresourcedefinitions");

/// Whether `kind` is the CustomResourceDefinition resource.
pub fn is_crd(kind: &ResourceKind) -> bool {
    (kind.group, kind.plural) == CRD_RES
}

/// `s` with a `'static` lifetime: each distinct string is leaked once per process.
fn intern(s: &str) -> &'static str {
    static NAMES: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(known) = names.get(s) {
        return known;
    }
    let leaked: &'static str = Box::leak(s.to_owned().into_boxed_str());
    names.insert(leaked);
    leaked
}

fn text<'a>(obj: &'a Value, ptr: &str) -> &'a str {
    obj.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

fn versions(obj: &Value) -> &[Value] {
    obj.pointer("/spec/versions")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// A DNS-1123 label: lower-case letters, digits and '-', not at either end, ≤ 63.
fn is_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Checks a CRD about to be stored as `name`: 422 Invalid naming the field, worded as the
/// real server words it.
pub fn validate(obj: &Value, name: &str) -> Result<(), ApiError> {
    let invalid = |field: &str, why: String| {
        Err(ApiError::invalid(
            CRD_RES.0,
            "CustomResourceDefinition",
            name,
            field,
            &why,
        ))
    };
    let group = text(obj, "/spec/group");
    if group.is_empty() {
        return invalid("spec.group", "Required value".into());
    }
    if !group.contains('.') || !group.split('.').all(is_label) {
        return invalid(
            "spec.group",
            format!("Invalid value: {group:?}: should be a domain with at least one dot"),
        );
    }
    let plural = text(obj, "/spec/names/plural");
    let singular = text(obj, "/spec/names/singular");
    for (field, value, required) in [
        ("spec.names.plural", plural, true),
        ("spec.names.singular", singular, false),
    ] {
        if value.is_empty() && required {
            return invalid(field, "Required value".into());
        }
        if !value.is_empty() && !is_label(value) {
            return invalid(
                field,
                format!(
                    "Invalid value: {value:?}: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"
                ),
            );
        }
    }
    if text(obj, "/spec/names/kind").is_empty() {
        return invalid("spec.names.kind", "Required value".into());
    }
    if name != format!("{plural}.{group}") {
        return invalid(
            "metadata.name",
            format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        );
    }
    match text(obj, "/spec/scope") {
        "Namespaced" | "Cluster" => {}
        other => {
            return invalid(
                "spec.scope",
                format!(
                    "Unsupported value: {other:?}: supported values: \"Cluster\", \"Namespaced\""
                ),
            );
        }
    }
    let versions = versions(obj);
    if versions.is_empty() {
        return invalid("spec.versions", "Required value".into());
    }
    for (i, v) in versions.iter().enumerate() {
        if !is_label(text(v, "/name")) {
            return invalid(
                &format!("spec.versions[{i}].name"),
                format!(
                    "Invalid value: {:?}: must be a DNS-1035 label",
                    text(v, "/name")
                ),
            );
        }
    }
    let storage = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .count();
    if storage != 1 {
        return invalid(
            "spec.versions",
            "Invalid value: must have exactly one version marked as storage version".into(),
        );
    }
    Ok(())
}

/// The kinds a valid CRD serves: one per served version.
pub fn kinds_of(obj: &Value) -> Vec<ResourceKind> {
    let group = intern(text(obj, "/spec/group"));
    let kind = intern(text(obj, "/spec/names/kind"));
    let plural = intern(text(obj, "/spec/names/plural"));
    let singular = match text(obj, "/spec/names/singular") {
        "" => intern(&kind.to_ascii_lowercase()),
        s => intern(s),
    };
    let namespaced = text(obj, "/spec/scope") == "Namespaced";
    versions(obj)
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool) == Some(true))
        .map(|v| {
            let version = intern(text(v, "/name"));
            let mut k = if namespaced {
                ResourceKind::namespaced(group, version, kind, plural, singular)
            } else {
                ResourceKind::cluster(group, version, kind, plural, singular)
            }
            .returning_deleted();
            if v.pointer("/subresources/status").is_some() {
                k = k.with_status();
            }
            if v.pointer("/subresources/scale").is_some() {
                k = k.with_scale();
            }
            k
        })
        .collect()
}

/// The status the real CRD controller gives a valid CRD: its names accepted, its storage
/// version recorded, `NamesAccepted` and `Established` true. Transition times are kept
/// from `old` where a condition does not change.
fn status_for(obj: &Value, old: Option<&Value>) -> Value {
    let mut names = obj
        .pointer("/spec/names")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let kind = text(obj, "/spec/names/kind").to_owned();
    if text(&names, "/singular").is_empty() {
        names["singular"] = json!(kind.to_ascii_lowercase());
    }
    if text(&names, "/listKind").is_empty() {
        names["listKind"] = json!(format!("{kind}List"));
    }
    let mut stored: Vec<Value> = old
        .and_then(|o| o.get("storedVersions"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if let Some(storage) = versions(obj)
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .and_then(|v| v.get("name"))
        && !stored.contains(storage)
    {
        stored.push(storage.clone());
    }
    let condition = |ty: &str, reason: &str, message: &str| {
        let since = old
            .and_then(|o| o.get("conditions"))
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| c["type"] == ty && c["status"] == "True"))
            .and_then(|c| c.get("lastTransitionTime").cloned())
            .unwrap_or_else(|| json!(now_rfc3339()));
        json!({
            "type": ty,
            "status": "True",
            "lastTransitionTime": since,
            "reason": reason,
            "message": message,
        })
    };
    json!({
        "conditions": [
            condition("NamesAccepted", "NoConflicts", "no conflicts found"),
            condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
        "acceptedNames": names,
        "storedVersions": stored,
    })
}

/// Whether the writes after revision `before` may have changed a CRD (when the history
/// no longer tells, yes).
pub fn touched(store: &Store, before: u64) -> bool {
    store.compacted() > before || store.events_after(before).any(|e| e.key.res == CRD_RES)
}

/// What the CRD controller does after CRDs change: gives every valid CRD its status (a
/// write of its own when it changes), deletes the custom resources of CRDs that are gone,
/// and returns the registry to serve (`base` and the CRDs' kinds) when it differs from
/// `current`.
pub fn reconcile(store: &mut Store, base: &[ResourceKind], current: &Registry) -> Option<Registry> {
    let crds: Vec<(ObjKey, Arc<Value>)> = store
        .objects_of(CRD_RES, None)
        .map(|(k, o)| (k.clone(), o.clone()))
        .collect();
    let mut extra = Vec::new();
    let mut defined: BTreeSet<ResId> = base.iter().map(|k| (k.group, k.plural)).collect();
    for (key, crd) in crds {
        if validate(&crd, &key.name).is_err() {
            // Only a direct insert bypasses validation; such a CRD serves nothing.
            continue;
        }
        defined.insert((
            intern(text(&crd, "/spec/group")),
            intern(text(&crd, "/spec/names/plural")),
        ));
        extra.extend(kinds_of(&crd));
        let status = status_for(&crd, crd.get("status"));
        if crd.get("status") != Some(&status) {
            let mut updated = (*crd).clone();
            updated["status"] = status;
            store.commit(key, Some(updated));
        }
    }
    let gone: BTreeSet<ResId> = current
        .kinds()
        .iter()
        .map(|k| (k.group, k.plural))
        .filter(|res| !defined.contains(res))
        .collect();
    for res in gone {
        let keys: Vec<ObjKey> = store
            .objects_of(res, None)
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            store.commit(key, None);
        }
    }
    let next = Registry::with_extra(base, &extra);
    (next.kinds() != current.kinds()).then_some(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(name: &str) -> Value {
        json!({
            "metadata": {"name": name},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [
                    {"name": "v1", "served": true, "storage": true,
                     "subresources": {"status": {}}},
                    {"name": "v1beta1", "served": false, "storage": false},
                ],
            },
        })
    }

    #[test]
    fn a_valid_crd_serves_its_served_versions() {
        let c = crd("widgets.example.com");
        validate(&c, "widgets.example.com").unwrap();
        let kinds = kinds_of(&c);
        assert_eq!(kinds.len(), 1);
        let k = kinds[0];
        assert_eq!(
            (k.group, k.version, k.kind, k.plural, k.singular),
            ("example.com", "v1", "Widget", "widgets", "widget")
        );
        assert!(k.namespaced && k.status && !k.scale && k.delete_returns_object);
    }

    #[test]
    fn invalid_crds_name_the_field() {
        let field = |c: &Value, name: &str| validate(c, name).unwrap_err().details.field;
        assert_eq!(
            field(&crd("gadgets.example.com"), "gadgets.example.com").as_deref(),
            Some("metadata.name")
        );
        let mut c = crd("widgets.example");
        c["spec"]["group"] = json!("example");
        assert_eq!(field(&c, "widgets.example").as_deref(), Some("spec.group"));
        let mut c = crd("widgets.example.com");
        c["spec"]["versions"][1]["storage"] = json!(true);
        assert_eq!(
            field(&c, "widgets.example.com").as_deref(),
            Some("spec.versions")
        );
        let mut c = crd("widgets.example.com");
        c["spec"]["scope"] = json!("Global");
        assert_eq!(
            field(&c, "widgets.example.com").as_deref(),
            Some("spec.scope")
        );
    }

    #[test]
    fn status_is_stable_once_written() {
        let c = crd("widgets.example.com");
        let first = status_for(&c, None);
        assert_eq!(first["conditions"][1]["type"], "Established");
        assert_eq!(first["acceptedNames"]["listKind"], "WidgetList");
        assert_eq!(first["storedVersions"], json!(["v1"]));
        assert_eq!(status_for(&c, Some(&first)), first);
    }

    #[test]
    fn interned_names_are_shared() {
        let a = intern(&String::from("gizmos"));
        let b = intern("gizmos");
        assert!(std::ptr::eq(a, b));
    }
}
