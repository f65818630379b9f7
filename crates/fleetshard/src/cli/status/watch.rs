//! `fleetshard status --watch`: the status as a compact live table, one snapshot per
//! `--interval` until Ctrl-C (or until stdout is closed). Each snapshot is an ordinary
//! status read (`super::observe`: the leases judged by watching them); this module only
//! keeps what one read cannot know — how long each shard's holder has held it, as seen
//! by this watch — and draws.
//!
//! On a terminal the screen is cleared and redrawn and unowned clusters are red; piped,
//! snapshots are printed one after the other, separated by a blank line, without escape
//! codes (so `status --watch | tee log` keeps a plain history).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::IsTerminal as _;

use anyhow::Context as _;
use fleetshard_core::Fleet;
use fleetshard_core::placement::PlacementConfig;
use fleetshard_replica::store::OpenMode;
use tokio::time::Instant;

use super::fenced::{Lease, Report};
use super::{Output, StatusArgs};

/// Clears the screen and moves the cursor home.
const CLEAR: &str = "\x1b[H\x1b[2J";
/// Red text, and back to normal.
const RED: &str = "\x1b[31m";
const RESET: &str = "\x1b[0m";

/// Runs the watch until Ctrl-C (exit 0) or a closed stdout.
pub(super) fn run(args: &StatusArgs) -> anyhow::Result<()> {
    if args.output == Output::Json {
        anyhow::bail!(
            "status --watch draws a table; for JSON run `fleetshard status --output json` \
             once per snapshot"
        );
    }
    let fleet = super::load_fleet(args)?;
    let names = super::names(fleet.as_ref());
    let weights = Weights::of(fleet.as_ref(), args.load.cluster_base_load);
    let terminal = std::io::stdout().is_terminal();
    let store = args.store.open(OpenMode::ReadOnly)?;
    let snapshots = async {
        let mut tenure = Tenure::default();
        for n in 0u64.. {
            // One snapshot per interval, its start to the next's: the watch of the leases
            // (up to 1.3 s) is part of the period, not added to it.
            let started = Instant::now();
            let style = Style {
                terminal,
                interval: args.interval,
            };
            let frame = match super::observe(args, store.as_ref(), &names).await {
                Ok(report) => {
                    tenure.see(&report, Instant::now());
                    frame(&report, &tenure, &weights, style, Instant::now())
                }
                // The first read failing is a mistake to report (a wrong store, a
                // missing file); a later one is shown and the next interval retries.
                Err(e) if n == 0 => return Err(e.context("status --watch")),
                Err(e) => format!(
                    "{}\nerror: {e:#} (retrying every {:?})\n",
                    store.describe(),
                    args.interval
                ),
            };
            let text = match (terminal, n) {
                (true, _) => format!("{CLEAR}{frame}"),
                (false, 0) => frame,
                (false, _) => format!("\n{frame}"),
            };
            if !super::super::write_stdout(&text)? {
                return Ok(()); // stdout closed (`| head`): nobody is watching.
            }
            tokio::time::sleep_until(started + args.interval).await;
        }
        Ok::<(), anyhow::Error>(())
    };
    super::super::runtime(super::super::Runtime::OneShot)?.block_on(async {
        tokio::select! {
            r = snapshots => r,
            r = tokio::signal::ctrl_c() => r.context("waiting for Ctrl-C"),
        }
    })
}

/// Each cluster's app count and load (the load balanced placement gives it: its weight,
/// or else `--cluster-base-load` plus its app count), from the fleet given with
/// `--fleet`/`--clusters`; without one, the columns show `-`.
#[derive(Debug, Default)]
struct Weights {
    /// Cluster id → (apps, load); `None`: no fleet given.
    by_id: Option<BTreeMap<String, (u64, u64)>>,
}

impl Weights {
    fn of(fleet: Option<&Fleet>, cluster_base_load: u64) -> Self {
        let by_id = fleet.map(|f| {
            let placement = PlacementConfig {
                cluster_base_load,
                ..PlacementConfig::default()
            };
            let loads = placement.loads(&f.clusters, &f.apps);
            f.clusters
                .iter()
                .zip(f.app_counts().into_iter().zip(loads))
                .map(|(c, (apps, load))| (c.id.clone(), (apps, load)))
                .collect()
        });
        Weights { by_id }
    }

    /// Apps and load of `ids` summed (`None` without a fleet).
    fn sum<'a>(&self, ids: impl Iterator<Item = &'a str>) -> Option<(u64, u64)> {
        let by_id = self.by_id.as_ref()?;
        Some(
            ids.filter_map(|id| by_id.get(id))
                .fold((0, 0), |(a, l), &(x, y)| (a + x, l + y)),
        )
    }
}

