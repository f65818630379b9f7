//! What can go wrong while turning an application's source into manifests.
//!
//! Every error names the repository and, once known, the revision; manifest errors also
//! name the file, the document (1-based, counting the file's non-empty documents) and, in
//! a `List`, the item. All variants are `Clone` so that one failed read can be handed to
//! every application waiting on it (single-flight) and cached per commit when it cannot
//! change (a bad file at a commit stays bad). No message shows the user information of a
//! URL (`https://user:password@host` → `https://<redacted>@host`): `repo` and Git's own
//! messages are redacted when shown; the fields keep the URL as given.

use fleetshard_util::redact::redact_userinfo;

/// Where in a repository's tree an object or a syntax error is.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Location {
    /// The file's path from the repository root, `/`-separated.
    pub file: String,
    /// The document in the file, from 1, counting non-empty documents (0: the whole file).
    pub document: usize,
    /// The item of a `List`, from 0, when the object came from one.
    pub item: Option<usize>,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.file)?;
        if self.document > 0 {
            write!(f, ", document {}", self.document)?;
        }
        if let Some(item) = self.item {
            write!(f, ", items[{item}]")?;
        }
        Ok(())
    }
}

/// A manifest file that cannot be read into objects.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// The file is not valid YAML or JSON (or not UTF-8).
    #[error("{at}: invalid {format}{}: {message}", line.map(|l| format!(" at line {l}")).unwrap_or_default())]
    Syntax {
        /// The file (and the document, when the parser says which).
        at: Location,
        /// `YAML` or `JSON`.
        format: &'static str,
        /// The line in the file, from 1, when the parser reports it.
        line: Option<u64>,
        /// The parser's message.
        message: String,
    },
    /// A document is not a Kubernetes object: not a mapping, or without `apiVersion`,
    /// `kind` or `metadata.name`, or with one of them (or `metadata.namespace`) not a
    /// non-empty string.
    #[error("{at}: {message}")]
    InvalidObject {
        /// The object's place.
        at: Location,
        /// What is wrong, naming the field.
        message: String,
    },
    /// The file holds more objects than one app may have (`--max-objects`); found while
    /// parsing, before the rest is read into memory.
    #[error("{file}: more than {max} objects, the most one app may have (--max-objects)")]
    TooManyObjects {
        /// The file (or the tool's output) named as in messages.
        file: String,
        /// The bound.
        max: usize,
    },
}

