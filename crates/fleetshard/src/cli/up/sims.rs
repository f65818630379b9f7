//! The simulated clusters of `fleetshard up`: `fleetshard simulate` child processes (this
//! binary again), each serving a slice of the fleet (`--first`), so that no process holds
//! the descriptors of ten thousand clusters and their watchers: one process per
//! [`DEFAULT_PER_PROCESS`] clusters unless told otherwise. Each seeds its clusters (the
//! demo namespace, the drifted ConfigMaps) before it prints `ready`, and plays their
//! Deployment controller when asked. [`Sims::shutdown`] stops them (SIGTERM, then SIGKILL);
//! a child still running when [`Sims`] is dropped is killed, so no path out of `up`
//! leaves one behind.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, bail};
use rustix::process::Signal;
use serde_json::Value;
use tokio::io::AsyncBufReadExt as _;
use tokio::process::{Child, Command};
use tokio::sync::oneshot;

use super::super::limits;
use super::super::simulate::{self, SimCluster};

/// Clusters per `simulate` process unless `--cluster-processes` says otherwise: about
/// 5,000 descriptors each when every cluster is watched.
pub const DEFAULT_PER_PROCESS: usize = 500;
/// How long a `simulate` process may take to print `ready`.
const START_WAIT: Duration = Duration::from_secs(600);
/// How long one asked to stop (SIGTERM) may take before SIGKILL.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// What to start.
#[derive(Debug)]
pub struct Launch<'a> {
    /// This binary.
    pub exe: PathBuf,
    /// `up`'s working directory: `sim/<k>/` for each process's files, `logs/` for its log.
    pub dir: &'a Path,
    /// Clusters in all.
    pub clusters: usize,
    /// Processes to spread them over.
    pub processes: usize,
    /// Zones, round-robin by cluster number.
    pub zones: &'a [String],
    /// Namespaces on every cluster.
    pub namespaces: &'a [&'a str],
    /// Objects to create first, by cluster number.
    pub objects: BTreeMap<usize, Vec<Value>>,
    /// Play the Deployment controller.
    pub ready_deployments: bool,
}

/// How many processes serve `clusters`: `given`, or one per [`DEFAULT_PER_PROCESS`]; no
/// more than there are clusters, and none with more than [`simulate::MAX_CLUSTERS`].
pub fn processes(clusters: usize, given: Option<usize>) -> anyhow::Result<usize> {
    let n = given
        .unwrap_or_else(|| clusters.div_ceil(DEFAULT_PER_PROCESS))
        .clamp(1, clusters.max(1));
    let max = usize::from(simulate::MAX_CLUSTERS);
    if clusters.div_ceil(n) > max {
        bail!(
            "--cluster-processes {n}: {clusters} clusters would put {} in one `fleetshard \
             simulate` process, which serves at most {max}; use at least {}",
            clusters.div_ceil(n),
            clusters.div_ceil(max)
        );
    }
    Ok(n)
}

/// The processes' slices, `(first, count)`: consecutive, sizes differing by at most one.
fn slices(clusters: usize, processes: usize) -> Vec<(usize, usize)> {
    let (base, extra) = (clusters / processes, clusters % processes);
    let mut first = 0;
    (0..processes)
        .map(|k| {
            let count = base + usize::from(k < extra);
            let slice = (first, count);
            first += count;
            slice
        })
        .collect()
}

struct Sim {
    child: Child,
    first: usize,
    count: usize,
    out: PathBuf,
    log: PathBuf,
    ready: Option<oneshot::Receiver<()>>,
}

/// The running `simulate` processes.
pub struct Sims {
    procs: Vec<Sim>,
}

impl Sims {
    /// Starts the processes (they start their clusters at once; [`Sims::ready`] waits).
    pub fn spawn(launch: &Launch<'_>) -> anyhow::Result<Sims> {
        let slices = slices(launch.clusters, launch.processes);
        let largest = slices.iter().map(|s| s.1).max().unwrap_or(0);
        // Checked here too (each child checks its own) to fail before starting any.
        limits::require_open_files(
            limits::for_simulated_clusters(largest as u64),
            &format!(
                "a `fleetshard simulate` process of {largest} clusters (--cluster-processes {})",
                launch.processes
            ),
        )?;
        let mut sims = Sims { procs: Vec::new() };
        for (k, (first, count)) in slices.into_iter().enumerate() {
            sims.procs.push(spawn(launch, k, first, count)?);
        }
        Ok(sims)
    }

    /// The processes' ids.
    pub fn pids(&self) -> Vec<u32> {
        self.procs.iter().filter_map(|p| p.child.id()).collect()
    }

    /// Waits until every process printed `ready`, and returns every cluster, in order.
    pub async fn ready(&mut self) -> anyhow::Result<Vec<SimCluster>> {
        let deadline = tokio::time::Instant::now() + START_WAIT;
        let mut clusters = Vec::new();
        for p in &mut self.procs {
            let Some(ready) = p.ready.take() else {
                bail!("simulated clusters from sim-{}: already started", p.first);
            };
            let answered = tokio::time::timeout_at(deadline, ready).await;
            match answered {
                Ok(Ok(())) => {}
                Ok(Err(_)) => {
                    let status = p.child.wait().await.ok();
                    bail!(
                        "`fleetshard simulate` for sim-{} to sim-{} exited ({}) before it was \
                         ready; its log, {}:\n{}",
                        p.first,
                        p.first + p.count - 1,
                        status.map_or_else(|| "unknown status".into(), |s| s.to_string()),
                        p.log.display(),
                        tail(&p.log)
                    );
                }
                Err(_) => bail!(
                    "`fleetshard simulate` for sim-{} was not ready within {} s (see {})",
                    p.first,
                    START_WAIT.as_secs(),
                    p.log.display()
                ),
            }
            clusters.extend(read_clusters(p)?);
        }
        Ok(clusters)
    }

