//! One replica's controller runtime, assembled: the refresh and operation queues, the
//! shard filter, the worker pools, and the two links to the coordination runner — the
//! [`StopHook`] (a cluster's stop is acknowledged only once its work has ended: G1 across
//! the whole replica) and the ownership feed (a started cluster's apps are queued).

use std::sync::Arc;

use fleetshard_coord::runner::{Ownership, OwnershipChange, StopHook};
use fleetshard_core::{App, Cluster};
use futures::future::BoxFuture;
use prometheus_client::registry::Registry;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::ConfigError;
use crate::processor::{PoolConfig, Processors, Reconciler};
use crate::queue::{RateLimiterConfig, WorkQueue, WorkQueueMetrics};
use crate::shard_filter::{FilterMetrics, ShardFilter};

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

/// The running controller of one replica.
#[derive(Debug)]
pub struct ControllerRuntime {
    processors: Processors,
    feed: Option<JoinHandle<()>>,
    lease: Option<JoinHandle<()>>,
    resync: Option<JoinHandle<()>>,
}

/// Stops a cluster's work through the shard filter: drops its queued items and resolves
/// once none of its items is in flight.
#[derive(Debug, Clone)]
pub struct FilterStopHook(pub Arc<ShardFilter>);

impl StopHook for FilterStopHook {
    fn stop(&self, cluster: String) -> BoxFuture<'static, ()> {
        let filter = self.0.clone();
        Box::pin(async move { filter.stop_cluster(&cluster).await })
    }
}

impl ControllerRuntime {
    /// Starts the pools with `reconciler`, the metrics registered in `registry` (queues
    /// `app_refresh` and `app_operation`, as Argo CD names them, and the shard filter).
    pub fn start<R: Reconciler>(
        cfg: RuntimeConfig,
        reconciler: Arc<R>,
        registry: &mut Registry,
    ) -> Result<Self, ConfigError> {
        Self::start_with(cfg, registry, |_| reconciler)
    }

