//! The project queue's workers (Argo CD's project processor): when an AppProject changes,
//! its applications are re-checked, and a project being deleted keeps Argo CD's finalizer
//! until no application references it.
//!
//! The inventory follower puts the name of every project that is new, changed or gone on
//! [`ShardWork::project_queue`], and of every project being deleted on each inventory
//! change. A worker takes a name, queues for refresh the applications of that project that
//! this replica owns (the refresh applies the project's rules anew), and, if the project
//! is being deleted, holds the finalizer [`PROJECT_FINALIZER`] and no application of the
//! whole inventory references it, asks the [`ProjectFinalizer`] to remove it. A failed
//! removal is retried with the queue's backoff.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use fleetshard_manifest::PROJECT_FINALIZER;
use futures::future::BoxFuture;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::inventory::{InventorySnapshot, effective_project};
use crate::{AppKey, ShardWork};

/// Removes Argo CD's finalizer from an AppProject being deleted (the Kubernetes source's
/// client does; other sources have no finalizers).
pub trait ProjectFinalizer: Send + Sync + 'static {
    /// Removes [`PROJECT_FINALIZER`] from the project `name`; `Err` says why it could not
    /// (the queue retries).
    fn release(&self, name: &str) -> BoxFuture<'static, Result<(), String>>;
}

/// What the project workers did.
#[derive(Debug, Default)]
pub struct ProjectStats {
    /// Projects processed.
    pub processed: AtomicU64,
    /// Applications queued for refresh because their project changed (owned or not:
    /// the work keeps the owned ones).
    pub apps_requeued: AtomicU64,
    /// Finalizers removed.
    pub released: AtomicU64,
}

/// The running project workers.
#[derive(Debug)]
pub struct ProjectProcessor {
    work: Arc<ShardWork>,
    stats: Arc<ProjectStats>,
    workers: Vec<JoinHandle<()>>,
}

impl ProjectProcessor {
    /// Starts `workers` workers (at least one) on the work's project queue, reading
    /// projects and applications from `inventory`.
    pub fn start(
        workers: usize,
        work: Arc<ShardWork>,
        inventory: watch::Receiver<InventorySnapshot>,
        finalizer: Option<Arc<dyn ProjectFinalizer>>,
    ) -> Self {
        let stats = Arc::new(ProjectStats::default());
        let workers = (0..workers.max(1))
            .map(|_| {
                tokio::spawn(worker(
                    work.clone(),
                    inventory.clone(),
                    finalizer.clone(),
                    stats.clone(),
                ))
            })
            .collect();
        ProjectProcessor {
            work,
            stats,
            workers,
        }
    }

    /// What the workers did so far.
    pub fn stats(&self) -> &Arc<ProjectStats> {
        &self.stats
    }

    /// Stops the queue and waits for the workers.
    pub async fn shutdown(self) {
        self.work.project_queue().shut_down_with_drain().await;
        for w in self.workers {
            let _ = w.await;
        }
    }
}

