//! The work-queue metrics Argo CD's controller exports (client-go's `workqueue_*` through
//! controller-runtime's provider: labels `name` and `controller`, both the queue's name,
//! and `priority` on the depth), for fleetshard's three queues under Argo CD's queue
//! names. One source: the same gauges, counters and histograms
//! `fleetshard_workqueue_*{name}` shows, encoded a second time under these names.

use fleetshard_controller::{QueueMetrics, ShardWork};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// fleetshard's queues under Argo CD's names (`controller/appcontroller.go`).
#[derive(Debug)]
pub(crate) struct ArgoCdQueues(Vec<(&'static str, QueueMetrics)>);

impl ArgoCdQueues {
    /// The queues of `work`: `app_refresh` as `app_reconciliation_queue`, `app_operation`
    /// as `app_operation_processing_queue`, `project_refresh` as
    /// `project_reconciliation_queue`.
    pub(crate) fn of(work: &ShardWork) -> Self {
        let queues = [
            ("app_reconciliation_queue", work.refresh_queue().metrics()),
            (
                "app_operation_processing_queue",
                work.operation_queue().metrics(),
            ),
            (
                "project_reconciliation_queue",
                work.project_queue().metrics(),
            ),
        ];
        ArgoCdQueues(
            queues
                .into_iter()
                .filter_map(|(name, m)| Some((name, m?.clone())))
                .collect(),
        )
    }
}

/// A queue's gauge value.
type Read = fn(&QueueMetrics) -> f64;

/// A queue's counter value.
type Count = fn(&QueueMetrics) -> u64;

impl Collector for ArgoCdQueues {
    fn encode(&self, mut e: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        {
            let mut family = e.encode_descriptor(
                "workqueue_depth",
                "Current depth of workqueue by workqueue and priority",
                None,
                MetricType::Gauge,
            )?;
            for (name, m) in &self.0 {
                let labels = [("name", *name), ("controller", *name), ("priority", "")];
                ConstGauge::new(m.depth()).encode(family.encode_family(&labels)?)?;
            }
        }
        let counters: [(&str, &str, Count); 2] = [
            (
                "workqueue_adds",
                "Total number of adds handled by workqueue",
                QueueMetrics::adds,
            ),
            (
                "workqueue_retries",
                "Total number of items added to the workqueue with a non-zero delay \
                 (rate-limited requeues, explicit RequeueAfter or AddAfter calls)",
                QueueMetrics::retries,
            ),
        ];
        for (metric, help, value) in counters {
            let mut family = e.encode_descriptor(metric, help, None, MetricType::Counter)?;
            for (name, m) in &self.0 {
                let labels = [("name", *name), ("controller", *name)];
                ConstCounter::new(value(m)).encode(family.encode_family(&labels)?)?;
            }
        }
        let histograms: [(&str, &str, bool); 2] = [
            (
                "workqueue_queue_duration_seconds",
                "How long in seconds an item stays in workqueue before being requested",
                true,
            ),
            (
                "workqueue_work_duration_seconds",
                "How long in seconds processing an item from workqueue takes.",
                false,
            ),
        ];
        for (metric, help, waiting) in histograms {
            let mut family = e.encode_descriptor(metric, help, None, MetricType::Histogram)?;
            for (name, m) in &self.0 {
                let labels = [("name", *name), ("controller", *name)];
                let histogram = if waiting {
                    m.queue_duration()
                } else {
                    m.work_duration()
                };
                histogram.encode(family.encode_family(&labels)?)?;
            }
        }
        let gauges: [(&str, &str, Read); 2] = [
            (
                "workqueue_unfinished_work_seconds",
                "How many seconds of work has been done that is in progress and hasn't been \
                 observed by work_duration. Large values indicate stuck threads. One can \
                 deduce the number of stuck threads by observing the rate at which this \
                 increases.",
                QueueMetrics::unfinished_seconds,
            ),
            (
                "workqueue_longest_running_processor_seconds",
                "How many seconds has the longest running processor for workqueue been \
                 running.",
                QueueMetrics::longest_running_seconds,
            ),
        ];
        for (metric, help, value) in gauges {
            let mut family = e.encode_descriptor(metric, help, None, MetricType::Gauge)?;
            for (name, m) in &self.0 {
                let labels = [("name", *name), ("controller", *name)];
                ConstGauge::new(value(m)).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}
