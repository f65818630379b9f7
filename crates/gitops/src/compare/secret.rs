//! A Secret's write-only `stringData`: the API server merges it into `data` (each value
//! base64-encoded, `stringData` winning over a `data` entry of the same key) and never
//! returns it. A desired Secret is compared as the server stores it; compared as written,
//! it would never be Synced, and self-heal would rewrite it on every refresh.

use std::borrow::Cow;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};

/// `desired` as the API server stores it, for a core `v1` Secret with `stringData`;
/// otherwise `desired` itself.
pub(crate) fn as_stored<'a>(group: &str, kind: &str, desired: &'a Value) -> Cow<'a, Value> {
    let string_data = match desired.get("stringData") {
        Some(Value::Object(sd)) if group.is_empty() && kind == "Secret" => sd,
        _ => return Cow::Borrowed(desired),
    };
    let mut stored = desired.clone();
    let obj = stored
        .as_object_mut()
        .expect("an object: it has stringData");
    obj.remove("stringData");
    let data = obj
        .entry("data")
        .or_insert_with(|| Value::Object(Map::new()));
    if !data.is_object() {
        // A malformed `data` is compared as written; the server refuses it anyway.
        return Cow::Borrowed(desired);
    }
    let data = data.as_object_mut().expect("checked");
    for (key, value) in string_data {
        let text = match value {
            Value::String(s) => s.clone(),
            // The server refuses a non-string; compare what was written.
            _ => return Cow::Borrowed(desired),
        };
        data.insert(key.clone(), Value::String(STANDARD.encode(text)));
    }
    Cow::Owned(stored)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn string_data_becomes_data_and_wins() {
        let desired = json!({"kind": "Secret", "stringData": {"a": "hi", "b": "new"},
                             "data": {"b": "b2xk", "c": "Yw=="}});
        let stored = as_stored("", "Secret", &desired);
        assert_eq!(
            *stored,
            json!({"kind": "Secret", "data": {"a": "aGk=", "b": "bmV3", "c": "Yw=="}})
        );
    }

    #[test]
    fn other_objects_are_untouched() {
        let cm = json!({"kind": "ConfigMap", "stringData": {"a": "x"}});
        assert!(matches!(as_stored("", "ConfigMap", &cm), Cow::Borrowed(_)));
        let custom = json!({"kind": "Secret", "stringData": {"a": "x"}});
        assert!(matches!(
            as_stored("example.com", "Secret", &custom),
            Cow::Borrowed(_)
        ));
        let plain = json!({"kind": "Secret", "data": {"a": "eA=="}});
        assert!(matches!(as_stored("", "Secret", &plain), Cow::Borrowed(_)));
    }
}
