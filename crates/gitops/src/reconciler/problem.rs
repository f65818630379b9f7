//! Why a refresh could not compare an app, and when to try again.
//!
//! As Argo CD's controller, a refresh that failed is not retried in a loop: a source that
//! cannot be rendered (a repository or repo-server error, a bad manifest) waits for the
//! next periodic refresh or for a change of the app (Argo CD's refresh queue never
//! re-queues a failed comparison), so a failing app costs one render per resync period —
//! Argo CD's cost —, never a burst. A cluster that cannot be reached or listed is tried
//! again after [`CLUSTER_RETRY`], Argo CD's pause between attempts at a cluster whose
//! cache failed to sync.

use std::time::Duration;

use fleetshard_util::redact::redact_userinfo;

use super::status::{ComparisonStatus, Condition, HealthInfo, SyncInfo};
use crate::live::LiveError;
use crate::source::SourceError;

/// Argo CD's pause before it tries a cluster whose cache failed to sync again
/// (`clusterSyncRetryTimeoutDuration`).
pub(super) const CLUSTER_RETRY: Duration = Duration::from_secs(10);

/// A refresh that could not compare the app.
pub(super) struct Problem {
    pub(super) message: String,
    /// Try again after this long; `None`: at the next periodic refresh or change.
    pub(super) retry_after: Option<Duration>,
    pub(super) revision: Option<String>,
    /// The condition type it is shown as (`ComparisonError`, `InvalidSpecError`).
    pub(super) condition: &'static str,
}

/// Argo CD's condition type for a failed comparison.
pub(super) const COMPARISON_ERROR: &str = "ComparisonError";

impl Problem {
    /// A problem only a change to the app or its repository can fix, shown as `condition`.
    /// No URL's user information is kept in the message (a password inside a `repoURL`).
    pub(super) fn permanent(condition: &'static str, message: impl ToString) -> Problem {
        Problem {
            message: redact_userinfo(&message.to_string()),
            retry_after: None,
            revision: None,
            condition,
        }
    }

    /// The status of an app that could not be compared: sync and health unknown, the
    /// problem as the one condition, at `now`.
    pub(super) fn status(&self, now: String) -> ComparisonStatus {
        ComparisonStatus {
            sync: SyncInfo {
                status: "Unknown".to_owned(),
                revision: self.revision.clone(),
                revisions: Vec::new(),
                compared_to: None,
                compared_before: None,
            },
            health: HealthInfo {
                status: "Unknown".to_owned(),
                message: String::new(),
                last_transition_time: None,
            },
            resources: Vec::new(),
            source_type: None,
            source_types: Vec::new(),
            summary: None,
            controller_namespace: String::new(),
            refresh_done: false,
            reconciled_at: now.clone(),
            conditions: vec![Condition {
                kind: self.condition.to_owned(),
                message: self.message.clone(),
                last_transition_time: now,
            }],
        }
    }

    /// A cluster that cannot be reached or listed now: tried again after [`CLUSTER_RETRY`].
    pub(super) fn cluster(message: impl ToString) -> Problem {
        Problem {
            message: redact_userinfo(&message.to_string()),
            retry_after: Some(CLUSTER_RETRY),
            revision: None,
            condition: COMPARISON_ERROR,
        }
    }
}

impl From<LiveError> for Problem {
    fn from(e: LiveError) -> Self {
        match e {
            // Only a change to the app or to the cluster Secret's scope fixes it (and either
            // re-queues the app).
            LiveError::NotManaged { .. } => Problem::permanent(COMPARISON_ERROR, e),
            // Every other live-state failure can pass: a cluster comes back, a CRD gets
            // installed, credentials get fixed in the cluster Secret.
            _ => Problem::cluster(e),
        }
    }
}

impl From<SourceError> for Problem {
    /// Whatever went wrong with the source, the next periodic refresh or a change of the
    /// app tries again (a repository back, a commit pushed, a manifest fixed).
    fn from(e: SourceError) -> Self {
        Problem::permanent(COMPARISON_ERROR, e)
    }
}
