//! Refresh throughput of the GitOps reconciler against fake API servers, by replica count.
//!
//! `cargo bench -p fleetshard-gitops --bench reconcile_throughput -- [APPS]
//! [MANIFESTS] [CLUSTERS] [ROUNDS] [REPLICAS] [WORKERS]` (defaults 200 5 1 5 1 20): one
//! local Git repository with one directory of MANIFESTS ConfigMaps per app, apps spread
//! round-robin over CLUSTERS fake API servers. REPLICAS is a comma-separated list of
//! replica counts (e.g. `1,2,4`); for each count R the same fleet (fresh fake API servers,
//! the same repository) is reconciled by R replicas at once, each its own
//! `GitOpsReconciler` (own `RepoCache`, `ClusterConnections` and status sink) owning the
//! clusters the balanced placement gives its shard, with WORKERS concurrent refresh
//! workers each (20: Argo CD's status processors). Per count: the first (cold) refresh
//! round, the sync, ROUNDS warm refresh rounds, in total and per replica, the CPU used,
//! and what each replica holds.
//!
//! Every replica runs in this one process: they share its cores with each other and with
//! the fake API servers, so total throughput here cannot grow with R.

use std::sync::Arc;

use fleetshard_controller::AppKey;
use fleetshard_core::placement::{PlacementConfig, place};
use fleetshard_core::{App, Cluster, Destination, ShardSpec};
use fleetshard_gitops::live::{ClusterAccess, ClusterConnections, ClusterCredentials, LiveOptions};
use fleetshard_gitops::reconciler::{
    AppTarget, FixedClock, GitOpsReconciler, MemorySink, ReconcilerConfig, StaticInventory,
};
use fleetshard_gitops::source::{RepoCache, RepoCacheConfig};
use fleetshard_testsupport::git::Git;
use fleetshard_testsupport::kube_api::FakeApiServer;
use tokio::time::Instant;

mod common;
use common::{Op, auto_synced, median, round};

/// Argo CD's status processors (`--status-processors`), the default of WORKERS.
const WORKERS: usize = 20;

/// The command line.
struct Args {
    apps: usize,
    manifests: usize,
    clusters: usize,
    rounds: usize,
    replicas: Vec<usize>,
    workers: usize,
}

fn args() -> Args {
    let raw: Vec<String> = std::env::args()
        .filter(|a| a != "--bench")
        .skip(1)
        .collect();
    let num = |i: usize, d: usize| {
        raw.get(i).map_or(d, |a| {
            a.parse()
                .unwrap_or_else(|_| panic!("argument {}: {a:?} is not a number", i + 1))
        })
    };
    let replicas = raw.get(4).map_or(vec![1], |list| {
        list.split(',')
            .map(|r| match r.trim().parse() {
                Ok(n) if n > 0 => n,
                _ => panic!("REPLICAS: {r:?} is not a positive number"),
            })
            .collect()
    });
    let a = Args {
        apps: num(0, 200),
        manifests: num(1, 5),
        clusters: num(2, 1),
        rounds: num(3, 5).max(1),
        replicas,
        workers: num(5, WORKERS).max(1),
    };
    assert!(a.clusters > 0, "CLUSTERS must be at least 1");
    a
}

/// One directory of `manifests` ConfigMaps per app, committed on `main`.
fn write_repo(dir: &std::path::Path, apps: usize, manifests: usize) -> Git {
    let git = Git::init(dir);
    for a in 0..apps {
        for m in 0..manifests {
            git.write(
                &format!("apps/a{a}/cm{m}.yaml"),
                &format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a{a}-cm{m}\n  labels:\n    app: a{a}\ndata:\n  key: value-{m}\n  other: \"{a}\"\n"
                ),
            );
        }
    }
    git.commit("apps");
    git
}

/// The fleet: one fake API server per cluster, app `a` on cluster `a % clusters`.
struct Fleet {
    /// Kept alive while the fleet is reconciled.
    _servers: Vec<FakeApiServer>,
    clusters: Vec<ClusterAccess>,
    inventory: Arc<StaticInventory>,
    /// Per app, its key and its cluster's index.
    apps: Vec<(AppKey, usize)>,
}

