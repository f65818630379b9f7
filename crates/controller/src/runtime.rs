//! One replica's controller runtime, assembled in one place (kube-runtime's `Controller`
//! is the model): [`ShardWork::registered`] builds the queues and the shard's work as a
//! plain value (the reconciler takes it as an argument), and [`ControllerRuntime::start`]
//! takes that work, the reconciler and every input at once — the ownership feed, the
//! runner's status (its lease deadline closes the gate), the inventory — and runs the
//! worker pools, the followers and the periodic resync. The coordination runner stops
//! clusters through [`WorkStopHook`] (a cluster's stop is acknowledged only once its work
//! has ended: G1 across the whole replica).

use std::sync::Arc;

use std::time::Duration;

use fleetshard_coord::ownership::{Ownership, OwnershipChange, ReplicaStatus, StopHook};
use futures::future::BoxFuture;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::ConfigError;
use crate::inventory::{InventorySnapshot, follow_inventory};
use crate::processor::{PoolConfig, Processors, Reconciler};
use crate::project::{ProjectFinalizer, ProjectProcessor};
use crate::queue::RateLimiterConfig;
use crate::shard_work::ShardWork;

/// A reconciler that does nothing: the queues, the shard filter and the handover gate
/// run, no app is changed. What `fleetshard run --reconciler none` uses.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopReconciler;

impl Reconciler for NoopReconciler {
    async fn refresh(&self, _: &crate::AppKey) -> Result<(), crate::ReconcileError> {
        Ok(())
    }
    async fn operate(&self, _: &crate::AppKey) -> Result<crate::Operated, crate::ReconcileError> {
        Ok(crate::Operated::Idle)
    }
}

/// Argo CD's `timeout.reconciliation` default: every owned app is refreshed this often
/// even when no event says it changed (drift on the cluster, a new commit on a branch).
pub const DEFAULT_RESYNC: std::time::Duration = std::time::Duration::from_secs(180);

/// The default spread of a resync's refreshes.
pub const DEFAULT_RESYNC_JITTER: std::time::Duration = std::time::Duration::from_secs(60);

/// How the runtime is set up.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Worker pool sizes.
    pub pools: PoolConfig,
    /// Both queues' rate limits.
    pub limits: RateLimiterConfig,
    /// How often every owned app is queued for refresh; `None`: only on events.
    pub resync: Option<std::time::Duration>,
    /// Each app's resync is delayed by a fixed part of this (at most the period), so the
    /// refreshes of a large fleet are spread instead of queued at once.
    pub resync_jitter: std::time::Duration,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            pools: PoolConfig::default(),
            limits: RateLimiterConfig::default(),
            resync: Some(DEFAULT_RESYNC),
            resync_jitter: DEFAULT_RESYNC_JITTER,
        }
    }
}

/// How a stop reaches the work on a cluster.
#[derive(Clone)]
pub enum StopMode {
    /// The coordination runner stops clusters through the [`StopHook`] it was given before
    /// it reports the stop (fenced mode's stop gate): a reported stop is not repeated —
    /// repeating it could stop the cluster after a quick restart.
    Gated,
    /// The runner reports stops and moves on (Argo CD's heartbeat protocol has no stop
    /// gate): the runtime carries each stop out through this hook, and passes the event on
    /// only once the cluster's work has ended.
    Reported(Arc<dyn StopHook>),
}

impl std::fmt::Debug for StopMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StopMode::Gated => "Gated",
            StopMode::Reported(_) => "Reported",
        })
    }
}

/// Everything the runtime follows, given when it is built.
pub struct ControllerInputs<S> {
    /// The coordination runner's ownership changes, in order: a start queues the
    /// cluster's apps; a stop is handled as `stops` says.
    pub ownership: mpsc::UnboundedReceiver<OwnershipChange>,
    /// How stops reach the work.
    pub stops: StopMode,
    /// The runner's status: nothing is admitted past its lease deadline.
    pub status: watch::Receiver<S>,
    /// The inventory: each revision is re-indexed, and changed apps re-queued.
    pub inventory: watch::Receiver<InventorySnapshot>,
    /// Removes the finalizer of an AppProject being deleted once no app references it
    /// (the Kubernetes source's; `None`: projects have no finalizers to remove).
    pub project_finalizer: Option<Arc<dyn ProjectFinalizer>>,
}

/// The running controller of one replica.
#[derive(Debug)]
pub struct ControllerRuntime {
    processors: Processors,
    projects: ProjectProcessor,
    /// Follows the ownership feed; ends when the runner drops its sender.
    feed: JoinHandle<()>,
    /// Follow the lease deadline, the inventory and the resync timer; cancelled at
    /// shutdown.
    followers: Vec<JoinHandle<()>>,
}

