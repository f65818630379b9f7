//! Splitting a file into documents and objects, and deciding what each one is.
//!
//! Kubernetes exports are read in two steps: the text becomes generic documents
//! (`serde_json::Value`, through serde-saphyr for YAML so the parser's budgets apply), then
//! each object is deserialised on its own. That way a type error names the object it is in
//! (`Secret argocd/foo`) and the field (`metadata.labels[team]`), and a document of an
//! unexpected kind is refused by its `kind` before its body is interpreted. A one-document
//! list is read item by item instead (`crate::stream`), so that a large export never exists
//! as one tree of values; this module's whole-document reading is what it must equal.
//!
//! The native fleet file is instead deserialised straight from the text: it is written by
//! hand, so its errors should carry line and column, and serde's `deny_unknown_fields`
//! catches typos.

use std::borrow::Cow;

use fleetshard_core::{App, Cluster};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::app_spec::spec_key;
use crate::error::{Ctx, LoadError};
use crate::{FleetFile, application, native, repository, secret};

/// Which formats an entry point accepts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Accept {
    /// Argo CD cluster Secrets (single, `SecretList`, `List`).
    pub(crate) secrets: bool,
    /// Argo CD repository Secrets and credential templates (read, not skipped as
    /// non-cluster Secrets) and the repository ConfigMaps (known hosts, TLS certificates).
    pub(crate) repositories: bool,
    /// Argo CD Applications (single, `ApplicationList`, `List`).
    pub(crate) apps: bool,
    /// The native fleet file.
    pub(crate) native: bool,
    /// Keep each Application's GitOps spec ([`FleetFile::specs`]); without, it is checked
    /// as always and dropped at once (placement reads none: at 500k Applications the specs
    /// are about half the loader's peak).
    pub(crate) specs: bool,
}
// AppProjects are accepted wherever Applications are: they come with them.

impl Accept {
    pub(crate) const ANY: Accept = Accept {
        secrets: true,
        repositories: true,
        apps: true,
        native: true,
        specs: true,
    };
    pub(crate) const CLUSTERS: Accept = Accept {
        secrets: true,
        repositories: false,
        apps: false,
        native: true,
        specs: true,
    };
    pub(crate) const CLUSTERS_AND_REPOSITORIES: Accept = Accept {
        repositories: true,
        ..Accept::CLUSTERS
    };
    pub(crate) const APPS: Accept = Accept {
        secrets: false,
        repositories: false,
        apps: true,
        native: true,
        specs: true,
    };
    pub(crate) const NATIVE: Accept = Accept {
        secrets: false,
        repositories: false,
        apps: false,
        native: true,
        specs: true,
    };

    /// Human list of what is accepted, for error messages.
    fn expected(self) -> String {
        let mut parts = Vec::new();
        if self.secrets {
            parts.push("Secret, SecretList or List of cluster Secrets");
        }
        if self.repositories {
            parts.push(
                "repository Secrets and ConfigMaps argocd-ssh-known-hosts-cm, argocd-tls-certs-cm",
            );
        }
        if self.apps {
            parts.push("Application, ApplicationList, AppProject, AppProjectList or List of them");
        }
        if self.native {
            parts.push("a fleetshard fleet file (clusters/apps/shards, no kind)");
        }
        parts.join(", or ")
    }
}

