//! Rendering: an application's source → the objects it declares, by source type, as
//! Argo CD's repo-server renders it.
//!
//! [`Render`] is the seam: the reconciler asks it for a [`Rendered`] source and does not
//! know who renders. [`StandaloneRenderer`] renders on this replica:
//!
//! - the source type is detected as Argo CD does ([`SourceType`]: an explicit `kustomize`,
//!   `helm`, `directory` or `plugin` in the source wins, more than one is an error; else
//!   a `kustomization.yaml`, `kustomization.yml` or `Kustomization` file at the top of
//!   `path` is Kustomize, a file whose name ends in `Chart.yaml` is Helm, anything else a
//!   directory);
//! - a directory is read by the [`RepoCache`] (plain YAML/JSON, `directory.recurse`,
//!   `include`/`exclude`), its `.jsonnet` files evaluated in process (`jsonnet`);
//! - Kustomize is built by a `kustomize` executable, else `kubectl kustomize`, found on
//!   [`RenderConfig::path`], in a temporary copy of the commit's tree with the source's
//!   overrides written into the kustomization (`kustomize`);
//! - Helm only through a `helm` executable on [`RenderConfig::path`] (`helm template`);
//!   without one, a condition says what is needed (`helm`);
//! - a plugin needs Argo CD's repo-server: refused with a condition.
//!
//! Every executable runs with a clean environment (`PATH`, and `HOME` in the temporary
//! directory), bounded by [`RenderConfig::timeout`] and [`ReadLimits::max_manifest_bytes`]
//! of output, parsed into at most [`ReadLimits::max_objects`] objects; its trimmed standard error is the condition's message. A failed render is a
//! [`SourceError`]: nothing is applied or pruned for it. Renders of executables are kept
//! per (repository, commit, source, destination) for [`RenderConfig::max_cached`]
//! entries, and discovered source types per (repository, commit, path) (up to 16 times as
//! many, then forgotten at once); a hard refresh renders again.

mod detect;
mod envsubst;
mod helm;
mod jsonnet;
mod jsonnet_child;
mod kustomize;
mod kustomize_reach;
mod memo;
mod process;
mod repo_server;
mod tree;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use fleetshard_manifest::{AppSource, RepoSecret};
use fleetshard_reposerver::RenderSettings;
use fleetshard_sandbox::{Confinement, Launcher};
use futures::future::BoxFuture;

use super::cache::{Manifests, ReadLimits, Refresh, RepoCache, Snapshot};
use super::error::SourceError;
use super::{RepoAccess, repo};

pub use detect::SourceType;
pub(crate) use jsonnet::JsonnetJob;
use jsonnet_child::JsonnetChild;
pub use jsonnet_child::{JSONNET_ENTRY, run_jsonnet_child_if_invoked};
use memo::RenderMemo;
pub use memo::RenderStats;
pub use repo_server::RepoServerRenderer;

/// Argo CD's default timeout of the tools the repo-server runs (`ARGOCD_EXEC_TIMEOUT`).
pub const DEFAULT_RENDER_TIMEOUT: Duration = Duration::from_secs(90);

/// The most memory one Jsonnet evaluation may use by default, in a sandbox
/// ([`RenderSandbox::jsonnet_max_memory`]).
pub const DEFAULT_JSONNET_MAX_MEMORY: u64 = 1 << 30;

/// Renders kept by default by a [`StandaloneRenderer`] (those of executables only:
/// directories are kept by the [`RepoCache`]).
pub const DEFAULT_MAX_CACHED_RENDERS: usize = 1024;

