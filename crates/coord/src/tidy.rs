//! Architecture rules of this crate, checked by reading its own sources (as
//! rust-analyzer's tidy tests do): the protocol modules — `argocd/` (the Argo CD format, the
//! claim, the [`crate::argocd::ArgoReplica`] machine), `fenced/` (the
//! [`crate::fenced::Replica`] machine) and `lease.rs` — read no clock, monotonic or wall,
//! and use no async runtime: time comes in as a value ([`crate::lease::Mono`], and
//! [`crate::argocd::WallTime`] only to be written). The runners and the simulation read or
//! simulate the clocks.

use std::path::{Path, PathBuf};

/// The protocol modules, relative to the crate.
const PROTOCOL: [&str; 3] = ["src/argocd", "src/fenced", "src/lease.rs"];

/// What no line of code in them may mention (comments may).
const FORBIDDEN: [&str; 6] = [
    "Instant",
    "SystemTime",
    "UNIX_EPOCH",
    "tokio",
    "disallowed_types",
    "thread::sleep",
];

fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .map(|e| e.expect("a directory entry").path())
            .collect();
        entries.sort();
        for p in entries {
            rust_files(&p, out);
        }
    } else if path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_owned());
    }
}

#[test]
fn protocol_modules_read_no_clock_and_use_no_runtime() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for p in PROTOCOL {
        rust_files(&root.join(p), &mut files);
    }
    assert!(files.len() > 20, "the protocol modules were not found");
    let mut violations = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("a readable source file");
        for (i, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for word in FORBIDDEN.iter().filter(|w| line.contains(*w)) {
                let at = file.strip_prefix(root).unwrap_or(file).display();
                violations.push(format!("{at}:{}: {word}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(
        violations.is_empty(),
        "clock reads or runtime use in protocol modules (time must come in as a value):\n{}",
        violations.join("\n")
    );
}
