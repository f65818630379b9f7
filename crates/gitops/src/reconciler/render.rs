//! Rendering an app's source for a refresh: the refusals that stop it first, then what the
//! renderer is given — the repository's access, the destination's versions when the
//! renderer sends them, the project's source repositories and permitted Helm repositories —
//! and the refresh asked for.

use super::problem::Problem;
use super::{AppTarget, GitOpsReconciler};
use crate::source::{Refresh, RenderRequest, Rendered, RepoAccess, permitted_helm_repositories};
use fleetshard_controller::AppKey;
use fleetshard_manifest::{RefreshRequest, RefusalKind};

impl GitOpsReconciler {
    /// The app's refused fields, as an `InvalidSpecError`. A repo-server renders every
    /// source field it knows and refuses by name those it does not: a single source's
    /// fields are its to judge.
    pub(super) fn check_refusals(&self, key: &AppKey, target: &AppTarget) -> Result<(), Problem> {
        let renders_source = self.renderer.renders_every_source_field();
        let refused: Vec<String> = target
            .spec
            .refusals_of(RefusalKind::InvalidSpec)
            .filter(|r| !(renders_source && is_single_source_field(&r.field)))
            .map(ToString::to_string)
            .collect();
        if refused.is_empty() {
            return Ok(());
        }
        Err(Problem::permanent(
            RefusalKind::InvalidSpec.condition_type(),
            format!("application {key} is not synced: {}", refused.join("; ")),
        ))
    }

    /// Renders the app's source for destination namespace `dest_ns` as instance
    /// `app_name`.
    pub(super) async fn render_source(
        &self,
        target: &AppTarget,
        dest_ns: &str,
        app_name: &str,
    ) -> Result<Rendered, Problem> {
        let source = &target.spec.source;
        let app = &target.app;
        let renders_source = self.renderer.renders_every_source_field();
        let access = RepoAccess::resolve(&target.repositories, &source.repo_url, &app.project);
        // The destination's versions, for a renderer that sends them (before rendering:
        // Helm charts branch on them).
        let served = if self.renderer.wants_destination_versions() {
            let conn = self.clusters.start(&target.cluster).await?;
            Some(conn.served_versions().await?)
        } else {
            None
        };
        let api_versions = served
            .as_ref()
            .map(|s| {
                fleetshard_reposerver::api_version_strings(
                    s.kinds
                        .iter()
                        .map(|(g, v, k)| (g.as_str(), v.as_str(), k.as_str())),
                )
            })
            .unwrap_or_default();
        let project_source_repos: Vec<String> = target
            .project
            .as_ref()
            .map(|p| {
                p.source_repos
                    .iter()
                    .map(|r| r.as_str().to_owned())
                    .collect()
            })
            .unwrap_or_default();
        let (helm_repositories, helm_credentials) = match &target.project {
            Some(p) if renders_source => permitted_helm_repositories(&target.repositories, p),
            _ => Default::default(),
        };
        let rendered = self
            .renderer
            .render(RenderRequest {
                source,
                access: &access,
                namespace: dest_ns,
                app_name,
                project: &app.project,
                project_source_repos: &project_source_repos,
                helm_repositories: &helm_repositories,
                helm_credentials: &helm_credentials,
                kube_version: served.as_ref().map(|s| s.git_version.as_str()),
                api_versions: &api_versions,
                refresh: match target.spec.refresh {
                    Some(RefreshRequest::Hard) => Refresh::Hard,
                    _ => Refresh::Normal,
                },
            })
            .await?;
        Ok(rendered)
    }
}

/// Whether a refused field is one of the app's single source (`spec.source.…`, or
/// `spec.sources[0].…` of a one-element list); a second source stays refused.
fn is_single_source_field(field: &str) -> bool {
    field.starts_with("spec.source.") || field.starts_with("spec.sources[0].")
}
