//! What GitOps reads of an application beside its place in the fleet: where its manifests
//! come from, its sync policy, and a sync asked for by hand.
//!
//! The distribution engine (`fleetshard-core`) sees an application as an identity and a
//! destination only; the GitOps reconciler needs this too. The loaders return it beside
//! the fleet, keyed by the application's namespace and name
//! ([`FleetFile::specs`](crate::FleetFile::specs)), so a change of source or sync policy
//! never touches the model every replica recomputes assignments with.

use std::collections::BTreeMap;

use fleetshard_core::App;

/// Where an application's manifests come from (`spec.source`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AppSource {
    /// Git repository URL or local path.
    pub repo_url: String,
    /// Branch, tag, commit or `HEAD`.
    pub target_revision: String,
    /// Directory inside the repository.
    pub path: String,
    /// `directory`: how the directory is read.
    pub directory: DirectoryOptions,
    /// The whole `spec.source` object as read (`Null` when built in code rather than
    /// read from an Application): a renderer reads the options it understands from it
    /// (`kustomize`, `helm`, `directory.jsonnet`, `plugin`, `chart`, …), and a repo-server
    /// client sends it on. [`crate::implemented`] has already refused every field of it
    /// fleetshard does not render.
    pub raw: serde_json::Value,
}

impl AppSource {
    /// This source with `raw` made from its typed fields, as Argo CD's Application would
    /// spell it (`repoURL` and `path` when set, `targetRevision`, `directory` when not the
    /// default): for sources not read from an Application (fleetshard's own fleet file).
    #[must_use]
    pub fn with_typed_raw(mut self) -> Self {
        let mut raw = serde_json::Map::new();
        for (field, value) in [("repoURL", &self.repo_url), ("path", &self.path)] {
            if !value.is_empty() {
                raw.insert(field.into(), value.as_str().into());
            }
        }
        raw.insert(
            "targetRevision".into(),
            self.target_revision.as_str().into(),
        );
        let d = &self.directory;
        if *d != DirectoryOptions::default() {
            let mut dir = serde_json::Map::new();
            if d.recurse {
                dir.insert("recurse".into(), true.into());
            }
            for (field, value) in [("include", &d.include), ("exclude", &d.exclude)] {
                if !value.is_empty() {
                    dir.insert(field.into(), value.as_str().into());
                }
            }
            raw.insert("directory".into(), dir.into());
        }
        self.raw = raw.into();
        self
    }
}

/// `spec.source.directory` of a plain-manifest directory app (Argo CD's defaults: top
/// level only, every manifest file).
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct DirectoryOptions {
    /// `recurse`: read subdirectories too (default false: the top level of `path` only).
    pub recurse: bool,
    /// `include`: a glob the file's path relative to `path` must match (empty: any).
    pub include: String,
    /// `exclude`: a glob that drops a file whose path relative to `path` matches it
    /// (empty: none); it wins over `include`.
    pub exclude: String,
}

/// Automated sync settings (`spec.syncPolicy.automated`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AutoSync {
    /// Delete live resources that are no longer in Git.
    pub prune: bool,
    /// Revert live drift even when Git did not change.
    pub self_heal: bool,
    /// `allowEmpty`: an automated sync may prune every object when the source renders
    /// none (default false: such a sync is refused).
    pub allow_empty: bool,
}

/// How a sync is retried when it fails (`syncPolicy.retry`, `operation.retry`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RetryPolicy {
    /// `limit`: retries after the first attempt (below 0: no end; 0: none).
    pub limit: i64,
    /// `backoff.duration` as written (seconds, or a Go duration such as `5s`).
    pub duration: Option<String>,
    /// `backoff.factor`.
    pub factor: Option<i64>,
    /// `backoff.maxDuration` as written.
    pub max_duration: Option<String>,
    /// `refresh`: a retry syncs the latest revision rather than the one first resolved.
    pub refresh: bool,
}

/// `syncPolicy.managedNamespaceMetadata`: what the namespace `CreateNamespace=true`
/// creates (or finds) is given.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ManagedNamespaceMetadata {
    /// `labels`.
    pub labels: BTreeMap<String, String>,
    /// `annotations`.
    pub annotations: BTreeMap<String, String>,
}

/// How an app syncs beyond automation: `spec.syncPolicy`'s options, namespace metadata and
/// retries.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SyncPolicy {
    /// `syncOptions`, as written (`Name=value` each).
    pub sync_options: Vec<String>,
    /// `managedNamespaceMetadata`.
    pub managed_namespace_metadata: Option<ManagedNamespaceMetadata>,
    /// `retry`.
    pub retry: Option<RetryPolicy>,
}