async fn worker(
    work: Arc<ShardWork>,
    inventory: watch::Receiver<InventorySnapshot>,
    finalizer: Option<Arc<dyn ProjectFinalizer>>,
    stats: Arc<ProjectStats>,
) {
    let queue = work.project_queue();
    while let Some(name) = queue.get().await {
        tokio::task::coop::consume_budget().await;
        let snap = inventory.borrow().clone();
        let apps: Vec<AppKey> = snap
            .apps
            .iter()
            .filter(|a| effective_project(&a.project) == name)
            .map(AppKey::of)
            .collect();
        let referenced = !apps.is_empty();
        stats
            .apps_requeued
            .fetch_add(apps.len() as u64, Ordering::Relaxed);
        work.refresh_apps(apps);
        stats.processed.fetch_add(1, Ordering::Relaxed);
        let deleting = snap
            .projects
            .get(&name)
            .is_some_and(|p| p.deleting && p.has_finalizer);
        match &finalizer {
            Some(f) if deleting && !referenced => match f.release(&name).await {
                Ok(()) => {
                    tracing::info!(project = %name, finalizer = PROJECT_FINALIZER, "no application references the project being deleted; finalizer removed");
                    stats.released.fetch_add(1, Ordering::Relaxed);
                    queue.forget(&name);
                }
                Err(why) => {
                    tracing::warn!(project = %name, %why, "cannot remove the project's finalizer; will retry");
                    queue.add_rate_limited(name.clone());
                }
            },
            _ => queue.forget(&name),
        }
        queue.done(&name);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    use std::time::Duration;

    use fleetshard_core::{App, Cluster};
    use fleetshard_manifest::AppProject;

    use super::*;
    use crate::inventory::{Inventory, InventoryContent, follow_inventory};

    /// Records the projects whose finalizer it was asked to remove.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<String>>);

    impl ProjectFinalizer for Recorder {
        fn release(&self, name: &str) -> BoxFuture<'static, Result<(), String>> {
            self.0.lock().unwrap().push(name.to_owned());
            Box::pin(async { Ok(()) })
        }
    }

    fn content(apps: Vec<App>, team: AppProject) -> InventoryContent {
        InventoryContent {
            clusters: vec![Cluster::new("c1", "https://c1")],
            apps,
            projects: BTreeMap::from([("team".to_owned(), Arc::new(team))]),
            ..InventoryContent::default()
        }
    }

    fn app(name: &str, project: &str) -> App {
        App {
            project: project.into(),
            ..App::to_server("argocd", name, "https://c1")
        }
    }

    /// Drains the refresh queue: the keys queued since the last drain.
    async fn drain(work: &ShardWork) -> Vec<String> {
        let mut out = Vec::new();
        while !work.refresh_queue().is_empty() {
            let k = work.refresh_queue().get().await.unwrap();
            work.refresh_queue().done(&k);
            out.push(k.to_string());
        }
        out.sort();
        out
    }

    #[tokio::test(start_paused = true)]
    async fn a_project_change_requeues_its_apps_and_a_deleted_project_is_released_when_unused() {
        let work = ShardWork::new(
            crate::WorkQueue::with_default_limits(),
            crate::WorkQueue::with_default_limits(),
            crate::shard_work::WorkMetrics::default(),
        );
        work.start_cluster("c1");
        let inventory = Inventory::new();
        let team = AppProject {
            name: "team".into(),
            ..AppProject::default()
        };
        let apps = vec![app("a", "team"), app("b", "other"), app("c", "")];
        inventory.publish(content(apps.clone(), team.clone()), vec![], true);
        let recorder = Arc::new(Recorder::default());
        let follow = tokio::spawn(follow_inventory(work.clone(), inventory.subscribe()));
        let projects = ProjectProcessor::start(
            2,
            work.clone(),
            inventory.subscribe(),
            Some(recorder.clone()),
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
        drain(&work).await;

        // The project's rules change: its one app is re-queued, no other.
        let narrowed = AppProject {
            source_repos: vec!["https://git.example/*".into()],
            ..team.clone()
        };
        inventory.publish(content(apps.clone(), narrowed.clone()), vec![], true);
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(drain(&work).await, ["argocd/a"]);
        assert_eq!(projects.stats().apps_requeued.load(Ordering::Relaxed), 1);

        // Deleted while app `a` references it: the finalizer stays.
        let deleting = AppProject {
            deleting: true,
            has_finalizer: true,
            ..narrowed
        };
        inventory.publish(content(apps.clone(), deleting.clone()), vec![], true);
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(recorder.0.lock().unwrap().is_empty(), "still referenced");
        // The app goes: the finalizer is removed.
        inventory.publish(content(apps[1..].to_vec(), deleting), vec![], true);
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(*recorder.0.lock().unwrap(), ["team"]);
        follow.abort();
        projects.shutdown().await;
    }
}
