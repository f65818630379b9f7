//! Jsonnet files of a directory app, evaluated in process with jrsonnet as Argo CD's
//! repo-server evaluates them with go-jsonnet: `directory.jsonnet.extVars` and `tlas`
//! (each `{name, value, code}`, values `$VAR`-substituted with the app's build
//! environment), import paths searched relative to the importing file, then in
//! `directory.jsonnet.libs` (repository paths, the last first) and the app's path.
//!
//! Imports are read from the commit's tree, never from the disk: an absolute path, or
//! one leaving the repository (`../..`), is refused, and so is a symbolic link. The output
//! is an object, or an array of them; `List`s are flattened. Evaluation is bounded in
//! recursion depth (jrsonnet's stack limit), in the bytes imported and written
//! ([`ReadLimits`]); in memory and CPU time only in a child process (`jsonnet_child`),
//! which a replica with a render sandbox uses for every file.

use std::panic::AssertUnwindSafe;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use fleetshard_manifest::AppSource;
use gix::ObjectId;
use jrsonnet_evaluator::async_import::{AsyncImportResolver, ResolvedImportResolver, async_import};
use jrsonnet_evaluator::manifest::JsonFormat;
use jrsonnet_evaluator::trace::PathResolver;
use jrsonnet_evaluator::{
    AsPathLike, SourcePath, State, Val, apply_tla, error::ErrorKind, rustc_hash::FxHashMap,
    tla::TlaArg,
};
use jrsonnet_ir::SourceFile;
use serde::{Deserialize, Serialize};

use super::super::ReadLimits;
use super::super::error::SourceError;
use super::super::parse::{Manifest, parse_documents};
use super::super::repo::{At, message};
use super::jsonnet_child::{ChildRequest, JsonnetChild};
use super::{Job, SourceType};

/// `directory.jsonnet`, and what an app's Jsonnet files are evaluated with.
#[derive(Debug, Clone, Default)]
pub(crate) struct JsonnetJob {
    ext_vars: Vec<Var>,
    tlas: Vec<Var>,
    /// Import search directories (repository paths, components), in search order.
    search: Vec<Vec<String>>,
    key: String,
    /// Where files are evaluated: in a bounded child process, or (`None`) in process.
    child: Option<Arc<JsonnetChild>>,
}

/// An `extVars` or `tlas` entry.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Var {
    name: String,
    value: String,
    code: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Options {
    ext_vars: Vec<Var>,
    tlas: Vec<Var>,
    libs: Vec<String>,
}

impl JsonnetJob {
    /// The Jsonnet settings of `source` for `job`.
    pub(crate) fn new(job: &Job, source: &AppSource) -> Result<Self, SourceError> {
        let fail = |m: String| job.error(SourceType::Directory, m);
        let options: Options = match source.raw.pointer("/directory/jsonnet") {
            Some(v) if !v.is_null() => serde_json::from_value(v.clone())
                .map_err(|e| fail(format!("spec.source.directory.jsonnet: {e}")))?,
            _ => Options::default(),
        };
        let env = job.env(source);
        let subst = |vars: Vec<Var>, field: &str| -> Result<Vec<Var>, SourceError> {
            vars.into_iter()
                .map(|v| {
                    // Code is evaluated beside the files, where an import could not be
                    // confined to the repository.
                    if v.code && v.value.contains("import") {
                        return Err(fail(format!(
                            "directory.jsonnet.{field} {:?}: imports in code are not supported",
                            v.name
                        )));
                    }
                    Ok(Var {
                        value: env.subst(&v.value),
                        ..v
                    })
                })
                .collect()
        };
        let ext_vars = subst(options.ext_vars, "extVars")?;
        let tlas = subst(options.tlas, "tlas")?;
        let mut search = Vec::new();
        for lib in options.libs.iter().rev() {
            let parts = normalize(&[], lib).ok_or_else(|| {
                fail(format!(
                    "directory.jsonnet.libs {lib:?} is outside the repository"
                ))
            })?;
            search.push(parts);
        }
        search.push(job.path.clone());
        // Never empty: a read that evaluates Jsonnet is not a read that refuses it.
        let key = if ext_vars.is_empty() && tlas.is_empty() && options.libs.is_empty() {
            "jsonnet".to_owned()
        } else {
            format!("jsonnet:{ext_vars:?}{tlas:?}{search:?}")
        };
        Ok(JsonnetJob {
            ext_vars,
            tlas,
            search,
            key,
            child: None,
        })
    }

    /// The same settings, each file evaluated in a bounded child process.
    pub(crate) fn in_child(self, child: Option<Arc<JsonnetChild>>) -> Self {
        JsonnetJob { child, ..self }
    }

