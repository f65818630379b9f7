//! Refresh throughput of the GitOps reconciler against fake API servers.
//!
//! `cargo run --release -p fleetshard-gitops --example reconcile_throughput -- [APPS]
//! [MANIFESTS] [CLUSTERS] [ROUNDS]` (defaults 200 5 1 5): one local Git repository with one
//! directory of MANIFESTS ConfigMaps per app, apps spread round-robin over CLUSTERS fake
//! API servers, all synced once; then ROUNDS rounds of refreshing every app with 20
//! concurrent workers (Argo CD's status processors), with warm caches. Prints the first
//! (cold) refresh round, the sync, and the warm rounds' apps/s.

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use fleetshard_controller::{AppKey, Operated, Reconciler};
use fleetshard_core::{App, AppSource, AutoSync, Destination};
use fleetshard_gitops::live::{ClusterAccess, ClusterConnections, ClusterCredentials, LiveOptions};
use fleetshard_gitops::reconciler::{
    AppTarget, FixedClock, GitOpsReconciler, MemorySink, ReconcilerConfig, StaticInventory,
};
use fleetshard_gitops::source::{RepoCache, RepoCacheConfig};
use fleetshard_testsupport::kube_api::FakeApiServer;
use tokio::time::Instant;

const WORKERS: usize = 20;

fn git(dir: &std::path::Path, args: &[&str]) {
    let ok = Command::new("git")
        .args([
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@fleetshard.invalid",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .expect("git is installed")
        .success();
    assert!(ok, "git {args:?} failed");
}

/// Runs `f` on every app with WORKERS concurrent tasks; returns the elapsed seconds.
async fn round<F, Fut>(apps: &Arc<Vec<AppKey>>, f: F) -> f64
where
    F: Fn(AppKey) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (apps, next, f) = (apps.clone(), next.clone(), f.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(app) = apps.get(i) else { return };
                    f(app.clone()).await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("worker");
    }
    start.elapsed().as_secs_f64()
}

#[tokio::main]
async fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("numeric arguments"))
        .collect();
    let arg = |i: usize, d: usize| args.get(i).copied().unwrap_or(d);
    let (n_apps, n_manifests, n_clusters, rounds) = (arg(0, 200), arg(1, 5), arg(2, 1), arg(3, 5));

    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(&repo).expect("repo dir");
    git(&repo, &["init", "-q", "-b", "main"]);
    for a in 0..n_apps {
        let dir = repo.join(format!("apps/a{a}"));
        std::fs::create_dir_all(&dir).expect("app dir");
        for m in 0..n_manifests {
            let text = format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a{a}-cm{m}\n  labels:\n    app: a{a}\ndata:\n  key: value-{m}\n  other: \"{a}\"\n"
            );
            std::fs::write(dir.join(format!("cm{m}.yaml")), text).expect("manifest");
        }
    }
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "apps"]);

    let mut fakes = Vec::new();
    for _ in 0..n_clusters {
        fakes.push(FakeApiServer::start().await.expect("fake API server"));
    }
    let inventory = Arc::new(StaticInventory::default());
    let mut keys = Vec::new();
    for a in 0..n_apps {
        let c = a % n_clusters;
        let cluster = ClusterAccess {
            id: format!("c{c}"),
            server: fakes[c].url(),
            credentials: ClusterCredentials::default(),
        };
        let app = App {
            namespace: "argocd".into(),
            name: format!("a{a}"),
            project: "default".into(),
            source: AppSource {
                repo_url: repo.display().to_string(),
                target_revision: "main".into(),
                path: format!("apps/a{a}"),
            },
            destination: Destination {
                server: Some(cluster.server.clone()),
                name: None,
                namespace: Some("default".into()),
            },
            auto_sync: Some(AutoSync {
                prune: true,
                self_heal: true,
            }),
        };
        keys.push(AppKey::of(&app));
        inventory.insert(AppTarget { app, cluster });
    }
    let keys = Arc::new(keys);
    let sink = MemorySink::new();
    let reconciler = Arc::new(GitOpsReconciler::new(
        Arc::new(inventory.clone()),
        RepoCache::new(RepoCacheConfig::new(tmp.path().join("cache"))),
        ClusterConnections::new(LiveOptions::default()),
        sink.clone(),
        Arc::new(|| true),
        Arc::new(FixedClock("2026-11-21T00:00:00Z".into())),
        ReconcilerConfig::default(),
    ));

    let refresh = {
        let r = reconciler.clone();
        move |app: AppKey| {
            let r = r.clone();
            async move { r.refresh(&app).await.expect("refresh") }
        }
    };
    let operate = {
        let r = reconciler.clone();
        move |app: AppKey| {
            let r = r.clone();
            async move {
                let done = r.operate(&app).await.expect("operate");
                assert_eq!(done, Operated::Finished, "{app} was out of sync");
            }
        }
    };
    let cold = round(&keys, refresh.clone()).await;
    let sync = round(&keys, operate).await;
    let mut warm = Vec::new();
    for _ in 0..rounds {
        warm.push(round(&keys, refresh.clone()).await);
    }
    let synced = sink
        .all()
        .values()
        .filter(|s| {
            s.comparison
                .as_ref()
                .is_some_and(|c| c.sync.status == "Synced")
        })
        .count();
    assert_eq!(synced, n_apps, "every app is Synced after the sync");
    let rate = |secs: f64| n_apps as f64 / secs;
    warm.sort_by(f64::total_cmp);
    let median = warm[warm.len() / 2];
    println!("apps={n_apps} manifests/app={n_manifests} clusters={n_clusters} workers={WORKERS}");
    println!("cold refresh: {cold:.3} s ({:.0} apps/s)", rate(cold));
    println!(
        "sync (apply {} objects): {sync:.3} s ({:.0} apps/s)",
        n_apps * n_manifests,
        rate(sync)
    );
    println!(
        "warm refresh over {rounds} rounds: median {median:.3} s ({:.0} apps/s), best {:.0} apps/s",
        rate(median),
        rate(warm[0])
    );
}
