//! `fleetshard up`: the whole system on one machine with nothing but this binary (and
//! `git`): simulated clusters spread over three zones, served by `fleetshard simulate`
//! child processes (one per 500 clusters by default; `up/sims.rs`); a
//! local Git repository of demo apps (`up/demo.rs`) with drift to heal and one broken
//! manifest; N `fleetshard run` replicas as child processes on an embedded SQLite store
//! (or the store `--store` names; `up/procs.rs`), each appending its ownership changes to
//! `logs/<identity>.audit.jsonl`; and the dashboard with controls on 127.0.0.1, answering
//! only loopback names and taking controls only from its own origin (`up/guard.rs`). SIGINT or
//! SIGTERM stops the replicas (each hands its shard over), then the clusters' processes;
//! no child is left behind. `scripts/scale-run` measures a fleet at scale with it.

mod demo;
mod guard;
mod procs;
mod sims;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use fleetshard_coord::lease::LeaseTiming;
use fleetshard_replica::StoreUrl;
use fleetshard_replica::dashboard::{ClusterInfo, Clusters, Controls, Dashboard, Source};
use fleetshard_replica::store::OpenMode;
use fleetshard_util::duration::parse_go_duration;

use super::limits;
use super::run::ReconcilerArg;
use super::simulate::{self, SimCluster};
use demo::{DemoApp, Kind};

/// The fleet's root in the store (`run`'s default).
const ROOT: &str = "fleetshard/";
/// The zones of the clusters and replicas.
const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];

/// `fleetshard up` options.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  \
    fleetshard up\n  \
    fleetshard up --replicas 5 --clusters 200 --apps 5000\n  \
    fleetshard up --store etcd://127.0.0.1:2379 --reconciler none --clusters 10000 --apps 100000")]
pub struct UpArgs {
    /// Replicas (`fleetshard run` processes) to start; also the initial shard count.
    #[arg(long, value_name = "N", default_value_t = 3,
          value_parser = clap::value_parser!(u16).range(1..=50), env = "FLEETSHARD_UP_REPLICAS")]
    pub replicas: u16,
    /// Simulated clusters, spread over three zones.
    #[arg(long, value_name = "N", default_value_t = 24,
          value_parser = clap::value_parser!(u16).range(1..=i64::from(MAX_CLUSTERS)),
          env = "FLEETSHARD_UP_CLUSTERS")]
    pub clusters: u16,
    /// Applications (ConfigMaps, Deployments, Services; some drifted, one broken).
    #[arg(long, value_name = "N", default_value_t = 300,
          value_parser = clap::value_parser!(u32).range(1..=100_000), env = "FLEETSHARD_UP_APPS")]
    pub apps: u32,
    /// The dashboard's port on 127.0.0.1 (0: any free port).
    #[arg(
        long,
        value_name = "PORT",
        default_value_t = 8080,
        env = "FLEETSHARD_UP_PORT"
    )]
    pub port: u16,
    /// Working directory (store, repository, fleet files, logs), kept on exit. Default: a
    /// new temporary directory, removed on exit.
    #[arg(long, value_name = "DIR", env = "FLEETSHARD_UP_DIR")]
    pub dir: Option<PathBuf>,
    /// Exit (0) once every app but the broken one is Synced and Healthy and every cluster
    /// has an owner, printing the time it took (for tests and measurements).
    #[arg(long, env = "FLEETSHARD_UP_EXIT_WHEN_READY")]
    pub exit_when_ready: bool,
    /// The store the replicas share: `sqlite://FILE` or `etcd://HOST:PORT[,…]` (with the
    /// `etcd` feature), one no other fleet uses under `fleetshard/`. Default: `fleetshard.db`
    /// in the working directory.
    #[arg(long, value_name = "URL", env = "FLEETSHARD_UP_STORE")]
    pub store: Option<String>,
    /// What the replicas' workers do: `gitops` compares, syncs and records statuses;
    /// `none` leaves the apps alone (coordination only: ready once every cluster is owned).
    #[arg(
        long,
        value_enum,
        default_value = "gitops",
        env = "FLEETSHARD_UP_RECONCILER"
    )]
    pub reconciler: ReconcilerArg,
    /// How often `up`'s dashboard (and its readiness check) reads the store, e.g. `500ms`,
    /// `5s`: each read lists every record and app status, which costs at 100,000 apps.
    /// Once ready, it reads only while a dashboard page is open.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "500ms",
        value_parser = parse_go_duration,
        env = "FLEETSHARD_UP_DASHBOARD_INTERVAL"
    )]
    pub dashboard_interval: Duration,
    /// `fleetshard simulate` processes serving the clusters between them (each at most
    /// 1,000). Default: one per 500 clusters.
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..=i64::from(MAX_CLUSTERS)),
          env = "FLEETSHARD_UP_CLUSTER_PROCESSES")]
    pub cluster_processes: Option<u16>,
    /// ConfigMaps added to every app's directory besides its kind's one or two objects
    /// (apps of more objects, for measuring a replica's memory).
    #[arg(long, value_name = "N", default_value_t = 0,
          value_parser = clap::value_parser!(u8).range(0..=20), env = "FLEETSHARD_UP_EXTRA_OBJECTS")]
    pub extra_objects: u8,
}

