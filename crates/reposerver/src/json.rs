//! A strict reader of one JSON object: every key must be read, and [`Obj::finish`] names
//! the first one nobody asked for. `null` reads as absent, as Go's decoder reads it into
//! Argo CD's types.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::error::RequestError;

/// The name of a JSON value's type, for messages.
pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub(crate) fn wrong(path: &str, expected: &'static str, found: &Value) -> RequestError {
    RequestError::WrongType {
        path: path.to_owned(),
        expected,
        found: kind(found),
    }
}

/// One JSON object being read.
pub(crate) struct Obj<'a> {
    path: String,
    map: &'a Map<String, Value>,
    seen: BTreeSet<&'static str>,
}

impl<'a> Obj<'a> {
    /// `value`, which must be an object, found at `path`.
    pub(crate) fn new(path: String, value: &'a Value) -> Result<Self, RequestError> {
        match value {
            Value::Object(map) => Ok(Obj {
                path,
                map,
                seen: BTreeSet::new(),
            }),
            other => Err(wrong(&path, "an object", other)),
        }
    }

    /// The path of `key` inside this object.
    pub(crate) fn at(&self, key: &str) -> String {
        format!("{}.{key}", self.path)
    }

    /// The value of `key`, `None` when absent or `null`.
    pub(crate) fn get(&mut self, key: &'static str) -> Option<&'a Value> {
        self.seen.insert(key);
        self.map.get(key).filter(|v| !v.is_null())
    }

    /// A string (absent: empty).
    pub(crate) fn string(&mut self, key: &'static str) -> Result<String, RequestError> {
        Ok(self.opt_string(key)?.unwrap_or_default())
    }

    /// A string that may be absent.
    pub(crate) fn opt_string(&mut self, key: &'static str) -> Result<Option<String>, RequestError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(wrong(&self.at(key), "a string", other)),
        }
    }

    /// A boolean (absent: false).
    pub(crate) fn bool(&mut self, key: &'static str) -> Result<bool, RequestError> {
        match self.get(key) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(wrong(&self.at(key), "a boolean", other)),
        }
    }

    /// An array's elements with their paths (absent: none).
    pub(crate) fn array(
        &mut self,
        key: &'static str,
    ) -> Result<Vec<(String, &'a Value)>, RequestError> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => {
                let path = self.at(key);
                Ok(items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (format!("{path}[{i}]"), v))
                    .collect())
            }
            Some(other) => Err(wrong(&self.at(key), "an array", other)),
        }
    }

    /// An array of strings.
    pub(crate) fn strings(&mut self, key: &'static str) -> Result<Vec<String>, RequestError> {
        self.array(key)?
            .into_iter()
            .map(|(path, v)| match v {
                Value::String(s) => Ok(s.clone()),
                other => Err(wrong(&path, "a string", other)),
            })
            .collect()
    }

    /// An array of objects, each read by `read`.
    pub(crate) fn objects<T>(
        &mut self,
        key: &'static str,
        mut read: impl FnMut(Obj<'a>) -> Result<T, RequestError>,
    ) -> Result<Vec<T>, RequestError> {
        self.array(key)?
            .into_iter()
            .map(|(path, v)| read(Obj::new(path, v)?))
            .collect()
    }

    /// A nested object, read by `read` (absent: `None`).
    pub(crate) fn object<T>(
        &mut self,
        key: &'static str,
        read: impl FnOnce(Obj<'a>) -> Result<T, RequestError>,
    ) -> Result<Option<T>, RequestError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => read(Obj::new(self.at(key), v)?).map(Some),
        }
    }

    /// An object of strings.
    pub(crate) fn string_map(
        &mut self,
        key: &'static str,
    ) -> Result<BTreeMap<String, String>, RequestError> {
        self.map_of(key, "a string", |v| v.as_str().map(str::to_owned))
    }

    /// An object of booleans.
    pub(crate) fn bool_map(
        &mut self,
        key: &'static str,
    ) -> Result<BTreeMap<String, bool>, RequestError> {
        self.map_of(key, "a boolean", Value::as_bool)
    }

    fn map_of<T>(
        &mut self,
        key: &'static str,
        expected: &'static str,
        read: impl Fn(&Value) -> Option<T>,
    ) -> Result<BTreeMap<String, T>, RequestError> {
        let path = self.at(key);
        match self.get(key) {
            None => Ok(BTreeMap::new()),
            Some(Value::Object(map)) => map
                .iter()
                .map(|(k, v)| match read(v) {
                    Some(t) => Ok((k.clone(), t)),
                    None => Err(wrong(&format!("{path}.{k}"), expected, v)),
                })
                .collect(),
            Some(other) => Err(wrong(&path, "an object", other)),
        }
    }

    /// Done: an error naming the first key nobody read.
    pub(crate) fn finish(self) -> Result<(), RequestError> {
        match self.map.keys().find(|k| !self.seen.contains(k.as_str())) {
            Some(k) => Err(RequestError::UnknownField {
                path: format!("{}.{k}", self.path),
            }),
            None => Ok(()),
        }
    }
}