/// What one render is asked for.
#[derive(Debug, Clone, Copy)]
pub struct RenderRequest<'a> {
    /// The application's source (its `raw` object carries the options).
    pub source: &'a AppSource,
    /// The repository's credentials for the application's project.
    pub access: &'a RepoAccess,
    /// The destination namespace (`default` when the app names none): Helm's
    /// `--namespace` unless `helm.namespace`, `$ARGOCD_APP_NAMESPACE`.
    pub namespace: &'a str,
    /// The application's instance name: Helm's release name unless
    /// `helm.releaseName`, `$ARGOCD_APP_NAME`.
    pub app_name: &'a str,
    /// The application's project (`$ARGOCD_APP_PROJECT_NAME`).
    pub project: &'a str,
    /// The project's `sourceRepos` (the repo-server names them when it refuses a Helm
    /// repository).
    pub project_source_repos: &'a [String],
    /// The Helm and OCI repositories the project permits (a chart's dependencies are
    /// fetched from them), with their credentials
    /// ([`permitted_helm_repositories`](crate::source::permitted_helm_repositories)).
    pub helm_repositories: &'a [RepoSecret],
    /// The Helm and OCI credential templates the project permits.
    pub helm_credentials: &'a [RepoSecret],
    /// The destination cluster's Kubernetes version (`1.31.2`), when known: Helm's
    /// `--kube-version` unless `helm.kubeVersion`.
    pub kube_version: Option<&'a str>,
    /// The destination cluster's API versions (`apps/v1`, `apps/v1/Deployment`): Helm's
    /// `--api-versions` unless `helm.apiVersions`.
    pub api_versions: &'a [String],
    /// Whether cached resolutions and renders may be used.
    pub refresh: Refresh,
    /// For a multi-source application: which of its sources this is, among which.
    pub multi: Option<MultiSource<'a>>,
    /// `argocd-cm`'s `data` (empty: Argo CD's defaults): the repo-server is sent its
    /// settings; a standalone Kustomize build takes its `kustomize.buildOptions`.
    pub argocd_cm: &'a BTreeMap<String, String>,
    /// The Application's `argocd.argoproj.io/manifest-generate-paths` (the repo-server is
    /// told them).
    pub manifest_generate_paths: Option<&'a str>,
}

/// A multi-source application's part of a [`RenderRequest`] (`spec.sources`): each source
/// is rendered on its own, knowing the others (the `$ref` sources a Helm source reads
/// value files from).
#[derive(Debug, Clone, Copy)]
pub struct MultiSource<'a> {
    /// Which source is rendered.
    pub index: usize,
    /// Every source, in order.
    pub sources: &'a [AppSource],
    /// Each source's repository access, in the same order.
    pub accesses: &'a [RepoAccess],
}

/// A rendered source.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    /// How it was rendered.
    pub source_type: SourceType,
    /// The commit and the objects.
    pub manifests: Arc<Manifests>,
}

impl Rendered {
    /// The commit the source's `targetRevision` resolved to.
    pub fn revision(&self) -> &str {
        &self.manifests.commit
    }
}

/// Turns an application's source into its objects: the seam between the reconciler
/// and whoever renders (this replica, [`StandaloneRenderer`], or a repo-server client).
pub trait Render: Send + Sync {
    /// Renders `request.source`; every failure names the repository and, once known,
    /// the revision.
    fn render<'a>(
        &'a self,
        request: RenderRequest<'a>,
    ) -> BoxFuture<'a, Result<Rendered, SourceError>>;

    /// Whether this renderer takes every field of a source (Argo CD's repo-server, which
    /// refuses by name what it does not know) rather than only those
    /// [`fleetshard_manifest::implemented`] lists; the reconciler then leaves the source's
    /// fields to it.
    fn renders_every_source_field(&self) -> bool {
        false
    }

    /// Whether [`RenderRequest::kube_version`] and [`RenderRequest::api_versions`] should
    /// be filled (a discovery of the destination before rendering).
    fn wants_destination_versions(&self) -> bool {
        false
    }
}

/// How a [`StandaloneRenderer`] runs its tools.
#[derive(Debug, Clone)]
pub struct RenderConfig {
    /// The directories `kustomize`, `kubectl` and `helm` are looked for in, as `PATH`
    /// (also the tools' own `PATH`); `None`: the replica's `PATH`.
    pub path: Option<OsString>,
    /// The longest one tool may run ([`DEFAULT_RENDER_TIMEOUT`]).
    pub timeout: Duration,
    /// Let a kustomization name remote bases (URLs): `kustomize` would fetch them with
    /// the replica's network and no credentials of the app. Off by default: one tenant's
    /// app could reach what the replica reaches.
    pub allow_remote_bases: bool,
    /// How many renders of executables are kept ([`DEFAULT_MAX_CACHED_RENDERS`]).
    pub max_cached: usize,
    /// Let `kustomize.buildOptions` enable exec and container plugins
    /// (`--enable-exec`, `--enable-alpha-plugins`): a tenant's kustomization could then
    /// run programs as the replica. Off by default: such a build is refused.
    pub allow_exec_plugins: bool,
    /// How tools and Jsonnet are confined; `None`: tools run as plain children and
    /// Jsonnet in process, unbounded in memory and CPU (libraries and tests; the
    /// `fleetshard` binary always has one).
    pub sandbox: Option<RenderSandbox>,
}

