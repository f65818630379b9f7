//! Work queue metrics, client-go's set (`workqueue_*`), labelled by queue name.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The label every queue metric carries.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct QueueLabel {
    /// The queue's name (`app_refresh`, `app_operation`).
    pub name: String,
}

type SecondsGauge = Gauge<f64, AtomicU64>;

/// The bounds of the wait and work histograms: 10 ns to 1000 s by factors of 10, the
/// buckets of the work-queue metrics Argo CD's controller registers (controller-runtime's
/// provider for client-go, `ExponentialBuckets(10e-9, 10, 12)`).
pub const SECONDS_BUCKETS: [f64; 12] = [
    1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0,
];

fn seconds_histogram() -> Histogram {
    Histogram::new(SECONDS_BUCKETS)
}

/// The metric families of all work queues of one process, registered once.
#[derive(Debug, Clone)]
pub struct WorkQueueMetrics {
    depth: Family<QueueLabel, Gauge>,
    adds: Family<QueueLabel, Counter>,
    wait: Family<QueueLabel, Histogram, fn() -> Histogram>,
    work: Family<QueueLabel, Histogram, fn() -> Histogram>,
    retries: Family<QueueLabel, Counter>,
    unfinished: Family<QueueLabel, SecondsGauge>,
    longest: Family<QueueLabel, SecondsGauge>,
}

impl Default for WorkQueueMetrics {
    fn default() -> Self {
        WorkQueueMetrics {
            depth: Family::default(),
            adds: Family::default(),
            wait: Family::new_with_constructor(seconds_histogram),
            work: Family::new_with_constructor(seconds_histogram),
            retries: Family::default(),
            unfinished: Family::default(),
            longest: Family::default(),
        }
    }
}

impl WorkQueueMetrics {
    /// The families, registered in `registry` under `workqueue_` (client-go's names).
    pub fn register(registry: &mut Registry) -> Self {
        let m = WorkQueueMetrics::default();
        let r = registry.sub_registry_with_prefix("workqueue");
        r.register("depth", "Items waiting in the queue", m.depth.clone());
        r.register(
            "adds",
            "Items added (an add of an item already queued does not count)",
            m.adds.clone(),
        );
        r.register(
            "queue_duration_seconds",
            "How long an item waited in the queue before a worker got it",
            m.wait.clone(),
        );
        r.register(
            "work_duration_seconds",
            "How long processing an item took (got to done)",
            m.work.clone(),
        );
        r.register("retries", "Rate-limited re-adds", m.retries.clone());
        r.register(
            "unfinished_work_seconds",
            "Seconds of work in progress that has not finished (sum over items being processed)",
            m.unfinished.clone(),
        );
        r.register(
            "longest_running_processor_seconds",
            "How long the longest-running item has been processed",
            m.longest.clone(),
        );
        m
    }

    /// The metrics of the queue called `name`.
    pub fn queue(&self, name: &str) -> QueueMetrics {
        let l = QueueLabel {
            name: name.to_owned(),
        };
        QueueMetrics {
            depth: self.depth.get_or_create_owned(&l),
            adds: self.adds.get_or_create_owned(&l),
            wait: self.wait.get_or_create_owned(&l),
            work: self.work.get_or_create_owned(&l),
            retries: self.retries.get_or_create_owned(&l),
            unfinished: self.unfinished.get_or_create_owned(&l),
            longest: self.longest.get_or_create_owned(&l),
        }
    }
}

/// One queue's metrics (cheap handles on the shared families).
#[derive(Debug, Clone)]
pub struct QueueMetrics {
    pub(crate) depth: Gauge,
    pub(crate) adds: Counter,
    pub(crate) wait: Histogram,
    pub(crate) work: Histogram,
    pub(crate) retries: Counter,
    pub(crate) unfinished: SecondsGauge,
    pub(crate) longest: SecondsGauge,
}

impl QueueMetrics {
    /// Items waiting now.
    pub fn depth(&self) -> i64 {
        self.depth.get()
    }

    /// Adds so far.
    pub fn adds(&self) -> u64 {
        self.adds.get()
    }

    /// Rate-limited re-adds so far.
    pub fn retries(&self) -> u64 {
        self.retries.get()
    }

    /// Seconds of unfinished work at the last update.
    pub fn unfinished_seconds(&self) -> f64 {
        self.unfinished.get()
    }

    /// Seconds the longest-running item had been processed at the last update.
    pub fn longest_running_seconds(&self) -> f64 {
        self.longest.get()
    }

    /// How long items waited before a worker got them (the histogram itself, shared).
    pub fn queue_duration(&self) -> &Histogram {
        &self.wait
    }

    /// How long processing items took (the histogram itself, shared).
    pub fn work_duration(&self) -> &Histogram {
        &self.work
    }
}
