//! The blocking Git work, with gix: open a local repository, clone or fetch a bare mirror,
//! resolve a revision to a commit, and read the manifests under a path of a commit's tree.
//! Called from [`super::RepoCache`] on tokio's blocking pool.

use std::cell::Cell;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Once};

use gix::ObjectId;

use fleetshard_manifest::DirectoryOptions;

use super::access::RepoAccess;
use super::auth::{self, FetchAuth};
use super::error::SourceError;
use super::glob;
use super::parse::{FileFormat, Manifest, parse_file};
use super::render::JsonnetJob;
use super::tree_index::TreeIndexes;

/// The reference a mirror keeps the remote's `HEAD` commit in (a bare mirror's own `HEAD`
/// is whatever `init` made it, not the remote's default branch).
const REMOTE_HEAD: &str = "refs/fleetshard/remote-head";

/// What a mirror fetches: every branch and tag under its own name, and the remote's HEAD.
const MIRROR_REFSPECS: [&str; 3] = [
    "+refs/heads/*:refs/heads/*",
    "+refs/tags/*:refs/tags/*",
    "+HEAD:refs/fleetshard/remote-head",
];

/// Files that mark a directory as another tool's source, which plain reading would misread.
const OTHER_TOOLS: [(&str, &str); 4] = [
    ("kustomization.yaml", "Kustomize"),
    ("kustomization.yml", "Kustomize"),
    ("Kustomization", "Kustomize"),
    ("Chart.yaml", "Helm"),
];

/// A repository as opened for reading, and whether it is a mirror (whose `HEAD` is
/// [`REMOTE_HEAD`]).
#[derive(Clone)]
pub(crate) struct Opened {
    pub(crate) repo: gix::ThreadSafeRepository,
    pub(crate) mirror: bool,
    /// Its large directories, indexed once (`tree_index.rs`).
    pub(crate) trees: Arc<TreeIndexes>,
}

impl Opened {
    /// This opening with the large-tree indexes of `before`, the previous opening of the
    /// same repository: an index is true of its tree's id whatever was fetched since, so a
    /// monorepo's root is not indexed again after each reopening (a new owner's first
    /// refreshes each ask for data fetched since its takeover, and reopen).
    pub(crate) fn keeping_trees_of(mut self, before: Option<&Opened>) -> Opened {
        if let Some(before) = before {
            self.trees = Arc::clone(&before.trees);
        }
        self
    }
}

/// Opens the repository at `path` in place (a worktree or a bare repository). Only the
/// repository's own configuration is read, not the user's or the system's, so the result
/// does not depend on the machine.
pub(crate) fn open_local(repo_url: &str, path: &Path) -> Result<Opened, SourceError> {
    let repo = gix::open_opts(path, gix::open::Options::isolated()).map_err(|e| {
        SourceError::RepoNotFound {
            repo: repo_url.to_owned(),
            message: format!("{}: {}", path.display(), message(&e)),
        }
    })?;
    Ok(Opened {
        repo: repo.into_sync(),
        mirror: false,
        trees: Arc::default(),
    })
}

