//! The `GenerateManifest` request, assembled from typed inputs as Argo CD's controller
//! assembles it (`controller/state.go`, `GetRepoObjs`): a pure function, [`build_request`].
//!
//! Where each field comes from (the caller resolves the inputs; this module only maps):
//!
//! | # | field | from |
//! |---|---|---|
//! | 1 | `repo` | [`ManifestInputs::repository`]: the source's `repoURL` with the credentials of the repository Secret or template that matches it for the app's project, the Secret's `type`, `name` and `project`, and `inheritedCreds` when a template gave the credentials |
//! | 2 | `revision` | [`ManifestInputs::revision`]: the source's `targetRevision` as written (empty when absent or empty, as Argo CD sends it), or the revision being synced |
//! | 3 | `noCache` | [`ManifestInputs::no_cache`]: a hard refresh (`argocd.argoproj.io/refresh: hard`) |
//! | 4 | `appLabelKey` | `argocd-cm` `application.instanceLabelKey` ([`DEFAULT_APP_LABEL_KEY`](crate::DEFAULT_APP_LABEL_KEY)) |
//! | 5 | `appName` | the instance name: `name`, or `namespace_name` outside the control-plane namespace |
//! | 8 | `namespace` | `spec.destination.namespace` |
//! | 10 | `applicationSource` | the source JSON, field by field ([`crate::source`]) |
//! | 11 | `repos` | the Helm (and, for an OCI source, OCI) repositories the project permits |
//! | 13 | `kustomizeOptions` | `argocd-cm` ([`RenderSettings`]) |
//! | 14, 15 | `kubeVersion`, `apiVersions` | the destination's discovery ([`ClusterVersions`]); not sent without it |
//! | 17 | `helmRepoCreds` | the Helm (and OCI) credential templates the project permits |
//! | 18 | `noRevisionCache` | [`ManifestInputs::no_revision_cache`]: a refresh annotation (normal or hard), or the first comparison after the app's source changed (Argo CD's `CompareWithLatestForceResolve`) |
//! | 19 | `trackingMethod` | `argocd-cm` `application.resourceTrackingMethod` ([`TrackingMethod`]) |
//! | 20 | `enabledSourceTypes` | `argocd-cm` |
//! | 21 | `helmOptions` | `argocd-cm` `helm.valuesFileSchemes` |
//! | 22 | `hasMultipleSources` | `spec.sources` is used |
//! | 23 | `refSources` | every source with a `ref`, as `$ref` ([`ref_sources`]) |
//! | 24, 25 | `projectSourceRepos`, `projectName` | the AppProject's `sourceRepos` and name |
//! | 26 | `annotationManifestGeneratePaths` | the app's `argocd.argoproj.io/manifest-generate-paths` |
//! | 27 | `installationID` | `argocd-cm` `installationID` |
//!
//! Not sent: `plugins` (12, gone from Argo CD), `verifySignature` (16) and
//! `sourceIntegrity` (28) — fleetshard does not verify signatures and says so elsewhere.

use std::fmt;

use fleetshard_manifest::RepoCredentials;
use serde_json::Value;

use crate::cluster::ClusterVersions;
use crate::error::RequestError;
use crate::json::Obj;
use crate::proto::{ManifestRequest, RefTarget, RepoCreds, Repository};
use crate::settings::RenderSettings;
use crate::source::application_source;

/// A repository as the request carries it, credentials resolved. `Debug` never shows a
/// credential or the proxy (whose URL may hold one).
#[derive(Clone, PartialEq, Eq, Default)]
pub struct RepositoryInput {
    /// `repo`: the URL exactly as the source names it.
    pub repo: String,
    /// `type`: `git`, `helm` or `oci` (the Secret's `type`; empty is Git).
    pub repo_type: String,
    /// `name`: the Secret's `name`.
    pub name: String,
    /// `project`: the Secret's `project`.
    pub project: String,
    /// `username`, `password`, `bearerToken`, `sshPrivateKey`, `tlsClientCertData`,
    /// `tlsClientCertKey` of the Secret or the template it inherits from.
    pub credentials: RepoCredentials,
    /// `inheritedCreds`: the credentials come from a template.
    pub inherited_creds: bool,
    /// `insecure`.
    pub insecure: bool,
    /// `insecureIgnoreHostKey` (deprecated in Argo CD, still sent).
    pub insecure_ignore_host_key: bool,
    /// `enableLfs`.
    pub enable_lfs: bool,
    /// `enableOCI`: a Helm repository that is an OCI registry.
    pub enable_oci: bool,
    /// `forceHttpBasicAuth`.
    pub force_http_basic_auth: bool,
    /// `proxy`.
    pub proxy: Option<String>,
    /// `noProxy`.
    pub no_proxy: Option<String>,
}