/// Parser options for a text of `len` bytes.
///
/// serde-saphyr's budgets bound events, nodes, depth, documents, scalar bytes and alias
/// expansion, which is what keeps hostile input from exhausting memory or stack. Its
/// defaults (a million events, 250k nodes, 1,024 documents) are below a real
/// `kubectl get applications -A -o yaml` of a large fleet, so the count limits grow with the
/// input: outside aliases (which keep their own limits) every event, node or document
/// costs at least one byte of input, so work stays linear in the file's size.
///
/// No source snippets, so that messages stay on one line. Untyped values (everything in
/// Kubernetes objects, which go through `Value`) follow YAML 1.2 rather than 1.1: `n`,
/// `no`, `on` stay strings instead of booleans, and `010` or `1_000` stay strings instead
/// of numbers, so a namespace called `n` or a label value `010` is read as written.
/// The one home of these limits: the Git source (`fleetshard-gitops`) parses manifests with
/// them too, so the two parsers cannot drift apart.
pub fn yaml_options(len: usize) -> serde_saphyr::Options {
    let defaults = serde_saphyr::Budget::default();
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_events: defaults.max_events.max(len),
            max_nodes: defaults.max_nodes.max(len),
            max_documents: defaults.max_documents.max(len / 4),
            max_total_scalar_bytes: defaults.max_total_scalar_bytes.max(len),
        },
        with_snippet: false,
        strict_booleans: true,
        leading_zero_numbers_as_strings: true,
        underscored_numbers_as_strings: true,
    }
}

/// A YAML error for the operator: serde-saphyr's advice to library users is dropped.
pub(crate) fn yaml_message(e: &serde_saphyr::Error) -> String {
    let message = e
        .to_string()
        .replace(", set DuplicateKeyPolicy in Options if acceptable", "");
    format!("invalid YAML: {message}")
}

/// True when the text is JSON: its first non-whitespace character is `{`.
pub(crate) fn is_json(text: &str) -> bool {
    text.trim_start().starts_with('{')
}

/// The kinds of object this crate turns into the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ObjectKind {
    Secret,
    Application,
    AppProject,
    ConfigMap,
}

/// Reads any accepted format into a [`FleetFile`]. A text given owned is freed as soon as
/// it is read, before the objects are finished.
pub(crate) fn parse(
    text: Cow<'_, str>,
    ctx: &mut Ctx,
    accept: Accept,
) -> Result<FleetFile, LoadError> {
    // Editors on some platforms prepend a byte-order mark; neither parser wants it.
    let bom = '\u{feff}';
    let text = match text {
        Cow::Borrowed(t) => Cow::Borrowed(t.strip_prefix(bom).unwrap_or(t)),
        Cow::Owned(mut t) => {
            if t.starts_with(bom) {
                t.drain(..bom.len_utf8());
            }
            Cow::Owned(t)
        }
    };
    // A one-document list is read item by item (`stream`), never as one tree; `stream`
    // checks that it is one document (`stream::one_document`) when it needs to.
    let read = match crate::stream::parse(&text, ctx, accept, is_json(&text)) {
        crate::stream::Streamed::List(result) => {
            drop(text);
            return result.and_then(|listed| listed.finish(ctx));
        }
        crate::stream::Streamed::Document(doc) => Some(doc),
        crate::stream::Streamed::Other => None,
    };
    parse_documents(&text, ctx, accept, read)
}

/// [`parse`] of a borrowed text.
#[cfg(test)]
pub(crate) fn parse_str(text: &str, ctx: &mut Ctx, accept: Accept) -> Result<FleetFile, LoadError> {
    parse(Cow::Borrowed(text), ctx, accept)
}

/// [`parse`] of an owned copy of the text (the text is freed before the objects are
/// finished).
#[cfg(test)]
pub(crate) fn parse_owned(
    text: &str,
    ctx: &mut Ctx,
    accept: Accept,
) -> Result<FleetFile, LoadError> {
    parse(Cow::Owned(text.to_owned()), ctx, accept)
}

/// [`parse`] without the item-by-item reading of lists: what it must answer the same as.
#[cfg(test)]
pub(crate) fn parse_whole(
    text: &str,
    ctx: &mut Ctx,
    accept: Accept,
) -> Result<FleetFile, LoadError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    parse_documents(text, ctx, accept, None)
}