/// Brings the bare mirror at `dir` up to date with `url`, creating it first if needed,
/// authenticating with `access`; `interrupt` stops the transfer between reads.
///
/// A new mirror is initialised and fetched in a temporary sibling directory and renamed
/// into place only once complete, so an interrupted first clone leaves no half mirror; a
/// mirror that no longer opens is removed and cloned again.
pub(crate) fn fetch_mirror(
    repo_url: &str,
    url: &str,
    dir: &Path,
    access: &RepoAccess,
    interrupt: &AtomicBool,
) -> Result<Opened, SourceError> {
    let fetch_error = |message: String| SourceError::Fetch {
        repo: repo_url.to_owned(),
        message,
    };
    if dir.exists() {
        match gix::open_opts(dir, gix::open::Options::isolated()) {
            Ok(repo) => {
                fetch_into(&repo, repo_url, url, access, interrupt)?;
                return Ok(Opened {
                    repo: repo.into_sync(),
                    mirror: true,
                    trees: Arc::default(),
                });
            }
            Err(e) => {
                // A mirror that no longer opens (damaged on disk) is only a cache: clone
                // it again rather than fail this repository forever.
                tracing::warn!(mirror = %dir.display(), error = %message(&e), "unreadable mirror; cloning again");
                std::fs::remove_dir_all(dir).map_err(|e| {
                    fetch_error(format!(
                        "cannot remove the unreadable mirror {}: {e}",
                        dir.display()
                    ))
                })?;
            }
        }
    }
    let parent = dir.parent().unwrap_or(Path::new("."));
    super::config::private_dir(parent)
        .map_err(|e| fetch_error(format!("the repository cache {}: {e}", parent.display())))?;
    let file_name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = parent.join(format!(".{file_name}.tmp-{}", std::process::id()));
    // A leftover of an interrupted clone by this same process id.
    let _ = std::fs::remove_dir_all(&tmp);
    let result = (|| {
        let repo = gix::init_bare(&tmp)
            .map_err(|e| fetch_error(format!("cannot create a mirror: {}", message(&e))))?;
        fetch_into(&repo, repo_url, url, access, interrupt)?;
        drop(repo);
        std::fs::rename(&tmp, dir)
            .map_err(|e| fetch_error(format!("cannot move the mirror into place: {e}")))
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    let repo = gix::open_opts(dir, gix::open::Options::isolated())
        .map_err(|e| fetch_error(format!("cannot open the new mirror: {}", message(&e))))?;
    Ok(Opened {
        repo: repo.into_sync(),
        mirror: true,
        trees: Arc::default(),
    })
}

/// One fetch of [`MIRROR_REFSPECS`] from `url` into `repo`, with `access`'s credentials
/// ([`FetchAuth`]).
fn fetch_into(
    repo: &gix::Repository,
    repo_url: &str,
    url: &str,
    access: &RepoAccess,
    interrupt: &AtomicBool,
) -> Result<(), SourceError> {
    let fetch_error = |message: String| SourceError::Fetch {
        repo: repo_url.to_owned(),
        message,
    };
    install_crypto_provider();
    let base = repo
        .transport_options(url, None)
        .ok()
        .flatten()
        .and_then(|options| {
            options
                .downcast::<gix::protocol::transport::client::blocking_io::http::Options>()
                .ok()
        })
        .map(|options| *options);
    let auth = FetchAuth::prepare(repo_url, url, access, base)?;
    // The SSH command is this fetch's only: set on a handle of its own, never on disk.
    let mut repo = repo.clone();
    if let Some(command) = &auth.ssh_command {
        let mut config = repo.config_snapshot_mut();
        config
            .set_value(&gix::config::tree::Core::SSH_COMMAND, command.as_str())
            .and_then(|_| config.set_value(&gix::config::tree::Ssh::VARIANT, "ssh"))
            .map_err(|e| fetch_error(format!("cannot configure ssh: {e}")))?;
        config
            .commit()
            .map_err(|e| fetch_error(format!("cannot configure ssh: {e}")))?;
    }
    let remote = repo
        .remote_at(url)
        .and_then(|r| r.with_refspecs(MIRROR_REFSPECS, gix::remote::Direction::Fetch))
        .map_err(|e| fetch_error(format!("invalid remote URL: {}", message(&e))))?
        // Tags come through the refspec; no extra tag-following round.
        .with_fetch_tags(gix::remote::fetch::Tags::None);
    // gix asks for credentials only when an HTTP server answers 401 (the credentials of
    // a repository Secret are already in every request, see `auth`). Without this
    // callback it would run the configured helpers and then prompt on a terminal: the
    // request is refused and remembered to say why the fetch failed.
    let asked_for_credentials = Cell::new(false);
    let mut connection = remote
        .connect(gix::remote::Direction::Fetch)
        .map_err(|e| fetch_error(format!("cannot connect: {}", message(&e))))?
        .with_credentials(|_| {
            asked_for_credentials.set(true);
            Ok(None)
        });
    if let Some(options) = auth.http.clone() {
        connection = connection.with_transport_options(Box::new(options));
    }
    let failure =
        |step: &str, e: &gix::Error, asked: bool| fetch_failure(repo_url, step, e, asked, &auth);
    let prepared = connection
        .prepare_fetch(gix::progress::Discard, Default::default())
        .map_err(|e| failure("cannot list references", &e, asked_for_credentials.get()))?;
    prepared
        .receive(gix::progress::Discard, interrupt)
        .map_err(|e| failure("cannot receive objects", &e, asked_for_credentials.get()))?;
    Ok(())
}

/// The error of a failed fetch step, saying plainly what a refusal means.
fn fetch_failure(
    repo_url: &str,
    step: &str,
    e: &gix::Error,
    asked_for_credentials: bool,
    auth: &FetchAuth,
) -> SourceError {
    let text = message(e);
    let status = http_status(&text);
    if status == Some(404) && !asked_for_credentials {
        return SourceError::RepoNotFound {
            repo: repo_url.to_owned(),
            message: format!("the server has no such repository (HTTP 404): {text}"),
        };
    }
    let message = auth::explain(auth, &text, asked_for_credentials, status)
        .unwrap_or_else(|| format!("{step}: {text}"));
    SourceError::Fetch {
        repo: repo_url.to_owned(),
        message,
    }
}

/// The status in gix's wording of an HTTP error answer ("Received HTTP status 404").
fn http_status(text: &str) -> Option<u16> {
    let (_, rest) = text.split_once("Received HTTP status ")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Makes ring rustls' process-wide crypto provider, once. reqwest (gix's HTTP transport)
/// is built without one of its own and uses the process's; nothing installs it implicitly.
/// Failure means a provider is installed already, which serves as well.
pub(crate) fn install_crypto_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Resolves `revision` to a commit, in git's order: `HEAD` (or empty); a reference
/// (`refs/...`, then `refs/tags/<rev>`, `refs/heads/<rev>`, as `git rev-parse`); then a
/// full or abbreviated (≥ 4 hex digits) commit id. An annotated tag resolves to its
/// commit.
pub(crate) fn resolve(
    opened: &Opened,
    repo_url: &str,
    revision: &str,
) -> Result<ObjectId, SourceError> {
    let repo = opened.repo.to_thread_local();
    let rev = revision.trim();
    let not_found = |detail: Option<String>| SourceError::RevisionNotFound {
        repo: repo_url.to_owned(),
        revision: revision.to_owned(),
        detail,
    };
    let id = if rev.is_empty() || rev == "HEAD" {
        if opened.mirror {
            peel_reference(&repo, REMOTE_HEAD)
                .ok_or_else(|| not_found(Some("the remote has no HEAD".into())))?
        } else {
            repo.head_id()
                .map_err(|e| not_found(Some(format!("HEAD: {}", message(&e)))))?
                .detach()
        }
    } else if let Some(id) = peel_reference(&repo, rev) {
        id
    } else if (4..=40).contains(&rev.len()) && rev.bytes().all(|b| b.is_ascii_hexdigit()) {
        let prefix =
            gix::hash::Prefix::from_hex(rev).map_err(|e| not_found(Some(e.to_string())))?;
        match repo.objects.lookup_prefix(prefix, None) {
            Ok(Some(Ok(id))) => id,
            Ok(Some(Err(()))) => {
                return Err(not_found(Some("the abbreviated id is ambiguous".into())));
            }
            Ok(None) => return Err(not_found(None)),
            Err(e) => {
                return Err(SourceError::Git {
                    repo: repo_url.to_owned(),
                    message: e.to_string(),
                });
            }
        }
    } else {
        return Err(not_found(None));
    };
    let object = repo
        .find_object(id)
        .and_then(|o| o.peel_tags_to_end())
        .map_err(|e| not_found(Some(format!("{id}: {}", message(&e)))))?;
    if object.kind != gix::object::Kind::Commit {
        return Err(not_found(Some(format!(
            "{id} is a {}, not a commit",
            object.kind
        ))));
    }
    Ok(object.id)
}

/// The object a reference points at, peeled through symbolic references; `None` when no
/// reference has that (partial) name or the name is not a valid reference name.
fn peel_reference(repo: &gix::Repository, name: &str) -> Option<ObjectId> {
    let mut reference = repo.try_find_reference(name).ok()??;
    reference.peel_to_id().ok().map(|id| id.detach())
}

/// `path` as tree components: `""`, `"."` and `"./"` are the root; `..` and absolute
/// paths are refused. The result joined with `/` keys the read cache.
pub(crate) fn clean_path(repo_url: &str, path: &str) -> Result<Vec<String>, SourceError> {
    let invalid = |reason: &str| SourceError::InvalidPath {
        repo: repo_url.to_owned(),
        path: path.to_owned(),
        reason: reason.to_owned(),
    };
    if path.starts_with('/') {
        return Err(invalid("must be relative to the repository root"));
    }
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(invalid("must not leave the repository (..)")),
            _ => parts.push(part.to_owned()),
        }
    }
    Ok(parts)
}

