//! The replicas `fleetshard up` runs: `fleetshard run` child processes (this very binary,
//! re-executed), and what the dashboard's buttons do to them — kill (SIGKILL), pause
//! (SIGSTOP), resume (SIGCONT), restart (SIGTERM, then the same identity again), add a
//! replica, change the shard count. Dropping [`Replicas`] kills every child still
//! running, so no path out of `up` leaves one behind.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use anyhow::Context as _;
use fleetshard_coord::store::Store;
use fleetshard_replica::dashboard::{Action, Controls, ProcessView};
use futures::future::BoxFuture;
use rustix::process::{Pid, Signal, kill_process};

use super::super::run::ReconcilerArg;

/// How long a replica asked to stop (SIGTERM) may take to hand its shard over.
const STOP_WAIT: Duration = Duration::from_secs(15);

/// How to start one replica.
#[derive(Debug, Clone)]
pub struct Launch {
    /// This binary.
    pub exe: PathBuf,
    /// The store's URL (`sqlite://…`, `etcd://…`).
    pub store: String,
    /// The fleet directory.
    pub fleet: PathBuf,
    /// Where repository caches and logs go.
    pub dir: PathBuf,
    /// `--shards stored:N`.
    pub shards: u32,
    /// Zones, given to replicas round-robin.
    pub zones: Vec<String>,
    /// `--reconciler`.
    pub reconciler: ReconcilerArg,
}

struct Proc {
    identity: String,
    child: Child,
    port: u16,
    paused: bool,
    exited: bool,
}

struct Inner {
    launch: Launch,
    procs: Vec<Proc>,
    next: usize,
}

/// The replica processes.
#[derive(Clone)]
pub struct Replicas {
    inner: Arc<Mutex<Inner>>,
    store: Arc<dyn Store>,
    root: String,
}

