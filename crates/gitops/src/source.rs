//! Desired state from Git: an application's `spec.source` (`repoURL`, `targetRevision`,
//! `path`) → the Kubernetes objects it declares.
//!
//! - [`RepoCache`] resolves `targetRevision` (branch, tag, `refs/...`, full or short commit
//!   id, `HEAD`) to a commit and reads the manifests under `path` at that commit, with gix
//!   on tokio's blocking pool. Local repositories (a path or a `file://` URL) are read in
//!   place; remote ones (`https://`, `http://`, `ssh://`, `git://`, scp-like) are mirrored
//!   into the cache directory, one bare repository per normalised URL. HTTP(S) is
//!   anonymous (smart HTTP through reqwest, TLS by rustls with ring and the system's CA
//!   certificates): a server asking for credentials is a [`SourceError::Fetch`] that says
//!   so, and a 404 a [`SourceError::RepoNotFound`]; an HTTP request silent for 30 s
//!   fails. N applications asking for one repository at once cause one fetch;
//!   resolutions are trusted for `refresh_interval` (3 minutes, as Argo CD's
//!   reconciliation period) unless a [`Refresh::Hard`] asks; manifests are kept per commit
//!   and path, which never change.
//! - Manifests are plain YAML (`.yaml`, `.yml`, multi-document) and JSON (`.json`) files,
//!   read as Argo CD reads a directory app: the top level of `path` only unless
//!   `directory.recurse`, filtered by `directory.exclude`/`include` globs on the path
//!   relative to `path`; `List` kinds are flattened; hidden entries, other files, symbolic
//!   links and submodules are skipped; a Kustomize or Helm directory, or a Jsonnet file
//!   (which Argo CD would render), is refused by [`RepoCache::manifests`]
//!   ([`SourceError::UnsupportedSource`]) rather than misread.
//! - [`Render`] turns a source into objects whatever its type: [`StandaloneRenderer`]
//!   detects the type as Argo CD does, reads directories through the [`RepoCache`] with
//!   their Jsonnet files evaluated, and runs `kustomize`/`kubectl kustomize` or `helm`
//!   (see `render`).
//! - Limits: a mirror keeps branches and tags deleted on the remote (fetches do not prune),
//!   so such a revision still resolves to its last commit; one process owns a cache
//!   directory (no locking between processes); submodules and Git LFS are not followed.
//! - Every failure is a [`SourceError`] naming the repository, the revision and, for a
//!   manifest, the file and document; it concerns one application, which the controller
//!   retries with backoff.

mod access;
mod auth;
mod cache;
mod config;
mod error;
use fleetshard_manifest::glob;
mod kept;
mod parse;
mod render;
mod repo;
mod tree_index;
mod url;

pub use access::{RepoAccess, TemplateMatch, permitted_helm_repositories};
pub use cache::{
    CacheStats, DEFAULT_FETCH_TIMEOUT, DEFAULT_MAX_CACHED_READS, DEFAULT_REFRESH_INTERVAL,
    Manifests, ReadLimits, Refresh, RepoCache, RepoCacheConfig,
};
pub use error::{Location, ManifestError, SourceError};
pub use parse::{FileFormat, Manifest, ObjectIdentity, parse_file};
pub use render::{
    DEFAULT_JSONNET_MAX_MEMORY, DEFAULT_MAX_CACHED_RENDERS, DEFAULT_RENDER_TIMEOUT, JSONNET_ENTRY,
    MultiSource, Render, RenderConfig, RenderRequest, RenderSandbox, RenderStats, Rendered,
    RepoServerRenderer, SourceType, StandaloneRenderer, run_jsonnet_child_if_invoked,
};
pub(crate) use repo::install_crypto_provider;
pub use url::{RepoLocation, cache_key, exact_form, normalize};
