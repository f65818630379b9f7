//! `fleetshard status --protocol argocd` (also chosen when the store holds Argo CD's shard
//! mapping and no fenced records under `--root`): the mapping — each shard's controller and
//! written heartbeat time — and, given the fleet (`--fleet`/`--clusters`), each cluster's
//! shard by Argo CD's algorithm and the controller holding it.
//!
//! The written `HeartbeatTime` is shown as written, never compared with this machine's
//! clock (G6): whether an entry is alive can only be judged by watching it change, which
//! `--observe SECS` does (the map is read every 200 ms meanwhile; each entry's
//! *seen-unchanged* age is how long its exact content stayed the same).

use std::time::Duration;

use anyhow::Context as _;
use fleetshard_coord::argocd::{ChangeObserver, MAPPING_KEY, ShardEntry, decode};
use fleetshard_coord::lease::Mono;
use fleetshard_coord::store::Store;
use fleetshard_core::argo::ArgoControllerAssignment;
use fleetshard_replica::store::OpenMode;
use serde::Serialize;

use super::{Output, StatusArgs};
use crate::cli::input::{self, FleetArgs};
use crate::cli::print_stdout;
use crate::cli::protocol::{ENV_ALGORITHM, Protocol, algorithm, env_settings};

/// The options `status` adds for the argocd protocol.
#[derive(Debug, Clone, clap::Args)]
pub struct ArgoStatusArgs {
    /// Which protocol's records to show. Default: argocd when the store holds Argo CD's
    /// shard mapping and no fenced records under --root, else fenced.
    #[arg(long, value_enum, env = "FLEETSHARD_PROTOCOL")]
    pub protocol: Option<Protocol>,
    /// The fleet: each cluster's name and server beside its id (argocd: also its shard
    /// and owner, computed as Argo CD does).
    #[command(flatten)]
    pub fleet: FleetArgs,
    /// argocd: Argo CD's distribution algorithm (default legacy).
    #[arg(long, value_name = "NAME", env = ENV_ALGORITHM)]
    pub sharding_algorithm: Option<String>,
}

/// One mapping entry in the report.
#[derive(Debug, Serialize)]
struct EntryRow {
    shard: i64,
    /// `None`: free.
    controller: Option<String>,
    /// As written (RFC 3339), `None` for Go's zero time.
    heartbeat_time: Option<String>,
    /// With `--observe`: how long this exact content was seen unchanged, in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    unchanged_secs: Option<f64>,
}

/// One cluster in the report.
#[derive(Debug, Serialize)]
struct ClusterRow {
    id: String,
    name: String,
    server: String,
    shard: i64,
    owner: Option<String>,
}

/// The whole report (the `--output json` document).
#[derive(Debug, Serialize)]
struct Report {
    store: String,
    key: String,
    replicas: u32,
    algorithm: String,
    entries: Vec<EntryRow>,
    clusters: Vec<ClusterRow>,
    unowned: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    observed_secs: Option<u64>,
    warnings: Vec<String>,
}

/// Whether `status` should show the argocd protocol (see [`ArgoStatusArgs::protocol`]).
pub fn selected(args: &StatusArgs) -> anyhow::Result<bool> {
    if let Some(p) = args.argocd.protocol {
        return Ok(p == Protocol::Argocd);
    }
    let store = args.store.open(OpenMode::ReadOnly)?;
    let root = args.store.root()?.to_owned();
    crate::cli::runtime(crate::cli::Runtime::OneShot)?.block_on(async {
        let map = store
            .get(MAPPING_KEY)
            .await
            .with_context(|| format!("reading {}", store.describe()))?;
        let fenced = store.list(&root).await?;
        Ok(map.is_some() && fenced.entries.is_empty())
    })
}

