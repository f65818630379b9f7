//! What each owned cluster costs this replica, as cumulative counters since the replica
//! acquired it: the reconcile CPU time its apps' refreshes and operations took, its live
//! cache (objects and bytes), its watch events, the API requests made for its apps and
//! the sync operations run on it. The replica samples them, smooths them into one cost per
//! cluster and publishes it for the distributor (issue 30, `fleetshard_replica::costs`).
//!
//! The reconcile CPU time is measured here, by the workers ([`crate::processor`]): each
//! poll of an admitted item's refresh or operation future reads the polling thread's CPU
//! clock (`CLOCK_THREAD_CPUTIME_ID`) before and after, and adds the difference to the
//! counter of the cluster the item's [`InFlight`] holds (the anchor for an app whose
//! destination resolves to no cluster) — one atomic add per poll, no lock. The counters
//! live beside the owned set ([`ShardWork::cluster_cpu`]): made when a cluster is started,
//! dropped when it is stopped, so a cluster owned again starts from zero.
//!
//! Not counted: work the futures hand to other threads or tasks — Git fetches and reads,
//! renders and other work on tokio's blocking pool, tasks they spawn (watches, the
//! app-state writer) — and the workers' own bookkeeping around the polls.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::shard_work::InFlight;

#[cfg(test)]
mod tests;

/// One cluster's usage so far (cumulative counters, except the cache, which is a gauge).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClusterUsage {
    /// CPU time spent polling the refreshes and operations of the cluster's apps.
    pub reconcile_cpu: Duration,
    /// Objects in the cluster's live caches now.
    pub cache_objects: u64,
    /// Bytes those objects take in the caches now (an estimate, see the producer).
    pub cache_bytes: u64,
    /// Watch events received from the cluster.
    pub watch_events: u64,
    /// API requests made to the cluster for its apps (syncs, deletions, dry runs).
    pub api_requests: u64,
    /// Sync operations run on the cluster's apps.
    pub sync_operations: u64,
}

impl ClusterUsage {
    /// One `n`th of this usage (at least one part): a slice's share of its cluster's,
    /// when `n` units of the cluster are held by one replica.
    pub fn share(&self, n: u64) -> ClusterUsage {
        let n = n.max(1);
        ClusterUsage {
            reconcile_cpu: self.reconcile_cpu / u32::try_from(n).unwrap_or(u32::MAX),
            cache_objects: self.cache_objects / n,
            cache_bytes: self.cache_bytes / n,
            watch_events: self.watch_events / n,
            api_requests: self.api_requests / n,
            sync_operations: self.sync_operations / n,
        }
    }
}

/// The CPU time the calling thread has used: what the workers read around each poll.
/// Injected ([`ShardWork::set_cpu_clock`]) so tests drive it.
pub trait CpuClock: Send + Sync + std::fmt::Debug + 'static {
    /// The calling thread's CPU time so far.
    fn thread_time(&self) -> Duration;
}

/// The thread's CPU clock, `clock_gettime(CLOCK_THREAD_CPUTIME_ID)`: a system call (the
/// vDSO does not serve it), about half a microsecond on the reference machine, so about
/// 1 µs per poll measured (`docs/performance.md`, "Reconcile CPU per cluster").
#[derive(Debug, Clone, Copy, Default)]
pub struct ThreadCpuClock;

impl CpuClock for ThreadCpuClock {
    fn thread_time(&self) -> Duration {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        Duration::new(
            u64::try_from(t.tv_sec).unwrap_or(0),
            u32::try_from(t.tv_nsec).unwrap_or(0),
        )
    }
}

/// One owned cluster's CPU counter and the clock it is read with, taken by an item at its
/// admission.
#[derive(Debug, Clone)]
pub(crate) struct CpuMeter {
    nanos: Arc<AtomicU64>,
    clock: Arc<dyn CpuClock>,
}

impl CpuMeter {
    /// Counts into `nanos`, reading `clock`.
    pub(crate) fn new(nanos: Arc<AtomicU64>, clock: Arc<dyn CpuClock>) -> Self {
        CpuMeter { nanos, clock }
    }

    /// `fut`, each of its polls' CPU time added to the counter.
    async fn measure<F: Future>(self, fut: F) -> F::Output {
        let mut fut = pin!(fut);
        std::future::poll_fn(|cx| {
            let before = self.clock.thread_time();
            let polled = fut.as_mut().poll(cx);
            let spent = self.clock.thread_time().saturating_sub(before);
            let nanos = u64::try_from(spent.as_nanos()).unwrap_or(u64::MAX);
            self.nanos.fetch_add(nanos, Ordering::Relaxed);
            polled
        })
        .await
    }
}

/// The counter's value as a duration.
pub(crate) fn cpu_time(nanos: &AtomicU64) -> Duration {
    Duration::from_nanos(nanos.load(Ordering::Relaxed))
}

impl InFlight {
    /// `fut` (the item's refresh or operation), the CPU time of each of its polls counted
    /// for the cluster this item holds ([`ShardWork::cluster_cpu`]). Work `fut` hands to
    /// other threads or tasks (the blocking pool: Git, renders) is not counted.
    pub fn measure<F: Future>(&self, fut: F) -> impl Future<Output = F::Output> + use<F> {
        self.cpu.clone().measure(fut)
    }
}

impl crate::ShardWork {
    /// The reconcile CPU time of each owned cluster's apps since it was acquired, by
    /// cluster id (sorted). A cluster's count is forgotten when it stops.
    pub fn cluster_cpu(&self) -> Vec<(String, Duration)> {
        self.owned_cpu()
    }
}