/// The most simulated clusters `up` starts (each one listens on a port of its own).
pub const MAX_CLUSTERS: u16 = 10_000;

/// Runs everything until a signal (or, with `--exit-when-ready`, until ready).
pub fn run(args: UpArgs) -> anyhow::Result<()> {
    let started = tokio::time::Instant::now();
    let processes = sims::processes(
        usize::from(args.clusters),
        args.cluster_processes.map(usize::from),
    )?;
    check_replica_descriptors(&args);
    let (dir, temporary) = match &args.dir {
        Some(d) => (d.clone(), false),
        // A private directory of its own with a random name (mode 0700): one someone
        // else made first under a predictable name is never adopted.
        None => (
            tempfile::Builder::new()
                .prefix("fleetshard-up-")
                .tempdir()
                .context("creating a temporary directory")?
                .keep(),
            true,
        ),
    };
    for sub in ["fleet", "logs", "cache"] {
        std::fs::create_dir_all(dir.join(sub))
            .with_context(|| format!("creating {}", dir.join(sub).display()))?;
    }
    let result = super::runtime(super::Runtime::Replica)?
        .block_on(async { up(&args, processes, &dir, started).await });
    if temporary {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

async fn up(
    args: &UpArgs,
    processes: usize,
    dir: &std::path::Path,
    started: tokio::time::Instant,
) -> anyhow::Result<()> {
    let zones: Vec<String> = ZONES.iter().map(|z| (*z).to_owned()).collect();
    let apps = demo::apps(args.apps as usize, usize::from(args.clusters));
    // With reconciler `none` nothing creates Deployments: no controller polling 10k servers.
    let mut sims = sims::Sims::spawn(&sims::Launch {
        exe: std::env::current_exe().context("finding this binary to start clusters")?,
        dir,
        clusters: usize::from(args.clusters),
        processes,
        zones: &zones,
        namespaces: &[demo::DEMO_NAMESPACE],
        objects: drifted(&apps),
        ready_deployments: args.reconciler == ReconcilerArg::Gitops,
    })?;
    let clusters = tokio::select! {
        c = sims.ready() => c?,
        r = super::run::wait_for_signal() => {
            eprintln!("fleetshard up: stopping the simulated clusters");
            sims.shutdown().await;
            return r;
        }
    };
    let repo = dir.join("repo");
    if repo.exists() {
        std::fs::remove_dir_all(&repo).with_context(|| format!("removing {}", repo.display()))?;
    }
    demo::write_repository(&repo, &apps, usize::from(args.extra_objects))?;
    let fleet = dir.join("fleet");
    simulate::write_private(
        &fleet.join(simulate::CLUSTERS_FILE),
        &simulate::secrets_yaml(demo::APPS_NAMESPACE, &clusters),
    )?;
    let applications = demo::applications(&apps, &clusters, &format!("file://{}", repo.display()));
    simulate::write_private(&fleet.join("apps.json"), &applications.to_string())?;

    let store_url = store_url(args.store.as_deref(), dir)?;
    let store = store_url
        .parse::<StoreUrl>()
        .map_err(anyhow::Error::msg)
        .and_then(|u| Ok(u.open_in(OpenMode::Create)?.store))
        .with_context(|| format!("opening {store_url}"))?;
    let replicas = procs::Replicas::start(
        procs::Launch {
            exe: std::env::current_exe().context("finding this binary to start replicas")?,
            store: store_url.clone(),
            fleet: fleet.clone(),
            dir: dir.to_owned(),
            shards: u32::from(args.replicas),
            zones,
            reconciler: args.reconciler,
        },
        usize::from(args.replicas),
        store.clone(),
        ROOT.into(),
    )?;
    let known = dashboard_clusters(&clusters, &apps);
    let token = simulate::random_hex(16)?;
    let controls: Arc<dyn Controls> = Arc::new(replicas.clone());
    let mut dashboard = Dashboard::start(
        Source {
            store,
            root: ROOT.into(),
            clusters: Arc::new(move || known.clone()),
            interval: args.dashboard_interval,
            lease: LeaseTiming::default().duration,
            renew: LeaseTiming::default().renew_every,
            argocd: None,
        },
        Some((controls, token)),
    );
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], args.port)))
        .await
        .with_context(|| {
            format!(
                "listening on 127.0.0.1:{} (choose another with --port)",
                args.port
            )
        })?;
    let addr = listener.local_addr()?;
    // The page holds the control token: answered only to loopback names (no DNS
    // rebinding), controls only from its own origin (up/guard.rs).
    let router = guard::LoopbackOnly::new(addr.port()).guard(dashboard.router().route(
        "/",
        axum::routing::get(|| async { axum::response::Redirect::to("/dashboard") }),
    ));
    let server = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            tracing::error!("the dashboard's HTTP server failed: {e}");
        }
    });
    super::print_stdout(&instructions(args, addr, dir, &store_url, &replicas, &sims))?;

    let good = apps.iter().filter(|a| a.kind != Kind::Broken).count();
    let gitops = args.reconciler == ReconcilerArg::Gitops;
    let mut ready = false;
    let outcome = loop {
        tokio::select! {
            r = super::run::wait_for_signal() => break r,
            published = dashboard.next() => {
                let Some(p) = published else { break Ok(()) };
                let s = &p.snapshot;
                let apps_ready = !gitops || s.apps.good >= good;
                if !ready && apps_ready && s.unowned == 0 && !s.clusters.is_empty() {
                    ready = true;
                    let secs = started.elapsed().as_secs_f64();
                    let apps = if gitops {
                        format!("all {good} good apps Synced and Healthy")
                    } else {
                        "reconciler none (apps untouched)".to_owned()
                    };
                    super::print_stdout(&format!(
                        "ready: {apps}, every cluster owned, {secs:.1} s after start\n"
                    ))?;
                    if args.exit_when_ready {
                        break Ok(());
                    }
                    // Ready is known: the store is read for the page only while it is
                    // open (at 100,000 apps each reading took about a core at 5 s).
                    dashboard.read_on_demand();
                }
            }
        }
    };
    eprintln!("fleetshard up: stopping the replicas, then the simulated clusters' processes");
    server.abort();
    drop(dashboard);
    let stopping = replicas.clone();
    tokio::task::spawn_blocking(move || stopping.shutdown())
        .await
        .context("stopping the replicas")?;
    sims.shutdown().await;
    outcome
}

