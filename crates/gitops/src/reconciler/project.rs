//! An app's AppProject, applied: the app-level rules before anything is read from Git,
//! each desired and each prunable resource before anything is written, and the sync
//! windows before a sync (at the injected clock's time). A violation is an
//! `InvalidSpecError` condition and nothing is applied or pruned.

use fleetshard_manifest::project::{
    ControlPlane, ProjectCheck, ResourceRef, WindowVerdict, sync_windows_verdict,
};
use fleetshard_manifest::{DEFAULT_PROJECT_NAME, RefusalKind};

use super::problem::Problem;
use super::{AppTarget, GitOpsReconciler};
use crate::compare::ResourceKey;

/// The condition of a failure Argo CD does not classify (its project lookup failing for
/// an app whose namespace may not use the project, among others).
pub const UNKNOWN_ERROR: &str = "UnknownError";

/// The condition type a project violation is shown as.
fn invalid(message: String) -> Problem {
    Problem::permanent(RefusalKind::InvalidSpec.condition_type(), message)
}

impl GitOpsReconciler {
    fn project_check<'a>(&'a self, target: &'a AppTarget) -> ProjectCheck<'a> {
        let name = Some(target.app.project.as_str())
            .filter(|p| !p.is_empty())
            .unwrap_or(DEFAULT_PROJECT_NAME);
        ProjectCheck {
            name,
            project: target.project.as_deref(),
            control_plane: ControlPlane::new(
                &self.config.control_plane_namespace,
                &self.config.fleetshard_namespaces,
                self.clusters.is_control_plane(&target.cluster),
            ),
            cluster_server: &target.cluster.server,
            cluster_name: &target.cluster_name,
        }
    }

    /// The app-level rules: the project exists, the app's namespace may use it, its
    /// repository and destination are permitted. An app whose namespace may not use its
    /// project shows an `UnknownError`, as Argo CD's (its project lookup fails then).
    pub(super) fn check_project(&self, target: &AppTarget) -> Result<(), Problem> {
        let app = &target.app;
        let dest_ns = app.destination.namespace.as_deref().unwrap_or_default();
        let check = self.project_check(target);
        if let Err(v) = check.check_app_namespace(&app.namespace, &app.name) {
            return Err(Problem::permanent(UNKNOWN_ERROR, v.0));
        }
        check
            .check_app(
                &app.namespace,
                &app.name,
                &target.spec.source.repo_url,
                dest_ns,
            )
            .map_err(|v| invalid(v.0))
    }

    /// The resource rules for one resource the app would write or prune.
    pub(super) fn check_resource(
        &self,
        target: &AppTarget,
        key: &ResourceKey,
    ) -> Result<(), Problem> {
        let r = ResourceRef {
            group: &key.group,
            kind: &key.kind,
            namespace: &key.namespace,
            name: &key.name,
        };
        self.project_check(target)
            .check_resource(&r)
            .map_err(|v| invalid(v.0))
    }

    /// Whether the project's sync windows let a sync (`manual`: asked for by hand) run
    /// now, by the reconciler's clock. A clock that cannot be read blocks.
    pub(super) fn window_verdict(&self, target: &AppTarget, manual: bool) -> WindowVerdict {
        let Some(project) = target.project.as_deref() else {
            return WindowVerdict::Blocked("the app's project does not exist".to_owned());
        };
        if project.sync_windows.is_empty() {
            return WindowVerdict::Allowed;
        }
        let now = self.clock.now_rfc3339();
        let Ok(now) = now.parse::<jiff::Timestamp>() else {
            return WindowVerdict::Blocked(format!(
                "the clock's time {now:?} cannot be read; sync windows cannot be evaluated"
            ));
        };
        let app = &target.app;
        let selector = (
            app.name.as_str(),
            app.destination.namespace.as_deref().unwrap_or_default(),
            target.cluster.server.as_str(),
            target.cluster_name.as_str(),
        );
        sync_windows_verdict(&project.sync_windows, selector, manual, now)
    }
}
