//! Write semantics of the API server over the [`Store`]: create, update (strict
//! `resourceVersion`), status subresource, generation, no-op writes, finalizers, delete
//! with preconditions. Patches and server-side apply build on [`update_object`] in
//! [`super::apply`].

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::crd;
use super::meta::{check_size, name_suffix, new_uid, normalize_secret, now_rfc3339, validate_name};
use super::registry::ResourceKind;
use super::schema;
use super::status::{ApiError, success_status};
use super::store::{Event, ObjKey, Store};

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sub {
    /// The main resource (status changes ignored for kinds with a status subresource).
    Main,
    /// `/status`: only status changes are taken.
    Status,
}

/// The result of a write: the object as stored and the event (None for a no-op write,
/// which, as on a real server, keeps the resourceVersion and notifies nobody).
pub type Written = (Value, Option<Event>);

/// The key of `name` of `kind` in namespace `ns` ("" for cluster-scoped kinds).
pub fn key(kind: &ResourceKind, ns: &str, name: &str) -> ObjKey {
    ObjKey {
        res: (kind.group, kind.plural),
        namespace: if kind.namespaced {
            ns.to_string()
        } else {
            String::new()
        },
        name: name.to_string(),
    }
}

/// The namespaces every fresh server has.
pub const INITIAL_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    obj["metadata"]
        .as_object_mut()
        .expect("metadata is an object")
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

/// Checks or fills `apiVersion`/`kind`, and that `metadata` is an object.
fn check_type(kind: &ResourceKind, obj: &mut Value, name: &str) -> Result<(), ApiError> {
    let Value::Object(m) = obj else {
        return Err(ApiError::bad_request(format!(
            "the body of the request for {} {name:?} is not a JSON object",
            kind.kind
        )));
    };
    let api_version = kind.api_version();
    for (field, want) in [("apiVersion", api_version.as_str()), ("kind", kind.kind)] {
        match m.get(field) {
            None | Some(Value::Null) => {
                m.insert(field.into(), json!(want));
            }
            Some(Value::String(s)) if s == want => {}
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "the {field} of the provided object ({other}) does not match the resource {want} (object {name:?})"
                )));
            }
        }
    }
    match m.get("metadata") {
        None | Some(Value::Object(_)) => Ok(()),
        Some(_) => Err(ApiError::invalid(
            kind.group,
            kind.kind,
            name,
            "metadata",
            "Invalid value: must be an object",
        )),
    }
}

/// Sets the namespace from the request path (a different one in the body is a 400).
fn place(kind: &ResourceKind, obj: &mut Value, ns: &str, name: &str) -> Result<(), ApiError> {
    let meta = meta_mut(obj);
    if kind.namespaced {
        match meta.get("namespace").and_then(Value::as_str) {
            Some(body_ns) if !body_ns.is_empty() && body_ns != ns => {
                return Err(ApiError::bad_request(format!(
                    "the namespace of the provided object ({body_ns}) does not match the namespace sent on the request ({ns}) for {} {name:?}",
                    kind.kind
                )));
            }
            _ => {
                meta.insert("namespace".into(), json!(ns));
            }
        }
    } else {
        meta.remove("namespace");
    }
    Ok(())
}

fn require_namespace(store: &Store, kind: &ResourceKind, ns: &str) -> Result<(), ApiError> {
    if kind.namespaced
        && store
            .get(&ObjKey {
                res: ("", "namespaces"),
                namespace: String::new(),
                name: ns.to_string(),
            })
            .is_none()
    {
        return Err(ApiError::not_found("", "namespaces", ns));
    }
    Ok(())
}

