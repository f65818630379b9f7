//! fleetshard's controller runtime: what runs inside one replica once coordination has
//! told it which clusters it owns.
//!
//! - [`queue`]: work queues with client-go's semantics (dirty and processing sets, delayed
//!   and rate-limited adds, drain on shutdown) and client-go's metrics;
//! - [`processor`]: the refresh and operation worker pools around a [`Reconciler`], with
//!   Argo CD's handoff (a refresh hands the app to the operation queue; a finished
//!   operation forces a refresh);
//! - [`shard_work`]: the replica's work on its shard — which clusters it owns, which
//!   cluster each app deploys to, both queues, the items in flight and the lease gate, and
//!   the wait that lets a handover be acknowledged only after the work on a cluster has
//!   really stopped (G1);
//! - [`project`]: the project queue's workers: a changed AppProject re-queues its apps, and
//!   a project being deleted keeps its finalizer until no app references it;
//! - [`runtime`]: the one composition point: [`ControllerRuntime::start`] takes the work,
//!   the reconciler and every input (ownership feed, lease deadlines, inventory) at once.
//!
//! **Architecture invariant:** knows `core` (the model) and `coord` (ownership events), not
//! which store backend is in use. No `std` clocks: all time is `tokio::time`, so tests run
//! under paused time.

use std::fmt;
use std::sync::Arc;

pub mod inventory;
pub mod processor;
pub mod project;
pub mod queue;
pub mod runtime;
pub mod shard_work;
pub mod usage;

pub use processor::{Operated, PoolConfig, Processors, ReconcileError, Reconciler};
pub use project::{ProjectFinalizer, ProjectProcessor, ProjectStats};
pub use queue::{QueueMetrics, RateLimiterConfig, WorkQueue, WorkQueueMetrics};
pub use runtime::{
    ControllerInputs, ControllerRuntime, DEFAULT_RESYNC, DEFAULT_RESYNC_JITTER, NoopReconciler,
    RuntimeConfig, StopMode, WorkStopHook,
};
pub use shard_work::{Admission, ShardWork, UnresolvedApp};
pub use usage::{ClusterUsage, CpuClock, ThreadCpuClock};

/// An application's queue key: `namespace/name`, cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AppKey(Arc<str>);

impl AppKey {
    /// The key of `namespace/name`.
    pub fn new(namespace: &str, name: &str) -> Self {
        AppKey(format!("{namespace}/{name}").into())
    }

    /// The key of `app`.
    pub fn of(app: &fleetshard_core::App) -> Self {
        AppKey::new(&app.namespace, &app.name)
    }

    /// `namespace/name`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The namespace and the name.
    pub fn parts(&self) -> (&str, &str) {
        // Made by `new`: the first `/` separates them (a namespace has none).
        self.0.split_once('/').unwrap_or(("", &self.0))
    }
}

impl fmt::Display for AppKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A configuration the runtime cannot work with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A rate limiter field is out of range.
    #[error("rate limiter: {field} {reason}")]
    RateLimiter {
        /// The field.
        field: &'static str,
        /// What is wrong.
        reason: &'static str,
    },
    /// A worker pool would have no workers.
    #[error("{field} must be at least 1")]
    NoWorkers {
        /// The pool's setting (`status_processors` or `operation_processors`).
        field: &'static str,
    },
}
