//! What a replica is built from: plain, validated values, independent of the command
//! line (the binary maps its flags and environment to these; tests write them directly).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use fleetshard_controller::inventory::{DirectoryConfig, InventoryContent, KubernetesConfig};
use fleetshard_coord::argocd_runner::ArgoConfig;
use fleetshard_coord::fenced::{DropGuard, ShardCount};
use fleetshard_coord::lease::LeaseTiming;
use fleetshard_coord::runner::RunnerTiming;
use fleetshard_core::ShardSpec;
use fleetshard_core::placement::PlacementConfig;

use crate::ReplicaError;
use crate::deployment::DeploymentRef;
use crate::store::StoreUrl;

/// Everything one replica needs to be built.
#[derive(Debug, Clone)]
pub struct ReplicaSettings {
    /// Stable identity (a restarted replica gets its shard back): the pod name.
    pub identity: String,
    /// This process's incarnation, new at every start ([`crate::fresh_incarnation`]).
    pub incarnation: u64,
    /// The coordination store.
    pub store: StoreUrl,
    /// Key prefix of this fleet's records (fenced mode) and of local-mode app statuses;
    /// ends with `/`.
    pub root: String,
    /// Address of the HTTP server (`/healthz`, `/readyz`, `/metrics`); port 0 picks one
    /// (see [`crate::Replica::local_addr`]).
    pub listen: SocketAddr,
    /// Serve the read-only dashboard (`/dashboard`, `/api/dashboard…`: cluster names,
    /// servers and zones, app names and statuses) on the listener too. Off by default:
    /// the listener serves probes and Prometheus, often on every interface.
    pub dashboard: bool,
    /// This replica's zone.
    pub zone: Option<String>,
    /// This replica's capacity (relative: its CPUs), advertised in its shard record; the
    /// distributor gives shards load in proportion to their holders' capacities.
    pub capacity: u32,
    /// Append one JSON line per ownership change to this file.
    pub audit_log: Option<PathBuf>,
    /// Where the clusters and applications come from.
    pub fleet: FleetSource,
    /// Start even when the fleet has no clusters (refused otherwise: an empty fleet placed
    /// by the distributor leaves every cluster unowned).
    pub allow_empty_fleet: bool,
    /// The controller: reconciler, workers, resync.
    pub controller: ControllerSettings,
    /// The coordination protocol and its settings.
    pub protocol: ProtocolSettings,
}

/// Where a replica's inventory comes from.
#[derive(Debug, Clone)]
pub enum FleetSource {
    /// A fleet loaded once (from files, or written by a test).
    Fixed(InventoryContent),
    /// A directory of Argo CD manifests or native fleet files, watched.
    Directory(DirectoryConfig),
    /// Argo CD's cluster Secrets and Applications through the Kubernetes API, watched;
    /// app statuses are written on the Applications.
    Kubernetes(KubernetesConfig),
}

impl std::fmt::Display for FleetSource {
    /// Where the fleet comes from, for messages.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FleetSource::Fixed(_) => f.write_str("the fleet files"),
            FleetSource::Directory(d) => write!(f, "--fleet-dir {}", d.dir.display()),
            FleetSource::Kubernetes(k) => {
                write!(f, "--argocd-namespace {}", k.secrets_namespace)
            }
        }
    }
}

/// Which reconciler the workers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReconcilerKind {
    /// Compare each owned app with Git and its cluster, record its status, auto-sync.
    Gitops,
    /// Touch nothing: coordination, queues and the handover gate only.
    None,
}