/// How a replica confines what it runs for a tenant ([`fleetshard_sandbox`]): every tool
/// in a network of its own (Kustomize keeps the network only with
/// [`RenderConfig::allow_remote_bases`]) and with `hide` hidden, Jsonnet in a child bounded
/// in memory and CPU time ([`RenderConfig::timeout`]), all killed with the replica.
#[derive(Debug, Clone)]
pub struct RenderSandbox {
    /// The replica's executable, run as launcher.
    pub launcher: Launcher,
    /// Paths no tool or Jsonnet evaluation sees: the service account's token, the
    /// replica's credentials and configuration, the repository cache (other tenants'
    /// repositories). One holding the tool or the render's copy stays visible.
    pub hide: Vec<PathBuf>,
    /// The most memory one Jsonnet evaluation may use ([`DEFAULT_JSONNET_MAX_MEMORY`]).
    pub jsonnet_max_memory: u64,
}

impl RenderConfig {
    /// How a tool is confined: `network` (whether it may use the replica's network).
    fn tool_confinement(&self, network: bool) -> Option<(Launcher, Confinement)> {
        let sandbox = self.sandbox.as_ref()?;
        Some((
            sandbox.launcher.clone(),
            self.confinement(sandbox, network, None),
        ))
    }

    /// How Jsonnet is evaluated: in a bounded child with a sandbox, else in process.
    fn jsonnet_child(&self) -> Option<Arc<JsonnetChild>> {
        let sandbox = self.sandbox.as_ref()?;
        Some(Arc::new(JsonnetChild {
            launcher: sandbox.launcher.clone(),
            confinement: self.confinement(sandbox, false, Some(sandbox.jsonnet_max_memory)),
        }))
    }

    /// The sandbox's confinement: its hidden paths, CPU time bounded by
    /// [`RenderConfig::timeout`].
    fn confinement(
        &self,
        sandbox: &RenderSandbox,
        network: bool,
        max_memory: Option<u64>,
    ) -> Confinement {
        Confinement {
            isolate_network: !network,
            hide: sandbox.hide.clone(),
            max_memory,
            max_cpu_seconds: Some(self.timeout.as_secs().max(1)),
        }
    }
}

impl Default for RenderConfig {
    fn default() -> Self {
        RenderConfig {
            path: None,
            timeout: DEFAULT_RENDER_TIMEOUT,
            allow_remote_bases: false,
            max_cached: DEFAULT_MAX_CACHED_RENDERS,
            allow_exec_plugins: false,
            sandbox: None,
        }
    }
}

/// Renders on this replica: directories and Jsonnet in process, Kustomize and Helm with
/// the executables found on [`RenderConfig::path`].
#[derive(Clone)]
pub struct StandaloneRenderer {
    repos: RepoCache,
    config: Arc<RenderConfig>,
    memo: Arc<RenderMemo>,
    jsonnet_child: Option<Arc<JsonnetChild>>,
}

/// Who asked for a render, for the tools and errors (all owned: it crosses into a
/// blocking task).
#[derive(Debug, Clone)]
pub(crate) struct Job {
    pub(crate) repo_url: String,
    pub(crate) revision: String,
    pub(crate) commit: String,
    pub(crate) path: Vec<String>,
    pub(crate) raw: serde_json::Value,
    pub(crate) namespace: String,
    pub(crate) app_name: String,
    pub(crate) project: String,
    pub(crate) kube_version: Option<String>,
    pub(crate) api_versions: Vec<String>,
    pub(crate) limits: ReadLimits,
    /// Extra `kustomize build` options (argocd-cm `kustomize.buildOptions`), split on
    /// white space as Argo CD does.
    pub(crate) kustomize_build_options: String,
}

impl Job {
    /// A [`SourceError::Render`] of this job.
    pub(crate) fn error(&self, source_type: SourceType, message: impl Into<String>) -> SourceError {
        SourceError::Render {
            repo: self.repo_url.clone(),
            revision: self.revision.clone(),
            commit: self.commit.clone(),
            source_type: source_type.as_str(),
            message: format!(
                "{source_type} source at path {:?}: {}",
                self.path.join("/"),
                message.into()
            ),
        }
    }