/// The store `--store` names (never `memory://`: the replicas are other processes), or
/// `sqlite://DIR/fleetshard.db`.
fn store_url(given: Option<&str>, dir: &std::path::Path) -> anyhow::Result<String> {
    let Some(url) = given else {
        return Ok(format!("sqlite://{}", dir.join("fleetshard.db").display()));
    };
    match url.parse::<StoreUrl>().map_err(anyhow::Error::msg)? {
        StoreUrl::Memory => anyhow::bail!(
            "--store {url}: the replicas are separate processes and memory:// is private to \
             one; use sqlite://FILE or etcd://HOST:PORT"
        ),
        _ => Ok(url.to_owned()),
    }
}

/// The drifted ConfigMaps, by cluster number, as someone's `kubectl edit` would have left
/// them (the namespace `demo` is created on every cluster first).
fn drifted(apps: &[DemoApp]) -> std::collections::BTreeMap<usize, Vec<serde_json::Value>> {
    let mut out = std::collections::BTreeMap::<usize, Vec<_>>::new();
    for a in apps.iter().filter(|a| a.drift) {
        out.entry(a.cluster)
            .or_default()
            .push(demo::config_map(&a.name, demo::DRIFTED));
    }
    out
}

/// Warns when a replica's share of the clusters may need more descriptors than the limit
/// allows (the replicas raise theirs to the hard limit, as `up` does; with `gitops` each
/// owned cluster holds about [`limits::PER_SIMULATED_CLUSTER`] connections).
fn check_replica_descriptors(args: &UpArgs) {
    let limit = limits::raise_open_files();
    let share = u64::from(args.clusters).div_ceil(u64::from(args.replicas));
    let need = limits::for_simulated_clusters(share);
    if args.reconciler == ReconcilerArg::Gitops && need > limit {
        eprintln!(
            "fleetshard up: warning: each replica may own about {share} clusters and need \
             about {need} open files with reconciler gitops, over the limit of {limit}: \
             start more replicas, or raise the hard limit"
        );
    }
}

