//! Kubernetes Events on Applications, as Argo CD's application controller records them
//! (`docs/argocd-compatibility.md`, "Events on Applications").
//!
//! Contract: the reconciler hands an [`AppEvent`] to [`AppEvents::emit`] only after the
//! status write it reports succeeded under the lease gate — so only the replica that owns
//! the app's cluster emits, once per transition — and `emit` never waits: the event goes
//! into a bounded queue drained by one task, or is dropped and counted when the queue is
//! full, when its reason is not enabled (`--enable-k8s-event`), when the cluster was
//! stopped since it was queued, when the lease lapsed, or when the API server refuses it.
//! The task reads the Application (its uid, resourceVersion, labels and destination, as
//! the event's involved object and annotations), then writes a core/v1 Event in the
//! Application's namespace in Argo CD's shape (`source.component`
//! `argocd-application-controller`, name `<app>.<unix nanoseconds in hex>`, annotations
//! `dest-server` and `dest-namespace`, labels argocd-cm's `resource.includeEventLabelKeys`
//! select), correlated as client-go's event recorder correlates: a token bucket per
//! Application (25 events, one more every 5 minutes) drops a flood, and an event identical
//! to one written before (same object, type, reason and message) bumps that event's
//! `count` and `lastTimestamp` instead of creating another. Nothing here can fail or delay
//! a reconcile.

mod correlate;
pub mod message;
mod writer;

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use fleetshard_controller::AppKey;
use tokio::sync::mpsc;

use crate::apply::LeaseCheck;
use crate::reconciler::Clock;

pub use correlate::{Correlation, Correlator, CorrelatorConfig};

/// Argo CD's reason: an operation was started (an automated sync).
pub const OPERATION_STARTED: &str = "OperationStarted";
/// Argo CD's reason: an operation ended (succeeded, failed or refused).
pub const OPERATION_COMPLETED: &str = "OperationCompleted";
/// Argo CD's reason of the sync and health status transitions.
pub const RESOURCE_UPDATED: &str = "ResourceUpdated";
/// Argo CD's reason of a deletion that failed (a `Warning`).
pub const STATUS_REFRESHED: &str = "StatusRefreshed";

/// The component Argo CD's application controller writes as its events' `source`.
pub const COMPONENT: &str = "argocd-application-controller";

/// An event's `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// `Normal`.
    Normal,
    /// `Warning`.
    Warning,
}

impl EventType {
    /// As the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// One event about an Application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppEvent {
    /// `Normal` or `Warning`.
    pub kind: EventType,
    /// One of the reasons above.
    pub reason: &'static str,
    /// Argo CD's message ([`message`]).
    pub message: String,
}

/// Which reasons are written (Argo CD's `--enable-k8s-event`, `ARGOCD_ENABLE_K8S_EVENT`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum EnabledEvents {
    /// `all` (Argo CD's default).
    #[default]
    All,
    /// `none`.
    None,
    /// The reasons listed.
    Reasons(BTreeSet<String>),
}

impl EnabledEvents {
    /// From the flag's list, as Argo CD reads it: `all` or `none` anywhere decides
    /// (whichever comes first), else the reasons listed; an empty list enables none.
    pub fn from_list<S: AsRef<str>>(list: &[S]) -> Self {
        let mut reasons = BTreeSet::new();
        for item in list {
            match item.as_ref().trim() {
                "all" => return EnabledEvents::All,
                "none" => return EnabledEvents::None,
                "" => {}
                reason => {
                    reasons.insert(reason.to_owned());
                }
            }
        }
        EnabledEvents::Reasons(reasons)
    }

    /// Whether events of `reason` are written.
    pub fn enables(&self, reason: &str) -> bool {
        match self {
            EnabledEvents::All => true,
            EnabledEvents::None => false,
            EnabledEvents::Reasons(r) => r.contains(reason),
        }
    }
}

/// How events are written.
#[derive(Debug, Clone)]
pub struct EventSettings {
    /// The reasons written.
    pub enabled: EnabledEvents,
    /// Events waiting to be written at most; more are dropped and counted.
    pub queue: usize,
    /// Each call to the API server is bounded by this.
    pub call_timeout: Duration,
    /// Rate limit and aggregation.
    pub correlator: CorrelatorConfig,
}

impl Default for EventSettings {
    fn default() -> Self {
        EventSettings {
            enabled: EnabledEvents::All,
            queue: 1024,
            call_timeout: Duration::from_secs(5),
            correlator: CorrelatorConfig::default(),
        }
    }
}

/// What became of the events handed over, since the start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EventCounts {
    /// Created as new Event objects.
    pub created: u64,
    /// Written as a `count` bump of an identical earlier event.
    pub aggregated: u64,
    /// Dropped: the queue was full.
    pub dropped_queue_full: u64,
    /// Dropped by the rate limit (a flood about one Application).
    pub dropped_rate_limited: u64,
    /// Dropped: the API server refused or did not answer (the Application's read or the
    /// Event's write), or the Application was gone.
    pub refused: u64,
    /// Dropped: the cluster was stopped or the lease lapsed before it was written.
    pub dropped_not_owner: u64,
}