/// The Application object's own state that steers its reconciliation: its deletion, its
/// finalizers, and the annotations that pause it or approve deletions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Lifecycle {
    /// `metadata.deletionTimestamp` is set: the Application is being deleted.
    pub deleting: bool,
    /// `metadata.deletionTimestamp` as written (what an approval must not predate).
    pub deleted_at: Option<String>,
    /// `metadata.finalizers` (`resources-finalizer.argocd.argoproj.io` cascades the
    /// deletion to the app's resources).
    pub finalizers: Vec<String>,
    /// `argocd.argoproj.io/skip-reconcile: "true"` (as Go's `strconv.ParseBool` reads it):
    /// the app is not reconciled at all.
    pub skip_reconcile: bool,
    /// `status.operationState.phase` is `Terminating` (`argocd app terminate-op`): the
    /// operation in progress is to be terminated.
    pub terminating: bool,
    /// `argocd.argoproj.io/deletion-approved`: when a deletion or prune waiting for
    /// confirmation (`Delete=confirm`, `Prune=confirm`) was approved (RFC 3339).
    pub deletion_approved: Option<String>,
    /// `spec.revisionHistoryLimit`: how many syncs `status.history` keeps (default 10).
    pub revision_history_limit: Option<i64>,
}

/// How the Application asks to be compared: its own `argocd.argoproj.io/compare-options`
/// (Argo CD reads these two on the Application only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AppCompareOptions {
    /// `ServerSideDiff=true` (`Some(true)`) or `ServerSideDiff=false` (`Some(false)`, which
    /// turns off the controller-wide setting for this app); `None` when neither is given.
    /// `false` wins when both are.
    pub server_side_diff: Option<bool>,
    /// `IncludeMutationWebhook=true`: a server-side diff keeps what mutating admission
    /// webhooks add to the predicted object.
    pub include_mutation_webhook: bool,
}

impl AppCompareOptions {
    /// Read from the annotation's value (comma-separated options, trimmed).
    pub fn parse(text: &str) -> AppCompareOptions {
        let has = |option: &str| text.split(',').any(|o| o.trim() == option);
        let server_side_diff = if has("ServerSideDiff=false") {
            Some(false)
        } else if has("ServerSideDiff=true") {
            Some(true)
        } else {
            None
        };
        AppCompareOptions {
            server_side_diff,
            include_mutation_webhook: has("IncludeMutationWebhook=true"),
        }
    }

    /// Whether the app is compared server-side when the controller-wide setting
    /// (`controller.diff.server.side`) is `controller_default`.
    pub fn server_side_diff(&self, controller_default: bool) -> bool {
        self.server_side_diff.unwrap_or(controller_default)
    }
}

/// `operation.sync.syncStrategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SyncStrategy {
    /// `apply` (rather than `hook`): no hooks run.
    pub apply: bool,
    /// `force`: a failed apply deletes and re-creates the object.
    pub force: bool,
}

/// A sync asked for by hand: the Application's `operation.sync` (Argo CD's "Sync" button
/// or `argocd app sync` sets it; the controller runs it once and clears it).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SyncRequest {
    /// `operation.sync.revision`: the commit to sync to; `None`: the target revision.
    pub revision: Option<String>,
    /// `operation.sync.source`: the source to sync instead of the app's (what `argocd app
    /// rollback` writes from a history entry).
    pub source: Option<AppSource>,
    /// `operation.sync.syncOptions`: the options of this sync (the app's own do not
    /// apply to a sync asked for by hand).
    pub sync_options: Vec<String>,
    /// `operation.sync.syncStrategy`.
    pub strategy: SyncStrategy,
    /// `operation.retry`.
    pub retry: Option<RetryPolicy>,
    /// `operation.sync.prune`.
    pub prune: bool,
    /// `operation.sync.dryRun`: validate only (server-side dry run), persist nothing.
    pub dry_run: bool,
    /// `operation.sync.resources`: sync only these objects (`None`: the whole app).
    pub resources: Option<Vec<SyncResource>>,
    /// `operation.initiatedBy`: who asked.
    pub initiated_by: InitiatedBy,
}

/// One entry of `operation.sync.resources` (selective sync).
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash, PartialOrd, Ord)]
pub struct SyncResource {
    /// API group (`""` for core).
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Namespace (`""`: cluster-scoped, or the destination namespace's objects).
    pub namespace: String,
    /// Name.
    pub name: String,
}

/// `operation.initiatedBy`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InitiatedBy {
    /// The user who asked (empty when unknown).
    pub username: String,
    /// Started by the controller's automated sync.
    pub automated: bool,
}

/// A refresh asked for by hand (the annotation `argocd.argoproj.io/refresh`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefreshRequest {
    /// `normal`: compare again (caches used).
    Normal,
    /// `hard`: render again without caches (the repo-server's `noCache`).
    Hard,
}

/// Which kind of Argo CD condition a refusal is shown as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalKind {
    /// Something in `spec` (Argo CD's `InvalidSpecError`).
    InvalidSpec,
    /// Something in the sync request, `operation` (Argo CD's `SyncError`).
    Sync,
}

impl RefusalKind {
    /// The condition type Argo CD uses for it.
    pub fn condition_type(self) -> &'static str {
        match self {
            RefusalKind::InvalidSpec => "InvalidSpecError",
            RefusalKind::Sync => "SyncError",
        }
    }
}