/// What the dashboard shows of the clusters: names, servers, zones, apps.
fn dashboard_clusters(clusters: &[SimCluster], apps: &[DemoApp]) -> Clusters {
    let mut out: Clusters = clusters
        .iter()
        .map(|c| {
            (
                c.uid.clone(),
                ClusterInfo {
                    name: c.name.clone(),
                    server: c.server.clone(),
                    zone: c.zone.clone(),
                    apps: Vec::new(),
                },
            )
        })
        .collect();
    for a in apps {
        if let Some(c) = out.get_mut(&clusters[a.cluster].uid) {
            c.apps.push(format!("{}/{}", demo::APPS_NAMESPACE, a.name));
        }
    }
    out
}

fn instructions(
    args: &UpArgs,
    addr: SocketAddr,
    dir: &std::path::Path,
    store: &str,
    replicas: &procs::Replicas,
    sims: &sims::Sims,
) -> String {
    let pids: Vec<String> = replicas.pids().iter().map(u32::to_string).collect();
    let sim_pids: Vec<String> = sims.pids().iter().map(u32::to_string).collect();
    format!(
        "fleetshard up: {replicas} replicas (pids {pids}), {clusters} SIMULATED clusters in 3 zones, \
         {apps} apps from a local Git repository; reconciler {reconciler}; store {store}; files in {dir}\n\
         simulated clusters served by {n} `fleetshard simulate` processes: {sim_pids}\n\
         \n  Open  http://{addr}/dashboard\n\
         \nThen try:\n\
         \x20 - kill a replica (button, or kill -9 PID): its shard fails over, its clusters are owned again within seconds\n\
         \x20 - pause one (SIGSTOP): its lease expires, another replica takes over; resume it: it steps back\n\
         \x20 - add a replica, or change the shard count (fleetshard scale N --store {store})\n\
         \x20 - fleetshard status --store {store} --clusters {clusters_file}   and   fleetshard apps --store {store}\n\
         \x20 - the app broken-manifest shows a ComparisonError; drifted ConfigMaps are healed\n\
         \nCtrl-C stops everything.\n",
        replicas = args.replicas,
        pids = pids.join(", "),
        n = sim_pids.len(),
        sim_pids = sim_pids.join(", "),
        clusters = args.clusters,
        apps = args.apps,
        reconciler = if args.reconciler == ReconcilerArg::Gitops {
            "gitops"
        } else {
            "none"
        },
        dir = dir.display(),
        clusters_file = dir.join("fleet").join(simulate::CLUSTERS_FILE).display(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_is_sqlite_in_the_directory_unless_given_and_never_memory() {
        let dir = std::path::Path::new("/tmp/up-dir");
        assert_eq!(
            store_url(None, dir).unwrap(),
            "sqlite:///tmp/up-dir/fleetshard.db"
        );
        assert_eq!(
            store_url(Some("sqlite:///var/fleet.db"), dir).unwrap(),
            "sqlite:///var/fleet.db"
        );
        let e = store_url(Some("memory://"), dir).unwrap_err().to_string();
        assert!(
            e.contains("memory://") && e.contains("separate processes"),
            "{e}"
        );
        assert!(store_url(Some("nonsense"), dir).is_err());
    }
}