/// POST: creates `body` in namespace `ns`.
pub fn create(
    store: &mut Store,
    kind: &ResourceKind,
    ns: &str,
    mut body: Value,
) -> Result<Written, ApiError> {
    let shown = meta_str(&body, "name").unwrap_or_default().to_string();
    check_type(kind, &mut body, &shown)?;
    let name = match (meta_str(&body, "name"), meta_str(&body, "generateName")) {
        (Some(n), _) if !n.is_empty() => n.to_string(),
        (_, Some(prefix)) if !prefix.is_empty() => loop {
            let candidate = format!("{prefix}{}", name_suffix());
            if store.get(&key(kind, ns, &candidate)).is_none() {
                break candidate;
            }
        },
        _ => {
            return Err(ApiError::invalid(
                kind.group,
                kind.kind,
                "",
                "metadata.name",
                "Required value: name or generateName is required",
            ));
        }
    };
    validate_name(kind.group, kind.kind, &name, kind.kind == "Namespace")?;
    place(kind, &mut body, ns, &name)?;
    if meta_str(&body, "resourceVersion").is_some_and(|rv| !rv.is_empty()) {
        return Err(ApiError::internal(format!(
            "resourceVersion should not be set on objects to be created ({} {name:?})",
            kind.kind
        )));
    }
    require_namespace(store, kind, ns)?;
    let k = key(kind, ns, &name);
    if store.get(&k).is_some() {
        return Err(ApiError::already_exists(kind.group, kind.plural, &name));
    }
    if kind.kind == "Secret" {
        normalize_secret(&mut body, &name)?;
    }
    if kind.kind == "Event" {
        validate_event(&body, &name)?;
    }
    if crd::is_crd(kind) {
        crd::validate(&body, &name)?;
    }
    if kind.status {
        // The status subresource owns status: a create cannot set it.
        if let Value::Object(m) = &mut body {
            m.remove("status");
        }
        if kind.kind == "Namespace" {
            body["status"] = json!({"phase": "Active"});
        }
    }
    store.admission.mutate(kind, ns, &name, true, &mut body)?;
    schema::check(store, kind, &name, &mut body, None, Sub::Main)?;
    let meta = meta_mut(&mut body);
    meta.insert("name".into(), json!(name));
    meta.insert("uid".into(), json!(new_uid()));
    meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
    meta.insert("generation".into(), json!(1));
    for f in ["deletionTimestamp", "deletionGracePeriodSeconds"] {
        meta.remove(f);
    }
    check_size(kind.kind, &body, &name)?;
    let event = store.commit(k, Some(body));
    Ok(((*event.object).clone(), Some(event)))
}

/// A core/v1 Event as the real server's validation of its legacy form takes it: the event
/// lives in its involved object's namespace (an object without one: `default` or none),
/// and its `count` is not negative.
fn validate_event(event: &Value, name: &str) -> Result<(), ApiError> {
    let invalid = |field: &str, why: String| ApiError::invalid("", "Event", name, field, &why);
    let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_owned();
    let namespace = text(event.pointer("/metadata/namespace"));
    let involved = text(event.pointer("/involvedObject/namespace"));
    let matches = if involved.is_empty() {
        namespace.is_empty() || namespace == "default"
    } else {
        namespace == involved
    };
    if !matches {
        return Err(invalid(
            "involvedObject.namespace",
            format!("Invalid value: \"{involved}\": does not match event.namespace"),
        ));
    }
    if event
        .get("count")
        .and_then(Value::as_i64)
        .is_some_and(|c| c < 0)
    {
        return Err(invalid(
            "count",
            "Invalid value: must be greater than or equal to 0".to_owned(),
        ));
    }
    Ok(())
}

/// Parses a resourceVersion precondition ("" = none).
pub fn parse_rv(rv: &str) -> Result<Option<u64>, ApiError> {
    if rv.is_empty() {
        return Ok(None);
    }
    rv.parse::<u64>()
        .map(Some)
        .map_err(|_| ApiError::bad_request(format!("invalid resource version {rv:?}")))
}

/// The stored object's resourceVersion.
pub fn stored_rv(obj: &Value) -> u64 {
    meta_str(obj, "resourceVersion")
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// PUT: replaces object `name` with `body` (strict resourceVersion when the body has one).
pub fn update(
    store: &mut Store,
    kind: &ResourceKind,
    ns: &str,
    name: &str,
    mut body: Value,
    sub: Sub,
) -> Result<Written, ApiError> {
    check_type(kind, &mut body, name)?;
    if let Some(body_name) = meta_str(&body, "name")
        && body_name != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    place(kind, &mut body, ns, name)?;
    let Some(existing) = store.get(&key(kind, ns, name)).cloned() else {
        if kind.create_on_update && sub == Sub::Main {
            // The real server drops the body's resourceVersion when it creates on update.
            if let Some(m) = body.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("resourceVersion");
                m.insert("name".into(), json!(name));
            }
            return create(store, kind, ns, body);
        }
        return Err(ApiError::not_found(kind.group, kind.plural, name));
    };
    update_object(store, kind, ns, name, &existing, body, sub)
}