/// Prints the argocd status.
pub fn run(args: &StatusArgs) -> anyhow::Result<()> {
    let settings = env_settings();
    let alg = algorithm(args.argocd.sharding_algorithm.as_deref())?;
    let fleet = match (&args.argocd.fleet.fleet, &args.argocd.fleet.clusters) {
        (None, None) => None,
        _ => {
            let loaded = input::load(&args.argocd.fleet.source()?, input::Specs::Drop)?;
            for w in &loaded.warnings {
                tracing::warn!(source = %w.source, "{}", w.message);
            }
            Some(loaded.fleet)
        }
    };
    let store = args.store.open(OpenMode::ReadOnly)?;
    let (entries, ages) = crate::cli::runtime(crate::cli::Runtime::OneShot)?
        .block_on(read(store.as_ref(), args.observe.unwrap_or(0)))?;
    let replicas = args
        .shards
        .or(u32::try_from(settings.replicas).ok().filter(|n| *n > 0))
        .unwrap_or(u32::try_from(entries.len()).unwrap_or(u32::MAX));
    let mut report = build(&entries, ages.as_deref(), replicas, fleet.as_ref(), alg);
    report.store = store.describe();
    report.observed_secs = args.observe.filter(|&s| s > 0);
    let text = match args.output {
        Output::Json => format!("{}\n", serde_json::to_string_pretty(&report)?),
        Output::Table => table(&report),
    };
    print_stdout(&text)
}

