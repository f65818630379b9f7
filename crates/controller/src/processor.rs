//! The worker pools: N tasks draining the refresh queue and M draining the operation
//! queue, as Argo CD's `--status-processors` (20) and `--operation-processors` (10).
//!
//! Every item a worker gets passes the [`ShardWork`] first. Then, as Argo CD does:
//! - a successful refresh hands the app to the operation queue (which decides whether
//!   there is something to sync);
//! - an operation that finished forces a refresh, so the status shows its result;
//! - `Err(RetryLater)` re-adds the app to the same queue rate-limited; `Err(RetryAfter)`
//!   re-adds it once the given delay has passed (a floor the reconciler knows, such as
//!   Argo CD's 10 s between attempts at an unreachable cluster); success and
//!   `Err(Failed)` `forget` its backoff (a permanent failure waits for the next event);
//! - a reconciler that panics is treated as `Failed` (the worker survives, and the item is
//!   marked done so a drain can finish).
//!
//! [`Processors::shutdown`] stops both queues and waits for every item in flight.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::FutureExt;
use tokio::task::JoinHandle;

use crate::queue::WorkQueue;
use crate::shard_work::{Admission, ShardWork};
use crate::{AppKey, ConfigError};

#[cfg(test)]
mod tests;

/// What an operation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operated {
    /// Nothing to do (in sync, or no automated sync).
    Idle,
    /// An operation (sync) finished: the app is refreshed again.
    Finished,
    /// Nothing now: operate on the app again after this long (a self-heal backing off).
    Wait(std::time::Duration),
}

/// Why a refresh or operation did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReconcileError {
    /// A transient problem (a status write refused, a lease lapsed): retried with backoff.
    #[error("retry later: {0}")]
    RetryLater(String),
    /// A transient problem worth trying again only after a while (a cluster unreachable):
    /// retried once `after` has passed.
    #[error("retry in {after:?}: {reason}")]
    RetryAfter {
        /// What failed.
        reason: String,
        /// When to try again.
        after: Duration,
    },
    /// A permanent problem (invalid manifests): not retried until the app changes.
    #[error("failed: {0}")]
    Failed(String),
}

/// The GitOps work for one app, supplied by the reconciler layer.
pub trait Reconciler: Send + Sync + 'static {
    /// Compares the app's desired and live state and records its status.
    fn refresh(&self, app: &AppKey) -> impl Future<Output = Result<(), ReconcileError>> + Send;
    /// Runs (or continues) the app's operation, e.g. an automated sync.
    fn operate(
        &self,
        app: &AppKey,
    ) -> impl Future<Output = Result<Operated, ReconcileError>> + Send;
    /// This replica acquired `cluster` and its apps are queued: a reconciler may prepare
    /// the cluster (warm its caches) before the first refresh reaches it. Called in order
    /// with the stops (a stop of the cluster is carried out after this returns);
    /// `still_owned` tells whether the work still owns it. Must not block. Default: nothing.
    fn cluster_started(self: &Arc<Self>, cluster: &str, still_owned: &dyn Fn() -> bool) {
        let _ = (cluster, still_owned);
    }
}

/// Pool sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolConfig {
    /// Refresh workers (Argo CD's `--status-processors`, default 20).
    pub status_processors: usize,
    /// Operation workers (Argo CD's `--operation-processors`, default 10).
    pub operation_processors: usize,
    /// How often the queues' running-time gauges are refreshed (client-go: 500 ms).
    pub metrics_every: Duration,
    /// Project queue workers ([`crate::project`]).
    pub project_processors: usize,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            status_processors: 20,
            operation_processors: 10,
            metrics_every: Duration::from_millis(500),
            project_processors: 2,
        }
    }
}

/// Counts of what the workers did.
#[derive(Debug, Default)]
pub struct PoolStats {
    /// Refreshes that succeeded.
    pub refreshed: AtomicU64,
    /// Operations that succeeded.
    pub operated: AtomicU64,
    /// `RetryLater` results (both pools).
    pub retried: AtomicU64,
    /// `Failed` results and panics (both pools).
    pub failed: AtomicU64,
    /// Items the shard filter did not admit (both pools).
    pub skipped: AtomicU64,
}

impl PoolStats {
    fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// A counter's value.
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pool {
    Refresh,
    Operation,
}

impl Pool {
    /// The queue the pool's workers take from.
    fn queue_kind(self) -> crate::shard_work::QueueKind {
        match self {
            Pool::Refresh => crate::shard_work::QueueKind::Refresh,
            Pool::Operation => crate::shard_work::QueueKind::Operation,
        }
    }

    /// The pool's name in logs (Argo CD's queue names).
    fn name(self) -> &'static str {
        match self {
            Pool::Refresh => "app_refresh",
            Pool::Operation => "app_operation",
        }
    }
}

/// The running worker pools of one replica.
#[derive(Debug)]
pub struct Processors {
    filter: Arc<ShardWork>,
    stats: Arc<PoolStats>,
    workers: Vec<JoinHandle<()>>,
    ticker: JoinHandle<()>,
}