/// The controller's settings.
#[derive(Debug, Clone)]
pub struct ControllerSettings {
    /// What the workers do with an owned app.
    pub reconciler: ReconcilerKind,
    /// Refresh workers (Argo CD's `--status-processors`).
    pub status_processors: usize,
    /// Operation workers (Argo CD's `--operation-processors`).
    pub operation_processors: usize,
    /// Every owned app is refreshed this often (Argo CD's `timeout.reconciliation`);
    /// zero: on events only.
    pub resync: Duration,
    /// Spread of each app's periodic refresh (at most the period).
    pub resync_jitter: Duration,
    /// Every app refreshed hard at least this often (Argo CD's
    /// `timeout.hard.reconciliation`); `None`: never.
    pub hard_resync: Option<Duration>,
    /// Operations running longer are terminated (Argo CD's sync timeout); `None`: never.
    pub sync_timeout: Option<Duration>,
    /// Every app compared server-side unless it says otherwise (Argo CD's
    /// `controller.diff.server.side`).
    pub server_side_diff: bool,
    /// The pause after each sync wave but the last (Argo CD's `ARGOCD_SYNC_WAVE_DELAY`).
    pub sync_wave_delay: Duration,
    /// Where remote Git repositories are mirrored (`None`: `fleetshard-repos` in the
    /// system's temporary directory).
    pub repo_cache: Option<PathBuf>,
    /// Parsed manifest sets kept.
    pub manifest_cache: usize,
    /// Argo CD's control-plane namespace (tracking ids of its apps are their names).
    pub control_plane_namespace: String,
    /// Whether apps may read `file://` URLs and local paths: `None` decides by the fleet
    /// source — refused when the apps are Argo CD's objects (`FleetSource::Kubernetes`: a
    /// tenant could read the replica's own files), allowed in local mode.
    pub allow_local_repositories: Option<bool>,
    /// How much one app's manifests may be.
    pub read_limits: fleetshard_gitops::source::ReadLimits,
    /// Refuse plaintext `http://` clusters and plaintext `http://` and `git://`
    /// repositories (otherwise each is warned about once).
    pub refuse_plaintext_http: bool,
    /// The longest one fetch of a repository may take (a server that trickles data or
    /// never answers): the app gets a condition and its worker is free again.
    pub fetch_timeout: Duration,
    /// A credential template matches a `repoURL` only at a path boundary (otherwise by
    /// Argo CD's string prefix, a match beyond a boundary warned about on the app).
    pub refuse_loose_credential_templates: bool,
    /// How long after a kind's last complete list its watch is restarted with a new one
    /// (`LiveOptions::relist_every`).
    pub cluster_cache_relist: Duration,
    /// Where sources are rendered.
    pub repo_server: RepoServerSetting,
    /// How this replica renders sources when no repo-server does (tools' timeout, renders
    /// kept, Kustomize remote bases).
    pub render: fleetshard_gitops::source::RenderConfig,
    /// A directory of health scripts in Argo CD's `resource_customizations` layout
    /// (`<group>/<kind>/health.lua`), checked after argocd-cm's and before the built-in
    /// checks; read once at start.
    pub resource_customizations: Option<PathBuf>,
    /// Argo CD's app-state cache in Redis (`--redis`): `None`, none is written.
    pub app_state: Option<fleetshard_appstate::RedisSettings>,
    /// The Kubernetes Events recorded on Applications (Argo CD's `--enable-k8s-event`);
    /// only where the Applications are Kubernetes objects.
    pub events: fleetshard_gitops::events::EnabledEvents,
    /// The Application labels `argocd_app_labels` shows (Argo CD's
    /// `--metrics-application-labels`); none: the metric is not exported.
    pub metrics_application_labels: Vec<String>,
    /// The condition types `argocd_app_condition` counts (`--metrics-application-conditions`;
    /// none: the metric is not exported, as Argo CD without the flag).
    pub metrics_application_conditions: Vec<String>,
    /// How each owned cluster's cost is measured and published (issue 30).
    pub costs: crate::costs::CostSettings,
}

/// Where an app's source is rendered.
#[derive(Debug, Clone)]
pub enum RepoServerSetting {
    /// By Argo CD's repo-server with this configuration when the apps are Argo CD's
    /// objects (`FleetSource::Kubernetes`, where the repo-server is part of the install);
    /// on this replica otherwise.
    Auto(fleetshard_reposerver::ClientConfig),
    /// By Argo CD's repo-server, whatever the fleet source.
    At(fleetshard_reposerver::ClientConfig),
    /// On this replica.
    Off,
}

