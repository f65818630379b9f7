//! The architecture rules of `ARCHITECTURE.md`, one test each. Every failure names the
//! file or crate, the rule, and why the rule exists.
//!
//! Allow-lists are explicit constants. A temporary entry says what removes it; an entry
//! that no longer matches anything fails its test, so it is deleted rather than kept.

use std::path::PathBuf;

use fleetshard_tidy::{
    Manifest, code, module_declarations, packages, read, relative, rust_files, test_only_files,
    workspace_root,
};

/// Fails with every violation of `rule`, and why the rule exists.
fn check(rule: &str, why: &str, violations: Vec<String>) {
    if !violations.is_empty() {
        panic!(
            "\ntidy rule broken: {rule}\n  {}\nWhy: {why}\n",
            violations.join("\n  ")
        );
    }
}

/// The manifest of `package`; panics if it is gone, so a rename cannot empty a rule.
fn package<'a>(all: &'a [Manifest], package: &str) -> &'a Manifest {
    all.iter()
        .find(|m| m.package == package)
        .unwrap_or_else(|| panic!("tidy: no package `{package}` in the workspace; update the rule"))
}

/// Every `.rs` file of every package under `sub` (`src`, `tests`, …; "" for all).
fn package_files(sub: &str) -> Vec<PathBuf> {
    packages()
        .iter()
        .flat_map(|m| rust_files(&m.dir.join(sub)))
        .collect()
}

/// Entries of a temporary allow-list that no longer excuse anything.
fn stale(list: &str, entries: &[&str], used: &[String]) -> Vec<String> {
    entries
        .iter()
        .filter(|e| !used.iter().any(|u| u == *e))
        .map(|e| format!("{e}: listed in {list} but no longer breaks the rule; delete the entry"))
        .collect()
}

/// The pure crates and the exact dependencies each may have.
const PURE_CRATES: &[(&str, &[&str])] = &[
    (
        "fleetshard-core",
        &["blake2b_simd", "rustc-hash", "thiserror"],
    ),
    (
        "fleetshard-fleetgen",
        &["fleetshard-core", "fleetshard-util", "thiserror"],
    ),
    // The shared helpers: pure, and with no dependency at all.
    ("fleetshard-util", &[]),
    // What a comparison leaves out: a function of the objects and the rules.
    (
        "fleetshard-diff",
        &[
            "fleetshard-manifest",
            "jaq-core",
            "jaq-json",
            "jaq-std",
            "serde_json",
            "thiserror",
        ],
    ),
    // Argo CD's sync as a step machine: the reconciler drives it and does every write.
    ("fleetshard-sync", &["fleetshard-util", "thiserror"]),
    // plan renders the JSON report, a stable contract: serde belongs here, not in core.
    (
        "fleetshard-plan",
        &["fleetshard-core", "serde", "serde_json", "thiserror"],
    ),
];

#[test]
fn pure_crates_gain_no_dependencies() {
    let all = packages();
    let mut violations = Vec::new();
    for (name, allowed) in PURE_CRATES {
        let m = package(&all, name);
        for dep in m.normal_dependencies() {
            if !allowed.contains(&dep) {
                violations.push(format!(
                    "{}: `{name}` depends on `{dep}`, which is not in its allow-list {allowed:?} \
                     (PURE_CRATES in crates/tidy/tests/tidy.rs; add it there only if it does no \
                     async, no I/O and, for core, no serde)",
                    m.path()
                ));
            }
        }
    }
    check(
        "core, plan, fleetgen, util and sync depend only on their allow-listed crates",
        "they are pure (no async, no I/O, no clock; core has no serde) so that every replica \
         recomputes the same assignment and their tests need no runtime.",
        violations,
    );
}

/// What reading files, the environment, the network, processes, threads or a clock looks
/// like in source (`std::io::Write` into a `Vec` is not I/O and is not listed).
const IO_PATHS: &[&str] = &[
    "std::fs",
    "std::env",
    "std::net",
    "std::process",
    "std::thread",
    "Instant",
    "SystemTime",
];

#[test]
fn pure_crates_do_no_io() {
    let all = packages();
    let mut violations = Vec::new();
    for (name, _) in PURE_CRATES {
        for file in rust_files(&package(&all, name).dir.join("src")) {
            for (n, line) in read(&file).lines().enumerate() {
                if let Some(found) = IO_PATHS.iter().find(|p| code(line).contains(*p)) {
                    violations.push(format!("{}:{}: `{found}`", relative(&file), n + 1));
                }
            }
        }
    }
    check(
        "core, plan, fleetgen, util and sync read no file, environment, network, process, thread or clock",
        "their results must be a function of their arguments alone (timings reach plan through \
         its Stopwatch trait), so any replica can recompute and check them.",
        violations,
    );
}

