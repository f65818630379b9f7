//! Build-time facts `fleetshard --version` names: the git commit the binary was built
//! from (`git rev-parse --short HEAD`; "unknown" when git or the repository is not there,
//! as in `cargo install` from a source tarball) and the cargo features enabled. A build
//! with no repository at hand (deploy/Dockerfile: `.git` is not in the build context) names
//! its commit in `FLEETSHARD_BUILD_COMMIT`.

use std::process::Command;

fn main() {
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git").args(args).output().ok()?;
        let text = String::from_utf8(out.stdout).ok()?;
        let text = text.trim();
        (out.status.success() && !text.is_empty()).then(|| text.to_owned())
    };
    // Only this crate's own repository: a source tarball unpacked inside some other git
    // checkout must not take that checkout's commit (build.rs is tracked only in ours).
    let ours = git(&["ls-files", "--full-name", "build.rs"]).is_some();
    println!("cargo:rerun-if-env-changed=FLEETSHARD_BUILD_COMMIT");
    let given = std::env::var("FLEETSHARD_BUILD_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty());
    let commit = given.or_else(|| {
        ours.then(|| git(&["rev-parse", "--short", "HEAD"]))
            .flatten()
    });
    // Rebuild when HEAD moves: the HEAD file (a branch switch) and the branch's ref (a
    // commit), wherever this checkout keeps them (a worktree's are not under `.git/`).
    println!("cargo:rerun-if-changed=build.rs");
    if commit.is_some() {
        for path in [
            git(&["rev-parse", "--git-path", "HEAD"]),
            git(&["rev-parse", "--symbolic-full-name", "HEAD"])
                .and_then(|r| git(&["rev-parse", "--git-path", &r])),
            git(&["rev-parse", "--git-path", "packed-refs"]),
        ]
        .into_iter()
        .flatten()
        {
            if std::path::Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
    let mut features: Vec<String> = std::env::vars()
        .filter_map(|(k, _)| k.strip_prefix("CARGO_FEATURE_").map(str::to_owned))
        .filter(|f| f != "DEFAULT")
        .map(|f| f.to_lowercase().replace('_', "-"))
        .collect();
    features.sort();
    let features = if features.is_empty() {
        "none".to_owned()
    } else {
        features.join(",")
    };
    println!(
        "cargo:rustc-env=FLEETSHARD_VERSION_TEXT={} (commit {}, features: {features})",
        std::env::var("CARGO_PKG_VERSION").unwrap_or_default(),
        commit.as_deref().unwrap_or("unknown"),
    );
}