impl RepoServerSetting {
    /// The repo-server to ask, if any, for apps that are (`argo_objects`) or are not
    /// Argo CD's objects.
    pub fn client(&self, argo_objects: bool) -> Option<&fleetshard_reposerver::ClientConfig> {
        match self {
            RepoServerSetting::Auto(c) if argo_objects => Some(c),
            RepoServerSetting::At(c) => Some(c),
            RepoServerSetting::Auto(_) | RepoServerSetting::Off => None,
        }
    }
}

impl Default for ControllerSettings {
    /// `fleetshard run`'s defaults.
    fn default() -> Self {
        ControllerSettings {
            reconciler: ReconcilerKind::Gitops,
            status_processors: 20,
            operation_processors: 10,
            resync: fleetshard_controller::DEFAULT_RESYNC,
            resync_jitter: fleetshard_controller::DEFAULT_RESYNC_JITTER,
            hard_resync: None,
            sync_timeout: None,
            server_side_diff: false,
            sync_wave_delay: Duration::from_secs(2),
            repo_cache: None,
            manifest_cache: fleetshard_gitops::source::DEFAULT_MAX_CACHED_READS,
            control_plane_namespace: "argocd".to_owned(),
            allow_local_repositories: None,
            read_limits: Default::default(),
            refuse_plaintext_http: false,
            fetch_timeout: fleetshard_gitops::source::DEFAULT_FETCH_TIMEOUT,
            refuse_loose_credential_templates: false,
            cluster_cache_relist: fleetshard_gitops::live::DEFAULT_RELIST_EVERY,
            repo_server: RepoServerSetting::Auto(fleetshard_reposerver::ClientConfig::new(
                fleetshard_reposerver::client::DEFAULT_ADDR,
            )),
            render: Default::default(),
            resource_customizations: None,
            app_state: None,
            events: fleetshard_gitops::events::EnabledEvents::All,
            metrics_application_labels: Vec::new(),
            metrics_application_conditions: Vec::new(),
            costs: Default::default(),
        }
    }
}

/// The coordination protocol.
#[derive(Debug, Clone)]
pub enum ProtocolSettings {
    /// fleetshard's fenced lease mode (records under the root).
    Fenced(FencedSettings),
    /// Argo CD's heartbeat map (`argocd-app-controller-shard-cm`).
    Argocd(ArgoSettings),
}

/// Fenced lease mode's settings.
#[derive(Debug, Clone)]
pub struct FencedSettings {
    /// Where the shard count comes from.
    pub shards: ShardCount,
    /// For [`ShardCount::External`]: the Deployment whose `spec.replicas` is the count.
    pub deployment: Option<DeploymentRef>,
    /// How long a shard may have no live holder before its clusters move.
    pub grace: Duration,
    /// Lease timing.
    pub timing: LeaseTiming,
    /// The runner's poll, tick and release timeout.
    pub runner: RunnerTiming,
    /// Placement settings used as distributor.
    pub placement: PlacementConfig,
    /// As distributor: how large a drop of clusters is committed at once, and how long a
    /// larger one must hold first.
    pub drop_guard: DropGuard,
    /// As distributor: shards whose capacity (and zone) the operator fixed, entry n for
    /// shard n (a fleet file's `shards:`); these win over the holders' advertisements.
    pub shard_specs: Vec<ShardSpec>,
    /// As distributor placing by measured costs: keep clusters in place while costs move
    /// inside the band (`run --hysteresis`; `None`: the engine's stickiness alone).
    pub hysteresis: Option<fleetshard_core::placement::hysteresis::Hysteresis>,
    /// As distributor: split a cluster that costs more than a shard should carry into
    /// slices of its apps, each owned by one replica (`run --split-clusters`).
    pub split_clusters: bool,
}