/// Since when each shard's current holder (identity and incarnation) has been seen
/// holding it, on this process's clock.
#[derive(Debug, Default)]
struct Tenure {
    /// Shard → (holder, incarnation, first seen, whether it already held the shard when
    /// the watch started: its age is then at least the one shown).
    by_shard: BTreeMap<u32, (String, String, Instant, bool)>,
    /// Whether a snapshot was seen (holders of the first one held before the watch).
    looked: bool,
}

impl Tenure {
    /// Records the holders `report` shows at `now`.
    fn see(&mut self, report: &Report, now: Instant) {
        let first_look = !self.looked;
        self.looked = true;
        let mut next = BTreeMap::new();
        for s in &report.shards {
            let (Some(holder), Some(inc)) = (&s.holder, &s.incarnation) else {
                continue;
            };
            if s.released {
                continue;
            }
            let kept = self
                .by_shard
                .remove(&s.shard)
                .filter(|(h, i, _, _)| h == holder && i == inc);
            let entry = kept.unwrap_or_else(|| (holder.clone(), inc.clone(), now, first_look));
            next.insert(s.shard, entry);
        }
        self.by_shard = next;
    }

    /// How long `shard`'s holder has held it, as text (`>=12s` when it held it before
    /// the watch started; `-` when nobody holds it).
    fn age(&self, shard: u32, now: Instant) -> String {
        match self.by_shard.get(&shard) {
            None => "-".into(),
            Some((_, _, since, before)) => {
                let secs = now.duration_since(*since).as_secs();
                if *before {
                    format!(">={secs}s")
                } else {
                    format!("{secs}s")
                }
            }
        }
    }
}

/// How a frame is drawn.
#[derive(Debug, Clone, Copy)]
struct Style {
    terminal: bool,
    interval: std::time::Duration,
}

/// One snapshot as text: a header line, the unowned clusters (first: they are what needs
/// attention), the shards, the totals and warnings — no blank line inside, so that piped
/// snapshots are told apart by the blank line between them.
fn frame(r: &Report, tenure: &Tenure, weights: &Weights, style: Style, now: Instant) -> String {
    let mut out = String::new();
    let generation = r.generation.map_or("none".into(), |g| g.to_string());
    let _ = writeln!(
        out,
        "{} (revision {})  generation {generation}  every {:?}  Ctrl-C stops",
        r.store, r.revision, style.interval,
    );
    let unowned: Vec<_> = r.clusters.iter().filter(|c| c.owner.is_none()).collect();
    if unowned.is_empty() {
        let _ = writeln!(out, "every cluster is owned");
    } else {
        let _ = writeln!(
            out,
            "UNOWNED CLUSTER                        NAME                 SHARD  WHY"
        );
        for c in &unowned {
            let line = format!(
                "{:<38} {:<20} {:<6} {}",
                super::shown_id(&c.id),
                c.name.as_deref().filter(|n| !n.is_empty()).unwrap_or("-"),
                c.shard,
                c.state.text()
            );
            if style.terminal {
                let _ = writeln!(out, "{RED}{line}{RESET}");
            } else {
                let _ = writeln!(out, "{line}");
            }
        }
    }
    let _ = writeln!(
        out,
        "SHARD  HOLDER                 LEASE       AGE      CLUSTERS  APPS    LOAD"
    );
    for s in &r.shards {
        let ids = || {
            r.clusters
                .iter()
                .filter(|c| c.shard == s.shard)
                .map(|c| c.id.as_str())
        };
        let (apps, load) = weights
            .sum(ids())
            .map_or(("-".into(), "-".into()), |(a, l)| {
                (a.to_string(), l.to_string())
            });
        let lease = match s.lease {
            None => "vacant",
            Some(Lease::Live) => "live",
            Some(Lease::Expired) => "EXPIRED",
            Some(Lease::Released) => "released",
            Some(Lease::NotRenewed) => "NOT RENEWED",
            Some(Lease::NotJudged) => "not judged",
        };
        let _ = writeln!(
            out,
            "{:<6} {:<22} {:<11} {:<8} {:<9} {:<7} {load}",
            s.shard,
            s.holder.as_deref().unwrap_or("-"),
            lease,
            tenure.age(s.shard, now),
            ids().count(),
            apps,
        );
    }
    let _ = writeln!(
        out,
        "{} clusters, {} unowned, {} spare replica(s)",
        r.clusters.len(),
        unowned.len(),
        r.spares.len()
    );
    for w in &r.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}
