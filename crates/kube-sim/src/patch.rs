//! Patch formats: JSON merge patch (RFC 7386; also used for strategic merge patch, which
//! the fake treats as a merge patch — lists are replaced, never merged by key), JSON patch
//! (RFC 6902), and the merge and field-set bookkeeping of server-side apply.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::status::ApiError;

/// Applies an RFC 7386 merge patch: objects merge recursively, `null` removes a key,
/// anything else (lists included) replaces.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            if let Value::Object(t) = target {
                for (k, v) in p {
                    if v.is_null() {
                        t.remove(k);
                    } else {
                        merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
        }
        other => *target = other.clone(),
    }
}

fn patch_err(i: usize, why: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        422,
        "Invalid",
        format!(
            "the server rejected our request due to an error in our request: json patch operation {i}: {why}"
        ),
    )
}

/// Applies an RFC 6902 JSON patch (add, remove, replace, move, copy, test). A malformed
/// operation or a failing `test` is a 422 naming the operation's index.
pub fn json_patch(target: &mut Value, ops: &Value) -> Result<(), ApiError> {
    let ops = ops
        .as_array()
        .ok_or_else(|| ApiError::bad_request("json patch must be an array of operations"))?;
    for (i, op) in ops.iter().enumerate() {
        let field = |name: &str| {
            op.get(name)
                .ok_or_else(|| patch_err(i, format!("missing {name:?}")))
        };
        let path = field("path")?
            .as_str()
            .ok_or_else(|| patch_err(i, "\"path\" is not a string"))?;
        let path = parse_pointer(path).map_err(|w| patch_err(i, w))?;
        match field("op")?.as_str().unwrap_or_default() {
            "add" => add(target, &path, field("value")?.clone()).map_err(|w| patch_err(i, w))?,
            "remove" => {
                remove(target, &path).map_err(|w| patch_err(i, w))?;
            }
            "replace" => {
                remove(target, &path).map_err(|w| patch_err(i, w))?;
                add(target, &path, field("value")?.clone()).map_err(|w| patch_err(i, w))?;
            }
            "move" | "copy" => {
                let from = field("from")?
                    .as_str()
                    .ok_or_else(|| patch_err(i, "\"from\" is not a string"))?;
                let from = parse_pointer(from).map_err(|w| patch_err(i, w))?;
                let v = if op["op"] == "move" {
                    remove(target, &from).map_err(|w| patch_err(i, w))?
                } else {
                    get(target, &from)
                        .cloned()
                        .ok_or_else(|| patch_err(i, "\"from\" does not exist"))?
                };
                add(target, &path, v).map_err(|w| patch_err(i, w))?;
            }
            "test" => {
                if get(target, &path) != Some(field("value")?) {
                    return Err(patch_err(i, "test operation does not apply"));
                }
            }
            other => return Err(patch_err(i, format!("unknown op {other:?}"))),
        }
    }
    Ok(())
}

fn parse_pointer(p: &str) -> Result<Vec<String>, String> {
    if p.is_empty() {
        return Ok(Vec::new());
    }
    let rest = p
        .strip_prefix('/')
        .ok_or_else(|| format!("path {p:?} does not start with '/'"))?;
    Ok(rest
        .split('/')
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect())
}

fn get<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, seg| match cur {
        Value::Object(m) => m.get(seg),
        Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

fn parent<'a>(v: &'a mut Value, path: &[String]) -> Result<&'a mut Value, String> {
    let mut cur = v;
    for seg in path {
        cur = match cur {
            Value::Object(m) => m.get_mut(seg),
            Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
            _ => None,
        }
        .ok_or_else(|| format!("path segment {seg:?} does not exist"))?;
    }
    Ok(cur)
}

fn add(target: &mut Value, path: &[String], value: Value) -> Result<(), String> {
    let Some((last, init)) = path.split_last() else {
        *target = value;
        return Ok(());
    };
    match parent(target, init)? {
        Value::Object(m) => {
            m.insert(last.clone(), value);
            Ok(())
        }
        Value::Array(a) => {
            let i = if last == "-" {
                a.len()
            } else {
                last.parse::<usize>()
                    .map_err(|_| format!("bad array index {last:?}"))?
            };
            if i > a.len() {
                return Err(format!("array index {i} out of bounds"));
            }
            a.insert(i, value);
            Ok(())
        }
        _ => Err("parent is not an object or array".into()),
    }
}

fn remove(target: &mut Value, path: &[String]) -> Result<Value, String> {
    let (last, init) = path.split_last().ok_or("cannot remove the root")?;
    match parent(target, init)? {
        Value::Object(m) => m
            .remove(last)
            .ok_or_else(|| format!("{last:?} does not exist")),
        Value::Array(a) => {
            let i = last
                .parse::<usize>()
                .map_err(|_| format!("bad array index {last:?}"))?;
            if i >= a.len() {
                return Err(format!("array index {i} out of bounds"));
            }
            Ok(a.remove(i))
        }
        _ => Err("parent is not an object or array".into()),
    }
}

/// A field path inside an object (map keys only; lists are atomic).
pub type FieldPath = Vec<String>;

/// The metadata fields server-side apply manages (the rest is identity or server-owned).
pub const APPLIED_METADATA: &[&str] = &["labels", "annotations", "finalizers", "ownerReferences"];

