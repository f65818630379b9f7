//! Measures rendering: renders per second of a small Kustomize app (a base and an overlay
//! with an image override and a name prefix, built by `kustomize` or `kubectl kustomize`
//! on PATH) and of a small Jsonnet app (one file importing a library, with an extVar),
//! each render a real one (a hard refresh for Kustomize, a new extVar value for Jsonnet,
//! so no cache answers); then a fleet's pattern (200 apps sharing 10 Kustomize sources,
//! refreshed all at once twice) with the render cache's hit rate.
//!
//! Run: `cargo bench -p fleetshard-gitops --bench render -- [RENDERS]`
//! (needs the `git` CLI and `kubectl` or `kustomize` on PATH; 200 renders each unless told).

#![allow(
    clippy::disallowed_types,
    reason = "a measurement harness reads the wall clock"
)]

use std::time::Instant;

use fleetshard_gitops::source::{
    Refresh, Render, RenderConfig, RenderRequest, RepoAccess, RepoCache, RepoCacheConfig,
    StandaloneRenderer,
};
use fleetshard_manifest::AppSource;
use fleetshard_testsupport::git::{Git, config_map};
use serde_json::json;

fn source(repo: &str, path: &str, raw: serde_json::Value) -> AppSource {
    AppSource {
        repo_url: repo.to_owned(),
        target_revision: "main".into(),
        path: path.into(),
        directory: Default::default(),
        raw,
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let renders: usize = std::env::args()
        .filter(|a| a != "--bench")
        .nth(1)
        .map(|a| a.parse().expect("RENDERS is a number"))
        .unwrap_or(200);
    let tmp = tempfile::tempdir().expect("temporary directory");
    let git = Git::init(&tmp.path().join("repo"));
    for i in 0..5 {
        git.write(
            &format!("base/cm-{i}.yaml"),
            &config_map(&format!("cm-{i}"), "v"),
        );
    }
    git.write(
        "base/deploy.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - {name: main, image: nginx:1.25}\n",
    );
    git.write(
        "base/kustomization.yaml",
        "resources: [deploy.yaml, cm-0.yaml, cm-1.yaml, cm-2.yaml, cm-3.yaml, cm-4.yaml]\n",
    );
    git.write("overlay/kustomization.yaml", "resources: [../base]\n");
    git.write(
        "lib/cm.libsonnet",
        "{ cm(name, value):: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: name }, data: { value: value } } }",
    );
    git.write(
        "js/main.jsonnet",
        "local lib = import '../lib/cm.libsonnet';\n[lib.cm('cm-%d' % i, std.extVar('v')) for i in std.range(0, 5)]\n",
    );
    git.commit("apps");
    let repo = git.path();
    let repos = RepoCache::new(RepoCacheConfig::new(tmp.path().join("cache")));
    let renderer = StandaloneRenderer::new(repos, RenderConfig::default());
    let kustomize = source(
        &repo,
        "overlay",
        json!({"kustomize": {"images": ["nginx=registry.example/nginx:1.27"], "namePrefix": "p-"}}),
    );
    let anonymous = RepoAccess::anonymous();
    let no_settings = Default::default();
    let request = |source, refresh| RenderRequest {
        source,
        access: &anonymous,
        namespace: "default",
        app_name: "bench",
        project: "default",
        project_source_repos: &[],
        helm_repositories: &[],
        helm_credentials: &[],
        kube_version: None,
        api_versions: &[],
        refresh,
        multi: None,
        argocd_cm: &no_settings,
        manifest_generate_paths: None,
    };
    let kustomize_objects = renderer
        .render(request(&kustomize, Refresh::Normal))
        .await
        .expect("kustomize renders")
        .manifests
        .objects
        .len();
    let start = Instant::now();
    for _ in 0..renders {
        renderer
            .render(request(&kustomize, Refresh::Hard))
            .await
            .expect("kustomize renders");
    }
    let kustomize_rate = renders as f64 / start.elapsed().as_secs_f64();

    let jsonnet = |i: usize| {
        source(
            &repo,
            "js",
            json!({"directory": {"jsonnet": {"extVars": [{"name": "v", "value": i.to_string()}]}}}),
        )
    };
    let first = jsonnet(usize::MAX);
    let jsonnet_objects = renderer
        .render(request(&first, Refresh::Normal))
        .await
        .expect("jsonnet renders")
        .manifests
        .objects
        .len();
    let sources: Vec<AppSource> = (0..renders).map(jsonnet).collect();
    let start = Instant::now();
    for s in &sources {
        renderer
            .render(request(s, Refresh::Normal))
            .await
            .expect("jsonnet renders");
    }
    let jsonnet_rate = renders as f64 / start.elapsed().as_secs_f64();

    // A fleet's pattern: 200 apps over 10 Kustomize sources (a name prefix each) in 4
    // destination namespaces, all refreshed at once, twice (a cold start, then a resync):
    // the render of a source at a commit is shared by every app that needs it.
    let fleet = StandaloneRenderer::new(
        RepoCache::new(RepoCacheConfig::new(tmp.path().join("fleet-cache"))),
        RenderConfig::default(),
    );
    let shared: Vec<AppSource> = (0..10)
        .map(|i| {
            source(
                &repo,
                "overlay",
                json!({"kustomize": {"namePrefix": format!("t{i}-")}}),
            )
        })
        .collect();
    let apps: Vec<String> = (0..200).map(|i| format!("app-{i}")).collect();
    let namespaces = ["team-a", "team-b", "team-c", "team-d"];
    let start = Instant::now();
    for _ in 0..2 {
        let all = futures::future::join_all(apps.iter().enumerate().map(|(i, name)| {
            fleet.render(RenderRequest {
                source: &shared[i % shared.len()],
                namespace: namespaces[i % namespaces.len()],
                app_name: name,
                ..request(&shared[0], Refresh::Normal)
            })
        }))
        .await;
        assert!(all.iter().all(Result::is_ok), "every app renders");
    }
    let fleet_secs = start.elapsed().as_secs_f64();
    let stats = fleet.stats();
    println!(
        "fleet: {} app renders (200 apps x 2 refreshes, 10 Kustomize sources, 4 namespaces) \
         in {fleet_secs:.2} s ({:.0} app renders/s): {} kustomize runs, {} answered from the \
         cache, hit rate {:.1} %",
        stats.requests,
        stats.requests as f64 / fleet_secs,
        stats.renders,
        stats.hits,
        stats.hit_rate() * 100.0
    );
    println!(
        "kustomize ({kustomize_objects} objects): {kustomize_rate:.1} renders/s; \
         jsonnet ({jsonnet_objects} objects): {jsonnet_rate:.1} renders/s ({renders} renders each, one at a time)"
    );
}