impl Replicas {
    /// Starts `count` replicas `r1`, `r2`, ….
    pub fn start(
        launch: Launch,
        count: usize,
        store: Arc<dyn Store>,
        root: String,
    ) -> anyhow::Result<Replicas> {
        let replicas = Replicas {
            inner: Arc::new(Mutex::new(Inner {
                launch,
                procs: Vec::new(),
                next: 1,
            })),
            store,
            root,
        };
        for _ in 0..count {
            replicas.add()?;
        }
        Ok(replicas)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The children's process ids (running or paused).
    pub fn pids(&self) -> Vec<u32> {
        self.lock()
            .procs
            .iter()
            .filter(|p| !p.exited)
            .map(|p| p.child.id())
            .collect()
    }

    /// Starts one more replica; returns its identity.
    pub fn add(&self) -> anyhow::Result<String> {
        let mut inner = self.lock();
        let identity = format!("r{}", inner.next);
        inner.next += 1;
        let zone = zone_of(&inner.launch, &identity);
        let proc = spawn(&inner.launch, &identity, zone.as_deref())?;
        inner.procs.push(proc);
        Ok(identity)
    }

    fn act_now(&self, action: &Action) -> Result<String, String> {
        let named = || {
            action
                .replica
                .clone()
                .ok_or_else(|| format!("{}: which replica? (field \"replica\")", action.action))
        };
        match action.action.as_str() {
            "add" => self
                .add()
                .map(|id| format!("started {id}"))
                .map_err(|e| format!("{e:#}")),
            "kill" => self.signal(&named()?, Signal::KILL, "killed (SIGKILL)"),
            "pause" => self.signal(&named()?, Signal::STOP, "paused (SIGSTOP)"),
            "resume" => self.signal(&named()?, Signal::CONT, "resumed (SIGCONT)"),
            "restart" => self.restart(&named()?),
            other => Err(format!(
                "unknown action {other:?}: kill, pause, resume, restart, add or scale"
            )),
        }
    }

    fn signal(&self, identity: &str, sig: Signal, done: &str) -> Result<String, String> {
        let mut inner = self.lock();
        let p = inner
            .procs
            .iter_mut()
            .rev()
            .find(|p| p.identity == identity && !p.exited)
            .ok_or_else(|| format!("{identity} is not running"))?;
        send(p.child.id(), sig)?;
        match sig {
            Signal::STOP => p.paused = true,
            Signal::CONT => p.paused = false,
            _ => {
                let _ = p.child.wait();
                p.exited = true;
            }
        }
        Ok(format!("{identity} {done}"))
    }

    fn restart(&self, identity: &str) -> Result<String, String> {
        let mut inner = self.lock();
        let launch = inner.launch.clone();
        let p = inner
            .procs
            .iter_mut()
            .rev()
            .find(|p| p.identity == identity)
            .ok_or_else(|| format!("no replica {identity}"))?;
        if !p.exited {
            stop(p);
        }
        let zone = zone_of(&launch, identity);
        let fresh = spawn(&launch, identity, zone.as_deref()).map_err(|e| format!("{e:#}"))?;
        inner.procs.push(fresh);
        Ok(format!("{identity} restarted"))
    }

    /// Stops every replica: SIGTERM (and SIGCONT to paused ones), at most [`STOP_WAIT`]
    /// each to hand over, then SIGKILL.
    pub fn shutdown(&self) {
        let mut inner = self.lock();
        for p in inner.procs.iter_mut().filter(|p| !p.exited) {
            terminate(p);
        }
        let deadline = Instant::now() + STOP_WAIT;
        for p in inner.procs.iter_mut().filter(|p| !p.exited) {
            reap(p, deadline);
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        for p in self.procs.iter_mut().filter(|p| !p.exited) {
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
    }
}

impl Controls for Replicas {
    fn processes(&self) -> Vec<ProcessView> {
        let mut inner = self.lock();
        let mut views: Vec<ProcessView> = Vec::new();
        for p in inner.procs.iter_mut() {
            if !p.exited && matches!(p.child.try_wait(), Ok(Some(_))) {
                p.exited = true;
            }
        }
        // The newest process of each identity.
        for p in inner.procs.iter().rev() {
            if views.iter().any(|v| v.identity == p.identity) {
                continue;
            }
            views.push(ProcessView {
                identity: p.identity.clone(),
                pid: (!p.exited).then(|| p.child.id()),
                state: if p.exited {
                    "exited"
                } else if p.paused {
                    "paused"
                } else {
                    "running"
                }
                .into(),
                url: format!("http://127.0.0.1:{}/dashboard", p.port),
            });
        }
        views.sort_by_key(|v| natural(&v.identity));
        views
    }

    fn act(&self, action: Action) -> BoxFuture<'_, Result<String, String>> {
        Box::pin(async move {
            if action.action == "scale" {
                let n = action
                    .shards
                    .filter(|n| (1..=1000).contains(n))
                    .ok_or("scale: \"shards\" must be a number from 1 to 1000")?;
                let (key, _) =
                    super::super::scale::write_desired(self.store.as_ref(), &self.root, n)
                        .await
                        .map_err(|e| format!("{e:#}"))?;
                return Ok(format!("desired shards: {n} (stored at {key})"));
            }
            let this = self.clone();
            tokio::task::spawn_blocking(move || this.act_now(&action))
                .await
                .map_err(|e| format!("the action failed: {e}"))?
        })
    }
}

fn natural(id: &str) -> (usize, String) {
    (id.len(), id.to_owned())
}

fn zone_of(launch: &Launch, identity: &str) -> Option<String> {
    let n: usize = identity.trim_start_matches('r').parse().ok()?;
    (!launch.zones.is_empty())
        .then(|| launch.zones[n.saturating_sub(1) % launch.zones.len()].clone())
}

/// SIGTERM, at most [`STOP_WAIT`] to exit, then SIGKILL.
fn stop(p: &mut Proc) {
    terminate(p);
    reap(p, Instant::now() + STOP_WAIT);
}

/// SIGTERM (and SIGCONT to a paused process, which could not act on it).
fn terminate(p: &Proc) {
    let _ = send(p.child.id(), Signal::TERM);
    if p.paused {
        let _ = send(p.child.id(), Signal::CONT);
    }
}

/// Waits for `p` to exit until `deadline`, then SIGKILLs it.
fn reap(p: &mut Proc, deadline: Instant) {
    while Instant::now() < deadline {
        if let Ok(Some(_)) = p.child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = p.child.kill();
    let _ = p.child.wait();
    p.exited = true;
}

/// Sends `sig` to `pid` (kill(2): no `kill` executable needed).
pub(super) fn send(pid: u32, sig: Signal) -> Result<(), String> {
    let target = i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| format!("kill {sig:?} {pid}: not a process id"))?;
    kill_process(target, sig).map_err(|e| format!("kill {sig:?} {pid}: {e}"))
}

/// A free port on 127.0.0.1 for the child to bind, outside the kernel's ephemeral range
/// (`fleetshard_kube_sim::ports`): a port taken meanwhile killed replicas at start.
fn free_port() -> anyhow::Result<u16> {
    fleetshard_kube_sim::free_port().context("finding a free port")
}

fn spawn(launch: &Launch, identity: &str, zone: Option<&str>) -> anyhow::Result<Proc> {
    let port = free_port()?;
    let logs = launch.dir.join("logs");
    let log_path = logs.join(format!("{identity}.log"));
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("opening {}", log_path.display()))?;
    let mut cmd = Command::new(&launch.exe);
    cmd.args(["run", "--identity", identity, "--store", &launch.store])
        .arg("--shards")
        .arg(format!("stored:{}", launch.shards))
        .arg("--fleet-dir")
        .arg(&launch.fleet)
        .arg("--repo-cache")
        .arg(launch.dir.join("cache").join(identity))
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        // Each replica's own read-only dashboard, linked from up's page.
        .arg("--dashboard")
        .arg("--audit-log")
        .arg(logs.join(format!("{identity}.audit.jsonl")))
        .arg("--reconciler")
        .arg(match launch.reconciler {
            ReconcilerArg::Gitops => "gitops",
            ReconcilerArg::None => "none",
        })
        // A pipe held open and never written: if `up` dies, SIGKILL included, the child
        // reads its end and stops (`run::STOP_WITH_PARENT_ENV`).
        .stdin(Stdio::piped())
        .env(super::super::run::STOP_WITH_PARENT_ENV, "1")
        .stdout(Stdio::null())
        .stderr(log);
    if let Some(z) = zone {
        cmd.args(["--zone", z]);
    }
    let child = cmd
        .spawn()
        .with_context(|| format!("starting replica {identity} ({})", launch.exe.display()))?;
    Ok(Proc {
        identity: identity.to_owned(),
        child,
        port,
        paused: false,
        exited: false,
    })
}
