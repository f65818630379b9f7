//! `fleetshard plan`: load a fleet, run the distribution(s), print a table or JSON, and
//! optionally draw an SVG chart. The report itself is built by `fleetshard-plan`.

use std::path::PathBuf;

use anyhow::{Context as _, bail};
use clap::parser::ValueSource;
use clap::{ArgMatches, ValueEnum};
use fleetshard_core::argo::ArgoAlgorithm;
use fleetshard_core::placement::hysteresis::Hysteresis;
use fleetshard_core::placement::{DEFAULT_CLUSTER_BASE_LOAD, PlacementConfig, ZonePolicy};
use fleetshard_plan::{
    Algorithm, CostOptions, MeasuredCosts, PlanInput, PlanOptions, PreviousPlan, Report,
    TableOptions, Warning, build_report, override_template, parse_capacities, parse_replicas,
    parse_zones, render_json, render_svg, render_table,
};
use fleetshard_replica::costs;

use super::exit::BadValue;
use super::input::{self, FleetArgs};
use super::progress::Progress;
use super::timing::{ProgressStopwatch, timed};

/// Argo CD's variable for `--algorithm`: an unknown value falls back to legacy there.
const ALGORITHM_ENV: &str = "ARGOCD_CONTROLLER_SHARDING_ALGORITHM";
/// Argo CD's variable for `--replicas`.
const REPLICAS_ENV: &str = "ARGOCD_CONTROLLER_REPLICAS";

/// Output format on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Aligned text tables for people.
    Table,
    /// One JSON object: the primary plan, plus `plans` when there are several.
    Json,
}

/// `fleetshard plan` options.
#[derive(Debug, clap::Args)]
#[command(
    group(clap::ArgGroup::new("input").required(true).args(["fleet", "clusters"])),
    after_help = "Examples:\n  \
        fleetshard plan --fleet examples/fleet.yaml\n  \
        fleetshard plan --clusters clusters.yaml --apps apps.yaml -a all -r 3..8 --svg plan.svg\n  \
        fleetshard plan --fleet fleet.yaml -r 6 --output json > before.json\n  \
        fleetshard plan --fleet fleet.yaml -r 7 --previous before.json"
)]
pub struct PlanArgs {
    /// The fleet.
    #[command(flatten)]
    pub input: FleetArgs,
    /// Algorithm(s), comma-separated, or `all`: balanced, consistent-hashing, round-robin,
    /// legacy. The first is the primary plan. From ARGOCD_CONTROLLER_SHARDING_ALGORITHM, an
    /// unknown name falls back to legacy with a warning, as in Argo CD.
    #[arg(
        long,
        short = 'a',
        value_name = "ALG[,ALG..]",
        default_value = "balanced",
        env = ALGORITHM_ENV
    )]
    pub algorithm: String,
    /// Replica count: N, an inclusive range A..B (one plan per count, movement from each to
    /// the next; B < A plans a scale-down), or a list N,M,... Default: the number of shards
    /// in the fleet file's `shards:` section.
    #[arg(
        long,
        short = 'r',
        value_name = "N|A..B",
        env = REPLICAS_ENV,
        allow_hyphen_values = true
    )]
    pub replicas: Option<String>,
    /// An earlier `plan --output json`: report movement from it (balanced also starts from
    /// it, as a running controller would).
    #[arg(long, value_name = "FILE", env = "FLEETSHARD_PREVIOUS")]
    pub previous: Option<PathBuf>,
    /// Start from the assignment the replicas committed in this store (fenced mode), as
    /// the distributor does: movement and per-shard figures are then what `run` would do
    /// with this fleet (instead of --previous). Without --costs, the costs the replicas
    /// measured and published there place the fleet, as they do for the distributor.
    #[arg(
        long,
        value_name = "URL",
        conflicts_with = "previous",
        env = "FLEETSHARD_PLAN_FROM_STORE",
        value_parser = super::store::StoreUrlParser
    )]
    pub from_store: Option<fleetshard_replica::StoreUrl>,
    /// With --from-store: the key prefix of the fleet's records.
    #[arg(
        long,
        value_name = "PREFIX",
        default_value = "fleetshard/",
        requires = "from_store"
    )]
    pub root: String,
    /// With an etcds:// --from-store: etcd's TLS files and user.
    #[command(flatten)]
    pub etcd: super::store::EtcdAccessArgs,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value_t = Output::Table, env = "FLEETSHARD_OUTPUT")]
    pub output: Output,
    /// Also write an SVG chart of load per shard (one panel per plan) to FILE.
    #[arg(long, value_name = "FILE", env = "FLEETSHARD_SVG")]
    pub svg: Option<PathBuf>,
    /// How balanced placement weighs and spreads the clusters.
    #[command(flatten)]
    pub placement: PlacementArgs,
    /// Measured costs: a JSON object from cluster id to the cluster's measured cost (a
    /// number ≥ 0). Loads become costs; clusters without one cost their estimate scaled by
    /// the median measured/estimate ratio. Ids not in the fleet are warned about.
    #[arg(long, value_name = "COSTS.json", env = "FLEETSHARD_COSTS")]
    pub costs: Option<PathBuf>,
    /// Balanced: split a cluster that costs more than (1 + ε) × a shard's share into the
    /// fewest slices that each fit one share, its apps divided by a stable hash.
    #[arg(long, env = "FLEETSHARD_SPLIT_CLUSTERS")]
    pub split_clusters: bool,
    /// Balanced from a previous placement: a cluster (or slice) moves only when its shard
    /// is more than this fraction above its target and the move lowers the imbalance by
    /// more than it costs. Default 0.10 with --costs, off without; 0 turns it off.
    #[arg(long, value_name = "BAND", env = "FLEETSHARD_HYSTERESIS")]
    pub hysteresis: Option<f64>,
    /// Table output: also list every cluster and its shard.
    #[arg(long, env = "FLEETSHARD_SHOW_CLUSTERS")]
    pub show_clusters: bool,
    /// Table output: list every warning (default: the first 25).
    #[arg(long, env = "FLEETSHARD_ALL_WARNINGS")]
    pub all_warnings: bool,
}

