//! `fleetshard pin`: balanced shard pins for Argo CD's own application controller. Reads
//! Argo CD's cluster Secrets and Applications through the Kubernetes API (the replica's
//! inventory, [`fleetshard_replica::inventory::start`]), plans with
//! [`fleetshard_plan::plan_pins`] (balanced placement, minimal movement from the current
//! pins), prints the diff, and — unless `--dry-run` — writes each changed Secret's
//! `data.shard` with a merge patch guarded by its resourceVersion (`pin/kube.rs`).
//! `--watch` plans again, debounced, whenever the clusters or apps change.

mod kube;

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context as _, bail};
use fleetshard_controller::inventory::{InventorySnapshot, KubernetesConfig};
use fleetshard_core::argo::ArgoAlgorithm;
use fleetshard_core::placement::BALANCED;
use fleetshard_plan::{
    PinOptions, PinPlan, override_template, plan_pins, render_pin_text, shard_specs,
};
use fleetshard_replica::FleetSource;
use fleetshard_replica::metrics::ProblemGauges;
use fleetshard_util::duration::parse_go_duration;

use self::kube::{Secrets, WriteOutcome};
use super::input::InClusterArg;
use super::plan::PlacementArgs;

/// A pass re-reads and plans again at most this many times when Secrets change under it.
const MAX_ATTEMPTS: usize = 5;

/// `fleetshard pin` options.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
        fleetshard pin --argocd-namespace argocd --replicas 3 --dry-run\n  \
        fleetshard pin --argocd-namespace argocd --replicas 3\n  \
        fleetshard pin --argocd-namespace argocd --replicas 3 --watch")]
pub struct PinArgs {
    /// Argo CD's namespace: its cluster Secrets (written), AppProjects and argocd-cm.
    /// The Kubernetes API is reached as `run` reaches it: in-cluster, else KUBECONFIG.
    #[arg(
        long,
        value_name = "NAMESPACE",
        default_value = "argocd",
        env = "FLEETSHARD_ARGOCD_NAMESPACE"
    )]
    pub argocd_namespace: String,
    /// The namespace whose Applications count, or `*` for every namespace (Argo CD's
    /// apps in any namespace). Default: --argocd-namespace.
    #[arg(
        long,
        value_name = "NAMESPACE|*",
        env = "FLEETSHARD_APPLICATION_NAMESPACE"
    )]
    pub application_namespace: Option<String>,
    /// Argo CD's controller replicas (its `ARGOCD_CONTROLLER_REPLICAS`), at least 1.
    #[arg(
        long,
        short = 'r',
        value_name = "N",
        env = "ARGOCD_CONTROLLER_REPLICAS",
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub replicas: u32,
    /// How the pins are computed: `balanced` (the only one; Argo CD's own algorithms need
    /// no pins).
    #[arg(long, value_name = "ALG", default_value = BALANCED, env = "FLEETSHARD_PIN_ALGORITHM")]
    pub algorithm: String,
    /// The algorithm Argo CD's controller runs (`--sharding-method`): where it runs what
    /// has no pin (its built-in in-cluster entry, manual entries without a usable shard).
    #[arg(
        long,
        value_name = "ALG",
        default_value = "legacy",
        env = "ARGOCD_CONTROLLER_SHARDING_ALGORITHM"
    )]
    pub argocd_algorithm: String,
    /// Print the diff and write nothing.
    #[arg(long, env = "FLEETSHARD_DRY_RUN")]
    pub dry_run: bool,
    /// Keep pinning as clusters and apps come and go (until SIGTERM or Ctrl-C).
    #[arg(long, env = "FLEETSHARD_PIN_WATCH")]
    pub watch: bool,
    /// With --watch: plan once the inventory has been quiet this long (Go duration).
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_go_duration, env = "FLEETSHARD_PIN_DEBOUNCE")]
    pub debounce: Duration,
    /// With --watch: plan at least this often even when nothing changed (Go duration).
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_go_duration, env = "FLEETSHARD_PIN_RESYNC")]
    pub resync: Duration,
    /// Argo CD's in-cluster destination.
    #[command(flatten)]
    pub in_cluster: InClusterArg,
    /// The balanced placement's knobs and the controller replicas' layout: with
    /// `--shard-zones` and every cluster's zone label known, clusters stay in their zone
    /// while it is not overloaded.
    #[command(flatten)]
    pub placement: PlacementArgs,
}

/// Runs `fleetshard pin`.
pub fn run(args: PinArgs) -> anyhow::Result<()> {
    let options = options(&args)?;
    super::runtime(super::Runtime::OneShot)?.block_on(async move {
        let user_agent = format!("fleetshard/{} pin", env!("CARGO_PKG_VERSION"));
        let started = fleetshard_replica::inventory::start(
            FleetSource::Kubernetes(source_config(&args)),
            ProblemGauges::default(),
            &user_agent,
        )
        .await?;
        let client = started
            .kube
            .clone()
            .context("the Kubernetes inventory has no client")?;
        let secrets = Secrets::new(client, &args.argocd_namespace);
        let result = if args.watch {
            watch(&args, options, &started.inventory, &secrets).await
        } else {
            pass(
                &args,
                &options,
                &started.inventory.snapshot(),
                &secrets,
                true,
            )
            .await
            .map(|_| ())
        };
        if let Some(source) = started.source {
            source.abort();
        }
        started.reporter.abort();
        result
    })
}

