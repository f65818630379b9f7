//! `fleetshard run`'s controller options (`--reconciler`, workers, resync, caches, render,
//! Redis, events), mapped to `fleetshard_replica::ControllerSettings`.

use std::path::PathBuf;
use std::time::Duration;

use fleetshard_replica::{ControllerSettings, ReconcilerKind};
use fleetshard_util::boolean::go_bool;
use fleetshard_util::duration::parse_go_duration;

/// Which reconciler the workers run (`--reconciler`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReconcilerArg {
    /// Compare each owned app with Git and its cluster, record its status, auto-sync.
    Gitops,
    /// Touch nothing: coordination, queues and the handover gate only.
    None,
}

/// `fleetshard run`'s reconciler options.
#[derive(Debug, Clone, clap::Args)]
pub struct ReconcileArgs {
    /// What the refresh and operation workers do with an owned app.
    #[arg(
        long,
        value_enum,
        default_value = "gitops",
        env = "FLEETSHARD_RECONCILER"
    )]
    pub reconciler: ReconcilerArg,
    /// Refresh workers (Argo CD's `--status-processors`).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 20,
        env = "ARGOCD_APPLICATION_CONTROLLER_STATUS_PROCESSORS"
    )]
    pub status_processors: usize,
    /// Operation (sync) workers (Argo CD's `--operation-processors`).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 10,
        env = "ARGOCD_APPLICATION_CONTROLLER_OPERATION_PROCESSORS"
    )]
    pub operation_processors: usize,
    /// How often every owned app is refreshed even when nothing reported a change (drift
    /// on the cluster, a new commit on a branch): Argo CD's `timeout.reconciliation`.
    /// Also how long a branch's resolved commit is trusted. `0` refreshes on events only.
    /// Units: `ms`, `s`, `m`, `h`.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "180s",
        env = "ARGOCD_RECONCILIATION_TIMEOUT",
        value_parser = parse_go_duration
    )]
    pub resync: Duration,
    /// Each app's periodic refresh is delayed by its own fixed part of this (at most the
    /// resync period), so a large fleet's refreshes are spread, not queued at once (Argo
    /// CD's `timeout.reconciliation.jitter`).
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "60s",
        env = "ARGOCD_RECONCILIATION_JITTER",
        value_parser = parse_go_duration
    )]
    pub resync_jitter: Duration,
    /// Every app is refreshed hard (caches bypassed, the repository fetched again) at
    /// least this often: Argo CD's `timeout.hard.reconciliation`. `0`: never.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "0",
        env = "ARGOCD_HARD_RECONCILIATION_TIMEOUT",
        value_parser = parse_go_duration
    )]
    pub app_hard_resync: Duration,
    /// A sync operation running longer than this (as the replica stepping it counts) is
    /// terminated: Argo CD's `controller.sync.timeout.seconds`. `0`: no timeout.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "0",
        env = "ARGOCD_APPLICATION_CONTROLLER_SYNC_TIMEOUT",
        value_parser = parse_go_duration
    )]
    pub sync_timeout: Duration,
    /// Compare every app server-side (a server-side apply dry run per resource; Argo CD's
    /// `controller.diff.server.side`) unless its `compare-options` say
    /// `ServerSideDiff=false`; without it, only apps that say `ServerSideDiff=true`.
    #[arg(
        long,
        value_name = "BOOL",
        default_value = "false",
        env = "ARGOCD_APPLICATION_CONTROLLER_SERVER_SIDE_DIFF",
        action = clap::ArgAction::Set,
        value_parser = go_bool
    )]
    pub server_side_diff_enabled: bool,
    /// The pause after each sync wave but the last, before its health is judged (Argo CD's
    /// `ARGOCD_SYNC_WAVE_DELAY`, in seconds).
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "2",
        env = "ARGOCD_SYNC_WAVE_DELAY",
        value_parser = parse_go_duration
    )]
    pub sync_wave_delay: Duration,
    /// Where remote Git repositories are mirrored. Local paths and `file://` URLs are
    /// read in place. Default: `fleetshard-repos` in the system's temporary directory.
    #[arg(long, value_name = "DIR", env = "FLEETSHARD_REPO_CACHE")]
    pub repo_cache: Option<PathBuf>,
    /// How many parsed manifest sets (one per repository, commit and path) are kept: at
    /// least the apps a replica owns, or each refresh reads Git again.
    #[arg(
        long,
        value_name = "N",
        default_value_t = fleetshard_gitops::source::DEFAULT_MAX_CACHED_READS,
        env = "FLEETSHARD_MANIFEST_CACHE"
    )]
    pub manifest_cache: usize,
    /// Argo CD's control-plane namespace: its apps' resources are tracked by the app's
    /// name alone, other namespaces' by `NAMESPACE_NAME` (Argo CD's instance name).
    #[arg(
        long,
        value_name = "NAMESPACE",
        default_value = "argocd",
        env = "FLEETSHARD_CONTROL_PLANE_NAMESPACE"
    )]
    pub control_plane_namespace: String,
    /// Whether apps may read `file://` URLs and local paths. Default: refused with
    /// --argocd-namespace (a tenant's Application could read the replica's own files),
    /// allowed with local fleet files and directories.
    #[arg(
        long,
        value_name = "BOOL",
        env = "FLEETSHARD_ALLOW_LOCAL_REPOSITORIES",
        action = clap::ArgAction::Set
    )]
    pub allow_local_repositories: Option<bool>,
    /// Bytes of manifest files one app may read (Argo CD's repo-server bounds a
    /// directory's combined manifests at 10 MiB by default).
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = 10 * 1024 * 1024,
        env = "FLEETSHARD_MAX_MANIFEST_BYTES"
    )]
    pub max_manifest_bytes: u64,
    /// Objects one app may render to.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 10_000,
        env = "FLEETSHARD_MAX_OBJECTS"
    )]
    pub max_objects: usize,
    /// Refuse plaintext `http://` destination clusters and plaintext `http://` and
    /// `git://` repositories: their credentials and content would cross the network in
    /// clear. Without it, each is warned about once.
    #[arg(long, env = "FLEETSHARD_REFUSE_PLAINTEXT_HTTP")]
    pub refuse_plaintext_http: bool,
    /// The longest one fetch of a repository may take (Go duration): a server that
    /// trickles data or never answers (a `git://` tarpit) costs an app a condition and its
    /// worker this long, no more. A replica told to stop waits for a fetch in flight at
    /// most this long (its cluster's work ends before the cluster is handed over).
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "5m",
        value_parser = parse_go_duration,
        env = "FLEETSHARD_REPO_FETCH_TIMEOUT"
    )]
    pub repo_fetch_timeout: Duration,
    /// A credential template (`repo-creds` Secret) matches a `repoURL` only at a path
    /// boundary: `https://git.example.com` then matches `https://git.example.com/…` but
    /// not `https://git.example.com.evil.net/…`. Without it, Argo CD's string prefix
    /// rule applies and such a match is logged and shown on the app
    /// (`RepoCredentialsWarning`).
    #[arg(long, env = "FLEETSHARD_REFUSE_LOOSE_CREDENTIAL_TEMPLATES")]
    pub refuse_loose_credential_templates: bool,
    /// How long after a kind's last complete list its watch on a cluster is restarted with
    /// a new list (Argo CD's watch resync): what a watch missed shows within this period
    /// plus one list. Units: `ms`, `s`, `m`, `h`.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "10m",
        env = "ARGOCD_CLUSTER_CACHE_WATCH_RESYNC_DURATION",
        value_parser = parse_go_duration
    )]
    pub cluster_cache_relist: Duration,
    /// A directory of health scripts in Argo CD's resource_customizations layout
    /// (`<group>/<kind>/health.lua`, `_` for a wildcard segment; e.g. a checkout of Argo
    /// CD's own): checked after argocd-cm's scripts, before the built-in checks.
    #[arg(long, value_name = "DIR", env = "FLEETSHARD_RESOURCE_CUSTOMIZATIONS")]
    pub resource_customizations: Option<PathBuf>,
    /// Where sources are rendered.
    #[command(flatten)]
    pub render: super::super::repo_server::RepoServerArgs,
    /// Argo CD's app-state cache in Redis.
    #[command(flatten)]
    pub redis: super::super::redis::RedisArgs,
    /// The Kubernetes Events recorded on Applications (with `--argocd-namespace`), as
    /// Argo CD's `--enable-k8s-event`: `all`, `none`, or reasons (`OperationStarted`,
    /// `OperationCompleted`, `ResourceUpdated`, `StatusRefreshed`), comma-separated.
    #[arg(
        long = "enable-k8s-event",
        value_name = "REASONS",
        default_value = "all",
        value_delimiter = ',',
        env = "ARGOCD_ENABLE_K8S_EVENT"
    )]
    pub enable_k8s_event: Vec<String>,
    /// Application labels shown on the `argocd_app_labels` metric, each as a Prometheus
    /// label `label_<key>` (characters other than letters, digits and `_` become `_`), as
    /// Argo CD's flag: repeated or comma-separated. None: the metric is not exported.
    #[arg(
        long,
        value_name = "LABELS",
        value_delimiter = ',',
        env = "ARGOCD_APPLICATION_CONTROLLER_METRICS_APPLICATION_LABELS"
    )]
    pub metrics_application_labels: Vec<String>,
    /// Condition types counted on the `argocd_app_condition` metric, as Argo CD's flag:
    /// repeated or comma-separated. None: the metric is not exported (Argo CD's default).
    #[arg(
        long,
        value_name = "TYPES",
        value_delimiter = ',',
        env = "ARGOCD_APPLICATION_CONTROLLER_METRICS_APPLICATION_CONDITIONS"
    )]
    pub metrics_application_conditions: Vec<String>,
}