/// How balanced placement weighs a cluster (`plan`, `run` and `status --watch`'s LOAD
/// column alike).
#[derive(Debug, Clone, clap::Args)]
pub struct LoadArgs {
    /// Balanced placement: what owning a cluster costs beyond its apps, in apps (a
    /// cluster's load is this plus its app count, unless it has a weight).
    #[arg(
        long,
        value_name = "APPS",
        default_value_t = DEFAULT_CLUSTER_BASE_LOAD,
        env = "FLEETSHARD_CLUSTER_BASE_LOAD"
    )]
    pub cluster_base_load: u64,
}

/// The balanced placement's knobs and the replicas' layout (`plan` and `pin` alike).
#[derive(Debug, Clone, clap::Args)]
pub struct PlacementArgs {
    /// ε: a shard may carry up to (1 + ε) × its fair share.
    #[arg(
        long,
        value_name = "ε",
        default_value_t = 0.10,
        env = "FLEETSHARD_TOLERANCE",
        allow_hyphen_values = true
    )]
    pub tolerance: f64,
    /// What a cluster costs.
    #[command(flatten)]
    pub load: LoadArgs,
    /// Zone-aware placement needs at least this many shards in every zone with clusters
    /// (2 keeps failover within the zone).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1,
        env = "FLEETSHARD_MIN_SHARDS_PER_ZONE"
    )]
    pub min_shards_per_zone: usize,
    /// Ignore zones in balanced placement.
    #[arg(long, env = "FLEETSHARD_NO_ZONES")]
    pub no_zones: bool,
    /// Replicas' zones, comma-separated, cycled over the shards (overrides the fleet
    /// file's `shards:`).
    #[arg(long, value_name = "ZONE,..", env = "FLEETSHARD_SHARD_ZONES")]
    pub shard_zones: Option<String>,
    /// Replicas' relative capacities, comma-separated, cycled over the shards (overrides
    /// the fleet file's `shards:`).
    #[arg(long, value_name = "N,..", env = "FLEETSHARD_SHARD_CAPACITIES")]
    pub shard_capacities: Option<String>,
}

/// `--shard-zones` and `--shard-capacities`, parsed.
pub type ShardLayout = (Option<Vec<String>>, Option<Vec<u32>>);

impl PlacementArgs {
    /// The placement's configuration; a bad `--tolerance` is an error naming it.
    pub fn config(&self) -> anyhow::Result<PlacementConfig> {
        if !(self.tolerance.is_finite() && (0.0..=10.0).contains(&self.tolerance)) {
            bail!(
                "--tolerance {}: must be within 0..=10 (0.10 is 10 %)",
                self.tolerance
            );
        }
        Ok(PlacementConfig {
            tolerance: self.tolerance,
            zones: ZonePolicy {
                enabled: !self.no_zones,
                min_shards_per_zone: self.min_shards_per_zone,
                ..ZonePolicy::default()
            },
            cluster_base_load: self.load.cluster_base_load,
        })
    }