/// Stops a cluster's work: drops its queued items and resolves once none of its items
/// is in flight.
#[derive(Debug, Clone)]
pub struct WorkStopHook(pub Arc<ShardWork>);

impl StopHook for WorkStopHook {
    fn stop(&self, cluster: String) -> BoxFuture<'static, ()> {
        self.0.revoke_cluster(cluster)
    }
}

impl ControllerRuntime {
    /// Starts the worker pools on `work` with `reconciler`, following `inputs`: the
    /// one place a controller is put together. Returns the runtime and the ownership
    /// events, each passed on after it took effect (a start queued, a stop carried out),
    /// for the audit log.
    pub fn start<R: Reconciler, S: ReplicaStatus>(
        cfg: RuntimeConfig,
        work: Arc<ShardWork>,
        reconciler: Arc<R>,
        inputs: ControllerInputs<S>,
    ) -> Result<(Self, mpsc::UnboundedReceiver<OwnershipChange>), ConfigError> {
        let ControllerInputs {
            ownership,
            stops,
            status,
            inventory,
            project_finalizer,
        } = inputs;
        // The inventory first, so the first ownership events find their apps.
        let first = inventory.borrow().clone();
        work.set_inventory_sharing(&first.clusters, &first.apps, &first.specs);
        let reconciler_for_feed = reconciler.clone();
        let processors = Processors::start(cfg.pools, work.clone(), reconciler)?;
        let projects = ProjectProcessor::start(
            cfg.pools.project_processors,
            work.clone(),
            inventory.clone(),
            project_finalizer,
        );
        let (events, feed) = feed(work.clone(), reconciler_for_feed, ownership, stops);
        let mut followers = vec![
            tokio::spawn(follow_lease(work.clone(), status)),
            tokio::spawn(follow_inventory(work.clone(), inventory)),
        ];
        if let Some(period) = cfg.resync.filter(|p| !p.is_zero()) {
            followers.push(tokio::spawn(resync(work, period, cfg.resync_jitter)));
        }
        let runtime = ControllerRuntime {
            processors,
            projects,
            feed,
            followers,
        };
        Ok((runtime, events))
    }

    /// The replica's work.
    pub fn work(&self) -> &Arc<ShardWork> {
        self.processors.work()
    }

    /// Waits for the ownership feed to end (the runner has returned and dropped its
    /// sender), then stops the followers, stops both pools (queued items are dropped) and
    /// waits for work in flight. Every task the runtime started is joined.
    pub async fn shutdown(self) {
        let _ = self.feed.await;
        for task in &self.followers {
            task.abort();
        }
        for task in self.followers {
            let _ = task.await;
        }
        self.projects.shutdown().await;
        self.processors.shutdown().await;
    }

    /// What the project workers did.
    pub fn project_stats(&self) -> &Arc<crate::project::ProjectStats> {
        self.projects.stats()
    }
}

/// Applies ownership events in order and passes each on once it took effect; a start is
/// told to the reconciler once its apps are queued ([`Reconciler::cluster_started`]).
fn feed<R: Reconciler>(
    work: Arc<ShardWork>,
    reconciler: Arc<R>,
    mut events: mpsc::UnboundedReceiver<OwnershipChange>,
    stops: StopMode,
) -> (mpsc::UnboundedReceiver<OwnershipChange>, JoinHandle<()>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        while let Some(change) = events.recv().await {
            match (&change.change, &stops) {
                (Ownership::Started(c), _) => {
                    // Skipped when the runner's stop overtook this announcement.
                    if work.apply_start(c) {
                        reconciler.cluster_started(c, &|| work.owns(c));
                    }
                }
                (Ownership::Stopped(c), StopMode::Reported(hook)) => hook.stop(c.clone()).await,
                (Ownership::Stopped(_), StopMode::Gated) => {}
            }
            // A closed receiver (no audit log) is fine: the work was fed.
            let _ = tx.send(change);
        }
    });
    (rx, task)
}

/// Keeps the work's lease gate at the runner's reported deadline.
async fn follow_lease<S: ReplicaStatus>(work: Arc<ShardWork>, mut status: watch::Receiver<S>) {
    loop {
        let until = status.borrow_and_update().lease_deadline();
        work.set_lease_deadline(until);
        if status.changed().await.is_err() {
            return;
        }
    }
}

/// Queues every owned app every `period` (each after its own part of `jitter`).
async fn resync(work: Arc<ShardWork>, period: Duration, jitter: Duration) {
    let jitter = jitter.min(period);
    // The first tick would fire at once: a start already queues its apps.
    let start = tokio::time::Instant::now() + period;
    let mut ticks = tokio::time::interval_at(start, period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let n = work.resync(jitter);
        tracing::debug!(apps = n, "periodic resync");
    }
}

