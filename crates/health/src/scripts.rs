//! Where health scripts come from: argocd-cm's customizations ([`HealthOverride`]) and a
//! directory in Argo CD's `resource_customizations` layout ([`ScriptDir`]).
//!
//! Keys are Argo CD's: `group/Kind`, or `Kind` alone for the core group
//! ([`group_kind_key`]). An argocd-cm key with `*` is a wildcard matched as Argo CD's glob
//! library matches it (`*` also crosses `/`). In a directory, a group or kind directory
//! named with `_` is a wildcard (`_.crossplane.io/_/health.lua`: `_` read as `*`, matched
//! per path segment as Argo CD's doublestar matching does); exact directories win over
//! wildcards, and of several wildcards the first in path order wins.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fleetshard_manifest::glob::Glob;

use crate::lua::{LuaLimits, LuaScript};

/// The file name of a health script in a customizations directory.
const HEALTH_FILE: &str = "health.lua";

/// A health script configured in argocd-cm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthOverride {
    /// `group/Kind` (`Kind` for the core group), possibly with `*` wildcards.
    pub key: String,
    /// The Lua source (empty: no override).
    pub script: String,
    /// `useOpenLibs`: the script may use the standard libraries.
    pub use_open_libs: bool,
}

/// Argo CD's key of a group and kind: `group/Kind`, or `Kind` for the core group.
pub fn group_kind_key(group: &str, kind: &str) -> String {
    if group.is_empty() {
        kind.to_owned()
    } else {
        format!("{group}/{kind}")
    }
}

/// Why a customizations directory could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ScriptDirError {
    /// The directory, or a file in it, cannot be read.
    #[error("{path}: {source}")]
    Read {
        /// The directory or file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The directory holds no `health.lua` at all: probably not a customizations directory.
    #[error(
        "{0}: no <group>/<kind>/health.lua under it; give a directory in Argo CD's \
         resource_customizations layout"
    )]
    Empty(PathBuf),
}

/// The health scripts of a directory in Argo CD's `resource_customizations` layout: read
/// once ([`ScriptDir::load`]), each script compiled at its first use, with the standard
/// libraries open (as Argo CD runs its own built-in scripts).
#[derive(Debug, Default)]
pub struct ScriptDir {
    root: PathBuf,
    exact: HashMap<String, Arc<LuaScript>>,
    /// (pattern with `_` read as `*`, script), in path order.
    wildcards: Vec<(Glob, Arc<LuaScript>)>,
}

impl ScriptDir {
    /// Reads every `<group>/<kind>/health.lua` and `<Kind>/health.lua` (core group) under
    /// `root`, with `limits` for each call.
    pub fn load(root: &Path, limits: LuaLimits) -> Result<ScriptDir, ScriptDirError> {
        let read_dir = |path: &Path| {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
                .map_err(|source| ScriptDirError::Read {
                    path: path.to_owned(),
                    source,
                })?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_dir())
                .collect();
            entries.sort();
            Ok::<_, ScriptDirError>(entries)
        };
        let mut dir = ScriptDir {
            root: root.to_owned(),
            ..ScriptDir::default()
        };
        for first in read_dir(root)? {
            let first_name = file_name(&first);
            // `<Kind>/health.lua`: a kind of the core group.
            dir.add(root, &first.join(HEALTH_FILE), first_name.clone(), limits)?;
            for second in read_dir(&first)? {
                let key = format!("{first_name}/{}", file_name(&second));
                dir.add(root, &second.join(HEALTH_FILE), key, limits)?;
            }
        }
        if dir.exact.is_empty() && dir.wildcards.is_empty() {
            return Err(ScriptDirError::Empty(root.to_owned()));
        }
        Ok(dir)
    }

    fn add(
        &mut self,
        root: &Path,
        file: &Path,
        key: String,
        limits: LuaLimits,
    ) -> Result<(), ScriptDirError> {
        if !file.is_file() {
            return Ok(());
        }
        let source = std::fs::read_to_string(file).map_err(|source| ScriptDirError::Read {
            path: file.to_owned(),
            source,
        })?;
        let name = file
            .strip_prefix(root)
            .unwrap_or(file)
            .to_string_lossy()
            .into_owned();
        let script = Arc::new(LuaScript::new(&name, &source, true, limits));
        if key.contains('_') {
            self.wildcards
                .push((Glob::new(&key.replace('_', "*")), script));
        } else {
            self.exact.insert(key, script);
        }
        Ok(())
    }

    /// The directory read.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// How many scripts it holds.
    pub fn len(&self) -> usize {
        self.exact.len() + self.wildcards.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The script for `key` (`group/Kind` or `Kind`): the exact one, else the first
    /// wildcard that matches.
    pub fn script_for(&self, key: &str) -> Option<&Arc<LuaScript>> {
        self.exact.get(key).or_else(|| {
            self.wildcards
                .iter()
                .find(|(glob, _)| glob.is_match_with_separator(key, '/'))
                .map(|(_, s)| s)
        })
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
