//! An application's GitOps spec as the inventory keeps it: compact, and turned back into
//! the exact [`AppSpec`] it was made from when a reader asks ([`StoredSpec::to_spec`]).
//!
//! An Application's spec is mostly a source (repository URL, revision, path) and defaults.
//! Kept as an [`AppSpec`] it costs about a kilobyte: the struct's room for every field
//! (sync request, refusals, several sources) and `source.raw`, the whole `spec.source` as
//! read, which repeats the typed fields in a JSON map of its own. Here the repository URL
//! and the revision are shared between the specs converted together ([`Interner`]:
//! a file's, by [`super::specs_by_app_key`]; the Kubernetes source converts one object at a
//! time, sharing nothing), `raw`
//! keeps only what the typed fields do not already say (with a note of which typed fields
//! it said, so it is rebuilt exactly), and the rest of the spec is kept only when it is not
//! the default — once for all the specs converted together whose rest is equal (a fleet's
//! Applications mostly differ only in their source and destination: 100,000 apps of one
//! sync policy kept 89 MiB of equal rests per replica before).

use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hasher};
use std::sync::Arc;

use fleetshard_manifest::{AppSource, AppSpec};
use serde_json::Value;

/// The `spec.source` fields a typed field renders ([`AppSource::with_typed_raw`]), in the
/// order of the bits of [`StoredSpec::stripped`].
const TYPED_FIELDS: [&str; 4] = ["repoURL", "path", "targetRevision", "directory"];

/// Shares equal strings, and equal rests of specs, between the specs converted together.
#[derive(Debug, Default)]
pub(crate) struct Interner {
    strings: HashSet<Arc<str>>,
    /// Rests by a hash of their `Debug` text (`AppSpec` has no `Hash`: its JSON values do
    /// not); shared only when equal, so a collision or an unequal text of equal rests
    /// costs sharing, never correctness.
    rests: HashMap<u64, Vec<Arc<AppSpec>>>,
    /// The rest shared last: a fleet's consecutive apps mostly have the same one, which
    /// one comparison finds without hashing.
    last_rest: Option<Arc<AppSpec>>,
}

impl Interner {
    /// The shared copy of `s`.
    fn get(&mut self, s: String) -> Arc<str> {
        if let Some(shared) = self.strings.get(s.as_str()) {
            return shared.clone();
        }
        let shared: Arc<str> = s.into();
        self.strings.insert(shared.clone());
        shared
    }

    /// The shared copy of `rest`.
    fn rest(&mut self, rest: AppSpec) -> Arc<AppSpec> {
        if let Some(last) = &self.last_rest
            && **last == rest
        {
            return last.clone();
        }
        let mut hasher = HashWriter(DefaultHasher::new());
        // Writing to a hasher cannot fail.
        let _ = std::fmt::Write::write_fmt(&mut hasher, format_args!("{rest:?}"));
        let equal = self.rests.entry(hasher.0.finish()).or_default();
        let shared = match equal.iter().find(|r| ***r == rest) {
            Some(r) => r.clone(),
            None => {
                let r = Arc::new(rest);
                equal.push(r.clone());
                r
            }
        };
        self.last_rest = Some(shared.clone());
        shared
    }
}

/// Feeds formatted text to a hasher without building it.
struct HashWriter(DefaultHasher);

impl std::fmt::Write for HashWriter {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.write(s.as_bytes());
        Ok(())
    }
}