/// Reads the text's documents as values (unless its one document was `read` already),
/// then each object.
fn parse_documents(
    text: &str,
    ctx: &mut Ctx,
    accept: Accept,
    read: Option<Value>,
) -> Result<FleetFile, LoadError> {
    let yaml = |text| serde_saphyr::from_multiple_with_options(text, yaml_options(text.len()));
    let syntax = |message| LoadError::Syntax {
        file: ctx.file.clone(),
        message,
    };
    let (docs, json): (Vec<Value>, bool) = if let Some(doc) = read {
        (vec![doc], is_json(text))
    } else if is_json(text) {
        match serde_json::from_str(text) {
            Ok(doc) => (vec![doc], true),
            // A hand-written YAML flow mapping (`{clusters: []}`) starts with `{` too.
            Err(json_error) => match yaml(text) {
                Ok(docs) => (docs, false),
                Err(_) => return Err(syntax(format!("invalid JSON: {json_error}"))),
            },
        }
    } else {
        let docs = yaml(text).map_err(|e| syntax(yaml_message(&e)))?;
        (docs, false)
    };
    if docs.is_empty() {
        ctx.warn("file", None, "no documents; nothing loaded".to_owned());
        return Ok(FleetFile::default());
    }

    let mut objects = Vec::new();
    for (i, doc) in docs.iter().enumerate() {
        // Empty documents were dropped by the parser, so the number counts non-empty ones.
        let locator = format!("document {}", i + 1);
        let Value::Object(map) = doc else {
            return Err(ctx.document_error(
                &locator,
                format!(
                    "expected a mapping (a Kubernetes object or a fleet file), found {}",
                    value_type(doc)
                ),
            ));
        };
        if !map.contains_key("kind") && !map.contains_key("apiVersion") {
            if !accept.native {
                return Err(unknown_kind(ctx, &locator, "", accept));
            }
            if docs.len() > 1 {
                return Err(ctx.document_error(
                    &locator,
                    format!(
                        "a fleet file (a document without kind) must be alone in its file, \
                         found {} documents",
                        docs.len()
                    ),
                ));
            }
            return native::parse(text, json, ctx);
        }
        collect_objects(ctx, doc, &locator, accept, &mut objects)?;
    }

    let mut out = Objects::default();
    for (kind, value, locator) in objects {
        out.absorb(ctx, accept, kind, value, &locator)?;
    }
    Ok(out.finish())
}

/// A file's objects converted so far, one at a time, in file order.
#[derive(Default)]
pub(crate) struct Objects {
    clusters: Vec<Cluster>,
    apps: Vec<App>,
    specs: std::collections::BTreeMap<(String, String), crate::AppSpec>,
    credentials: std::collections::BTreeMap<String, crate::ClusterCredentials>,
    projects: std::collections::BTreeMap<String, crate::AppProject>,
    repositories: crate::RepoSettings,
    /// Some app was converted from a value (not read straight into its app): the apps are
    /// [`packed`] at the end.
    converted_apps: bool,
}