impl fmt::Debug for RepositoryInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RepositoryInput")
            .field("repo", &self.repo)
            .field("repo_type", &self.repo_type)
            .field("name", &self.name)
            .field("project", &self.project)
            .field("credentials", &self.credentials)
            .field("inherited_creds", &self.inherited_creds)
            .field("insecure", &self.insecure)
            .field("insecure_ignore_host_key", &self.insecure_ignore_host_key)
            .field("enable_lfs", &self.enable_lfs)
            .field("enable_oci", &self.enable_oci)
            .field("force_http_basic_auth", &self.force_http_basic_auth)
            .field("proxy", &self.proxy.as_ref().map(|_| "<set>"))
            .field("no_proxy", &self.no_proxy)
            .finish()
    }
}

impl RepositoryInput {
    /// An anonymous repository at `url`.
    pub fn anonymous(url: &str) -> Self {
        RepositoryInput {
            repo: url.to_owned(),
            ..RepositoryInput::default()
        }
    }

    /// The message.
    pub fn to_proto(&self) -> Repository {
        let c = &self.credentials;
        Repository {
            repo: self.repo.clone(),
            username: c.username.clone().unwrap_or_default(),
            password: c.password.clone().unwrap_or_default(),
            ssh_private_key: c.ssh_private_key.clone().unwrap_or_default(),
            insecure_ignore_host_key: self.insecure_ignore_host_key,
            insecure: self.insecure,
            enable_lfs: self.enable_lfs,
            tls_client_cert_data: c.tls_client_cert_data.clone().unwrap_or_default(),
            tls_client_cert_key: c.tls_client_cert_key.clone().unwrap_or_default(),
            r#type: self.repo_type.clone(),
            name: self.name.clone(),
            inherited_creds: self.inherited_creds,
            enable_oci: self.enable_oci,
            proxy: self.proxy.clone().unwrap_or_default(),
            project: self.project.clone(),
            force_http_basic_auth: self.force_http_basic_auth,
            no_proxy: self.no_proxy.clone().unwrap_or_default(),
            bearer_token: c.bearer_token.clone().unwrap_or_default(),
            ..Repository::default()
        }
    }
}

/// A credential template for Helm or OCI repositories (`helmRepoCreds`). `Debug` never
/// shows a credential or the proxy.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct RepoCredsInput {
    /// `url`: the prefix it applies to.
    pub url: String,
    /// `type`: `helm` or `oci`.
    pub repo_type: String,
    /// The template's credentials.
    pub credentials: RepoCredentials,
    /// `enableOCI`.
    pub enable_oci: bool,
    /// `forceHttpBasicAuth`.
    pub force_http_basic_auth: bool,
    /// `proxy`.
    pub proxy: Option<String>,
    /// `noProxy`.
    pub no_proxy: Option<String>,
}

impl fmt::Debug for RepoCredsInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RepoCredsInput")
            .field("url", &self.url)
            .field("repo_type", &self.repo_type)
            .field("credentials", &self.credentials)
            .field("enable_oci", &self.enable_oci)
            .field("force_http_basic_auth", &self.force_http_basic_auth)
            .field("proxy", &self.proxy.as_ref().map(|_| "<set>"))
            .field("no_proxy", &self.no_proxy)
            .finish()
    }
}