    /// Stops every process: SIGTERM, at most [`STOP_WAIT`] to exit, then SIGKILL.
    pub async fn shutdown(&mut self) {
        for p in &self.procs {
            if let Some(pid) = p.child.id() {
                let _ = super::procs::send(pid, Signal::TERM);
            }
        }
        let deadline = tokio::time::Instant::now() + STOP_WAIT;
        for p in &mut self.procs {
            if tokio::time::timeout_at(deadline, p.child.wait())
                .await
                .is_err()
            {
                let _ = p.child.kill().await;
            }
        }
    }
}

fn spawn(launch: &Launch<'_>, k: usize, first: usize, count: usize) -> anyhow::Result<Sim> {
    let out = launch.dir.join("sim").join(k.to_string());
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let log = launch.dir.join("logs").join(format!("simulate-{k}.log"));
    let log_file =
        std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let mut cmd = Command::new(&launch.exe);
    cmd.arg("simulate")
        .arg("--clusters")
        .arg(count.to_string())
        .arg("--first")
        .arg(first.to_string())
        .arg("--out")
        .arg(&out);
    if !launch.zones.is_empty() {
        cmd.arg("--zones").arg(launch.zones.join(","));
    }
    if !launch.namespaces.is_empty() {
        cmd.arg("--namespaces").arg(launch.namespaces.join(","));
    }
    let mine: BTreeMap<String, &Vec<Value>> = launch
        .objects
        .range(first..first + count)
        .map(|(i, objs)| (format!("sim-{i}"), objs))
        .collect();
    if !mine.is_empty() {
        let path = out.join("objects.json");
        let text = serde_json::to_string(&mine).context("the objects to seed")?;
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        cmd.arg("--objects").arg(path);
    }
    if launch.ready_deployments {
        cmd.arg("--ready-deployments");
    }
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("FLEETSHARD_SIMULATE_") {
            cmd.env_remove(key);
        }
    }
    let mut child = cmd
        // A pipe held open and never written: if `up` dies, SIGKILL included, the child
        // reads its end and stops (`run::STOP_WITH_PARENT_ENV`).
        .stdin(Stdio::piped())
        .env(super::super::run::STOP_WITH_PARENT_ENV, "1")
        .stdout(Stdio::piped())
        .stderr(log_file)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting `{} simulate`", launch.exe.display()))?;
    let stdout = child
        .stdout
        .take()
        .context("the simulate process's stdout")?;
    let (tx, ready) = oneshot::channel();
    // Reads until the pipe closes (nothing but `ready` is expected; the rest is dropped).
    tokio::spawn(async move {
        let mut tx = Some(tx);
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if line == "ready"
                && let Some(tx) = tx.take()
            {
                let _ = tx.send(());
            }
        }
    });
    Ok(Sim {
        child,
        first,
        count,
        out,
        log,
        ready: Some(ready),
    })
}

/// The clusters one process wrote in its `clusters.yaml`, checked to be the slice asked.
fn read_clusters(p: &Sim) -> anyhow::Result<Vec<SimCluster>> {
    let path = p.out.join(simulate::CLUSTERS_FILE);
    let source = path.display().to_string();
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {source}"))?;
    let loaded = fleetshard_manifest::parse_input(&text, &source)
        .map_err(|e| anyhow::anyhow!("{source}: {e}"))?
        .value;
    let mut by_number: BTreeMap<usize, SimCluster> = BTreeMap::new();
    for c in &loaded.fleet.clusters {
        let number = c
            .name
            .strip_prefix("sim-")
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| (p.first..p.first + p.count).contains(n))
            .with_context(|| format!("{source}: unexpected cluster {:?}", c.name))?;
        let creds = loaded.credentials.get(&c.id);
        let token = creds
            .and_then(|k| k.bearer_token.clone())
            .with_context(|| format!("{source}: {}: no bearer token", c.name))?;
        by_number.insert(
            number,
            SimCluster {
                name: c.name.clone(),
                uid: c.id.clone(),
                server: c.server.clone(),
                ca_data: creds.and_then(|k| k.ca_data.clone()),
                token,
                zone: c.zone().map(str::to_owned),
            },
        );
    }
    if by_number.len() != p.count {
        bail!(
            "{source}: {} clusters, where sim-{} to sim-{} were asked",
            by_number.len(),
            p.first,
            p.first + p.count - 1
        );
    }
    Ok(by_number.into_values().collect())
}

/// The last lines of a log, for an error message.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(10)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_process_per_500_clusters_unless_told_and_never_over_1000_each() {
        assert_eq!(processes(24, None).unwrap(), 1);
        assert_eq!(processes(500, None).unwrap(), 1);
        assert_eq!(processes(501, None).unwrap(), 2);
        assert_eq!(processes(10_000, None).unwrap(), 20);
        assert_eq!(processes(10_000, Some(10)).unwrap(), 10);
        assert_eq!(
            processes(3, Some(8)).unwrap(),
            3,
            "no process without a cluster"
        );
        let e = processes(10_000, Some(9)).unwrap_err().to_string();
        assert!(
            e.contains("1112 in one") && e.contains("at least 10"),
            "{e}"
        );
    }

    #[test]
    fn slices_are_consecutive_and_even() {
        assert_eq!(slices(10, 3), vec![(0, 4), (4, 3), (7, 3)]);
        assert_eq!(slices(4, 4), vec![(0, 1), (1, 1), (2, 1), (3, 1)]);
        let s = slices(10_000, 20);
        assert!(s.iter().all(|&(_, n)| n == 500));
        assert_eq!(s.last(), Some(&(9_500, 500)));
    }
}
