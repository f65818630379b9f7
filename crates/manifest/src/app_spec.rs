//! What GitOps reads of an application beside its place in the fleet: where its manifests
//! come from, its sync policy, and a sync asked for by hand.
//!
//! The distribution engine (`fleetshard-core`) sees an application as an identity and a
//! destination only; the GitOps reconciler needs this too. The loaders return it beside
//! the fleet, keyed by the application's namespace and name
//! ([`FleetFile::specs`](crate::FleetFile::specs)), so a change of source or sync policy
//! never touches the model every replica recomputes assignments with.

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
}

/// Automated sync settings (`spec.syncPolicy.automated`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AutoSync {
    /// Delete live resources that are no longer in Git.
    pub prune: bool,
    /// Revert live drift even when Git did not change.
    pub self_heal: bool,
}

/// A sync asked for by hand: the Application's `operation.sync` (Argo CD's "Sync" button
/// or `argocd app sync` sets it; the controller runs it once and clears it).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SyncRequest {
    /// `operation.sync.revision`: the commit to sync to; `None`: the target revision.
    pub revision: Option<String>,
    /// `operation.sync.prune`.
    pub prune: bool,
}

/// An application's GitOps spec: everything the reconciler reads of it that the
/// distribution engine does not.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AppSpec {
    /// `spec.source` (a multi-source Application's first source).
    pub source: AppSource,
    /// `spec.syncPolicy.automated`, when set.
    pub auto_sync: Option<AutoSync>,
    /// `operation.sync`, when a sync was asked for by hand.
    pub sync_request: Option<SyncRequest>,
}

/// What an Application gives: the application as the distribution engine sees it, and its
/// GitOps spec.
pub type AppDefinition = (App, AppSpec);

/// An application's key in [`FleetFile::specs`](crate::FleetFile::specs): its
/// `(namespace, name)`.
pub fn spec_key(app: &App) -> (String, String) {
    (app.namespace.clone(), app.name.clone())
}
