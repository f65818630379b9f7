//! What the reconciler remembers of each app between its refresh and its operation.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::Value;

use super::customize::Settings;
use super::{OperationState, self_heal};
use crate::apply::{DesiredObject, PruneTarget};
use crate::compare::{AppComparison, ResourceKey, Tracking};

/// What the last successful refresh of an app found, for its operation.
pub(super) struct Refreshed {
    /// The commit rendered (a multi-source app's revisions joined with `,`).
    pub(super) commit: String,
    /// A multi-source app's revisions, one per source (empty: one source).
    pub(super) revisions: Vec<String>,
    pub(super) cluster: String,
    /// The resources (compared, synced, pruned).
    pub(super) desired: Vec<DesiredObject>,
    /// The hooks (never compared or pruned; named by the sync when only `generateName`).
    pub(super) hooks: Vec<DesiredObject>,
    /// The desired objects whose kind the cluster does not serve yet (a CRD of the app
    /// defines it).
    pub(super) unserved: HashSet<ResourceKey>,
    pub(super) prune: Vec<PruneTarget>,
    pub(super) comparison: AppComparison,
    /// The live objects read: the desired ones' and every object the app tracks.
    pub(super) live: Vec<Arc<Value>>,
    /// Desired objects whose live object another app tracks (Argo CD's shared resources).
    pub(super) shared: Vec<String>,
    /// PreDelete and PostDelete hooks (run when the Application is deleted, not by a sync).
    pub(super) deletion_hooks: DeletionHooks,
    /// How argocd-cm said objects are tracked when this was read.
    pub(super) tracking: Tracking,
    /// argocd-cm's resource customizations when this was read (health checks).
    pub(super) settings: Arc<Settings>,
    /// The app's orphaned nodes (`None`: its project does not ask; `orphans.rs`).
    pub(super) orphans: Option<Vec<fleetshard_appstate::ResourceNode>>,
}

/// What an app's memo keeps of its last successful refresh: what the automated sync
/// decides from, and the metrics' count of orphans. Not the refresh's desired and live
/// objects: an operation reads them again at its revision, and kept for every app they
/// were the largest part of a replica's memo (a copy of every desired object, and live
/// versions the caches had already replaced).
pub(super) struct LastRefresh {
    /// The commit rendered (a multi-source app's revisions joined with `,`).
    pub(super) commit: String,
    pub(super) cluster: String,
    /// Neither resources nor hooks were desired (the render was empty).
    pub(super) renders_nothing: bool,
    /// The resources to prune that a guard protects (`Prune=false`, …).
    pub(super) protected: HashSet<ResourceKey>,
    pub(super) comparison: AppComparison,
    /// How many orphaned nodes it found (`None`: its project does not ask).
    pub(super) orphans: Option<usize>,
}

impl LastRefresh {
    /// What is kept of `r`.
    pub(super) fn of(r: Refreshed) -> LastRefresh {
        LastRefresh {
            renders_nothing: r.desired.is_empty() && r.hooks.is_empty(),
            protected: r
                .prune
                .into_iter()
                .filter(|p| p.keep.is_some())
                .map(|p| p.key)
                .collect(),
            orphans: r.orphans.as_ref().map(Vec::len),
            commit: r.commit,
            cluster: r.cluster,
            comparison: r.comparison,
        }
    }
}

/// Monotonic times of the operation in progress as this owner saw it: its sync timeout,
/// a retry's wait and the wave delay are counted on them (never on recorded wall-clock
/// times, which another replica wrote). A new owner starts counting when it takes over.
/// The hooks of an Application's deletion, as its last refresh rendered them.
#[derive(Debug, Clone, Default)]
pub(super) struct DeletionHooks {
    /// PreDelete hooks: run before any of the app's resources is deleted.
    pub(super) pre: Vec<DesiredObject>,
    /// PostDelete hooks: run once they are all gone.
    pub(super) post: Vec<DesiredObject>,
}