/// A commit of a repository, and how the application named both (for errors).
#[derive(Clone, Copy)]
pub(crate) struct At<'a> {
    /// The repository.
    pub(crate) opened: &'a Opened,
    /// `repoURL` as given.
    pub(crate) repo_url: &'a str,
    /// `targetRevision` as given.
    pub(crate) revision: &'a str,
    /// The resolved commit.
    pub(crate) commit: ObjectId,
}

/// The tree at `path` (components) under the tree `root`, or
/// [`SourceError::PathNotFound`].
pub(crate) fn subtree(
    repo: &gix::Repository,
    at: &At<'_>,
    root: ObjectId,
    path: &[String],
) -> Result<ObjectId, SourceError> {
    let git = |e: gix::Error| SourceError::Git {
        repo: at.repo_url.to_owned(),
        message: format!("commit {}: {}", at.commit, message(&e)),
    };
    let path_error = |reason| SourceError::PathNotFound {
        repo: at.repo_url.to_owned(),
        revision: at.revision.to_owned(),
        commit: at.commit.to_string(),
        path: path.join("/"),
        reason,
    };
    if path.is_empty() {
        return Ok(root);
    }
    // One component at a time, large directories through their index (`tree_index.rs`).
    let mut tree = root;
    for (i, part) in path.iter().enumerate() {
        let (mode, id) = at
            .opened
            .trees
            .entry(repo, tree, part.as_bytes())
            .map_err(git)?
            .ok_or_else(|| path_error("not found"))?;
        if !mode.is_tree() {
            // As a whole-path lookup says it: a file on the way is "not found" below it.
            return Err(path_error(if i + 1 == path.len() {
                "is not a directory"
            } else {
                "not found"
            }));
        }
        tree = id;
    }
    Ok(tree)
}

