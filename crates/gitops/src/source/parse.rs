//! One manifest file's bytes → Kubernetes objects: YAML (multi-document) or JSON, `List`
//! kinds flattened, each object's identity checked. Pure: no Git, no I/O; arbitrary bytes
//! give objects or a [`ManifestError`], never a panic (property-tested).

use serde_json::Value;

use super::error::{Location, ManifestError};

/// The identity of a Kubernetes object as written in its manifest.
///
/// `namespace` is what the manifest says: the caller defaults it to the application's
/// destination namespace when the kind is namespaced (which only the cluster's discovery
/// knows).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectIdentity {
    /// `apiVersion`, e.g. `apps/v1` or `v1`.
    pub api_version: String,
    /// `kind`, e.g. `Deployment`.
    pub kind: String,
    /// `metadata.namespace`, when set and non-empty.
    pub namespace: Option<String>,
    /// `metadata.name` (empty for an object with only `metadata.generateName`).
    pub name: String,
}

impl ObjectIdentity {
    /// The API group: `apiVersion` before its `/`, empty for the core group (`v1`).
    pub fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
    }
}

impl std::fmt::Display for ObjectIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = self.group();
        if !group.is_empty() {
            write!(f, "{group}/")?;
        }
        write!(f, "{} ", self.kind)?;
        if let Some(ns) = &self.namespace {
            write!(f, "{ns}/")?;
        }
        write!(f, "{}", self.name)
    }
}

/// One desired object and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// The object as parsed (YAML is read as JSON values).
    pub object: Value,
    /// Its identity.
    pub identity: ObjectIdentity,
    /// Its file, document and `List` item.
    pub location: Location,
}

/// How a file is parsed, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    /// `.yaml` or `.yml`: one or more documents.
    Yaml,
    /// `.json`: one document.
    Json,
}

impl FileFormat {
    /// The format of a file name, or `None` when it is not a manifest (extensions are
    /// matched case-sensitively, as Argo CD does).
    pub fn of(file_name: &str) -> Option<FileFormat> {
        if file_name.ends_with(".yaml") || file_name.ends_with(".yml") {
            Some(FileFormat::Yaml)
        } else if file_name.ends_with(".json") {
            Some(FileFormat::Json)
        } else {
            None
        }
    }
}

/// Parses one manifest file (`file` is its path, for messages) into objects, in file order;
/// more than `max_objects` objects is [`ManifestError::TooManyObjects`], found while
/// parsing: a file of a hundred thousand tiny documents is not held in memory first.
pub fn parse_file(
    file: &str,
    format: FileFormat,
    bytes: &[u8],
    max_objects: usize,
) -> Result<Vec<Manifest>, ManifestError> {
    let at = |document| Location {
        file: file.to_owned(),
        document,
        item: None,
    };
    let format_name = match format {
        FileFormat::Yaml => "YAML",
        FileFormat::Json => "JSON",
    };
    let text = std::str::from_utf8(bytes).map_err(|e| ManifestError::Syntax {
        at: at(0),
        format: format_name,
        line: None,
        message: format!("not UTF-8: {e}"),
    })?;
    // Editors on some platforms prepend a byte-order mark; neither parser wants it.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let docs: Vec<Value> = match format {
        FileFormat::Json => {
            if text.trim().is_empty() {
                Vec::new()
            } else {
                let doc = serde_json::from_str(text).map_err(|e| ManifestError::Syntax {
                    at: at(0),
                    format: "JSON",
                    line: Some(e.line() as u64),
                    message: e.to_string(),
                })?;
                vec![doc]
            }
        }
        FileFormat::Yaml => {
            serde_saphyr::from_multiple_with_options(text, yaml_options(text.len(), max_objects))
                .map_err(|e| match e {
                    serde_saphyr::Error::Budget {
                        breach: serde_saphyr::budget::BudgetBreach::Documents { .. },
                        ..
                    } => ManifestError::TooManyObjects {
                        file: file.to_owned(),
                        max: max_objects,
                    },
                    e => ManifestError::Syntax {
                        at: at(0),
                        format: "YAML",
                        line: e.location().map(|l| l.line()),
                        message: e.to_string(),
                    },
                })?
        }
    };
    let objects = parse_documents(file, docs)?;
    if objects.len() > max_objects {
        return Err(ManifestError::TooManyObjects {
            file: file.to_owned(),
            max: max_objects,
        });
    }
    Ok(objects)
}

/// The manifest YAML options, with at most twice `max_objects` documents (empty documents,
/// which are no objects, are common in rendered output; the exact count is checked after).
fn yaml_options(len: usize, max_objects: usize) -> serde_saphyr::Options {
    let mut options = fleetshard_manifest::yaml_options(len);
    options.budget = options.budget.map(|mut budget| {
        budget.max_documents = budget
            .max_documents
            .min(max_objects.saturating_mul(2).saturating_add(16));
        budget
    });
    options
}