    /// The objects of a tool's output (`label` names it in messages), at most
    /// [`ReadLimits::max_objects`] of them.
    pub(crate) fn parse_output(
        &self,
        label: &str,
        out: &[u8],
    ) -> Result<Vec<super::parse::Manifest>, SourceError> {
        let (format, max) = (super::parse::FileFormat::Yaml, self.limits.max_objects);
        super::parse::parse_file(label, format, out, max).map_err(|error| {
            SourceError::of_manifest(&self.repo_url, &self.revision, &self.commit, error)
        })
    }

    /// Argo CD's build environment of the app (`ARGOCD_APP_*`, `KUBE_*`), for `$VAR`
    /// substitution in images, labels and Jsonnet variables.
    pub(crate) fn env(&self, source: &AppSource) -> envsubst::Env {
        envsubst::Env::of_app(self, source)
    }
}

impl StandaloneRenderer {
    /// A renderer reading repositories through `repos`.
    pub fn new(repos: RepoCache, config: RenderConfig) -> Self {
        StandaloneRenderer {
            repos,
            memo: Arc::new(RenderMemo::new(config.max_cached)),
            jsonnet_child: config.jsonnet_child(),
            config: Arc::new(config),
        }
    }

    /// Counters of the renders of executables so far: requests, answers from the cache
    /// (or from a render of the same key in flight), executables run.
    pub fn stats(&self) -> RenderStats {
        self.memo.stats()
    }

    async fn render_source(&self, request: RenderRequest<'_>) -> Result<Rendered, SourceError> {
        let source = request.source;
        if request.multi.is_some() {
            return Err(SourceError::Render {
                repo: source.repo_url.clone(),
                revision: source.target_revision.clone(),
                commit: String::new(),
                source_type: "Directory",
                message: "multi-source applications are rendered only by Argo CD's \
                          repo-server (--repo-server)"
                    .to_owned(),
            });
        }
        let settings =
            RenderSettings::from_argocd_cm(request.argocd_cm).map_err(|e| SourceError::Render {
                repo: source.repo_url.clone(),
                revision: source.target_revision.clone(),
                commit: String::new(),
                source_type: "Directory",
                message: format!("argocd-cm: {e}"),
            })?;
        let explicit = detect::explicit(&source.raw).map_err(|message| SourceError::Render {
            repo: source.repo_url.clone(),
            revision: source.target_revision.clone(),
            commit: String::new(),
            source_type: "Directory",
            message: format!("path {:?}: {message}", source.path),
        })?;
        let snapshot = self
            .repos
            .snapshot(
                &source.repo_url,
                request.access,
                &source.target_revision,
                request.refresh,
            )
            .await?;
        let job = Job {
            repo_url: source.repo_url.clone(),
            revision: source.target_revision.clone(),
            commit: snapshot.commit.to_string(),
            path: repo::clean_path(&source.repo_url, &source.path)?,
            raw: source.raw.clone(),
            namespace: request.namespace.to_owned(),
            app_name: request.app_name.to_owned(),
            project: request.project.to_owned(),
            kube_version: request.kube_version.map(str::to_owned),
            api_versions: request.api_versions.to_vec(),
            limits: self.repos.limits(),
            kustomize_build_options: settings.kustomize_options.build_options.clone(),
        };
        let source_type = match explicit {
            Some(t) => t,
            None => self.discover(&snapshot, &job).await?,
        };
        // A type argocd-cm turns off (`kustomize.enable`, `helm.enable`) is read as plain
        // manifests, as Argo CD's repo-server does, whether named or discovered.
        let source_type = if settings.is_enabled(source_type.as_str()) {
            source_type
        } else {
            SourceType::Directory
        };
        match source_type {
            SourceType::Directory => {
                let jsonnet = JsonnetJob::new(&job, source)?.in_child(self.jsonnet_child.clone());
                let manifests = self
                    .repos
                    .read_directory(&snapshot, source, Some(Arc::new(jsonnet)))
                    .await?;
                Ok(Rendered {
                    source_type,
                    manifests,
                })
            }
            SourceType::Plugin => Err(job.error(
                source_type,
                "config management plugins need Argo CD's repo-server (--repo-server); \
                 fleetshard does not run plugins",
            )),
            SourceType::Kustomize | SourceType::Helm => {
                self.render_tool(source_type, &snapshot, job, source, request.refresh)
                    .await
            }
        }
    }