/// The mapping (empty if absent) and, when observing, each entry's seen-unchanged age.
async fn read(
    store: &dyn Store,
    observe: u64,
) -> anyhow::Result<(Vec<ShardEntry>, Option<Vec<Duration>>)> {
    let read_once = || async {
        let found = store
            .get(MAPPING_KEY)
            .await
            .with_context(|| format!("reading {}", store.describe()))?;
        match found {
            None => Ok::<_, anyhow::Error>(Vec::new()),
            Some(e) => {
                let text = std::str::from_utf8(&e.value)
                    .with_context(|| format!("{MAPPING_KEY}: not UTF-8"))?;
                decode(text).with_context(|| format!("{MAPPING_KEY}: cannot decode"))
            }
        }
    };
    if observe == 0 {
        return Ok((read_once().await?, None));
    }
    let start = tokio::time::Instant::now();
    let mut seen = ChangeObserver::new();
    let mono = || Mono(start.elapsed());
    let end = start + Duration::from_secs(observe);
    loop {
        let entries = read_once().await?;
        seen.observe(&entries, mono());
        if tokio::time::Instant::now() >= end {
            let ages = entries
                .iter()
                .map(|e| seen.unchanged_for(e, mono()))
                .collect();
            return Ok((entries, Some(ages)));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn build(
    entries: &[ShardEntry],
    ages: Option<&[Duration]>,
    replicas: u32,
    fleet: Option<&fleetshard_core::Fleet>,
    alg: fleetshard_core::argo::ArgoAlgorithm,
) -> Report {
    let mut warnings = Vec::new();
    if !entries.is_empty() && entries.len() != replicas as usize {
        warnings.push(format!(
            "the map has {} entries for {replicas} replicas",
            entries.len()
        ));
    }
    let rows = entries
        .iter()
        .enumerate()
        .map(|(i, e)| EntryRow {
            shard: e.shard_number,
            controller: (!e.is_free()).then(|| e.controller_name.clone()),
            heartbeat_time: (!e.heartbeat_time.is_zero()).then(|| e.heartbeat_time.to_rfc3339()),
            unchanged_secs: ages.and_then(|a| a.get(i)).map(Duration::as_secs_f64),
        })
        .collect();
    let owner_of = |shard: i64| {
        entries
            .iter()
            .find(|e| e.shard_number == shard && !e.is_free())
            .map(|e| e.controller_name.clone())
    };
    let clusters: Vec<ClusterRow> = match fleet {
        None => Vec::new(),
        Some(f) => {
            let a = ArgoControllerAssignment::compute(alg, replicas, &f.clusters, &f.apps);
            f.clusters
                .iter()
                .zip(a.shards())
                .map(|(c, &shard)| ClusterRow {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    server: c.server.clone(),
                    shard,
                    owner: if c.skip_reconcile {
                        None
                    } else {
                        owner_of(shard)
                    },
                })
                .collect()
        }
    };
    let unowned = clusters
        .iter()
        .filter(|c| c.owner.is_none())
        .map(|c| c.id.clone())
        .collect();
    Report {
        store: String::new(),
        key: MAPPING_KEY.to_owned(),
        replicas,
        algorithm: alg.name().to_owned(),
        entries: rows,
        clusters,
        unowned,
        observed_secs: None,
        warnings,
    }
}

fn table(r: &Report) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(out, "store: {}  key: {}", r.store, r.key);
    let _ = writeln!(
        out,
        "protocol: argocd  replicas: {}  algorithm: {}",
        r.replicas, r.algorithm
    );
    if let Some(s) = r.observed_secs {
        let _ = writeln!(out, "observed over {s} s");
    }
    if r.entries.is_empty() {
        let _ = writeln!(out, "\nno shard mapping in the store");
    } else {
        let _ = writeln!(
            out,
            "\nSHARD  CONTROLLER                     HEARTBEAT TIME (as written)  UNCHANGED"
        );
    }
    for e in &r.entries {
        let unchanged = match (e.unchanged_secs, &e.controller) {
            (None, _) => "-".to_owned(),
            (Some(s), _) => format!("{s:.1} s"),
        };
        let _ = writeln!(
            out,
            "{:<6} {:<30} {:<28} {unchanged}",
            e.shard,
            e.controller.as_deref().unwrap_or("(free)"),
            e.heartbeat_time.as_deref().unwrap_or("-"),
        );
    }
    if !r.clusters.is_empty() {
        let rows = r.clusters.iter().map(|c| super::ClusterLine {
            id: &c.id,
            name: Some(&c.name),
            server: Some(&c.server),
            shard: c.shard.to_string(),
            owner: c.owner.as_deref(),
            state: "free shard",
            home: None,
        });
        super::write_clusters(&mut out, rows, r.unowned.len());
    }
    for w in &r.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}

#[cfg(test)]
mod tests {
    use fleetshard_coord::argocd::WallTime;
    use fleetshard_core::argo::ArgoAlgorithm;
    use fleetshard_core::{Cluster, Fleet};

    use super::*;

    #[test]
    fn owners_are_the_controllers_of_argo_cds_shards() {
        let entries = [
            ShardEntry::held(0, "r0", WallTime::from_unix_seconds(1_795_000_000)),
            ShardEntry::free(1),
        ];
        let fleet = Fleet {
            clusters: (0..6)
                .map(|i| Cluster::new(format!("{i}"), format!("https://c{i}")))
                .collect(),
            apps: Vec::new(),
        };
        let r = build(&entries, None, 2, Some(&fleet), ArgoAlgorithm::Legacy);
        let expected =
            ArgoControllerAssignment::compute(ArgoAlgorithm::Legacy, 2, &fleet.clusters, &[]);
        for (c, s) in r.clusters.iter().zip(expected.shards()) {
            assert_eq!(c.shard, *s);
            assert_eq!(c.owner.as_deref(), (*s == 0).then_some("r0"), "{c:?}");
        }
        assert_eq!(
            r.unowned.len(),
            r.clusters.iter().filter(|c| c.shard == 1).count()
        );
        assert!(r.warnings.is_empty());
        let text = table(&r);
        assert!(
            text.contains("(free)") && text.contains("2026-11-"),
            "{text}"
        );
        let odd = build(
            &entries,
            Some(&[Duration::from_secs(3), Duration::ZERO]),
            3,
            None,
            ArgoAlgorithm::Legacy,
        );
        assert_eq!(odd.warnings.len(), 1);
        assert_eq!(odd.entries[0].unchanged_secs, Some(3.0));
    }
}