/// A field an Application sets that fleetshard does not implement: the app is shown with
/// a condition naming it, and nothing is applied or pruned for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Spec or request.
    pub kind: RefusalKind,
    /// The field, as a path in the Application (`spec.source.helm`).
    pub field: String,
    /// Why, in a sentence.
    pub message: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// An application's GitOps spec: everything the reconciler reads of it that the
/// distribution engine does not.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AppSpec {
    /// `spec.source` (a multi-source Application's first source).
    pub source: AppSource,
    /// Every entry of `spec.sources` when there is more than one (a multi-source
    /// Application, rendered only by a repo-server); empty otherwise.
    pub sources: Vec<AppSource>,
    /// `spec.syncPolicy.automated`, when set.
    pub auto_sync: Option<AutoSync>,
    /// `operation.sync`, when a sync was asked for by hand.
    pub sync_request: Option<SyncRequest>,
    /// The refresh asked for by the Application's annotation `argocd.argoproj.io/refresh`
    /// (Argo CD's "Refresh" and "Hard Refresh"); the controller removes the annotation
    /// once the refresh is done.
    pub refresh: Option<RefreshRequest>,
    /// The Application's `argocd.argoproj.io/manifest-generate-paths` annotation (the
    /// paths whose changes matter to it; Argo CD's repo-server is told them).
    pub manifest_generate_paths: Option<String>,
    /// The values of the Application's `link.argocd.argoproj.io/*` annotations (its own
    /// links, which Argo CD lists in `status.summary.externalURLs`), in key order.
    pub links: Vec<String>,
    /// The Application's `metadata.labels` (Argo CD's `argocd_app_labels` shows those
    /// `--metrics-application-labels` names).
    pub labels: BTreeMap<String, String>,
    /// `spec.ignoreDifferences`: fields the comparison leaves out, per object.
    pub ignore_differences: Vec<crate::customizations::IgnoreDifference>,
    /// What the Application sets that fleetshard does not implement
    /// ([`crate::implemented`]); any refusal of kind [`RefusalKind::InvalidSpec`] stops
    /// every sync of the app, one of kind [`RefusalKind::Sync`] the request.
    pub refusals: Vec<Refusal>,
    /// `spec.syncPolicy` beyond automation.
    pub policy: SyncPolicy,
    /// The Application's deletion, finalizers and reconciliation annotations.
    pub lifecycle: Lifecycle,
    /// The Application's own compare options (server-side diff).
    pub compare_options: AppCompareOptions,
}

impl AppSpec {
    /// `RespectIgnoreDifferences=true` in `spec.syncPolicy.syncOptions`: a sync leaves the
    /// fields `ignoreDifferences` names as they are live.
    pub fn respects_ignore_differences(&self) -> bool {
        self.policy
            .sync_options
            .iter()
            .any(|o| o.trim() == "RespectIgnoreDifferences=true")
    }

    /// The refusals of `kind`.
    pub fn refusals_of(&self, kind: RefusalKind) -> impl Iterator<Item = &Refusal> {
        self.refusals.iter().filter(move |r| r.kind == kind)
    }
}

/// `value`'s (an Application's) `metadata.labels` with string values.
pub(crate) fn app_labels(value: &serde_json::Value) -> BTreeMap<String, String> {
    value
        .pointer("/metadata/labels")
        .and_then(serde_json::Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
        .collect()
}

/// The values of `value`'s (an Application's) `link.argocd.argoproj.io/*` annotations.
pub(crate) fn app_links(value: &serde_json::Value) -> Vec<String> {
    value
        .pointer("/metadata/annotations")
        .and_then(serde_json::Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with("link.argocd.argoproj.io/"))
        .filter_map(|(_, v)| v.as_str().map(str::to_owned))
        .collect()
}

/// What an Application gives: the application as the distribution engine sees it, and its
/// GitOps spec.
pub type AppDefinition = (App, AppSpec);

/// An application's key in [`FleetFile::specs`](crate::FleetFile::specs): its
/// `(namespace, name)`.
pub fn spec_key(app: &App) -> (String, String) {
    (app.namespace.clone(), app.name.clone())
}

#[cfg(test)]
mod tests {
    use super::AppCompareOptions;

    #[test]
    fn compare_options_are_read_as_argo_cd_reads_them() {
        let o = AppCompareOptions::parse(
            "IgnoreExtraneous, ServerSideDiff=true,IncludeMutationWebhook=true",
        );
        assert_eq!(o.server_side_diff, Some(true));
        assert!(o.include_mutation_webhook);
        assert!(o.server_side_diff(false));
        // `false` turns the controller-wide setting off; `false` wins over `true`.
        let off = AppCompareOptions::parse("ServerSideDiff=true,ServerSideDiff=false");
        assert!(!off.server_side_diff(true));
        // Neither: the controller-wide setting decides. Options match exactly.
        let none = AppCompareOptions::parse("ServerSideDiff=True, IncludeMutationWebhook");
        assert_eq!(none, AppCompareOptions::default());
        assert!(none.server_side_diff(true) && !none.server_side_diff(false));
    }
}
