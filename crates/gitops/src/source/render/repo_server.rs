//! [`RepoServerRenderer`]: sources rendered by Argo CD's repo-server over gRPC
//! (`repository.RepoServerService/GenerateManifest`), as Argo CD's own controller asks it.
//!
//! The request is assembled by [`fleetshard_reposerver::build_request`] from the app's
//! source as the Application spells it (every field the repo-server knows is sent; a field
//! it does not know is refused by name), the repository with the credentials resolved from
//! repository Secrets and templates ([`RepoAccess`]), the instance name, the destination
//! namespace, the destination's Kubernetes version and API versions (from discovery), the
//! project's name and `sourceRepos`, and `argocd-cm`'s settings ([`RenderSettings`], read
//! from the request's [`RenderRequest::argocd_cm`] each time).
//! Objects come back already stamped as the app's (argocd-cm's tracking); they are checked
//! as files read from Git are (each a Kubernetes object with a name, no object twice).
//! `noRevisionCache` goes with a refresh annotation and the first comparison after the
//! app's source changed, `noCache` with a hard refresh ([`Refresh`]).
//!
//! Every failure — a repo-server unreachable, timing out, or answering an error — is a
//! [`SourceError::RepoServer`], which the reconciler shows as a `ComparisonError` and
//! retries with backoff; nothing is applied or pruned on a failed render. Renders are not
//! cached here: the repo-server keeps its own caches (in Argo CD's Redis), and a hard
//! refresh sends `noCache`.

use fleetshard_manifest::AppSource;
use fleetshard_reposerver::{
    ClusterVersions, ManifestInputs, ProjectInput, RenderSettings, RepoCredsInput,
    RepoServerClient, RepositoryInput, build_request, normalize_kube_version, ref_sources,
};
use futures::future::BoxFuture;
use serde_json::Value;

use super::{Render, RenderRequest, Rendered, SourceType};
use crate::source::RepoAccess;
use crate::source::cache::{Manifests, Refresh};
use crate::source::error::SourceError;
use crate::source::parse::parse_documents;

/// Where an object rendered by the repo-server is said to come from.
const LOCATION: &str = "repo-server output";

/// Renders through Argo CD's repo-server.
pub struct RepoServerRenderer {
    client: RepoServerClient,
}

impl std::fmt::Debug for RepoServerRenderer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RepoServerRenderer")
            .field("addr", &self.client.addr())
            .finish_non_exhaustive()
    }
}

impl RepoServerRenderer {
    /// A renderer asking the repo-server `client` reaches. `argocd-cm`'s settings come
    /// with each request ([`RenderRequest::argocd_cm`]): they change without a restart.
    pub fn new(client: RepoServerClient) -> Self {
        RepoServerRenderer { client }
    }

    async fn render_source(&self, request: RenderRequest<'_>) -> Result<Rendered, SourceError> {
        let source = request.source;
        let failed = |message: String| SourceError::RepoServer {
            repo: source.repo_url.clone(),
            revision: source.target_revision.clone(),
            addr: self.client.addr().to_owned(),
            message,
        };
        request.access.check(&source.repo_url)?;
        let inputs = self.inputs(&request).map_err(failed)?;
        let message = build_request(&inputs).map_err(|e| failed(e.to_string()))?;
        let answer = self
            .client
            .generate_manifest(message)
            .await
            .map_err(|e| failed(e.to_string()))?;
        let source_type = match answer.source_type.as_str() {
            "Helm" => SourceType::Helm,
            "Kustomize" => SourceType::Kustomize,
            "Plugin" => SourceType::Plugin,
            "Directory" | "" => SourceType::Directory,
            other => return Err(failed(format!("answered an unknown sourceType {other:?}"))),
        };
        let docs = answer.manifests.into_iter().map(Value::Object).collect();
        let objects = parse_documents(LOCATION, docs).map_err(|e| SourceError::Manifest {
            repo: source.repo_url.clone(),
            revision: source.target_revision.clone(),
            commit: answer.revision.clone(),
            error: Box::new(e),
        })?;
        Ok(Rendered {
            source_type,
            manifests: std::sync::Arc::new(Manifests {
                commit: answer.revision,
                objects,
            }),
        })
    }