impl Processors {
    /// Starts the pools on the filter's queues.
    pub fn start<R: Reconciler>(
        cfg: PoolConfig,
        filter: Arc<ShardWork>,
        reconciler: Arc<R>,
    ) -> Result<Self, ConfigError> {
        if cfg.status_processors == 0 {
            return Err(ConfigError::NoWorkers {
                field: "status_processors",
            });
        }
        if cfg.operation_processors == 0 {
            return Err(ConfigError::NoWorkers {
                field: "operation_processors",
            });
        }
        let stats = Arc::new(PoolStats::default());
        let mut workers = Vec::with_capacity(cfg.status_processors + cfg.operation_processors);
        let pools = [
            (Pool::Refresh, cfg.status_processors),
            (Pool::Operation, cfg.operation_processors),
        ];
        for (pool, n) in pools {
            for _ in 0..n {
                workers.push(tokio::spawn(worker(
                    pool,
                    filter.clone(),
                    reconciler.clone(),
                    stats.clone(),
                )));
            }
        }
        let ticker = tokio::spawn(update_metrics(filter.clone(), cfg.metrics_every));
        Ok(Processors {
            filter,
            stats,
            workers,
            ticker,
        })
    }

    /// What the workers did so far.
    pub fn stats(&self) -> &Arc<PoolStats> {
        &self.stats
    }

    /// The work the workers take from.
    pub fn work(&self) -> &Arc<ShardWork> {
        &self.filter
    }

    /// Stops both queues (queued items are dropped) and waits until every item in flight
    /// is done and every worker has returned.
    pub async fn shutdown(self) {
        let refresh = self.filter.refresh_queue().clone();
        let operation = self.filter.operation_queue().clone();
        tokio::join!(
            refresh.shut_down_with_drain(),
            operation.shut_down_with_drain()
        );
        for w in self.workers {
            // A worker does not panic (reconciler panics are caught); if one did, the
            // drain above has still completed.
            let _ = w.await;
        }
        self.ticker.abort();
    }
}

async fn update_metrics(filter: Arc<ShardWork>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let (r, o) = (filter.refresh_queue(), filter.operation_queue());
        if r.is_shutting_down() && o.is_shutting_down() {
            return;
        }
        r.update_metrics();
        o.update_metrics();
        filter.project_queue().update_metrics();
    }
}

/// What a worker does next with an app after its handler succeeded.
enum Next {
    Operate,
    Refresh,
    /// Operate again after a delay (on the operation queue itself).
    OperateAfter(std::time::Duration),
    Nothing,
}

async fn worker<R: Reconciler>(
    pool: Pool,
    filter: Arc<ShardWork>,
    reconciler: Arc<R>,
    stats: Arc<PoolStats>,
) {
    let (queue, other): (&WorkQueue<AppKey>, &WorkQueue<AppKey>) = match pool {
        Pool::Refresh => (filter.refresh_queue(), filter.operation_queue()),
        Pool::Operation => (filter.operation_queue(), filter.refresh_queue()),
    };
    while let Some(app) = queue.get().await {
        // `get` does not wait while items are queued, and a reconciler may not await
        // either: give the runtime a chance to run other tasks once the budget is spent.
        tokio::task::coop::consume_budget().await;
        let guard = match filter.admit(&app) {
            Admission::Admitted(g) => g,
            // Its cluster is owned but the lease deadline has not reached the gate yet
            // (or the lease lapsed): queued again when the gate opens.
            Admission::LeaseLapsed => {
                PoolStats::bump(&stats.skipped);
                filter.hold_for_lease(pool.queue_kind(), app.clone());
                queue.forget(&app);
                queue.done(&app);
                continue;
            }
            Admission::NotOwned | Admission::Unresolved | Admission::Unknown => {
                PoolStats::bump(&stats.skipped);
                queue.forget(&app);
                queue.done(&app);
                continue;
            }
        };
        let result = match pool {
            Pool::Refresh => AssertUnwindSafe(guard.measure(reconciler.refresh(&app)))
                .catch_unwind()
                .await
                .map(|r| r.map(|()| Next::Operate)),
            Pool::Operation => AssertUnwindSafe(guard.measure(reconciler.operate(&app)))
                .catch_unwind()
                .await
                .map(|r| {
                    r.map(|o| match o {
                        Operated::Finished => Next::Refresh,
                        Operated::Idle => Next::Nothing,
                        Operated::Wait(after) => Next::OperateAfter(after),
                    })
                }),
        };
        let result = result.unwrap_or_else(|_| {
            tracing::error!(%app, pool = pool.name(), "reconciler panicked");
            Err(ReconcileError::Failed("reconciler panicked".into()))
        });
        match result {
            Ok(next) => {
                PoolStats::bump(match pool {
                    Pool::Refresh => &stats.refreshed,
                    Pool::Operation => &stats.operated,
                });
                queue.forget(&app);
                match next {
                    Next::Operate | Next::Refresh => other.add(app.clone()),
                    Next::OperateAfter(after) => queue.add_after(app.clone(), after),
                    Next::Nothing => {}
                }
            }
            Err(ReconcileError::RetryLater(why)) => {
                // Visible at the default level: a refused write (RBAC, say) can show
                // nowhere else. The per-item backoff bounds how often this is logged.
                let retries = queue.num_requeues(&app);
                tracing::warn!(%app, pool = pool.name(), retries, %why, "will retry");
                PoolStats::bump(&stats.retried);
                queue.add_rate_limited(app.clone());
            }
            Err(ReconcileError::RetryAfter { reason, after }) => {
                tracing::warn!(%app, pool = pool.name(), %reason, ?after, "will retry");
                PoolStats::bump(&stats.retried);
                queue.forget(&app);
                queue.add_after(app.clone(), after);
            }
            Err(ReconcileError::Failed(why)) => {
                tracing::warn!(%app, pool = pool.name(), %why, "failed");
                PoolStats::bump(&stats.failed);
                queue.forget(&app);
            }
        }
        queue.done(&app);
        // The hold on the cluster ends only after the handoff and `done`, so a stopping
        // cluster's final sweep sees everything this item queued.
        drop(guard);
    }
}
