//! `fleetshard status`: what the store says about a fleet in fenced lease mode — shard
//! holders and whether they are alive, the distributor, the committed generation, each
//! cluster's owner (only where it acts) and the clusters nobody owns, each replica's
//! inventory digest. No clock comparisons with other machines: whether a lease is alive is
//! judged by watching its version change on this process's clock, for at most the lease
//! duration (`fenced.rs`).

pub mod argocd;
mod costs;
mod fenced;
mod renewals;
mod watch;

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::Context as _;
use clap::ValueEnum;
use fleetshard_coord::lease::LeaseTiming;
use fleetshard_coord::store::Store;
use fleetshard_core::Fleet;
use fleetshard_util::duration::parse_go_duration;

use super::input;
use super::print_stdout;
use super::store::StoreArgs;
use fleetshard_replica::store::OpenMode;

/// Output format on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Aligned text.
    Table,
    /// One JSON document.
    Json,
}

/// `fleetshard status` options.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// The store.
    #[command(flatten)]
    pub store: StoreArgs,
    /// Shard count (default: the committed assignment's, else the records found).
    #[arg(long, value_name = "N", env = "FLEETSHARD_SHARDS")]
    pub shards: Option<u32>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Output::Table, env = "FLEETSHARD_OUTPUT")]
    pub output: Output,
    /// Watch the leases for exactly this many seconds (0: one read, leases not judged;
    /// 4 or more, the lease duration: a lease unchanged that long is expired and its holder
    /// shown as gone). Default: until every lease was renewed — seen changing, or written
    /// after the previous renewals of two replicas seen renewing (the store's order) — at
    /// most 1.3 s: a lease unchanged that long missed a renewal (a live holder renews every
    /// 1.25 s), its holder is shown "not renewed" and acting on nothing.
    #[arg(long, value_name = "SECS", env = "FLEETSHARD_OBSERVE")]
    pub observe: Option<u64>,
    /// Redraw a compact live table (per shard: holder, lease, lease age, clusters, apps,
    /// load; unowned clusters first) every --interval until Ctrl-C. On a terminal the
    /// screen is redrawn and unowned clusters are red; piped, one snapshot is printed per
    /// interval, snapshots separated by a blank line. Fenced protocol only; table only.
    #[arg(long, env = "FLEETSHARD_WATCH")]
    pub watch: bool,
    /// With --watch: the pause between two snapshots (each snapshot also watches the
    /// leases, see --observe).
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "2s",
        value_parser = parse_go_duration,
        env = "FLEETSHARD_WATCH_INTERVAL"
    )]
    pub interval: Duration,
    /// With --watch: how the LOAD column weighs a cluster, as the replicas do.
    #[command(flatten)]
    pub load: super::plan::LoadArgs,
    /// The protocol, and the argocd protocol's options (`status/argocd.rs`).
    #[command(flatten)]
    pub argocd: argocd::ArgoStatusArgs,
}

/// Prints the status.
pub fn run(args: StatusArgs) -> anyhow::Result<()> {
    if argocd::selected(&args)? {
        if args.watch {
            anyhow::bail!(
                "status --watch shows the fenced protocol's records; for the argocd \
                 protocol's mapping run `fleetshard status --protocol argocd` repeatedly"
            );
        }
        return argocd::run(&args);
    }
    if args.watch {
        return watch::run(&args);
    }
    let report = super::runtime(super::Runtime::OneShot)?.block_on(read(&args))?;
    let text = match args.output {
        Output::Json => format!("{}\n", serde_json::to_string_pretty(&report)?),
        Output::Table => fenced::table(&report) + &costs::table(&report),
    };
    print_stdout(&text)
}

async fn read(args: &StatusArgs) -> anyhow::Result<fenced::Report> {
    let names = names(load_fleet(args)?.as_ref());
    let store = args.store.open(OpenMode::ReadOnly)?;
    observe(args, store.as_ref(), &names).await
}