    fn inputs(&self, request: &RenderRequest<'_>) -> Result<ManifestInputs, String> {
        let source = request.source;
        let mut inputs = ManifestInputs::new(
            raw_or_typed(source),
            repository(&source.repo_url, request.access),
            revision(source),
            request.app_name,
        );
        inputs.no_cache = request.refresh == Refresh::Hard;
        // Not for a new owner's first comparison (`ResolvedSince`): the repo-server's
        // resolutions are shared by every replica, its predecessor's included.
        inputs.no_revision_cache = matches!(request.refresh, Refresh::Resolve | Refresh::Hard);
        inputs.manifest_generate_paths = request
            .manifest_generate_paths
            .unwrap_or_default()
            .to_owned();
        inputs.namespace = request.namespace.to_owned();
        inputs.cluster = match request.kube_version {
            Some(v) => Some(ClusterVersions {
                kube_version: normalize_kube_version(v).map_err(|e| e.to_string())?,
                api_versions: request.api_versions.to_vec(),
            }),
            None => None,
        };
        inputs.settings = RenderSettings::from_argocd_cm(request.argocd_cm)
            .map_err(|e| format!("argocd-cm: {e}"))?;
        if let Some(m) = request.multi {
            inputs.source_path = format!("spec.sources[{}]", m.index);
            inputs.has_multiple_sources = true;
            let raws: Vec<Value> = m.sources.iter().map(raw_or_typed).collect();
            let anonymous = RepoAccess::anonymous();
            inputs.ref_sources = ref_sources(&raws, &[], |url| {
                let access = m
                    .sources
                    .iter()
                    .position(|s| s.repo_url == url)
                    .map_or(&anonymous, |i| &m.accesses[i]);
                repository(url, access)
            })
            .map_err(|e| e.to_string())?;
        }
        inputs.helm_repos = request
            .helm_repositories
            .iter()
            .map(|s| RepositoryInput {
                repo_type: s.repo_type.clone(),
                name: s.name.clone(),
                project: s.project.clone(),
                credentials: s.credentials.clone(),
                insecure: s.insecure,
                force_http_basic_auth: s.force_http_basic_auth,
                proxy: s.proxy.clone(),
                no_proxy: s.no_proxy.clone(),
                ..RepositoryInput::anonymous(&s.url)
            })
            .collect();
        inputs.helm_repo_creds = request
            .helm_credentials
            .iter()
            .map(|s| RepoCredsInput {
                url: s.url.clone(),
                repo_type: s.repo_type.clone(),
                credentials: s.credentials.clone(),
                enable_oci: false,
                force_http_basic_auth: s.force_http_basic_auth,
                proxy: s.proxy.clone(),
                no_proxy: s.no_proxy.clone(),
            })
            .collect();
        inputs.project = ProjectInput {
            name: request.project.to_owned(),
            source_repos: request.project_source_repos.to_vec(),
        };
        Ok(inputs)
    }
}

impl Render for RepoServerRenderer {
    fn render<'a>(
        &'a self,
        request: RenderRequest<'a>,
    ) -> BoxFuture<'a, Result<Rendered, SourceError>> {
        Box::pin(self.render_source(request))
    }

    fn renders_every_source_field(&self) -> bool {
        true
    }

    fn wants_destination_versions(&self) -> bool {
        true
    }
}

/// The source as the Application spells it; for a source built in code (a fleet file),
/// the same fields spelled from the typed ones.
fn raw_or_typed(source: &AppSource) -> Value {
    if source.raw.is_object() {
        source.raw.clone()
    } else {
        source.clone().with_typed_raw().raw
    }
}

/// The revision asked for: `targetRevision` as the Application writes it — empty when it
/// is empty or absent, as Argo CD's controller sends it (the repo-server reads that as
/// `HEAD`) —, or the revision a sync asked for.
fn revision(source: &AppSource) -> &str {
    let written = source.raw.get("targetRevision").and_then(Value::as_str);
    let defaulted = source.target_revision == fleetshard_manifest::DEFAULT_REVISION
        && written.is_none_or(str::is_empty)
        && source.raw.is_object();
    if defaulted || source.target_revision.is_empty() {
        ""
    } else {
        &source.target_revision
    }
}

/// The repository message's inputs from the resolved access.
fn repository(url: &str, access: &RepoAccess) -> RepositoryInput {
    RepositoryInput {
        repo_type: access.repo_type.clone(),
        name: access.name.clone(),
        project: access.project.clone(),
        inherited_creds: access.inherited_creds,
        credentials: access.credentials.clone(),
        insecure: access.insecure,
        force_http_basic_auth: access.force_http_basic_auth,
        proxy: access.proxy.clone(),
        no_proxy: access.no_proxy.clone(),
        ..RepositoryInput::anonymous(url)
    }
}