    /// The zones and capacities given on the command line, parsed.
    pub fn layout(&self) -> anyhow::Result<ShardLayout> {
        let zones = self
            .shard_zones
            .as_deref()
            .map(parse_zones)
            .transpose()
            .context("--shard-zones")?;
        let capacities = self
            .shard_capacities
            .as_deref()
            .map(parse_capacities)
            .transpose()
            .context("--shard-capacities")?;
        Ok((zones, capacities))
    }
}

/// Runs `fleetshard plan`. `matches` are this subcommand's, to see where values came from.
pub fn run(args: PlanArgs, matches: &ArgMatches) -> anyhow::Result<()> {
    let mut cli_warnings = Vec::new();
    let algorithms = algorithms(&args.algorithm, matches, &mut cli_warnings)?;
    // Bad flags are reported before any file is read.
    let requested_replicas = args
        .replicas
        .as_deref()
        .map(|r| {
            parse_replicas(r).map_err(|e| {
                let flag = if matches.value_source("replicas") == Some(ValueSource::EnvVariable) {
                    format!("{REPLICAS_ENV}={r}")
                } else {
                    "--replicas".to_owned()
                };
                BadValue(format!("{flag}: {e}"))
            })
        })
        .transpose()?;
    let bad_value = |e: anyhow::Error| BadValue(format!("{e:#}"));
    let (zones, capacities) = args.placement.layout().map_err(bad_value)?;
    let config = args.placement.config().map_err(bad_value)?;

    let source = args.input.source()?;
    let (loaded, load_ms) = timed(|| -> anyhow::Result<_> {
        let fleet = input::load(&source, input::Specs::Drop)?;
        let (previous, stored_costs) = match (&args.previous, &args.from_store) {
            (Some(path), _) => (Some(read_previous(path)?), None),
            (None, Some(url)) => {
                let (previous, costs) = read_committed(&args.etcd.apply(url.clone())?, &args.root)?;
                (Some(previous), costs)
            }
            (None, None) => (None, None),
        };
        Ok((fleet, previous, stored_costs))
    });
    let (fleet, previous, stored_costs) = loaded?;
    // --costs wins; else, from a store, the figures the distributor itself places by.
    let measured = match args.costs.as_deref() {
        Some(path) => Some(read_costs(path)?),
        None => stored_costs,
    };
    let hysteresis = hysteresis(args.hysteresis, measured.is_some()).map_err(bad_value)?;

    let replicas = match requested_replicas {
        Some(r) => r,
        None if !fleet.shards.is_empty() => vec![fleet.shards.len() as u32],
        None => bail!(
            "no replica count: give --replicas N (or {REPLICAS_ENV}), or list the replicas in the fleet file's shards: section"
        ),
    };
    let options = PlanOptions {
        algorithms,
        replicas,
        shard_template: override_template(&fleet.shards, zones.as_deref(), capacities.as_deref()),
        config,
        previous,
        costs: CostOptions {
            measured,
            split_clusters: args.split_clusters,
            hysteresis,
        },
    };
    let mut warnings = cli_warnings;
    warnings.extend(fleet.warnings);
    let input = PlanInput {
        fleet: fleet.fleet,
        warnings,
    };
    let steps = options.algorithms.len() * options.replicas.len();
    let progress = Progress::bar(steps as u64, "computing plans");
    let mut report = build_report(&input, &options, &mut ProgressStopwatch(&progress))?;
    drop(progress);
    report.set_load_ms(load_ms);
    log_summary(&report);
    emit(&report, &args)
}

/// Parses `--algorithm`. A bad name on the command line is an error listing the valid
/// ones; from Argo CD's variable it is Argo CD's behaviour: a warning and legacy.
fn algorithms(
    text: &str,
    matches: &ArgMatches,
    warnings: &mut Vec<Warning>,
) -> anyhow::Result<Vec<Algorithm>> {
    match Algorithm::parse_list(text) {
        Ok(list) => Ok(list),
        Err(e) if matches.value_source("algorithm") == Some(ValueSource::EnvVariable) => {
            let message = format!("{ALGORITHM_ENV}={text:?}: {e}; using legacy, as Argo CD does");
            tracing::warn!("{message}");
            warnings.push(Warning::new("cli", message));
            Ok(vec![Algorithm::Argo(ArgoAlgorithm::Legacy)])
        }
        Err(e) => Err(e).context("--algorithm"),
    }
}

fn read_costs(path: &std::path::Path) -> anyhow::Result<MeasuredCosts> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read costs", path.display()))?;
    Ok(MeasuredCosts::from_json(
        &text,
        &path.display().to_string(),
    )?)
}

