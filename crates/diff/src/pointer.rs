//! RFC 6901 JSON pointers, removed as a JSON Patch `remove` removes them.

use serde_json::Value;

/// Removes what `pointer` names from `value`; false (and nothing changed) when it names
/// nothing there, or is not a pointer (Argo CD skips such a patch).
pub(crate) fn remove(value: &mut Value, pointer: &str) -> bool {
    if pointer.is_empty() || !pointer.starts_with('/') {
        return false;
    }
    let (parent, last) = pointer.rsplit_once('/').unwrap_or(("", pointer));
    let last = unescape(last);
    let Some(parent) = (if parent.is_empty() {
        Some(value)
    } else {
        value.pointer_mut(parent)
    }) else {
        return false;
    };
    match parent {
        Value::Object(map) => map.remove(&last).is_some(),
        Value::Array(items) => match last.parse::<usize>() {
            Ok(i) if i < items.len() && (last == "0" || !last.starts_with('0')) => {
                items.remove(i);
                true
            }
            _ => false,
        },
        _ => false,
    }
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::remove;

    #[test]
    fn removes_fields_and_elements_and_skips_what_is_not_there() {
        let mut v = json!({"spec": {"replicas": 3, "a/b": 1, "m~n": 2, "list": [1, 2, 3]}});
        assert!(remove(&mut v, "/spec/replicas"));
        assert!(remove(&mut v, "/spec/a~1b"));
        assert!(remove(&mut v, "/spec/m~0n"));
        assert!(remove(&mut v, "/spec/list/1"));
        assert_eq!(v, json!({"spec": {"list": [1, 3]}}));
        for missing in [
            "/spec/replicas",
            "/spec/list/7",
            "/spec/list/01",
            "/nope/x",
            "",
            "spec",
        ] {
            assert!(!remove(&mut v, missing), "{missing}");
        }
        assert_eq!(v, json!({"spec": {"list": [1, 3]}}));
    }
}
