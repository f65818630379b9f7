//! `fleetshard fleet ...`: working with fleet files. `generate` writes a seeded synthetic
//! fleet, as a native fleet file or as an Argo CD export, for demos, benchmarks and
//! trying `plan` at scale.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::progress::Progress;
use anyhow::{Context as _, bail};
use clap::{Subcommand, ValueEnum};
use fleetshard_core::{App, Destination, Fleet};
use fleetshard_fleetgen::{FleetSpec, REPO_URL, Skew, TARGET_REVISION, shards};
use fleetshard_manifest::{
    AppSource, AppSpec, DEFAULT_APP_NAMESPACE, DEFAULT_PROJECT, FleetFile, spec_key,
    to_application_list_yaml, to_fleet_json, to_fleet_yaml, to_secret_list_yaml,
};
use fleetshard_plan::parse_zones;

/// `fleetshard fleet` subcommands.
#[derive(Debug, Subcommand)]
pub enum FleetCommand {
    /// Write a synthetic fleet: seeded, so the same options give the same files.
    Generate(GenerateArgs),
}

/// How applications are spread over the generated clusters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SkewArg {
    /// Zipf: a few clusters hold most apps, like real fleets (see --zipf-exponent).
    Zipf,
    /// As even as possible.
    Uniform,
    /// Every app picks a cluster at random.
    Random,
}

/// Output format of `fleet generate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// One native fleet file (YAML, or JSON when the file name ends in .json).
    Native,
    /// Argo CD exports: clusters.yaml (Secret List) and apps.yaml (Application List).
    Argocd,
    /// The same exports as `kubectl get … -o json` prints them: clusters.json and
    /// apps.json (indented JSON).
    ArgocdJson,
}

/// `fleetshard fleet generate` options.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    fleetshard fleet generate --clusters 500 --zones eu-1a,eu-1b,eu-1c --seed 7 -o fleet.yaml\n  \
    fleetshard fleet generate --clusters 50 --format argocd --out export/\n  \
    fleetshard fleet generate --clusters 50 --format argocd-json --out export/\n  \
    fleetshard plan --clusters export/clusters.yaml --apps export/apps.yaml -r 4 -a all")]
pub struct GenerateArgs {
    /// Number of clusters.
    #[arg(long, value_name = "N", env = "FLEETSHARD_GEN_CLUSTERS")]
    pub clusters: usize,
    /// Mean applications per cluster.
    #[arg(
        long,
        value_name = "MEAN",
        default_value_t = 10.0,
        env = "FLEETSHARD_GEN_APPS_PER_CLUSTER"
    )]
    pub apps_per_cluster: f64,
    /// How applications are spread over clusters.
    #[arg(long, value_enum, default_value_t = SkewArg::Zipf, env = "FLEETSHARD_GEN_SKEW")]
    pub skew: SkewArg,
    /// Zipf exponent (0 is uniform; larger is more skewed).
    #[arg(
        long,
        value_name = "S",
        default_value_t = 1.0,
        env = "FLEETSHARD_GEN_ZIPF_EXPONENT"
    )]
    pub zipf_exponent: f64,
    /// Availability zones for the clusters (and, with --replicas, the shards), comma-separated.
    #[arg(long, value_name = "ZONE,..", env = "FLEETSHARD_GEN_ZONES")]
    pub zones: Option<String>,
    /// Seed: every random choice derives from it.
    #[arg(
        long,
        value_name = "S",
        default_value_t = 0,
        env = "FLEETSHARD_GEN_SEED"
    )]
    pub seed: u64,
    /// Replicas: native files get a `shards:` section (zones cycled); pins are drawn
    /// from 0..N.
    #[arg(long, value_name = "N", env = "FLEETSHARD_GEN_REPLICAS")]
    pub replicas: Option<usize>,
    /// Fraction of clusters pinned to a shard (needs --replicas).
    #[arg(
        long,
        value_name = "F",
        default_value_t = 0.0,
        env = "FLEETSHARD_GEN_PINNED_FRACTION"
    )]
    pub pinned_fraction: f64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = FormatArg::Native, env = "FLEETSHARD_GEN_FORMAT")]
    pub format: FormatArg,
    /// Output directory: fleet.yaml (native) or clusters.yaml and apps.yaml (argocd).
    #[arg(
        long,
        value_name = "DIR",
        env = "FLEETSHARD_GEN_OUT",
        conflicts_with = "output"
    )]
    pub out: Option<PathBuf>,
    /// Native format: write every application in full instead of an `apps: N` count per
    /// cluster (much larger; names and sources as in the argocd format).
    #[arg(long, env = "FLEETSHARD_GEN_FULL_APPS")]
    pub full_apps: bool,
    /// Output file (native only); `-` or nothing at all writes to stdout.
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FILE",
        env = "FLEETSHARD_GEN_OUTPUT"
    )]
    pub output: Option<PathBuf>,
}

/// Runs a `fleetshard fleet` subcommand.
pub fn run(cmd: FleetCommand) -> anyhow::Result<()> {
    match cmd {
        FleetCommand::Generate(args) => generate(&args),
    }
}

