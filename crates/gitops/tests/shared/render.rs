//! Rendering requests the render tests share (the `it` binary and `confined`, which is a
//! binary of its own): an app's source and a render of it as the reconciler asks.

use fleetshard_gitops::source::{
    Refresh, Render, RenderRequest, Rendered, RepoAccess, SourceError, StandaloneRenderer,
};
use fleetshard_manifest::AppSource;
use serde_json::Value;

/// `raw` as the source object of `repo` at `main`, `path` (typed fields from it).
pub(crate) fn source(repo: &str, path: &str, raw: Value) -> AppSource {
    let mut raw = raw;
    raw["repoURL"] = repo.into();
    raw["path"] = path.into();
    raw["targetRevision"] = "main".into();
    let directory = raw.get("directory");
    let text = |f: &str| {
        directory
            .and_then(|d| d.get(f))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    AppSource {
        repo_url: repo.to_owned(),
        target_revision: "main".to_owned(),
        path: path.to_owned(),
        directory: fleetshard_manifest::DirectoryOptions {
            recurse: directory
                .and_then(|d| d.get("recurse"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
            include: text("include"),
            exclude: text("exclude"),
        },
        raw,
    }
}

/// `source` rendered by `r` for app `guestbook` in `team-a`, argocd-cm's `data` holding
/// `argocd_cm`.
pub(crate) async fn render_with(
    r: &StandaloneRenderer,
    source: &AppSource,
    argocd_cm: &[(&str, &str)],
) -> Result<Rendered, SourceError> {
    let argocd_cm = argocd_cm
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    r.render(RenderRequest {
        source,
        access: &RepoAccess::anonymous(),
        namespace: "team-a",
        app_name: "guestbook",
        project: "default",
        project_source_repos: &[],
        helm_repositories: &[],
        helm_credentials: &[],
        kube_version: Some("1.31.0"),
        api_versions: &["apps/v1".to_owned()],
        refresh: Refresh::Normal,
        multi: None,
        argocd_cm: &argocd_cm,
        manifest_generate_paths: None,
    })
    .await
}
