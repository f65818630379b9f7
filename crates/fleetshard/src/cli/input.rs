//! Reading the fleet from the files named on the command line (`-` is stdin).

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use fleetshard_core::argo::IN_CLUSTER_SERVER;
use fleetshard_core::{Fleet, ShardSpec};
use fleetshard_manifest::{
    self as manifest, AppSpec, ClusterCredentials, InputFormat, LoadError, LoadWarning, Loaded,
    RepoSettings,
};
use fleetshard_plan::Warning;

/// The flags that name a fleet, shared by every subcommand that reads one (`plan`, `run`).
/// The subcommand requires one of `--fleet` or `--clusters` with an `ArgGroup` named
/// `input`.
#[derive(Debug, Clone, clap::Args)]
pub struct FleetArgs {
    /// Native fleet file (YAML or JSON); its `shards:` section gives the replicas' zones
    /// and capacities. `-` reads stdin.
    #[arg(
        long,
        value_name = "FILE",
        env = "FLEETSHARD_FLEET",
        conflicts_with = "clusters"
    )]
    pub fleet: Option<PathBuf>,
    /// Argo CD cluster Secrets, as `kubectl get secret -n argocd -l
    /// argocd.argoproj.io/secret-type=cluster -o yaml` prints them. `-` reads stdin.
    #[arg(long, value_name = "FILE", env = "FLEETSHARD_CLUSTERS")]
    pub clusters: Option<PathBuf>,
    /// Argo CD Applications, as `kubectl get applications -A -o yaml` prints them (with
    /// --fleet: added to the file's applications); their counts are the clusters' loads.
    #[arg(long, value_name = "FILE", env = "FLEETSHARD_APPS")]
    pub apps: Option<PathBuf>,
    /// Argo CD's in-cluster destination.
    #[command(flatten)]
    pub in_cluster: InClusterArg,
}

/// Argo CD's in-cluster destination, as a flag (inputs of Argo CD's objects: files or the
/// Kubernetes API).
#[derive(Debug, Clone, clap::Args)]
pub struct InClusterArg {
    /// Argo CD's in-cluster destination (argocd-cm `cluster.inClusterEnabled`): with
    /// cluster Secrets as input, the fleet carries Argo CD's built-in in-cluster entry
    /// (id "", server https://kubernetes.default.svc) unless a Secret names that server,
    /// as Argo CD's cluster list does; `false` leaves it out, and leaves out a Secret for
    /// that server too, as Argo CD does.
    #[arg(
        long,
        value_name = "BOOL",
        env = "FLEETSHARD_IN_CLUSTER_ENABLED",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub in_cluster_enabled: bool,
}

impl FleetArgs {
    /// Where the fleet comes from.
    pub fn source(&self) -> anyhow::Result<FleetSource> {
        match (&self.fleet, &self.clusters) {
            (Some(fleet), _) => Ok(FleetSource::Native {
                fleet: fleet.clone(),
                apps: self.apps.clone(),
            }),
            (None, Some(clusters)) => Ok(FleetSource::Argo {
                clusters: clusters.clone(),
                apps: self.apps.clone(),
                in_cluster_enabled: self.in_cluster.in_cluster_enabled,
            }),
            (None, None) => anyhow::bail!("give the fleet with --fleet FILE or --clusters FILE"),
        }
    }
}

/// Where the fleet comes from.
#[derive(Debug, Clone)]
pub enum FleetSource {
    /// A native fleet file, plus optional extra Applications.
    Native {
        /// The fleet file.
        fleet: PathBuf,
        /// Applications to add to the file's own.
        apps: Option<PathBuf>,
    },
    /// Argo CD exports: cluster Secrets and optional Applications.
    Argo {
        /// Cluster Secrets (or a fleet file's clusters).
        clusters: PathBuf,
        /// Applications.
        apps: Option<PathBuf>,
        /// Whether Argo CD's in-cluster destination is enabled (`--in-cluster-enabled`).
        in_cluster_enabled: bool,
    },
}

/// The loaded fleet, its applications' GitOps specs, the shard layout a fleet file gave,
/// and the loaders' warnings.
#[derive(Debug, Default)]
pub struct LoadedFleet {
    /// Clusters and applications.
    pub fleet: Fleet,
    /// Each application's GitOps spec, by `(namespace, name)`; of applications that share
    /// a key, the first one's.
    pub specs: BTreeMap<(String, String), AppSpec>,
    /// The fleet file's `shards:` (empty for Argo CD exports).
    pub shards: Vec<ShardSpec>,
    /// How to reach each cluster, by id, from the cluster Secrets' `config`.
    pub credentials: BTreeMap<String, ClusterCredentials>,
    /// Argo CD AppProjects given with the applications, by name.
    pub projects: BTreeMap<String, manifest::AppProject>,
    /// How to reach private Git repositories, from repository Secrets, credential
    /// templates and Argo CD's known-hosts and TLS-certificate ConfigMaps in `--clusters`.
    pub repositories: RepoSettings,
    /// What the loaders worked around.
    pub warnings: Vec<Warning>,
}

const STDIN: &str = "-";

