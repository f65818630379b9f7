//! Why a refresh could not compare an app, and whether waiting may fix it.

use super::status::{ComparisonStatus, Condition, HealthInfo, SyncInfo};
use crate::live::LiveError;
use crate::source::SourceError;

/// A refresh that could not compare the app.
pub(super) struct Problem {
    pub(super) message: String,
    /// Waiting may fix it: retried with backoff.
    pub(super) transient: bool,
    pub(super) revision: Option<String>,
    /// The condition type it is shown as (`ComparisonError`, `InvalidSpecError`).
    pub(super) condition: &'static str,
}

/// Argo CD's condition type for a failed comparison.
pub(super) const COMPARISON_ERROR: &str = "ComparisonError";

impl Problem {
    /// A problem only a change to the app or its repository can fix, shown as `condition`.
    pub(super) fn permanent(condition: &'static str, message: impl ToString) -> Problem {
        Problem {
            message: message.to_string(),
            transient: false,
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
            },
            health: HealthInfo {
                status: "Unknown".to_owned(),
                message: String::new(),
                last_transition_time: None,
            },
            resources: Vec::new(),
            source_type: None,
            source_types: Vec::new(),
            refresh_done: false,
            reconciled_at: now.clone(),
            conditions: vec![Condition {
                kind: self.condition.to_owned(),
                message: self.message.clone(),
                last_transition_time: now,
            }],
        }
    }

    pub(super) fn transient(message: impl ToString) -> Problem {
        Problem {
            message: message.to_string(),
            transient: true,
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
            _ => Problem::transient(e),
        }
    }
}

impl From<SourceError> for Problem {
    fn from(e: SourceError) -> Self {
        let transient = matches!(
            e,
            SourceError::RepoNotFound { .. }
                | SourceError::Fetch { .. }
                | SourceError::Credentials { .. }
                | SourceError::RevisionNotFound { .. }
                | SourceError::Git { .. }
                | SourceError::Task { .. }
                | SourceError::RepoServer { .. }
        );
        Problem {
            message: e.to_string(),
            transient,
            revision: None,
            condition: COMPARISON_ERROR,
        }
    }
}
