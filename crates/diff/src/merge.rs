//! JSON merge patches (RFC 7386), as Argo CD carries ignored fields from the live object
//! into the target under `RespectIgnoreDifferences=true`.

use serde_json::{Map, Value};

/// The merge patch that turns `from` into `to`, `None` when they are equal. `to`'s fields
/// missing in `from` are carried whole; lists are carried whole when they differ. (A field
/// of `from` missing in `to` would be `null`; the normalizer only removes, so it never is.)
pub(crate) fn diff(from: &Value, to: &Value) -> Option<Value> {
    if from == to {
        return None;
    }
    match (from, to) {
        (Value::Object(f), Value::Object(t)) => {
            let mut patch = Map::new();
            for (k, tv) in t {
                match f.get(k) {
                    None => {
                        patch.insert(k.clone(), tv.clone());
                    }
                    Some(fv) => {
                        if let Some(p) = diff(fv, tv) {
                            patch.insert(k.clone(), p);
                        }
                    }
                }
            }
            for k in f.keys().filter(|k| !t.contains_key(*k)) {
                patch.insert(k.clone(), Value::Null);
            }
            Some(Value::Object(patch))
        }
        _ => Some(to.clone()),
    }
}

/// Applies merge patch `patch` to `target`.
pub(crate) fn apply(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(map) = target else { return };
    for (k, v) in patch {
        if v.is_null() {
            map.remove(k);
        } else {
            apply(map.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

/// `patch` less what sets a field `target` does not have (a leaf, or a list, is kept only
/// where `target` has a value at its path).
pub(crate) fn restrict(patch: &Value, target: &Value) -> Option<Value> {
    match (patch, target) {
        (Value::Object(p), Value::Object(t)) => {
            let kept: Map<String, Value> = p
                .iter()
                .filter_map(|(k, v)| {
                    let tv = t.get(k).filter(|v| !v.is_null())?;
                    restrict(v, tv).map(|r| (k.clone(), r))
                })
                .collect();
            (!kept.is_empty()).then_some(Value::Object(kept))
        }
        (Value::Object(_), _) => None,
        _ => Some(patch.clone()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn diff_then_apply_carries_what_was_removed() {
        let live =
            json!({"spec": {"replicas": 5, "template": {"x": [1, 2]}}, "metadata": {"name": "a"}});
        let normalized = json!({"spec": {"template": {"x": [1]}}, "metadata": {"name": "a"}});
        let patch = diff(&normalized, &live).unwrap();
        assert_eq!(
            patch,
            json!({"spec": {"replicas": 5, "template": {"x": [1, 2]}}})
        );
        let mut desired = json!({"spec": {"replicas": 1, "template": {"x": [9], "y": 1}}, "metadata": {"name": "a"}});
        apply(&mut desired, &patch);
        assert_eq!(
            desired,
            json!({"spec": {"replicas": 5, "template": {"x": [1, 2], "y": 1}}, "metadata": {"name": "a"}})
        );
        assert_eq!(diff(&live, &live), None);
    }

    #[test]
    fn restrict_keeps_only_what_the_target_sets() {
        let patch = json!({"spec": {"replicas": 5, "paused": true}, "metadata": {"annotations": {"a": "1"}}});
        let target = json!({"spec": {"replicas": 1}, "metadata": {"name": "x"}});
        assert_eq!(
            restrict(&patch, &target),
            Some(json!({"spec": {"replicas": 5}}))
        );
        assert_eq!(restrict(&json!({"x": 1}), &json!({})), None);
    }
}
