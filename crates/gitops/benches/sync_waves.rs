//! How long a sync of a three-wave app takes on a simulated cluster: a PreSync hook (a Job
//! this program completes as soon as it appears, as a Job controller would), then waves 0,
//! 1 and 2 of `PER_WAVE` ConfigMaps each, from the first operation to its end, driven as
//! the controller drives it (each `Operated::Wait` slept, then the next step), with Argo
//! CD's wave delay (2 s) and without it (what the engine, the writes and the status cost).
//!
//! `cargo bench -p fleetshard-gitops --bench sync_waves -- [PER_WAVE,...] [RUNS]`
//! (defaults `10,100` and 3): per size and delay, the median wall time of RUNS syncs
//! (fresh fake API server and repository each), the steps (operations run) and the
//! writes the cluster received.

use std::sync::Arc;
use std::time::Duration;

use fleetshard_controller::{AppKey, Operated, Reconciler};
use fleetshard_core::{App, Destination};
use fleetshard_gitops::live::{ClusterAccess, ClusterConnections, ClusterCredentials, LiveOptions};
use fleetshard_gitops::reconciler::{
    AppTarget, FixedClock, GitOpsReconciler, MemorySink, ReconcilerConfig, StaticInventory,
};
use fleetshard_gitops::source::{RepoCache, RepoCacheConfig};
use fleetshard_testsupport::git::Git;
use fleetshard_testsupport::kube_api::FakeApiServer;
use serde_json::json;
use tokio::time::Instant;

#[allow(dead_code, reason = "shared by the benches; this one runs no rounds")]
mod common;
use common::{auto_synced, median};

fn args() -> (Vec<usize>, usize) {
    let raw: Vec<String> = std::env::args()
        .filter(|a| a != "--bench")
        .skip(1)
        .collect();
    let sizes = raw.first().map_or(vec![10, 100], |s| {
        s.split(',')
            .map(|n| n.trim().parse().expect("PER_WAVE: numbers"))
            .collect()
    });
    let runs = raw.get(1).map_or(3, |r| r.parse().expect("RUNS: a number"));
    (sizes, runs)
}

/// The app: a PreSync Job and `per_wave` ConfigMaps in each of waves 0, 1 and 2.
fn write_repo(dir: &std::path::Path, per_wave: usize) -> Git {
    let git = Git::init(dir);
    git.write(
        "app/migrate.yaml",
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  annotations:\n    argocd.argoproj.io/hook: PreSync\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - {name: m, image: busybox}\n",
    );
    for wave in 0..3 {
        for i in 0..per_wave {
            git.write(
                &format!("app/w{wave}-{i}.yaml"),
                &format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: w{wave}-{i}\n  annotations:\n    argocd.argoproj.io/sync-wave: \"{wave}\"\ndata: {{value: \"{i}\"}}\n"
                ),
            );
        }
    }
    git.commit("three waves");
    git
}

/// One sync from start to end: its wall time, steps and the cluster's writes.
async fn one(per_wave: usize, wave_delay: Duration) -> (Duration, usize, u64) {
    let tmp = tempfile::tempdir().unwrap();
    let git = write_repo(&tmp.path().join("repo"), per_wave);
    let fake = Arc::new(FakeApiServer::start().await.unwrap());
    let inventory = Arc::new(StaticInventory::default());
    let cluster = ClusterAccess {
        id: "c1".into(),
        server: fake.url(),
        credentials: ClusterCredentials::default(),
    };
    inventory.insert(AppTarget {
        app: App {
            namespace: "argocd".into(),
            name: "a".into(),
            project: "default".into(),
            destination: Destination {
                server: Some(fake.url()),
                name: None,
                namespace: Some("default".into()),
            },
        },
        spec: auto_synced(&git.path(), "app".into()),
        cluster_name: "c1".into(),
        cluster,
        project: Some(Arc::new(fleetshard_manifest::AppProject::builtin_default(
            "argocd",
        ))),
        repositories: Default::default(),
        argocd_cm: Default::default(),
    });
    let mut repo_config = RepoCacheConfig::new(tmp.path().join("cache"));
    repo_config.refresh_interval = Duration::ZERO;
    let r = GitOpsReconciler::new(
        inventory,
        RepoCache::new(repo_config),
        ClusterConnections::new(LiveOptions::default()),
        MemorySink::new(),
        Arc::new(|| Some(Instant::now() + Duration::from_secs(3600))),
        Arc::new(FixedClock("2026-11-21T10:00:00Z".into())),
        ReconcilerConfig {
            wave_delay,
            operation_poll: Duration::from_millis(20),
            ..ReconcilerConfig::default()
        },
    );
    let key = AppKey::new("argocd", "a");
    // The Job controller: a Job completes as soon as it exists.
    let jobs = {
        let fake = fake.clone();
        tokio::spawn(async move {
            loop {
                let _ = fake.modify("batch/v1", "Job", "default", "migrate", |j| {
                    j["status"] = json!({"conditions": [{"type": "Complete", "status": "True"}]});
                });
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    r.refresh(&key).await.unwrap();
    fake.reset_request_counts();
    let start = Instant::now();
    let mut steps = 0;
    loop {
        steps += 1;
        match r.operate(&key).await.unwrap() {
            Operated::Finished => break,
            Operated::Wait(d) => tokio::time::sleep(d).await,
            Operated::Idle => panic!("the sync did not start"),
        }
        // The controller refreshes on the changes the sync makes before stepping again.
        r.refresh(&key).await.unwrap();
    }
    let took = start.elapsed();
    jobs.abort();
    (took, steps, fake.write_count())
}

#[tokio::main]
async fn main() {
    let (sizes, runs) = args();
    println!("per wave | wave delay | median sync | steps | cluster writes");
    for per_wave in sizes {
        for delay in [Duration::from_secs(2), Duration::ZERO] {
            let mut times = Vec::new();
            let mut last = (0, 0);
            for _ in 0..runs {
                let (took, steps, writes) = one(per_wave, delay).await;
                times.push(took.as_secs_f64() * 1000.0);
                last = (steps, writes);
            }
            println!(
                "{per_wave:8} | {:>9?} | {:8.0} ms | {:5} | {:5}",
                delay,
                median(times),
                last.0,
                last.1
            );
        }
    }
}
