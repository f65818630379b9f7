//! What a tenant's kustomization may reach, checked before `kustomize build` runs: only
//! files of the repository, and the network only when the operator allows remote bases.
//!
//! Every kustomization the app's reaches (through `resources`, `bases`, `components`,
//! `generators`, `transformers` and `validators` directories) is read, and so is every
//! generator, transformer or validator configuration it names (a file or inline YAML):
//!
//! - `resources`, `bases`, `components`: a path of the repository; a URL, or an entry that
//!   is no path of the tree (kustomize would fetch it as a remote base), is refused
//!   unless remote bases are allowed;
//! - `generators`, `transformers`, `validators`: the same, their configurations read too;
//! - every value of a field that names a file, wherever it is (`patches[].path`,
//!   `patchesStrategicMerge`, `patchesJson6902[].path`, `configMapGenerator` and
//!   `secretGenerator` `files` (`key=path` too), `envs` and `env`, `replacements[].path`,
//!   `openapi.path`, `crds`, `configurations`, `helmCharts[].valuesFile` and
//!   `additionalValuesFiles`, `helmGlobals.chartHome` and `configHome`): an absolute path,
//!   one leaving the repository, or an `http(s)://` URL (which kustomize would fetch) is
//!   refused, whatever `--load-restrictor` argocd-cm sets;
//! - `helmCharts[].repo` (a chart kustomize would pull) is refused unless remote bases are
//!   allowed.
//!
//! `kustomize.buildOptions` that let a kustomization run programs (`--enable-exec`,
//! `--enable-alpha-plugins`, and the container functions' `--mount`, `--network`,
//! `--env`) are refused unless the operator allows exec plugins
//! ([`RenderConfig::allow_exec_plugins`](super::RenderConfig::allow_exec_plugins)).
//! The copy of the tree holds no symbolic link, so a path of the repository is a file of
//! the copy. In a render sandbox the build has no network either: this check is what
//! makes the refusal a clear condition rather than a failed fetch.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::kustomize::{inside, kustomization_file, read_kustomization};

/// Fields whose entries are kustomizations or files of objects.
const REFERENCE_FIELDS: [&str; 3] = ["resources", "bases", "components"];

/// Fields whose entries are plugin configurations (files, directories or inline YAML).
const PLUGIN_FIELDS: [&str; 3] = ["generators", "transformers", "validators"];

/// Keys whose values (a string or a list of strings) name files, wherever they appear.
const PATH_KEYS: [&str; 11] = [
    "path",
    "files",
    "envs",
    "env",
    "valuesFile",
    "additionalValuesFiles",
    "chartHome",
    "configHome",
    "crds",
    "configurations",
    "patchesStrategicMerge",
];

/// `kustomize build` options that run programs (exec and container KRM functions).
const EXEC_OPTIONS: [&str; 5] = [
    "--enable-exec",
    "--enable-alpha-plugins",
    "--mount",
    "--network",
    "--env",
];

/// Refuses `kustomize.buildOptions` that let a kustomization run programs, unless
/// `allow_exec`.
pub(super) fn check_build_options(options: &str, allow_exec: bool) -> Result<(), String> {
    if allow_exec {
        return Ok(());
    }
    for token in options.split_whitespace() {
        let flag = token.split('=').next().unwrap_or(token);
        if EXEC_OPTIONS.contains(&flag) {
            return Err(format!(
                "argocd-cm kustomize.buildOptions {flag} would let a tenant's kustomization run \
                 programs as the replica, with its files and credentials; refused (allow exec \
                 plugins on the replica to permit it)"
            ));
        }
    }
    Ok(())
}

/// Checks every kustomization the app at `app_dir` reaches, in the copy at `root`.
pub(super) fn check(root: &Path, app_dir: &Path, allow_remote: bool) -> Result<(), String> {
    let mut reach = Reach {
        root,
        allow_remote,
        queue: vec![app_dir.to_path_buf()],
        seen: HashSet::new(),
    };
    while let Some(dir) = reach.queue.pop() {
        if !reach.seen.insert(dir.clone()) {
            continue;
        }
        let Some(file) = kustomization_file(&dir) else {
            continue;
        };
        // A kustomization that does not parse is left to kustomize's own message.
        let Ok(k) = read_kustomization(&file) else {
            continue;
        };
        let shown = reach.shown(&file);
        reach.kustomization(&shown, &dir, k)?;
    }
    Ok(())
}

struct Reach<'a> {
    root: &'a Path,
    allow_remote: bool,
    queue: Vec<PathBuf>,
    seen: HashSet<PathBuf>,
}

