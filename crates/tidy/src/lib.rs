//! fleetshard's architecture rules, checked by `cargo test -p fleetshard-tidy`.
//!
//! `ARCHITECTURE.md` states invariants: a pure core, protocols that read no clock,
//! controllers that never know which store backend runs. `tests/tidy.rs` turns each into a
//! test that reads the workspace's `Cargo.toml` and `.rs` files as text, and fails, naming
//! the file and the rule, when a change breaks it. The model is rust-analyzer's
//! `xtask/src/tidy.rs`.
//!
//! This library holds only what the rules share: where the workspace is, which files it
//! has, what a `Cargo.toml` depends on, and which modules a source file declares. It has no
//! dependencies, so it builds in seconds and depends on nothing it checks. The readers are
//! deliberately simple (line-based, no full TOML or Rust parser); they understand the forms
//! this workspace writes and say so where they stop.

mod manifest;
mod rust;

use std::fs;
use std::path::{Path, PathBuf};

pub use manifest::{DepKind, Dependency, Manifest};
pub use rust::{ModDecl, code, module_declarations, module_file, test_only_files};

/// The workspace root: two levels above this crate (`crates/tidy`).
pub fn workspace_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// `path` relative to the workspace root with `/` separators: how messages and allow-lists
/// name files.
pub fn relative(path: &Path) -> String {
    let root = workspace_root();
    let rel = path.strip_prefix(&root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// A file's text. Panics, naming the file, if it cannot be read: a rule that silently
/// skipped a file would pass without checking it.
pub fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("tidy: cannot read {}: {e}", path.display()))
}

/// Every `.rs` file under `dir`, recursively, sorted; none if `dir` does not exist.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for entry in entries {
            let path = entry
                .unwrap_or_else(|e| panic!("tidy: cannot list {}: {e}", d.display()))
                .path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Every package of the workspace, from the root `Cargo.toml`'s `[workspace] members`
/// (plain paths and `dir/*` globs), sorted by directory.
pub fn packages() -> Vec<Manifest> {
    let root = workspace_root();
    let text = read(&root.join("Cargo.toml"));
    let members = manifest::workspace_members(&text);
    assert!(
        !members.is_empty(),
        "tidy: no `members` in the root Cargo.toml's [workspace]"
    );
    let mut dirs = Vec::new();
    for member in members {
        if let Some(parent) = member.strip_suffix("/*") {
            let parent = root.join(parent);
            let entries = fs::read_dir(&parent)
                .unwrap_or_else(|e| panic!("tidy: cannot list {}: {e}", parent.display()));
            for entry in entries.flatten() {
                if entry.path().join("Cargo.toml").is_file() {
                    dirs.push(entry.path());
                }
            }
        } else {
            dirs.push(root.join(member));
        }
    }
    dirs.sort();
    dirs.iter().map(|d| Manifest::read(d)).collect()
}
