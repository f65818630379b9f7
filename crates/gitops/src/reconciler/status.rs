//! An application's status in Argo CD's shape, and where it is recorded: a [`StatusSink`]
//! — in memory ([`MemorySink`]), in the coordination store
//! ([`StoreStatusSink`](super::StoreStatusSink), local mode) or the Application object's
//! `status` ([`KubeStatusSink`], Kubernetes mode).

use fleetshard_controller::AppKey;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::history::RevisionHistory;

/// `status.sync`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncInfo {
    /// `Synced`, `OutOfSync`, or `Unknown` (the comparison could not be made).
    pub status: String,
    /// The commit compared against, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// A multi-source app's revisions, one per source (`revision` is then absent).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revisions: Vec<String>,
    /// `comparedTo`: the spec compared (`source` or `sources`, `destination`,
    /// `ignoreDifferences`), as the Application spells it ([`super::compared_to`]).
    #[serde(
        default,
        rename = "comparedTo",
        skip_serializing_if = "Option::is_none"
    )]
    pub compared_to: Option<Value>,
    /// The `comparedTo` this owner recorded last, if it knows it (not recorded itself):
    /// the merge patch removes what it had and `compared_to` lacks, at any depth (a key
    /// gone from a source's `helm.valuesObject` or `kustomize.commonLabels`).
    #[serde(skip)]
    pub compared_before: Option<Value>,
}

/// `status.health` and a resource's `health`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthInfo {
    /// `Healthy`, `Progressing`, `Degraded`, `Suspended`, `Missing` or `Unknown`; empty
    /// for a resource without health (no check applies to its kind: the field is then not
    /// written, as Argo CD writes none).
    #[serde(default)]
    pub status: String,
    /// Why, when a rule said.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The application's health: when its status last changed (Argo CD 3's
    /// `health.lastTransitionTime`); absent on a resource's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
}

impl HealthInfo {
    /// A resource's health as its status entry shows it (none: no check applies).
    pub fn of(health: &crate::health::Health) -> HealthInfo {
        health
            .status()
            .map_or_else(HealthInfo::default, |s| HealthInfo {
                status: s.to_string(),
                message: health.message.clone(),
                last_transition_time: None,
            })
    }

    /// Whether this is no health at all (a resource no check applies to).
    pub fn is_none(&self) -> bool {
        self.status.is_empty()
    }
}

/// One entry of `status.resources`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceEntry {
    /// API group ("" for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Namespace ("" for cluster-scoped kinds).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `Synced` or `OutOfSync` (absent for a hook, which is never compared).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// The live object's health (absent when no check applies to its kind).
    #[serde(default, skip_serializing_if = "HealthInfo::is_none")]
    pub health: HealthInfo,
    /// Live, tracked by the app, and no longer in Git.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub requires_pruning: bool,
    /// A hook's live object (shown, never compared or pruned).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hook: bool,
    /// Its sync wave.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sync_wave: i64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// An entry of `status.conditions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// `ComparisonError` (desired or live state could not be read or compared),
    /// `InvalidSpecError` (the spec sets what fleetshard does not implement) or
    /// `SyncError` (a sync was refused).
    #[serde(rename = "type")]
    pub kind: String,
    /// What happened, naming the repository, object or cluster.
    pub message: String,
    /// When it was seen.
    pub last_transition_time: String,
}

/// What a refresh records: everything but `operationState`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ComparisonStatus {
    /// `status.sync`.
    pub sync: SyncInfo,
    /// `status.health`.
    pub health: HealthInfo,
    /// `status.resources`.
    pub resources: Vec<ResourceEntry>,
    /// `status.reconciledAt`.
    pub reconciled_at: String,
    /// `status.conditions` (empty: none).
    pub conditions: Vec<Condition>,
    /// `status.sourceType`: how the source was rendered (`Directory`, `Kustomize`,
    /// `Helm`); `None` when it was not (removed from the status).
    #[serde(default)]
    pub source_type: Option<String>,
    /// `status.sourceTypes`: a multi-source app's, one per source (`sourceType` is then
    /// absent).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_types: Vec<String>,
    /// `status.summary` (`images`, `externalURLs`) from the app's resource tree; `None`
    /// when no tree was built (the recorded one is left as it is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Value>,
    /// `status.controllerNamespace`: Argo CD's namespace, the controller's (empty: none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub controller_namespace: String,
    /// The refresh asked for by the annotation `argocd.argoproj.io/refresh` is done: the
    /// patch removes the annotation, as Argo CD's controller does (not a status field).
    #[serde(skip)]
    pub refresh_done: bool,
}

/// One entry of `operationState.syncResult.resources`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncResultEntry {
    /// API group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Namespace (`""` for cluster-scoped kinds: always written, Argo CD's CRD requires
    /// it).
    #[serde(default)]
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `Synced`, `SyncFailed`, `Pruned` or `PruneSkipped` (empty: not written yet).
    #[serde(default)]
    pub status: String,
    /// The server's answer.
    #[serde(default)]
    pub message: String,
    /// For a hook: its type (`PreSync`, `Sync`, `PostSync`, `SyncFail`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hook_type: String,
    /// Where its part of the sync stands (`Running`, `Succeeded`, `Failed`, …).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hook_phase: String,
    /// The sync phase it ran in.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sync_phase: String,
}

