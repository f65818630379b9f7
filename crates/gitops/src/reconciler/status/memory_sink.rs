//! [`MemorySink`]: statuses kept in memory (local mode), and how a refresh's health keeps
//! the time it last changed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use fleetshard_controller::AppKey;
use futures::future::BoxFuture;

use super::{AppStatus, ComparisonStatus, OperationState, SinkError, StatusSink, StatusUpdate};
use crate::reconciler::RevisionHistory;

/// Local mode: statuses in memory (the CLI may persist them).
#[derive(Debug, Default)]
pub struct MemorySink {
    statuses: Mutex<HashMap<AppKey, AppStatus>>,
}

impl MemorySink {
    /// Empty.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// The status of `app`, if any was recorded.
    pub fn get(&self, app: &AppKey) -> Option<AppStatus> {
        let s = self.statuses.lock().unwrap_or_else(PoisonError::into_inner);
        s.get(app).cloned()
    }

    /// Every recorded status.
    pub fn all(&self) -> HashMap<AppKey, AppStatus> {
        let s = self.statuses.lock().unwrap_or_else(PoisonError::into_inner);
        s.clone()
    }
}

impl StatusSink for MemorySink {
    fn write<'a>(
        &'a self,
        app: &'a AppKey,
        update: &'a StatusUpdate,
    ) -> BoxFuture<'a, Result<(), SinkError>> {
        let mut s = self.statuses.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = s.entry(app.clone()).or_default();
        match update {
            StatusUpdate::Comparison(c) => {
                let mut c = (**c).clone();
                keep_health_transition(&mut c, entry.comparison.as_ref());
                keep_summary(&mut c, entry.comparison.as_ref());
                entry.comparison = Some(c);
            }
            StatusUpdate::Operation(o) => entry.operation = Some((**o).clone()),
            StatusUpdate::History(h) => entry.history.clone_from(h),
        }
        Box::pin(async { Ok(()) })
    }

    fn history<'a>(
        &'a self,
        app: &'a AppKey,
    ) -> BoxFuture<'a, Result<Vec<RevisionHistory>, SinkError>> {
        let history = self.get(app).map(|s| s.history).unwrap_or_default();
        Box::pin(async { Ok(history) })
    }

    fn last_operation<'a>(
        &'a self,
        app: &'a AppKey,
    ) -> BoxFuture<'a, Result<Option<OperationState>, SinkError>> {
        let operation = self.get(app).and_then(|s| s.operation);
        Box::pin(async { Ok(operation) })
    }
}

/// The app's health in `new` written without `lastTransitionTime` (the reconciler's first
/// refresh of the app): the recorded time when the recorded status is the same, else the
/// refresh's time (a new app, or a status that changed).
pub(crate) fn keep_health_transition(new: &mut ComparisonStatus, old: Option<&ComparisonStatus>) {
    if new.health.last_transition_time.is_some() {
        return;
    }
    new.health.last_transition_time = match old {
        Some(old) if old.health.status == new.health.status => {
            old.health.last_transition_time.clone()
        }
        _ => Some(new.reconciled_at.clone()),
    };
}

/// The recorded summary kept when `new` built no tree (as a merge patch leaves it on the
/// Application).
pub(crate) fn keep_summary(new: &mut ComparisonStatus, old: Option<&ComparisonStatus>) {
    if new.summary.is_none() {
        new.summary = old.and_then(|old| old.summary.clone());
    }
}
