//! Rendering an app's source for a refresh: the refusals that stop it first, then what the
//! renderer is given — the repository's access, the destination's versions when the
//! renderer sends them, the project's source repositories and permitted Helm repositories —
//! and the refresh asked for. A multi-source app (only with a repo-server) renders each
//! source knowing the others, and its objects are the union of theirs.

use std::sync::Arc;

use super::problem::Problem;
use super::{AppTarget, GitOpsReconciler};
use crate::source::{
    Manifests, MultiSource, Refresh, RenderRequest, Rendered, RepoAccess, SourceType,
    permitted_helm_repositories,
};
use fleetshard_controller::AppKey;
use fleetshard_manifest::{AppSource, Refusal, RefusalKind};

/// An app's rendered sources: one [`Rendered`] holding every object (its commit the
/// sources' revisions joined with `,` for a multi-source app), and for a multi-source app
/// each source's revision and type in order (`status.sync.revisions`, `sourceTypes`).
pub(super) struct RenderedApp {
    pub(super) rendered: Rendered,
    pub(super) sources: Vec<(String, SourceType)>,
    /// What the app's status warns of: credential templates that matched a source's
    /// `repoURL` beyond a path boundary ([`RepoAccess::loose_template_warning`]).
    pub(super) warnings: Vec<String>,
}

impl GitOpsReconciler {
    /// The app's refusals of `kind` this reconciler holds to. A repo-server renders every
    /// source field it knows and refuses by name those it does not: a source's fields,
    /// and a multi-source app's sources, are its to judge. Used by refreshes and by
    /// requested syncs alike.
    pub(super) fn refusals<'a>(
        &self,
        target: &'a AppTarget,
        kind: RefusalKind,
    ) -> impl Iterator<Item = &'a Refusal> + 'a {
        let renders_source = self.renderer.renders_every_source_field();
        target
            .spec
            .refusals_of(kind)
            .filter(move |r| !(renders_source && is_source_field(&r.field)))
    }

    /// The app's refused spec fields, as an `InvalidSpecError`.
    pub(super) fn check_refusals(&self, key: &AppKey, target: &AppTarget) -> Result<(), Problem> {
        let refused: Vec<String> = self
            .refusals(target, RefusalKind::InvalidSpec)
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

    /// Renders the app's source, or each of its sources, for destination namespace
    /// `dest_ns` as instance `app_name`, with or without caches (`refresh`).
    pub(super) async fn render_source(
        &self,
        target: &AppTarget,
        dest_ns: &str,
        app_name: &str,
        refresh: Refresh,
    ) -> Result<RenderedApp, Problem> {
        let app = &target.app;
        let renders_source = self.renderer.renders_every_source_field();
        // The destination's versions, for a renderer that sends them (before rendering:
        // Helm charts branch on them).
        let served = if self.renderer.wants_destination_versions() {
            let conn = self.clusters.start(&target.cluster).await?;
            Some(conn.served_versions().await?)
        } else {
            None
        };
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
        let matching = self.config.template_match;
        let access = |s: &AppSource| {
            RepoAccess::resolve(&target.repositories, &s.repo_url, &app.project, matching)
        };
        let sources = &target.spec.sources;
        let accesses: Vec<RepoAccess> = sources.iter().map(access).collect();
        let main_access = access(&target.spec.source);
        let warnings: Vec<String> = if sources.is_empty() {
            main_access
                .loose_template_warning(&target.spec.source.repo_url)
                .into_iter()
                .collect()
        } else {
            sources
                .iter()
                .zip(&accesses)
                .filter_map(|(s, a)| a.loose_template_warning(&s.repo_url))
                .collect()
        };
        let single = RenderRequest {
            source: &target.spec.source,
            access: &main_access,
            namespace: dest_ns,
            app_name,
            project: &app.project,
            project_source_repos: &project_source_repos,
            helm_repositories: &helm_repositories,
            helm_credentials: &helm_credentials,
            kube_version: served.as_ref().map(|s| s.git_version.as_str()),
            api_versions: served.as_ref().map_or(&[], |s| s.api_versions.as_slice()),
            refresh,
            multi: None,
            argocd_cm: &target.argocd_cm,
            manifest_generate_paths: target.spec.manifest_generate_paths.as_deref(),
        };
        if sources.is_empty() {
            let rendered = self.renderer.render(single).await?;
            return Ok(RenderedApp {
                rendered,
                sources: Vec::new(),
                warnings,
            });
        }
        let mut parts = Vec::with_capacity(sources.len());
        for (index, source) in sources.iter().enumerate() {
            let multi = MultiSource {
                index,
                sources,
                accesses: &accesses,
            };
            let request = RenderRequest {
                source,
                access: &accesses[index],
                multi: Some(multi),
                ..single
            };
            parts.push(self.renderer.render(request).await?);
        }
        let mut app = merge(parts);
        app.warnings = warnings;
        Ok(app)
    }
}

/// One app of the sources' renders: every object, in the sources' order (an object
/// rendered by two sources is one of the app's repeated resources: the last wins, with a
/// `RepeatedResourceWarning`, as Argo CD), the revisions joined.
fn merge(parts: Vec<Rendered>) -> RenderedApp {
    let revisions: Vec<(String, SourceType)> = parts
        .iter()
        .map(|p| (p.manifests.commit.clone(), p.source_type))
        .collect();
    let commit = revisions
        .iter()
        .map(|(r, _)| r.as_str())
        .collect::<Vec<_>>()
        .join(",");
    let objects: Vec<_> = parts
        .iter()
        .flat_map(|p| p.manifests.objects.iter().cloned())
        .collect();
    RenderedApp {
        rendered: Rendered {
            source_type: parts[0].source_type,
            manifests: Arc::new(Manifests { commit, objects }),
        },
        sources: revisions,
        warnings: Vec::new(),
    }
}

/// Whether a refused field is one a repo-server judges: a source's (`spec.source.…`,
/// `spec.sources[i].…`) or a multi-source app's `spec.sources`.
fn is_source_field(field: &str) -> bool {
    field.starts_with("spec.source.") || field.starts_with("spec.sources")
}