#[cfg(test)]
mod feed_props;
#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::AppKey;
    use crate::inventory::{Inventory, InventoryContent};
    use crate::processor::{Operated, ReconcileError};
    use fleetshard_coord::runner::Status;
    use fleetshard_core::{App, Cluster};
    use prometheus_client::registry::Registry;

    /// Counts refreshes, each taking 1 s; records each start it is told of, with whether
    /// the work owned the cluster then.
    #[derive(Default)]
    pub(super) struct Slow(
        AtomicUsize,
        pub(super) std::sync::Mutex<Vec<(String, bool)>>,
    );

    impl Reconciler for Slow {
        async fn refresh(&self, _: &AppKey) -> Result<(), ReconcileError> {
            tokio::time::sleep(Duration::from_secs(1)).await;
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
        async fn operate(&self, _: &AppKey) -> Result<Operated, ReconcileError> {
            Ok(Operated::Idle)
        }
        fn cluster_started(self: &Arc<Self>, cluster: &str, still_owned: &dyn Fn() -> bool) {
            self.1
                .lock()
                .unwrap()
                .push((cluster.to_owned(), still_owned()));
        }
    }

    /// An ownership event of replica `r` now.
    pub(super) fn change(c: Ownership) -> OwnershipChange {
        OwnershipChange {
            identity: "r".into(),
            change: c,
            shard: Some(0),
            generation: 1,
            lapsed_at: None,
            at: tokio::time::Instant::now(),
        }
    }

    /// A runtime over `clusters` and `apps`, with a test's ends of its inputs.
    struct Rig {
        rt: ControllerRuntime,
        events: mpsc::UnboundedSender<OwnershipChange>,
        out: mpsc::UnboundedReceiver<OwnershipChange>,
        status: watch::Sender<Status>,
        _inventory: Inventory,
    }

    fn rig(cfg: RuntimeConfig, rec: Arc<Slow>, clusters: Vec<Cluster>, apps: Vec<App>) -> Rig {
        rig_stopping(cfg, rec, clusters, apps, |_| StopMode::Gated)
    }

    /// [`rig`] with the stop mode made from the work.
    fn rig_stopping(
        cfg: RuntimeConfig,
        rec: Arc<Slow>,
        clusters: Vec<Cluster>,
        apps: Vec<App>,
        stops: impl FnOnce(&Arc<ShardWork>) -> StopMode,
    ) -> Rig {
        let mut registry = Registry::default();
        let work = ShardWork::registered(cfg.limits, &mut registry).unwrap();
        let inventory = Inventory::new();
        inventory.publish(
            InventoryContent {
                clusters,
                apps,
                ..InventoryContent::default()
            },
            Vec::new(),
            true,
        );
        let (events, ownership) = mpsc::unbounded_channel();
        let (status, status_rx) = watch::channel(Status {
            lease_valid_until: Some(tokio::time::Instant::now() + Duration::from_secs(3600)),
            ..Status::default()
        });
        let inputs = ControllerInputs {
            ownership,
            stops: stops(&work),
            status: status_rx,
            inventory: inventory.subscribe(),
            project_finalizer: None,
        };
        let (rt, out) = ControllerRuntime::start(cfg, work, rec, inputs).unwrap();
        Rig {
            rt,
            events,
            out,
            status,
            _inventory: inventory,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_start_queues_apps_and_a_stop_waits_for_work_in_flight() {
        let rec = Arc::new(Slow::default());
        let apps: Vec<App> = (0..3)
            .map(|i| App::to_server("argocd", &format!("a{i}"), "https://c1"))
            .collect();
        let clusters = vec![Cluster::new("c1", "https://c1")];
        let mut r = rig(RuntimeConfig::default(), rec.clone(), clusters, apps);
        r.events
            .send(change(Ownership::Started("c1".into())))
            .unwrap();
        assert!(r.out.recv().await.is_some(), "the start is passed on");
        assert_eq!(
            *rec.1.lock().unwrap(),
            [("c1".to_owned(), true)],
            "the reconciler is told of the start, the cluster owned"
        );
        // Let the workers pick the three refreshes up (each takes 1 s).
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(r.rt.work().in_flight("c1"), 3);
        let hook = WorkStopHook(r.rt.work().clone());
        let started = tokio::time::Instant::now();
        hook.stop("c1".into()).await;
        assert!(
            started.elapsed() >= Duration::from_millis(800),
            "waited for the work"
        );
        assert_eq!(r.rt.work().in_flight("c1"), 0);
        assert_eq!(rec.0.load(Ordering::SeqCst), 3);
        // The runner reports the stop after the hook: the feed does not stop it again, so a
        // quick restart that came first stays started.
        r.events
            .send(change(Ownership::Started("c1".into())))
            .unwrap();
        r.events
            .send(change(Ownership::Stopped("c1".into())))
            .unwrap();
        r.out.recv().await.unwrap();
        r.out.recv().await.unwrap();
        assert!(r.rt.work().owns("c1"));
        // Past the lease deadline nothing is admitted, although the cluster is owned.
        r.status.send_replace(Status {
            lease_valid_until: Some(tokio::time::Instant::now() + Duration::from_secs(2)),
            ..Status::default()
        });
        tokio::task::yield_now().await;
        assert!(r.rt.work().lease_valid());
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(!r.rt.work().lease_valid());
        let before = rec.0.load(Ordering::SeqCst);
        r.rt.work().refresh_queue().add(AppKey::new("argocd", "a0"));
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(
            rec.0.load(Ordering::SeqCst),
            before,
            "nothing ran past the deadline"
        );
        drop(r.events);
        r.rt.shutdown().await;
    }

    /// The runner announces a start on the ownership feed but calls its stop hook directly,
    /// from its own thread: when the feed is behind (a replica given a thousand clusters and
    /// moving most of them on within a second, as at a cold start), the stop can come first.
    /// The late announcement must then not start the cluster: the runner has handed it over,
    /// and working on it would make a second owner. A later acquisition starts it again.
    #[tokio::test(start_paused = true)]
    async fn a_stop_that_overtakes_its_start_announcement_keeps_the_cluster_stopped() {
        let rec = Arc::new(Slow::default());
        let apps = vec![App::to_server("argocd", "a", "https://c1")];
        let clusters = vec![Cluster::new("c1", "https://c1")];
        let mut r = rig(RuntimeConfig::default(), rec.clone(), clusters, apps);
        let hook = WorkStopHook(r.rt.work().clone());
        hook.stop("c1".into()).await;
        r.events
            .send(change(Ownership::Started("c1".into())))
            .unwrap();
        r.out.recv().await.unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(
            !r.rt.work().owns("c1"),
            "a handed-over cluster is not owned"
        );
        assert_eq!(rec.0.load(Ordering::SeqCst), 0, "nothing ran on it");
        assert!(
            rec.1.lock().unwrap().is_empty(),
            "the reconciler was not told"
        );
        // The next acquisition is a start like any other.
        r.events
            .send(change(Ownership::Started("c1".into())))
            .unwrap();
        r.out.recv().await.unwrap();
        assert!(r.rt.work().owns("c1"));
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(rec.0.load(Ordering::SeqCst), 1);
        drop(r.events);
        r.rt.shutdown().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_reported_stop_is_carried_out_before_it_is_passed_on() {
        let rec = Arc::new(Slow::default());
        let apps = vec![App::to_server("argocd", "a", "https://c1")];
        let clusters = vec![Cluster::new("c1", "https://c1")];
        let Rig {
            rt,
            events,
            mut out,
            ..
        } = rig_stopping(
            RuntimeConfig::default(),
            rec.clone(),
            clusters,
            apps,
            |work| StopMode::Reported(Arc::new(WorkStopHook(work.clone()))),
        );
        events
            .send(change(Ownership::Started("c1".into())))
            .unwrap();
        out.recv().await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(rt.work().in_flight("c1"), 1);
        events
            .send(change(Ownership::Stopped("c1".into())))
            .unwrap();
        out.recv().await.unwrap();
        assert_eq!(
            rt.work().in_flight("c1"),
            0,
            "passed on once the work ended"
        );
        assert!(!rt.work().owns("c1"));
        assert_eq!(rec.0.load(Ordering::SeqCst), 1);
        drop(events);
        rt.shutdown().await;
    }

    #[tokio::test(start_paused = true)]
    async fn owned_apps_are_refreshed_every_resync_period() {
        let rec = Arc::new(Slow::default());
        let cfg = RuntimeConfig {
            resync: Some(Duration::from_secs(60)),
            resync_jitter: Duration::ZERO,
            ..RuntimeConfig::default()
        };
        let clusters = vec![
            Cluster::new("c1", "https://c1"),
            Cluster::new("c2", "https://c2"),
        ];
        let apps = vec![
            App::to_server("argocd", "mine", "https://c1"),
            App::to_server("argocd", "theirs", "https://c2"),
        ];
        let r = rig(cfg, rec.clone(), clusters, apps);
        r.rt.work().start_cluster("c1");
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(rec.0.load(Ordering::SeqCst), 1, "the start refreshed once");
        tokio::time::sleep(Duration::from_secs(57)).await;
        assert_eq!(rec.0.load(Ordering::SeqCst), 1, "no resync before 60 s");
        // The resync at 60 s queues the owned app (not the other); its refresh takes 1 s.
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(
            rec.0.load(Ordering::SeqCst),
            2,
            "resynced at 60 s, owned app only"
        );
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(rec.0.load(Ordering::SeqCst), 3);
        drop(r.events);
        r.rt.shutdown().await;
    }
}
