//! Why a refresh could not compare an app, and whether waiting may fix it.

use crate::live::LiveError;
use crate::source::SourceError;

/// A refresh that could not compare the app.
pub(super) struct Problem {
    pub(super) message: String,
    /// Waiting may fix it: retried with backoff.
    pub(super) transient: bool,
    pub(super) revision: Option<String>,
}

impl Problem {
    pub(super) fn transient(message: impl ToString) -> Problem {
        Problem {
            message: message.to_string(),
            transient: true,
            revision: None,
        }
    }
}

impl From<LiveError> for Problem {
    fn from(e: LiveError) -> Self {
        // Every live-state failure can pass: a cluster comes back, a CRD gets installed,
        // credentials get fixed in the cluster Secret.
        Problem::transient(e)
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
        );
        Problem {
            message: e.to_string(),
            transient,
            revision: None,
        }
    }
}