async fn start_fleet(repo: &str, apps: usize, clusters: usize) -> Fleet {
    let mut servers = Vec::new();
    let mut access = Vec::new();
    for c in 0..clusters {
        let server = FakeApiServer::start().await.expect("fake API server");
        access.push(ClusterAccess {
            id: format!("c{c}"),
            server: server.url(),
            credentials: ClusterCredentials::default(),
        });
        servers.push(server);
    }
    let inventory = Arc::new(StaticInventory::default());
    let mut keys = Vec::new();
    let default_project =
        std::sync::Arc::new(fleetshard_manifest::AppProject::builtin_default("argocd"));
    for a in 0..apps {
        let c = a % clusters;
        let app = App {
            namespace: "argocd".into(),
            name: format!("a{a}"),
            project: "default".into(),
            destination: Destination {
                server: Some(access[c].server.clone()),
                name: None,
                namespace: Some("default".into()),
            },
        };
        let spec = auto_synced(repo, format!("apps/a{a}"));
        keys.push((AppKey::of(&app), c));
        inventory.insert(AppTarget {
            app,
            spec,
            cluster: access[c].clone(),
            cluster_name: access[c].id.clone(),
            project: Some(default_project.clone()),
            repositories: Default::default(),
            argocd_cm: Default::default(),
        });
    }
    Fleet {
        _servers: servers,
        clusters: access,
        inventory,
        apps: keys,
    }
}

/// The shard of each cluster: fleetshard's balanced placement over `replicas` equal
/// shards, loads = app counts (what the distributor would commit).
fn owners(fleet: &Fleet, replicas: usize) -> Vec<usize> {
    let clusters: Vec<Cluster> = fleet
        .clusters
        .iter()
        .map(|c| Cluster::new(c.id.clone(), c.server.clone()))
        .collect();
    let mut loads = vec![0u64; clusters.len()];
    for &(_, c) in &fleet.apps {
        loads[c] += 1;
    }
    let shards = vec![ShardSpec::default(); replicas];
    place(
        &clusters,
        &loads,
        &shards,
        None,
        &PlacementConfig::default(),
    )
    .shards
    .iter()
    .map(|s| s.expect("every cluster placed") as usize)
    .collect()
}

/// One replica: its reconciler, its sink, its apps and clusters.
struct Replica {
    reconciler: Arc<GitOpsReconciler>,
    sink: Arc<MemorySink>,
    repos: RepoCache,
    apps: Arc<Vec<AppKey>>,
    clusters: Vec<String>,
}

fn replicas(fleet: &Fleet, count: usize, cache_dir: &std::path::Path) -> Vec<Replica> {
    let owner = owners(fleet, count);
    (0..count)
        .map(|r| {
            let repos = RepoCache::new(RepoCacheConfig::new(cache_dir.join(format!("r{r}"))));
            let sink = MemorySink::new();
            // Every replica reads the whole inventory, as in `fleetshard run`.
            let reconciler = Arc::new(GitOpsReconciler::new(
                fleet.inventory.clone(),
                repos.clone(),
                ClusterConnections::new(LiveOptions::default()),
                sink.clone(),
                Arc::new(|| {
                    Some(tokio::time::Instant::now() + std::time::Duration::from_secs(3600))
                }),
                Arc::new(FixedClock("2026-11-21T00:00:00Z".into())),
                ReconcilerConfig::default(),
            ));
            let apps = fleet
                .apps
                .iter()
                .filter(|(_, c)| owner[*c] == r)
                .map(|(k, _)| k.clone())
                .collect();
            let mut clusters: Vec<String> = (0..fleet.clusters.len())
                .filter(|c| owner[*c] == r)
                .map(|c| fleet.clusters[c].id.clone())
                .collect();
            clusters.sort();
            Replica {
                reconciler,
                sink,
                repos,
                apps: Arc::new(apps),
                clusters,
            }
        })
        .collect()
}

/// Runs `op` on every app of one replica with `workers` concurrent tasks; returns the
/// elapsed seconds.
async fn timed_round(
    reconciler: Arc<GitOpsReconciler>,
    apps: Arc<Vec<AppKey>>,
    op: Op,
    workers: usize,
) -> f64 {
    let start = Instant::now();
    round(&reconciler, &apps, op, workers).await;
    start.elapsed().as_secs_f64()
}

/// One round on every replica at once.
struct Phase {
    /// Until the last replica finished.
    wall: f64,
    /// Each replica's own round.
    each: Vec<f64>,
}

async fn phase(replicas: &[Replica], op: Op, workers: usize) -> Phase {
    let start = Instant::now();
    let tasks: Vec<_> = replicas
        .iter()
        .map(|r| {
            tokio::spawn(timed_round(
                r.reconciler.clone(),
                r.apps.clone(),
                op,
                workers,
            ))
        })
        .collect();
    let mut each = Vec::new();
    for t in tasks {
        each.push(t.await.expect("replica"));
    }
    Phase {
        wall: start.elapsed().as_secs_f64(),
        each,
    }
}

/// CPU seconds this process has used (user + system, from `/proc/self/stat` in USER_HZ =
/// 100 ticks per second, as on every Linux); `None` elsewhere.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces; the fields after it are plain.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// "min–max" of per-replica rates (one value when they agree to the unit).
fn span(rates: &[f64]) -> String {
    let lo = rates.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = rates.iter().copied().fold(0.0, f64::max);
    if lo.round() == hi.round() {
        format!("{lo:.0}")
    } else {
        format!("{lo:.0}–{hi:.0}")
    }
}

