//! The managed resources document (`app|managed-resources|<app>`): each resource's
//! target, live, normalized and predicted live states as JSON strings, with a Secret's
//! values hidden as Argo CD hides them — `stringData` folded into `data` (base64), then
//! every value of a `data` key replaced by `++++++++`, a different value of the same key
//! by four more `+` each, so that the diff still shows which sides differ and never what
//! they hold. The `last-applied-configuration` annotation of a Secret is hidden the same
//! way (replaced whole when it is not JSON). The annotations argocd-cm's
//! `resource.sensitive.mask.annotations` names are hidden the same way in a Secret's
//! versions and in their `last-applied-configuration` copies; naming
//! `last-applied-configuration` itself hides it whole.

use std::collections::{BTreeMap, HashMap};

use base64::Engine;
use serde_json::{Map, Value};

use crate::documents::{ResourceDiff, ResourceRef};
use crate::tree::ManagedResource;

/// What a hidden value starts as (Argo CD's replacement).
pub const HIDDEN: &str = "++++++++";

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// argocd-cm's key naming the Secret annotations whose values are hidden.
pub const SENSITIVE_ANNOTATIONS_KEY: &str = "resource.sensitive.mask.annotations";

/// The annotation keys `argocd_cm` names in [`SENSITIVE_ANNOTATIONS_KEY`]: a comma-separated
/// list, spaces removed (Argo CD's reading).
pub fn sensitive_annotations(argocd_cm: &BTreeMap<String, String>) -> Vec<String> {
    argocd_cm
        .get(SENSITIVE_ANNOTATIONS_KEY)
        .map(|v| {
            v.replace(' ', "")
                .split(',')
                .filter(|k| !k.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The document: one entry per resource, sorted by `group/kind/namespace/name`;
/// `sensitive`: the Secret annotations whose values are hidden.
pub fn managed_resources(resources: &[ManagedResource], sensitive: &[String]) -> Vec<ResourceDiff> {
    let mut out: Vec<ResourceDiff> = resources.iter().map(|m| diff_of(m, sensitive)).collect();
    out.sort_by_cached_key(|d| {
        ResourceRef {
            group: d.group.clone(),
            kind: d.kind.clone(),
            namespace: d.namespace.clone(),
            name: d.name.clone(),
            ..ResourceRef::default()
        }
        .full_name()
    });
    out
}

fn diff_of(m: &ManagedResource, sensitive: &[String]) -> ResourceDiff {
    let live = m.live.as_deref().cloned();
    let mut target = m.target.clone();
    let mut normalized = live
        .as_ref()
        .map(|l| m.normalized_live.clone().unwrap_or_else(|| l.clone()));
    let mut predicted = match (&target, &live) {
        (Some(t), Some(l)) => Some(m.predicted_live.clone().unwrap_or_else(|| merged(l, t))),
        (Some(t), None) => Some(t.clone()),
        _ => None,
    };
    let mut live = live;
    if m.group.is_empty() && m.kind == "Secret" {
        hide_secret_values(
            [&mut target, &mut live, &mut normalized, &mut predicted],
            sensitive,
        );
    }
    let json = |v: &Option<Value>| {
        v.as_ref()
            .map_or_else(|| "null".to_owned(), Value::to_string)
    };
    ResourceDiff {
        group: m.group.clone(),
        kind: m.kind.clone(),
        namespace: m.namespace.clone(),
        name: m.name.clone(),
        target_state: json(&target),
        live_state: json(&live),
        diff: String::new(),
        hook: m.hook,
        normalized_live_state: json(&normalized),
        predicted_live_state: json(&predicted),
        resource_version: live
            .as_ref()
            .and_then(|l| l.pointer("/metadata/resourceVersion"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        // As Argo CD: a resource only live (to prune) is not "modified"; one only desired is.
        modified: match (&m.target, &m.live) {
            (Some(_), Some(_)) => m.modified,
            (Some(_), None) => true,
            _ => false,
        },
    }
}

/// `live` with `target`'s fields set over it (objects merged key by key, anything else
/// replaced): the state a sync would leave.
pub fn merged(live: &Value, target: &Value) -> Value {
    match (live, target) {
        (Value::Object(l), Value::Object(t)) => {
            let mut out = l.clone();
            for (k, tv) in t {
                let v = match l.get(k) {
                    Some(lv) => merged(lv, tv),
                    None => tv.clone(),
                };
                out.insert(k.clone(), v);
            }
            Value::Object(out)
        }
        _ => target.clone(),
    }
}

/// Folds a Secret's `stringData` into `data` (base64), as Kubernetes and Argo CD do.
fn normalize_secret(obj: &mut Value) {
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(string_data)) = map.remove("stringData") {
        let data = map
            .entry("data")
            .or_insert_with(|| Value::Object(Map::new()));
        if !data.is_object() {
            *data = Value::Object(Map::new());
        }
        if let Some(data) = data.as_object_mut() {
            for (k, v) in string_data {
                let encoded = match v {
                    Value::String(s) => {
                        Value::String(base64::engine::general_purpose::STANDARD.encode(s))
                    }
                    other => other,
                };
                data.insert(k, encoded);
            }
        }
    }
    if let Some(Value::Object(data)) = map.get_mut("data") {
        for v in data.values_mut() {
            if v.is_null() {
                *v = Value::String(String::new());
            }
        }
    }
}

/// The `last-applied-configuration` annotation of `obj`: `Some(Ok)` when it is JSON.
fn last_applied(obj: &Value) -> Option<Result<Value, ()>> {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .and_then(Value::as_str)
        .map(|s| serde_json::from_str::<Value>(s).map_err(|_| ()))
}

/// Hides every `data` value, and the values of the `sensitive` annotations, of the given
/// versions of one Secret (see the module's documentation): equal values across the
/// versions get the same replacement.
pub fn hide_secret_values(objects: [&mut Option<Value>; 4], sensitive: &[String]) {
    let mut objects: Vec<&mut Value> = objects.into_iter().filter_map(Option::as_mut).collect();
    // The annotations' own copies, hidden with the same replacements, then written back.
    let mut annotations: Vec<(usize, Option<Value>)> = Vec::new();
    for (i, o) in objects.iter_mut().enumerate() {
        normalize_secret(o);
        match last_applied(o) {
            Some(Ok(mut inner)) => {
                normalize_secret(&mut inner);
                annotations.push((i, Some(inner)));
            }
            Some(Err(())) => annotations.push((i, None)),
            None => {}
        }
    }
    let mut keys: Vec<String> = Vec::new();
    let data_keys = |v: &Value| -> Vec<String> {
        v.get("data")
            .and_then(Value::as_object)
            .map(|d| d.keys().cloned().collect())
            .unwrap_or_default()
    };
    for o in &objects {
        keys.extend(data_keys(o));
    }
    for (_, a) in &annotations {
        keys.extend(a.iter().flat_map(&data_keys));
    }
    keys.sort();
    keys.dedup();
    let fields = keys.iter().map(|k| ("data", k.as_str())).chain(
        sensitive
            .iter()
            .filter(|k| *k != LAST_APPLIED)
            .map(|k| ("annotations", k.as_str())),
    );
    for (field, key) in fields {
        let mut replacements: HashMap<String, String> = HashMap::new();
        let mut next = HIDDEN.to_owned();
        let mut hide = |v: &mut Value| {
            let map = match field {
                "data" => v.get_mut("data"),
                _ => v.pointer_mut("/metadata/annotations"),
            };
            let Some(slot) = map.and_then(|d| d.get_mut(key)) else {
                return;
            };
            let plain = match &*slot {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let r = replacements.entry(plain).or_insert_with(|| {
                let r = next.clone();
                next.push_str("++++");
                r
            });
            *slot = Value::String(r.clone());
        };
        for o in objects.iter_mut() {
            hide(o);
        }
        for (_, a) in annotations.iter_mut() {
            if let Some(a) = a {
                hide(a);
            }
        }
    }
    let hide_whole = sensitive.iter().any(|k| k == LAST_APPLIED);
    for (i, a) in annotations {
        let text = match a {
            Some(a) if !hide_whole => a.to_string(),
            _ => HIDDEN.to_owned(),
        };
        if let Some(ann) = objects[i]
            .pointer_mut("/metadata/annotations")
            .and_then(Value::as_object_mut)
        {
            ann.insert(LAST_APPLIED.to_owned(), Value::String(text));
        }
    }
}