impl ReconcileArgs {
    /// The controller's settings from these flags.
    pub(super) fn settings(&self) -> anyhow::Result<ControllerSettings> {
        Ok(ControllerSettings {
            reconciler: match self.reconciler {
                ReconcilerArg::Gitops => ReconcilerKind::Gitops,
                ReconcilerArg::None => ReconcilerKind::None,
            },
            status_processors: self.status_processors,
            operation_processors: self.operation_processors,
            resync: self.resync,
            resync_jitter: self.resync_jitter,
            hard_resync: (!self.app_hard_resync.is_zero()).then_some(self.app_hard_resync),
            sync_timeout: (!self.sync_timeout.is_zero()).then_some(self.sync_timeout),
            server_side_diff: self.server_side_diff_enabled,
            sync_wave_delay: self.sync_wave_delay,
            repo_cache: self.repo_cache.clone(),
            manifest_cache: self.manifest_cache,
            control_plane_namespace: self.control_plane_namespace.clone(),
            allow_local_repositories: self.allow_local_repositories,
            read_limits: fleetshard_gitops::source::ReadLimits {
                max_manifest_bytes: self.max_manifest_bytes,
                max_objects: self.max_objects,
                ..Default::default()
            },
            refuse_plaintext_http: self.refuse_plaintext_http,
            fetch_timeout: self.repo_fetch_timeout,
            refuse_loose_credential_templates: self.refuse_loose_credential_templates,
            cluster_cache_relist: self.cluster_cache_relist,
            repo_server: self.render.setting()?,
            render: self.render.standalone()?,
            resource_customizations: self.resource_customizations.clone(),
            app_state: self.redis.settings()?,
            events: fleetshard_gitops::events::EnabledEvents::from_list(&self.enable_k8s_event),
            metrics_application_labels: self.metrics_application_labels.clone(),
            metrics_application_conditions: self.metrics_application_conditions.clone(),
            // `run`'s cost options (`run/costs.rs`) replace these.
            costs: Default::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        reconcile: ReconcileArgs,
    }

    #[test]
    fn application_labels_are_a_list_as_argo_cds_flag() {
        let cli = Cli::try_parse_from([
            "x",
            "--metrics-application-labels",
            "team,env",
            "--metrics-application-labels",
            "app.kubernetes.io/part-of",
            "--metrics-application-conditions",
            "SyncError,OrphanedResourceWarning",
        ])
        .unwrap();
        let settings = cli.reconcile.settings().unwrap();
        assert_eq!(
            settings.metrics_application_labels,
            ["team", "env", "app.kubernetes.io/part-of"]
        );
        assert_eq!(
            settings.metrics_application_conditions,
            ["SyncError", "OrphanedResourceWarning"]
        );
        let none = Cli::try_parse_from(["x"]).unwrap();
        assert!(
            none.reconcile
                .settings()
                .unwrap()
                .metrics_application_labels
                .is_empty()
        );
    }
}