/// `operationState.syncResult`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncResult {
    /// The commit synced; empty for a multi-source app (Argo CD's CRD requires the field).
    pub revision: String,
    /// A multi-source app's revisions synced, one per source.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revisions: Vec<String>,
    /// The source synced (`spec.source` as the Application spells it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Value>,
    /// A multi-source app's sources synced (`spec.sources`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<Value>,
    /// Each resource's outcome.
    #[serde(default)]
    pub resources: Vec<SyncResultEntry>,
    /// The `managedNamespaceMetadata` the sync applied.
    #[serde(
        default,
        rename = "managedNamespaceMetadata",
        skip_serializing_if = "Option::is_none"
    )]
    pub managed_namespace_metadata: Option<Value>,
}

impl SyncResult {
    /// The commit synced, as the reconciler compares it: a multi-source app's revisions
    /// joined with `,`.
    pub fn synced_commit(&self) -> String {
        if self.revisions.is_empty() {
            self.revision.clone()
        } else {
            self.revisions.join(",")
        }
    }
}

/// `operationState.operation`: the request the operation runs, as Argo CD records it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperationRecord {
    /// `sync`.
    pub sync: SyncOperation,
    /// `initiatedBy`.
    pub initiated_by: Initiator,
    /// `retry`: how a failed attempt is retried (absent: not at all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryRecord>,
}

/// `operation.retry`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RetryRecord {
    /// `limit`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub limit: i64,
    /// `backoff`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<BackoffRecord>,
    /// `refresh`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refresh: bool,
}

/// `operation.retry.backoff`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackoffRecord {
    /// `duration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    /// `factor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub factor: Option<i64>,
    /// `maxDuration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_duration: Option<String>,
}

/// `operation.sync`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncOperation {
    /// The revision asked for (absent: the target revision).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub revision: String,
    /// `prune`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prune: bool,
    /// `dryRun`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// `resources` of a selective sync (empty: the whole app).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<SyncOperationResource>,
    /// `syncOptions` of this sync.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sync_options: Vec<String>,
    /// `syncStrategy` (`{hook: {}}`, `{apply: {force: true}}`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_strategy: Option<Value>,
    /// `source` asked for (a rollback's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Value>,
}

/// One entry of `operation.sync.resources`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SyncOperationResource {
    /// API group.
    #[serde(default)]
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Name.
    pub name: String,
    /// Namespace (empty: any).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
}

/// `operation.initiatedBy`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Initiator {
    /// Who asked (a manual sync).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub username: String,
    /// Started by automated sync.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub automated: bool,
}

/// `status.operationState`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperationState {
    /// The request run (Argo CD's CRD requires it). Records written before it was
    /// recorded read as an empty one.
    #[serde(default)]
    pub operation: OperationRecord,
    /// `Running`, `Succeeded`, `Failed` or `Error` (the request was refused).
    pub phase: String,
    /// A summary.
    pub message: String,
    /// When it started.
    pub started_at: String,
    /// When it ended (absent while running).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// The revision synced and each resource's part so far (absent before the first
    /// step, and while a retry waits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_result: Option<SyncResult>,
    /// `retryCount`: the retries so far.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retry_count: i64,
}

impl OperationState {
    /// Whether the operation goes on (`Running` or `Terminating`).
    pub fn in_progress(&self) -> bool {
        matches!(self.phase.as_str(), "Running" | "Terminating")
    }
}

/// One write to an app's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatusUpdate {
    /// A refresh's result (replaces sync, health, resources, reconciledAt, conditions).
    Comparison(Box<ComparisonStatus>),
    /// An operation's progress or end (replaces operationState).
    Operation(Box<OperationState>),
    /// `status.history` (replaced whole).
    History(Vec<RevisionHistory>),
}

impl StatusUpdate {
    /// The JSON merge patch of the Application that records this update.
    pub fn merge_patch(&self) -> Value {
        match self {
            StatusUpdate::Comparison(c) => {
                let mut status = serde_json::to_value(c).unwrap_or_else(|_| json!({}));
                if c.conditions.is_empty() {
                    // A merge patch removes a field set to null: old errors go away.
                    status["conditions"] = Value::Null;
                }
                // A multi-source app's lists go when it has one source again.
                if c.source_types.is_empty() {
                    status["sourceTypes"] = Value::Null;
                }
                if c.sync.revisions.is_empty() {
                    status["sync"]["revisions"] = Value::Null;
                }
                // `comparedTo` is replaced whole (a source's fields removed stay removed).
                if let Some(compared) = &c.sync.compared_to {
                    status["sync"]["comparedTo"] =
                        super::compared::replacing(compared, c.sync.compared_before.as_ref());
                }
                if c.refresh_done {
                    return json!({
                        "status": status,
                        "metadata": {"annotations": {"argocd.argoproj.io/refresh": null}},
                    });
                }
                json!({ "status": status })
            }
            // A finished operation clears the request (`operation`), as Argo CD's
            // controller does; a merge patch with null removes it (harmless when unset).
            StatusUpdate::Operation(o) if o.finished_at.is_some() => {
                json!({ "status": { "operationState": replacing(o) }, "operation": null })
            }
            StatusUpdate::Operation(o) => {
                json!({ "status": { "operationState": replacing(o) } })
            }
            StatusUpdate::History(h) => json!({ "status": { "history": h } }),
        }
    }
}

