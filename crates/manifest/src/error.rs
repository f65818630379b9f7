//! What can go wrong while loading, and what is worth telling without failing.
//!
//! Every message names the file (or a source name such as `<stdin>`), the object
//! (`Secret argocd/cluster-foo`, `document 3`, `clusters[4]`) and, where there is one, the
//! field (`data.server`), so the operator can go straight to the line to fix.

use std::fmt;
use std::path::PathBuf;

/// Why a file could not be turned into the fleet model. Nothing is returned with an error:
/// a file loads whole or not at all.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read from disk.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The path that was opened.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// The bytes are not UTF-8 text, so they are neither YAML nor JSON.
    #[error("{file}: not UTF-8 text (invalid byte at offset {offset})")]
    NotUtf8 {
        /// File path or source name.
        file: String,
        /// Byte offset of the first invalid byte.
        offset: usize,
    },
    /// The text is not well-formed YAML or JSON (the message gives line and column).
    #[error("{file}: {message}")]
    Syntax {
        /// File path or source name.
        file: String,
        /// The parser's message.
        message: String,
    },
    /// A document or list item has a `kind` this input does not accept.
    #[error(
        "{file}: {object}: {} is not accepted here; expected {expected}",
        describe_kind(kind)
    )]
    UnknownKind {
        /// File path or source name.
        file: String,
        /// Which document (and list item), e.g. `document 2, items[5]`.
        object: String,
        /// The `kind` found (empty when the object has none).
        kind: String,
        /// What this input accepts.
        expected: String,
    },
    /// A document is well-formed but not shaped like anything this input reads.
    #[error("{file}: {object}: {message}")]
    Document {
        /// File path or source name.
        file: String,
        /// Which document, e.g. `document 2`.
        object: String,
        /// What is wrong.
        message: String,
    },
    /// A field is missing, unknown, of the wrong type, or has a value the model cannot take.
    #[error("{file}: {object}: {field}: {message}")]
    Field {
        /// File path or source name.
        file: String,
        /// The object, e.g. `Secret argocd/cluster-foo` or `clusters[4]`.
        object: String,
        /// The field's path inside the object, e.g. `data.server`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
}

impl LoadError {
    /// The file path or source name the error is about.
    pub fn file(&self) -> String {
        match self {
            LoadError::Read { path, .. } => path.display().to_string(),
            LoadError::NotUtf8 { file, .. }
            | LoadError::Syntax { file, .. }
            | LoadError::UnknownKind { file, .. }
            | LoadError::Document { file, .. }
            | LoadError::Field { file, .. } => file.clone(),
        }
    }

    /// The field the error is about, when it is about one.
    pub fn field(&self) -> Option<&str> {
        match self {
            LoadError::Field { field, .. } => Some(field),
            _ => None,
        }
    }
}

/// Something odd in the input that the loader worked around (as Argo CD would), which the
/// operator should still see. Rendered as one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadWarning {
    /// File path or source name.
    pub file: String,
    /// The object, e.g. `Secret argocd/cluster-foo`.
    pub object: String,
    /// The field, when the warning is about one.
    pub field: Option<String>,
    /// What was found and what was done about it.
    pub message: String,
}

impl fmt::Display for LoadWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: ", self.file, self.object)?;
        if let Some(field) = &self.field {
            write!(f, "{field}: ")?;
        }
        // Messages quote user values with `{:?}`, so they never contain a raw newline; the
        // replace is a belt-and-braces guarantee of the one-line promise.
        f.write_str(&self.message.replace('\n', " "))
    }
}

/// A loaded value and the warnings met on the way.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Loaded<T> {
    /// What was read.
    pub value: T,
    /// Oddities the loader worked around, in input order.
    pub warnings: Vec<LoadWarning>,
}

impl<T> Loaded<T> {
    /// Applies `f` to the value, keeping the warnings.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Loaded<U> {
        Loaded {
            value: f(self.value),
            warnings: self.warnings,
        }
    }
}

