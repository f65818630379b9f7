//! Structural schemas of custom resources: a CRD version's `schema.openAPIV3Schema`
//! prunes and validates every write of its custom resources (create, update, patches,
//! server-side apply, the status subresource), as the real API server does.
//!
//! What is faithful:
//! - pruning: fields the schema does not define are dropped, at any depth, unless the
//!   node says `x-kubernetes-preserve-unknown-fields: true`; a map's values follow
//!   `additionalProperties`; a `null` in a field that is not `nullable` is dropped;
//!   `apiVersion`, `kind` and `metadata` are left alone;
//! - validation: `type` (`object`, `array`, `string`, `integer`, `number`, `boolean`),
//!   `nullable`, `required`, `enum`, `x-kubernetes-int-or-string`, and `format:
//!   date-time` (RFC 3339); every violation is collected and answered as one 422 Invalid
//!   with a cause per field, worded as the real server words it
//!   (`Application.argoproj.io "a" is invalid: status.operationState.operation: Required
//!   value`);
//! - scope: with a status subresource, a `/status` write validates `status` only and a
//!   main write everything else; without one, every write validates the whole object;
//! - ratcheting (on by default since Kubernetes 1.30): on update, a node whose value equals
//!   the old object's at the same path is not validated again, so an object stored before
//!   its schema tightened can still be written; as the real server, lists are not
//!   correlated item by item (a changed list is validated whole).
//!
//! What is simplified: no defaulting, no CEL rules (`x-kubernetes-validations`), no
//! string, number or list limits (`pattern`, `maxLength`, `minimum`, `maxItems`, …), no
//! other `format`s, no `x-kubernetes-list-type` uniqueness; `metadata` is not pruned to
//! ObjectMeta; the schema is not checked for being structural when the CRD is written.
//! Objects written directly through the test handle ([`crate::FakeApiServer::insert`])
//! are neither pruned nor validated.

use serde_json::{Map, Value};

use super::crd::CRD_RES;
use super::ops::Sub;
use super::registry::ResourceKind;
use super::status::{ApiError, Cause};
use super::store::{ObjKey, Store};

/// The root fields the schema neither prunes nor validates here.
const ROOT_META: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// The `openAPIV3Schema` of `kind`'s version, when a stored CRD defines `kind` and gives
/// that version a schema.
fn schema_of<'a>(store: &'a Store, kind: &ResourceKind) -> Option<&'a Value> {
    let key = ObjKey {
        res: CRD_RES,
        namespace: String::new(),
        name: format!("{}.{}", kind.plural, kind.group),
    };
    store
        .get(&key)?
        .pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(kind.version))?
        .pointer("/schema/openAPIV3Schema")
}

/// Prunes `obj` (about to be stored as `name`) by its CRD's schema and validates it
/// against the schema; `old` is the stored object on update. Kinds without a CRD schema
/// pass unchanged.
pub fn check(
    store: &Store,
    kind: &ResourceKind,
    name: &str,
    obj: &mut Value,
    old: Option<&Value>,
    sub: Sub,
) -> Result<(), ApiError> {
    let Some(schema) = schema_of(store, kind) else {
        return Ok(());
    };
    prune(obj, schema, true);
    let in_scope = |field: &str| match (sub, kind.status) {
        (Sub::Status, _) => field == "status",
        (Sub::Main, true) => field != "status",
        (Sub::Main, false) => true,
    };
    let mut walk = Walk::default();
    let Value::Object(root) = &*obj else {
        return Ok(()); // checked by the caller: the body is an object
    };
    for required in strings(schema, "required") {
        if in_scope(required) && !ROOT_META.contains(&required) && !root.contains_key(required) {
            walk.push(required, "FieldValueRequired", "Required value".into());
        }
    }
    let props = schema.get("properties").and_then(Value::as_object);
    for (field, value) in root {
        if ROOT_META.contains(&field.as_str()) || !in_scope(field) {
            continue;
        }
        if let Some(s) = props.and_then(|p| p.get(field)) {
            walk.path.push(Seg::Key(field.clone()));
            walk.node(value, s, old.and_then(|o| o.get(field)));
            walk.path.pop();
        }
    }
    if walk.causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid_causes(
            kind.group,
            kind.kind,
            name,
            walk.causes,
        ))
    }
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

fn strings<'a>(schema: &'a Value, key: &str) -> impl Iterator<Item = &'a str> {
    schema
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// The schema of `field` of an object node: its property, else `additionalProperties`
/// (a schema; `true` keeps the field unchecked).
fn field_schema<'a>(schema: &'a Value, field: &str) -> Option<&'a Value> {
    schema
        .get("properties")
        .and_then(|p| p.get(field))
        .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()))
}

/// Drops the fields `schema` does not define (see the module documentation).
fn prune(value: &mut Value, schema: &Value, root: bool) {
    match value {
        Value::Object(fields) => {
            let keep_unknown = flag(schema, "x-kubernetes-preserve-unknown-fields")
                || schema.get("additionalProperties") == Some(&Value::Bool(true));
            fields.retain(|field, child| {
                if root && ROOT_META.contains(&field.as_str()) {
                    return true;
                }
                match field_schema(schema, field) {
                    Some(s) if child.is_null() => flag(s, "nullable"),
                    Some(s) => {
                        prune(child, s, false);
                        true
                    }
                    None => keep_unknown,
                }
            });
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for item in items {
                    prune(item, s, false);
                }
            }
        }
        _ => {}
    }
}

