//! `fleetshard status`: what the store says about a fleet in fenced lease mode — shard
//! holders, the distributor, the committed generation, each cluster's owner and the
//! clusters nobody owns. One read (or two, `--observe`), no clock comparisons: whether a
//! lease is fresh can only be judged by watching it change, which `--observe SECS` does.

pub mod argocd;

use std::time::Duration;

use anyhow::Context as _;
use clap::ValueEnum;
use fleetshard_coord::fenced::{FencedSnapshot, incarnation_text};
use fleetshard_coord::store::Listing;
use serde::Serialize;

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
    /// Read twice, this many seconds apart, and tell which leases were renewed meanwhile
    /// (0: one read, freshness unknown).
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 0,
        env = "FLEETSHARD_OBSERVE"
    )]
    pub observe: u64,
    /// The protocol, and the argocd protocol's options (`status/argocd.rs`).
    #[command(flatten)]
    pub argocd: argocd::ArgoStatusArgs,
}

/// One shard in the report.
#[derive(Debug, Serialize)]
struct ShardRow {
    shard: u32,
    holder: Option<String>,
    /// [`incarnation_text`]: 16 hex digits, a string in JSON.
    incarnation: Option<String>,
    acked: Option<u64>,
    released: bool,
    /// The holder's zone, when it gave one.
    zone: Option<String>,
    /// Renewed during `--observe` (absent without it).
    #[serde(skip_serializing_if = "Option::is_none")]
    renewed: Option<bool>,
}

/// One cluster in the report.
#[derive(Debug, Serialize)]
struct ClusterRow {
    id: String,
    shard: u32,
    owner: Option<String>,
    /// The shard it returns to when that shard is held again (it is displaced from a
    /// vacant shard); absent when it is home.
    #[serde(skip_serializing_if = "Option::is_none")]
    home: Option<u32>,
}

/// A replica without a shard, from its presence record.
#[derive(Debug, Serialize)]
struct SpareRow {
    identity: String,
    incarnation: String,
    /// Renewed during `--observe` (absent without it).
    #[serde(skip_serializing_if = "Option::is_none")]
    renewed: Option<bool>,
}

/// The whole report (the `--output json` document).
#[derive(Debug, Serialize)]
struct Report {
    store: String,
    /// The store revision the read reflects (it grows by one per write).
    revision: u64,
    generation: Option<u64>,
    /// The committed generation's shard count.
    shard_count: Option<u32>,
    /// The count stored by `fleetshard scale`, if any.
    desired_shards: Option<u32>,
    distributor: Option<DistributorRow>,
    shards: Vec<ShardRow>,
    clusters: Vec<ClusterRow>,
    unowned: Vec<String>,
    /// Replicas holding no shard (their presence records, not released).
    spares: Vec<SpareRow>,
    /// Seconds between the two reads, with `--observe`.
    #[serde(skip_serializing_if = "Option::is_none")]
    observed_secs: Option<u64>,
    warnings: Vec<String>,
    /// Records no replica can read (`fleetshard store repair` rebuilds them).
    corrupt_records: Vec<CorruptRow>,
}

/// An unreadable record: its key and what is wrong.
#[derive(Debug, Serialize)]
struct CorruptRow {
    key: String,
    reason: String,
}

#[derive(Debug, Serialize)]
struct DistributorRow {
    holder: String,
    incarnation: String,
    released: bool,
}

/// Prints the status.
pub fn run(args: StatusArgs) -> anyhow::Result<()> {
    if argocd::selected(&args)? {
        return argocd::run(&args);
    }
    let report = super::runtime(super::Runtime::OneShot)?.block_on(read(&args))?;
    let text = match args.output {
        Output::Json => format!("{}\n", serde_json::to_string_pretty(&report)?),
        Output::Table => table(&report),
    };
    print_stdout(&text)
}

async fn read(args: &StatusArgs) -> anyhow::Result<Report> {
    let store = args.store.open(OpenMode::ReadOnly)?;
    let root = args.store.root()?;
    let first = store
        .list(root)
        .await
        .with_context(|| format!("reading {}", store.describe()))?;
    let second = if args.observe > 0 {
        tokio::time::sleep(Duration::from_secs(args.observe)).await;
        Some(store.list(root).await?)
    } else {
        None
    };
    let (now, before) = match &second {
        Some(s) => (s, Some(&first)),
        None => (&first, None),
    };
    let mut report = build(root, args.shards, now, before);
    report.store = store.describe();
    report.observed_secs = second.map(|_| args.observe);
    Ok(report)
}