fn spec(args: &GenerateArgs) -> anyhow::Result<FleetSpec> {
    let zones = args
        .zones
        .as_deref()
        .map(parse_zones)
        .transpose()
        .context("--zones")?
        .unwrap_or_default();
    let skew = match args.skew {
        SkewArg::Zipf => Skew::Zipf {
            exponent: args.zipf_exponent,
        },
        SkewArg::Uniform => Skew::Uniform,
        SkewArg::Random => Skew::Random,
    };
    Ok(FleetSpec {
        apps_per_cluster: args.apps_per_cluster,
        skew,
        zones,
        seed: args.seed,
        pinned_fraction: args.pinned_fraction,
        replicas: args.replicas.unwrap_or(0),
        ..FleetSpec::new(args.clusters)
    })
}

fn generate(args: &GenerateArgs) -> anyhow::Result<()> {
    let spec = spec(args)?;
    let progress = Progress::spinner(format!("generating {} clusters", args.clusters));
    let fleet = spec.try_generate().context("cannot generate that fleet")?;
    progress.say(format!(
        "writing {} clusters and {} apps",
        fleet.clusters.len(),
        fleet.apps.len()
    ));
    tracing::info!(
        clusters = fleet.clusters.len(),
        apps = fleet.apps.len(),
        seed = spec.seed,
        "fleet generated"
    );
    match args.format {
        FormatArg::Native => {
            let (fleet, specs) = if args.full_apps {
                let specs = generated_specs(&spec, &fleet);
                (fleet, specs)
            } else {
                (as_placeholders(fleet), BTreeMap::new())
            };
            let file = FleetFile {
                shards: args
                    .replicas
                    .map_or_else(Vec::new, |r| shards(r, &spec.zones)),
                fleet,
                specs,
                credentials: Default::default(),
                projects: Default::default(),
                repositories: Default::default(),
                format: Default::default(),
            };
            let target = match (&args.out, &args.output) {
                (Some(dir), _) => Some(dir.join("fleet.yaml")),
                (None, Some(path)) if path.as_os_str() != "-" => Some(path.clone()),
                _ => None,
            };
            let json = target
                .as_deref()
                .and_then(Path::extension)
                .is_some_and(|e| e.eq_ignore_ascii_case("json"));
            let text = if json {
                to_fleet_json(&file)
            } else {
                to_fleet_yaml(&file)
            };
            match target {
                Some(path) => write(&path, &text),
                None => {
                    drop(progress); // cleared before stdout is written
                    super::print_stdout(&text)
                }
            }
        }
        FormatArg::Argocd | FormatArg::ArgocdJson => {
            let json = args.format == FormatArg::ArgocdJson;
            let (name, ext) = if json {
                ("argocd-json", "json")
            } else {
                ("argocd", "yaml")
            };
            let Some(dir) = &args.out else {
                bail!(
                    "--format {name} writes two files (clusters.{ext}, apps.{ext}): give --out DIR"
                );
            };
            let specs = generated_specs(&spec, &fleet);
            for (file, yaml) in [
                ("clusters", to_secret_list_yaml(&fleet.clusters)),
                ("apps", to_application_list_yaml(&fleet.apps, &specs)),
            ] {
                let text = if json { as_json(&yaml)? } else { yaml };
                write(&dir.join(format!("{file}.{ext}")), &text)?;
            }
            Ok(())
        }
    }
}

/// `yaml` (a List the writers made) as `kubectl … -o json` prints it: indented JSON.
fn as_json(yaml: &str) -> anyhow::Result<String> {
    let value: serde_json::Value =
        serde_saphyr::from_str_with_options(yaml, fleetshard_manifest::yaml_options(yaml.len()))
            .context("reading the written YAML back")?;
    Ok(serde_json::to_string_pretty(&value)? + "\n")
}

/// The GitOps spec of each application `spec` generated (as `fleet`): fleetgen's
/// repository at the app's path, at `HEAD`.
fn generated_specs(spec: &FleetSpec, fleet: &Fleet) -> BTreeMap<(String, String), AppSpec> {
    fleet
        .apps
        .iter()
        .zip(spec.app_paths())
        .map(|(app, path)| {
            let spec = AppSpec {
                source: AppSource {
                    repo_url: REPO_URL.to_owned(),
                    target_revision: TARGET_REVISION.to_owned(),
                    path,
                    directory: Default::default(),
                    raw: Default::default(),
                },
                ..AppSpec::default()
            };
            (spec_key(app), spec)
        })
        .collect()
}

/// Replaces the applications by the fleet file's placeholders (`argocd/<cluster>-<k>`,
/// project `default`, to the cluster's server; without a spec, so at `HEAD` when read
/// back), which the writer folds into an `apps: N` per cluster: the file stays small
/// (10 000 clusters: ~2 MB instead of ~40 MB) and loads to the same app counts, which is
/// all a plan needs.
fn as_placeholders(mut fleet: Fleet) -> Fleet {
    let counts = fleet.app_counts();
    fleet.apps = fleet
        .clusters
        .iter()
        .zip(counts)
        .flat_map(|(c, n)| {
            (1..=n).map(move |k| App {
                namespace: DEFAULT_APP_NAMESPACE.to_owned(),
                name: format!("{}-{k}", c.name),
                project: DEFAULT_PROJECT.to_owned(),
                destination: Destination {
                    server: Some(c.server.clone()),
                    ..Destination::default()
                },
            })
        })
        .collect();
    fleet
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("{}: cannot create directory", dir.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("{}: cannot write", path.display()))?;
    tracing::info!(path = %path.display(), bytes = text.len(), "written");
    Ok(())
}