/// Packages that may use `anyhow`: the binary, and this crate's own tests.
const ANYHOW_ALLOWED: &[&str] = &["fleetshard", "fleetshard-tidy"];

#[test]
fn libraries_do_not_depend_on_anyhow() {
    let violations = packages()
        .iter()
        .filter(|m| !ANYHOW_ALLOWED.contains(&m.package.as_str()))
        .filter(|m| m.normal_dependencies().any(|d| d == "anyhow"))
        .map(|m| {
            format!(
                "{}: library `{}` depends on `anyhow` in [dependencies]",
                m.path(),
                m.package
            )
        })
        .collect();
    check(
        "only the binary depends on anyhow",
        "libraries return typed errors (a thiserror enum per module) that callers can match on; \
         turning them into strings is the binary's job.",
        violations,
    );
}

/// The protocol modules: pure state machines that take time as an argument.
const PROTOCOL_DIRS: &[&str] = &[
    "crates/coord/src/fenced",
    "crates/coord/src/argocd",
    "crates/coord/src/lease.rs",
];

/// What reading a clock, sleeping or an async runtime looks like (time comes in as a value:
/// `Mono`, and `WallTime` only to be written).
const CLOCK_READS: &[&str] = &[
    "Instant",
    "SystemTime",
    "UNIX_EPOCH",
    "tokio",
    "disallowed_types",
    "thread::sleep",
];

#[test]
fn protocols_read_no_clock() {
    let root = workspace_root();
    let mut violations = Vec::new();
    for dir in PROTOCOL_DIRS {
        let path = root.join(dir);
        let files = if path.is_file() {
            vec![path]
        } else {
            rust_files(&path)
        };
        assert!(
            !files.is_empty(),
            "tidy: no files under {dir}; update the rule"
        );
        for file in files {
            let rel = relative(&file);
            for (n, line) in read(&file).lines().enumerate() {
                if let Some(found) = CLOCK_READS.iter().find(|c| code(line).contains(*c)) {
                    violations.push(format!("{rel}:{}: `{found}`", n + 1));
                }
            }
        }
    }
    check(
        "no clock reads, sleeps or async runtime under coord/src/{fenced,argocd} and lease.rs",
        "protocol decisions take time as an argument (`Mono`, `WallTime`) so that the \
         deterministic simulation and paused-time tests control every timing.",
        violations,
    );
}

#[test]
fn controller_and_gitops_know_no_store_backend() {
    let all = packages();
    let mut violations = Vec::new();
    for name in ["fleetshard-controller", "fleetshard-gitops"] {
        let m = package(&all, name);
        for dep in m.normal_dependencies() {
            if dep.starts_with("fleetshard-store-") {
                violations.push(format!("{}: `{name}` depends on `{dep}`", m.path()));
            }
        }
    }
    check(
        "controller and gitops do not depend on a fleetshard-store-* crate",
        "they reach the store only through coord's `Store` trait, so every backend serves them \
         unchanged and the binary alone chooses one.",
        violations,
    );
}

/// Names that bring std's randomly seeded hasher (`FxHashMap`/`FxHashSet` are fine).
const STD_HASHING: &[&str] = &["HashMap", "HashSet", "RandomState", "DefaultHasher"];

#[test]
fn core_uses_no_std_hasher() {
    let src = workspace_root().join("crates/core/src");
    let mut violations = Vec::new();
    for file in rust_files(&src) {
        for (n, line) in read(&file).lines().enumerate() {
            let code = code(line);
            for name in STD_HASHING {
                let bare = code.match_indices(name).any(|(i, _)| {
                    let before = code[..i].chars().next_back();
                    let after = code[i + name.len()..].chars().next();
                    let ident =
                        |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
                    !ident(before) && !ident(after)
                });
                if bare {
                    violations.push(format!("{}:{}: `{name}`", relative(&file), n + 1));
                }
            }
        }
    }
    check(
        "core uses no std HashMap/HashSet/RandomState/DefaultHasher (FxHash only)",
        "std's hasher is randomly seeded per process, and core must give every replica the \
         same answer in the same order; its hashes are spelled out (rustc-hash, blake2b).",
        violations,
    );
}

/// Files that still allow dead code wholesale.
const KNOWN_BLANKET_DEAD_CODE: &[&str] = &[];