impl RepoCredsInput {
    /// The message.
    pub fn to_proto(&self) -> RepoCreds {
        let c = &self.credentials;
        RepoCreds {
            url: self.url.clone(),
            username: c.username.clone().unwrap_or_default(),
            password: c.password.clone().unwrap_or_default(),
            ssh_private_key: c.ssh_private_key.clone().unwrap_or_default(),
            tls_client_cert_data: c.tls_client_cert_data.clone().unwrap_or_default(),
            tls_client_cert_key: c.tls_client_cert_key.clone().unwrap_or_default(),
            enable_oci: self.enable_oci,
            r#type: self.repo_type.clone(),
            proxy: self.proxy.clone().unwrap_or_default(),
            force_http_basic_auth: self.force_http_basic_auth,
            no_proxy: self.no_proxy.clone().unwrap_or_default(),
            bearer_token: c.bearer_token.clone().unwrap_or_default(),
            ..RepoCreds::default()
        }
    }
}

/// One source of a multi-source app that others refer to as `$ref`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefSource {
    /// `$` and the source's `ref`.
    pub key: String,
    /// Its repository, credentials resolved as for any source.
    pub repository: RepositoryInput,
    /// Its revision: the revision being synced for it, else its `targetRevision`.
    pub target_revision: String,
    /// Its `chart`.
    pub chart: String,
}

/// The `refSources` of an app's `spec.sources` (Argo CD's `GetRefSources`): every source
/// with a `ref`, keyed `$ref`; `revisions[i]`, when given and not empty, replaces source
/// `i`'s `targetRevision`. A `ref` with other characters than letters, digits, `_` and
/// `-`, or used twice, is refused as Argo CD refuses it. `repository` resolves a URL's
/// credentials.
pub fn ref_sources(
    sources: &[Value],
    revisions: &[String],
    mut repository: impl FnMut(&str) -> RepositoryInput,
) -> Result<Vec<RefSource>, RequestError> {
    let mut out: Vec<RefSource> = Vec::new();
    for (i, source) in sources.iter().enumerate() {
        let path = format!("spec.sources[{i}]");
        let mut o = Obj::new(path.clone(), source)?;
        let r = o.string("ref")?;
        if r.is_empty() {
            continue;
        }
        if !r
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(RequestError::Invalid {
                path: format!("{path}.ref"),
                message: format!(
                    "{r:?} may contain only letters, digits, '_' and '-' (as in Argo CD)"
                ),
            });
        }
        let key = format!("${r}");
        if out.iter().any(|s| s.key == key) {
            return Err(RequestError::Invalid {
                path: format!("{path}.ref"),
                message: format!("{r:?} is the ref of another source too"),
            });
        }
        let url = o.string("repoURL")?;
        let target_revision = match revisions.get(i) {
            Some(rev) if !rev.is_empty() => rev.clone(),
            _ => o.string("targetRevision")?,
        };
        out.push(RefSource {
            key,
            repository: repository(&url),
            target_revision,
            chart: o.string("chart")?,
        });
    }
    Ok(out)
}

/// The AppProject's part (`projectName`, `projectSourceRepos`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProjectInput {
    /// Its name.
    pub name: String,
    /// Its `spec.sourceRepos`.
    pub source_repos: Vec<String>,
}

/// Everything one `GenerateManifest` request is made of.
#[derive(Debug, Clone, PartialEq)]
pub struct ManifestInputs {
    /// The source: `spec.source`, or one element of `spec.sources`, as the Application's
    /// JSON has it.
    pub source: Value,
    /// Where the source is, for messages: `spec.source` or `spec.sources[1]`.
    pub source_path: String,
    /// The source's repository with its credentials.
    pub repository: RepositoryInput,
    /// The revision to render.
    pub revision: String,
    /// A hard refresh.
    pub no_cache: bool,
    /// Skip the revision cache too.
    pub no_revision_cache: bool,
    /// The instance name.
    pub app_name: String,
    /// `spec.destination.namespace`.
    pub namespace: String,
    /// The destination's versions; `None`: not sent (as the controller without runtime
    /// state).
    pub cluster: Option<ClusterVersions>,
    /// `argocd-cm`'s settings (the tracking method among them).
    pub settings: RenderSettings,
    /// Permitted Helm (and for OCI sources OCI) repositories, credentials resolved.
    pub helm_repos: Vec<RepositoryInput>,
    /// Permitted Helm (and OCI) credential templates.
    pub helm_repo_creds: Vec<RepoCredsInput>,
    /// The app uses `spec.sources`.
    pub has_multiple_sources: bool,
    /// The app's ref sources ([`ref_sources`]).
    pub ref_sources: Vec<RefSource>,
    /// The app's project.
    pub project: ProjectInput,
    /// The `argocd.argoproj.io/manifest-generate-paths` annotation (empty: none).
    pub manifest_generate_paths: String,
}