impl Reach<'_> {
    fn shown(&self, file: &Path) -> String {
        file.strip_prefix(self.root)
            .unwrap_or(file)
            .display()
            .to_string()
    }

    fn kustomization(
        &mut self,
        shown: &str,
        dir: &Path,
        mut rest: Map<String, Value>,
    ) -> Result<(), String> {
        for field in REFERENCE_FIELDS {
            for item in strings(rest.remove(field).as_ref()) {
                self.reference(shown, field, dir, &item)?;
            }
        }
        for field in PLUGIN_FIELDS {
            for item in strings(rest.remove(field).as_ref()) {
                if item.contains('\n') {
                    self.inline_config(shown, field, dir, &item)?;
                    continue;
                }
                if let Some(file) = self.reference(shown, field, dir, &item)? {
                    self.config_file(shown, field, dir, &file)?;
                }
            }
        }
        self.paths(shown, dir, &Value::Object(rest))
    }

    /// An entry naming a kustomization or a file: a directory is queued; a file is
    /// returned; a URL or an entry that is no path of the tree is a fetch.
    fn reference(
        &mut self,
        shown: &str,
        field: &str,
        dir: &Path,
        item: &str,
    ) -> Result<Option<PathBuf>, String> {
        let fetch = || {
            format!(
                "{shown}: {field} entry {item:?} is no path of the repository; kustomize would \
                 fetch it with the replica's network, which is refused (allow remote bases to \
                 permit it)"
            )
        };
        if is_url(item) {
            return if self.allow_remote {
                Ok(None)
            } else {
                Err(fetch())
            };
        }
        match inside(self.root, dir, item) {
            None => Err(format!(
                "{shown}: {field} entry {item:?} is outside the repository"
            )),
            Some(path) if path.is_dir() => {
                self.queue.push(path);
                Ok(None)
            }
            Some(path) if path.is_file() => Ok(Some(path)),
            Some(_) if self.allow_remote => Ok(None),
            Some(_) => Err(fetch()),
        }
    }

    /// A plugin configuration file: each of its documents checked as inline ones are.
    fn config_file(
        &mut self,
        shown: &str,
        field: &str,
        dir: &Path,
        file: &Path,
    ) -> Result<(), String> {
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("{shown}: {field} {}: {e}", self.shown(file)))?;
        self.inline_config(shown, field, dir, &text)
    }

    /// Inline plugin configuration (YAML documents): their file fields checked.
    fn inline_config(
        &mut self,
        shown: &str,
        field: &str,
        dir: &Path,
        text: &str,
    ) -> Result<(), String> {
        let options = fleetshard_manifest::yaml_options(text.len());
        // Configuration that does not parse is left to kustomize's own message.
        let docs: Vec<Value> =
            serde_saphyr::from_multiple_with_options(text, options).unwrap_or_default();
        let place = format!("{shown}: {field}");
        docs.iter().try_for_each(|doc| self.paths(&place, dir, doc))
    }

    /// Every value of a [`PATH_KEYS`] key in `value`, at any depth, and every `repo`.
    fn paths(&self, shown: &str, dir: &Path, value: &Value) -> Result<(), String> {
        match value {
            Value::Object(map) => {
                for (key, v) in map {
                    if PATH_KEYS.contains(&key.as_str()) {
                        for item in strings(Some(v)) {
                            self.path(shown, key, dir, &item)?;
                        }
                    }
                    if key == "repo" && v.as_str().is_some_and(|r| !r.trim().is_empty()) {
                        self.chart_repository(shown, v.as_str().unwrap_or_default())?;
                    }
                    self.paths(shown, dir, v)?;
                }
                Ok(())
            }
            Value::Array(items) => items.iter().try_for_each(|v| self.paths(shown, dir, v)),
            _ => Ok(()),
        }
    }

    /// A file named by `key`: in the repository, never fetched.
    fn path(&self, shown: &str, key: &str, dir: &Path, item: &str) -> Result<(), String> {
        if key == "patchesStrategicMerge" && item.contains('\n') {
            return Ok(()); // an inline patch
        }
        let file = match key {
            // `key=path`, or a path whose name is the key.
            "files" => item.split_once('=').map_or(item, |(_, path)| path),
            _ => item,
        };
        if is_url(file) {
            return Err(format!(
                "{shown}: {key} {item:?} is a URL; kustomize would fetch it with the replica's \
                 network, which is refused"
            ));
        }
        if inside(self.root, dir, file).is_none() {
            return Err(format!("{shown}: {key} {item:?} is outside the repository"));
        }
        Ok(())
    }

    fn chart_repository(&self, shown: &str, repo: &str) -> Result<(), String> {
        if self.allow_remote {
            return Ok(());
        }
        Err(format!(
            "{shown}: helmCharts repo {repo:?}: kustomize would pull the chart with the \
             replica's network, which is refused (allow remote bases to permit it)"
        ))
    }
}

/// A string, or the strings of a list.
fn strings(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// Whether kustomize would read `s` as a URL (`https://…`, `git::…`, `git@host:…`,
/// `ssh://…`), whatever the tree holds: a directory named `http:` does not make
/// `http://host/x` a path.
fn is_url(s: &str) -> bool {
    s.contains("://") || s.starts_with("git@") || s.starts_with("git::")
}