    /// What the settings are, for the read cache's key (the same for every app without
    /// settings, so that they share one read).
    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    /// The objects of the Jsonnet file `file` (a repository path) of the tree `root`.
    pub(crate) fn evaluate(
        &self,
        repo: &gix::Repository,
        root: ObjectId,
        at: &At<'_>,
        file: &str,
        limits: &ReadLimits,
    ) -> Result<Vec<Manifest>, SourceError> {
        let fail = |m: String| SourceError::Render {
            repo: at.repo_url.to_owned(),
            revision: at.revision.to_owned(),
            commit: at.commit.to_string(),
            source_type: SourceType::Directory.as_str(),
            message: format!("Jsonnet file {file}: {m}"),
        };
        let text = match &self.child {
            Some(child) => child
                .evaluate(&ChildRequest {
                    git_dir: repo.git_dir().to_owned(),
                    tree: root.to_string(),
                    file: file.to_owned(),
                    ext_vars: self.ext_vars.clone(),
                    tlas: self.tlas.clone(),
                    search: self.search.clone(),
                    max_manifest_bytes: limits.max_manifest_bytes,
                    max_memory: child.confinement.max_memory,
                })
                .map_err(fail)?,
            None => self
                .evaluate_tree(repo, root, file, limits.max_manifest_bytes)
                .map_err(fail)?,
        };
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| fail(format!("output is not JSON: {e}")))?;
        let docs = match value {
            serde_json::Value::Array(items) => items,
            other => vec![other],
        };
        parse_documents(file, docs).map_err(|error| SourceError::Manifest {
            repo: at.repo_url.to_owned(),
            revision: at.revision.to_owned(),
            commit: at.commit.to_string(),
            error: Box::new(error),
        })
    }

    /// What a Jsonnet child does with its request: the output JSON text.
    pub(crate) fn evaluate_request(request: &ChildRequest) -> Result<String, String> {
        let repo = gix::open_opts(&request.git_dir, gix::open::Options::isolated())
            .map_err(|e| format!("opening the repository: {e}"))?;
        let root =
            ObjectId::from_hex(request.tree.as_bytes()).map_err(|e| format!("the tree id: {e}"))?;
        let job = JsonnetJob {
            ext_vars: request.ext_vars.clone(),
            tlas: request.tlas.clone(),
            search: request.search.clone(),
            key: String::new(),
            child: None,
        };
        job.evaluate_tree(&repo, root, &request.file, request.max_manifest_bytes)
    }

    /// Evaluates `file` of the tree `root` in this process, importing and writing at most
    /// `max_bytes`.
    fn evaluate_tree(
        &self,
        repo: &gix::Repository,
        root: ObjectId,
        file: &str,
        max_bytes: u64,
    ) -> Result<String, String> {
        let resolver = TreeResolver {
            repo: repo.clone(),
            root,
            search: self.search.clone(),
            budget: std::cell::Cell::new(max_bytes),
        };
        let run = AssertUnwindSafe(|| self.run(resolver, file, max_bytes));
        std::panic::catch_unwind(run)
            .map_err(|_| "the Jsonnet evaluator failed unexpectedly".to_owned())?
    }

    /// Evaluates `file` to JSON text.
    fn run(&self, resolver: TreeResolver, file: &str, max_bytes: u64) -> Result<String, String> {
        let text = |e: jrsonnet_evaluator::Error| e.to_string().trim().to_owned();
        let context = jrsonnet_stdlib::ContextInitializer::new(PathResolver::Absolute);
        // Code values are evaluated on their own, with the standard library (they may not
        // import: the default resolver refuses every import).
        let mut scratch = State::builder();
        scratch.context_initializer(jrsonnet_stdlib::ContextInitializer::new(
            PathResolver::Absolute,
        ));
        let scratch = scratch.build();
        let value_of = |v: &Var| -> Result<Val, String> {
            if v.code {
                scratch
                    .evaluate_snippet(format!("<{}>", v.name), v.value.as_str())
                    .map_err(text)
            } else {
                Ok(Val::string(v.value.as_str()))
            }
        };
        for v in &self.ext_vars {
            context.add_ext_var(v.name.as_str().into(), value_of(v)?);
        }
        #[allow(
            clippy::mutable_key_type,
            reason = "jrsonnet's interned strings; apply_tla takes this map"
        )]
        let mut tlas = FxHashMap::default();
        for v in &self.tlas {
            tlas.insert(v.name.as_str().into(), TlaArg::Val(value_of(v)?));
        }
        let mut builder = State::builder();
        builder
            .import_resolver(ResolvedImportResolver::new())
            .context_initializer(context);
        let state = builder.build();
        let _entered = state
            .try_enter()
            .ok_or_else(|| "another evaluation runs on this thread".to_owned())?;
        let entry = futures::executor::block_on(async_import(state.clone(), resolver, &file))
            .map_err(text)?;
        let value = state.import_resolved(entry).map_err(text)?;
        let value = apply_tla(&tlas, value).map_err(text)?;
        let out = value.manifest(JsonFormat::default()).map_err(text)?;
        if out.len() as u64 > max_bytes {
            return Err(format!(
                "output is over {max_bytes} bytes (--max-manifest-bytes)"
            ));
        }
        Ok(out)
    }
}