/// Collects warnings and builds errors for one input file.
#[derive(Debug)]
pub(crate) struct Ctx {
    pub(crate) file: String,
    pub(crate) warnings: Vec<LoadWarning>,
}

impl Ctx {
    pub(crate) fn new(file: &str) -> Self {
        Ctx {
            file: file.to_owned(),
            warnings: Vec::new(),
        }
    }

    pub(crate) fn warn(&mut self, object: &str, field: Option<&str>, message: String) {
        self.warnings.push(LoadWarning {
            file: self.file.clone(),
            object: object.to_owned(),
            field: field.map(str::to_owned),
            message,
        });
    }

    pub(crate) fn field_error(&self, object: &str, field: &str, message: String) -> LoadError {
        LoadError::Field {
            file: self.file.clone(),
            object: object.to_owned(),
            field: field.to_owned(),
            message,
        }
    }

    pub(crate) fn document_error(&self, object: &str, message: String) -> LoadError {
        LoadError::Document {
            file: self.file.clone(),
            object: object.to_owned(),
            message,
        }
    }

    pub(crate) fn finish<T>(self, value: T) -> Loaded<T> {
        Loaded {
            value,
            warnings: self.warnings,
        }
    }

    /// Turns a typed-deserialisation failure into an error naming object and field.
    ///
    /// With `split`, the path is cut after its first sequence index (`clusters[4]`), which
    /// names the object, and the rest names the field; without an index, or without
    /// `split`, `base` names the object and the whole path is the field.
    pub(crate) fn path_error(
        &self,
        base: &str,
        split: bool,
        path: &serde_path_to_error::Path,
        message: String,
    ) -> LoadError {
        let (object, mut field) = split_path(base, split, path);
        if field.is_empty() {
            // serde reports a missing field at the enclosing object; the name is in the
            // message.
            match missing_field(&message) {
                Some(name) => field = name.to_owned(),
                None => return self.document_error(&object, message),
            }
        }
        self.field_error(&object, &field, message)
    }
}

/// See [`Ctx::path_error`].
fn split_path(base: &str, split: bool, path: &serde_path_to_error::Path) -> (String, String) {
    use serde_path_to_error::Segment;
    let mut object = None;
    let mut field = String::new();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } if split && object.is_none() => {
                object = Some(format!("{field}[{index}]"));
                field.clear();
            }
            Segment::Seq { index } => field.push_str(&format!("[{index}]")),
            Segment::Map { key } => push_key(&mut field, key),
            Segment::Enum { variant } => push_key(&mut field, variant),
            // The segment of a key that failed to deserialise (e.g. a duplicate): the
            // message names it.
            Segment::Unknown => {}
        }
    }
    (object.unwrap_or_else(|| base.to_owned()), field)
}

/// The field name in serde's "missing field `name`" message.
fn missing_field(message: &str) -> Option<&str> {
    message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split_once('`'))
        .map(|(name, _)| name)
}

/// `kind "Foo"`, or a phrase for an object that has none.
fn describe_kind(kind: &str) -> String {
    if kind.is_empty() {
        "an object without kind".to_owned()
    } else {
        format!("kind {kind:?}")
    }
}

/// Appends a map key to a dotted path; keys that contain dots or slashes (label and
/// annotation keys) are bracketed so the path stays readable.
fn push_key(path: &mut String, key: &str) {
    if key.contains(['.', '/', '[', ']', ' ']) || key.is_empty() {
        path.push_str(&format!("[{key}]"));
    } else {
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(key);
    }
}

/// `Kind namespace/name`, `Kind name`, or the fallback locator when the object has no name.
pub(crate) fn object_name(
    kind: &str,
    namespace: Option<&str>,
    name: Option<&str>,
    fallback: &str,
) -> String {
    match (namespace, name) {
        (_, None) | (_, Some("")) => fallback.to_owned(),
        (Some(ns), Some(name)) if !ns.is_empty() => {
            format!("{kind} {}/{}", ns.escape_debug(), name.escape_debug())
        }
        (_, Some(name)) => format!("{kind} {}", name.escape_debug()),
    }
}