#[derive(Debug, Default)]
struct Counters {
    created: AtomicU64,
    aggregated: AtomicU64,
    dropped_queue_full: AtomicU64,
    dropped_rate_limited: AtomicU64,
    refused: AtomicU64,
    dropped_not_owner: AtomicU64,
}

impl Counters {
    fn add(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn snapshot(&self) -> EventCounts {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        EventCounts {
            created: get(&self.created),
            aggregated: get(&self.aggregated),
            dropped_queue_full: get(&self.dropped_queue_full),
            dropped_rate_limited: get(&self.dropped_rate_limited),
            refused: get(&self.refused),
            dropped_not_owner: get(&self.dropped_not_owner),
        }
    }
}

/// argocd-cm's `resource.includeEventLabelKeys` and `resource.excludeEventLabelKeys`:
/// which of the Application's labels its events carry (globs; none by default).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventLabelKeys {
    /// Keys included.
    pub include: Vec<String>,
    /// Keys excluded from those.
    pub exclude: Vec<String>,
}

impl EventLabelKeys {
    /// From argocd-cm's `data`, as Argo CD reads the two keys (spaces removed, split at
    /// commas).
    pub fn from_argocd_cm(data: &std::collections::BTreeMap<String, String>) -> Self {
        let keys = |key: &str| -> Vec<String> {
            data.get(key)
                .filter(|v| !v.is_empty())
                .map(|v| v.replace(' ', "").split(',').map(str::to_owned).collect())
                .unwrap_or_default()
        };
        EventLabelKeys {
            include: keys("resource.includeEventLabelKeys"),
            exclude: keys("resource.excludeEventLabelKeys"),
        }
    }

    /// The labels of `labels` an event carries.
    pub fn select(
        &self,
        labels: &std::collections::BTreeMap<String, String>,
    ) -> std::collections::BTreeMap<String, String> {
        let any = |patterns: &[String], key: &str| {
            patterns
                .iter()
                .any(|p| fleetshard_manifest::glob::matches(p, key))
        };
        labels
            .iter()
            .filter(|(k, _)| any(&self.include, k) && !any(&self.exclude, k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

/// An event waiting in the queue.
#[derive(Debug)]
struct Queued {
    app: AppKey,
    cluster: String,
    /// The cluster's epoch when it was queued ([`AppEvents::stop_cluster`]).
    epoch: u64,
    event: AppEvent,
    labels: EventLabelKeys,
}

/// The events of one replica: the queue and what became of what was handed over.
pub struct AppEvents {
    tx: mpsc::Sender<Queued>,
    enabled: EnabledEvents,
    counters: Arc<Counters>,
    /// Per cluster, how many times it was stopped: an event queued before a stop is not
    /// written after it (the cluster may have a new owner).
    epochs: Arc<Mutex<HashMap<String, u64>>>,
}

impl std::fmt::Debug for AppEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppEvents")
            .field("enabled", &self.enabled)
            .field("counts", &self.counts())
            .finish_non_exhaustive()
    }
}

impl AppEvents {
    /// Starts the task writing events through `client` (retries off) on the current
    /// tokio runtime, while `lease` is valid, dated by `clock`. The task ends when this
    /// value is dropped.
    pub fn start(
        client: kube::Client,
        settings: EventSettings,
        lease: Arc<dyn LeaseCheck>,
        clock: Arc<dyn Clock>,
    ) -> Arc<Self> {
        let (tx, rx) = mpsc::channel(settings.queue.max(1));
        let counters = Arc::new(Counters::default());
        let epochs = Arc::new(Mutex::new(HashMap::new()));
        let task = writer::Writer {
            client,
            call_timeout: settings.call_timeout,
            correlator: Correlator::new(settings.correlator),
            lease,
            clock,
            counters: counters.clone(),
            epochs: epochs.clone(),
            last_nanos: 0,
        };
        tokio::spawn(task.run(rx));
        Arc::new(AppEvents {
            tx,
            enabled: settings.enabled,
            counters,
            epochs,
        })
    }

    /// Queues `event` about `app` (of cluster `cluster`) without waiting; dropped and
    /// counted when the queue is full. A reason not enabled is not queued.
    pub fn emit(&self, app: &AppKey, cluster: &str, event: AppEvent, labels: EventLabelKeys) {
        if !self.enabled.enables(event.reason) {
            return;
        }
        let epoch = epoch_of(&self.epochs, cluster);
        let queued = Queued {
            app: app.clone(),
            cluster: cluster.to_owned(),
            epoch,
            event,
            labels,
        };
        if self.tx.try_send(queued).is_err() {
            Counters::add(&self.counters.dropped_queue_full);
        }
    }

    /// The cluster's work stopped: its events still queued are dropped.
    pub fn stop_cluster(&self, cluster: &str) {
        let mut epochs = self.epochs.lock().unwrap_or_else(PoisonError::into_inner);
        *epochs.entry(cluster.to_owned()).or_default() += 1;
    }

    /// What became of the events handed over so far.
    pub fn counts(&self) -> EventCounts {
        self.counters.snapshot()
    }
}

fn epoch_of(epochs: &Mutex<HashMap<String, u64>>, cluster: &str) -> u64 {
    let epochs = epochs.lock().unwrap_or_else(PoisonError::into_inner);
    epochs.get(cluster).copied().unwrap_or_default()
}

#[cfg(test)]
mod tests;