/// Imports from the commit's tree: files as `/`-rooted repository paths.
struct TreeResolver {
    repo: gix::Repository,
    root: ObjectId,
    search: Vec<Vec<String>>,
    /// Bytes that may still be imported.
    budget: std::cell::Cell<u64>,
}

impl TreeResolver {
    fn is_file(&self, parts: &[String]) -> Result<bool, jrsonnet_evaluator::Error> {
        let found = self
            .repo
            .find_tree(self.root)
            .map_err(|e| runtime(message(&e)))?
            .lookup_entry(parts.iter().map(|p| p.as_bytes()))
            .map_err(|e| runtime(message(&e)))?;
        Ok(found.is_some_and(|e| e.mode().is_blob()))
    }
}

fn runtime(m: String) -> jrsonnet_evaluator::Error {
    ErrorKind::RuntimeError(m.into()).into()
}

fn virtual_path(parts: &[String]) -> SourcePath {
    SourcePath::new(SourceFile::new(PathBuf::from(format!(
        "/{}",
        parts.join("/")
    ))))
}

fn parts_of(path: &SourcePath) -> Option<Vec<String>> {
    let file = path.downcast_ref::<SourceFile>()?;
    normalize(&[], file.path().to_str()?.trim_start_matches('/'))
}

impl AsyncImportResolver for TreeResolver {
    type Error = jrsonnet_evaluator::Error;

    async fn resolve_from(
        &self,
        from: &SourcePath,
        path: &dyn AsPathLike,
    ) -> Result<SourcePath, Self::Error> {
        let wanted = path.as_path();
        let wanted: &Path = wanted.as_ref();
        let text = wanted.to_string_lossy().into_owned();
        let outside = || runtime(format!("import {text:?} is outside the repository"));
        let base: Vec<String> = if from.is_default() {
            Vec::new()
        } else {
            let mut parts = parts_of(from).ok_or_else(outside)?;
            parts.pop();
            parts
        };
        if wanted.is_absolute() {
            return Err(outside());
        }
        let direct = normalize(&base, &text).ok_or_else(outside)?;
        if self.is_file(&direct)? {
            return Ok(virtual_path(&direct));
        }
        for dir in &self.search {
            if let Some(candidate) = normalize(dir, &text)
                && self.is_file(&candidate)?
            {
                return Ok(virtual_path(&candidate));
            }
        }
        Err(runtime(format!(
            "import {text:?}: no such file in the repository"
        )))
    }

    async fn load_file_contents(&self, resolved: &SourcePath) -> Result<Vec<u8>, Self::Error> {
        let parts = parts_of(resolved).ok_or_else(|| runtime("not a repository file".into()))?;
        let tree = self
            .repo
            .find_tree(self.root)
            .map_err(|e| runtime(message(&e)))?;
        let entry = tree
            .lookup_entry(parts.iter().map(|p| p.as_bytes()))
            .map_err(|e| runtime(message(&e)))?
            .filter(|e| e.mode().is_blob())
            .ok_or_else(|| runtime(format!("{}: no such file", parts.join("/"))))?;
        let blob = self
            .repo
            .find_blob(entry.object_id())
            .map_err(|e| runtime(message(&e)))?;
        let left = self
            .budget
            .get()
            .checked_sub(blob.data.len() as u64)
            .ok_or_else(|| {
                runtime(
                    "the imported files are over the bytes one app may read (--max-manifest-bytes)"
                        .into(),
                )
            })?;
        self.budget.set(left);
        Ok(blob.data.clone())
    }
}

/// `rel` from the repository directory `base` as components; `None` when absolute or
/// leaving the repository.
fn normalize(base: &[String], rel: &str) -> Option<Vec<String>> {
    let rel = Path::new(rel);
    let mut out = base.to_vec();
    for c in rel.components() {
        match c {
            Component::Normal(part) => out.push(part.to_str()?.to_owned()),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop()?;
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}