impl ManifestInputs {
    /// Inputs for `source` of app `app_name` with every other input at Argo CD's default:
    /// the default label key, annotation tracking, default settings, one source, no
    /// cluster versions, no Helm repositories, project `default`.
    pub fn new(source: Value, repository: RepositoryInput, revision: &str, app_name: &str) -> Self {
        ManifestInputs {
            source,
            source_path: "spec.source".to_owned(),
            repository,
            revision: revision.to_owned(),
            no_cache: false,
            no_revision_cache: false,
            app_name: app_name.to_owned(),
            namespace: String::new(),
            cluster: None,
            settings: RenderSettings::default(),
            helm_repos: Vec::new(),
            helm_repo_creds: Vec::new(),
            has_multiple_sources: false,
            ref_sources: Vec::new(),
            project: ProjectInput {
                name: "default".to_owned(),
                source_repos: Vec::new(),
            },
            manifest_generate_paths: String::new(),
        }
    }
}

/// The request for `inputs`, or why the source cannot be sent.
pub fn build_request(inputs: &ManifestInputs) -> Result<ManifestRequest, RequestError> {
    let source = application_source(&inputs.source_path, &inputs.source)?;
    let cluster = inputs.cluster.clone().unwrap_or_default();
    Ok(ManifestRequest {
        repo: Some(inputs.repository.to_proto()),
        revision: inputs.revision.clone(),
        no_cache: inputs.no_cache,
        app_label_key: inputs.settings.tracking.label_key.clone(),
        app_name: inputs.app_name.clone(),
        namespace: inputs.namespace.clone(),
        application_source: Some(source),
        repos: inputs
            .helm_repos
            .iter()
            .map(RepositoryInput::to_proto)
            .collect(),
        kustomize_options: Some(inputs.settings.kustomize_options.clone()),
        kube_version: cluster.kube_version,
        api_versions: cluster.api_versions,
        helm_repo_creds: inputs
            .helm_repo_creds
            .iter()
            .map(RepoCredsInput::to_proto)
            .collect(),
        no_revision_cache: inputs.no_revision_cache,
        tracking_method: inputs.settings.tracking.method.as_str().to_owned(),
        enabled_source_types: inputs.settings.enabled_source_types.clone(),
        helm_options: Some(inputs.settings.helm_options()),
        has_multiple_sources: inputs.has_multiple_sources,
        ref_sources: inputs
            .ref_sources
            .iter()
            .map(|r| {
                let target = RefTarget {
                    repo: Some(r.repository.to_proto()),
                    target_revision: r.target_revision.clone(),
                    chart: r.chart.clone(),
                };
                (r.key.clone(), target)
            })
            .collect(),
        project_source_repos: inputs.project.source_repos.clone(),
        project_name: inputs.project.name.clone(),
        annotation_manifest_generate_paths: inputs.manifest_generate_paths.clone(),
        installation_id: inputs.settings.tracking.installation_id.clone(),
    })
}

/// Every secret value `request` carries (passwords, tokens, keys, client certificates'
/// keys, proxies), for [`crate::redact`].
pub(crate) fn secrets(request: &ManifestRequest) -> Vec<String> {
    let mut out = Vec::new();
    let mut add = |fields: [&String; 7]| {
        out.extend(fields.into_iter().filter(|s| !s.is_empty()).cloned());
    };
    let ref_repos = request.ref_sources.values().filter_map(|t| t.repo.as_ref());
    for r in request.repo.iter().chain(&request.repos).chain(ref_repos) {
        add([
            &r.password,
            &r.ssh_private_key,
            &r.tls_client_cert_key,
            &r.bearer_token,
            &r.github_app_private_key,
            &r.gcp_service_account_key,
            &r.proxy,
        ]);
    }
    for c in &request.helm_repo_creds {
        add([
            &c.password,
            &c.ssh_private_key,
            &c.tls_client_cert_key,
            &c.bearer_token,
            &c.github_app_private_key,
            &c.gcp_service_account_key,
            &c.proxy,
        ]);
    }
    out
}

#[cfg(test)]
mod tests;