/// Reads the manifests under `path` of `commit` as Argo CD reads a directory app: the top
/// level only unless `directory.recurse` (then depth first; in a directory, files in name
/// order before subdirectories), each file's path relative to `path` filtered by
/// `directory.exclude` and then `directory.include` ([`super::glob`]); hidden entries
/// (`.`-prefixed), files of other extensions, symbolic links and submodules are skipped.
/// A Jsonnet file that passes the filters is evaluated with `jsonnet` (its objects
/// counted against the limits as the file's), or refused without it
/// ([`SourceError::UnsupportedSource`]): Argo CD would render it, so skipping it would
/// render too little.
pub(crate) fn read_manifests(
    at: &At<'_>,
    path: &[String],
    directory: &DirectoryOptions,
    limits: &super::ReadLimits,
    jsonnet: Option<&JsonnetJob>,
) -> Result<Vec<Manifest>, SourceError> {
    let At {
        opened,
        repo_url,
        revision,
        commit,
    } = *at;
    let repo = opened.repo.to_thread_local();
    let git = |e: gix::Error| SourceError::Git {
        repo: repo_url.to_owned(),
        message: format!("commit {commit}: {}", message(&e)),
    };
    let root = opened.trees.root(&repo, commit).map_err(git)?;
    let start = subtree(&repo, at, root, path)?;
    let mut out = Vec::new();
    let mut read_bytes = 0u64;
    let too_large = |what: String| SourceError::TooLarge {
        repo: repo_url.to_owned(),
        revision: revision.to_owned(),
        commit: commit.to_string(),
        what,
    };
    // An explicit stack: a hostile repository may nest trees deeper than the thread's stack.
    let mut stack = vec![(start, path.join("/"), String::new())];
    while let Some((tree_id, dir, rel_dir)) = stack.pop() {
        let tree = repo.find_tree(tree_id).map_err(git)?;
        let decoded = tree.decode().map_err(git)?;
        let join = |dir: &str, name: &str| {
            if dir.is_empty() {
                name.to_owned()
            } else {
                format!("{dir}/{name}")
            }
        };
        let file_path = |name: &str| join(&dir, name);
        let mut files = Vec::new();
        let mut subdirs = Vec::new();
        for entry in &decoded.entries {
            let name = String::from_utf8_lossy(entry.filename);
            if name.starts_with('.') {
                continue;
            }
            if let Some((_, tool)) = OTHER_TOOLS.iter().find(|(file, _)| *file == name) {
                return Err(SourceError::UnsupportedSource {
                    repo: repo_url.to_owned(),
                    revision: revision.to_owned(),
                    commit: commit.to_string(),
                    file: file_path(&name),
                    tool,
                });
            }
            if entry.mode.is_tree() {
                if directory.recurse {
                    subdirs.push((
                        entry.oid.to_owned(),
                        file_path(&name),
                        join(&rel_dir, &name),
                    ));
                }
                continue;
            }
            if !entry.mode.is_blob() {
                continue;
            }
            let rel = join(&rel_dir, &name);
            let excluded = !directory.exclude.is_empty() && glob::matches(&directory.exclude, &rel);
            let included = directory.include.is_empty() || glob::matches(&directory.include, &rel);
            if excluded || !included {
                continue;
            }
            if name.ends_with(".jsonnet") {
                if let Some(job) = jsonnet {
                    let objects = job.evaluate(&repo, root, at, &file_path(&name), limits)?;
                    out.extend(objects);
                    if out.len() > limits.max_objects {
                        return Err(too_large(format!(
                            "{} brings the app to more than {} objects (--max-objects)",
                            file_path(&name),
                            limits.max_objects
                        )));
                    }
                    continue;
                }
                return Err(SourceError::UnsupportedSource {
                    repo: repo_url.to_owned(),
                    revision: revision.to_owned(),
                    commit: commit.to_string(),
                    file: file_path(&name),
                    tool: "Jsonnet",
                });
            }
            if let Some(format) = FileFormat::of(&name) {
                files.push((entry.oid.to_owned(), file_path(&name), format));
            }
        }
        for (oid, file, format) in files {
            let size = repo.find_header(oid).map_err(git)?.size();
            read_bytes = read_bytes.saturating_add(size);
            if read_bytes > limits.max_manifest_bytes {
                return Err(too_large(format!(
                    "{file} brings the app's manifests to {read_bytes} bytes or more, over \
                     the {} allowed (--max-manifest-bytes)",
                    limits.max_manifest_bytes
                )));
            }
            let blob = repo.find_blob(oid).map_err(git)?;
            let room = limits.max_objects.saturating_sub(out.len());
            let objects = parse_file(&file, format, &blob.data, room).map_err(|error| {
                SourceError::of_manifest(repo_url, revision, &commit.to_string(), error)
            })?;
            out.extend(objects);
            if out.len() > limits.max_objects {
                return Err(too_large(format!(
                    "{file} brings the app to more than {} objects (--max-objects)",
                    limits.max_objects
                )));
            }
        }
        // Reversed so that the first subdirectory is read first.
        stack.extend(subdirs.into_iter().rev());
    }
    Ok(out)
}

/// gix's error with its causes, on one line.
pub(crate) fn message(e: &gix::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in e.iter_errors() {
        let text = cause.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
    }
    parts.join(": ")
}
