//! Measures the Git source: resolve a revision and read 1,000 manifests from a real local
//! repository, cold and cached, read in place and through a mirror.
//!
//! Run: `cargo bench -p fleetshard-gitops --bench git_source -- [MANIFESTS]`
//! (needs the `git` CLI to build the repository; 1,000 manifests unless told).

#![allow(
    clippy::disallowed_types,
    reason = "a measurement harness reads the wall clock"
)]

use std::time::Instant;

use fleetshard_gitops::source::{FileFormat, Refresh, RepoCache, RepoCacheConfig, parse_file};
use fleetshard_manifest::AppSource;
use fleetshard_testsupport::git::Git;

fn millis(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let count: usize = std::env::args()
        .filter(|a| a != "--bench")
        .nth(1)
        .map(|a| a.parse().expect("MANIFESTS is a number"))
        .unwrap_or(1000);
    let tmp = tempfile::tempdir().expect("temporary directory");
    let git = Git::init(&tmp.path().join("repo"));
    // 1,000 Deployments in 20 directories of 50 files, a realistic size each (~1 KiB).
    for i in 0..count {
        let body = format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app-{i}\n  labels:\n    app: app-{i}\n    team: team-{team}\nspec:\n  replicas: 2\n  selector:\n    matchLabels:\n      app: app-{i}\n  template:\n    metadata:\n      labels:\n        app: app-{i}\n    spec:\n      containers:\n      - name: main\n        image: registry.example/app-{i}:1.2.3\n        ports:\n        - containerPort: 8080\n        resources:\n          requests: {{cpu: 100m, memory: 128Mi}}\n          limits: {{cpu: 500m, memory: 256Mi}}\n        env:\n        - {{name: MODE, value: production}}\n        - {{name: INDEX, value: \"{i}\"}}\n",
            team = i % 20
        );
        git.write(&format!("apps/team-{:02}/app-{i}.yaml", i % 20), &body);
    }
    git.commit("fleet");
    let path = git.path();
    let source = |repo_url: &str| AppSource {
        repo_url: repo_url.to_owned(),
        target_revision: "main".into(),
        path: "apps".into(),
        directory: Default::default(),
        raw: Default::default(),
    };

    // The parts: resolving alone (open + refs), and parsing alone (the same files from disk).
    let cache = RepoCache::new(RepoCacheConfig::new(tmp.path().join("cache-resolve")));
    let start = Instant::now();
    cache.resolve(&path, "main", Refresh::Normal).await.unwrap();
    let resolve_ms = millis(start);
    let mut files = Vec::new();
    for dir in std::fs::read_dir(git.dir.join("apps")).unwrap() {
        for file in std::fs::read_dir(dir.unwrap().path()).unwrap() {
            let file = file.unwrap().path();
            files.push((file.display().to_string(), std::fs::read(&file).unwrap()));
        }
    }
    let start = Instant::now();
    for (name, bytes) in &files {
        parse_file(name, FileFormat::Yaml, bytes, usize::MAX).unwrap();
    }
    let parse_ms = millis(start);
    println!("parts: resolve alone {resolve_ms:.1} ms; parse alone {parse_ms:.1} ms");

    for (label, mirror) in [("in place", false), ("mirror (file:// clone)", true)] {
        let mut config = RepoCacheConfig::new(tmp.path().join(format!("cache-{mirror}")));
        config.mirror_local = mirror;
        let cache = RepoCache::new(config);
        let url = git.file_url();
        let start = Instant::now();
        let cold = cache
            .manifests(&source(&url), Refresh::Normal)
            .await
            .unwrap();
        let cold_ms = millis(start);
        assert_eq!(cold.objects.len(), count);
        let start = Instant::now();
        let rounds = 1000;
        for _ in 0..rounds {
            cache
                .manifests(&source(&url), Refresh::Normal)
                .await
                .unwrap();
        }
        let cached_us = millis(start) * 1e3 / f64::from(rounds);
        let start = Instant::now();
        cache.manifests(&source(&url), Refresh::Hard).await.unwrap();
        let hard_ms = millis(start);
        println!(
            "{label}: {count} manifests cold (resolve + read + parse) {cold_ms:.1} ms; \
             cached {cached_us:.1} µs per call; hard refresh, nothing new {hard_ms:.1} ms"
        );
    }
}