/// Checks the flags and builds what every pass plans with.
fn options(args: &PinArgs) -> anyhow::Result<PinOptions> {
    if args.algorithm != BALANCED {
        bail!(
            "--algorithm {:?}: pin computes balanced pins only (Argo CD's own algorithms \
             need no pins: give --argocd-algorithm to say which one Argo CD runs)",
            args.algorithm
        );
    }
    let argo = ArgoAlgorithm::parse(&args.argocd_algorithm).context("--argocd-algorithm")?;
    if args.debounce.is_zero() || args.resync.is_zero() {
        bail!("--debounce and --resync must be longer than 0");
    }
    let (zones, capacities) = args.placement.layout()?;
    let template = override_template(&[], zones.as_deref(), capacities.as_deref());
    Ok(PinOptions {
        replicas: args.replicas,
        shards: shard_specs(&template, args.replicas),
        config: args.placement.config()?,
        argo,
        local_zones: BTreeSet::new(),
    })
}

/// Where the inventory watches: as `run --argocd-namespace`.
fn source_config(args: &PinArgs) -> KubernetesConfig {
    let ns = &args.argocd_namespace;
    KubernetesConfig {
        secrets_namespace: ns.clone(),
        apps_namespace: match args.application_namespace.as_deref() {
            None => Some(ns.clone()),
            Some("*") => None,
            Some(other) => Some(other.to_owned()),
        },
        in_cluster_enabled: args.in_cluster.in_cluster_enabled,
    }
}

/// One pass: read the Secrets, plan, print (a plan that writes nothing only when
/// `print_unchanged`), write. A Secret changed under the pass (a
/// resourceVersion conflict) is never overwritten: the pass reads again and plans again
/// from what is there now, up to [`MAX_ATTEMPTS`] times.
async fn pass(
    args: &PinArgs,
    options: &PinOptions,
    snapshot: &InventorySnapshot,
    secrets: &Secrets,
    print_unchanged: bool,
) -> anyhow::Result<PinPlan> {
    for attempt in 1..=MAX_ATTEMPTS {
        let listed = secrets.list().await?;
        for problem in &listed.problems {
            eprintln!("warning: {problem}");
        }
        let entries = listed.entries(&snapshot.clusters);
        let plan = plan_pins(&entries, &snapshot.apps, options);
        if !print_unchanged && plan.writes().next().is_none() {
            return Ok(plan);
        }
        if args.dry_run {
            super::print_stdout(&render_pin_text(&plan, true))?;
            return Ok(plan);
        }
        match secrets.write(&plan, &listed).await? {
            WriteOutcome::Done(written) => {
                let mut text = render_pin_text(&plan, false);
                text.push_str(&format!("\nWrote the shard of {written} Secret(s).\n"));
                super::print_stdout(&text)?;
                return Ok(plan);
            }
            WriteOutcome::Conflict(secret) => {
                eprintln!(
                    "Secret {secret} changed since it was read (attempt {attempt} of \
                     {MAX_ATTEMPTS}): reading the Secrets again and planning from what is there"
                );
            }
        }
    }
    bail!(
        "the cluster Secrets in namespace {} kept changing under {MAX_ATTEMPTS} attempts; \
         nothing was overwritten, run again",
        args.argocd_namespace
    )
}

/// `--watch`: a pass now, then after every change of the inventory once it has been
/// quiet for `--debounce`, and every `--resync`; until SIGTERM or Ctrl-C.
async fn watch(
    args: &PinArgs,
    mut options: PinOptions,
    inventory: &fleetshard_controller::inventory::Inventory,
    secrets: &Secrets,
) -> anyhow::Result<()> {
    let mut rx = inventory.subscribe();
    let mut first = true;
    let signal = super::run::wait_for_signal();
    tokio::pin!(signal);
    loop {
        let snapshot = rx.borrow_and_update().clone();
        let planned = pass(args, &options, &snapshot, secrets, first).await;
        first = false;
        match planned {
            // Zones kept local stay local until they are clearly overloaded.
            Ok(plan) => options.local_zones = plan.local_zones,
            // A failed pass (the API unreachable, Secrets changing) is retried on the
            // next change or resync.
            Err(e) => eprintln!("error: {e:#}"),
        }
        tokio::select! {
            r = &mut signal => return r,
            changed = rx.changed() => {
                if changed.is_err() {
                    bail!("the inventory's source stopped");
                }
            }
            () = tokio::time::sleep(args.resync) => continue,
        }
        // Debounce: a burst of changes is planned once.
        loop {
            tokio::select! {
                r = &mut signal => return r,
                changed = rx.changed() => {
                    if changed.is_err() {
                        bail!("the inventory's source stopped");
                    }
                }
                () = tokio::time::sleep(args.debounce) => break,
            }
        }
    }
}