/// An application's GitOps spec, compact (see the module documentation). Two stored specs
/// are equal exactly when the specs they were made from are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSpec {
    /// `source.repo_url`, shared.
    repo_url: Arc<str>,
    /// `source.target_revision`, shared.
    target_revision: Arc<str>,
    /// `source.path`.
    path: Box<str>,
    /// `source.raw` less its [`TYPED_FIELDS`] whose bit is set in `stripped`: the entries
    /// that said exactly what the typed fields render. `Null` stays `Null` (a spec built
    /// in code), and a map left empty costs no heap.
    raw_rest: Value,
    /// Bit `i` set: `raw` had `TYPED_FIELDS[i]`, equal to the typed field's rendering.
    stripped: u8,
    /// The Application's labels (kept apart, so a labelled app's `rest` stays empty).
    labels: Box<[(Box<str>, Box<str>)]>,
    /// The spec less the four source fields above, when that is not the default; shared
    /// by clones (the directory source keeps each file's specs and the inventory's) and
    /// between equal rests converted together (about 0.9 KiB each).
    rest: Option<Arc<AppSpec>>,
}

impl StoredSpec {
    /// `spec`, compact; `strings` shares the repository URLs and revisions.
    pub(crate) fn new(spec: AppSpec, strings: &mut Interner) -> Self {
        let mut rest = spec;
        let AppSource {
            repo_url,
            target_revision,
            path,
            directory,
            raw,
        } = std::mem::take(&mut rest.source);
        let typed = typed_raw(&repo_url, &target_revision, &path, &directory);
        let mut raw_rest = raw;
        let mut stripped = 0u8;
        if let (Value::Object(raw), Value::Object(typed)) = (&mut raw_rest, &typed) {
            for (bit, field) in TYPED_FIELDS.iter().enumerate() {
                if typed.contains_key(*field) && raw.get(*field) == typed.get(*field) {
                    raw.remove(*field);
                    stripped |= 1 << bit;
                }
            }
            // A map emptied by removals keeps its node (about 600 bytes); a new empty
            // one has none.
            if raw.is_empty() {
                *raw = serde_json::Map::new();
            }
        }
        rest.source.directory = directory;
        let labels = std::mem::take(&mut rest.labels)
            .into_iter()
            .map(|(k, v)| (k.into_boxed_str(), v.into_boxed_str()))
            .collect();
        let rest = (rest != AppSpec::default()).then(|| strings.rest(rest));
        StoredSpec {
            repo_url: strings.get(repo_url),
            target_revision: strings.get(target_revision),
            path: path.into_boxed_str(),
            raw_rest,
            stripped,
            labels,
            rest,
        }
    }

    /// The spec this was made from.
    pub fn to_spec(&self) -> AppSpec {
        let mut spec = self.rest.as_deref().cloned().unwrap_or_default();
        spec.source.repo_url = self.repo_url.to_string();
        spec.source.target_revision = self.target_revision.to_string();
        spec.source.path = self.path.to_string();
        spec.labels = self
            .labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut raw = self.raw_rest.clone();
        if self.stripped != 0
            && let Value::Object(raw) = &mut raw
            && let Value::Object(mut typed) = typed_raw(
                &spec.source.repo_url,
                &spec.source.target_revision,
                &spec.source.path,
                &spec.source.directory,
            )
        {
            for (bit, field) in TYPED_FIELDS.iter().enumerate() {
                if self.stripped & (1 << bit) != 0
                    && let Some(value) = typed.remove(*field)
                {
                    raw.insert((*field).to_owned(), value);
                }
            }
        }
        spec.source.raw = raw;
        spec
    }
}

impl From<AppSpec> for StoredSpec {
    /// `spec`, compact, sharing nothing with other specs.
    fn from(spec: AppSpec) -> Self {
        StoredSpec::new(spec, &mut Interner::default())
    }
}

/// What the typed source fields render as `spec.source` ([`AppSource::with_typed_raw`]).
fn typed_raw(
    repo_url: &str,
    target_revision: &str,
    path: &str,
    directory: &fleetshard_manifest::DirectoryOptions,
) -> Value {
    AppSource {
        repo_url: repo_url.to_owned(),
        target_revision: target_revision.to_owned(),
        path: path.to_owned(),
        directory: directory.clone(),
        raw: Value::Null,
    }
    .with_typed_raw()
    .raw
}

#[cfg(test)]
mod tests;