/// Why an application's desired state could not be read from Git.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// `repoURL` is empty, malformed, or uses a transport this build lacks (`ftp://`).
    #[error("repository {url:?}: unsupported URL: {reason}", url = redact_userinfo(.repo))]
    UnsupportedUrl {
        /// `repoURL` as given.
        repo: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// The repository does not exist or is not a Git repository (an HTTP server answered
    /// 404).
    #[error("repository {url:?} not found: {msg}", url = redact_userinfo(.repo), msg = redact_userinfo(.message))]
    RepoNotFound {
        /// `repoURL` as given.
        repo: String,
        /// What Git said.
        message: String,
    },
    /// Cloning or fetching the repository failed (network, TLS, a timeout, the server
    /// refusing the credentials, an unknown SSH host key).
    #[error("repository {url:?}: fetch failed: {msg}", url = redact_userinfo(.repo), msg = redact_userinfo(.message))]
    Fetch {
        /// `repoURL` as given.
        repo: String,
        /// What Git said.
        message: String,
    },
    /// The repository's credentials cannot be used: a repository Secret sets a key
    /// fleetshard does not implement, or its key material is unusable. Names the Secret
    /// and the key, never a value.
    #[error("repository {url:?}: credentials: {msg}", url = redact_userinfo(.repo), msg = redact_userinfo(.message))]
    Credentials {
        /// `repoURL` as given.
        repo: String,
        /// What is wrong, naming the Secret and the key.
        message: String,
    },
    /// `targetRevision` names no branch, tag, reference or commit of the repository.
    #[error("repository {url:?}: revision {revision:?} not found{}", detail.as_deref().map(|d| format!(" ({d})")).unwrap_or_default(), url = redact_userinfo(.repo))]
    RevisionNotFound {
        /// `repoURL` as given.
        repo: String,
        /// `targetRevision` as given.
        revision: String,
        /// More detail (an ambiguous short SHA, a reference to something not a commit).
        detail: Option<String>,
    },
    /// `path` is absolute or leaves the repository (`..`).
    #[error("repository {url:?}: invalid path {path:?}: {reason}", url = redact_userinfo(.repo))]
    InvalidPath {
        /// `repoURL` as given.
        repo: String,
        /// `path` as given.
        path: String,
        /// Why it is refused.
        reason: String,
    },
    /// `path` is not a directory in the commit's tree.
    #[error("repository {url:?} at {revision:?} ({commit}): path {path:?} {reason}", url = redact_userinfo(.repo))]
    PathNotFound {
        /// `repoURL` as given.
        repo: String,
        /// `targetRevision` as given.
        revision: String,
        /// The resolved commit.
        commit: String,
        /// `path` as given.
        path: String,
        /// `not found` or `is not a directory`.
        reason: &'static str,
    },
    /// A manifest file is invalid (syntax, or an object without its identity).
    #[error("repository {url:?} at {revision:?} ({commit}): {error}", url = redact_userinfo(.repo))]
    Manifest {
        /// `repoURL` as given.
        repo: String,
        /// `targetRevision` as given.
        revision: String,
        /// The resolved commit.
        commit: String,
        /// The file's error (boxed: it is large and errors travel by value).
        #[source]
        error: Box<ManifestError>,
    },
    /// The directory, read as plain manifests, holds another tool's source (Kustomize,
    /// Helm, or Jsonnet when read without Jsonnet settings).
    #[error(
        "repository {url:?} at {revision:?} ({commit}): {file} is a {tool} source, which a plain directory read does not render (a source setting `directory` is read as plain YAML/JSON)", url = redact_userinfo(.repo))]
    UnsupportedSource {
        /// `repoURL` as given.
        repo: String,
        /// `targetRevision` as given.
        revision: String,
        /// The resolved commit.
        commit: String,
        /// The file that marks it (`kustomization.yaml`, `Chart.yaml`).
        file: String,
        /// `Kustomize`, `Helm` or `Jsonnet`.
        tool: &'static str,
    },
    /// The source could not be rendered: the tool it needs is not available here (no
    /// `kustomize`/`kubectl` or `helm` on PATH, a plugin), the tool failed (its trimmed
    /// standard error), ran too long or wrote too much, a Jsonnet file failed to evaluate,
    /// or an option cannot be applied.
    #[error("repository {url:?} at {revision:?} ({commit}): {msg}", url = redact_userinfo(.repo), msg = redact_userinfo(.message))]
    Render {
        /// `repoURL` as given.
        repo: String,
        /// `targetRevision` as given.
        revision: String,
        /// The resolved commit (empty when the source was refused before resolving).
        commit: String,
        /// `Kustomize`, `Helm`, `Directory` (Jsonnet) or `Plugin`, as Argo CD names them.
        source_type: &'static str,
        /// What happened, naming the source type and `path`.
        message: String,
    },
    /// The app's manifests exceed a limit ([`ReadLimits`](super::ReadLimits)): one app
    /// cannot exhaust the replica that reads it.
    #[error(
        "repository {url:?} at {revision:?} ({commit}): {what}; the limit keeps one app from exhausting the replica", url = redact_userinfo(.repo))]
    TooLarge {
        /// `repoURL` as given.
        repo: String,
        /// `targetRevision` as given.
        revision: String,
        /// The resolved commit.
        commit: String,
        /// What is too large, with the limit and the setting that raises it.
        what: String,
    },
    /// Argo CD's repo-server could not render the source: unreachable, too slow, an error
    /// it answered (a bad chart, a failed `helm template`), an answer that is not
    /// manifests, or a source field it does not know. Retried with backoff: a repo-server
    /// comes back, a chart gets fixed.
    #[error("repository {url:?} at {revision:?}: the repo-server at {addr}: {msg}", url = redact_userinfo(.repo), msg = redact_userinfo(.message))]
    RepoServer {
        /// `repoURL` as given.
        repo: String,
        /// `targetRevision` as given.
        revision: String,
        /// The repo-server's address.
        addr: String,
        /// What happened (never a credential).
        message: String,
    },
    /// The repository's data could not be read (a missing or corrupt object, an I/O error).
    #[error("repository {url:?}: {msg}", url = redact_userinfo(.repo), msg = redact_userinfo(.message))]
    Git {
        /// `repoURL` as given.
        repo: String,
        /// What Git said.
        message: String,
    },
    /// The blocking Git task ended without an answer (it panicked or the runtime is
    /// shutting down).
    #[error("repository {url:?}: the Git task failed: {msg}", url = redact_userinfo(.repo), msg = redact_userinfo(.message))]
    Task {
        /// `repoURL` as given.
        repo: String,
        /// The join error.
        message: String,
    },
}

impl SourceError {
    /// The error of a file (or a tool's output) that did not parse into objects: a file
    /// over the object bound is [`SourceError::TooLarge`], as an app over it is.
    pub(crate) fn of_manifest(
        repo: &str,
        revision: &str,
        commit: &str,
        error: ManifestError,
    ) -> Self {
        match error {
            ManifestError::TooManyObjects { file, max } => SourceError::TooLarge {
                repo: repo.to_owned(),
                revision: revision.to_owned(),
                commit: commit.to_owned(),
                what: format!("{file} brings the app to more than {max} objects (--max-objects)"),
            },
            error => SourceError::Manifest {
                repo: repo.to_owned(),
                revision: revision.to_owned(),
                commit: commit.to_owned(),
                error: Box::new(error),
            },
        }
    }

    /// The `repoURL` the error is about.
    pub fn repo(&self) -> &str {
        match self {
            SourceError::UnsupportedUrl { repo, .. }
            | SourceError::RepoNotFound { repo, .. }
            | SourceError::Fetch { repo, .. }
            | SourceError::Credentials { repo, .. }
            | SourceError::RevisionNotFound { repo, .. }
            | SourceError::InvalidPath { repo, .. }
            | SourceError::PathNotFound { repo, .. }
            | SourceError::Manifest { repo, .. }
            | SourceError::UnsupportedSource { repo, .. }
            | SourceError::TooLarge { repo, .. }
            | SourceError::Render { repo, .. }
            | SourceError::RepoServer { repo, .. }
            | SourceError::Git { repo, .. }
            | SourceError::Task { repo, .. } => repo,
        }
    }
}