    /// [`ControllerRuntime::start`] with the reconciler made from the shard filter: a
    /// reconciler that checks the lease before each write (through
    /// [`ShardFilter::lease_valid`]) needs the filter the runtime creates.
    pub fn start_with<R: Reconciler>(
        cfg: RuntimeConfig,
        registry: &mut Registry,
        make: impl FnOnce(&Arc<ShardFilter>) -> Arc<R>,
    ) -> Result<Self, ConfigError> {
        let queue_metrics = WorkQueueMetrics::register(registry);
        let refresh = WorkQueue::new(cfg.limits, Some(queue_metrics.queue("app_refresh")))?;
        let operation = WorkQueue::new(cfg.limits, Some(queue_metrics.queue("app_operation")))?;
        let filter_metrics = FilterMetrics::default();
        filter_metrics.register(registry);
        let filter = ShardFilter::new(refresh, operation, filter_metrics);
        let reconciler = make(&filter);
        let processors = Processors::start(cfg.pools, filter, reconciler)?;
        let resync = cfg.resync.filter(|p| !p.is_zero()).map(|period| {
            let filter = processors.filter().clone();
            let jitter = cfg.resync_jitter.min(period);
            tokio::spawn(async move {
                // The first tick would fire at once: a start already queues its apps.
                let start = tokio::time::Instant::now() + period;
                let mut ticks = tokio::time::interval_at(start, period);
                ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    ticks.tick().await;
                    let n = filter.resync(jitter);
                    tracing::debug!(apps = n, "periodic resync");
                }
            })
        });
        Ok(ControllerRuntime {
            processors,
            feed: None,
            lease: None,
            resync,
        })
    }

    /// The shard filter.
    pub fn filter(&self) -> &Arc<ShardFilter> {
        self.processors.filter()
    }

    /// The hook the coordination runner stops clusters through.
    pub fn stop_hook(&self) -> Arc<dyn StopHook> {
        Arc::new(FilterStopHook(self.filter().clone()))
    }

    /// Sets the inventory (clusters and apps) the filter resolves apps against.
    pub fn set_inventory(&self, clusters: &[Cluster], apps: &[App]) {
        self.filter().set_inventory(clusters, apps);
    }

    /// Follows the runner's ownership events: a start queues the cluster's apps (a stop
    /// was already carried out by the [`StopHook`] before the runner reported it, so it is
    /// not repeated — repeating it could stop the cluster after a quick restart). Every
    /// event is passed on to the returned receiver (the audit log), after it took effect.
    pub fn follow(
        &mut self,
        events: mpsc::UnboundedReceiver<OwnershipChange>,
    ) -> mpsc::UnboundedReceiver<OwnershipChange> {
        self.feed_events(events, None)
    }

    /// [`ControllerRuntime::follow`] for a runner that has no stop gate (Argo CD's
    /// heartbeat protocol reports a stop and moves on): a stop event is carried out here,
    /// through `stop`, and passed on once the cluster's work has ended.
    pub fn follow_stopping(
        &mut self,
        events: mpsc::UnboundedReceiver<OwnershipChange>,
        stop: Arc<dyn StopHook>,
    ) -> mpsc::UnboundedReceiver<OwnershipChange> {
        self.feed_events(events, Some(stop))
    }

    fn feed_events(
        &mut self,
        mut events: mpsc::UnboundedReceiver<OwnershipChange>,
        stop: Option<Arc<dyn StopHook>>,
    ) -> mpsc::UnboundedReceiver<OwnershipChange> {
        let (tx, rx) = mpsc::unbounded_channel();
        let filter = self.filter().clone();
        self.feed = Some(tokio::spawn(async move {
            while let Some(change) = events.recv().await {
                match (&change.change, &stop) {
                    (Ownership::Started(c), _) => filter.start_cluster(c),
                    (Ownership::Stopped(c), Some(hook)) => hook.stop(c.clone()).await,
                    (Ownership::Stopped(_), None) => {}
                }
                // A closed receiver (no audit log) is fine: the filter was fed.
                let _ = tx.send(change);
            }
        }));
        rx
    }

    /// Follows the runner's lease deadline (`deadline` reads it from the runner's
    /// status): from now on nothing is admitted past it.
    pub fn follow_lease<T: Send + Sync + 'static>(
        &mut self,
        mut status: tokio::sync::watch::Receiver<T>,
        deadline: fn(&T) -> Option<tokio::time::Instant>,
    ) {
        let filter = self.filter().clone();
        let until = deadline(&status.borrow_and_update());
        filter.set_lease_deadline(until);
        self.lease = Some(tokio::spawn(async move {
            while status.changed().await.is_ok() {
                let until = deadline(&status.borrow_and_update());
                filter.set_lease_deadline(until);
            }
        }));
    }

    /// Stops both pools (queued items are dropped) and waits for work in flight.
    pub async fn shutdown(mut self) {
        if let Some(feed) = self.feed.take() {
            // The runner has returned, so its sender is gone and the feed ends by itself.
            let _ = feed.await;
        }
        for task in [self.lease.take(), self.resync.take()]
            .into_iter()
            .flatten()
        {
            task.abort();
        }
        self.processors.shutdown().await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::AppKey;
    use crate::processor::{Operated, ReconcileError};
    use fleetshard_coord::runner::Status;

    /// Counts refreshes; each takes 1 s.
    #[derive(Default)]
    struct Slow(AtomicUsize);

    impl Reconciler for Slow {
        async fn refresh(&self, _: &AppKey) -> Result<(), ReconcileError> {
            tokio::time::sleep(Duration::from_secs(1)).await;
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
        async fn operate(&self, _: &AppKey) -> Result<Operated, ReconcileError> {
            Ok(Operated::Idle)
        }
    }

    fn change(c: Ownership) -> OwnershipChange {
        OwnershipChange {
            identity: "r".into(),
            change: c,
            shard: Some(0),
            generation: 1,
            lapsed_at: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_start_queues_apps_and_a_stop_waits_for_work_in_flight() {
        let mut registry = Registry::default();
        let rec = Arc::new(Slow::default());
        let mut rt =
            ControllerRuntime::start(RuntimeConfig::default(), rec.clone(), &mut registry).unwrap();
        let clusters = [Cluster::new("c1", "https://c1")];
        let apps: Vec<App> = (0..3)
            .map(|i| App::to_server("argocd", &format!("a{i}"), "https://c1"))
            .collect();
        rt.set_inventory(&clusters, &apps);
        let (tx, rx) = mpsc::unbounded_channel();
        let mut out = rt.follow(rx);
        tx.send(change(Ownership::Started("c1".into()))).unwrap();
        assert!(out.recv().await.is_some(), "the start is passed on");
        // Let the workers pick the three refreshes up (each takes 1 s).
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(rt.filter().in_flight("c1"), 3);
        let hook = rt.stop_hook();
        let started = tokio::time::Instant::now();
        hook.stop("c1".into()).await;
        assert!(
            started.elapsed() >= Duration::from_millis(800),
            "waited for the work"
        );
        assert_eq!(rt.filter().in_flight("c1"), 0);
        assert_eq!(rec.0.load(Ordering::SeqCst), 3);
        // The runner reports the stop after the hook: the feed does not stop it again, so a
        // quick restart that came first stays started.
        tx.send(change(Ownership::Started("c1".into()))).unwrap();
        tx.send(change(Ownership::Stopped("c1".into()))).unwrap();
        out.recv().await.unwrap();
        out.recv().await.unwrap();
        assert!(rt.filter().owns("c1"));
        // Past the lease deadline nothing is admitted, although the cluster is owned.
        let (status_tx, status_rx) = tokio::sync::watch::channel(Status {
            lease_valid_until: Some(tokio::time::Instant::now() + Duration::from_secs(2)),
            ..Status::default()
        });
        rt.follow_lease(status_rx, |s: &Status| s.lease_valid_until);
        assert!(rt.filter().lease_valid());
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(!rt.filter().lease_valid());
        let before = rec.0.load(Ordering::SeqCst);
        rt.filter().refresh_queue().add(AppKey::new("argocd", "a0"));
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(
            rec.0.load(Ordering::SeqCst),
            before,
            "nothing ran past the deadline"
        );
        drop(status_tx);
        drop(tx);
        rt.shutdown().await;
    }

    #[tokio::test(start_paused = true)]
    async fn owned_apps_are_refreshed_every_resync_period() {
        let mut registry = Registry::default();
        let rec = Arc::new(Slow::default());
        let cfg = RuntimeConfig {
            resync: Some(Duration::from_secs(60)),
            resync_jitter: Duration::ZERO,
            ..RuntimeConfig::default()
        };
        let rt = ControllerRuntime::start(cfg, rec.clone(), &mut registry).unwrap();
        let clusters = [
            Cluster::new("c1", "https://c1"),
            Cluster::new("c2", "https://c2"),
        ];
        let apps = [
            App::to_server("argocd", "mine", "https://c1"),
            App::to_server("argocd", "theirs", "https://c2"),
        ];
        rt.set_inventory(&clusters, &apps);
        rt.filter().start_cluster("c1");
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
        rt.shutdown().await;
    }
}