/// Reads `path`, or stdin for `-`, with `parse` (messages name the file).
fn load_with<T>(
    path: &Path,
    parse: fn(&str, &str) -> Result<Loaded<T>, LoadError>,
    load: fn(&Path) -> Result<Loaded<T>, LoadError>,
) -> anyhow::Result<Loaded<T>> {
    if path.as_os_str() == STDIN {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("<stdin>: cannot read")?;
        return Ok(parse(&text, "<stdin>")?);
    }
    Ok(load(path)?)
}

fn warnings(w: Vec<LoadWarning>) -> impl Iterator<Item = Warning> {
    w.into_iter().map(|w| Warning::new("input", w.to_string()))
}

fn load_clusters(path: &Path) -> anyhow::Result<Loaded<manifest::FleetFile>> {
    load_with(
        path,
        manifest::parse_clusters_with_credentials,
        manifest::load_clusters_with_credentials,
    )
}

fn load_apps(path: &Path) -> anyhow::Result<Loaded<manifest::FleetFile>> {
    load_with(
        path,
        manifest::parse_apps_with_specs,
        manifest::load_apps_with_specs,
    )
}

/// Adds an apps file's `apps` to `into`, taken whole when there is nothing to add them to:
/// at 500k apps, a second vector and a map rebuilt entry by entry cost hundreds of
/// megabytes at the peak, and the loader's packed copies would be copied again.
fn add_apps(into: &mut Vec<fleetshard_core::App>, apps: Vec<fleetshard_core::App>) {
    if into.is_empty() {
        *into = apps;
    } else {
        into.extend(apps);
    }
}

/// Argo CD's cluster list from the clusters of its Secrets
/// ([`manifest::complete_argo_cluster_list`]): the built-in entry logged, Secrets left out
/// warned about.
fn argo_cluster_list(
    secrets: Vec<fleetshard_core::Cluster>,
    in_cluster_enabled: bool,
    out: &mut LoadedFleet,
) -> Vec<fleetshard_core::Cluster> {
    let list =
        manifest::complete_argo_cluster_list(secrets, &mut out.credentials, in_cluster_enabled);
    if list.built_in {
        tracing::info!(
            server = IN_CLUSTER_SERVER,
            "no cluster Secret names the in-cluster server: Argo CD's built-in in-cluster \
             entry (id \"\") is part of the fleet, as in Argo CD's cluster list \
             (--in-cluster-enabled=false leaves it out)"
        );
    }
    for c in &list.disabled {
        out.warnings.push(Warning::new(
            "input",
            format!(
                "cluster {:?} (id {:?}) {}",
                c.name,
                c.id,
                manifest::IN_CLUSTER_DISABLED
            ),
        ));
    }
    list.clusters
}

/// Whether [`load`] keeps the Applications' GitOps specs of an apps file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Specs {
    /// Kept ([`LoadedFleet::specs`], and the file's AppProjects): a replica reconciles them.
    Keep,
    /// Checked as always, then dropped with the AppProjects: placement (`plan`, `status`)
    /// reads neither, and at 500k Applications the specs are the larger part of the
    /// loader's peak memory.
    Drop,
}

/// Loads the fleet. Errors name the file, object and field (the loaders' messages).
pub fn load(source: &FleetSource, specs: Specs) -> anyhow::Result<LoadedFleet> {
    let _progress = super::progress::Progress::spinner("reading the fleet");
    let mut out = LoadedFleet::default();
    let extra_apps = match source {
        FleetSource::Native { fleet, apps } => {
            let file = load_with(fleet, manifest::parse_fleet_file, manifest::load_fleet_file)?;
            out.fleet = file.value.fleet;
            out.specs = file.value.specs;
            out.shards = file.value.shards;
            out.warnings.extend(warnings(file.warnings));
            apps
        }
        FleetSource::Argo {
            clusters,
            apps,
            in_cluster_enabled,
        } => {
            let c = load_clusters(clusters)?;
            out.warnings.extend(warnings(c.warnings));
            out.credentials = c.value.credentials;
            out.repositories = c.value.repositories;
            out.fleet.clusters = match c.value.format {
                // A fleet file's clusters are the whole fleet.
                InputFormat::Native => c.value.fleet.clusters,
                InputFormat::Kubernetes => {
                    argo_cluster_list(c.value.fleet.clusters, *in_cluster_enabled, &mut out)
                }
            };
            apps
        }
    };
    match (extra_apps, specs) {
        (None, _) => {}
        (Some(path), Specs::Drop) => {
            let a = load_with(path, manifest::parse_apps, manifest::load_apps)?;
            add_apps(&mut out.fleet.apps, a.value);
            out.warnings.extend(warnings(a.warnings));
        }
        (Some(path), Specs::Keep) => {
            let a = load_apps(path)?;
            add_apps(&mut out.fleet.apps, a.value.fleet.apps);
            out.projects = a.value.projects;
            if out.specs.is_empty() {
                out.specs = a.value.specs;
            } else {
                for (key, spec) in a.value.specs {
                    // The fleet file's definition of a key comes first, and counts.
                    out.specs.entry(key).or_insert(spec);
                }
            }
            out.warnings.extend(warnings(a.warnings));
        }
    }
    tracing::info!(
        clusters = out.fleet.clusters.len(),
        apps = out.fleet.apps.len(),
        shards = out.shards.len(),
        "fleet loaded"
    );
    Ok(out)
}