    /// The source type of `job.path` at the snapshot's commit, from its top-level files.
    async fn discover(&self, snapshot: &Snapshot, job: &Job) -> Result<SourceType, SourceError> {
        let key = format!("{}\0{}\0{}", snapshot.key, job.commit, job.path.join("/"));
        if let Some(found) = self.memo.source_type(&key) {
            return Ok(found);
        }
        let (opened, commit) = (snapshot.opened.clone(), snapshot.commit);
        let job = job.clone();
        let found = run_blocking(&job.repo_url.clone(), move || {
            let at = repo::At {
                opened: &opened,
                repo_url: &job.repo_url,
                revision: &job.revision,
                commit,
            };
            let names = tree::file_names(&at, &job.path)?;
            Ok(detect::discover(names.iter().map(String::as_str)))
        })
        .await?;
        self.memo.remember_type(key, found);
        Ok(found)
    }

    /// Kustomize or Helm: the commit's tree written to a temporary directory and the
    /// executable run there; kept per (repository, commit, source, destination), one run
    /// per key at a time ([`RenderMemo`]).
    async fn render_tool(
        &self,
        source_type: SourceType,
        snapshot: &Snapshot,
        job: Job,
        source: &AppSource,
        refresh: Refresh,
    ) -> Result<Rendered, SourceError> {
        let key = render_key(source_type, snapshot, &job);
        self.memo
            .render_once(
                key,
                refresh,
                self.run_tool(source_type, snapshot, job, source),
            )
            .await
    }

    async fn run_tool(
        &self,
        source_type: SourceType,
        snapshot: &Snapshot,
        job: Job,
        source: &AppSource,
    ) -> Result<Rendered, SourceError> {
        let tmp = tempfile::Builder::new()
            .prefix("fleetshard-render-")
            .tempdir()
            .map_err(|e| {
                job.error(
                    source_type,
                    format!("cannot create a temporary directory: {e}"),
                )
            })?;
        let root = tmp.path().join("repo");
        let (opened, commit) = (snapshot.opened.clone(), snapshot.commit);
        let (task_job, task_root) = (job.clone(), root.clone());
        run_blocking(&job.repo_url, move || {
            let at = repo::At {
                opened: &opened,
                repo_url: &task_job.repo_url,
                revision: &task_job.revision,
                commit,
            };
            tree::materialize(&at, &task_root, &task_job.limits)
        })
        .await?;
        // Kustomize fetches remote bases only when they are allowed; Helm renders the
        // chart as it is in the tree.
        let network = source_type == SourceType::Kustomize && self.config.allow_remote_bases;
        let tools = process::Tools::new(&self.config, tmp.path(), network);
        let env = job.env(source);
        let objects = match source_type {
            SourceType::Kustomize => {
                kustomize::build(&job, &env, &root, &tools, &self.config).await?
            }
            _ => helm::template(&job, &root, &tools).await?,
        };
        drop(tmp);
        Ok(Rendered {
            source_type,
            manifests: Arc::new(Manifests {
                commit: job.commit.clone(),
                objects,
            }),
        })
    }
}

/// What a render of an executable depends on. Helm's output depends on the app (release
/// name, namespace, `$ARGOCD_APP_*` in values) and the destination's versions; a
/// Kustomize build only on its tree, options and build options — unless an option reads
/// the app's environment (`$ARGOCD_APP_NAME` in an image), so apps sharing a Kustomize
/// source at one commit share its render.
fn render_key(source_type: SourceType, snapshot: &Snapshot, job: &Job) -> String {
    let tree = format!(
        "{}\0{}\0{}\0{}\0{}",
        snapshot.key,
        job.commit,
        job.path.join("/"),
        job.raw,
        job.kustomize_build_options
    );
    let reads_env = job
        .raw
        .get("kustomize")
        .is_some_and(|k| k.to_string().contains('$'));
    if source_type == SourceType::Kustomize && !reads_env {
        return tree;
    }
    format!(
        "{tree}\0{}\0{}\0{}\0{:?}\0{:?}",
        job.namespace, job.app_name, job.project, job.kube_version, job.api_versions
    )
}

impl Render for StandaloneRenderer {
    fn render<'a>(
        &'a self,
        request: RenderRequest<'a>,
    ) -> BoxFuture<'a, Result<Rendered, SourceError>> {
        Box::pin(self.render_source(request))
    }
}

/// Runs `task` on tokio's blocking pool.
async fn run_blocking<T: Send + 'static>(
    repo_url: &str,
    task: impl FnOnce() -> Result<T, SourceError> + Send + 'static,
) -> Result<T, SourceError> {
    tokio::task::spawn_blocking(task)
        .await
        .map_err(|join| SourceError::Task {
            repo: repo_url.to_owned(),
            message: join.to_string(),
        })?
}
