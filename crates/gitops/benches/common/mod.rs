//! What the reconciler's measurement programs share: an auto-synced app's spec, running an
//! operation on every app with a number of concurrent workers, and the median of a sample.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use fleetshard_controller::{AppKey, Operated, Reconciler};
use fleetshard_gitops::reconciler::GitOpsReconciler;
use fleetshard_manifest::{AppSource, AppSpec, AutoSync};

/// The spec of an app rendering the plain manifests at `path` of `repo`'s `main`, synced
/// automatically with pruning and self-heal.
pub fn auto_synced(repo: &str, path: String) -> AppSpec {
    AppSpec {
        source: AppSource {
            repo_url: repo.to_owned(),
            target_revision: "main".into(),
            path,
            directory: Default::default(),
            raw: Default::default(),
        },
        auto_sync: Some(AutoSync {
            prune: true,
            self_heal: true,
            allow_empty: false,
        }),
        sync_request: None,
        refusals: Vec::new(),
        refresh: None,
        sources: Vec::new(),
        policy: Default::default(),
        lifecycle: Default::default(),
    }
}

/// What a round does to each app.
#[derive(Clone, Copy)]
pub enum Op {
    /// A refresh (compare, health, status).
    Refresh,
    /// An operation, which must finish (the app was out of sync).
    Operate,
}

/// Runs `op` on every app of `apps` with `workers` concurrent tasks taking the next app in
/// turn; panics on any failure.
pub async fn round(
    reconciler: &Arc<GitOpsReconciler>,
    apps: &Arc<Vec<AppKey>>,
    op: Op,
    workers: usize,
) {
    let next = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..workers)
        .map(|_| {
            let (r, apps, next) = (reconciler.clone(), apps.clone(), next.clone());
            tokio::spawn(async move {
                while let Some(app) = apps.get(next.fetch_add(1, Ordering::Relaxed)) {
                    match op {
                        Op::Refresh => r
                            .refresh(app)
                            .await
                            .unwrap_or_else(|e| panic!("refresh {app}: {e}")),
                        Op::Operate => {
                            let done = r
                                .operate(app)
                                .await
                                .unwrap_or_else(|e| panic!("operate {app}: {e}"));
                            assert_eq!(done, Operated::Finished, "{app} was out of sync");
                        }
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("worker");
    }
}

/// The median (the upper one of an even count).
pub fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}