/// The objects of a file's documents (already parsed): each document an object or a
/// `List` of them, `null` documents skipped and not counted.
pub(crate) fn parse_documents(
    file: &str,
    docs: Vec<Value>,
) -> Result<Vec<Manifest>, ManifestError> {
    let mut out = Vec::new();
    // The parser drops empty documents; a document that is only `null` is empty too.
    for (i, doc) in docs.into_iter().filter(|d| !d.is_null()).enumerate() {
        let at = Location {
            file: file.to_owned(),
            document: i + 1,
            item: None,
        };
        collect(at, doc, &mut out)?;
    }
    Ok(out)
}

/// Appends one document's objects: itself, or a list's items.
fn collect(at: Location, doc: Value, out: &mut Vec<Manifest>) -> Result<(), ManifestError> {
    let invalid = |at: &Location, message: String| ManifestError::InvalidObject {
        at: at.clone(),
        message,
    };
    if !doc.is_object() {
        return Err(invalid(
            &at,
            format!(
                "expected a Kubernetes object (a mapping), found {}",
                type_name(&doc)
            ),
        ));
    }
    let kind = string_field(&doc, "kind", &at)?;
    let is_list = kind.as_deref().is_some_and(|k| k.ends_with("List"))
        && doc
            .get("items")
            .is_some_and(|i| i.is_array() || i.is_null());
    if !is_list {
        let identity = identity(&doc, &at)?;
        out.push(Manifest {
            object: doc,
            identity,
            location: at,
        });
        return Ok(());
    }
    // Items of a typed list (`ConfigMapList`) may leave out what the list implies.
    let implied_kind = kind
        .as_deref()
        .and_then(|k| k.strip_suffix("List"))
        .filter(|k| !k.is_empty())
        .map(str::to_owned);
    let implied_api_version = string_field(&doc, "apiVersion", &at)?;
    let mut doc = doc;
    let items = match doc.as_object_mut().and_then(|map| map.remove("items")) {
        Some(Value::Array(items)) => items,
        _ => Vec::new(),
    };
    for (j, mut item) in items.into_iter().enumerate() {
        let at = Location {
            item: Some(j),
            ..at.clone()
        };
        let Value::Object(fields) = &mut item else {
            return Err(invalid(
                &at,
                format!(
                    "expected a Kubernetes object (a mapping), found {}",
                    type_name(&item)
                ),
            ));
        };
        if let Some(kind) = &implied_kind
            && fields.get("kind").is_none_or(Value::is_null)
        {
            fields.insert("kind".into(), Value::String(kind.clone()));
            if let Some(v) = &implied_api_version
                && fields.get("apiVersion").is_none_or(Value::is_null)
            {
                fields.insert("apiVersion".into(), Value::String(v.clone()));
            }
        }
        // A list inside a list is not flattened again: Kubernetes has no such thing.
        let identity = identity(&item, &at)?;
        out.push(Manifest {
            object: item,
            identity,
            location: at,
        });
    }
    Ok(())
}

/// The object's identity; every part must be a non-empty string.
fn identity(object: &Value, at: &Location) -> Result<ObjectIdentity, ManifestError> {
    let missing = |field: &str| ManifestError::InvalidObject {
        at: at.clone(),
        message: format!("object has no {field}"),
    };
    let api_version =
        string_field(object, "apiVersion", at)?.ok_or_else(|| missing("apiVersion"))?;
    let kind = string_field(object, "kind", at)?.ok_or_else(|| missing("kind"))?;
    let metadata = match object.get("metadata") {
        None | Some(Value::Null) => return Err(missing("metadata.name")),
        Some(m @ Value::Object(_)) => m,
        Some(other) => {
            return Err(ManifestError::InvalidObject {
                at: at.clone(),
                message: format!("metadata: expected a mapping, found {}", type_name(other)),
            });
        }
    };
    // A hook may have only `generateName`: its name is given by the sync (the name is
    // then empty here).
    let name = match string_field(metadata, "name", at).map_err(prefix_metadata)? {
        Some(name) => name,
        None => match string_field(metadata, "generateName", at).map_err(prefix_metadata)? {
            Some(_) => String::new(),
            None => return Err(missing("metadata.name")),
        },
    };
    let namespace = string_field(metadata, "namespace", at).map_err(prefix_metadata)?;
    Ok(ObjectIdentity {
        api_version,
        kind,
        namespace,
        name,
    })
}

/// Names a metadata field's error by its full path.
fn prefix_metadata(e: ManifestError) -> ManifestError {
    match e {
        ManifestError::InvalidObject { at, message } => ManifestError::InvalidObject {
            at,
            message: format!("metadata.{message}"),
        },
        other => other,
    }
}

/// A string field: `None` when absent, null or empty; an error when of another type.
fn string_field(
    object: &Value,
    field: &str,
    at: &Location,
) -> Result<Option<String>, ManifestError> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(ManifestError::InvalidObject {
            at: at.clone(),
            message: format!("{field}: expected a string, found {}", type_name(other)),
        }),
    }
}

/// The name of a JSON value's type, for messages.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a sequence",
        Value::Object(_) => "a mapping",
    }
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