impl Objects {
    /// Converts one object whose kind was checked, adding it to the file's objects.
    pub(crate) fn absorb(
        &mut self,
        ctx: &mut Ctx,
        accept: Accept,
        kind: ObjectKind,
        value: &Value,
        locator: &str,
    ) -> Result<(), LoadError> {
        match kind {
            ObjectKind::Secret if accept.repositories && repository::is_repo_secret(value) => {
                if let Some(repo) = repository::to_repo_secret(ctx, value, locator)? {
                    self.repositories.secrets.push(repo);
                }
            }
            ObjectKind::ConfigMap => {
                repository::read_config_map(ctx, value, locator, &mut self.repositories)?;
            }
            ObjectKind::Secret => {
                if let Some(read) =
                    secret::to_cluster(ctx, value, locator, secret::UnreadableConfig::Skip)?
                {
                    self.push_cluster(read);
                }
            }
            ObjectKind::Application => {
                // One Application that cannot be placed (no name, a destination of the
                // wrong shape) is skipped and named; the file's other objects still load.
                let (app, spec) = match application::to_app(ctx, value, locator) {
                    Ok(read) => read,
                    Err(LoadError::Field {
                        object,
                        field,
                        message,
                        ..
                    }) => {
                        ctx.warn(
                            &object,
                            Some(&field),
                            format!(
                                "{message}; this Application is skipped, the others are loaded"
                            ),
                        );
                        return Ok(());
                    }
                    Err(LoadError::Document {
                        object, message, ..
                    }) => {
                        ctx.warn(
                            &object,
                            None,
                            format!(
                                "{message}; this Application is skipped, the others are loaded"
                            ),
                        );
                        return Ok(());
                    }
                    Err(e) => return Err(e),
                };
                self.converted_apps = true;
                if accept.specs {
                    // The first definition of a key is the one that counts (as in the loads).
                    self.specs.entry(spec_key(&app)).or_insert(spec);
                }
                self.apps.push(app);
            }
            ObjectKind::AppProject => {
                let project = crate::project::to_project(ctx, value, locator)?;
                if self.projects.contains_key(&project.name) {
                    ctx.warn(
                        &format!("AppProject {}", project.name),
                        None,
                        "defined more than once; the first definition is used".to_owned(),
                    );
                } else {
                    self.projects.insert(project.name.clone(), project);
                }
            }
        }
        Ok(())
    }

    /// Adds an Application read straight into its app (`crate::placement_app`), which is
    /// what [`Objects::absorb`] does with it when the specs are dropped.
    pub(crate) fn push_app(&mut self, app: App) {
        self.apps.push(app);
    }

    /// Adds a cluster Secret read straight into its cluster (`crate::placement_secret`),
    /// which is what [`Objects::absorb`] does with it.
    pub(crate) fn push_cluster(&mut self, (cluster, creds): crate::ClusterSecret) {
        if let Some(creds) = creds {
            self.credentials.insert(cluster.id.clone(), creds);
        }
        self.clusters.push(cluster);
    }

    /// The file.
    pub(crate) fn finish(self) -> FleetFile {
        let mut repositories = self.repositories;
        repositories.secrets.sort_by(|a, b| a.secret.cmp(&b.secret));
        FleetFile {
            fleet: fleetshard_core::Fleet {
                clusters: packed(self.clusters),
                // Apps read straight from the text are made one after another on the
                // parsing thread, their strings already together: copying 500k of them
                // again cost about a tenth of a YAML load.
                apps: if self.converted_apps {
                    packed(self.apps)
                } else {
                    self.apps
                },
            },
            specs: self.specs,
            shards: Vec::new(),
            credentials: self.credentials,
            projects: self.projects,
            repositories,
            format: crate::InputFormat::Kubernetes,
        }
    }
}

/// The same objects, copied one after another so that their strings lie together.
///
/// Converting an object allocates its model's strings among those of everything else made
/// from it (an Application's [`AppSpec`](crate::AppSpec) and source as read, the item's
/// parse tree), so consecutive apps' names and servers end up about a kilobyte apart, and a
/// pass over every app (Argo CD's app counts, which every cold consistent-hashing
/// computation makes) misses the cache on each string: at 100k apps loaded from YAML the
/// count took 22 ms of CPU, against 5 ms on apps built in one loop. Copied in input order
/// while the originals still exist, the copies come from fresh memory, one app after
/// another (`docs/performance.md`, "Consistent hashing cold in `plan`").
fn packed<T: Clone>(objects: Vec<T>) -> Vec<T> {
    let copies = objects.to_vec();
    drop(objects);
    copies
}

