//! A commit's tree for renderers: the names of the files at the top of the app's path
//! (to detect its type), and the whole tree written to a directory for the tools that
//! read files themselves (`kustomize build`, `helm template`).

use std::path::Path;

use super::super::ReadLimits;
use super::super::error::SourceError;
use super::super::repo::{At, message, subtree};

/// The names of the files (not directories, links or submodules) directly under `path`.
pub(crate) fn file_names(at: &At<'_>, path: &[String]) -> Result<Vec<String>, SourceError> {
    let repo = at.opened.repo.to_thread_local();
    let git = |e: gix::Error| git_error(at, &e);
    let root = at.opened.trees.root(&repo, at.commit).map_err(git)?;
    let start = subtree(&repo, at, root, path)?;
    let tree = repo.find_tree(start).map_err(git)?;
    let decoded = tree.decode().map_err(git)?;
    Ok(decoded
        .entries
        .iter()
        .filter(|e| e.mode.is_blob())
        .map(|e| String::from_utf8_lossy(e.filename).into_owned())
        .collect())
}

/// Writes the commit's whole tree under `dest` (created): regular and executable files,
/// directories. Symbolic links and submodules are not written (a link could lead a tool
/// out of the copy), and names that are not plain path components are refused. The
/// bytes written are bounded by [`ReadLimits::max_tree_bytes`].
pub(crate) fn materialize(
    at: &At<'_>,
    dest: &Path,
    limits: &ReadLimits,
) -> Result<(), SourceError> {
    let repo = at.opened.repo.to_thread_local();
    let git = |e: gix::Error| git_error(at, &e);
    let io = |what: &Path, e: std::io::Error| SourceError::Git {
        repo: at.repo_url.to_owned(),
        message: format!("cannot write {} for rendering: {e}", what.display()),
    };
    let root = at.opened.trees.root(&repo, at.commit).map_err(git)?;
    std::fs::create_dir_all(dest).map_err(|e| io(dest, e))?;
    let mut written = 0u64;
    // An explicit stack: a hostile repository may nest trees deeper than the thread's stack.
    let mut stack = vec![(root, dest.to_path_buf())];
    while let Some((tree_id, dir)) = stack.pop() {
        let tree = repo.find_tree(tree_id).map_err(git)?;
        let decoded = tree.decode().map_err(git)?;
        for entry in &decoded.entries {
            let name = String::from_utf8_lossy(entry.filename);
            if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\', '\0']) {
                return Err(SourceError::Git {
                    repo: at.repo_url.to_owned(),
                    message: format!("commit {}: invalid tree entry name {name:?}", at.commit),
                });
            }
            let target = dir.join(name.as_ref());
            if entry.mode.is_tree() {
                std::fs::create_dir(&target).map_err(|e| io(&target, e))?;
                stack.push((entry.oid.to_owned(), target));
            } else if entry.mode.is_blob() {
                let blob = repo.find_blob(entry.oid).map_err(git)?;
                written = written.saturating_add(blob.data.len() as u64);
                if written > limits.max_tree_bytes {
                    return Err(SourceError::TooLarge {
                        repo: at.repo_url.to_owned(),
                        revision: at.revision.to_owned(),
                        commit: at.commit.to_string(),
                        what: format!(
                            "the repository's tree is over the {} bytes a renderer may copy",
                            limits.max_tree_bytes
                        ),
                    });
                }
                std::fs::write(&target, &blob.data).map_err(|e| io(&target, e))?;
                #[cfg(unix)]
                if entry.mode.is_executable() {
                    use std::os::unix::fs::PermissionsExt as _;
                    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755))
                        .map_err(|e| io(&target, e))?;
                }
            }
        }
    }
    Ok(())
}

fn git_error(at: &At<'_>, e: &gix::Error) -> SourceError {
    SourceError::Git {
        repo: at.repo_url.to_owned(),
        message: format!("commit {}: {}", at.commit, message(e)),
    }
}