impl Phase {
    fn total(&self, apps: usize) -> f64 {
        apps as f64 / self.wall
    }

    fn per_replica(&self, replicas: &[Replica]) -> Vec<f64> {
        replicas
            .iter()
            .zip(&self.each)
            .map(|(r, s)| r.apps.len() as f64 / s)
            .collect()
    }
}

/// Reconciles the fleet with `count` replicas and prints the figures.
async fn measure(a: &Args, repo: &str, count: usize, cache_dir: &std::path::Path) {
    // Other processes on a shared machine take cores from the measurement: say how busy.
    let load_before = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split(' ').next().map(str::to_owned));
    let fleet = start_fleet(repo, a.apps, a.clusters).await;
    let reps = replicas(&fleet, count, cache_dir);
    let cold = phase(&reps, Op::Refresh, a.workers).await;
    let sync = phase(&reps, Op::Operate, a.workers).await;
    let mut warm = Vec::new();
    let cpu_before = cpu_seconds();
    for _ in 0..a.rounds {
        warm.push(phase(&reps, Op::Refresh, a.workers).await);
    }
    // Cores busy during the warm rounds (replicas and fake API servers together).
    let warm_wall: f64 = warm.iter().map(|p| p.wall).sum();
    let cpu = cpu_seconds()
        .zip(cpu_before)
        .map(|(after, before)| after - before);

    let warm_total = median(warm.iter().map(|p| p.total(a.apps)).collect());
    let warm_each: Vec<f64> = (0..count)
        .map(|r| median(warm.iter().map(|p| p.per_replica(&reps)[r]).collect()))
        .collect();
    println!(
        "replicas={count} apps={} manifests/app={} clusters={} workers/replica={} (load average before: {})",
        a.apps,
        a.manifests,
        a.clusters,
        a.workers,
        load_before.as_deref().unwrap_or("unknown")
    );
    println!(
        "  cold refresh: {:.3} s, {:.0} apps/s in all, per replica {} apps/s",
        cold.wall,
        cold.total(a.apps),
        span(&cold.per_replica(&reps))
    );
    println!(
        "  sync (apply {} objects): {:.3} s, {:.0} apps/s in all, per replica {} apps/s",
        a.apps * a.manifests,
        sync.wall,
        sync.total(a.apps),
        span(&sync.per_replica(&reps))
    );
    println!(
        "  warm refresh, median of {} rounds: {warm_total:.0} apps/s in all (best {:.0}), per replica {} apps/s",
        a.rounds,
        warm.iter().map(|p| p.total(a.apps)).fold(0.0, f64::max),
        span(&warm_each)
    );
    if let Some(cpu) = cpu {
        // Apps per CPU-second does not depend on how many cores other processes left us.
        println!(
            "  CPU during the warm rounds: {:.2} cores busy (this process), {:.0} apps per CPU-second",
            cpu / warm_wall,
            (a.apps * a.rounds) as f64 / cpu
        );
    }

    for (r, rep) in reps.iter().enumerate() {
        let statuses = rep.sink.all();
        let synced = statuses
            .values()
            .filter(|s| {
                s.comparison
                    .as_ref()
                    .is_some_and(|c| c.sync.status == "Synced")
            })
            .count();
        let started = rep.reconciler.clusters().started();
        let cached = rep.reconciler.clusters().cached_objects();
        // What the replica holds must be exactly its share: its apps' statuses, its
        // clusters' connections, and every object on them (the caches watch whole kinds).
        assert_eq!(synced, rep.apps.len(), "replica {r}: every app is Synced");
        assert_eq!(statuses.len(), rep.apps.len(), "replica {r}: only its apps");
        assert_eq!(started, rep.clusters, "replica {r}: only its clusters");
        assert_eq!(
            cached,
            rep.apps.len() * a.manifests,
            "replica {r}: cached objects"
        );
        println!(
            "  replica {r}: clusters {:?}, apps {}, live objects cached {cached}, manifest trees read {}, statuses {}",
            rep.clusters,
            rep.apps.len(),
            rep.repos.stats().reads,
            statuses.len()
        );
    }
}

#[tokio::main]
async fn main() {
    let a = args();
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = write_repo(&tmp.path().join("repo"), a.apps, a.manifests);
    for (i, &count) in a.replicas.iter().enumerate() {
        // Fresh fake API servers per count: every count starts from empty clusters.
        measure(
            &a,
            &repo.path(),
            count,
            &tmp.path().join(format!("cache{i}")),
        )
        .await;
    }
}