/// Appends the objects of one Kubernetes document (itself, or the items of a list) after
/// checking every kind.
fn collect_objects<'a>(
    ctx: &Ctx,
    doc: &'a Value,
    locator: &str,
    accept: Accept,
    out: &mut Vec<(ObjectKind, &'a Value, String)>,
) -> Result<(), LoadError> {
    let kind = kind_of(ctx, doc, locator)?;
    // Items of a typed list returned by the API server often lack `kind`: it is implied.
    let item_default = match kind {
        "List" => None,
        "SecretList" if accept.secrets => Some(ObjectKind::Secret),
        "ApplicationList" if accept.apps => Some(ObjectKind::Application),
        "AppProjectList" if accept.apps => Some(ObjectKind::AppProject),
        _ => {
            out.push((
                object_kind(ctx, kind, locator, accept)?,
                doc,
                locator.to_owned(),
            ));
            return Ok(());
        }
    };
    let items = match doc.get("items") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(ctx.field_error(
                locator,
                "items",
                format!("expected a sequence, found {}", value_type(other)),
            ));
        }
    };
    for (j, item) in items.iter().enumerate() {
        let item_locator = format!("{locator}, items[{j}]");
        if !item.is_object() {
            return Err(ctx.document_error(
                &item_locator,
                format!("expected an object, found {}", value_type(item)),
            ));
        }
        let object = match (item.get("kind"), item_default) {
            (None | Some(Value::Null), Some(default)) => default,
            _ => {
                let item_kind = kind_of(ctx, item, &item_locator)?;
                let object = object_kind(ctx, item_kind, &item_locator, accept)?;
                if item_default.is_some_and(|d| d != object) {
                    return Err(unknown_kind(ctx, &item_locator, item_kind, accept));
                }
                object
            }
        };
        out.push((object, item, item_locator));
    }
    Ok(())
}

/// The document's `kind`, which must be a string.
pub(crate) fn kind_of<'a>(ctx: &Ctx, doc: &'a Value, locator: &str) -> Result<&'a str, LoadError> {
    match doc.get("kind") {
        Some(Value::String(kind)) => Ok(kind),
        None | Some(Value::Null) => Ok(""),
        Some(other) => Err(ctx.field_error(
            locator,
            "kind",
            format!("expected a string, found {}", value_type(other)),
        )),
    }
}

/// Maps an object kind to what we read, if this input accepts it.
pub(crate) fn object_kind(
    ctx: &Ctx,
    kind: &str,
    locator: &str,
    accept: Accept,
) -> Result<ObjectKind, LoadError> {
    match kind {
        "Secret" if accept.secrets => Ok(ObjectKind::Secret),
        "ConfigMap" if accept.repositories => Ok(ObjectKind::ConfigMap),
        "Application" if accept.apps => Ok(ObjectKind::Application),
        "AppProject" if accept.apps => Ok(ObjectKind::AppProject),
        _ => Err(unknown_kind(ctx, locator, kind, accept)),
    }
}

pub(crate) fn unknown_kind(ctx: &Ctx, locator: &str, kind: &str, accept: Accept) -> LoadError {
    LoadError::UnknownKind {
        file: ctx.file.clone(),
        object: locator.to_owned(),
        kind: kind.to_owned(),
        expected: accept.expected(),
    }
}

/// Deserialises one object, turning a failure into an error that names `object` and the
/// field path inside it.
pub(crate) fn typed<T: DeserializeOwned>(
    ctx: &Ctx,
    value: &Value,
    object: &str,
) -> Result<T, LoadError> {
    // Tracking the path costs a wrapper around every field read; only a failure needs it,
    // so a failed read is done again with it.
    T::deserialize(value).or_else(|_| {
        serde_path_to_error::deserialize(value)
            .map_err(|e| ctx.path_error(object, false, e.path(), e.inner().to_string()))
    })
}

/// The name of a JSON value's type, for messages.
pub(crate) fn value_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a sequence",
        Value::Object(_) => "a mapping",
    }
}

/// `metadata.namespace` and `metadata.name` read leniently, to name an object in messages
/// before (or when) it fails to deserialise.
pub(crate) fn meta_names(value: &Value) -> (Option<&str>, Option<&str>) {
    let meta = value.get("metadata");
    let get = |key| meta.and_then(|m| m.get(key)).and_then(Value::as_str);
    (get("namespace"), get("name"))
}