impl Default for FencedSettings {
    fn default() -> Self {
        FencedSettings {
            shards: ShardCount::Desired { default: 3 },
            deployment: None,
            grace: Duration::from_millis(500),
            timing: LeaseTiming::default(),
            runner: RunnerTiming::default(),
            placement: PlacementConfig::default(),
            drop_guard: DropGuard::default(),
            shard_specs: Vec::new(),
            hysteresis: Some(Default::default()),
            split_clusters: false,
        }
    }
}

/// Argo CD-compatible heartbeat mode's settings.
#[derive(Debug, Clone)]
pub struct ArgoSettings {
    /// The runner's configuration; its `identity` is replaced by the replica's.
    pub config: ArgoConfig,
    /// The replica count until a Deployment says otherwise.
    pub replicas: u32,
    /// The Deployment whose `spec.replicas` is the replica count, followed as it changes.
    pub deployment: Option<DeploymentRef>,
}

impl ReplicaSettings {
    /// The `User-Agent` of every request this replica sends to a Kubernetes API server
    /// (destination clusters, the control plane, the Kubernetes store):
    /// `fleetshard/VERSION IDENTITY/INCARNATION`, so that a cluster's audit log (and the
    /// tests' fake clusters) tell replicas and their restarts apart. Characters a header
    /// cannot carry become `_`. The server-side apply field manager stays `fleetshard` for
    /// every replica: a per-replica manager would make each new owner of a cluster a second
    /// manager of every field, so fields the new owner's manifests no longer set would stay
    /// owned by the old one and never be removed (SSA ownership must hand over with the
    /// cluster).
    pub fn user_agent(&self) -> String {
        let identity: String = self
            .identity
            .trim()
            .chars()
            .map(|c| if c.is_ascii_graphic() { c } else { '_' })
            .collect();
        format!(
            "fleetshard/{} {identity}/{}",
            env!("CARGO_PKG_VERSION"),
            fleetshard_coord::fenced::incarnation_text(self.incarnation)
        )
    }

    /// Checks what can be checked before anything starts.
    pub fn validate(&self) -> Result<(), ReplicaError> {
        let invalid =
            |field: &'static str, reason: String| ReplicaError::Settings { field, reason };
        if self.identity.trim().is_empty() {
            return Err(invalid("identity", "empty".into()));
        }
        if !self.root.ends_with('/') {
            return Err(invalid(
                "root",
                format!("{:?} must end with '/'", self.root),
            ));
        }
        if self.controller.status_processors == 0 {
            return Err(invalid("status_processors", "must be at least 1".into()));
        }
        if self.controller.operation_processors == 0 {
            return Err(invalid("operation_processors", "must be at least 1".into()));
        }
        crate::argocd_metrics::check_app_label_keys(&self.controller.metrics_application_labels)
            .map_err(|reason| invalid("metrics_application_labels", reason))?;
        let needs_kube = |deployment: &Option<DeploymentRef>| {
            deployment.is_some() && !matches!(self.store, StoreUrl::Kubernetes { .. })
        };
        match &self.protocol {
            ProtocolSettings::Fenced(f) => {
                f.shards
                    .validate()
                    .map_err(|e| invalid("shards", e.to_string()))?;
                f.timing
                    .validate()
                    .map_err(|e| invalid("timing", e.to_string()))?;
                f.drop_guard
                    .validate()
                    .map_err(|reason| invalid("drop_guard", reason))?;
                if needs_kube(&f.deployment) {
                    return Err(invalid("shards", deployment_needs_kube(&self.store)));
                }
            }
            ProtocolSettings::Argocd(a) => {
                if a.replicas == 0 {
                    return Err(invalid("replicas", "must be at least 1".into()));
                }
                if needs_kube(&a.deployment) {
                    return Err(invalid("shards", deployment_needs_kube(&self.store)));
                }
            }
        }
        Ok(())
    }
}

fn deployment_needs_kube(store: &StoreUrl) -> String {
    format!(
        "a Deployment's replicas are read from Kubernetes: it needs --store \
         kubernetes://NAMESPACE (got {store})"
    )
}