impl DeletionHooks {
    /// The hooks of the deletion phase `kind`.
    pub(super) fn of(&self, kind: fleetshard_sync::DeletionHook) -> &[DesiredObject] {
        match kind {
            fleetshard_sync::DeletionHook::PreDelete => &self.pre,
            fleetshard_sync::DeletionHook::PostDelete => &self.post,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub(super) struct OpClock {
    /// The operation (its `startedAt` and retry count) these times are of.
    pub(super) attempt: String,
    /// When this owner first stepped it.
    pub(super) seen: Option<tokio::time::Instant>,
    /// No step before this (the wave delay, a retry's backoff).
    pub(super) not_before: Option<tokio::time::Instant>,
}

#[derive(Default)]
pub(super) struct Memo {
    /// The app's cluster when it was last refreshed or operated on: the memo goes when
    /// that cluster stops, so a later owner reads the recorded operation again.
    pub(super) cluster: String,
    /// The app's destination resolved to no cluster when it was last refreshed or
    /// operated on: the memo goes when any cluster stops (the anchor that made this
    /// replica process it may be the one).
    pub(super) unresolved: bool,
    pub(super) last: Option<Arc<LastRefresh>>,
    /// The operation last recorded: written here, or read from the sink once per owner.
    pub(super) op: Option<KeptOperation>,
    /// `op` was read from the sink (once per owner).
    pub(super) op_read: bool,
    /// The operation in progress' times.
    pub(super) op_clock: OpClock,
    /// The sync request last run; the same request is not run again until it is cleared.
    pub(super) request_done: Option<Box<fleetshard_manifest::SyncRequest>>,
    /// A sync request refused (`SyncError`), shown on the app's status until the next
    /// operation runs.
    pub(super) sync_error: Option<String>,
    /// The last step of the Application's deletion failed (`DeletionError`), shown on
    /// its status until a step succeeds.
    pub(super) deletion_error: Option<String>,
    /// Consecutive self-heals, for their back-off.
    pub(super) heals: self_heal::SelfHeals,
    /// The refresh annotation was seen at the last refresh (its hard refresh is served
    /// once, until the annotation goes and comes back).
    pub(super) hard_refresh_served: bool,
    /// When the app was last refreshed hard (`timeout.hard.reconciliation`).
    pub(super) hard_at: Option<tokio::time::Instant>,
    /// The app's health status last recorded and since when (its `lastTransitionTime`);
    /// unknown until this owner's first refresh.
    pub(super) health_since: Option<(String, String)>,
    /// The app's source(s) as its last comparison read them, as compact JSON text: a
    /// comparison after they changed resolves the revision again (Argo CD's
    /// `noRevisionCache`).
    pub(super) compared_source: Option<Box<str>>,
    /// An ended operation whose record could not be written (a conflict that kept
    /// recurring, an API server that did not answer): written before anything else the app
    /// does, so no operation that ended stays recorded as Running.
    pub(super) unrecorded: Option<Box<OperationState>>,
    /// The sync and health statuses on the Application as this owner knows them (read
    /// once, then written here): a refresh that changes one is a transition, an event.
    /// `None`: not known (events off, or the read failed): no transition event.
    pub(super) recorded: Option<super::RecordedStatuses>,
    /// The `comparedTo` this owner recorded last, as compact JSON text: the next one's
    /// merge patch removes what it had and the new one lacks, at any depth.
    pub(super) compared_written: Option<Box<str>>,
    /// What the last refresh found, for Argo CD's app metrics.
    pub(super) report: Option<Box<super::report::AppReport>>,
    /// Refreshes and syncs since this owner took the app.
    pub(super) activity: super::report::AppActivity,
    /// The Kubernetes API requests made for the app since this owner took it.
    pub(super) requests: std::sync::Arc<crate::live::AppRequests>,
    /// A server-side diff's predictions, by resource, for the next comparison.
    pub(super) predictions: std::collections::HashMap<ResourceKey, super::server_side::Prediction>,
}

// One memo per app this replica owns, in a hash table with room to spare: what is usually
// absent or rarely read is boxed (an inline `OperationState` alone is 520 bytes; the memo
// was 2,280 bytes, 37 MiB of table at 10,000 apps; 552 now).
const _: () = assert!(std::mem::size_of::<Memo>() <= 600);

/// An operation state kept as its JSON (the store's format), deflated ([`super::packed`]):
/// decoded, one with its sync results took about 2.8 KiB per app at the full-size share,
/// the largest part of a memo, and 1.3 KiB as text. Decoded again when an operation or an
/// event reads it.
#[derive(Debug)]
pub(super) struct KeptOperation {
    packed: Box<[u8]>,
    in_progress: bool,
}

impl KeptOperation {
    /// Keeps `state`.
    pub(super) fn new(state: &OperationState) -> Self {
        KeptOperation {
            // Serializing a struct of strings and numbers cannot fail.
            packed: super::packed::pack(&serde_json::to_vec(state).unwrap_or_default())
                .into_boxed_slice(),
            in_progress: state.in_progress(),
        }
    }

    /// The state kept (`None` only if it did not decode, which what this encoded always
    /// does: the sink's records rely on the same round trip).
    pub(super) fn state(&self) -> Option<OperationState> {
        let json = super::packed::unpack(&self.packed)?;
        serde_json::from_slice(&json).ok()
    }

    /// [`OperationState::in_progress`] of the state kept.
    pub(super) fn in_progress(&self) -> bool {
        self.in_progress
    }
}

/// The app's health `lastTransitionTime` for a refresh that found `status` at `now`, as
/// Argo CD sets it (when the status differs from the one recorded before), from what this
/// owner recorded last (`since`, updated). `None` on this owner's first refresh: it does not
/// know the recorded status, and the sink keeps the recorded time (a merge patch leaves it;
/// the local sinks keep it when the status is the same).
pub(super) fn health_transition(
    since: &mut Option<(String, String)>,
    status: &str,
    now: &str,
) -> Option<String> {
    let time = match since {
        Some((previous, at)) if previous == status => Some(at.clone()),
        Some(_) => Some(now.to_owned()),
        None => None,
    };
    *since = Some((
        status.to_owned(),
        time.clone().unwrap_or_else(|| now.to_owned()),
    ));
    time
}

#[cfg(test)]
mod tests {
    use super::{KeptOperation, OperationState, health_transition};

    #[test]
    fn a_kept_operation_decodes_to_the_state_kept() {
        let mut state: OperationState = serde_json::from_value(serde_json::json!({
            "operation": {"sync": {"revision": "abc", "prune": true},
                          "initiatedBy": {"automated": true}, "retry": {"limit": 2}},
            "phase": "Succeeded", "message": "successfully synced (all tasks run)",
            "startedAt": "2026-11-30T10:00:00Z", "finishedAt": "2026-11-30T10:00:04Z",
            "syncResult": {"revision": "abc", "source": {"repoURL": "https://git/r", "path": "p"},
                "resources": [{"group": "apps", "version": "v1", "kind": "Deployment",
                    "namespace": "team-a", "name": "web", "status": "Synced",
                    "message": "deployment.apps/web configured", "syncPhase": "Sync"}]},
            "retryCount": 1
        }))
        .unwrap();
        let kept = KeptOperation::new(&state);
        assert_eq!(kept.state().as_ref(), Some(&state));
        assert!(!kept.in_progress());
        state.phase = "Running".into();
        state.finished_at = None;
        let kept = KeptOperation::new(&state);
        assert_eq!(kept.state().as_ref(), Some(&state));
        assert!(kept.in_progress());
    }

    #[test]
    fn the_transition_time_moves_only_when_the_status_changes() {
        let mut since = None;
        assert_eq!(health_transition(&mut since, "Progressing", "t1"), None);
        assert_eq!(
            health_transition(&mut since, "Progressing", "t2").as_deref(),
            Some("t1")
        );
        assert_eq!(
            health_transition(&mut since, "Healthy", "t3").as_deref(),
            Some("t3")
        );
        assert_eq!(
            health_transition(&mut since, "Healthy", "t4").as_deref(),
            Some("t3")
        );
    }
}