/// Builds the report from `now`, and from `before` (an earlier read) when observing.
fn build(root: &str, shards: Option<u32>, now: &Listing, before: Option<&Listing>) -> Report {
    let snap = FencedSnapshot::decode(root, now);
    let earlier = before.map(|b| FencedSnapshot::decode(root, b));
    // Whether a record's version moved between the two reads (`None`: not observing).
    let renewed = |now: Option<u64>, then: Option<Option<u64>>| then.map(|v| v != now);
    let warnings: Vec<String> = snap.corrupt.iter().map(ToString::to_string).collect();
    let records = &snap.shards;
    let distributor = snap.distributor.as_ref().map(|(_, r)| r.clone());
    let doc = snap.assignment.as_ref().map(|(_, d)| d);
    let desired = snap.desired;
    let spares: Vec<SpareRow> = snap
        .presence
        .iter()
        .filter(|(_, (_, r))| !r.released)
        .map(|(id, (version, r))| SpareRow {
            identity: r.holder.clone(),
            incarnation: incarnation_text(r.incarnation),
            renewed: renewed(
                Some(*version),
                earlier
                    .as_ref()
                    .map(|e| e.presence.get(id).map(|(v, _)| *v)),
            ),
        })
        .collect();
    let count = shards
        .or(doc.as_ref().map(|d| d.shards))
        .unwrap_or_else(|| records.keys().next_back().map_or(0, |n| n + 1));
    let version_before = |n: u32| earlier.as_ref().map(|e| e.shards.get(&n).map(|(v, _)| *v));
    // Every shard below the count, and records beyond it (holders letting go after a
    // scale-down).
    let numbers: std::collections::BTreeSet<u32> =
        (0..count).chain(records.keys().copied()).collect();
    let shard_rows: Vec<ShardRow> = numbers
        .into_iter()
        .map(|n| {
            let rec = records.get(&n);
            ShardRow {
                shard: n,
                holder: rec.map(|(_, r)| r.holder.clone()),
                incarnation: rec.map(|(_, r)| incarnation_text(r.incarnation)),
                acked: rec.map(|(_, r)| r.acked),
                released: rec.is_some_and(|(_, r)| r.released),
                zone: rec.and_then(|(_, r)| r.zone.clone()),
                renewed: renewed(rec.map(|(ver, _)| *ver), version_before(n)),
            }
        })
        .collect();
    let owner = |s: u32| {
        records
            .get(&s)
            .filter(|(_, r)| !r.released)
            .map(|(_, r)| r.holder.clone())
    };
    let clusters: Vec<ClusterRow> = doc
        .iter()
        .flat_map(|d| d.clusters.iter())
        .map(|(id, &shard)| ClusterRow {
            id: id.clone(),
            shard,
            owner: owner(shard),
            home: doc
                .as_ref()
                .and_then(|d| d.homes.get(id).copied())
                .filter(|&h| h != shard),
        })
        .collect();
    let unowned = clusters
        .iter()
        .filter(|c| c.owner.is_none())
        .map(|c| c.id.clone())
        .collect();
    Report {
        store: String::new(),
        revision: now.revision,
        generation: doc.as_ref().map(|d| d.generation),
        shard_count: doc.as_ref().map(|d| d.shards),
        desired_shards: desired,
        distributor: distributor.map(|d| DistributorRow {
            holder: d.holder,
            incarnation: incarnation_text(d.incarnation),
            released: d.released,
        }),
        shards: shard_rows,
        clusters,
        unowned,
        spares,
        observed_secs: None,
        warnings,
        corrupt_records: snap
            .corrupt
            .iter()
            .map(|c| CorruptRow {
                key: c.key.clone(),
                reason: c.reason.clone(),
            })
            .collect(),
    }
}

fn table(r: &Report) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let gen_text = r.generation.map_or("none".into(), |g| g.to_string());
    let _ = writeln!(
        out,
        "store: {} (revision {})  generation: {gen_text}",
        r.store, r.revision
    );
    let count = r.shard_count.map_or("none".into(), |n| n.to_string());
    let desired = r.desired_shards.map_or("not set".into(), |n| n.to_string());
    let _ = writeln!(out, "shards: {count} (desired: {desired})");
    let dist = match &r.distributor {
        Some(d) if d.released => format!("{} (released)", d.holder),
        Some(d) => format!("{} (incarnation {})", d.holder, d.incarnation),
        None => "none".into(),
    };
    let _ = writeln!(out, "distributor: {dist}");
    if let Some(s) = r.observed_secs {
        let _ = writeln!(out, "leases observed over {s} s");
    }
    let _ = writeln!(
        out,
        "\nSHARD  HOLDER                INCARNATION       ACKED  STATE"
    );
    for s in &r.shards {
        let beyond = r.shard_count.is_some_and(|c| s.shard >= c);
        let state = match (&s.holder, s.released, s.renewed) {
            (None, ..) => "vacant",
            (_, true, _) if beyond => "released (beyond the count)",
            (_, false, _) if beyond => "held (beyond the count: letting go)",
            (_, true, _) => "released",
            (_, false, Some(true)) => "held (renewed)",
            (_, false, Some(false)) => "held (NOT renewed)",
            (_, false, None) => "held",
        };
        let _ = writeln!(
            out,
            "{:<6} {:<21} {:<17} {:<6} {state}",
            s.shard,
            s.holder.as_deref().unwrap_or("-"),
            s.incarnation.clone().unwrap_or_else(|| "-".into()),
            s.acked.map_or("-".into(), |a| a.to_string()),
        );
    }
    if !r.spares.is_empty() {
        let _ = writeln!(out, "\nSPARE                  INCARNATION       STATE");
        for s in &r.spares {
            let state = match s.renewed {
                Some(true) => "present (renewed)",
                Some(false) => "present (NOT renewed)",
                None => "present",
            };
            let _ = writeln!(out, "{:<22} {:<17} {state}", s.identity, s.incarnation);
        }
    }
    let rows = r
        .clusters
        .iter()
        .map(|c| (c.id.as_str(), c.shard, c.owner.as_deref(), c.home));
    write_clusters(&mut out, rows, r.unowned.len());
    for w in &r.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    if !r.corrupt_records.is_empty() {
        let _ = writeln!(out, "\nCORRUPT RECORD                REASON");
        for c in &r.corrupt_records {
            let _ = writeln!(out, "{:<29} {}", c.key, c.reason);
        }
        let _ = writeln!(
            out,
            "degraded store: replicas act on their last good values and rebuild these \
             (`fleetshard store check`, `fleetshard store repair --dry-run`)"
        );
    }
    out
}