/// `--hysteresis`: the band given (0: off), else 0.10 when costs are measured (they
/// wobble) and off without them (estimates do not, and the plan then shows what `run`
/// does).
pub(crate) fn hysteresis(band: Option<f64>, measured: bool) -> anyhow::Result<Option<Hysteresis>> {
    match band {
        Some(b) if !(b.is_finite() && (0.0..=10.0).contains(&b)) => {
            bail!("--hysteresis {b}: must be within 0..=10 (0.10 is 10 %; 0 turns it off)")
        }
        Some(0.0) => Ok(None),
        Some(b) => Ok(Some(Hysteresis {
            band: b,
            ..Hysteresis::default()
        })),
        None => Ok(measured.then(Hysteresis::default)),
    }
}

fn read_previous(path: &std::path::Path) -> anyhow::Result<PreviousPlan> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read previous plan", path.display()))?;
    Ok(PreviousPlan::from_json(&text, &path.display().to_string())?)
}

/// The committed assignment in `url` under `root`, as the previous plan, and the costs
/// the distributor places by: the replicas' records merged as `run` merges them, trusted
/// figures only, none below the floor of a default replica's capacity
/// (`fleetshard_replica::costs::placement_costs`). A record that does not read is a
/// warning; the others count.
fn read_committed(
    url: &fleetshard_replica::StoreUrl,
    root: &str,
) -> anyhow::Result<(PreviousPlan, Option<MeasuredCosts>)> {
    if !root.ends_with('/') {
        bail!("--root {root:?} must end with '/'");
    }
    let store = url
        .open_in(fleetshard_replica::store::OpenMode::ReadOnly)?
        .store;
    let runtime = super::runtime(super::Runtime::OneShot)?;
    let listing = runtime
        .block_on(store.list(root))
        .with_context(|| format!("reading {url}"))?;
    let costs_listing = runtime
        .block_on(store.list(&costs::costs_prefix(root)))
        .with_context(|| format!("reading {url}'s costs records"))?;
    let snapshot = fleetshard_coord::fenced::FencedSnapshot::decode(root, &listing);
    let Some((_, doc)) = snapshot.assignment else {
        let why = snapshot
            .corrupt
            .iter()
            .find(|c| c.key == fleetshard_coord::fenced::assignment_key(root))
            .map_or_else(|| "none is committed".to_owned(), |c| c.to_string());
        bail!("{url}: no assignment under {root:?} to plan from: {why}");
    };
    let mut assignment = fleetshard_core::Assignment::new();
    for (cluster, shard) in &doc.clusters {
        assignment.insert(cluster.clone(), *shard);
    }
    tracing::info!(
        generation = doc.generation,
        shards = doc.shards,
        clusters = doc.clusters.len(),
        "planning from the committed assignment"
    );
    let (merged, bad) = costs::merge_listing(&costs_listing);
    for b in &bad {
        tracing::warn!("{b}");
    }
    let floor = costs::CostSettings::default().replica_capacity * costs::FLOOR_SHARE;
    let by_id = costs::placement_costs(&merged, floor);
    let measured = (!by_id.is_empty()).then(|| {
        tracing::info!(
            clusters = by_id.len(),
            "planning by the costs the replicas measured"
        );
        MeasuredCosts {
            source: format!("{url} (costs records)"),
            by_id,
        }
    });
    let previous = PreviousPlan {
        algorithm: Some("balanced".to_owned()),
        replicas: Some(doc.shards),
        assignment,
        local_zones: Default::default(),
    };
    Ok((previous, measured))
}

fn log_summary(report: &Report) {
    for p in &report.plans {
        tracing::info!(
            algorithm = %p.algorithm,
            replicas = p.replicas,
            max_over_mean = p.balance.max_over_mean,
            unassigned = p.unassigned.clusters,
            distribute_ms = p.timings.distribute_ms,
            "plan computed"
        );
    }
}

fn emit(report: &Report, args: &PlanArgs) -> anyhow::Result<()> {
    if let Some(path) = &args.svg {
        std::fs::write(path, render_svg(report))
            .with_context(|| format!("{}: cannot write SVG", path.display()))?;
        tracing::info!(path = %path.display(), "SVG written");
    }
    let text = match args.output {
        Output::Json => render_json(report),
        Output::Table => render_table(
            report,
            TableOptions {
                clusters: args.show_clusters,
                all_warnings: args.all_warnings,
            },
        ),
    };
    super::print_stdout(&text)
}