#[test]
fn no_blanket_dead_code_allowance() {
    let mut violations = Vec::new();
    let mut excused = Vec::new();
    for file in package_files("") {
        let rel = relative(&file);
        for (n, line) in read(&file).lines().enumerate() {
            let compact: String = code(line).chars().filter(|c| !c.is_whitespace()).collect();
            let blanket = compact.starts_with("#![allow(")
                && ["(dead_code", ",dead_code", "(unused", ",unused"]
                    .iter()
                    .any(|l| compact.contains(l));
            if !blanket {
                continue;
            }
            if KNOWN_BLANKET_DEAD_CODE.contains(&rel.as_str()) {
                excused.push(rel.clone());
            } else {
                violations.push(format!("{rel}:{}: `{}`", n + 1, line.trim()));
            }
        }
    }
    violations.extend(stale(
        "KNOWN_BLANKET_DEAD_CODE",
        KNOWN_BLANKET_DEAD_CODE,
        &excused,
    ));
    check(
        "no module-wide #![allow(dead_code)] or #![allow(unused…)]",
        "a blanket allowance hides helpers nothing uses any more; test files that share a \
         support module belong in one test binary (tests/NAME/main.rs), where unused code shows.",
        violations,
    );
}

/// Lines a source file under `src` may have, for code that ships…
const MAX_LINES: usize = 600;
/// …and for modules only tests compile (`#[cfg(test)] mod tests;` and the like).
const MAX_TEST_LINES: usize = 900;

#[test]
fn source_files_stay_small() {
    let mut violations = Vec::new();
    for m in packages() {
        let src = m.dir.join("src");
        let tests = test_only_files(&src);
        for file in rust_files(&src) {
            let (limit, kind) = if tests.contains(&file) {
                (MAX_TEST_LINES, "test module")
            } else {
                (MAX_LINES, "source file")
            };
            let lines = read(&file).lines().count();
            if lines > limit {
                violations.push(format!(
                    "{}: {lines} lines, over the {limit} allowed for a {kind}",
                    relative(&file)
                ));
            }
        }
    }
    check(
        &format!(
            "source files under crates/*/src have at most {MAX_LINES} lines \
             ({MAX_TEST_LINES} for test-only modules)"
        ),
        "a file is read as one unit; past this size it holds more than one idea and should be \
         split along them (as placement/engine/ and fenced/replica/ are).",
        violations,
    );
}

/// Whether a crate root starts with a crate-level doc (`//!` or `#![doc = ..]`) before its
/// first item.
fn has_crate_doc(text: &str) -> bool {
    for line in text.lines().map(str::trim) {
        if line.starts_with("//!") || line.starts_with("#![doc") {
            return true;
        }
        if !(line.is_empty() || line.starts_with("//") || line.starts_with("#![")) {
            return false;
        }
    }
    false
}

#[test]
fn crates_have_doc_comments() {
    let mut violations = Vec::new();
    for m in packages() {
        let roots: Vec<PathBuf> = ["src/lib.rs", "src/main.rs"]
            .iter()
            .map(|r| m.dir.join(r))
            .filter(|p| p.is_file())
            .collect();
        if roots.is_empty() {
            violations.push(format!(
                "{}: no src/lib.rs or src/main.rs",
                relative(&m.dir)
            ));
        }
        for root in roots {
            if !has_crate_doc(&read(&root)) {
                violations.push(format!(
                    "{}: `{}` has no crate doc comment (`//!`) before its first item",
                    relative(&root),
                    m.package
                ));
            }
        }
    }
    check(
        "every crate root opens with a doc comment",
        "the crate doc is the first thing a newcomer reads (and what docs.rs shows): it says \
         what the crate is for and which invariants it keeps.",
        violations,
    );
}

/// Modules that exist for tests (backends' conformance suite, measurements, upstream
/// reference code) and must not be compiled into production builds.
const HARNESS_MODULES: &[&str] = &["conformance", "throughput", "upstream"];

#[test]
fn test_harnesses_stay_out_of_production() {
    let mut violations = Vec::new();
    for file in package_files("src") {
        for decl in module_declarations(&read(&file)) {
            if HARNESS_MODULES.contains(&decl.name.as_str()) && !decl.is_test_only() {
                violations.push(format!(
                    "{}:{}: `mod {}` without `#[cfg(any(test, feature = \"test-util\"))]`",
                    relative(&file),
                    decl.line,
                    decl.name
                ));
            }
        }
    }
    check(
        "test harness modules (conformance, throughput, upstream) are cfg(test) or test-util",
        "code that panics on a violation, measures, or reproduces upstream's defects must not \
         ship: tests enable it with the `test-util` feature in [dev-dependencies].",
        violations,
    );
}

#[test]
fn rules_read_the_real_workspace() {
    // The rules above pass vacuously if they look in the wrong place.
    let root = workspace_root();
    assert!(
        root.join("ARCHITECTURE.md").is_file(),
        "tidy: {} is not the workspace root",
        root.display()
    );
    assert!(packages().len() >= 12, "tidy: too few packages found");
    assert!(root.join("crates/tidy/tests/tidy.rs").is_file());
}