/// The cluster table both protocols' `status` print: id, shard, owner (and the home shard
/// of a displaced cluster), then the totals.
pub(super) fn write_clusters<'a, S: std::fmt::Display>(
    out: &mut String,
    rows: impl ExactSizeIterator<Item = (&'a str, S, Option<&'a str>, Option<u32>)>,
    unowned: usize,
) {
    use std::fmt::Write as _;
    let total = rows.len();
    let _ = writeln!(out, "\nCLUSTER                                SHARD  OWNER");
    for (id, shard, owner, home) in rows {
        let home = home.map_or(String::new(), |h| format!(" (away from shard {h})"));
        let owner = owner.unwrap_or("UNOWNED");
        let _ = writeln!(out, "{id:<38} {:<6} {owner}{home}", shard.to_string());
    }
    let _ = writeln!(out, "\n{total} clusters, {unowned} unowned");
}

#[cfg(test)]
mod tests {
    use fleetshard_coord::store::Entry;

    use super::*;

    fn entry(key: &str, value: serde_json::Value, version: u64) -> Entry {
        Entry {
            key: key.into(),
            value: value.to_string().into_bytes(),
            version,
        }
    }

    #[test]
    fn owners_come_from_live_records_and_released_shards_are_unowned() {
        let shard = |h: &str, released| serde_json::json!({"holder": h, "incarnation": 1, "beat": 1, "acked": 2, "released": released});
        let listing = Listing {
            revision: 9,
            entries: vec![
                entry(
                    "fs/assignment",
                    serde_json::json!({"generation": 2, "shards": 3,
                        "clusters": {"a": 0, "b": 1, "c": 2}, "homes": {"c": 1}}),
                    3,
                ),
                entry("fs/shards/0", shard("r0", false), 5),
                entry("fs/shards/1", shard("r1", true), 6),
                entry("fs/shards/x", serde_json::json!(1), 7),
                entry("fs/shards/4", shard("r4", false), 8),
                entry("fs/desired-shards", serde_json::json!({"shards": 2}), 9),
                entry(
                    "fs/replicas/r9",
                    serde_json::json!({"holder": "r9", "incarnation": 3, "beat": 4}),
                    9,
                ),
                entry(
                    "fs/replicas/r0",
                    serde_json::json!({"holder": "r0", "incarnation": 1, "beat": 4, "released": true}),
                    9,
                ),
            ],
        };
        let r = build("fs/", None, &listing, None);
        assert_eq!(r.generation, Some(2));
        // 0..3 from the count, and 4 found beyond it.
        assert_eq!(
            r.shards.iter().map(|s| s.shard).collect::<Vec<_>>(),
            [0, 1, 2, 4]
        );
        assert_eq!(
            (r.shard_count, r.desired_shards, r.revision),
            (Some(3), Some(2), 9)
        );
        assert_eq!(r.spares.len(), 1);
        assert_eq!(r.spares[0].identity, "r9");
        assert!(table(&r).contains("beyond the count"));
        assert_eq!(r.clusters[0].owner.as_deref(), Some("r0"));
        assert_eq!(r.unowned, ["b", "c"]);
        assert_eq!(r.clusters[2].home, Some(1), "c is displaced from shard 1");
        assert_eq!(r.clusters[0].home, None);
        assert_eq!(r.warnings.len(), 1);
        assert_eq!(r.corrupt_records[0].key, "fs/shards/x");
        assert!(table(&r).contains("CORRUPT RECORD"));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["corrupt_records"][0]["key"], "fs/shards/x");
        assert!(table(&r).contains("2 unowned"));
        let again = build("fs/", None, &listing, Some(&listing));
        assert_eq!(again.shards[0].renewed, Some(false));
    }
}