/// `state` as a merge patch that replaces the recorded `operationState`: a merge patch
/// merges into what is there, so every optional field this state leaves out is set to null
/// (removed). Otherwise a `Running` state would keep the previous operation's
/// `finishedAt` and `syncResult`, and a whole-app sync its predecessor's selective
/// `resources`.
fn replacing(state: &OperationState) -> Value {
    let mut v = serde_json::to_value(state).unwrap_or_else(|_| json!({}));
    let null_absent = |v: &mut Value, keys: &[&str]| {
        if let Some(map) = v.as_object_mut() {
            for key in keys {
                map.entry(*key).or_insert(Value::Null);
            }
        }
    };
    null_absent(&mut v, &["finishedAt", "syncResult", "retryCount"]);
    if v["syncResult"].is_object() {
        null_absent(
            &mut v["syncResult"],
            &["revisions", "source", "sources", "managedNamespaceMetadata"],
        );
    }
    null_absent(&mut v["operation"], &["retry"]);
    null_absent(
        &mut v["operation"]["sync"],
        &[
            "revision",
            "prune",
            "dryRun",
            "resources",
            "syncOptions",
            "syncStrategy",
            "source",
        ],
    );
    null_absent(
        &mut v["operation"]["initiatedBy"],
        &["username", "automated"],
    );
    v
}

/// An app's status as a [`MemorySink`] keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AppStatus {
    /// The last refresh's result.
    pub comparison: Option<ComparisonStatus>,
    /// The last operation's state.
    pub operation: Option<OperationState>,
    /// `status.history`.
    pub history: Vec<RevisionHistory>,
}

/// What is recorded on an app ([`StatusSink::recorded`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Recorded {
    /// The operation last recorded.
    pub operation: Option<OperationState>,
    /// `status.sync.status` and `status.health.status` (`None`: not known).
    pub statuses: Option<RecordedStatuses>,
}

/// An app's sync and health statuses as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RecordedStatuses {
    /// `status.sync.status` (empty: never compared).
    pub sync: String,
    /// `status.health.status` (empty: never assessed).
    pub health: String,
}

/// Why a status could not be recorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SinkError {
    /// The Application object no longer exists: there is nothing to record on.
    #[error("application {0} not found")]
    NotFound(String),
    /// The control plane's API server did not take the write (retried later).
    #[error("recording the status of {app}: {message}")]
    Unavailable {
        /// The app.
        app: String,
        /// What happened.
        message: String,
    },
}

/// Where app statuses are recorded.
pub trait StatusSink: Send + Sync {
    /// Records `update` for `app`.
    fn write<'a>(
        &'a self,
        app: &'a AppKey,
        update: &'a StatusUpdate,
    ) -> BoxFuture<'a, Result<(), SinkError>>;

    /// The operation last recorded for `app` (by any replica): how a new owner learns
    /// which commit was synced before it, so that without `selfHeal` it leaves drift
    /// alone as the previous owner would have.
    fn last_operation<'a>(
        &'a self,
        app: &'a AppKey,
    ) -> BoxFuture<'a, Result<Option<OperationState>, SinkError>>;

    /// The operation last recorded, and the sync and health statuses recorded on the app
    /// now (by any replica; empty for an app never compared): what a new owner's first
    /// refresh is compared with to tell a transition (Argo CD's events). By default the
    /// statuses are not known (`None`).
    fn recorded<'a>(&'a self, app: &'a AppKey) -> BoxFuture<'a, Result<Recorded, SinkError>> {
        Box::pin(async move {
            Ok(Recorded {
                operation: self.last_operation(app).await?,
                statuses: None,
            })
        })
    }

    /// `status.history` as recorded (a successful sync appends to it).
    fn history<'a>(
        &'a self,
        app: &'a AppKey,
    ) -> BoxFuture<'a, Result<Vec<RevisionHistory>, SinkError>> {
        let _ = app;
        Box::pin(async { Ok(Vec::new()) })
    }

    /// Removes the finalizers `remove` from the Application and adds `add` (a cascade
    /// deletion done; PostDelete hooks found). Where there is no Application object
    /// (local mode) there is nothing to do.
    fn change_finalizers<'a>(
        &'a self,
        app: &'a AppKey,
        add: &'a [String],
        remove: &'a [String],
    ) -> BoxFuture<'a, Result<(), SinkError>> {
        let _ = (app, add, remove);
        Box::pin(async { Ok(()) })
    }
}

mod kube_sink;
mod memory_sink;

pub use kube_sink::KubeStatusSink;
pub use memory_sink::MemorySink;
pub(crate) use memory_sink::{keep_health_transition, keep_summary};

#[cfg(test)]
mod tests;