/// One step of a field path.
#[derive(Debug, Clone)]
enum Seg {
    Key(String),
    Index(usize),
}

/// A validation pass: where it is and what it found.
#[derive(Debug, Default)]
struct Walk {
    path: Vec<Seg>,
    causes: Vec<Cause>,
}

/// The JSON type name the real server reports for `v`.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn has_type(want: &str, v: &Value) -> bool {
    match want {
        "number" => v.is_number(),
        other => type_name(v) == other,
    }
}

/// `v` as the real server quotes a value in a message: strings quoted, others as JSON.
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

impl Walk {
    fn field(&self, last: Option<&str>) -> String {
        fn key(out: &mut String, k: &str) {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(k);
        }
        let mut out = String::new();
        for seg in &self.path {
            match seg {
                Seg::Key(k) => key(&mut out, k),
                Seg::Index(i) => out.push_str(&format!("[{i}]")),
            }
        }
        if let Some(l) = last {
            key(&mut out, l);
        }
        out
    }

    /// Records a cause at the current path, or at its child `last`.
    fn push(&mut self, last: &str, reason: &'static str, message: String) {
        let field = self.field((!last.is_empty()).then_some(last));
        self.causes.push(Cause {
            reason,
            message,
            field,
        });
    }

    fn invalid(&mut self, value: &str, why: &str) {
        let field = self.field(None);
        self.push(
            "",
            "FieldValueInvalid",
            format!("Invalid value: {value:?}: {field} in body {why}"),
        );
    }

    /// Validates `v` against `schema`; `old` is the old object's value at this path
    /// (ratcheting: an unchanged node is not validated again).
    fn node(&mut self, v: &Value, schema: &Value, old: Option<&Value>) {
        if old == Some(v) {
            return;
        }
        if v.is_null() && flag(schema, "nullable") {
            return;
        }
        if flag(schema, "x-kubernetes-int-or-string") {
            if !matches!(type_name(v), "integer" | "string") {
                let actual = type_name(v);
                self.invalid(
                    actual,
                    &format!("must be of type integer,string: {actual:?}"),
                );
            }
            return;
        }
        if let Some(want) = schema.get("type").and_then(Value::as_str)
            && !has_type(want, v)
        {
            let actual = type_name(v);
            self.invalid(actual, &format!("must be of type {want}: {actual:?}"));
            return;
        }
        if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
            && !allowed.contains(v)
        {
            let listed: Vec<String> = allowed.iter().map(shown).collect();
            self.push(
                "",
                "FieldValueNotSupported",
                format!(
                    "Unsupported value: {}: supported values: {}",
                    shown(v),
                    listed.join(", ")
                ),
            );
        }
        if schema.get("format").and_then(Value::as_str) == Some("date-time")
            && let Some(text) = v.as_str()
            && !is_date_time(text)
        {
            self.invalid(text, &format!("must be of type date-time: {text:?}"));
        }
        match v {
            Value::Object(fields) => self.object(fields, schema, old),
            Value::Array(items) => {
                if let Some(item_schema) = schema.get("items") {
                    for (i, item) in items.iter().enumerate() {
                        self.path.push(Seg::Index(i));
                        self.node(item, item_schema, None);
                        self.path.pop();
                    }
                }
            }
            _ => {}
        }
    }

    fn object(&mut self, fields: &Map<String, Value>, schema: &Value, old: Option<&Value>) {
        for required in strings(schema, "required") {
            if !fields.contains_key(required) {
                self.push(required, "FieldValueRequired", "Required value".into());
            }
        }
        for (field, child) in fields {
            if let Some(s) = field_schema(schema, field) {
                self.path.push(Seg::Key(field.clone()));
                self.node(child, s, old.and_then(|o| o.get(field)));
                self.path.pop();
            }
        }
    }
}

/// RFC 3339 date-time: `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)` (`t`/`z` accepted).
fn is_date_time(s: &str) -> bool {
    let b = s.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    if !(digits(0..4) && at(4, b'-') && digits(5..7) && at(7, b'-') && digits(8..10)) {
        return false;
    }
    if !(matches!(b.get(10), Some(b'T' | b't')) && digits(11..13) && at(13, b':')) {
        return false;
    }
    if !(digits(14..16) && at(16, b':') && digits(17..19)) {
        return false;
    }
    let num =
        |r: std::ops::Range<usize>| s.get(r).and_then(|t| t.parse::<u32>().ok()).unwrap_or(99);
    if !(1..=12).contains(&num(5..7))
        || !(1..=31).contains(&num(8..10))
        || num(11..13) > 23
        || num(14..16) > 59
        || num(17..19) > 60
    {
        return false;
    }
    let mut i = 19;
    if at(i, b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    match b.get(i) {
        Some(b'Z' | b'z') => i + 1 == b.len(),
        Some(b'+' | b'-') => {
            digits(i + 1..i + 3) && at(i + 3, b':') && digits(i + 4..i + 6) && i + 6 == b.len()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests;