/// The fields an applied configuration sets: every leaf (scalar, list, or empty map) except
/// the identity fields (`apiVersion`, `kind`, `metadata.name`, `metadata.namespace`,
/// `metadata.resourceVersion`, …); of `metadata`, only [`APPLIED_METADATA`] is owned.
pub fn applied_fields(applied: &Value) -> BTreeSet<FieldPath> {
    let mut out = BTreeSet::new();
    if let Value::Object(m) = applied {
        for (k, v) in m {
            match k.as_str() {
                "apiVersion" | "kind" => {}
                "metadata" => {
                    for sub in APPLIED_METADATA {
                        if let Some(x) = v.get(sub) {
                            leaves(x, vec!["metadata".into(), (*sub).into()], &mut out);
                        }
                    }
                }
                _ => leaves(v, vec![k.clone()], &mut out),
            }
        }
    }
    out
}

fn leaves(v: &Value, path: FieldPath, out: &mut BTreeSet<FieldPath>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                let mut p = path.clone();
                p.push(k.clone());
                leaves(x, p, out);
            }
        }
        _ => {
            out.insert(path);
        }
    }
}

/// The `fieldsV1` form of a field set (`{"f:spec": {"f:replicas": {}}}`).
pub fn to_fields_v1(fields: &BTreeSet<FieldPath>) -> Value {
    let mut root = Value::Object(Map::new());
    for path in fields {
        let mut cur = &mut root;
        for seg in path {
            let Value::Object(m) = cur else { break };
            cur = m
                .entry(format!("f:{seg}"))
                .or_insert_with(|| Value::Object(Map::new()));
        }
    }
    root
}

/// The field set of a `fieldsV1` value (inverse of [`to_fields_v1`]).
pub fn from_fields_v1(v: &Value) -> BTreeSet<FieldPath> {
    fn walk(v: &Value, path: FieldPath, out: &mut BTreeSet<FieldPath>) {
        let children: Vec<(&String, &Value)> = v
            .as_object()
            .map(|m| m.iter().filter(|(k, _)| k.starts_with("f:")).collect())
            .unwrap_or_default();
        if children.is_empty() {
            if !path.is_empty() {
                out.insert(path);
            }
            return;
        }
        for (k, x) in children {
            let mut p = path.clone();
            p.push(k[2..].to_string());
            walk(x, p, out);
        }
    }
    let mut out = BTreeSet::new();
    walk(v, Vec::new(), &mut out);
    out
}

/// The value at a field path.
pub fn value_at<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, seg| cur.get(seg))
}

/// Removes the value at a field path (and maps left empty by it, up to the top level).
pub fn remove_at(v: &mut Value, path: &[String]) {
    let Some((last, init)) = path.split_last() else {
        return;
    };
    let mut cur = &mut *v;
    for seg in init {
        match cur.get_mut(seg) {
            Some(next) => cur = next,
            None => return,
        }
    }
    if let Value::Object(m) = cur {
        m.remove(last);
    }
    if init.len() > 1 && value_at(v, init).is_some_and(|x| x.as_object().is_some_and(Map::is_empty))
    {
        remove_at(v, init);
    }
}

/// Whether two field paths overlap (one is a prefix of the other).
pub fn overlaps(a: &[String], b: &[String]) -> bool {
    a.iter().zip(b).all(|(x, y)| x == y)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn merge_patch_rfc7386() {
        let mut t = json!({"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]});
        merge_patch(
            &mut t,
            &json!({"a": "z", "c": {"f": null}, "l": [3], "n": {"x": 1}}),
        );
        assert_eq!(
            t,
            json!({"a": "z", "c": {"d": "e"}, "l": [3], "n": {"x": 1}})
        );
    }

    #[test]
    fn json_patch_ops_and_errors() {
        let mut t = json!({"a": {"b": [1, 2]}, "x~y": 1});
        json_patch(
            &mut t,
            &json!([
                {"op": "add", "path": "/a/b/-", "value": 3},
                {"op": "replace", "path": "/a/b/0", "value": 0},
                {"op": "remove", "path": "/x~0y"},
                {"op": "copy", "from": "/a/b", "path": "/c"},
                {"op": "move", "from": "/c", "path": "/d"},
                {"op": "test", "path": "/d/2", "value": 3},
            ]),
        )
        .unwrap();
        assert_eq!(t, json!({"a": {"b": [0, 2, 3]}, "d": [0, 2, 3]}));
        let e = json_patch(&mut t, &json!([{"op": "test", "path": "/d/0", "value": 9}]));
        assert_eq!(e.unwrap_err().code, 422);
        let e = json_patch(&mut t, &json!([{"op": "remove", "path": "/nope"}]));
        assert!(e.unwrap_err().message.contains("operation 0"));
    }

    #[test]
    fn fields_round_trip() {
        let applied = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "labels": {"a": "1"}},
            "data": {"k": "v", "l": "w"},
        });
        let f = applied_fields(&applied);
        assert_eq!(f.len(), 3);
        assert_eq!(from_fields_v1(&to_fields_v1(&f)), f);
        let mut obj = applied.clone();
        remove_at(&mut obj, &["metadata".into(), "labels".into(), "a".into()]);
        assert_eq!(obj["metadata"], json!({"name": "x"}));
    }
}