/// One report: the store's records read, with the leases watched as `--observe` says.
async fn observe(
    args: &StatusArgs,
    store: &dyn Store,
    names: &fenced::Names,
) -> anyhow::Result<fenced::Report> {
    let root = args.store.root()?;
    let list = || async {
        store
            .list(root)
            .await
            .with_context(|| format!("reading {}", store.describe()))
    };
    let timing = LeaseTiming::default();
    let first = list().await?;
    // Watch until every lease record was renewed (each live holder renews every 1.25 s),
    // seen changing or proven by the store's order once two replicas were seen renewing
    // (`renewals.rs`), for at most a renew period and a little: a record unchanged that
    // long missed a renewal and its holder is shown at risk, not acting, with an answer
    // within 1.5 s even while a holder is dead. `--observe SECS` watches exactly that long
    // and judges by changes alone (0: one read, not judged; the lease duration or more: an
    // unchanged record is expired).
    let window = args
        .observe
        .map_or(timing.renew_every + RENEW_MARGIN, Duration::from_secs);
    let start = tokio::time::Instant::now();
    let mut watch = renewals::RenewalWatch::new(root, &first);
    let mut now = first.clone();
    let mut renewed = BTreeSet::new();
    loop {
        // The first read too: with no lease record there is nothing to wait for.
        if args.observe.is_none()
            && let Some(shown) = watch.all_renewed(&now)
        {
            renewed = shown;
            break;
        }
        if start.elapsed() >= window {
            break;
        }
        tokio::time::sleep(POLL.min(window.saturating_sub(start.elapsed()))).await;
        now = list().await?;
    }
    let watched = start.elapsed();
    let span = if watched >= timing.duration {
        fenced::WatchSpan::Lease
    } else if watched >= timing.renew_every + RENEW_MARGIN {
        fenced::WatchSpan::RenewPeriod
    } else {
        fenced::WatchSpan::Short
    };
    let w = fenced::Watched {
        now: &now,
        first: &first,
        span,
        renewed: &renewed,
    };
    let mut report = fenced::build(root, args.shards, &w, names);
    costs::add_costs(&mut report, store, root)
        .await
        .with_context(|| format!("reading the costs in {}", store.describe()))?;
    report.store = store.describe();
    report.observed_secs = watched.as_secs_f64();
    Ok(report)
}

/// How often leases are read while watched: a renewal is seen at most this late.
const POLL: Duration = Duration::from_millis(50);

/// Beyond a renew period, how long a lease is watched before an unchanged one counts as a
/// missed renewal (a renew's write takes a few milliseconds).
const RENEW_MARGIN: Duration = Duration::from_millis(50);

/// The fleet given with `--fleet`/`--clusters`, if one is.
fn load_fleet(args: &StatusArgs) -> anyhow::Result<Option<Fleet>> {
    let fleet = &args.argocd.fleet;
    if fleet.fleet.is_none() && fleet.clusters.is_none() {
        return Ok(None);
    }
    Ok(Some(
        input::load(&fleet.source()?, input::Specs::Drop)?.fleet,
    ))
}

/// Cluster names and servers by id (empty without a fleet).
fn names(fleet: Option<&Fleet>) -> fenced::Names {
    fleet
        .iter()
        .flat_map(|f| f.clusters.iter())
        .map(|c| (c.id.clone(), (c.name.clone(), c.server.clone())))
        .collect()
}

/// A cluster id as the tables print it: Argo CD's built-in in-cluster entry has the empty
/// id, which would print as nothing at all; it prints as `""` (quoted, so that it is still
/// the id to copy).
pub(super) fn shown_id(id: &str) -> &str {
    if id.is_empty() { "\"\"" } else { id }
}

/// One line of the cluster table both protocols' `status` print.
pub(super) struct ClusterLine<'a> {
    pub id: &'a str,
    pub name: Option<&'a str>,
    pub server: Option<&'a str>,
    pub shard: String,
    /// The replica acting on it (`None`: nobody).
    pub owner: Option<&'a str>,
    /// Why nobody acts, when nobody does.
    pub state: &'a str,
    /// The shard it is displaced from.
    pub home: Option<u32>,
}

/// The cluster table both protocols' `status` print: id, name, server, shard, owner (or
/// why there is none, and the home shard of a displaced cluster), then the totals.
pub(super) fn write_clusters<'a>(
    out: &mut String,
    rows: impl ExactSizeIterator<Item = ClusterLine<'a>>,
    unowned: usize,
) {
    use std::fmt::Write as _;
    let units = rows.len();
    let mut clusters = std::collections::HashSet::new();
    let _ = writeln!(
        out,
        "\nCLUSTER                                NAME                 SERVER                                   SHARD  OWNER"
    );
    for c in rows {
        clusters.insert(fleetshard_core::placement::slices::UnitId::parse(c.id).cluster);
        let home = c
            .home
            .map_or(String::new(), |h| format!(" (away from shard {h})"));
        let owner = match c.owner {
            Some(o) => o.to_owned(),
            None => format!("UNOWNED ({})", c.state),
        };
        let _ = writeln!(
            out,
            "{:<38} {:<20} {:<40} {:<6} {owner}{home}",
            shown_id(c.id),
            c.name.filter(|n| !n.is_empty()).unwrap_or("-"),
            c.server.unwrap_or("-"),
            c.shard
        );
    }
    let total = clusters.len();
    if units == total {
        let _ = writeln!(out, "\n{total} clusters, {unowned} unowned");
    } else {
        let _ = writeln!(
            out,
            "\n{total} clusters in {units} units (split clusters count a unit per slice), {unowned} units unowned"
        );
    }
}