/// The common end of every update of an existing object (PUT, patches, apply, scale):
/// preconditions from `new`'s metadata, immutable fields, the status subresource rule,
/// generation, finalizers, the no-op rule, and the commit.
pub fn update_object(
    store: &mut Store,
    kind: &ResourceKind,
    ns: &str,
    name: &str,
    existing: &Arc<Value>,
    mut new: Value,
    sub: Sub,
) -> Result<Written, ApiError> {
    if let Some(want) = parse_rv(meta_str(&new, "resourceVersion").unwrap_or_default())?
        && want != stored_rv(existing)
    {
        return Err(ApiError::conflict(kind.group, kind.plural, name));
    }
    let old_uid = meta_str(existing, "uid").unwrap_or_default().to_string();
    if let Some(uid) = meta_str(&new, "uid")
        && !uid.is_empty()
        && uid != old_uid
    {
        return Err(ApiError::conflict_with(
            kind.group,
            kind.plural,
            name,
            &format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {old_uid}"
            ),
        ));
    }
    if sub == Sub::Status {
        // Only status moves; everything else stays as stored.
        let status = new.get("status").cloned();
        let managed = new.pointer("/metadata/managedFields").cloned();
        new = (**existing).clone();
        if let Some(mf) = managed {
            meta_mut(&mut new).insert("managedFields".into(), mf);
        }
        match status {
            Some(s) => new["status"] = s,
            None => {
                if let Value::Object(m) = &mut new {
                    m.remove("status");
                }
            }
        }
    } else if kind.status
        && let Value::Object(m) = &mut new
    {
        match existing.get("status") {
            Some(s) => m.insert("status".into(), s.clone()),
            None => m.remove("status"),
        };
    }
    if kind.kind == "Secret" {
        normalize_secret(&mut new, name)?;
    }
    if kind.kind == "Event" {
        validate_event(&new, name)?;
    }
    if crd::is_crd(kind) {
        crd::validate(&new, name)?;
    }
    if sub == Sub::Main {
        store.admission.mutate(kind, ns, name, false, &mut new)?;
    }
    schema::check(store, kind, name, &mut new, Some(&**existing), sub)?;
    let old_meta = existing
        .get("metadata")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let meta = meta_mut(&mut new);
    for f in [
        "uid",
        "creationTimestamp",
        "generation",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "resourceVersion",
    ] {
        match old_meta.get(f) {
            Some(v) => meta.insert(f.into(), v.clone()),
            None => meta.remove(f),
        };
    }
    if !meta.contains_key("managedFields")
        && let Some(mf) = old_meta.get("managedFields")
    {
        meta.insert("managedFields".into(), mf.clone());
    }
    if spec_of(&new) != spec_of(existing) {
        let g = old_meta
            .get("generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        meta_mut(&mut new).insert("generation".into(), json!(g + 1));
    }
    let k = key(kind, ns, name);
    let terminating = old_meta.get("deletionTimestamp").is_some();
    let finalizers_left = new
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty());
    if terminating && !finalizers_left {
        let event = store.commit(k, None);
        return Ok(((*event.object).clone(), Some(event)));
    }
    if new == **existing {
        return Ok(((**existing).clone(), None));
    }
    check_size(kind.kind, &new, name)?;
    let event = store.commit(k, Some(new));
    Ok(((*event.object).clone(), Some(event)))
}

/// Everything but metadata and status: what `metadata.generation` counts changes of.
fn spec_of(obj: &Value) -> Value {
    match obj {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "metadata" | "status"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// DELETE with `DeleteOptions` (preconditions on uid and resourceVersion). Objects with
/// finalizers get a `deletionTimestamp` and stay until an update removes the last
/// finalizer; deleting a namespace deletes its contents first. Returns the response body
/// and the events.
pub fn delete(
    store: &mut Store,
    kind: &ResourceKind,
    ns: &str,
    name: &str,
    options: &Value,
) -> Result<(Value, Vec<Event>), ApiError> {
    let k = key(kind, ns, name);
    let existing = store
        .get(&k)
        .cloned()
        .ok_or_else(|| ApiError::not_found(kind.group, kind.plural, name))?;
    let pre = options.get("preconditions");
    let uid = meta_str(&existing, "uid").unwrap_or_default().to_string();
    if let Some(want) = pre.and_then(|p| p.get("uid")).and_then(Value::as_str)
        && want != uid
    {
        return Err(ApiError::conflict_with(
            kind.group,
            kind.plural,
            name,
            &format!("Precondition failed: UID in precondition: {want}, UID in object meta: {uid}"),
        ));
    }
    if let Some(want) = pre
        .and_then(|p| p.get("resourceVersion"))
        .and_then(Value::as_str)
    {
        let have = stored_rv(&existing);
        if parse_rv(want)? != Some(have) {
            return Err(ApiError::conflict_with(
                kind.group,
                kind.plural,
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {have}"
                ),
            ));
        }
    }
    let has_finalizers = existing
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty());
    if has_finalizers {
        if existing.pointer("/metadata/deletionTimestamp").is_some() {
            return Ok(((*existing).clone(), Vec::new()));
        }
        let mut marked = (*existing).clone();
        let meta = meta_mut(&mut marked);
        meta.insert("deletionTimestamp".into(), json!(now_rfc3339()));
        meta.insert("deletionGracePeriodSeconds".into(), json!(0));
        let event = store.commit(k, Some(marked));
        return Ok(((*event.object).clone(), vec![event]));
    }
    let mut events = Vec::new();
    if kind.kind == "Namespace" {
        for inner in store.keys_in_namespace(name) {
            events.push(store.commit(inner, None));
        }
    }
    let event = store.commit(k, None);
    let body = if kind.delete_returns_object {
        (*event.object).clone()
    } else {
        success_status(kind.group, kind.plural, name, &uid)
    };
    events.push(event);
    Ok((body, events))
}
